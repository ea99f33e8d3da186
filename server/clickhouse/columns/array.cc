#include "server/clickhouse/columns/array.h"

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/tuple.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {
namespace {
// Elements one block may declare for a nested column (guards corrupt offsets).
constexpr uint64_t kMaxElements = uint64_t{1} << 40;
}  // namespace

ColumnArray::ColumnArray(std::string type_name, TypeAst type, ColumnPtr nested, bool is_map)
    : Column(std::move(type_name), std::move(type)), nested_(std::move(nested)), is_map_(is_map) {}

void ColumnArray::Clear() {
  offsets_.clear();
  nested_->Clear();
}

ColumnPtr ColumnArray::CloneEmpty() const {
  return std::make_shared<ColumnArray>(type_name(), type(), nested_->CloneEmpty(), is_map_);
}

absl::Status ColumnArray::LoadBody(ReadBuffer& in, size_t rows) {
  const size_t first = Size();
  const uint64_t base = first == 0 ? 0 : Offset(first - 1);
  CHGATE_RETURN_IF_ERROR(ReadBulk(in, rows * 8, &offsets_));
  // Offsets on the wire are relative to this block; shift them after earlier rows and check
  // that they never decrease.
  uint64_t prev = 0;
  for (size_t i = first; i < first + rows; ++i) {
    uint64_t v = Offset(i);
    if (v < prev || v > kMaxElements) {
      return absl::DataLossError(
          absl::StrCat("corrupt array offsets: row ", i - first, " ends at ", v, " after ", prev));
    }
    prev = v;
    uint64_t shifted = v + base;
    std::memcpy(offsets_.data() + i * 8, &shifted, 8);
  }
  return nested_->LoadBody(in, static_cast<size_t>(prev));
}

void ColumnArray::SaveBody(GatherWriter& out) const {
  out.Reference(offsets_.data(), offsets_.size());
  nested_->SaveBody(out);
}

}  // namespace chgate::clickhouse
