// chgate-cli bench: its pieces on their own (type lists, the columnar request, the send
// schedule, the report), then whole runs against the fake Ingest service. No assertion depends on
// timing beyond what the schedule itself guarantees.
#include "client/cli/bench.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/cli/json.h"
#include "tests/unit/client/cli_run.h"
#include "tests/unit/client/fake_ingest.h"
#include "tests/unit/client/test_columns.h"

namespace chgate::cli {
namespace {

using client::testing::FakeServer;
using client::testing::QueryScript;
using client::testing::Texts;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::Cli;
using testing::CliRun;

// The members of a JSON object, by key.
std::map<std::string, Json> Members(const std::string& text) {
  absl::StatusOr<Json> json = ParseJson(text);
  EXPECT_TRUE(json.ok()) << json.status() << "\n" << text;
  std::map<std::string, Json> out;
  if (!json.ok()) return out;
  EXPECT_EQ(json->kind, Json::Kind::kObject) << text;
  for (const auto& [key, value] : json->members) out[key] = value;
  return out;
}

double Number(const Json& json) {
  EXPECT_EQ(json.kind, Json::Kind::kNumber) << json.text;
  return json.kind == Json::Kind::kNumber ? std::stod(json.text) : -1;
}

// ---- pieces ------------------------------------------------------------------------------

TEST(ParseTypeListTest, SplitsAtCommasOutsideParenthesesAndQuotes) {
  EXPECT_THAT(ParseTypeList("UInt64,String").value(), ElementsAre("UInt64", "String"));
  EXPECT_THAT(
      ParseTypeList(" Decimal(9, 2) ,Map(String, UInt8),Enum8('a,(' = 1, 'b\\'' = 2)").value(),
      ElementsAre("Decimal(9, 2)", "Map(String, UInt8)", "Enum8('a,(' = 1, 'b\\'' = 2)"));
  for (const char* bad : {"", "UInt64,,String", "UInt64,", "Array(UInt8", "UInt8)", "Enum8('a"}) {
    absl::StatusOr<std::vector<std::string>> types = ParseTypeList(bad);
    EXPECT_FALSE(types.ok()) << bad;
    EXPECT_THAT(types.status().message(), HasSubstr("--types")) << bad;
  }
}

TEST(BuildBenchBlockTest, RepeatsTheRowInEachColumnsLayout) {
  BenchRow row = ParseBenchRow(R"({"id":7,"msg":"hi","tags":["a","b"],"day":"2024-05-01",)"
                               R"("at":"2024-05-01T12:00:00Z","m":{"k":3},"n":null})",
                               {})
                     .value();
  const std::vector<std::string> types = {"UInt64",         "String",   "Array(String)",
                                          "Date",           "DateTime", "Map(String, UInt8)",
                                          "Nullable(Int32)"};
  v1::Block block = BuildBenchBlock(row, types, 3).value();
  EXPECT_EQ(block.rows(), 3u);
  ASSERT_EQ(block.columns_size(), 7);
  const std::vector<std::string> expected[] = {
      {"7", "7", "7"},
      {"hi", "hi", "hi"},
      {"['a','b']", "['a','b']", "['a','b']"},
      {"2024-05-01", "2024-05-01", "2024-05-01"},
      {"2024-05-01 12:00:00", "2024-05-01 12:00:00", "2024-05-01 12:00:00"},
      {"{'k':3}", "{'k':3}", "{'k':3}"},
      {"\\N", "\\N", "\\N"},
  };
  for (int i = 0; i < 7; ++i) {
    const v1::Column& column = block.columns(i);
    EXPECT_EQ(column.name(), row.columns[static_cast<size_t>(i)]);
    EXPECT_EQ(column.type(), types[static_cast<size_t>(i)]);
    EXPECT_EQ(Texts(column, 3), expected[i]) << column.name();
  }
}

TEST(BuildBenchBlockTest, NamesTheColumnOfAValueThatDoesNotFit) {
  BenchRow row = ParseBenchRow(R"([1,"x"])", {"id", "msg"}).value();
  EXPECT_THAT(BuildBenchBlock(row, {"UInt64"}, 1).status().message(),
              HasSubstr("2 values for 1 column types"));
  EXPECT_THAT(BuildBenchBlock(row, {"UInt64", "Array(String)"}, 1).status().message(),
              HasSubstr("column msg (Array(String))"));
  BenchRow nested = ParseBenchRow(R"([1,["a"],{"k":1}])", {"id", "msg", "m"}).value();
  EXPECT_THAT(BuildBenchBlock(nested, {"UInt64", "String", "String"}, 1).status().message(),
              HasSubstr("column msg (String) does not take a JSON array"));
  EXPECT_THAT(
      BuildBenchBlock(nested, {"UInt64", "Tuple(UInt8, UInt8)", "String"}, 1).status().message(),
      HasSubstr("column msg (Tuple(UInt8, UInt8)) does not take 1 elements"));
  EXPECT_THAT(BuildBenchBlock(nested, {"UInt64", "Array(String)", "String"}, 1).status().message(),
              HasSubstr("column m (String) does not take a JSON object"));
  absl::Status status = BuildBenchBlock(row, {"UInt64", "UInt8"}, 1).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("msg"));
  EXPECT_THAT(BuildBenchBlock(row, {"UInt64", "NoSuchType"}, 1).status().code(),
              absl::StatusCode::kInvalidArgument);
  BenchRow date = ParseBenchRow(R"(["yesterday"])", {"d"}).value();
  EXPECT_THAT(BuildBenchBlock(date, {"DateTime"}, 1).status().message(),
              HasSubstr("column d (DateTime)"));
}

TEST(SendScheduleTest, OpenLoopRequestsAreDueAtFixedIntervalsWhoeverClaimsThem) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  SendSchedule schedule(start, absl::Seconds(1), 10);
  EXPECT_TRUE(schedule.open_loop());
  EXPECT_EQ(schedule.scheduled(), 10u);
  // Claimed early or late, request k is due at start + k x 100ms.
  EXPECT_EQ(schedule.Claim(start), start);
  EXPECT_EQ(schedule.Claim(start), start + absl::Milliseconds(100));
  EXPECT_EQ(schedule.Claim(start + absl::Milliseconds(950)), start + absl::Milliseconds(200));
  for (int k = 3; k < 10; ++k) {
    EXPECT_EQ(schedule.Claim(start + absl::Milliseconds(10)), start + absl::Milliseconds(100 * k));
  }
  EXPECT_EQ(schedule.Claim(start), std::nullopt);
  EXPECT_EQ(schedule.claimed(), 10u);
}

