#include "server/config/config.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/sql/query_policy.h"
#include "text/status_macros.h"

namespace chgate::config {
namespace {

using Setter = std::function<absl::Status(absl::string_view, Config*)>;

// One setting: its name (the flag without "--"; the variable is CHGATE_<NAME>), its default as
// text (applied through `set` like any given value, so the Config struct holds no second copy),
// its help (the --help text and docs/configuration.md's table), and its parser and validation.
struct Option {
  std::string name;
  std::string default_text;
  std::string help;
  Setter set;
  bool flag = false;  // boolean: `--name` alone means true; `--name=false` is allowed
};

absl::Status Bad(absl::string_view name, absl::string_view value, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", value, "' ", what));
}

Setter String(std::string Config::*field) {
  return [field](absl::string_view v, Config* c) {
    c->*field = std::string(v);
    return absl::OkStatus();
  };
}

// Text that may not be empty.
Setter NonEmpty(const char* name, std::string Config::*field) {
  return [name, field](absl::string_view v, Config* c) {
    if (v.empty()) return Bad(name, v, "is empty (it needs a value)");
    c->*field = std::string(v);
    return absl::OkStatus();
  };
}

Setter Duration(const char* name, absl::Duration Config::*field) {
  return [name, field](absl::string_view v, Config* c) {
    absl::Duration d;
    if (!absl::ParseDuration(v, &d) || d <= absl::ZeroDuration()) {
      return Bad(name, v, "is not a positive duration (e.g. 5s, 250ms, 1h)");
    }
    c->*field = d;
    return absl::OkStatus();
  };
}

// A duration where 0 turns the feature off.
Setter DurationOrOff(const char* name, absl::Duration Config::*field) {
  return [name, field](absl::string_view v, Config* c) {
    absl::Duration d;
    if (v == "0") {
      c->*field = absl::ZeroDuration();
      return absl::OkStatus();
    }
    if (!absl::ParseDuration(v, &d) || d < absl::ZeroDuration()) {
      return Bad(name, v, "is not a duration (e.g. 5m, 30s; 0: off)");
    }
    c->*field = d;
    return absl::OkStatus();
  };
}

Setter Count(const char* name, uint64_t Config::*field, uint64_t min) {
  return [name, field, min](absl::string_view v, Config* c) {
    uint64_t n = 0;
    if (!absl::SimpleAtoi(v, &n) || n < min) {
      return Bad(name, v, absl::StrCat("is not an integer >= ", min));
    }
    c->*field = n;
    return absl::OkStatus();
  };
}

Setter Bytes(const char* name, uint64_t Config::*field, bool allow_zero) {
  return [name, field, allow_zero](absl::string_view v, Config* c) {
    auto n = ParseBytes(v);
    if (!n.ok() || (*n == 0 && !allow_zero)) {
      return Bad(name, v, "is not a size (e.g. 16MiB, 512KiB, 1GiB, or bytes)");
    }
    c->*field = *n;
    return absl::OkStatus();
  };
}

// Permission bits in octal ("0660", "660"), at most 0777.
Setter FileMode(const char* name, uint32_t Config::*field) {
  return [name, field](absl::string_view v, Config* c) {
    uint32_t mode = 0;
    bool ok = !v.empty() && v.size() <= 4;
    for (char ch : v) {
      if (ch < '0' || ch > '7') ok = false;
      mode = mode * 8 + static_cast<uint32_t>(ch - '0');
    }
    if (!ok || mode > 0777) return Bad(name, v, "is not an octal file mode (e.g. 0660)");
    c->*field = mode;
    return absl::OkStatus();
  };
}

Setter Bool(const char* name, bool Config::*field) {
  return [name, field](absl::string_view v, Config* c) {
    if (v == "true" || v == "1" || v == "yes") {
      c->*field = true;
    } else if (v == "false" || v == "0" || v == "no") {
      c->*field = false;
    } else {
      return Bad(name, v, "is not true or false");
    }
    return absl::OkStatus();
  };
}

// A share of something, in [0, 1] with the ends allowed as said.
Setter Share(const char* name, double Config::*field, bool zero_ok, bool one_ok) {
  return [=](absl::string_view v, Config* c) {
    double d = 0;
    if (!absl::SimpleAtod(v, &d) || d < 0 || d > 1 || (d == 0 && !zero_ok) || (d == 1 && !one_ok)) {
      return Bad(name, v,
                 absl::StrCat("is not in ", zero_ok ? "[0" : "(0", ", 1", one_ok ? "]" : ")"));
    }
    c->*field = d;
    return absl::OkStatus();
  };
}

Setter OneOf(const char* name, std::string Config::*field, std::vector<std::string> allowed) {
  return [name, field, allowed](absl::string_view v, Config* c) {
    for (const std::string& a : allowed) {
      if (v == a) {
        c->*field = a;
        return absl::OkStatus();
      }
    }
    return Bad(name, v, absl::StrCat("is not one of ", absl::StrJoin(allowed, ", ")));
  };
}

absl::Status SetTableLimits(absl::string_view v, Config* c) {
  // "db.t:rows=1000,bytes=1MiB,delay=50ms;db.u:delay=1s"
  c->table_limits.clear();
  for (absl::string_view entry : absl::StrSplit(v, ';', absl::SkipWhitespace())) {
    size_t colon = entry.rfind(':');
    if (colon == absl::string_view::npos)
      return Bad("table-limits", entry, "needs table:key=value,...");
    std::string table(absl::StripAsciiWhitespace(entry.substr(0, colon)));
    TableLimits limits;
    for (absl::string_view kv :
         absl::StrSplit(entry.substr(colon + 1), ',', absl::SkipWhitespace())) {
      std::pair<absl::string_view, absl::string_view> p =
          absl::StrSplit(kv, absl::MaxSplits('=', 1));
      if (p.first == "rows") {
        if (!absl::SimpleAtoi(p.second, &limits.max_rows) || limits.max_rows == 0) {
          return Bad("table-limits", kv, "needs rows > 0");
        }
      } else if (p.first == "bytes") {
        auto n = ParseBytes(p.second);
        if (!n.ok() || *n == 0) return Bad("table-limits", kv, "needs a size");
        limits.max_bytes = *n;
      } else if (p.first == "delay") {
        if (!absl::ParseDuration(p.second, &limits.max_delay) ||
            limits.max_delay <= absl::ZeroDuration()) {
          return Bad("table-limits", kv, "needs a positive duration");
        }
      } else {
        return Bad("table-limits", kv, "has an unknown key (rows, bytes, delay)");
      }
    }
    if (table.find('.') == std::string::npos) table = absl::StrCat(c->database, ".", table);
    c->table_limits[table] = limits;
  }
  return absl::OkStatus();
}

const std::vector<Option>& Options() {
  static const auto* options = new std::vector<Option>{
      {"listen", "127.0.0.1:50051",
       "gRPC API address (Insert, InsertStream, Query): `host:port`, or `unix:PATH` for a Unix "
       "socket (a sidecar's application connects through a shared volume; a stale socket is "
       "replaced, one a live server holds is refused)",
       NonEmpty("listen", &Config::listen)},
      {"listen-socket-mode", "0660",
       "permission bits of the `unix:` API socket (connecting needs write permission: 0660 lets "
       "the socket's group, e.g. the pod's fsGroup, connect)",
       FileMode("listen-socket-mode", &Config::listen_socket_mode)},
      {"allow-remote-api", "false",
       "allow `--listen` on a non-loopback address (exposes the API to the network)",
       Bool("allow-remote-api", &Config::allow_remote_api), /*flag=*/true},
      // API security.
      {"allow-insecure-remote-api", "false",
       "allow a non-loopback `--listen` without API TLS (tokens and rows cross the network in "
       "clear text)",
       Bool("allow-insecure-remote-api", &Config::allow_insecure_remote_api), /*flag=*/true},
      {"api-tls-cert-file", "",
       "PEM certificate (chain) of the API listener; enables TLS (1.2 or newer)",
       String(&Config::api_tls_cert_file)},
      {"api-tls-key-file", "", "PEM private key of `--api-tls-cert-file`",
       String(&Config::api_tls_key_file)},
      {"api-tls-client-ca-file", "", "PEM CA bundle for client certificates; enables mutual TLS",
       String(&Config::api_tls_client_ca_file)},
      {"api-tls-client-auth", "require",
       "`require` a client certificate, or verify it only when sent (`optional`: callers may use a "
       "token)",
       OneOf("api-tls-client-auth", &Config::api_tls_client_auth, {"require", "optional"})},
      {"api-tokens-file", "",
       "bearer tokens, `<identity> <token>` lines (needs `--api-policy-file`)",
       String(&Config::api_tokens_file)},
      {"api-policy-file", "", "what each identity may do; none: every caller may do everything",
       String(&Config::api_policy_file)},
      {"api-reload-interval", "10s",
       "how often the certificate, key, CA, tokens and policy files are checked for changes",
       Duration("api-reload-interval", &Config::api_reload_interval)},
      {"health-listen", "[::]:50052",
       "health address (`\"\"`: the API listener); `[::]:port` is every IPv6 and IPv4 address "
       "(IPv4 alone where the kernel has no IPv6), so kubelet probes work on IPv4, IPv6 and "
       "dual-stack clusters",
       String(&Config::health_listen)},
      {"grpc-reflection", "false",
       "serve gRPC server reflection on both listeners (for `grpcurl` without the .proto). Off by "
       "default: gRPC's reflection is a synchronous service, and one synchronous service makes "
       "gRPC run polling threads that take part in every connection's I/O; measured with "
       "`chgate-cli bench` (1-row requests), turning it off took chgate from about 0.41 to 0.25 "
       "context switches per request. Health is served on gRPC's callback API either way",
       Bool("grpc-reflection", &Config::grpc_reflection), /*flag=*/true},
      {"metrics-listen", "[::]:9464", "`/metrics` address (`\"\"`: off), same address forms",
       String(&Config::metrics_listen)},
      {"endpoints", "127.0.0.1:9000",
       "ClickHouse native endpoints, `[tcp://|tls://]host[:port][,...]` (replicas; port 9000, or "
       "9440 with TLS)",
       [](absl::string_view v, Config* c) -> absl::Status {
         auto eps = ParseEndpoints(v);
         if (!eps.ok())
           return absl::InvalidArgumentError(absl::StrCat("--endpoints: ", eps.status().message()));
         c->endpoints_text = std::string(v);
         return absl::OkStatus();
       }},
      {"endpoint-policy", "round-robin",
       "which endpoint a new connection tries first: `round-robin` (each new connection one "
       "further along the list, spreading connections and parts over the replicas) or `ordered` "
       "(always the first; later endpoints only when it fails)",
       OneOf("endpoint-policy", &Config::endpoint_policy, {"round-robin", "ordered"})},
      {"endpoint-probe-interval", "10s",
       "how often an endpoint chgate holds no connection to (never used, a fallback, failed, or "
       "whose connection just broke) is probed: connect, handshake, close; keeps "
       "`chgate_clickhouse_up` current for every endpoint",
       Duration("endpoint-probe-interval", &Config::endpoint_probe_interval)},
      {"clickhouse-tls", "false", "TLS to ClickHouse on every endpoint without a `tcp://` scheme",
       Bool("clickhouse-tls", &Config::clickhouse_tls), /*flag=*/true},
      {"clickhouse-tls-ca-file", "",
       "PEM CAs that may sign ClickHouse's certificate (none: the system's trust store)",
       String(&Config::clickhouse_tls_ca_file)},
      {"clickhouse-tls-cert-file", "",
       "PEM client certificate for mutual TLS to ClickHouse (with `--clickhouse-tls-key-file`)",
       String(&Config::clickhouse_tls_cert_file)},
      {"clickhouse-tls-key-file", "", "PEM private key of `--clickhouse-tls-cert-file`",
       String(&Config::clickhouse_tls_key_file)},
      {"clickhouse-tls-server-name", "",
       "name sent in SNI and checked against ClickHouse's certificate (none: each endpoint's host)",
       String(&Config::clickhouse_tls_server_name)},
      {"clickhouse-tls-insecure-skip-verify", "false",
       "encrypt without verifying ClickHouse's certificate (warns at start, "
       "`chgate_clickhouse_tls_insecure_skip_verify` = 1)",
       Bool("clickhouse-tls-insecure-skip-verify", &Config::clickhouse_tls_insecure_skip_verify),
       /*flag=*/true},
      {"user", "default", "ClickHouse user", NonEmpty("user", &Config::user)},
      {"password-file", "",
       "file holding the password (never a flag or variable); read again when it changes, so new "
       "connections use a rotated password",
       String(&Config::password_file)},
      {"database", "default", "database of table names given without one",
       NonEmpty("database", &Config::database)},
      {"compression", "lz4", "`none`, `lz4` or `zstd` on the wire",
       OneOf("compression", &Config::compression, {"none", "lz4", "zstd"})},
      {"connect-timeout", "5s", "connect and handshake",
       Duration("connect-timeout", &Config::connect_timeout)},
      {"read-timeout", "60s", "longest wait for data from ClickHouse",
       Duration("read-timeout", &Config::read_timeout)},
      {"pool-max-connections", "8", "connections to ClickHouse (and parallel flushes)",
       Count("pool-max-connections", &Config::pool_max_connections, 1)},
      {"pool-min-connections", "1", "connections kept open",
       Count("pool-min-connections", &Config::pool_min_connections, 0)},
      {"pool-max-lifetime", "1h", "connections are replaced after this long",
       Duration("pool-max-lifetime", &Config::pool_max_lifetime)},
      {"pool-max-idle", "5m", "idle connections are closed after this long",
       Duration("pool-max-idle", &Config::pool_max_idle)},
      {"batch-max-rows", "100000", "flush a table's batch at this many rows",
       Count("batch-max-rows", &Config::batch_max_rows, 1)},
      {"batch-max-bytes", "16MiB", "flush a table's batch at this size",
       Bytes("batch-max-bytes", &Config::batch_max_bytes, false)},
      {"batch-max-delay", "200ms", "flush a table's batch when its oldest row is this old",
       Duration("batch-max-delay", &Config::batch_max_delay)},
      {"batch-max-delay-ceiling", "5s",
       "under part pressure (an INSERT refused with TOO_MANY_PARTS, or one taking "
       "`--slow-insert` or more) a table's flush delay doubles, up to this; after 10 calm flushes "
       "it halves again, down to its configured delay. At or below the configured delay: off",
       Duration("batch-max-delay-ceiling", &Config::batch_max_delay_ceiling)},
      {"slow-insert", "2s",
       "a single INSERT attempt taking this long counts as part pressure (ClickHouse delays "
       "inserts into a table with too many active parts)",
       Duration("slow-insert", &Config::slow_insert)},
      {"table-limits", "", "per-table overrides, `db.t:rows=N,bytes=S,delay=D;db.u:...`",
       SetTableLimits},
      {"memory-budget", "256MiB",
       "most bytes insert requests hold from arrival to commit: rows are buffered up to 3/4 of it "
       "(callers wait beyond), requests arriving or waiting use the rest, beyond it they get "
       "`RESOURCE_EXHAUSTED` at once",
       Bytes("memory-budget", &Config::memory_budget, false)},
      {"max-message-bytes", "16MiB",
       "largest API request message (at most 1/4 of the budget); larger ones get "
       "`RESOURCE_EXHAUSTED` from gRPC",
       Bytes("max-message-bytes", &Config::max_message_bytes, false)},
      {"max-concurrent-streams", "0",
       "calls open at once per client connection (`0`: no limit); bounds what gRPC receives for "
       "InsertStream calls in one burst, at the cost of calls waiting in the client",
       Count("max-concurrent-streams", &Config::max_concurrent_streams, 0)},
      {"max-connection-age", "0",
       "a client connection to the API is asked to close (GOAWAY) after this long, so clients "
       "reconnect and spread over a gateway's replicas instead of staying with one (`0`: never; "
       "the gateway manifests use 5m)",
       DurationOrOff("max-connection-age", &Config::max_connection_age)},
      {"max-connection-age-grace", "30s",
       "calls still open on a connection asked to close may finish within this long",
       Duration("max-connection-age-grace", &Config::max_connection_age_grace)},
      {"table-memory-budget", "0", "most buffered bytes per table (`0`: none)",
       Bytes("table-memory-budget", &Config::table_memory_budget, true)},
      {"ready-high-water", "0.9",
       "health name `buffer` (opt-in buffer-based readiness) turns NOT_SERVING above this share of "
       "the buffer limit (3/4 of `--memory-budget`)",
       Share("ready-high-water", &Config::ready_high_water, /*zero_ok=*/false, /*one_ok=*/true)},
      {"ready-low-water", "0.7",
       "after turning NOT_SERVING, health name `buffer` is SERVING again only below this share of "
       "the buffer limit (hysteresis, so the pod does not flap); must be below "
       "`--ready-high-water`",
       Share("ready-low-water", &Config::ready_low_water, /*zero_ok=*/true, /*one_ok=*/false)},
      {"liveness-stall-timeout", "5m",
       "health name `liveness` turns NOT_SERVING (the kubelet restarts chgate) when the batch "
       "scheduler has not run, or a conversion or a ClickHouse attempt has neither started nor "
       "ended, for this long (a batch retried through an outage is progress); must exceed "
       "`--retry-max-elapsed` + `--read-timeout`",
       Duration("liveness-stall-timeout", &Config::liveness_stall_timeout)},
      {"ack-mode", "committed", "default ack mode (see below)",
       OneOf("ack-mode", &Config::ack_mode, {"committed", "accepted", "persisted"})},
      {"async-insert", "false",
       "committed and accepted batches ask the server to merge them with other clients' INSERTs "
       "(`async_insert=1, wait_for_async_insert=1`: acks still wait for the server's part); "
       "servers from 21.11, ignored by older ones; never for `persisted` batches",
       Bool("async-insert", &Config::async_insert), /*flag=*/true},
      {"spool-dir", "",
       "directory of the durable spool the `persisted` ack mode writes to (empty: no spool, and "
       "`persisted` requests fail with `FAILED_PRECONDITION`); one chgate per directory",
       String(&Config::spool_dir)},
      {"spool-max-bytes", "1GiB",
       "most bytes of spool files; `persisted` requests beyond it get `RESOURCE_EXHAUSTED` (as do "
       "requests while the spool's file system has less than 2 segments free)",
       Bytes("spool-max-bytes", &Config::spool_max_bytes, false)},
      {"spool-segment-bytes", "64MiB",
       "size of one spool file; a file is deleted once ClickHouse has every row in it",
       Bytes("spool-segment-bytes", &Config::spool_segment_bytes, false)},
      {"spool-group-commit-delay", "2ms",
       "while persisted requests arrive concurrently, how long the spool's writer waits after one "
       "for more before their one write and fdatasync (fewer syncs per request, each ack later by "
       "up to this); a lone caller is never delayed. `0`: off",
       DurationOrOff("spool-group-commit-delay", &Config::spool_group_commit_delay)},
      {"null-as-default", "false", "a null for a non-Nullable column stores the type's default",
       Bool("null-as-default", &Config::null_as_default), /*flag=*/true},
      {"retry-initial-backoff", "100ms", "first retry delay (doubles, full jitter)",
       Duration("retry-initial-backoff", &Config::retry_initial_backoff)},
      {"retry-max-backoff", "5s", "longest retry delay",
       Duration("retry-max-backoff", &Config::retry_max_backoff)},
      {"retry-max-elapsed", "60s", "a batch is retried at most this long",
       Duration("retry-max-elapsed", &Config::retry_max_elapsed)},
      {"default-deadline", "30s", "deadline of calls that set none",
       Duration("default-deadline", &Config::default_deadline)},
      {"drain-timeout", "20s", "how long a SIGTERM drain may take",
       Duration("drain-timeout", &Config::drain_timeout)},
      {"query-max-concurrent", "4",
       "Query calls running at once (others wait, then `RESOURCE_EXHAUSTED`)",
       Count("query-max-concurrent", &Config::query_max_concurrent, 1)},
      {"query-response-bytes", "512KiB", "target size of one Query response message (1KiB to 3MiB)",
       Bytes("query-response-bytes", &Config::query_response_bytes, false)},
      {"query-buffer-bytes", "4MiB",
       "response bytes per query waiting for a slow caller before chgate stops reading ClickHouse",
       Bytes("query-buffer-bytes", &Config::query_buffer_bytes, false)},
      {"query-allow-writes", "false",
       "run queries without `readonly = 2` and accept any statement (writes, DDL, KILL) through "
       "Query",
       Bool("query-allow-writes", &Config::query_allow_writes), /*flag=*/true},
      {"query-allow-table-functions", "",
       absl::StrCat("comma-separated table functions queries may call beyond those that read the "
                    "server's own data (numbers, zeros, values, generateRandom, null, view, merge, "
                    "format); every other table function the server has is refused, these always "
                    "unless named here: ",
                    sql::RefusedTableFunctionList()),
       [](absl::string_view v, Config* c) {
         absl::flat_hash_set<std::string> names;
         if (absl::Status st = sql::ParseAllowedTableFunctions(std::string(v), &names); !st.ok()) {
           return Bad("query-allow-table-functions", v, st.message());
         }
         c->query_allow_table_functions.assign(names.begin(), names.end());
         std::sort(c->query_allow_table_functions.begin(), c->query_allow_table_functions.end());
         return absl::OkStatus();
       }},
      {"query-allowed-settings", "",
       "comma-separated ClickHouse settings Query callers may set, beyond the default allowlist "
       "(read-side limits and tuning, see docs/api.md); names about users, quotas, readonly, DDL, "
       "query logging and replace_running_query are refused here",
       [](absl::string_view v, Config* c) {
         c->query_allowed_settings.clear();
         for (absl::string_view name : absl::StrSplit(v, ',', absl::SkipWhitespace())) {
           c->query_allowed_settings.emplace_back(absl::StripAsciiWhitespace(name));
         }
         std::sort(c->query_allowed_settings.begin(), c->query_allowed_settings.end());
         return absl::OkStatus();
       }},
      {"query-default-timeout", "5m", "deadline of Query calls that set none",
       Duration("query-default-timeout", &Config::query_default_timeout)},
      {"query-cancel-drain", "2s",
       "how long a cancelled query's connection is drained before it is closed",
       Duration("query-cancel-drain", &Config::query_cancel_drain)},
      {"log-level", "info", "least severe log events written: `debug`, `info`, `warn` or `error`",
       OneOf("log-level", &Config::log_level, {"debug", "info", "warn", "error"})},
      {"log-format", "text",
       "log lines on stderr: `text` (`time LEVEL [component] message key=value ...`) or `json` "
       "(one object per line)",
       OneOf("log-format", &Config::log_format, {"text", "json"})},
      {"log-repeat-interval", "10s",
       "a repeating event (a retried batch, a refused caller, an endpoint flapping) is logged at "
       "most once per interval and table, endpoint or reason, with the count of repeats suppressed "
       "meanwhile",
       Duration("log-repeat-interval", &Config::log_repeat_interval)},
      {"query", "", "one-shot mode: run the SQL, print TSV, exit", String(&Config::query)},
  };
  return *options;
}

std::string EnvName(absl::string_view option) {
  return absl::StrCat("CHGATE_", absl::AsciiStrToUpper(absl::StrReplaceAll(option, {{"-", "_"}})));
}

// The API's exposure and its security options together.
absl::Status CheckApiSecurity(const Config& c) {
  const bool tls = !c.api_tls_cert_file.empty();
  if (!IsLoopbackAddress(c.listen)) {
    if (!c.allow_remote_api) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--listen=", c.listen,
          " is not a loopback address: exposing the API needs --allow-remote-api=true (and "
          "--api-tls-cert-file, see docs/security.md)"));
    }
    if (!tls && !c.allow_insecure_remote_api) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--listen=", c.listen,
          " is not a loopback address and the API has no TLS: set --api-tls-cert-file and "
          "--api-tls-key-file, or --allow-insecure-remote-api=true to send rows and tokens in "
          "clear text"));
    }
  }
  if (tls != !c.api_tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--api-tls-cert-file and --api-tls-key-file must be given together");
  }
  if (!c.api_tls_client_ca_file.empty() && !tls) {
    return absl::InvalidArgumentError("--api-tls-client-ca-file needs --api-tls-cert-file");
  }
  if (!c.api_tokens_file.empty() && c.api_policy_file.empty()) {
    return absl::InvalidArgumentError(
        "--api-tokens-file needs --api-policy-file (tokens name callers, the policy says what "
        "they may do)");
  }
  if (!c.api_policy_file.empty() && c.api_tokens_file.empty() && c.api_tls_client_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--api-policy-file needs a way to identify callers: --api-tokens-file or "
        "--api-tls-client-ca-file");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<uint64_t> ParseBytes(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  struct Unit {
    const char* suffix;
    uint64_t factor;
  };
  static const Unit units[] = {{"KiB", 1ull << 10},
                               {"MiB", 1ull << 20},
                               {"GiB", 1ull << 30},
                               {"KB", 1000ull},
                               {"MB", 1000000ull},
                               {"GB", 1000000000ull},
                               {"B", 1}};
  uint64_t factor = 1;
  for (const Unit& u : units) {
    if (absl::EndsWith(text, u.suffix)) {
      factor = u.factor;
      text.remove_suffix(std::strlen(u.suffix));
      break;
    }
  }
  uint64_t n = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &n) || n > UINT64_MAX / factor) {
    return absl::InvalidArgumentError(absl::StrCat("bad size '", text, "'"));
  }
  return n * factor;
}

