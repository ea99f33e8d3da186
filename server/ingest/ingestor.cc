#include "server/ingest/ingestor.h"

#include <fcntl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "server/clickhouse/protocol/error_codes.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/common/failpoint.h"
#include "server/common/random_id.h"
#include "server/ingest/dead_letter.h"
#include "server/ingest/spool_record.h"
#include "server/log/log.h"
#include "text/identifier.h"
#include "text/status_macros.h"

namespace chgate::ingest {
namespace {

constexpr log::Component kLog("ingest");

class RealClockImpl final : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
  void SleepUntil(absl::Time t) override {
    absl::Duration d = t - absl::Now();
    if (d > absl::ZeroDuration()) absl::SleepFor(d);
  }
};

// The watchdog entry of the worker or flush thread running this code (null elsewhere).
thread_local std::atomic<int64_t>* tls_progress = nullptr;

// The `code` field of log lines: the ClickHouse error code, or the status code's name.

std::string ErrorCodeLabel(const absl::Status& status) {
  if (auto code = clickhouse::ClickHouseCode(status)) return absl::StrCat(*code);
  return absl::AsciiStrToUpper(absl::StatusCodeToString(status.code()));
}

// The ack mode of a batch's rows: committed (callers wait for the commit), accepted (already
// acknowledged), or mixed.
const char* BatchAckMode(uint64_t rows, uint64_t waiting_rows) {
  if (waiting_rows == rows) return "committed";
  return waiting_rows == 0 ? "accepted" : "mixed";
}

}  // namespace

Clock* RealClock() {
  static RealClockImpl* clock = new RealClockImpl();
  return clock;
}

struct Ingestor::Pending {
  std::string idempotency_key;  // scoped by identity and table (ClaimKey), when there is one
  TableId table;
  std::string key;    // batch key
  std::string label;  // "db.table" for metrics
  std::vector<std::string> columns;
  std::shared_ptr<const TableSchema> schema;
  std::unique_ptr<clickhouse::Block> staged;
  uint64_t rows = 0;
  uint64_t bytes = 0;
  absl::Time received;
  absl::Time deadline;
  AckMode ack = AckMode::kCommitted;
  std::optional<text::TraceContext> trace;
  MemoryBudget::Reservation reservation;  // until the rows join a batch
  std::function<void()> on_admitted;
  std::function<void(Result)> on_done;
  bool done = false;
};

// The traces of a batch's requests: the INSERT joins the first; the others are named in the
// batch's log lines (up to kMaxLinked distinct trace ids).
struct Ingestor::BatchTraces {
  static constexpr size_t kMaxLinked = 16;
  std::optional<text::TraceContext> first;
  // Trace ids (high, low) of the other traced requests, told apart by value; formatted only when
  // a line is logged.
  std::vector<std::pair<uint64_t, uint64_t>> linked;
  uint64_t linked_dropped = 0;  // beyond kMaxLinked

  void Add(const text::TraceContext& t) {
    if (!first.has_value()) {
      first = t;
      return;
    }
    const std::pair<uint64_t, uint64_t> id{t.trace_id_high, t.trace_id_low};
    if (id == std::pair{first->trace_id_high, first->trace_id_low} ||
        std::find(linked.begin(), linked.end(), id) != linked.end()) {
      return;
    }
    if (linked.size() < kMaxLinked) {
      linked.push_back(id);
    } else {
      ++linked_dropped;
    }
  }
  // Log fields: trace_id (the INSERT's) and linked_trace_ids.
  void AppendFields(std::vector<log::Field>* fields) const {
    if (!first.has_value()) return;
    fields->emplace_back("trace_id", first->TraceIdHex());
    if (!linked.empty()) {
      std::string ids;
      for (const auto& [high, low] : linked) {
        if (!ids.empty()) ids.push_back(',');
        ids += text::TraceContext{.trace_id_high = high, .trace_id_low = low}.TraceIdHex();
      }
      if (linked_dropped > 0) absl::StrAppend(&ids, ",+", linked_dropped, " more");
      fields->emplace_back("linked_trace_ids", ids);
    }
  }
};

// A persisted request's converted block, kept after its sync so its INSERT need not read it back
// (IngestOptions::spool_cache_bytes); gives its bytes back to the cache and the budget when the
// last entry holding it goes.
struct Ingestor::CachedBlock {
  CachedBlock(Ingestor* owner, std::unique_ptr<clickhouse::Block> b, uint64_t n)
      : ingestor(owner), block(std::move(b)), bytes(n) {}
  ~CachedBlock() {
    ingestor->spool_cache_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    ingestor->budget_.RemoveBuffered(bytes);
  }
  CachedBlock(const CachedBlock&) = delete;
  CachedBlock& operator=(const CachedBlock&) = delete;
  Ingestor* ingestor;
  std::unique_ptr<clickhouse::Block> block;
  uint64_t bytes;
};

// A persisted request's record in the spool, queued for its table's spooled batch.
struct Ingestor::SpoolEntry {
  uint64_t lsn = 0;
  uint64_t rows = 0;
  uint64_t bytes = 0;  // of the record's payload
  absl::Time appended;
  std::shared_ptr<const CachedBlock> cached;  // the block itself, when kept in memory
};

// The records of one spooled INSERT, and its intent once written (0: not yet).
struct Ingestor::SpooledFlush {
  std::vector<SpoolEntry> entries;
  uint64_t intent_lsn = 0;
  // Records of a replayed intent that could not be read back (then nothing is sent).
  std::vector<uint64_t> unreadable;
};

struct Ingestor::Batch {
  std::string key;
  std::string label;
  TableId table;
  std::shared_ptr<const TableSchema> schema;
  std::unique_ptr<clickhouse::Block> block;
  std::vector<std::shared_ptr<Pending>> pendings;  // committed-ack requests in `block`
  BatchTraces traces;                              // of every request in `block`
  uint64_t rows = 0;
  uint64_t bytes = 0;
  uint64_t table_bytes = 0;  // buffered + in flight, for the per-table budget
  absl::Time oldest = absl::InfiniteFuture();
  absl::Time earliest_deadline = absl::InfiniteFuture();
  bool flushing = false;
  absl::Duration delay = absl::ZeroDuration();  // adapted flush delay; 0: the configured one
  int calm_flushes = 0;                         // in a row without pressure, while adapted
  // A spooled batch (persisted requests) holds no rows in memory, only where they are in the
  // spool: `rows` and `bytes` count its queue, and `block`/`pendings`/`schema` stay empty.
  bool spooled = false;
  // When the table's deduplication window is to be looked at next (spooled batches; touched only
  // by the batch's one flush in flight).
  absl::Time dedup_check_at = absl::InfinitePast();
  std::vector<std::string> columns;    // the INSERT's column list (as the requests gave it)
  std::deque<SpoolEntry> spool_queue;  // in LSN order
  std::deque<SpooledFlush> replays;    // intents found by Recover, sent first, as they were
};

namespace {
std::unique_ptr<clickhouse::Block> EmptyBlock(const TableSchema& schema) {
  auto block = std::make_unique<clickhouse::Block>();
  for (size_t i = 0; i < schema.names.size(); ++i) {
    block->AddColumn(schema.names[i], schema.prototypes[i]->CloneEmpty());
  }
  return block;
}

// Batches of persisted requests are apart from the others: their blocks are made only of
// spooled records, so that a replay can make them again.
constexpr char kSpooledKeySuffix[] = "\x1fspooled";

// Keys built from names: every part length-prefixed, so that no two different (database, table,
// columns) share one (`db`.`b.c` and `db.b`.`c`, or a column `a,b` and columns a and b).
void AppendKeyPart(std::string_view part, std::string* key) {
  absl::StrAppend(key, part.size(), ":", absl::string_view(part.data(), part.size()));
}

std::string TableColumnsKey(const TableId& table, const std::vector<std::string>& columns) {
  std::string key;
  AppendKeyPart(table.database, &key);
  AppendKeyPart(table.table, &key);
  key.push_back('|');
  for (const std::string& c : columns) AppendKeyPart(c, &key);
  return key;
}

std::string BatchKey(const TableId& table, const std::vector<std::string>& columns) {
  return TableColumnsKey(table, columns);
}

// How long a header refresh may take while an older header is at hand, and how long that one
// is used after a refresh failed for a connection problem before the next try.
constexpr absl::Duration kSchemaRefreshTimeout = absl::Seconds(5);
// How long after its commit a spooled batch may still be sent again: a crash, the restart
// (with the kubelet's back-off) and the replay. A Replicated table's deduplication window should
// cover at least this much of its INSERTs.
constexpr absl::Duration kReplayHorizon = absl::Minutes(5);
// How often a table's deduplication window is looked at again (after a failed look: sooner).
constexpr absl::Duration kDedupCheckInterval = absl::Hours(1);
constexpr absl::Duration kDedupRetryInterval = absl::Minutes(10);

std::string SchemaKey(const TableId& table, const std::vector<std::string>& columns) {
  return TableColumnsKey(table, columns);
}

// Whether a failed insert says the table is not what its cached header described.
bool IsTableChangeError(const absl::Status& status) {
  namespace ec = clickhouse::error_code;
  if (std::optional<int32_t> code = clickhouse::ClickHouseCode(status)) {
    switch (*code) {
      case ec::kUnknownTable:
      case ec::kUnknownDatabase:
      case ec::kTableIsDropped:
      case ec::kNoSuchColumnInTable:
      case ec::kThereIsNoColumn:
      case ec::kNotFoundColumnInBlock:
      case ec::kTypeMismatch:
      case ec::kIllegalColumn:
      case ec::kIncorrectNumberOfColumns:
      case ec::kNumberOfColumnsDoesntMatch:
      case ec::kCannotConvertType:
      case ec::kUnknownIdentifier:
        return true;
      default:
        return false;
    }
  }
  // chgate's own comparison of the block with the header the server sent for the INSERT.
  return status.code() == absl::StatusCode::kInvalidArgument ||
         status.code() == absl::StatusCode::kNotFound;
}

// Whether ClickHouse (or chgate's own check against the INSERT's header) refused the rows
// themselves: this block can never be inserted into the table as it is now. For spooled
// batches these are the only errors that end in the dead-letter directory; everything else
// (space, ZooKeeper, permissions, a missing table, quotas, read-only replicas, timeouts) is
// something the server or its operator can fix, and is retried without end.
bool IsDataError(const absl::Status& status) {
  namespace ec = clickhouse::error_code;
  if (std::optional<int32_t> code = clickhouse::ClickHouseCode(status)) {
    switch (*code) {
      case ec::kCannotParseText:
      case ec::kCannotParseEscapeSequence:
      case ec::kCannotParseQuotedString:
      case ec::kCannotParseInputAssertionFailed:
      case ec::kCannotParseDate:
      case ec::kCannotParseDatetime:
      case ec::kCannotParseNumber:
      case ec::kCannotReadArrayFromText:
      case ec::kIncorrectData:
      case ec::kSizeOfFixedStringDoesntMatch:
      case ec::kSizesOfArraysDoesntMatch:
      case ec::kArgumentOutOfBound:
      case ec::kValueIsOutOfRangeOfDataType:
      case ec::kDecimalOverflow:
      case ec::kCannotInsertNullInOrdinaryColumn:
      case ec::kViolatedConstraint:
      // The table's columns are no longer the block's.
      case ec::kIncorrectNumberOfColumns:
      case ec::kThereIsNoColumn:
      case ec::kNotFoundColumnInBlock:
      case ec::kDuplicateColumn:
      case ec::kNoSuchColumnInTable:
      case ec::kNumberOfColumnsDoesntMatch:
      case ec::kTypeMismatch:
      case ec::kIllegalColumn:
      case ec::kCannotConvertType:
        return true;
      default:
        return false;
    }
  }
  // chgate's comparison of the block with the header the server sent for the INSERT.
  return status.code() == absl::StatusCode::kInvalidArgument;
}

// `block` laid out as `schema` (the table's INSERT header after a change), where that loses
// nothing: each value of a column whose type changed must convert to the new type and print
// back as the same text (UInt16 -> UInt32, T -> Nullable(T), Float32 -> Float64 ...); a column
// the header no longer has, any value that would change, or a header with no type changed makes
// it nullopt.
std::optional<clickhouse::Block> ConvertLosslessly(const clickhouse::Block& block,
                                                   const TableSchema& schema,
                                                   bool* same_header = nullptr) {
  if (same_header != nullptr) *same_header = false;
  if (schema.names.size() != block.column_count()) return std::nullopt;
  clickhouse::Block out;
  std::string text, back;
  bool changed = false;
  for (size_t c = 0; c < block.column_count(); ++c) {
    const clickhouse::NamedColumn& from = block.column(c);
    if (schema.names[c] != from.name) return std::nullopt;
    const clickhouse::ColumnPtr& to_type = schema.prototypes[c];
    if (to_type->type_name() == from.column->type_name()) {
      out.AddColumn(from.name, from.column);
      continue;
    }
    clickhouse::ColumnPtr to = to_type->CloneEmpty();
    for (size_t row = 0; row < from.column->Size(); ++row) {
      text.clear();
      from.column->FormatValue(row, false, &text);
      const bool null = text == "\\N" && from.column->kind() == clickhouse::ColumnKind::kNullable;
      const std::string_view view = text;
      if (!AppendValue(null ? NullValue() : TextValue(&view), *to, ConvertOptions{}).ok()) {
        return std::nullopt;
      }
      back.clear();
      to->FormatValue(row, false, &back);
      if (back != text) return std::nullopt;
    }
    out.AddColumn(from.name, std::move(to));
    changed = true;
  }
  // The same header: the refusal was about the rows, and sending them again would not help.
  if (!changed) {
    if (same_header != nullptr) *same_header = true;
    return std::nullopt;
  }
  return out;
}

bool SameTypes(const TableSchema& a, const TableSchema& b) {
  if (a.names != b.names) return false;
  for (size_t i = 0; i < a.prototypes.size(); ++i) {
    if (a.prototypes[i]->type_name() != b.prototypes[i]->type_name()) return false;
  }
  return true;
}
}  // namespace

