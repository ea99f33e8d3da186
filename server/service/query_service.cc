#include "server/service/query_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/clickhouse/cursor.h"
#include "server/clickhouse/protocol/error_codes.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/clickhouse/protocol/revision.h"
#include "server/common/status_macros.h"
#include "server/ingest/inserter.h"
#include "server/log/log.h"
#include "server/service/query_block.h"
#include "server/service/raw_messages.h"
#include "server/service/response_wire.h"
#include "server/service/status.h"
#include "server/sql/identifier.h"
#include "server/sql/query_policy.h"

namespace chgate::service {
namespace {

constexpr log::Component kLog("query");

// Settings chgate sets itself; a request may not.
constexpr const char* kReservedSettings[] = {
    "readonly",
    "allow_ddl",
    "network_compression_method",
    "network_zstd_compression_level",
    "max_execution_time_leaf",
};

std::string GenerateQueryId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const uint64_t hi = rng();
  const uint64_t lo = rng();
  return absl::StrFormat("%08x-%04x-4%03x-%04x-%012x", hi >> 32, (hi >> 16) & 0xffff, hi & 0xfff,
                         ((lo >> 48) & 0x3fff) | 0x8000, lo & 0xffffffffffffULL);
}

void ToProto(const clickhouse::Progress& p, v1::Progress* out) {
  out->set_read_rows(p.rows);
  out->set_read_bytes(p.bytes);
  out->set_total_rows_to_read(p.total_rows);
  out->set_total_bytes_to_read(p.total_bytes);
  out->set_written_rows(p.written_rows);
  out->set_written_bytes(p.written_bytes);
  out->set_elapsed_ns(p.elapsed_ns);
}

}  // namespace

// One Query call. The worker thread builds and queues responses (Send), the gRPC thread writes
// them one at a time (OnWriteDone); Finish waits until the queue is empty.
class QueryExecutor::Call final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  Call(QueryExecutor* executor, grpc::CallbackServerContext* context)
      : executor_(executor), context_(context) {
    const auto deadline = context->deadline();
    deadline_ = deadline == std::chrono::system_clock::time_point::max()
                    ? absl::Now() + executor->options_.default_timeout
                    : absl::FromChrono(deadline);
  }

  grpc::CallbackServerContext* context() const { return context_; }
  const v1::QueryRequest& request() const { return request_; }
  // Parses the serialized request; called once, before the call is queued.
  absl::Status Parse(const grpc::ByteBuffer& raw) { return ParseRawMessage(raw, &request_); }
  absl::Time deadline() const { return deadline_; }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  bool shutting_down() const { return shutdown_.load(std::memory_order_acquire); }

  // Stops the query from chgate's side (server shutdown).
  void Interrupt() {
    shutdown_.store(true, std::memory_order_release);
    cancelled_.store(true, std::memory_order_release);
    absl::MutexLock lock(&mu_);
    cv_.SignalAll();
  }

  // Queues `response` for writing, waiting while the query's buffered bytes are at the limit.
  // False when the call was cancelled or a write failed (nothing more will be written).
  bool Send(v1::QueryResponse response, size_t* bytes) {
    const size_t size = response.ByteSizeLong();
    *bytes = size;
    v1::QueryResponse* start = nullptr;
    bool timed_out = false;
    {
      absl::MutexLock lock(&mu_);
      while (queued_bytes_ >= executor_->options_.max_buffered_bytes && !cancelled() &&
             !write_failed_ && !timed_out) {
        // A caller without a deadline that stops reading is still bounded by the default one.
        timed_out = cv_.WaitWithDeadline(&mu_, deadline_);
      }
      if (cancelled() || write_failed_) return false;
      if (!timed_out) {
        queue_.push_back({std::move(response), size});
        queued_bytes_ += size;
      }
      if (!writing_) {
        writing_ = true;
        start = &queue_.front().message;
      }
    }
    if (timed_out) {
      // The write in flight will never complete by itself: end the RPC (outside the lock, as
      // gRPC may run OnCancel inline), which fails it and lets Finish through.
      context_->TryCancel();
      return false;
    }
    if (start != nullptr) Write(*start);
    return true;
  }

  // Ends the call with `status` once every queued response is written.
  void FinishWhenDrained(grpc::Status status) {
    {
      absl::MutexLock lock(&mu_);
      if (writing_) {
        finish_ = std::move(status);
        return;
      }
    }
    Finish(status);
  }

  // An empty Block for the next response, reusing the buffers of one already written when there
  // is one (fresh half-megabyte buffers for every message would cost page faults).
  v1::Block* TakeBlock() { return recycler_->Take().release(); }

  void OnWriteDone(bool ok) override {
    v1::QueryResponse* next = nullptr;
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      queued_bytes_ -= queue_.front().bytes;
      queue_.pop_front();
      if (!ok) {
        write_failed_ = true;
        queue_.clear();
        queued_bytes_ = 0;
      }
      if (!queue_.empty()) {
        next = &queue_.front().message;
      } else {
        writing_ = false;
        finish = std::move(finish_);
        finish_.reset();
      }
      cv_.SignalAll();
    }
    if (next != nullptr) {
      Write(*next);
    } else if (finish.has_value()) {
      Finish(*finish);
    }
  }

  void OnCancel() override {
    cancelled_.store(true, std::memory_order_release);
    {
      absl::MutexLock lock(&mu_);
      cv_.SignalAll();
    }
    if (executor_->Withdraw(this)) {
      if (executor_->metrics_ != nullptr) {
        executor_->metrics_->QueryRefused(metrics::kResultCancelled);
      }
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "query cancelled while waiting to start"));
    }
  }

  void OnDone() override { delete this; }

 private:
  // Starts writing `message` (the front of the queue); one write is in flight at a time, so
  // writing_bytes_ is free. A Block in `message` moves into the serialized bytes, which reference
  // its buffers, and comes back to recycler_ when gRPC has released them.
  void Write(v1::QueryResponse& message) {
    SerializeQueryResponse(&message, recycler_, &writing_bytes_);
    StartWrite(&writing_bytes_);
  }

  QueryExecutor* const executor_;
  grpc::CallbackServerContext* const context_;
  v1::QueryRequest request_;  // set by Parse before the call is queued, read-only afterwards
  grpc::ByteBuffer writing_bytes_;
  absl::Time deadline_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> shutdown_{false};

  absl::Mutex mu_;
  absl::CondVar cv_;
  // Responses not yet written; while writing_, the front one is being written.
  struct Queued {
    v1::QueryResponse message;
    size_t bytes;  // its serialized size, computed once in Send
  };
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> finish_ ABSL_GUARDED_BY(mu_);
  // Written blocks kept for reuse (at most kSpareBlocks, about a response's size each); shared
  // with the slices of written messages, which may outlive the call.
  static constexpr size_t kSpareBlocks = 3;
  const std::shared_ptr<BlockRecycler> recycler_ = std::make_shared<BlockRecycler>(kSpareBlocks);
};

