#include "server/ingest/flush_delay.h"

#include <algorithm>

#include "server/log/log.h"

namespace chgate::ingest {
namespace {
constexpr log::Component kLog("ingest");
}  // namespace

FlushDelay::FlushDelay(std::string label, absl::Duration configured, FlushDelaySettings settings,
                       IngestObserver* observer)
    : label_(std::move(label)), configured_(configured), settings_(settings), observer_(observer) {}

absl::Duration FlushDelay::Current() const {
  absl::MutexLock lock(&mu_);
  return adapted_ > absl::ZeroDuration() ? adapted_ : configured_;
}

void FlushDelay::Adapt(bool too_many_parts, absl::Duration took, int attempts) {
  if (settings_.ceiling <= configured_) return;
  // A retried flush's time includes backoff: only a single attempt's time says the server is slow.
  const bool slow = attempts == 1 && took >= settings_.slow_insert;
  absl::Duration before, after;
  const char* reason = nullptr;
  {
    absl::MutexLock lock(&mu_);
    before = adapted_ > absl::ZeroDuration() ? adapted_ : configured_;
    after = before;
    if (too_many_parts || slow) {
      calm_flushes_ = 0;
      after = std::min(settings_.ceiling, before * 2);
      reason = too_many_parts ? "too_many_parts" : "slow_insert";
    } else if (before > configured_ && ++calm_flushes_ >= settings_.relax_after) {
      calm_flushes_ = 0;
      after = std::max(configured_, before / 2);
      reason = "pressure_gone";
    }
    adapted_ = after;
  }
  if (after == before) return;
  kLog.Info(after > before ? "flush delay raised" : "flush delay lowered",
            {{"table", label_},
             {"from", before},
             {"to", after},
             {"reason", reason},
             {"insert_took", absl::Trunc(took, absl::Milliseconds(1))},
             {"ceiling", settings_.ceiling},
             {"configured", configured_}});
  if (observer_ != nullptr) observer_->DelayChanged(label_, after);
}

}  // namespace chgate::ingest
