#include "server/metrics/metrics.h"

#include <exception>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/client_metric.h"
#include "prometheus/metric_type.h"
#include "prometheus/text_serializer.h"
#include "server/metrics/families.h"
#include "text/status_macros.h"

namespace chgate::metrics {

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
  // table -> result -> {requests, request_rows}; looked up by string_view, so a request's count
  // allocates nothing once its pair of labels has been seen.
  absl::flat_hash_map<
      std::string,
      absl::flat_hash_map<std::string, std::pair<prometheus::Counter*, prometheus::Counter*>>>
      requests ABSL_GUARDED_BY(mu);
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
  std::pair<prometheus::Counter*, prometheus::Counter*> counters;
  {
    absl::MutexLock lock(&cache->mu);
    auto by_table = cache->requests.find(label);
    if (by_table == cache->requests.end()) by_table = cache->requests.try_emplace(label).first;
    auto slot = by_table->second.find(absl::string_view(result.data(), result.size()));
    if (slot == by_table->second.end()) {
      const prometheus::Labels labels = {{"table", label}, {"result", std::string(result)}};
      slot =
          by_table->second
              .try_emplace(std::string(result), &requests->Add(labels), &request_rows->Add(labels))
              .first;
    }
    counters = slot->second;
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

namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

// Requests, batches and the buffer.
void RegisterIngest(prometheus::Registry& r, IngestMetrics* ingest) {
  ingest->cache = std::make_shared<IngestMetricsCache>();
  ingest->requests = &Build(BuildCounter(), r, kIngestRequests,
                            "Insert requests finished, by table and result (accepted = "
                            "acknowledged once buffered, in accepted ack mode).");
  ingest->request_rows = &Build(BuildCounter(), r, kIngestRows,
                                "Rows in finished insert requests, by table and result.");
  ingest->batches_flushed =
      &Build(BuildCounter(), r, kBatchesFlushed,
             "Batch flushes, by table and trigger; failed ones count here too (and in "
             "chgate_flush_errors_total).");
  ingest->flush_duration =
      &Build(BuildHistogram(), r, kFlushDuration,
             "Time to commit a batch to ClickHouse, from the start of the flush to EndOfStream, "
             "retries included.");
  ingest->batch_rows = &Build(BuildHistogram(), r, kBatchRows, "Rows per committed batch.");
  ingest->batch_size =
      &Build(BuildHistogram(), r, kBatchSize, "Buffered size of each committed batch.");
  ingest->commit_latency = &Build(BuildHistogram(), r, kCommitLatency,
                                  "Time from receiving an insert request to the commit of its "
                                  "rows in ClickHouse.");
  ingest->buffered_rows =
      &Build(BuildGauge(), r, kBufferedRows, "Rows buffered and not yet committed, all tables.")
           .Add({});
  ingest->buffered_bytes =
      &Build(BuildGauge(), r, kBufferedBytes, "Bytes buffered and not yet committed, all tables.")
           .Add({});
  ingest->buffer_budget_bytes =
      &Build(BuildGauge(), r, kBufferBudget,
             "The most bytes of rows batches hold, all tables (the --memory-budget's share for "
             "the buffer).")
           .Add({});
  ingest->memory_budget_bytes =
      &Build(BuildGauge(), r, kMemoryBudget,
             "--memory-budget: the most bytes insert requests hold from arrival to commit (the "
             "buffer included).")
           .Add({});
  ingest->memory_request_bytes =
      &Build(BuildGauge(), r, kMemoryRequests,
             "Bytes held by insert requests not yet in a batch: received, being converted, or "
             "waiting for room in the buffer.")
           .Add({});
  ingest->memory_refusals =
      &Build(BuildCounter(), r, kMemoryRefusals,
             "Insert requests refused at arrival with RESOURCE_EXHAUSTED because the memory "
             "budget was full.")
           .Add({});
}

// Flush failures, losses and the spool's replays.
void RegisterIngestFailures(prometheus::Registry& r, IngestMetrics* ingest) {
  ingest->flush_retries =
      &Build(BuildCounter(), r, kFlushRetries, "Flush attempts retried after a transient error.");
  ingest->flush_errors = &Build(
      BuildCounter(), r, kFlushErrors,
      "Failed flush attempts, by table and code: the ClickHouse error code, or the status code "
      "name (e.g. UNAVAILABLE) when the failure did not come from ClickHouse.");
  ingest->batches_failed =
      &Build(BuildCounter(), r, kBatchesFailed,
             "Batches that failed for good (after their retries), by table; 0 from the table's "
             "first batch on. chgate_flush_errors_total names their codes.");
  ingest->batch_max_delay =
      &Build(BuildGauge(), r, kBatchMaxDelay,
             "The table's configured batch delay (--batch-max-delay, or its --table-limits "
             "delay): the longest a row waits before its batch is flushed.");
  ingest->dedup_window = &Build(
      BuildGauge(), r, kDedupWindow,
      "How many seconds of a Replicated table's INSERTs (from every writer) its block "
      "deduplication window covers (replicated_deduplication_window at the table's INSERT rate, "
      "at most replicated_deduplication_window_seconds); +Inf when the rate is unknown. A "
      "persisted batch sent again after a crash later than this may be stored twice.");
  ingest->rows_dropped = &Build(
      BuildCounter(), r, kRowsDropped,
      "Rows chgate lost: accepted_flush_failed = acknowledged in accepted mode, then their flush "
      "failed for good; shutdown = still buffered when the drain ended; spool_damaged = "
      "persisted, then unreadable in the spool.");
  ingest->spool_dead_letter_rows =
      &Build(BuildCounter(), r, kSpoolDeadLetterRows,
             "Persisted rows ClickHouse refused for good, moved to the spool's dead-letter "
             "directory instead of the table.");
  ingest->spool_replayed_records =
      &Build(BuildCounter(), r, kSpoolReplayed,
             "Records of persisted requests found in the spool at start and sent again.")
           .Add({});
  ingest->waiting_requests =
      &Build(BuildGauge(), r, kWaitingRequests, "Insert requests waiting for buffer budget.")
           .Add({});
}

void RegisterQuery(prometheus::Registry& r, QueryMetrics* query) {
  query->queries =
      &Build(BuildCounter(), r, kQueries, "Query RPCs finished or refused, by result.");
  // Every result exists from the start at 0, so rate() and increase() see the first failure.
  for (std::string_view result :
       {kResultOk, kResultInvalid, kResultNotFound, kResultPermissionDenied,
        kResultResourceExhausted, kResultDeadlineExceeded, kResultCancelled, kResultUnavailable,
        kResultUnimplemented, kResultError}) {
    query->queries->Add({{"result", std::string(result)}});
  }
  query->rows = &Build(BuildCounter(), r, kQueryRows, "Rows streamed to Query callers.").Add({});
  query->response_bytes = &Build(BuildCounter(), r, kQueryResponseBytes,
                                 "Bytes of Query response messages handed to gRPC.")
                               .Add({});
  query->duration = &Build(BuildHistogram(), r, kQueryDuration,
                           "Duration of Query RPCs, from admission to the end of the stream.")
                         .Add({}, kQueryDurationBuckets);
  query->in_flight = &Build(BuildGauge(), r, kQueriesInFlight, "Query RPCs running now.").Add({});
}

void RegisterAuth(prometheus::Registry& r, AuthMetrics* auth) {
  auth->failures = &Build(BuildCounter(), r, kAuthFailures,
                          "API calls or insert requests refused by authentication or the policy, "
                          "by reason.");
  for (const char* reason : kAuthFailureReasons) auth->failures->Add({{"reason", reason}});
  auth->reloads = &Build(BuildCounter(), r, kAuthReloads,
                         "Reloads of the API tokens and policy files after a change, by file and "
                         "result (error: the previous content stays in force).");
  // Every series from the start at 0, so rate() and alerts see the first failed reload.
  for (const char* file : {"tokens", "policy"}) {
    for (const char* result : {"ok", "error"}) {
      auth->reloads->Add({{"file", file}, {"result", result}});
    }
  }
}

}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      collector_(std::make_shared<Collector>(registry_)) {
  RegisterIngest(*registry_, &ingest_);
  RegisterIngestFailures(*registry_, &ingest_);
  RegisterQuery(*registry_, &query_);
  RegisterAuth(*registry_, &auth_);
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

}  // namespace chgate::metrics
