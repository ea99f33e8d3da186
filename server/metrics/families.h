// What the files of server/metrics share: every family's name, the histogram buckets, and the
// helpers that register a family or build one at scrape time. Internal to this module.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "prometheus/client_metric.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"
#include "prometheus/registry.h"

namespace chgate::metrics {

// Ingest.
inline constexpr char kIngestRequests[] = "chgate_ingest_requests_total";
inline constexpr char kIngestRows[] = "chgate_ingest_rows_total";
inline constexpr char kBatchesFlushed[] = "chgate_batches_flushed_total";
inline constexpr char kFlushDuration[] = "chgate_flush_duration_seconds";
inline constexpr char kBatchRows[] = "chgate_batch_rows";
inline constexpr char kBatchSize[] = "chgate_batch_size_bytes";
inline constexpr char kCommitLatency[] = "chgate_request_commit_latency_seconds";
inline constexpr char kBufferedRows[] = "chgate_buffered_rows";
inline constexpr char kBufferedBytes[] = "chgate_buffered_bytes";
inline constexpr char kBufferBudget[] = "chgate_buffer_budget_bytes";
inline constexpr char kFlushRetries[] = "chgate_flush_retries_total";
inline constexpr char kFlushErrors[] = "chgate_flush_errors_total";
inline constexpr char kRowsDropped[] = "chgate_rows_dropped_total";
inline constexpr char kSpoolDeadLetterRows[] = "chgate_spool_dead_letter_rows_total";
inline constexpr char kSpoolReplayed[] = "chgate_spool_replayed_records_total";
inline constexpr char kSpoolBytes[] = "chgate_spool_bytes";
inline constexpr char kSpoolMaxBytes[] = "chgate_spool_max_bytes";
inline constexpr char kSpoolSegments[] = "chgate_spool_segments";
inline constexpr char kSpoolPending[] = "chgate_spool_pending_records";
inline constexpr char kSpoolOldestAge[] = "chgate_spool_oldest_pending_age_seconds";
inline constexpr char kSpoolFreeBytes[] = "chgate_spool_free_bytes";
inline constexpr char kSpoolAppends[] = "chgate_spool_appends_total";
inline constexpr char kSpoolAppendedBytes[] = "chgate_spool_appended_bytes_total";
inline constexpr char kSpoolRefusals[] = "chgate_spool_refusals_total";
inline constexpr char kSpoolFsyncs[] = "chgate_spool_fsyncs_total";
inline constexpr char kSpoolFsyncSeconds[] = "chgate_spool_fsync_seconds_total";
inline constexpr char kSpoolQuarantined[] = "chgate_spool_quarantined_bytes_total";
inline constexpr char kSpoolSetAside[] = "chgate_spool_set_aside_bytes";
inline constexpr char kBatchesFailed[] = "chgate_batches_failed_total";
inline constexpr char kBatchMaxDelay[] = "chgate_batch_max_delay_seconds";
inline constexpr char kDedupWindow[] = "chgate_dedup_window_seconds";
inline constexpr char kWaitingRequests[] = "chgate_ingest_waiting_requests";
inline constexpr char kMemoryBudget[] = "chgate_memory_budget_bytes";
inline constexpr char kMemoryRequests[] = "chgate_memory_request_bytes";
inline constexpr char kMemoryRefusals[] = "chgate_memory_refusals_total";
// Query.
inline constexpr char kQueries[] = "chgate_queries_total";
inline constexpr char kQueryRows[] = "chgate_query_rows_total";
inline constexpr char kQueryResponseBytes[] = "chgate_query_response_bytes_total";
inline constexpr char kQueryDuration[] = "chgate_query_duration_seconds";
inline constexpr char kQueriesInFlight[] = "chgate_queries_in_flight";
// API authentication and authorization.
inline constexpr char kAuthFailures[] = "chgate_api_auth_failures_total";
inline constexpr char kAuthReloads[] = "chgate_api_auth_reloads_total";
// Reasons of kAuthFailures (auth::DenyReasonLabel), exported from the start.
inline constexpr const char* kAuthFailureReasons[] = {"no_credentials",   "bad_token",
                                                      "unknown_identity", "insert_denied",
                                                      "ack_denied",       "query_denied"};
// ClickHouse I/O (ByteCountersCollectable).
inline constexpr char kReceivedBytes[] = "chgate_clickhouse_received_bytes_total";
inline constexpr char kDecodedBytes[] = "chgate_clickhouse_decoded_bytes_total";
inline constexpr char kSentBytes[] = "chgate_clickhouse_sent_bytes_total";
// Pool (PoolCollectable).
inline constexpr char kPoolConnections[] = "chgate_pool_connections";
inline constexpr char kPoolConnects[] = "chgate_pool_connects_total";
inline constexpr char kPoolConnectFailures[] = "chgate_pool_connect_failures_total";
inline constexpr char kPoolClosed[] = "chgate_pool_connections_closed_total";
inline constexpr char kClickHouseUp[] = "chgate_clickhouse_up";
inline constexpr char kClickHouseLastSuccess[] = "chgate_clickhouse_last_success_timestamp_seconds";
inline constexpr char kBuildInfo[] = "chgate_build_info";
inline constexpr char kTlsInsecure[] = "chgate_clickhouse_tls_insecure_skip_verify";
inline constexpr char kTlsReloads[] = "chgate_clickhouse_tls_reloads_total";
// The API listener's TLS (ApiTlsCollectable).
inline constexpr char kApiCertExpiry[] = "chgate_api_tls_certificate_expiry_timestamp_seconds";
inline constexpr char kApiHandshakeFailures[] = "chgate_api_tls_handshake_failures_total";
// The process, under the names every Prometheus client library uses (so standard dashboards and
// the bench scripts find them); read from /proc at scrape time.
inline constexpr char kProcessCpu[] = "process_cpu_seconds_total";
inline constexpr char kProcessResident[] = "process_resident_memory_bytes";
inline constexpr char kProcessVirtual[] = "process_virtual_memory_bytes";
inline constexpr char kProcessStart[] = "process_start_time_seconds";
inline constexpr char kProcessOpenFds[] = "process_open_fds";
inline constexpr char kProcessMaxFds[] = "process_max_fds";

// 1-2-5 steps (about x2.2 each) from 1 ms to 60 s: readable `le` values.
inline const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 60};
// Queries may legitimately run for minutes.
inline const prometheus::Histogram::BucketBoundaries kQueryDurationBuckets = {
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 60, 120, 300};

// x4 from 1 row to 16Mi rows (past the 10M a batch could plausibly hold).
inline const prometheus::Histogram::BucketBoundaries kBatchRowsBuckets = {
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216};
// x4 from 1 KiB to 256 MiB.
inline const prometheus::Histogram::BucketBoundaries kBatchSizeBuckets = {
    1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864, 268435456};

template <typename T>
prometheus::Family<T>& Build(prometheus::detail::Builder<T> builder, prometheus::Registry& registry,
                             const char* name, const char* help) {
  return builder.Name(name).Help(help).Register(registry);
}

inline prometheus::MetricFamily MakeFamily(const char* name, const char* help,
                                           prometheus::MetricType type) {
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  return family;
}

inline prometheus::ClientMetric Sample(std::vector<prometheus::ClientMetric::Label> labels,
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
// than exported as a wrong value (collectables.cc).
std::vector<prometheus::MetricFamily> CollectProcess();

}  // namespace chgate::metrics
