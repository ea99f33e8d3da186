// The pool's endpoint policies against two null servers: round-robin spreads new connections
// over the endpoints, ordered keeps them on the first and uses the others only as fallbacks.
#include "server/clickhouse/pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/log/log.h"
#include "tests/bench/null_server.h"
#include "tests/unit/clickhouse/test_util.h"

namespace chgate::clickhouse {
namespace {

class PoolPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto& server : servers_) {
      server = std::make_unique<NullServer>(NullServerOptions{});
      ASSERT_TRUE(server->Start().ok());
    }
  }

  PoolOptions Options(EndpointPolicy policy, std::vector<uint16_t> ports) {
    PoolOptions options;
    for (uint16_t port : ports) options.endpoints.push_back({.host = "127.0.0.1", .port = port});
    options.endpoint_policy = policy;
    options.max_connections = 4;
    options.min_connections = 0;
    options.connection.connect_timeout = absl::Seconds(5);
    return options;
  }

  // The endpoint index of each of `n` connections held at the same time (so each is new).
  std::vector<size_t> HoldConnections(Pool& pool, int n) {
    std::vector<PooledConnection> held;
    std::vector<size_t> endpoints;
    for (int i = 0; i < n; ++i) {
      auto conn = pool.Acquire(absl::Now() + absl::Seconds(10));
      EXPECT_TRUE(conn.ok()) << conn.status();
      if (!conn.ok()) break;
      const Endpoint& ep = conn->endpoint();
      endpoints.push_back(ep.port == pool.options().endpoints[0].port ? 0 : 1);
      held.push_back(*std::move(conn));
    }
    return endpoints;
  }

  std::unique_ptr<NullServer> servers_[2];
};

TEST_F(PoolPolicyTest, RoundRobinSpreadsNewConnectionsOverTheEndpoints) {
  Pool pool(Options(EndpointPolicy::kRoundRobin, {servers_[0]->port(), servers_[1]->port()}));
  EXPECT_EQ(HoldConnections(pool, 4), (std::vector<size_t>{0, 1, 0, 1}));
}

TEST_F(PoolPolicyTest, OrderedKeepsNewConnectionsOnTheFirstEndpoint) {
  Pool pool(Options(EndpointPolicy::kOrdered, {servers_[0]->port(), servers_[1]->port()}));
  EXPECT_EQ(HoldConnections(pool, 4), (std::vector<size_t>{0, 0, 0, 0}));
}

TEST_F(PoolPolicyTest, BothPoliciesFailOverFromADeadEndpoint) {
  for (EndpointPolicy policy : {EndpointPolicy::kRoundRobin, EndpointPolicy::kOrdered}) {
    Pool pool(Options(policy, {testing::DeadLoopbackPort(), servers_[1]->port()}));
    EXPECT_EQ(HoldConnections(pool, 3), (std::vector<size_t>{1, 1, 1}));
    auto stats = pool.Stats();
    // The dead endpoint was tried once, then skipped for the backoff.
    EXPECT_EQ(stats[0].connect_failures, 1u);
    EXPECT_FALSE(stats[0].healthy);
    EXPECT_EQ(stats[1].connects, 3u);
  }
}

}  // namespace
}  // namespace chgate::clickhouse

