// QueryExecutor: runs the Query RPC. Each admitted call gets one of `max_concurrent_queries`
// worker threads and a pooled ClickHouse connection; the worker reads the result through a
// clickhouse::Cursor and turns blocks into QueryResponse messages of about `response_bytes`
// (small blocks are merged, large ones split), which a ServerWriteReactor writes one at a time.
//
//   Flow control   at most `max_buffered_bytes` of responses wait for gRPC per query (plus the
//                  message being built); past that the worker stops reading from ClickHouse, so a
//                  slow caller slows the query instead of growing chgate's memory.
//   Admission      calls beyond `max_concurrent_queries` wait in FIFO order; one still waiting
//                  shortly before its deadline ends with RESOURCE_EXHAUSTED.
//   Cancellation   a cancelled call (client cancel, deadline, server shutdown) sends Cancel to
//                  ClickHouse; the connection is drained within `cancel_drain_timeout` and goes
//                  back to the pool, or is closed. The call's deadline also becomes the query's
//                  `max_execution_time` (rounded up to whole seconds).
//   Policy         before a call is admitted its SQL is checked by sql::CheckQuery: read-only
//                  statements only unless `allow_writes`, no table function that reaches outside
//                  the server unless named in `allowed_table_functions` (PERMISSION_DENIED), no
//                  INSERT with inline data. Unless `allow_writes`, queries also run with
//                  ClickHouse's `readonly = 2`.
//
// Thread-safe. Must outlive the grpc::Server the calls run on (its destructor cancels running
// queries and joins the workers); `pool` and `metrics` must outlive it.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "chgate/v1/chgate.grpc.pb.h"
#include "server/clickhouse/pool.h"
#include "server/clickhouse/server_catalog.h"
#include "server/ingest/clock.h"
#include "server/service/observers.h"
#include "server/service/query_settings.h"
#include "server/sql/query_policy.h"

namespace chgate::service {

struct QueryServiceOptions {
  size_t max_concurrent_queries = 4;
  // Target size of one response message when the request names none (and the upper bound of a
  // request's max_response_bytes hint), in bytes.
  uint32_t response_bytes = 512 << 10;
  uint32_t max_response_bytes = 3 << 20;
  // Response bytes per query waiting for gRPC before the worker stops reading ClickHouse.
  size_t max_buffered_bytes = 4 << 20;
  // How long rows may wait for more to fill a message while ClickHouse sends nothing new.
  absl::Duration coalesce_delay = absl::Milliseconds(20);
  bool allow_writes = false;
  // Lower-case names from sql::RefusedTableFunctions() that queries may call.
  std::vector<std::string> allowed_table_functions;
  // The settings callers may set (query_settings.h).
  QuerySettingsPolicy settings = QuerySettingsPolicy::Default();
  // What each server knows of settings, read once per server (shared by copies of the options).
  std::shared_ptr<clickhouse::ServerCatalogCache> server_catalog =
      std::make_shared<clickhouse::ServerCatalogCache>();
  // Deadline of calls that carry none.
  absl::Duration default_timeout = absl::Minutes(5);
  absl::Duration cancel_drain_timeout = absl::Seconds(2);
  // A call still waiting for a worker this long before its deadline gets RESOURCE_EXHAUSTED (so
  // the caller sees that code rather than its own DEADLINE_EXCEEDED).
  absl::Duration deadline_margin = absl::Milliseconds(200);
};

class QueryExecutor {
 public:
  // `metrics` may be null (tests). `clock` times the queries (deadlines of calls without one,
  // coalescing, max_execution_time, durations); it must outlive the executor.
  QueryExecutor(clickhouse::Pool* pool, QueryServiceOptions options, QueryObserver* observer,
                ingest::Clock* clock = ingest::RealClock());
  ~QueryExecutor();
  QueryExecutor(const QueryExecutor&) = delete;
  QueryExecutor& operator=(const QueryExecutor&) = delete;

  // The reactor for one Query call; `request` is the serialized QueryRequest (the method is
  // registered raw, see ingest_service.h). Bytes that do not parse end the call with
  // INVALID_ARGUMENT. `identity` is the authenticated caller ("" without authentication): a
  // query_id the caller chose is sent as "<identity>:<query_id>" (":" and "%" in the identity
  // percent-encoded), so no caller can take another's ids; one starting with "chgate-" (chgate's
  // own ids) is INVALID_ARGUMENT.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Start(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    const std::string& identity = "");

  // New calls end with UNAVAILABLE, waiting ones too; running queries are cancelled. Idempotent.
  void BeginShutdown();

  // Calls running and waiting now (for tests and metrics).
  size_t running() const;
  size_t waiting() const;

 private:
  class Call;
  friend class Call;

  void WorkerLoop();
  void ExpiryLoop();
  // Runs `call` with a QueryRun and finishes it.
  void Run(Call* call);
  // A waiting call was cancelled by its client: dropped from the queue (true) or already taken.
  bool Withdraw(Call* call);

  clickhouse::Pool* const pool_;
  const QueryServiceOptions options_;
  const sql::QueryPolicy policy_;
  QueryObserver* const observer_;  // may be null
  ingest::Clock* const clock_;

  mutable absl::Mutex mu_;
  std::deque<Call*> waiting_ ABSL_GUARDED_BY(mu_);
  uint64_t waiting_generation_ ABSL_GUARDED_BY(mu_) = 0;  // calls ever queued
  std::vector<Call*> running_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
  std::thread expiry_;
};

}  // namespace chgate::service
