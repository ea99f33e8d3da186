#include "server/clickhouse/wire/transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "asio/ssl/context.hpp"
#include "server/clickhouse/wire/tls.h"

namespace chgate::clickhouse {
namespace {

// Spans at least this long are encrypted straight from the caller's memory; shorter ones are
// packed together so that they fill records instead of each becoming a tiny record (and a
// socket write) of its own. One TLS record carries at most 16 KiB of plaintext.
constexpr size_t kTlsRecordPayload = 16 * 1024;
// OpenSSL reads ahead into a buffer of this size: one recv() takes in many records at once
// instead of one record (or one record header) per call.
constexpr size_t kTlsReadAhead = 256 * 1024;

absl::Time DeadlineAfter(absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) return absl::InfiniteFuture();
  return absl::Now() + std::max(timeout, absl::ZeroDuration());
}

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
  in6_addr v6{};
  in_addr v4{};
  return ::inet_pton(AF_INET, host.c_str(), &v4) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

bool WouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

// A socket BIO of our own: send() with MSG_NOSIGNAL (a peer that went away is an error, never a
// SIGPIPE), and each byte handed to the kernel counted. Its data is the connection's state.
struct SocketBioState {
  int fd = -1;
  uint64_t* bytes_written = nullptr;
};

int SocketBioWrite(BIO* bio, const char* data, int len) {
  auto* state = static_cast<SocketBioState*>(::BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  const ssize_t n = ::send(state->fd, data, static_cast<size_t>(len), MSG_NOSIGNAL);
  if (n > 0) {
    *state->bytes_written += static_cast<uint64_t>(n);
  } else if (n < 0 && (WouldBlock(errno) || errno == EINTR)) {
    BIO_set_retry_write(bio);
  }
  return static_cast<int>(n);
}

int SocketBioRead(BIO* bio, char* data, int len) {
  auto* state = static_cast<SocketBioState*>(::BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  const ssize_t n = ::recv(state->fd, data, static_cast<size_t>(len), 0);
  if (n < 0 && (WouldBlock(errno) || errno == EINTR)) BIO_set_retry_read(bio);
  return static_cast<int>(n);
}

long SocketBioCtrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

int SocketBioCreate(BIO* bio) {
  ::BIO_set_init(bio, 1);
  return 1;
}

BIO_METHOD* SocketBioMethod() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = ::BIO_meth_new(BIO_TYPE_SOURCE_SINK | ::BIO_get_new_index(), "chgate socket");
    ::BIO_meth_set_write(m, &SocketBioWrite);
    ::BIO_meth_set_read(m, &SocketBioRead);
    ::BIO_meth_set_ctrl(m, &SocketBioCtrl);
    ::BIO_meth_set_create(m, &SocketBioCreate);
    return m;
  }();
  return method;
}

// How a TLS handshake failed, for HandshakeError.
struct Failure {
  bool timed_out = false;
  bool closed = false;          // the peer closed or reset the connection
  unsigned long ssl_error = 0;  // OpenSSL's error code, when the failure is OpenSSL's
  std::string text;
};

}  // namespace

// The connection's descriptor (non-blocking), its SSL object with TLS, and the waits: every
// read and write is tried first and waits in poll() only when the socket has nothing to give
// or no room to take, so a stream of reads from a busy socket costs one system call each.
class Transport::Impl {
 public:
  enum class Ready { kYes, kTimedOut, kShutDown };

  ~Impl() {
    if (ssl != nullptr) ::SSL_free(ssl);
    if (const int f = fd.load(); f >= 0) ::close(f);
  }

