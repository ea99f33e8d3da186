#include "client/cli/metrics_scrape.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/sdk/internal/strings.h"

namespace chgate::cli {

using client::internal::Sv;

namespace {

constexpr size_t kMaxResponseBytes = size_t{64} << 20;

// Closes the descriptor it holds.
class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

absl::Status SocketError(const MetricsUrl& url, const char* what, int error) {
  const std::string message =
      absl::StrCat(what, " http://", url.host, ":", url.port, url.path, ": ", std::strerror(error));
  if (error == EAGAIN || error == EWOULDBLOCK || error == EINPROGRESS) {
    return absl::DeadlineExceededError(absl::StrCat(message, " (timed out)"));
  }
  return absl::UnavailableError(message);
}

// A socket connected to one of the host's addresses, with `timeout` on every send and receive
// (Linux applies the send timeout to connect as well).
absl::StatusOr<int> Connect(const MetricsUrl& url, absl::Duration timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  if (const int rc = ::getaddrinfo(url.host.c_str(), url.port.c_str(), &hints, &addresses);
      rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve '", url.host, "': ", ::gai_strerror(rc)));
  }
  const timeval tv = absl::ToTimeval(timeout);
  int last_error = ECONNREFUSED;
  int fd = -1;
  for (addrinfo* a = addresses; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = errno;
      continue;
    }
    if (::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
        ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      last_error = errno;
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(addresses);
  if (fd < 0) return SocketError(url, "cannot connect to", last_error);
  return fd;
}

// The body of a complete HTTP response, or the reason it is not a usable 200.
absl::StatusOr<std::string> ResponseBody(const MetricsUrl& url, std::string response) {
  const std::string where = absl::StrCat("http://", url.host, ":", url.port, url.path);
  const size_t head_end = response.find("\r\n\r\n");
  if (!absl::StartsWith(response, "HTTP/") || head_end == std::string::npos) {
    return absl::FailedPreconditionError(absl::StrCat(where, " did not answer with HTTP"));
  }
  const std::vector<absl::string_view> lines =
      absl::StrSplit(absl::string_view(response.data(), head_end), "\r\n");
  const std::vector<absl::string_view> status = absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
  if (status.size() < 2 || status[1] != "200") {
    return absl::FailedPreconditionError(
        absl::StrCat(where, " answered '", lines[0], "' instead of 200"));
  }
  std::string body = response.substr(head_end + 4);
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos) continue;
    const std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(lines[i].substr(colon + 1));
    if (name == "transfer-encoding" && !absl::EqualsIgnoreCase(value, "identity")) {
      return absl::UnimplementedError(
          absl::StrCat(where, " sent a '", value, "' body, which this reader does not decode"));
    }
    size_t length = 0;
    if (name == "content-length" && absl::SimpleAtoi(value, &length)) {
      if (body.size() < length) {
        return absl::FailedPreconditionError(absl::StrCat(where, " closed the connection after ",
                                                          body.size(), " of ", length, " bytes"));
      }
      body.resize(length);
    }
  }
  return body;
}

}  // namespace

absl::StatusOr<MetricsUrl> ParseMetricsUrl(std::string_view url) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("'", Sv(url), "' is not ", why));
  };
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) return bad("an http:// URL");
  std::string_view rest = url.substr(kScheme.size());
  if (rest.find('#') != std::string_view::npos) return bad("a URL without a fragment");
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  MetricsUrl out;
  out.path = slash == std::string_view::npos ? "/metrics" : std::string(rest.substr(slash));
  if (authority.find('@') != std::string_view::npos) return bad("a URL without user info");
  std::string_view port;
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("a URL with a closed [IPv6] host");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return bad("a URL of the form http://[IPv6]:PORT/PATH");
      port = after.substr(1);
      if (port.empty()) return bad("a URL with a port after ':'");
    }
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) return bad("a URL with a port after ':'");
    }
  }
  if (out.host.empty()) return bad("a URL with a host");
  if (port.empty()) {
    out.port = "80";
  } else {
    uint32_t number = 0;
    if (!absl::SimpleAtoi(Sv(port), &number) || number == 0 || number > 65535 ||
        port.find_first_not_of("0123456789") != std::string_view::npos) {
      return bad("a URL with a port from 1 to 65535");
    }
    out.port = std::string(port);
  }
  return out;
}

absl::StatusOr<std::string> FetchMetricsPage(const MetricsUrl& url, absl::Duration timeout) {
  absl::StatusOr<int> fd = Connect(url, timeout);
  if (!fd.ok()) return fd.status();
  Socket socket(*fd);
  const bool v6 = url.host.find(':') != std::string::npos;
  const std::string request =
      absl::StrCat("GET ", url.path, " HTTP/1.0\r\nHost: ", v6 ? "[" : "", url.host, v6 ? "]" : "",
                   ":", url.port, "\r\nAccept: text/plain\r\nConnection: close\r\n\r\n");
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n =
        ::send(socket.fd(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SocketError(url, "cannot send to", errno);
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::recv(socket.fd(), buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SocketError(url, "cannot read from", errno);
    if (n == 0) break;
    response.append(buffer, static_cast<size_t>(n));
    if (response.size() > kMaxResponseBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("http://", url.host, ":", url.port, url.path, " sent more than 64 MiB"));
    }
  }
  return ResponseBody(url, std::move(response));
}

absl::StatusOr<double> FindPrometheusSample(std::string_view page, std::string_view name) {
  for (absl::string_view line : absl::StrSplit(Sv(page), '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    // The metric name ends at its labels or at the blank before the value.
    const size_t name_end = line.find_first_of("{ \t");
    if (name_end == absl::string_view::npos || line.substr(0, name_end) != Sv(name)) continue;
    absl::string_view rest = line.substr(name_end);
    if (rest[0] == '{') {
      // Label values are quoted and may hold '}' and escaped quotes.
      bool quoted = false;
      size_t i = 1;
      for (; i < rest.size(); ++i) {
        if (quoted && rest[i] == '\\') {
          ++i;
        } else if (rest[i] == '"') {
          quoted = !quoted;
        } else if (!quoted && rest[i] == '}') {
          break;
        }
      }
      if (i >= rest.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("the labels of ", Sv(name), " are not closed: '", line, "'"));
      }
      rest = rest.substr(i + 1);
    }
    rest = absl::StripLeadingAsciiWhitespace(rest);
    absl::string_view value = rest.substr(0, rest.find_first_of(" \t\r"));
    if (!value.empty() && value[0] == '+') value.remove_prefix(1);
    double number = 0;
    if (!absl::SimpleAtod(value, &number)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the value of ", Sv(name), " is not a number: '", line, "'"));
    }
    return number;
  }
  return absl::NotFoundError(absl::StrCat("no sample named ", Sv(name)));
}

}  // namespace chgate::cli
