#include "client/sdk/producer.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "client/sdk/client.h"
#include "client/sdk/column_reader.h"
#include "client/sdk/internal/call_util.h"
#include "client/sdk/status.h"
#include "client/sdk/types.h"
#include "columnar/column_layout.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/unknown_field_set.h"

namespace chgate::client {
namespace {

// Failures after which the request may be sent again with its key: its outcome is unknown (the
// stream broke) or the server asked for patience.
bool Retryable(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:  // the producer never cancels: the connection did
      return true;
    case absl::StatusCode::kFailedPrecondition:
      // Written on a stream that had just ended (InsertStream refuses it): not sent at all.
      return absl::StartsWith(status.message(), "InsertStream already ended");
    default:
      return false;
  }
}

// The server's refusal of one row, for the send that carried it: the detail's row_index is the
// row's index within the send (0 for a row send; the message keeps the server's words about the
// whole request).
absl::Status ForTheRow(const absl::Status& status, v1::Status detail, uint64_t row_in_send) {
  detail.mutable_value_error()->set_row_index(row_in_send);
  absl::Status out(status.code(), status.message());
  out.SetPayload(kStatusDetailTypeUrl, absl::Cord(detail.SerializeAsString()));
  return out;
}

std::string RandomKeyPrefix() {
  absl::BitGen gen;
  return absl::StrFormat("%016x-", absl::Uniform<uint64_t>(gen));
}

absl::Duration Jittered(absl::Duration d) {
  thread_local absl::BitGen gen;
  return d * absl::Uniform(gen, 0.5, 1.0);
}

}  // namespace

namespace {

// One send of a batch: a row (Send), or the rows of a block (SendBlock).
struct ProducerSend {
  uint64_t rows = 1;
  AckCallback done;
};

// The parsed form of a type text, from this thread's cache of the texts it has seen (an
// application sends the same few types again and again; a parse costs microseconds).
absl::StatusOr<const ColumnType*> ParsedType(const std::string& text) {
  thread_local absl::flat_hash_map<std::string, ColumnType> cache;
  if (auto it = cache.find(text); it != cache.end()) return &it->second;
  absl::StatusOr<ColumnType> parsed = ParseColumnType(text);
  if (!parsed.ok()) return parsed.status();
  if (cache.size() >= 256) cache.clear();  // a bound, for applications with endless types
  return &cache.emplace(text, *std::move(parsed)).first->second;
}

// The problem with `block` as a send to a table with `columns`, OK when there is none: no rows,
// columns other than the table's, a column without its type, or a layout its type does not
// have. Checked before gathering, so a malformed block never fails the sends beside it.
absl::Status CheckBlock(const std::vector<std::string>& columns, const v1::Block& block) {
  if (block.rows() == 0) return absl::InvalidArgumentError("the block has no rows");
  if (!columns.empty() && static_cast<size_t>(block.columns_size()) != columns.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the block has ", block.columns_size(),
                                                   " columns, the table's sends ", columns.size()));
  }
  for (int i = 0; i < block.columns_size(); ++i) {
    const v1::Column& column = block.columns(i);
    if (!columns.empty() && !column.name().empty() &&
        column.name() != columns[static_cast<size_t>(i)]) {
      return absl::InvalidArgumentError(absl::StrCat("block column ", i, " is '", column.name(),
                                                     "', the table's sends have '",
                                                     columns[static_cast<size_t>(i)], "'"));
    }
    absl::StatusOr<const ColumnType*> type = ParsedType(column.type());
    absl::Status problem = type.ok() ? ValidateColumn(column, **type, block.rows()) : type.status();
    if (!problem.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("block column ", i, " '", column.name(), "': ", problem.message()));
    }
  }
  return absl::OkStatus();
}

// Whether `block` can join a request gathered from `gathered`: the same columns and types.
bool SameLayout(const v1::Block& gathered, const v1::Block& block) {
  if (gathered.columns_size() != block.columns_size()) return false;
  for (int i = 0; i < block.columns_size(); ++i) {
    if (gathered.columns(i).name() != block.columns(i).name() ||
        gathered.columns(i).type() != block.columns(i).type()) {
      return false;
    }
  }
  return true;
}

