// QueryRun: one Query call from pooled connection to trailer, on a query worker thread, in named
// steps: Acquire (a connection), Parameters (settings, max_execution_time, readonly), Stream
// (cursor blocks -> response messages, coalesced and split, with progress), Trailer (header of a
// result-less statement, totals, extremes, summary); CancelInClickHouse and ReleaseConnection
// cover an interrupted query and a connection that must not go back to the pool.
// A QueryRun is used once, by one thread; it reads the time only through the clock it is given.
// The call, pool, metrics and clock must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "chgate/v1/chgate.pb.h"
#include "server/clickhouse/block.h"
#include "server/clickhouse/cursor.h"
#include "server/clickhouse/pool.h"
#include "server/ingest/clock.h"
#include "server/service/observers.h"
#include "server/service/query_service.h"
#include "server/service/response_wire.h"
#include "text/trace_context.h"

namespace chgate::service {

// What a run needs of its call: the request, when it must end, whether it was cancelled, and a
// queue for its responses. QueryExecutor's gRPC reactor implements it; tests give a fake.
class QueryCall {
 public:
  virtual ~QueryCall() = default;
  virtual const v1::QueryRequest& request() const = 0;
  // When the call ends (the client's deadline, or the default timeout for calls with none).
  virtual absl::Time deadline() const = 0;
  // The client cancelled, the deadline passed in gRPC, or the server is shutting down.
  virtual bool cancelled() const = 0;
  // Cancelled because the server is shutting down.
  virtual bool shutting_down() const = 0;
  // Queues `message` for the client (waiting while the call's buffer is full) and sets `*bytes`
  // to its serialized size. Returns false when nothing more will be written (cancelled, a failed
  // write, or the buffer stayed full until the deadline). Its held data stays valid while the
  // message (or what it is serialized into) holds it.
  virtual bool Send(QueryMessage message, size_t* bytes) = 0;
  // An empty Block for the next response (possibly with buffers reused); the caller owns it.
  virtual v1::Block* TakeBlock() = 0;
  // The caller's trace (W3C traceparent from the call's metadata), sent to ClickHouse with the
  // query; none by default.
  virtual std::optional<text::TraceContext> trace() const { return std::nullopt; }
};

// Native column buffers lent from the cursor to response messages: a buffer held by messages
// comes back when the last of them is written and released, and is given to the cursor's column
// for a later block (fresh half-megabyte buffers for every block would cost page faults).
// Thread-safe: buffers come back on gRPC's threads.
class ColumnBufferPool : public std::enable_shared_from_this<ColumnBufferPool> {
 public:
  explicit ColumnBufferPool(size_t keep) : keep_(keep) {}
  // A cleared buffer, with the capacity of one returned earlier when there is one.
  clickhouse::ByteBuffer Take();
  // Shares `buffer` read-only; it comes back here (kept if fewer than `keep` are spare) when the
  // last reference is released.
  std::shared_ptr<const clickhouse::ByteBuffer> Hold(clickhouse::ByteBuffer buffer);

 private:
  void Return(clickhouse::ByteBuffer* buffer);

  const size_t keep_;
  absl::Mutex mu_;
  std::vector<clickhouse::ByteBuffer> spare_ ABSL_GUARDED_BY(mu_);
};

// Builds one query's responses: merges and splits blocks into messages of about `target` bytes.
// Rows wait in a pending message until it is nearly full or Flush is called; pending_since()
// says, by `clock`, when the oldest of them arrived.
class ResponseBuilder {
 public:
  ResponseBuilder(size_t target, std::function<bool(QueryMessage)> send,
                  std::function<v1::Block*()> take_block, ingest::Clock* clock);

  // Adds every row of `block`; sends full messages. Returns false once sending failed. A large
  // fixed-width column (not UUID) goes out from its own memory: its buffer moves into the
  // messages and the column gets another (so `block` must be a cursor's block, read before the
  // cursor's next one, and its values are gone afterwards).
  bool Add(clickhouse::Block* block);
  // Sends the rows gathered so far, if any. Returns false when sending failed.
  bool Flush();

  uint64_t pending_rows() const {
    return pending_.response.has_block() ? pending_.response.block().rows() : 0;
  }
  // When the oldest pending row was added.
  absl::Time pending_since() const { return pending_since_; }
  // Rows and messages sent so far.
  uint64_t rows() const { return rows_; }
  uint64_t blocks() const { return blocks_; }

 private:
  static size_t Estimate(const clickhouse::Block& block, size_t begin, size_t end);
  // Takes the buffers of `block`'s columns that go out from their own memory into held_.
  void HoldColumns(clickhouse::Block* block);
  // Appends rows [begin, end) of `block` to the pending message.
  void Append(const clickhouse::Block& block, size_t begin, size_t end);

