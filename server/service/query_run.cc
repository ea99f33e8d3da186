#include "server/service/query_run.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/protocol/error_codes.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/clickhouse/protocol/revision.h"
#include "server/common/random_id.h"
#include "server/log/log.h"
#include "server/proto_convert/result_block.h"
#include "server/sql/query_policy.h"
#include "text/identifier.h"
#include "text/status_macros.h"

namespace chgate::service {
namespace {

constexpr log::Component kLog("query");

// `fields` with the caller's trace id, when the call carries one.
std::vector<log::Field> WithTraceOf(const QueryCall& call, std::vector<log::Field> fields) {
  if (std::optional<text::TraceContext> trace = call.trace(); trace.has_value()) {
    fields.emplace_back("trace_id", trace->TraceIdHex());
  }
  return fields;
}

// How long one wait for a pooled connection lasts before the run checks for a cancel.
constexpr absl::Duration kAcquireSlice = absl::Milliseconds(200);

// chgate's own ids: unguessable, so that no caller can take one first.
std::string GenerateQueryId() { return absl::StrCat("chgate-", RandomHex128()); }

void ToProto(const clickhouse::Progress& p, v1::Progress* out) {
  out->set_read_rows(p.rows);
  out->set_read_bytes(p.bytes);
  out->set_total_rows_to_read(p.total_rows);
  out->set_total_bytes_to_read(p.total_bytes);
  out->set_written_rows(p.written_rows);
  out->set_written_bytes(p.written_bytes);
  out->set_elapsed_ns(p.elapsed_ns);
}

// A ClickHouse refusal caused by read-only mode, its message saying what to do about it.
absl::Status ExplainReadOnly(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kPermissionDenied ||
      clickhouse::ClickHouseCode(status) != clickhouse::error_code::kReadonly) {
    return status;
  }
  absl::Status explained = absl::PermissionDeniedError(
      absl::StrCat(status.message(),
                   " (chgate runs queries read-only; an operator can allow writes with "
                   "--query-allow-writes)"));
  // Keep the payloads: the caller's status detail carries the server's code and exception name.
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    explained.SetPayload(url, payload);
  });
  return explained;
}

// Target size of one response message: the request's hint, else the default, at most the cap.
size_t TargetBytes(const v1::QueryRequest& request, const QueryServiceOptions& options) {
  uint32_t target = request.max_response_bytes();
  if (target == 0) target = options.response_bytes;
  return std::min(target, options.max_response_bytes);
}

}  // namespace

// ---- ResponseBuilder ----

clickhouse::ByteBuffer ColumnBufferPool::Take() {
  absl::MutexLock lock(&mu_);
  if (spare_.empty()) return {};
  clickhouse::ByteBuffer buffer = std::move(spare_.back());
  spare_.pop_back();
  return buffer;
}

std::shared_ptr<const clickhouse::ByteBuffer> ColumnBufferPool::Hold(
    clickhouse::ByteBuffer buffer) {
  return std::shared_ptr<const clickhouse::ByteBuffer>(
      new clickhouse::ByteBuffer(std::move(buffer)),
      [pool = shared_from_this()](const clickhouse::ByteBuffer* held) {
        pool->Return(const_cast<clickhouse::ByteBuffer*>(held));
      });
}

void ColumnBufferPool::Return(clickhouse::ByteBuffer* buffer) {
  std::unique_ptr<clickhouse::ByteBuffer> owned(buffer);
  owned->clear();
  absl::MutexLock lock(&mu_);
  if (spare_.size() < keep_) spare_.push_back(std::move(*owned));
}

