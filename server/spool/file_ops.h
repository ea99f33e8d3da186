// FileOps: the few file-system calls the spool makes, behind an interface so tests can inject
// ENOSPC, EIO, short writes and a full file system. PosixFileOps (DefaultFileOps()) calls the
// kernel. Errors carry the errno's meaning in the status code: ENOSPC and EDQUOT are
// ResourceExhausted, ENOENT NotFound, EEXIST AlreadyExists, EACCES/EPERM PermissionDenied, EAGAIN/
// EWOULDBLOCK (a held lock) FailedPrecondition, anything else (EIO, ...) Unavailable; the message
// names the call and the path. Implementations must be thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace chgate::spool {

class FileOps {
 public:
  virtual ~FileOps() = default;

  // open(2) with O_CLOEXEC added; returns the descriptor.
  virtual absl::StatusOr<int> Open(const std::string& path, int flags, int mode) = 0;
  virtual absl::Status Close(int fd) = 0;
  // One write(2) (retried on EINTR): returns how many bytes were written, which may be fewer
  // than `size`. The caller loops.
  virtual absl::StatusOr<size_t> Write(int fd, const void* data, size_t size) = 0;
  // Reads up to `size` bytes at `offset` (pread(2), looped until `size` or end of file).
  virtual absl::StatusOr<size_t> ReadAt(int fd, void* data, size_t size, uint64_t offset) = 0;
  virtual absl::Status DataSync(int fd) = 0;  // fdatasync(2)
  virtual absl::Status Sync(int fd) = 0;      // fsync(2), for directories
  virtual absl::Status Truncate(int fd, uint64_t size) = 0;
  virtual absl::StatusOr<uint64_t> FileSize(int fd) = 0;
  // Bytes an unprivileged writer may still use on the file system holding `path` (statvfs(3):
  // f_bavail x f_frsize).
  virtual absl::StatusOr<uint64_t> FreeBytes(const std::string& path) = 0;
  // Names (not paths) of the entries of `dir`, without "." and "..".
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) = 0;
  virtual absl::Status Rename(const std::string& from, const std::string& to) = 0;
  virtual absl::Status Unlink(const std::string& path) = 0;
  // mkdir(2); OK when the directory exists already.
  virtual absl::Status MakeDir(const std::string& path) = 0;
  // flock(LOCK_EX | LOCK_NB): FailedPrecondition when another open file description holds it.
  virtual absl::Status LockExclusive(int fd) = 0;
};

// Writes `data` as the file `dir`/`name`, whole or not at all: into `name`.tmp, fdatasync, rename
// over `name`, then fsync of `dir`. The first error is returned (the .tmp file may stay).
absl::Status WriteFileAtomically(FileOps* ops, const std::string& dir, const std::string& name,
                                 std::string_view data);

// fsync of the directory `dir` (opened, synced, closed): its entries' creations, renames and
// deletions survive a crash.
absl::Status SyncDirectory(FileOps* ops, const std::string& dir);

// mkdir(2) of `path` (OK when it exists), then fsync of its parent directory, so the new entry
// survives a crash as the files later written and synced in it do.
absl::Status MakeDirDurably(FileOps* ops, const std::string& path);

// The kernel's calls. A process-wide instance; never destroyed.
FileOps* DefaultFileOps();

// The status for `error_number` (an errno) from `call` on `path`, mapped as described above.
absl::Status ErrnoStatus(int error_number, const char* call, const std::string& path);

}  // namespace chgate::spool
