// ColumnString: String values kept in wire layout (VarUInt length + bytes, back to back) in one
// buffer, so small strings are packed while they are appended and SaveBody is one reference.
// `ends_` records where each row ends, for random access.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "server/clickhouse/columns/column.h"

namespace chgate::clickhouse {

class ColumnString final : public Column {
 public:
  ColumnString();
  ColumnString(std::string type_name, TypeAst type);

  void Append(std::string_view value) {
    wire_.AppendString(value);
    ends_.push_back(wire_.size());
  }
  // Makes room for `rows` more values of `bytes` bytes in all without growing again (values
  // under 128 bytes each: longer ones need a few more bytes of length prefix). Grows
  // geometrically, so calls for a row at a time stay linear.
  void Reserve(size_t rows, size_t bytes) {
    wire_.reserve(wire_.size() + bytes + rows + 10);  // Append prepares 10 bytes of prefix room
    if (ends_.capacity() < ends_.size() + rows) {
      ends_.reserve(std::max(ends_.size() + rows, ends_.capacity() * 2));
    }
  }
  // Appends `rows` values cut from `data`: value i runs from the end of value i-1 (`first_begin`
  // for the first) to `ends[i]`. The ends must not decrease and stay within `data`; one
  // reservation for all of them.
  void AppendSlices(std::string_view data, const uint64_t* ends, size_t rows, uint64_t first_begin);
  std::string_view At(size_t row) const;
  // Wire bytes (length prefixes included) of rows [begin, end).
  uint64_t WireBytes(size_t begin, size_t end) const {
    if (begin >= end) return 0;
    return ends_[end - 1] - (begin == 0 ? 0 : ends_[begin - 1]);
  }
  // Start of row `row`'s length prefix in wire().
  uint64_t WireBegin(size_t row) const { return row == 0 ? 0 : ends_[row - 1]; }
  // The wire bytes of every row (length prefixes included).
  const ByteBuffer& wire() const { return wire_; }

  ColumnKind kind() const override { return ColumnKind::kString; }
  size_t Size() const override { return ends_.size(); }
  void Clear() override {
    wire_.clear();
    ends_.clear();
  }
  void AppendDefault() override { Append({}); }
  void AppendRange(const Column& src, size_t begin, size_t end) override {
    const auto& s = static_cast<const ColumnString&>(src);
    if (begin == end) return;
    const uint64_t from = begin == 0 ? 0 : s.ends_[begin - 1];
    const uint64_t shift = wire_.size() - from;
    wire_.Append(s.wire_.data() + from, s.ends_[end - 1] - from);
    for (size_t i = begin; i < end; ++i) ends_.push_back(s.ends_[i] + shift);
  }
  void ReserveForAppend(std::span<const Column* const> parts) override {
    size_t bytes = wire_.size();
    size_t rows = ends_.size();
    for (const Column* p : parts) {
      const auto& s = static_cast<const ColumnString&>(*p);
      bytes += s.wire_.size();
      rows += s.ends_.size();
    }
    wire_.reserve(bytes);
    ends_.reserve(rows);
  }
  void Truncate(size_t rows) override {
    wire_.resize(rows == 0 ? 0 : ends_[rows - 1]);
    ends_.resize(rows);
  }
  ColumnPtr CloneEmpty() const override;
  size_t ByteSize() const override { return wire_.size() + ends_.size() * sizeof(uint64_t); }
  absl::Status LoadBody(ReadBuffer& in, size_t rows) override;
  absl::Status SkipBody(ReadBuffer& in, size_t rows) override;
  void SaveBody(GatherWriter& out) const override { out.Reference(wire_.data(), wire_.size()); }

 private:
  ByteBuffer wire_;
  std::vector<uint64_t> ends_;
};

}  // namespace chgate::clickhouse