Ingestor::Ingestor(IngestOptions options, Inserter* inserter, Clock* clock,
                   IngestObserver* observer)
    : options_(std::move(options)),
      buffer_limit_(static_cast<uint64_t>(static_cast<double>(options_.memory_budget_bytes) *
                                          options_.buffer_share)),
      budget_(options_.memory_budget_bytes),
      inserter_(inserter),
      clock_(clock),
      observer_(observer),
      rng_(std::random_device{}()) {
  if (observer_ != nullptr) {
    observer_->Budgets(options_.memory_budget_bytes, buffer_limit_);
  }
  if (!options_.background) return;
  busy_slots_ = options_.worker_threads + options_.flush_threads;
  busy_since_ = std::make_unique<std::atomic<int64_t>[]>(busy_slots_);
  for (size_t i = 0; i < busy_slots_; ++i) busy_since_[i].store(0);
  scheduler_beat_.store(absl::ToUnixNanos(clock_->Now()));
  for (size_t i = 0; i < options_.worker_threads; ++i) {
    threads_.emplace_back([this, i] { WorkerLoop(false, i); });
  }
  for (size_t i = 0; i < options_.flush_threads; ++i) {
    threads_.emplace_back([this, slot = options_.worker_threads + i] { WorkerLoop(true, slot); });
  }
  threads_.emplace_back([this] { SchedulerLoop(); });
}

Ingestor::~Ingestor() {
  Shutdown(clock_->Now());
  // Appends still queued in the spool call back into this object (and hold cached blocks that
  // count themselves out of it): let them finish first.
  if (options_.spool != nullptr) (void)options_.spool->Flush();
  {
    absl::MutexLock lock(&mu_);
    stop_threads_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void Ingestor::Enqueue(std::function<void()> task, bool flush_queue) {
  absl::MutexLock lock(&mu_);
  (flush_queue ? flush_work_ : work_).push_back(std::move(task));
}

void Ingestor::WorkerLoop(bool flush_queue, size_t slot) {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      auto& queue = flush_queue ? flush_work_ : work_;
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_threads_ || !queue.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (queue.empty()) return;  // stopping and drained
      task = std::move(queue.front());
      queue.pop_front();
    }
    busy_since_[slot].store(absl::ToUnixNanos(clock_->Now()), std::memory_order_relaxed);
    tls_progress = &busy_since_[slot];
    task();
    tls_progress = nullptr;
    busy_since_[slot].store(0, std::memory_order_relaxed);
  }
}

void Ingestor::Progressed() const {
  if (tls_progress != nullptr) {
    tls_progress->store(absl::ToUnixNanos(clock_->Now()), std::memory_order_relaxed);
  }
}

absl::Status Ingestor::CheckProgress(absl::Duration stall) const {
  if (!options_.background) return absl::OkStatus();
  const absl::Time now = clock_->Now();
  const absl::Time beat = absl::FromUnixNanos(scheduler_beat_.load(std::memory_order_relaxed));
  if (now - beat > stall) {
    return absl::DeadlineExceededError(absl::StrCat("the batch scheduler has not run for ",
                                                    absl::FormatDuration(now - beat), " (limit ",
                                                    absl::FormatDuration(stall), ")"));
  }
  for (size_t i = 0; i < busy_slots_; ++i) {
    const int64_t since = busy_since_[i].load(std::memory_order_relaxed);
    if (since == 0) continue;
    const absl::Duration busy = now - absl::FromUnixNanos(since);
    if (busy > stall) {
      return absl::DeadlineExceededError(absl::StrCat(
          i < options_.worker_threads ? "a conversion thread" : "a flush thread",
          " has made no progress (no task or ClickHouse attempt started or ended) for ",
          absl::FormatDuration(busy), " (limit ", absl::FormatDuration(stall), ")"));
    }
  }
  return absl::OkStatus();
}

bool Ingestor::RunPending() {
  bool ran = false;
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      if (!work_.empty()) {
        task = std::move(work_.front());
        work_.pop_front();
      } else if (!flush_work_.empty()) {
        task = std::move(flush_work_.front());
        flush_work_.pop_front();
      } else {
        return ran;
      }
    }
    task();
    ran = true;
  }
}

void Ingestor::Complete(const std::shared_ptr<Pending>& p, Result result) {
  if (p->done) return;
  p->done = true;
  if (p->reservation.bytes() > 0) {
    p->reservation.Release();
    PublishRequestBytes();
  }
  if (!p->idempotency_key.empty()) {
    std::vector<std::function<void(Result)>> followers;
    {
      absl::MutexLock lock(&mu_);
      auto it = keys_.find(p->idempotency_key);
      if (it != keys_.end()) {
        followers = std::move(it->second.followers);
        if (result.status.ok()) {
          it->second.done = true;
          it->second.result = result;
          it->second.expires = clock_->Now() + options_.idempotency_window;
          it->second.followers.clear();
          done_keys_.push_back({p->idempotency_key, it->second.expires});
          // Bounded: beyond the cap the oldest keys are forgotten before their window ends.
          while (done_keys_.size() > options_.idempotency_max_keys) {
            keys_.erase(done_keys_.front().key);
            done_keys_.pop_front();
          }
        } else {
          keys_.erase(it);
        }
      }
    }
    for (auto& f : followers) {
      Result copy = result;
      copy.deduplicated = true;
      f(std::move(copy));
    }
  }
  if (observer_ != nullptr) {
    const AckMode acked = result.persisted   ? AckMode::kPersisted
                          : result.committed ? AckMode::kCommitted
                                             : AckMode::kAccepted;
    observer_->RequestDone(p->label, result.status, acked, p->rows);
    if (result.status.ok() && result.committed) {
      observer_->CommitLatency(p->label, clock_->Now() - p->received);
    }
  }
  if (p->on_done) p->on_done(std::move(result));
  p->on_done = nullptr;
}

absl::StatusOr<MemoryBudget::Reservation> Ingestor::Reserve(uint64_t bytes) {
  std::optional<MemoryBudget::Reservation> reservation = budget_.TryReserve(bytes);
  if (reservation.has_value()) {
    PublishRequestBytes();
    return *std::move(reservation);
  }
  if (observer_ != nullptr) {
    observer_->MemoryRefused();
    observer_->RequestDone("", absl::ResourceExhaustedError("memory budget"), AckMode::kAccepted,
                           0);
  }
  constexpr double kMiB = 1 << 20;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "chgate's memory budget is full: %.1f MiB of %.1f MiB in use (%.1f MiB of rows buffered "
      "for ClickHouse, %.1f MiB held by requests being converted or waiting for room), this "
      "request needs %.1f MiB; nothing of it was buffered, so it is safe to retry after a backoff",
      static_cast<double>(budget_.used()) / kMiB, static_cast<double>(budget_.limit()) / kMiB,
      static_cast<double>(budget_.buffered()) / kMiB,
      static_cast<double>(budget_.requests()) / kMiB, static_cast<double>(bytes) / kMiB));
}

MemoryBudget::Reservation Ingestor::Hold(uint64_t bytes) {
  MemoryBudget::Reservation reservation = budget_.Attach();
  reservation.Resize(bytes);
  PublishRequestBytes();
  return reservation;
}

void Ingestor::PublishRequestBytes() const {
  if (observer_ != nullptr) observer_->RequestBytes(budget_.requests());
}

void Ingestor::Submit(Request request, MemoryBudget::Reservation reservation,
                      std::function<void()> on_admitted, std::function<void(Result)> on_done) {
  auto pending = std::make_shared<Pending>();
  pending->reservation = reservation.attached() ? std::move(reservation) : budget_.Attach();
  pending->received = clock_->Now();
  pending->deadline = request.deadline;
  pending->ack = request.ack.value_or(options_.default_ack);
  pending->trace = request.trace;
  pending->on_admitted = std::move(on_admitted);
  pending->on_done = std::move(on_done);
  if (pending->ack == AckMode::kPersisted && options_.spool == nullptr) {
    return Complete(pending, {.status = absl::FailedPreconditionError(
                                  "the persisted ack mode needs a spool: this chgate runs "
                                  "without --spool-dir")});
  }
  // The common case, a table whose header is cached, converts on the caller's thread: no hand-off
  // to a worker and no wake-up per request. Only work that may wait on ClickHouse (a header
  // lookup) goes to the workers.
  if (options_.background && HeaderIsFresh(request)) {
    return Admit(std::move(pending), std::move(request), /*on_caller=*/true);
  }
  {
    absl::MutexLock lock(&mu_);
    if (!shutting_down_) {
      work_.push_back([this, pending, request = std::move(request)]() mutable {
        Admit(pending, std::move(request));
      });
      return;
    }
  }
  Complete(pending, {.status = absl::UnavailableError("chgate is shutting down")});
}

