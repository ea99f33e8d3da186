#include "server/ingest/ingestor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/common/failpoint.h"
#include "server/ingest/stage.h"
#include "server/log/log.h"
#include "text/identifier.h"

namespace chgate::ingest {
namespace {

constexpr log::Component kLog("ingest");

}  // namespace

Ingestor::Ingestor(IngestOptions options, Inserter* inserter, Clock* clock,
                   IngestObserver* observer)
    : options_(std::move(options)),
      buffer_limit_(static_cast<uint64_t>(static_cast<double>(options_.memory_budget_bytes) *
                                          options_.buffer_share)),
      budget_(options_.memory_budget_bytes),
      admission_({.memory_budget_bytes = options_.memory_budget_bytes,
                  .buffer_limit = buffer_limit_,
                  .table_budget_bytes = options_.table_budget_bytes,
                  .ready_high_water = options_.ready_high_water,
                  .ready_low_water = options_.ready_low_water},
                 &budget_, observer),
      clock_(clock),
      observer_(observer),
      schemas_(inserter, clock, options_.schema_ttl,
               options_.spool != nullptr ? options_.spool->dir() : ""),
      keys_(clock, options_.idempotency_window, options_.idempotency_max_keys),
      key_log_(options_.spool != nullptr && options_.key_spool != nullptr
                   ? std::make_unique<KeyLog>(options_.key_spool, clock,
                                              options_.idempotency_window,
                                              options_.idempotency_max_keys)
                   : nullptr),
      retrier_(options_.retry, inserter, clock, observer),
      flusher_(options_.retry, options_.async_insert, &retrier_, &schemas_, clock, observer),
      bridge_({.spool = options_.spool,
               .spool_id = options_.spool_id,
               .key_log = key_log_.get(),
               .cache_bytes = options_.spool_cache_bytes != 0 ? options_.spool_cache_bytes
                                                              : options_.memory_budget_bytes / 8,
               .retry = options_.retry},
              &budget_, &retrier_, &schemas_, inserter, clock, observer),
      intake_({.default_database = options_.default_database,
               .default_ack = options_.default_ack,
               .convert = options_.convert,
               .has_spool = options_.spool != nullptr,
               .background = options_.background},
              &budget_, &schemas_, &keys_, &runner_, clock, observer,
              [this](std::shared_ptr<Pending> p) { Route(std::move(p)); }),
      batcher_({.limits = options_.limits,
                .table_limits = options_.table_limits,
                .deadline_margin = options_.deadline_margin,
                .delay = {.ceiling = options_.max_delay_ceiling,
                          .slow_insert = options_.slow_insert,
                          .relax_after = options_.relax_after}},
               observer),
      runner_(clock, options_.worker_threads, options_.flush_threads, options_.background) {
  if (observer_ != nullptr) {
    observer_->Budgets(options_.memory_budget_bytes, buffer_limit_);
  }
  if (!options_.background) return;
  scheduler_beat_.store(absl::ToUnixNanos(clock_->Now()));
  scheduler_ = std::thread([this] { SchedulerLoop(); });
}

Ingestor::~Ingestor() {
  Shutdown(clock_->Now());
  // Appends still queued in the spool call back into this object (and hold cached blocks that
  // count themselves out of it): let them finish first.
  if (options_.spool != nullptr) (void)options_.spool->Flush();
  {
    absl::MutexLock lock(&mu_);
    stop_scheduler_ = true;
  }
  if (scheduler_.joinable()) scheduler_.join();
  runner_.Stop();
}

void Ingestor::Progressed() const { TaskRunner::MarkProgress(clock_); }

absl::Status Ingestor::CheckProgress(absl::Duration stall) const {
  if (!options_.background) return absl::OkStatus();
  const absl::Time now = clock_->Now();
  const absl::Time beat = absl::FromUnixNanos(scheduler_beat_.load(std::memory_order_relaxed));
  if (now - beat > stall) {
    return absl::DeadlineExceededError(absl::StrCat("the batch scheduler has not run for ",
                                                    absl::FormatDuration(now - beat), " (limit ",
                                                    absl::FormatDuration(stall), ")"));
  }
  return runner_.CheckProgress(stall);
}

bool Ingestor::RunPending() { return runner_.RunPending(); }

absl::StatusOr<MemoryBudget::Reservation> Ingestor::Reserve(uint64_t bytes) {
  return intake_.Reserve(bytes);
}

MemoryBudget::Reservation Ingestor::Hold(uint64_t bytes) { return intake_.Hold(bytes); }

void Ingestor::Submit(Request request, MemoryBudget::Reservation reservation,
                      std::function<void()> on_admitted, std::function<void(Result)> on_done) {
  intake_.Submit(std::move(request), std::move(reservation), std::move(on_admitted),
                 std::move(on_done));
}

void Ingestor::Route(std::shared_ptr<Pending> p) {
  if (p->ack == AckMode::kPersisted) return Persist(std::move(p));
  Append(std::move(p));
}

void Ingestor::Append(std::shared_ptr<Pending> p) {
  std::vector<std::function<void()>> after;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      after.push_back([this, p] {
        intake_.Complete(p, {.status = absl::UnavailableError("chgate is shutting down")});
      });
    } else {
      admission_.Wait(p);
      AdmitWaitingLocked(&after);
    }
  }
  // Admission callbacks run here, outside the lock, not behind slow work in the queues.
  for (auto& f : after) f();
}

