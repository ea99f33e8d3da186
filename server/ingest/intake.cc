#include "server/ingest/intake.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/ingest/retry.h"
#include "server/ingest/stage.h"
#include "server/log/log.h"
#include "text/identifier.h"

namespace chgate::ingest {
namespace {

constexpr log::Component kLog("ingest");

}  // namespace

Intake::Intake(Options options, MemoryBudget* budget, SchemaCache* schemas, IdempotencyKeys* keys,
               TaskRunner* runner, Clock* clock, IngestObserver* observer, Next next)
    : options_(std::move(options)),
      budget_(budget),
      schemas_(schemas),
      keys_(keys),
      runner_(runner),
      clock_(clock),
      observer_(observer),
      next_(std::move(next)) {}

absl::StatusOr<MemoryBudget::Reservation> Intake::Reserve(uint64_t bytes) {
  std::optional<MemoryBudget::Reservation> reservation = budget_->TryReserve(bytes);
  if (reservation.has_value()) {
    PublishRequestBytes();
    return *std::move(reservation);
  }
  if (observer_ != nullptr) {
    observer_->MemoryRefused();
    observer_->RequestDone("", absl::ResourceExhaustedError("memory budget"), AckMode::kAccepted,
                           0);
  }
  return absl::ResourceExhaustedError(budget_->RefusalMessage(bytes));
}

MemoryBudget::Reservation Intake::Hold(uint64_t bytes) {
  MemoryBudget::Reservation reservation = budget_->Attach();
  reservation.Resize(bytes);
  PublishRequestBytes();
  return reservation;
}

void Intake::PublishRequestBytes() const {
  if (observer_ != nullptr) observer_->RequestBytes(budget_->requests());
}

void Intake::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

void Intake::Complete(const std::shared_ptr<Pending>& p, Result result) {
  if (p->done) return;
  p->done = true;
  if (p->reservation.bytes() > 0) {
    p->reservation.Release();
    PublishRequestBytes();
  }
  if (!p->idempotency_key.empty()) {
    for (auto& f : keys_->Finish(p->idempotency_key, result)) {
      Result copy = result;
      copy.deduplicated = true;
      f(std::move(copy));
    }
  }
  if (observer_ != nullptr) {
    const AckMode acked = result.persisted   ? AckMode::kPersisted
                          : result.committed ? AckMode::kCommitted
                                             : AckMode::kAccepted;
    observer_->RequestDone(p->label, result.status, acked, p->rows);
    if (result.status.ok() && result.committed) {
      observer_->CommitLatency(p->label, clock_->Now() - p->received);
    }
  }
  if (p->on_done) p->on_done(std::move(result));
  p->on_done = nullptr;
}

void Intake::Submit(Request request, MemoryBudget::Reservation reservation,
                    std::function<void()> on_admitted, std::function<void(Result)> on_done) {
  auto pending = std::make_shared<Pending>();
  pending->reservation = reservation.attached() ? std::move(reservation) : budget_->Attach();
  pending->received = clock_->Now();
  pending->deadline = request.deadline;
  pending->ack = request.ack.value_or(options_.default_ack);
  pending->trace = request.trace;
  pending->on_admitted = std::move(on_admitted);
  pending->on_done = std::move(on_done);
  if (pending->ack == AckMode::kPersisted && !options_.has_spool) {
    return Complete(pending, {.status = absl::FailedPreconditionError(
                                  "the persisted ack mode needs a spool: this chgate runs "
                                  "without --spool-dir")});
  }
  // The common case, a table whose header is cached, converts on the caller's thread: no hand-off
  // to a worker and no wake-up per request. Only work that may wait on ClickHouse (a header
  // lookup) goes to the workers.
  if (options_.background && HeaderIsFresh(request)) {
    return Admit(std::move(pending), std::move(request), /*on_caller=*/true);
  }
  {
    absl::MutexLock lock(&mu_);
    if (!closed_) {
      runner_->Post(TaskRunner::Queue::kConvert,
                    [this, pending, request = std::move(request)]() mutable {
                      Admit(pending, std::move(request), /*on_caller=*/false);
                    });
      return;
    }
  }
  Complete(pending, {.status = absl::UnavailableError("chgate is shutting down")});
}

bool Intake::HeaderIsFresh(const Request& request) {
  absl::StatusOr<TableId> table = text::ParseTableName(request.table, options_.default_database);
  if (!table.ok()) return true;  // refused at once, without a lookup
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return false;  // the queue path refuses it
  }
  return schemas_->IsFresh(*table, request.columns);
}

absl::Status Intake::Convert(const Request& request, const TableSchema& s, Pending* p) {
  absl::StatusOr<std::unique_ptr<clickhouse::Block>> staged = Stage(request, s, options_.convert);
  if (!staged.ok()) return staged.status();
  p->staged = *std::move(staged);
  return absl::OkStatus();
}