bool IsLoopbackAddress(absl::string_view address) {
  if (absl::StartsWith(address, "unix:")) return true;  // a socket file: this machine only
  size_t colon = address.rfind(':');
  absl::string_view host = colon == absl::string_view::npos ? address : address.substr(0, colon);
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]" || host == "::1" ||
         absl::StartsWith(host, "127.");
}

absl::StatusOr<std::vector<Endpoint>> ParseEndpoints(absl::string_view text, bool tls_default) {
  std::vector<Endpoint> result;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    Endpoint ep;
    ep.tls = tls_default;
    if (size_t scheme = part.find("://"); scheme != absl::string_view::npos) {
      absl::string_view name = part.substr(0, scheme);
      if (name == "tls") {
        ep.tls = true;
      } else if (name == "tcp") {
        ep.tls = false;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown scheme '", name, "://' in '", part, "' (tcp:// or tls://)"));
      }
      part.remove_prefix(scheme + 3);
    }
    ep.port = ep.tls ? 9440 : 9000;
    if (part.empty()) return absl::InvalidArgumentError("empty endpoint");
    size_t colon = part.rfind(':');
    if (colon == absl::string_view::npos || (part.front() == '[' && part.back() == ']')) {
      ep.host = std::string(part);
    } else {
      ep.host = std::string(part.substr(0, colon));
      uint32_t port = 0;
      if (!absl::SimpleAtoi(part.substr(colon + 1), &port) || port == 0 || port > 65535) {
        return absl::InvalidArgumentError(absl::StrCat("bad port in endpoint '", part, "'"));
      }
      ep.port = static_cast<uint16_t>(port);
    }
    if (absl::StartsWith(ep.host, "[") && absl::EndsWith(ep.host, "]")) {
      ep.host = ep.host.substr(1, ep.host.size() - 2);
    }
    if (ep.host.empty())
      return absl::InvalidArgumentError(absl::StrCat("empty host in '", part, "'"));
    result.push_back(std::move(ep));
  }
  if (result.empty()) return absl::InvalidArgumentError("no ClickHouse endpoint given");
  return result;
}

