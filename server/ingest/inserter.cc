#include "server/ingest/inserter.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/clickhouse/text_form.h"
#include "text/identifier.h"
#include "text/status_macros.h"

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
  if (!table.database.empty()) absl::StrAppend(&sql, text::QuoteIdentifier(table.database), ".");
  absl::StrAppend(&sql, text::QuoteIdentifier(table.table));
  if (!columns.empty()) {
    sql += " (";
    for (size_t i = 0; i < columns.size(); ++i) {
      if (i != 0) sql += ", ";
      sql += text::QuoteIdentifier(columns[i]);
    }
    sql += ")";
  }
  sql += " VALUES";
  return sql;
}

absl::StatusOr<TableSchema> ClickHouseInserter::Describe(const TableId& table,
                                                         const std::vector<std::string>& columns,
                                                         absl::Time deadline) {
  CHGATE_ASSIGN_OR_RETURN(clickhouse::PooledConnection conn, pool_->Acquire(deadline));
  DeadlineScope scope(conn.get(), pool_->options().connection.read_timeout, deadline);
  CHGATE_ASSIGN_OR_RETURN(clickhouse::Block header,
                          conn->DescribeInsert({.query = InsertQuery(table, columns)}));
  TableSchema schema;
  schema.server_time_zone = conn->server_info().timezone;
  for (const clickhouse::NamedColumn& c : header.columns()) {
    schema.names.push_back(c.name);
    schema.prototypes.push_back(c.column->CloneEmpty());
  }
  return schema;
}

absl::Status ClickHouseInserter::Insert(const TableId& table, const clickhouse::BlockParts& block,
                                        const InsertAttempt& attempt, absl::Time deadline) {
  if (block.parts().empty()) return absl::InvalidArgumentError("an INSERT of no block");
  CHGATE_ASSIGN_OR_RETURN(clickhouse::PooledConnection conn, pool_->Acquire(deadline));
  std::vector<std::string> names;
  for (const clickhouse::NamedColumn& c : block.parts().front()->columns()) {
    names.push_back(c.name);
  }
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
  DeadlineScope scope(conn.get(), pool_->options().connection.read_timeout, deadline);
  return conn->Insert(std::move(query), block);
}

namespace {

// A ClickHouse string literal.
std::string Literal(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\\' || c == '\'') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

// The first row's columns of `sql` as text (empty when it returns no row).
absl::StatusOr<std::vector<std::string>> FirstRow(clickhouse::Connection& conn,
                                                  const std::string& sql) {
  std::vector<std::string> row;
  CHGATE_RETURN_IF_ERROR(conn.Select({.query = sql}, [&](const clickhouse::Block& block) {
    if (!row.empty() || block.rows() == 0) return absl::OkStatus();
    for (size_t c = 0; c < block.column_count(); ++c) {
      row.emplace_back();
      AppendTsvValue(*block.column(c).column, 0, false, &row.back());
    }
    return absl::OkStatus();
  }));
  return row;
}

// `name = N` in a table's SETTINGS clause (engine_full), if set there.
std::optional<uint64_t> TableSetting(std::string_view engine_full, std::string_view name) {
  const size_t settings = engine_full.rfind("SETTINGS ");
  if (settings == std::string_view::npos) return std::nullopt;
  std::string_view rest = engine_full.substr(settings);
  for (size_t at = rest.find(name); at != std::string_view::npos; at = rest.find(name, at + 1)) {
    const bool starts = at == 0 || rest[at - 1] == ' ' || rest[at - 1] == ',';
    std::string_view after = rest.substr(at + name.size());
    while (!after.empty() && after.front() == ' ') after.remove_prefix(1);
    if (!starts || after.empty() || after.front() != '=') continue;
    after.remove_prefix(1);
    while (!after.empty() && after.front() == ' ') after.remove_prefix(1);
    size_t digits = 0;
    while (digits < after.size() && after[digits] >= '0' && after[digits] <= '9') ++digits;
    uint64_t v;
    if (digits > 0 && absl::SimpleAtoi(absl::string_view(after.data(), digits), &v)) return v;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<DedupWindow> ClickHouseInserter::DedupWindowOf(const TableId& table,
                                                              absl::Time deadline) {
  CHGATE_ASSIGN_OR_RETURN(clickhouse::PooledConnection conn, pool_->Acquire(deadline));
  DeadlineScope scope(conn.get(), pool_->options().connection.read_timeout, deadline);
  const std::string where =
      absl::StrCat("database = ", Literal(table.database), " AND name = ", Literal(table.table));
  CHGATE_ASSIGN_OR_RETURN(
      std::vector<std::string> t,
      FirstRow(*conn, absl::StrCat("SELECT engine, engine_full FROM system.tables "
                                   "WHERE ",
                                   where)));
  DedupWindow w;
  if (t.size() < 2) return absl::NotFoundError(absl::StrCat("no table ", where));
  w.replicated = absl::StartsWith(t[0], "Replicated");
  if (!w.replicated) return w;
  CHGATE_ASSIGN_OR_RETURN(
      std::vector<std::string> defaults,
      FirstRow(*conn,
               "SELECT toString(sumIf(toUInt64OrZero(value), name = "
               "'replicated_deduplication_window')), toString(sumIf(toUInt64OrZero(value), name = "
               "'replicated_deduplication_window_seconds')) FROM system.merge_tree_settings"));
  uint64_t blocks = 0, seconds = 0;
  if (defaults.size() == 2) {
    (void)absl::SimpleAtoi(defaults[0], &blocks);
    (void)absl::SimpleAtoi(defaults[1], &seconds);
  }
  w.window_blocks = TableSetting(t[1], "replicated_deduplication_window").value_or(blocks);
  w.window_seconds =
      TableSetting(t[1], "replicated_deduplication_window_seconds").value_or(seconds);
  // The rate of new parts from every writer, where the server logs them.
  absl::StatusOr<std::vector<std::string>> parts = FirstRow(
      *conn,
      absl::StrCat("SELECT toString(count()) FROM system.part_log WHERE event_type = 'NewPart' AND "
                   "event_time > now() - 300 AND database = ",
                   Literal(table.database), " AND table = ", Literal(table.table)));
  uint64_t n = 0;
  if (parts.ok() && parts->size() == 1 && absl::SimpleAtoi((*parts)[0], &n)) {
    w.inserts_per_second = static_cast<double>(n) / 300.0;
  } else if (!conn->usable()) {
    return parts.status();
  }
  return w;
}

}  // namespace chgate::ingest
