#include "server/clickhouse/wire/transport.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "asio/connect.hpp"
#include "asio/io_context.hpp"
#include "asio/ip/address.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/post.hpp"
#include "asio/ssl/context.hpp"
#include "asio/ssl/error.hpp"
#include "asio/ssl/stream.hpp"
#include "asio/write.hpp"
#include "server/clickhouse/wire/tls.h"

namespace chgate::clickhouse {
namespace {

using Tcp = asio::ip::tcp;

// Spans at least this long are encrypted straight from the caller's memory; shorter ones are
// packed together so that they fill records instead of each becoming a tiny record (and a
// socket write) of its own. One TLS record carries at most 16 KiB of plaintext.
constexpr size_t kTlsRecordPayload = 16 * 1024;

// What one asynchronous step ended with.
struct Outcome {
  asio::error_code ec;
  size_t bytes = 0;
  bool timed_out = false;
};

std::string Asn1TimeText(const ASN1_TIME* t) {
  if (t == nullptr) return "?";
  BIO* bio = ::BIO_new(::BIO_s_mem());
  ::ASN1_TIME_print(bio, t);
  char* data = nullptr;
  long len = ::BIO_get_mem_data(bio, &data);
  std::string text(data, static_cast<size_t>(std::max(len, 0L)));
  ::BIO_free(bio);
  return text;
}

// "CN=ch.example.com, names DNS:ch.example.com IP:10.0.0.1, valid 2026-... until 2027-..."
std::string CertificateSummary(X509* cert) {
  if (cert == nullptr) return "";
  std::string subject;
  char buf[256];
  if (::X509_NAME_oneline(::X509_get_subject_name(cert), buf, sizeof(buf)) != nullptr) {
    subject = buf;
  }
  std::vector<std::string> names;
  auto* sans =
      static_cast<GENERAL_NAMES*>(::X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (sans != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(sans) && names.size() < 8; ++i) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(sans, i);
      if (name->type == GEN_DNS) {
        const ASN1_STRING* s = name->d.dNSName;
        names.push_back(absl::StrCat(
            "DNS:", absl::string_view(reinterpret_cast<const char*>(::ASN1_STRING_get0_data(s)),
                                      static_cast<size_t>(::ASN1_STRING_length(s)))));
      } else if (name->type == GEN_IPADD) {
        const ASN1_OCTET_STRING* s = name->d.iPAddress;
        const unsigned char* p = ::ASN1_STRING_get0_data(s);
        if (::ASN1_STRING_length(s) == 4) {
          names.push_back(absl::StrCat("IP:", p[0], ".", p[1], ".", p[2], ".", p[3]));
        } else {
          names.push_back("IP:(IPv6)");
        }
      }
    }
    GENERAL_NAMES_free(sans);
  }
  return absl::StrCat("subject ", subject.empty() ? "(none)" : subject, ", names [",
                      absl::StrJoin(names, " "), "], valid from ",
                      Asn1TimeText(::X509_get0_notBefore(cert)), " until ",
                      Asn1TimeText(::X509_get0_notAfter(cert)));
}

bool IsIpAddress(const std::string& host) {
  asio::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

class Transport::Impl {
 public:
  Impl() : socket(io) {}
  ~Impl() {
    ssl.reset();
    asio::error_code ignored;
    socket.close(ignored);
  }

  // Starts an asynchronous step through `initiate(handler)` and runs it for at most `timeout`;
  // a step still pending then is cancelled (and its handler run) before returning.
  template <typename Initiate>
  Outcome Run(Initiate&& initiate, absl::Duration timeout) {
    Outcome out;
    bool done = false;
    initiate([&](const asio::error_code& ec, size_t bytes) {
      out.ec = ec;
      out.bytes = bytes;
      done = true;
    });
    io.restart();
    if (timeout == absl::InfiniteDuration()) {
      io.run();
    } else {
      io.run_for(absl::ToChronoNanoseconds(std::max(timeout, absl::ZeroDuration())));
    }
    if (!done) {
      asio::error_code ignored;
      socket.cancel(ignored);
      io.restart();
      io.run();
      // The step may have completed in the meantime; only an aborted one timed out.
      out.timed_out = out.ec == asio::error::operation_aborted && !shut_down.load();
    }
    return out;
  }

  // Maps the end of a read or write to a status.
  absl::Status IoError(const Outcome& out, const char* what, absl::Duration timeout) const {
    if (shut_down.load()) return absl::CancelledError(absl::StrCat(what, ": socket shut down"));
    if (out.timed_out) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": timed out after ", absl::FormatDuration(timeout)));
    }
    if (out.ec == asio::error::eof || out.ec == asio::ssl::error::stream_truncated) {
      return absl::UnavailableError("connection closed by the server");
    }
    std::string reason = out.ec.message();
    if (ssl && out.ec.category() == asio::error::get_ssl_category()) {
      reason = absl::StrCat("TLS: ", reason);
    }
    return absl::UnavailableError(absl::StrCat(what, ": ", reason));
  }

  absl::StatusOr<size_t> Read(char* buf, size_t n, absl::Duration timeout, bool timeout_ok) {
    if (!socket.is_open()) return absl::FailedPreconditionError("read on a closed connection");
    if (shut_down.load()) return absl::CancelledError("read: socket shut down");
    size_t got = 0;
    while (true) {
      Outcome out = Run(
          [&](auto handler) {
            auto target = asio::buffer(buf + got, n - got);
            if (ssl) {
              ssl->async_read_some(target, handler);
            } else {
              socket.async_read_some(target, handler);
            }
          },
          timeout);
      got += out.bytes;
      if (out.bytes == 0 || out.ec) {
        if (got > 0 && !shut_down.load()) return got;  // report the error on the next read
        if (out.timed_out && timeout_ok) return 0;
        return IoError(out, "read", timeout);
      }
      // Plain TCP hands over everything the kernel holds at once. TLS yields one record (at
      // most 16 KiB) per read: keep reading while more is already here, so the caller's large
      // buffer fills and compression frames do not straddle reads needlessly.
      if (!ssl || n - got < kTlsRecordPayload) return got;
      asio::error_code ec;
      if (::SSL_has_pending(ssl->native_handle()) == 0 && socket.available(ec) == 0) return got;
    }
  }

  // Writes `buffers` (consumed in place), each wait bounded by `timeout`.
  absl::Status WriteBuffers(std::vector<asio::const_buffer>& pieces, absl::Duration timeout) {
    size_t first = 0;
    while (first < pieces.size()) {
      if (pieces[first].size() == 0) {
        ++first;
        continue;
      }
      Outcome out = Run(
          [&](auto handler) {
            if (ssl) {
              // An SSL stream writes from its first buffer only: hand it one at a time.
              ssl->async_write_some(pieces[first], handler);
            } else {
              socket.async_write_some(
                  std::span<const asio::const_buffer>(pieces.data() + first, pieces.size() - first),
                  handler);
            }
          },
          timeout);
      if (out.ec || out.bytes == 0) return IoError(out, "write", timeout);
      bytes_written += out.bytes;
      size_t done = out.bytes;
      while (done > 0 && done >= pieces[first].size()) {
        done -= pieces[first].size();
        ++first;
      }
      if (done > 0) pieces[first] += done;
    }
    return absl::OkStatus();
  }

  absl::Status Write(std::span<const iovec> spans, absl::Duration timeout) {
    if (!socket.is_open()) return absl::FailedPreconditionError("write on a closed connection");
    if (shut_down.load()) return absl::CancelledError("write: socket shut down");
    buffers.clear();
    if (!ssl) {
      for (const iovec& v : spans) buffers.emplace_back(v.iov_base, v.iov_len);
      return WriteBuffers(buffers, timeout);
    }
    // Pack runs of small spans into `staging` (sized first, so pointers into it stay valid).
    size_t small = 0;
    for (const iovec& v : spans) {
      if (v.iov_len < kTlsRecordPayload) small += v.iov_len;
    }
    staging.resize(small);
    size_t used = 0;
    size_t run_start = 0;
    auto close_run = [&] {
      if (used > run_start) buffers.emplace_back(staging.data() + run_start, used - run_start);
      run_start = used;
    };
    for (const iovec& v : spans) {
      if (v.iov_len >= kTlsRecordPayload) {
        close_run();
        buffers.emplace_back(v.iov_base, v.iov_len);
        continue;
      }
      std::memcpy(staging.data() + used, v.iov_base, v.iov_len);
      used += v.iov_len;
      if (used - run_start >= kTlsRecordPayload) close_run();
    }
    close_run();
    return WriteBuffers(buffers, timeout);
  }

  // Adds the names of certificate problems (found by OpenSSL while verifying) to `reason`.
  absl::Status HandshakeError(const Outcome& out, const std::string& peer,
                              const std::string& server_name, const TlsClientOptions* client,
                              absl::Duration timeout) {
    const std::string prefix = absl::StrCat("TLS handshake with ", peer, " ");
    if (shut_down.load()) return absl::CancelledError(prefix + "cancelled");
    if (out.timed_out) {
      return absl::DeadlineExceededError(
          absl::StrCat(prefix, "timed out after ", absl::FormatDuration(timeout),
                       " (is this a TLS port? a plain native port never answers a TLS hello)"));
    }
    if (verify_error != X509_V_OK) {
      const std::string cert = CertificateSummary(verify_cert.get());
      std::string what;
      switch (verify_error) {
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
        case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
        case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
        case X509_V_ERR_CERT_UNTRUSTED:
          what = absl::StrCat(
              "failed: unknown CA: the server's certificate is not signed by a trusted CA (",
              client != nullptr && !client->ca_file.empty()
                  ? absl::StrCat("CA file ", client->ca_file)
                  : std::string("the system's trust store"),
              "); set --clickhouse-tls-ca-file to the CA that signed it");
          break;
        case X509_V_ERR_HOSTNAME_MISMATCH:
        case X509_V_ERR_IP_ADDRESS_MISMATCH:
          what = absl::StrCat("failed: name mismatch: the server's certificate is not valid for '",
                              server_name,
                              "'; connect with a name the certificate lists or set "
                              "--clickhouse-tls-server-name");
          break;
        case X509_V_ERR_CERT_HAS_EXPIRED:
          what = verify_depth == 0
                     ? std::string("failed: the server's certificate has expired")
                     : absl::StrCat("failed: a CA certificate in the server's chain (depth ",
                                    verify_depth, ") has expired");
          break;
        case X509_V_ERR_CERT_NOT_YET_VALID:
          what = "failed: the server's certificate is not valid yet (check both clocks)";
          break;
        default:
          what = absl::StrCat("failed: certificate verification: ",
                              ::X509_verify_cert_error_string(verify_error));
      }
      return absl::UnavailableError(absl::StrCat(
          prefix, what, cert.empty() ? "" : " [certificate: ", cert, cert.empty() ? "" : "]"));
    }
    if (out.ec.category() == asio::error::get_ssl_category()) {
      const int reason = ERR_GET_REASON(static_cast<unsigned long>(out.ec.value()));
      switch (reason) {
        case SSL_R_WRONG_VERSION_NUMBER:
        case SSL_R_PACKET_LENGTH_TOO_LONG:
        case SSL_R_UNKNOWN_PROTOCOL:
        case SSL_R_HTTP_REQUEST:
          return absl::UnavailableError(absl::StrCat(
              prefix,
              "failed: the server did not answer in TLS; this looks like a plain (non-TLS) "
              "port: use the secure native port (tcp_port_secure, usually 9440) or turn TLS "
              "off for this endpoint (",
              out.ec.message(), ")"));
        case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
        case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
          if (client != nullptr && client->cert_file.empty()) {
            return absl::UnavailableError(
                absl::StrCat(prefix,
                             "failed: the server requires a client certificate; set "
                             "--clickhouse-tls-cert-file and --clickhouse-tls-key-file (",
                             out.ec.message(), ")"));
          }
          break;
        case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
        case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
        case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
          return absl::UnavailableError(
              absl::StrCat(prefix, "failed: the server refused chgate's client certificate (",
                           out.ec.message(), ")"));
        default:
          break;
      }
      return absl::UnavailableError(absl::StrCat(prefix, "failed: ", out.ec.message()));
    }
    if (out.ec == asio::error::eof || out.ec == asio::ssl::error::stream_truncated ||
        out.ec == asio::error::connection_reset) {
      return absl::UnavailableError(absl::StrCat(
          prefix,
          "failed: the server closed the connection during the handshake (a plain port, or "
          "the server refused the TLS parameters)"));
    }
    return absl::UnavailableError(absl::StrCat(prefix, "failed: ", out.ec.message()));
  }

  asio::io_context io{1};
  Tcp::socket socket;
  std::shared_ptr<asio::ssl::context> ssl_context;
  std::optional<asio::ssl::stream<Tcp::socket&>> ssl;
  std::atomic<bool> shut_down{false};
  std::atomic<int> fd{-1};
  uint64_t bytes_written = 0;
  std::vector<asio::const_buffer> buffers;
  std::vector<char> staging;
  // The first certificate problem OpenSSL reported during the handshake.
  long verify_error = X509_V_OK;
  int verify_depth = 0;
  std::unique_ptr<X509, decltype(&::X509_free)> verify_cert{nullptr, &::X509_free};
};

