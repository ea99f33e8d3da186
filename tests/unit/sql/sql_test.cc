#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/sql/lexer.h"
#include "server/sql/query_policy.h"
#include "text/identifier.h"

namespace chgate::sql {
namespace {

using text::ParseQualifiedName;
using text::QualifiedName;
using text::QuoteIdentifier;
using text::ReadQuotedIdentifier;
using text::UnquoteIdentifier;

std::vector<std::string> Texts(std::string_view sql, LexerOptions options = {}) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize(sql, options);
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  std::vector<std::string> out;
  if (tokens.ok()) {
    for (const Token& t : *tokens) out.emplace_back(t.text);
  }
  return out;
}

using Strings = std::vector<std::string>;

TEST(LexerTest, KeepsQuotedTextWholeAndDropsComments) {
  EXPECT_EQ(Texts("SELECT 'a''b\\'c', `x``y`, \"q\"\"r\" -- url(\n# url(\n/* url( */ 1"),
            (Strings{"SELECT", "'a''b\\'c'", ",", "`x``y`", ",", "\"q\"\"r\"", "1"}));
}

TEST(LexerTest, HashIsACommentOnlyBeforeSpaceOrBang) {
  EXPECT_EQ(Texts("#!x\n#y"), (Strings{"#", "y"}));
}

TEST(LexerTest, NestedCommentsDependOnTheReading) {
  const std::string sql = "/* /* */ url('x') */ 1";
  EXPECT_EQ(Texts(sql, {.nested_comments = true}), (Strings{"1"}));
  EXPECT_EQ(Texts(sql, {.nested_comments = false}),
            (Strings{"url", "(", "'x'", ")", "*", "/", "1"}));
}

TEST(LexerTest, HeredocIsOneStringWhenRead) {
  EXPECT_EQ(Texts("$$ url( $$ x", {.heredoc = true}), (Strings{"$$ url( $$", "x"}));
  EXPECT_EQ(Texts("$$ url( $$ x", {.heredoc = false}), (Strings{"$$", "url", "(", "$$", "x"}));
}

TEST(LexerTest, NumbersFollowedByLettersAreWords) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize("1url( 1.5e-3 0x1F t.1.2");
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ((*tokens)[0].kind, TokenKind::kBareWord);
  EXPECT_EQ((*tokens)[0].text, "1url");
  EXPECT_EQ((*tokens)[2].text, "1.5e-3");
  EXPECT_EQ((*tokens)[2].kind, TokenKind::kNumber);
  EXPECT_EQ((*tokens)[3].text, "0x1F");
  EXPECT_EQ(Texts("t.1.2"), (Strings{"t", ".", "1", ".", "2"}));
}

TEST(LexerTest, NonAsciiBytesSeparateTokens) {
  // U+00A0 (no-break space) between a name and its bracket.
  EXPECT_EQ(Texts("url\xc2\xa0("), (Strings{"url", "("}));
}