  // Waits until the socket is ready for `events` (POLLIN or POLLOUT), shut down, or `deadline`.
  // An error or hang-up on the socket counts as ready: the next call reports it.
  Ready Wait(short events, absl::Time deadline) const {
    while (true) {
      if (shut_down.load()) return Ready::kShutDown;
      int ms = -1;
      if (deadline != absl::InfiniteFuture()) {
        const absl::Duration left = deadline - absl::Now();
        if (left <= absl::ZeroDuration()) return Ready::kTimedOut;
        ms = static_cast<int>(std::min<int64_t>(
            absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), INT_MAX));
      }
      pollfd p{fd.load(), events, 0};
      const int r = ::poll(&p, 1, ms);
      if (r > 0 || (r < 0 && errno != EINTR))
        return shut_down.load() ? Ready::kShutDown : Ready::kYes;
    }
  }

  absl::Status WaitError(Ready ready, const char* what, absl::Duration timeout) const {
    if (ready == Ready::kShutDown)
      return absl::CancelledError(absl::StrCat(what, ": socket shut down"));
    return absl::DeadlineExceededError(
        absl::StrCat(what, ": timed out after ", absl::FormatDuration(timeout)));
  }

  // The status of a failed system call on the socket (`err` is its errno; 0: end of stream).
  absl::Status SocketError(int err, const char* what) const {
    if (shut_down.load()) return absl::CancelledError(absl::StrCat(what, ": socket shut down"));
    if (err == 0) return absl::UnavailableError("connection closed by the server");
    return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(err)));
  }

  // The status of a failed SSL_read/SSL_write (`code` from SSL_get_error).
  absl::Status SslError(int code, const char* what) const {
    const int err = errno;
    if (shut_down.load()) return absl::CancelledError(absl::StrCat(what, ": socket shut down"));
    const unsigned long e = ::ERR_peek_last_error();
    switch (code) {
      case SSL_ERROR_ZERO_RETURN:
        return absl::UnavailableError("connection closed by the server");
      case SSL_ERROR_SYSCALL:
        if (e == 0) return SocketError(err, what);
        break;
      default:
        break;
    }
    if (ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
      return absl::UnavailableError("connection closed by the server");
    }
    return absl::UnavailableError(absl::StrCat(what, ": TLS: ", ErrorText(e)));
  }

  static std::string ErrorText(unsigned long e) {
    if (e == 0) return "unknown error";
    if (const char* reason = ::ERR_reason_error_string(e); reason != nullptr) return reason;
    char buf[256];
    ::ERR_error_string_n(e, buf, sizeof(buf));
    return buf;
  }

  absl::StatusOr<size_t> Read(char* buf, size_t n, absl::Duration timeout, bool timeout_ok) {
    if (fd.load() < 0) return absl::FailedPreconditionError("read on a closed connection");
    if (shut_down.load()) return absl::CancelledError("read: socket shut down");
    return ssl != nullptr ? ReadTls(buf, n, timeout, timeout_ok)
                          : ReadPlain(buf, n, timeout, timeout_ok);
  }

  absl::StatusOr<size_t> ReadPlain(char* buf, size_t n, absl::Duration timeout, bool timeout_ok) {
    absl::Time deadline = absl::InfinitePast();  // set at the first wait
    while (true) {
      const ssize_t r = ::recv(fd.load(), buf, n, 0);
      if (r > 0) return static_cast<size_t>(r);
      if (r == 0) return SocketError(0, "read");
      if (errno == EINTR) continue;
      if (!WouldBlock(errno)) return SocketError(errno, "read");
      if (deadline == absl::InfinitePast()) deadline = DeadlineAfter(timeout);
      if (Ready ready = Wait(POLLIN, deadline); ready != Ready::kYes) {
        if (ready == Ready::kTimedOut && timeout_ok) return 0;
        return WaitError(ready, "read", timeout);
      }
    }
  }

  // Takes in records while they are already here (OpenSSL's read-ahead buffer or the kernel's),
  // so a large buffer fills as it does on plain TCP and compression frames do not straddle reads
  // needlessly; waits only when there is nothing at all.
  absl::StatusOr<size_t> ReadTls(char* buf, size_t n, absl::Duration timeout, bool timeout_ok) {
    size_t got = 0;
    absl::Time deadline = absl::InfinitePast();
    while (got < n) {
      size_t r = 0;
      ::ERR_clear_error();
      if (::SSL_read_ex(ssl, buf + got, n - got, &r) == 1) {
        got += r;
        continue;
      }
      const int code = ::SSL_get_error(ssl, 0);
      if (code != SSL_ERROR_WANT_READ && code != SSL_ERROR_WANT_WRITE) {
        if (got > 0 && !shut_down.load()) return got;  // the error again on the next read
        return SslError(code, "read");
      }
      if (got > 0) return got;
      if (deadline == absl::InfinitePast()) deadline = DeadlineAfter(timeout);
      if (Ready ready = Wait(code == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
          ready != Ready::kYes) {
        if (ready == Ready::kTimedOut && timeout_ok) return 0;
        return WaitError(ready, "read", timeout);
      }
    }
    return got;
  }

  absl::Status Write(std::span<const iovec> spans, absl::Duration timeout) {
    if (fd.load() < 0) return absl::FailedPreconditionError("write on a closed connection");
    if (shut_down.load()) return absl::CancelledError("write: socket shut down");
    return ssl != nullptr ? WriteTls(spans, timeout) : WritePlain(spans, timeout);
  }

  // sendmsg() over the caller's spans themselves, as many at a time as the kernel takes.
  absl::Status WritePlain(std::span<const iovec> spans, absl::Duration timeout) {
    iov.assign(spans.begin(), spans.end());
    size_t first = 0;
    while (true) {
      while (first < iov.size() && iov[first].iov_len == 0) ++first;
      if (first == iov.size()) return absl::OkStatus();
      msghdr msg{};
      msg.msg_iov = iov.data() + first;
      msg.msg_iovlen = std::min<size_t>(iov.size() - first, IOV_MAX);
      const ssize_t r = ::sendmsg(fd.load(), &msg, MSG_NOSIGNAL);
      if (r < 0) {
        if (errno == EINTR) continue;
        if (!WouldBlock(errno)) return SocketError(errno, "write");
        if (Ready ready = Wait(POLLOUT, DeadlineAfter(timeout)); ready != Ready::kYes) {
          return WaitError(ready, "write", timeout);
        }
        continue;
      }
      bytes_written += static_cast<uint64_t>(r);
      auto done = static_cast<size_t>(r);
      while (done > 0 && done >= iov[first].iov_len) {
        done -= iov[first].iov_len;
        ++first;
      }
      if (done > 0) {
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + done;
        iov[first].iov_len -= done;
      }
    }
  }

  absl::Status WriteTls(std::span<const iovec> spans, absl::Duration timeout) {
    // Pack runs of small spans into `staging` (sized first, so pointers into it stay valid).
    pieces.clear();
    size_t small = 0;
    for (const iovec& v : spans) {
      if (v.iov_len < kTlsRecordPayload) small += v.iov_len;
    }
    staging.resize(small);
    size_t used = 0;
    size_t run_start = 0;
    auto close_run = [&] {
      if (used > run_start) pieces.push_back({staging.data() + run_start, used - run_start});
      run_start = used;
    };
    for (const iovec& v : spans) {
      if (v.iov_len >= kTlsRecordPayload) {
        close_run();
        pieces.push_back({v.iov_base, v.iov_len});
        continue;
      }
      std::memcpy(staging.data() + used, v.iov_base, v.iov_len);
      used += v.iov_len;
      if (used - run_start >= kTlsRecordPayload) close_run();
    }
    close_run();
    for (const iovec& piece : pieces) {
      const char* p = static_cast<const char*>(piece.iov_base);
      size_t left = piece.iov_len;
      while (left > 0) {
        size_t w = 0;
        ::ERR_clear_error();
        if (::SSL_write_ex(ssl, p, left, &w) == 1) {
          p += w;
          left -= w;
          continue;
        }
        const int code = ::SSL_get_error(ssl, 0);
        if (code != SSL_ERROR_WANT_READ && code != SSL_ERROR_WANT_WRITE) {
          return SslError(code, "write");
        }
        if (Ready ready =
                Wait(code == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, DeadlineAfter(timeout));
            ready != Ready::kYes) {
          return WaitError(ready, "write", timeout);
        }
      }
    }
    return absl::OkStatus();
  }

  // Makes the SSL object for this connection's descriptor.
  void StartTls(std::shared_ptr<asio::ssl::context> context) {
    ssl_context = std::move(context);
    ssl = ::SSL_new(ssl_context->native_handle());
    // Buffers stay allocated for the connection's life instead of being freed when idle; a
    // write returns what it wrote when the socket is full, and is resumed from there.
    ::SSL_clear_mode(ssl, SSL_MODE_RELEASE_BUFFERS);
    ::SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    ::SSL_set_default_read_buffer_len(ssl, kTlsReadAhead);
    ::SSL_set_read_ahead(ssl, 1);
    bio_state.fd = fd.load();
    bio_state.bytes_written = &bytes_written;
    BIO* bio = ::BIO_new(SocketBioMethod());
    ::BIO_set_data(bio, &bio_state);
    ::SSL_set_bio(ssl, bio, bio);
    SSL_set_app_data(ssl, this);
  }

  // Runs the TLS handshake to its end within `timeout`.
  std::optional<Failure> Handshake(absl::Duration timeout) {
    const absl::Time deadline = DeadlineAfter(timeout);
    while (true) {
      ::ERR_clear_error();
      const int r = ::SSL_do_handshake(ssl);
      if (r == 1) return std::nullopt;
      const int code = ::SSL_get_error(ssl, r);
      const int err = errno;
      if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE) {
        const Ready ready = Wait(code == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
        if (ready == Ready::kYes) continue;
        return Failure{.timed_out = ready == Ready::kTimedOut, .text = "cancelled"};
      }
      Failure failure;
      const unsigned long e = ::ERR_peek_last_error();
      if (code == SSL_ERROR_ZERO_RETURN ||
          (code == SSL_ERROR_SYSCALL && e == 0 &&
           (err == 0 || err == ECONNRESET || err == EPIPE)) ||
          (ERR_GET_LIB(e) == ERR_LIB_SSL &&
           ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING)) {
        failure.closed = true;
        failure.text = "connection closed";
      } else if (e != 0) {
        failure.ssl_error = ERR_GET_LIB(e) == ERR_LIB_SSL ? e : 0;
        failure.text = ErrorText(e);
      } else {
        failure.text = std::strerror(err);
      }
      return failure;
    }
  }

  // Why a handshake failed, in words that name the fix: certificate problems (found by OpenSSL
  // while verifying) first, then the alerts and failures that have a known cause.
  absl::Status HandshakeError(const Failure& out, const std::string& peer,
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
      return absl::UnavailableError(absl::StrCat(prefix, VerifyFailure(server_name, client),
                                                 cert.empty() ? "" : " [certificate: ", cert,
                                                 cert.empty() ? "" : "]"));
    }
    if (out.ssl_error != 0) return absl::UnavailableError(prefix + SslFailure(out, client));
    if (out.closed) {
      return absl::UnavailableError(absl::StrCat(
          prefix,
          "failed: the server closed the connection during the handshake (a plain port, or "
          "the server refused the TLS parameters)"));
    }
    return absl::UnavailableError(absl::StrCat(prefix, "failed: ", out.text));
  }

  // The certificate problem OpenSSL found while verifying, and its fix.
  std::string VerifyFailure(const std::string& server_name, const TlsClientOptions* client) const {
    switch (verify_error) {
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
      case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
      case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      case X509_V_ERR_CERT_UNTRUSTED:
        return absl::StrCat(
            "failed: unknown CA: the server's certificate is not signed by a trusted CA (",
            client != nullptr && !client->ca_file.empty()
                ? absl::StrCat("CA file ", client->ca_file)
                : std::string("the system's trust store"),
            "); set --clickhouse-tls-ca-file to the CA that signed it");
      case X509_V_ERR_HOSTNAME_MISMATCH:
      case X509_V_ERR_IP_ADDRESS_MISMATCH:
        return absl::StrCat("failed: name mismatch: the server's certificate is not valid for '",
                            server_name,
                            "'; connect with a name the certificate lists or set "
                            "--clickhouse-tls-server-name");
      case X509_V_ERR_CERT_HAS_EXPIRED:
        return verify_depth == 0
                   ? std::string("failed: the server's certificate has expired")
                   : absl::StrCat("failed: a CA certificate in the server's chain (depth ",
                                  verify_depth, ") has expired");
      case X509_V_ERR_CERT_NOT_YET_VALID:
        return "failed: the server's certificate is not valid yet (check both clocks)";
      default:
        return absl::StrCat("failed: certificate verification: ",
                            ::X509_verify_cert_error_string(verify_error));
    }
  }

  // A TLS failure or alert (no certificate problem of ours), with its likely cause.
  static std::string SslFailure(const Failure& out, const TlsClientOptions* client) {
    switch (ERR_GET_REASON(out.ssl_error)) {
      case SSL_R_WRONG_VERSION_NUMBER:
      case SSL_R_PACKET_LENGTH_TOO_LONG:
      case SSL_R_UNKNOWN_PROTOCOL:
      case SSL_R_HTTP_REQUEST:
        return absl::StrCat(
            "failed: the server did not answer in TLS; this looks like a plain (non-TLS) "
            "port: use the secure native port (tcp_port_secure, usually 9440) or turn TLS "
            "off for this endpoint (",
            out.text, ")");
      case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
        if (client != nullptr && client->cert_file.empty()) {
          return absl::StrCat(
              "failed: the server requires a client certificate; set "
              "--clickhouse-tls-cert-file and --clickhouse-tls-key-file (",
              out.text, ")");
        }
        break;
      case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
      case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
      case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
        return absl::StrCat("failed: the server refused chgate's client certificate (", out.text,
                            ")");
      default:
        break;
    }
    return absl::StrCat("failed: ", out.text);
  }

  // Keeps the first certificate problem for HandshakeError, then lets OpenSSL decide as it
  // would.
  static int VerifyCallback(int preverified, X509_STORE_CTX* store) {
    auto* ssl = static_cast<SSL*>(
        ::X509_STORE_CTX_get_ex_data(store, ::SSL_get_ex_data_X509_STORE_CTX_idx()));
    auto* impl = static_cast<Impl*>(SSL_get_app_data(ssl));
    if (preverified == 0 && impl != nullptr && impl->verify_error == X509_V_OK) {
      impl->verify_error = ::X509_STORE_CTX_get_error(store);
      impl->verify_depth = ::X509_STORE_CTX_get_error_depth(store);
      if (X509* cert = ::X509_STORE_CTX_get_current_cert(store); cert != nullptr) {
        ::X509_up_ref(cert);
        impl->verify_cert.reset(cert);
      }
    }
    return preverified;
  }

  std::atomic<int> fd{-1};
  SSL* ssl = nullptr;
  std::shared_ptr<asio::ssl::context> ssl_context;  // keeps the SSL_CTX alive
  SocketBioState bio_state;
  std::atomic<bool> shut_down{false};
  uint64_t bytes_written = 0;
  std::vector<iovec> iov;
  std::vector<iovec> pieces;
  std::vector<char> staging;
  // The first certificate problem OpenSSL reported during the handshake.
  long verify_error = X509_V_OK;
  int verify_depth = 0;
  std::unique_ptr<X509, decltype(&::X509_free)> verify_cert{nullptr, &::X509_free};
};

