#include "server/ingest/inserter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/sql/identifier.h"

namespace chgate::ingest {
namespace {

// Bounds every wait of this use of the connection by `deadline` (never longer than the
// configured read timeout), so one attempt cannot outlive the callers' deadlines.
class DeadlineScope {
 public:
  DeadlineScope(clickhouse::Connection* conn, absl::Duration configured, absl::Time deadline)
      : conn_(conn), configured_(configured) {
    absl::Duration left = deadline - absl::Now();
    conn_->set_read_timeout(std::clamp(left, absl::Milliseconds(1), configured));
  }
  ~DeadlineScope() { conn_->set_read_timeout(configured_); }

 private:
  clickhouse::Connection* conn_;
  absl::Duration configured_;
};

}  // namespace

std::string InsertQuery(const TableId& table, const std::vector<std::string>& columns) {
  std::string sql = "INSERT INTO ";
  if (!table.database.empty()) absl::StrAppend(&sql, sql::QuoteIdentifier(table.database), ".");
  absl::StrAppend(&sql, sql::QuoteIdentifier(table.table));
  if (!columns.empty()) {
    sql += " (";
    for (size_t i = 0; i < columns.size(); ++i) {
      if (i != 0) sql += ", ";
      sql += sql::QuoteIdentifier(columns[i]);
    }
    sql += ")";
  }
  sql += " VALUES";
  return sql;
}

absl::StatusOr<TableSchema> ClickHouseInserter::Describe(const TableId& table,
                                                         const std::vector<std::string>& columns,
                                                         absl::Time deadline) {
  ASSIGN_OR_RETURN(clickhouse::PooledConnection conn, pool_->Acquire(deadline));
  DeadlineScope scope(conn.get(), pool_->options().connection.read_timeout, deadline);
  ASSIGN_OR_RETURN(clickhouse::Block header,
                   conn->DescribeInsert({.query = InsertQuery(table, columns)}));
  TableSchema schema;
  schema.server_time_zone = conn->server_info().timezone;
  for (const clickhouse::NamedColumn& c : header.columns()) {
    schema.names.push_back(c.name);
    schema.prototypes.push_back(c.column->CloneEmpty());
  }
  return schema;
}

absl::Status ClickHouseInserter::Insert(const TableId& table, const clickhouse::Block& block,
                                        const InsertAttempt& attempt, absl::Time deadline) {
  ASSIGN_OR_RETURN(clickhouse::PooledConnection conn, pool_->Acquire(deadline));
  std::vector<std::string> names;
  for (const clickhouse::NamedColumn& c : block.columns()) names.push_back(c.name);
  clickhouse::QueryParams query{.query_id = attempt.query_id, .query = InsertQuery(table, names)};
  query.trace = attempt.trace;
  const clickhouse::ServerInfo& server = conn->server_info();
  // insert_deduplication_token exists from ClickHouse 22.2; older servers reject unknown
  // settings, and still deduplicate identical blocks on Replicated tables by their hash.
  if (!attempt.deduplication_key.empty() &&
      (server.version_major > 22 || (server.version_major == 22 && server.version_minor >= 2))) {
    query.settings.push_back(
        {.name = "insert_deduplication_token", .value = attempt.deduplication_key});
  }
  if (attempt.async &&
      (server.version_major > 21 || (server.version_major == 21 && server.version_minor >= 11))) {
    query.settings.push_back({.name = "async_insert", .value = "1"});
    query.settings.push_back({.name = "wait_for_async_insert", .value = "1"});
  }
  const clickhouse::Block* blocks[] = {&block};
  DeadlineScope scope(conn.get(), pool_->options().connection.read_timeout, deadline);
  return conn->Insert(std::move(query), blocks);
}

}  // namespace chgate::ingest