void Ingestor::AdmitWaitingLocked(std::vector<std::function<void()>>* after) {
  // FIFO: a request that does not fit holds back the ones behind it.
  while (std::shared_ptr<Pending> front = admission_.Front()) {
    Batch& batch = batcher_.Get(front->key, front->label, front->table);
    if (batch.schema() == nullptr) batch.Relayout(front->schema);
    std::shared_ptr<Pending> p = admission_.TakeFrontIfFits(*front, batch.table_bytes);
    if (p == nullptr) return;
    if (batch.schema() != p->schema && !SameTypes(*batch.schema(), *p->schema)) {
      if (batch.rows() > 0) {
        // The table changed under the batch: flush what was converted for the old layout
        // first, then retry this request.
        admission_.PutBack(std::move(p));
        StartFlushLocked(batch, FlushReason::kRows);
        return;
      }
      batch.Relayout(p->schema);
    }
    AppendToBatchLocked(batch, p, after);
  }
}

void Ingestor::AppendToBatchLocked(Batch& batch, const std::shared_ptr<Pending>& p,
                                   std::vector<std::function<void()>>* after) {
  admission_.Buffer(*p);
  batch.Append(p, clock_->Now());
  std::function<void()> admitted = std::move(p->on_admitted);
  if (p->ack == AckMode::kCommitted) {
    if (admitted) after->push_back(std::move(admitted));
  } else {
    after->push_back([this, p, admitted = std::move(admitted), query_id = batch.query_id()] {
      if (admitted) admitted();
      intake_.Complete(
          p,
          {.status = absl::OkStatus(), .rows = p->rows, .committed = false, .query_id = query_id});
    });
  }
  intake_.PublishRequestBytes();
  StartFlushIfFullLocked(batch);
}

void Ingestor::StartFlushIfFullLocked(Batch& batch) {
  if (std::optional<FlushReason> reason = batcher_.Full(batch)) StartFlushLocked(batch, *reason);
}

void Ingestor::StartFlushLocked(Batch& batch, FlushReason reason) {
  if (batch.spooled()) return StartSpooledFlushLocked(batch, reason);
  if (batch.flushing || batch.rows() == 0) return;
  batch.flushing = true;
  ++flushes_in_flight_;
  Batch* b = &batch;
  auto taken = std::make_shared<Batch::Contents>(batch.Take());
  runner_.Post(TaskRunner::Queue::kFlush,
               [this, b, taken, reason] { Flush(b, std::move(*taken), reason); });
}

InsertTarget Ingestor::TargetOf(Batch* batch) const {
  return InsertTarget{.label = batch->label(),
                      .table = batch->table(),
                      .spooled = batch->spooled(),
                      .delay = batch->delay()};
}