// Gives `out` the columns (names and types) of `layout`, with no rows.
void StartBlock(const v1::Block& layout, v1::Block* out) {
  for (const v1::Column& c : layout.columns()) {
    v1::Column* column = out->add_columns();
    column->set_name(c.name());
    column->set_type(c.type());
  }
}

// Appends rows [begin, end) of `src` to `dst` (same columns).
void AppendBlockRows(const v1::Block& src, uint64_t begin, uint64_t end, v1::Block* dst) {
  for (int i = 0; i < src.columns_size(); ++i) {
    columnar::AppendRows(src.columns(i), src.rows(), begin, end, dst->rows(),
                         dst->mutable_columns(i));
  }
  dst->set_rows(dst->rows() + (end - begin));
}

// InsertRequest's `rows` field number: a row batch's RowSet goes into the request already
// encoded, as an unknown field of that number, which serializes to exactly the bytes of the
// `rows` field (see ProducerBatch::row_bytes).
constexpr int kRowsField = 3;

// Appends `row` to `out` as one element of RowSet.rows (field 1: tag, length, message).
void AppendEncodedRow(const v1::Row& row, std::string* out) {
  const size_t size = row.ByteSizeLong();
  uint8_t head[1 + 10];
  head[0] = 0x0a;  // field 1, length-delimited
  uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(size, head + 1);
  out->append(reinterpret_cast<const char*>(head), static_cast<size_t>(end - head));
  const size_t at = out->size();
  out->resize(at + size);
  row.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out->data() + at));
}

// The encoded RowSet a row batch's request carries (empty when it has none yet).
const std::string& EncodedRows(const v1::InsertRequest& request) {
  const google::protobuf::UnknownFieldSet& unknown =
      request.GetReflection()->GetUnknownFields(request);
  for (int i = 0; i < unknown.field_count(); ++i) {
    if (unknown.field(i).number() == kRowsField &&
        unknown.field(i).type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      return unknown.field(i).length_delimited();
    }
  }
  static const std::string* const kNone = new std::string();
  return *kNone;
}

// Each row's bytes in an encoded RowSet (AppendEncodedRow's output), in order.
std::vector<std::string_view> EncodedRowRanges(std::string_view rows) {
  std::vector<std::string_view> out;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(rows.data()),
                                            static_cast<int>(rows.size()));
  uint32_t size = 0;
  while (in.CurrentPosition() < static_cast<int>(rows.size())) {
    const int begin = in.CurrentPosition();
    if (in.ReadTag() == 0 || !in.ReadVarint32(&size) || !in.Skip(static_cast<int>(size))) break;
    out.push_back(
        rows.substr(static_cast<size_t>(begin), static_cast<size_t>(in.CurrentPosition() - begin)));
  }
  return out;
}

}  // namespace

// One request and the sends it carries, from the first row gathered to the outcome: rows
// (RowSet) or, for SendBlock, one columnar Block of every send's rows.
struct ProducerBatch {
  size_t table = 0;
  bool columnar = false;
  uint64_t seq = 0;  // creation order, for Flush
  // Shared with the stream that writes it (InsertStream::Send of a shared_ptr: no copy per
  // attempt); kept for a resend.
  std::shared_ptr<v1::InsertRequest> request = std::make_shared<v1::InsertRequest>();
  std::vector<ProducerSend> sends;  // in row order
  // A row batch's rows, encoded as they arrive (each send's row serialized on the sending thread
  // and its message freed there, not a thousand messages kept and freed together after the
  // ack). Moved into the request when it is first written.
  std::string row_bytes;
  uint64_t rows = 0;  // over all sends
  size_t bytes = 0;
  absl::Time first_row;
  absl::Time first_attempt = absl::InfiniteFuture();
  absl::Time not_before = absl::InfinitePast();
  int attempts = 0;
};

using BatchPtr = std::shared_ptr<ProducerBatch>;