bool Ingestor::HeaderIsFresh(const Request& request) {
  absl::StatusOr<TableId> table = ParseTableName(request.table, options_.default_database);
  if (!table.ok()) return true;  // refused at once, without a lookup
  const std::string key = SchemaKey(*table, request.columns);
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return false;  // the queue path refuses it
  auto it = schemas_.find(key);
  if (it == schemas_.end()) return false;
  const absl::Time now = clock_->Now();
  return now - it->second.fetched < options_.schema_ttl || now < it->second.retry_after;
}

absl::StatusOr<std::shared_ptr<const TableSchema>> Ingestor::Schema(
    const TableId& table, const std::vector<std::string>& columns, absl::Time deadline,
    bool refresh, bool* fetched) {
  const std::string key = SchemaKey(table, columns);
  *fetched = false;
  std::shared_ptr<const TableSchema> last_known;
  if (!refresh) {
    absl::MutexLock lock(&mu_);
    auto it = schemas_.find(key);
    if (it != schemas_.end()) {
      const absl::Time now = clock_->Now();
      if (now - it->second.fetched < options_.schema_ttl || now < it->second.retry_after) {
        return it->second.schema;
      }
      last_known = it->second.schema;
    }
  }
  // With a header at hand, a refresh may not eat the request's deadline: ClickHouse unreachable
  // or stopped must not turn buffering into timeouts.
  const absl::Time describe_deadline =
      last_known == nullptr ? deadline : std::min(deadline, clock_->Now() + kSchemaRefreshTimeout);
  absl::StatusOr<TableSchema> described = inserter_->Describe(table, columns, describe_deadline);
  if (!described.ok()) {
    if (last_known != nullptr && ShouldRetry(described.status()) &&
        !IsTableChangeError(described.status())) {
      // A connection problem, not an answer about the table: keep buffering with the last
      // header the server gave (a type change is still caught: the insert compares the block
      // with the header the server sends, and the rows path asks again on a mismatch). Ask again
      // in a little while rather than on every request.
      absl::MutexLock lock(&mu_);
      auto it = schemas_.find(key);
      if (it != schemas_.end()) it->second.retry_after = clock_->Now() + kSchemaRefreshTimeout;
      kLog.Throttled(log::Level::kWarn, "table header refresh failed: using the last known one",
                     absl::StrCat(table.database, ".", table.table),
                     {{"table", absl::StrCat(table.database, ".", table.table)},
                      {"error", described.status().message()}});
      return last_known;
    }
    if (last_known != nullptr && IsTableChangeError(described.status())) {
      absl::MutexLock lock(&mu_);
      schemas_.erase(key);  // the table is not what the header said any more
    }
    return described.status();
  }
  auto schema = std::make_shared<const TableSchema>(*std::move(described));
  *fetched = true;
  bool changed;
  {
    absl::MutexLock lock(&mu_);
    auto it = schemas_.find(key);
    changed = it == schemas_.end() || !SameTypes(*it->second.schema, *schema) ||
              it->second.schema->server_time_zone != schema->server_time_zone;
    schemas_[key] = {schema, clock_->Now()};
  }
  if (changed && options_.spool != nullptr) SaveHeaders();
  return schema;
}

void Ingestor::SaveHeaders() {
  absl::MutexLock file(&headers_mu_);
  std::vector<std::pair<std::string, std::shared_ptr<const TableSchema>>> snapshot;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, entry] : schemas_) snapshot.emplace_back(key, entry.schema);
  }
  std::vector<std::pair<std::string, const TableSchema*>> headers;
  for (const auto& [key, schema] : snapshot) headers.emplace_back(key, schema.get());
  const std::string bytes = EncodeHeaders(headers);
  const absl::Status st =
      spool::WriteFileAtomically(spool::DefaultFileOps(), options_.spool->dir(), "headers", bytes);
  if (!st.ok()) {
    kLog.Throttled(log::Level::kWarn, "spool: table headers not saved", "",
                   {{"file", "headers"}, {"error", st.message()}});
  }
}

void Ingestor::LoadHeaders() {
  spool::FileOps* ops = spool::DefaultFileOps();
  const std::string path = absl::StrCat(options_.spool->dir(), "/headers");
  absl::StatusOr<int> fd = ops->Open(path, O_RDONLY, 0);
  if (absl::IsNotFound(fd.status())) return;
  absl::Status st = fd.status();
  std::string bytes;
  if (st.ok()) {
    absl::StatusOr<uint64_t> size = ops->FileSize(*fd);
    st = size.status();
    if (st.ok()) {
      bytes.resize(*size);
      absl::StatusOr<size_t> got = ops->ReadAt(*fd, bytes.data(), bytes.size(), 0);
      st = got.status();
      if (st.ok()) bytes.resize(*got);
    }
    (void)ops->Close(*fd);
  }
  absl::StatusOr<std::vector<KnownHeader>> known =
      st.ok() ? DecodeHeaders(bytes) : absl::StatusOr<std::vector<KnownHeader>>(st);
  if (!known.ok()) {
    kLog.Warn("spool: saved table headers unreadable; ignored",
              {{"file", path}, {"error", known.status().message()}});
    return;
  }
  absl::MutexLock lock(&mu_);
  for (KnownHeader& h : *known) {
    // Stale from the start: the first request asks ClickHouse, and uses this one only while
    // ClickHouse does not answer.
    schemas_.try_emplace(h.key,
                         SchemaEntry{std::make_shared<const TableSchema>(std::move(h.schema)),
                                     absl::InfinitePast()});
  }
}

void Ingestor::ForgetSchemas(const TableId& table) {
  const std::string prefix = SchemaKey(table, {});
  absl::MutexLock lock(&mu_);
  for (auto it = schemas_.begin(); it != schemas_.end();) {
    if (absl::StartsWith(it->first, prefix)) {
      schemas_.erase(it++);
    } else {
      ++it;
    }
  }
}

absl::Status Ingestor::Convert(const Request& request, const TableSchema& s, Pending* p) {
  // A block's columns are staged as they are (below); rows are converted into new ones.
  p->staged = request.block != nullptr && request.rows == nullptr ? nullptr : EmptyBlock(s);
  if (request.rows != nullptr) {
    std::vector<clickhouse::Column*> columns;
    for (size_t i = 0; i < s.names.size(); ++i) {
      columns.push_back(p->staged->column(i).column.get());
    }
    ConvertOptions convert = options_.convert;
    absl::TimeZone tz;
    if (!s.server_time_zone.empty() && absl::LoadTimeZone(s.server_time_zone, &tz)) {
      convert.server_time_zone = tz;
    }
    return AppendRows(*request.rows, s.names, columns, convert);
  }
  if (request.block != nullptr) {
    clickhouse::Block& b = *request.block;
    CHGATE_RETURN_IF_ERROR(b.Validate());
    if (b.column_count() != s.names.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "block has ", b.column_count(), " columns, the insert expects ", s.names.size()));
    }
    for (size_t i = 0; i < s.names.size(); ++i) {
      const clickhouse::ColumnPtr& col = b.column(i).column;
      if (col->type_name() != s.prototypes[i]->type_name()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "column '", PrintableName(s.names[i]), "' has type ", PrintableName(col->type_name()),
            ", the table has ", PrintableName(s.prototypes[i]->type_name())));
      }
    }
    // The columns are what the table takes: staged as they are, not copied.
    auto staged = std::make_unique<clickhouse::Block>();
    for (size_t i = 0; i < s.names.size(); ++i) {
      staged->AddColumn(s.names[i], std::move(b.column(i).column));
    }
    p->staged = std::move(staged);
  }
  return absl::OkStatus();
}

bool Ingestor::ClaimKey(const std::shared_ptr<Pending>& p, Request& request) {
  // Scoped by the caller's identity and the (database, table) pair: one caller's key never
  // answers another's request, nor a request for another table.
  std::string key;
  AppendKeyPart(request.identity, &key);
  AppendKeyPart(p->table.database, &key);
  AppendKeyPart(p->table.table, &key);
  AppendKeyPart(request.idempotency_key, &key);
  std::optional<Result> earlier;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    // Keys expire in the order they were done: only the front can be due.
    while (!done_keys_.empty() && done_keys_.front().expires <= now) {
      keys_.erase(done_keys_.front().key);
      done_keys_.pop_front();
    }
    auto it = keys_.find(key);
    if (it == keys_.end()) {
      keys_[key];  // this request owns the key now
      p->idempotency_key = key;
      return false;
    }
    if (it->second.done) {
      earlier = it->second.result;
    } else {
      // Wait for the first request's outcome instead of inserting again.
      it->second.followers.push_back(std::move(p->on_done));
      p->on_done = nullptr;
      p->done = true;
    }
  }
  if (request.release_input) request.release_input();
  if (earlier) {
    earlier->deduplicated = true;
    Complete(p, *std::move(earlier));
    return true;
  }
  // A follower holds nothing while it waits.
  p->reservation.Release();
  PublishRequestBytes();
  if (p->on_admitted) p->on_admitted();
  return true;
}

void Ingestor::Admit(std::shared_ptr<Pending> p, Request request, bool on_caller) {
  absl::StatusOr<TableId> table = ParseTableName(request.table, options_.default_database);
  if (!table.ok()) return Complete(p, {.status = table.status()});
  p->table = *table;
  p->columns = request.columns;
  if (!request.idempotency_key.empty() && ClaimKey(p, request)) return;
  p->key = BatchKey(p->table, p->columns);
  bool fetched = false;
  absl::StatusOr<std::shared_ptr<const TableSchema>> schema =
      Schema(p->table, p->columns, p->deadline, /*refresh=*/false, &fetched);
  if (!schema.ok()) {
    // A caller's mistake (no such table or column) is the caller's to see; ClickHouse being
    // unreachable is the operator's.
    if (ShouldRetry(schema.status())) {
      kLog.Throttled(log::Level::kWarn, "table header lookup failed; request refused", "",
                     {{"table", absl::StrCat(p->table.database, ".", p->table.table)},
                      {"code", ErrorCodeLabel(schema.status())},
                      {"error", schema.status().message()}});
    }
    return Complete(p, {.status = schema.status()});
  }
  absl::Status converted = Convert(request, **schema, p.get());
  if (!converted.ok() && !fetched && on_caller) {
    // The refresh below waits on ClickHouse: not on the caller's thread.
    absl::MutexLock lock(&mu_);
    work_.push_back([this, p, request = std::move(request), schema = *schema,
                     converted = std::move(converted)]() mutable {
      AdmitConverted(std::move(p), std::move(request), std::move(schema), std::move(converted),
                     /*fetched=*/false);
    });
    return;
  }
  AdmitConverted(std::move(p), std::move(request), *std::move(schema), std::move(converted),
                 fetched);
}

