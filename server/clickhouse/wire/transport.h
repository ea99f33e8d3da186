// Transport: the byte stream of one ClickHouse connection, plain TCP or TLS (OpenSSL driven on
// the descriptor itself), on a non-blocking socket. Every read and write is tried first and waits
// in poll() only when the socket is empty or full, and every wait is bounded (connect, TLS
// handshake, each read, each write). Writes gather the caller's spans: on plain TCP they become
// sendmsg() calls over the spans themselves; over TLS small spans are packed into full records and
// large ones are encrypted straight from the caller's memory, each record handed to the kernel
// at once; reads over TLS take in up to 256 KiB of records per system call.
//
// Used by one thread at a time, except Shutdown(), which any thread may call to wake a blocked
// operation (it then fails with Cancelled) and make later ones fail.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace asio::ssl {
class context;
}  // namespace asio::ssl

namespace chgate::clickhouse {

class TlsClientContext;

struct TransportOptions {
  absl::Duration connect_timeout = absl::Seconds(5);
  // Bounds the TLS handshake (not used for plain TCP).
  absl::Duration handshake_timeout = absl::Seconds(10);
  // Set for TLS; null for plain TCP.
  std::shared_ptr<TlsClientContext> tls;
};

class Transport {
 public:
  // Resolves `host`, connects to the first address that accepts within connect_timeout and, with
  // TLS, completes the handshake and verifies the server's certificate. Errors (the message names
  // host:port and the reason): Unavailable (refused, unreachable, resolution failed, TLS refused:
  // unknown CA, name mismatch, expired certificate, a plain port spoken to with TLS),
  // DeadlineExceeded (connect or handshake timed out).
  static absl::StatusOr<std::unique_ptr<Transport>> Connect(const std::string& host, uint16_t port,
                                                            const TransportOptions& options);
  // Adopts a connected descriptor as plain TCP (servers in tests and benchmarks).
  static std::unique_ptr<Transport> AdoptPlain(int fd);
  // Adopts an accepted descriptor as the server side of TLS and completes the handshake (test
  // and benchmark servers). Errors as Connect().
  static absl::StatusOr<std::unique_ptr<Transport>> AdoptTlsServer(
      int fd, std::shared_ptr<asio::ssl::context> context, absl::Duration handshake_timeout);

  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Reads at most `n` bytes, waiting at most `timeout` for the first one; over TLS it goes on
  // while more is already at hand, so large buffers fill as on plain TCP. Returns the count
  // (never 0). Errors: Unavailable (peer closed or reset, TLS failure), DeadlineExceeded,
  // Cancelled (after Shutdown()).
  absl::StatusOr<size_t> ReadSome(char* buf, size_t n, absl::Duration timeout);
  // As ReadSome, but a timeout returns 0 instead of an error.
  absl::StatusOr<size_t> TryReadSome(char* buf, size_t n, absl::Duration timeout);
  // Writes every byte of `spans`; each wait for the peer to take more is bounded by `timeout`.
  // Errors: Unavailable, DeadlineExceeded, Cancelled.
  absl::Status WriteAll(std::span<const iovec> spans, absl::Duration timeout);
  absl::Status WriteAll(const void* data, size_t n, absl::Duration timeout);

  // Whether bytes from the peer are already here (in the kernel, or decrypted and held by TLS),
  // so a read would not wait for its first byte. Never blocks.
  bool InputPending() const;

  // Wakes any blocked operation and makes later ones fail. Thread-safe.
  void Shutdown();

  bool tls() const;
  // "TLSv1.3 TLS_AES_256_GCM_SHA384" with TLS, "plain" without.
  std::string Description() const;
  // Bytes handed to the socket (after encryption with TLS).
  uint64_t bytes_written() const;

 private:
  class Impl;
  explicit Transport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace chgate::clickhouse