Transport::Transport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Transport::~Transport() = default;

absl::StatusOr<std::unique_ptr<Transport>> Transport::Connect(const std::string& host,
                                                              uint16_t port,
                                                              const TransportOptions& options) {
  auto impl = std::make_unique<Impl>();
  const std::string peer = absl::StrCat(host, ":", port);
  asio::error_code ec;
  Tcp::resolver::results_type addresses;
  if (asio::ip::address address = asio::ip::make_address(host, ec); !ec) {
    addresses = Tcp::resolver::results_type::create(Tcp::endpoint(address, port), host,
                                                    std::to_string(port));
  } else {
    Tcp::resolver resolver(impl->io);
    addresses = resolver.resolve(host, std::to_string(port), ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", ec.message()));
    }
  }
  Outcome connected = impl->Run(
      [&](auto handler) {
        asio::async_connect(
            impl->socket, addresses,
            [handler](const asio::error_code& e, const Tcp::endpoint&) mutable { handler(e, 0); });
      },
      options.connect_timeout);
  if (connected.timed_out) {
    return absl::DeadlineExceededError(absl::StrCat("connect to ", peer, ": timed out after ",
                                                    absl::FormatDuration(options.connect_timeout)));
  }
  if (connected.ec) {
    return absl::UnavailableError(absl::StrCat("connect to ", peer, ": ", connected.ec.message()));
  }
  impl->socket.set_option(Tcp::no_delay(true), ec);
  impl->fd.store(impl->socket.native_handle());
  if (options.tls == nullptr) return std::unique_ptr<Transport>(new Transport(std::move(impl)));

  const TlsClientOptions& tls = options.tls->options();
  impl->ssl_context = options.tls->Current();
  impl->ssl.emplace(impl->socket, *impl->ssl_context);
  SSL* ssl = impl->ssl->native_handle();
  // Buffers stay allocated for the connection's life instead of being freed when idle.
  ::SSL_clear_mode(ssl, SSL_MODE_RELEASE_BUFFERS);
  const std::string server_name = tls.server_name.empty() ? host : tls.server_name;
  const bool name_is_ip = IsIpAddress(server_name);
  if (!name_is_ip) ::SSL_set_tlsext_host_name(ssl, server_name.c_str());
  if (!tls.insecure_skip_verify) {
    int set = name_is_ip
                  ? ::X509_VERIFY_PARAM_set1_ip_asc(::SSL_get0_param(ssl), server_name.c_str())
                  : ::SSL_set1_host(ssl, server_name.c_str());
    if (set != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("TLS server name '", server_name, "' cannot be checked"));
    }
    Impl* raw = impl.get();
    impl->ssl->set_verify_callback(
        [raw](bool preverified, asio::ssl::verify_context& ctx) {
          X509_STORE_CTX* store = ctx.native_handle();
          if (!preverified && raw->verify_error == X509_V_OK) {
            raw->verify_error = ::X509_STORE_CTX_get_error(store);
            raw->verify_depth = ::X509_STORE_CTX_get_error_depth(store);
            if (X509* cert = ::X509_STORE_CTX_get_current_cert(store); cert != nullptr) {
              ::X509_up_ref(cert);
              raw->verify_cert.reset(cert);
            }
          }
          return preverified;
        },
        ec);
  }
  Outcome handshake = impl->Run(
      [&](auto handler) {
        impl->ssl->async_handshake(asio::ssl::stream_base::client,
                                   [handler](const asio::error_code& e) mutable { handler(e, 0); });
      },
      options.handshake_timeout);
  if (handshake.ec || handshake.timed_out) {
    return impl->HandshakeError(handshake, peer, server_name, &tls, options.handshake_timeout);
  }
  return std::unique_ptr<Transport>(new Transport(std::move(impl)));
}

