#include "server/metrics/http_server.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <asio.hpp>
#include <cerrno>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace chgate::metrics {
namespace {

using asio::ip::tcp;

constexpr size_t kMaxRequestBytes = 8 << 10;
constexpr int kIoTimeoutSeconds = 5;

struct HostPort {
  std::string host;  // without brackets
  uint16_t port = 0;
};

absl::StatusOr<HostPort> SplitAddress(const std::string& address) {
  const auto bad = [&address] {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics address \"", address, "\" is not host:port with a port from 0 to 65535"));
  };
  HostPort out;
  std::string port_text;
  if (!address.empty() && address[0] == '[') {
    const size_t close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') {
      return bad();
    }
    out.host = address.substr(1, close - 1);
    port_text = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos) return bad();
    out.host = address.substr(0, colon);
    port_text = address.substr(colon + 1);
    if (out.host.find(':') != std::string::npos) return bad();  // IPv6 needs brackets
  }
  uint32_t port = 0;
  if (port_text.empty() || port_text.size() > 5 ||
      !std::all_of(port_text.begin(), port_text.end(),
                   [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) ||
      !absl::SimpleAtoi(port_text, &port) || port > 65535) {
    return bad();
  }
  out.port = static_cast<uint16_t>(port);
  return out;
}

void SetTimeouts(tcp::socket& socket) {
  timeval tv{};
  tv.tv_sec = kIoTimeoutSeconds;
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

std::string Response(absl::string_view status, absl::string_view content_type,
                     const std::string& body, bool head) {
  std::string out =
      absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                   "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n");
  if (!head) out += body;
  return out;
}

}  // namespace

struct HttpServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::function<Page()> render;
  std::thread thread;
  uint16_t port = 0;

  // Binds `endpoint`; for the IPv6 wildcard, as one socket taking IPv4 too.
  asio::error_code Bind(const tcp::endpoint& endpoint) {
    asio::error_code ec;
    acceptor.open(endpoint.protocol(), ec);
    if (ec) return ec;
    acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (endpoint.address().is_v6() && endpoint.address().is_unspecified()) {
      acceptor.set_option(asio::ip::v6_only(false), ec);
    }
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      asio::error_code ignored;
      acceptor.close(ignored);
    }
    return ec;
  }

  void Accept() {
    acceptor.async_accept([this](const asio::error_code& ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) Serve(std::move(socket));
      Accept();
    });
  }

  void Serve(tcp::socket socket) {
    SetTimeouts(socket);
    asio::error_code ec;
    asio::streambuf request(kMaxRequestBytes);
    asio::read_until(socket, request, "\r\n\r\n", ec);
    std::string reply;
    if (ec && ec != asio::error::not_found) return;  // timeout, reset, closed early
    if (ec == asio::error::not_found) {
      reply = Response("431 Request Header Fields Too Large", "text/plain", "", false);
    } else {
      std::istream in(&request);
      std::string method, target;
      in >> method >> target;
      const bool head = method == "HEAD";
      const std::string path = target.substr(0, target.find('?'));
      if (method != "GET" && !head) {
        reply = Response("405 Method Not Allowed", "text/plain", "GET /metrics only\n", false);
      } else if (path != "/metrics") {
        reply = Response("404 Not Found", "text/plain", "chgate serves /metrics\n", head);
      } else {
        const Page page = render();
        reply = Response("200 OK", page.content_type, page.body, head);
      }
    }
    asio::write(socket, asio::buffer(reply), ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& address,
                                                              std::function<Page()> render) {
  absl::StatusOr<HostPort> where = SplitAddress(address);
  if (!where.ok()) return where.status();
  auto impl = std::make_unique<Impl>();
  impl->render = std::move(render);
  const auto cannot_bind = [&address](const std::string& why) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", address,
        ": the address cannot be bound (port in use, not a local address, or permission "
        "denied): ",
        why));
  };
  std::vector<tcp::endpoint> candidates;
  asio::error_code ec;
  if (where->host.empty() || where->host == "::") {
    // Every address: dual-stack IPv6, or IPv4 alone where the kernel has no IPv6.
    candidates = {tcp::endpoint(tcp::v6(), where->port), tcp::endpoint(tcp::v4(), where->port)};
  } else if (asio::ip::address literal = asio::ip::make_address(where->host, ec); !ec) {
    candidates = {tcp::endpoint(literal, where->port)};
  } else {
    tcp::resolver resolver(impl->io);
    auto results = resolver.resolve(where->host, std::to_string(where->port), ec);
    if (ec) return cannot_bind(absl::StrCat("cannot resolve ", where->host, ": ", ec.message()));
    for (const auto& r : results) candidates.push_back(r.endpoint());
  }
  std::string errors;
  bool bound = false;
  for (const tcp::endpoint& endpoint : candidates) {
    ec = impl->Bind(endpoint);
    if (!ec) {
      bound = true;
      break;
    }
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", endpoint.address().to_string(), ": ",
                    ec.message());
    // An address family the kernel lacks: try the next candidate; anything else (the port is
    // taken) is the answer.
    if (ec.value() != EAFNOSUPPORT && ec.value() != EADDRNOTAVAIL) {
      break;
    }
  }
  if (!bound) return cannot_bind(errors);
  impl->port = impl->acceptor.local_endpoint().port();
  impl->Accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  asio::post(impl_->io, [impl = impl_.get()] {
    asio::error_code ignored;
    impl->acceptor.close(ignored);
  });
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

uint16_t HttpServer::port() const { return impl_->port; }

}  // namespace chgate::metrics
