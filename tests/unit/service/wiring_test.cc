// A default Config maps onto the components' own defaults: each default lives in the option
// table (server/config/config.cc), and a component struct that disagrees fails here.
#include "server/wiring.h"

#include <gtest/gtest.h>

namespace chgate {
namespace {

config::Config Defaults() {
  const char* argv[] = {"chgate"};
  absl::StatusOr<config::Config> c = config::Parse(1, argv, nullptr);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(WiringTest, DefaultConfigIsTheConnectionDefault) {
  const clickhouse::ConnectionOptions mapped = ConnectionOptionsFrom(Defaults());
  const clickhouse::ConnectionOptions own;
  // The library sends no database by default (the server picks the user's); chgate names
  // "default", which is that database for its default user.
  EXPECT_EQ(own.database, "");
  EXPECT_EQ(mapped.database, "default");
  EXPECT_EQ(mapped.user, own.user);
  EXPECT_EQ(mapped.password, own.password);
  EXPECT_EQ(mapped.compression, own.compression);
  EXPECT_EQ(mapped.connect_timeout, own.connect_timeout);
  EXPECT_EQ(mapped.handshake_timeout, own.handshake_timeout);
  EXPECT_EQ(mapped.read_timeout, own.read_timeout);
}

TEST(WiringTest, DefaultConfigIsThePoolDefault) {
  const clickhouse::PoolOptions mapped = PoolOptionsFrom(Defaults(), {});
  const clickhouse::PoolOptions own;
  EXPECT_EQ(mapped.endpoint_policy, own.endpoint_policy);
  EXPECT_EQ(mapped.max_connections, own.max_connections);
  EXPECT_EQ(mapped.min_connections, own.min_connections);
  EXPECT_EQ(mapped.max_lifetime, own.max_lifetime);
  EXPECT_EQ(mapped.max_idle, own.max_idle);
  EXPECT_EQ(mapped.probe_interval, own.probe_interval);
  ASSERT_EQ(mapped.endpoints.size(), 1u);
  EXPECT_EQ(mapped.endpoints[0].host, "127.0.0.1");
  EXPECT_EQ(mapped.endpoints[0].port, 9000);
}

TEST(WiringTest, DefaultConfigIsTheIngestDefault) {
  const ingest::IngestOptions mapped = IngestOptionsFrom(Defaults());
  const ingest::IngestOptions own;
  EXPECT_EQ(mapped.default_database, own.default_database);
  EXPECT_EQ(mapped.limits.max_rows, own.limits.max_rows);
  EXPECT_EQ(mapped.limits.max_bytes, own.limits.max_bytes);
  EXPECT_EQ(mapped.limits.max_delay, own.limits.max_delay);
  EXPECT_TRUE(mapped.table_limits.empty());
  EXPECT_EQ(mapped.memory_budget_bytes, own.memory_budget_bytes);
  EXPECT_EQ(mapped.table_budget_bytes, own.table_budget_bytes);
  EXPECT_EQ(mapped.ready_high_water, own.ready_high_water);
  EXPECT_EQ(mapped.ready_low_water, own.ready_low_water);
  EXPECT_EQ(mapped.retry.initial_backoff, own.retry.initial_backoff);
  EXPECT_EQ(mapped.retry.max_backoff, own.retry.max_backoff);
  EXPECT_EQ(mapped.retry.max_elapsed, own.retry.max_elapsed);
  EXPECT_EQ(mapped.default_ack, own.default_ack);
  EXPECT_EQ(mapped.convert.null_as_default, own.convert.null_as_default);
  EXPECT_EQ(mapped.flush_threads, own.flush_threads);
  EXPECT_EQ(mapped.max_delay_ceiling, own.max_delay_ceiling);
  EXPECT_EQ(mapped.slow_insert, own.slow_insert);
  // Not options: docs/api.md states them (10 minutes, at most 100,000 keys).
  EXPECT_EQ(mapped.idempotency_window, absl::Minutes(10));
  EXPECT_EQ(mapped.idempotency_max_keys, 100000u);
}

TEST(WiringTest, DefaultConfigIsTheQueryDefault) {
  const service::QueryServiceOptions mapped = QueryServiceOptionsFrom(Defaults()).value();
  const service::QueryServiceOptions own;
  EXPECT_EQ(mapped.max_concurrent_queries, own.max_concurrent_queries);
  EXPECT_EQ(mapped.response_bytes, own.response_bytes);
  EXPECT_EQ(mapped.max_buffered_bytes, own.max_buffered_bytes);
  EXPECT_EQ(mapped.allow_writes, own.allow_writes);
  EXPECT_EQ(mapped.allowed_table_functions, own.allowed_table_functions);
  EXPECT_EQ(mapped.default_timeout, own.default_timeout);
  EXPECT_EQ(mapped.cancel_drain_timeout, own.cancel_drain_timeout);
}

// --query-allowed-settings widens the allowlist but never to a setting about users, quotas,
// roles, DDL, query logging or running queries: the start is refused, naming it, whatever its
// case.
TEST(WiringTest, AllowedQuerySettingsNeverIncludeTheForbiddenOnes) {
  for (const char* name : {"readonly", "READONLY", "user", "max_memory_usage_for_user", "allow_ddl",
                           "log_queries", "replace_running_query", "profile", "quota_key"}) {
    const std::string flag = std::string("--query-allowed-settings=") + name;
    const char* argv[] = {"chgate", flag.c_str()};
    absl::StatusOr<config::Config> c = config::Parse(2, argv, nullptr);
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<service::QueryServiceOptions> q = QueryServiceOptionsFrom(*c);
    ASSERT_FALSE(q.ok()) << name;
    EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(q.status().message().find(name), std::string::npos) << q.status();
  }
  const char* argv[] = {"chgate", "--query-allowed-settings=skip_unavailable_shards"};
  absl::StatusOr<config::Config> c = config::Parse(2, argv, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<service::QueryServiceOptions> q = QueryServiceOptionsFrom(*c);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_TRUE(q->settings.Check("skip_unavailable_shards", "1").ok());
  EXPECT_FALSE(
      QueryServiceOptionsFrom(Defaults())->settings.Check("skip_unavailable_shards", "1").ok());
}

TEST(WiringTest, TableLimitsFallBackToTheGlobalOnes) {
  const char* argv[] = {"chgate", "--batch-max-rows=500", "--table-limits=logs:delay=1s"};
  absl::StatusOr<config::Config> c = config::Parse(3, argv, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  const ingest::IngestOptions mapped = IngestOptionsFrom(*c);
  ASSERT_EQ(mapped.table_limits.count("default.logs"), 1u);
  EXPECT_EQ(mapped.table_limits.at("default.logs").max_rows, 500u);
  EXPECT_EQ(mapped.table_limits.at("default.logs").max_delay, absl::Seconds(1));
  EXPECT_EQ(mapped.table_limits.at("default.logs").max_bytes, c->batch_max_bytes);
}

}  // namespace
}  // namespace chgate
