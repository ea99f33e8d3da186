// A stand-in for chgate's metrics endpoint in the client tests: an HTTP server on
// 127.0.0.1:<free port> that answers each connection with the next of its canned responses (the
// last one repeats) and records the requests. One thread; stopped on destruction. Thread-safe.
#pragma once

#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace chgate::client::testing {

class CannedHttpServer {
 public:
  explicit CannedHttpServer(std::vector<std::string> responses);
  ~CannedHttpServer();
  CannedHttpServer(const CannedHttpServer&) = delete;
  CannedHttpServer& operator=(const CannedHttpServer&) = delete;

  // http://127.0.0.1:<port><path>
  std::string url(const std::string& path = "/metrics") const;

  // The requests received so far (request line and headers), in order.
  std::vector<std::string> requests() const;

  // An HTTP/1.0 response with `body` and its Content-Length.
  static std::string Response(const std::string& body, const std::string& status = "200 OK");

 private:
  void Serve();

  const std::vector<std::string> responses_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::vector<std::string> requests_ ABSL_GUARDED_BY(mu_);
};

// A Prometheus text page with process_cpu_seconds_total = `cpu_seconds` among look-alike names
// (process_cpu_seconds, process_cpu_seconds_total_created), comments and a labelled sample
// with a timestamp.
std::string MetricsPage(const std::string& cpu_seconds);

}  // namespace chgate::client::testing
