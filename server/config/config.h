// chgate's configuration: every option is defined once in config.cc (name, default, help,
// parser and validation), read from environment variables (`CHGATE_NAME`, dashes as
// underscores) and then flags (`--name=value`, `--name value`, a boolean `--name` alone; parsed
// by CLI11; flags win), then validated as a whole. The ClickHouse password is read from a file,
// never from a flag.
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

// Every field an option sets starts empty here: its default is the option's default text in
// config.cc, applied by Parse. Build a Config with Parse (Parse(1, {"chgate"}, nullptr) for the
// defaults), not by hand.
struct Config {
  // Listeners.
  std::string listen{};           // Insert/InsertStream/Query (host:port or unix:PATH)
  uint32_t listen_socket_mode{};  // permission bits of a unix: API socket
  std::string health_listen{};    // grpc.health.v1 for kubelet probes
  bool grpc_reflection{};         // gRPC server reflection on both listeners
  std::string metrics_listen{};   // Prometheus /metrics
  bool allow_remote_api{};        // required to put the API on a non-loopback address
  // API security: TLS of the API listener, caller identities and the policy.
  std::string api_tls_cert_file;
  std::string api_tls_key_file;
  std::string api_tls_client_ca_file;
  std::string api_tls_client_auth{};  // require | optional
  std::string api_tokens_file;
  std::string api_policy_file;
  absl::Duration api_reload_interval{};
  bool allow_insecure_remote_api{};  // a non-loopback API without TLS
  // ClickHouse.
  std::vector<Endpoint> endpoints;  // from endpoints_text
  std::string endpoints_text{};     // as given; parsed once every option is read
  std::string endpoint_policy{};    // round-robin | ordered
  absl::Duration endpoint_probe_interval{};
  std::string user{};
  std::string password;  // from password_file
  std::string password_file;
  std::string database{};
  std::string compression{};  // none | lz4 | zstd
  // TLS to ClickHouse (the secure native port).
  bool clickhouse_tls{};  // every endpoint without a scheme uses TLS
  std::string clickhouse_tls_ca_file;
  std::string clickhouse_tls_cert_file;
  std::string clickhouse_tls_key_file;
  std::string clickhouse_tls_server_name;
  bool clickhouse_tls_insecure_skip_verify{};
  absl::Duration connect_timeout{};
  absl::Duration read_timeout{};
  uint64_t pool_max_connections{};
  uint64_t pool_min_connections{};
  absl::Duration pool_max_lifetime{};
  absl::Duration pool_max_idle{};
  // Batching.
  uint64_t batch_max_rows{};
  uint64_t batch_max_bytes{};
  absl::Duration batch_max_delay{};
  absl::Duration batch_max_delay_ceiling{};
  absl::Duration slow_insert{};
  std::map<std::string, TableLimits> table_limits;  // "db.table" -> overrides
  uint64_t memory_budget{};
  uint64_t table_memory_budget{};
  uint64_t max_message_bytes{};
  uint64_t max_concurrent_streams{};
  absl::Duration max_connection_age{};
  absl::Duration max_connection_age_grace{};
  absl::Duration liveness_stall_timeout{};
  double ready_high_water{};
  double ready_low_water{};
  std::string ack_mode{};  // committed | accepted | persisted
  bool async_insert{};
  // The durable spool of the persisted ack mode (empty: none).
  std::string spool_dir{};
  uint64_t spool_max_bytes{};
  uint64_t spool_segment_bytes{};
  absl::Duration spool_group_commit_delay{};
  bool null_as_default{};
  // Retries and deadlines.
  absl::Duration retry_initial_backoff{};
  absl::Duration retry_max_backoff{};
  absl::Duration retry_max_elapsed{};
  absl::Duration default_deadline{};
  absl::Duration drain_timeout{};
  // Query RPC.
  uint64_t query_max_concurrent{};
  uint64_t query_response_bytes{};
  uint64_t query_buffer_bytes{};
  bool query_allow_writes{};
  // Table functions Query may call (lower case, from sql::RefusedTableFunctions()).
  std::vector<std::string> query_allow_table_functions;
  std::vector<std::string> query_allowed_settings;
  absl::Duration query_default_timeout{};
  absl::Duration query_cancel_drain{};
  // Logging (server/log).
  std::string log_level{};   // debug | info | warn | error
  std::string log_format{};  // text | json
  absl::Duration log_repeat_interval{};
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

// docs/configuration.md's option table (markdown) from the same definitions; a test keeps that copy
// equal to it.
std::string OptionsMarkdown();

// "[scheme://]host[:port][,...]" -> endpoints. The scheme is tcp:// (plain) or tls://; without
// one an endpoint uses TLS when `tls_default` is set. The port defaults to 9440 with TLS and
// 9000 without. IPv6 hosts go in brackets ("[::1]:9000").
absl::StatusOr<std::vector<Endpoint>> ParseEndpoints(absl::string_view text,
                                                     bool tls_default = false);
// "16MiB", "256MB", "1GiB", "4096" -> bytes.
absl::StatusOr<uint64_t> ParseBytes(absl::string_view text);
// Whether a listen address ("host:port") names a loopback host, or is a Unix socket ("unix:").
bool IsLoopbackAddress(absl::string_view address);

}  // namespace chgate::config
