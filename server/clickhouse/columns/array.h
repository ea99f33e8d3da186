// ColumnArray: cumulative end offsets (UInt64, one per row) followed by the nested column holding
// every element of every row. Map(K, V) has the same layout with a Tuple(K, V) nested column and
// is printed as `{k:v,...}`.
#pragma once

#include <cstring>
#include <vector>

#include "server/clickhouse/columns/column.h"

namespace chgate::clickhouse {

class ColumnArray final : public Column {
 public:
  ColumnArray(std::string type_name, TypeAst type, ColumnPtr nested, bool is_map = false);

  const ColumnPtr& nested() const { return nested_; }
  bool is_map() const { return is_map_; }
  uint64_t Offset(size_t row) const {
    uint64_t v;
    std::memcpy(&v, offsets_.data() + row * 8, 8);
    return v;
  }
  uint64_t RowBegin(size_t row) const { return row == 0 ? 0 : Offset(row - 1); }
  // Closes the current row after its elements were appended to nested().
  void FinishRow() { offsets_.AppendFixed<uint64_t>(nested_->Size()); }
  const ByteBuffer& offsets() const { return offsets_; }

  ColumnKind kind() const override { return is_map_ ? ColumnKind::kMap : ColumnKind::kArray; }
  size_t Size() const override { return offsets_.size() / 8; }
  void Clear() override;
  void AppendDefault() override { FinishRow(); }
  void AppendRange(const Column& src, size_t begin, size_t end) override {
    const auto& s = static_cast<const ColumnArray&>(src);
    if (begin == end) return;
    const uint64_t from = s.RowBegin(begin);
    const uint64_t base = nested_->Size();
    for (size_t i = begin; i < end; ++i) offsets_.AppendFixed<uint64_t>(s.Offset(i) - from + base);
    nested_->AppendRange(*s.nested_, static_cast<size_t>(from),
                         static_cast<size_t>(s.Offset(end - 1)));
  }
  void ReserveForAppend(std::span<const Column* const> parts) override {
    size_t bytes = offsets_.size();
    std::vector<const Column*> nested;
    nested.reserve(parts.size());
    for (const Column* p : parts) {
      const auto& s = static_cast<const ColumnArray&>(*p);
      bytes += s.offsets_.size();
      nested.push_back(s.nested_.get());
    }
    offsets_.reserve(bytes);
    nested_->ReserveForAppend(nested);
  }
  void Truncate(size_t rows) override {
    nested_->Truncate(static_cast<size_t>(RowBegin(rows)));
    offsets_.resize(rows * 8);
  }
  ColumnPtr CloneEmpty() const override;
  size_t ByteSize() const override { return offsets_.size() + nested_->ByteSize(); }
  absl::Status LoadPrefix(ReadBuffer& in) override { return nested_->LoadPrefix(in); }
  absl::Status LoadBody(ReadBuffer& in, size_t rows) override;
  void SavePrefix(GatherWriter& out) const override { nested_->SavePrefix(out); }
  void SaveBody(GatherWriter& out) const override;

 private:
  ByteBuffer offsets_;
  ColumnPtr nested_;
  bool is_map_;
};

}  // namespace chgate::clickhouse
