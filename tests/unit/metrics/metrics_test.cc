// Unit tests of server/metrics: the exposition served on /metrics (names, labels, values), the
// scrape-time collectables, metrics server start-up errors, MetricNames(), and `promtool check
// metrics` over a real scrape when promtool is installed (CHGATE_REQUIRE_PROMTOOL=1 makes its
// absence a failure, for CI).
#include "server/metrics/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace chgate::metrics {
namespace {

using LabelSet = std::map<std::string, std::string>;

// GET `path` from 127.0.0.1:`port` over a plain socket; returns the body of a 200 response, or
// an empty optional (with the failure added to the test) otherwise.
std::optional<std::string> HttpGet(uint16_t port, const std::string& path, bool ipv6 = false) {
  const int fd = ::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    ADD_FAILURE() << "socket: " << std::strerror(errno);
    return std::nullopt;
  }
  // A deadline on every read and write instead of ever hanging the test.
  timeval timeout{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sockaddr_in6 addr6{};
  addr6.sin6_family = AF_INET6;
  addr6.sin6_port = htons(port);
  addr6.sin6_addr = in6addr_loopback;
  const int connected = ipv6 ? ::connect(fd, reinterpret_cast<sockaddr*>(&addr6), sizeof(addr6))
                             : ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  if (connected != 0) {
    ADD_FAILURE() << "connect to port " << port << ": " << std::strerror(errno);
    ::close(fd);
    return std::nullopt;
  }
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    ADD_FAILURE() << "send: " << std::strerror(errno);
    ::close(fd);
    return std::nullopt;
  }
  std::string response;
  char buffer[16384];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      ADD_FAILURE() << "recv: " << std::strerror(errno);
      ::close(fd);
      return std::nullopt;
    }
    response.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  const size_t header_end = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.1 200", 0) != 0 || header_end == std::string::npos) {
    ADD_FAILURE() << "unexpected response:\n" << response.substr(0, 512);
    return std::nullopt;
  }
  return response.substr(header_end + 4);
}

// The text exposition format, parsed just enough for the assertions below.
struct Exposition {
  std::map<std::string, std::string> types;  // family name -> counter, gauge, ...
  std::map<std::string, std::string> helps;
  std::map<std::string, std::vector<std::pair<LabelSet, double>>> samples;  // by sample name

  std::optional<double> Value(const std::string& name, const LabelSet& labels = {}) const {
    auto it = samples.find(name);
    if (it == samples.end()) return std::nullopt;
    for (const auto& [sample_labels, value] : it->second) {
      if (sample_labels == labels) return value;
    }
    return std::nullopt;
  }
};

Exposition Parse(const std::string& text) {
  Exposition out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0 || line.rfind("# HELP ", 0) == 0) {
      const size_t space = line.find(' ', 7);
      const std::string name = line.substr(7, space - 7);
      const std::string rest = space == std::string::npos ? "" : line.substr(space + 1);
      (line[2] == 'T' ? out.types : out.helps)[name] = rest;
      continue;
    }
    if (line[0] == '#') continue;
    const size_t brace = line.find('{');
    const size_t name_end = std::min(brace, line.find(' '));
    const std::string name = line.substr(0, name_end);
    LabelSet labels;
    size_t value_start = name_end;
    if (brace != std::string::npos && brace == name_end) {
      size_t i = brace + 1;
      while (i < line.size() && line[i] != '}') {
        const size_t eq = line.find('=', i);
        const std::string key = line.substr(i, eq - i);
        std::string value;
        size_t j = eq + 2;  // past ="
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) ++j;
          value.push_back(line[j]);
        }
        labels[key] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      value_start = i + 1;
    }
    out.samples[name].emplace_back(labels, std::strtod(line.c_str() + value_start, nullptr));
  }
  return out;
}