namespace {

// A column at least this large goes out from its own memory (below it, copying costs less than
// lending its buffer).
constexpr size_t kHeldColumnBytes = 64 << 10;
// Buffers the pool keeps: about what a query's messages hold at once (its buffered bytes and
// the write in flight, in blocks of half a megabyte).
constexpr size_t kSpareColumnBuffers = 16;

// Whether `column`'s values go to the client as they are in its buffer: fixed-width values the
// API carries in ClickHouse's layout (UUID is reordered, Nothing has none), in memory the column
// owns (not a view of a decompressed frame, which the next frame overwrites).
bool HoldsWholeValues(const clickhouse::Column& column) {
  if (column.kind() != clickhouse::ColumnKind::kFixed) return false;
  const auto& fixed = static_cast<const clickhouse::ColumnFixed&>(column);
  return fixed.fixed_kind() != clickhouse::FixedKind::kUuid &&
         fixed.fixed_kind() != clickhouse::FixedKind::kNothing && !fixed.values().is_view() &&
         fixed.values().size() >= kHeldColumnBytes;
}

}  // namespace

ResponseBuilder::ResponseBuilder(size_t target, std::function<bool(QueryMessage)> send,
                                 std::function<v1::Block*()> take_block, ingest::Clock* clock)
    : target_(target),
      send_(std::move(send)),
      take_block_(std::move(take_block)),
      clock_(clock),
      buffers_(std::make_shared<ColumnBufferPool>(kSpareColumnBuffers)) {}

void ResponseBuilder::HoldColumns(clickhouse::Block* block) {
  held_.assign(block->column_count(), nullptr);
  for (size_t i = 0; i < block->column_count(); ++i) {
    clickhouse::Column& column = *block->column(i).column;
    if (!HoldsWholeValues(column)) continue;
    clickhouse::ByteBuffer values = buffers_->Take();
    static_cast<clickhouse::ColumnFixed&>(column).SwapValues(&values);
    held_[i] = buffers_->Hold(std::move(values));
  }
}

void ResponseBuilder::Append(const clickhouse::Block& block, size_t begin, size_t end) {
  v1::Block* dst = pending_.response.mutable_block();
  if (dst->columns_size() == 0) {
    for (const clickhouse::NamedColumn& c : block.columns()) {
      proto_convert::InitResultColumn(*c.column, c.name, dst->add_columns());
    }
  }
  const size_t dst_rows = dst->rows();
  for (size_t i = 0; i < block.column_count(); ++i) {
    const clickhouse::Column& src = *block.column(i).column;
    const int at = static_cast<int>(i);
    if (held_[i] != nullptr) {
      const size_t width = static_cast<const clickhouse::ColumnFixed&>(src).width();
      pending_.Hold(at, {.owner = held_[i],
                         .data = held_[i]->data() + begin * width,
                         .size = (end - begin) * width});
    } else if (pending_.held_column(at) != nullptr) {
      // Rows copied after held ones (a small block): a range of their own. Only whole-value
      // fixed-width columns are ever held, so the bytes are the column's.
      const auto& fixed = static_cast<const clickhouse::ColumnFixed&>(src);
      auto copy = std::make_shared<std::string>(fixed.RawAt(begin), (end - begin) * fixed.width());
      HeldBytes range{.data = copy->data(), .size = copy->size()};
      range.owner = std::move(copy);
      pending_.Hold(at, std::move(range));
    } else {
      proto_convert::AppendResultRows(src, begin, end, dst_rows, dst->mutable_columns(at));
    }
  }
  dst->set_rows(dst_rows + (end - begin));
}

