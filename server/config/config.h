// chgate's configuration: every option with its default, read from flags (`--name=value` or
// `--name value`) and environment variables (`CHGATE_NAME`, dashes as underscores; flags win),
// then validated. The ClickHouse password is read from a file, never from a flag.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace chgate::config {

struct Endpoint {
  std::string host;
  uint16_t port = 9000;  // 9000 plain, 9440 with TLS, unless given
  bool tls = false;      // tls:// endpoint, or --clickhouse-tls and no tcp:// scheme
};

struct TableLimits {
  uint64_t max_rows = 0;                            // 0: the global default
  uint64_t max_bytes = 0;                           // 0: the global default
  absl::Duration max_delay = absl::ZeroDuration();  // 0: the global default
};

struct Config {
  // Listeners.
  std::string listen = "127.0.0.1:50051";    // Insert/InsertStream/Query
  std::string health_listen = "[::]:50052";  // grpc.health.v1 for kubelet probes
  bool grpc_reflection = false;              // gRPC server reflection on both listeners
  std::string metrics_listen = "[::]:9464";  // Prometheus /metrics
  bool allow_remote_api = false;             // required to put the API on a non-loopback address
  // API security: TLS of the API listener, caller identities and the policy.
  std::string api_tls_cert_file;
  std::string api_tls_key_file;
  std::string api_tls_client_ca_file;
  std::string api_tls_client_auth = "require";  // require | optional
  std::string api_tokens_file;
  std::string api_policy_file;
  absl::Duration api_reload_interval = absl::Seconds(10);
  bool allow_insecure_remote_api = false;  // a non-loopback API without TLS
  // ClickHouse.
  std::vector<Endpoint> endpoints = {{"127.0.0.1", 9000}};
  std::string endpoints_text = "127.0.0.1:9000";  // as given; parsed once every option is read
  std::string endpoint_policy = "round-robin";    // round-robin | ordered
  absl::Duration endpoint_probe_interval = absl::Seconds(10);
  std::string user = "default";
  std::string password;  // from password_file
  std::string password_file;
  std::string database = "default";
  std::string compression = "lz4";  // none | lz4 | zstd
  // TLS to ClickHouse (the secure native port).
  bool clickhouse_tls = false;  // every endpoint without a scheme uses TLS
  std::string clickhouse_tls_ca_file;
  std::string clickhouse_tls_cert_file;
  std::string clickhouse_tls_key_file;
  std::string clickhouse_tls_server_name;
  bool clickhouse_tls_insecure_skip_verify = false;
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration read_timeout = absl::Seconds(60);
  uint64_t pool_max_connections = 8;
  uint64_t pool_min_connections = 1;
  absl::Duration pool_max_lifetime = absl::Hours(1);
  absl::Duration pool_max_idle = absl::Minutes(5);
  // Batching.
  uint64_t batch_max_rows = 100000;
  uint64_t batch_max_bytes = 16 << 20;
  absl::Duration batch_max_delay = absl::Milliseconds(200);
  std::map<std::string, TableLimits> table_limits;  // "db.table" -> overrides
  uint64_t memory_budget = 256 << 20;
  uint64_t table_memory_budget = 0;
  uint64_t max_message_bytes = 16 << 20;
  uint64_t max_concurrent_streams = 0;
  absl::Duration liveness_stall_timeout = absl::Minutes(5);
  double ready_high_water = 0.9;
  double ready_low_water = 0.7;
  std::string ack_mode = "committed";  // committed | accepted
  bool null_as_default = false;
  // Retries and deadlines.
  absl::Duration retry_initial_backoff = absl::Milliseconds(100);
  absl::Duration retry_max_backoff = absl::Seconds(5);
  absl::Duration retry_max_elapsed = absl::Seconds(60);
  absl::Duration default_deadline = absl::Seconds(30);
  absl::Duration drain_timeout = absl::Seconds(20);
  // Query RPC.
  uint64_t query_max_concurrent = 4;
  uint64_t query_response_bytes = 512 << 10;
  uint64_t query_buffer_bytes = 4 << 20;
  bool query_allow_writes = false;
  // Table functions Query may call (lower case, from sql::RefusedTableFunctions()).
  std::vector<std::string> query_allow_table_functions;
  absl::Duration query_default_timeout = absl::Minutes(5);
  absl::Duration query_cancel_drain = absl::Seconds(2);
  // Logging (server/log).
  std::string log_level = "info";   // debug | info | warn | error
  std::string log_format = "text";  // text | json
  absl::Duration log_repeat_interval = absl::Seconds(10);
  // One-shot mode: run this query, print the result as TSV and exit.
  std::string query;
  bool help = false;
  // CHGATE_* environment variables that name no option (a typo would otherwise go unnoticed);
  // main warns about them at start.
  std::vector<std::string> unknown_environment;
  // Every option's effective value as text (as given by a flag or variable, else its default), in
  // --help order, for the configuration line at start. Holds no secret: the ClickHouse password
  // comes from a file and is no option, and files are named, not read.
  std::vector<std::pair<std::string, std::string>> settings;
};

// Parses argv and the environment. Returns InvalidArgument with a message naming the option for
// unknown options, bad values and inconsistent settings; NotFound if the password file cannot be
// read.
absl::StatusOr<Config> Parse(int argc, const char* const* argv, const char* const* envp);

// The --help text: every option, its environment variable and its default.
std::string Usage();

// "[scheme://]host[:port][,...]" -> endpoints. The scheme is tcp:// (plain) or tls://; without
// one an endpoint uses TLS when `tls_default` is set. The port defaults to 9440 with TLS and
// 9000 without. IPv6 hosts go in brackets ("[::1]:9000").
absl::StatusOr<std::vector<Endpoint>> ParseEndpoints(absl::string_view text,
                                                     bool tls_default = false);
// "16MiB", "256MB", "1GiB", "4096" -> bytes.
absl::StatusOr<uint64_t> ParseBytes(absl::string_view text);
// Whether a listen address ("host:port") names a loopback host.
bool IsLoopbackAddress(absl::string_view address);

}  // namespace chgate::config