TEST(SendScheduleTest, StopsAtTheEndLeavingLateRequestsUnclaimed) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  SendSchedule schedule(start, absl::Seconds(1), 10);
  ASSERT_TRUE(schedule.Claim(start).has_value());
  ASSERT_TRUE(schedule.Claim(start).has_value());
  EXPECT_EQ(schedule.Claim(start + absl::Seconds(1)), std::nullopt);
  EXPECT_EQ(schedule.Claim(start + absl::Seconds(5)), std::nullopt);
  EXPECT_EQ(schedule.claimed(), 2u);
  EXPECT_EQ(schedule.scheduled() - schedule.claimed(), 8u);
}

TEST(SendScheduleTest, CountsEveryRequestDueBeforeTheEnd) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  EXPECT_EQ(SendSchedule(start, absl::Milliseconds(300), 10).scheduled(), 3u);
  EXPECT_EQ(SendSchedule(start, absl::Seconds(1), 2.5).scheduled(), 3u);  // 0, 0.4, 0.8 s
  EXPECT_EQ(SendSchedule(start, absl::Seconds(2), 0.4).scheduled(), 1u);
  EXPECT_EQ(SendSchedule(start, absl::Seconds(10), 20000).scheduled(), 200000u);
}

TEST(SendScheduleTest, ClosedLoopRequestsAreDueWhenClaimed) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  SendSchedule schedule(start, absl::Seconds(1), 0);
  EXPECT_FALSE(schedule.open_loop());
  EXPECT_EQ(schedule.scheduled(), 0u);
  for (int i = 0; i < 100; ++i) {
    const absl::Time now = start + absl::Milliseconds(i);
    EXPECT_EQ(schedule.Claim(now), now);
  }
  EXPECT_EQ(schedule.Claim(start + absl::Seconds(1)), std::nullopt);
  EXPECT_EQ(schedule.claimed(), 100u);
}