namespace {

// Builds one query's responses: merges and splits blocks into messages of about `target` bytes.
class ResponseBuilder {
 public:
  ResponseBuilder(size_t target, std::function<bool(v1::QueryResponse)> send,
                  std::function<v1::Block*()> take_block)
      : target_(target), send_(std::move(send)), take_block_(std::move(take_block)) {}

  // Adds every row of `block`; sends full messages. False once sending failed.
  bool Add(const clickhouse::Block& block) {
    const size_t rows = block.rows();
    size_t begin = 0;
    while (begin < rows) {
      const size_t room = target_ > pending_bytes_ ? target_ - pending_bytes_ : 0;
      size_t end = rows;
      size_t bytes = Estimate(block, begin, end);
      if (bytes > room) {
        // The largest end whose rows fit the room (estimates grow with the row range).
        size_t lo = begin, hi = rows;
        while (lo < hi) {
          const size_t mid = lo + (hi - lo + 1) / 2;
          if (Estimate(block, begin, mid) <= room) {
            lo = mid;
          } else {
            hi = mid - 1;
          }
        }
        end = lo;
        if (end == begin) {
          if (pending_rows() > 0) {
            if (!Flush()) return false;
            continue;
          }
          end = begin + 1;  // one row larger than the target still goes, alone
        }
        bytes = Estimate(block, begin, end);
      }
      if (pending_rows() == 0) {
        pending_since_ = absl::Now();
        if (!pending_.has_block()) pending_.set_allocated_block(take_block_());
      }
      AppendResultBlock(block, begin, end, pending_.mutable_block());
      pending_bytes_ += bytes;
      begin = end;
      if (pending_bytes_ >= target_ - target_ / 8 && !Flush()) return false;
    }
    return true;
  }

