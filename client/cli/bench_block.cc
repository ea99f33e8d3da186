// bench's columnar request: a Block of copies of the --row, built with the SDK's BlockBuilder
// for the given (or the table's) column types.
#include "absl/strings/str_cat.h"
#include "client/cli/bench.h"
#include "client/sdk/builders.h"
#include "text/status_macros.h"
#include "text/value_parse.h"

namespace chgate::cli {

namespace {

// A --row string: the text of a date or time for those types, the bytes for the others.
absl::Status AppendBenchString(client::ColumnBuilder& column, const std::string& s,
                               const std::string& name) {
  const client::ColumnType& type = column.type();
  const client::TypeKind kind = type.kind;
  const bool date = kind == client::TypeKind::kDate || kind == client::TypeKind::kDate32;
  if (!date && kind != client::TypeKind::kDateTime && kind != client::TypeKind::kDateTime64) {
    column.AppendString(s);
    return absl::OkStatus();
  }
  int64_t days = 0;
  int64_t seconds = 0;
  uint32_t nanos = 0;
  if (date && text::ParseDateText(s, &days) == nullptr) {
    column.AppendTime(absl::FromUnixSeconds(days * 86400));
  } else if (const char* why =
                 text::ParseDateTimeText(s, type.zone, /*utc=*/false, &seconds, &nanos)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--row: column ", name, " (", type.text, "): '", s, "': ", why));
  } else {
    column.AppendTime(absl::FromUnixSeconds(seconds) + absl::Nanoseconds(nanos));
  }
  return absl::OkStatus();
}

// Appends `value` (a --row value, as JsonToValue made it) to `column` as one row. Scalar values
// that do not fit are reported by BlockBuilder::Build; a JSON shape the column cannot take
// (an array for a String column, ...) is reported here.
absl::Status AppendBenchValue(client::ColumnBuilder& column, const v1::Value& value,
                              const std::string& name) {
  const client::ColumnType& type = column.type();
  auto mismatch = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("--row: column ", name, " (", type.text, ") does not take ", what));
  };
  switch (value.kind_case()) {
    case v1::Value::kNullValue:
      column.AppendNull();
      return absl::OkStatus();
    case v1::Value::kBoolValue:
      column.AppendBool(value.bool_value());
      return absl::OkStatus();
    case v1::Value::kInt64Value:
      column.AppendInt64(value.int64_value());
      return absl::OkStatus();
    case v1::Value::kUint64Value:
      column.AppendUInt64(value.uint64_value());
      return absl::OkStatus();
    case v1::Value::kDoubleValue:
      column.AppendFloat64(value.double_value());
      return absl::OkStatus();
    case v1::Value::kStringValue:
      return AppendBenchString(column, value.string_value(), name);
    case v1::Value::kArrayValue: {
      const auto& items = value.array_value().values();
      if (type.kind == client::TypeKind::kArray) {
        for (const v1::Value& item : items) {
          CHGATE_RETURN_IF_ERROR(AppendBenchValue(column.element(), item, name));
        }
      } else if (type.kind == client::TypeKind::kTuple) {
        if (static_cast<size_t>(items.size()) != type.elements.size()) {
          return mismatch(absl::StrCat(items.size(), " elements"));
        }
        for (int i = 0; i < items.size(); ++i) {
          CHGATE_RETURN_IF_ERROR(
              AppendBenchValue(column.element(static_cast<size_t>(i)), items[i], name));
        }
      } else {
        return mismatch("a JSON array");
      }
      column.EndRow();
      return absl::OkStatus();
    }
    case v1::Value::kMapValue: {
      if (type.kind != client::TypeKind::kMap) return mismatch("a JSON object");
      for (const v1::MapValue::Entry& entry : value.map_value().entries()) {
        CHGATE_RETURN_IF_ERROR(AppendBenchValue(column.element(0), entry.key(), name));
        CHGATE_RETURN_IF_ERROR(AppendBenchValue(column.element(1), entry.value(), name));
      }
      column.EndRow();
      return absl::OkStatus();
    }
    case v1::Value::kBytesValue:
    case v1::Value::kTimestampValue:
    case v1::Value::kTupleValue:
    case v1::Value::KIND_NOT_SET:
      break;
  }
  return mismatch("this kind of value");
}

}  // namespace

absl::StatusOr<v1::Block> BuildBenchBlock(const BenchRow& row,
                                          const std::vector<std::string>& types, uint64_t rows) {
  if (types.size() != row.values.size()) {
    return absl::InvalidArgumentError(absl::StrCat("--row has ", row.values.size(), " values for ",
                                                   types.size(), " column types"));
  }
  client::BlockBuilder block;
  std::vector<client::ColumnBuilder*> columns;
  std::vector<std::string> names;
  for (size_t i = 0; i < types.size(); ++i) {
    names.push_back(i < row.columns.size() ? row.columns[i] : absl::StrCat("#", i + 1));
    columns.push_back(&block.AddColumn(i < row.columns.size() ? row.columns[i] : "", types[i]));
  }
  for (uint64_t r = 0; r < rows; ++r) {
    for (size_t i = 0; i < columns.size(); ++i) {
      CHGATE_RETURN_IF_ERROR(AppendBenchValue(*columns[i], row.values[i], names[i]));
    }
  }
  absl::StatusOr<v1::Block> built = block.Build();
  if (!built.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--row: ", built.status().message()));
  }
  return built;
}

}  // namespace chgate::cli