namespace {

// Connects a non-blocking socket to the first of `addresses` that accepts before `deadline`.
// Returns the descriptor, or -1 with `error` set (and `timed_out` when the deadline passed).
int ConnectAny(const addrinfo* addresses, absl::Time deadline, std::string* error,
               bool* timed_out) {
  for (const addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      *error = std::strerror(errno);
      continue;
    }
    int err = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      while (true) {
        const absl::Duration left = deadline - absl::Now();
        if (left <= absl::ZeroDuration()) {
          ::close(fd);
          *timed_out = true;
          return -1;
        }
        pollfd p{fd, POLLOUT, 0};
        const int r =
            ::poll(&p, 1,
                   deadline == absl::InfiniteFuture()
                       ? -1
                       : static_cast<int>(std::min<int64_t>(
                             absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))),
                             INT_MAX)));
        if (r > 0 || (r < 0 && errno != EINTR)) break;
      }
      socklen_t len = sizeof(err);
      if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
    if (err == 0) return fd;
    *error = std::strerror(err);
    ::close(fd);
  }
  return -1;
}

}  // namespace

Transport::Transport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Transport::~Transport() = default;

absl::StatusOr<std::unique_ptr<Transport>> Transport::Connect(const std::string& host,
                                                              uint16_t port,
                                                              const TransportOptions& options) {
  const std::string peer = absl::StrCat(host, ":", port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", ::gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);
  std::string error = "no address";
  bool timed_out = false;
  const int fd =
      ConnectAny(addresses.get(), DeadlineAfter(options.connect_timeout), &error, &timed_out);
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat("connect to ", peer, ": timed out after ",
                                                    absl::FormatDuration(options.connect_timeout)));
  }
  if (fd < 0) return absl::UnavailableError(absl::StrCat("connect to ", peer, ": ", error));
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  auto impl = std::make_unique<Impl>();
  impl->fd.store(fd);
  if (options.tls == nullptr) return std::unique_ptr<Transport>(new Transport(std::move(impl)));

  const TlsClientOptions& tls = options.tls->options();
  impl->StartTls(options.tls->Current());
  SSL* ssl = impl->ssl;
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
    ::SSL_set_verify(ssl, ::SSL_get_verify_mode(ssl), &Impl::VerifyCallback);
  }
  ::SSL_set_connect_state(ssl);
  if (std::optional<Failure> failed = impl->Handshake(options.handshake_timeout)) {
    return impl->HandshakeError(*failed, peer, server_name, &tls, options.handshake_timeout);
  }
  return std::unique_ptr<Transport>(new Transport(std::move(impl)));
}