namespace {

// Applies the CHGATE_* variables of `envp`; records the ones that set an option in `given`, the
// unknown ones in config->unknown_environment.
absl::Status ApplyEnvironment(const char* const* envp, Config* config,
                              std::map<std::string, std::string>* given) {
  for (const char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
    absl::string_view entry(*e);
    if (!absl::StartsWith(entry, "CHGATE_")) continue;
    size_t eq = entry.find('=');
    if (eq == absl::string_view::npos) continue;
    bool known = false;
    for (const Option& o : Options()) {
      if (EnvName(o.name) == entry.substr(0, eq)) {
        known = true;
        absl::Status s = o.set(entry.substr(eq + 1), config);
        if (!s.ok())
          return absl::InvalidArgumentError(absl::StrCat(EnvName(o.name), ": ", s.message()));
        (*given)[o.name] = std::string(entry.substr(eq + 1));
      }
    }
    if (!known) config->unknown_environment.emplace_back(entry.substr(0, eq));
  }
  return absl::OkStatus();
}

// Applies the command line, parsed by CLI11: `--name=value`, `--name value`, `--flag` alone
// (true) or `--flag=false`; the last of repeated options wins. Values are applied in the order
// of Options(), whatever their order on the command line, so an option that depends on another
// (--table-limits on --database) sees it set. Sets config->help for -h/--help.
absl::Status ApplyCommandLine(int argc, const char* const* argv, Config* config,
                              std::map<std::string, std::string>* given) {
  CLI::App app("chgate", "chgate");
  app.set_help_flag("-h,--help");
  std::vector<std::pair<const Option*, CLI::Option*>> registered;
  for (const Option& o : Options()) {
    const std::string flag = absl::StrCat("--", o.name);
    CLI::Option* cli = o.flag ? app.add_flag(flag) : app.add_option(flag)->expected(0, 1);
    cli->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    registered.emplace_back(&o, cli);
  }
  std::vector<std::string> args;  // CLI11 takes them in reverse order
  for (int i = argc - 1; i >= 1; --i) args.emplace_back(argv[i]);
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    config->help = true;
    return absl::OkStatus();
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    if (absl::StrContains(message, "not expected")) absl::StrAppend(&message, " (see --help)");
    return absl::InvalidArgumentError(message);
  }
  for (const auto& [option, cli] : registered) {
    if (cli->count() == 0) continue;
    // `--name` without a value, followed by another option or nothing, reads as an empty value.
    const std::string value = cli->results().empty() ? "" : cli->results().back();
    if (absl::Status s = option->set(value, config); !s.ok()) return s;
    (*given)[option->name] = value;
  }
  return absl::OkStatus();
}

