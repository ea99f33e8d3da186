// GatherWriter collects one outgoing message as a list of byte spans for a single
// scatter-gather write (writev). Small writes (packet codes, lengths, names) are copied into
// chunks the writer owns and reuses; Reference() adds the caller's own memory (column data)
// without copying, which must then stay alive and unchanged until the write completes.
// Not thread-safe.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "server/clickhouse/wire/buffer.h"

namespace chgate::clickhouse {

class GatherWriter {
 public:
  // Size of each owned chunk; chunks are kept across Clear() so steady state allocates nothing.
  static constexpr size_t kChunkSize = 64 * 1024;
  // References shorter than this are copied: an iovec per tiny piece costs more than the copy.
  static constexpr size_t kMinReference = 2048;

  GatherWriter() = default;
  GatherWriter(const GatherWriter&) = delete;
  GatherWriter& operator=(const GatherWriter&) = delete;

  void Write(const void* p, size_t n);
  void Write(std::string_view s) { Write(s.data(), s.size()); }
  void WriteVarUInt(uint64_t v) {
    char tmp[10];
    Write(tmp, EncodeVarUInt(v, tmp));
  }
  void WriteString(std::string_view s) {
    WriteVarUInt(s.size());
    Write(s);
  }
  template <typename T>
  requires std::is_trivially_copyable_v<T>
  void WriteFixed(T v) { Write(&v, sizeof(T)); }
  // Adds caller-owned bytes by reference (copied when shorter than kMinReference).
  void Reference(const void* p, size_t n);

  std::span<const iovec> spans() const { return iov_; }
  // Total bytes in the message.
  size_t size() const { return size_; }
  // Forgets the message but keeps owned chunks for reuse.
  void Clear();
  // Copies the whole message into one string (tests and small messages only).
  std::string ToString() const;
  // Appends the bytes written so far to `out` (whose capacity a caller may reuse).
  void AppendTo(std::string* out) const;

 private:
  void AddSpan(const char* p, size_t n);

  std::vector<std::unique_ptr<char[]>> chunks_;
  size_t chunk_index_ = 0;  // chunk being filled
  size_t chunk_used_ = 0;   // bytes used in chunks_[chunk_index_]
  std::vector<iovec> iov_;
  size_t size_ = 0;
};

}  // namespace chgate::clickhouse
