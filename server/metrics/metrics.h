// chgate's Prometheus metrics: every family the binary exports is declared here, created in one
// place (the Metrics constructor) and handed to the components as plain structs of pointers.
// Metrics owns the registry; the families live as long as it does. Every method is thread-safe.
// Of other modules it includes only the observer interfaces it implements (ingest/observer.h,
// service/observers.h) and links none: the native layer's counters and pool statistics come in
// through ByteCountersCollectable and PoolCollectable, which read them at scrape time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "server/ingest/observer.h"
#include "server/metrics/http_server.h"
#include "server/service/observers.h"

namespace chgate::metrics {

// Values of the `result` label of chgate_ingest_requests_total, chgate_ingest_rows_total and
// chgate_queries_total. kAccepted counts requests acknowledged in `accepted` mode (buffered, not
// yet committed); their commit is not counted again.
inline constexpr std::string_view kResultOk = "ok";
inline constexpr std::string_view kResultInvalid = "invalid";
inline constexpr std::string_view kResultNotFound = "not_found";
inline constexpr std::string_view kResultResourceExhausted = "resource_exhausted";
inline constexpr std::string_view kResultUnavailable = "unavailable";
inline constexpr std::string_view kResultDeadlineExceeded = "deadline_exceeded";
inline constexpr std::string_view kResultCancelled = "cancelled";
inline constexpr std::string_view kResultPermissionDenied = "permission_denied";
inline constexpr std::string_view kResultUnimplemented = "unimplemented";
inline constexpr std::string_view kResultError = "error";
inline constexpr std::string_view kResultAccepted = "accepted";
// Requests acknowledged in `persisted` mode (durable in the spool, not yet committed).
inline constexpr std::string_view kResultPersisted = "persisted";

// Returns the `result` label for a final status: ok, invalid (INVALID_ARGUMENT), not_found,
// resource_exhausted, unavailable, deadline_exceeded, cancelled, and error for every other code.
std::string_view ResultLabel(absl::StatusCode code);

// Values of the `reason` label of chgate_batches_flushed_total.
inline constexpr std::string_view kFlushRows = "rows";          // max_rows reached
inline constexpr std::string_view kFlushBytes = "bytes";        // max_bytes reached
inline constexpr std::string_view kFlushAge = "age";            // oldest row is max_delay old
inline constexpr std::string_view kFlushDeadline = "deadline";  // a waiting caller's deadline
inline constexpr std::string_view kFlushShutdown = "shutdown";  // drain on SIGTERM
inline constexpr std::string_view kFlushReplay = "replay";      // re-sent from the spool at start

// The `code` label of chgate_flush_errors_total. Returns the ClickHouse error code as decimal
// text (e.g. "252" for TOO_MANY_PARTS).
std::string ClickHouseCodeLabel(int32_t clickhouse_code);
// Returns the status code's canonical name (e.g. "UNAVAILABLE", "DEADLINE_EXCEEDED"), for
// failures that did not come from a ClickHouse exception.
std::string StatusCodeLabel(absl::StatusCode code);

// Per-table handles, resolved once (IngestMetrics::ForTable) so that the per-request and per-batch
// paths do no label lookups for the histograms. Copyable; valid while the Metrics lives.
struct IngestTableMetrics {
  prometheus::Histogram* flush_duration = nullptr;  // chgate_flush_duration_seconds
  prometheus::Histogram* batch_rows = nullptr;      // chgate_batch_rows
  prometheus::Histogram* batch_size = nullptr;      // chgate_batch_size_bytes
  prometheus::Histogram* commit_latency = nullptr;  // chgate_request_commit_latency_seconds
  prometheus::Counter* flush_retries = nullptr;     // chgate_flush_retries_total
  prometheus::Family<prometheus::Counter>* batches_flushed = nullptr;  // {table, reason}
  prometheus::Family<prometheus::Counter>* flush_errors = nullptr;     // {table, code}
  prometheus::Counter* batches_failed = nullptr;         // chgate_batches_failed_total{table}
  prometheus::Counter* rows_dropped_accepted = nullptr;  // {table, reason="accepted_flush_failed"}
  prometheus::Counter* rows_dropped_shutdown = nullptr;  // {table, reason="shutdown"}
  prometheus::Counter* rows_dropped_spool_damaged = nullptr;  // {table, reason="spool_damaged"}
  prometheus::Counter* spool_dead_letter_rows = nullptr;      // chgate_spool_dead_letter_rows_total
  std::string table;

