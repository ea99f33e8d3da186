#include "server/clickhouse/pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/log/log.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {
namespace {
constexpr log::Component kLog("pool");
}  // namespace

PooledConnection::PooledConnection(Pool* pool, std::unique_ptr<Connection> conn, size_t endpoint,
                                   absl::Time created)
    : pool_(pool), conn_(std::move(conn)), endpoint_(endpoint), created_(created) {}

PooledConnection::PooledConnection(PooledConnection&& other) noexcept { *this = std::move(other); }

PooledConnection& PooledConnection::operator=(PooledConnection&& other) noexcept {
  if (this != &other) {
    Release();
    pool_ = std::exchange(other.pool_, nullptr);
    conn_ = std::move(other.conn_);
    endpoint_ = other.endpoint_;
    created_ = other.created_;
  }
  return *this;
}

PooledConnection::~PooledConnection() { Release(); }

const Endpoint& PooledConnection::endpoint() const { return pool_->options_.endpoints[endpoint_]; }

void PooledConnection::Release() {
  if (pool_ == nullptr) return;
  pool_->Return(std::move(conn_), endpoint_, created_);
  pool_ = nullptr;
}

void PooledConnection::Discard() {
  if (pool_ == nullptr) return;
  pool_->Return(std::move(conn_), endpoint_, created_, /*discard=*/true);
  pool_ = nullptr;
}

Pool::Pool(PoolOptions options) : options_(std::move(options)) {
  CHGATE_CHECK(!options_.endpoints.empty());
  for (const Endpoint& ep : options_.endpoints) CHGATE_CHECK(!ep.tls || options_.connection.tls);
  CHGATE_CHECK(options_.max_connections > 0);
  for (const Endpoint& ep : options_.endpoints) {
    EndpointStats s;
    s.endpoint = absl::StrCat(ep.host, ":", ep.port);
    stats_.push_back(std::move(s));
    skip_until_.push_back(absl::InfinitePast());
    last_attempt_.push_back(absl::InfinitePast());
    down_since_.push_back(absl::InfinitePast());
  }
}

Pool::~Pool() {
  Shutdown();
  if (maintenance_.joinable()) maintenance_.join();
}

void Pool::Start() {
  maintenance_ = std::thread([this] { Maintain(); });
}

void Pool::Shutdown() {
  std::vector<Idle> closing;
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
    closing.swap(idle_);
    for (EndpointStats& s : stats_) s.idle = 0;
  }
}

size_t Pool::Abort() {
  Shutdown();
  absl::MutexLock lock(&mu_);
  for (Connection* conn : lent_) conn->Cancel();
  return lent_.size();
}

size_t Pool::OpenCountLocked() const { return idle_.size() + in_use_ + opening_; }

std::vector<EndpointStats> Pool::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void Pool::Return(std::unique_ptr<Connection> conn, size_t endpoint, absl::Time created,
                  bool discard) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  lent_.erase(conn.get());
  if (discard) conn.reset();  // counted as closed, not as broken
  --in_use_;
  --stats_[endpoint].in_use;
  if (conn == nullptr || !conn->usable() || shutdown_) {
    if (conn != nullptr && !conn->usable()) {
      ++stats_[endpoint].discarded_broken;
      // The endpoint may be gone: check it at the next maintenance round, not a probe later.
      last_attempt_[endpoint] = absl::InfinitePast();
    }
    return;  // closed when `conn` goes out of scope (outside the lock would be nicer; it's cheap)
  }
  if (now - created > options_.max_lifetime) {
    ++stats_[endpoint].closed_expired;
    return;
  }
  idle_.push_back(Idle{std::move(conn), endpoint, created, now});
  ++stats_[endpoint].idle;
}