void Ingestor::Flush(Batch* batch, Batch::Contents taken, FlushReason reason) {
  BatchCallers callers{.query_id = std::move(taken.query_id), .count = taken.pendings.size()};
  for (const auto& p : taken.pendings) {
    callers.waiting_rows += p->rows;
    callers.last_deadline = std::max(callers.last_deadline, p->deadline);
  }
  const uint64_t rows = taken.rows, bytes = taken.bytes;
  FlushOutcome out;
  {
    // The parts go out as one block, each from its own memory where the columns allow it; the
    // memory goes when the INSERT ends.
    const clickhouse::BlockParts block(std::move(taken.parts));
    out = flusher_.Run(TargetOf(batch), block, taken.traces, callers, reason);
  }
  // Callers in committed mode get the error; rows acknowledged in accepted mode are lost, and a
  // repeat of their requests inserts them rather than being answered "deduplicated".
  const uint64_t dropped = out.status.ok() ? 0 : rows - callers.waiting_rows;
  if (!out.status.ok()) {
    for (const std::string& key : taken.accepted_keys) keys_.Forget(key);
  }
  if (dropped > 0 && observer_ != nullptr) {
    observer_->RowsDropped(batch->label(), DropReason::kAcceptedFlushFailed, dropped);
  }
  {
    absl::MutexLock lock(&mu_);
    (out.status.ok() ? rows_committed_ : rows_failed_) += rows;
    rows_dropped_ += dropped;
  }
  for (const auto& p : taken.pendings) {
    intake_.Complete(p, {.status = out.status,
                         .rows = out.status.ok() ? p->rows : 0,
                         .committed = out.status.ok(),
                         .query_id = out.query_id,
                         .commit_time = out.end});
  }
  FinishFlush(batch, bytes, rows);
}

void Ingestor::FinishFlush(Batch* batch, uint64_t bytes, uint64_t rows) {
  std::vector<std::function<void()>> after;
  {
    absl::MutexLock lock(&mu_);
    admission_.Release(rows, bytes);
    batch->table_bytes -= bytes;
    batch->flushing = false;
    --flushes_in_flight_;
    AdmitWaitingLocked(&after);
    if (std::optional<FlushReason> reason =
            batcher_.AfterFlush(*batch, shutting_down_, clock_->Now())) {
      StartFlushLocked(*batch, *reason);
    }
  }
  for (auto& f : after) f();
}

bool Ingestor::Poll() {
  std::vector<std::shared_ptr<Pending>> expired;
  bool started = false;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    for (auto [batch, reason] : batcher_.Due(now, SpooledFlushesLocked())) {
      StartFlushLocked(*batch, reason);
      started = true;
    }
    expired = admission_.Expire(now, options_.deadline_margin);
  }
  if (!expired.empty()) {
    kLog.Throttled(log::Level::kWarn,
                   "callers refused with RESOURCE_EXHAUSTED: the memory budget stayed full until "
                   "their deadline",
                   "", {{"callers", expired.size()}, {"table", expired.front()->label}});
  }
  for (const auto& p : expired) {
    intake_.Complete(p,
                     {.status = absl::ResourceExhaustedError(
                          "chgate's buffer stayed full until the request's deadline; nothing of it "
                          "was buffered, so it is safe to retry")});
  }
  return started || !expired.empty();
}

void Ingestor::SchedulerLoop() {
  while (true) {
    Poll();
    absl::MutexLock lock(&mu_);
    scheduler_beat_.store(absl::ToUnixNanos(clock_->Now()), std::memory_order_relaxed);
    if (stop_scheduler_) return;
    const absl::Time next =
        std::min(batcher_.NextDue(clock_->Now() + absl::Milliseconds(50), SpooledFlushesLocked()),
                 admission_.NextDeadline(options_.deadline_margin));
    auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_scheduler_; };
    // A wait for as long as the clock says, not until one of its instants: with a manual clock
    // (tests) the instant means nothing to the real time the mutex waits in.
    mu_.AwaitWithTimeout(absl::Condition(&stop),
                         std::max(next - clock_->Now(), absl::Milliseconds(1)));
  }
}

