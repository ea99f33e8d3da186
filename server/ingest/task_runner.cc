#include "server/ingest/task_runner.h"

#include "absl/strings/str_cat.h"

namespace chgate::ingest {
namespace {

// The progress entry of the runner thread running this code (null on other threads).
thread_local std::atomic<int64_t>* tls_progress = nullptr;

}  // namespace

TaskRunner::TaskRunner(Clock* clock, size_t convert_threads, size_t flush_threads, bool threads)
    : clock_(clock), convert_threads_(convert_threads) {
  if (!threads) return;
  slots_ = convert_threads + flush_threads;
  busy_since_ = std::make_unique<std::atomic<int64_t>[]>(slots_);
  for (size_t i = 0; i < slots_; ++i) busy_since_[i].store(0);
  for (size_t i = 0; i < slots_; ++i) {
    threads_.emplace_back(
        [this, i] { Loop(i < convert_threads_ ? Queue::kConvert : Queue::kFlush, i); });
  }
}

TaskRunner::~TaskRunner() { Stop(); }

void TaskRunner::Post(Queue queue, std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  QueueOf(queue).push_back(std::move(task));
}

bool TaskRunner::AwaitStarted(Queue queue, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto empty = [this, queue]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return QueueOf(queue).empty(); };
  return mu_.AwaitWithDeadline(absl::Condition(&empty), deadline);
}

bool TaskRunner::RunPending() {
  bool ran = false;
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      auto& queue = !convert_.empty() ? convert_ : flush_;
      if (queue.empty()) return ran;
      task = std::move(queue.front());
      queue.pop_front();
    }
    task();
    ran = true;
  }
}

void TaskRunner::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void TaskRunner::Loop(Queue which, size_t slot) {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      auto& queue = QueueOf(which);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue.empty(); };
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

void TaskRunner::MarkProgress(Clock* clock) {
  if (tls_progress != nullptr) {
    tls_progress->store(absl::ToUnixNanos(clock->Now()), std::memory_order_relaxed);
  }
}

absl::Status TaskRunner::CheckProgress(absl::Duration stall) const {
  const absl::Time now = clock_->Now();
  for (size_t i = 0; i < slots_; ++i) {
    const int64_t since = busy_since_[i].load(std::memory_order_relaxed);
    if (since == 0) continue;
    const absl::Duration busy = now - absl::FromUnixNanos(since);
    if (busy > stall) {
      return absl::DeadlineExceededError(absl::StrCat(
          i < convert_threads_ ? "a conversion thread" : "a flush thread",
          " has made no progress (no task or ClickHouse attempt started or ended) for ",
          absl::FormatDuration(busy), " (limit ", absl::FormatDuration(stall), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace chgate::ingest
