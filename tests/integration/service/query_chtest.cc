// The Query RPC end to end inside one process: a gRPC server on 127.0.0.1:0 with a QueryExecutor
// over a Pool to the local ClickHouse, and a generated stub as the client. Results are converted
// back from the proto layout into native columns (the Insert path's converter) and printed as
// TabSeparated, which must equal what clickhouse-client prints for the same rows.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "chgate/v1/chgate.grpc.pb.h"
#include "server/clickhouse/pool.h"
#include "server/clickhouse/protocol/error_codes.h"
#include "server/clickhouse/protocol/settings.h"
#include "server/clickhouse/text_form.h"
#include "server/ingest/ingestor.h"
#include "server/ingest/inserter.h"
#include "server/metrics/metrics.h"
#include "server/proto_convert/values.h"
#include "server/service/query_service.h"
#include "server/service/query_settings.h"
#include "server/service/server.h"
#include "server/service/status.h"
#include "server/sql/query_policy.h"
#include "tests/integration/clickhouse/live.h"
#include "tests/integration/clickhouse/type_cases.h"
#include "text/identifier.h"

namespace chgate::service {
namespace {

using clickhouse::CompressionMethod;
using clickhouse::testing::ClickHouseClient;

struct Outcome {
  grpc::Status status;
  std::vector<v1::QueryResponse> responses;
  v1::Status detail;  // from the chgate-status-bin trailer, when present

