// The metrics page reader of `chgate-cli bench --metrics-url`: URLs, one HTTP GET against a
// canned server on 127.0.0.1:0, and Prometheus text samples from literal pages.
#include "client/cli/metrics_scrape.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "tests/unit/client/canned_http_server.h"
#include "tests/unit/client/fake_ingest.h"

namespace chgate::cli {
namespace {

using client::testing::CannedHttpServer;
using client::testing::MetricsPage;
using ::testing::HasSubstr;

TEST(PrometheusTest, FindsTheSampleNamedExactly) {
  EXPECT_EQ(FindPrometheusSample(MetricsPage("12.5"), "process_cpu_seconds_total").value(), 12.5);
  EXPECT_EQ(FindPrometheusSample(MetricsPage("3e2"), "process_cpu_seconds_total").value(), 300);
  EXPECT_EQ(FindPrometheusSample(MetricsPage("1"), "process_cpu_seconds").value(), 99);
  EXPECT_EQ(FindPrometheusSample(MetricsPage("1"), "chgate_ingest_requests_total").value(), 12);
  // Labels may hold '}' and escaped quotes; the value and timestamp follow them.
  EXPECT_EQ(FindPrometheusSample("m{a=\"x}\\\"y\",b=\"\"} 7.25 1700000000000\r\n", "m").value(),
            7.25);
  EXPECT_EQ(FindPrometheusSample("  m +Inf\n", "m").value(), HUGE_VAL);
  EXPECT_EQ(FindPrometheusSample(MetricsPage("1"), "process_cpu").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(FindPrometheusSample("", "m").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindPrometheusSample("# m 1\n", "m").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindPrometheusSample("m abc\n", "m").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FindPrometheusSample("m{a=\"1\" 5\n", "m").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MetricsUrlTest, TakesHttpUrlsApart) {
  MetricsUrl url = ParseMetricsUrl("http://127.0.0.1:9464/metrics").value();
  EXPECT_EQ(url.host, "127.0.0.1");
  EXPECT_EQ(url.port, "9464");
  EXPECT_EQ(url.path, "/metrics");
  url = ParseMetricsUrl("http://[::1]:29812/x?y=1").value();
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.port, "29812");
  EXPECT_EQ(url.path, "/x?y=1");
  url = ParseMetricsUrl("http://chgate").value();
  EXPECT_EQ(url.host, "chgate");
  EXPECT_EQ(url.port, "80");
  EXPECT_EQ(url.path, "/metrics");
  for (const char* bad : {"https://h:1/metrics", "h:1/metrics", "http://:80/", "http://h:0/",
                          "http://h:65536/", "http://h:abc/", "http://h:/", "http://u@h:1/",
                          "http://[::1/", "http://h:1/m#top", "http://"}) {
    EXPECT_EQ(ParseMetricsUrl(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(FetchMetricsPageTest, GetsTheBodyOfA200) {
  CannedHttpServer server({CannedHttpServer::Response(MetricsPage("4.5") + "trailing junk"),
                           CannedHttpServer::Response("gone", "404 Not Found")});
  // Content-Length says where the body ends.
  std::string body = MetricsPage("4.5") + "trailing junk";
  CannedHttpServer exact(
      {absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", body.size() - 13, "\r\n\r\n", body)});
  EXPECT_EQ(FetchMetricsPage(ParseMetricsUrl(exact.url()).value(), absl::Seconds(10)).value(),
            MetricsPage("4.5"));
  EXPECT_EQ(FetchMetricsPage(ParseMetricsUrl(server.url()).value(), absl::Seconds(10)).value(),
            MetricsPage("4.5") + "trailing junk");
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0], HasSubstr("GET /metrics HTTP/1.0\r\n"));
  EXPECT_THAT(server.requests()[0], HasSubstr("\r\nHost: 127.0.0.1:"));
  absl::Status not_found =
      FetchMetricsPage(ParseMetricsUrl(server.url("/other")).value(), absl::Seconds(10)).status();
  EXPECT_EQ(not_found.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(not_found.message(), HasSubstr("404 Not Found"));
  EXPECT_THAT(server.requests()[1], HasSubstr("GET /other HTTP/1.0\r\n"));
}

TEST(FetchMetricsPageTest, ReportsWhatIsNotAUsablePage) {
  CannedHttpServer garbage({"SSH-2.0-OpenSSH\r\n\r\n"});
  EXPECT_EQ(
      FetchMetricsPage(ParseMetricsUrl(garbage.url()).value(), absl::Seconds(10)).status().code(),
      absl::StatusCode::kFailedPrecondition);
  CannedHttpServer chunked({"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"});
  EXPECT_EQ(
      FetchMetricsPage(ParseMetricsUrl(chunked.url()).value(), absl::Seconds(10)).status().code(),
      absl::StatusCode::kUnimplemented);
  CannedHttpServer short_body({"HTTP/1.0 200 OK\r\nContent-Length: 100\r\n\r\nabc"});
  EXPECT_EQ(FetchMetricsPage(ParseMetricsUrl(short_body.url()).value(), absl::Seconds(10))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  const std::string nobody = absl::StrCat("http://", client::testing::UnusedAddress(), "/metrics");
  EXPECT_EQ(FetchMetricsPage(ParseMetricsUrl(nobody).value(), absl::Seconds(10)).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace chgate::cli
