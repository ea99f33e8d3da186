// The pool's endpoint policies against two null servers: round-robin spreads new connections
// over the endpoints, ordered keeps them on the first and uses the others only as fallbacks.
#include "server/clickhouse/pool.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

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
