// FlushDelay: one batch's adaptive flush delay. When ClickHouse shows part pressure for the
// table (an INSERT refused with TOO_MANY_PARTS, or a single attempt that took at least
// `slow_insert`: the server delays inserts into a table with too many active parts), the delay
// doubles, up to `ceiling`; after `relax_after` flushes in a row without pressure it halves
// again, down to the configured delay. A ceiling at or below the configured delay turns it off.
//
// Thread-safe: the scheduler reads it (under the Ingestor's lock, which is taken before this
// one), the batch's flush thread adapts it.
#pragma once

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/ingest/observer.h"

namespace chgate::ingest {

struct FlushDelaySettings {
  absl::Duration ceiling = absl::Seconds(5);
  absl::Duration slow_insert = absl::Seconds(2);
  int relax_after = 10;
};

class FlushDelay {
 public:
  // `observer` (may be null) hears of every change, for the table `label`.
  FlushDelay(std::string label, absl::Duration configured, FlushDelaySettings settings,
             IngestObserver* observer);
  FlushDelay(const FlushDelay&) = delete;
  FlushDelay& operator=(const FlushDelay&) = delete;

  // The delay now: the adapted one, else the configured one.
  absl::Duration Current() const ABSL_LOCKS_EXCLUDED(mu_);
  // After a flush that saw `too_many_parts` (any attempt) and took `took` over `attempts`
  // attempts. Logs and reports a change.
  void Adapt(bool too_many_parts, absl::Duration took, int attempts) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string label_;
  const absl::Duration configured_;
  const FlushDelaySettings settings_;
  IngestObserver* const observer_;
  mutable absl::Mutex mu_;
  absl::Duration adapted_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();  // 0: the configured one
  int calm_flushes_ ABSL_GUARDED_BY(mu_) = 0;  // in a row without pressure, while adapted
};

}  // namespace chgate::ingest
