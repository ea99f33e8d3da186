// Byte buffers for the native protocol: a growable output buffer (`ByteBuffer`), a reader over a
// window of bytes that refills itself (`ReadBuffer`, with `MemoryReadBuffer` over a fixed span),
// and the primitive encodings (VarUInt, String, fixed-width little-endian).
// Readers expose their position (bytes consumed since construction) for error messages.
// None of these types is thread-safe.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/status/status.h"

namespace chgate::clickhouse {

static_assert(std::endian::native == std::endian::little,
              "the native protocol is little-endian; big-endian hosts are not supported");

// Largest String the reader accepts (ClickHouse itself refuses strings over 1 GiB).
inline constexpr uint64_t kMaxStringSize = uint64_t{1} << 30;

// Number of bytes VarUInt(v) takes.
constexpr size_t VarUIntSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Writes VarUInt(v) at `p` (at least 10 bytes of room); returns the bytes written.
inline size_t EncodeVarUInt(uint64_t v, char* p) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  p[n++] = static_cast<char>(v);
  return n;
}

// A growable byte array without value-initialisation of new capacity. Used for column storage
// and for staging small header bytes. Pointers into it stay valid until the next growth.
// It can also be a read-only view of someone else's bytes (SetView): reading costs nothing, and
// the first change copies the bytes into owned memory. Owned capacity survives views and clear().
class ByteBuffer {
 public:
  ByteBuffer() = default;
  ByteBuffer(ByteBuffer&& other) noexcept { *this = std::move(other); }
  ByteBuffer& operator=(ByteBuffer&& other) noexcept {
    data_ = std::move(other.data_);
    size_ = other.size_;
    capacity_ = other.capacity_;
    view_ = other.view_;
    other.size_ = other.capacity_ = 0;
    other.view_ = nullptr;
    return *this;
  }
  ByteBuffer(const ByteBuffer& other) { Append(other.data(), other.size()); }
  ByteBuffer& operator=(const ByteBuffer& other) {
    if (this != &other) {
      clear();
      Append(other.data(), other.size());
    }
    return *this;
  }

  char* data() {
    if (view_ != nullptr) Materialize();
    return data_.get();
  }
  const char* data() const { return view_ != nullptr ? view_ : data_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }
  std::string_view view() const { return {data(), size_}; }
  void clear() {
    size_ = 0;
    view_ = nullptr;
  }
  // Becomes a view of [p, p + n), which must stay valid and unchanged while it is used.
  void SetView(const char* p, size_t n) {
    view_ = p;
    size_ = n;
  }
  bool is_view() const { return view_ != nullptr; }

  void reserve(size_t n) {
    if (view_ != nullptr) Materialize();
    if (n > capacity_) Grow(n);
  }
  // Makes room for `n` more bytes and returns where they go; call Commit(n) after writing.
  char* Prepare(size_t n) {
    if (view_ != nullptr) Materialize();
    if (size_ + n > capacity_) Grow(size_ + n);
    return data_.get() + size_;
  }
  void Commit(size_t n) { size_ += n; }
  // Resizes without initialising new bytes.
  void resize(size_t n) {
    reserve(n);
    size_ = n;
  }

  void Append(const void* p, size_t n) {
    if (n == 0) return;
    std::memcpy(Prepare(n), p, n);
    size_ += n;
  }
  void Append(std::string_view s) { Append(s.data(), s.size()); }
  void PushBack(char c) {
    *Prepare(1) = c;
    ++size_;
  }
  template <typename T>
  requires std::is_trivially_copyable_v<T>
  void AppendFixed(T v) {
    std::memcpy(Prepare(sizeof(T)), &v, sizeof(T));
    size_ += sizeof(T);
  }
  void AppendVarUInt(uint64_t v) { size_ += EncodeVarUInt(v, Prepare(10)); }
  void AppendString(std::string_view s) {
    char* p = Prepare(10 + s.size());
    size_t n = EncodeVarUInt(s.size(), p);
    if (!s.empty()) std::memcpy(p + n, s.data(), s.size());
    size_ += n + s.size();
  }

 private:
  void Grow(size_t min_capacity);
  // Copies the viewed bytes into owned memory.
  void Materialize();