TEST(SendScheduleTest, BehindMeansLaterThanTheSlack) {
  const absl::Time due = absl::FromUnixSeconds(1000);
  EXPECT_FALSE(SendSchedule::Behind(due, due));
  EXPECT_FALSE(SendSchedule::Behind(due, due - absl::Milliseconds(5)));
  EXPECT_FALSE(SendSchedule::Behind(due, due + SendSchedule::kSlack));
  EXPECT_TRUE(SendSchedule::Behind(due, due + SendSchedule::kSlack + absl::Microseconds(1)));
}

TEST(FormatBenchJsonTest, NullsWhatWasNotMeasured) {
  BenchResult result{.table = "db.\"t\"", .mode = BenchMode::kBlock, .streams = 2};
  result.latency_p99_ms = std::numeric_limits<double>::infinity();
  std::map<std::string, Json> json = Members(FormatBenchJson(result));
  EXPECT_EQ(json["table"].text, "db.\"t\"");
  EXPECT_EQ(json["mode"].text, "block");
  EXPECT_EQ(json["latency_p99_ms"].kind, Json::Kind::kNull);
  for (const char* key : {"client_cpu_us_per_request", "target_rate", "achieved_rate", "scheduled",
                          "behind_schedule", "unsent"}) {
    EXPECT_EQ(json[key].kind, Json::Kind::kNull) << key;
  }
  result.target_rate = 100;
  result.behind_schedule = 3;
  json = Members(FormatBenchJson(result));
  EXPECT_EQ(Number(json["behind_schedule"]), 3);
  EXPECT_EQ(Number(json["target_rate"]), 100);
}

// ---- runs --------------------------------------------------------------------------------

