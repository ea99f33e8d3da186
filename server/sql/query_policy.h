// QueryPolicy: what a Query statement may do, judged from its tokens (lexer.h) before it reaches
// ClickHouse. Plain functions and a value type, thread-safe.
//
//   Read-only (the default)  the statement must start with SELECT, WITH, SHOW, DESCRIBE, DESC,
//                            EXPLAIN, EXISTS, SET or USE (or `(` before one of them). KILL,
//                            SYSTEM and every writing or DDL statement are refused
//                            (PERMISSION_DENIED), a word that starts no known statement too
//                            (INVALID_ARGUMENT); ClickHouse's readonly = 2 is a second fence.
//   Writes allowed           any statement, except an INSERT that carries its rows inline
//                            (VALUES, FORMAT or FROM INFILE): its data cannot travel through
//                            Query; callers use Insert. INSERT ... SELECT runs.
//   Table functions          deny by default, in both modes. CheckQuery refuses a call of one
//                            of RefusedTableFunctions() (a name, bare or quoted, followed by
//                            `(`, anywhere in the statement) unless named in
//                            `allowed_table_functions`: those functions make the server reach
//                            outside itself (URLs, other servers, files, programs) or read the
//                            caller's input. CheckTableFunctions, once the server is known,
//                            refuses a call of any table function that server has, unless it
//                            is one of DefaultTableFunctions() (they read the server's own
//                            data) or allowed. A quoted callee chgate cannot read as every
//                            ClickHouse version reads it (an escape outside identifier.h's
//                            list, such as `ur\l`) is refused: it could name any function.
//
// The statement is tokenized under every lexical reading ClickHouse versions have used (nested
// comments or not, heredoc strings or not); it is refused when any reading finds something
// refused, so a comment or string that one server version closes earlier cannot hide a call.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace chgate::sql {

struct QueryPolicy {
  bool allow_writes = false;
  // Lower-case names from RefusedTableFunctions() that statements may call.
  absl::flat_hash_set<std::string> allowed_table_functions;
};

// Table functions refused unless allowed, lower case, in the order docs/api.md lists them.
const std::vector<std::string_view>& RefusedTableFunctions();

// Table functions allowed without configuration, lower case: those that read only the server's
// own data or the statement's literals (numbers, zeros, values, generateRandom, null, view, merge,
// format, ...).
const std::vector<std::string_view>& DefaultTableFunctions();

// RefusedTableFunctions() joined with commas (for help texts).
std::string RefusedTableFunctionList();

// Builds the allowed set from a comma-separated list ("url,remote"; case-insensitive; empty: none).
// InvalidArgument naming an entry that is not a plain name.
absl::Status ParseAllowedTableFunctions(std::string_view list,
                                        absl::flat_hash_set<std::string>* out);

// OK when `sql` may run under `policy`. PermissionDenied naming the statement kind or the table
// function, and the option that would allow it; InvalidArgument for an INSERT with inline data
// (when writes are allowed), an empty statement, or SQL the lexer cannot split (unterminated
// quote or comment).
absl::Status CheckQuery(std::string_view sql, const QueryPolicy& policy);

// OK when every table function `sql` calls (a name, bare or quoted, followed by `(`) is either not
// one of `server_table_functions` (lower case: the connected server's system.table_functions),
// or one of DefaultTableFunctions(), or in `policy.allowed_table_functions`. PermissionDenied
// naming the function and the option that allows it; InvalidArgument for a quoted callee that
// does not read the same way in every ClickHouse version.
absl::Status CheckTableFunctions(std::string_view sql, const QueryPolicy& policy,
                                 const absl::flat_hash_set<std::string>& server_table_functions);

// Whether the statement leaves its session as it found it (SELECT, WITH, SHOW, DESCRIBE, DESC,
// EXPLAIN, EXISTS, optionally after `(`), so its connection may serve the next caller.
bool KeepsSession(std::string_view sql);

// The settings `sql` assigns itself, unquoted, each once: the names of every `SETTINGS name =
// value, ...` clause (in a statement or any of its subqueries) and of a SET statement, under every
// lexical reading. CREATE, ALTER and ATTACH statements (only with writes allowed) are not read:
// their SETTINGS are a table's, not the query's. A caller's settings must pass the same allowlist
// wherever they are written; the caller of this function checks the names. InvalidArgument when a
// name is quoted in a way ClickHouse versions read differently, or the SQL cannot be split.
absl::StatusOr<std::vector<std::string>> AssignedSettings(std::string_view sql);

// Whether `sql` has no tokens (empty, or only whitespace and comments).
bool IsEmptyStatement(std::string_view sql);

}  // namespace chgate::sql