  std::unique_ptr<char[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
  const char* view_ = nullptr;
};

// Reads from a window [pos_, end_) of bytes; when the window is exhausted, Refill() obtains the
// next one (from a socket, a decompressor, ...). Refill() is only called on an empty window, so
// the per-value cost stays a bounds check. Every read returns absl::Status: OutOfRange when the
// data ends early, or whatever the source reports (e.g. DeadlineExceeded from a socket).
class ReadBuffer {
 public:
  virtual ~ReadBuffer() = default;

  // Bytes consumed since construction.
  uint64_t position() const { return window_offset_ + static_cast<uint64_t>(pos_ - begin_); }
  const char* pos() const { return pos_; }
  const char* end() const { return end_; }
  size_t available() const { return static_cast<size_t>(end_ - pos_); }
  // Whether the bytes of the current window stay valid and unchanged after later reads, until
  // the owner of the buffer says otherwise (so decoded columns may view them instead of copying).
  virtual bool WindowIsStable() const { return false; }
  void Advance(size_t n) { pos_ += n; }

  // Ensures at least one byte is available. Returns OutOfRange at the end of data.
  absl::Status Ensure() {
    if (pos_ != end_) return absl::OkStatus();
    return Next();
  }
  // Whether no more bytes can be read (refills if needed). Source errors count as end.
  bool AtEnd() { return !Ensure().ok(); }

  absl::Status Read(void* dst, size_t n) {
    if (static_cast<size_t>(end_ - pos_) >= n) {
      if (n != 0) std::memcpy(dst, pos_, n);
      pos_ += n;
      return absl::OkStatus();
    }
    return ReadSlow(static_cast<char*>(dst), n);
  }
  absl::Status Skip(size_t n);

  template <typename T>
  requires std::is_trivially_copyable_v<T> absl::Status ReadFixed(T* v) {
    return Read(v, sizeof(T));
  }

  // Reads a VarUInt of at most 10 bytes. Returns DataLoss if it is longer or exceeds 2^64 - 1.
  absl::Status ReadVarUInt(uint64_t* v) {
    // Fast path: the whole varint is in the window.
    if (end_ - pos_ >= 10) {
      uint64_t result = 0;
      for (int i = 0; i < 10; ++i) {
        uint8_t byte = static_cast<uint8_t>(pos_[i]);
        result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
        if ((byte & 0x80) == 0) {
          // The tenth byte holds only bit 63; anything more does not fit 64 bits.
          if (i == 9 && byte > 1) return VarUIntTooLong();
          pos_ += i + 1;
          *v = result;
          return absl::OkStatus();
        }
      }
      return VarUIntTooLong();
    }
    return ReadVarUIntSlow(v);
  }

  // Reads a String (VarUInt length + bytes) into `out`, replacing its contents. Memory grows
  // with the bytes actually received, so a bogus length cannot force a huge allocation.
  absl::Status ReadString(std::string* out, uint64_t max_size = kMaxStringSize);
  // Appends a String's raw bytes (without its length) to `out`.
  absl::Status ReadStringInto(ByteBuffer* out, uint64_t max_size = kMaxStringSize);

 protected:
  // Obtains the next window into [begin_, end_) and sets pos_ = begin_. Returns OutOfRange at
  // the end of the data. Implementations must add the size of the old window to window_offset_
  // (SetWindow does this).
  virtual absl::Status Refill() = 0;

  void SetWindow(const char* begin, const char* end) {
    window_offset_ += static_cast<uint64_t>(end_ - begin_);
    begin_ = pos_ = begin;
    end_ = end;
  }

 private:
  absl::Status Next();
  absl::Status ReadSlow(char* dst, size_t n);
  absl::Status ReadVarUIntSlow(uint64_t* v);
  absl::Status VarUIntTooLong() const;

  const char* begin_ = nullptr;
  const char* pos_ = nullptr;
  const char* end_ = nullptr;
  uint64_t window_offset_ = 0;
};

// A ReadBuffer over one fixed span; its end is the end of data. With `stable`, decoded columns
// may view the span instead of copying it (the span must then outlive them).
class MemoryReadBuffer final : public ReadBuffer {
 public:
  explicit MemoryReadBuffer(std::string_view data, bool stable = false) : stable_(stable) {
    SetWindow(data.data(), data.data() + data.size());
  }
  bool WindowIsStable() const override { return stable_; }

 protected:
  absl::Status Refill() override;

 private:
  bool stable_;
};

}  // namespace chgate::clickhouse
