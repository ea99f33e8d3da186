// Converting a block to a table's changed INSERT header without losing anything.
#pragma once

#include <functional>
#include <optional>

#include "absl/time/time.h"
#include "server/clickhouse/block.h"
#include "server/ingest/clock.h"
#include "server/ingest/inserter.h"
#include "server/ingest/retry.h"

namespace chgate::ingest {

// `block` laid out as `schema` (the table's INSERT header after a change), where that loses
// nothing: each value of a column whose type changed must convert to the new type and print
// back as the same text (UInt16 -> UInt32, T -> Nullable(T), Float32 -> Float64 ...); a column
// the header no longer has, any value that would change, or a header with no type changed makes
// it nullopt.
// `*same_header` (when given) is set when the header has the block's columns and types: the
// server's refusal was about the rows, not a change of the table.
std::optional<clickhouse::Block> ConvertLosslessly(const clickhouse::Block& block,
                                                   const TableSchema& schema,
                                                   bool* same_header = nullptr);

// A block `table` refused because its columns changed, laid out as the table's new INSERT header
// (asked of ClickHouse now) where no value changes (wider numbers, added Nullable); nullopt
// otherwise, or when ClickHouse does not describe the table before `stop_at` (asked again with
// backoff while it does not answer). `*same_header` (when given) is set when the table's header
// is still the block's: the server's refusal was about the rows, not a change of the table.
// `*undecided` (when given) is set when nullopt means only that stop_at passed before ClickHouse
// described the table.
std::optional<clickhouse::Block> ConvertToChangedTable(
    Inserter* inserter, Clock* clock, const RetryPolicy& retry, const TableId& table,
    const clickhouse::Block& block, const std::function<absl::Time()>& stop_at,
    bool* same_header = nullptr, bool* undecided = nullptr);

}  // namespace chgate::ingest
