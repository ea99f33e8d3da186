#include "server/clickhouse/wire/socket.h"

#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace chgate::clickhouse {
namespace {

int TimeoutMs(absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) return -1;
  int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1)));
  return static_cast<int>(std::clamp<int64_t>(ms, 0, INT_MAX));
}

std::string ErrnoText(int err) { return std::strerror(err); }

}  // namespace

Socket::~Socket() { Close(); }

Socket::Socket(Socket&& other) noexcept { *this = std::move(other); }

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    other.fd_ = -1;
    shut_down_.store(other.shut_down_.load());
    bytes_written_ = other.bytes_written_;
  }
  return *this;
}

Socket Socket::FromFd(int fd) { return Socket(fd); }

void Socket::Close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void Socket::Shutdown() {
  shut_down_.store(true);
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

absl::StatusOr<Socket> Socket::Connect(const std::string& host, uint16_t port,
                                       absl::Duration timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  std::string port_text = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &result);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", ::gai_strerror(rc)));
  }
  absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::UnavailableError(absl::StrCat("no address for ", host));
  for (addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    int fd =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      last = absl::UnavailableError(absl::StrCat("socket(): ", ErrnoText(errno)));
      continue;
    }
    Socket sock(fd);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = absl::UnavailableError(
            absl::StrCat("connect to ", host, ":", port, ": ", ErrnoText(errno)));
        continue;
      }
      absl::Status waited = sock.Wait(POLLOUT, deadline - absl::Now(), "connect");
      if (!waited.ok()) {
        last = absl::Status(waited.code(),
                            absl::StrCat("connect to ", host, ":", port, ": ", waited.message()));
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last = absl::UnavailableError(
            absl::StrCat("connect to ", host, ":", port, ": ", ErrnoText(err)));
        continue;
      }
    }
    ::freeaddrinfo(result);
    return sock;
  }
  ::freeaddrinfo(result);
  return last;
}

absl::Status Socket::Wait(short events, absl::Duration timeout, const char* what) {
  if (shut_down_.load()) return absl::CancelledError(absl::StrCat(what, ": socket shut down"));
  pollfd pfd{fd_, events, 0};
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int rc = ::poll(&pfd, 1, TimeoutMs(deadline - absl::Now()));
    if (rc > 0) {
      if (shut_down_.load()) return absl::CancelledError(absl::StrCat(what, ": socket shut down"));
      return absl::OkStatus();
    }
    if (rc == 0) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": timed out after ", absl::FormatDuration(timeout)));
    }
    if (errno != EINTR)
      return absl::UnavailableError(absl::StrCat(what, ": poll: ", ErrnoText(errno)));
  }
}

absl::StatusOr<bool> Socket::WaitReadable(absl::Duration timeout) {
  if (fd_ < 0) return absl::FailedPreconditionError("wait on a closed socket");
  absl::Status waited = Wait(POLLIN, timeout, "read");
  if (absl::IsDeadlineExceeded(waited)) return false;
  if (!waited.ok()) return waited;
  return true;
}

absl::StatusOr<size_t> Socket::ReadSome(char* buf, size_t n, absl::Duration timeout) {
  if (fd_ < 0) return absl::FailedPreconditionError("read on a closed socket");
  while (true) {
    ssize_t got = ::recv(fd_, buf, n, 0);
    if (got > 0) return static_cast<size_t>(got);
    if (got == 0) {
      if (shut_down_.load()) return absl::CancelledError("read: socket shut down");
      return absl::UnavailableError("connection closed by the server");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      absl::Status waited = Wait(POLLIN, timeout, "read");
      if (!waited.ok()) return waited;
      continue;
    }
    return absl::UnavailableError(absl::StrCat("read: ", ErrnoText(errno)));
  }
}

absl::Status Socket::WriteAll(const void* data, size_t n, absl::Duration timeout) {
  iovec v{const_cast<void*>(data), n};
  return WriteAll(std::span<const iovec>(&v, 1), timeout);
}

absl::Status Socket::WriteAll(std::span<const iovec> spans, absl::Duration timeout) {
  if (fd_ < 0) return absl::FailedPreconditionError("write on a closed socket");
  // writev may stop in the middle of an iovec; keep a private, adjustable copy of the group.
  iovec group[IOV_MAX];
  size_t next = 0;
  while (next < spans.size()) {
    size_t count = std::min<size_t>(spans.size() - next, IOV_MAX);
    std::copy_n(spans.begin() + static_cast<std::ptrdiff_t>(next), count, group);
    iovec* cur = group;
    size_t left = count;
    while (left > 0) {
      msghdr msg{};
      msg.msg_iov = cur;
      msg.msg_iovlen = left;
      ssize_t wrote = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (wrote < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          absl::Status waited = Wait(POLLOUT, timeout, "write");
          if (!waited.ok()) return waited;
          continue;
        }
        if (shut_down_.load()) return absl::CancelledError("write: socket shut down");
        return absl::UnavailableError(absl::StrCat("write: ", ErrnoText(errno)));
      }
      size_t done = static_cast<size_t>(wrote);
      bytes_written_ += done;
      while (left > 0 && done >= cur->iov_len) {
        done -= cur->iov_len;
        ++cur;
        --left;
      }
      if (left > 0 && done > 0) {
        cur->iov_base = static_cast<char*>(cur->iov_base) + done;
        cur->iov_len -= done;
      }
    }
    next += count;
  }
  return absl::OkStatus();
}

}  // namespace chgate::clickhouse
