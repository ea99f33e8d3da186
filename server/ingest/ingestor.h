// Ingestor: per-table batching with acknowledgement after commit.
//
// Submit() takes a request (rows or a typed block for one table), converts it on a worker thread
// against the table's cached INSERT header (all or nothing), waits for room in the memory budget,
// appends it to the table's batch and reports `on_admitted`. The batch is flushed as one INSERT
// when it reaches max_rows or max_bytes, when its oldest row is max_delay old, or earlier when a
// waiting caller's deadline needs it; `on_done` is called for every request in the batch once
// ClickHouse answered EndOfStream (or the batch failed for good). Transient failures are retried
// with exponential backoff and full jitter, re-sending the identical block with the same query id
// and deduplication token; permanent ones fail every request of the batch. Flushes of different
// tables run in parallel; a table has at most one flush in flight, so its rows commit in order.
//
// Thread-safe. Callbacks run on the Ingestor's threads and must not block.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/clickhouse/block.h"
#include "server/ingest/admission.h"
#include "server/ingest/batch.h"
#include "server/ingest/batch_traces.h"
#include "server/ingest/batcher.h"
#include "server/ingest/clock.h"
#include "server/ingest/convert.h"
#include "server/ingest/flush_delay.h"
#include "server/ingest/flush_runner.h"
#include "server/ingest/idempotency_keys.h"
#include "server/ingest/inserter.h"
#include "server/ingest/intake.h"
#include "server/ingest/key_log.h"
#include "server/ingest/memory_budget.h"
#include "server/ingest/observer.h"
#include "server/ingest/request.h"
#include "server/ingest/retry.h"
#include "server/ingest/schema_cache.h"
#include "server/ingest/spool_bridge.h"
#include "server/ingest/task_runner.h"
#include "server/ingest/value.h"
#include "server/log/log.h"
#include "server/spool/spool.h"

namespace chgate::ingest {

struct IngestOptions {
  std::string default_database = "default";
  BatchLimits limits;
  absl::flat_hash_map<std::string, BatchLimits> table_limits;  // "db.table" -> limits
  // Everything insert requests hold, from arrival to commit (see MemoryBudget). Rows join
  // batches only up to buffer_share of it (the buffer limit); the rest is room for requests
  // that arrive, are converted, or wait for room in the buffer.
  uint64_t memory_budget_bytes = 256 << 20;
  double buffer_share = 0.75;
  uint64_t table_budget_bytes = 0;  // 0: no per-table budget
  double ready_high_water = 0.9;    // readiness turns false above this share of the buffer limit
  double ready_low_water = 0.7;     // ... and true again only below this share (hysteresis)
  // Successful idempotency keys remembered at most (the oldest are forgotten first).
  size_t idempotency_max_keys = 100000;
  RetryPolicy retry;
  // Flush this long before the earliest waiting caller's deadline.
  absl::Duration deadline_margin = absl::Milliseconds(100);
  absl::Duration schema_ttl = absl::Minutes(1);
  // How long a successful request's idempotency key is remembered (in memory only).
  absl::Duration idempotency_window = absl::Minutes(10);
  AckMode default_ack = AckMode::kCommitted;
  ConvertOptions convert;
  size_t worker_threads = 2;  // conversion and header lookups
  size_t flush_threads = 8;   // parallel flushes (each holds one pooled connection)
  // Adaptive flush delay. When ClickHouse shows part pressure for a table (an INSERT refused
  // with TOO_MANY_PARTS, or a single attempt that took at least `slow_insert`: the server
  // delays inserts into a table with too many active parts), the table's flush delay doubles,
  // up to `max_delay_ceiling`; after `relax_after` flushes in a row without pressure it halves
  // again, down to the configured delay. A ceiling at or below the configured delay turns it
  // off for that table.
  absl::Duration max_delay_ceiling = absl::Seconds(5);
  absl::Duration slow_insert = absl::Seconds(2);
  int relax_after = 10;
  // Ask the server to merge the INSERTs of committed and accepted batches with others' (the
  // server's asynchronous inserts, from 21.11; see InsertAttempt::async). Spooled batches are
  // never sent this way: their exactly-once rests on each being a block of its own.
  bool async_insert = false;
  // The spool persisted requests are written to (AckMode::kPersisted; without one such requests
  // fail with FailedPrecondition), and a name for it that stays the same across restarts
  // (chgate keeps it in the spool directory): a spooled batch's deduplication token is
  // `<spool_id>-<LSN of its intent>` (its query id is random). Must outlive the Ingestor.
  spool::Spool* spool = nullptr;
  std::string spool_id;
  // With `spool`: a spool of its own for the idempotency keys of persisted requests once their
  // rows are committed (KeyLog), so that a resend after a restart is still answered; null: those
  // keys live in memory only. Must outlive the Ingestor.
  spool::Spool* key_spool = nullptr;
  // Persisted blocks kept in memory after their sync, so their INSERT sends them without reading
  // and decoding them back from the spool: at most this many bytes (0: memory_budget_bytes / 8),
  // counted in the memory budget as buffered rows. Blocks beyond it, and every block after a
  // restart, are read from the spool. The INSERT is the same either way (the spool record holds
  // exactly the block's columns).
  uint64_t spool_cache_bytes = 0;
  // false (tests): no threads; the test drives Poll() and RunPending() itself.
  bool background = true;
};

struct IngestStats {
  uint64_t buffered_rows = 0;
  uint64_t buffered_bytes = 0;
  uint64_t waiting_requests = 0;
  uint64_t flushes_in_flight = 0;
  uint64_t request_bytes = 0;  // held by requests not yet in a batch (MemoryBudget::requests)
  // Rows lost since the start: acknowledged in accepted mode and then failed for good, or still
  // buffered when Shutdown's drain ended (also in chgate_rows_dropped_total).
  uint64_t rows_dropped = 0;
  // Persisted rows waiting in the spool for their INSERT (queued or being sent).
  uint64_t spooled_rows = 0;
};

class Ingestor {
 public:
  // `inserter` and `clock` must outlive the Ingestor; `observer` may be null.
  Ingestor(IngestOptions options, Inserter* inserter, Clock* clock,
           IngestObserver* observer = nullptr);
  ~Ingestor();
  Ingestor(const Ingestor&) = delete;
  Ingestor& operator=(const Ingestor&) = delete;