void Ingestor::AdmitConverted(std::shared_ptr<Pending> p, Request request,
                              std::shared_ptr<const TableSchema> schema, absl::Status converted,
                              bool fetched) {
  if (!converted.ok() && !fetched) {
    // The rows were judged by a cached header; the table may have changed since (ALTER ...
    // MODIFY COLUMN, ADD COLUMN). Ask the server once more before calling the rows bad.
    absl::StatusOr<std::shared_ptr<const TableSchema>> fresh =
        Schema(p->table, p->columns, p->deadline, /*refresh=*/true, &fetched);
    if (!fresh.ok()) return Complete(p, {.status = fresh.status()});
    if (!SameTypes(**fresh, *schema)) {
      schema = *std::move(fresh);
      converted = Convert(request, *schema, p.get());
    }
  }
  // The message the rows came from is no longer needed: from here on the request holds only
  // its converted columns.
  if (request.release_input) request.release_input();
  // Only tables that exist become metric labels.
  p->label = absl::StrCat(p->table.database, ".", p->table.table);
  p->schema = schema;
  if (!converted.ok()) return Complete(p, {.status = converted});
  p->rows = p->staged->rows();
  p->bytes = p->staged->ByteSize();
  p->reservation.Resize(p->bytes);
  PublishRequestBytes();
  if (p->rows == 0) {
    // Nothing to commit: the table and columns were checked, which is all a zero-row request
    // asks for.
    if (p->on_admitted) p->on_admitted();
    return Complete(p, {.status = absl::OkStatus(), .rows = 0, .committed = true});
  }
  if (p->ack == AckMode::kPersisted) return Persist(std::move(p));
  Append(std::move(p));
}

const BatchLimits& Ingestor::LimitsFor(const std::string& label) const {
  auto it = options_.table_limits.find(label);
  return it == options_.table_limits.end() ? options_.limits : it->second;
}

void Ingestor::Append(std::shared_ptr<Pending> p) {
  std::vector<std::function<void()>> after;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      after.push_back([this, p] {
        Complete(p, {.status = absl::UnavailableError("chgate is shutting down")});
      });
    } else {
      waiting_.push_back(p);
      if (observer_ != nullptr) observer_->WaitingRequests(waiting_.size());
      AdmitWaitingLocked(&after);
    }
  }
  // Admission callbacks run here, outside the lock, not behind slow work in the queues.
  for (auto& f : after) f();
}

void Ingestor::AdmitWaitingLocked(std::vector<std::function<void()>>* after) {
  while (!waiting_.empty()) {
    std::shared_ptr<Pending> p = waiting_.front();
    auto& slot = batches_[p->key];
    if (slot == nullptr) {
      slot = std::make_unique<Batch>();
      slot->key = p->key;
      slot->label = p->label;
      slot->table = p->table;
      slot->schema = p->schema;
      slot->block = EmptyBlock(*p->schema);
      // The table's series exist from its first batch on, at 0, so a first loss shows.
      if (observer_ != nullptr) {
        observer_->TableStarted(p->label, LimitsFor(p->label).max_delay);
      }
    }
    Batch& batch = *slot;
    const bool fits_global = buffered_bytes_ == 0 || buffered_bytes_ + p->bytes <= buffer_limit_;
    const bool fits_table = options_.table_budget_bytes == 0 || batch.table_bytes == 0 ||
                            batch.table_bytes + p->bytes <= options_.table_budget_bytes;
    if (!fits_global || !fits_table) {
      kLog.Throttled(log::Level::kWarn, "memory budget full; callers wait",
                     fits_global ? p->label : "",
                     {{"budget", fits_global ? "table" : "global"},
                      {"table", p->label},
                      {"waiting_callers", waiting_.size()},
                      {"buffered_bytes", fits_global ? batch.table_bytes : buffered_bytes_},
                      {"budget_bytes",
                       fits_global ? options_.table_budget_bytes : options_.memory_budget_bytes}});
      return;  // FIFO: later requests wait behind this one
    }
    waiting_.pop_front();
    if (batch.schema != p->schema && !SameTypes(*batch.schema, *p->schema)) {
      if (batch.rows > 0) {
        // The table changed under the batch: flush what was converted for the old layout
        // first, then retry this request.
        waiting_.push_front(p);
        StartFlushLocked(batch, FlushReason::kRows);
        return;
      }
      batch.schema = p->schema;
      batch.block = EmptyBlock(*p->schema);
    }
    if (batch.rows == 0) {
      // The first rows of a batch: its block is the request's own, not a copy (no second
      // buffer, no growth slack from appending).
      batch.block = std::move(p->staged);
    } else {
      for (size_t i = 0; i < batch.block->column_count(); ++i) {
        batch.block->column(i).column->AppendRange(*p->staged->column(i).column, 0, p->rows);
      }
    }
    p->staged.reset();
    // The bytes move from the request's reservation to the buffer's count (added first, so the
    // budget never shows room that is not there).
    budget_.AddBuffered(p->bytes);
    p->reservation.Release();
    batch.rows += p->rows;
    batch.bytes += p->bytes;
    batch.table_bytes += p->bytes;
    buffered_bytes_ += p->bytes;
    buffered_rows_ += p->rows;
    const absl::Time now = clock_->Now();
    batch.oldest = std::min(batch.oldest, now);
    if (p->trace.has_value()) batch.traces.Add(*p->trace);
    std::function<void()> admitted = std::move(p->on_admitted);
    if (p->ack == AckMode::kCommitted) {
      batch.pendings.push_back(p);
      batch.earliest_deadline = std::min(batch.earliest_deadline, p->deadline);
      if (admitted) after->push_back(std::move(admitted));
    } else {
      after->push_back([this, p, admitted = std::move(admitted)] {
        if (admitted) admitted();
        Complete(p, {.status = absl::OkStatus(), .rows = p->rows, .committed = false});
      });
    }
    if (observer_ != nullptr) {
      observer_->Buffered(buffered_rows_, buffered_bytes_);
      observer_->WaitingRequests(waiting_.size());
      PublishRequestBytes();
    }
    const BatchLimits& limits = LimitsFor(batch.label);
    if (batch.rows >= limits.max_rows) {
      StartFlushLocked(batch, FlushReason::kRows);
    } else if (batch.bytes >= limits.max_bytes) {
      StartFlushLocked(batch, FlushReason::kBytes);
    }
  }
}

void Ingestor::ExpireWaitingLocked(absl::Time now, std::vector<std::shared_ptr<Pending>>* expired) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->deadline - options_.deadline_margin <= now) {
      expired->push_back(*it);
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  if (observer_ != nullptr && !expired->empty()) {
    observer_->WaitingRequests(waiting_.size());
  }
}

absl::Time Ingestor::DueLocked(const Batch& batch) const {
  if (batch.rows == 0) return absl::InfiniteFuture();
  return std::min(batch.oldest + DelayLocked(batch),
                  batch.earliest_deadline - options_.deadline_margin);
}

void Ingestor::StartFlushLocked(Batch& batch, FlushReason reason) {
  if (batch.spooled) return StartSpooledFlushLocked(batch, reason);
  if (batch.flushing || batch.rows == 0) return;
  batch.flushing = true;
  ++flushes_in_flight_;
  std::unique_ptr<clickhouse::Block> block = std::move(batch.block);
  batch.block = EmptyBlock(*batch.schema);
  std::vector<std::shared_ptr<Pending>> pendings = std::move(batch.pendings);
  batch.pendings.clear();
  BatchTraces traces = std::move(batch.traces);
  batch.traces = {};
  batch.rows = 0;
  batch.bytes = 0;
  batch.oldest = absl::InfiniteFuture();
  batch.earliest_deadline = absl::InfiniteFuture();
  Batch* b = &batch;
  std::shared_ptr<clickhouse::Block> shared(std::move(block));
  flush_work_.push_back([this, b, shared, pendings = std::move(pendings),
                         traces = std::move(traces), reason]() mutable {
    Flush(b, std::move(shared), std::move(pendings), std::move(traces), reason);
  });
}

absl::Status Ingestor::InsertWithRetries(
    Batch* batch, const clickhouse::Block& block, InsertAttempt& attempt,
    const std::function<absl::Time()>& stop_at,
    const std::function<void(std::vector<log::Field>*)>& fields, bool* too_many_parts) {
  // A spooled batch has no caller waiting: each attempt gets --retry-max-elapsed, and attempts go
  // on until the drain ends.
  const absl::Duration attempt_timeout =
      batch->spooled ? options_.retry.max_elapsed : absl::InfiniteDuration();
  while (true) {
    const absl::Time stop = stop_at();
    Progressed();  // an attempt starts: retrying on schedule is progress, not a stall
    const absl::Status status = inserter_->Insert(batch->table, block, attempt,
                                                  std::min(stop, clock_->Now() + attempt_timeout));
    Progressed();
    if (!*too_many_parts &&
        clickhouse::ClickHouseCode(status) == clickhouse::error_code::kTooManyParts) {
      // Raised at once, not when the retries end: the table's next batches wait longer while
      // this one is still being retried.
      *too_many_parts = true;
      AdaptDelay(batch, /*too_many_parts=*/true, absl::ZeroDuration(), attempt.attempt);
    }
    // A spooled batch has acknowledged rows and no caller waiting: only rows the table can
    // never take end its retries (see IsDataError); the drain's end stops them too.
    if (status.ok() || (batch->spooled ? IsDataError(status) : !ShouldRetry(status))) {
      return status;
    }
    absl::Duration cap =
        std::min(options_.retry.max_backoff,
                 options_.retry.initial_backoff * std::pow(2.0, std::min(attempt.attempt - 1, 30)));
    double jitter;
    {
      absl::MutexLock lock(&mu_);
      jitter = std::uniform_real_distribution<double>(0, 1)(rng_);
    }
    const absl::Time resume = clock_->Now() + cap * jitter;
    if (resume >= stop_at()) return status;
    if (observer_ != nullptr) observer_->FlushRetry(batch->label);
    std::vector<log::Field> line{{"table", batch->label},
                                 {"batch_id", attempt.query_id},
                                 {"attempt", attempt.attempt},
                                 {"rows", block.rows()},
                                 {"backoff", absl::Trunc(cap * jitter, absl::Milliseconds(1))},
                                 {"code", ErrorCodeLabel(status)},
                                 {"error", status.message()}};
    fields(&line);
    kLog.Throttled(log::Level::kWarn, "batch retry", batch->label, line);
    clock_->SleepUntil(resume);
    ++attempt.attempt;
  }
}

