// Identifiers as ClickHouse reads them, and as chgate writes them into SQL. Every place that
// parses a table name from a caller or quotes a name into a statement uses these functions, so a
// name means one table everywhere. Plain functions, thread-safe.
//
// Quoted forms (ClickHouse's readBackQuotedStringWithSQLStyle and the lexer): `...` or "...",
// where a doubled quote stands for one (`a``b` is a`b) and a backslash escapes: \\ \' \" \` \/ \=
// stand for the character, \b \f \n \r \t \0 for the control byte, \xHH for the byte HH. Other
// escapes (\a \v \e \N, or a backslash before a letter or punctuation) are refused: ClickHouse
// versions read them differently (some keep the backslash, some drop it), so the name would
// depend on the server.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace chgate::text {

struct QualifiedName {
  std::string database;  // empty when the text named only a table
  std::string name;
  bool operator==(const QualifiedName&) const = default;
};

// `name` quoted with backticks (` and \ escaped with a backslash, the form every ClickHouse
// version reads back the same way). Always quotes, so keywords and odd bytes are safe.
std::string QuoteIdentifier(std::string_view name);

// Reads the quoted identifier that starts at text[*pos] (its opening ` or "); on success *pos is
// just past the closing quote. InvalidArgument for a missing closing quote or an escape outside
// the list above.
absl::StatusOr<std::string> ReadQuotedIdentifier(std::string_view text, size_t* pos);

// The name a quoted identifier token stands for (`quoted` includes its quotes). InvalidArgument
// for a malformed token or an escape outside the list above.
absl::StatusOr<std::string> UnquoteIdentifier(std::string_view quoted);

// Parses "table" or "database.table": each part a bare word ([A-Za-z_][A-Za-z0-9_]*) or a quoted
// identifier, split on the dot outside quotes, spaces allowed around parts. InvalidArgument
// (naming the problem; the text is echoed cut to a short prefix) for anything else: empty parts,
// more than two parts, an unterminated quote, a bad escape, a bare part with other characters.
absl::StatusOr<QualifiedName> ParseQualifiedName(std::string_view text);

// Whether `name` may be written without quotes in every ClickHouse version and is not a keyword
// that would change the statement's meaning where chgate writes names (type arguments).
bool IsPlainIdentifier(std::string_view name);

// One table: the (database, table) pair every batch key, schema cache and policy check uses, so
// two names that share their text ("a.b"."c" and "a"."b.c") stay apart.
struct TableId {
  std::string database;
  std::string table;
  bool operator==(const TableId&) const = default;
};

// Splits "table" or "db.table" into a TableId as ClickHouse would read it (ParseQualifiedName);
// `default_database` when the text names no database. InvalidArgument for text ClickHouse would
// not read as one table name.
absl::StatusOr<TableId> ParseTableName(std::string_view text, const std::string& default_database);

}  // namespace chgate::text