bool Ingestor::Ready() const {
  const bool full = admission_.Full();
  absl::MutexLock lock(&mu_);
  return !shutting_down_ && !full;
}

IngestStats Ingestor::Stats() const {
  absl::MutexLock lock(&mu_);
  const Admission::Counts counts = admission_.counts();
  return {.buffered_rows = counts.buffered_rows,
          .buffered_bytes = counts.buffered_bytes,
          .waiting_requests = counts.waiting,
          .flushes_in_flight = flushes_in_flight_,
          .request_bytes = budget_.requests(),
          .rows_dropped = rows_dropped_,
          .spooled_rows = spooled_rows_};
}

void Ingestor::Shutdown(absl::Time deadline) {
  std::vector<std::shared_ptr<Pending>> refused, unflushed;
  // Set by the call that starts the drain, which also says how it ended.
  std::optional<IngestStats> drain_start;
  uint64_t committed_before = 0, failed_before = 0;
  const absl::Time started = clock_->Now();
  {
    absl::MutexLock lock(&mu_);
    drain_deadline_ = std::min(drain_deadline_, deadline);
    if (!shutting_down_) {
      shutting_down_ = true;
      intake_.Close();
      const Admission::Counts counts = admission_.counts();
      drain_start = IngestStats{.buffered_rows = counts.buffered_rows,
                                .buffered_bytes = counts.buffered_bytes,
                                .waiting_requests = counts.waiting,
                                .flushes_in_flight = flushes_in_flight_,
                                .rows_dropped = rows_dropped_};
      committed_before = rows_committed_;
      failed_before = rows_failed_;
      refused = admission_.TakeAll();
      for (Batch* batch : batcher_.All()) StartFlushLocked(*batch, FlushReason::kShutdown);
    }
  }
  if (drain_start) {
    kLog.Info("drain started",
              {{"buffered_rows", drain_start->buffered_rows},
               {"buffered_bytes", drain_start->buffered_bytes},
               {"callers_refused", refused.size()},
               {"deadline_in", absl::Trunc(deadline - started, absl::Milliseconds(1))}});
  }
  for (const auto& p : refused) {
    intake_.Complete(
        p, {.status = absl::UnavailableError("chgate is shutting down; nothing was buffered")});
  }
  if (!options_.background) {
    RunPending();
  } else {
    // Conversions queued before the drain began end first (their callers get an answer: they
    // join a batch only as persisted rows, or are refused), then the flushes.
    runner_.AwaitStarted(TaskRunner::Queue::kConvert, deadline);
    absl::MutexLock lock(&mu_);
    auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return flushes_in_flight_ == 0 && batcher_.Empty();
    };
    mu_.AwaitWithDeadline(absl::Condition(&drained), deadline);
  }
  {
    absl::MutexLock lock(&mu_);
    DropUnflushedLocked(&unflushed);
    if (drain_start) {
      const uint64_t flushed = rows_committed_ - committed_before;
      const uint64_t failed = rows_failed_ - failed_before;
      const uint64_t dropped = rows_dropped_ - drain_start->rows_dropped;
      const bool clean = failed == 0 && dropped == 0 && flushes_in_flight_ == 0;
      kLog.Write(clean ? log::Level::kInfo : log::Level::kError, "drain finished",
                 {{"rows_flushed", flushed},
                  {"rows_failed", failed},
                  {"rows_dropped", dropped},
                  {"rows_left_in_spool", spooled_rows_},
                  {"rows_in_flight", admission_.counts().buffered_rows},
                  {"flushes_in_flight", flushes_in_flight_},
                  {"elapsed", absl::Trunc(clock_->Now() - started, absl::Milliseconds(1))}});
    }
  }
  for (const auto& p : unflushed) {
    intake_.Complete(p, {.status = absl::UnavailableError(
                             "chgate shut down before these rows could be committed")});
  }
}