bool Ingestor::ShouldRetry(const absl::Status& status) const {
  if (auto code = clickhouse::ClickHouseCode(status)) {
    namespace ec = clickhouse::error_code;
    switch (*code) {
      case ec::kTimeoutExceeded:
      case ec::kTooManySimultaneousQueries:
      case ec::kSocketTimeout:
      case ec::kNetworkError:
      case ec::kMemoryLimitExceeded:
      case ec::kTableIsReadOnly:
      case ec::kTooManyParts:
      case ec::kTooFewLiveReplicas:
      case ec::kUnknownStatusOfInsert:
      case ec::kSystemError:
      // The same batch's earlier attempt (before a reconnect, or before chgate restarted) is
      // still running in the server.
      case ec::kQueryWithSameIdIsAlreadyRunning:
      // A Replicated table whose ZooKeeper is away for a moment.
      case ec::kKeeperException:
        return true;
      default:
        return false;
    }
  }
  // Not from ClickHouse: connection errors and timeouts.
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded ||
         status.code() == absl::StatusCode::kCancelled ||
         status.code() == absl::StatusCode::kDataLoss;
}

void Ingestor::Flush(Batch* batch, std::shared_ptr<clickhouse::Block> block,
                     std::vector<std::shared_ptr<Pending>> pendings, BatchTraces traces,
                     FlushReason reason) {
  const absl::Time start = clock_->Now();
  // Attempts go on while some caller of the batch still waits: a caller whose deadline passed
  // (it already has its DEADLINE_EXCEEDED) must not cut short the others' flush. Rows acknowledged
  // in accepted mode have no caller waiting: they get every attempt --retry-max-elapsed allows.
  uint64_t waiting_rows = 0;
  for (const auto& p : pendings) waiting_rows += p->rows;
  absl::Time last_deadline =
      block->rows() > waiting_rows ? absl::InfiniteFuture() : absl::InfinitePast();
  for (const auto& p : pendings) last_deadline = std::max(last_deadline, p->deadline);
  const absl::Time stop_at = std::min(start + options_.retry.max_elapsed, last_deadline);
  InsertAttempt attempt;
  // Unguessable (128 random bits): a caller who may Query must not be able to take a batch's id
  // first and make its INSERT fail as "already running".
  attempt.query_id = absl::StrCat("chgate-", RandomHex128());
  attempt.deduplication_key = attempt.query_id;
  attempt.trace = traces.first;
  attempt.async = options_.async_insert;
  bool too_many_parts = false;
  const auto batch_fields = [&](std::vector<log::Field>* fields) {
    fields->emplace_back("callers", pendings.size());
    fields->emplace_back("ack_mode", BatchAckMode(block->rows(), waiting_rows));
    traces.AppendFields(fields);
  };
  absl::Status status = InsertWithRetries(
      batch, *block, attempt, [stop_at] { return stop_at; }, batch_fields, &too_many_parts);
  if (!status.ok() && IsDataError(status) && IsTableChangeError(status)) {
    // The table changed after the rows were checked against its header: rows valid when sent
    // go in converted to its new columns where that loses nothing; otherwise the callers learn
    // that the table changed (ABORTED: resend against the new table), never that their rows
    // were invalid.
    bool same_header = false;
    std::optional<clickhouse::Block> converted = ConvertToChangedTable(
        batch, *block, [stop_at] { return stop_at; }, &same_header);
    if (same_header) {
      // The table is as the rows were checked against: the refusal is about the rows.
    } else if (converted.has_value()) {
      kLog.Info("table changed: batch converted to its new columns",
                {{"table", batch->label}, {"rows", block->rows()}, {"error", status.message()}});
      status = InsertWithRetries(
          batch, *converted, attempt, [stop_at] { return stop_at; }, batch_fields, &too_many_parts);
    } else {
      status = absl::AbortedError(absl::StrCat(
          "the table changed after these rows were checked against it, and its new columns "
          "cannot take them unchanged; resend them (",
          status.message(), ")"));
    }
  }
  const absl::Time end = clock_->Now();
  if (!too_many_parts) AdaptDelay(batch, false, end - start, attempt.attempt);
  if (!status.ok()) {
    if (attempt.attempt > 1) {
      status = absl::Status(status.code(), absl::StrCat(status.message(), " (gave up after ",
                                                        attempt.attempt, " attempts)"));
    }
    if (IsTableChangeError(status)) {
      // The table changed under the batch (dropped, column removed or retyped): the next
      // request asks the server for its header again.
      ForgetSchemas(batch->table);
    }
  }
  if (observer_ != nullptr) {
    observer_->BatchFlushed(batch->label, reason, block->rows(), block->ByteSize(), end - start);
    if (!status.ok()) {
      observer_->FlushFailed(batch->label, status, clickhouse::ClickHouseCode(status));
    }
  }
  const uint64_t rows = block->rows(), bytes = block->ByteSize();
  block.reset();
  if (!status.ok()) {
    std::vector<log::Field> fields{{"table", batch->label},
                                   {"batch_id", attempt.query_id},
                                   {"attempts", attempt.attempt},
                                   {"rows", rows},
                                   {"callers", pendings.size()},
                                   {"ack_mode", BatchAckMode(rows, waiting_rows)},
                                   {"rows_dropped", rows - waiting_rows},
                                   {"retryable", ShouldRetry(status)},
                                   {"code", ErrorCodeLabel(status)},
                                   {"error", status.message()}};
    traces.AppendFields(&fields);
    kLog.Throttled(log::Level::kError, "batch failed", batch->label, fields);
  } else if (attempt.attempt > 1) {
    std::vector<log::Field> fields{{"table", batch->label},
                                   {"batch_id", attempt.query_id},
                                   {"attempts", attempt.attempt},
                                   {"rows", rows},
                                   {"callers", pendings.size()},
                                   {"elapsed", absl::Trunc(end - start, absl::Milliseconds(1))}};
    traces.AppendFields(&fields);
    kLog.Throttled(log::Level::kInfo, "batch committed after retries", batch->label, fields);
  } else if (traces.first.has_value()) {
    // Where a traced caller's rows went: the INSERT's query id, in the trace's terms.
    std::vector<log::Field> fields{{"table", batch->label},
                                   {"batch_id", attempt.query_id},
                                   {"rows", rows},
                                   {"callers", pendings.size()}};
    traces.AppendFields(&fields);
    kLog.Debug("batch committed", fields);
  }
  {
    absl::MutexLock lock(&mu_);
    (status.ok() ? rows_committed_ : rows_failed_) += rows;
  }
  if (!status.ok()) {
    // Callers in committed mode get the error; rows acknowledged in accepted mode are lost.
    if (rows > waiting_rows) {
      if (observer_ != nullptr) {
        observer_->RowsDropped(batch->label, DropReason::kAcceptedFlushFailed, rows - waiting_rows);
      }
      absl::MutexLock lock(&mu_);
      rows_dropped_ += rows - waiting_rows;
    }
  }
  for (const auto& p : pendings) {
    Complete(p, {.status = status,
                 .rows = status.ok() ? p->rows : 0,
                 .committed = status.ok(),
                 .query_id = status.ok() ? attempt.query_id : "",
                 .commit_time = end});
  }
  FinishFlush(batch, bytes, rows);
}

absl::Duration Ingestor::DelayLocked(const Batch& batch) const {
  return batch.delay > absl::ZeroDuration() ? batch.delay : LimitsFor(batch.label).max_delay;
}

void Ingestor::AdaptDelay(Batch* batch, bool too_many_parts, absl::Duration took, int attempts) {
  const absl::Duration base = LimitsFor(batch->label).max_delay;
  if (options_.max_delay_ceiling <= base) return;
  // A retried flush's time includes backoff: only a single attempt's time says the server is slow.
  const bool slow = attempts == 1 && took >= options_.slow_insert;
  absl::Duration before, after;
  const char* reason = nullptr;
  {
    absl::MutexLock lock(&mu_);
    before = DelayLocked(*batch);
    after = before;
    if (too_many_parts || slow) {
      batch->calm_flushes = 0;
      after = std::min(options_.max_delay_ceiling, before * 2);
      reason = too_many_parts ? "too_many_parts" : "slow_insert";
    } else if (before > base && ++batch->calm_flushes >= options_.relax_after) {
      batch->calm_flushes = 0;
      after = std::max(base, before / 2);
      reason = "pressure_gone";
    }
    batch->delay = after;
  }
  if (after == before) return;
  kLog.Info(after > before ? "flush delay raised" : "flush delay lowered",
            {{"table", batch->label},
             {"from", before},
             {"to", after},
             {"reason", reason},
             {"insert_took", absl::Trunc(took, absl::Milliseconds(1))},
             {"ceiling", options_.max_delay_ceiling},
             {"configured", base}});
  if (observer_ != nullptr) observer_->DelayChanged(batch->label, after);
}

void Ingestor::FinishFlush(Batch* batch, uint64_t bytes, uint64_t rows) {
  std::vector<std::function<void()>> after;
  {
    absl::MutexLock lock(&mu_);
    buffered_bytes_ -= bytes;
    budget_.RemoveBuffered(bytes);
    buffered_rows_ -= rows;
    batch->table_bytes -= bytes;
    batch->flushing = false;
    --flushes_in_flight_;
    if (observer_ != nullptr) observer_->Buffered(buffered_rows_, buffered_bytes_);
    AdmitWaitingLocked(&after);
    const BatchLimits& limits = LimitsFor(batch->label);
    if (!batch->replays.empty()) {
      StartFlushLocked(*batch, FlushReason::kReplay);
    } else if (shutting_down_) {
      StartFlushLocked(*batch, FlushReason::kShutdown);
    } else if (batch->rows >= limits.max_rows) {
      StartFlushLocked(*batch, FlushReason::kRows);
    } else if (batch->bytes >= limits.max_bytes) {
      StartFlushLocked(*batch, FlushReason::kBytes);
    } else if (DueLocked(*batch) <= clock_->Now()) {
      StartFlushLocked(*batch, FlushReason::kAge);
    }
  }
  for (auto& f : after) f();
}

bool Ingestor::Poll() {
  std::vector<std::shared_ptr<Pending>> expired;
  bool started = false;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    for (auto& [key, batch] : batches_) {
      if (batch->flushing || batch->rows == 0) continue;
      if (DueLocked(*batch) <= now) {
        const bool by_deadline = batch->earliest_deadline - options_.deadline_margin <
                                 batch->oldest + DelayLocked(*batch);
        StartFlushLocked(*batch, by_deadline ? FlushReason::kDeadline : FlushReason::kAge);
        started = true;
      }
    }
    ExpireWaitingLocked(now, &expired);
  }
  if (!expired.empty()) {
    kLog.Throttled(log::Level::kWarn,
                   "callers refused with RESOURCE_EXHAUSTED: the memory budget stayed full until "
                   "their deadline",
                   "", {{"callers", expired.size()}, {"table", expired.front()->label}});
  }
  for (const auto& p : expired) {
    Complete(p, {.status = absl::ResourceExhaustedError(
                     "chgate's buffer stayed full until the request's deadline; nothing of it "
                     "was buffered, so it is safe to retry")});
  }
  return started || !expired.empty();
}

