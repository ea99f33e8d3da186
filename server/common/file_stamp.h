// FileStamp: what stat() says of a file, to notice that it changed without reading it: rewritten
// in place, renamed over (cert-manager, atomic writers), or swapped behind a symlink (a Kubernetes
// Secret volume). stat() follows symlinks, so a swapped link shows as another inode. A missing
// file has a stamp too (exists == false), so its disappearance is a change seen once.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>

namespace chgate {

struct FileStamp {
  bool exists = false;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  int64_t size = 0;
  uint64_t inode = 0;
  uint64_t device = 0;

  bool operator==(const FileStamp&) const = default;

  static FileStamp Of(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return {};
    auto nanos = [](const struct timespec& t) {
      return static_cast<int64_t>(t.tv_sec) * 1000000000 + static_cast<int64_t>(t.tv_nsec);
    };
    return {.exists = true,
            .mtime_ns = nanos(st.st_mtim),
            .ctime_ns = nanos(st.st_ctim),
            .size = static_cast<int64_t>(st.st_size),
            .inode = static_cast<uint64_t>(st.st_ino),
            .device = static_cast<uint64_t>(st.st_dev)};
  }
};

}  // namespace chgate
