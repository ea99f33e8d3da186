#include "server/sql/query_policy.h"

#include <algorithm>
#include <array>
#include <functional>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/sql/lexer.h"
#include "text/identifier.h"
#include "text/status_macros.h"

namespace chgate::sql {
namespace {

// absl::string_view is its own type in this Abseil build; absl's string functions take it.
inline absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }

constexpr std::string_view kReadStatements[] = {"SELECT",  "WITH",   "SHOW", "DESCRIBE", "DESC",
                                                "EXPLAIN", "EXISTS", "SET",  "USE"};
// Statements that are not reads; refused with PERMISSION_DENIED in read-only mode.
constexpr std::string_view kOtherStatements[] = {
    "KILL",    "SYSTEM", "INSERT", "CREATE", "DROP",   "ALTER",  "RENAME",   "TRUNCATE", "OPTIMIZE",
    "ATTACH",  "DETACH", "GRANT",  "REVOKE", "DELETE", "UPDATE", "EXCHANGE", "UNDROP",   "BACKUP",
    "RESTORE", "CHECK",  "WATCH",  "MOVE",   "BEGIN",  "COMMIT", "ROLLBACK", "REPLACE",  "UPSERT"};
constexpr std::string_view kSessionKeepingStatements[] = {"SELECT", "WITH",    "SHOW",  "DESCRIBE",
                                                          "DESC",   "EXPLAIN", "EXISTS"};

constexpr std::array<LexerOptions, 4> kReadings = {{
    {.nested_comments = true, .heredoc = true},
    {.nested_comments = false, .heredoc = true},
    {.nested_comments = true, .heredoc = false},
    {.nested_comments = false, .heredoc = false},
}};

// The statements of `tokens`, split at `;`, without empty ones.
std::vector<std::vector<Token>> Statements(const std::vector<Token>& tokens) {
  std::vector<std::vector<Token>> out(1);
  for (const Token& t : tokens) {
    if (t.kind == TokenKind::kSemicolon) {
      if (!out.back().empty()) out.emplace_back();
    } else {
      out.back().push_back(t);
    }
  }
  if (out.back().empty()) out.pop_back();
  return out;
}

// The first token after leading `(`; null when there is none.
const Token* FirstWord(const std::vector<Token>& statement) {
  for (const Token& t : statement) {
    if (t.kind != TokenKind::kOpenParen) return &t;
  }
  return nullptr;
}

// The lower-case name a call token names: a bare word, or a quoted identifier (ClickHouse accepts
// `url`(...) as a call too). Empty for other tokens. InvalidArgument for a quoted name that does
// not unquote as identifier.h reads it: servers differ on such escapes (18.16 reads `ur\l` as
// url), so it could name any function.
absl::StatusOr<std::string> CalleeName(const Token& t) {
  if (t.kind == TokenKind::kBareWord) return absl::AsciiStrToLower(A(t.text));
  if (t.kind == TokenKind::kQuotedIdentifier) {
    absl::StatusOr<std::string> name = text::UnquoteIdentifier(t.text);
    if (!name.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the quoted name before `(` cannot be read the same way by every ClickHouse version (",
          name.status().message(), "); write it without that escape"));
    }
    return absl::AsciiStrToLower(*name);
  }
  return std::string();
}

// Calls `check(name)` for the name of every call (a word or quoted name followed by `(`).
absl::Status ForEachCall(const std::vector<Token>& tokens,
                         const std::function<absl::Status(const std::string&)>& check) {
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    if (tokens[i + 1].kind != TokenKind::kOpenParen) continue;
    absl::StatusOr<std::string> name = CalleeName(tokens[i]);
    if (!name.ok()) return name.status();
    if (name->empty()) continue;
    if (absl::Status st = check(*name); !st.ok()) return st;
  }
  return absl::OkStatus();
}