void Ingestor::SchedulerLoop() {
  while (true) {
    Poll();
    absl::MutexLock lock(&mu_);
    scheduler_beat_.store(absl::ToUnixNanos(clock_->Now()), std::memory_order_relaxed);
    if (stop_threads_) return;
    absl::Time next = clock_->Now() + absl::Milliseconds(50);
    for (auto& [key, batch] : batches_) {
      if (!batch->flushing) next = std::min(next, DueLocked(*batch));
    }
    for (const auto& p : waiting_) next = std::min(next, p->deadline - options_.deadline_margin);
    auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_threads_; };
    mu_.AwaitWithDeadline(absl::Condition(&stop),
                          std::max(next, clock_->Now() + absl::Milliseconds(1)));
  }
}

bool Ingestor::Ready() const {
  absl::MutexLock lock(&mu_);
  // One threshold would flap the pod in and out of its Services while the buffer hovers at it.
  const double used = static_cast<double>(buffered_bytes_);
  const double budget = static_cast<double>(buffer_limit_);
  if (used >= options_.ready_high_water * budget) {
    above_high_water_ = true;
  } else if (used < options_.ready_low_water * budget) {
    above_high_water_ = false;
  }
  return !shutting_down_ && !above_high_water_;
}

IngestStats Ingestor::Stats() const {
  absl::MutexLock lock(&mu_);
  return {.buffered_rows = buffered_rows_,
          .buffered_bytes = buffered_bytes_,
          .waiting_requests = waiting_.size(),
          .flushes_in_flight = flushes_in_flight_,
          .request_bytes = budget_.requests(),
          .rows_dropped = rows_dropped_,
          .spooled_rows = spooled_rows_};
}

void Ingestor::Shutdown(absl::Time deadline) {
  std::vector<std::shared_ptr<Pending>> refused, unflushed;
  // Set by the call that starts the drain, which also says how it ended.
  std::optional<IngestStats> drain_start;
  uint64_t committed_before = 0, failed_before = 0;
  const absl::Time started = clock_->Now();
  {
    absl::MutexLock lock(&mu_);
    drain_deadline_ = std::min(drain_deadline_, deadline);
    if (!shutting_down_) {
      shutting_down_ = true;
      drain_start = IngestStats{buffered_rows_, buffered_bytes_, waiting_.size(),
                                flushes_in_flight_, rows_dropped_};
      committed_before = rows_committed_;
      failed_before = rows_failed_;
      refused.assign(waiting_.begin(), waiting_.end());
      waiting_.clear();
      for (auto& [key, batch] : batches_) StartFlushLocked(*batch, FlushReason::kShutdown);
    }
  }
  if (drain_start) {
    kLog.Info("drain started",
              {{"buffered_rows", drain_start->buffered_rows},
               {"buffered_bytes", drain_start->buffered_bytes},
               {"callers_refused", refused.size()},
               {"deadline_in", absl::Trunc(deadline - started, absl::Milliseconds(1))}});
  }
  for (const auto& p : refused) {
    Complete(p,
             {.status = absl::UnavailableError("chgate is shutting down; nothing was buffered")});
  }
  if (!options_.background) {
    RunPending();
  } else {
    absl::MutexLock lock(&mu_);
    auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (flushes_in_flight_ > 0 || !work_.empty()) return false;
      for (auto& [key, batch] : batches_) {
        if (batch->rows > 0) return false;
      }
      return true;
    };
    mu_.AwaitWithDeadline(absl::Condition(&drained), deadline);
  }
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, batch] : batches_) {
      // Spooled rows that did not go out stay in the spool for the next start.
      if (batch->flushing || batch->spooled) continue;
      for (auto& p : batch->pendings) unflushed.push_back(p);
      batch->pendings.clear();
      if (batch->rows > 0) {
        rows_dropped_ += batch->rows;
        if (observer_ != nullptr) {
          observer_->RowsDropped(batch->label, DropReason::kShutdown, batch->rows);
        }
      }
      buffered_bytes_ -= batch->bytes;
      budget_.RemoveBuffered(batch->bytes);
      buffered_rows_ -= batch->rows;
      batch->rows = batch->bytes = 0;
      batch->block = EmptyBlock(*batch->schema);
    }
    if (drain_start) {
      const uint64_t flushed = rows_committed_ - committed_before;
      const uint64_t failed = rows_failed_ - failed_before;
      const uint64_t dropped = rows_dropped_ - drain_start->rows_dropped;
      const bool clean = failed == 0 && dropped == 0 && flushes_in_flight_ == 0;
      kLog.Write(clean ? log::Level::kInfo : log::Level::kError, "drain finished",
                 {{"rows_flushed", flushed},
                  {"rows_failed", failed},
                  {"rows_dropped", dropped},
                  {"rows_left_in_spool", spooled_rows_},
                  {"rows_in_flight", buffered_rows_},
                  {"flushes_in_flight", flushes_in_flight_},
                  {"elapsed", absl::Trunc(clock_->Now() - started, absl::Milliseconds(1))}});
    }
  }
  for (const auto& p : unflushed) {
    Complete(p, {.status = absl::UnavailableError(
                     "chgate shut down before these rows could be committed")});
  }
}

// ---------------------------------------------------------------------------------------------
// Persisted requests: the spool.

void Ingestor::Persist(std::shared_ptr<Pending> p) {
  std::string payload = options_.spool->TakeBuffer();
  EncodeRowsRecord(p->table, p->columns, p->idempotency_key, *p->staged, &payload);
  // Keep the block for its INSERT while the cache has room.
  std::shared_ptr<const CachedBlock> cached;
  const uint64_t cap = options_.spool_cache_bytes != 0 ? options_.spool_cache_bytes
                                                       : options_.memory_budget_bytes / 8;
  const uint64_t block_bytes = p->staged->ByteSize();
  if (spool_cache_bytes_.fetch_add(block_bytes, std::memory_order_relaxed) + block_bytes <= cap) {
    budget_.AddBuffered(block_bytes);
    cached = std::make_shared<const CachedBlock>(this, std::move(p->staged), block_bytes);
  } else {
    spool_cache_bytes_.fetch_sub(block_bytes, std::memory_order_relaxed);
  }
  p->staged.reset();
  // Until it is written, the spool's queue holds the record: it stays counted as this request's.
  const uint64_t bytes = payload.size();
  p->reservation.Resize(bytes);
  PublishRequestBytes();
  if (p->on_admitted) {
    p->on_admitted();
    p->on_admitted = nullptr;
  }
  absl::Status st = options_.spool->AppendOwned(
      std::move(payload),
      [this, p, bytes, cached = std::move(cached)](absl::StatusOr<uint64_t> lsn) mutable {
        OnPersisted(p, bytes, std::move(cached), std::move(lsn));
      });
  if (st.ok()) return;
  if (st.code() == absl::StatusCode::kFailedPrecondition) {
    st = absl::UnavailableError("chgate is shutting down (its spool is closed)");
  } else {
    kLog.Throttled(log::Level::kWarn, "spool refused a persisted request", p->label,
                   {{"table", p->label}, {"rows", p->rows}, {"error", st.message()}});
  }
  Complete(p, {.status = st});
}

void Ingestor::OnPersisted(const std::shared_ptr<Pending>& p, uint64_t payload_bytes,
                           std::shared_ptr<const CachedBlock> cached,
                           absl::StatusOr<uint64_t> lsn) {
  failpoint::Hit("persisted_before_ack");
  if (!lsn.ok()) {
    kLog.Throttled(log::Level::kError, "spool write failed; persisted request refused", p->label,
                   {{"table", p->label}, {"rows", p->rows}, {"error", lsn.status().message()}});
    return Complete(p, {.status = lsn.status()});
  }
  {
    absl::MutexLock lock(&mu_);
    Batch& batch =
        SpooledBatchLocked(absl::StrCat(p->key, kSpooledKeySuffix), p->table, p->columns);
    QueueSpooledLocked(batch,
                       SpoolEntry{*lsn, p->rows, payload_bytes, clock_->Now(), std::move(cached)});
  }
  Complete(p, {.status = absl::OkStatus(), .rows = p->rows, .committed = false, .persisted = true});
}

Ingestor::Batch& Ingestor::SpooledBatchLocked(const std::string& key, const TableId& table,
                                              const std::vector<std::string>& columns) {
  auto& slot = batches_[key];
  if (slot == nullptr) {
    slot = std::make_unique<Batch>();
    slot->key = key;
    slot->label = absl::StrCat(table.database, ".", table.table);
    slot->table = table;
    slot->columns = columns;
    slot->spooled = true;
    if (observer_ != nullptr) {
      observer_->TableStarted(slot->label, LimitsFor(slot->label).max_delay);
    }
  }
  return *slot;
}

void Ingestor::QueueSpooledLocked(Batch& batch, SpoolEntry entry) {
  if (batch.spool_queue.empty()) batch.oldest = entry.appended;
  batch.rows += entry.rows;
  batch.bytes += entry.bytes;
  spooled_rows_ += entry.rows;
  batch.spool_queue.push_back(entry);
  const BatchLimits& limits = LimitsFor(batch.label);
  if (batch.rows >= limits.max_rows) {
    StartFlushLocked(batch, FlushReason::kRows);
  } else if (batch.bytes >= limits.max_bytes) {
    StartFlushLocked(batch, FlushReason::kBytes);
  }
}

void Ingestor::StartSpooledFlushLocked(Batch& batch, FlushReason reason) {
  if (batch.flushing || (batch.spool_queue.empty() && batch.replays.empty())) return;
  // After the drain the records wait in the spool for the next start.
  if (shutting_down_ && clock_->Now() >= drain_deadline_) return;
  SpooledFlush flush;
  if (!batch.replays.empty()) {
    flush = std::move(batch.replays.front());
    batch.replays.pop_front();
    reason = FlushReason::kReplay;
  } else {
    const BatchLimits& limits = LimitsFor(batch.label);
    uint64_t rows = 0, bytes = 0;
    while (
        !batch.spool_queue.empty() &&
        (flush.entries.empty() || (rows + batch.spool_queue.front().rows <= limits.max_rows &&
                                   bytes + batch.spool_queue.front().bytes <= limits.max_bytes))) {
      const SpoolEntry& e = batch.spool_queue.front();
      rows += e.rows;
      bytes += e.bytes;
      flush.entries.push_back(e);
      batch.spool_queue.pop_front();
    }
    batch.rows -= rows;
    batch.bytes -= bytes;
    batch.oldest =
        batch.spool_queue.empty() ? absl::InfiniteFuture() : batch.spool_queue.front().appended;
  }
  batch.flushing = true;
  ++flushes_in_flight_;
  Batch* b = &batch;
  flush_work_.push_back([this, b, flush = std::move(flush), reason]() mutable {
    FlushSpooled(b, std::move(flush), reason);
  });
}

