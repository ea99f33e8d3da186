#include "server/ingest/clock.h"

#include "absl/time/clock.h"

namespace chgate::ingest {
namespace {

class SystemClock final : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
  void SleepUntil(absl::Time t) override {
    const absl::Duration d = t - absl::Now();
    if (d > absl::ZeroDuration()) absl::SleepFor(d);
  }
};

}  // namespace

Clock* RealClock() {
  static SystemClock* clock = new SystemClock();
  return clock;
}

}  // namespace chgate::ingest
