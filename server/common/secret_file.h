// SecretFile: a file holding one secret (a password; a trailing newline is dropped), re-read
// when it changes, so a rotated Kubernetes Secret takes effect for new connections without a
// restart. Get() looks at the file's stamp (one stat()) and reads it only after a change; a
// changed file that cannot be read leaves the last content in use. Thread-safe.
#pragma once

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/common/file_stamp.h"

namespace chgate {

class SecretFile {
 public:
  // Reads the file once. Errors: NotFound naming the file when it cannot be read.
  static absl::StatusOr<std::shared_ptr<SecretFile>> Open(std::string path) {
    auto file = std::shared_ptr<SecretFile>(new SecretFile(std::move(path)));
    absl::MutexLock lock(&file->mu_);
    if (absl::Status st = file->ReadLocked(); !st.ok()) return st;
    return file;
  }

  // The current content.
  std::string Get() {
    absl::MutexLock lock(&mu_);
    if (!(FileStamp::Of(path_) == stamp_)) (void)ReadLocked();
    return value_;
  }

  const std::string& path() const { return path_; }
  // Times the content was read again after a change.
  uint64_t reloads() const {
    absl::MutexLock lock(&mu_);
    return reloads_;
  }

 private:
  explicit SecretFile(std::string path) : path_(std::move(path)) {}

  absl::Status ReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // The stamp first: a change made while reading is seen at the next Get().
    const FileStamp stamp = FileStamp::Of(path_);
    std::ifstream in(path_, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", path_, "'"));
    std::stringstream text;
    text << in.rdbuf();
    std::string value = text.str();
    while (!value.empty() && (value.back() == '\n' || value.back() == '\r')) value.pop_back();
    if (stamp_.exists) ++reloads_;
    stamp_ = stamp;
    value_ = std::move(value);
    return absl::OkStatus();
  }

  const std::string path_;
  mutable absl::Mutex mu_;
  FileStamp stamp_ ABSL_GUARDED_BY(mu_);
  std::string value_ ABSL_GUARDED_BY(mu_);
  uint64_t reloads_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace chgate