bool ResponseBuilder::Add(clickhouse::Block* block) {
  const size_t rows = block->rows();  // before a column's values move out
  HoldColumns(block);
  const clickhouse::Block& src = *block;
  bool sent = true;
  size_t begin = 0;
  while (begin < rows) {
    const size_t room = target_ > pending_bytes_ ? target_ - pending_bytes_ : 0;
    size_t end = rows;
    size_t bytes = Estimate(src, begin, end);
    if (bytes > room) {
      // The largest end whose rows fit the room (estimates grow with the row range).
      size_t lo = begin, hi = rows;
      while (lo < hi) {
        const size_t mid = lo + (hi - lo + 1) / 2;
        if (Estimate(src, begin, mid) <= room) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      end = lo;
      if (end == begin) {
        if (pending_rows() > 0) {
          if (!Flush()) {
            sent = false;
            break;
          }
          continue;
        }
        end = begin + 1;  // one row larger than the target still goes, alone
      }
      bytes = Estimate(src, begin, end);
    }
    if (pending_rows() == 0) {
      pending_since_ = clock_->Now();
      if (!pending_.response.has_block()) pending_.response.set_allocated_block(take_block_());
    }
    Append(src, begin, end);
    pending_bytes_ += bytes;
    begin = end;
    if (pending_bytes_ >= target_ - target_ / 8 && !Flush()) {
      sent = false;
      break;
    }
  }
  held_.clear();  // the messages hold what they reference
  return sent;
}

bool ResponseBuilder::Flush() {
  if (pending_rows() == 0) return true;
  const uint64_t rows = pending_.response.block().rows();
  QueryMessage out = std::move(pending_);
  pending_ = QueryMessage();
  pending_bytes_ = 0;
  ++blocks_;
  rows_ += rows;
  return send_(std::move(out));
}

size_t ResponseBuilder::Estimate(const clickhouse::Block& block, size_t begin, size_t end) {
  size_t total = 0;
  for (const clickhouse::NamedColumn& c : block.columns()) {
    total += proto_convert::EstimateResultBytes(*c.column, begin, end);
  }
  return total;
}

// ---- QueryRun ----

QueryRun::QueryRun(QueryCall* call, clickhouse::Pool* pool, const QueryServiceOptions& options,
                   QueryObserver* observer, ingest::Clock* clock)
    : call_(call),
      pool_(pool),
      options_(options),
      observer_(observer),
      clock_(clock),
      request_(call->request()),
      builder_(
          TargetBytes(request_, options_),
          [this](QueryMessage message) { return Send(std::move(message)); },
          [this] { return call_->TakeBlock(); }, clock) {}

absl::Status QueryRun::Run() {
  const absl::Time started = clock_->Now();
  if (observer_ != nullptr) observer_->QueryStarted();
  absl::Status status = [&]() -> absl::Status {
    CHGATE_ASSIGN_OR_RETURN(conn_, Acquire());
    absl::Status ran = RunOnConnection();
    ReleaseConnection();
    return ran;
  }();
  if (observer_ != nullptr) observer_->QueryFinished(status, clock_->Now() - started);
  return status;
}

absl::Status QueryRun::RunOnConnection() {
  CHGATE_RETURN_IF_ERROR(CheckServer());
  CHGATE_RETURN_IF_ERROR(CheckWithServer());
  // A statement that may change the session (USE, SET, temporary tables) does not hand its
  // connection back to the pool.
  discard_ = !sql::KeepsSession(request_.sql());
  CHGATE_RETURN_IF_ERROR(UseDatabase());
  CHGATE_ASSIGN_OR_RETURN(clickhouse::QueryParams params, Parameters());
  query_id_ = params.query_id;
  clickhouse::CursorOptions hooks = CursorHooks();
  sent_at_ = clock_->Now();
  cursor_.emplace(conn_.get(), std::move(params), std::move(hooks));
  CHGATE_RETURN_IF_ERROR(Stream());
  return Trailer();
}

absl::StatusOr<clickhouse::PooledConnection> QueryRun::Acquire() {
  const absl::Status cancelled = absl::CancelledError("query cancelled before it started");
  if (call_->cancelled()) return cancelled;
  const absl::Time acquire_until = call_->deadline() - options_.deadline_margin;
  absl::StatusOr<clickhouse::PooledConnection> acquired;
  while (true) {
    // The pool waits by the system clock: hand it the length of this slice, not our time.
    const absl::Duration slice = std::min(acquire_until - clock_->Now(), kAcquireSlice);
    acquired = pool_->Acquire(absl::Now() + slice);
    if (acquired.ok() || !absl::IsDeadlineExceeded(acquired.status()) ||
        clock_->Now() >= acquire_until) {
      break;
    }
    if (call_->cancelled()) return cancelled;
  }
  if (!acquired.ok() && absl::IsDeadlineExceeded(acquired.status())) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "no ClickHouse connection became free before the deadline: ", acquired.status().message()));
  }
  return acquired;
}

