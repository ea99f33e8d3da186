#include "server/metrics/metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/client_metric.h"
#include "prometheus/metric_type.h"
#include "prometheus/text_serializer.h"
#include "text/status_macros.h"

namespace chgate::metrics {
namespace {

// Ingest.
constexpr char kIngestRequests[] = "chgate_ingest_requests_total";
constexpr char kIngestRows[] = "chgate_ingest_rows_total";
constexpr char kBatchesFlushed[] = "chgate_batches_flushed_total";
constexpr char kFlushDuration[] = "chgate_flush_duration_seconds";
constexpr char kBatchRows[] = "chgate_batch_rows";
constexpr char kBatchSize[] = "chgate_batch_size_bytes";
constexpr char kCommitLatency[] = "chgate_request_commit_latency_seconds";
constexpr char kBufferedRows[] = "chgate_buffered_rows";
constexpr char kBufferedBytes[] = "chgate_buffered_bytes";
constexpr char kBufferBudget[] = "chgate_buffer_budget_bytes";
constexpr char kFlushRetries[] = "chgate_flush_retries_total";
constexpr char kFlushErrors[] = "chgate_flush_errors_total";
constexpr char kRowsDropped[] = "chgate_rows_dropped_total";
constexpr char kSpoolDeadLetterRows[] = "chgate_spool_dead_letter_rows_total";
constexpr char kSpoolReplayed[] = "chgate_spool_replayed_records_total";
constexpr char kSpoolBytes[] = "chgate_spool_bytes";
constexpr char kSpoolMaxBytes[] = "chgate_spool_max_bytes";
constexpr char kSpoolSegments[] = "chgate_spool_segments";
constexpr char kSpoolPending[] = "chgate_spool_pending_records";
constexpr char kSpoolOldestAge[] = "chgate_spool_oldest_pending_age_seconds";
constexpr char kSpoolFreeBytes[] = "chgate_spool_free_bytes";
constexpr char kSpoolAppends[] = "chgate_spool_appends_total";
constexpr char kSpoolAppendedBytes[] = "chgate_spool_appended_bytes_total";
constexpr char kSpoolRefusals[] = "chgate_spool_refusals_total";
constexpr char kSpoolFsyncs[] = "chgate_spool_fsyncs_total";
constexpr char kSpoolFsyncSeconds[] = "chgate_spool_fsync_seconds_total";
constexpr char kSpoolQuarantined[] = "chgate_spool_quarantined_bytes_total";
constexpr char kSpoolSetAside[] = "chgate_spool_set_aside_bytes";
constexpr char kBatchesFailed[] = "chgate_batches_failed_total";
constexpr char kBatchMaxDelay[] = "chgate_batch_max_delay_seconds";
constexpr char kDedupWindow[] = "chgate_dedup_window_seconds";
constexpr char kWaitingRequests[] = "chgate_ingest_waiting_requests";
constexpr char kMemoryBudget[] = "chgate_memory_budget_bytes";
constexpr char kMemoryRequests[] = "chgate_memory_request_bytes";
constexpr char kMemoryRefusals[] = "chgate_memory_refusals_total";
// Query.
constexpr char kQueries[] = "chgate_queries_total";
constexpr char kQueryRows[] = "chgate_query_rows_total";
constexpr char kQueryResponseBytes[] = "chgate_query_response_bytes_total";
constexpr char kQueryDuration[] = "chgate_query_duration_seconds";
constexpr char kQueriesInFlight[] = "chgate_queries_in_flight";
// API authentication and authorization.
constexpr char kAuthFailures[] = "chgate_api_auth_failures_total";
constexpr char kAuthReloads[] = "chgate_api_auth_reloads_total";
// Reasons of kAuthFailures (auth::DenyReasonLabel), exported from the start.
constexpr const char* kAuthFailureReasons[] = {"no_credentials", "bad_token",  "unknown_identity",
                                               "insert_denied",  "ack_denied", "query_denied"};
// ClickHouse I/O (ByteCountersCollectable).
constexpr char kReceivedBytes[] = "chgate_clickhouse_received_bytes_total";
constexpr char kDecodedBytes[] = "chgate_clickhouse_decoded_bytes_total";
constexpr char kSentBytes[] = "chgate_clickhouse_sent_bytes_total";
// Pool (PoolCollectable).
constexpr char kPoolConnections[] = "chgate_pool_connections";
constexpr char kPoolConnects[] = "chgate_pool_connects_total";
constexpr char kPoolConnectFailures[] = "chgate_pool_connect_failures_total";
constexpr char kPoolClosed[] = "chgate_pool_connections_closed_total";
constexpr char kClickHouseUp[] = "chgate_clickhouse_up";
constexpr char kClickHouseLastSuccess[] = "chgate_clickhouse_last_success_timestamp_seconds";
constexpr char kBuildInfo[] = "chgate_build_info";
constexpr char kTlsInsecure[] = "chgate_clickhouse_tls_insecure_skip_verify";
constexpr char kTlsReloads[] = "chgate_clickhouse_tls_reloads_total";
// The API listener's TLS (ApiTlsCollectable).
constexpr char kApiCertExpiry[] = "chgate_api_tls_certificate_expiry_timestamp_seconds";
constexpr char kApiHandshakeFailures[] = "chgate_api_tls_handshake_failures_total";
// The process, under the names every Prometheus client library uses (so standard dashboards and
// `chgate-cli bench --metrics-url` find them); read from /proc at scrape time.
constexpr char kProcessCpu[] = "process_cpu_seconds_total";
constexpr char kProcessResident[] = "process_resident_memory_bytes";
constexpr char kProcessVirtual[] = "process_virtual_memory_bytes";
constexpr char kProcessStart[] = "process_start_time_seconds";
constexpr char kProcessOpenFds[] = "process_open_fds";
constexpr char kProcessMaxFds[] = "process_max_fds";

// 1-2-5 steps (about x2.2 each) from 1 ms to 60 s: readable `le` values.
const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 60};
// Queries may legitimately run for minutes.
const prometheus::Histogram::BucketBoundaries kQueryDurationBuckets = {
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 60, 120, 300};

// x4 from 1 row to 16Mi rows (past the 10M a batch could plausibly hold).
const prometheus::Histogram::BucketBoundaries kBatchRowsBuckets = {
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216};
// x4 from 1 KiB to 256 MiB.
const prometheus::Histogram::BucketBoundaries kBatchSizeBuckets = {
    1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864, 268435456};

template <typename T>
prometheus::Family<T>& Build(prometheus::detail::Builder<T> builder, prometheus::Registry& registry,
                             const char* name, const char* help) {
  return builder.Name(name).Help(help).Register(registry);
}

prometheus::MetricFamily MakeFamily(const char* name, const char* help,
                                    prometheus::MetricType type) {
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  return family;
}

prometheus::ClientMetric Sample(std::vector<prometheus::ClientMetric::Label> labels,
                                prometheus::MetricType type, double value) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return metric;
}

