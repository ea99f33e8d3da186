#include "server/wiring.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/common/secret_file.h"
#include "server/log/log.h"

namespace chgate {
namespace {
constexpr log::Component kTlsLog("tls");
}  // namespace

absl::StatusOr<std::shared_ptr<clickhouse::TlsClientContext>> ClickHouseTlsFrom(
    const config::Config& c) {
  bool any = false;
  for (const auto& ep : c.endpoints) any = any || ep.tls;
  if (!any) return nullptr;
  if (c.clickhouse_tls_insecure_skip_verify) {
    kTlsLog.Warn(
        "--clickhouse-tls-insecure-skip-verify: ClickHouse's certificate is not verified; anyone "
        "on the network path can impersonate the server and read every row and password sent to "
        "it");
  }
  auto tls = clickhouse::TlsClientContext::Create({
      .ca_file = c.clickhouse_tls_ca_file,
      .cert_file = c.clickhouse_tls_cert_file,
      .key_file = c.clickhouse_tls_key_file,
      .server_name = c.clickhouse_tls_server_name,
      .insecure_skip_verify = c.clickhouse_tls_insecure_skip_verify,
  });
  if (!tls.ok()) {
    return absl::Status(tls.status().code(),
                        absl::StrCat("ClickHouse TLS: ", tls.status().message()));
  }
  return *std::move(tls);
}

absl::StatusOr<clickhouse::ConnectionOptions> ClickHouseConnectionFrom(
    const config::Config& c, std::shared_ptr<clickhouse::TlsClientContext> tls) {
  clickhouse::ConnectionOptions connection = ConnectionOptionsFrom(c);
  connection.tls = std::move(tls);
  if (!c.password_file.empty()) {
    // Re-read when the Secret behind it is rotated: new connections use the new password.
    auto password = SecretFile::Open(c.password_file);
    if (!password.ok()) {
      return absl::Status(password.status().code(),
                          absl::StrCat("--password-file: ", password.status().message()));
    }
    connection.password_file = *std::move(password);
  }
  return connection;
}

clickhouse::ConnectionOptions ConnectionOptionsFrom(const config::Config& c) {
  clickhouse::ConnectionOptions options;
  options.database = c.database;
  options.user = c.user;
  options.password = c.password;
  options.compression = c.compression == "none"   ? clickhouse::CompressionMethod::kNone
                        : c.compression == "zstd" ? clickhouse::CompressionMethod::kZstd
                                                  : clickhouse::CompressionMethod::kLz4;
  options.connect_timeout = c.connect_timeout;
  options.handshake_timeout = c.connect_timeout;  // --connect-timeout covers both
  options.read_timeout = c.read_timeout;
  return options;
}

clickhouse::PoolOptions PoolOptionsFrom(const config::Config& c,
                                        const clickhouse::ConnectionOptions& connection) {
  clickhouse::PoolOptions options;
  options.endpoint_policy = c.endpoint_policy == "ordered"
                                ? clickhouse::EndpointPolicy::kOrdered
                                : clickhouse::EndpointPolicy::kRoundRobin;
  options.connection = connection;
  options.max_connections = c.pool_max_connections;
  options.min_connections = c.pool_min_connections;
  options.max_lifetime = c.pool_max_lifetime;
  options.max_idle = c.pool_max_idle;
  options.probe_interval = c.endpoint_probe_interval;
  for (const auto& ep : c.endpoints) {
    options.endpoints.push_back({.host = ep.host, .port = ep.port, .tls = ep.tls});
  }
  return options;
}

ingest::IngestOptions IngestOptionsFrom(const config::Config& c) {
  ingest::IngestOptions options;
  options.default_database = c.database;
  options.limits = {c.batch_max_rows, c.batch_max_bytes, c.batch_max_delay};
  for (const auto& [table, l] : c.table_limits) {
    options.table_limits[table] = {
        l.max_rows != 0 ? l.max_rows : c.batch_max_rows,
        l.max_bytes != 0 ? l.max_bytes : c.batch_max_bytes,
        l.max_delay != absl::ZeroDuration() ? l.max_delay : c.batch_max_delay};
  }
  options.memory_budget_bytes = c.memory_budget;
  options.table_budget_bytes = c.table_memory_budget;
  options.ready_high_water = c.ready_high_water;
  options.ready_low_water = c.ready_low_water;
  options.retry = {c.retry_initial_backoff, c.retry_max_backoff, c.retry_max_elapsed};
  options.default_ack = c.ack_mode == "accepted"    ? ingest::AckMode::kAccepted
                        : c.ack_mode == "persisted" ? ingest::AckMode::kPersisted
                                                    : ingest::AckMode::kCommitted;
  options.convert.null_as_default = c.null_as_default;
  options.max_delay_ceiling = c.batch_max_delay_ceiling;
  options.slow_insert = c.slow_insert;
  options.async_insert = c.async_insert;
  // One flush thread per connection the pool may open.
  options.flush_threads = c.pool_max_connections;
  return options;
}

spool::SpoolOptions SpoolOptionsFrom(const config::Config& c) {
  spool::SpoolOptions options;
  options.segment_bytes = c.spool_segment_bytes;
  options.max_bytes = c.spool_max_bytes;
  options.group_commit_delay = c.spool_group_commit_delay;
  options.replay_payloads = false;
  // Enough for a record's table, column list and idempotency key (its header) in nearly every
  // case; longer headers are read back whole.
  options.replay_head_bytes = 4096;
  return options;
}

spool::SpoolOptions KeySpoolOptionsFrom(const config::Config& c) {
  spool::SpoolOptions options;
  // Records of a few KiB (the keys of one batch), let go after the key window: small segments,
  // so that a segment goes soon after its keys. Their appends are never refused (exempt).
  options.segment_bytes = std::min<uint64_t>(c.spool_segment_bytes, 4 << 20);
  options.max_bytes = c.spool_max_bytes;
  options.group_commit_delay = absl::ZeroDuration();
  return options;
}

absl::StatusOr<service::QueryServiceOptions> QueryServiceOptionsFrom(const config::Config& c) {
  absl::StatusOr<service::QuerySettingsPolicy> settings =
      service::QuerySettingsPolicy::Create(c.query_allowed_settings);
  if (!settings.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--query-allowed-settings: ", settings.status().message()));
  }
  service::QueryServiceOptions options;
  options.settings = *std::move(settings);
  options.max_concurrent_queries = c.query_max_concurrent;
  options.response_bytes = static_cast<uint32_t>(c.query_response_bytes);
  options.max_buffered_bytes = c.query_buffer_bytes;
  options.allow_writes = c.query_allow_writes;
  options.allowed_table_functions = c.query_allow_table_functions;
  options.default_timeout = c.query_default_timeout;
  options.cancel_drain_timeout = c.query_cancel_drain;
  return options;
}

}  // namespace chgate
