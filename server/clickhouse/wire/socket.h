// A blocking TCP socket with a timeout on every wait (connect, each read, each write) and
// scatter-gather writes. Shutdown() may be called from another thread to wake a blocked
// operation (it then fails with Cancelled); everything else is single-threaded.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace chgate::clickhouse {

class Socket {
 public:
  Socket() = default;
  ~Socket();
  Socket(Socket&& other) noexcept;
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Resolves `host` and connects to the first address that accepts within `timeout`.
  // Errors: Unavailable (refused, unreachable, resolution failed), DeadlineExceeded.
  static absl::StatusOr<Socket> Connect(const std::string& host, uint16_t port,
                                        absl::Duration timeout);
  // Adopts a connected descriptor (tests).
  static Socket FromFd(int fd);

  // Reads at most `n` bytes, waiting at most `timeout` for the first one. Returns the count
  // (never 0). Errors: Unavailable (peer closed or reset), DeadlineExceeded, Cancelled.
  absl::StatusOr<size_t> ReadSome(char* buf, size_t n, absl::Duration timeout);
  // Waits at most `timeout` for the socket to become readable (data, end of stream or an error
  // to report). Returns false on timeout. Errors: Cancelled after Shutdown(), Unavailable.
  absl::StatusOr<bool> WaitReadable(absl::Duration timeout);
  // Writes every byte of `spans` with writev, in groups of at most IOV_MAX, resuming after
  // partial writes; each wait for the socket to accept more is bounded by `timeout`.
  absl::Status WriteAll(std::span<const iovec> spans, absl::Duration timeout);
  absl::Status WriteAll(const void* data, size_t n, absl::Duration timeout);

  // Wakes any blocked operation and makes later ones fail. Thread-safe.
  void Shutdown();
  void Close();
  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  explicit Socket(int fd) : fd_(fd) {}
  absl::Status Wait(short events, absl::Duration timeout, const char* what);

  int fd_ = -1;
  std::atomic<bool> shut_down_{false};
  uint64_t bytes_written_ = 0;
};

}  // namespace chgate::clickhouse