TEST(BenchRunTest, StreamModeSendsRowsOverStreams) {
  FakeServer server;
  CliRun run = Cli({"--addr", server.address(), "bench", "--table", "t", "--streams", "2",
                    "--duration", "100ms", "--rows-per-request", "3", "--mode", "stream"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_THAT(run.out, HasSubstr("mode stream, 2 streams, 3 rows/request, 8 in flight/stream"));
  EXPECT_THAT(run.out, HasSubstr("p90"));
  EXPECT_THAT(run.out, HasSubstr("client CPU"));
  std::vector<v1::InsertRequest> sent = server.service().stream_requests();
  ASSERT_FALSE(sent.empty());
  EXPECT_EQ(sent[0].rows().rows_size(), 3);
  EXPECT_FALSE(sent[0].has_block());
  EXPECT_EQ(server.service().insert_calls(), 0);
}

TEST(BenchRunTest, UnaryModeCallsInsert) {
  FakeServer server;
  CliRun run = Cli({"--addr", server.address(), "bench", "--table", "t", "--mode", "unary",
                    "--streams", "2", "--duration", "100ms", "--rows-per-request", "3"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_THAT(run.out, HasSubstr("mode unary, 2 senders, 3 rows/request, 8 calls in flight"));
  std::vector<v1::InsertRequest> inserts = server.service().inserts();
  ASSERT_FALSE(inserts.empty());
  EXPECT_EQ(inserts[0].table(), "t");
  EXPECT_EQ(inserts[0].rows().rows_size(), 3);
  EXPECT_THAT(inserts[0].columns(), ElementsAre("id", "msg"));
  EXPECT_TRUE(server.service().stream_requests().empty());
  std::map<std::string, Json> json =
      Members(Cli({"--addr", server.address(), "bench", "--table", "t", "--mode", "unary",
                   "--streams", "1", "--max-in-flight", "3", "--duration", "50ms", "--json"})
                  .out);
  EXPECT_EQ(json["mode"].text, "unary");
  EXPECT_EQ(Number(json["max_in_flight"]), 3);
  EXPECT_GT(Number(json["requests_ok"]), 0);
}

TEST(BenchRunTest, BlockModeSendsBlocksOfTheTypesGiven) {
  FakeServer server;
  CliRun run =
      Cli({"--addr", server.address(), "bench", "--table", "t", "--mode", "block", "--streams", "1",
           "--duration", "100ms", "--rows-per-request", "4", "--types", "UInt64, String"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_THAT(run.out, HasSubstr("mode block"));
  std::vector<v1::InsertRequest> sent = server.service().stream_requests();
  ASSERT_FALSE(sent.empty());
  ASSERT_TRUE(sent[0].has_block());
  const v1::Block& block = sent[0].block();
  EXPECT_EQ(block.rows(), 4u);
  ASSERT_EQ(block.columns_size(), 2);
  EXPECT_EQ(block.columns(0).type(), "UInt64");
  EXPECT_EQ(block.columns(1).type(), "String");
  EXPECT_THAT(Texts(block.columns(0), 4), ElementsAre("1", "1", "1", "1"));
  EXPECT_THAT(Texts(block.columns(1), 4), ::testing::Each("chgate-cli bench"));
  EXPECT_THAT(sent[0].columns(), ElementsAre("id", "msg"));
  EXPECT_EQ(server.service().query_calls(), 0);
}

QueryScript HeaderScript(std::vector<std::pair<std::string, std::string>> columns) {
  QueryScript script;
  v1::QueryResponse header;
  for (const auto& [name, type] : columns) {
    v1::ColumnSchema* c = header.mutable_header()->add_columns();
    c->set_name(name);
    c->set_type(type);
  }
  header.mutable_header()->set_timezone("UTC");
  script.responses.push_back(header);
  v1::QueryResponse summary;
  summary.mutable_summary()->set_query_id("q");
  script.responses.push_back(summary);
  return script;
}

TEST(BenchRunTest, BlockModeTakesNamesAndTypesFromTheTable) {
  FakeServer server;
  server.service().AddQueryScript(HeaderScript({{"n", "Int32"}, {"s", "LowCardinality(String)"}}));
  CliRun run =
      Cli({"--addr", server.address(), "bench", "--table", "db.`t`", "--mode", "block", "--row",
           R"([-5,"x"])", "--streams", "1", "--duration", "50ms", "--rows-per-request", "2"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  std::vector<v1::QueryRequest> queries = server.service().queries();
  ASSERT_EQ(queries.size(), 1u);
  EXPECT_EQ(queries[0].sql(), "SELECT * FROM db.`t` LIMIT 0");
  std::vector<v1::InsertRequest> sent = server.service().stream_requests();
  ASSERT_FALSE(sent.empty());
  EXPECT_THAT(sent[0].columns(), ElementsAre("n", "s"));
  ASSERT_EQ(sent[0].block().columns_size(), 2);
  EXPECT_EQ(sent[0].block().columns(1).type(), "LowCardinality(String)");
  EXPECT_THAT(Texts(sent[0].block().columns(0), 2), ElementsAre("-5", "-5"));

  // With --columns, only those are asked for, quoted.
  FakeServer named;
  named.service().AddQueryScript(HeaderScript({{"a`b", "UInt8"}}));
  run = Cli({"--addr", named.address(), "bench", "--table", "t", "--mode", "block", "--row", "[1]",
             "--columns", "a`b", "--streams", "1", "--duration", "50ms"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  ASSERT_EQ(named.service().queries().size(), 1u);
  EXPECT_EQ(named.service().queries()[0].sql(), "SELECT `a\\`b` FROM t LIMIT 0");
}

TEST(BenchRunTest, BlockModeSaysHowToGiveTypesItCannotRead) {
  FakeServer server;
  QueryScript missing;
  missing.status = grpc::Status(grpc::StatusCode::NOT_FOUND, "table t does not exist");
  server.service().AddQueryScript(missing);
  CliRun run = Cli({"--addr", server.address(), "bench", "--table", "t", "--mode", "block",
                    "--duration", "50ms"});
  EXPECT_EQ(run.code, kExitFailure);
  EXPECT_THAT(run.err, HasSubstr("--mode block needs the column types"));
  EXPECT_THAT(run.err, HasSubstr("table t does not exist"));
  EXPECT_THAT(run.err, HasSubstr("--types"));
  EXPECT_TRUE(server.service().stream_requests().empty());

  // The table's columns do not match the row: a usage error, nothing sent.
  FakeServer narrow;
  narrow.service().AddQueryScript(HeaderScript({{"id", "UInt64"}}));
  run = Cli({"--addr", narrow.address(), "bench", "--table", "t", "--mode", "block", "--row",
             "[1,2]", "--duration", "50ms"});
  EXPECT_EQ(run.code, kExitUsage);
  EXPECT_THAT(run.err, HasSubstr("--row has 2 values, the table has 1 columns (id)"));
  EXPECT_TRUE(narrow.service().stream_requests().empty());

  // A value that does not fit the type given.
  run = Cli({"--addr", narrow.address(), "bench", "--table", "t", "--mode", "block", "--types",
             "UInt8,String", "--duration", "50ms", "--row", R"({"id":300,"msg":"x"})"});
  EXPECT_EQ(run.code, kExitUsage);
  EXPECT_THAT(run.err, HasSubstr("id"));
  EXPECT_TRUE(narrow.service().stream_requests().empty());
}

TEST(BenchRunTest, RateSendsNoMoreThanTheSchedule) {
  // 40/s for 500ms schedules 20 requests; closed loop would send thousands to the fake.
  FakeServer server;
  CliRun run = Cli({"--addr", server.address(), "bench", "--table", "t", "--streams", "2",
                    "--duration", "500ms", "--rate", "40", "--json"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  const size_t sent = server.service().stream_requests().size();
  EXPECT_LE(sent, 20u);
  EXPECT_GE(sent, 5u);
  std::map<std::string, Json> json = Members(run.out);
  EXPECT_EQ(Number(json["target_rate"]), 40);
  EXPECT_EQ(Number(json["scheduled"]), 20);
  EXPECT_EQ(Number(json["requests_sent"]), static_cast<double>(sent));
  EXPECT_EQ(Number(json["unsent"]), 20 - static_cast<double>(sent));
  EXPECT_LE(Number(json["behind_schedule"]), static_cast<double>(sent));
  EXPECT_EQ(Number(json["achieved_rate"]), static_cast<double>(sent) / 0.5);

  FakeServer unary;
  run = Cli({"--addr", unary.address(), "bench", "--table", "t", "--mode", "unary", "--streams",
             "3", "--duration", "500ms", "--rate", "20", "--rows-per-request", "1"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_LE(unary.service().insert_calls(), 10);
  EXPECT_GE(unary.service().insert_calls(), 2);
  EXPECT_THAT(run.out, HasSubstr("rate /s           target 20.0  achieved "));
  EXPECT_THAT(run.out, HasSubstr("not sent, of 10 scheduled"));
}

TEST(BenchRunTest, JsonHasEveryNumber) {
  FakeServer server;
  CliRun run = Cli({"--addr", server.address(), "bench", "--table", "t", "--streams", "2",
                    "--duration", "100ms", "--rows-per-request", "5", "--json"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  ASSERT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 1) << run.out;
  std::map<std::string, Json> json = Members(run.out);
  for (const char* key :
       {"streams", "rows_per_request", "max_in_flight", "duration_s", "requests_sent",
        "requests_ok", "requests_failed", "requests_per_s", "rows_per_s", "latency_p50_ms",
        "latency_p90_ms", "latency_p99_ms", "latency_max_ms", "client_cpu_us_per_request"}) {
    ASSERT_EQ(json.count(key), 1u) << key;
    EXPECT_EQ(json[key].kind, Json::Kind::kNumber) << key;
  }
  for (const char* key :
       {"target_rate", "achieved_rate", "scheduled", "behind_schedule", "unsent"}) {
    ASSERT_EQ(json.count(key), 1u) << key;
    EXPECT_EQ(json[key].kind, Json::Kind::kNull) << key;
  }
  EXPECT_EQ(json["mode"].text, "stream");
  EXPECT_EQ(json["table"].text, "t");
  EXPECT_EQ(Number(json["streams"]), 2);
  EXPECT_EQ(Number(json["rows_per_request"]), 5);
  EXPECT_EQ(Number(json["requests_ok"]),
            static_cast<double>(server.service().stream_requests().size()));
  EXPECT_EQ(Number(json["requests_failed"]), 0);
  EXPECT_GT(Number(json["requests_per_s"]), 0);
  EXPECT_LE(Number(json["latency_p50_ms"]), Number(json["latency_p90_ms"]));
  EXPECT_LE(Number(json["latency_p90_ms"]), Number(json["latency_p99_ms"]));
  EXPECT_LE(Number(json["latency_p99_ms"]), Number(json["latency_max_ms"]));
}

// --mode producer: one row per send, gathered by the SDK's Producer into requests of
// --rows-per-request rows; a "request" of the result is one send.
TEST(BenchRunTest, ProducerModeCoalescesSendsIntoRequests) {
  FakeServer server;
  CliRun run = Cli({"--addr", server.address(), "bench", "--table", "t", "--mode", "producer",
                    "--streams", "2", "--duration", "200ms", "--rows-per-request", "50",
                    "--max-in-flight", "200", "--json"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  std::map<std::string, Json> json = Members(run.out);
  EXPECT_EQ(json["mode"].text, "producer");
  EXPECT_EQ(Number(json["rows_per_request"]), 1);
  EXPECT_EQ(Number(json["batch_rows"]), 50);
  const std::vector<v1::InsertRequest> requests = server.service().stream_requests();
  size_t rows = 0;
  for (const v1::InsertRequest& r : requests) {
    EXPECT_LE(r.rows().rows_size(), 50);
    rows += static_cast<size_t>(r.rows().rows_size());
  }
  EXPECT_EQ(Number(json["requests_ok"]), static_cast<double>(rows));
  EXPECT_GT(rows, requests.size());  // coalesced
  EXPECT_EQ(Number(json["rows_per_s"]), Number(json["requests_per_s"]));
}

// --mode producer-block: a one-row columnar Block per send (Producer::SendBlock), gathered into
// request Blocks of up to --rows-per-request rows.
TEST(BenchRunTest, ProducerBlockModeGathersOneRowBlocksIntoRequestBlocks) {
  FakeServer server;
  CliRun run = Cli({"--addr", server.address(), "bench", "--table", "t", "--mode", "producer-block",
                    "--types", "UInt64,String", "--streams", "2", "--duration", "200ms",
                    "--rows-per-request", "50", "--max-in-flight", "200", "--json"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  std::map<std::string, Json> json = Members(run.out);
  EXPECT_EQ(json["mode"].text, "producer-block");
  EXPECT_EQ(Number(json["rows_per_request"]), 1);
  const std::vector<v1::InsertRequest> requests = server.service().stream_requests();
  uint64_t rows = 0;
  for (const v1::InsertRequest& r : requests) {
    EXPECT_EQ(r.rows().rows_size(), 0);
    EXPECT_LE(r.block().rows(), 50u);
    ASSERT_EQ(r.block().columns_size(), 2);
    EXPECT_EQ(r.block().columns(0).data().size(), r.block().rows() * 8);  // one UInt64 per row
    EXPECT_EQ(r.block().columns(1).offsets_size(), static_cast<int>(r.block().rows()));
    rows += r.block().rows();
  }
  EXPECT_EQ(Number(json["requests_ok"]), static_cast<double>(rows));
  EXPECT_GT(rows, requests.size());  // gathered
}

TEST(BenchRunTest, ReportsNoChgateCpuOfItsOwn) {
  // chgate's CPU is measured by the bench scripts beside the run (tests/bench/small_bench.py);
  // the CLI has no HTTP client and no exposition parser.
  FakeServer server;
  CliRun run =
      Cli({"--addr", server.address(), "bench", "--table", "t", "--duration", "50ms", "--json"});
  EXPECT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(Members(run.out).count("chgate_cpu_us_per_request"), 0u);
  run = Cli({"bench", "--table", "t", "--metrics-url", "http://127.0.0.1:9464/metrics"});
  EXPECT_EQ(run.code, kExitUsage);
  EXPECT_THAT(run.err, HasSubstr("unknown option --metrics-url"));
}

TEST(BenchUsageTest, RejectsBadCombinations) {
  struct Case {
    std::vector<std::string> args;
    const char* error;
  } cases[] = {
      {{"--mode", "batch"},
       "--mode: 'batch' is not stream, unary, block, producer or producer-block"},
      {{"--types", "UInt64,String"}, "--types applies to --mode block and producer-block only"},
      {{"--mode", "unary", "--types", "UInt64,String"},
       "--types applies to --mode block and producer-block only"},
      {{"--mode", "block", "--types", "UInt64"}, "--types names 1 types for 2 --row values"},
      {{"--mode", "block", "--types", "UInt64,(String"}, "unbalanced"},
      {{"--mode", "block", "--types", "UInt64", "--row", "[1]"}, "needs the column names"},
      {{"--rate", "0"}, "--rate: '0' is not a number"},
      {{"--rate", "-5"}, "--rate: '-5'"},
      {{"--rate", "fast"}, "--rate: 'fast'"},
      {{"--rate", "nan"}, "--rate: 'nan'"},
      {{"--rate", "1e12"}, "at most"},
      {{"--json=maybe"}, "takes no value"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"bench", "--table", "t"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    absl::StatusOr<Command> command = ParseCommandLine(args);
    ASSERT_FALSE(command.ok()) << ::testing::PrintToString(args);
    EXPECT_EQ(command.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(command.status().message(), HasSubstr(c.error)) << ::testing::PrintToString(args);
    CliRun run = Cli(args);
    EXPECT_EQ(run.code, kExitUsage);
    EXPECT_THAT(run.err, HasSubstr("chgate-cli: bench: "));
  }
}

TEST(BenchUsageTest, ParsesTheNewOptions) {
  Command c = ParseCommandLine({"bench", "--table", "t"}).value();
  EXPECT_EQ(c.bench.mode, BenchMode::kStream);
  EXPECT_EQ(c.bench.rate, 0);
  EXPECT_FALSE(c.bench.json);
  EXPECT_TRUE(c.bench.types.empty());
  c = ParseCommandLine({"bench", "--table", "t", "--mode", "block", "--types",
                        "UInt64,Map(String, UInt8)", "--row", R"({"a":1,"m":{}})", "--rate", "2.5",
                        "--json"})
          .value();
  EXPECT_EQ(c.bench.mode, BenchMode::kBlock);
  EXPECT_THAT(c.bench.types, ElementsAre("UInt64", "Map(String, UInt8)"));
  EXPECT_EQ(c.bench.rate, 2.5);
  EXPECT_TRUE(c.bench.json);
  c = ParseCommandLine({"bench", "--table", "t", "--mode", "unary", "--streams", "16"}).value();
  EXPECT_EQ(c.bench.mode, BenchMode::kUnary);
  EXPECT_EQ(c.bench.streams, 16u);
}

TEST(BenchUsageTest, HelpNamesEveryModeAndOption) {
  CliRun run = Cli({"bench", "--help"});
  EXPECT_EQ(run.code, kExitOk);
  for (const char* text : {"--mode", "unary", "block", "--rate", "--types", "--json",
                           "up to --max-in-flight outstanding", "behind schedule"}) {
    EXPECT_THAT(run.out, HasSubstr(text));
  }
}

}  // namespace
}  // namespace chgate::cli