// The process families from /proc/self (Linux). A field that cannot be read is left out rather
// than exported as a wrong value.
std::vector<prometheus::MetricFamily> CollectProcess() {
  constexpr auto kCounter = prometheus::MetricType::Counter;
  constexpr auto kGauge = prometheus::MetricType::Gauge;
  std::vector<prometheus::MetricFamily> families;
  auto add = [&](const char* name, const char* help, prometheus::MetricType type, double value) {
    prometheus::MetricFamily family = MakeFamily(name, help, type);
    family.metric.push_back(Sample({}, type, value));
    families.push_back(std::move(family));
  };
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // The command name is in parentheses and may hold spaces: fields count from after the last ')'.
  const size_t paren = stat.rfind(')');
  if (paren != std::string::npos && ticks > 0) {
    const std::vector<absl::string_view> f =
        absl::StrSplit(absl::string_view(stat).substr(paren + 2), ' ', absl::SkipEmpty());
    // f[0] is field 3 (state): utime 14, stime 15, starttime 22, vsize 23, rss 24.
    uint64_t utime = 0, stime = 0, start = 0, vsize = 0, rss = 0;
    if (f.size() > 21 && absl::SimpleAtoi(f[11], &utime) && absl::SimpleAtoi(f[12], &stime) &&
        absl::SimpleAtoi(f[19], &start) && absl::SimpleAtoi(f[20], &vsize) &&
        absl::SimpleAtoi(f[21], &rss)) {
      add(kProcessCpu, "Total user and system CPU time spent, in seconds.", kCounter,
          static_cast<double>(utime + stime) / ticks);
      add(kProcessResident, "Resident memory size in bytes.", kGauge,
          static_cast<double>(rss) * static_cast<double>(::sysconf(_SC_PAGESIZE)));
      add(kProcessVirtual, "Virtual memory size in bytes.", kGauge, static_cast<double>(vsize));
      std::ifstream proc_stat("/proc/stat");
      std::string line;
      while (std::getline(proc_stat, line)) {
        uint64_t boot = 0;
        absl::string_view rest = line;
        if (absl::ConsumePrefix(&rest, "btime ") && absl::SimpleAtoi(rest, &boot)) {
          add(kProcessStart, "Start time of the process since the Unix epoch, in seconds.", kGauge,
              static_cast<double>(boot) + static_cast<double>(start) / ticks);
          break;
        }
      }
    }
  }
  std::error_code error;
  size_t fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++fds;
  }
  if (!error) {
    // The directory's own descriptor, open while it is listed, is not counted.
    add(kProcessOpenFds, "Number of open file descriptors.", kGauge,
        static_cast<double>(fds > 0 ? fds - 1 : 0));
  }
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    add(kProcessMaxFds, "Maximum number of open file descriptors.", kGauge,
        static_cast<double>(limit.rlim_cur));
  }
  return families;
}

}  // namespace

