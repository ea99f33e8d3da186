#include "server/clickhouse/columns/tuple.h"

#include <cstring>

#include "text/status_macros.h"

namespace chgate::clickhouse {

ColumnTuple::ColumnTuple(std::string type_name, TypeAst type, std::vector<ColumnPtr> elements)
    : Column(std::move(type_name), std::move(type)), elements_(std::move(elements)) {}

void ColumnTuple::Clear() {
  rows_ = 0;
  for (auto& e : elements_) e->Clear();
}

void ColumnTuple::AppendDefault() {
  ++rows_;
  for (auto& e : elements_) e->AppendDefault();
}

ColumnPtr ColumnTuple::CloneEmpty() const {
  std::vector<ColumnPtr> empty;
  empty.reserve(elements_.size());
  for (const auto& e : elements_) empty.push_back(e->CloneEmpty());
  return std::make_shared<ColumnTuple>(type_name(), type(), std::move(empty));
}

size_t ColumnTuple::ByteSize() const {
  size_t n = 0;
  for (const auto& e : elements_) n += e->ByteSize();
  return n;
}

absl::Status ColumnTuple::LoadPrefix(ReadBuffer& in) {
  for (auto& e : elements_) CHGATE_RETURN_IF_ERROR(e->LoadPrefix(in));
  return absl::OkStatus();
}

absl::Status ColumnTuple::LoadBody(ReadBuffer& in, size_t rows) {
  if (elements_.empty()) {
    CHGATE_RETURN_IF_ERROR(in.Skip(rows));
    rows_ += rows;
    return absl::OkStatus();
  }
  for (auto& e : elements_) CHGATE_RETURN_IF_ERROR(e->LoadBody(in, rows));
  return absl::OkStatus();
}

void ColumnTuple::SavePrefix(GatherWriter& out) const {
  for (const auto& e : elements_) e->SavePrefix(out);
}

void ColumnTuple::SaveBody(GatherWriter& out) const {
  if (elements_.empty()) {
    zeros_.clear();
    std::memset(zeros_.Prepare(rows_), '0', rows_);
    zeros_.Commit(rows_);
    out.Reference(zeros_.data(), zeros_.size());
    return;
  }
  for (const auto& e : elements_) e->SaveBody(out);
}

}  // namespace chgate::clickhouse