  const size_t target_;
  const std::function<bool(QueryMessage)> send_;
  const std::function<v1::Block*()> take_block_;
  ingest::Clock* const clock_;
  const std::shared_ptr<ColumnBufferPool> buffers_;
  // For the block being added: per column, its values when they go out from their own memory.
  std::vector<std::shared_ptr<const clickhouse::ByteBuffer>> held_;
  QueryMessage pending_;
  size_t pending_bytes_ = 0;
  absl::Time pending_since_;
  uint64_t rows_ = 0;
  uint64_t blocks_ = 0;
};

class QueryRun {
 public:
  // `metrics` may be null.
  QueryRun(QueryCall* call, clickhouse::Pool* pool, const QueryServiceOptions& options,
           QueryObserver* observer, ingest::Clock* clock);
  QueryRun(const QueryRun&) = delete;
  QueryRun& operator=(const QueryRun&) = delete;

  // Runs the query to its end and returns the status to finish the call with, once the
  // responses queued on the call are written. The connection is back in the pool (or closed)
  // when it returns. Counts the query in `metrics` (started, streamed, finished).
  //
  // Errors: Cancelled (the caller cancelled), DeadlineExceeded (the call's deadline passed
  // while the query ran), Unavailable (shutdown, or no endpoint reachable), ResourceExhausted
  // (no connection became free before the deadline), Unimplemented (query parameters on a server
  // too old, or a result column the API cannot carry), InvalidArgument (max_execution_time not
  // in whole seconds), and whatever ClickHouse answered, mapped by clickhouse::ExceptionToStatus.
  absl::Status Run();

 private:
  // Every step after Acquire, on conn_.
  absl::Status RunOnConnection();

  // Takes a connection from the pool, in slices so that a caller who cancels while every
  // connection is busy frees its worker.
  absl::StatusOr<clickhouse::PooledConnection> Acquire();
  // Unimplemented when the request has parameters the server's revision cannot carry.
  absl::Status CheckServer() const;
  // Checks the request against what conn_'s server has (its catalog, read once per server): the
  // table functions it calls (sql::CheckTableFunctions: PermissionDenied) and its settings
  // (clickhouse::CheckSettingForServer, into settings_: InvalidArgument). Nothing is sent when
  // either fails.
  absl::Status CheckWithServer();
  // Switches conn_ to the request's database, if it names one (conn_ is then discarded).
  absl::Status UseDatabase();
  // The query as sent: the request's settings and parameters, max_execution_time bounded by the
  // call's deadline (whole seconds, rounded up) and, unless writes are allowed, readonly = 2.
  absl::StatusOr<clickhouse::QueryParams> Parameters();
  // The cursor's hooks: header, progress (if asked for), interruption and coalescing.
  clickhouse::CursorOptions CursorHooks();

  // Reads the result into response messages until the cursor ends or is interrupted.
  absl::Status Stream();
  // The messages after the rows: the header of a statement without a result, totals, extremes
  // and the summary.
  absl::Status Trailer();

  // Cursor hooks.
  void OnHeader(const clickhouse::Block& columns);
  void OnProgress(const clickhouse::Progress& progress);
  // Flushes rows pending longer than coalesce_delay; true when the query must stop.
  bool Interrupted();

  // Sends Cancel to ClickHouse, drains the connection (or marks it for discarding), logs why and
  // returns the status the caller gets for it.
  absl::Status CancelInClickHouse();
  // Why the query is being cancelled: "shutdown", "deadline", "result refused" or
  // "caller cancelled".
  const char* CancelReason() const;
  // Ends the cursor, then hands conn_ back to the pool or, when discard_ is set, closes it.
  void ReleaseConnection();

  bool Send(v1::QueryResponse response);
  bool Send(QueryMessage message);
  void SendProgress(const clickhouse::Progress& progress);
  bool DeadlinePassed() const;

  QueryCall* const call_;
  clickhouse::Pool* const pool_;
  const QueryServiceOptions& options_;
  QueryObserver* const observer_;  // may be null
  ingest::Clock* const clock_;
  const v1::QueryRequest& request_;

  clickhouse::PooledConnection conn_;
  // Set when conn_ must be closed rather than reused: the session may have changed (USE, SET,
  // temporary tables, another database) or a cancelled query was not drained.
  bool discard_ = false;
  std::string query_id_;
  ResponseBuilder builder_;
  // Declared after conn_ and destroyed before it (ReleaseConnection resets it first).
  std::optional<clickhouse::Cursor> cursor_;
  std::vector<clickhouse::Setting> settings_;  // the request's, checked for conn_'s server
  absl::Time sent_at_;

  // The header goes out as soon as the server names the columns (before it executes), so
  // progress can follow at once; progress that comes even earlier is held back until then.
  absl::Status header_status_;
  bool header_sent_ = false;
  std::optional<clickhouse::Progress> early_progress_;
  bool send_failed_ = false;
};

}  // namespace chgate::service
