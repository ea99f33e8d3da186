#include "tests/unit/client/test_columns.h"

namespace chgate::client::testing {

v1::Column Col(const std::string& type, std::string data) {
  v1::Column c;
  c.set_type(type);
  c.set_data(std::move(data));
  return c;
}

v1::Column StringCol(const std::string& type, const std::vector<std::string>& values,
                     std::string nulls) {
  v1::Column c;
  c.set_type(type);
  for (const std::string& v : values) {
    c.mutable_data()->append(v);
    c.add_offsets(c.data().size());
  }
  c.set_nulls(std::move(nulls));
  return c;
}

std::vector<std::string> Texts(const v1::Column& column, uint64_t rows, TextFormat format,
                               const std::string& default_zone) {
  absl::StatusOr<ColumnType> type = ParseColumnType(column.type());
  if (!type.ok()) return {"error: " + type.status().ToString()};
  ApplyDefaultTimeZone(LoadZoneOrUtc(default_zone), &*type);
  absl::Status valid = ValidateColumn(column, *type, rows);
  if (!valid.ok()) return {"error: " + valid.ToString()};
  std::vector<std::string> out;
  for (uint64_t r = 0; r < rows; ++r) {
    std::string text;
    AppendValueText(column, *type, r, format, &text);
    out.push_back(std::move(text));
  }
  return out;
}

}  // namespace chgate::client::testing