// Reads --password-file into config->password (without trailing newlines).
absl::Status ReadPasswordFile(Config* config) {
  std::ifstream file(config->password_file);
  if (!file) {
    return absl::NotFoundError(
        absl::StrCat("--password-file: cannot read '", config->password_file, "'"));
  }
  std::stringstream ss;
  ss << file.rdbuf();
  config->password = ss.str();
  while (!config->password.empty() &&
         (config->password.back() == '\n' || config->password.back() == '\r')) {
    config->password.pop_back();
  }
  return absl::OkStatus();
}

// Parses --endpoints and checks the ClickHouse TLS options against them.
absl::Status CheckClickHouseConnection(Config* config) {
  auto endpoints = ParseEndpoints(config->endpoints_text, config->clickhouse_tls);
  if (!endpoints.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--endpoints: ", endpoints.status().message()));
  }
  config->endpoints = *std::move(endpoints);
  bool any_tls = false;
  for (const Endpoint& ep : config->endpoints) any_tls = any_tls || ep.tls;
  if (!any_tls) {
    // TLS settings with no endpoint to use them would leave a user believing the connection is
    // protected.
    for (const auto& [name, value] :
         {std::pair{"clickhouse-tls-ca-file", config->clickhouse_tls_ca_file},
          std::pair{"clickhouse-tls-cert-file", config->clickhouse_tls_cert_file},
          std::pair{"clickhouse-tls-key-file", config->clickhouse_tls_key_file},
          std::pair{"clickhouse-tls-server-name", config->clickhouse_tls_server_name}}) {
      if (!value.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name,
                         " is set but no endpoint uses TLS (add --clickhouse-tls=true or tls:// "
                         "endpoints)"));
      }
    }
    if (config->clickhouse_tls_insecure_skip_verify) {
      return absl::InvalidArgumentError(
          "--clickhouse-tls-insecure-skip-verify is set but no endpoint uses TLS");
    }
  }
  if (config->clickhouse_tls_cert_file.empty() != config->clickhouse_tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--clickhouse-tls-cert-file and --clickhouse-tls-key-file go together");
  }
  return absl::OkStatus();
}