std::string_view ResultLabel(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return kResultOk;
    case absl::StatusCode::kInvalidArgument:
      return kResultInvalid;
    case absl::StatusCode::kNotFound:
      return kResultNotFound;
    case absl::StatusCode::kResourceExhausted:
      return kResultResourceExhausted;
    case absl::StatusCode::kUnavailable:
      return kResultUnavailable;
    case absl::StatusCode::kDeadlineExceeded:
      return kResultDeadlineExceeded;
    case absl::StatusCode::kCancelled:
      return kResultCancelled;
    case absl::StatusCode::kPermissionDenied:
      return kResultPermissionDenied;
    case absl::StatusCode::kUnimplemented:
      return kResultUnimplemented;
    default:
      return kResultError;
  }
}

std::string ClickHouseCodeLabel(int32_t clickhouse_code) { return std::to_string(clickhouse_code); }

std::string StatusCodeLabel(absl::StatusCode code) { return absl::StatusCodeToString(code); }

void IngestTableMetrics::BatchFlushed(std::string_view reason, uint64_t rows, uint64_t bytes,
                                      double seconds) const {
  batches_flushed->Add({{"table", table}, {"reason", std::string(reason)}}).Increment();
  batch_rows->Observe(static_cast<double>(rows));
  batch_size->Observe(static_cast<double>(bytes));
  flush_duration->Observe(seconds);
}

void IngestTableMetrics::FlushError(std::string_view code) const {
  flush_errors->Add({{"table", table}, {"code", std::string(code)}}).Increment();
  batches_failed->Increment();
}

struct IngestMetricsCache {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, std::unique_ptr<IngestTableMetrics>> tables ABSL_GUARDED_BY(mu);
  // "table\0result" -> {requests, request_rows}
  absl::flat_hash_map<std::string, std::pair<prometheus::Counter*, prometheus::Counter*>> requests
      ABSL_GUARDED_BY(mu);
};

const IngestTableMetrics& IngestMetrics::ForTable(const std::string& table) const {
  absl::MutexLock lock(&cache->mu);
  std::unique_ptr<IngestTableMetrics>& slot = cache->tables[table];
  if (slot != nullptr) return *slot;
  const prometheus::Labels labels = {{"table", table}};
  // A failure ratio needs its denominator from the first flush of each reason on.
  for (std::string_view reason :
       {kFlushRows, kFlushBytes, kFlushAge, kFlushDeadline, kFlushShutdown, kFlushReplay}) {
    batches_flushed->Add({{"table", table}, {"reason", std::string(reason)}});
  }
  slot = std::make_unique<IngestTableMetrics>(IngestTableMetrics{
      .flush_duration = &flush_duration->Add(labels, kLatencyBuckets),
      .batch_rows = &batch_rows->Add(labels, kBatchRowsBuckets),
      .batch_size = &batch_size->Add(labels, kBatchSizeBuckets),
      .commit_latency = &commit_latency->Add(labels, kLatencyBuckets),
      .flush_retries = &flush_retries->Add(labels),
      .batches_flushed = batches_flushed,
      .flush_errors = flush_errors,
      .batches_failed = &batches_failed->Add(labels),
      .rows_dropped_accepted =
          &rows_dropped->Add({{"table", table}, {"reason", "accepted_flush_failed"}}),
      .rows_dropped_shutdown = &rows_dropped->Add({{"table", table}, {"reason", "shutdown"}}),
      .rows_dropped_spool_damaged =
          &rows_dropped->Add({{"table", table}, {"reason", "spool_damaged"}}),
      .spool_dead_letter_rows = &spool_dead_letter_rows->Add(labels),
      .table = table,
  });
  return *slot;
}

void IngestMetrics::TableStarted(const std::string& table, double max_delay_seconds) const {
  (void)ForTable(table);
  batch_max_delay->Add({{"table", table}}).Set(max_delay_seconds);
}

void IngestMetrics::RequestDone(const std::string& table, std::string_view result,
                                uint64_t row_count) const {
  // A client can name any table; only known tables may become label values.
  static const std::string kNoTable;
  const std::string& label = result == kResultNotFound ? kNoTable : table;
  std::string key = label;
  key.push_back('\0');
  key.append(result);
  std::pair<prometheus::Counter*, prometheus::Counter*> counters;
  {
    absl::MutexLock lock(&cache->mu);
    auto& slot = cache->requests[key];
    if (slot.first == nullptr) {
      const prometheus::Labels labels = {{"table", label}, {"result", std::string(result)}};
      slot = {&requests->Add(labels), &request_rows->Add(labels)};
    }
    counters = slot;
  }
  counters.first->Increment();
  counters.second->Increment(static_cast<double>(row_count));
}

void AuthMetrics::Failure(std::string_view reason) const {
  failures->Add({{"reason", std::string(reason)}}).Increment();
}

void AuthMetrics::Reloaded(std::string_view file, bool ok) const {
  reloads->Add({{"file", std::string(file)}, {"result", ok ? "ok" : "error"}}).Increment();
}