// Each test gets its own Metrics, served by its own server on a free port.
class ScrapeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = metrics_.StartServer("127.0.0.1:0");
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    port_ = metrics_.port();
  }

  std::string ScrapeText() {
    std::optional<std::string> body = HttpGet(port_, "/metrics");
    return body.value_or("");
  }
  Exposition Scrape() { return Parse(ScrapeText()); }

  // Touches every family so that each one has at least one series.
  void PopulateEverything() {
    const IngestMetrics& ingest = metrics_.ingest();
    ingest.TableStarted("events", 0.2);
    ingest.RequestDone("events", kResultOk, 10);
    ingest.BatchFlushed("events", kFlushAge, 10, 2048, 0.01);
    ingest.CommitLatency("events", 0.02);
    ingest.FlushRetry("events");
    ingest.FlushError("events", StatusCodeLabel(absl::StatusCode::kUnavailable));
    ingest.SetBuffered(1, 100);
    ingest.SetBufferBudgetBytes(1 << 20);
    metrics_.ingest_observer()->DedupWindowCovers("default.events", 600);
    const QueryMetrics& query = metrics_.query();
    query.QueryStarted();
    query.Streamed(5, 50);
    query.QueryFinished(kResultOk, 0.5);
    metrics_.auth().Failure("bad_token");
    metrics_.auth().Reloaded("policy", true);
    metrics_.RegisterCollectable(bytes_);
    metrics_.RegisterCollectable(pool_);
    metrics_.RegisterCollectable(tls_);
    metrics_.RegisterCollectable(spool_);
    metrics_.RegisterCollectable(api_tls_);
    metrics_.SetBuildInfo("1.2.3", "abcdef123456");
  }

  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
  Metrics metrics_;
  std::atomic<uint64_t> received_{0}, decoded_{0}, sent_{0};
  std::shared_ptr<ByteCountersCollectable> bytes_ =
      std::make_shared<ByteCountersCollectable>(&received_, &decoded_, &sent_);
  std::shared_ptr<PoolCollectable> pool_ = std::make_shared<PoolCollectable>([] {
    return std::vector<PoolEndpointSample>{{.endpoint = "ch1:9000", .idle = 1, .healthy = true}};
  });
  std::shared_ptr<SpoolCollectable> spool_ =
      std::make_shared<SpoolCollectable>([] { return SpoolSample{.max_bytes = 1 << 30}; });
  std::shared_ptr<ClickHouseTlsCollectable> tls_ =
      std::make_shared<ClickHouseTlsCollectable>([] { return ClickHouseTlsSample{}; });
  std::shared_ptr<ApiTlsCollectable> api_tls_ = std::make_shared<ApiTlsCollectable>(
      [] { return ApiTlsSample{.enabled = true, .certificate_expiry_unix_seconds = 1.9e9}; });
};