void Ingestor::DropUnflushedLocked(std::vector<std::shared_ptr<Pending>>* unflushed) {
  for (Batch* batch : batcher_.All()) {
    // Spooled rows that did not go out stay in the spool for the next start.
    if (batch->flushing || batch->spooled() || batch->rows() == 0) continue;
    const uint64_t rows = batch->rows(), bytes = batch->bytes();
    rows_dropped_ += rows;
    if (observer_ != nullptr) observer_->RowsDropped(batch->label(), DropReason::kShutdown, rows);
    admission_.Release(rows, bytes);
    batch->table_bytes -= bytes;
    Batch::Contents dropped = batch->Take();
    unflushed->insert(unflushed->end(), dropped.pendings.begin(), dropped.pendings.end());
  }
}

// ---------------------------------------------------------------------------------------------
// Persisted requests: the spooled batches (the spool work itself is SpoolBridge's).

void Ingestor::Persist(std::shared_ptr<Pending> p) {
  SpoolBridge::Record record =
      bridge_.Encode(p->table, p->columns, p->idempotency_key, std::move(p->staged));
  // Until it is written, the spool's queue holds the record: it stays counted as this request's.
  p->reservation.Resize(record.payload.size());
  intake_.PublishRequestBytes();
  if (p->on_admitted) {
    p->on_admitted();
    p->on_admitted = nullptr;
  }
  absl::Status st = bridge_.Append(
      std::move(record),
      [this, p](absl::StatusOr<SpoolEntry> entry) mutable { OnPersisted(p, std::move(entry)); });
  if (st.ok()) return;
  if (st.code() == absl::StatusCode::kFailedPrecondition) {
    st = absl::UnavailableError("chgate is shutting down (its spool is closed)");
  } else {
    kLog.Throttled(log::Level::kWarn, "spool refused a persisted request", p->label,
                   {{"table", p->label}, {"rows", p->rows}, {"error", st.message()}});
  }
  intake_.Complete(p, {.status = st});
}

void Ingestor::OnPersisted(const std::shared_ptr<Pending>& p, absl::StatusOr<SpoolEntry> entry) {
  failpoint::Hit("persisted_before_ack");
  if (!entry.ok()) {
    kLog.Throttled(log::Level::kError, "spool write failed; persisted request refused", p->label,
                   {{"table", p->label}, {"rows", p->rows}, {"error", entry.status().message()}});
    return intake_.Complete(p, {.status = entry.status()});
  }
  {
    absl::MutexLock lock(&mu_);
    QueueSpooledLocked(batcher_.Spooled(p->table, p->columns, &p->key), *std::move(entry));
  }
  intake_.Complete(
      p, {.status = absl::OkStatus(), .rows = p->rows, .committed = false, .persisted = true});
}

void Ingestor::QueueSpooledLocked(Batch& batch, SpoolEntry entry) {
  spooled_rows_ += entry.rows;
  batch.Queue(std::move(entry));
  StartFlushIfFullLocked(batch);
}

Batcher::SpooledBatches Ingestor::SpooledFlushesLocked() const {
  // After the drain the records wait in the spool for the next start.
  return shutting_down_ && clock_->Now() >= drain_deadline_ ? Batcher::SpooledBatches::kHeld
                                                            : Batcher::SpooledBatches::kIncluded;
}

void Ingestor::StartSpooledFlushLocked(Batch& batch, FlushReason reason) {
  if (batch.flushing || !batch.HasSpooledWork()) return;
  if (SpooledFlushesLocked() == Batcher::SpooledBatches::kHeld) return;
  bool replay = false;
  SpooledFlush flush = batch.TakeSpooled(batcher_.LimitsFor(batch.label()), &replay);
  if (replay) reason = FlushReason::kReplay;
  batch.flushing = true;
  ++flushes_in_flight_;
  Batch* b = &batch;
  runner_.Post(TaskRunner::Queue::kFlush, [this, b, flush = std::move(flush), reason]() mutable {
    FlushSpooled(b, std::move(flush), reason);
  });
}