absl::Status QueryRun::CheckServer() const {
  if (!request_.parameters().empty() && conn_->revision() < clickhouse::revision::kParameters) {
    return absl::UnimplementedError(absl::StrCat(
        "query parameters need a ClickHouse server with native protocol revision ",
        clickhouse::revision::kParameters, " or newer; this one speaks ", conn_->revision()));
  }
  return absl::OkStatus();
}

absl::Status QueryRun::CheckWithServer() {
  CHGATE_ASSIGN_OR_RETURN(std::shared_ptr<const clickhouse::ServerCatalog> server,
                          options_.server_catalog->Get(*conn_));
  sql::QueryPolicy policy;
  policy.allowed_table_functions.insert(options_.allowed_table_functions.begin(),
                                        options_.allowed_table_functions.end());
  CHGATE_RETURN_IF_ERROR(sql::CheckTableFunctions(request_.sql(), policy, server->table_functions));
  for (const auto& [name, value] : request_.settings()) {
    CHGATE_ASSIGN_OR_RETURN(std::string checked,
                            clickhouse::CheckSettingForServer(name, value, *server));
    settings_.push_back({.name = name, .value = std::move(checked), .important = true});
  }
  // A stable order (the request's map has none), so a query's packet is reproducible.
  std::sort(settings_.begin(), settings_.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return absl::OkStatus();
}

absl::Status QueryRun::UseDatabase() {
  if (request_.database().empty()) return absl::OkStatus();
  // The native protocol names the database only at the handshake: switch this connection and
  // close it afterwards rather than hand a changed session back to the pool.
  discard_ = true;
  return conn_->Select({.query = absl::StrCat("USE ", text::QuoteIdentifier(request_.database()))},
                       [](const clickhouse::Block&) { return absl::OkStatus(); });
}

absl::StatusOr<clickhouse::QueryParams> QueryRun::Parameters() {
  clickhouse::QueryParams params;
  params.query_id = request_.query_id().empty() ? GenerateQueryId() : request_.query_id();
  params.query = request_.sql();
  params.trace = call_->trace();
  uint64_t max_execution_time = 0;
  for (clickhouse::Setting& setting : settings_) {  // checked by CheckSettings
    if (setting.name == "max_execution_time") {
      if (!absl::SimpleAtoi(setting.value, &max_execution_time)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "setting max_execution_time needs whole seconds, got '", setting.value, "'"));
      }
      continue;
    }
    params.settings.push_back(std::move(setting));
  }
  for (const auto& [name, value] : request_.parameters()) {
    params.parameters.emplace_back(name, value);
  }
  // The call's deadline bounds the query in ClickHouse too (whole seconds, rounded up).
  const double left = absl::ToDoubleSeconds(call_->deadline() - clock_->Now());
  const uint64_t deadline_seconds = static_cast<uint64_t>(std::max(1.0, std::ceil(left)));
  if (max_execution_time == 0 || deadline_seconds < max_execution_time) {
    max_execution_time = deadline_seconds;
  }
  params.settings.push_back(
      {.name = "max_execution_time", .value = absl::StrCat(max_execution_time)});
  if (!options_.allow_writes) {
    // Last: from readonly = 2 on, other settings may still change but data may not.
    params.settings.push_back({.name = "readonly", .value = "2"});
  }
  return params;
}

clickhouse::CursorOptions QueryRun::CursorHooks() {
  clickhouse::CursorOptions hooks;
  hooks.on_header = [this](const clickhouse::Block& columns) { OnHeader(columns); };
  if (request_.send_progress()) {
    hooks.on_progress = [this](const clickhouse::Progress& p) { OnProgress(p); };
  }
  hooks.interrupted = [this] { return Interrupted(); };
  // Polling at half the delay bounds how long rows wait to 1.5 x coalesce_delay.
  hooks.poll_interval = std::min(absl::Milliseconds(50),
                                 std::max(options_.coalesce_delay / 2, absl::Milliseconds(1)));
  return hooks;
}

