#include "server/ingest/stage.h"

#include <map>
#include <span>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/array.h"
#include "server/ingest/batch.h"
#include "server/ingest/value_error.h"
#include "text/status_macros.h"

namespace chgate::ingest {
namespace {

// The Nested structure a column belongs to, as ClickHouse reads its name: the part before the
// first '.', when the dot is neither the first nor the last character; empty for any other name.
std::string_view NestedPrefix(std::string_view name) {
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == name.size()) return {};
  return name.substr(0, dot);
}

// CheckNestedSizes over columns and the names the INSERT gives them.
absl::Status NestedSizes(std::span<const std::string_view> names,
                         std::span<const clickhouse::Column* const> columns) {
  std::map<std::string_view, size_t, std::less<>> first;  // prefix -> its first column
  for (size_t c = 0; c < columns.size(); ++c) {
    const auto* array = dynamic_cast<const clickhouse::ColumnArray*>(columns[c]);
    if (array == nullptr || array->is_map()) continue;
    const std::string_view prefix = NestedPrefix(names[c]);
    if (prefix.empty()) continue;
    const auto [it, inserted] = first.emplace(prefix, c);
    if (inserted) continue;
    const std::string_view name = names[c], other = names[it->second];
    const auto& other_array = static_cast<const clickhouse::ColumnArray&>(*columns[it->second]);
    for (size_t r = 0; r < array->Size(); ++r) {
      const uint64_t size = array->Offset(r) - array->RowBegin(r);
      const uint64_t other_size = other_array.Offset(r) - other_array.RowBegin(r);
      if (size == other_size) continue;
      return WithValueError(
          absl::InvalidArgumentError(absl::StrCat(
              "row ", r, ": columns '", PrintableName(other), "' and '", PrintableName(name),
              "' are elements of the Nested structure '", PrintableName(prefix),
              "' and need arrays of one size in each row; '", PrintableName(other), "' has ",
              other_size, " elements and '", PrintableName(name), "' ", size,
              " (ClickHouse would refuse the whole INSERT: SIZES_OF_ARRAYS_DOESNT_MATCH)")),
          ValueError{.row = r, .column = std::string(name), .type = array->type_name()});
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<clickhouse::Block>> ConvertRows(const RowSource& rows,
                                                               const TableSchema& s,
                                                               ConvertOptions options) {
  std::unique_ptr<clickhouse::Block> staged = EmptyBlock(s);
  std::vector<clickhouse::Column*> columns;
  for (size_t i = 0; i < s.names.size(); ++i) columns.push_back(staged->column(i).column.get());
  absl::TimeZone tz;
  if (!s.server_time_zone.empty() && absl::LoadTimeZone(s.server_time_zone, &tz)) {
    options.server_time_zone = tz;
  }
  CHGATE_RETURN_IF_ERROR(AppendRows(rows, s.names, columns, options));
  return staged;
}

absl::StatusOr<std::unique_ptr<clickhouse::Block>> TakeBlock(clickhouse::Block& b,
                                                             const TableSchema& s) {
  CHGATE_RETURN_IF_ERROR(b.Validate());
  if (b.column_count() != s.names.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block has ", b.column_count(), " columns, the insert expects ", s.names.size()));
  }
  for (size_t i = 0; i < s.names.size(); ++i) {
    const clickhouse::ColumnPtr& col = b.column(i).column;
    if (col->type_name() != s.prototypes[i]->type_name()) {
      return WithValueError(
          absl::InvalidArgumentError(absl::StrCat(
              "column '", PrintableName(s.names[i]), "' has type ", PrintableName(col->type_name()),
              ", the table has ", PrintableName(s.prototypes[i]->type_name()))),
          ValueError{.column = s.names[i], .type = s.prototypes[i]->type_name()});
    }
  }
  std::vector<std::string_view> names(s.names.begin(), s.names.end());
  std::vector<const clickhouse::Column*> columns;
  for (size_t i = 0; i < s.names.size(); ++i) columns.push_back(b.column(i).column.get());
  CHGATE_RETURN_IF_ERROR(NestedSizes(names, columns));
  // The columns are what the table takes: staged as they are, not copied.
  auto staged = std::make_unique<clickhouse::Block>();
  for (size_t i = 0; i < s.names.size(); ++i) {
    staged->AddColumn(s.names[i], std::move(b.column(i).column));
  }
  return staged;
}

}  // namespace

absl::Status CheckNestedSizes(const clickhouse::Block& block) {
  std::vector<std::string_view> names;
  std::vector<const clickhouse::Column*> columns;
  for (const clickhouse::NamedColumn& col : block.columns()) {
    names.push_back(col.name);
    columns.push_back(col.column.get());
  }
  return NestedSizes(names, columns);
}

absl::StatusOr<std::unique_ptr<clickhouse::Block>> Stage(const Request& request,
                                                         const TableSchema& schema,
                                                         const ConvertOptions& options) {
  if (request.rows != nullptr) {
    absl::StatusOr<std::unique_ptr<clickhouse::Block>> staged =
        ConvertRows(*request.rows, schema, options);
    if (staged.ok()) CHGATE_RETURN_IF_ERROR(CheckNestedSizes(**staged));
    return staged;
  }
  if (request.block != nullptr) return TakeBlock(*request.block, schema);
  return EmptyBlock(schema);
}

}  // namespace chgate::ingest
