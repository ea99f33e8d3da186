#include "server/clickhouse/columns/string.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/fixed.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {

ColumnString::ColumnString() : Column("String", TypeAst{.name = "String"}) {}

ColumnString::ColumnString(std::string type_name, TypeAst type)
    : Column(std::move(type_name), std::move(type)) {}

void ColumnString::AppendSlices(std::string_view data, const uint64_t* ends, size_t rows,
                                uint64_t first_begin) {
  if (rows == 0) return;
  // The length prefixes' size first (one byte each below 128), so the buffer grows once.
  size_t prefix_bytes = 0;
  uint64_t begin = first_begin;
  for (size_t i = 0; i < rows; ++i) {
    prefix_bytes += VarUIntSize(ends[i] - begin);
    begin = ends[i];
  }
  const size_t value_bytes = ends[rows - 1] - first_begin;
  const size_t old_size = wire_.size();
  // kSlack more bytes of room: a short value is copied as one 16-byte move when `data` has 16
  // bytes from its start (the bytes past its end are overwritten by what follows, or unused).
  constexpr size_t kSlack = 16;
  char* out = wire_.Prepare(prefix_bytes + value_bytes + kSlack);
  // Room for the ends without zero-filling it, grown geometrically (push_back below never
  // reallocates).
  if (ends_.capacity() < ends_.size() + rows) {
    ends_.reserve(std::max(ends_.size() + rows, ends_.capacity() * 2));
  }
  size_t written = 0;
  begin = first_begin;
  for (size_t i = 0; i < rows; ++i) {
    const uint64_t size = ends[i] - begin;
    if (size < 0x80) {
      out[written++] = static_cast<char>(size);
    } else {
      written += EncodeVarUInt(size, out + written);
    }
    if (size <= kSlack && begin + kSlack <= data.size()) {
      std::memcpy(out + written, data.data() + begin, kSlack);
    } else {
      std::memcpy(out + written, data.data() + begin, size);
    }
    written += size;
    ends_.push_back(old_size + written);
    begin = ends[i];
  }
  wire_.Commit(written);
}

std::string_view ColumnString::At(size_t row) const {
  size_t begin = row == 0 ? 0 : ends_[row - 1];
  const char* p = wire_.data() + begin;
  uint64_t len = 0;
  int shift = 0;
  while (true) {
    uint8_t byte = static_cast<uint8_t>(*p++);
    len |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) break;
    shift += 7;
  }
  return std::string_view(p, static_cast<size_t>(len));
}

ColumnPtr ColumnString::CloneEmpty() const {
  return std::make_shared<ColumnString>(type_name(), type());
}

absl::Status ColumnString::SkipBody(ReadBuffer& in, size_t rows) {
  Clear();
  for (size_t i = 0; i < rows; ++i) {
    uint64_t len = 0;
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&len));
    CHGATE_RETURN_IF_ERROR(in.Skip(len));
  }
  return absl::OkStatus();
}

absl::Status ColumnString::LoadBody(ReadBuffer& in, size_t rows) {
  ends_.reserve(ends_.size() + std::min<size_t>(rows, 1 << 20));
  if (wire_.empty() && in.WindowIsStable()) {
    // Zero copy when every value lies in the current window: scan the lengths, record where
    // each row ends, and view the bytes in place.
    const char* const begin = in.pos();
    const char* const end = in.end();
    const char* p = begin;
    size_t done = 0;
    for (; done < rows; ++done) {
      uint64_t len = 0;
      int shift = 0;
      bool complete = false;
      while (p < end && shift < 64) {
        const uint8_t byte = static_cast<uint8_t>(*p++);
        len |= static_cast<uint64_t>(byte & 0x7f) << shift;
        shift += 7;
        if ((byte & 0x80) == 0) {
          complete = true;
          break;
        }
      }
      if (!complete || len > static_cast<uint64_t>(end - p)) break;
      p += len;
      ends_.push_back(static_cast<uint64_t>(p - begin));
    }
    if (done == rows) {
      wire_.SetView(begin, static_cast<size_t>(p - begin));
      in.Advance(static_cast<size_t>(p - begin));
      return absl::OkStatus();
    }
    ends_.resize(ends_.size() - done);  // not all in the window: copy instead
  }
  for (size_t i = 0; i < rows; ++i) {
    uint64_t len = 0;
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&len));
    if (len > kMaxStringSize) {
      return absl::DataLossError(absl::StrCat("String value of ", len, " bytes at offset ",
                                              in.position(), " exceeds the limit"));
    }
    wire_.AppendVarUInt(len);
    size_t n = static_cast<size_t>(len);
    if (in.available() >= n) {
      wire_.Append(in.pos(), n);
      in.Advance(n);
    } else {
      CHGATE_RETURN_IF_ERROR(ReadBulk(in, n, &wire_));
    }
    ends_.push_back(wire_.size());
  }
  return absl::OkStatus();
}

void AppendTsvEscaped(std::string_view s, std::string* out) { AppendEscaped(s, out); }

}  // namespace chgate::clickhouse