std::unique_ptr<Transport> Transport::AdoptPlain(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  auto impl = std::make_unique<Impl>();
  impl->fd.store(fd);
  return std::unique_ptr<Transport>(new Transport(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<Transport>> Transport::AdoptTlsServer(
    int fd, std::shared_ptr<asio::ssl::context> context, absl::Duration handshake_timeout) {
  std::unique_ptr<Transport> transport = AdoptPlain(fd);
  Impl* impl = transport->impl_.get();
  impl->StartTls(std::move(context));
  ::SSL_set_accept_state(impl->ssl);
  if (std::optional<Failure> failed = impl->Handshake(handshake_timeout)) {
    return impl->HandshakeError(*failed, "client", "", nullptr, handshake_timeout);
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
  const int fd = impl_->fd.load();
  if (fd < 0) return false;
  if (impl_->ssl != nullptr && ::SSL_has_pending(impl_->ssl) != 0) return true;
  int available = 0;
  return ::ioctl(fd, FIONREAD, &available) == 0 && available > 0;
}

void Transport::Shutdown() {
  impl_->shut_down.store(true);
  // Wakes a wait in poll() (the socket reads as hung up) and fails later calls.
  if (int fd = impl_->fd.load(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
}

bool Transport::tls() const { return impl_->ssl != nullptr; }

std::string Transport::Description() const {
  if (impl_->ssl == nullptr) return "plain";
  const SSL* ssl = impl_->ssl;
  return absl::StrCat(::SSL_get_version(ssl), " ", ::SSL_get_cipher_name(ssl));
}

uint64_t Transport::bytes_written() const { return impl_->bytes_written; }

}  // namespace chgate::clickhouse
