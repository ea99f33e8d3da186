#include "server/spool/file_ops.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace chgate::spool {
namespace {

class PosixFileOps final : public FileOps {
 public:
  absl::StatusOr<int> Open(const std::string& path, int flags, int mode) override {
    int fd;
    do {
      fd = ::open(path.c_str(), flags | O_CLOEXEC, static_cast<mode_t>(mode));
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return ErrnoStatus(errno, "open", path);
    return fd;
  }

  absl::Status Close(int fd) override {
    // No retry on EINTR: Linux releases the descriptor even then.
    if (::close(fd) != 0) return ErrnoStatus(errno, "close", absl::StrCat("fd ", fd));
    return absl::OkStatus();
  }

  absl::StatusOr<size_t> Write(int fd, const void* data, size_t size) override {
    while (true) {
      const ssize_t n = ::write(fd, data, size);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR) return ErrnoStatus(errno, "write", absl::StrCat("fd ", fd));
    }
  }

  absl::StatusOr<size_t> ReadAt(int fd, void* data, size_t size, uint64_t offset) override {
    size_t done = 0;
    auto* out = static_cast<char*>(data);
    while (done < size) {
      const ssize_t n = ::pread(fd, out + done, size - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, "pread", absl::StrCat("fd ", fd));
      }
      if (n == 0) break;
      done += static_cast<size_t>(n);
    }
    return done;
  }

  absl::Status DataSync(int fd) override {
    if (::fdatasync(fd) != 0) return ErrnoStatus(errno, "fdatasync", absl::StrCat("fd ", fd));
    return absl::OkStatus();
  }

  absl::Status Sync(int fd) override {
    if (::fsync(fd) != 0) return ErrnoStatus(errno, "fsync", absl::StrCat("fd ", fd));
    return absl::OkStatus();
  }

  absl::Status Truncate(int fd, uint64_t size) override {
    int rc;
    do {
      rc = ::ftruncate(fd, static_cast<off_t>(size));
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) return ErrnoStatus(errno, "ftruncate", absl::StrCat("fd ", fd));
    return absl::OkStatus();
  }

  absl::StatusOr<uint64_t> FileSize(int fd) override {
    struct stat st;
    if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "fstat", absl::StrCat("fd ", fd));
    return static_cast<uint64_t>(st.st_size);
  }

  absl::StatusOr<uint64_t> FreeBytes(const std::string& path) override {
    struct statvfs st;
    if (::statvfs(path.c_str(), &st) != 0) return ErrnoStatus(errno, "statvfs", path);
    return static_cast<uint64_t>(st.f_bavail) * static_cast<uint64_t>(st.f_frsize);
  }

  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return ErrnoStatus(errno, "opendir", dir);
    std::vector<std::string> names;
    errno = 0;
    while (const dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
        names.emplace_back(e->d_name);
      }
    }
    const int error = errno;
    ::closedir(d);
    if (error != 0) return ErrnoStatus(error, "readdir", dir);
    return names;
  }

  absl::Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus(errno, "rename", from);
    return absl::OkStatus();
  }

  absl::Status Unlink(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus(errno, "unlink", path);
    return absl::OkStatus();
  }

  absl::Status MakeDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus(errno, "mkdir", path);
    }
    return absl::OkStatus();
  }

  absl::Status LockExclusive(int fd) override {
    int rc;
    do {
      rc = ::flock(fd, LOCK_EX | LOCK_NB);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) return ErrnoStatus(errno, "flock", absl::StrCat("fd ", fd));
    return absl::OkStatus();
  }
};

absl::StatusCode CodeOf(int error_number) {
  switch (error_number) {
    case ENOSPC:
    case EDQUOT:
      return absl::StatusCode::kResourceExhausted;
    case ENOENT:
      return absl::StatusCode::kNotFound;
    case EEXIST:
      return absl::StatusCode::kAlreadyExists;
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::StatusCode::kPermissionDenied;
    case EWOULDBLOCK:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kUnavailable;
  }
}

}  // namespace

FileOps* DefaultFileOps() {
  static FileOps* const ops = new PosixFileOps();
  return ops;
}

absl::Status ErrnoStatus(int error_number, const char* call, const std::string& path) {
  return absl::Status(CodeOf(error_number),
                      absl::StrCat(call, " ", path, ": ", std::strerror(error_number)));
}

absl::Status SyncDirectory(FileOps* ops, const std::string& dir) {
  absl::StatusOr<int> fd = ops->Open(dir, O_RDONLY | O_DIRECTORY, 0);
  if (!fd.ok()) return fd.status();
  const absl::Status st = ops->Sync(*fd);
  const absl::Status closed = ops->Close(*fd);
  return st.ok() ? closed : st;
}

absl::Status MakeDirDurably(FileOps* ops, const std::string& path) {
  if (absl::Status made = ops->MakeDir(path); !made.ok()) return made;
  const size_t slash = path.find_last_of('/');
  const std::string parent = slash == std::string::npos ? "."
                             : slash == 0               ? "/"
                                                        : path.substr(0, slash);
  return SyncDirectory(ops, parent);
}

absl::Status WriteFileAtomically(FileOps* ops, const std::string& dir, const std::string& name,
                                 std::string_view data) {
  const std::string path = absl::StrCat(dir, "/", name);
  const std::string tmp = absl::StrCat(path, ".tmp");
  absl::StatusOr<int> fd = ops->Open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!fd.ok()) return fd.status();
  absl::Status st = absl::OkStatus();
  size_t written = 0;
  while (st.ok() && written < data.size()) {
    absl::StatusOr<size_t> n = ops->Write(*fd, data.data() + written, data.size() - written);
    st = n.status();
    if (st.ok() && *n == 0)
      st = absl::UnavailableError(absl::StrCat("write made no progress: ", tmp));
    if (st.ok()) written += *n;
  }
  if (st.ok()) st = ops->DataSync(*fd);
  const absl::Status closed = ops->Close(*fd);
  if (st.ok()) st = closed;
  if (st.ok()) st = ops->Rename(tmp, path);
  if (!st.ok()) return st;
  return SyncDirectory(ops, dir);
}

}  // namespace chgate::spool