// Calls `assigned` with each name of the `name = value, ...` list that starts at tokens[i] (after
// SETTINGS, or SET), unquoted; a value runs to the next comma outside brackets, or to a closing
// bracket it did not open. A token that is not `name =` ends the list.
absl::Status ForEachAssignment(const std::vector<Token>& tokens, size_t i,
                               const std::function<absl::Status(const std::string&)>& assigned) {
  while (i + 1 < tokens.size()) {
    const Token& name = tokens[i];
    if ((name.kind != TokenKind::kBareWord && name.kind != TokenKind::kQuotedIdentifier) ||
        tokens[i + 1].kind != TokenKind::kOther || tokens[i + 1].text != "=") {
      return absl::OkStatus();
    }
    std::string plain(name.text);
    if (name.kind == TokenKind::kQuotedIdentifier) {
      absl::StatusOr<std::string> unquoted = text::UnquoteIdentifier(name.text);
      if (!unquoted.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the setting ", absl::CHexEscape(A(name.text.substr(0, 64))),
            " is quoted in a way ClickHouse versions read differently; write it plainly"));
      }
      plain = *std::move(unquoted);
    }
    CHGATE_RETURN_IF_ERROR(assigned(plain));
    int depth = 0;
    for (i += 2; i < tokens.size(); ++i) {
      const Token& t = tokens[i];
      const bool opens = t.kind == TokenKind::kOpenParen ||
                         (t.kind == TokenKind::kOther && (t.text == "[" || t.text == "{"));
      const bool closes = t.kind == TokenKind::kCloseParen ||
                          (t.kind == TokenKind::kOther && (t.text == "]" || t.text == "}"));
      if (opens) ++depth;
      if (closes && depth-- == 0) return absl::OkStatus();
      if (t.kind == TokenKind::kComma && depth == 0) break;
    }
    ++i;  // past the comma
  }
  return absl::OkStatus();
}

absl::Status RefusedCall(const std::string& name, std::string_view why) {
  return absl::PermissionDeniedError(
      absl::StrCat("table function ", name, "() is refused: ", A(why),
                   " (an operator can allow it with --query-allow-table-functions=", name, ")"));
}

bool IsDefaultTableFunction(std::string_view lower) {
  for (std::string_view name : DefaultTableFunctions()) {
    if (name == lower) return true;
  }
  return false;
}

bool IsRefusedTableFunction(std::string_view lower) {
  for (std::string_view name : RefusedTableFunctions()) {
    if (name == lower) return true;
  }
  return false;
}

// INSERT INTO [TABLE] target [(columns)] [SETTINGS ...] then VALUES | FORMAT | FROM INFILE
// (inline data) or SELECT | WITH | `(` (rows from a query). Decided by the first of those
// keywords at bracket depth 0 after the target, so names and data never decide it.
bool InsertHasInlineData(const std::vector<Token>& st) {
  size_t i = 1;  // after INSERT
  if (i < st.size() && IsKeyword(st[i], "INTO")) ++i;
  if (i < st.size() && (IsKeyword(st[i], "TABLE") || IsKeyword(st[i], "FUNCTION"))) ++i;
  // The target: a name, db.name, or a table function call.
  if (i < st.size()) ++i;
  while (i + 1 < st.size() && st[i].kind == TokenKind::kDot) i += 2;
  int depth = 0;
  bool target_args = i < st.size() && st[i].kind == TokenKind::kOpenParen;
  for (; i < st.size(); ++i) {
    const Token& t = st[i];
    if (t.kind == TokenKind::kOpenParen) {
      // The column list (or the target's arguments) directly after the target is skipped; a
      // bracket at depth 0 later starts INSERT INTO t (SELECT ...).
      if (depth == 0 && !target_args) return false;
      ++depth;
      continue;
    }
    if (t.kind == TokenKind::kCloseParen) {
      if (depth > 0 && --depth == 0) target_args = false;
      continue;
    }
    if (depth > 0) continue;
    target_args = false;
    if (IsKeyword(t, "VALUES") || IsKeyword(t, "FORMAT") || IsKeyword(t, "FROM")) return true;
    if (IsKeyword(t, "SELECT") || IsKeyword(t, "WITH")) return false;
  }
  // Nothing follows the target: the server would wait for rows.
  return true;
}