void QueryMetrics::QueryFinished(std::string_view result, double seconds) const {
  in_flight->Decrement();
  queries->Add({{"result", std::string(result)}}).Increment();
  duration->Observe(seconds);
}

void QueryMetrics::QueryRefused(std::string_view result) const {
  queries->Add({{"result", std::string(result)}}).Increment();
}

ByteCountersCollectable::ByteCountersCollectable(const std::atomic<uint64_t>* received,
                                                 const std::atomic<uint64_t>* decoded,
                                                 const std::atomic<uint64_t>* sent)
    : received_(received), decoded_(decoded), sent_(sent) {
  CHGATE_CHECK(received_ != nullptr && decoded_ != nullptr && sent_ != nullptr);
}

std::vector<prometheus::MetricFamily> ByteCountersCollectable::Collect() const {
  constexpr auto kCounter = prometheus::MetricType::Counter;
  auto one = [&](const char* name, const char* help, const std::atomic<uint64_t>* value) {
    prometheus::MetricFamily family = MakeFamily(name, help, kCounter);
    family.metric.push_back(
        Sample({}, kCounter, static_cast<double>(value->load(std::memory_order_relaxed))));
    return family;
  };
  std::vector<prometheus::MetricFamily> families;
  families.push_back(one(kReceivedBytes,
                         "Bytes read from the ClickHouse sockets, compressed as on the wire.",
                         received_));
  families.push_back(one(kDecodedBytes, "Bytes after decompressing compression frames.", decoded_));
  families.push_back(one(kSentBytes, "Bytes written to the sockets.", sent_));
  return families;
}

PoolCollectable::PoolCollectable(std::function<std::vector<PoolEndpointSample>()> sample)
    : sample_(std::move(sample)) {
  CHGATE_CHECK(sample_ != nullptr);
}

std::vector<prometheus::MetricFamily> PoolCollectable::Collect() const {
  const std::vector<PoolEndpointSample> samples = sample_();
  if (samples.empty()) return {};
  constexpr auto kCounter = prometheus::MetricType::Counter;
  constexpr auto kGauge = prometheus::MetricType::Gauge;
  prometheus::MetricFamily connections =
      MakeFamily(kPoolConnections, "Connections in the pool by endpoint and state.", kGauge);
  prometheus::MetricFamily connects =
      MakeFamily(kPoolConnects, "Connections opened to the endpoint.", kCounter);
  prometheus::MetricFamily failures =
      MakeFamily(kPoolConnectFailures, "Failed attempts to connect to the endpoint.", kCounter);
  prometheus::MetricFamily closed = MakeFamily(
      kPoolClosed,
      "Connections closed by the pool: broken = after an error, expired = past their lifetime or "
      "idle time.",
      kCounter);
  prometheus::MetricFamily up = MakeFamily(
      kClickHouseUp,
      "1 if the last connection attempt or probe to the ClickHouse endpoint succeeded, else 0 "
      "(also before the first).",
      kGauge);
  prometheus::MetricFamily last_success = MakeFamily(
      kClickHouseLastSuccess,
      "Unix time of the last successful connection or probe to the endpoint (0: never).", kGauge);
  for (const PoolEndpointSample& s : samples) {
    auto labels = [&](const char* name, const char* value) {
      return std::vector<prometheus::ClientMetric::Label>{{"endpoint", s.endpoint}, {name, value}};
    };
    const std::vector<prometheus::ClientMetric::Label> endpoint = {{"endpoint", s.endpoint}};
    connections.metric.push_back(
        Sample(labels("state", "idle"), kGauge, static_cast<double>(s.idle)));
    connections.metric.push_back(
        Sample(labels("state", "in_use"), kGauge, static_cast<double>(s.in_use)));
    connects.metric.push_back(Sample(endpoint, kCounter, static_cast<double>(s.connects)));
    failures.metric.push_back(Sample(endpoint, kCounter, static_cast<double>(s.connect_failures)));
    closed.metric.push_back(
        Sample(labels("reason", "broken"), kCounter, static_cast<double>(s.discarded_broken)));
    closed.metric.push_back(
        Sample(labels("reason", "expired"), kCounter, static_cast<double>(s.closed_expired)));
    up.metric.push_back(Sample(endpoint, kGauge, s.healthy ? 1 : 0));
    last_success.metric.push_back(Sample(endpoint, kGauge, s.last_success_unix_seconds));
  }
  std::vector<prometheus::MetricFamily> families;
  families.push_back(std::move(connections));
  families.push_back(std::move(connects));
  families.push_back(std::move(failures));
  families.push_back(std::move(closed));
  families.push_back(std::move(up));
  families.push_back(std::move(last_success));
  return families;
}

// What an exposer serves: the registry, then every live registered collectable. One collectable
// for the exposer, so collectables registered after StartExposer are served too.
class Metrics::Collector : public prometheus::Collectable {
 public:
  explicit Collector(std::shared_ptr<prometheus::Registry> registry)
      : registry_(std::move(registry)) {}

