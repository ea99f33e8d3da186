// ColumnTuple: each element's column in turn. Named tuples differ only in the type name.
#pragma once

#include <vector>

#include "server/clickhouse/columns/column.h"

namespace chgate::clickhouse {

class ColumnTuple final : public Column {
 public:
  ColumnTuple(std::string type_name, TypeAst type, std::vector<ColumnPtr> elements);

  size_t element_count() const { return elements_.size(); }
  const ColumnPtr& element(size_t i) const { return elements_[i]; }

  ColumnKind kind() const override { return ColumnKind::kTuple; }
  size_t Size() const override { return elements_.empty() ? 0 : elements_[0]->Size(); }
  void Clear() override;
  void AppendDefault() override;
  void AppendRange(const Column& src, size_t begin, size_t end) override {
    const auto& s = static_cast<const ColumnTuple&>(src);
    for (size_t i = 0; i < elements_.size(); ++i)
      elements_[i]->AppendRange(*s.elements_[i], begin, end);
  }
  void Truncate(size_t rows) override {
    for (auto& e : elements_) e->Truncate(rows);
  }
  ColumnPtr CloneEmpty() const override;
  size_t ByteSize() const override;
  absl::Status LoadPrefix(ReadBuffer& in) override;
  absl::Status LoadBody(ReadBuffer& in, size_t rows) override;
  void SavePrefix(GatherWriter& out) const override;
  void SaveBody(GatherWriter& out) const override;
  void FormatValue(size_t row, bool nested, std::string* out) const override;

 private:
  std::vector<ColumnPtr> elements_;
};

}  // namespace chgate::clickhouse
