// Periodic jobs on one thread: the process's housekeeping (health refresh, reloads of changed
// files, log sweeps) instead of a sleeping thread each. Jobs share the thread, so a job must not
// block (no network, no waiting on another component's slow path); work that blocks keeps a
// thread of its own (flushes, queries, the spool's syncs, the pool's connects) and so does the
// liveness watchdog, which must run while anything else is stuck.
//
// Thread-safe. A job never runs concurrently with itself; jobs due together run one after
// another in the order they became due.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace chgate {

class Scheduler {
 public:
  // A scheduled job: Cancel (or destruction) stops it. Movable; must not outlive its Scheduler.
  class Job {
   public:
    Job() = default;
    Job(Job&& other) noexcept : scheduler_(other.scheduler_), id_(other.id_) {
      other.scheduler_ = nullptr;
    }
    Job& operator=(Job&& other) noexcept;
    ~Job() { Cancel(); }

    // When it returns, the job is not running and will not run again (called from the job
    // itself, it will not run again once it returns).
    void Cancel();

   private:
    friend class Scheduler;
    Job(Scheduler* scheduler, uint64_t id) : scheduler_(scheduler), id_(id) {}
    Scheduler* scheduler_ = nullptr;
    uint64_t id_ = 0;
  };

  // Starts the thread.
  Scheduler();
  // Stop().
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Runs `run` every `period` (1 s when not positive), the first time one period from now, until
  // the Job is cancelled or the scheduler stops. A run that takes longer than the period delays the
  // next (runs are never queued up). `name` identifies the job in checks.
  [[nodiscard]] Job Every(std::string name, absl::Duration period, std::function<void()> run);

  // Stops the thread after the job running now, if any, returns; no job runs afterwards.
  // Idempotent.
  void Stop();

  // How many times the job named `name` has run (for tests; 0 for an unknown name).
  uint64_t runs(const std::string& name) const;

 private:
  struct Entry {
    std::string name;
    absl::Duration period;
    std::function<void()> run;
    absl::Time due;
    bool cancelled = false;        // never started again
    bool erase_after_run = false;  // cancelled by the job itself, while it ran
  };

  void Loop();
  void Cancel(uint64_t id);

  mutable absl::Mutex mu_;
  std::map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> runs_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t running_ ABSL_GUARDED_BY(mu_) = 0;  // the id of the job running now; 0: none
  uint64_t changes_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by Every, Cancel and Stop
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The loop's thread, for a job that cancels itself (read under mu_; thread_ itself is only
  // touched by the constructor and Stop).
  std::thread::id loop_thread_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace chgate