std::unique_ptr<Transport> Transport::AdoptPlain(int fd) {
  auto impl = std::make_unique<Impl>();
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  asio::error_code ec;
  impl->socket.assign(addr.ss_family == AF_INET6 ? Tcp::v6() : Tcp::v4(), fd, ec);
  impl->fd.store(fd);
  return std::unique_ptr<Transport>(new Transport(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<Transport>> Transport::AdoptTlsServer(
    int fd, std::shared_ptr<asio::ssl::context> context, absl::Duration handshake_timeout) {
  std::unique_ptr<Transport> transport = AdoptPlain(fd);
  Impl* impl = transport->impl_.get();
  impl->ssl_context = std::move(context);
  impl->ssl.emplace(impl->socket, *impl->ssl_context);
  ::SSL_clear_mode(impl->ssl->native_handle(), SSL_MODE_RELEASE_BUFFERS);
  Outcome handshake = impl->Run(
      [&](auto handler) {
        impl->ssl->async_handshake(asio::ssl::stream_base::server,
                                   [handler](const asio::error_code& e) mutable { handler(e, 0); });
      },
      handshake_timeout);
  if (handshake.ec || handshake.timed_out) {
    return impl->HandshakeError(handshake, "client", "", nullptr, handshake_timeout);
  }
  return transport;
}

absl::StatusOr<size_t> Transport::ReadSome(char* buf, size_t n, absl::Duration timeout) {
  return impl_->Read(buf, n, timeout, /*timeout_ok=*/false);
}

absl::StatusOr<size_t> Transport::TryReadSome(char* buf, size_t n, absl::Duration timeout) {
  return impl_->Read(buf, n, timeout, /*timeout_ok=*/true);
}

absl::Status Transport::WriteAll(std::span<const iovec> spans, absl::Duration timeout) {
  return impl_->Write(spans, timeout);
}

absl::Status Transport::WriteAll(const void* data, size_t n, absl::Duration timeout) {
  iovec v{const_cast<void*>(data), n};
  return impl_->Write(std::span<const iovec>(&v, 1), timeout);
}

bool Transport::InputPending() const {
  if (!impl_->socket.is_open()) return false;
  if (impl_->ssl && ::SSL_has_pending(impl_->ssl->native_handle()) != 0) return true;
  asio::error_code ec;
  return impl_->socket.available(ec) > 0 && !ec;
}

void Transport::Shutdown() {
  impl_->shut_down.store(true);
  if (int fd = impl_->fd.load(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
  // Also wakes a step that has no descriptor to wake yet (resolution, connect).
  Impl* impl = impl_.get();
  asio::post(impl->io, [impl] {
    asio::error_code ignored;
    impl->socket.cancel(ignored);
  });
}

bool Transport::tls() const { return impl_->ssl.has_value(); }

std::string Transport::Description() const {
  if (!impl_->ssl) return "plain";
  const SSL* ssl = impl_->ssl->native_handle();
  return absl::StrCat(::SSL_get_version(ssl), " ", ::SSL_get_cipher_name(ssl));
}

uint64_t Transport::bytes_written() const { return impl_->bytes_written; }

}  // namespace chgate::clickhouse