  // Sends the rows gathered so far, if any.
  bool Flush() {
    if (pending_rows() == 0) return true;
    const uint64_t rows = pending_.block().rows();
    v1::QueryResponse out = std::move(pending_);
    pending_.Clear();
    pending_bytes_ = 0;
    ++blocks_;
    rows_ += rows;
    return send_(std::move(out));
  }

  uint64_t pending_rows() const { return pending_.has_block() ? pending_.block().rows() : 0; }
  // When the oldest pending row was added.
  absl::Time pending_since() const { return pending_since_; }
  uint64_t rows() const { return rows_; }
  uint64_t blocks() const { return blocks_; }

 private:
  static size_t Estimate(const clickhouse::Block& block, size_t begin, size_t end) {
    size_t total = 0;
    for (const clickhouse::NamedColumn& c : block.columns()) {
      total += EstimateResultBytes(*c.column, begin, end);
    }
    return total;
  }

  const size_t target_;
  const std::function<bool(v1::QueryResponse)> send_;
  const std::function<v1::Block*()> take_block_;
  v1::QueryResponse pending_;
  size_t pending_bytes_ = 0;
  absl::Time pending_since_;
  uint64_t rows_ = 0;
  uint64_t blocks_ = 0;
};

// The message of a ClickHouse refusal caused by read-only mode, with what to do about it.
absl::Status ExplainReadOnly(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kPermissionDenied ||
      clickhouse::ClickHouseCode(status) != clickhouse::error_code::kReadonly) {
    return status;
  }
  return absl::PermissionDeniedError(
      absl::StrCat(status.message(),
                   " (chgate runs queries read-only; an operator can allow writes with "
                   "--query-allow-writes)"));
}

}  // namespace

QueryExecutor::QueryExecutor(clickhouse::Pool* pool, QueryServiceOptions options,
                             const metrics::QueryMetrics* metrics)
    : pool_(pool),
      options_(std::move(options)),
      policy_{.allow_writes = options_.allow_writes,
              .allowed_table_functions = {options_.allowed_table_functions.begin(),
                                          options_.allowed_table_functions.end()}},
      metrics_(metrics) {
  const size_t n = std::max<size_t>(1, options_.max_concurrent_queries);
  workers_.reserve(n);
  for (size_t i = 0; i < n; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  expiry_ = std::thread([this] { ExpiryLoop(); });
}

QueryExecutor::~QueryExecutor() {
  BeginShutdown();
  for (std::thread& t : workers_) t.join();
  expiry_.join();
}

size_t QueryExecutor::running() const {
  absl::MutexLock lock(&mu_);
  return running_.size();
}

size_t QueryExecutor::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiting_.size();
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* QueryExecutor::Start(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request) {
  auto* call = new Call(this, context);
  auto refuse = [&](const absl::Status& status) {
    if (metrics_ != nullptr) metrics_->QueryRefused(metrics::ResultLabel(status.code()));
    call->Finish(ToGrpcStatus(status, context));
    return call;
  };
  if (absl::Status parsed = call->Parse(*raw_request); !parsed.ok()) return refuse(parsed);
  const v1::QueryRequest* request = &call->request();
  if (sql::IsEmptyStatement(request->sql())) {
    return refuse(absl::InvalidArgumentError("QueryRequest.sql is empty"));
  }
  for (const auto& [name, value] : request->settings()) {
    for (const char* reserved : kReservedSettings) {
      if (absl::EqualsIgnoreCase(name, reserved)) {
        return refuse(absl::InvalidArgumentError(absl::StrCat(
            "setting ", name, " is controlled by chgate and cannot be set per query")));
      }
    }
  }
  if (absl::Status allowed = sql::CheckQuery(request->sql(), policy_); !allowed.ok()) {
    return refuse(allowed);
  }
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      waiting_.push_back(call);
      ++waiting_generation_;
      return call;
    }
  }
  return refuse(absl::UnavailableError("chgate is shutting down"));
}

bool QueryExecutor::Withdraw(Call* call) {
  absl::MutexLock lock(&mu_);
  auto it = std::find(waiting_.begin(), waiting_.end(), call);
  if (it == waiting_.end()) return false;
  waiting_.erase(it);
  return true;
}