std::unique_ptr<clickhouse::Block> Ingestor::ReadSpooled(Batch* batch, SpooledFlush& flush,
                                                         std::vector<SpoolEntry>* later) {
  // The readable records' blocks, gathered first so the INSERT's block is built in one pass with
  // each column allocated once.
  std::vector<const clickhouse::Block*> parts;
  std::vector<std::unique_ptr<clickhouse::Block>> decoded;
  std::vector<SpoolEntry> kept;
  std::vector<uint64_t> lost;
  uint64_t lost_rows = 0;
  for (size_t i = 0; i < flush.entries.size(); ++i) {
    SpoolEntry& e = flush.entries[i];
    // The block kept since its sync, or the record read back and decoded.
    std::unique_ptr<clickhouse::Block> one;
    const clickhouse::Block* src = nullptr;
    absl::StatusOr<SpoolRecordHeader> h = SpoolRecordHeader{};
    if (e.cached != nullptr) {
      src = e.cached->block.get();
    } else {
      absl::StatusOr<std::string> payload = options_.spool->Read(e.lsn);
      one = std::make_unique<clickhouse::Block>();
      h = payload.ok() ? DecodeSpoolRecord(*payload, one.get()) : payload.status();
      if (h.ok() && h->kind != SpoolRecordKind::kRows) {
        h = absl::DataLossError("an intent where a rows record was expected");
      }
      src = one.get();
    }
    if (!h.ok()) {
      kLog.Error("spooled record unreadable; its rows are lost",
                 {{"table", batch->label}, {"lsn", e.lsn}, {"error", h.status().message()}});
      if (observer_ != nullptr) {
        observer_->RowsDropped(batch->label, DropReason::kSpoolDamaged, e.rows);
      }
      lost.push_back(e.lsn);
      lost_rows += e.rows;
      continue;
    }
    e.rows = src->rows();
    if (!parts.empty()) {
      const clickhouse::Block& first = *parts.front();
      bool same = first.column_count() == src->column_count();
      for (size_t c = 0; same && c < src->column_count(); ++c) {
        same = first.column(c).name == src->column(c).name &&
               first.column(c).column->type_name() == src->column(c).column->type_name();
      }
      if (!same && flush.intent_lsn == 0 && later != nullptr) {
        // The table changed between these requests: the rest goes in the next INSERT.
        later->assign(flush.entries.begin() + static_cast<std::ptrdiff_t>(i), flush.entries.end());
        break;
      }
      if (!same) {
        // A replayed intent was one layout when it was written; anything else is damage.
        kLog.Error("spooled record does not match its batch's columns; its rows are lost",
                   {{"table", batch->label}, {"lsn", e.lsn}});
        if (observer_ != nullptr) {
          observer_->RowsDropped(batch->label, DropReason::kSpoolDamaged, e.rows);
        }
        lost.push_back(e.lsn);
        lost_rows += e.rows;
        continue;
      }
    }
    parts.push_back(src);
    if (one != nullptr) decoded.push_back(std::move(one));
    kept.push_back(e);
  }
  if (!lost.empty()) {
    absl::MutexLock lock(&mu_);
    rows_dropped_ += lost_rows;
  }
  if (flush.intent_lsn != 0 && !lost.empty()) {
    // An intent is sent whole or not at all: a smaller block under its identity would be a new
    // block to ClickHouse (a duplicate of what the first attempt may have written). The caller
    // sets the batch aside, marking it committed in one record with its intent.
    flush.unreadable = std::move(lost);
    return nullptr;
  }
  flush.entries = std::move(kept);
  if (!lost.empty()) {
    if (absl::Status st = options_.spool->MarkCommitted(lost); !st.ok()) {
      kLog.Error("spool: marking unreadable records failed", {{"error", st.message()}});
    }
  }
  if (parts.empty()) return nullptr;
  if (parts.size() == 1 && decoded.size() == 1) return std::move(decoded.front());
  return std::make_unique<clickhouse::Block>(clickhouse::Block::Concat(parts));
}

void Ingestor::FlushSpooled(Batch* batch, SpooledFlush flush, FlushReason reason) {
  spool::Spool* const spool = options_.spool;
  const absl::Time start = clock_->Now();
  uint64_t queued_rows = 0;
  for (const SpoolEntry& e : flush.entries) queued_rows += e.rows;
  auto stop_at = [this]() {
    absl::MutexLock lock(&mu_);
    return drain_deadline_;
  };
  // Read the records first: their columns decide how many go into this INSERT.
  std::vector<SpoolEntry> later;
  std::unique_ptr<clickhouse::Block> block = ReadSpooled(batch, flush, &later);
  if (!flush.unreadable.empty()) {
    SetAsideDamagedIntent(batch, flush);
    {
      absl::MutexLock lock(&mu_);
      spooled_rows_ -= std::min(spooled_rows_, queued_rows);
    }
    return FinishFlush(batch, 0, 0);
  }
  if (!later.empty()) {
    absl::MutexLock lock(&mu_);
    for (auto it = later.rbegin(); it != later.rend(); ++it) {
      batch->spool_queue.push_front(*it);
      batch->rows += it->rows;
      batch->bytes += it->bytes;
      queued_rows -= it->rows;
    }
    batch->oldest = batch->spool_queue.front().appended;
  }
  std::vector<uint64_t> lsns;
  uint64_t rows = 0;
  for (const SpoolEntry& e : flush.entries) lsns.push_back(e.lsn);
  if (block != nullptr) rows = block->rows();
  absl::Status status = absl::OkStatus();
  bool sent = false, too_many_parts = false;
  InsertAttempt attempt;
  // The intent: which records, in which order, make this INSERT. Durable before the INSERT is
  // sent, so a restart sends the same block under the same identity.
  for (int tries = 0; block != nullptr && flush.intent_lsn == 0; ++tries) {
    absl::StatusOr<uint64_t> lsn = spool->AppendAndWait(
        EncodeIntentRecord(batch->table, batch->columns, lsns), /*exempt=*/true);
    if (lsn.ok()) {
      flush.intent_lsn = *lsn;
      break;
    }
    kLog.Throttled(log::Level::kError, "spool: batch intent not written; the batch waits",
                   batch->label,
                   {{"table", batch->label}, {"rows", rows}, {"error", lsn.status().message()}});
    const absl::Time resume = clock_->Now() + std::min(options_.retry.max_backoff,
                                                       options_.retry.initial_backoff *
                                                           std::pow(2.0, std::min(tries, 30)));
    if (lsn.status().code() == absl::StatusCode::kFailedPrecondition || resume >= stop_at()) {
      status = lsn.status();
      break;
    }
    clock_->SleepUntil(resume);
    Progressed();
  }
  if (block != nullptr && flush.intent_lsn != 0) {
    CheckDedupWindow(batch);
    failpoint::Hit("spool_intent_before_insert");
    // The block's identity is stable across replays (its deduplication token); the query id is
    // not needed for that, so it is unguessable like every batch's.
    attempt.deduplication_key = absl::StrCat(options_.spool_id, "-", flush.intent_lsn);
    attempt.query_id = absl::StrCat("chgate-", RandomHex128());
    const auto fields = [&](std::vector<log::Field>* line) {
      line->emplace_back("ack_mode", "persisted");
      line->emplace_back("intent_lsn", flush.intent_lsn);
    };
    status = InsertWithRetries(batch, *block, attempt, stop_at, fields, &too_many_parts);
    if (!status.ok() && IsDataError(status) && IsTableChangeError(status)) {
      // The table changed after these rows were acknowledged: where its new columns take them
      // without loss, send them so rather than set them aside.
      std::optional<clickhouse::Block> converted = ConvertToChangedTable(batch, *block, stop_at);
      if (converted.has_value()) {
        kLog.Info("table changed: spooled batch converted to its new columns",
                  {{"table", batch->label},
                   {"rows", rows},
                   {"intent_lsn", flush.intent_lsn},
                   {"error", status.message()}});
        status = InsertWithRetries(batch, *converted, attempt, stop_at, fields, &too_many_parts);
      }
    }
    sent = true;
  }
  const absl::Time end = clock_->Now();
  const uint64_t bytes = block != nullptr ? block->ByteSize() : 0;
  block.reset();
  if (sent) {
    if (!too_many_parts) AdaptDelay(batch, false, end - start, attempt.attempt);
    if (observer_ != nullptr)
      observer_->BatchFlushed(batch->label, reason, rows, bytes, end - start);
  }
  std::vector<uint64_t> done = lsns;
  if (flush.intent_lsn != 0) done.push_back(flush.intent_lsn);
  if (sent && status.ok()) {
    failpoint::Hit("insert_committed_before_mark");
    if (absl::Status st = spool->MarkCommitted(done); !st.ok()) {
      // The rows are in ClickHouse; the next start sends them again under the same identity.
      kLog.Error("spool: marking committed records failed",
                 {{"table", batch->label}, {"error", st.message()}});
    }
    if (attempt.attempt > 1 || reason == FlushReason::kReplay) {
      kLog.Info(reason == FlushReason::kReplay ? "replayed batch committed"
                                               : "batch committed after retries",
                {{"table", batch->label},
                 {"batch_id", attempt.query_id},
                 {"attempts", attempt.attempt},
                 {"rows", rows},
                 {"elapsed", absl::Trunc(end - start, absl::Milliseconds(1))}});
    }
    absl::MutexLock lock(&mu_);
    rows_committed_ += rows;
  } else if (sent && IsDataError(status)) {
    if (IsTableChangeError(status)) ForgetSchemas(batch->table);
    if (observer_ != nullptr) {
      observer_->FlushFailed(batch->label, status, clickhouse::ClickHouseCode(status));
    }
    WriteDeadLetter(batch, flush, rows, status);
  } else if (!lsns.empty()) {
    // The drain ended (or the spool closed) first: the records stay pending in the spool and go
    // out after the restart, under the same identity if the intent was written.
    kLog.Warn("spooled batch left in the spool for the next start",
              {{"table", batch->label},
               {"rows", rows},
               {"intent_lsn", flush.intent_lsn},
               {"code", ErrorCodeLabel(status)},
               {"error", status.message()}});
  }
  {
    absl::MutexLock lock(&mu_);
    spooled_rows_ -= std::min(spooled_rows_, queued_rows);
  }
  FinishFlush(batch, 0, 0);
}

std::optional<clickhouse::Block> Ingestor::ConvertToChangedTable(
    Batch* batch, const clickhouse::Block& block, const std::function<absl::Time()>& stop_at,
    bool* same_header) {
  if (same_header != nullptr) *same_header = false;
  ForgetSchemas(batch->table);
  std::vector<std::string> names;
  for (const clickhouse::NamedColumn& c : block.columns()) names.push_back(c.name);
  for (int tries = 0;; ++tries) {
    Progressed();
    absl::StatusOr<TableSchema> now =
        inserter_->Describe(batch->table, names, clock_->Now() + kSchemaRefreshTimeout);
    if (now.ok()) return ConvertLosslessly(block, *now, same_header);
    // Only an answer about the table decides; while ClickHouse does not answer, ask again.
    if (!ShouldRetry(now.status()) || IsTableChangeError(now.status())) return std::nullopt;
    const absl::Time resume = clock_->Now() + std::min(options_.retry.max_backoff,
                                                       options_.retry.initial_backoff *
                                                           std::pow(2.0, std::min(tries, 30)));
    if (resume >= stop_at()) return std::nullopt;
    clock_->SleepUntil(resume);
  }
}

