#include "server/common/scheduler.h"

#include <algorithm>
#include <utility>

namespace chgate {

Scheduler::Job& Scheduler::Job::operator=(Job&& other) noexcept {
  if (this != &other) {
    Cancel();
    scheduler_ = other.scheduler_;
    id_ = other.id_;
    other.scheduler_ = nullptr;
  }
  return *this;
}

void Scheduler::Job::Cancel() {
  if (scheduler_ == nullptr) return;
  scheduler_->Cancel(id_);
  scheduler_ = nullptr;
}

Scheduler::Scheduler() : thread_([this] { Loop(); }) {}

Scheduler::~Scheduler() { Stop(); }

Scheduler::Job Scheduler::Every(std::string name, absl::Duration period,
                                std::function<void()> run) {
  if (period <= absl::ZeroDuration()) period = absl::Seconds(1);
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  entries_.emplace(id, Entry{.name = std::move(name),
                             .period = period,
                             .run = std::move(run),
                             .due = absl::Now() + period});
  ++changes_;
  return Job(this, id);
}

void Scheduler::Cancel(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  // Not started again from now on, so the wait below ends with the run in progress (a waiter
  // that only caught the moment between two runs could starve).
  it->second.cancelled = true;
  ++changes_;
  if (running_ == id && std::this_thread::get_id() == loop_thread_) {
    it->second.erase_after_run = true;  // a job cancelling itself: the loop drops it
    return;
  }
  // A running job's function stays alive until it returns.
  const auto not_running = [this, id]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return running_ != id; };
  mu_.Await(absl::Condition(&not_running));
  entries_.erase(id);
}

void Scheduler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    ++changes_;
  }
  if (thread_.joinable()) thread_.join();
}

uint64_t Scheduler::runs(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = runs_.find(name);
  return it == runs_.end() ? 0 : it->second;
}

void Scheduler::Loop() {
  absl::MutexLock lock(&mu_);
  loop_thread_ = std::this_thread::get_id();
  while (!stopping_) {
    auto next = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.cancelled) continue;
      if (next == entries_.end() || it->second.due < next->second.due) next = it;
    }
    const uint64_t seen = changes_;
    const auto changed = [this, seen]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return changes_ != seen; };
    if (next == entries_.end()) {
      mu_.Await(absl::Condition(&changed));
      continue;
    }
    const absl::Time now = absl::Now();
    if (next->second.due > now) {
      mu_.AwaitWithDeadline(absl::Condition(&changed), next->second.due);
      continue;
    }
    const uint64_t id = next->first;
    running_ = id;
    ++runs_[next->second.name];
    // The entry stays in the map while it runs: Cancel waits for running_ to change.
    std::function<void()>& run = next->second.run;
    mu_.Unlock();
    run();
    mu_.Lock();
    running_ = 0;
    if (auto it = entries_.find(id); it != entries_.end()) {
      if (it->second.erase_after_run) {
        entries_.erase(it);
      } else if (!it->second.cancelled) {
        it->second.due = std::max(it->second.due + it->second.period, absl::Now());
      }
    }
  }
}

}  // namespace chgate