TEST_F(ScrapeTest, CountsAuthFailuresByReasonFromZeroAndReloadsByFileAndResult) {
  const AuthMetrics& auth = metrics_.auth();
  auth.Failure("insert_denied");
  auth.Failure("insert_denied");
  auth.Reloaded("tokens", false);
  const std::string text = ScrapeText();
  EXPECT_NE(text.find("chgate_api_auth_failures_total{reason=\"insert_denied\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("chgate_api_auth_failures_total{reason=\"bad_token\"} 0"), std::string::npos)
      << text;
  EXPECT_NE(text.find("chgate_api_auth_failures_total{reason=\"no_credentials\"} 0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("chgate_api_auth_reloads_total{file=\"tokens\",result=\"error\"} 1"),
            std::string::npos)
      << text;
}

TEST_F(ScrapeTest, CountsIngestRequestsAndRowsByTableAndResult) {
  const IngestMetrics& ingest = metrics_.ingest();
  ingest.RequestDone("events", kResultOk, 10);
  ingest.RequestDone("events", kResultOk, 15);
  ingest.RequestDone("events", ResultLabel(absl::StatusCode::kInvalidArgument), 3);
  ingest.RequestDone("logs", kResultAccepted, 7);
  ingest.RequestDone("no_such_table_from_a_client", kResultNotFound, 4);

  const Exposition e = Scrape();
  EXPECT_EQ(e.types.at("chgate_ingest_requests_total"), "counter");
  EXPECT_EQ(e.types.at("chgate_ingest_rows_total"), "counter");
  EXPECT_EQ(e.Value("chgate_ingest_requests_total", {{"table", "events"}, {"result", "ok"}}), 2);
  EXPECT_EQ(e.Value("chgate_ingest_rows_total", {{"table", "events"}, {"result", "ok"}}), 25);
  EXPECT_EQ(e.Value("chgate_ingest_requests_total", {{"table", "events"}, {"result", "invalid"}}),
            1);
  EXPECT_EQ(e.Value("chgate_ingest_rows_total", {{"table", "events"}, {"result", "invalid"}}), 3);
  EXPECT_EQ(e.Value("chgate_ingest_rows_total", {{"table", "logs"}, {"result", "accepted"}}), 7);
  // Unknown table names never become label values.
  EXPECT_EQ(e.Value("chgate_ingest_requests_total", {{"table", ""}, {"result", "not_found"}}), 1);
  EXPECT_EQ(e.Value("chgate_ingest_rows_total", {{"table", ""}, {"result", "not_found"}}), 4);
  EXPECT_EQ(ScrapeText().find("no_such_table_from_a_client"), std::string::npos);
}

// The Ingestor reports plain data (ingest::IngestObserver); the labels are made here, the same
// way as for Query (a cancelled request is "cancelled", not "error").
TEST_F(ScrapeTest, TheIngestObserverMakesTheSameLabelsAsEveryPath) {
  ingest::IngestObserver* o = metrics_.ingest_observer();
  using ingest::AckMode;
  o->RequestDone("events", absl::OkStatus(), AckMode::kCommitted, 2);
  o->RequestDone("events", absl::OkStatus(), AckMode::kAccepted, 3);
  o->RequestDone("events", absl::CancelledError("gone"), AckMode::kCommitted, 4);
  o->RequestDone("events", absl::PermissionDeniedError("no"), AckMode::kPersisted, 5);
  o->RequestDone("events", absl::OkStatus(), AckMode::kPersisted, 7);
  o->BatchFlushed("events", ingest::FlushReason::kDeadline, 10, 100, absl::Milliseconds(5));
  o->FlushFailed("events", absl::UnavailableError("down"), std::nullopt);
  o->FlushFailed("events", absl::InternalError("parts"), 252);
  o->RowsDropped("events", ingest::DropReason::kShutdown, 6);
  o->RowsDropped("events", ingest::DropReason::kSpoolDamaged, 8);
  o->RowsDropped("events", ingest::DropReason::kSpoolDeadLetter, 9);
  o->BatchFlushed("events", ingest::FlushReason::kReplay, 11, 100, absl::Milliseconds(5));
  o->SpoolReplayed(12);
  o->DedupWindowCovers("events", 13);
  o->Budgets(1000, 750);
  const Exposition e = Scrape();
  EXPECT_EQ(e.Value("chgate_ingest_requests_total", {{"table", "events"}, {"result", "ok"}}), 1);
  EXPECT_EQ(e.Value("chgate_ingest_rows_total", {{"table", "events"}, {"result", "accepted"}}), 3);
  EXPECT_EQ(e.Value("chgate_ingest_rows_total", {{"table", "events"}, {"result", "cancelled"}}), 4);
  EXPECT_EQ(
      e.Value("chgate_ingest_rows_total", {{"table", "events"}, {"result", "permission_denied"}}),
      5);
  EXPECT_EQ(e.Value("chgate_batches_flushed_total", {{"table", "events"}, {"reason", "deadline"}}),
            1);
  EXPECT_EQ(e.Value("chgate_flush_errors_total", {{"table", "events"}, {"code", "UNAVAILABLE"}}),
            1);
  EXPECT_EQ(e.Value("chgate_flush_errors_total", {{"table", "events"}, {"code", "252"}}), 1);
  EXPECT_EQ(e.Value("chgate_rows_dropped_total", {{"table", "events"}, {"reason", "shutdown"}}), 6);
  EXPECT_EQ(e.Value("chgate_ingest_rows_total", {{"table", "events"}, {"result", "persisted"}}), 7);
  EXPECT_EQ(
      e.Value("chgate_rows_dropped_total", {{"table", "events"}, {"reason", "spool_damaged"}}), 8);
  EXPECT_EQ(e.Value("chgate_spool_dead_letter_rows_total", {{"table", "events"}}), 9);
  EXPECT_EQ(e.Value("chgate_batches_flushed_total", {{"table", "events"}, {"reason", "replay"}}),
            1);
  EXPECT_EQ(e.Value("chgate_spool_replayed_records_total", {}), 12);
  EXPECT_EQ(e.Value("chgate_dedup_window_seconds", {{"table", "events"}}), 13);
}

TEST_F(ScrapeTest, TheSpoolCollectableExportsTheSpoolsState) {
  // The registry keeps a weak reference: the collectable lives in the test.
  auto spool = std::make_shared<SpoolCollectable>([] {
    return SpoolSample{.bytes = 100,
                       .max_bytes = 1000,
                       .segments = 2,
                       .pending_records = 3,
                       .oldest_pending_age_seconds = 4.5,
                       .free_bytes = 5000,
                       .appends = 6,
                       .appended_bytes = 700,
                       .refusals = 8,
                       .fsyncs = 9,
                       .fsync_seconds = 0.25,
                       .quarantined_bytes = 11,
                       .set_aside_bytes = 12};
  });
  metrics_.RegisterCollectable(spool);
  const Exposition e = Scrape();
  EXPECT_EQ(e.Value("chgate_spool_bytes", {}), 100);
  EXPECT_EQ(e.Value("chgate_spool_max_bytes", {}), 1000);
  EXPECT_EQ(e.Value("chgate_spool_segments", {}), 2);
  EXPECT_EQ(e.Value("chgate_spool_pending_records", {}), 3);
  EXPECT_EQ(e.Value("chgate_spool_oldest_pending_age_seconds", {}), 4.5);
  EXPECT_EQ(e.Value("chgate_spool_free_bytes", {}), 5000);
  EXPECT_EQ(e.Value("chgate_spool_appends_total", {}), 6);
  EXPECT_EQ(e.Value("chgate_spool_appended_bytes_total", {}), 700);
  EXPECT_EQ(e.Value("chgate_spool_refusals_total", {}), 8);
  EXPECT_EQ(e.Value("chgate_spool_fsyncs_total", {}), 9);
  EXPECT_EQ(e.Value("chgate_spool_fsync_seconds_total", {}), 0.25);
  EXPECT_EQ(e.Value("chgate_spool_quarantined_bytes_total", {}), 11);
  EXPECT_EQ(e.Value("chgate_spool_set_aside_bytes", {}), 12);
}

TEST_F(ScrapeTest, RecordsFlushesHistogramsRetriesAndErrors) {
  const IngestTableMetrics events = metrics_.ingest().ForTable("events");
  events.BatchFlushed(kFlushRows, 1000, 65536, 0.25);
  events.BatchFlushed(kFlushAge, 3, 1500, 0.003);
  metrics_.ingest().BatchFlushed("events", kFlushShutdown, 1, 100, 0.001);
  events.CommitLatency(0.3);
  events.CommitLatency(75);  // past the last bucket: only +Inf
  events.FlushRetry();
  events.FlushRetry();
  events.FlushError(ClickHouseCodeLabel(252));
  events.FlushError(StatusCodeLabel(absl::StatusCode::kUnavailable));
  metrics_.ingest().FlushError("events", "UNAVAILABLE");
  // ForTable resolves to the same series every time.
  EXPECT_EQ(metrics_.ingest().ForTable("events").commit_latency, events.commit_latency);

  const Exposition e = Scrape();
  const LabelSet t = {{"table", "events"}};
  auto with = [&](const std::string& key, const std::string& value) {
    LabelSet labels = t;
    labels[key] = value;
    return labels;
  };
  EXPECT_EQ(e.Value("chgate_batches_flushed_total", with("reason", "rows")), 1);
  EXPECT_EQ(e.Value("chgate_batches_flushed_total", with("reason", "age")), 1);
  EXPECT_EQ(e.Value("chgate_batches_flushed_total", with("reason", "shutdown")), 1);
  // Every reason exists from the table's first use, so a failure ratio has its denominator.
  EXPECT_EQ(e.Value("chgate_batches_flushed_total", with("reason", "bytes")), 0);

  EXPECT_EQ(e.types.at("chgate_batch_rows"), "histogram");
  EXPECT_EQ(e.Value("chgate_batch_rows_count", t), 3);
  EXPECT_EQ(e.Value("chgate_batch_rows_sum", t), 1004);
  EXPECT_EQ(e.Value("chgate_batch_rows_bucket", with("le", "1")), 1);
  EXPECT_EQ(e.Value("chgate_batch_rows_bucket", with("le", "4")), 2);
  EXPECT_EQ(e.Value("chgate_batch_rows_bucket", with("le", "256")), 2);
  EXPECT_EQ(e.Value("chgate_batch_rows_bucket", with("le", "1024")), 3);
  EXPECT_EQ(e.Value("chgate_batch_rows_bucket", with("le", "16777216")), 3);
  EXPECT_EQ(e.Value("chgate_batch_rows_bucket", with("le", "+Inf")), 3);

  EXPECT_EQ(e.Value("chgate_batch_size_bytes_bucket", with("le", "1024")), 1);
  EXPECT_EQ(e.Value("chgate_batch_size_bytes_bucket", with("le", "4096")), 2);
  EXPECT_EQ(e.Value("chgate_batch_size_bytes_bucket", with("le", "65536")), 3);
  EXPECT_EQ(e.Value("chgate_batch_size_bytes_bucket", with("le", "268435456")), 3);
  EXPECT_EQ(e.Value("chgate_batch_size_bytes_sum", t), 65536 + 1500 + 100);

  EXPECT_EQ(e.Value("chgate_flush_duration_seconds_bucket", with("le", "0.001")), 1);
  EXPECT_EQ(e.Value("chgate_flush_duration_seconds_bucket", with("le", "0.005")), 2);
  EXPECT_EQ(e.Value("chgate_flush_duration_seconds_bucket", with("le", "0.5")), 3);
  EXPECT_EQ(e.Value("chgate_flush_duration_seconds_bucket", with("le", "60")), 3);
  EXPECT_EQ(e.Value("chgate_flush_duration_seconds_count", t), 3);

  EXPECT_EQ(e.Value("chgate_request_commit_latency_seconds_bucket", with("le", "0.5")), 1);
  EXPECT_EQ(e.Value("chgate_request_commit_latency_seconds_bucket", with("le", "60")), 1);
  EXPECT_EQ(e.Value("chgate_request_commit_latency_seconds_bucket", with("le", "+Inf")), 2);
  EXPECT_DOUBLE_EQ(e.Value("chgate_request_commit_latency_seconds_sum", t).value_or(0), 75.3);

  EXPECT_EQ(e.Value("chgate_flush_retries_total", t), 2);
  EXPECT_EQ(e.Value("chgate_flush_errors_total", with("code", "252")), 1);
  EXPECT_EQ(e.Value("chgate_flush_errors_total", with("code", "UNAVAILABLE")), 2);
  EXPECT_EQ(e.Value("chgate_batches_failed_total", t), 3);
}

TEST_F(ScrapeTest, TableStartedCreatesFailureSeriesAtZeroAndExportsTheBatchDelay) {
  metrics_.ingest().TableStarted("db.slow", 5);
  metrics_.ingest().TableStarted("db.fast", 0.2);
  const Exposition e = Scrape();
  EXPECT_EQ(e.types.at("chgate_batch_max_delay_seconds"), "gauge");
  EXPECT_EQ(e.Value("chgate_batch_max_delay_seconds", {{"table", "db.slow"}}), 5);
  EXPECT_EQ(e.Value("chgate_batch_max_delay_seconds", {{"table", "db.fast"}}), 0.2);
  // Before any flush, so increase() sees the first failure and the ratio its first flushes.
  EXPECT_EQ(e.Value("chgate_batches_failed_total", {{"table", "db.slow"}}), 0);
  for (const char* reason : {"rows", "bytes", "age", "deadline", "shutdown"}) {
    EXPECT_EQ(e.Value("chgate_batches_flushed_total", {{"table", "db.slow"}, {"reason", reason}}),
              0)
        << reason;
  }
  EXPECT_EQ(e.Value("chgate_rows_dropped_total",
                    {{"table", "db.slow"}, {"reason", "accepted_flush_failed"}}),
            0);
}

TEST_F(ScrapeTest, ExportsTheProcessUnderTheConventionalNames) {
  // Burns this much process CPU time (not wall time: the test may be descheduled).
  auto burn_cpu = [](std::clock_t amount) {
    volatile uint64_t sink = 0;
    const std::clock_t until = std::clock() + amount;
    while (std::clock() < until) sink = sink + 1;
  };
  burn_cpu(CLOCKS_PER_SEC / 20);
  const Exposition e = Scrape();
  EXPECT_EQ(e.types.at("process_cpu_seconds_total"), "counter");
  EXPECT_GT(e.Value("process_cpu_seconds_total").value_or(0), 0.0);
  EXPECT_GT(e.Value("process_resident_memory_bytes").value_or(0), 1 << 20);
  EXPECT_GE(e.Value("process_virtual_memory_bytes").value_or(0),
            e.Value("process_resident_memory_bytes").value_or(0));
  const double start = e.Value("process_start_time_seconds").value_or(0);
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_GT(start, now - 24 * 3600.0);
  EXPECT_LE(start, now + 1);
  EXPECT_GE(e.Value("process_open_fds").value_or(0), 3);  // at least stdin, stdout, stderr
  EXPECT_GE(e.Value("process_max_fds").value_or(0), e.Value("process_open_fds").value_or(0));
  // CPU time grows by what the process spends (50 ms is several clock ticks).
  burn_cpu(CLOCKS_PER_SEC / 20);
  EXPECT_GT(Scrape().Value("process_cpu_seconds_total").value_or(0),
            e.Value("process_cpu_seconds_total").value_or(0));
}

TEST_F(ScrapeTest, ReportsBufferGauges) {
  const IngestMetrics& ingest = metrics_.ingest();
  ingest.SetBuffered(5, 500);
  ingest.AddBuffered(-2, -200);
  ingest.AddBuffered(10, 1000);
  ingest.SetBufferBudgetBytes(256ull << 20);
  ingest.RequestParked();
  ingest.RequestParked();
  ingest.RequestUnparked();

  const Exposition e = Scrape();
  EXPECT_EQ(e.types.at("chgate_buffered_rows"), "gauge");
  EXPECT_EQ(e.Value("chgate_buffered_rows"), 13);
  EXPECT_EQ(e.Value("chgate_buffered_bytes"), 1300);
  EXPECT_EQ(e.Value("chgate_buffer_budget_bytes"), 256 << 20);
  EXPECT_EQ(e.Value("chgate_ingest_waiting_requests"), 1);
}

TEST_F(ScrapeTest, CountsQueries) {
  // Each result's series exists before its first query.
  EXPECT_EQ(Scrape().Value("chgate_queries_total", {{"result", "permission_denied"}}), 0);
  const QueryMetrics& query = metrics_.query();
  query.QueryStarted();
  query.QueryStarted();
  query.Streamed(100, 4000);
  query.Streamed(20, 800);
  query.QueryFinished(kResultOk, 1.5);
  query.QueryRefused(ResultLabel(absl::StatusCode::kResourceExhausted));

  const Exposition e = Scrape();
  EXPECT_EQ(e.Value("chgate_queries_total", {{"result", "ok"}}), 1);
  EXPECT_EQ(e.Value("chgate_queries_total", {{"result", "resource_exhausted"}}), 1);
  EXPECT_EQ(e.Value("chgate_query_rows_total"), 120);
  EXPECT_EQ(e.Value("chgate_query_response_bytes_total"), 4800);
  EXPECT_EQ(e.Value("chgate_queries_in_flight"), 1);
  EXPECT_EQ(e.Value("chgate_query_duration_seconds_count"), 1);
  EXPECT_EQ(e.Value("chgate_query_duration_seconds_bucket", {{"le", "1"}}), 0);
  EXPECT_EQ(e.Value("chgate_query_duration_seconds_bucket", {{"le", "2"}}), 1);
  EXPECT_EQ(e.Value("chgate_query_duration_seconds_bucket", {{"le", "300"}}), 1);
}

TEST_F(ScrapeTest, ByteCountersAreReadAtScrapeTime) {
  metrics_.RegisterCollectable(bytes_);
  received_ = 1000;
  decoded_ = 4000;
  sent_ = 300;
  Exposition e = Scrape();
  EXPECT_EQ(e.types.at("chgate_clickhouse_received_bytes_total"), "counter");
  EXPECT_EQ(e.Value("chgate_clickhouse_received_bytes_total"), 1000);
  EXPECT_EQ(e.Value("chgate_clickhouse_decoded_bytes_total"), 4000);
  EXPECT_EQ(e.Value("chgate_clickhouse_sent_bytes_total"), 300);
  EXPECT_EQ(e.helps.at("chgate_clickhouse_received_bytes_total"),
            "Bytes read from the ClickHouse sockets, compressed as on the wire.");
  EXPECT_EQ(e.helps.at("chgate_clickhouse_decoded_bytes_total"),
            "Bytes after decompressing compression frames.");
  EXPECT_EQ(e.helps.at("chgate_clickhouse_sent_bytes_total"), "Bytes written to the sockets.");

  received_ += 24;
  e = Scrape();
  EXPECT_EQ(e.Value("chgate_clickhouse_received_bytes_total"), 1024);

  // Held weakly: once the owner drops it, it leaves the scrape.
  bytes_.reset();
  e = Scrape();
  EXPECT_EQ(e.types.count("chgate_clickhouse_received_bytes_total"), 0u);
}

TEST_F(ScrapeTest, PoolStateIsSampledAtScrapeTime) {
  std::vector<PoolEndpointSample> state = {
      {.endpoint = "ch1:9000",
       .idle = 3,
       .in_use = 2,
       .connects = 7,
       .connect_failures = 1,
       .discarded_broken = 2,
       .closed_expired = 4,
       .healthy = true},
      {.endpoint = "ch2:9000",
       .connect_failures = 9,
       .healthy = false,
       .last_success_unix_seconds = 1.5e9},
  };
  auto pool = std::make_shared<PoolCollectable>([&state] { return state; });
  metrics_.RegisterCollectable(pool);

  Exposition e = Scrape();
  EXPECT_EQ(e.types.at("chgate_pool_connections"), "gauge");
  EXPECT_EQ(e.types.at("chgate_clickhouse_up"), "gauge");
  EXPECT_EQ(e.types.at("chgate_pool_connects_total"), "counter");
  EXPECT_EQ(e.Value("chgate_pool_connections", {{"endpoint", "ch1:9000"}, {"state", "idle"}}), 3);
  EXPECT_EQ(e.Value("chgate_pool_connections", {{"endpoint", "ch1:9000"}, {"state", "in_use"}}), 2);
  EXPECT_EQ(e.Value("chgate_pool_connections", {{"endpoint", "ch2:9000"}, {"state", "idle"}}), 0);
  EXPECT_EQ(e.Value("chgate_pool_connects_total", {{"endpoint", "ch1:9000"}}), 7);
  EXPECT_EQ(e.Value("chgate_pool_connect_failures_total", {{"endpoint", "ch1:9000"}}), 1);
  EXPECT_EQ(e.Value("chgate_pool_connect_failures_total", {{"endpoint", "ch2:9000"}}), 9);
  EXPECT_EQ(e.Value("chgate_pool_connections_closed_total",
                    {{"endpoint", "ch1:9000"}, {"reason", "broken"}}),
            2);
  EXPECT_EQ(e.Value("chgate_pool_connections_closed_total",
                    {{"endpoint", "ch1:9000"}, {"reason", "expired"}}),
            4);
  EXPECT_EQ(e.Value("chgate_clickhouse_up", {{"endpoint", "ch1:9000"}}), 1);
  EXPECT_EQ(e.Value("chgate_clickhouse_up", {{"endpoint", "ch2:9000"}}), 0);
  EXPECT_EQ(e.types.at("chgate_clickhouse_last_success_timestamp_seconds"), "gauge");
  EXPECT_EQ(e.Value("chgate_clickhouse_last_success_timestamp_seconds", {{"endpoint", "ch1:9000"}}),
            0);
  EXPECT_EQ(e.Value("chgate_clickhouse_last_success_timestamp_seconds", {{"endpoint", "ch2:9000"}}),
            1.5e9);

  state[1].healthy = true;
  state[0].in_use = 0;
  e = Scrape();
  EXPECT_EQ(e.Value("chgate_clickhouse_up", {{"endpoint", "ch2:9000"}}), 1);
  EXPECT_EQ(e.Value("chgate_pool_connections", {{"endpoint", "ch1:9000"}, {"state", "in_use"}}), 0);
}

TEST_F(ScrapeTest, BuildInfoNamesVersionAndRevision) {
  metrics_.SetBuildInfo("1.2.3", "abcdef123456");
  const Exposition e = Scrape();
  EXPECT_EQ(e.types.at("chgate_build_info"), "gauge");
  EXPECT_EQ(e.Value("chgate_build_info", {{"version", "1.2.3"}, {"revision", "abcdef123456"}}), 1);
}

TEST_F(ScrapeTest, ClickHouseTlsStateIsSampledAtScrapeTime) {
  ClickHouseTlsSample state{.insecure_skip_verify = true, .reloads = 2, .reload_failures = 1};
  tls_ = std::make_shared<ClickHouseTlsCollectable>([&state] { return state; });
  metrics_.RegisterCollectable(tls_);
  Exposition e = Scrape();
  EXPECT_EQ(e.types.at("chgate_clickhouse_tls_insecure_skip_verify"), "gauge");
  EXPECT_EQ(e.types.at("chgate_clickhouse_tls_reloads_total"), "counter");
  EXPECT_EQ(e.Value("chgate_clickhouse_tls_insecure_skip_verify"), 1);
  EXPECT_EQ(e.Value("chgate_clickhouse_tls_reloads_total", {{"result", "ok"}}), 2);
  EXPECT_EQ(e.Value("chgate_clickhouse_tls_reloads_total", {{"result", "error"}}), 1);
  state.insecure_skip_verify = false;
  state.reloads = 3;
  e = Scrape();
  EXPECT_EQ(e.Value("chgate_clickhouse_tls_insecure_skip_verify"), 0);
  EXPECT_EQ(e.Value("chgate_clickhouse_tls_reloads_total", {{"result", "ok"}}), 3);
}

TEST_F(ScrapeTest, ApiTlsCertificateExpiryAndHandshakeFailuresAreSampledAtScrapeTime) {
  ApiTlsSample state{
      .enabled = true, .certificate_expiry_unix_seconds = 1'900'000'000, .handshake_failures = 3};
  api_tls_ = std::make_shared<ApiTlsCollectable>([&state] { return state; });
  metrics_.RegisterCollectable(api_tls_);
  Exposition e = Scrape();
  EXPECT_EQ(e.types.at("chgate_api_tls_certificate_expiry_timestamp_seconds"), "gauge");
  EXPECT_EQ(e.types.at("chgate_api_tls_handshake_failures_total"), "counter");
  EXPECT_EQ(e.Value("chgate_api_tls_certificate_expiry_timestamp_seconds"), 1'900'000'000);
  EXPECT_EQ(e.Value("chgate_api_tls_handshake_failures_total"), 3);
  // A renewed certificate is seen at the next scrape; a plaintext API exports no expiry.
  state.certificate_expiry_unix_seconds = 1'950'000'000;
  state.handshake_failures = 5;
  e = Scrape();
  EXPECT_EQ(e.Value("chgate_api_tls_certificate_expiry_timestamp_seconds"), 1'950'000'000);
  EXPECT_EQ(e.Value("chgate_api_tls_handshake_failures_total"), 5);
  state = ApiTlsSample{};
  e = Scrape();
  EXPECT_EQ(e.types.count("chgate_api_tls_certificate_expiry_timestamp_seconds"), 0u);
  EXPECT_EQ(e.Value("chgate_api_tls_handshake_failures_total"), 0);
}

TEST(MetricsTest, StartServerServesRegistryAndCollectablesOnAnEphemeralPort) {
  Metrics metrics;
  std::atomic<uint64_t> received{11}, decoded{22}, sent{33};
  auto bytes = std::make_shared<ByteCountersCollectable>(&received, &decoded, &sent);
  metrics.RegisterCollectable(bytes);  // before the start
  EXPECT_EQ(metrics.port(), 0);
  auto server = metrics.StartServer("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_NE(metrics.port(), 0);
  EXPECT_EQ((*server)->port(), metrics.port());
  metrics.query().Streamed(3, 30);
  auto pool = std::make_shared<PoolCollectable>(
      [] { return std::vector<PoolEndpointSample>{{.endpoint = "ch1:9000", .healthy = true}}; });
  metrics.RegisterCollectable(pool);  // after the start

  const Exposition e = Parse(HttpGet(metrics.port(), "/metrics").value_or(""));
  EXPECT_EQ(e.Value("chgate_clickhouse_sent_bytes_total"), 33);
  EXPECT_EQ(e.Value("chgate_query_rows_total"), 3);
  EXPECT_EQ(e.Value("chgate_clickhouse_up", {{"endpoint", "ch1:9000"}}), 1);
}

TEST(MetricsTest, TheWildcardServesIPv6AndIPv4AndLoopbackV6ServesIPv6) {
  Metrics metrics;
  auto every = metrics.StartServer("[::]:0");
  ASSERT_TRUE(every.ok()) << every.status();
  const uint16_t port = metrics.port();
  for (bool ipv6 : {true, false}) {
    const Exposition e = Parse(HttpGet(port, "/metrics", ipv6).value_or(""));
    EXPECT_EQ(e.types.count("chgate_buffered_bytes"), 1u) << (ipv6 ? "::1" : "127.0.0.1");
  }
  Metrics v6_only;
  auto loopback = v6_only.StartServer("[::1]:0");
  ASSERT_TRUE(loopback.ok()) << loopback.status();
  EXPECT_EQ(Parse(HttpGet(v6_only.port(), "/metrics", true).value_or(""))
                .types.count("chgate_buffered_bytes"),
            1u);
}

TEST_F(ScrapeTest, BusyPortIsUnavailable) {
  Metrics other;
  const std::string address = "127.0.0.1:" + std::to_string(port_);
  auto busy = other.StartServer(address);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), absl::StatusCode::kUnavailable) << busy.status();
  EXPECT_NE(busy.status().message().find(address), std::string::npos) << busy.status();
  EXPECT_EQ(other.port(), 0);
}

TEST(MetricsTest, MalformedAddressIsInvalidArgument) {
  Metrics metrics;
  for (const std::string address :
       {"", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000", "localhost:9464s",
        "127.0.0.1:1,127.0.0.1:2", "::1:9464", "[::1]9464"}) {
    auto exposer = metrics.StartServer(address);
    ASSERT_FALSE(exposer.ok()) << address;
    EXPECT_EQ(exposer.status().code(), absl::StatusCode::kInvalidArgument) << exposer.status();
  }
}

TEST(MetricsTest, ResultLabels) {
  EXPECT_EQ(ResultLabel(absl::StatusCode::kOk), "ok");
  EXPECT_EQ(ResultLabel(absl::StatusCode::kInvalidArgument), "invalid");
  EXPECT_EQ(ResultLabel(absl::StatusCode::kNotFound), "not_found");
  EXPECT_EQ(ResultLabel(absl::StatusCode::kResourceExhausted), "resource_exhausted");
  EXPECT_EQ(ResultLabel(absl::StatusCode::kUnavailable), "unavailable");
  EXPECT_EQ(ResultLabel(absl::StatusCode::kDeadlineExceeded), "deadline_exceeded");
  EXPECT_EQ(ResultLabel(absl::StatusCode::kCancelled), "cancelled");
  EXPECT_EQ(ResultLabel(absl::StatusCode::kInternal), "error");
  EXPECT_EQ(StatusCodeLabel(absl::StatusCode::kDeadlineExceeded), "DEADLINE_EXCEEDED");
  EXPECT_EQ(ClickHouseCodeLabel(241), "241");
}

TEST_F(ScrapeTest, MetricNamesMatchWhatIsScrapedAndFollowConventions) {
  PopulateEverything();
  const Exposition e = Scrape();
  const std::vector<std::string> names = Metrics::MetricNames();
  const std::set<std::string> listed(names.begin(), names.end());
  EXPECT_EQ(listed.size(), names.size()) << "duplicate names";

  std::set<std::string> scraped;
  for (const auto& [name, type] : e.types) scraped.insert(name);
  EXPECT_EQ(scraped, listed);

  for (const auto& [name, type] : e.types) {
    EXPECT_FALSE(e.helps.at(name).empty()) << name;
    // chgate's own metrics, or the process metrics under their conventional names.
    EXPECT_TRUE(name.rfind("chgate_", 0) == 0 || name.rfind("process_", 0) == 0) << name;
    const bool total = name.size() > 6 && name.substr(name.size() - 6) == "_total";
    EXPECT_EQ(total, type == "counter") << name << " is a " << type;
  }
}

// Absolute path of `program` on PATH, or empty.
std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path == nullptr ? "" : path;
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

TEST_F(ScrapeTest, PromtoolAcceptsTheExposition) {
  const std::string promtool = FindOnPath("promtool");
  if (promtool.empty()) {
    const char* require = std::getenv("CHGATE_REQUIRE_PROMTOOL");
    if (require != nullptr && std::string(require) == "1") {
      FAIL() << "promtool is not on PATH and CHGATE_REQUIRE_PROMTOOL=1 "
                "(apt-get install -y --no-install-recommends prometheus)";
    }
    GTEST_SKIP() << "promtool is not on PATH, so `promtool check metrics` was not run "
                    "(apt-get install -y --no-install-recommends prometheus); the rest of the "
                    "exposition checks ran";
  }
  PopulateEverything();
  const std::string text = ScrapeText();
  ASSERT_FALSE(text.empty());

  std::string file_name = ::testing::TempDir() + "chgate_metrics_test_XXXXXX";
  const int fd = ::mkstemp(file_name.data());
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  const std::string command = "'" + promtool + "' check metrics < " + file_name + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr) << std::strerror(errno);
  std::string output;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  const int status = ::pclose(pipe);
  ::unlink(file_name.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << "promtool did not exit normally";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "promtool check metrics reported problems:\n"
                                    << output << "\nin this exposition:\n"
                                    << text;
  EXPECT_EQ(output, "") << "promtool check metrics printed:\n" << output;
}

}  // namespace
}  // namespace chgate::metrics
