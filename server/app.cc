#include "server/app.h"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "build_info.h"
#include "server/clickhouse/connection.h"
#include "server/clickhouse/text_form.h"
#include "server/log/log.h"
#include "server/service/api_security.h"
#include "server/service/grpc_log.h"
#include "server/spool_cli.h"
#include "server/wiring.h"

namespace chgate {
namespace {

constexpr log::Component kLog("main");
constexpr log::Component kAuthLog("api");
// How long past --drain-timeout the process may take to end.
constexpr absl::Duration kExitGrace = absl::Milliseconds(900);

// Counts of the bytes every ClickHouse connection moved; static, because the metrics registry's
// collectable reads them until the process ends.
clickhouse::IoCounters& IoCounters() {
  static clickhouse::IoCounters counters;
  return counters;
}

int CannotStart(const absl::Status& status, int rc) {
  kLog.Error("chgate: cannot start", {{"error", status.message()}});
  return rc;
}

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
              AppendTsvValue(*block.column(c).column, row, false, &line);
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

// The configuration at start, one field per option (never a secret: the password is read from a
// file and is no option).
void LogConfiguration(const config::Config& config) {
  std::vector<log::Field> fields;
  fields.reserve(config.settings.size());
  for (const auto& [name, value] : config.settings) fields.emplace_back(name, value);
  kLog.Info("configuration", fields);
}

// SIGTERM and SIGINT end up here, on whichever thread the kernel picks (threads the process did
// not start itself, such as a sanitizer's, may take them), and are passed to Run through a pipe.
// Blocking the signals and waiting for them with sigwait would leave every such thread to take
// them with the default action: the process ending undrained.
std::atomic<int> stop_pipe_write{-1};
int stop_pipe_read = -1;

void OnStopSignal(int signal_number) {
  const int saved = errno;
  const char byte = static_cast<char>(signal_number);
  // A full pipe (signals nobody reads any more) drops the byte: the first one was enough.
  [[maybe_unused]] const ssize_t n = ::write(stop_pipe_write.load(), &byte, 1);
  errno = saved;
}

}  // namespace

int App::CatchStopSignals() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    kLog.Error("chgate: cannot make the signal pipe", {{"error", std::strerror(errno)}});
    return 1;
  }
  stop_pipe_read = fds[0];
  stop_pipe_write.store(fds[1]);
  struct sigaction action {};
  action.sa_handler = &OnStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  return 0;
}

int App::WaitForStopSignal() {
  pollfd p{stop_pipe_read, POLLIN, 0};
  char byte = 0;
  while (true) {
    if (::read(stop_pipe_read, &byte, 1) == 1) return byte;
    ::poll(&p, 1, -1);
  }
}

