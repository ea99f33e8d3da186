#include "server/clickhouse/wire/buffer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace chgate::clickhouse {

void ByteBuffer::Materialize() {
  const char* src = view_;
  const size_t n = size_;
  view_ = nullptr;
  size_ = 0;
  if (n > capacity_) Grow(n);
  if (n != 0) std::memcpy(data_.get(), src, n);
  size_ = n;
}

void ByteBuffer::Grow(size_t min_capacity) {
  size_t new_capacity = std::max<size_t>({min_capacity, capacity_ * 2, 64});
  std::unique_ptr<char[]> fresh(new char[new_capacity]);
  if (size_ != 0) std::memcpy(fresh.get(), data_.get(), size_);
  data_ = std::move(fresh);
  capacity_ = new_capacity;
}

absl::Status ReadBuffer::Next() {
  absl::Status status = Refill();
  if (!status.ok()) return status;
  if (pos_ == end_) {
    return absl::InternalError("read buffer refilled with an empty window");
  }
  return absl::OkStatus();
}

absl::Status ReadBuffer::ReadSlow(char* dst, size_t n) {
  while (n > 0) {
    if (pos_ == end_) {
      absl::Status status = Next();
      if (!status.ok()) return status;
    }
    size_t chunk = std::min(n, static_cast<size_t>(end_ - pos_));
    std::memcpy(dst, pos_, chunk);
    dst += chunk;
    pos_ += chunk;
    n -= chunk;
  }
  return absl::OkStatus();
}

absl::Status ReadBuffer::Skip(size_t n) {
  while (n > 0) {
    if (pos_ == end_) {
      absl::Status status = Next();
      if (!status.ok()) return status;
    }
    size_t chunk = std::min(n, static_cast<size_t>(end_ - pos_));
    pos_ += chunk;
    n -= chunk;
  }
  return absl::OkStatus();
}

absl::Status ReadBuffer::ReadVarUIntSlow(uint64_t* v) {
  uint64_t result = 0;
  for (int i = 0; i < 10; ++i) {
    if (pos_ == end_) {
      absl::Status status = Next();
      if (!status.ok()) return status;
    }
    uint8_t byte = static_cast<uint8_t>(*pos_++);
    result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) {
      if (i == 9 && byte > 1) return VarUIntTooLong();
      *v = result;
      return absl::OkStatus();
    }
  }
  return VarUIntTooLong();
}

absl::Status ReadBuffer::VarUIntTooLong() const {
  return absl::DataLossError(absl::StrCat(
      "malformed VarUInt (more than 10 bytes or above 2^64 - 1) at offset ", position()));
}

absl::Status ReadBuffer::ReadString(std::string* out, uint64_t max_size) {
  uint64_t size = 0;
  absl::Status status = ReadVarUInt(&size);
  if (!status.ok()) return status;
  if (size > max_size) {
    return absl::DataLossError(absl::StrCat("string of ", size, " bytes at offset ", position(),
                                            " exceeds the limit of ", max_size));
  }
  out->clear();
  if (available() >= size) {
    out->assign(pos_, static_cast<size_t>(size));
    pos_ += size;
    return absl::OkStatus();
  }
  while (size > 0) {
    if (pos_ == end_) {
      status = Next();
      if (!status.ok()) return status;
    }
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(size, available()));
    out->append(pos_, chunk);
    pos_ += chunk;
    size -= chunk;
  }
  return absl::OkStatus();
}

absl::Status ReadBuffer::ReadStringInto(ByteBuffer* out, uint64_t max_size) {
  uint64_t size = 0;
  absl::Status status = ReadVarUInt(&size);
  if (!status.ok()) return status;
  if (size > max_size) {
    return absl::DataLossError(absl::StrCat("string of ", size, " bytes at offset ", position(),
                                            " exceeds the limit of ", max_size));
  }
  while (size > 0) {
    if (pos_ == end_) {
      status = Next();
      if (!status.ok()) return status;
    }
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(size, available()));
    out->Append(pos_, chunk);
    pos_ += chunk;
    size -= chunk;
  }
  return absl::OkStatus();
}

absl::Status MemoryReadBuffer::Refill() {
  return absl::OutOfRangeError(absl::StrCat("unexpected end of data at offset ", position()));
}

}  // namespace chgate::clickhouse