  void Add(std::weak_ptr<prometheus::Collectable> collectable) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    std::erase_if(collectables_, [](const auto& c) { return c.expired(); });
    collectables_.push_back(std::move(collectable));
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> families = registry_->Collect();
    for (auto& family : CollectProcess()) families.push_back(std::move(family));
    std::vector<std::shared_ptr<prometheus::Collectable>> live;
    {
      absl::ReaderMutexLock lock(&mu_);
      for (const auto& weak : collectables_) {
        if (auto collectable = weak.lock()) live.push_back(std::move(collectable));
      }
    }
    // Collected outside the lock: a collectable's callback may take its own locks.
    for (const auto& collectable : live) {
      for (auto& family : collectable->Collect()) families.push_back(std::move(family));
    }
    return families;
  }

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
  mutable absl::Mutex mu_;
  std::vector<std::weak_ptr<prometheus::Collectable>> collectables_ ABSL_GUARDED_BY(mu_);
};

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      collector_(std::make_shared<Collector>(registry_)) {
  prometheus::Registry& r = *registry_;
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;

  ingest_.cache = std::make_shared<IngestMetricsCache>();
  ingest_.requests = &Build(BuildCounter(), r, kIngestRequests,
                            "Insert requests finished, by table and result (accepted = "
                            "acknowledged once buffered, in accepted ack mode).");
  ingest_.request_rows = &Build(BuildCounter(), r, kIngestRows,
                                "Rows in finished insert requests, by table and result.");
  ingest_.batches_flushed =
      &Build(BuildCounter(), r, kBatchesFlushed,
             "Batch flushes, by table and trigger; failed ones count here too (and in "
             "chgate_flush_errors_total).");
  ingest_.flush_duration =
      &Build(BuildHistogram(), r, kFlushDuration,
             "Time to commit a batch to ClickHouse, from the start of the flush to EndOfStream, "
             "retries included.");
  ingest_.batch_rows = &Build(BuildHistogram(), r, kBatchRows, "Rows per committed batch.");
  ingest_.batch_size =
      &Build(BuildHistogram(), r, kBatchSize, "Buffered size of each committed batch.");
  ingest_.commit_latency = &Build(BuildHistogram(), r, kCommitLatency,
                                  "Time from receiving an insert request to the commit of its "
                                  "rows in ClickHouse.");
  ingest_.buffered_rows =
      &Build(BuildGauge(), r, kBufferedRows, "Rows buffered and not yet committed, all tables.")
           .Add({});
  ingest_.buffered_bytes =
      &Build(BuildGauge(), r, kBufferedBytes, "Bytes buffered and not yet committed, all tables.")
           .Add({});
  ingest_.buffer_budget_bytes =
      &Build(BuildGauge(), r, kBufferBudget,
             "The most bytes of rows batches hold, all tables (the --memory-budget's share for "
             "the buffer).")
           .Add({});
  ingest_.memory_budget_bytes =
      &Build(BuildGauge(), r, kMemoryBudget,
             "--memory-budget: the most bytes insert requests hold from arrival to commit (the "
             "buffer included).")
           .Add({});
  ingest_.memory_request_bytes =
      &Build(BuildGauge(), r, kMemoryRequests,
             "Bytes held by insert requests not yet in a batch: received, being converted, or "
             "waiting for room in the buffer.")
           .Add({});
  ingest_.memory_refusals =
      &Build(BuildCounter(), r, kMemoryRefusals,
             "Insert requests refused at arrival with RESOURCE_EXHAUSTED because the memory "
             "budget was full.")
           .Add({});
  ingest_.flush_retries =
      &Build(BuildCounter(), r, kFlushRetries, "Flush attempts retried after a transient error.");
  ingest_.flush_errors = &Build(
      BuildCounter(), r, kFlushErrors,
      "Failed flush attempts, by table and code: the ClickHouse error code, or the status code "
      "name (e.g. UNAVAILABLE) when the failure did not come from ClickHouse.");
  ingest_.batches_failed =
      &Build(BuildCounter(), r, kBatchesFailed,
             "Batches that failed for good (after their retries), by table; 0 from the table's "
             "first batch on. chgate_flush_errors_total names their codes.");
  ingest_.batch_max_delay =
      &Build(BuildGauge(), r, kBatchMaxDelay,
             "The table's configured batch delay (--batch-max-delay, or its --table-limits "
             "delay): the longest a row waits before its batch is flushed.");
  ingest_.dedup_window = &Build(
      BuildGauge(), r, kDedupWindow,
      "How many seconds of a Replicated table's INSERTs (from every writer) its block "
      "deduplication window covers (replicated_deduplication_window at the table's INSERT rate, "
      "at most replicated_deduplication_window_seconds); +Inf when the rate is unknown. A "
      "persisted batch sent again after a crash later than this may be stored twice.");
  ingest_.rows_dropped = &Build(
      BuildCounter(), r, kRowsDropped,
      "Rows chgate lost: accepted_flush_failed = acknowledged in accepted mode, then their flush "
      "failed for good; shutdown = still buffered when the drain ended; spool_damaged = "
      "persisted, then unreadable in the spool.");
  ingest_.spool_dead_letter_rows =
      &Build(BuildCounter(), r, kSpoolDeadLetterRows,
             "Persisted rows ClickHouse refused for good, moved to the spool's dead-letter "
             "directory instead of the table.");
  ingest_.spool_replayed_records =
      &Build(BuildCounter(), r, kSpoolReplayed,
             "Records of persisted requests found in the spool at start and sent again.")
           .Add({});
  ingest_.waiting_requests =
      &Build(BuildGauge(), r, kWaitingRequests, "Insert requests waiting for buffer budget.")
           .Add({});

  query_.queries =
      &Build(BuildCounter(), r, kQueries, "Query RPCs finished or refused, by result.");
  // Every result exists from the start at 0, so rate() and increase() see the first failure.
  for (std::string_view result :
       {kResultOk, kResultInvalid, kResultNotFound, kResultPermissionDenied,
        kResultResourceExhausted, kResultDeadlineExceeded, kResultCancelled, kResultUnavailable,
        kResultUnimplemented, kResultError}) {
    query_.queries->Add({{"result", std::string(result)}});
  }
  query_.rows = &Build(BuildCounter(), r, kQueryRows, "Rows streamed to Query callers.").Add({});
  query_.response_bytes = &Build(BuildCounter(), r, kQueryResponseBytes,
                                 "Bytes of Query response messages handed to gRPC.")
                               .Add({});
  query_.duration = &Build(BuildHistogram(), r, kQueryDuration,
                           "Duration of Query RPCs, from admission to the end of the stream.")
                         .Add({}, kQueryDurationBuckets);
  query_.in_flight = &Build(BuildGauge(), r, kQueriesInFlight, "Query RPCs running now.").Add({});

  auth_.failures = &Build(BuildCounter(), r, kAuthFailures,
                          "API calls or insert requests refused by authentication or the policy, "
                          "by reason.");
  for (const char* reason : kAuthFailureReasons) auth_.failures->Add({{"reason", reason}});
  auth_.reloads = &Build(BuildCounter(), r, kAuthReloads,
                         "Reloads of the API tokens and policy files after a change, by file and "
                         "result (error: the previous content stays in force).");
  // Every series from the start at 0, so rate() and alerts see the first failed reload.
  for (const char* file : {"tokens", "policy"}) {
    for (const char* result : {"ok", "error"}) {
      auth_.reloads->Add({{"file", file}, {"result", result}});
    }
  }
}

