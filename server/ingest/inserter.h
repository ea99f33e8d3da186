// Inserter: where ingest sends its blocks. The real one (ClickHouseInserter) writes through the
// native connection pool; tests give the Ingestor a fake. Implementations are thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/clickhouse/block.h"
#include "server/clickhouse/block_parts.h"
#include "server/clickhouse/pool.h"
#include "text/identifier.h"
#include "text/trace_context.h"

namespace chgate::ingest {

using text::TableId;

// The columns an INSERT expects, as the server's sample block describes them.
struct TableSchema {
  std::vector<std::string> names;
  std::vector<clickhouse::ColumnPtr> prototypes;  // empty columns of each type
  std::string server_time_zone;
};

struct InsertAttempt {
  std::string query_id;           // the same for every retry of one batch
  std::string deduplication_key;  // sent as insert_deduplication_token where supported
  int attempt = 1;
  // The trace the INSERT joins (servers of revision 54442 or later): that of the first traced
  // request in the batch.
  std::optional<text::TraceContext> trace;
  // Let the server merge this INSERT with others into its parts (async_insert, servers from
  // 21.11; ignored by older ones), and answer only once it has written them
  // (wait_for_async_insert = 1), so the commit still means a part holds the rows.
  bool async = false;
};

// What protects a table against a batch sent twice (a replay after a crash): block
// deduplication on Replicated tables keeps the hashes of the last `window_blocks` blocks (and
// only those younger than `window_seconds`, 0: no age limit).
struct DedupWindow {
  bool replicated = false;
  uint64_t window_blocks = 0;
  uint64_t window_seconds = 0;
  // New parts (INSERTs) per second into the table over the last minutes, from every writer
  // (system.part_log when the server keeps it); nullopt when the server cannot tell.
  std::optional<double> inserts_per_second;
};

class Inserter {
 public:
  virtual ~Inserter() = default;
  // The header of `INSERT INTO table (columns) VALUES` (empty `columns`: every insertable
  // column). Errors: NotFound (unknown table or database), InvalidArgument (unknown column),
  // Unavailable/DeadlineExceeded (ClickHouse unreachable or slow).
  virtual absl::StatusOr<TableSchema> Describe(const TableId& table,
                                               const std::vector<std::string>& columns,
                                               absl::Time deadline) = 0;
  // One INSERT of `block` (its parts' rows as one block); OK only when ClickHouse answered
  // EndOfStream (committed).
  virtual absl::Status Insert(const TableId& table, const clickhouse::BlockParts& block,
                              const InsertAttempt& attempt, absl::Time deadline) = 0;
  // The table's deduplication window and recent INSERT rate. Unimplemented by default (fakes);
  // otherwise the errors of a query.
  virtual absl::StatusOr<DedupWindow> DedupWindowOf(const TableId& table, absl::Time deadline) {
    (void)table;
    (void)deadline;
    return absl::UnimplementedError("no deduplication window");
  }
};

// `INSERT INTO db.table (a, b) VALUES`, every name quoted (text::QuoteIdentifier) (no column list
// when `columns` is empty).
std::string InsertQuery(const TableId& table, const std::vector<std::string>& columns);

class ClickHouseInserter final : public Inserter {
 public:
  // `pool` must outlive the inserter.
  explicit ClickHouseInserter(clickhouse::Pool* pool) : pool_(pool) {}

  absl::StatusOr<TableSchema> Describe(const TableId& table,
                                       const std::vector<std::string>& columns,
                                       absl::Time deadline) override;
  absl::Status Insert(const TableId& table, const clickhouse::BlockParts& block,
                      const InsertAttempt& attempt, absl::Time deadline) override;
  // From system.tables (engine, engine_full's SETTINGS), system.merge_tree_settings and
  // system.part_log (when the server has it).
  absl::StatusOr<DedupWindow> DedupWindowOf(const TableId& table, absl::Time deadline) override;

 private:
  clickhouse::Pool* pool_;
};

}  // namespace chgate::ingest