  // Counts `bytes` for a request that just arrived (its received message, soon its parsed and
  // converted forms) against the memory budget. ResourceExhausted, saying how the budget is
  // used, when they do not fit: the caller refuses the request before doing anything with it.
  absl::StatusOr<MemoryBudget::Reservation> Reserve(uint64_t bytes);
  // Counts `bytes` that are in memory already and are not refused: a stream's one request, which
  // then waits for room like any other while the stream reads nothing more (its backpressure).
  // May take the count past the budget, by at most one request per open stream.
  MemoryBudget::Reservation Hold(uint64_t bytes);

  // Takes a request and the reservation that counts it (see Reserve; without one the Ingestor
  // counts it from its conversion on). `on_admitted` runs once its rows are buffered (the
  // request's data is no longer needed), `on_done` exactly once with the outcome (for a failed
  // request only `on_done` runs). Never blocks.
  void Submit(Request request, MemoryBudget::Reservation reservation,
              std::function<void()> on_admitted, std::function<void(Result)> on_done);
  void Submit(Request request, std::function<void()> on_admitted,
              std::function<void(Result)> on_done) {
    Submit(std::move(request), MemoryBudget::Reservation(), std::move(on_admitted),
           std::move(on_done));
  }

  // Takes the records the spool's Open handed back for replay (a spool opened with
  // replay_payloads false: they are read back as needed), after loading the table headers saved
  // beside the spool. Batches that were sent before the
  // restart (their intent is in the spool) are sent again as they were, with the same identity;
  // the other records queue for their tables, in LSN order, ahead of any new request. Call once,
  // before Submit.
  // `key_records` are what the key spool's Open handed back (IngestOptions::key_spool).
  RecoverySummary Recover(const std::vector<spool::SpoolRecord>& records,
                          const std::vector<spool::SpoolRecord>& key_records = {});

  // The most bytes of rows batches hold together (memory_budget_bytes x buffer_share).
  uint64_t buffer_limit() const { return buffer_limit_; }

  // Readiness, with hysteresis: false once the buffered bytes reach the high-water mark, true
  // again only when they are back below the low-water mark; false while shutting down.
  bool Ready() const;
  IngestStats Stats() const;

  // The liveness watchdog's question: do the Ingestor's loops make progress? Not OK when the
  // batch scheduler has not run for `stall`, or a worker or flush thread has made no progress
  // for longer than `stall`: progress is a task starting or ending, or a ClickHouse attempt
  // starting or ending (a spooled batch retried through a long outage makes progress at every
  // attempt; a thread blocked in one call does not). Each attempt ends by its own timeout, so a
  // stall means chgate is wedged. Lock-free, so it answers even when a thread holds the
  // Ingestor's mutex forever.
  absl::Status CheckProgress(absl::Duration stall) const;
  // Records progress of the calling worker or flush thread (see CheckProgress).
  void Progressed() const;

  // Stops taking requests (they fail with Unavailable), flushes every batch and waits for the
  // flushes until `deadline`; requests still pending then fail with Unavailable.
  void Shutdown(absl::Time deadline);