  // A batch was committed: counts it under `reason` (kFlush*) and observes its rows, bytes and
  // the duration of the INSERT (including retries).
  void BatchFlushed(std::string_view reason, uint64_t rows, uint64_t bytes, double seconds) const;
  // A request's rows were committed `seconds` after the request was received.
  void CommitLatency(double seconds) const { commit_latency->Observe(seconds); }
  // A flush attempt failed and will be retried.
  void FlushRetry() const { flush_retries->Increment(); }
  // A batch failed for good (after its retries) with `code` (ClickHouseCodeLabel or
  // StatusCodeLabel): counts it in chgate_flush_errors_total{code} and
  // chgate_batches_failed_total.
  void FlushError(std::string_view code) const;
  // Rows lost without their caller learning it: acknowledged in accepted mode, then their flush
  // failed for good.
  void AcceptedRowsDropped(uint64_t rows) const {
    rows_dropped_accepted->Increment(static_cast<double>(rows));
  }
  // Rows still buffered when the shutdown drain ended.
  void ShutdownRowsDropped(uint64_t rows) const {
    rows_dropped_shutdown->Increment(static_cast<double>(rows));
  }
};

// Per-table handles and per-(table, result) request counters, resolved once and kept (metrics.cc):
// prometheus-cpp's Family::Add builds a label map and takes the family's lock on every call.
struct IngestMetricsCache;

// The ingest path's metrics (batcher and gRPC handlers). A plain struct: the pointers are set by
// Metrics and stay valid while it lives. `table` labels must name a table the gateway knows (its
// header was resolved); names sent by clients for tables that do not exist never become label
// values (RequestDone records them under table="").
struct IngestMetrics {
  prometheus::Family<prometheus::Counter>* requests = nullptr;          // {table, result}
  prometheus::Family<prometheus::Counter>* request_rows = nullptr;      // {table, result}
  prometheus::Family<prometheus::Counter>* batches_flushed = nullptr;   // {table, reason}
  prometheus::Family<prometheus::Histogram>* flush_duration = nullptr;  // {table}
  prometheus::Family<prometheus::Histogram>* batch_rows = nullptr;      // {table}
  prometheus::Family<prometheus::Histogram>* batch_size = nullptr;      // {table}
  prometheus::Family<prometheus::Histogram>* commit_latency = nullptr;  // {table}
  prometheus::Family<prometheus::Counter>* flush_retries = nullptr;     // {table}
  prometheus::Family<prometheus::Counter>* flush_errors = nullptr;      // {table, code}
  prometheus::Family<prometheus::Counter>* rows_dropped = nullptr;      // {table, reason}
  prometheus::Family<prometheus::Counter>* batches_failed = nullptr;    // {table}
  prometheus::Family<prometheus::Gauge>* batch_max_delay = nullptr;     // {table}
  prometheus::Family<prometheus::Gauge>* dedup_window = nullptr;        // {table}
  prometheus::Gauge* buffered_rows = nullptr;
  prometheus::Gauge* buffered_bytes = nullptr;
  prometheus::Gauge* buffer_budget_bytes = nullptr;
  prometheus::Gauge* waiting_requests = nullptr;
  prometheus::Gauge* memory_budget_bytes = nullptr;
  prometheus::Gauge* memory_request_bytes = nullptr;
  prometheus::Counter* memory_refusals = nullptr;
  prometheus::Family<prometheus::Counter>* spool_dead_letter_rows = nullptr;  // {table}
  prometheus::Counter* spool_replayed_records = nullptr;
  // Resolved handles, shared by copies of this struct.
  std::shared_ptr<IngestMetricsCache> cache;

  // Returns the handles for `table`, creating its series on first use: the rows-dropped,
  // batches-failed and batches-flushed (every reason) counters at 0, so the first failure or loss
  // is an increase alerts see. Later calls for the table are one lookup in a small cache.
  const IngestTableMetrics& ForTable(const std::string& table) const;
  // The table's first batch was made: creates its series (ForTable) and exports its configured
  // --batch-max-delay (or its --table-limits delay) as chgate_batch_max_delay_seconds{table}, the
  // yardstick of the commit latency alert.
  void TableStarted(const std::string& table, double max_delay_seconds) const;