void QueryExecutor::BeginShutdown() {
  std::deque<Call*> refused;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    refused.swap(waiting_);
    for (Call* call : running_) call->Interrupt();
  }
  for (Call* call : refused) {
    if (metrics_ != nullptr) metrics_->QueryRefused(metrics::kResultUnavailable);
    call->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "chgate is shutting down"));
  }
}

void QueryExecutor::WorkerLoop() {
  while (true) {
    Call* call = nullptr;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](QueryExecutor* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stopping_ || !self->waiting_.empty();
          },
          this));
      if (waiting_.empty()) return;  // stopping
      call = waiting_.front();
      waiting_.pop_front();
      running_.push_back(call);
    }
    Run(call);  // takes `call` out of running_ before finishing it
  }
}

void QueryExecutor::ExpiryLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    absl::Time next = absl::InfiniteFuture();
    const absl::Time now = absl::Now();
    std::vector<Call*> expired;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      const absl::Time limit = (*it)->deadline() - options_.deadline_margin;
      if (limit <= now) {
        expired.push_back(*it);
        it = waiting_.erase(it);
      } else {
        next = std::min(next, limit);
        ++it;
      }
    }
    if (!expired.empty()) {
      mu_.Unlock();
      for (Call* call : expired) {
        if (metrics_ != nullptr) metrics_->QueryRefused(metrics::kResultResourceExhausted);
        call->Finish(
            ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
                             "too many concurrent queries: all ", options_.max_concurrent_queries,
                             " query slots stayed busy until the call's deadline")),
                         call->context()));
      }
      mu_.Lock();
      continue;
    }
    // Wakes for a new waiting call (even if a worker took another one meanwhile), for
    // shutdown, or at the earliest deadline.
    struct Args {
      QueryExecutor* self;
      uint64_t generation;
    } args{this, waiting_generation_};
    mu_.AwaitWithDeadline(absl::Condition(
                              +[](Args* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                return a->self->stopping_ ||
                                       a->self->waiting_generation_ != a->generation;
                              },
                              &args),
                          next);
  }
}

