// A manual ingest::Clock for tests: time moves only by Advance, or when a sleeper "sleeps" (its
// SleepUntil jumps the time forward and records how long it asked to sleep). Starts far from the
// system clock, so code that mixes the two shows it. Thread-safe.
#pragma once

#include <algorithm>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/ingest/clock.h"

namespace chgate::ingest::testing {

class FakeClock final : public Clock {
 public:
  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void SleepUntil(absl::Time t) override {
    absl::MutexLock lock(&mu_);
    sleeps_.push_back(t - now_);
    now_ = std::max(now_, t);
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  // What each SleepUntil asked for, in order.
  std::vector<absl::Duration> sleeps() {
    absl::MutexLock lock(&mu_);
    return sleeps_;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::FromUnixSeconds(1'000'000'000);
  std::vector<absl::Duration> sleeps_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chgate::ingest::testing
