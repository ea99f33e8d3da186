// Intake: a request's way from its caller to converted rows, and its answer.
//
// Submit() counts the request in the memory budget, parses its table name, claims its
// idempotency key, looks up the table's INSERT header (served from the cache on the caller's
// thread when fresh; otherwise on a conversion worker, the only place that may wait on
// ClickHouse) and converts the rows all or nothing. A request whose rows are converted goes to
// `next` (the Ingestor's spool or batching path); any other gets its answer here. Complete() is
// the one place a caller is answered: the reservation released, followers of its idempotency key
// told, the outcome observed, `on_done` run once.
//
// Owns the closed state (after Close, requests are refused) behind its own lock; the cache, the
// keys, the budget and the runner are the Ingestor's parts, each thread-safe on its own.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/ingest/batch.h"
#include "server/ingest/clock.h"
#include "server/ingest/convert.h"
#include "server/ingest/idempotency_keys.h"
#include "server/ingest/memory_budget.h"
#include "server/ingest/observer.h"
#include "server/ingest/request.h"
#include "server/ingest/schema_cache.h"
#include "server/ingest/task_runner.h"

namespace chgate::ingest {

class Intake {
 public:
  struct Options {
    std::string default_database;
    AckMode default_ack = AckMode::kCommitted;
    ConvertOptions convert;
    bool has_spool = false;  // whether the persisted ack mode can be served
    // false (tests): no threads; nothing is converted on the caller's thread.
    bool background = true;
  };
  // Where a request whose rows were converted goes next; called at most once per request, on the
  // caller's thread or a conversion worker.
  using Next = std::function<void(std::shared_ptr<PendingRequest>)>;

  // Every pointer must outlive the Intake; `observer` may be null.
  Intake(Options options, MemoryBudget* budget, SchemaCache* schemas, IdempotencyKeys* keys,
         TaskRunner* runner, Clock* clock, IngestObserver* observer, Next next);
  Intake(const Intake&) = delete;
  Intake& operator=(const Intake&) = delete;

  // See Ingestor::Reserve and Ingestor::Hold.
  absl::StatusOr<MemoryBudget::Reservation> Reserve(uint64_t bytes);
  MemoryBudget::Reservation Hold(uint64_t bytes);

  // See Ingestor::Submit. Never blocks.
  void Submit(Request request, MemoryBudget::Reservation reservation,
              std::function<void()> on_admitted, std::function<void(Result)> on_done)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Answers the request (once; later calls do nothing).
  void Complete(const std::shared_ptr<PendingRequest>& p, Result result);
  // Reports the bytes held by requests not yet in a batch.
  void PublishRequestBytes() const;

  // From now on Submit refuses requests ("chgate is shutting down"); conversions already queued
  // still run and hand their rows to `next`, which decides what the drain does with them.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Pending = PendingRequest;

  // Whether the request's table header is cached and fresh, so Admit needs no lookup (false once
  // closed: Submit's queue path refuses the request then).
  bool HeaderIsFresh(const Request& request) ABSL_LOCKS_EXCLUDED(mu_);
  // Converts the request against its table's header and hands it on. `on_caller`: running on the
  // submitting thread (HeaderIsFresh was true), which must not wait on ClickHouse: rows the cached
  // header refuses are then handed to a worker, which asks the server for the header again.
  void Admit(std::shared_ptr<Pending> p, Request request, bool on_caller);
  // The rest of Admit once the request was converted (or refused) against `schema`.
  void AdmitConverted(std::shared_ptr<Pending> p, Request request,
                      std::shared_ptr<const TableSchema> schema, absl::Status converted,
                      bool fetched);
  // Claims the request's idempotency key (see IdempotencyKeys); true when the request is finished
  // (an earlier one did the work, or it waits for the outcome of one in flight).
  bool ClaimKey(const std::shared_ptr<Pending>& p, Request& request);
  // Converts the request's rows or block into p->staged, laid out as `schema`.
  absl::Status Convert(const Request& request, const TableSchema& schema, Pending* p);

  const Options options_;
  MemoryBudget* const budget_;
  SchemaCache* const schemas_;
  IdempotencyKeys* const keys_;
  TaskRunner* const runner_;
  Clock* const clock_;
  IngestObserver* const observer_;
  const Next next_;

  // Taken before the runner's lock (a conversion is queued under it, so Close and the queueing
  // are one order); never held while calling out.
  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace chgate::ingest