void Ingestor::FlushSpooled(Batch* batch, SpooledFlush flush, FlushReason reason) {
  uint64_t queued_rows = 0;
  for (const SpoolEntry& e : flush.entries) queued_rows += e.rows;
  const auto stop_at = [this]() {
    absl::MutexLock lock(&mu_);
    return drain_deadline_;
  };
  const SpooledOutcome out = bridge_.Send(SpoolTargetOf(*batch), flush, reason, stop_at);
  {
    absl::MutexLock lock(&mu_);
    // Records of another layout than the first's wait for the next INSERT, ahead of the rest.
    batch->Requeue(out.later);
    for (const SpoolEntry& e : out.later) queued_rows -= e.rows;
    rows_dropped_ += out.lost_rows;
    rows_committed_ += out.committed;
    rows_failed_ += out.dead_lettered;
    // Rows left pending in the spool (the drain ended first) are still there for the next
    // start, and still counted as spooled.
    spooled_rows_ -= std::min(spooled_rows_, queued_rows - std::min(queued_rows, out.left_rows));
  }
  FinishFlush(batch, 0, 0);
}

SpoolTarget Ingestor::SpoolTargetOf(const Batch& batch) const {
  return SpoolTarget{.label = batch.label(),
                     .table = batch.table(),
                     .columns = batch.columns(),
                     .delay = batch.delay()};
}

RecoverySummary Ingestor::Recover(const std::vector<spool::SpoolRecord>& records,
                                  const std::vector<spool::SpoolRecord>& key_records) {
  const absl::Time started = absl::Now();
  if (options_.spool == nullptr) return {};
  if (key_log_ != nullptr) {
    // Requests committed before the restart: a resend of one is answered, not inserted again.
    const std::vector<KeyLog::RecoveredKey> committed = key_log_->Recover(key_records);
    for (const KeyLog::RecoveredKey& k : committed) {
      keys_.RememberDone(k.key.key,
                         Result{.status = absl::OkStatus(), .rows = k.key.rows, .persisted = true},
                         k.committed);
    }
    if (!committed.empty()) {
      kLog.Info("idempotency keys of committed persisted requests restored",
                {{"keys", committed.size()}});
    }
  }
  schemas_.Load();
  if (records.empty()) return {};
  RecoveryPlan plan = bridge_.Plan(records, clock_->Now());
  std::vector<std::pair<const Batch*, const SpooledFlush*>> damaged;
  {
    absl::MutexLock lock(&mu_);
    for (RecoveryPlan::Replay& r : plan.replays) {
      for (const SpoolEntry& e : r.flush.entries) spooled_rows_ += e.rows;
      batcher_.Spooled(r.to.table, r.to.columns).AddReplay(std::move(r.flush));
    }
    for (RecoveryPlan::Replay& r : plan.damaged) {
      damaged.emplace_back(&batcher_.Spooled(r.to.table, r.to.columns), &r.flush);
    }
    for (RecoveryPlan::Queued& q : plan.queued) {
      QueueSpooledLocked(batcher_.Spooled(q.to.table, q.to.columns), std::move(q.entry));
    }
    for (Batch* batch : batcher_.All()) {
      if (batch->spooled() && batch->HasReplays()) StartFlushLocked(*batch, FlushReason::kReplay);
    }
  }
  // A caller that resends a request it saw no answer for finds it done.
  // So does one whose rows are in a batch sent before the crash, which goes out again as it was.
  for (const RecoveryPlan::Key& k : plan.keys) {
    keys_.RememberDone(k.idempotency_key,
                       Result{.status = absl::OkStatus(), .rows = k.rows, .persisted = true});
  }
  // Batches are never removed, so the pointers stay valid without the lock.
  for (const auto& [batch, flush] : damaged) {
    bridge_.SetAsideDamagedIntent(SpoolTargetOf(*batch), *flush);
  }
  const RecoverySummary& summary = plan.summary;
  if (observer_ != nullptr) observer_->SpoolReplayed(summary.records);
  kLog.Info("spool replayed",
            {{"records", summary.records},
             {"rows", summary.rows},
             {"batches_resent_as_before", summary.intents},
             {"unreadable_records", summary.unreadable},
             {"orphaned_intent_entries", summary.orphaned},
             {"damaged_batches_set_aside", summary.damaged_intents},
             {"took", absl::Trunc(absl::Now() - started, absl::Milliseconds(1))}});
  return summary;
}

}  // namespace chgate::ingest