Metrics::~Metrics() = default;

void Metrics::SetBuildInfo(const std::string& version, const std::string& revision) {
  Build(prometheus::BuildGauge(), *registry_, kBuildInfo,
        "1 for the running chgate, labelled with its version and git revision.")
      .Add({{"version", version}, {"revision", revision}})
      .Set(1);
}

std::shared_ptr<prometheus::Collectable> Metrics::collectable() const { return collector_; }

void Metrics::RegisterCollectable(std::weak_ptr<prometheus::Collectable> collectable) {
  collector_->Add(std::move(collectable));
}

absl::StatusOr<std::unique_ptr<HttpServer>> Metrics::StartServer(const std::string& address) {
  // The page is rendered from the collector, which the server keeps alive on its own.
  std::shared_ptr<Collector> collector = collector_;
  CHGATE_ASSIGN_OR_RETURN(
      std::unique_ptr<HttpServer> server, HttpServer::Start(address, [collector] {
        return HttpServer::Page{
            .content_type = "text/plain; version=0.0.4; charset=utf-8",
            .body = prometheus::TextSerializer().Serialize(collector->Collect())};
      }));
  port_.store(server->port(), std::memory_order_release);
  return server;
}

ClickHouseTlsCollectable::ClickHouseTlsCollectable(std::function<ClickHouseTlsSample()> sample)
    : sample_(std::move(sample)) {}

std::vector<prometheus::MetricFamily> ClickHouseTlsCollectable::Collect() const {
  const ClickHouseTlsSample s = sample_();
  constexpr auto kCounter = prometheus::MetricType::Counter;
  constexpr auto kGauge = prometheus::MetricType::Gauge;
  prometheus::MetricFamily insecure = MakeFamily(
      kTlsInsecure,
      "1 if chgate connects to ClickHouse with TLS but without verifying its certificate "
      "(--clickhouse-tls-insecure-skip-verify), else 0.",
      kGauge);
  insecure.metric.push_back(Sample({}, kGauge, s.insecure_skip_verify ? 1 : 0));
  prometheus::MetricFamily reloads = MakeFamily(
      kTlsReloads,
      "Reloads of the ClickHouse TLS certificate files after they changed: ok, or error (the "
      "previous files stay in use).",
      kCounter);
  reloads.metric.push_back(Sample({{"result", "ok"}}, kCounter, static_cast<double>(s.reloads)));
  reloads.metric.push_back(
      Sample({{"result", "error"}}, kCounter, static_cast<double>(s.reload_failures)));
  std::vector<prometheus::MetricFamily> families;
  families.push_back(std::move(insecure));
  families.push_back(std::move(reloads));
  return families;
}