absl::StatusOr<PooledConnection> Pool::Acquire(absl::Time deadline) {
  while (true) {
    std::optional<Idle> candidate;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return shutdown_ || !idle_.empty() || OpenCountLocked() < options_.max_connections;
      };
      if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
        return absl::DeadlineExceededError(absl::StrCat(
            "no ClickHouse connection became free: all ", options_.max_connections, " in use"));
      }
      if (shutdown_) return absl::CancelledError("connection pool is shut down");
      if (!idle_.empty()) {
        // Most recently used first: it is the least likely to have been closed by the server.
        candidate = std::move(idle_.back());
        idle_.pop_back();
        --stats_[candidate->endpoint].idle;
        ++stats_[candidate->endpoint].in_use;
        ++in_use_;
        lent_.insert(candidate->conn.get());
      } else {
        ++opening_;
      }
    }
    if (!candidate) return Open(deadline);
    PooledConnection pooled(this, std::move(candidate->conn), candidate->endpoint,
                            candidate->created);
    const absl::Time now = absl::Now();
    if (now - candidate->created > options_.max_lifetime ||
        now - candidate->idle_since > options_.max_idle) {
      {
        absl::MutexLock lock(&mu_);
        ++stats_[candidate->endpoint].closed_expired;
      }
      pooled.Discard();
      continue;
    }
    if (now - candidate->idle_since > options_.ping_after_idle && !pooled->Ping().ok()) {
      pooled.Discard();  // counted as broken; try the next one
      continue;
    }
    return pooled;
  }
}

absl::StatusOr<PooledConnection> Pool::Open(absl::Time deadline) {
  // Endpoints in order from the policy's starting point, recently failed ones last (tried only
  // when every other one fails too).
  std::vector<size_t> order;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    const size_t n = options_.endpoints.size();
    const size_t start = options_.endpoint_policy == EndpointPolicy::kOrdered ? 0 : next_endpoint_;
    for (size_t i = 0; i < n; ++i) {
      size_t e = (start + i) % n;
      if (skip_until_[e] <= now) order.push_back(e);
    }
    for (size_t i = 0; i < n; ++i) {
      size_t e = (start + i) % n;
      if (skip_until_[e] > now) order.push_back(e);
    }
    next_endpoint_ = (next_endpoint_ + 1) % n;
  }
  std::vector<std::string> errors;
  for (size_t e : order) {
    ConnectionOptions opts = OptionsFor(e);
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    opts.connect_timeout = std::min(opts.connect_timeout, left);
    opts.handshake_timeout = std::min(opts.handshake_timeout, left);
    absl::StatusOr<std::unique_ptr<Connection>> conn = Connection::Connect(opts);
    absl::MutexLock lock(&mu_);
    RecordConnect(e, conn.status(), absl::Now(), /*probe=*/false);
    if (conn.ok()) {
      if (shutdown_) {
        // Aborted while connecting: nothing may start on it.
        --opening_;
        return absl::CancelledError("connection pool is shut down");
      }
      --opening_;
      ++in_use_;
      lent_.insert(conn->get());
      ++stats_[e].in_use;
      if (!errors.empty()) {
        kLog.Throttled(
            log::Level::kWarn, "failover: connected to another endpoint", stats_[e].endpoint,
            {{"endpoint", stats_[e].endpoint},
             {"failed", absl::StrJoin(errors, "; ")},
             {"policy",
              options_.endpoint_policy == EndpointPolicy::kOrdered ? "ordered" : "round-robin"}});
      }
      return PooledConnection(this, *std::move(conn), e, absl::Now());
    }
    errors.push_back(absl::StrCat(stats_[e].endpoint, ": ", conn.status().message()));
  }
  absl::MutexLock lock(&mu_);
  --opening_;
  if (errors.empty()) return absl::DeadlineExceededError("deadline passed before connecting");
  return absl::UnavailableError(
      absl::StrCat("no ClickHouse endpoint reachable (", absl::StrJoin(errors, "; "), ")"));
}

ConnectionOptions Pool::OptionsFor(size_t e) const {
  ConnectionOptions opts = options_.connection;
  opts.host = options_.endpoints[e].host;
  opts.port = options_.endpoints[e].port;
  if (!options_.endpoints[e].tls) opts.tls = nullptr;
  return opts;
}