  const v1::QueryHeader* header() const {
    for (const auto& r : responses) {
      if (r.has_header()) return &r.header();
    }
    return nullptr;
  }
  const v1::QuerySummary* summary() const {
    for (const auto& r : responses) {
      if (r.has_summary()) return &r.summary();
    }
    return nullptr;
  }
  size_t Count(v1::QueryResponse::KindCase kind) const {
    size_t n = 0;
    for (const auto& r : responses) n += r.kind_case() == kind ? 1 : 0;
    return n;
  }
  uint64_t rows() const {
    uint64_t n = 0;
    for (const auto& r : responses) n += r.has_block() ? r.block().rows() : 0;
    return n;
  }
};

// Prints `block` (a response block under `header`) as TabSeparated rows via native columns.
std::string BlockTsv(const v1::QueryHeader& header, const v1::Block& block) {
  std::vector<std::string> names;
  for (const auto& c : header.columns()) names.push_back(c.name());
  clickhouse::Block native;
  absl::Status st = proto_convert::ConvertBlock(block, names, &native);
  EXPECT_TRUE(st.ok()) << st;
  std::string out;
  for (size_t row = 0; row < native.rows(); ++row) {
    for (size_t c = 0; c < native.column_count(); ++c) {
      if (c > 0) out.push_back('\t');
      AppendTsvValue(*native.column(c).column, row, false, &out);
    }
    out.push_back('\n');
  }
  return out;
}

std::string ResultTsv(const Outcome& o) {
  std::string out;
  if (o.header() == nullptr) return out;
  for (const auto& r : o.responses) {
    if (r.has_block()) out += BlockTsv(*o.header(), r.block());
  }
  return out;
}

// Waits until ClickHouse no longer lists `query_id` among its running queries.
bool QueryGone(const std::string& query_id, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    const std::string n = ClickHouseClient(absl::StrCat(
        "SELECT count() FROM system.processes WHERE query_id = '", query_id, "' FORMAT TSV"));
    if (n == "0\n") return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

class QueryServiceTest : public ::testing::Test {
 protected:
  void Start(QueryServiceOptions options = {},
             CompressionMethod compression = CompressionMethod::kLz4, size_t pool_max = 2,
             const std::string& user = "") {
    auto probe = clickhouse::testing::ConnectOrSkip();
    if (probe == nullptr) return;
    probe_ = std::move(probe);
    clickhouse::testing::Exec(*probe_, "CREATE DATABASE IF NOT EXISTS chgate_chtest");
    const clickhouse::testing::LiveEndpoint ep = clickhouse::testing::LiveServer();
    clickhouse::PoolOptions pool_options{
        .endpoints = {{.host = ep.host, .port = ep.port}},
        .connection = clickhouse::testing::LiveOptions(compression),
        .max_connections = pool_max,
        .min_connections = 0,
    };
    pool_options.connection.counters = &counters_;
    if (!user.empty()) pool_options.connection.user = user;
    pool_ = std::make_unique<clickhouse::Pool>(pool_options);
    pool_->Start();
    inserter_ = std::make_unique<ingest::ClickHouseInserter>(pool_.get());
    ingestor_ = std::make_unique<ingest::Ingestor>(ingest::IngestOptions{}, inserter_.get(),
                                                   ingest::RealClock());
    executor_ = std::make_unique<QueryExecutor>(pool_.get(), options, metrics_.query_observer());
    auto server = StartServer(
        {.api_address = "127.0.0.1:0", .health_address = "", .queries = executor_.get()},
        ingestor_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->api_port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Ingest::NewStub(channel_);
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::Now() + absl::Seconds(5));
    server_.reset();
    executor_.reset();
    ingestor_.reset();
    if (pool_ != nullptr) pool_->Shutdown();
  }

  Outcome Run(const v1::QueryRequest& request, absl::Duration timeout = absl::Seconds(60)) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    Outcome out;
    auto reader = stub_->Query(&context, request);
    v1::QueryResponse response;
    while (reader->Read(&response)) out.responses.push_back(response);
    out.status = reader->Finish();
    const auto& trailers = context.GetServerTrailingMetadata();
    if (auto it = trailers.find(kStatusTrailerKey); it != trailers.end()) {
      EXPECT_TRUE(out.detail.ParseFromString(std::string(it->second.data(), it->second.size())));
    }
    return out;
  }

  Outcome Run(const std::string& sql, absl::Duration timeout = absl::Seconds(60)) {
    v1::QueryRequest request;
    request.set_sql(sql);
    return Run(request, timeout);
  }

  double QueriesWithResult(const std::string& result) {
    for (const auto& family : metrics_.collectable()->Collect()) {
      // (Some prometheus-cpp versions keep the _total suffix out of the family name.)
      if (family.name != "chgate_queries_total" && family.name != "chgate_queries") continue;
      for (const auto& m : family.metric) {
        for (const auto& l : m.label) {
          if (l.name == "result" && l.value == result) return m.counter.value;
        }
      }
    }
    return 0;
  }

  std::unique_ptr<clickhouse::Connection> probe_;
  clickhouse::IoCounters counters_;
  metrics::Metrics metrics_;
  std::unique_ptr<clickhouse::Pool> pool_;
  std::unique_ptr<ingest::ClickHouseInserter> inserter_;
  std::unique_ptr<ingest::Ingestor> ingestor_;
  std::unique_ptr<QueryExecutor> executor_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Ingest::Stub> stub_;
};

#define START_OR_SKIP(...)                     \
  ASSERT_NO_FATAL_FAILURE(Start(__VA_ARGS__)); \
  if (stub_ == nullptr) return

// ---- every type, against clickhouse-client ----

class QueryTypesTest : public QueryServiceTest,
                       public ::testing::WithParamInterface<clickhouse::testing::TypeCase> {};

TEST_P(QueryTypesTest, ReadsWhatClickHouseClientPrints) {
  START_OR_SKIP();
  const clickhouse::testing::TypeCase& tc = GetParam();
  const std::string table = absl::StrCat("chgate_chtest.query_types_", tc.name);
  clickhouse::testing::Exec(*probe_, absl::StrCat("DROP TABLE IF EXISTS ", table));
  clickhouse::testing::Exec(*probe_, absl::StrCat("CREATE TABLE ", table, " (id UInt32, v ",
                                                  tc.type, ") ENGINE = Memory"));
  std::string tsv;
  for (size_t i = 0; i < tc.values.size(); ++i) absl::StrAppend(&tsv, i, "\t", tc.values[i], "\n");
  ClickHouseClient(absl::StrCat("INSERT INTO ", table, " FORMAT TabSeparated"), tsv);
  const std::string printed =
      ClickHouseClient(absl::StrCat("SELECT * FROM ", table, " ORDER BY id FORMAT TabSeparated"));

  // A tiny response bound makes chgate send one row per message (the 1 MiB string goes whole).
  v1::QueryRequest request;
  request.set_sql(absl::StrCat("SELECT * FROM ", table, " ORDER BY id"));
  request.set_max_response_bytes(8);
  Outcome o = Run(request);
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  ASSERT_NE(o.header(), nullptr);
  ASSERT_EQ(o.header()->columns_size(), 2);
  EXPECT_EQ(o.header()->columns(1).type(), tc.type);
  EXPECT_EQ(ResultTsv(o), printed);
  EXPECT_EQ(o.rows(), tc.values.size());
  EXPECT_EQ(o.Count(v1::QueryResponse::kBlock), tc.values.size());
}

INSTANTIATE_TEST_SUITE_P(Types, QueryTypesTest,
                         ::testing::ValuesIn(clickhouse::testing::AllTypeCases()),
                         [](const auto& param_info) { return param_info.param.name; });

TEST_F(QueryServiceTest, IntegersAndExpressionsMatchClickHouseClient) {
  START_OR_SKIP();
  const std::string sql =
      "SELECT toInt8(-128), toUInt8(255), toInt16(-32768), toUInt16(65535), toInt32(-2147483648), "
      "toUInt32(4294967295), toInt64(-9223372036854775808), toUInt64(18446744073709551615), "
      "toDate('2105-12-31'), toDateTime('2105-12-31 23:59:59', 'UTC'), NULL, [NULL], "
      "toIntervalSecond(5), toFixedString('ab', 3), IPv4StringToNum('1.2.3.4'), "
      "toUUID('61f0c404-5cb3-11e7-907b-a6006ad3dba0'), [[1, 2], []], ('a', 1), "
      "toLowCardinality('lc'), toDecimal128('-1.5', 20), -0.5, toFloat32(1) / 3";
  Outcome o = Run(sql);
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(ResultTsv(o), ClickHouseClient(sql + " FORMAT TabSeparated"));
}

// ---- sizing of response messages ----

TEST_F(QueryServiceTest, SplitsLargeBlocksByBytes) {
  START_OR_SKIP();
  v1::QueryRequest request;
  request.set_sql("SELECT number FROM system.numbers LIMIT 1000000");
  request.set_max_response_bytes(64 << 10);
  Outcome o = Run(request);
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(o.rows(), 1000000u);
  for (const auto& r : o.responses) {
    if (r.has_block()) {
      EXPECT_LE(r.ByteSizeLong(), (64u << 10) + 64);
    }
  }
  // 8 MB of values in messages of at most 64 KiB.
  EXPECT_GE(o.Count(v1::QueryResponse::kBlock), 8000000u / (64 << 10));
  ASSERT_NE(o.summary(), nullptr);
  EXPECT_EQ(o.summary()->rows(), 1000000u);
  EXPECT_EQ(o.summary()->blocks(), o.Count(v1::QueryResponse::kBlock));
}

TEST_F(QueryServiceTest, MergesSmallBlocks) {
  START_OR_SKIP();
  v1::QueryRequest request;
  request.set_sql("SELECT number FROM system.numbers LIMIT 200000");
  (*request.mutable_settings())["max_block_size"] = "100";
  Outcome o = Run(request);
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(o.rows(), 200000u);
  ASSERT_NE(o.summary(), nullptr);
  ASSERT_TRUE(o.summary()->has_profile_info());
  // ClickHouse sent 2,000 blocks of 100 rows; chgate sends fewer, larger messages.
  EXPECT_GE(o.summary()->profile_info().blocks(), 2000u);
  EXPECT_LT(o.summary()->blocks(), o.summary()->profile_info().blocks() / 4);
}

// ---- errors ----

TEST_F(QueryServiceTest, ExceptionAfterBlocksEndsTheStreamWithItsCode) {
  START_OR_SKIP();
  v1::QueryRequest request;
  request.set_sql("SELECT throwIf(number = 150000) FROM system.numbers LIMIT 300000");
  (*request.mutable_settings())["max_block_size"] = "1000";
  request.set_max_response_bytes(4096);
  Outcome o = Run(request);
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::UNKNOWN);
  // FUNCTION_THROW_IF_VALUE_IS_NON_ZERO: not in chgate's table of codes, so it maps to UNKNOWN.
  constexpr int32_t kThrowIfCode = 395;
  EXPECT_TRUE(
      absl::StrContains(o.status.error_message(),
                        absl::StrCat("ClickHouse error ", kThrowIfCode, " (DB::Exception)")))
      << o.status.error_message();
  EXPECT_NE(o.header(), nullptr);
  EXPECT_GT(o.rows(), 0u);
  EXPECT_EQ(o.summary(), nullptr);
  // The structured detail is there for programs.
  EXPECT_EQ(o.detail.clickhouse_code(), kThrowIfCode);
}

TEST_F(QueryServiceTest, MapsErrorsToCodes) {
  START_OR_SKIP();
  EXPECT_EQ(Run("SELECT * FROM chgate_chtest.no_such_table").status.error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Run("SELEC 1").status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Run("  ").status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::QueryRequest reserved;
  reserved.set_sql("SELECT 1");
  (*reserved.mutable_settings())["readonly"] = "0";
  Outcome o = Run(reserved);
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(o.status.error_message(), "readonly"));
  // 18.16 (revision 54412) cannot take query parameters over the native protocol.
  v1::QueryRequest params;
  params.set_sql("SELECT {x:UInt8}");
  (*params.mutable_parameters())["x"] = "1";
  o = Run(params);
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_TRUE(absl::StrContains(o.status.error_message(), "54459")) << o.status.error_message();
  // The connection stays usable after all of them.
  o = Run("SELECT 1");
  EXPECT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_GE(QueriesWithResult("invalid"), 3);
}

TEST_F(QueryServiceTest, SettingsTheStatementAssignsPassTheSameAllowlist) {
  START_OR_SKIP();
  // A SETTINGS clause or a SET statement is held to what QueryRequest.settings may carry.
  for (const char* sql :
       {"SELECT name, value FROM system.settings WHERE name = 'log_queries' "
        "SETTINGS log_queries = 1",
        "SELECT 1 SETTINGS max_threads = 1, send_logs_level = 'trace'",
        "SELECT * FROM (SELECT 1 SETTINGS allow_ddl = 0)", "SET replace_running_query = 1"}) {
    Outcome o = Run(sql);
    EXPECT_EQ(o.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << sql;
    EXPECT_TRUE(absl::StrContains(o.status.error_message(), "assigned in the statement"))
        << sql << ": " << o.status.error_message();
  }
  // max_execution_time only where chgate keeps it within the deadline.
  Outcome o = Run("SELECT 1 SETTINGS max_execution_time = 0");
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(o.status.error_message(), "QueryRequest.settings"));
  // Allowed settings run, and the server applies them.
  o = Run("SELECT value FROM system.settings WHERE name = 'max_threads' SETTINGS max_threads = 3");
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(ResultTsv(o), "3\n");
}

// ---- read-only mode ----

TEST_F(QueryServiceTest, RefusesWritesByDefault) {
  START_OR_SKIP();
  Outcome create = Run("CREATE TABLE chgate_chtest.query_ro (x UInt8) ENGINE = Memory");
  EXPECT_EQ(create.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(absl::StrContains(create.status.error_message(), "--query-allow-writes"))
      << create.status.error_message();
  clickhouse::testing::Exec(*probe_, "DROP TABLE IF EXISTS chgate_chtest.query_ro_target");
  clickhouse::testing::Exec(
      *probe_, "CREATE TABLE chgate_chtest.query_ro_target (x UInt64) ENGINE = Memory");
  EXPECT_EQ(Run("INSERT INTO chgate_chtest.query_ro_target SELECT 1").status.error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Run("DROP TABLE chgate_chtest.query_ro_target").status.error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(ClickHouseClient("SELECT count() FROM chgate_chtest.query_ro_target FORMAT TSV"),
            "0\n");
  // Settings may still change.
  v1::QueryRequest request;
  request.set_sql("SELECT getSetting('max_threads')");
  (*request.mutable_settings())["max_threads"] = "3";
  Outcome o = Run(request);
  if (o.status.error_code() != grpc::StatusCode::INVALID_ARGUMENT) {  // getSetting is newer
    ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  }
  request.set_sql("SELECT value FROM system.settings WHERE name = 'max_threads'");
  o = Run(request);
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(ResultTsv(o), "3\n");
}

TEST_F(QueryServiceTest, WritesWhenAllowed) {
  START_OR_SKIP({.allow_writes = true});
  clickhouse::testing::Exec(*probe_, "DROP TABLE IF EXISTS chgate_chtest.query_rw");
  ASSERT_TRUE(Run("CREATE TABLE chgate_chtest.query_rw (x UInt64) ENGINE = Memory").status.ok());
  Outcome o = Run("INSERT INTO chgate_chtest.query_rw SELECT number FROM system.numbers LIMIT 5");
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(ClickHouseClient("SELECT sum(x) FROM chgate_chtest.query_rw FORMAT TSV"), "10\n");
  o = Run("INSERT INTO chgate_chtest.query_rw VALUES (1)");
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(o.status.error_message(), "InsertStream"));
  // Inline data that happens to contain SELECT is still inline data.
  o = Run("INSERT INTO chgate_chtest.query_rw FORMAT JSONEachRow {\"x\": 1} -- select");
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(QueryServiceTest, SessionChangesDoNotLeakToTheNextCaller) {
  START_OR_SKIP({}, CompressionMethod::kLz4, /*pool_max=*/1);
  // A statement without a result still gets a header (no columns) and a summary.
  Outcome o = Run("USE system");
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  ASSERT_NE(o.header(), nullptr);
  EXPECT_EQ(o.header()->columns_size(), 0);
  EXPECT_NE(o.summary(), nullptr);
  // A value no server has by default (max_threads, tried first, defaults to 1 on a server that
  // counts one physical core, so its change could not be told apart).
  o = Run("SET max_block_size = 4321");
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  // The one pooled connection that ran them was closed, not handed to the next caller.
  o = Run("SELECT currentDatabase(), value FROM system.settings WHERE name = 'max_block_size'");
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_FALSE(absl::StartsWith(ResultTsv(o), "system\t")) << ResultTsv(o);
  EXPECT_FALSE(absl::EndsWith(ResultTsv(o), "\t4321\n")) << ResultTsv(o);
}

TEST_F(QueryServiceTest, ProgressStreamsBeforeTheFirstRow) {
  START_OR_SKIP();
  v1::QueryRequest request;
  // One row, produced only after a long scan; progress must not wait for it.
  request.set_sql("SELECT count() FROM (SELECT number FROM system.numbers LIMIT 400000000)");
  request.set_send_progress(true);
  Outcome o = Run(request);
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  ASSERT_TRUE(o.responses.front().has_header());
  size_t first_progress = o.responses.size(), first_block = o.responses.size();
  for (size_t i = 0; i < o.responses.size(); ++i) {
    if (o.responses[i].has_progress() && first_progress == o.responses.size()) first_progress = i;
    if (o.responses[i].has_block() && first_block == o.responses.size()) first_block = i;
  }
  EXPECT_LT(first_progress, first_block);
  EXPECT_EQ(ResultTsv(o), "400000000\n");
}

// ---- cancel, deadline, limits ----

TEST_F(QueryServiceTest, CancelMidStreamKeepsThePooledConnection) {
  START_OR_SKIP({}, CompressionMethod::kLz4, /*pool_max=*/1);
  v1::QueryRequest request;
  request.set_sql("SELECT number FROM system.numbers");
  request.set_query_id("chtest-cancel");
  {
    grpc::ClientContext context;
    auto reader = stub_->Query(&context, request);
    v1::QueryResponse response;
    int blocks = 0;
    while (blocks < 5 && reader->Read(&response)) blocks += response.has_block() ? 1 : 0;
    EXPECT_EQ(blocks, 5);
    context.TryCancel();
    while (reader->Read(&response)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_TRUE(QueryGone("chtest-cancel"));
  // With one pooled connection, the next query runs on the drained one.
  Outcome o = Run("SELECT 42");
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(ResultTsv(o), "42\n");
  const auto stats = pool_->Stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].connects, 1u);
  EXPECT_EQ(stats[0].discarded_broken, 0u);
  absl::SleepFor(absl::Milliseconds(50));  // the cancelled call's metrics land after its status
  EXPECT_GE(QueriesWithResult("cancelled"), 1);
}

TEST_F(QueryServiceTest, DeadlineCancelsTheQueryInClickHouse) {
  START_OR_SKIP();
  v1::QueryRequest request;
  // Reads for a long time before producing its one row.
  request.set_sql("SELECT count() FROM system.numbers");
  request.set_query_id("chtest-deadline");
  const absl::Time start = absl::Now();
  Outcome o = Run(request, absl::Milliseconds(700));
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(QueryGone("chtest-deadline"));
  EXPECT_TRUE(Run("SELECT 1").status.ok());
}

TEST_F(QueryServiceTest, CallsBeyondTheLimitGetResourceExhausted) {
  START_OR_SKIP({.max_concurrent_queries = 1});
  grpc::ClientContext busy_context;
  v1::QueryRequest busy;
  busy.set_sql("SELECT number FROM system.numbers");
  auto reader = stub_->Query(&busy_context, busy);
  v1::QueryResponse response;
  ASSERT_TRUE(reader->Read(&response));  // running, holding the only slot
  const absl::Time start = absl::Now();
  Outcome o = Run("SELECT 1", absl::Seconds(1));
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << o.status.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  busy_context.TryCancel();
  while (reader->Read(&response)) {
  }
  (void)reader->Finish();
  EXPECT_TRUE(Run("SELECT 1").status.ok());
  EXPECT_GE(QueriesWithResult("resource_exhausted"), 1) << o.status.error_message();
}

TEST_F(QueryServiceTest, SlowReaderStopsChgateReadingClickHouse) {
  START_OR_SKIP({.max_buffered_bytes = 1 << 20});
  grpc::ClientContext context;
  v1::QueryRequest request;
  request.set_sql("SELECT number FROM system.numbers");
  request.set_max_response_bytes(256 << 10);
  auto reader = stub_->Query(&context, request);
  v1::QueryResponse response;
  ASSERT_TRUE(reader->Read(&response));
  // The caller stops reading: once gRPC's windows and chgate's buffer are full, chgate stops
  // reading the socket, so the received byte count stops growing.
  absl::SleepFor(absl::Seconds(1));
  const uint64_t first = counters_.received.load();
  absl::SleepFor(absl::Milliseconds(700));
  const uint64_t second = counters_.received.load();
  EXPECT_EQ(first, second);
  // Bounded: gRPC's stream windows, chgate's buffer, the socket buffers, not an unbounded result.
  EXPECT_LT(first, uint64_t{64} << 20);
  context.TryCancel();
  while (reader->Read(&response)) {
  }
  (void)reader->Finish();
}

// ---- what else a stream carries ----

TEST_F(QueryServiceTest, TotalsExtremesProgressAndSummary) {
  START_OR_SKIP();
  v1::QueryRequest request;
  request.set_sql(
      "SELECT number % 3 AS k, count() AS c FROM (SELECT number FROM system.numbers LIMIT "
      "3000000) GROUP BY k WITH TOTALS ORDER BY k");
  (*request.mutable_settings())["extremes"] = "1";
  request.set_send_progress(true);
  request.set_query_id("chtest-totals");
  Outcome o = Run(request);
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(o.responses.front().kind_case(), v1::QueryResponse::kHeader);
  EXPECT_EQ(o.responses.back().kind_case(), v1::QueryResponse::kSummary);
  EXPECT_EQ(o.Count(v1::QueryResponse::kTotals), 1u);
  EXPECT_EQ(o.Count(v1::QueryResponse::kExtremes), 1u);
  EXPECT_GE(o.Count(v1::QueryResponse::kProgress), 1u);
  EXPECT_EQ(ResultTsv(o), "0\t1000000\n1\t1000000\n2\t1000000\n");
  uint64_t progress_rows = 0;
  for (const auto& r : o.responses) {
    if (r.has_totals()) {
      EXPECT_EQ(BlockTsv(*o.header(), r.totals()), "0\t3000000\n");
    }
    if (r.has_extremes()) {
      EXPECT_EQ(BlockTsv(*o.header(), r.extremes()), "0\t1000000\n2\t1000000\n");
    }
    if (r.has_progress()) progress_rows += r.progress().read_rows();
  }
  const v1::QuerySummary* s = o.summary();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->query_id(), "chtest-totals");
  EXPECT_EQ(o.header()->query_id(), "chtest-totals");
  EXPECT_EQ(s->progress().read_rows(), progress_rows);
  EXPECT_GE(s->progress().read_rows(), 3000000u);
  EXPECT_EQ(s->rows(), 3u);
  EXPECT_GT(s->received_bytes(), 0u);
  EXPECT_GT(s->elapsed().seconds() * 1000000000 + s->elapsed().nanos(), 0);
}

class QueryBytesTest : public QueryServiceTest,
                       public ::testing::WithParamInterface<CompressionMethod> {};

TEST_P(QueryBytesTest, SummaryCountsReceivedAndDecodedBytes) {
  START_OR_SKIP({}, GetParam());
  const uint64_t received_before = counters_.received.load();
  const uint64_t decoded_before = counters_.decoded.load();
  Outcome o = Run("SELECT toUInt64(number % 10) FROM system.numbers LIMIT 2000000");
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  const v1::QuerySummary* s = o.summary();
  ASSERT_NE(s, nullptr);
  // 16 MB of UInt64 values plus packet headers.
  EXPECT_GE(s->decoded_bytes(), 16000000u);
  EXPECT_LT(s->decoded_bytes(), 16500000u);
  if (GetParam() == CompressionMethod::kNone) {
    EXPECT_EQ(s->received_bytes(), s->decoded_bytes());
  } else {
    EXPECT_LT(s->received_bytes(), s->decoded_bytes() / 2);  // repeating values compress well
  }
  // The process-wide counters (the metrics) moved by at least as much.
  EXPECT_GE(counters_.received.load() - received_before, s->received_bytes());
  EXPECT_GE(counters_.decoded.load() - decoded_before, s->decoded_bytes());
}

INSTANTIATE_TEST_SUITE_P(Compression, QueryBytesTest,
                         ::testing::Values(CompressionMethod::kNone, CompressionMethod::kLz4,
                                           CompressionMethod::kZstd),
                         clickhouse::testing::CompressionParamName());

TEST_F(QueryServiceTest, DatabaseFieldSelectsTheDefaultDatabase) {
  START_OR_SKIP({}, CompressionMethod::kLz4, /*pool_max=*/1);
  v1::QueryRequest request;
  request.set_sql("SELECT currentDatabase()");
  request.set_database("system");
  Outcome o = Run(request);
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(ResultTsv(o), "system\n");
  // The switched connection is not reused for the next caller.
  o = Run("SELECT currentDatabase()");
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_NE(ResultTsv(o), "system\n");
}

// ---- the holes a hostile caller finds (issue 10, section 3) ----

class HostileCallerTest : public QueryServiceTest {
 protected:
  grpc::Status InsertRow(const std::string& table, const std::vector<std::string>& columns,
                         uint64_t value, v1::Status* detail = nullptr) {
    v1::InsertRequest request;
    request.set_table(table);
    for (const std::string& c : columns) request.add_columns(c);
    request.mutable_rows()->add_rows()->add_values()->set_uint64_value(value);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    v1::InsertResponse response;
    grpc::Status status = stub_->Insert(&context, request, &response);
    const auto& trailers = context.GetServerTrailingMetadata();
    if (auto it = trailers.find(kStatusTrailerKey); detail != nullptr && it != trailers.end()) {
      EXPECT_TRUE(detail->ParseFromString(std::string(it->second.data(), it->second.size())));
    }
    return status;
  }
};

TEST_F(HostileCallerTest, EveryQuotedFormOfANameReachesThatTable) {
  START_OR_SKIP();
  // Tables whose names need quoting, and the tables a naive reading would hit instead.
  const std::vector<std::string> created = {
      "`a``tick`",       "`atick`",     "`q\"uote`", "`quote`",
      "`back\\\\slash`", "`backslash`", "`dot.ted`", "`ted`"};
  for (const std::string& t : created) {
    clickhouse::testing::Exec(*probe_, absl::StrCat("DROP TABLE IF EXISTS chgate_chtest.", t));
    clickhouse::testing::Exec(
        *probe_, absl::StrCat("CREATE TABLE chgate_chtest.", t, " (x UInt64) ENGINE = Memory"));
  }
  struct Form {
    std::string table;   // as a caller writes it
    std::string target;  // the table (as created above) it must reach
  };
  const std::vector<Form> forms = {
      {"chgate_chtest.`a``tick`", "`a``tick`"},
      {"chgate_chtest.`a\\`tick`", "`a``tick`"},
      {"chgate_chtest.\"a`tick\"", "`a``tick`"},
      {"`chgate_chtest`.\"a`tick\"", "`a``tick`"},
      {"\"chgate_chtest\" . `a``tick`", "`a``tick`"},
      {"chgate_chtest.\"q\"\"uote\"", "`q\"uote`"},
      {"chgate_chtest.\"q\\\"uote\"", "`q\"uote`"},
      {"chgate_chtest.`q\"uote`", "`q\"uote`"},
      {"chgate_chtest.`back\\\\slash`", "`back\\\\slash`"},
      {"chgate_chtest.`back\\x5cslash`", "`back\\\\slash`"},
      {"chgate_chtest.`dot.ted`", "`dot.ted`"},
      {"chgate_chtest.`\\x61tick`", "`atick`"},
  };
  std::map<std::string, int> expected;
  for (size_t i = 0; i < forms.size(); ++i) {
    grpc::Status status = InsertRow(forms[i].table, {}, i);
    EXPECT_TRUE(status.ok()) << forms[i].table << ": " << status.error_message();
    ++expected[forms[i].target];
  }
  for (const std::string& t : created) {
    EXPECT_EQ(
        ClickHouseClient(absl::StrCat("SELECT count() FROM chgate_chtest.", t, " FORMAT TSV")),
        absl::StrCat(expected[t], "\n"))
        << t;
  }
  // Forms ClickHouse would not read as one table name are refused, and nothing is written.
  for (const char* bad : {"chgate_chtest.`a`tick`", "chgate_chtest.`a\\qtick`",
                          "chgate_chtest.a`tick", "chgate_chtest.`a``tick`.x"}) {
    EXPECT_EQ(InsertRow(bad, {}, 99).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
  }
  EXPECT_EQ(ClickHouseClient("SELECT count() FROM chgate_chtest.`atick` FORMAT TSV"),
            absl::StrCat(expected["`atick`"], "\n"));
}

TEST_F(HostileCallerTest, AnInsertRightAfterAlterModifyColumnIsAccepted) {
  START_OR_SKIP();
  clickhouse::testing::Exec(*probe_, "DROP TABLE IF EXISTS chgate_chtest.altered");
  clickhouse::testing::Exec(*probe_,
                            "CREATE TABLE chgate_chtest.altered (k UInt8, v UInt16) "
                            "ENGINE = MergeTree ORDER BY k");
  ASSERT_TRUE(InsertRow("chgate_chtest.altered", {"v"}, 1).ok());  // caches v UInt16
  clickhouse::testing::Exec(*probe_, "ALTER TABLE chgate_chtest.altered MODIFY COLUMN v UInt32");
  grpc::Status status = InsertRow("chgate_chtest.altered", {"v"}, 70000);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(ClickHouseClient("SELECT max(v) FROM chgate_chtest.altered FORMAT TSV"), "70000\n");
  // A value that is wrong for the new type is still refused.
  EXPECT_EQ(InsertRow("chgate_chtest.altered", {"v"}, 1ULL << 40).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(HostileCallerTest, AMaterializedColumnIsInvalidArgument) {
  START_OR_SKIP();
  clickhouse::testing::Exec(*probe_, "DROP TABLE IF EXISTS chgate_chtest.materialized");
  clickhouse::testing::Exec(*probe_,
                            "CREATE TABLE chgate_chtest.materialized "
                            "(a UInt64, m UInt64 MATERIALIZED a * 2) ENGINE = Memory");
  v1::Status detail;
  grpc::Status status = InsertRow("chgate_chtest.materialized", {"m"}, 1, &detail);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_EQ(detail.clickhouse_code(), clickhouse::error_code::kIllegalColumn);
}

TEST_F(HostileCallerTest, ASecondQueryWithARunningQueryIdIsAlreadyExists) {
  START_OR_SKIP();
  const std::string id = absl::StrCat("chtest-dup-", absl::ToUnixNanos(absl::Now()));
  grpc::ClientContext first_context;
  first_context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  v1::QueryRequest first;
  first.set_sql("SELECT count() FROM system.numbers");
  first.set_query_id(id);
  auto reader = stub_->Query(&first_context, first);
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (ClickHouseClient(absl::StrCat("SELECT count() FROM system.processes WHERE query_id = '",
                                       id, "' FORMAT TSV")) != "1\n") {
    ASSERT_LT(absl::Now(), until) << "the first query never started";
    absl::SleepFor(absl::Milliseconds(50));
  }
  v1::QueryRequest second;
  second.set_sql("SELECT 1");
  second.set_query_id(id);
  Outcome o = Run(second);
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::ALREADY_EXISTS) << o.status.error_message();
  EXPECT_EQ(o.detail.clickhouse_code(), clickhouse::error_code::kQueryWithSameIdIsAlreadyRunning);
  first_context.TryCancel();
  v1::QueryResponse ignored;
  while (reader->Read(&ignored)) {
  }
  (void)reader->Finish();
  EXPECT_TRUE(QueryGone(id));
}

TEST_F(HostileCallerTest, ReadOnlyRefusesKillAndTableFunctionsThatLeaveTheServer) {
  START_OR_SKIP();
  for (const std::string& sql :
       {std::string("KILL QUERY WHERE query_id = 'nobody' SYNC"),
        std::string("kill query where 1 = 0"),
        absl::StrCat("SELECT * FROM url('http://", clickhouse::testing::LiveServer().host,
                     ":1/', TSV, 'x String')"),
        std::string("SELECT * FROM remote('127.0.0.1', system.one)"),
        std::string("SELECT * FROM `cluster`('test_shard_localhost', system.one)"),
        std::string("SELECT * FROM /* /* */ url('http://127.0.0.1:1/') -- */ system.one")}) {
    Outcome o = Run(sql);
    EXPECT_EQ(o.status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << sql << ": " << o.status.error_message();
  }
  // Table functions the connected server has (its system.table_functions) and no list of chgate
  // names, neither the always-refused ones nor the default ones: denied by default, naming the
  // option, before the server sees them.
  for (const char* sql : {"SELECT * FROM shardByHash('test_shard_localhost', 'k', system.one)",
                          "SELECT * FROM catBoostPool('/nonexistent.cd', '/nonexistent.tsv')"}) {
    Outcome denied = Run(sql);
    EXPECT_EQ(denied.status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << sql << ": " << denied.status.error_message();
    EXPECT_TRUE(absl::StrContains(denied.status.error_message(), "--query-allow-table-functions"))
        << denied.status.error_message();
  }
  // Names inside strings and comments are not calls.
  Outcome o = Run("SELECT 'url(1)', 'KILL QUERY' -- remote(\n");
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(ResultTsv(o), "url(1)\tKILL QUERY\n");
}

TEST_F(HostileCallerTest, AllowedTableFunctionsRun) {
  START_OR_SKIP({.allowed_table_functions = {"remote"}});
  Outcome o = Run("SELECT dummy FROM remote('127.0.0.1', system.one)");
  // The remote() call itself may fail (the local server refuses the default user over the
  // network, say), but it is ClickHouse answering, not chgate's refusal.
  if (!o.status.ok()) {
    EXPECT_NE(o.status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << o.status.error_message();
    EXPECT_FALSE(absl::StrContains(o.status.error_message(), "--query-allow-table-functions"));
  }
  EXPECT_EQ(Run("SELECT * FROM url('http://127.0.0.1:1/', TSV, 'x String')").status.error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(HostileCallerTest, InlineInsertDataIsJudgedByTokens) {
  START_OR_SKIP({.allow_writes = true});
  clickhouse::testing::Exec(*probe_, "DROP TABLE IF EXISTS chgate_chtest.withdrawals");
  clickhouse::testing::Exec(*probe_, "DROP TABLE IF EXISTS chgate_chtest.t_values_copy");
  clickhouse::testing::Exec(*probe_,
                            "CREATE TABLE chgate_chtest.withdrawals (x UInt64) ENGINE = Memory");
  clickhouse::testing::Exec(*probe_,
                            "CREATE TABLE chgate_chtest.t_values_copy (x UInt64) ENGINE = Memory");
  EXPECT_EQ(Run("INSERT INTO chgate_chtest.withdrawals VALUES (1)").status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  Outcome o =
      Run("INSERT INTO chgate_chtest.t_values_copy SELECT number FROM system.numbers "
          "LIMIT 3");
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(ClickHouseClient("SELECT count() FROM chgate_chtest.t_values_copy FORMAT TSV"), "3\n");
  EXPECT_EQ(ClickHouseClient("SELECT count() FROM chgate_chtest.withdrawals FORMAT TSV"), "0\n");
}

}  // namespace
}  // namespace chgate::service

namespace chgate::service {
namespace {

// Every setting the live server has, sent by a caller with a valid and an invalid value, and
// names it does not have, each followed by an ordinary query on the same (only) connection: every
// refused setting is INVALID_ARGUMENT with nothing sent, every accepted one takes effect as sent,
// the connection stays in step, and system.query_log holds no statement but the callers' (every
// caller statement carries an INSERT into a canary table in a comment, which a desynchronised
// server would run). chgate's connection runs as `audited`, whose profile logs every query.
TEST_F(QueryServiceTest, EverySettingOfTheServerIsSentAsItReadsItOrRefused) {
  std::vector<std::string> names;
  {
    const std::string all = ClickHouseClient("SELECT name FROM system.settings FORMAT TSV");
    for (absl::string_view line : absl::StrSplit(all, '\n', absl::SkipEmpty())) {
      names.emplace_back(line);
    }
  }
  ASSERT_GT(names.size(), 100u);
  std::vector<std::string> allowed = {"join_strict_ness", "no_such_setting"};
  for (const std::string& name : names) {
    if (!QuerySettingsPolicy::NeverSettable(name)) allowed.push_back(name);
  }
  QueryServiceOptions options;
  options.settings = QuerySettingsPolicy::Create(allowed).value();
  START_OR_SKIP(options, CompressionMethod::kLz4, /*pool_max=*/1, "audited");
  clickhouse::testing::Exec(*probe_, "DROP TABLE IF EXISTS chgate_chtest.settings_canary");
  clickhouse::testing::Exec(*probe_,
                            "CREATE TABLE chgate_chtest.settings_canary (x UInt8) ENGINE = Memory");
  const std::string marker = absl::StrCat("settings-diff-", absl::ToUnixMicros(absl::Now()));
  const std::string started = ClickHouseClient("SELECT now() FORMAT TSV");
  auto defaults = [&] {
    std::map<std::string, std::string> out;
    const std::string tsv = ClickHouseClient("SELECT name, value FROM system.settings FORMAT TSV");
    for (absl::string_view line : absl::StrSplit(tsv, '\n', absl::SkipEmpty())) {
      std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits('\t', 1));
      if (f.size() == 2) out[f[0]] = f[1];
    }
    return out;
  }();
  auto request_for = [&](const std::string& name, const std::string& value) {
    v1::QueryRequest request;
    // ClickHouse logs a statement up to the end of its syntax tree: the marker goes first.
    request.set_sql(
        absl::StrCat("/* ", marker, " */ SELECT value FROM system.settings WHERE name = '", name,
                     "' /* \x01 INSERT INTO chgate_chtest.settings_canary VALUES (1) */"));
    (*request.mutable_settings())[name] = value;
    return request;
  };
  auto in_step = [&](const std::string& context) {
    v1::QueryRequest plain;
    plain.set_sql(absl::StrCat("/* ", marker, " */ SELECT 1"));
    const Outcome o = Run(plain);
    EXPECT_TRUE(o.status.ok()) << context << ": " << o.status.error_message();
    EXPECT_EQ(ResultTsv(o), "1\n") << context;
  };
  size_t sent = 0, refused = 0;
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    if (QuerySettingsPolicy::NeverSettable(name)) {
      EXPECT_EQ(Run(request_for(name, defaults[name])).status.error_code(),
                grpc::StatusCode::INVALID_ARGUMENT);
      ++refused;
      in_step(name);
      continue;
    }
    const clickhouse::SettingSpec* spec = clickhouse::FindSetting(name);
    // The server's own current value is always valid for it.
    const Outcome valid = Run(request_for(name, defaults[name]));
    if (spec == nullptr) {
      // 18.16 takes settings in their binary form: one chgate has no type for is never sent.
      EXPECT_EQ(valid.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      ++refused;
    } else {
      ASSERT_TRUE(valid.status.ok()) << valid.status.error_message();
      if (name != "max_execution_time") {  // chgate bounds it by the call's deadline
        EXPECT_EQ(ResultTsv(valid), absl::StrCat(defaults[name], "\n"));
      }
      ++sent;
      // Another valid value, which must arrive as sent (enums: every value).
      std::vector<std::string> others;
      switch (spec->type) {
        case clickhouse::SettingType::kUInt:
          others = {"7"};
          break;
        case clickhouse::SettingType::kBool:
          others = {defaults[name] == "1" ? "0" : "1"};
          break;
        case clickhouse::SettingType::kEnum:
          others.assign(spec->values.begin(), spec->values.end());
          break;
        case clickhouse::SettingType::kFloat:
          others = {"0.25"};
          break;
        case clickhouse::SettingType::kChar:
          others = {";"};
          break;
        default:
          break;
      }
      for (const std::string& other : others) {
        const Outcome o = Run(request_for(name, other));
        // A limit of 7 may stop the probe itself: a ClickHouse error, never a desync.
        if (o.status.ok()) {
          if (name != "max_execution_time") {  // chgate bounds it by the call's deadline
            EXPECT_EQ(ResultTsv(o), absl::StrCat(other, "\n")) << other;
          }
        } else {
          EXPECT_TRUE(absl::StartsWith(o.status.error_message(), "ClickHouse error"))
              << other << ": " << o.status.error_message();
        }
        in_step(absl::StrCat(name, "=", other));
      }
    }
    in_step(name);
    // An invalid value: refused before anything is sent.
    if (spec != nullptr && spec->type == clickhouse::SettingType::kString) continue;
    const char* bad = spec != nullptr && spec->type == clickhouse::SettingType::kChar ? "ab" : "-";
    EXPECT_EQ(Run(request_for(name, bad)).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    in_step(absl::StrCat(name, " invalid"));
  }
  for (const char* unknown : {"join_strict_ness", "no_such_setting"}) {
    const Outcome o = Run(request_for(unknown, "-"));
    EXPECT_EQ(o.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << unknown;
    EXPECT_TRUE(absl::StrContains(o.status.error_message(), "not known to this ClickHouse server"))
        << o.status.error_message();
    in_step(unknown);
  }
  EXPECT_GT(sent, 50u);
  EXPECT_GT(refused, 10u);
  EXPECT_EQ(ClickHouseClient("SELECT count() FROM chgate_chtest.settings_canary FORMAT TSV"),
            "0\n");
  // Every statement chgate's connection ran is a caller's or chgate's own read of the server's
  // catalog.
  ClickHouseClient("SYSTEM FLUSH LOGS");
  const std::string foreign = ClickHouseClient(absl::StrCat(
      "SELECT DISTINCT query FROM system.query_log WHERE event_time >= toDateTime('",
      absl::StripTrailingAsciiWhitespace(started), "') AND user = 'audited' AND type = 1 ",
      "AND position(query, '", marker, "') = 0 AND position(query, 'system.settings') = 0 ",
      "AND position(query, 'system.columns') = 0 ",
      "AND position(query, 'system.table_functions') = 0 FORMAT TSV"));
  EXPECT_EQ(foreign, "");
  const std::string logged = ClickHouseClient(absl::StrCat(
      "SELECT count() > 0 FROM system.query_log WHERE user = 'audited' AND position(query, '",
      marker, "') > 0 FORMAT TSV"));
  EXPECT_EQ(logged, "1\n") << "the audited user's queries are not logged";
}

// How the live server reads quoted table-function names, against how chgate's check reads them: a
// corpus of spellings of numbers(3), each run by clickhouse-client. Wherever chgate reads a
// spelling (rather than refusing it), it must name the function the server calls: numbers exactly
// when the server ran numbers. A refused spelling is safe whatever the server makes of it.
TEST(IdentifierDifferentialTest, QuotedCalleesReadAsTheLiveServerReadsThem) {
  std::unique_ptr<clickhouse::Connection> conn = clickhouse::testing::ConnectOrSkip();
  if (conn == nullptr) return;
  const std::vector<std::string> spellings = {
      "numbers",         "`numbers`",       "\"numbers\"",  "NUMBERS",      "`nu\\mbers`",
      "`nu\\x6dbers`",   "\"nu\\x6dbers\"", "`num``bers`",  "`numbers\\0`", "`nu\\Mbers`",
      "`n\\umbers`",     "`numbers\\ `",    "`\\numbers`",  "`numbers\\t`", "`nu\\\\mbers`",
      "\"nu\"\"mbers\"", "`nu\\`mbers`",    "`nu\\'mbers`", "`nu\\/mbers`", "`numbers\\=`",
  };
  size_t read = 0, refused = 0, server_ran = 0;
  for (const std::string& spelling : spellings) {
    SCOPED_TRACE(spelling);
    const std::string sql = absl::StrCat("SELECT count() FROM ", spelling, "(3)");
    std::string result;
    const absl::Status run = conn->Select({.query = sql}, [&](const clickhouse::Block& block) {
      if (block.rows() > 0) AppendTsvValue(*block.column(0).column, 0, false, &result);
      return absl::OkStatus();
    });
    const bool ran = run.ok() && result == "3";
    if (!conn->usable()) conn = clickhouse::testing::ConnectOrSkip();
    server_ran += ran ? 1 : 0;
    // chgate refuses the spelling (InvalidArgument), or reads it (numbers is a default one).
    const absl::Status st =
        sql::CheckTableFunctions(sql, {}, absl::flat_hash_set<std::string>{"numbers"});
    if (st.code() == absl::StatusCode::kInvalidArgument) {
      ++refused;
      continue;
    }
    ASSERT_TRUE(st.ok()) << st;
    ++read;
    // Read: does chgate's reading name numbers?
    absl::StatusOr<std::string> name = spelling.front() == '`' || spelling.front() == '"'
                                           ? text::UnquoteIdentifier(spelling)
                                           : absl::StatusOr<std::string>(spelling);
    ASSERT_TRUE(name.ok()) << name.status();
    // Where the server ran numbers, chgate's reading (compared without case) names it; where
    // chgate reads exactly numbers, so does the server (18.16 matches table functions with case,
    // so chgate's check is the stricter one).
    EXPECT_TRUE(!ran || absl::AsciiStrToLower(*name) == "numbers")
        << "the server ran numbers, chgate reads " << *name;
    EXPECT_TRUE(*name != "numbers" || ran) << "chgate reads numbers, the server did not run it";
  }
  EXPECT_GT(read, 5u);
  EXPECT_GT(refused, 3u);
  EXPECT_GT(server_ran, 4u);
}

}  // namespace
}  // namespace chgate::service
