#include "server/clickhouse/wire/gather.h"

#include <algorithm>
#include <string>

namespace chgate::clickhouse {

void GatherWriter::AddSpan(const char* p, size_t n) {
  if (n == 0) return;
  size_ += n;
  if (!iov_.empty()) {
    iovec& last = iov_.back();
    if (static_cast<const char*>(last.iov_base) + last.iov_len == p) {
      last.iov_len += n;
      return;
    }
  }
  iov_.push_back(iovec{const_cast<char*>(p), n});
}

void GatherWriter::Write(const void* p, size_t n) {
  const char* src = static_cast<const char*>(p);
  while (n > 0) {
    if (chunks_.empty() || chunk_used_ == kChunkSize) {
      if (!chunks_.empty()) ++chunk_index_;
      if (chunk_index_ == chunks_.size()) chunks_.emplace_back(new char[kChunkSize]);
      chunk_used_ = 0;
    }
    size_t take = std::min(n, kChunkSize - chunk_used_);
    char* dst = chunks_[chunk_index_].get() + chunk_used_;
    std::memcpy(dst, src, take);
    chunk_used_ += take;
    AddSpan(dst, take);
    src += take;
    n -= take;
  }
}

void GatherWriter::Reference(const void* p, size_t n) {
  if (n < kMinReference) {
    Write(p, n);
    return;
  }
  AddSpan(static_cast<const char*>(p), n);
}

void GatherWriter::Clear() {
  iov_.clear();
  size_ = 0;
  chunk_index_ = 0;
  chunk_used_ = 0;
}

std::string GatherWriter::ToString() const {
  std::string out;
  out.reserve(size_);
  for (const iovec& v : iov_) out.append(static_cast<const char*>(v.iov_base), v.iov_len);
  return out;
}

void GatherWriter::AppendTo(std::string* out) const {
  out->reserve(out->size() + size_);
  for (const iovec& v : iov_) out->append(static_cast<const char*>(v.iov_base), v.iov_len);
}

}  // namespace chgate::clickhouse
