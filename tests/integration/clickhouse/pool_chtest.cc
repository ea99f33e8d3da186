// The connection pool against the local ClickHouse.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "server/clickhouse/pool.h"
#include "tests/integration/clickhouse/live.h"
#include "tests/unit/clickhouse/test_util.h"

namespace chgate::clickhouse::testing {
namespace {

PoolOptions LivePool(size_t max_connections) {
  LiveEndpoint ep = LiveServer();
  return PoolOptions{.endpoints = {{ep.host, ep.port}},
                     .connection = LiveOptions(),
                     .max_connections = max_connections,
                     .min_connections = 0};
}

class PoolLiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ConnectOrSkip() == nullptr) GTEST_SKIP();
  }
};

TEST_F(PoolLiveTest, ReusesAReturnedConnection) {
  Pool pool(LivePool(2));
  Connection* first = nullptr;
  {
    auto conn = pool.Acquire(absl::Now() + absl::Seconds(5));
    ASSERT_TRUE(conn.ok()) << conn.status();
    first = conn->get();
    ASSERT_TRUE((*conn)->Ping().ok());
  }
  auto again = pool.Acquire(absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), first);
  auto stats = pool.Stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].connects, 1u);
  EXPECT_EQ(stats[0].in_use, 1u);
}

TEST_F(PoolLiveTest, WaitsForAFreeConnectionUntilTheDeadline) {
  Pool pool(LivePool(1));
  auto held = pool.Acquire(absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(held.ok());
  auto waited = pool.Acquire(absl::Now() + absl::Milliseconds(100));
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kDeadlineExceeded);
  // Released from another thread while a caller waits: the waiter gets it.
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(50));
    *held = PooledConnection();
  });
  auto got = pool.Acquire(absl::Now() + absl::Seconds(5));
  releaser.join();
  EXPECT_TRUE(got.ok()) << got.status();
}

TEST_F(PoolLiveTest, NeverReusesABrokenConnection) {
  Pool pool(LivePool(2));
  {
    auto conn = pool.Acquire(absl::Now() + absl::Seconds(5));
    ASSERT_TRUE(conn.ok());
    // Leave a query unfinished: the connection is not reusable.
    ASSERT_TRUE(
        (*conn)->SendQuery({.query = "SELECT number FROM system.numbers LIMIT 100000"}).ok());
  }
  auto next = pool.Acquire(absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE((*next)->Ping().ok());
  EXPECT_EQ(pool.Stats()[0].discarded_broken, 1u);
  EXPECT_EQ(pool.Stats()[0].connects, 2u);  // a fresh connection, not the broken one
}

TEST_F(PoolLiveTest, FailsOverToTheNextEndpoint) {
  PoolOptions options = LivePool(2);
  options.endpoints.insert(options.endpoints.begin(), Endpoint{"127.0.0.1", DeadLoopbackPort()});
  Pool pool(options);
  auto conn = pool.Acquire(absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_EQ(conn->endpoint().port, LiveServer().port);
  auto stats = pool.Stats();
  EXPECT_EQ(stats[0].connect_failures, 1u);
  EXPECT_FALSE(stats[0].healthy);
  EXPECT_EQ(stats[1].connects, 1u);
}

TEST(PoolTest, NoEndpointReachableNamesEveryEndpoint) {
  uint16_t a = DeadLoopbackPort(), b = DeadLoopbackPort();
  Pool pool(PoolOptions{.endpoints = {{"127.0.0.1", a}, {"127.0.0.1", b}},
                        .connection = {.connect_timeout = absl::Seconds(1)},
                        .max_connections = 1,
                        .min_connections = 0});
  auto conn = pool.Acquire(absl::Now() + absl::Seconds(5));
  EXPECT_EQ(conn.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(conn.status().message()).find(std::to_string(a)), std::string::npos);
  EXPECT_NE(std::string(conn.status().message()).find(std::to_string(b)), std::string::npos);
  // The failed attempt does not leak a slot.
  auto again = pool.Acquire(absl::Now() + absl::Seconds(5));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace chgate::clickhouse::testing