void QueryRun::OnHeader(const clickhouse::Block& columns) {
  header_status_ = proto_convert::CheckResultColumns(columns);
  if (!header_status_.ok()) return;
  v1::QueryResponse header;
  for (const clickhouse::NamedColumn& c : columns.columns()) {
    auto* col = header.mutable_header()->add_columns();
    col->set_name(c.name);
    col->set_type(c.column->type_name());
  }
  header.mutable_header()->set_query_id(query_id_);
  header.mutable_header()->set_timezone(conn_->server_info().timezone);
  if (!Send(std::move(header))) {
    send_failed_ = true;
    return;
  }
  header_sent_ = true;
  if (early_progress_.has_value()) SendProgress(*early_progress_);
}

void QueryRun::OnProgress(const clickhouse::Progress& progress) {
  if (send_failed_) return;
  if (!header_sent_) {
    if (!early_progress_.has_value()) early_progress_.emplace();
    early_progress_->Add(progress);
    return;
  }
  SendProgress(progress);
}

// Asked between packets and while waiting for the server: rows gathered longer than
// coalesce_delay go out (also while the server sends only progress), and the query stops when
// the call is cancelled, its deadline passed (a call without one ends at
// options_.default_timeout), a message could not be sent or the header was refused.
bool QueryRun::Interrupted() {
  if (builder_.pending_rows() > 0 && !send_failed_ &&
      clock_->Now() >= builder_.pending_since() + options_.coalesce_delay && !builder_.Flush()) {
    send_failed_ = true;
  }
  return send_failed_ || !header_status_.ok() || call_->cancelled() || DeadlinePassed();
}

absl::Status QueryRun::Stream() {
  clickhouse::Block* block = cursor_->Next();
  while (block != nullptr) {
    if (!header_status_.ok() || send_failed_) break;
    if (!builder_.Add(block)) {
      send_failed_ = true;
      break;
    }
    // Rows gathered so far go out from Interrupted once they are coalesce_delay old.
    block = cursor_->Next();
  }
  if (!header_status_.ok()) {
    (void)CancelInClickHouse();
    return header_status_;
  }
  if (cursor_->interrupted() || send_failed_) return CancelInClickHouse();
  // The cursor is done: rows it delivered go out even when an exception followed them.
  if (!builder_.Flush()) return absl::CancelledError("the caller cancelled");
  const absl::Status& status = cursor_->status();
  if (status.ok()) return absl::OkStatus();
  if (clickhouse::ClickHouseCode(status) == clickhouse::error_code::kQueryWasCancelled) {
    // KILL QUERY in ClickHouse, or its own limits: the caller gets the error, the operator the
    // id to look up in system.query_log.
    kLog.Throttled(log::Level::kWarn, "query killed in ClickHouse", "",
                   WithTraceOf(*call_, {{"query_id", query_id_},
                                        {"rows_sent", builder_.rows()},
                                        {"error", status.message()}}));
  }
  return ExplainReadOnly(status);
}