  // A request finished with `result` (kResult* / ResultLabel); counts it and its `rows`.
  void RequestDone(const std::string& table, std::string_view result, uint64_t rows) const;
  // Same as ForTable(table).BatchFlushed(...), .CommitLatency(...), .FlushRetry(), .FlushError().
  void BatchFlushed(const std::string& table, std::string_view reason, uint64_t rows,
                    uint64_t bytes, double seconds) const {
    ForTable(table).BatchFlushed(reason, rows, bytes, seconds);
  }
  void CommitLatency(const std::string& table, double seconds) const {
    ForTable(table).CommitLatency(seconds);
  }
  void FlushRetry(const std::string& table) const { ForTable(table).FlushRetry(); }
  void FlushError(const std::string& table, std::string_view code) const {
    ForTable(table).FlushError(code);
  }

  // Totals over every table, set by whoever owns the buffers (absolute, or as deltas).
  void SetBuffered(uint64_t rows, uint64_t bytes) const {
    buffered_rows->Set(static_cast<double>(rows));
    buffered_bytes->Set(static_cast<double>(bytes));
  }
  void AddBuffered(int64_t rows, int64_t bytes) const {
    buffered_rows->Increment(static_cast<double>(rows));
    buffered_bytes->Increment(static_cast<double>(bytes));
  }
  void SetBufferBudgetBytes(uint64_t bytes) const {
    buffer_budget_bytes->Set(static_cast<double>(bytes));
  }
  // A request is parked waiting for buffer budget, or leaves the wait (admitted or failed).
  void RequestParked() const { waiting_requests->Increment(); }
  void RequestUnparked() const { waiting_requests->Decrement(); }
};

// The Ingestor's reports (ingest::IngestObserver) as IngestMetrics series: the labels (result,
// reason, code) are made here, the same way for every path.
class IngestMetricsObserver final : public ingest::IngestObserver {
 public:
  // `metrics` must outlive the observer.
  explicit IngestMetricsObserver(const IngestMetrics* metrics) : m_(metrics) {}

  void Budgets(uint64_t memory_budget_bytes, uint64_t buffer_budget_bytes) override;
  void TableStarted(const std::string& table, absl::Duration max_delay) override;
  void RequestDone(const std::string& table, const absl::Status& status, ingest::AckMode acked,
                   uint64_t rows) override;
  void CommitLatency(const std::string& table, absl::Duration latency) override;
  void MemoryRefused() override;
  void BatchFlushed(const std::string& table, ingest::FlushReason reason, uint64_t rows,
                    uint64_t bytes, absl::Duration took) override;
  void FlushRetry(const std::string& table) override;
  void FlushFailed(const std::string& table, const absl::Status& status,
                   std::optional<int32_t> clickhouse_code) override;
  void RowsDropped(const std::string& table, ingest::DropReason reason, uint64_t rows) override;
  void DelayChanged(const std::string& table, absl::Duration delay) override;
  void Buffered(uint64_t rows, uint64_t bytes) override;
  void WaitingRequests(size_t requests) override;
  void RequestBytes(uint64_t bytes) override;
  void SpoolReplayed(uint64_t records) override;
  void DedupWindowCovers(const std::string& table, double seconds) override;

 private:
  const IngestMetrics* const m_;
};

// The `reason` label of chgate_batches_flushed_total (kFlush*).
std::string_view FlushReasonLabel(ingest::FlushReason reason);

// The Query RPC's metrics.
struct QueryMetrics {
  prometheus::Family<prometheus::Counter>* queries = nullptr;  // {result}
  prometheus::Counter* rows = nullptr;
  prometheus::Counter* response_bytes = nullptr;
  prometheus::Histogram* duration = nullptr;
  prometheus::Gauge* in_flight = nullptr;

  // A query was admitted (it counts as in flight until QueryFinished).
  void QueryStarted() const { in_flight->Increment(); }
  // `rows` rows in `bytes` bytes of response messages were handed to gRPC; call as they go out
  // so that long queries show progress.
  void Streamed(uint64_t rows_streamed, uint64_t bytes) const {
    rows->Increment(static_cast<double>(rows_streamed));
    response_bytes->Increment(static_cast<double>(bytes));
  }
  // The query started with QueryStarted ended with `result` after `seconds`.
  void QueryFinished(std::string_view result, double seconds) const;
  // A query refused before it started (e.g. too many queries, read-only): counted, not timed.
  void QueryRefused(std::string_view result) const;
};

// The API's authentication and authorization (server/auth, server/service/api_security.h).
struct AuthMetrics {
  prometheus::Family<prometheus::Counter>* failures = nullptr;  // {reason}
  prometheus::Family<prometheus::Counter>* reloads = nullptr;   // {file, result}

