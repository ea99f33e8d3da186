// chgate-cli in-process: argument parsing and usage errors, help texts, and every command against
// the fake Ingest service with the exit codes scripts rely on (0 ok, 1 failure, 2 usage,
// 3 unavailable).
#include "client/cli/cli.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "client/cli/bench.h"
#include "tests/unit/client/cli_run.h"
#include "tests/unit/client/fake_ingest.h"
#include "tests/unit/client/test_columns.h"

namespace chgate::cli {
namespace {

using client::testing::Col;
using client::testing::FakeServer;
using client::testing::QueryScript;
using client::testing::StringCol;
using ::testing::HasSubstr;
using ::testing::Not;

using testing::Cli;
using testing::CliRun;

TEST(ParseCommandLineTest, AppliesDefaultsAndGlobalOptionsOnEitherSide) {
  Command c = ParseCommandLine({"insert", "--table", "db.t"}).value();
  EXPECT_EQ(c.subcommand, Subcommand::kInsert);
  EXPECT_EQ(c.addr, "127.0.0.1:50051");
  EXPECT_EQ(c.timeout, absl::Seconds(30));
  EXPECT_EQ(c.insert.table, "db.t");
  EXPECT_EQ(c.insert.format, "jsonl");
  EXPECT_EQ(c.insert.batch_rows, 1000u);

  c = ParseCommandLine({"--addr", "h:1", "--timeout=5s", "query", "SELECT 1", "--format", "csv",
                        "--setting", "max_threads=2", "--setting=a=b=c", "--param", "x=1",
                        "--database", "db", "--query-id", "id", "--names", "--stats"})
          .value();
  EXPECT_EQ(c.subcommand, Subcommand::kQuery);
  EXPECT_EQ(c.addr, "h:1");
  EXPECT_EQ(c.timeout, absl::Seconds(5));
  EXPECT_EQ(c.query.sql, "SELECT 1");
  EXPECT_EQ(c.query.format, "csv");
  EXPECT_EQ(c.query.settings.at("max_threads"), "2");
  EXPECT_EQ(c.query.settings.at("a"), "b=c");
  EXPECT_EQ(c.query.parameters.at("x"), "1");
  EXPECT_EQ(c.query.database, "db");
  EXPECT_EQ(c.query.query_id, "id");
  EXPECT_TRUE(c.query.names);
  EXPECT_TRUE(c.query.stats);

  c = ParseCommandLine({"health", "--service", "readiness", "--timeout", "2"}).value();
  EXPECT_EQ(c.addr, "127.0.0.1:50052");  // the health listener by default
  EXPECT_EQ(c.health.service, "readiness");
  EXPECT_EQ(c.timeout, absl::Seconds(2));
  EXPECT_EQ(ParseCommandLine({"health", "--addr", "h:9"}).value().addr, "h:9");

  c = ParseCommandLine({"insert", "--table=t", "--format", "csv", "--columns", "a,b",
                        "--batch-rows", "5", "--idempotency-prefix", "run1", "--ack-mode",
                        "accepted", "--max-in-flight", "2", "--stream-timeout", "1h", "--progress"})
          .value();
  EXPECT_EQ(c.insert.columns, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(c.insert.batch_rows, 5u);
  EXPECT_EQ(c.insert.idempotency_prefix, "run1");
  EXPECT_EQ(c.insert.ack_mode, v1::ACK_MODE_ACCEPTED);
  EXPECT_EQ(c.insert.max_in_flight, 2u);
  EXPECT_EQ(c.insert.stream_timeout, absl::Hours(1));
  EXPECT_TRUE(c.insert.progress);

  c = ParseCommandLine({"bench", "--table", "t", "--streams", "2", "--duration", "1m",
                        "--rows-per-request", "10", "--row", "[1,\"x\"]", "--columns", "a,b"})
          .value();
  EXPECT_EQ(c.bench.streams, 2u);
  EXPECT_EQ(c.bench.duration, absl::Minutes(1));
  EXPECT_EQ(c.bench.rows_per_request, 10u);
}

// Boolean flags read as given: alone or =true is on, =false is off (documented in
// client/README.md); a contradictory --tls=false is refused rather than guessed.
TEST(ParseCommandLineTest, BooleanFlagsSetToFalseAreOff) {
  EXPECT_FALSE(ParseCommandLine({"query", "x"}).value().tls.enabled);
  EXPECT_TRUE(ParseCommandLine({"query", "x", "--tls"}).value().tls.enabled);
  EXPECT_TRUE(ParseCommandLine({"--tls=true", "query", "x"}).value().tls.enabled);
  EXPECT_FALSE(ParseCommandLine({"query", "x", "--tls=false"}).value().tls.enabled);
  EXPECT_FALSE(ParseCommandLine({"--tls", "query", "x", "--tls=false"}).value().tls.enabled)
      << "the option after the command wins";
  EXPECT_TRUE(ParseCommandLine({"query", "x", "--tls-ca-file=/ca.pem"}).value().tls.enabled);
  absl::StatusOr<Command> both =
      ParseCommandLine({"query", "x", "--tls=false", "--tls-ca-file=/c"});
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.status().message(), HasSubstr("--tls=false"));
  EXPECT_TRUE(ParseCommandLine({"query", "x", "--help"}).value().help.size() > 0);
  EXPECT_TRUE(ParseCommandLine({"query", "x", "--help=false"}).value().help.empty());
  EXPECT_TRUE(ParseCommandLine({"--help=false", "query", "x"}).value().help.empty());
  EXPECT_TRUE(ParseCommandLine({"query", "x", "--names=false"}).value().help.empty());
}

TEST(ParseCommandLineTest, RejectsBadUsage) {
  struct Case {
    std::vector<std::string> args;
    const char* error;
  } cases[] = {
      {{}, "no command given"},
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{"--bogus", "query", "x"}, "unknown option --bogus"},
      {{"query", "x", "--bogus"}, "unknown option --bogus"},
      {{"query"}, "SQL statement is missing"},
      {{"query", "a", "b"}, "more than one SQL argument"},
      {{"query", "x", "--format", "xml"}, "'xml' is not tsv, csv or jsonl"},
      {{"query", "x", "--setting", "novalue"}, "name=value"},
      {{"query", "x", "--timeout", "soon"}, "not a duration"},
      {{"query", "x", "--timeout", "0s"}, "must be positive"},
      {{"query", "x", "--database"}, "needs a value"},
      {{"query", "x", "--names=maybe"}, "takes no value"},
      {{"query", "x", "--database", "a", "--database", "b"}, "given twice"},
      {{"insert"}, "--table is required"},
      {{"insert", "--table", "t", "--format", "xml"}, "neither jsonl nor csv"},
      {{"insert", "--table", "t", "--batch-rows", "0"}, "integer >= 1"},
      {{"insert", "--table", "t", "--columns", "a,,b"}, "empty name"},
      {{"insert", "--table", "t", "--ack-mode", "never"}, "not committed, accepted or persisted"},
      {{"insert", "--table", "t", "extra"}, "unexpected argument 'extra'"},
      {{"insert", "--table", "t", "-x"}, "unknown option '-x'"},
      {{"bench", "--table", "t", "--row", "{bad"}, "--row"},
      {{"bench", "--table", "t", "--row", "[1]", "--columns", "a,b"}, "1 values for 2"},
      {{"bench", "--table", "t", "--row", "3"}, "object or array"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Command> command = ParseCommandLine(c.args);
    ASSERT_FALSE(command.ok()) << ::testing::PrintToString(c.args);
    EXPECT_EQ(command.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(command.status().message(), HasSubstr(c.error)) << ::testing::PrintToString(c.args);
  }
}

TEST(CliTest, HelpForTheToolAndEveryCommand) {
  CliRun run = Cli({"--help"});
  EXPECT_EQ(run.code, kExitOk);
  EXPECT_THAT(run.out, HasSubstr("Usage: chgate-cli"));
  EXPECT_THAT(run.out, HasSubstr("Exit codes"));
  EXPECT_THAT(run.out, HasSubstr("3   chgate unreachable"));
  EXPECT_EQ(Cli({"help"}).out, run.out);
  const std::pair<const char*, const char*> commands[] = {{"insert", "--batch-rows"},
                                                          {"query", "--setting"},
                                                          {"bench", "--streams"},
                                                          {"health", "--service"}};
  for (const auto& [name, flag] : commands) {
    CliRun sub = Cli({name, "--help"});
    EXPECT_EQ(sub.code, kExitOk) << name;
    EXPECT_THAT(sub.out, HasSubstr(absl::StrCat("chgate-cli [--addr ADDR]")));
    EXPECT_THAT(sub.out, HasSubstr(flag)) << name;
    EXPECT_THAT(sub.out, HasSubstr("Exit codes")) << name;
    EXPECT_EQ(Cli({"--help", name}).out, sub.out);
  }
}

TEST(CliTest, UsageErrorsExitWithTwo) {
  CliRun run = Cli({"query"});
  EXPECT_EQ(run.code, kExitUsage);
  EXPECT_THAT(run.err, HasSubstr("chgate-cli: query: the SQL statement is missing"));
  EXPECT_THAT(run.err, HasSubstr("--help"));
  EXPECT_EQ(Cli({"nope"}).code, kExitUsage);
}

QueryScript TwoRowsScript() {
  QueryScript s;
  v1::QueryResponse header;
  for (auto [name, type] : {std::pair{"id", "UInt32"}, std::pair{"name", "Nullable(String)"},
                            std::pair{"tags", "Array(String)"}}) {
    v1::ColumnSchema* c = header.mutable_header()->add_columns();
    c->set_name(name);
    c->set_type(type);
  }
  header.mutable_header()->set_timezone("UTC");
  s.responses.push_back(header);
  v1::QueryResponse block;
  block.mutable_block()->set_rows(2);
  *block.mutable_block()->add_columns() = Col("UInt32", client::testing::Le<uint32_t>({1, 2}));
  *block.mutable_block()->add_columns() =
      StringCol("Nullable(String)", {"a\tb", ""}, std::string("\0\1", 2));
  v1::Column tags = Col("Array(String)");
  tags.add_offsets(2);
  tags.add_offsets(2);
  *tags.add_children() = StringCol("String", {"x", "y\"z"});
  *block.mutable_block()->add_columns() = tags;
  s.responses.push_back(block);
  v1::QueryResponse summary;
  summary.mutable_summary()->set_rows(2);
  summary.mutable_summary()->set_blocks(1);
  summary.mutable_summary()->set_received_bytes(123);
  summary.mutable_summary()->set_decoded_bytes(456);
  summary.mutable_summary()->mutable_elapsed()->set_nanos(1500000);
  summary.mutable_summary()->set_query_id("qid");
  s.responses.push_back(summary);
  return s;
}

TEST(CliQueryTest, PrintsTsvCsvAndJsonLines) {
  FakeServer server;
  server.service().AddQueryScript(TwoRowsScript());
  CliRun tsv = Cli({"--addr", server.address(), "query", "SELECT *", "--names"});
  EXPECT_EQ(tsv.code, kExitOk) << tsv.err;
  EXPECT_EQ(tsv.out, "id\tname\ttags\n1\ta\\tb\t['x','y\"z']\n2\t\\N\t[]\n");
  EXPECT_EQ(tsv.err, "");

  CliRun csv = Cli({"--addr", server.address(), "query", "SELECT *", "--format", "csv", "--names"});
  EXPECT_EQ(csv.code, kExitOk) << csv.err;
  EXPECT_EQ(csv.out, "\"id\",\"name\",\"tags\"\n1,\"a\tb\",\"['x','y\"\"z']\"\n2,\\N,\"[]\"\n");

  CliRun jsonl = Cli({"--addr", server.address(), "query", "SELECT *", "--format", "jsonl"});
  EXPECT_EQ(jsonl.code, kExitOk) << jsonl.err;
  EXPECT_EQ(jsonl.out,
            "{\"id\":1,\"name\":\"a\\tb\",\"tags\":[\"x\",\"y\\\"z\"]}\n"
            "{\"id\":2,\"name\":null,\"tags\":[]}\n");
}

TEST(CliQueryTest, StatsGoToStderrAndOptionsReachTheServer) {
  FakeServer server;
  server.service().AddQueryScript(TwoRowsScript());
  CliRun run = Cli({"--addr", server.address(), "query", "-", "--stats", "--setting", "a=1",
                    "--param", "p=2", "--database", "db", "--query-id", "my-id"},
                   "SELECT * FROM stdin_sql");
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_THAT(run.err, HasSubstr("rows: 2\n"));
  EXPECT_THAT(run.err, HasSubstr("received_bytes: 123\n"));
  EXPECT_THAT(run.err, HasSubstr("decoded_bytes: 456\n"));
  EXPECT_THAT(run.err, HasSubstr("elapsed: 1.5ms\n"));
  ASSERT_EQ(server.service().queries().size(), 1u);
  const v1::QueryRequest q = server.service().queries()[0];
  EXPECT_EQ(q.sql(), "SELECT * FROM stdin_sql");
  EXPECT_EQ(q.settings().at("a"), "1");
  EXPECT_EQ(q.parameters().at("p"), "2");
  EXPECT_EQ(q.database(), "db");
  EXPECT_EQ(q.query_id(), "my-id");
}

TEST(CliQueryTest, ServerErrorsExitWithOneAndUnavailableWithThree) {
  FakeServer server;
  QueryScript error;
  error.status = grpc::Status(grpc::StatusCode::NOT_FOUND, "Table db.x doesn't exist");
  server.service().AddQueryScript(error);
  CliRun run = Cli({"--addr", server.address(), "query", "SELECT 1"});
  EXPECT_EQ(run.code, kExitFailure);
  EXPECT_THAT(run.err, HasSubstr("query failed: NOT_FOUND: Table db.x doesn't exist"));

  FakeServer mid;
  QueryScript s = TwoRowsScript();
  s.responses.pop_back();  // no summary
  s.status = grpc::Status(grpc::StatusCode::UNKNOWN, "ClickHouse error 395");
  mid.service().AddQueryScript(s);
  run = Cli({"--addr", mid.address(), "query", "SELECT 1"});
  EXPECT_EQ(run.code, kExitFailure);
  EXPECT_THAT(run.out, HasSubstr("1\ta\\tb"));  // rows before the error are printed
  EXPECT_THAT(run.err, HasSubstr("query failed after 2 rows: UNKNOWN: ClickHouse error 395"));

  FakeServer down;
  QueryScript unavailable;
  unavailable.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
  down.service().AddQueryScript(unavailable);
  EXPECT_EQ(Cli({"--addr", down.address(), "query", "SELECT 1"}).code, kExitUnavailable);
  EXPECT_EQ(Cli({"--addr", client::testing::UnusedAddress(), "query", "SELECT 1"}).code,
            kExitUnavailable);
}

std::string Keys(const std::vector<v1::InsertRequest>& requests) {
  std::string out;
  for (const v1::InsertRequest& r : requests) out += r.idempotency_key() + ";";
  return out;
}

TEST(CliInsertTest, BatchesJsonLinesObjects) {
  FakeServer server;
  const std::string input =
      "{\"id\": 1, \"msg\": \"a\", \"tags\": [\"x\"]}\n"
      "\n"
      "{\"msg\": \"b\", \"id\": 18446744073709551615, \"tags\": []}\n"
      "{\"id\": -3, \"msg\": null, \"tags\": {\"k\": 1.5}}\n";
  CliRun run = Cli({"--addr", server.address(), "insert", "--table", "db.t", "--batch-rows", "2",
                    "--idempotency-prefix", "load7", "--ack-mode", "accepted"},
                   input);
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(run.err, "");  // no progress line: stderr is not a terminal
  std::vector<v1::InsertRequest> sent = server.service().stream_requests();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(Keys(sent), "load7-1;load7-2;");
  EXPECT_EQ(sent[0].table(), "db.t");
  EXPECT_EQ(sent[0].ack_mode(), v1::ACK_MODE_ACCEPTED);
  EXPECT_THAT(sent[0].columns(), ::testing::ElementsAre("id", "msg", "tags"));
  ASSERT_EQ(sent[0].rows().rows_size(), 2);
  ASSERT_EQ(sent[1].rows().rows_size(), 1);
  const v1::Row& second = sent[0].rows().rows(1);  // keys in another order
  EXPECT_EQ(second.values(0).uint64_value(), 18446744073709551615u);
  EXPECT_EQ(second.values(1).string_value(), "b");
  EXPECT_EQ(second.values(2).array_value().values_size(), 0);
  const v1::Row& third = sent[1].rows().rows(0);
  EXPECT_EQ(third.values(0).int64_value(), -3);
  EXPECT_TRUE(third.values(1).has_null_value());
  EXPECT_EQ(third.values(2).map_value().entries(0).value().double_value(), 1.5);
}

TEST(CliInsertTest, JsonArraysAndCsvWithAndWithoutHeader) {
  FakeServer server;
  CliRun arrays = Cli({"--addr", server.address(), "insert", "--table", "t", "--columns", "a,b"},
                      "[1, \"x\"]\n[2, \"y\"]\n");
  EXPECT_EQ(arrays.code, kExitOk) << arrays.err;
  CliRun csv = Cli({"--addr", server.address(), "insert", "--table", "t", "--format", "csv"},
                   "a,b\n1,\"x,1\"\n2,\\N\n");
  EXPECT_EQ(csv.code, kExitOk) << csv.err;
  CliRun csv_columns = Cli(
      {"--addr", server.address(), "insert", "--table", "t", "--format", "csv", "--columns", "b,a"},
      "x,1\n");
  EXPECT_EQ(csv_columns.code, kExitOk) << csv_columns.err;
  std::vector<v1::InsertRequest> sent = server.service().stream_requests();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_THAT(sent[0].columns(), ::testing::ElementsAre("a", "b"));
  EXPECT_EQ(sent[0].rows().rows(1).values(1).string_value(), "y");
  EXPECT_THAT(sent[1].columns(), ::testing::ElementsAre("a", "b"));
  EXPECT_EQ(sent[1].rows().rows(0).values(1).string_value(), "x,1");
  EXPECT_TRUE(sent[1].rows().rows(1).values(1).has_null_value());
  EXPECT_THAT(sent[2].columns(), ::testing::ElementsAre("b", "a"));
  EXPECT_EQ(sent[2].rows().rows(0).values(0).string_value(), "x");
  EXPECT_EQ(sent[2].idempotency_key(), "");
}

TEST(CliInsertTest, RejectedBatchNamesItsInputLines) {
  FakeServer server;
  server.service().set_stream_ack_status(
      [](const v1::InsertRequest& r) -> std::optional<v1::Status> {
        if (r.sequence() != 2) return std::nullopt;
        v1::Status s;
        s.set_code(3);
        s.set_message("row 1, column id: value -1 does not fit UInt8");
        s.mutable_value_error()->set_row_index(1);
        s.mutable_value_error()->set_column("id");
        return s;
      });
  // Line 3 is blank: batch 2 holds input lines 4 and 5.
  const std::string input = "{\"id\":1}\n{\"id\":2}\n\n{\"id\":3}\n{\"id\":-1}\n";
  CliRun run =
      Cli({"--addr", server.address(), "insert", "--table", "t", "--batch-rows", "2"}, input);
  EXPECT_EQ(run.code, kExitFailure);
  EXPECT_THAT(run.err, HasSubstr("batch 2 (input lines 4-5) failed: INVALID_ARGUMENT: row 1"));
  EXPECT_THAT(run.err, HasSubstr("(input line 5)"));
}

TEST(CliInsertTest, BadInputStopsWithTheLine) {
  FakeServer server;
  CliRun run = Cli({"--addr", server.address(), "insert", "--table", "t", "--batch-rows", "1"},
                   "{\"a\":1}\n{\"a\":2,\"b\":3}\n{\"a\":3}\n");
  EXPECT_EQ(run.code, kExitFailure);
  EXPECT_THAT(run.err, HasSubstr("input line 2: key 'b' is not a target column"));
  EXPECT_EQ(server.service().stream_requests().size(), 1u);

  const std::pair<const char*, const char*> cases[] = {
      {"{\"a\":1}\n{\"b\":1}\n", "input line 2: key 'b'"},
      {"{\"a\":1}\n{}\n", "input line 2: no value for column 'a'"},
      {"{\"a\":1,\"a\":2}\n", "duplicate"},
      {"[1]\n{\"a\":1}\n", "a JSON object after JSON arrays"},
      {"[1]\n[1,2]\n", "input line 2: 2 values, expected 1"},
      {"3\n", "expected a JSON object or array"},
      {"{\"a\":\n", "input line 1: invalid JSON at column"},
  };
  for (const auto& [input, error] : cases) {
    CliRun r = Cli({"--addr", server.address(), "insert", "--table", "t"}, input);
    EXPECT_EQ(r.code, kExitFailure) << input;
    EXPECT_THAT(r.err, HasSubstr(error)) << input;
  }
  CliRun csv =
      Cli({"--addr", server.address(), "insert", "--table", "t", "--format", "csv"}, "a,b\n1\n");
  EXPECT_EQ(csv.code, kExitFailure);
  EXPECT_THAT(csv.err, HasSubstr("input line 2: 1 fields, expected 2"));
}

TEST(CliInsertTest, StreamFailureAndUnreachableServer) {
  FakeServer server;
  server.service().set_stream_hold_until(100);
  server.service().set_stream_end_after(
      2, grpc::Status(grpc::StatusCode::UNAVAILABLE, "chgate is shutting down"));
  CliRun run = Cli({"--addr", server.address(), "insert", "--table", "t", "--batch-rows", "1"},
                   "{\"a\":1}\n{\"a\":2}\n");
  EXPECT_EQ(run.code, kExitUnavailable);
  EXPECT_THAT(run.err, HasSubstr("chgate is shutting down"));

  run = Cli({"--addr", client::testing::UnusedAddress(), "insert", "--table", "t"}, "{\"a\":1}\n");
  EXPECT_EQ(run.code, kExitUnavailable);
  EXPECT_THAT(run.err, HasSubstr("UNAVAILABLE"));
}

TEST(CliInsertTest, ResendsUnavailableBatchesWithIdempotencyKeys) {
  FakeServer server;
  // The first stream acks one request, then ends with UNAVAILABLE on the second (a chgate
  // restart); the next stream works.
  server.service().set_stream_end_after(2, grpc::Status(grpc::StatusCode::UNAVAILABLE, "drained"),
                                        /*streams=*/1);
  CliRun run = Cli({"--addr", server.address(), "insert", "--table", "t", "--batch-rows", "1",
                    "--idempotency-prefix", "p"},
                   "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_THAT(run.err, HasSubstr("batch 2: UNAVAILABLE"));
  EXPECT_THAT(run.err, HasSubstr("sending it again (attempt 2)"));
  std::vector<std::string> keys;
  for (const v1::InsertRequest& r : server.service().stream_requests()) {
    keys.push_back(r.idempotency_key());
  }
  std::sort(keys.begin(), keys.end());
  EXPECT_THAT(keys, ::testing::ElementsAre("p-1", "p-2", "p-2", "p-3"));

  // A batch that keeps meeting UNAVAILABLE is sent again up to 3 times, then the run fails.
  FakeServer down;
  down.service().set_stream_end_after(1, grpc::Status(grpc::StatusCode::UNAVAILABLE, "drained"),
                                      /*streams=*/100);
  run = Cli({"--addr", down.address(), "insert", "--table", "t", "--idempotency-prefix", "q"},
            "{\"a\":1}\n");
  EXPECT_EQ(run.code, kExitUnavailable) << run.err;
  keys.clear();
  for (const v1::InsertRequest& r : down.service().stream_requests()) {
    keys.push_back(r.idempotency_key());
  }
  EXPECT_THAT(keys, ::testing::ElementsAre("q-1", "q-1", "q-1", "q-1"));

  // Without keys nothing is sent twice.
  FakeServer other;
  other.service().set_stream_end_after(2, grpc::Status(grpc::StatusCode::UNAVAILABLE, "drained"),
                                       /*streams=*/1);
  run = Cli({"--addr", other.address(), "insert", "--table", "t", "--batch-rows", "1"},
            "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");
  EXPECT_EQ(run.code, kExitUnavailable);
  EXPECT_THAT(run.err, HasSubstr("batch 2 (input lines 2-2) failed: UNAVAILABLE"));
}

TEST(CliInsertTest, MissingAckWithinTimeoutCancels) {
  FakeServer server;
  server.service().set_stream_hold_until(100);
  CliRun run = Cli({"--addr", server.address(), "--timeout", "200ms", "insert", "--table", "t"},
                   "{\"a\":1}\n");
  EXPECT_EQ(run.code, kExitFailure);
  EXPECT_THAT(run.err, HasSubstr("no ack for batch 1 within --timeout 200ms"));
}

TEST(CliInsertTest, ProgressLineOnRequest) {
  FakeServer server;
  CliRun run =
      Cli({"--addr", server.address(), "insert", "--table", "t", "--progress", "--batch-rows", "1"},
          "{\"a\":1}\n{\"a\":2}\n");
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_THAT(run.err, HasSubstr("acked 2 rows"));
  EXPECT_THAT(run.err, HasSubstr("inserted 2 rows in 2 requests"));
}

TEST(CliHealthTest, ExitsZeroOnlyWhenServing) {
  FakeServer server;
  server.health()->SetServingStatus("readiness", false);
  CliRun serving = Cli({"--addr", server.address(), "health"});
  EXPECT_EQ(serving.code, kExitOk);
  EXPECT_EQ(serving.out, "SERVING\n");
  CliRun not_serving = Cli({"health", "--addr", server.address(), "--service", "readiness"});
  EXPECT_EQ(not_serving.code, kExitFailure);
  EXPECT_EQ(not_serving.out, "NOT_SERVING\n");
  CliRun unknown = Cli({"health", "--addr", server.address(), "--service", "nope"});
  EXPECT_EQ(unknown.code, kExitFailure);
  EXPECT_THAT(unknown.err, HasSubstr("NOT_FOUND"));
  CliRun down = Cli({"health", "--addr", client::testing::UnusedAddress()});
  EXPECT_EQ(down.code, kExitUnavailable);
}

TEST(CliBenchTest, ShortRunReportsRatesAndLatency) {
  FakeServer server;
  CliRun run = Cli({"--addr", server.address(), "bench", "--table", "t", "--streams", "2",
                    "--duration", "100ms", "--rows-per-request", "3"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_THAT(run.out, HasSubstr("rows/s"));
  EXPECT_THAT(run.out, HasSubstr("ack latency ms    p50"));
  EXPECT_THAT(run.out, HasSubstr("requests failed   0"));
  std::vector<v1::InsertRequest> sent = server.service().stream_requests();
  ASSERT_FALSE(sent.empty());
  EXPECT_EQ(sent[0].rows().rows_size(), 3);
  EXPECT_THAT(sent[0].columns(), ::testing::ElementsAre("id", "msg"));
}

TEST(CliBenchTest, FailuresSetTheExitCode) {
  FakeServer server;
  server.service().set_stream_ack_status([](const v1::InsertRequest&) -> std::optional<v1::Status> {
    v1::Status s;
    s.set_code(5);
    s.set_message("no such table");
    return s;
  });
  CliRun run = Cli({"--addr", server.address(), "bench", "--table", "t", "--streams", "1",
                    "--duration", "50ms"});
  EXPECT_EQ(run.code, kExitFailure);
  EXPECT_THAT(run.out, Not(HasSubstr("requests failed   0")));
  EXPECT_THAT(run.err, HasSubstr("NOT_FOUND: no such table"));
}

TEST(ExitCodeTest, MapsStatusCodes) {
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), kExitOk);
  EXPECT_EQ(ExitCodeFor(absl::UnavailableError("x")), kExitUnavailable);
  EXPECT_EQ(ExitCodeFor(absl::DeadlineExceededError("x")), kExitFailure);
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("x")), kExitFailure);
}

}  // namespace
}  // namespace chgate::cli