  // Callback order: `on_admitted` (if any) always runs before `on_done` for a request.
  // Test hooks (background == false): flush what is due at the clock's now, and run queued
  // work (conversions, flushes) on the calling thread. Return whether anything ran.
  bool Poll();
  bool RunPending();

 private:
  using Pending = PendingRequest;

  void SchedulerLoop();
  // A request whose rows were converted (Intake's next step): to the spool when persisted,
  // otherwise to its table's batch.
  void Route(std::shared_ptr<Pending> p);
  void Append(std::shared_ptr<Pending> pending) ABSL_LOCKS_EXCLUDED(mu_);
  // Admits waiting requests that fit; their callbacks go to `after`, to run once mu_ is released.
  void AdmitWaitingLocked(std::vector<std::function<void()>>* after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends a waiting request that fits to `batch` (see AdmitWaitingLocked).
  void AppendToBatchLocked(Batch& batch, const std::shared_ptr<Pending>& p,
                           std::vector<std::function<void()>>* after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartFlushLocked(Batch& batch, FlushReason reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Flush(Batch* batch, Batch::Contents taken, FlushReason reason);
  void FinishFlush(Batch* batch, uint64_t bytes, uint64_t rows) ABSL_LOCKS_EXCLUDED(mu_);
  // Persisted requests: Persist writes the converted rows to the spool; OnPersisted acks the
  // caller once they are durable and queues them for their table's spooled batch.
  void Persist(std::shared_ptr<Pending> p);
  void OnPersisted(const std::shared_ptr<Pending>& p, absl::StatusOr<SpoolEntry> entry);
  void QueueSpooledLocked(Batch& batch, SpoolEntry entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartSpooledFlushLocked(Batch& batch, FlushReason reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether spooled batches may still be flushed: not after the drain's deadline.
  Batcher::SpooledBatches SpooledFlushesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One INSERT of spooled records (SpoolBridge::Send), then the batch's accounting.
  void FlushSpooled(Batch* batch, SpooledFlush flush, FlushReason reason);
  SpoolTarget SpoolTargetOf(const Batch& batch) const;
  // At the drain's end: drops the rows of batches not being flushed (counted as lost) and hands
  // their waiting callers to `unflushed`. Spooled batches keep their records in the spool.
  void DropUnflushedLocked(std::vector<std::shared_ptr<Pending>>* unflushed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts the batch's flush when it reached its row or byte limit.
  void StartFlushIfFullLocked(Batch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  InsertTarget TargetOf(Batch* batch) const;

  const IngestOptions options_;
  const uint64_t buffer_limit_;
  MemoryBudget budget_;
  Admission admission_;  // the buffer's counts and the callers waiting for room
  Clock* const clock_;
  IngestObserver* const observer_;  // may be null
  // The parts with state of their own, each behind its own lock. Lock order: mu_ is taken before
  // the intake's, the admission's, the runner's and the delays' locks (the intake is closed,
  // requests are admitted, work is posted and delays read under it) and is never held while calling
  // the schema cache, the idempotency keys, the retrier or the spool bridge.
  SchemaCache schemas_;
  IdempotencyKeys keys_;
  std::unique_ptr<KeyLog> key_log_;  // with a key spool
  InsertRetrier retrier_;
  FlushRunner flusher_;
  // Declared before the batches, whose spool entries hold blocks it counts.
  SpoolBridge bridge_;
  // Requests from their callers to converted rows, and every caller's answer.
  Intake intake_;

  // Guards the batches, the flush and row counts and the shutdown state; held while admitting,
  // so a request's admission and its append to a batch are one step.
  mutable absl::Mutex mu_;
  Batcher batcher_ ABSL_GUARDED_BY(mu_);  // the batches and when each is due
  uint64_t flushes_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t rows_dropped_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t rows_committed_ ABSL_GUARDED_BY(mu_) = 0;  // by flushes, for the drain's log lines
  uint64_t rows_failed_ ABSL_GUARDED_BY(mu_) = 0;     // batches that failed for good
  uint64_t spooled_rows_ ABSL_GUARDED_BY(mu_) = 0;
  // When Shutdown's drain ends: spooled flushes stop retrying then (their records stay in the
  // spool for the next start).
  absl::Time drain_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_scheduler_ ABSL_GUARDED_BY(mu_) = false;
  // The last run of the scheduler (Unix nanoseconds of clock_), read by CheckProgress without
  // the mutex.
  std::atomic<int64_t> scheduler_beat_{0};
  // Conversions and flushes; declared last, so its threads stop before the rest goes.
  TaskRunner runner_;
  std::thread scheduler_;
};

using text::ParseTableName;

}  // namespace chgate::ingest