TEST(LexerTest, UnterminatedQuotesAndCommentsAreErrors) {
  for (const char* sql : {"'abc", "`abc", "\"abc", "/* abc", "'a\\'", "`a``"}) {
    absl::StatusOr<std::vector<Token>> tokens = Tokenize(sql);
    ASSERT_FALSE(tokens.ok()) << sql;
    EXPECT_EQ(tokens.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(IdentifierTest, UnquotesEveryFormClickHouseReads) {
  EXPECT_EQ(*UnquoteIdentifier("`a``tick`"), "a`tick");
  EXPECT_EQ(*UnquoteIdentifier("`a\\`tick`"), "a`tick");
  EXPECT_EQ(*UnquoteIdentifier("\"a\"\"q\""), "a\"q");
  EXPECT_EQ(*UnquoteIdentifier("\"a\\\"q\""), "a\"q");
  EXPECT_EQ(*UnquoteIdentifier("`a\\\\b`"), "a\\b");
  EXPECT_EQ(*UnquoteIdentifier("`a\\nb\\tc`"), "a\nb\tc");
  EXPECT_EQ(*UnquoteIdentifier("`\\x41\\x62`"), "Ab");
  EXPECT_EQ(*UnquoteIdentifier("`a.b`"), "a.b");
  EXPECT_EQ(*UnquoteIdentifier("`it's`"), "it's");
}

TEST(IdentifierTest, RefusesEscapesThatVersionsReadDifferently) {
  for (const char* quoted :
       {"`a\\qb`", "`a\\ab`", "`a\\vb`", "`a\\eb`", "`a\\Nb`", "`a\\.b`", "`\\x4`", "`\\xZZ`"}) {
    absl::StatusOr<std::string> name = UnquoteIdentifier(quoted);
    EXPECT_FALSE(name.ok()) << quoted;
  }
}

TEST(IdentifierTest, QuoteRoundTripsThroughUnquote) {
  for (const std::string& name :
       std::vector<std::string>{"plain", "a`tick", "back\\slash", "two``ticks", "dot.ted", "x\ny",
                                std::string("nul\0byte", 8), "ünï"}) {
    EXPECT_EQ(*UnquoteIdentifier(QuoteIdentifier(name)), name) << name;
  }
  EXPECT_EQ(QuoteIdentifier("a`b\\c"), "`a\\`b\\\\c`");
}

TEST(IdentifierTest, ParsesQualifiedNames) {
  EXPECT_EQ(*ParseQualifiedName("t"), (QualifiedName{"", "t"}));
  EXPECT_EQ(*ParseQualifiedName("db.t"), (QualifiedName{"db", "t"}));
  EXPECT_EQ(*ParseQualifiedName("`a``tick`"), (QualifiedName{"", "a`tick"}));
  EXPECT_EQ(*ParseQualifiedName("`my.db`.`t`"), (QualifiedName{"my.db", "t"}));
  EXPECT_EQ(*ParseQualifiedName("\"d\"\"b\".t"), (QualifiedName{"d\"b", "t"}));
  EXPECT_EQ(*ParseQualifiedName(" db . `t` "), (QualifiedName{"db", "t"}));
  EXPECT_EQ(*ParseQualifiedName("`a\\`b`"), (QualifiedName{"", "a`b"}));
}

TEST(IdentifierTest, RefusesWhatClickHouseWouldNotReadAsOneName) {
  for (const char* text : {"", "a.", ".t", "a.b.c", "`a", "`a``", "a b", "my-table", "1t", "``",
                           "`a`b`", "`a`.`b`c"}) {
    absl::StatusOr<QualifiedName> name = ParseQualifiedName(text);
    ASSERT_FALSE(name.ok()) << text;
    EXPECT_EQ(name.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(IdentifierTest, ErrorsEchoOnlyAShortPrefix) {
  const std::string huge(10000, 'x');
  absl::StatusOr<QualifiedName> name = ParseQualifiedName(huge + " y");
  ASSERT_FALSE(name.ok());
  EXPECT_LT(name.status().message().size(), 400u);
}

absl::Status Check(std::string_view sql, bool allow_writes = false,
                   std::vector<std::string> allowed = {}) {
  QueryPolicy policy{.allow_writes = allow_writes,
                     .allowed_table_functions = {allowed.begin(), allowed.end()}};
  return CheckQuery(sql, policy);
}

TEST(QueryPolicyTest, ReadOnlyAllowsReadingStatements) {
  for (const char* sql :
       {"SELECT 1", "  -- c\n select * from t", "WITH 1 AS x SELECT x",
        "(SELECT 1) UNION ALL (SELECT 2)", "SHOW TABLES", "DESCRIBE TABLE t", "EXPLAIN SELECT 1",
        "EXISTS TABLE t", "SET max_threads = 1", "USE db", "SELECT 1;",
        "SELECT 'KILL QUERY', `url`, url FROM remote_copy", "SELECT * FROM numbers(10)",
        "SELECT count() FROM t WHERE file_name = 'x'"}) {
    EXPECT_TRUE(Check(sql).ok()) << sql << ": " << Check(sql);
  }
}

TEST(QueryPolicyTest, ReadOnlyRefusesKillSystemAndWrites) {
  for (const char* sql : {"KILL QUERY WHERE 1", "kill mutation where 1", "/* x */ KILL QUERY ALL",
                          "SYSTEM SHUTDOWN", "INSERT INTO t SELECT 1", "DROP TABLE t",
                          "SELECT 1; KILL QUERY WHERE 1", "OPTIMIZE TABLE t"}) {
    absl::Status st = Check(sql);
    EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << sql << ": " << st;
    EXPECT_NE(st.message().find("--query-allow-writes"), std::string_view::npos) << st;
  }
}

TEST(QueryPolicyTest, ReadOnlyRefusesUnknownStatementsAsInvalid) {
  EXPECT_EQ(Check("SELEC 1").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Check("`SELECT` 1").code(), absl::StatusCode::kInvalidArgument);
}

TEST(QueryPolicyTest, RefusesTableFunctionsAnywhere) {
  for (const char* sql : {
           "SELECT * FROM url('http://x', CSV, 'a String')",
           "select * from URL ('http://x')",
           "SELECT * FROM remote('h', system.one)",
           "SELECT * FROM remoteSecure('h', system.one)",
           "SELECT * FROM cluster('c', system.one)",
           "SELECT * FROM clusterAllReplicas('c', system.one)",
           "SELECT * FROM s3('https://b/k')",
           "SELECT * FROM `url`('http://x')",
           "SELECT * FROM \"mysql\"('h', 'd', 't', 'u', 'p')",
           "SELECT * FROM t JOIN file('x') USING a",
           "SELECT (SELECT count() FROM executable('x', TSV, 'a Int8'))",
           "SELECT * FROM url\n  -- comment\n  ('http://x')",
           "SELECT * FROM url/* c */('http://x')",
           "SELECT * FROM /* /* */ url('http://x') -- */",
           "SELECT $$ ' $$, url('http://x') -- '",
           "SELECT * FROM t WHERE 1 -- \nUNION ALL SELECT * FROM input('a Int8')",
           "DESCRIBE TABLE url('http://x')",
       }) {
    absl::Status st = Check(sql);
    EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << sql << ": " << st;
    EXPECT_NE(st.message().find("--query-allow-table-functions="), std::string_view::npos) << st;
  }
  // Also with writes allowed.
  EXPECT_EQ(Check("INSERT INTO t SELECT * FROM url('http://x')", true).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(QueryPolicyTest, TableFunctionsInStringsAndCommentsAreNotCalls) {
  for (const char* sql : {"SELECT 'url(1)'", "SELECT 1 -- url(\n", "SELECT 1 /* remote( */",
                          "SELECT `url(x)` FROM t", "SELECT url FROM t", "SELECT 1 # url(",
                          "SELECT urlencode('x')", "SELECT * FROM t AS remote"}) {
    EXPECT_TRUE(Check(sql).ok()) << sql << ": " << Check(sql);
  }
}

TEST(QueryPolicyTest, AllowedTableFunctionsPass) {
  EXPECT_TRUE(Check("SELECT * FROM url('http://x')", false, {"url"}).ok());
  EXPECT_EQ(Check("SELECT * FROM remote('h', t)", false, {"url"}).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(QueryPolicyTest, InlineInsertDataIsJudgedByTokens) {
  // Writes allowed: INSERT ... SELECT runs, INSERT with data is refused.
  EXPECT_EQ(Check("INSERT INTO withdrawals VALUES (1)", true).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Check("insert into t (a, b) format TSV", true).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Check("INSERT INTO t FROM INFILE 'x'", true).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Check("INSERT INTO t", true).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Check("INSERT INTO t SETTINGS a = 1 VALUES (1)", true).code(),
            absl::StatusCode::kInvalidArgument);
  for (const char* sql :
       {"INSERT INTO t_values_copy SELECT * FROM t_values", "INSERT INTO db.`values` (a) SELECT 1",
        "INSERT INTO t WITH 1 AS x SELECT x", "INSERT INTO t (a) (SELECT 1)",
        "INSERT INTO t (format) SELECT 'VALUES'", "INSERT INTO `VALUES` SELECT 1",
        "DROP TABLE t"}) {
    EXPECT_TRUE(Check(sql, true).ok()) << sql << ": " << Check(sql, true);
  }
}

TEST(QueryPolicyTest, EmptyAndUnterminatedStatementsAreInvalid) {
  EXPECT_EQ(Check("  -- nothing\n").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Check("SELECT 'abc").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(IsEmptyStatement(" /* x */ "));
  EXPECT_FALSE(IsEmptyStatement("SELECT 1"));
}

TEST(QueryPolicyTest, ParsesTheAllowedList) {
  absl::flat_hash_set<std::string> names;
  ASSERT_TRUE(ParseAllowedTableFunctions("url, Remote", &names).ok());
  EXPECT_EQ(names, (absl::flat_hash_set<std::string>{"url", "remote"}));
  ASSERT_TRUE(ParseAllowedTableFunctions("", &names).ok());
  EXPECT_TRUE(names.empty());
  // Any plain name: a table function chgate has no list entry for is refused unless named here.
  ASSERT_TRUE(ParseAllowedTableFunctions("catBoostPool,shardByHash", &names).ok());
  EXPECT_EQ(names, (absl::flat_hash_set<std::string>{"catboostpool", "shardbyhash"}));
  absl::Status bad = ParseAllowedTableFunctions("url,`x`", &names);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("`x`"), std::string_view::npos);
}

// 18.16 reads `ur\l` as url; a quoted callee with an escape servers read differently is refused
// whatever it would name, before and after the server is known.
TEST(QueryPolicyTest, QuotedCalleesWithEscapesServersReadDifferentlyAreRefused) {
  const absl::flat_hash_set<std::string> server = {"url", "numbers", "remote", "file"};
  for (const char* sql : {"SELECT * FROM `ur\\l`('http://x', CSV, 's String')",
                          "SELECT * FROM `re\\mote`('h', system.one)",
                          "SELECT * FROM \"fi\\le\"('x')", "SELECT * FROM `nu\\mbers`(3)"}) {
    EXPECT_EQ(Check(sql).code(), absl::StatusCode::kInvalidArgument) << sql;
    EXPECT_EQ(CheckTableFunctions(sql, {}, server).code(), absl::StatusCode::kInvalidArgument)
        << sql;
  }
  // Escapes every version reads alike are read, and judged by the name they spell.
  EXPECT_EQ(Check("SELECT * FROM `\\x75rl`('http://x')").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Check("SELECT * FROM `u``rl`('http://x')").code(), absl::StatusCode::kOk);
}

// Once the server is known, every table function it has is refused unless it reads the server's
// own data or the operator named it: names chgate's list does not know included.
TEST(QueryPolicyTest, TableFunctionsTheServerHasAreDeniedByDefault) {
  const absl::flat_hash_set<std::string> server = {"numbers",     "merge", "catboostpool",
                                                   "shardbyhash", "url",   "newfangled"};
  for (const char* sql :
       {"SELECT * FROM catBoostPool('a', 'b')", "SELECT * FROM shardByHash('c', 'k', system.one)",
        "SELECT * FROM NewFangled(1)", "SELECT * FROM url('http://x')"}) {
    absl::Status st = CheckTableFunctions(sql, {}, server);
    EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << sql << ": " << st;
    EXPECT_NE(st.message().find("--query-allow-table-functions="), std::string_view::npos) << st;
  }
  for (const char* sql : {"SELECT * FROM numbers(10)", "SELECT * FROM merge(db, '^t')",
                          "SELECT count(), sum(x) FROM t", "SELECT * FROM NUMBERS(1)"}) {
    EXPECT_TRUE(CheckTableFunctions(sql, {}, server).ok()) << sql;
  }
  QueryPolicy allowed;
  allowed.allowed_table_functions = {"catboostpool"};
  EXPECT_TRUE(CheckTableFunctions("SELECT * FROM catBoostPool('a', 'b')", allowed, server).ok());
}

TEST(QueryPolicyTest, KeepsSessionOnlyForSingleReadingStatements) {
  EXPECT_TRUE(KeepsSession("SELECT 1"));
  EXPECT_TRUE(KeepsSession("(SELECT 1)"));
  EXPECT_FALSE(KeepsSession("USE db"));
  EXPECT_FALSE(KeepsSession("SET a = 1"));
  EXPECT_FALSE(KeepsSession("SELECT 1; SET a = 1"));
  EXPECT_FALSE(KeepsSession("CREATE TEMPORARY TABLE t (a Int8)"));
}

std::vector<std::string> Assigned(std::string_view sql) {
  absl::StatusOr<std::vector<std::string>> names = AssignedSettings(sql);
  EXPECT_TRUE(names.ok()) << sql << ": " << names.status();
  return names.ok() ? *names : std::vector<std::string>{"<error>"};
}

TEST(AssignedSettingsTest, NamesEverySettingsClauseAndSetStatement) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Assigned("SELECT 1"), V{});
  EXPECT_EQ(Assigned("SELECT 1 SETTINGS max_threads = 2, log_queries=1 FORMAT JSON"),
            (V{"max_threads", "log_queries"}));
  EXPECT_EQ(Assigned("select 1 settings max_threads=1"), V{"max_threads"});
  // In a subquery, with the outer statement going on after it.
  EXPECT_EQ(Assigned("SELECT * FROM (SELECT 1 SETTINGS max_threads = 1) WHERE x IN (1, 2)"),
            V{"max_threads"});
  // Values with commas inside brackets or strings; negative numbers; a quoted name.
  EXPECT_EQ(Assigned("SELECT 1 SETTINGS a = [1, 2], b = 'x,y', c = -1, `log_queries` = 1"),
            (V{"a", "b", "c", "log_queries"}));
  // Comments do not hide a clause, under any reading of nested comments.
  EXPECT_EQ(Assigned("SELECT 1 /* x */ SETTINGS /* y */ log_queries = 1"), V{"log_queries"});
  EXPECT_EQ(Assigned("SELECT 1 /* /* */ SETTINGS log_queries = 1 */"), V{"log_queries"});
  EXPECT_EQ(Assigned("SET send_logs_level = 'trace'"), V{"send_logs_level"});
  EXPECT_EQ(Assigned("SET a = 1, b = 2"), (V{"a", "b"}));
  // Each name once.
  EXPECT_EQ(Assigned("SELECT (SELECT 1 SETTINGS a = 1) SETTINGS a = 2"), V{"a"});
}

TEST(AssignedSettingsTest, AWordSettingsThatAssignsNothingNamesNothing) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Assigned("SELECT value FROM system.settings WHERE name = 'max_threads'"), V{});
  EXPECT_EQ(Assigned("SELECT settings FROM t WHERE settings = 1"), V{});
  EXPECT_EQ(Assigned("SELECT 'SETTINGS log_queries = 1'"), V{});
  // A table's own settings in DDL are not the query's.
  EXPECT_EQ(Assigned("CREATE TABLE t (a UInt8) ENGINE = MergeTree ORDER BY a "
                     "SETTINGS index_granularity = 8192"),
            V{});
}

TEST(AssignedSettingsTest, ANameQuotedAsServersReadDifferentlyIsRefused) {
  EXPECT_EQ(AssignedSettings("SELECT 1 SETTINGS `log\\_queries` = 1").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AssignedSettings("SELECT 'unterminated").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace chgate::sql