  // A call or request was refused; `reason` is auth::DenyReasonLabel (e.g. "bad_token").
  void Failure(std::string_view reason) const;
  // A changed tokens or policy file (`file` = "tokens" | "policy") was reloaded, or kept its
  // previous content because the new one did not load (`ok` false).
  void Reloaded(std::string_view file, bool ok) const;
};

// Bytes moved to and from ClickHouse, read at scrape time from counters the native layer keeps as
// plain atomics (relaxed loads). The atomics must outlive this object.
// Exports chgate_clickhouse_{received,decoded,sent}_bytes_total.
class ByteCountersCollectable : public prometheus::Collectable {
 public:
  // All three pointers must be non-null.
  ByteCountersCollectable(const std::atomic<uint64_t>* received,
                          const std::atomic<uint64_t>* decoded, const std::atomic<uint64_t>* sent);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::atomic<uint64_t>* received_;
  const std::atomic<uint64_t>* decoded_;
  const std::atomic<uint64_t>* sent_;
};

// One ClickHouse endpoint of the connection pool, as seen at scrape time. The caller converts the
// pool's own statistics into this.
struct PoolEndpointSample {
  std::string endpoint;  // "host:port"
  uint64_t idle = 0;
  uint64_t in_use = 0;
  uint64_t connects = 0;
  uint64_t connect_failures = 0;
  uint64_t discarded_broken = 0;  // closed after an error
  uint64_t closed_expired = 0;    // closed for lifetime or idleness
  bool healthy = false;
  double last_success_unix_seconds = 0;  // of a connect or probe; 0: never
};

// The pool's state, sampled at scrape time through `sample` (called on the exposer's thread; it
// must be thread-safe and must not block for long). Exports chgate_pool_connections{endpoint,
// state}, chgate_pool_connects_total, chgate_pool_connect_failures_total,
// chgate_pool_connections_closed_total{endpoint, reason}, chgate_clickhouse_up{endpoint} and
// chgate_clickhouse_last_success_timestamp_seconds{endpoint}.
class PoolCollectable : public prometheus::Collectable {
 public:
  explicit PoolCollectable(std::function<std::vector<PoolEndpointSample>()> sample);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::function<std::vector<PoolEndpointSample>()> sample_;
};

// The spool (--spool-dir) as seen at scrape time (server/spool's SpoolStats, as plain numbers).
struct SpoolSample {
  uint64_t bytes = 0;  // of the segment files
  uint64_t max_bytes = 0;
  uint64_t segments = 0;
  uint64_t pending_records = 0;
  double oldest_pending_age_seconds = 0;  // 0: nothing pending
  uint64_t free_bytes = 0;
  uint64_t appends = 0;
  uint64_t appended_bytes = 0;
  uint64_t refusals = 0;
  uint64_t fsyncs = 0;
  double fsync_seconds = 0;
  uint64_t quarantined_bytes = 0;
  uint64_t set_aside_bytes = 0;  // dead-letter and *.corrupt files, counted against max_bytes
};

// Exports the chgate_spool_* gauges and counters from `sample` (called on the exposer's thread;
// thread-safe). Registered only when chgate runs with a spool.
class SpoolCollectable : public prometheus::Collectable {
 public:
  explicit SpoolCollectable(std::function<SpoolSample()> sample) : sample_(std::move(sample)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::function<SpoolSample()> sample_;
};

// TLS to ClickHouse, as seen at scrape time.
struct ClickHouseTlsSample {
  bool insecure_skip_verify = false;  // certificates are not verified
  uint64_t reloads = 0;               // certificate files reloaded after a change
  uint64_t reload_failures = 0;       // changed files that could not be loaded (old ones kept)
};

// Exports chgate_clickhouse_tls_insecure_skip_verify (1 while server certificates go unchecked)
// and chgate_clickhouse_tls_reloads_total{result="ok"|"error"}. `sample` is called on the
// exposer's thread and must be thread-safe.
class ClickHouseTlsCollectable : public prometheus::Collectable {
 public:
  explicit ClickHouseTlsCollectable(std::function<ClickHouseTlsSample()> sample);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::function<ClickHouseTlsSample()> sample_;
};

// TLS of the API listener, as seen at scrape time.
struct ApiTlsSample {
  bool enabled = false;                                   // the API serves TLS
  std::optional<double> certificate_expiry_unix_seconds;  // notAfter of the serving certificate
  uint64_t handshake_failures = 0;                        // failed TLS handshakes since the start
};

// Exports chgate_api_tls_certificate_expiry_timestamp_seconds (while the API serves TLS and its
// certificate file reads) and chgate_api_tls_handshake_failures_total. `sample` is called on the
// exposer's thread and must be thread-safe.
class ApiTlsCollectable : public prometheus::Collectable {
 public:
  explicit ApiTlsCollectable(std::function<ApiTlsSample()> sample) : sample_(std::move(sample)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::function<ApiTlsSample()> sample_;
};

// Owns the registry and every component's metrics. Construct one per process (tests: one per
// test) and pass `ingest()` / `query()` to the components. Not copyable or movable.
// The Query RPC's reports (service::QueryObserver) as QueryMetrics series.
class QueryMetricsObserver final : public service::QueryObserver {
 public:
  // `metrics` must outlive the observer.
  explicit QueryMetricsObserver(const QueryMetrics* metrics) : m_(metrics) {}
  void QueryStarted() override { m_->QueryStarted(); }
  void Streamed(uint64_t rows, uint64_t bytes) override { m_->Streamed(rows, bytes); }
  void QueryFinished(const absl::Status& status, absl::Duration took) override {
    m_->QueryFinished(ResultLabel(status.code()), absl::ToDoubleSeconds(took));
  }
  void QueryRefused(const absl::Status& status) override {
    m_->QueryRefused(ResultLabel(status.code()));
  }

