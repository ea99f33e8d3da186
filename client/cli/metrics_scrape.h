// Reading a number off a Prometheus endpoint, for `chgate-cli bench --metrics-url`: the URL, one
// plain HTTP/1.0 GET over a TCP socket (no TLS, no proxy, no redirects), and the text exposition
// format's samples. Plain functions, thread-safe; FetchMetricsPage blocks for at most `timeout`
// per socket operation.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace chgate::cli {

// "http://HOST:PORT/PATH" taken apart. HOST may be a name, an IPv4 address or "[IPv6]".
struct MetricsUrl {
  std::string host;  // without the brackets of an IPv6 address
  std::string port;  // "80" when the URL names none
  std::string path;  // "/metrics" when the URL has none
};

// Parses `url`. Returns InvalidArgument for another scheme than http://, an empty host, a port
// that is not a number from 1 to 65535, or a URL with user info or a fragment.
absl::StatusOr<MetricsUrl> ParseMetricsUrl(std::string_view url);

// GETs `url` and returns the body of a 200 response. Errors: Unavailable when no address of the
// host accepts the connection (or the name does not resolve), DeadlineExceeded when a socket
// operation takes longer than `timeout`, FailedPrecondition for a response that is not HTTP or
// not 200, Unimplemented for a chunked body, ResourceExhausted beyond 64 MiB.
absl::StatusOr<std::string> FetchMetricsPage(const MetricsUrl& url, absl::Duration timeout);

// The value of the first sample named exactly `name` in a Prometheus text-format `page`
// (labels, if any, are ignored; comments and other metrics are skipped). NotFound when there is
// none, InvalidArgument when its value is not a number.
absl::StatusOr<double> FindPrometheusSample(std::string_view page, std::string_view name);

}  // namespace chgate::cli