// The Producer's state: the batches being gathered per table, the batches ready to be written
// (full, lingered, flushed, or waiting for a resend), and the worker thread that writes them on
// one InsertStream. Lock order: mu_ is never held while a callback runs or a stream call is made.
class Producer::Impl {
 public:
  Impl(Client* client, ProducerOptions options) : client_(client), options_(std::move(options)) {
    key_prefix_ = options_.key_prefix.empty() ? RandomKeyPrefix() : options_.key_prefix;
    worker_ = std::thread([this] { WorkerLoop(); });
  }

  ~Impl() {
    (void)Close();
    if (worker_.joinable()) worker_.join();
  }

  ProducerTable* Table(Producer* owner, std::string_view table, std::vector<std::string> columns) {
    absl::MutexLock lock(&mu_);
    for (const auto& t : tables_) {
      if (t->table() == table && t->columns() == columns) return t.get();
    }
    tables_.push_back(std::unique_ptr<ProducerTable>(
        new ProducerTable(owner, std::string(table), std::move(columns), tables_.size())));
    gathering_.resize(2 * tables_.size());  // rows and blocks
    return tables_.back().get();
  }

  void Send(size_t table, const v1::Row& row, AckCallback done) {
    thread_local std::string encoded;
    encoded.clear();
    AppendEncodedRow(row, &encoded);
    absl::Status refused;
    {
      absl::MutexLock lock(&mu_);
      refused = AwaitRoomLocked(1);
      if (refused.ok()) {
        GatherLocked(table, encoded, std::move(done));
        return;
      }
      ++stats_.failed_sends;
      if (first_error_.ok()) first_error_ = refused;
    }
    done(std::move(refused));
  }

  void SendBlock(size_t table, const std::vector<std::string>& columns, v1::Block block,
                 AckCallback done) {
    const uint64_t rows = block.rows();
    absl::Status refused = CheckBlock(columns, block);
    if (refused.ok() && rows > options_.max_pending_rows) {
      refused = absl::InvalidArgumentError(absl::StrCat("the block's ", rows,
                                                        " rows are more than max_pending_rows (",
                                                        options_.max_pending_rows, ")"));
    }
    if (refused.ok()) {
      const size_t bytes = block.ByteSizeLong();
      absl::MutexLock lock(&mu_);
      refused = AwaitRoomLocked(rows);
      if (refused.ok()) {
        GatherBlockLocked(table, block, ProducerSend{rows, std::move(done)}, bytes);
        return;
      }
    }
    {
      absl::MutexLock lock(&mu_);
      ++stats_.failed_sends;
      if (first_error_.ok()) first_error_ = refused;
    }
    done(std::move(refused));
  }

