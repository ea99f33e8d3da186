#include "server/clickhouse/columns/nullable.h"

#include "server/clickhouse/columns/fixed.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {

ColumnNullable::ColumnNullable(std::string type_name, TypeAst type, ColumnPtr nested)
    : Column(std::move(type_name), std::move(type)), nested_(std::move(nested)) {}

void ColumnNullable::AppendNull() {
  nulls_.PushBack(1);
  nested_->AppendDefault();
}

void ColumnNullable::Clear() {
  nulls_.clear();
  nested_->Clear();
}

ColumnPtr ColumnNullable::CloneEmpty() const {
  return std::make_shared<ColumnNullable>(type_name(), type(), nested_->CloneEmpty());
}

absl::Status ColumnNullable::LoadBody(ReadBuffer& in, size_t rows) {
  CHGATE_RETURN_IF_ERROR(ReadBulk(in, rows, &nulls_));
  return nested_->LoadBody(in, rows);
}

void ColumnNullable::SaveBody(GatherWriter& out) const {
  out.Reference(nulls_.data(), nulls_.size());
  nested_->SaveBody(out);
}

}  // namespace chgate::clickhouse
