// Pool: connections to one or more ClickHouse endpoints (replicas). Acquire() hands out a usable
// connection: an idle one (pinged first when it sat idle past `ping_after_idle`), or a new one
// while fewer than `max_connections` exist. A new connection goes to the endpoints in the order
// of the EndpointPolicy, skipping for a while an endpoint that just failed (failover). A connection
// comes back to the pool when its PooledConnection is destroyed, unless it is broken (I/O or
// protocol error, or a query left unfinished), in which case it is closed: a connection is never
// reused after a protocol error. A maintenance thread closes connections past `max_lifetime` or
// idle past `max_idle` and keeps `min_connections` open. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/clickhouse/connection.h"

namespace chgate::clickhouse {

struct Endpoint {
  std::string host;
  uint16_t port = 9000;
  // Connect with TLS, using PoolOptions::connection.tls (which must then be set).
  bool tls = false;
};

// Which endpoint a new connection tries first.
enum class EndpointPolicy {
  // Each new connection starts one endpoint further along the list than the previous one, so
  // connections (and the parts their inserts make) spread over the replicas.
  kRoundRobin,
  // Every new connection starts at the first endpoint; later ones are only the fallbacks. Once
  // the first one is back, connections made meanwhile to a fallback stay in use until they
  // expire (max_lifetime).
  kOrdered,
};

struct PoolOptions {
  std::vector<Endpoint> endpoints;
  EndpointPolicy endpoint_policy = EndpointPolicy::kRoundRobin;
  // Host and port are taken from `endpoints`; everything else applies to every connection
  // (`tls` only to endpoints marked tls).
  ConnectionOptions connection;
  size_t max_connections = 8;
  size_t min_connections = 1;
  absl::Duration max_lifetime = absl::Hours(1);
  absl::Duration max_idle = absl::Minutes(5);
  absl::Duration ping_after_idle = absl::Seconds(30);
  // How long an endpoint is skipped after a failed connect (unless every endpoint failed).
  absl::Duration endpoint_backoff = absl::Seconds(5);
  absl::Duration maintenance_interval = absl::Seconds(5);
  // How often an endpoint without connections is probed; zero: never.
  absl::Duration probe_interval = absl::Seconds(10);
};

// Per-endpoint counts, for metrics.
struct EndpointStats {
  std::string endpoint;  // "host:port"
  uint64_t idle = 0;
  uint64_t in_use = 0;
  uint64_t connects = 0;
  uint64_t connect_failures = 0;
  uint64_t discarded_broken = 0;  // closed after an error
  uint64_t closed_expired = 0;    // closed for lifetime or idleness
  uint64_t probes = 0;            // probe connections (not counted in connects)
  uint64_t probe_failures = 0;    // failed probes (not counted in connect_failures)
  bool healthy = false;           // the last connect attempt (or probe) succeeded; false before any
  absl::Time last_success = absl::InfinitePast();  // of a connect or probe
};

class Pool;

// A connection on loan from the pool; returns it (or closes it when broken) on destruction.
class PooledConnection {
 public:
  PooledConnection() = default;
  PooledConnection(PooledConnection&& other) noexcept;
  PooledConnection& operator=(PooledConnection&& other) noexcept;
  ~PooledConnection();

  Connection* get() const { return conn_.get(); }
  Connection* operator->() const { return conn_.get(); }
  Connection& operator*() const { return *conn_; }
  const Endpoint& endpoint() const;
  // Closes the connection instead of returning it.
  void Discard();

 private:
  friend class Pool;
  PooledConnection(Pool* pool, std::unique_ptr<Connection> conn, size_t endpoint,
                   absl::Time created);
  void Release();

  Pool* pool_ = nullptr;
  std::unique_ptr<Connection> conn_;
  size_t endpoint_ = 0;
  absl::Time created_;
};

class Pool {
 public:
  explicit Pool(PoolOptions options);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // Starts the maintenance thread (and opens min_connections in it).
  void Start();

  // A usable connection, waiting until `deadline` when max_connections are in use.
  // Errors: Unavailable when no endpoint accepts a connection (the message names each endpoint
  // and its error), DeadlineExceeded when none became free in time, Cancelled after Shutdown().
  absl::StatusOr<PooledConnection> Acquire(absl::Time deadline);

  std::vector<EndpointStats> Stats() const;
  const PoolOptions& options() const { return options_; }

  // Closes idle connections and refuses new Acquire() calls.
  void Shutdown();
  // Shutdown(), and interrupts every operation on a connection in use (Connection::Cancel): a
  // blocked read or write fails at once, so the caller returns within its own bookkeeping time
  // whatever the server does. For a drain deadline. Returns how many were interrupted.
  size_t Abort();

 private:
  friend class PooledConnection;
  struct Idle {
    std::unique_ptr<Connection> conn;
    size_t endpoint;
    absl::Time created;
    absl::Time idle_since;
  };

  // Takes back a connection; `discard` closes it (counted as closed, not as broken).
  void Return(std::unique_ptr<Connection> conn, size_t endpoint, absl::Time created,
              bool discard = false);
  absl::StatusOr<PooledConnection> Open(absl::Time deadline);
  void Maintain();
  // The connection options for endpoint `e` (its host, port and TLS).
  ConnectionOptions OptionsFor(size_t e) const;
  // Connects to the endpoints due for a probe and records the outcome.
  void Probe();
  // Records the outcome of a connect attempt (or a probe) to endpoint `e`, and logs the endpoint
  // going down or coming up.
  void RecordConnect(size_t e, const absl::Status& status, absl::Time now, bool probe)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t OpenCountLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const PoolOptions options_;
  mutable absl::Mutex mu_;
  std::vector<Idle> idle_ ABSL_GUARDED_BY(mu_);
  std::vector<EndpointStats> stats_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> skip_until_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> last_attempt_ ABSL_GUARDED_BY(mu_);  // connect or probe, per endpoint
  std::vector<absl::Time> down_since_ ABSL_GUARDED_BY(mu_);    // first failure after a success
  size_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
  // The connections handed out, for Abort(); each is removed (in Return) before it is closed.
  std::set<Connection*> lent_ ABSL_GUARDED_BY(mu_);
  size_t opening_ ABSL_GUARDED_BY(mu_) = 0;
  size_t next_endpoint_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::thread maintenance_;
};

}  // namespace chgate::clickhouse
