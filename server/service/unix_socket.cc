#include "server/service/unix_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace chgate::service {
namespace {

std::string ErrnoText(int error) { return std::strerror(error); }

// Whether a process accepts connections on the socket at `path`: true when a connect succeeds,
// false when it is refused (nobody listens: a stale file).
absl::StatusOr<bool> SomeoneListens(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("socket(AF_UNIX): ", ErrnoText(errno)));
  }
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int error = errno;
  ::close(fd);
  if (rc == 0) return true;
  if (error == ECONNREFUSED || error == ENOENT) return false;
  return absl::FailedPreconditionError(
      absl::StrCat("cannot tell whether ", path, " is in use (connect: ", ErrnoText(error), ")"));
}

}  // namespace

std::optional<std::string> UnixSocketPath(std::string_view address) {
  constexpr std::string_view kAbsolute = "unix://";
  constexpr std::string_view kPlain = "unix:";
  if (address.starts_with(kAbsolute)) {
    return std::string(address.substr(kAbsolute.size()));
  }
  if (address.starts_with(kPlain)) return std::string(address.substr(kPlain.size()));
  return std::nullopt;
}

absl::Status PrepareUnixSocket(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("a unix: address needs a path");
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the socket path ", path, " is ", path.size(),
                     " bytes; a Unix socket address holds at most ",
                     sizeof(sockaddr_un::sun_path) - 1, " (choose a shorter directory)"));
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot inspect ", path, ": ", ErrnoText(errno)));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        path,
        " exists and is not a socket; chgate will not replace it (remove it, or choose "
        "another path)"));
  }
  absl::StatusOr<bool> listens = SomeoneListens(path);
  if (!listens.ok()) return listens.status();
  if (*listens) {
    return absl::FailedPreconditionError(
        absl::StrCat("another server accepts connections on ", path,
                     " (a second chgate on the same socket?); stop it or choose another path"));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot remove the stale socket ", path, ": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<UnixSocketFile> FinishUnixSocket(const std::string& path, mode_t mode) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    return absl::InternalError(absl::StrCat("the API socket ", path, " is missing after binding"));
  }
  if (::chmod(path.c_str(), mode) != 0) {
    return absl::InternalError(
        absl::StrFormat("cannot set mode %04o on %s: %s", mode, path, ErrnoText(errno)));
  }
  if (::lstat(path.c_str(), &st) != 0) {
    return absl::InternalError(
        absl::StrCat("the API socket ", path, " vanished: ", ErrnoText(errno)));
  }
  return UnixSocketFile{
      .path = path, .device = st.st_dev, .inode = st.st_ino, .changed = st.st_ctim};
}

void RemoveUnixSocket(const UnixSocketFile& file) {
  if (file.path.empty()) return;
  struct stat st {};
  if (::lstat(file.path.c_str(), &st) != 0) return;
  if (!S_ISSOCK(st.st_mode) || st.st_dev != file.device || st.st_ino != file.inode ||
      st.st_ctim.tv_sec != file.changed.tv_sec || st.st_ctim.tv_nsec != file.changed.tv_nsec) {
    return;
  }
  ::unlink(file.path.c_str());
}

}  // namespace chgate::service