namespace chgate::clickhouse {
namespace {

// Waits until `done(stats)` holds, for at most 10 s; returns whether it did.
template <typename Done>
bool WaitForStats(const Pool& pool, Done done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    if (done(pool.Stats())) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

TEST(PoolProbeTest, EveryEndpointIsProbedAtStartWithoutTraffic) {
  NullServer live(NullServerOptions{});
  ASSERT_TRUE(live.Start().ok());
  PoolOptions options;
  options.endpoints = {{.host = "127.0.0.1", .port = live.port()},
                       {.host = "127.0.0.1", .port = testing::DeadLoopbackPort()}};
  options.min_connections = 0;
  options.probe_interval = absl::Milliseconds(50);
  options.maintenance_interval = absl::Milliseconds(20);
  Pool pool(options);
  // Before anything is known, no endpoint counts as up.
  EXPECT_FALSE(pool.Stats()[0].healthy);
  EXPECT_FALSE(pool.Stats()[1].healthy);
  pool.Start();
  EXPECT_TRUE(WaitForStats(pool, [](const std::vector<EndpointStats>& s) {
    return s[0].healthy && s[0].last_success != absl::InfinitePast() && s[1].probe_failures >= 2;
  }));
  const auto stats = pool.Stats();
  EXPECT_FALSE(stats[1].healthy);
  EXPECT_EQ(stats[1].last_success, absl::InfinitePast());
  // Probe connections are closed, not pooled, and counted apart from the pool's own.
  EXPECT_EQ(stats[0].idle, 0u);
  EXPECT_EQ(stats[0].connects, 0u);
  EXPECT_GE(stats[0].probes, 1u);
  EXPECT_EQ(stats[1].connect_failures, 0u);
}

TEST(PoolProbeTest, ARecoveredEndpointIsSeenWithoutTraffic) {
  const uint16_t port = testing::DeadLoopbackPort();
  PoolOptions options;
  options.endpoints = {{.host = "127.0.0.1", .port = port}};
  options.min_connections = 0;
  options.probe_interval = absl::Milliseconds(50);
  options.maintenance_interval = absl::Milliseconds(20);
  options.endpoint_backoff = absl::Milliseconds(10);
  Pool pool(options);
  pool.Start();
  ASSERT_TRUE(WaitForStats(
      pool, [](const std::vector<EndpointStats>& s) { return s[0].probe_failures >= 1; }));
  EXPECT_FALSE(pool.Stats()[0].healthy);
  NullServerOptions server_options;
  server_options.port = port;
  NullServer server(std::move(server_options));
  ASSERT_TRUE(server.Start().ok());
  EXPECT_TRUE(WaitForStats(pool, [](const std::vector<EndpointStats>& s) { return s[0].healthy; }));
}

TEST(PoolProbeTest, EndpointsWithConnectionsAreNotProbed) {
  NullServer live(NullServerOptions{});
  ASSERT_TRUE(live.Start().ok());
  PoolOptions options;
  options.endpoints = {{.host = "127.0.0.1", .port = live.port()}};
  options.min_connections = 1;
  options.probe_interval = absl::Milliseconds(20);
  options.maintenance_interval = absl::Milliseconds(10);
  Pool pool(options);
  pool.Start();
  ASSERT_TRUE(
      WaitForStats(pool, [](const std::vector<EndpointStats>& s) { return s[0].idle == 1; }));
  const uint64_t probes = pool.Stats()[0].probes;
  absl::SleepFor(absl::Milliseconds(200));  // ten probe intervals
  EXPECT_EQ(pool.Stats()[0].probes, probes);
}

}  // namespace
}  // namespace chgate::clickhouse

namespace chgate::clickhouse {
namespace {

// The pool's log: an endpoint failing, the failover, the endpoint that answered.
TEST_F(PoolPolicyTest, LogsEndpointDownFailoverAndUpOnceEach) {
  std::ostringstream out;
  log::Logger logger(
      {.format = log::Format::kJson, .out = &out, .sweep_interval = absl::ZeroDuration()});
  log::SetLogger(&logger);
  const uint16_t dead = testing::DeadLoopbackPort();
  {
    Pool pool(Options(EndpointPolicy::kOrdered, {dead, servers_[1]->port()}));
    std::vector<PooledConnection> held;
    for (int i = 0; i < 3; ++i) {
      auto conn = pool.Acquire(absl::Now() + absl::Seconds(10));
      ASSERT_TRUE(conn.ok()) << conn.status();
      held.push_back(*std::move(conn));
    }
  }
  log::SetLogger(nullptr);
  const std::string dead_name = absl::StrCat("127.0.0.1:", dead);
  const std::string live_name = absl::StrCat("127.0.0.1:", servers_[1]->port());
  const std::vector<std::string> lines = absl::StrSplit(out.str(), '\n', absl::SkipEmpty());
  // The dead endpoint is tried once (then skipped for the backoff): one line each.
  ASSERT_EQ(lines.size(), 3u) << out.str();
  EXPECT_THAT(lines[0],
              ::testing::HasSubstr(absl::StrCat(
                  R"("level":"warn","component":"pool","msg":"endpoint down","endpoint":")",
                  dead_name, R"(","tls":false,"via":"connect","error":")")));
  EXPECT_THAT(lines[1], ::testing::HasSubstr(absl::StrCat(R"("msg":"endpoint up","endpoint":")",
                                                          live_name, R"(","tls":false)")));
  EXPECT_THAT(lines[2], ::testing::HasSubstr(absl::StrCat(
                            R"("msg":"failover: connected to another endpoint","endpoint":")",
                            live_name, R"(","failed":")", dead_name, ": ")));
  EXPECT_THAT(lines[2], ::testing::HasSubstr(R"("policy":"ordered")"));
}

}  // namespace
}  // namespace chgate::clickhouse
