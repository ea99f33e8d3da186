// ColumnTuple: each element's column in turn. Named tuples differ only in the type name. The
// empty Tuple() counts its rows itself and sends one byte '0' per row, which readers skip
// (ClickHouse's SerializationTuple for no elements).
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
  size_t Size() const override { return elements_.empty() ? rows_ : elements_[0]->Size(); }
  void Clear() override;
  void AppendDefault() override;
  void AppendRange(const Column& src, size_t begin, size_t end) override {
    const auto& s = static_cast<const ColumnTuple&>(src);
    rows_ += end - begin;
    for (size_t i = 0; i < elements_.size(); ++i)
      elements_[i]->AppendRange(*s.elements_[i], begin, end);
  }
  void ReserveForAppend(std::span<const Column* const> parts) override {
    std::vector<const Column*> element(parts.size());
    for (size_t i = 0; i < elements_.size(); ++i) {
      for (size_t j = 0; j < parts.size(); ++j) {
        element[j] = static_cast<const ColumnTuple&>(*parts[j]).elements_[i].get();
      }
      elements_[i]->ReserveForAppend(element);
    }
  }
  void Truncate(size_t rows) override {
    rows_ = rows;
    for (auto& e : elements_) e->Truncate(rows);
  }
  ColumnPtr CloneEmpty() const override;
  size_t ByteSize() const override;
  absl::Status LoadPrefix(ReadBuffer& in) override;
  absl::Status LoadBody(ReadBuffer& in, size_t rows) override;
  void SavePrefix(GatherWriter& out) const override;
  void SaveBody(GatherWriter& out) const override;

 private:
  std::vector<ColumnPtr> elements_;
  size_t rows_ = 0;           // the row count of an empty Tuple()
  mutable ByteBuffer zeros_;  // an empty Tuple()'s body, staged for SaveBody
};

}  // namespace chgate::clickhouse
