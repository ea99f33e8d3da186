// The chgate process. RunChgate is the whole program (main.cc only calls it): the `spool`
// subcommand, the configuration and the logger, then one query (--query) or the server.
//
// App is the server as one object with one job per method: Start builds it from the
// configuration in order (metrics, the ClickHouse pool, health served while the rest starts, the
// spool and its recovery, the Ingestor, Query, API security, the API server, the health refresh
// and the API files' reloads on the process's housekeeping scheduler, the liveness watchdog);
// Run waits for SIGTERM or SIGINT, drains within --drain-timeout and returns the exit code.
// Its members are declared in the order they are built, so they are destroyed in reverse: the
// API server before the Ingestor, the Ingestor before the spool and the pool.
#pragma once

#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "server/auth/authorizer.h"
#include "server/clickhouse/pool.h"
#include "server/clickhouse/wire/tls.h"
#include "server/common/scheduler.h"
#include "server/config/config.h"
#include "server/ingest/ingestor.h"
#include "server/ingest/inserter.h"
#include "server/metrics/metrics.h"
#include "server/service/query_service.h"
#include "server/service/server.h"
#include "server/spool/spool.h"

namespace chgate {

// The program: returns the process's exit code.
int RunChgate(int argc, char** argv, char** envp);

class App {
 public:
  // Periodic jobs go on `housekeeping`, which must outlive the App.
  App(const config::Config& config, Scheduler& housekeeping);
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  // Catches SIGTERM and SIGINT (Run waits for them), then starts everything. Returns 0 when
  // serving, else the exit code (1: a resource could not be had; 2: the configuration cannot work),
  // the reason logged.
  int Start();
  // Waits for SIGTERM or SIGINT, then drains (see docs/configuration.md): 0 when everything was
  // flushed, 1 when rows were dropped or a flush was still waiting at the deadline. The process
  // ends within the drain deadline and a second whatever ClickHouse does.
  int Run();

 private:
  // SIGTERM and SIGINT, on any thread, pass their number to WaitForStopSignal through a pipe.
  int CatchStopSignals();
  static int WaitForStopSignal();
  int StartMetrics();
  int ConnectClickHouse();
  int ServeHealthWhileStarting();
  int OpenSpool();
  void StartIngest();
  int StartQueriesAndSecurity();
  int StartApi();
  void StartHealthLoops();
  void StopHealthLoops();
  // After the signal: the API server and the Ingestor drained by `deadline`, then whatever
  // still waits for ClickHouse interrupted. Returns the exit code.
  int Drain(absl::Time deadline);
  void ReportSpoolLeft(const ingest::IngestStats& stats);

  const config::Config& config_;
  Scheduler& housekeeping_;
  metrics::Metrics metrics_;
  std::unique_ptr<metrics::HttpServer> exposer_;
  std::shared_ptr<metrics::ByteCountersCollectable> byte_counters_;
  std::shared_ptr<clickhouse::TlsClientContext> tls_;
  std::shared_ptr<metrics::ClickHouseTlsCollectable> tls_collectable_;
  std::unique_ptr<clickhouse::Pool> pool_;
  std::shared_ptr<metrics::PoolCollectable> pool_collectable_;
  std::unique_ptr<service::HealthListener> health_listener_;
  ingest::IngestOptions ingest_options_;
  std::unique_ptr<spool::Spool> spool_;
  std::vector<spool::SpoolRecord> replay_;
  std::unique_ptr<spool::Spool> key_spool_;  // <spool-dir>/keys (ingest::KeyLog)
  std::vector<spool::SpoolRecord> key_replay_;
  std::shared_ptr<metrics::SpoolCollectable> spool_collectable_;  // the registry holds it weakly
  std::unique_ptr<ingest::ClickHouseInserter> inserter_;
  std::unique_ptr<ingest::Ingestor> ingestor_;
  std::unique_ptr<service::QueryExecutor> queries_;
  std::unique_ptr<auth::Authorizer> authorizer_;
  service::ApiTlsOptions api_tls_;
  // The API's served key and certificate, once the server has them (read by a metrics scrape,
  // which may come at any time, the App's teardown included).
  class ServedIdentity {
   public:
    void Set(std::shared_ptr<service::ApiIdentity> identity) {
      absl::MutexLock l(&mu_);
      identity_ = std::move(identity);
    }
    std::shared_ptr<service::ApiIdentity> Get() {
      absl::MutexLock l(&mu_);
      return identity_;
    }

   private:
    absl::Mutex mu_;
    std::shared_ptr<service::ApiIdentity> identity_ ABSL_GUARDED_BY(mu_);
  };
  std::shared_ptr<ServedIdentity> served_identity_ = std::make_shared<ServedIdentity>();
  std::shared_ptr<metrics::ApiTlsCollectable> api_tls_collectable_;
  std::unique_ptr<service::Server> server_;
  // Cancelled (destroyed) before what they call.
  Scheduler::Job health_refresh_;
  Scheduler::Job api_files_reload_;
  // The liveness watchdog has a thread of its own: it must run while anything else is stuck.
  absl::Notification stop_health_;
  std::thread watchdog_;
};

}  // namespace chgate
