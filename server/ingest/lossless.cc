#include "server/ingest/lossless.h"

#include <string>
#include <string_view>

#include "server/clickhouse/text_form.h"
#include "server/ingest/convert.h"
#include "server/ingest/schema_cache.h"
#include "server/ingest/task_runner.h"
#include "server/ingest/value.h"

namespace chgate::ingest {

std::optional<clickhouse::Block> ConvertLosslessly(const clickhouse::Block& block,
                                                   const TableSchema& schema, bool* same_header) {
  if (same_header != nullptr) *same_header = false;
  if (schema.names.size() != block.column_count()) return std::nullopt;
  clickhouse::Block out;
  std::string text, back;
  bool changed = false;
  for (size_t c = 0; c < block.column_count(); ++c) {
    const clickhouse::NamedColumn& from = block.column(c);
    if (schema.names[c] != from.name) return std::nullopt;
    const clickhouse::ColumnPtr& to_type = schema.prototypes[c];
    if (to_type->type_name() == from.column->type_name()) {
      out.AddColumn(from.name, from.column);
      continue;
    }
    clickhouse::ColumnPtr to = to_type->CloneEmpty();
    for (size_t row = 0; row < from.column->Size(); ++row) {
      text.clear();
      AppendTsvValue(*from.column, row, false, &text);
      const bool null = text == "\\N" && from.column->kind() == clickhouse::ColumnKind::kNullable;
      const std::string_view view = text;
      if (!AppendValue(null ? NullValue() : TextValue(&view), *to, ConvertOptions{}).ok()) {
        return std::nullopt;
      }
      back.clear();
      AppendTsvValue(*to, row, false, &back);
      if (back != text) return std::nullopt;
    }
    out.AddColumn(from.name, std::move(to));
    changed = true;
  }
  // The same header: the refusal was about the rows, and sending them again would not help.
  if (!changed) {
    if (same_header != nullptr) *same_header = true;
    return std::nullopt;
  }
  return out;
}

std::optional<clickhouse::Block> ConvertToChangedTable(Inserter* inserter, Clock* clock,
                                                       const RetryPolicy& retry,
                                                       const TableId& table,
                                                       const clickhouse::Block& block,
                                                       const std::function<absl::Time()>& stop_at,
                                                       bool* same_header, bool* undecided) {
  if (same_header != nullptr) *same_header = false;
  if (undecided != nullptr) *undecided = false;
  std::vector<std::string> names;
  for (const clickhouse::NamedColumn& c : block.columns()) names.push_back(c.name);
  for (int tries = 0;; ++tries) {
    TaskRunner::MarkProgress(clock);
    absl::StatusOr<TableSchema> now =
        inserter->Describe(table, names, clock->Now() + SchemaCache::kRefreshTimeout);
    if (now.ok()) return ConvertLosslessly(block, *now, same_header);
    // Only an answer about the table decides; while ClickHouse does not answer, ask again.
    if (!IsRetryable(now.status()) || IsTableChangeError(now.status())) return std::nullopt;
    const absl::Time resume = clock->Now() + BackoffCap(retry, tries + 1);
    if (resume >= stop_at()) {
      if (undecided != nullptr) *undecided = true;
      return std::nullopt;
    }
    clock->SleepUntil(resume);
  }
}

}  // namespace chgate::ingest