  void Flush() {
    absl::MutexLock lock(&mu_);
    const uint64_t upto = next_seq_ - 1;
    flush_requested_ = true;
    work_cv_.Signal();
    auto flushed = [this, upto]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return unsettled_.empty() || *unsettled_.begin() > upto;
    };
    mu_.Await(absl::Condition(&flushed));
  }

  absl::Status Close() {
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
      work_cv_.Signal();
      auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return unsettled_.empty() && worker_done_;
      };
      mu_.Await(absl::Condition(&settled));
    }
    if (worker_.joinable()) worker_.join();
    absl::MutexLock lock(&mu_);
    return first_error_;
  }

  ProducerStats stats() const {
    absl::MutexLock lock(&mu_);
    ProducerStats out = stats_;
    out.pending_rows = pending_rows_;
    return out;
  }

 private:
  // Room for `rows` more unsettled rows: waits for it (block_when_full) or refuses; refuses
  // after Close.
  absl::Status AwaitRoomLocked(uint64_t rows) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto room = [this, rows]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return closing_ || pending_rows_ + rows <= options_.max_pending_rows;
    };
    if (!room()) {
      if (!options_.block_when_full) {
        return absl::ResourceExhaustedError(absl::StrCat("the producer holds ", pending_rows_,
                                                         " unsettled rows, its max_pending_rows"));
      }
      mu_.Await(absl::Condition(&room));
    }
    if (closing_) return absl::FailedPreconditionError("the producer is closed");
    return absl::OkStatus();
  }

  // The batch being gathered for `table`'s row sends or block sends, made when there is none.
  BatchPtr& GatheringLocked(size_t table, bool columnar) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    BatchPtr& batch = gathering_[2 * table + (columnar ? 1 : 0)];
    if (batch == nullptr) {
      batch = NewBatchLocked(table);
      batch->columnar = columnar;
      batch->first_row = absl::Now();
      work_cv_.Signal();  // the writer learns the batch's linger deadline
    }
    return batch;
  }

  // Counts a gathered send; a full batch goes to the writer.
  void GatheredLocked(BatchPtr& batch, ProducerSend send, size_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    pending_rows_ += send.rows;
    batch->rows += send.rows;
    batch->bytes += bytes;
    batch->sends.push_back(std::move(send));
    ++stats_.sends;
    if (batch->rows >= options_.batch_rows || batch->bytes >= options_.batch_bytes) {
      ready_.push_back(std::move(batch));
      batch = nullptr;
      work_cv_.Signal();
    }
  }

  // Adds an encoded row (AppendEncodedRow) to its table's batch.
  void GatherLocked(size_t table, std::string_view encoded_row, AckCallback done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    BatchPtr& batch = GatheringLocked(table, false);
    batch->row_bytes.append(encoded_row);
    GatheredLocked(batch, ProducerSend{1, std::move(done)}, encoded_row.size());
  }

  // Adds a block's rows to its table's columnar batch; a block with other columns or types than
  // the batch's starts a new one (the gathered one goes to the writer).
  void GatherBlockLocked(size_t table, const v1::Block& block, ProducerSend send, size_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    BatchPtr* batch = &GatheringLocked(table, true);
    if ((*batch)->rows > 0 && !SameLayout((*batch)->request->block(), block)) {
      ready_.push_back(std::move(*batch));
      *batch = nullptr;
      batch = &GatheringLocked(table, true);
    }
    v1::Block* gathered = (*batch)->request->mutable_block();
    if (gathered->columns_size() == 0) StartBlock(block, gathered);
    AppendBlockRows(block, 0, block.rows(), gathered);
    GatheredLocked(*batch, std::move(send), bytes);
  }

  BatchPtr NewBatchLocked(size_t table) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto batch = std::make_shared<ProducerBatch>();
    batch->table = table;
    batch->seq = next_seq_++;
    unsettled_.insert(batch->seq);
    const ProducerTable& t = *tables_[table];
    batch->request->set_table(t.table());
    for (const std::string& c : t.columns()) batch->request->add_columns(c);
    batch->request->set_idempotency_key(absl::StrCat(key_prefix_, next_key_++));
    batch->request->set_ack_mode(options_.ack_mode);
    return batch;
  }

  // The writer: waits for batches that are due, writes them, and ends once closed and settled.
  void WorkerLoop() {
    std::vector<BatchPtr> due;
    while (NextDue(&due)) {
      for (BatchPtr& batch : due) Write(std::move(batch));
      due.clear();
    }
    if (stream_ != nullptr) {
      (void)stream_->Close();
      stream_.reset();
    }
    absl::MutexLock lock(&mu_);
    worker_done_ = true;
  }

  // Fills `due` with the batches to write now; false when the producer is closed and every
  // batch is settled.
  bool NextDue(std::vector<BatchPtr>* due) {
    absl::MutexLock lock(&mu_);
    while (true) {
      const absl::Time now = absl::Now();
      absl::Time wake = absl::InfiniteFuture();
      const bool all = flush_requested_ || closing_;
      flush_requested_ = false;
      for (BatchPtr& batch : gathering_) {
        if (batch == nullptr) continue;
        if (all || batch->first_row + options_.linger <= now) {
          ready_.push_back(std::move(batch));
          batch = nullptr;
        } else {
          wake = std::min(wake, batch->first_row + options_.linger);
        }
      }
      for (auto it = ready_.begin(); it != ready_.end();) {
        if ((*it)->not_before <= now) {
          due->push_back(std::move(*it));
          it = ready_.erase(it);
        } else {
          wake = std::min(wake, (*it)->not_before);
          ++it;
        }
      }
      if (!due->empty()) return true;
      if (closing_ && unsettled_.empty()) return false;
      work_cv_.WaitWithDeadline(&mu_, wake);
    }
  }

  // Writes one batch on the stream (a new one when the last ended); the ack settles it.
  void Write(BatchPtr batch) {
    if (!batch->columnar && !batch->row_bytes.empty()) {
      // First written: the rows become the request's `rows` field, already encoded.
      batch->request->GetReflection()
          ->MutableUnknownFields(batch->request.get())
          ->AddLengthDelimited(kRowsField)
          ->swap(batch->row_bytes);
    }
    if (stream_ == nullptr || stream_->ended()) {
      if (stream_ != nullptr) (void)stream_->Close();
      stream_ = client_->OpenInsertStream({.timeout = absl::InfiniteDuration()});
    }
    {
      absl::MutexLock lock(&mu_);
      if (batch->attempts++ == 0) {
        batch->first_attempt = absl::Now();
        ++stats_.requests;
      } else {
        ++stats_.resent_requests;
      }
    }
    stream_->Send(batch->request, [this, batch](absl::StatusOr<InsertResult> result) {
      OnOutcome(batch, std::move(result));
    });
  }

  // A request's outcome (on a gRPC thread, or the writer's when the stream refused it).
  void OnOutcome(const BatchPtr& batch, absl::StatusOr<InsertResult> result) {
    if (result.ok()) {
      Settle(*batch, result);
      return;
    }
    const absl::Status& status = result.status();
    if (status.code() == absl::StatusCode::kInvalidArgument) {
      std::optional<v1::Status> detail = GetStatusDetail(status);
      if (detail.has_value() && detail->value_error().has_row_index() &&
          detail->value_error().row_index() < batch->rows) {
        const uint64_t bad = detail->value_error().row_index();
        Isolate(*batch, bad, status, *std::move(detail));
        return;
      }
    }
    if (Retryable(status) && absl::Now() - batch->first_attempt < options_.retry_timeout) {
      const absl::Duration backoff =
          Jittered(std::min(options_.max_backoff,
                            options_.initial_backoff * (1 << std::min(batch->attempts - 1, 16))));
      batch->not_before = absl::Now() + backoff;
      absl::MutexLock lock(&mu_);
      ready_.push_back(batch);
      work_cv_.Signal();
      return;
    }
    Settle(*batch, result);
  }

  // Fails the send that carried row `bad` of a refused request alone, with the server's error,
  // and queues the other sends' rows as a new request.
  void Isolate(ProducerBatch& batch, uint64_t bad, const absl::Status& status, v1::Status detail) {
    size_t culprit = 0;
    uint64_t first = 0;
    while (first + batch.sends[culprit].rows <= bad) first += batch.sends[culprit++].rows;
    const uint64_t culprit_rows = batch.sends[culprit].rows;
    absl::Status error = ForTheRow(status, std::move(detail), bad - first);
    AckCallback failed = std::move(batch.sends[culprit].done);
    failed(error);
    absl::MutexLock lock(&mu_);
    pending_rows_ -= culprit_rows;
    ++stats_.isolated_rows;
    ++stats_.failed_sends;
    if (first_error_.ok()) first_error_ = std::move(error);
    if (batch.sends.size() > 1) {
      BatchPtr rest = NewBatchLocked(batch.table);
      unsettled_.erase(unsettled_.find(rest->seq));
      rest->seq = batch.seq;  // Flush waits for it as for the batch it came from
      unsettled_.insert(rest->seq);
      rest->columnar = batch.columnar;
      if (batch.columnar) StartBlock(batch.request->block(), rest->request->mutable_block());
      // A row send is one row: its bytes are the send's range of the encoded RowSet.
      const std::vector<std::string_view> row_ranges =
          batch.columnar ? std::vector<std::string_view>()
                         : EncodedRowRanges(EncodedRows(*batch.request));
      uint64_t row = 0;
      for (size_t i = 0; i < batch.sends.size(); ++i) {
        const uint64_t n = batch.sends[i].rows;
        if (i != culprit) {
          if (batch.columnar) {
            AppendBlockRows(batch.request->block(), row, row + n, rest->request->mutable_block());
          } else {
            rest->row_bytes.append(row_ranges[i]);
          }
          rest->rows += n;
          rest->sends.push_back(std::move(batch.sends[i]));
        }
        row += n;
      }
      rest->bytes = batch.bytes;
      rest->first_row = batch.first_row;
      ready_.push_front(std::move(rest));
    }
    unsettled_.erase(unsettled_.find(batch.seq));
    work_cv_.Signal();
  }

  // Gives every send of `batch` its outcome, then releases its rows.
  void Settle(ProducerBatch& batch, const absl::StatusOr<InsertResult>& outcome) {
    for (ProducerSend& send : batch.sends) send.done(outcome);
    absl::MutexLock lock(&mu_);
    pending_rows_ -= batch.rows;
    if (!outcome.ok()) {
      stats_.failed_sends += batch.sends.size();
      if (first_error_.ok()) first_error_ = outcome.status();
    }
    unsettled_.erase(unsettled_.find(batch.seq));
    work_cv_.Signal();
  }

  Client* const client_;
  const ProducerOptions options_;
  std::string key_prefix_;
  std::thread worker_;
  std::unique_ptr<InsertStream> stream_;  // the worker's

  mutable absl::Mutex mu_;
  absl::CondVar work_cv_;  // the worker waits on it
  std::vector<std::unique_ptr<ProducerTable>> tables_ ABSL_GUARDED_BY(mu_);
  // Per table, its row sends' batch (2 x index) and its block sends' (2 x index + 1); null:
  // none.
  std::vector<BatchPtr> gathering_ ABSL_GUARDED_BY(mu_);
  std::deque<BatchPtr> ready_ ABSL_GUARDED_BY(mu_);
  std::multiset<uint64_t> unsettled_ ABSL_GUARDED_BY(mu_);  // seq of every unsettled batch
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_key_ ABSL_GUARDED_BY(mu_) = 1;
  size_t pending_rows_ ABSL_GUARDED_BY(mu_) = 0;
  bool flush_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool worker_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  ProducerStats stats_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<Producer>> Producer::Create(Client* client,
                                                           ProducerOptions options) {
  if (client == nullptr) return absl::InvalidArgumentError("the producer needs a client");
  if (options.batch_rows == 0 || options.batch_bytes == 0 || options.max_pending_rows == 0) {
    return absl::InvalidArgumentError(
        "batch_rows, batch_bytes and max_pending_rows must be positive");
  }
  if (options.batch_rows > options.max_pending_rows) {
    return absl::InvalidArgumentError(absl::StrCat("batch_rows (", options.batch_rows,
                                                   ") is above max_pending_rows (",
                                                   options.max_pending_rows, ")"));
  }
  if (options.linger < absl::ZeroDuration() || options.retry_timeout < absl::ZeroDuration() ||
      options.initial_backoff <= absl::ZeroDuration() ||
      options.max_backoff < options.initial_backoff) {
    return absl::InvalidArgumentError(
        "linger and retry_timeout must not be negative, and 0 < initial_backoff <= max_backoff");
  }
  return std::unique_ptr<Producer>(
      new Producer(std::make_unique<Impl>(client, std::move(options))));
}

Producer::Producer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Producer::~Producer() = default;

ProducerTable* Producer::Table(std::string_view table, std::vector<std::string> columns) {
  return impl_->Table(this, table, std::move(columns));
}

void Producer::Send(size_t table, v1::Row row, AckCallback done) {
  impl_->Send(table, row, std::move(done));
}

void Producer::Flush() { impl_->Flush(); }

absl::Status Producer::Close() { return impl_->Close(); }

ProducerStats Producer::stats() const { return impl_->stats(); }

void ProducerTable::Send(v1::Row row, AckCallback done) {
  producer_->Send(index_, std::move(row), std::move(done));
}

void ProducerTable::SendBlock(v1::Block block, AckCallback done) {
  producer_->impl_->SendBlock(index_, columns_, std::move(block), std::move(done));
}

std::future<absl::StatusOr<InsertResult>> ProducerTable::SendBlock(v1::Block block) {
  return internal::FutureOf(
      [&](AckCallback done) { SendBlock(std::move(block), std::move(done)); });
}

std::future<absl::StatusOr<InsertResult>> ProducerTable::Send(v1::Row row) {
  return internal::FutureOf([&](AckCallback done) { Send(std::move(row), std::move(done)); });
}

}  // namespace chgate::client
