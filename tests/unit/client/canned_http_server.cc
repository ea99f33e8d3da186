#include "tests/unit/client/canned_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace chgate::client::testing {

CannedHttpServer::CannedHttpServer(std::vector<std::string> responses)
    : responses_(std::move(responses)) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  if (responses_.empty() || fd_ < 0 ||
      ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd_, 8) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    std::abort();
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { Serve(); });
}

CannedHttpServer::~CannedHttpServer() {
  ::shutdown(fd_, SHUT_RDWR);  // wakes accept()
  thread_.join();
  ::close(fd_);
}

std::string CannedHttpServer::url(const std::string& path) const {
  return absl::StrCat("http://127.0.0.1:", port_, path);
}

std::vector<std::string> CannedHttpServer::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

std::string CannedHttpServer::Response(const std::string& body, const std::string& status) {
  return absl::StrCat("HTTP/1.0 ", status,
                      "\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: ",
                      body.size(), "\r\n\r\n", body);
}

void CannedHttpServer::Serve() {
  size_t served = 0;
  while (true) {
    const int client = ::accept(fd_, nullptr, nullptr);
    if (client < 0) return;
    std::string request;
    char buffer[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(client, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      request.append(buffer, static_cast<size_t>(n));
    }
    const std::string& response = responses_[std::min(served++, responses_.size() - 1)];
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(request);
    }
    for (size_t sent = 0; sent < response.size();) {
      const ssize_t n =
          ::send(client, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    ::close(client);
  }
}

std::string MetricsPage(const std::string& cpu_seconds) {
  return absl::StrCat(
      "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
      "# TYPE process_cpu_seconds_total counter\n"
      "process_cpu_seconds_total_created 1.7e9\n"
      "process_cpu_seconds 99\n"
      "chgate_ingest_requests_total{table=\"db.t\",result=\"ok\"} 12 1700000000000\n"
      "process_cpu_seconds_total ",
      cpu_seconds, "\n");
}

}  // namespace chgate::client::testing