absl::Status CheckTokens(const std::vector<Token>& tokens, const QueryPolicy& policy) {
  CHGATE_RETURN_IF_ERROR(ForEachCall(tokens, [&](const std::string& name) {
    if (!IsRefusedTableFunction(name) || policy.allowed_table_functions.contains(name)) {
      return absl::OkStatus();
    }
    return RefusedCall(name, "it makes ClickHouse reach outside itself");
  }));
  for (const std::vector<Token>& st : Statements(tokens)) {
    const Token* first = FirstWord(st);
    if (first == nullptr) continue;
    const bool insert = &st.front() == first && IsKeyword(*first, "INSERT");
    if (policy.allow_writes) {
      if (insert && InsertHasInlineData(st)) {
        return absl::InvalidArgumentError(
            "an INSERT with VALUES, FORMAT or FROM INFILE data cannot run through Query; send "
            "rows with Insert or InsertStream (Query runs INSERT ... SELECT)");
      }
      continue;
    }
    bool reads = false;
    for (std::string_view keyword : kReadStatements) reads = reads || IsKeyword(*first, keyword);
    if (reads) continue;
    bool known = false;
    for (std::string_view keyword : kOtherStatements) known = known || IsKeyword(*first, keyword);
    const std::string kind = first->kind == TokenKind::kBareWord
                                 ? absl::AsciiStrToUpper(A(first->text.substr(0, 32)))
                                 : std::string("this");
    // A word that starts no statement ClickHouse knows is a syntax error there; it is refused
    // here too (nothing unknown reaches the server), as the caller's mistake.
    return (known ? absl::PermissionDeniedError : absl::InvalidArgumentError)(absl::StrCat(
        kind, known ? " statements are refused" : " does not start a statement chgate knows",
        ": Query is read-only (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, EXISTS, SET, USE); an "
        "operator can allow writes, DDL and KILL with --query-allow-writes"));
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string_view>& RefusedTableFunctions() {
  static const auto* names = new std::vector<std::string_view>{
      // Other servers and clusters.
      "remote", "remotesecure", "cluster", "clusterallreplicas",
      // URLs and object stores.
      "url", "urlcluster", "s3", "s3cluster", "gcs", "oss", "cosn", "azureblobstorage",
      "azureblobstoragecluster", "hdfs", "hdfscluster",
      // Lakehouse formats over those stores.
      "iceberg", "icebergs3", "icebergazure", "iceberghdfs", "iceberglocal", "icebergs3cluster",
      "icebergazurecluster", "iceberghdfscluster", "icebergcluster", "deltalake",
      "deltalakecluster", "deltalakes3", "deltalakeazure", "deltalakelocal", "hudi", "hudicluster",
      "paimon", "paimons3", "paimonazure", "paimonhdfs", "paimonlocal", "hive",
      // Other databases and services.
      "mysql", "postgresql", "mongodb", "redis", "sqlite", "odbc", "jdbc", "meilimatch",
      "arrowflight", "ytsaurus",
      // The server's files and programs, and the caller's input.
      "file", "filecluster", "executable", "input"};
  return *names;
}

const std::vector<std::string_view>& DefaultTableFunctions() {
  static const auto* names =
      new std::vector<std::string_view>{"numbers", "numbers_mt",      "zeros",          "zeros_mt",
                                        "values",  "generaterandom",  "null",           "view",
                                        "merge",   "viewifpermitted", "viewexplain",    "format",
                                        "primes",  "generate_series", "generateseries", "loop"};
  return *names;
}

std::string RefusedTableFunctionList() {
  std::string out;
  for (std::string_view name : RefusedTableFunctions()) {
    if (!out.empty()) out.push_back(',');
    out.append(name);
  }
  return out;
}

absl::Status ParseAllowedTableFunctions(std::string_view list,
                                        absl::flat_hash_set<std::string>* out) {
  out->clear();
  for (absl::string_view item : absl::StrSplit(A(list), ',', absl::SkipWhitespace())) {
    const std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(item));
    const bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
    if (!plain) {
      return absl::InvalidArgumentError(absl::StrCat("'", absl::CHexEscape(name.substr(0, 64)),
                                                     "' is not a table function name"));
    }
    out->insert(name);
  }
  return absl::OkStatus();
}

absl::Status CheckTableFunctions(std::string_view sql, const QueryPolicy& policy,
                                 const absl::flat_hash_set<std::string>& server_table_functions) {
  for (const LexerOptions& reading : kReadings) {
    absl::StatusOr<std::vector<Token>> tokens = Tokenize(sql, reading);
    if (!tokens.ok()) return tokens.status();
    CHGATE_RETURN_IF_ERROR(ForEachCall(*tokens, [&](const std::string& name) {
      if (!server_table_functions.contains(name) || IsDefaultTableFunction(name) ||
          policy.allowed_table_functions.contains(name)) {
        return absl::OkStatus();
      }
      return RefusedCall(name,
                         "only table functions that read the server's own data run "
                         "without configuration");
    }));
  }
  return absl::OkStatus();
}

absl::Status CheckQuery(std::string_view sql, const QueryPolicy& policy) {
  bool any = false;
  for (const LexerOptions& reading : kReadings) {
    absl::StatusOr<std::vector<Token>> tokens = Tokenize(sql, reading);
    if (!tokens.ok()) return tokens.status();
    any = any || !tokens->empty();
    if (absl::Status st = CheckTokens(*tokens, policy); !st.ok()) return st;
  }
  if (!any) return absl::InvalidArgumentError("QueryRequest.sql has no statement");
  return absl::OkStatus();
}

bool KeepsSession(std::string_view sql) {
  for (const LexerOptions& reading : kReadings) {
    absl::StatusOr<std::vector<Token>> tokens = Tokenize(sql, reading);
    if (!tokens.ok()) return false;
    const std::vector<std::vector<Token>> statements = Statements(*tokens);
    if (statements.size() != 1) return false;
    const Token* first = FirstWord(statements[0]);
    if (first == nullptr) return false;
    bool keeps = false;
    for (std::string_view k : kSessionKeepingStatements) keeps = keeps || IsKeyword(*first, k);
    if (!keeps) return false;
  }
  return true;
}

absl::StatusOr<std::vector<std::string>> AssignedSettings(std::string_view sql) {
  std::vector<std::string> names;
  const auto add = [&](const std::string& name) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    return absl::OkStatus();
  };
  for (const LexerOptions& reading : kReadings) {
    absl::StatusOr<std::vector<Token>> tokens = Tokenize(sql, reading);
    if (!tokens.ok()) return tokens.status();
    for (const std::vector<Token>& statement : Statements(*tokens)) {
      const Token* first = FirstWord(statement);
      if (first == nullptr) continue;
      if (IsKeyword(*first, "SET")) {
        CHGATE_RETURN_IF_ERROR(
            ForEachAssignment(statement, static_cast<size_t>(first - statement.data()) + 1, add));
        continue;
      }
      // The SETTINGS of a table definition are the table's (storage settings, not a query's).
      if (IsKeyword(*first, "CREATE") || IsKeyword(*first, "ALTER") ||
          IsKeyword(*first, "ATTACH")) {
        continue;
      }
      for (size_t i = 0; i < statement.size(); ++i) {
        if (IsKeyword(statement[i], "SETTINGS")) {
          CHGATE_RETURN_IF_ERROR(ForEachAssignment(statement, i + 1, add));
        }
      }
    }
  }
  return names;
}

bool IsEmptyStatement(std::string_view sql) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize(sql);
  return tokens.ok() && tokens->empty();
}

}  // namespace chgate::sql