bool Intake::ClaimKey(const std::shared_ptr<Pending>& p, Request& request) {
  const std::string key =
      IdempotencyKeys::Scoped(request.identity, p->table, request.idempotency_key);
  Result earlier;
  switch (keys_->Take(key, &p->on_done, &earlier)) {
    case IdempotencyKeys::Claim::kOwner:
      p->idempotency_key = key;
      return false;
    case IdempotencyKeys::Claim::kDone:
      if (request.release_input) request.release_input();
      earlier.deduplicated = true;
      Complete(p, std::move(earlier));
      return true;
    case IdempotencyKeys::Claim::kFollowing:
      // The first request's outcome reaches this caller (its on_done was taken); a follower holds
      // nothing while it waits.
      p->done = true;
      if (request.release_input) request.release_input();
      p->reservation.Release();
      PublishRequestBytes();
      if (p->on_admitted) p->on_admitted();
      return true;
  }
  return false;
}

void Intake::Admit(std::shared_ptr<Pending> p, Request request, bool on_caller) {
  absl::StatusOr<TableId> table = text::ParseTableName(request.table, options_.default_database);
  if (!table.ok()) return Complete(p, {.status = table.status()});
  p->table = *table;
  p->columns = request.columns;
  // A request of no rows inserts nothing, so its key claims nothing: a later request with the
  // same key and rows is not answered "deduplicated" with none of them.
  const bool has_rows = (request.rows != nullptr && request.rows->row_count() > 0) ||
                        (request.block != nullptr && request.block->rows() > 0);
  if (!request.idempotency_key.empty() && has_rows && ClaimKey(p, request)) return;
  p->key = TableColumnsKey(p->table, p->columns);
  bool fetched = false;
  absl::StatusOr<std::shared_ptr<const TableSchema>> schema =
      schemas_->Get(p->table, p->columns, p->deadline, /*refresh=*/false, &fetched);
  if (!schema.ok()) {
    // A caller's mistake (no such table or column) is the caller's to see; ClickHouse being
    // unreachable is the operator's.
    if (IsRetryable(schema.status())) {
      kLog.Throttled(log::Level::kWarn, "table header lookup failed; request refused", "",
                     {{"table", absl::StrCat(p->table.database, ".", p->table.table)},
                      {"code", ErrorCodeLabel(schema.status())},
                      {"error", schema.status().message()}});
    }
    return Complete(p, {.status = schema.status()});
  }
  absl::Status converted = Convert(request, **schema, p.get());
  if (!converted.ok() && !fetched && on_caller) {
    // The refresh below waits on ClickHouse: not on the caller's thread.
    runner_->Post(
        TaskRunner::Queue::kConvert, [this, p, request = std::move(request), schema = *schema,
                                      converted = std::move(converted)]() mutable {
          AdmitConverted(std::move(p), std::move(request), std::move(schema), std::move(converted),
                         /*fetched=*/false);
        });
    return;
  }
  AdmitConverted(std::move(p), std::move(request), *std::move(schema), std::move(converted),
                 fetched);
}

void Intake::AdmitConverted(std::shared_ptr<Pending> p, Request request,
                            std::shared_ptr<const TableSchema> schema, absl::Status converted,
                            bool fetched) {
  if (!converted.ok() && !fetched) {
    // The rows were judged by a cached header; the table may have changed since (ALTER ...
    // MODIFY COLUMN, ADD COLUMN). Ask the server once more before calling the rows bad.
    absl::StatusOr<std::shared_ptr<const TableSchema>> fresh =
        schemas_->Get(p->table, p->columns, p->deadline, /*refresh=*/true, &fetched);
    if (!fresh.ok()) return Complete(p, {.status = fresh.status()});
    if (!SameTypes(**fresh, *schema)) {
      schema = *std::move(fresh);
      converted = Convert(request, *schema, p.get());
    }
  }
  // The message the rows came from is no longer needed: from here on the request holds only
  // its converted columns.
  if (request.release_input) request.release_input();
  // Only tables that exist become metric labels.
  p->label = absl::StrCat(p->table.database, ".", p->table.table);
  p->schema = schema;
  if (!converted.ok()) return Complete(p, {.status = converted});
  p->rows = p->staged->rows();
  p->bytes = p->staged->ByteSize();
  p->reservation.Resize(p->bytes);
  PublishRequestBytes();
  if (p->rows == 0) {
    // Nothing to commit: the table and columns were checked, which is all a zero-row request
    // asks for. Its ack is in the mode asked (none of them promises anything of no rows).
    if (p->on_admitted) p->on_admitted();
    return Complete(p, {.status = absl::OkStatus(),
                        .rows = 0,
                        .committed = p->ack == AckMode::kCommitted,
                        .persisted = p->ack == AckMode::kPersisted});
  }
  next_(std::move(p));
}

}  // namespace chgate::ingest
