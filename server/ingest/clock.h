// Clock: the time source and timer of the ingest and query paths, replaceable in tests (see
// tests/unit/ingest/fake_clock.h).
#pragma once

#include "absl/time/time.h"

namespace chgate::ingest {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;
  virtual void SleepUntil(absl::Time t) = 0;
};

// The system's clock (absl::Now, absl::SleepFor). Never destroyed.
Clock* RealClock();

}  // namespace chgate::ingest
