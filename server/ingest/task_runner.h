// TaskRunner: the Ingestor's threads for work that may block. Two FIFO queues, each with its own
// threads: conversions (requests whose table header must be looked up first) and flushes (one
// batch INSERT each, with its retries). It also keeps what the liveness watchdog reads: when each
// thread's current task started or last made progress.
//
// Thread-safe. Without threads (`threads` false, for tests) tasks wait until RunPending runs them
// on the calling thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/ingest/clock.h"

namespace chgate::ingest {

class TaskRunner {
 public:
  enum class Queue { kConvert, kFlush };

  // `clock` must outlive the runner.
  TaskRunner(Clock* clock, size_t convert_threads, size_t flush_threads, bool threads);
  // Runs what is queued, then joins the threads.
  ~TaskRunner();
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  void Post(Queue queue, std::function<void()> task);
  // Waits until `queue` holds no task that has not started (or `deadline`); true if it does not.
  bool AwaitStarted(Queue queue, absl::Time deadline);
  // Without threads: runs queued tasks (conversions first) on the calling thread until both
  // queues are empty. Returns whether anything ran.
  bool RunPending();
  // Runs what is queued, then stops and joins the threads (idempotent).
  void Stop();

  // Not OK when a thread has run one task for longer than `stall` without progress (a task
  // starting, or MarkProgress). Lock-free: reads atomics only.
  absl::Status CheckProgress(absl::Duration stall) const;
  // Records progress of the task running on the calling thread (nothing on other threads): a
  // task that retries on schedule calls it at every attempt, so it is not taken for a stall.
  static void MarkProgress(Clock* clock);

 private:
  void Loop(Queue queue, size_t slot);
  std::deque<std::function<void()>>& QueueOf(Queue queue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return queue == Queue::kFlush ? flush_ : convert_;
  }

  Clock* const clock_;
  const size_t convert_threads_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> convert_ ABSL_GUARDED_BY(mu_);
  std::deque<std::function<void()>> flush_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Per thread, the Unix nanoseconds (of clock_) when its current task started or last made
  // progress; 0 while idle.
  std::unique_ptr<std::atomic<int64_t>[]> busy_since_;
  size_t slots_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace chgate::ingest