std::vector<prometheus::MetricFamily> ApiTlsCollectable::Collect() const {
  const ApiTlsSample s = sample_();
  constexpr auto kCounter = prometheus::MetricType::Counter;
  constexpr auto kGauge = prometheus::MetricType::Gauge;
  std::vector<prometheus::MetricFamily> families;
  if (s.enabled && s.certificate_expiry_unix_seconds.has_value()) {
    prometheus::MetricFamily expiry = MakeFamily(
        kApiCertExpiry,
        "When the API's serving certificate (--api-tls-cert-file, as the next handshake presents "
        "it) expires, in Unix seconds.",
        kGauge);
    expiry.metric.push_back(Sample({}, kGauge, *s.certificate_expiry_unix_seconds));
    families.push_back(std::move(expiry));
  }
  prometheus::MetricFamily failures = MakeFamily(
      kApiHandshakeFailures,
      "TLS handshakes of the API listener that failed (plaintext callers, client certificates "
      "missing, untrusted or expired, no common protocol version or cipher).",
      kCounter);
  failures.metric.push_back(Sample({}, kCounter, static_cast<double>(s.handshake_failures)));
  families.push_back(std::move(failures));
  return families;
}

std::vector<std::string> Metrics::MetricNames() {
  std::vector<std::string> names = {
      kIngestRequests,
      kIngestRows,
      kBatchesFlushed,
      kFlushDuration,
      kBatchRows,
      kBatchSize,
      kCommitLatency,
      kBufferedRows,
      kBufferedBytes,
      kBufferBudget,
      kFlushRetries,
      kFlushErrors,
      kWaitingRequests,
      kMemoryBudget,
      kMemoryRequests,
      kMemoryRefusals,
      kQueries,
      kQueryRows,
      kQueryResponseBytes,
      kQueryDuration,
      kQueriesInFlight,
      kReceivedBytes,
      kDecodedBytes,
      kSentBytes,
      kPoolConnections,
      kPoolConnects,
      kPoolConnectFailures,
      kPoolClosed,
      kClickHouseUp,
      kClickHouseLastSuccess,
      kTlsInsecure,
      kTlsReloads,
      kAuthFailures,
      kAuthReloads,
      kBuildInfo,
      kRowsDropped,
      kBatchesFailed,
      kBatchMaxDelay,
      kProcessCpu,
      kSpoolDeadLetterRows,
      kSpoolReplayed,
      kSpoolBytes,
      kSpoolMaxBytes,
      kSpoolSegments,
      kSpoolPending,
      kSpoolOldestAge,
      kSpoolFreeBytes,
      kSpoolAppends,
      kSpoolAppendedBytes,
      kSpoolRefusals,
      kSpoolFsyncs,
      kSpoolFsyncSeconds,
      kSpoolQuarantined,
      kSpoolSetAside,
      kDedupWindow,
      kProcessResident,
      kProcessVirtual,
      kProcessStart,
      kProcessOpenFds,
      kProcessMaxFds,
      kApiCertExpiry,
      kApiHandshakeFailures,
  };
  return names;
}

std::string_view FlushReasonLabel(ingest::FlushReason reason) {
  switch (reason) {
    case ingest::FlushReason::kRows:
      return kFlushRows;
    case ingest::FlushReason::kBytes:
      return kFlushBytes;
    case ingest::FlushReason::kAge:
      return kFlushAge;
    case ingest::FlushReason::kDeadline:
      return kFlushDeadline;
    case ingest::FlushReason::kShutdown:
      return kFlushShutdown;
    case ingest::FlushReason::kReplay:
      return kFlushReplay;
  }
  return kFlushRows;
}

void IngestMetricsObserver::Budgets(uint64_t memory_budget_bytes, uint64_t buffer_budget_bytes) {
  m_->memory_budget_bytes->Set(static_cast<double>(memory_budget_bytes));
  m_->SetBufferBudgetBytes(buffer_budget_bytes);
}

void IngestMetricsObserver::TableStarted(const std::string& table, absl::Duration max_delay) {
  m_->TableStarted(table, absl::ToDoubleSeconds(max_delay));
}

void IngestMetricsObserver::RequestDone(const std::string& table, const absl::Status& status,
                                        ingest::AckMode acked, uint64_t rows) {
  std::string_view result = ResultLabel(status.code());
  if (status.ok()) {
    result = acked == ingest::AckMode::kCommitted   ? kResultOk
             : acked == ingest::AckMode::kPersisted ? kResultPersisted
                                                    : kResultAccepted;
  }
  m_->RequestDone(table, result, rows);
}

void IngestMetricsObserver::CommitLatency(const std::string& table, absl::Duration latency) {
  m_->CommitLatency(table, absl::ToDoubleSeconds(latency));
}