void Ingestor::CheckDedupWindow(Batch* batch) {
  const absl::Time now = clock_->Now();
  if (now < batch->dedup_check_at) return;
  absl::StatusOr<DedupWindow> w =
      inserter_->DedupWindowOf(batch->table, now + kSchemaRefreshTimeout);
  if (!w.ok()) {
    batch->dedup_check_at = now + kDedupRetryInterval;
    if (!absl::IsUnimplemented(w.status())) {
      kLog.Throttled(log::Level::kWarn, "table's deduplication window could not be read",
                     batch->label, {{"table", batch->label}, {"error", w.status().message()}});
    }
    return;
  }
  batch->dedup_check_at = now + kDedupCheckInterval;
  if (!w->replicated) {
    kLog.Throttled(log::Level::kInfo,
                   "persisted rows go to a table without block deduplication (not Replicated): "
                   "a crash between a commit and the spool's record of it sends that batch again",
                   batch->label, {{"table", batch->label}});
    return;
  }
  // Seconds of the table's INSERTs the window holds: its blocks at the table's rate, and never
  // more than its age limit.
  double covers = std::numeric_limits<double>::infinity();
  if (w->inserts_per_second.has_value() && *w->inserts_per_second > 0) {
    covers = static_cast<double>(w->window_blocks) / *w->inserts_per_second;
  }
  if (w->window_seconds > 0) covers = std::min(covers, static_cast<double>(w->window_seconds));
  if (observer_ != nullptr) observer_->DedupWindowCovers(batch->label, covers);
  const double horizon = absl::ToDoubleSeconds(kReplayHorizon);
  if (covers < horizon) {
    const double per_second = w->inserts_per_second.value_or(0);
    kLog.Throttled(
        log::Level::kWarn,
        "table's deduplication window is shorter than a replay after a crash may take: a batch "
        "sent again then can be stored twice; raise replicated_deduplication_window",
        batch->label,
        {{"table", batch->label},
         {"window_blocks", w->window_blocks},
         {"window_seconds", w->window_seconds},
         {"inserts_per_second", per_second},
         {"covers_seconds", covers},
         {"needed_seconds", horizon},
         {"suggested_window_blocks", static_cast<uint64_t>(std::ceil(per_second * horizon * 2))}});
  }
}

void Ingestor::SetAsideDamagedIntent(Batch* batch, const SpooledFlush& flush) {
  uint64_t rows = 0;
  for (const SpoolEntry& e : flush.entries) {
    if (std::find(flush.unreadable.begin(), flush.unreadable.end(), e.lsn) ==
        flush.unreadable.end()) {
      rows += e.rows;
    }
  }
  const std::string lsns = absl::StrJoin(flush.unreadable, ",");
  kLog.Error(
      "spooled batch damaged: not sent again, since a smaller block under its identity would be "
      "stored as a new one; its readable records go to the dead-letter directory",
      {{"table", batch->label},
       {"intent_lsn", flush.intent_lsn},
       {"unreadable_lsns", lsns},
       {"readable_records", flush.entries.size() - flush.unreadable.size()},
       {"readable_rows", rows}});
  WriteDeadLetter(
      batch, flush, rows,
      absl::DataLossError(absl::StrCat("records ", lsns, " of batch intent ", flush.intent_lsn,
                                       " are unreadable in the spool")));
}

void Ingestor::WriteDeadLetter(Batch* batch, const SpooledFlush& flush, uint64_t rows,
                               const absl::Status& status) {
  spool::FileOps* ops = spool::DefaultFileOps();
  const std::string dir = options_.spool->dead_letter_dir();
  const std::string name = DeadLetterFileName(flush.intent_lsn);
  ingest::DeadLetter letter{.table = batch->table,
                            .columns = batch->columns,
                            .records = flush.entries.size(),
                            .rows = rows,
                            .identity = absl::StrCat(options_.spool_id, "-", flush.intent_lsn),
                            .unreadable = flush.unreadable,
                            .error = status.ToString()};
  absl::Status st = absl::OkStatus();
  for (const SpoolEntry& e : flush.entries) {
    if (std::find(flush.unreadable.begin(), flush.unreadable.end(), e.lsn) !=
        flush.unreadable.end()) {
      continue;
    }
    absl::StatusOr<std::string> payload = options_.spool->Read(e.lsn);
    if (!payload.ok()) {
      st = payload.status();
      break;
    }
    letter.payloads.push_back({e.lsn, *std::move(payload)});
  }
  const std::string out = EncodeDeadLetter(letter);
  letter.payloads.clear();
  if (st.ok()) st = ops->MakeDir(dir);
  if (st.ok()) st = spool::WriteFileAtomically(ops, dir, name, out);
  if (st.ok()) options_.spool->AddSetAside(out.size());
  if (!st.ok()) {
    // Kept in the spool instead: the next start tries again.
    kLog.Error(
        "spooled batch refused by ClickHouse and not moved to the dead-letter directory; "
        "it stays in the spool",
        {{"table", batch->label},
         {"rows", rows},
         {"clickhouse_error", status.message()},
         {"error", st.message()}});
    return;
  }
  std::vector<uint64_t> done;
  for (const SpoolEntry& e : flush.entries) done.push_back(e.lsn);
  done.push_back(flush.intent_lsn);
  if (absl::Status marked = options_.spool->MarkCommitted(done); !marked.ok()) {
    kLog.Error("spool: marking dead-lettered records failed", {{"error", marked.message()}});
  }
  if (observer_ != nullptr) {
    observer_->RowsDropped(batch->label, DropReason::kSpoolDeadLetter, rows);
  }
  kLog.Error("spooled batch refused by ClickHouse; moved to the dead-letter directory",
             {{"table", batch->label},
              {"rows", rows},
              {"file", absl::StrCat("dead-letter/", name)},
              {"code", ErrorCodeLabel(status)},
              {"error", status.message()}});
}

RecoverySummary Ingestor::Recover(const std::vector<spool::SpoolRecord>& records) {
  const absl::Time started = absl::Now();
  RecoverySummary summary;
  if (options_.spool == nullptr) return summary;
  LoadHeaders();
  if (records.empty()) return summary;
  struct Found {
    SpoolRecordHeader header;
    uint64_t size = 0;
  };
  std::map<uint64_t, Found> rows, intents;
  std::vector<uint64_t> unreadable;
  for (const spool::SpoolRecord& r : records) {
    absl::StatusOr<std::string> read;
    std::string_view payload = r.payload;
    absl::StatusOr<SpoolRecordHeader> h = absl::DataLossError("not read");
    if (payload.empty() && !r.head.empty()) {
      // The head the spool's scan checked: enough unless the header is longer.
      h = DecodeSpoolRecord(r.head);
    }
    if (!h.ok() && payload.empty()) {
      read = options_.spool->Read(r.lsn);
      if (read.ok()) payload = *read;
    }
    if (!h.ok()) {
      h = read.ok() || !r.payload.empty() ? DecodeSpoolRecord(payload) : read.status();
    }
    if (!h.ok()) {
      kLog.Error("spool record unreadable at start; it is dropped",
                 {{"lsn", r.lsn}, {"error", h.status().message()}});
      unreadable.push_back(r.lsn);
      continue;
    }
    (h->kind == SpoolRecordKind::kIntent ? intents : rows)[r.lsn] = Found{*std::move(h), r.size};
  }
  summary.unreadable = unreadable.size();
  if (!unreadable.empty()) {
    if (absl::Status st = options_.spool->MarkCommitted(unreadable); !st.ok()) {
      kLog.Error("spool: marking unreadable records failed", {{"error", st.message()}});
    }
  }
  summary.records = rows.size();
  for (const auto& [lsn, f] : rows) summary.rows += f.header.rows;
  const absl::Time now = clock_->Now();
  std::vector<uint64_t> empty_intents;
  std::vector<std::pair<Batch*, SpooledFlush>> damaged;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [intent_lsn, f] : intents) {
      SpooledFlush flush{.intent_lsn = intent_lsn};
      for (uint64_t lsn : f.header.lsns) {
        auto it = rows.find(lsn);
        if (it == rows.end()) {
          ++summary.orphaned;
          flush.unreadable.push_back(lsn);
          flush.entries.push_back(SpoolEntry{lsn, 0, 0, now});
          continue;
        }
        flush.entries.push_back(SpoolEntry{lsn, it->second.header.rows, it->second.size, now});
        rows.erase(it);
      }
      if (flush.unreadable.size() == flush.entries.size()) {
        // None of its records is pending: nothing can be sent under this identity.
        if (!flush.entries.empty()) {
          kLog.Error(
              "spooled batch intent without any of its records; nothing to send",
              {{"intent_lsn", intent_lsn}, {"missing_lsns", absl::StrJoin(flush.unreadable, ",")}});
        }
        empty_intents.push_back(intent_lsn);
        continue;
      }
      Batch& batch = SpooledBatchLocked(
          absl::StrCat(BatchKey(f.header.table, f.header.columns), kSpooledKeySuffix),
          f.header.table, f.header.columns);
      if (!flush.unreadable.empty()) {
        ++summary.damaged_intents;
        damaged.emplace_back(&batch, std::move(flush));
        continue;
      }
      for (const SpoolEntry& e : flush.entries) spooled_rows_ += e.rows;
      ++summary.intents;
      batch.replays.push_back(std::move(flush));
    }
    for (const auto& [lsn, f] : rows) {
      Batch& batch = SpooledBatchLocked(
          absl::StrCat(BatchKey(f.header.table, f.header.columns), kSpooledKeySuffix),
          f.header.table, f.header.columns);
      if (!f.header.idempotency_key.empty()) {
        // A caller that resends a request it saw no answer for finds it done.
        KeyEntry& key = keys_[f.header.idempotency_key];
        key.done = true;
        key.result = Result{.status = absl::OkStatus(), .rows = f.header.rows, .persisted = true};
        key.expires = now + options_.idempotency_window;
        done_keys_.push_back({f.header.idempotency_key, key.expires});
      }
      QueueSpooledLocked(batch, SpoolEntry{lsn, f.header.rows, f.size, now});
    }
    for (auto& [key, batch] : batches_) {
      if (batch->spooled && !batch->replays.empty()) StartFlushLocked(*batch, FlushReason::kReplay);
    }
    if (!empty_intents.empty()) {
      if (absl::Status st = options_.spool->MarkCommitted(empty_intents); !st.ok()) {
        kLog.Error("spool: marking empty intents failed", {{"error", st.message()}});
      }
    }
  }
  for (auto& [batch, flush] : damaged) SetAsideDamagedIntent(batch, flush);
  if (observer_ != nullptr) observer_->SpoolReplayed(summary.records);
  kLog.Info("spool replayed",
            {{"records", summary.records},
             {"rows", summary.rows},
             {"batches_resent_as_before", summary.intents},
             {"unreadable_records", summary.unreadable},
             {"orphaned_intent_entries", summary.orphaned},
             {"damaged_batches_set_aside", summary.damaged_intents},
             {"took", absl::Trunc(absl::Now() - started, absl::Milliseconds(1))}});
  return summary;
}

}  // namespace chgate::ingest