void Pool::RecordConnect(size_t e, const absl::Status& status, absl::Time now, bool probe) {
  const bool ok = status.ok();
  const EndpointStats& s = stats_[e];
  const bool first = s.connects + s.connect_failures + s.probes == 0;
  const char* via = probe ? "probe" : "connect";
  if (ok && (first || !s.healthy)) {
    if (down_since_[e] == absl::InfinitePast()) {
      kLog.Throttled(log::Level::kInfo, "endpoint up", s.endpoint,
                     {{"endpoint", s.endpoint}, {"tls", options_.endpoints[e].tls}, {"via", via}});
    } else {
      kLog.Throttled(log::Level::kInfo, "endpoint up", s.endpoint,
                     {{"endpoint", s.endpoint},
                      {"tls", options_.endpoints[e].tls},
                      {"via", via},
                      {"down_for", absl::Trunc(now - down_since_[e], absl::Milliseconds(1))}});
    }
    down_since_[e] = absl::InfinitePast();
  } else if (!ok && (first || s.healthy)) {
    down_since_[e] = now;
    kLog.Throttled(log::Level::kWarn, "endpoint down", s.endpoint,
                   {{"endpoint", s.endpoint},
                    {"tls", options_.endpoints[e].tls},
                    {"via", via},
                    {"error", status.message()}});
  }
  last_attempt_[e] = now;
  stats_[e].healthy = ok;
  if (probe) {
    ++stats_[e].probes;
    if (!ok) ++stats_[e].probe_failures;
  } else {
    ++(ok ? stats_[e].connects : stats_[e].connect_failures);
  }
  if (ok) {
    stats_[e].last_success = now;
    skip_until_[e] = absl::InfinitePast();
  } else {
    skip_until_[e] = now + options_.endpoint_backoff;
  }
}

void Pool::Probe() {
  if (options_.probe_interval <= absl::ZeroDuration()) return;
  std::vector<size_t> due;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    for (size_t e = 0; e < options_.endpoints.size(); ++e) {
      const bool has_connections = stats_[e].idle + stats_[e].in_use > 0;
      if (!has_connections && now - last_attempt_[e] >= options_.probe_interval) due.push_back(e);
    }
  }
  for (size_t e : due) {
    const ConnectionOptions opts = OptionsFor(e);
    // A probe is a real handshake (so a wrong password or certificate counts as down); the
    // connection is closed rather than pooled, so the endpoint policy alone decides where
    // queries and inserts go.
    absl::StatusOr<std::unique_ptr<Connection>> conn = Connection::Connect(opts);
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    RecordConnect(e, conn.status(), absl::Now(), /*probe=*/true);
  }
}

void Pool::Maintain() {
  bool first = true;
  while (true) {
    std::vector<Idle> expired;
    size_t missing = 0;
    {
      absl::MutexLock lock(&mu_);
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shutdown_; };
      absl::Duration wait = options_.maintenance_interval;
      if (options_.probe_interval > absl::ZeroDuration()) {
        wait = std::min(wait, options_.probe_interval);
      }
      // The first round starts at once, so endpoints are known right after the start.
      if (!first) mu_.AwaitWithTimeout(absl::Condition(&stop), wait);
      first = false;
      if (shutdown_) return;
      const absl::Time now = absl::Now();
      for (size_t i = 0; i < idle_.size();) {
        if (now - idle_[i].created > options_.max_lifetime ||
            now - idle_[i].idle_since > options_.max_idle) {
          --stats_[idle_[i].endpoint].idle;
          ++stats_[idle_[i].endpoint].closed_expired;
          expired.push_back(std::move(idle_[i]));
          idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
      size_t open = OpenCountLocked();
      if (open < options_.min_connections) missing = options_.min_connections - open;
    }
    expired.clear();  // closes them outside the lock
    for (size_t i = 0; i < missing; ++i) {
      absl::StatusOr<PooledConnection> conn;
      {
        absl::MutexLock lock(&mu_);
        if (shutdown_) return;
        ++opening_;
      }
      conn = Open(absl::Now() + options_.connection.connect_timeout);
      if (!conn.ok()) break;  // Release() below returns it to the idle list
    }
    Probe();
  }
}

}  // namespace chgate::clickhouse
