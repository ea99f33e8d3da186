#include "server/service/query_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "server/service/call_trace.h"
#include "server/service/query_run.h"
#include "server/service/raw_messages.h"
#include "server/service/response_wire.h"
#include "server/service/status.h"
#include "server/sql/query_policy.h"

namespace chgate::service {
namespace {

// chgate's own query ids (batches, and queries without a caller's id) start with this.
constexpr char kOwnQueryIdPrefix[] = "chgate-";

}  // namespace

// One Query call. The worker thread builds and queues responses (Send), the gRPC thread writes
// them one at a time (OnWriteDone); Finish waits until the queue is empty.
class QueryExecutor::Call final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                                  public QueryCall {
 public:
  Call(QueryExecutor* executor, grpc::CallbackServerContext* context)
      : executor_(executor), context_(context), trace_(CallTrace(*context)) {
    const auto deadline = context->deadline();
    deadline_ = deadline == std::chrono::system_clock::time_point::max()
                    ? executor->clock_->Now() + executor->options_.default_timeout
                    : absl::FromChrono(deadline);
  }

  grpc::CallbackServerContext* context() const { return context_; }
  const v1::QueryRequest& request() const override { return request_; }
  // Parses the serialized request; called once, before the call is queued.
  absl::Status Parse(const grpc::ByteBuffer& raw) { return ParseRawMessage(raw, &request_); }
  // Before the call is queued only.
  void set_query_id(std::string id) { request_.set_query_id(std::move(id)); }
  absl::Time deadline() const override { return deadline_; }
  std::optional<text::TraceContext> trace() const override { return trace_; }
  bool cancelled() const override { return cancelled_.load(std::memory_order_acquire); }
  bool shutting_down() const override { return shutdown_.load(std::memory_order_acquire); }

  // Stops the query from chgate's side (server shutdown).
  void Interrupt() {
    shutdown_.store(true, std::memory_order_release);
    cancelled_.store(true, std::memory_order_release);
    absl::MutexLock lock(&mu_);
    cv_.SignalAll();
  }

  // Queues `response` for writing, waiting while the query's buffered bytes are at the limit.
  // False when the call was cancelled or a write failed (nothing more will be written).
  bool Send(QueryMessage message, size_t* bytes) override {
    const size_t size = message.ByteSize();
    *bytes = size;
    QueryMessage* start = nullptr;
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
        queue_.push_back({std::move(message), size});
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
  v1::Block* TakeBlock() override { return recycler_->Take().release(); }

  void OnWriteDone(bool ok) override {
    QueryMessage* next = nullptr;
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
      if (executor_->observer_ != nullptr) {
        executor_->observer_->QueryRefused(absl::CancelledError("cancelled while waiting"));
      }
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "query cancelled while waiting to start"));
    }
  }

  void OnDone() override { delete this; }

 private:
  // Starts writing `message` (the front of the queue); one write is in flight at a time, so
  // writing_bytes_ is free. A Block in `message` moves into the serialized bytes, which reference
  // its buffers, and comes back to recycler_ when gRPC has released them.
  void Write(QueryMessage& message) {
    SerializeQueryResponse(&message, recycler_, &writing_bytes_);
    StartWrite(&writing_bytes_);
  }

  QueryExecutor* const executor_;
  grpc::CallbackServerContext* const context_;
  const std::optional<text::TraceContext> trace_;  // from the call's metadata
  v1::QueryRequest request_;  // set by Parse before the call is queued, read-only afterwards
  grpc::ByteBuffer writing_bytes_;
  absl::Time deadline_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> shutdown_{false};

  absl::Mutex mu_;
  absl::CondVar cv_;
  // Responses not yet written; while writing_, the front one is being written.
  struct Queued {
    QueryMessage message;
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

QueryExecutor::QueryExecutor(clickhouse::Pool* pool, QueryServiceOptions options,
                             QueryObserver* observer, ingest::Clock* clock)
    : pool_(pool),
      options_(std::move(options)),
      policy_{.allow_writes = options_.allow_writes,
              .allowed_table_functions = {options_.allowed_table_functions.begin(),
                                          options_.allowed_table_functions.end()}},
      observer_(observer),
      clock_(clock) {
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
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    const std::string& identity) {
  auto* call = new Call(this, context);
  auto refuse = [&](const absl::Status& status) {
    if (observer_ != nullptr) observer_->QueryRefused(status);
    call->Finish(ToGrpcStatus(status, context));
    return call;
  };
  if (absl::Status parsed = call->Parse(*raw_request); !parsed.ok()) return refuse(parsed);
  const v1::QueryRequest* request = &call->request();
  if (sql::IsEmptyStatement(request->sql())) {
    return refuse(absl::InvalidArgumentError("QueryRequest.sql is empty"));
  }
  if (!request->query_id().empty()) {
    if (absl::StartsWithIgnoreCase(request->query_id(), kOwnQueryIdPrefix)) {
      return refuse(absl::InvalidArgumentError(
          absl::StrCat("query_id may not start with \"", kOwnQueryIdPrefix,
                       "\": chgate names its own queries so")));
    }
    if (!identity.empty()) {
      call->set_query_id(absl::StrCat(absl::StrReplaceAll(identity, {{"%", "%25"}, {":", "%3A"}}),
                                      ":", request->query_id()));
    }
  }
  for (const auto& [name, value] : request->settings()) {
    if (absl::Status allowed = options_.settings.Check(name, value); !allowed.ok()) {
      return refuse(allowed);
    }
  }
  if (absl::Status allowed = sql::CheckQuery(request->sql(), policy_); !allowed.ok()) {
    return refuse(allowed);
  }
  absl::StatusOr<std::vector<std::string>> assigned = sql::AssignedSettings(request->sql());
  if (!assigned.ok()) return refuse(assigned.status());
  for (const std::string& name : *assigned) {
    if (absl::Status allowed = options_.settings.CheckAssigned(name); !allowed.ok()) {
      return refuse(allowed);
    }
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
    if (observer_ != nullptr) observer_->QueryRefused(absl::UnavailableError("shutting down"));
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
        if (observer_ != nullptr) {
          observer_->QueryRefused(absl::ResourceExhaustedError("no worker before the deadline"));
        }
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
  const absl::Status status = QueryRun(call, pool_, options_, observer_, clock_).Run();
  grpc::Status finished = ToGrpcStatus(status, call->context());
  {
    // Once finished, the call may be deleted at any time: BeginShutdown must not see it.
    absl::MutexLock lock(&mu_);
    running_.erase(std::find(running_.begin(), running_.end(), call));
  }
  call->FinishWhenDrained(std::move(finished));
}

}  // namespace chgate::service
