// The API on a Unix domain socket (`--listen=unix:PATH`): for a sidecar, the application and
// chgate share the socket file through a volume, and each request skips the loopback TCP stack.
//
// gRPC binds and serves `unix:` addresses itself; this file adds what a long-running service
// needs around that:
//   - a path already bound by a live server is refused (gRPC would unlink it and take it over);
//   - a stale socket left by a killed chgate is removed before binding;
//   - anything at the path that is not a socket is never removed;
//   - the socket gets the mode asked for (other containers connect with write permission);
//   - the socket file is removed when the listener stops, if it is still the one bound.
//
// Plain functions; thread-compatible.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace chgate::service {

// The path of a `unix:PATH` or `unix://ABSOLUTE_PATH` address (gRPC's forms); nullopt for other
// addresses (host:port, unix-abstract:).
std::optional<std::string> UnixSocketPath(std::string_view address);

// Makes `path` ready to be bound: nothing there, or a stale socket (no process accepts on it),
// which is removed. FailedPrecondition when a server accepts on it (another chgate), when
// something that is not a socket is there, or when the path is longer than a socket address
// holds (107 bytes); the message names the path.
absl::Status PrepareUnixSocket(const std::string& path);

// The identity of a bound socket file, to remove exactly that file later: its inode, and the
// change time of our chmod (an inode number is reused once a file is gone).
struct UnixSocketFile {
  std::string path;
  dev_t device = 0;
  ino_t inode = 0;
  timespec changed{};
};

// After the listener bound `path`: sets its permission bits to `mode` (e.g. 0660) and returns its
// identity. Internal when the file is missing or chmod fails.
absl::StatusOr<UnixSocketFile> FinishUnixSocket(const std::string& path, mode_t mode);

// Removes the socket file if it is still the one `FinishUnixSocket` returned (not one a later
// process bound at the same path). No error when it is already gone.
void RemoveUnixSocket(const UnixSocketFile& file);

}  // namespace chgate::service
