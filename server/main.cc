// chgate entry point: wiring only. Reads the configuration, installs the logger, then either runs
// one query (--query) or serves the gRPC API until SIGTERM/SIGINT, when it drains: readiness goes
// NOT_SERVING, new requests are refused, buffered rows are flushed within --drain-timeout, and it
// exits 0. Everything it says goes through server/log (stderr); only errors in the options
// themselves, found before the log format is known, are plain text.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "build_info.h"
#include "server/auth/authorizer.h"
#include "server/clickhouse/connection.h"
#include "server/clickhouse/pool.h"
#include "server/clickhouse/wire/tls.h"
#include "server/config/config.h"
#include "server/ingest/ingestor.h"
#include "server/ingest/inserter.h"
#include "server/log/log.h"
#include "server/metrics/metrics.h"
#include "server/service/api_security.h"
#include "server/service/grpc_log.h"
#include "server/service/server.h"
#include "server/spool_cli.h"
#include "server/wiring.h"

extern char** environ;

namespace chgate {
namespace {

constexpr log::Component kLog("main");
constexpr log::Component kAuthLog("api");
// How long past --drain-timeout the process may take to end.
constexpr absl::Duration kExitGrace = absl::Milliseconds(900);

int RunQuery(const config::Config& config) {
  auto tls = ClickHouseTlsFrom(config);
  if (!tls.ok()) {
    kLog.Error("chgate: cannot start", {{"error", tls.status().message()}});
    return 2;
  }
  for (const auto& endpoint : config.endpoints) {
    clickhouse::ConnectionOptions options = ConnectionOptionsFrom(config);
    options.host = endpoint.host;
    options.port = endpoint.port;
    if (endpoint.tls) options.tls = *tls;
    const std::string name = absl::StrCat(endpoint.host, ":", endpoint.port);
    auto conn = clickhouse::Connection::Connect(options);
    if (!conn.ok()) {
      kLog.Warn("cannot connect", {{"endpoint", name}, {"error", conn.status().message()}});
      continue;
    }
    const clickhouse::ServerInfo& info = (*conn)->server_info();
    kLog.Info("connected", {{"endpoint", name},
                            {"server", absl::StrCat(info.name, " ", info.version_major, ".",
                                                    info.version_minor, ".", info.version_patch)},
                            {"server_revision", info.revision},
                            {"revision", (*conn)->revision()},
                            {"timezone", info.timezone},
                            {"transport", (*conn)->transport_description()}});
    std::string line;
    clickhouse::QueryResult result;
    absl::Status status = (*conn)->Select(
        {.query = config.query},
        [&](const clickhouse::Block& block) {
          for (size_t row = 0; row < block.rows(); ++row) {
            line.clear();
            for (size_t c = 0; c < block.column_count(); ++c) {
              if (c != 0) line.push_back('\t');
              block.column(c).column->FormatValue(row, false, &line);
            }
            line.push_back('\n');
            std::fwrite(line.data(), 1, line.size(), stdout);
          }
          return absl::OkStatus();
        },
        &result);
    std::fflush(stdout);
    if (!status.ok()) {
      kLog.Error("query failed", {{"endpoint", name}, {"error", status.message()}});
      return 1;
    }
    kLog.Info("query done", {{"rows", result.rows},
                             {"blocks", result.blocks},
                             {"received_bytes", (*conn)->received_bytes()},
                             {"decoded_bytes", (*conn)->decoded_bytes()}});
    return 0;
  }
  return 1;
}

int Serve(const config::Config& config) {
  // Signals are taken synchronously by this thread; every other thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  metrics::Metrics metrics;
  metrics.SetBuildInfo(CHGATE_VERSION, CHGATE_REVISION);
  std::unique_ptr<metrics::HttpServer> exposer;
  if (!config.metrics_listen.empty()) {
    auto started = metrics.StartServer(config.metrics_listen);
    if (!started.ok()) {
      kLog.Error("chgate: cannot start", {{"error", started.status().message()}});
      return 1;
    }
    exposer = *std::move(started);
  }

  static clickhouse::IoCounters io_counters;
  auto byte_counters = std::make_shared<metrics::ByteCountersCollectable>(
      &io_counters.received, &io_counters.decoded, &io_counters.sent);
  metrics.RegisterCollectable(byte_counters);
  auto tls = ClickHouseTlsFrom(config);
  if (!tls.ok()) {
    kLog.Error("chgate: cannot start", {{"error", tls.status().message()}});
    return 2;
  }
  auto tls_collectable = std::make_shared<metrics::ClickHouseTlsCollectable>([tls = *tls] {
    if (tls == nullptr) return metrics::ClickHouseTlsSample{};
    return metrics::ClickHouseTlsSample{.insecure_skip_verify = tls->options().insecure_skip_verify,
                                        .reloads = tls->reloads(),
                                        .reload_failures = tls->reload_failures()};
  });
  metrics.RegisterCollectable(tls_collectable);
  absl::StatusOr<clickhouse::ConnectionOptions> connected = ClickHouseConnectionFrom(config, *tls);
  if (!connected.ok()) {
    kLog.Error("chgate: cannot start", {{"error", connected.status().message()}});
    return 2;
  }
  clickhouse::ConnectionOptions connection = *std::move(connected);
  connection.counters = &io_counters;
  const clickhouse::PoolOptions pool_options = PoolOptionsFrom(config, connection);
  clickhouse::Pool pool(pool_options);
  pool.Start();
  auto pool_collectable = std::make_shared<metrics::PoolCollectable>([&pool] {
    std::vector<metrics::PoolEndpointSample> samples;
    for (const clickhouse::EndpointStats& s : pool.Stats()) {
      samples.push_back({s.endpoint, s.idle, s.in_use, s.connects, s.connect_failures,
                         s.discarded_broken, s.closed_expired, s.healthy,
                         s.last_success == absl::InfinitePast()
                             ? 0.0
                             : absl::ToDoubleSeconds(s.last_success - absl::UnixEpoch())});
    }
    return samples;
  });
  metrics.RegisterCollectable(pool_collectable);

  // Health probes are answered from here on ("liveness" SERVING, readiness NOT_SERVING), so a long
  // spool recovery below does not fail the kubelet's startupProbe; the API server takes this
  // listener over once chgate serves.
  std::unique_ptr<service::HealthListener> health_listener;
  if (!config.health_listen.empty()) {
    auto started = service::StartHealthListener(config.health_listen);
    if (!started.ok()) {
      kLog.Error("chgate: cannot start", {{"error", started.status().message()}});
      return 1;
    }
    health_listener = *std::move(started);
    kLog.Info("health served while chgate starts", {{"health_listen", config.health_listen},
                                                    {"health_port", health_listener->port()},
                                                    {"liveness", "SERVING"},
                                                    {"readiness", "NOT_SERVING"}});
  }

  ingest::IngestOptions ingest_options = IngestOptionsFrom(config);
  // The spool of the persisted ack mode: recovered before the API is served, closed after the
  // Ingestor (declared first, destroyed last).
  std::unique_ptr<spool::Spool> spool;
  std::vector<spool::SpoolRecord> replay;
  std::shared_ptr<metrics::SpoolCollectable> spool_collectable;  // the registry holds it weakly
  if (!config.spool_dir.empty()) {
    const absl::Time opening = absl::Now();
    absl::StatusOr<spool::Spool::Opened> opened =
        spool::Spool::Open(config.spool_dir, SpoolOptionsFrom(config));
    if (!opened.ok()) {
      kLog.Error("chgate: cannot start: the spool cannot be opened",
                 {{"spool_dir", config.spool_dir}, {"error", opened.status().message()}});
      return 1;
    }
    const spool::RecoveryReport& report = opened->report;
    for (const auto& q : report.quarantined) {
      kLog.Error("spool: corrupt bytes moved aside", {{"segment", q.segment},
                                                      {"moved_to", q.moved_to},
                                                      {"offset", q.offset},
                                                      {"bytes", q.bytes},
                                                      {"reason", q.reason}});
    }
    kLog.Info("spool opened",
              {{"spool_dir", config.spool_dir},
               {"spool_id", opened->spool->id()},
               {"segments", report.segments},
               {"pending_records", report.replayed_records},
               {"committed_records", report.committed_records},
               {"torn_tail_bytes_cut", report.bytes_cut},
               {"bytes_quarantined", report.bytes_quarantined},
               {"took", absl::Trunc(absl::Now() - opening, absl::Milliseconds(1))}});
    spool = std::move(opened->spool);
    replay = std::move(opened->replay);
    ingest_options.spool = spool.get();
    ingest_options.spool_id = spool->id();
    const uint64_t max_bytes = config.spool_max_bytes;
    spool_collectable = std::make_shared<metrics::SpoolCollectable>([s = spool.get(), max_bytes] {
      const spool::SpoolStats st = s->Stats();
      const absl::Time now = absl::Now();
      return metrics::SpoolSample{
          .bytes = st.disk_bytes,
          .max_bytes = max_bytes,
          .segments = st.segments,
          .pending_records = st.pending_records,
          .oldest_pending_age_seconds =
              st.oldest_pending_time == absl::InfiniteFuture()
                  ? 0
                  : std::max(0.0, absl::ToDoubleSeconds(now - st.oldest_pending_time)),
          .free_bytes = st.free_bytes,
          .appends = st.appends,
          .appended_bytes = st.bytes_appended,
          .refusals = st.refusals,
          .fsyncs = st.fsyncs,
          .fsync_seconds = absl::ToDoubleSeconds(st.fsync_total),
          .quarantined_bytes = st.bytes_quarantined,
          .set_aside_bytes = st.set_aside_bytes};
    });
    metrics.RegisterCollectable(spool_collectable);
  }
  ingest::ClickHouseInserter inserter(&pool);
  ingest::Ingestor ingestor(ingest_options, &inserter, ingest::RealClock(),
                            metrics.ingest_observer());
  if (spool != nullptr) {
    (void)ingestor.Recover(replay);
    replay.clear();
    replay.shrink_to_fit();
  }

  absl::StatusOr<service::QueryServiceOptions> query_options = QueryServiceOptionsFrom(config);
  if (!query_options.ok()) {
    kLog.Error("chgate: cannot start", {{"error", query_options.status().message()}});
    return 2;
  }
  service::QueryExecutor queries(&pool, *std::move(query_options), metrics.query_observer());
  // API security: the Authorizer reloads the tokens and policy files, the TLS credentials the
  // certificate files, each when they change.
  service::AuthObserver* auth_observer = metrics.auth_observer();
  auto authorizer = auth::Authorizer::Create(
      {.tokens_file = config.api_tokens_file,
       .policy_file = config.api_policy_file,
       .reload_interval = config.api_reload_interval,
       .on_reload = [auth_observer](std::string_view kind, const std::string& path,
                                    const absl::Status& status) {
         auth_observer->Reloaded(kind, status.ok());
         // The file is named, never quoted: a tokens file holds secrets.
         if (status.ok()) {
           kAuthLog.Info("file reloaded", {{"file", kind}, {"path", path}});
         } else {
           kAuthLog.Warn("file changed but could not be loaded; the previous content stays",
                         {{"file", kind}, {"path", path}, {"error", status.message()}});
         }
       }});
  if (!authorizer.ok()) {
    kLog.Error("chgate: cannot start", {{"error", authorizer.status().message()}});
    return 1;
  }
  const service::ApiTlsOptions api_tls{.cert_file = config.api_tls_cert_file,
                                       .key_file = config.api_tls_key_file,
                                       .client_ca_file = config.api_tls_client_ca_file,
                                       .client_auth = config.api_tls_client_auth == "optional"
                                                          ? service::ClientAuth::kOptional
                                                          : service::ClientAuth::kRequire,
                                       .reload_interval = config.api_reload_interval};
  // The serving certificate's expiry, read from its file at each scrape (a rotated file is seen
  // at once), and the handshakes that failed.
  auto api_tls_collectable = std::make_shared<metrics::ApiTlsCollectable>([api_tls] {
    metrics::ApiTlsSample sample{.enabled = api_tls.enabled(),
                                 .handshake_failures = service::ApiHandshakeFailures()};
    if (sample.enabled) {
      absl::StatusOr<absl::Time> not_after = service::CertificateNotAfter(api_tls.cert_file);
      if (not_after.ok()) sample.certificate_expiry_unix_seconds = absl::ToUnixSeconds(*not_after);
    }
    return sample;
  });
  metrics.RegisterCollectable(api_tls_collectable);

  auto server = service::StartServer(
      {.api_address = config.listen,
       .health_address = config.health_listen,
       .health_listener = health_listener.get(),
       .reflection = config.grpc_reflection,
       .max_message_bytes = config.max_message_bytes,
       .max_concurrent_streams =
           static_cast<uint32_t>(std::min<uint64_t>(config.max_concurrent_streams, INT32_MAX)),
       .max_connection_age = config.max_connection_age,
       .max_connection_age_grace = config.max_connection_age_grace,
       // A quarter of the budget for Insert messages in transit (read_gate.h).
       .read_slots = std::max<size_t>(2, config.memory_budget / 4 / config.max_message_bytes),
       .default_deadline = config.default_deadline,
       .queries = &queries,
       .tls = api_tls,
       .authorizer = authorizer->get(),
       .auth_observer = auth_observer,
       .default_database = config.database,
       .default_ack = ingest_options.default_ack},
      &ingestor);
  if (!server.ok()) {
    kLog.Error("chgate: cannot start", {{"error", server.status().message()}});
    return 1;
  }
  kLog.Info(
      "chgate: serving the API",
      {{"listen", config.listen},
       {"api_port", (*server)->api_port()},
       {"api_security",
        api_tls.enabled() ? (api_tls.client_ca_file.empty() ? "TLS" : "mutual TLS") : "plaintext"},
       {"policy", (*authorizer)->enabled() ? config.api_policy_file : "none"},
       {"health_listen", config.health_listen.empty() ? config.listen : config.health_listen},
       {"health_port", (*server)->health_port()},
       {"metrics_listen", config.metrics_listen.empty() ? "off" : config.metrics_listen},
       {"metrics_port", metrics.port()}});

  absl::Notification stop_health;
  std::thread health([&] {
    while (!stop_health.WaitForNotificationWithTimeout(absl::Milliseconds(500))) {
      (*server)->RefreshHealth();
    }
  });
  // Liveness watchdog: its own thread, because a wedged ingestor would also block the thread
  // above. Only CheckProgress's atomics are read here.
  std::thread watchdog([&] {
    bool live = true;
    while (!stop_health.WaitForNotificationWithTimeout(absl::Seconds(1))) {
      const absl::Status progress = ingestor.CheckProgress(config.liveness_stall_timeout);
      if (progress.ok() == live) continue;
      live = progress.ok();
      (*server)->SetLiveness(live);
      if (live) {
        kLog.Info("liveness SERVING", {{"reason", "the ingestor makes progress again"}});
      } else {
        kLog.Error("liveness NOT_SERVING: the kubelet will restart chgate",
                   {{"reason", progress.message()}});
      }
    }
  });

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  const absl::Time deadline = absl::Now() + config.drain_timeout;
  kLog.Info(signal_number == SIGTERM ? "chgate: SIGTERM: draining" : "chgate: SIGINT: draining",
            {{"drain_timeout", config.drain_timeout}});
  stop_health.Notify();
  health.join();
  watchdog.join();
  // The process ends within the drain deadline and a second whatever ClickHouse does: after the
  // drain every ClickHouse operation still in flight is interrupted (pool.Abort() below), and
  // should anything hold the process past the grace (a destructor joining a thread that no
  // interrupt reaches), this thread ends it. It touches nothing the return path destroys.
  std::thread([deadline] {
    absl::SleepFor(deadline + kExitGrace - absl::Now());
    kLog.Error("chgate: exiting 1: still not stopped after the drain deadline",
               {{"grace", kExitGrace}});
    log::CurrentLogger().Finish();
    std::_Exit(1);
  }).detach();
  const uint64_t dropped_before = ingestor.Stats().rows_dropped;
  absl::Notification server_stopped;
  std::thread stopper([&] {
    (*server)->Shutdown(deadline);
    server_stopped.Notify();
  });
  ingestor.Shutdown(deadline);
  // Queries keep running until the deadline (the API server's shutdown waits for the calls it
  // has); whatever still waits for ClickHouse then (header lookups, flushes, queries) is
  // interrupted rather than left to --read-timeout.
  (void)server_stopped.WaitForNotificationWithTimeout(deadline - absl::Now());
  if (const size_t interrupted = pool.Abort(); interrupted > 0) {
    kLog.Warn("drain deadline: ClickHouse operations still in flight interrupted",
              {{"interrupted", uint64_t{interrupted}}});
  }
  stopper.join();
  const ingest::IngestStats stats = ingestor.Stats();
  const uint64_t dropped = stats.rows_dropped - dropped_before;
  // A drain that lost rows (or left their fate open) exits 1, so the loss shows where exit codes
  // are watched; chgate_rows_dropped_total{reason="shutdown"} counts them too.
  const int rc = dropped > 0 || stats.flushes_in_flight > 0 ? 1 : 0;
  if (rc != 0) {
    kLog.Error("chgate: exiting 1: the drain did not flush everything",
               {{"rows_dropped", dropped},
                {"rows_in_flight", stats.buffered_rows},
                {"flushes_in_flight", stats.flushes_in_flight}});
  } else {
    kLog.Info("chgate: stopped", {{"rows_dropped", uint64_t{0}}});
  }
  if (spool != nullptr) {
    // Acknowledged rows not yet in ClickHouse: safe only if the spool's volume outlives this
    // process (a chgate restart, or a PersistentVolumeClaim); an emptyDir goes with the pod.
    const spool::SpoolStats left = spool->Stats();
    if (left.pending_records > 0) {
      kLog.Error(
          "chgate: acknowledged rows left in the spool; they are sent at the next start "
          "on the same spool directory, and lost if its volume goes with the pod",
          {{"rows", stats.spooled_rows},
           {"records", left.pending_records},
           {"spool_dir", config.spool_dir}});
    }
  }
  if (stats.flushes_in_flight > 0) {
    // A flush still waiting for an unresponsive ClickHouse would hold the Ingestor's destructor
    // (it joins the flush threads) until --read-timeout, far past the drain deadline. Its callers
    // already had their error when the server shut down; leave without it.
    kLog.Warn("exiting without the flushes still waiting for ClickHouse",
              {{"flushes_in_flight", stats.flushes_in_flight}});
    log::CurrentLogger().Finish();
    std::_Exit(rc);
  }
  return rc;
}

// The configuration at start, one field per option (never a secret: the password is read from a
// file and is no option).
void LogConfiguration(const config::Config& config) {
  std::vector<log::Field> fields;
  fields.reserve(config.settings.size());
  for (const auto& [name, value] : config.settings) fields.emplace_back(name, value);
  kLog.Info("configuration", fields);
}

int Main(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "spool") {
    return RunSpoolCommand(argc, argv, environ, std::cout, std::cerr);
  }
  // Debian's abseil is built without NDEBUG, so every absl::Mutex (gRPC's included) records lock
  // order in a global graph to detect deadlocks: GraphCycles::GetId, InsertEdge and, when a
  // mutex is destroyed, RemoveNode. Measured on unary 1-row Inserts, that bookkeeping was 11 % of
  // chgate's CPU. The check belongs in tests, not in the serving process.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Buffers of 1 MiB and more (messages, column blocks, compressed frames) get their own
  // mappings, returned to the system when freed. glibc's default threshold rises to 32 MiB after
  // the first such buffer is freed, after which they come from the heap, whose freed holes the
  // process keeps: measured, this lowers the peak RSS under a burst of large inserts by about a
  // tenth (tests/e2e/memory_e2e_test.py).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  // Setting the threshold also fixes the trim threshold at its 128 KiB default: every free that
  // leaves more than that at the top of a thread's arena was handed back with madvise and faulted
  // in again by the next half-megabyte message (Query responses, gRPC slices, column buffers).
  // Measured on 100 M numbers through Query: chgate CPU 0.68-1.01 s -> 0.48-0.61 s, with madvise
  // and page faults gone from the profile. Each arena keeps at most this much free memory.
  mallopt(M_TRIM_THRESHOLD, 4 << 20);
  auto config = config::Parse(argc, argv, environ);
  if (!config.ok()) {
    std::cerr << "chgate: " << config.status().message() << "\n";
    return 2;
  }
  if (config->help) {
    std::cout << config::Usage();
    return 0;
  }
  // Never destroyed: gRPC's threads may log until the process exits. Finish() writes what the
  // throttled events still owe.
  auto* logger = new log::Logger({.level = *log::ParseLevel(config->log_level),
                                  .format = *log::ParseFormat(config->log_format),
                                  .repeat_interval = config->log_repeat_interval});
  log::SetLogger(logger);
  absl::Cleanup finish = [logger] { logger->Finish(); };
  service::RouteGrpcLogs();
  kLog.Info("chgate: version " CHGATE_VERSION ", revision " CHGATE_REVISION,
            {{"version", CHGATE_VERSION}, {"revision", CHGATE_REVISION}});
  LogConfiguration(*config);
  for (const std::string& name : config->unknown_environment) {
    kLog.Warn("environment variable names no option (see --help); it is ignored",
              {{"variable", name}});
  }
  return config->query.empty() ? Serve(*config) : RunQuery(*config);
}

}  // namespace
}  // namespace chgate

int main(int argc, char** argv) { return chgate::Main(argc, argv); }
