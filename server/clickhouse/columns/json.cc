#include "server/clickhouse/columns/json.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/dynamic.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/low_cardinality.h"
#include "server/clickhouse/columns/nullable.h"
#include "server/clickhouse/columns/tuple.h"
#include "server/clickhouse/columns/variant.h"
#include "server/clickhouse/text_form.h"
#include "text/json.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {
namespace {

// Object serialization versions (the first UInt64 of the prefix).
constexpr uint64_t kVersionV1 = 0;
constexpr uint64_t kVersionString = 1;
constexpr uint64_t kVersionV2 = 2;
constexpr uint64_t kVersionFlattened = 3;
constexpr uint64_t kVersionV3 = 4;

constexpr uint64_t kMaxPathSize = 1 << 16;
constexpr uint64_t kMaxDynamicPaths = 1 << 16;

}  // namespace

ColumnJson::ColumnJson(std::string type_name, TypeAst type, JsonParams params)
    : Column(std::move(type_name), std::move(type)), params_(std::move(params)) {}

absl::Status ColumnJson::AppendJson(std::string_view text) {
  CHGATE_RETURN_IF_ERROR(text::ValidateJsonObject(text));
  texts_.Append(text);
  return absl::OkStatus();
}

ColumnPtr ColumnJson::CloneEmpty() const {
  JsonParams params = params_;
  for (auto& [path, column] : params.typed_paths) column = column->CloneEmpty();
  return std::make_shared<ColumnJson>(type_name(), type(), std::move(params));
}

absl::Status ColumnJson::LoadPrefix(ReadBuffer& in) {
  CHGATE_RETURN_IF_ERROR(in.ReadFixed(&version_));
  dynamic_paths_.clear();
  shared_ = nullptr;
  if (version_ == kVersionString) return absl::OkStatus();
  if (version_ == kVersionFlattened || version_ == kVersionV3) {
    return absl::UnimplementedError(absl::StrCat("JSON serialization version ", version_,
                                                 " is not supported (only V1, V2 and STRING)"));
  }
  if (version_ != kVersionV1 && version_ != kVersionV2) {
    return absl::DataLossError(absl::StrCat("unknown JSON serialization version ", version_));
  }
  uint64_t count = 0;
  if (version_ == kVersionV1) CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&count));  // max_dynamic_paths
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&count));
  if (count > kMaxDynamicPaths) {
    return absl::DataLossError(absl::StrCat("JSON prefix announces ", count, " dynamic paths"));
  }
  const TypeAst dynamic_type{.name = "Dynamic"};
  for (uint64_t i = 0; i < count; ++i) {
    std::string path;
    CHGATE_RETURN_IF_ERROR(in.ReadString(&path, kMaxPathSize));
    dynamic_paths_.emplace_back(
        std::move(path),
        std::make_shared<ColumnDynamic>("Dynamic", dynamic_type, params_.max_dynamic_types));
  }
  for (auto& [path, column] : params_.typed_paths) {
    column->Clear();
    CHGATE_RETURN_IF_ERROR(column->LoadPrefix(in));
  }
  for (auto& [path, column] : dynamic_paths_) CHGATE_RETURN_IF_ERROR(column->LoadPrefix(in));
  // Shared data is Array(Tuple(String, String)), which has no prefix.
  const TypeAst string_type{.name = "String"};
  const TypeAst pair_type{.name = "Tuple", .args = {string_type, string_type}};
  shared_ = std::make_shared<ColumnArray>(
      "Array(Tuple(String, String))", TypeAst{.name = "Array", .args = {pair_type}},
      std::make_shared<ColumnTuple>("Tuple(String, String)", pair_type,
                                    std::vector<ColumnPtr>{std::make_shared<ColumnString>(),
                                                           std::make_shared<ColumnString>()}));
  return absl::OkStatus();
}

absl::Status ColumnJson::LoadBody(ReadBuffer& in, size_t rows) {
  if (version_ == kVersionString) {
    // Each row is the server's own JSON text; it is kept as it came.
    return texts_.LoadBody(in, rows);
  }
  if (shared_ == nullptr) return absl::DataLossError("JSON body without its prefix");
  for (auto& [path, column] : params_.typed_paths)
    CHGATE_RETURN_IF_ERROR(column->LoadBody(in, rows));
  for (auto& [path, column] : dynamic_paths_) CHGATE_RETURN_IF_ERROR(column->LoadBody(in, rows));
  CHGATE_RETURN_IF_ERROR(shared_->LoadBody(in, rows));
  const auto& pairs =
      static_cast<const ColumnTuple&>(*static_cast<ColumnArray&>(*shared_).nested());
  const auto& values = static_cast<const ColumnString&>(*pairs.element(1));
  for (size_t i = 0; i < values.Size(); ++i) {
    absl::StatusOr<ColumnPtr> value = DecodeBinaryValue(values.At(i));
    if (!value.ok()) {
      return absl::Status(value.status().code(),
                          absl::StrCat("JSON shared data value: ", value.status().message()));
    }
  }
  AppendObjectRows(rows);
  for (auto& [path, column] : params_.typed_paths) column->Clear();
  for (auto& [path, column] : dynamic_paths_) column->Clear();
  shared_->Clear();
  return absl::OkStatus();
}

void ColumnJson::AppendObjectRows(size_t rows) {
  const auto& shared = static_cast<const ColumnArray&>(*shared_);
  const auto& pairs = static_cast<const ColumnTuple&>(*shared.nested());
  const auto& shared_paths = static_cast<const ColumnString&>(*pairs.element(0));
  const auto& shared_values = static_cast<const ColumnString&>(*pairs.element(1));
  std::vector<text::JsonPathValue> entries;
  std::string text;
  for (size_t row = 0; row < rows; ++row) {
    entries.clear();
    for (const auto& [path, column] : params_.typed_paths) {
      entries.push_back({path, {}});
      AppendJsonValue(*column, row, &entries.back().value);
    }
    for (const auto& [path, column] : dynamic_paths_) {
      if (static_cast<const ColumnDynamic&>(*column).IsNull(row)) continue;
      entries.push_back({path, {}});
      AppendJsonValue(*column, row, &entries.back().value);
    }
    for (size_t i = static_cast<size_t>(shared.RowBegin(row));
         i < static_cast<size_t>(shared.Offset(row)); ++i) {
      absl::StatusOr<ColumnPtr> value = DecodeBinaryValue(shared_values.At(i));
      if (!value.ok()) continue;  // checked in LoadBody
      entries.push_back({std::string(shared_paths.At(i)), {}});
      AppendJsonValue(**value, 0, &entries.back().value);
    }
    std::sort(
        entries.begin(), entries.end(),
        [](const text::JsonPathValue& a, const text::JsonPathValue& b) { return a.path < b.path; });
    text.clear();
    text::AppendNestedJsonObject(entries, &text);
    texts_.Append(text);
  }
}

void ColumnJson::SavePrefix(GatherWriter& out) const { out.WriteFixed<uint64_t>(kVersionString); }

}  // namespace chgate::clickhouse