 private:
  const QueryMetrics* const m_;
};

// The API caller checks' reports (service::AuthObserver) as AuthMetrics series.
class AuthMetricsObserver final : public service::AuthObserver {
 public:
  // `metrics` must outlive the observer.
  explicit AuthMetricsObserver(const AuthMetrics* metrics) : m_(metrics) {}
  void Failure(std::string_view reason) override { m_->Failure(reason); }
  void Reloaded(std::string_view file, bool ok) override { m_->Reloaded(file, ok); }

 private:
  const AuthMetrics* const m_;
};

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  const IngestMetrics& ingest() const { return ingest_; }
  // What the Ingestor reports to (over ingest()).
  ingest::IngestObserver* ingest_observer() { return &ingest_observer_; }
  const QueryMetrics& query() const { return query_; }
  const AuthMetrics& auth() const { return auth_; }
  // What the Query RPC and the API's caller checks report to (over query() and auth()).
  service::QueryObserver* query_observer() { return &query_observer_; }
  service::AuthObserver* auth_observer() { return &auth_observer_; }
  // Exports chgate_build_info{version, revision} = 1 (call once, at start).
  void SetBuildInfo(const std::string& version, const std::string& revision);
  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  // Returns what /metrics serves: the registry followed by every registered collectable.
  // StartServer serves it.
  std::shared_ptr<prometheus::Collectable> collectable() const;

  // Adds a collectable (ByteCountersCollectable, PoolCollectable, ...) to what /metrics serves,
  // before or after StartServer. Held weakly: the caller keeps it alive; once it is destroyed
  // it drops out of the scrape.
  void RegisterCollectable(std::weak_ptr<prometheus::Collectable> collectable);

  // Starts the HTTP server serving GET /metrics on `address` (see HttpServer: "host:port",
  // "[::]:9464" for every IPv6 and IPv4 address; port 0 picks a free port, see port()). It serves
  // this Metrics' registry and collectables; destroying it stops it. It may outlive the Metrics.
  // Returns InvalidArgument for an address without a valid port, Unavailable when the address
  // cannot be bound (port in use, address not local, permission denied).
  [[nodiscard]] absl::StatusOr<std::unique_ptr<HttpServer>> StartServer(const std::string& address);

  // Returns the port the last StartServer call bound (the real one when it asked for port 0),
  // or 0 before a successful StartServer.
  uint16_t port() const { return port_.load(std::memory_order_acquire); }

  // Returns the name of every metric family /metrics serves (histograms by their base name,
  // without _bucket/_sum/_count). For checking dashboards and alert rules against what the
  // binary exports.
  static std::vector<std::string> MetricNames();

 private:
  class Collector;  // the registry plus the registered collectables, served as one

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<Collector> collector_;
  IngestMetrics ingest_;
  IngestMetricsObserver ingest_observer_{&ingest_};
  QueryMetrics query_;
  AuthMetrics auth_;
  QueryMetricsObserver query_observer_{&query_};
  AuthMetricsObserver auth_observer_{&auth_};
  std::atomic<uint16_t> port_{0};
};

}  // namespace chgate::metrics
