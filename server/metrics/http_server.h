// HttpServer: the /metrics endpoint. A small HTTP/1.x server on asio, one thread, that answers
// GET (and HEAD) /metrics with a page rendered per request and closes the connection.
//
// Addresses: "host:port" or "[v6 address]:port". "[::]:port" listens on every IPv6 and IPv4
// address (one dual-stack socket), and on every IPv4 address where the kernel has no IPv6;
// "0.0.0.0:port" on every IPv4 address only. Port 0 picks a free port (see port()).
//
// Scrapes are rare and small, so connections are served one at a time; each read and write is
// bounded (5 s), so a stuck client cannot hold the endpoint longer than that. Thread-safe:
// destroying the server stops it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace chgate::metrics {

class HttpServer {
 public:
  // The page and its Content-Type.
  struct Page {
    std::string content_type;
    std::string body;
  };

  // InvalidArgument for an address that is not host:port with a port from 0 to 65535;
  // Unavailable when it cannot be bound (port in use, address not local, permission denied).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& address,
                                                           std::function<Page()> render);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace chgate::metrics