absl::Status QueryRun::Trailer() {
  const absl::Status caller_cancelled = absl::CancelledError("the caller cancelled");
  if (!header_sent_) {
    // A statement without a result (SET, or DDL with writes allowed) names no columns.
    v1::QueryResponse header;
    header.mutable_header()->set_query_id(query_id_);
    header.mutable_header()->set_timezone(conn_->server_info().timezone);
    if (!Send(std::move(header))) return caller_cancelled;
    if (early_progress_.has_value()) SendProgress(*early_progress_);
  }
  const absl::Duration elapsed = clock_->Now() - sent_at_;

  const clickhouse::Cursor& cursor = *cursor_;
  if (cursor.totals().has_value() && cursor.totals()->rows() > 0) {
    v1::QueryResponse totals;
    proto_convert::AppendResultBlock(*cursor.totals(), 0, cursor.totals()->rows(),
                                     totals.mutable_totals());
    if (!Send(std::move(totals))) return caller_cancelled;
  }
  if (cursor.extremes().has_value() && cursor.extremes()->rows() > 0) {
    v1::QueryResponse extremes;
    proto_convert::AppendResultBlock(*cursor.extremes(), 0, cursor.extremes()->rows(),
                                     extremes.mutable_extremes());
    if (!Send(std::move(extremes))) return caller_cancelled;
  }
  v1::QueryResponse summary;
  v1::QuerySummary* s = summary.mutable_summary();
  s->set_rows(builder_.rows());
  s->set_blocks(builder_.blocks());
  s->set_received_bytes(cursor.received_bytes());
  s->set_decoded_bytes(cursor.decoded_bytes());
  const int64_t elapsed_ns = absl::ToInt64Nanoseconds(elapsed);
  s->mutable_elapsed()->set_seconds(elapsed_ns / 1000000000);
  s->mutable_elapsed()->set_nanos(static_cast<int32_t>(elapsed_ns % 1000000000));
  s->set_query_id(query_id_);
  ToProto(cursor.progress(), s->mutable_progress());
  if (cursor.profile().has_value()) {
    const clickhouse::ProfileInfo& p = *cursor.profile();
    v1::ProfileInfo* out = s->mutable_profile_info();
    out->set_rows(p.rows);
    out->set_blocks(p.blocks);
    out->set_bytes(p.bytes);
    out->set_applied_limit(p.applied_limit);
    out->set_rows_before_limit(p.rows_before_limit);
    out->set_calculated_rows_before_limit(p.calculated_rows_before_limit);
  }
  if (!Send(std::move(summary))) return caller_cancelled;
  return absl::OkStatus();
}

absl::Status QueryRun::CancelInClickHouse() {
  const absl::Status drained = cursor_->Cancel(options_.cancel_drain_timeout);
  if (!drained.ok()) discard_ = true;
  const char* reason = CancelReason();
  kLog.Throttled(
      log::Level::kInfo, "query cancelled in ClickHouse", reason,
      WithTraceOf(*call_,
                  {{"query_id", query_id_},
                   {"reason", reason},
                   {"rows_sent", builder_.rows()},
                   {"drained", drained.ok()},
                   {"elapsed", absl::Trunc(clock_->Now() - sent_at_, absl::Milliseconds(1))}}));
  if (call_->shutting_down()) return absl::UnavailableError("chgate is shutting down");
  if (DeadlinePassed()) {
    return absl::DeadlineExceededError(
        "the call's deadline passed; the query was cancelled in ClickHouse");
  }
  return absl::CancelledError("the caller cancelled; the query was cancelled in ClickHouse");
}

const char* QueryRun::CancelReason() const {
  if (call_->shutting_down()) return "shutdown";
  if (DeadlinePassed()) return "deadline";
  if (!header_status_.ok()) return "result refused";
  return "caller cancelled";
}

void QueryRun::ReleaseConnection() {
  // The cursor goes first: a query left running is cancelled on a connection still in hand.
  cursor_.reset();
  if (discard_) conn_.Discard();
  conn_ = clickhouse::PooledConnection();
}

bool QueryRun::Send(v1::QueryResponse response) { return Send(QueryMessage(std::move(response))); }

bool QueryRun::Send(QueryMessage message) {
  const uint64_t rows = message.response.has_block() ? message.response.block().rows() : 0;
  size_t bytes = 0;
  if (!call_->Send(std::move(message), &bytes)) return false;
  if (observer_ != nullptr) observer_->Streamed(rows, bytes);
  return true;
}

void QueryRun::SendProgress(const clickhouse::Progress& progress) {
  v1::QueryResponse response;
  ToProto(progress, response.mutable_progress());
  if (!Send(std::move(response))) send_failed_ = true;
}

bool QueryRun::DeadlinePassed() const { return clock_->Now() >= call_->deadline(); }

}  // namespace chgate::service
