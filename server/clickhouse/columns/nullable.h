// ColumnNullable: a null map (one byte per row, 1 = NULL) followed by the nested column, which
// holds a default value under every NULL.
#pragma once

#include <vector>

#include "server/clickhouse/columns/column.h"

namespace chgate::clickhouse {

class ColumnNullable final : public Column {
 public:
  ColumnNullable(std::string type_name, TypeAst type, ColumnPtr nested);

  const ColumnPtr& nested() const { return nested_; }
  bool IsNull(size_t row) const { return nulls_.data()[row] != 0; }
  const ByteBuffer& nulls() const { return nulls_; }
  // Appends NULL (and a default into the nested column).
  void AppendNull();
  // Marks the next row as present; the caller appends its value to nested().
  void AppendNotNull() { nulls_.PushBack(0); }

  ColumnKind kind() const override { return ColumnKind::kNullable; }
  size_t Size() const override { return nulls_.size(); }
  void Clear() override;
  void AppendDefault() override { AppendNull(); }
  void AppendRange(const Column& src, size_t begin, size_t end) override {
    const auto& s = static_cast<const ColumnNullable&>(src);
    nulls_.Append(s.nulls_.data() + begin, end - begin);
    nested_->AppendRange(*s.nested_, begin, end);
  }
  void ReserveForAppend(std::span<const Column* const> parts) override {
    size_t rows = nulls_.size();
    std::vector<const Column*> nested;
    nested.reserve(parts.size());
    for (const Column* p : parts) {
      const auto& s = static_cast<const ColumnNullable&>(*p);
      rows += s.nulls_.size();
      nested.push_back(s.nested_.get());
    }
    nulls_.reserve(rows);
    nested_->ReserveForAppend(nested);
  }
  void Truncate(size_t rows) override {
    nulls_.resize(rows);
    nested_->Truncate(rows);
  }
  ColumnPtr CloneEmpty() const override;
  size_t ByteSize() const override { return nulls_.size() + nested_->ByteSize(); }
  absl::Status LoadPrefix(ReadBuffer& in) override { return nested_->LoadPrefix(in); }
  absl::Status LoadBody(ReadBuffer& in, size_t rows) override;
  void SavePrefix(GatherWriter& out) const override { nested_->SavePrefix(out); }
  void SaveBody(GatherWriter& out) const override;

 private:
  ByteBuffer nulls_;
  ColumnPtr nested_;
};

}  // namespace chgate::clickhouse