void IngestMetricsObserver::MemoryRefused() { m_->memory_refusals->Increment(); }

void IngestMetricsObserver::BatchFlushed(const std::string& table, ingest::FlushReason reason,
                                         uint64_t rows, uint64_t bytes, absl::Duration took) {
  m_->BatchFlushed(table, FlushReasonLabel(reason), rows, bytes, absl::ToDoubleSeconds(took));
}

void IngestMetricsObserver::FlushRetry(const std::string& table) { m_->FlushRetry(table); }

void IngestMetricsObserver::FlushFailed(const std::string& table, const absl::Status& status,
                                        std::optional<int32_t> clickhouse_code) {
  m_->FlushError(table, clickhouse_code.has_value() ? ClickHouseCodeLabel(*clickhouse_code)
                                                    : StatusCodeLabel(status.code()));
}

void IngestMetricsObserver::RowsDropped(const std::string& table, ingest::DropReason reason,
                                        uint64_t rows) {
  const IngestTableMetrics& t = m_->ForTable(table);
  const double n = static_cast<double>(rows);
  switch (reason) {
    case ingest::DropReason::kShutdown:
      return t.rows_dropped_shutdown->Increment(n);
    case ingest::DropReason::kAcceptedFlushFailed:
      return t.rows_dropped_accepted->Increment(n);
    case ingest::DropReason::kSpoolDamaged:
      return t.rows_dropped_spool_damaged->Increment(n);
    case ingest::DropReason::kSpoolDeadLetter:
      return t.spool_dead_letter_rows->Increment(n);
  }
}

void IngestMetricsObserver::SpoolReplayed(uint64_t records) {
  m_->spool_replayed_records->Increment(static_cast<double>(records));
}

std::vector<prometheus::MetricFamily> SpoolCollectable::Collect() const {
  const SpoolSample s = sample_();
  constexpr auto kCounter = prometheus::MetricType::Counter;
  constexpr auto kGauge = prometheus::MetricType::Gauge;
  std::vector<prometheus::MetricFamily> families;
  auto add = [&](const char* name, const char* help, prometheus::MetricType type, double value) {
    prometheus::MetricFamily f = MakeFamily(name, help, type);
    f.metric.push_back(Sample({}, type, value));
    families.push_back(std::move(f));
  };
  auto d = [](uint64_t v) { return static_cast<double>(v); };
  add(kSpoolBytes, "Bytes of the spool's segment files.", kGauge, d(s.bytes));
  add(kSpoolMaxBytes, "The spool's bound (--spool-max-bytes).", kGauge, d(s.max_bytes));
  add(kSpoolSegments, "Segment files in the spool.", kGauge, d(s.segments));
  add(kSpoolPending, "Persisted records not yet committed in ClickHouse.", kGauge,
      d(s.pending_records));
  add(kSpoolOldestAge,
      "Age of the oldest persisted record not yet committed in ClickHouse (0: none).", kGauge,
      s.oldest_pending_age_seconds);
  add(kSpoolFreeBytes, "Free bytes of the spool's file system, as last checked.", kGauge,
      d(s.free_bytes));
  add(kSpoolAppends, "Records made durable in the spool.", kCounter, d(s.appends));
  add(kSpoolAppendedBytes, "Bytes of the records made durable in the spool.", kCounter,
      d(s.appended_bytes));
  add(kSpoolRefusals,
      "Appends refused at once: the spool at --spool-max-bytes, or its disk low on space.",
      kCounter, d(s.refusals));
  add(kSpoolFsyncs, "fdatasync calls of the spool (one per group commit).", kCounter, d(s.fsyncs));
  add(kSpoolFsyncSeconds, "Time spent in the spool's fdatasync calls.", kCounter, s.fsync_seconds);
  add(kSpoolQuarantined, "Corrupt spool bytes moved aside at start (<segment>.corrupt files).",
      kCounter, d(s.quarantined_bytes));
  add(kSpoolSetAside,
      "Bytes of dead-letter and quarantined (*.corrupt) files beside the spool; they count "
      "against --spool-max-bytes.",
      kGauge, d(s.set_aside_bytes));
  return families;
}

void IngestMetricsObserver::DedupWindowCovers(const std::string& table, double seconds) {
  m_->dedup_window->Add({{"table", table}}).Set(seconds);
}

void IngestMetricsObserver::DelayChanged(const std::string& table, absl::Duration delay) {
  m_->batch_max_delay->Add({{"table", table}}).Set(absl::ToDoubleSeconds(delay));
}

void IngestMetricsObserver::Buffered(uint64_t rows, uint64_t bytes) {
  m_->SetBuffered(rows, bytes);
}

void IngestMetricsObserver::WaitingRequests(size_t requests) {
  m_->waiting_requests->Set(static_cast<double>(requests));
}

void IngestMetricsObserver::RequestBytes(uint64_t bytes) {
  m_->memory_request_bytes->Set(static_cast<double>(bytes));
}

}  // namespace chgate::metrics