void QueryExecutor::Run(Call* call) {
  const absl::Time started = absl::Now();
  if (metrics_ != nullptr) metrics_->QueryStarted();
  const v1::QueryRequest& request = call->request();

  auto send = [&](v1::QueryResponse response) {
    const uint64_t rows = response.has_block() ? response.block().rows() : 0;
    size_t bytes = 0;
    if (!call->Send(std::move(response), &bytes)) return false;
    if (metrics_ != nullptr) metrics_->Streamed(rows, bytes);
    return true;
  };

  absl::Status status = [&]() -> absl::Status {
    if (call->cancelled()) return absl::CancelledError("query cancelled before it started");
    // In slices, so that a caller who cancels while every connection is busy frees its slot.
    const absl::Time acquire_until = call->deadline() - options_.deadline_margin;
    absl::StatusOr<clickhouse::PooledConnection> acquired;
    while (true) {
      acquired = pool_->Acquire(std::min(acquire_until, absl::Now() + absl::Milliseconds(200)));
      if (acquired.ok() || !absl::IsDeadlineExceeded(acquired.status()) ||
          absl::Now() >= acquire_until) {
        break;
      }
      if (call->cancelled()) return absl::CancelledError("query cancelled before it started");
    }
    if (!acquired.ok()) {
      if (absl::IsDeadlineExceeded(acquired.status())) {
        return absl::ResourceExhaustedError(
            absl::StrCat("no ClickHouse connection became free before the deadline: ",
                         acquired.status().message()));
      }
      return acquired.status();
    }
    clickhouse::PooledConnection conn = *std::move(acquired);
    if (!request.parameters().empty() && conn->revision() < clickhouse::revision::kParameters) {
      return absl::UnimplementedError(absl::StrCat(
          "query parameters need a ClickHouse server with native protocol revision ",
          clickhouse::revision::kParameters, " or newer; this one speaks ", conn->revision()));
    }
    // A statement that may change the session (USE, SET, temporary tables) does not hand its
    // connection back to the pool.
    bool discard = !sql::KeepsSession(request.sql());
    // Runs after the cursor below is gone (it is declared later) and before `conn` returns to
    // the pool: a connection switched to another database, or not drained, is closed instead.
    absl::Cleanup discard_if_needed = [&] {
      if (discard) conn.Discard();
    };
    if (!request.database().empty()) {
      // The native protocol names the database only at the handshake: switch this connection
      // and close it afterwards rather than hand a changed session back to the pool.
      discard = true;
      absl::Status used =
          conn->Select({.query = absl::StrCat("USE ", sql::QuoteIdentifier(request.database()))},
                       [](const clickhouse::Block&) { return absl::OkStatus(); });
      if (!used.ok()) return used;
    }

    clickhouse::QueryParams params;
    params.query_id = request.query_id().empty() ? GenerateQueryId() : request.query_id();
    params.query = request.sql();
    uint64_t max_execution_time = 0;
    for (const auto& [name, value] : request.settings()) {
      if (name == "max_execution_time") {
        if (!absl::SimpleAtoi(value, &max_execution_time)) {
          return absl::InvalidArgumentError(
              absl::StrCat("setting max_execution_time needs whole seconds, got '", value, "'"));
        }
        continue;
      }
      params.settings.push_back({.name = name, .value = value, .important = true});
    }
    for (const auto& [name, value] : request.parameters()) {
      params.parameters.emplace_back(name, value);
    }
    // The call's deadline bounds the query in ClickHouse too (whole seconds, rounded up).
    const double left = absl::ToDoubleSeconds(call->deadline() - absl::Now());
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

    const bool send_progress = request.send_progress();
    const std::string query_id = params.query_id;
    bool send_failed = false;
    uint32_t target = request.max_response_bytes();
    if (target == 0) target = options_.response_bytes;
    target = std::min(target, options_.max_response_bytes);
    ResponseBuilder builder(target, send, [call] { return call->TakeBlock(); });

    // The header goes out as soon as the server names the columns (before it executes), so
    // progress can follow at once; progress that comes even earlier is held back until then.
    absl::Status header_status;
    bool header_sent = false;
    std::optional<clickhouse::Progress> early_progress;
    auto send_progress_message = [&](const clickhouse::Progress& p) {
      v1::QueryResponse response;
      ToProto(p, response.mutable_progress());
      if (!send(std::move(response))) send_failed = true;
    };
    clickhouse::CursorOptions cursor_options;
    cursor_options.on_header = [&](const clickhouse::Block& columns) {
      header_status = CheckResultColumns(columns);
      if (!header_status.ok()) return;
      v1::QueryResponse header;
      for (const clickhouse::NamedColumn& c : columns.columns()) {
        auto* col = header.mutable_header()->add_columns();
        col->set_name(c.name);
        col->set_type(c.column->type_name());
      }
      header.mutable_header()->set_query_id(query_id);
      header.mutable_header()->set_timezone(conn->server_info().timezone);
      if (!send(std::move(header))) {
        send_failed = true;
        return;
      }
      header_sent = true;
      if (early_progress.has_value()) send_progress_message(*early_progress);
    };
    if (send_progress) {
      cursor_options.on_progress = [&](const clickhouse::Progress& p) {
        if (send_failed) return;
        if (!header_sent) {
          if (!early_progress.has_value()) early_progress.emplace();
          early_progress->Add(p);
          return;
        }
        send_progress_message(p);
      };
    }
    // Asked between packets and while waiting for the server: rows gathered longer than
    // coalesce_delay go out (also while the server sends only progress), and the query stops
    // when the call is cancelled, its deadline passed (a call without one ends at
    // options_.default_timeout), a message could not be sent or the header was refused.
    cursor_options.interrupted = [&] {
      if (builder.pending_rows() > 0 && !send_failed &&
          absl::Now() >= builder.pending_since() + options_.coalesce_delay && !builder.Flush()) {
        send_failed = true;
      }
      return send_failed || !header_status.ok() || call->cancelled() ||
             absl::Now() >= call->deadline();
    };
    // Polling at half the delay bounds how long rows wait to 1.5 x coalesce_delay.
    cursor_options.poll_interval = std::min(
        absl::Milliseconds(50), std::max(options_.coalesce_delay / 2, absl::Milliseconds(1)));
    const absl::Time sent_at = absl::Now();
    clickhouse::Cursor cursor(conn.get(), std::move(params), std::move(cursor_options));

    auto cancel = [&]() -> absl::Status {
      absl::Status drained = cursor.Cancel(options_.cancel_drain_timeout);
      if (!drained.ok()) discard = true;
      const char* reason = call->shutting_down()             ? "shutdown"
                           : absl::Now() >= call->deadline() ? "deadline"
                           : !header_status.ok()             ? "result refused"
                                                             : "caller cancelled";
      kLog.Throttled(log::Level::kInfo, "query cancelled in ClickHouse", reason,
                     {{"query_id", query_id},
                      {"reason", reason},
                      {"rows_sent", builder.rows()},
                      {"drained", drained.ok()},
                      {"elapsed", absl::Trunc(absl::Now() - sent_at, absl::Milliseconds(1))}});
      if (call->shutting_down()) return absl::UnavailableError("chgate is shutting down");
      if (absl::Now() >= call->deadline()) {
        return absl::DeadlineExceededError(
            "the call's deadline passed; the query was cancelled in ClickHouse");
      }
      return absl::CancelledError("the caller cancelled; the query was cancelled in ClickHouse");
    };

    const clickhouse::Block* block = cursor.Next();
    while (block != nullptr) {
      if (!header_status.ok() || send_failed) break;
      if (!builder.Add(*block)) {
        send_failed = true;
        break;
      }
      // Rows gathered so far go out from the interrupted hook once they are coalesce_delay old.
      block = cursor.Next();
    }
    if (!header_status.ok()) {
      (void)cancel();
      return header_status;
    }
    if (cursor.interrupted() || send_failed) return cancel();
    // The cursor is done: rows it delivered go out even when an exception followed them.
    if (!builder.Flush()) return absl::CancelledError("the caller cancelled");
    if (!cursor.status().ok()) {
      if (clickhouse::ClickHouseCode(cursor.status()) ==
          clickhouse::error_code::kQueryWasCancelled) {
        // KILL QUERY in ClickHouse, or its own limits: the caller gets the error, the operator
        // the id to look up in system.query_log.
        kLog.Throttled(log::Level::kWarn, "query killed in ClickHouse", "",
                       {{"query_id", query_id},
                        {"rows_sent", builder.rows()},
                        {"error", cursor.status().message()}});
      }
      return ExplainReadOnly(cursor.status());
    }
    if (!header_sent) {
      // A statement without a result (SET, or DDL with writes allowed) names no columns.
      v1::QueryResponse header;
      header.mutable_header()->set_query_id(query_id);
      header.mutable_header()->set_timezone(conn->server_info().timezone);
      if (!send(std::move(header))) return absl::CancelledError("the caller cancelled");
      if (early_progress.has_value()) send_progress_message(*early_progress);
    }
    const absl::Duration elapsed = absl::Now() - sent_at;

    if (cursor.totals().has_value() && cursor.totals()->rows() > 0) {
      v1::QueryResponse totals;
      AppendResultBlock(*cursor.totals(), 0, cursor.totals()->rows(), totals.mutable_totals());
      if (!send(std::move(totals))) return absl::CancelledError("the caller cancelled");
    }
    if (cursor.extremes().has_value() && cursor.extremes()->rows() > 0) {
      v1::QueryResponse extremes;
      AppendResultBlock(*cursor.extremes(), 0, cursor.extremes()->rows(),
                        extremes.mutable_extremes());
      if (!send(std::move(extremes))) return absl::CancelledError("the caller cancelled");
    }
    v1::QueryResponse summary;
    v1::QuerySummary* s = summary.mutable_summary();
    s->set_rows(builder.rows());
    s->set_blocks(builder.blocks());
    s->set_received_bytes(cursor.received_bytes());
    s->set_decoded_bytes(cursor.decoded_bytes());
    const int64_t elapsed_ns = absl::ToInt64Nanoseconds(elapsed);
    s->mutable_elapsed()->set_seconds(elapsed_ns / 1000000000);
    s->mutable_elapsed()->set_nanos(static_cast<int32_t>(elapsed_ns % 1000000000));
    s->set_query_id(query_id);
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
    if (!send(std::move(summary))) return absl::CancelledError("the caller cancelled");
    return absl::OkStatus();
  }();

  if (metrics_ != nullptr) {
    metrics_->QueryFinished(metrics::ResultLabel(status.code()),
                            absl::ToDoubleSeconds(absl::Now() - started));
  }
  grpc::Status finished = ToGrpcStatus(status, call->context());
  {
    // Once finished, the call may be deleted at any time: BeginShutdown must not see it.
    absl::MutexLock lock(&mu_);
    running_.erase(std::find(running_.begin(), running_.end(), call));
  }
  call->FinishWhenDrained(std::move(finished));
}

}  // namespace chgate::service