int RunChgate(int argc, char** argv, char** envp) {
  if (argc >= 2 && std::string_view(argv[1]) == "spool") {
    return RunSpoolCommand(argc, argv, envp, std::cout, std::cerr);
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
  auto config = config::Parse(argc, argv, envp);
  if (!config.ok()) {
    std::cerr << "chgate: " << config.status().message() << "\n";
    return 2;
  }
  if (config->help) {
    std::cout << config::Usage();
    return 0;
  }
  // The process's periodic housekeeping, on one thread: the log's summaries here, the health
  // refresh and the API files' reloads added by the App.
  Scheduler housekeeping;
  // Never destroyed: gRPC's threads may log until the process exits. Finish() writes what the
  // throttled events still owe.
  auto* logger = new log::Logger({.level = *log::ParseLevel(config->log_level),
                                  .format = *log::ParseFormat(config->log_format),
                                  .repeat_interval = config->log_repeat_interval,
                                  .sweep_interval = absl::ZeroDuration()});
  log::SetLogger(logger);
  absl::Cleanup finish = [logger] { logger->Finish(); };
  Scheduler::Job log_sweep =
      housekeeping.Every("log sweep", absl::Seconds(1), [logger] { logger->Sweep(); });
  service::RouteGrpcLogs();
  kLog.Info("chgate: version " CHGATE_VERSION ", revision " CHGATE_REVISION,
            {{"version", CHGATE_VERSION}, {"revision", CHGATE_REVISION}});
  LogConfiguration(*config);
  for (const std::string& name : config->unknown_environment) {
    kLog.Warn("environment variable names no option (see --help); it is ignored",
              {{"variable", name}});
  }
  if (!config->query.empty()) return RunQuery(*config);
  App app(*config, housekeeping);
  if (const int rc = app.Start(); rc != 0) return rc;
  return app.Run();
}

App::App(const config::Config& config, Scheduler& housekeeping)
    : config_(config), housekeeping_(housekeeping) {}

App::~App() { StopHealthLoops(); }

int App::Start() {
  if (int rc = CatchStopSignals(); rc != 0) return rc;
  if (int rc = StartMetrics(); rc != 0) return rc;
  if (int rc = ConnectClickHouse(); rc != 0) return rc;
  if (int rc = ServeHealthWhileStarting(); rc != 0) return rc;
  ingest_options_ = IngestOptionsFrom(config_);
  if (int rc = OpenSpool(); rc != 0) return rc;
  StartIngest();
  if (int rc = StartQueriesAndSecurity(); rc != 0) return rc;
  if (int rc = StartApi(); rc != 0) return rc;
  StartHealthLoops();
  return 0;
}

int App::StartMetrics() {
  metrics_.SetBuildInfo(CHGATE_VERSION, CHGATE_REVISION);
  if (!config_.metrics_listen.empty()) {
    auto started = metrics_.StartServer(config_.metrics_listen);
    if (!started.ok()) return CannotStart(started.status(), 1);
    exposer_ = *std::move(started);
  }
  clickhouse::IoCounters& io = IoCounters();
  byte_counters_ =
      std::make_shared<metrics::ByteCountersCollectable>(&io.received, &io.decoded, &io.sent);
  metrics_.RegisterCollectable(byte_counters_);
  return 0;
}

int App::ConnectClickHouse() {
  auto tls = ClickHouseTlsFrom(config_);
  if (!tls.ok()) return CannotStart(tls.status(), 2);
  tls_ = *std::move(tls);
  tls_collectable_ = std::make_shared<metrics::ClickHouseTlsCollectable>([tls = tls_] {
    if (tls == nullptr) return metrics::ClickHouseTlsSample{};
    return metrics::ClickHouseTlsSample{.insecure_skip_verify = tls->options().insecure_skip_verify,
                                        .reloads = tls->reloads(),
                                        .reload_failures = tls->reload_failures()};
  });
  metrics_.RegisterCollectable(tls_collectable_);
  absl::StatusOr<clickhouse::ConnectionOptions> connected = ClickHouseConnectionFrom(config_, tls_);
  if (!connected.ok()) return CannotStart(connected.status(), 2);
  clickhouse::ConnectionOptions connection = *std::move(connected);
  connection.counters = &IoCounters();
  pool_ = std::make_unique<clickhouse::Pool>(PoolOptionsFrom(config_, connection));
  pool_->Start();
  pool_collectable_ = std::make_shared<metrics::PoolCollectable>([pool = pool_.get()] {
    std::vector<metrics::PoolEndpointSample> samples;
    for (const clickhouse::EndpointStats& s : pool->Stats()) {
      samples.push_back({s.endpoint, s.idle, s.in_use, s.connects, s.connect_failures,
                         s.discarded_broken, s.closed_expired, s.healthy,
                         s.last_success == absl::InfinitePast()
                             ? 0.0
                             : absl::ToDoubleSeconds(s.last_success - absl::UnixEpoch())});
    }
    return samples;
  });
  metrics_.RegisterCollectable(pool_collectable_);
  return 0;
}

int App::ServeHealthWhileStarting() {
  // Health probes are answered from here on ("liveness" SERVING, readiness NOT_SERVING), so a long
  // spool recovery does not fail the kubelet's startupProbe; the API server takes this listener
  // over once chgate serves.
  if (config_.health_listen.empty()) return 0;
  auto started = service::StartHealthListener(config_.health_listen, config_.grpc_reflection);
  if (!started.ok()) return CannotStart(started.status(), 1);
  health_listener_ = *std::move(started);
  kLog.Info("health served while chgate starts", {{"health_listen", config_.health_listen},
                                                  {"health_port", health_listener_->port()},
                                                  {"liveness", "SERVING"},
                                                  {"readiness", "NOT_SERVING"}});
  return 0;
}

int App::OpenSpool() {
  // The spool of the persisted ack mode: recovered before the API is served, closed after the
  // Ingestor (declared before it, destroyed after it).
  if (config_.spool_dir.empty()) return 0;
  const absl::Time opening = absl::Now();
  absl::StatusOr<spool::Spool::Opened> opened =
      spool::Spool::Open(config_.spool_dir, SpoolOptionsFrom(config_));
  if (!opened.ok()) {
    kLog.Error("chgate: cannot start: the spool cannot be opened",
               {{"spool_dir", config_.spool_dir}, {"error", opened.status().message()}});
    return 1;
  }
  const spool::RecoveryReport& report = opened->report;
  for (const auto& q : report.quarantined) {
    std::vector<log::Field> fields = {{"segment", q.segment},
                                      {"moved_to", q.moved_to},
                                      {"offset", q.offset},
                                      {"bytes", q.bytes},
                                      {"reason", q.reason}};
    if (!q.kept_in.empty()) {
      fields.emplace_back("lost_lsn", q.lost_lsn);
      fields.emplace_back("records_after_kept_in", q.kept_in);
    }
    kLog.Error("spool: corrupt bytes moved aside", fields);
  }
  kLog.Info("spool opened", {{"spool_dir", config_.spool_dir},
                             {"spool_id", opened->spool->id()},
                             {"segments", report.segments},
                             {"pending_records", report.replayed_records},
                             {"committed_records", report.committed_records},
                             {"torn_tail_bytes_cut", report.bytes_cut},
                             {"bytes_quarantined", report.bytes_quarantined},
                             {"took", absl::Trunc(absl::Now() - opening, absl::Milliseconds(1))}});
  spool_ = std::move(opened->spool);
  replay_ = std::move(opened->replay);
  ingest_options_.spool = spool_.get();
  ingest_options_.spool_id = spool_->id();
  // The idempotency keys of persisted requests whose rows were committed: a spool of their own.
  const std::string keys_dir = absl::StrCat(config_.spool_dir, "/keys");
  absl::StatusOr<spool::Spool::Opened> keys =
      spool::Spool::Open(keys_dir, KeySpoolOptionsFrom(config_));
  if (!keys.ok()) {
    kLog.Error("chgate: cannot start: the spool's key log cannot be opened",
               {{"spool_dir", keys_dir}, {"error", keys.status().message()}});
    return 1;
  }
  key_spool_ = std::move(keys->spool);
  key_replay_ = std::move(keys->replay);
  ingest_options_.key_spool = key_spool_.get();
  const uint64_t max_bytes = config_.spool_max_bytes;
  spool_collectable_ = std::make_shared<metrics::SpoolCollectable>([s = spool_.get(), max_bytes] {
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
  metrics_.RegisterCollectable(spool_collectable_);
  return 0;
}

void App::StartIngest() {
  inserter_ = std::make_unique<ingest::ClickHouseInserter>(pool_.get());
  ingestor_ = std::make_unique<ingest::Ingestor>(ingest_options_, inserter_.get(),
                                                 ingest::RealClock(), metrics_.ingest_observer());
  if (spool_ != nullptr) {
    (void)ingestor_->Recover(replay_, key_replay_);
    replay_.clear();
    replay_.shrink_to_fit();
    key_replay_.clear();
  }
}

int App::StartQueriesAndSecurity() {
  absl::StatusOr<service::QueryServiceOptions> query_options = QueryServiceOptionsFrom(config_);
  if (!query_options.ok()) return CannotStart(query_options.status(), 2);
  queries_ = std::make_unique<service::QueryExecutor>(pool_.get(), *std::move(query_options),
                                                      metrics_.query_observer());
  // API security: the Authorizer reloads the tokens and policy files, the TLS credentials the
  // certificate files, each when they change.
  service::AuthObserver* auth_observer = metrics_.auth_observer();
  auto authorizer = auth::Authorizer::Create(
      {.tokens_file = config_.api_tokens_file,
       .policy_file = config_.api_policy_file,
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
  if (!authorizer.ok()) return CannotStart(authorizer.status(), 1);
  authorizer_ = *std::move(authorizer);
  api_tls_ = {.cert_file = config_.api_tls_cert_file,
              .key_file = config_.api_tls_key_file,
              .client_ca_file = config_.api_tls_client_ca_file,
              .client_auth = config_.api_tls_client_auth == "optional"
                                 ? service::ClientAuth::kOptional
                                 : service::ClientAuth::kRequire,
              .reload_interval = config_.api_reload_interval};
  // The expiry of the certificate new handshakes get, at each scrape: the served pair's once the
  // API serves (a certificate file that waits for its key is not served yet), the file's before.
  api_tls_collectable_ =
      std::make_shared<metrics::ApiTlsCollectable>([api_tls = api_tls_, served = served_identity_] {
        metrics::ApiTlsSample sample{.enabled = api_tls.enabled(),
                                     .handshake_failures = service::ApiHandshakeFailures()};
        if (!sample.enabled) return sample;
        std::shared_ptr<service::ApiIdentity> identity = served->Get();
        absl::StatusOr<absl::Time> not_after =
            identity != nullptr ? identity->ServedNotAfter()
                                : service::CertificateNotAfter(api_tls.cert_file);
        if (not_after.ok()) {
          sample.certificate_expiry_unix_seconds = absl::ToUnixSeconds(*not_after);
        }
        return sample;
      });
  metrics_.RegisterCollectable(api_tls_collectable_);
  return 0;
}

int App::StartApi() {
  auto server = service::StartServer(
      {.api_address = config_.listen,
       .api_socket_mode = static_cast<mode_t>(config_.listen_socket_mode),
       .health_address = config_.health_listen,
       .health_listener = health_listener_.get(),
       .reflection = config_.grpc_reflection,
       .max_message_bytes = config_.max_message_bytes,
       .max_concurrent_streams =
           static_cast<uint32_t>(std::min<uint64_t>(config_.max_concurrent_streams, INT32_MAX)),
       .max_connection_age = config_.max_connection_age,
       .max_connection_age_grace = config_.max_connection_age_grace,
       // A quarter of the budget for Insert messages in transit (read_gate.h).
       .read_slots = std::max<size_t>(2, config_.memory_budget / 4 / config_.max_message_bytes),
       .default_deadline = config_.default_deadline,
       .queries = queries_.get(),
       .tls = api_tls_,
       .authorizer = authorizer_.get(),
       .auth_observer = metrics_.auth_observer(),
       .default_database = config_.database,
       .default_ack = ingest_options_.default_ack},
      ingestor_.get());
  if (!server.ok()) return CannotStart(server.status(), 1);
  server_ = *std::move(server);
  served_identity_->Set(server_->api_identity());
  kLog.Info(
      "chgate: serving the API",
      {{"listen", config_.listen},
       {"api_port", server_->api_port()},
       {"api_security", api_tls_.enabled()
                            ? (api_tls_.client_ca_file.empty() ? "TLS" : "mutual TLS")
                            : "plaintext"},
       {"policy", authorizer_->enabled() ? config_.api_policy_file : "none"},
       {"health_listen", config_.health_listen.empty() ? config_.listen : config_.health_listen},
       {"health_port", server_->health_port()},
       {"metrics_listen", config_.metrics_listen.empty() ? "off" : config_.metrics_listen},
       {"metrics_port", metrics_.port()}});
  return 0;
}

void App::StartHealthLoops() {
  health_refresh_ = housekeeping_.Every("health refresh", absl::Milliseconds(500),
                                        [server = server_.get()] { server->RefreshHealth(); });
  if (authorizer_->enabled() || api_tls_.enabled()) {
    api_files_reload_ =
        housekeeping_.Every("API files reload", config_.api_reload_interval,
                            [authorizer = authorizer_.get(), server = server_.get()] {
                              if (authorizer->enabled()) authorizer->ReloadChanged();
                              server->ReloadApiCertificate();
                            });
  }
  // Liveness watchdog: its own thread, because a wedged ingestor would also block the thread
  // above. Only CheckProgress's atomics are read here.
  watchdog_ = std::thread([this] {
    bool live = true;
    while (!stop_health_.WaitForNotificationWithTimeout(absl::Seconds(1))) {
      const absl::Status progress = ingestor_->CheckProgress(config_.liveness_stall_timeout);
      if (progress.ok() == live) continue;
      live = progress.ok();
      server_->SetLiveness(live);
      if (live) {
        kLog.Info("liveness SERVING", {{"reason", "the ingestor makes progress again"}});
      } else {
        kLog.Error("liveness NOT_SERVING: the kubelet will restart chgate",
                   {{"reason", progress.message()}});
      }
    }
  });
}

void App::StopHealthLoops() {
  health_refresh_.Cancel();
  if (!stop_health_.HasBeenNotified()) stop_health_.Notify();
  if (watchdog_.joinable()) watchdog_.join();
}

int App::Run() {
  const int signal_number = WaitForStopSignal();
  const absl::Time deadline = absl::Now() + config_.drain_timeout;
  kLog.Info(signal_number == SIGTERM ? "chgate: SIGTERM: draining" : "chgate: SIGINT: draining",
            {{"drain_timeout", config_.drain_timeout}});
  StopHealthLoops();
  // The process ends within the drain deadline and a second whatever ClickHouse does: after the
  // drain every ClickHouse operation still in flight is interrupted (Drain), and should anything
  // hold the process past the grace (a destructor joining a thread that no interrupt reaches),
  // this thread ends it. It touches nothing the return path destroys.
  std::thread([deadline] {
    absl::SleepFor(deadline + kExitGrace - absl::Now());
    kLog.Error("chgate: exiting 1: still not stopped after the drain deadline",
               {{"grace", kExitGrace}});
    log::CurrentLogger().Finish();
    std::_Exit(1);
  }).detach();
  return Drain(deadline);
}

int App::Drain(absl::Time deadline) {
  const uint64_t dropped_before = ingestor_->Stats().rows_dropped;
  absl::Notification server_stopped;
  std::thread stopper([&] {
    server_->Shutdown(deadline);
    server_stopped.Notify();
  });
  ingestor_->Shutdown(deadline);
  // Queries keep running until the deadline (the API server's shutdown waits for the calls it
  // has); whatever still waits for ClickHouse then (header lookups, flushes, queries) is
  // interrupted rather than left to --read-timeout.
  (void)server_stopped.WaitForNotificationWithTimeout(deadline - absl::Now());
  if (const size_t interrupted = pool_->Abort(); interrupted > 0) {
    kLog.Warn("drain deadline: ClickHouse operations still in flight interrupted",
              {{"interrupted", uint64_t{interrupted}}});
  }
  stopper.join();
  const ingest::IngestStats stats = ingestor_->Stats();
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
  ReportSpoolLeft(stats);
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

void App::ReportSpoolLeft(const ingest::IngestStats& stats) {
  if (spool_ == nullptr) return;
  // Acknowledged rows not yet in ClickHouse: safe only if the spool's volume outlives this
  // process (a chgate restart, or a PersistentVolumeClaim); an emptyDir goes with the pod.
  const spool::SpoolStats left = spool_->Stats();
  if (left.pending_records > 0) {
    kLog.Error(
        "chgate: acknowledged rows left in the spool; they are sent at the next start "
        "on the same spool directory, and lost if its volume goes with the pod",
        {{"rows", stats.spooled_rows},
         {"records", left.pending_records},
         {"spool_dir", config_.spool_dir}});
  }
}

}  // namespace chgate
