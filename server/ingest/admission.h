// Admission: who may join a batch. It owns the buffer's counts (the rows and bytes batches hold,
// which may take at most `buffer_limit` of the memory budget, and a table at most
// `table_budget_bytes`), the FIFO of requests waiting for room, and readiness with hysteresis.
//
// Thread-safe, behind its own lock. The Ingestor calls it under its own lock (so a request's
// admission and its append to the batch are one step). Under its lock it calls only the
// observer's Buffered and WaitingRequests (which, like every observer call, must be quick and
// take no lock of chgate's) and the logger, so no lock is ever taken after it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/ingest/batch.h"
#include "server/ingest/memory_budget.h"
#include "server/ingest/observer.h"

namespace chgate::ingest {

class Admission {
 public:
  struct Options {
    uint64_t memory_budget_bytes = 0;  // for the log line of a full budget
    uint64_t buffer_limit = 0;         // the most bytes batches hold together
    uint64_t table_budget_bytes = 0;   // the most one table's batch holds; 0: no such budget
    double ready_high_water = 0.9;     // Full() from this share of buffer_limit on ...
    double ready_low_water = 0.7;      // ... until the buffer is back below this share
  };
  struct Counts {
    uint64_t buffered_rows = 0;
    uint64_t buffered_bytes = 0;
    uint64_t waiting = 0;
  };

  // `budget` must outlive it (its buffered count follows this one's); `observer` may be null.
  Admission(Options options, MemoryBudget* budget, IngestObserver* observer);
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  // Queues `p` behind the requests already waiting.
  void Wait(std::shared_ptr<PendingRequest> p) ABSL_LOCKS_EXCLUDED(mu_);
  // The first waiting request, or null.
  std::shared_ptr<PendingRequest> Front() const ABSL_LOCKS_EXCLUDED(mu_);
  // Takes `front`, which Front() returned, if it is still first and fits now beside the
  // `table_bytes` its table's batch holds: a request always fits an empty buffer (and an empty
  // table), so none waits forever. Null when it does not fit (a throttled log line says which
  // budget is full): the requests behind it wait too, in order. Null as well when another
  // request is first by now.
  std::shared_ptr<PendingRequest> TakeFrontIfFits(const PendingRequest& front, uint64_t table_bytes)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Puts a request taken by TakeFrontIfFits back in front, as the next to admit.
  void PutBack(std::shared_ptr<PendingRequest> p) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes out every waiting request whose deadline less `margin` is at or before `now`.
  std::vector<std::shared_ptr<PendingRequest>> Expire(absl::Time now, absl::Duration margin)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Takes out every waiting request.
  std::vector<std::shared_ptr<PendingRequest>> TakeAll() ABSL_LOCKS_EXCLUDED(mu_);
  // The earliest deadline less `margin` of a waiting request; InfiniteFuture when none waits.
  absl::Time NextDeadline(absl::Duration margin) const ABSL_LOCKS_EXCLUDED(mu_);

  // Moves `p`'s bytes from its reservation into the buffer's counts (added to the budget first,
  // so it never shows room that is not there).
  void Buffer(PendingRequest& p) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes rows and bytes out of the buffer's counts: flushed, or dropped.
  void Release(uint64_t rows, uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  // Readiness' half of it: true once the buffered bytes reach the high-water mark, and again
  // false only below the low-water mark (one threshold would flap the pod in and out of its
  // Services while the buffer hovers at it).
  bool Full() const ABSL_LOCKS_EXCLUDED(mu_);
  Counts counts() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void PublishWaitingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  MemoryBudget* const budget_;
  IngestObserver* const observer_;

  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<PendingRequest>> waiting_ ABSL_GUARDED_BY(mu_);
  uint64_t buffered_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t buffered_rows_ ABSL_GUARDED_BY(mu_) = 0;
  mutable bool above_high_water_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace chgate::ingest
