// The collectables: families built at scrape time from the process (/proc/self), the native
// layer's byte counters, the pool, TLS to ClickHouse and on the API, and the spool.
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/metrics/families.h"
#include "server/metrics/metrics.h"
#include "text/status_macros.h"

namespace chgate::metrics {

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

}  // namespace chgate::metrics