// The checks across options of the spool, the memory budget, readiness, the pool and retries.
absl::Status CheckLimits(const Config& config) {
  if (config.query_response_bytes < 1024 || config.query_response_bytes > (3u << 20)) {
    return absl::InvalidArgumentError(
        "--query-response-bytes must be between 1KiB and 3MiB (gRPC's default receive limit is 4 "
        "MiB)");
  }
  if (config.ack_mode == "persisted" && config.spool_dir.empty()) {
    return absl::InvalidArgumentError("--ack-mode=persisted needs --spool-dir");
  }
  if (!config.spool_dir.empty() && (config.spool_segment_bytes < (64 << 10) ||
                                    config.spool_segment_bytes > config.spool_max_bytes / 2)) {
    return absl::InvalidArgumentError(
        "--spool-segment-bytes must be at least 64KiB and at most half of --spool-max-bytes");
  }
  if (config.spool_group_commit_delay > absl::Milliseconds(100)) {
    return absl::InvalidArgumentError(
        "--spool-group-commit-delay is at most 100ms: every persisted ack waits for it");
  }
  if (config.ready_low_water >= config.ready_high_water) {
    return absl::InvalidArgumentError(
        "--ready-low-water must be below --ready-high-water (\"buffer\" would never return)");
  }
  if (config.pool_min_connections > config.pool_max_connections) {
    return absl::InvalidArgumentError("--pool-min-connections exceeds --pool-max-connections");
  }
  if (config.batch_max_bytes > config.memory_budget / 4 * 3) {
    return absl::InvalidArgumentError(
        "--batch-max-bytes exceeds 3/4 of --memory-budget (the buffer's share): a batch could "
        "never fill up");
  }
  if (config.max_message_bytes > config.memory_budget / 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-message-bytes (", config.max_message_bytes, ") exceeds 1/4 of --memory-budget (",
        config.memory_budget,
        "): a request is counted at twice its size while it is parsed, and the budget must keep "
        "room for it beside a full buffer; raise --memory-budget or lower --max-message-bytes"));
  }
  if (config.max_message_bytes > (1u << 31) - 1) {
    return absl::InvalidArgumentError("--max-message-bytes must be below 2GiB");
  }
  if (config.liveness_stall_timeout <= config.retry_max_elapsed + config.read_timeout) {
    return absl::InvalidArgumentError(
        "--liveness-stall-timeout must exceed --retry-max-elapsed plus --read-timeout: a flush "
        "that is still retrying legitimately would otherwise look wedged");
  }
  if (config.retry_initial_backoff > config.retry_max_backoff) {
    return absl::InvalidArgumentError("--retry-initial-backoff exceeds --retry-max-backoff");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Config> Parse(int argc, const char* const* argv, const char* const* envp) {
  Config config;
  // Defaults first, through the same setters as given values: Options() is their only copy.
  for (const Option& o : Options()) {
    if (absl::Status s = o.set(o.default_text, &config); !s.ok()) {
      return absl::InternalError(absl::StrCat("default of --", o.name, ": ", s.message()));
    }
  }
  std::map<std::string, std::string> given;  // option -> the text that set it
  // The environment next, so flags override it.
  CHGATE_RETURN_IF_ERROR(ApplyEnvironment(envp, &config, &given));
  CHGATE_RETURN_IF_ERROR(ApplyCommandLine(argc, argv, &config, &given));
  if (config.help) return config;
  for (const Option& o : Options()) {
    auto it = given.find(o.name);
    config.settings.emplace_back(o.name, it == given.end() ? o.default_text : it->second);
  }
  if (!config.password_file.empty()) CHGATE_RETURN_IF_ERROR(ReadPasswordFile(&config));
  CHGATE_RETURN_IF_ERROR(CheckClickHouseConnection(&config));
  CHGATE_RETURN_IF_ERROR(CheckApiSecurity(config));
  CHGATE_RETURN_IF_ERROR(CheckLimits(config));
  return config;
}

std::string Usage() {
  std::string out =
      "Usage: chgate [options]\n"
      "       chgate spool list|show|reinsert|delete|wait-drained ... (chgate spool --help)\n"
      "A gRPC sidecar that batches rows into ClickHouse over its native protocol.\n"
      "With --query, connects once, runs the query, prints the result as TSV and exits.\n\n"
      "Options (each also read from the environment variable shown; flags win; a boolean option "
      "alone means true):\n";
  for (const Option& o : Options()) {
    absl::StrAppend(&out, "  --", o.name, o.flag ? "=true|false" : "=VALUE", "  [", EnvName(o.name),
                    "]\n      ", absl::StrReplaceAll(o.help, {{"`", ""}}),
                    " (default: ", o.default_text.empty() ? "\"\"" : o.default_text, ")\n");
  }
  absl::StrAppend(&out, "  --help\n      print this text\n");
  return out;
}

std::string OptionsMarkdown() {
  std::string out = "| option | default | meaning |\n|---|---|---|\n";
  for (const Option& o : Options()) {
    absl::StrAppend(&out, "| `--", o.name, "` | ",
                    o.default_text.empty() ? "none" : absl::StrCat("`", o.default_text, "`"), " | ",
                    absl::StrReplaceAll(o.help, {{"|", "\\|"}}), " |\n");
  }
  return out;
}

}  // namespace chgate::config
