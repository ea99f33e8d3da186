#include "server/ingest/stage.h"

#include "absl/strings/str_cat.h"
#include "server/ingest/batch.h"
#include "server/ingest/value_error.h"
#include "text/status_macros.h"

namespace chgate::ingest {
namespace {

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
      return absl::InvalidArgumentError(absl::StrCat(
          "column '", PrintableName(s.names[i]), "' has type ", PrintableName(col->type_name()),
          ", the table has ", PrintableName(s.prototypes[i]->type_name())));
    }
  }
  // The columns are what the table takes: staged as they are, not copied.
  auto staged = std::make_unique<clickhouse::Block>();
  for (size_t i = 0; i < s.names.size(); ++i) {
    staged->AddColumn(s.names[i], std::move(b.column(i).column));
  }
  return staged;
}

}  // namespace

absl::StatusOr<std::unique_ptr<clickhouse::Block>> Stage(const Request& request,
                                                         const TableSchema& schema,
                                                         const ConvertOptions& options) {
  if (request.rows != nullptr) return ConvertRows(*request.rows, schema, options);
  if (request.block != nullptr) return TakeBlock(*request.block, schema);
  return EmptyBlock(schema);
}

}  // namespace chgate::ingest
