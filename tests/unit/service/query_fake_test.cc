// The Query RPC against a scripted ClickHouse at protocol revision 54460 (newer than the local
// 18.16 server): query parameters travel as protocol parameters, settings as flagged strings with
// readonly last, and the server's blocks, progress and profile info reach the caller; Variant and
// JSON results arrive as text.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "chgate/v1/chgate.grpc.pb.h"
#include "server/auth/authorizer.h"
#include "server/clickhouse/pool.h"
#include "server/clickhouse/protocol/client_reader.h"
#include "server/clickhouse/protocol/error_codes.h"
#include "server/ingest/convert.h"
#include "server/ingest/ingestor.h"
#include "server/ingest/inserter.h"
#include "server/proto_convert/values.h"
#include "server/service/query_service.h"
#include "server/service/server.h"
#include "tests/unit/clickhouse/fake_server.h"

namespace chgate::service {
namespace {

namespace ch = clickhouse;
namespace cht = clickhouse::testing;

constexpr uint64_t kRevision = 54460;

// Parses one client Query packet at kRevision.
ch::QueryParams ParseQuery(std::string_view bytes) {
  absl::StatusOr<cht::ClientQuery> q = cht::DecodeClientQuery(bytes, kRevision);
  EXPECT_TRUE(q.ok()) << q.status();
  return q.ok() ? q->query : ch::QueryParams{};
}

class QueryFakeServerTest : public ::testing::Test {
 protected:
  void Start(cht::FakeServer& fake, const auth::Authorizer* authorizer = nullptr) {
    fake.Start();
    pool_ = std::make_unique<ch::Pool>(cht::OneConnectionPool(fake.port()));
    pool_->Start();
    inserter_ = std::make_unique<ingest::ClickHouseInserter>(pool_.get());
    ingestor_ = std::make_unique<ingest::Ingestor>(ingest::IngestOptions{}, inserter_.get(),
                                                   ingest::RealClock());
    executor_ = std::make_unique<QueryExecutor>(pool_.get(), QueryServiceOptions{}, nullptr);
    auto server = StartServer({.api_address = "127.0.0.1:0",
                               .health_address = "",
                               .queries = executor_.get(),
                               .authorizer = authorizer},
                              ingestor_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::Ingest::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->api_port()),
                                                    grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::Now() + absl::Seconds(5));
    server_.reset();
    executor_.reset();
    ingestor_.reset();
    if (pool_ != nullptr) pool_->Shutdown();
  }

  std::unique_ptr<ch::Pool> pool_;
  std::unique_ptr<ingest::ClickHouseInserter> inserter_;
  std::unique_ptr<ingest::Ingestor> ingestor_;
  std::unique_ptr<QueryExecutor> executor_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::Ingest::Stub> stub_;
};

TEST_F(QueryFakeServerTest, SendsParametersAndSettingsAndStreamsTheResult) {
  cht::FakeServer fake({.revision = kRevision});
  ch::QueryParams seen;
  fake.Handshake();
  cht::ServeSettings(fake, kRevision, {{"max_threads", "MaxThreads"}});
  fake.ExpectPacket(cht::ClientPacket::kQuery,
                    [&](std::string_view bytes) { seen = ParseQuery(bytes); });
  fake.ExpectPacket(cht::ClientPacket::kData);
  fake.Send(cht::DataPacket(cht::HeaderBlock({{"id", "UInt64"}, {"name", "String"}}), kRevision));
  fake.Send(cht::ProgressPacket({.rows = 3, .bytes = 48, .total_rows = 3}, kRevision));
  fake.Send(cht::DataPacket(cht::MakeBlock({{"id", cht::UInt64Column({1, 2, 3})},
                                            {"name", cht::StringColumn({"a", "", "c"})}}),
                            kRevision));
  fake.Send(cht::ProfileInfoPacket({.rows = 3, .blocks = 1, .bytes = 48}, kRevision));
  fake.Send(cht::EndOfStreamPacket());
  ASSERT_NO_FATAL_FAILURE(Start(fake));

  v1::QueryRequest request;
  request.set_sql("SELECT id, name FROM t WHERE id > {min:UInt64}");
  (*request.mutable_parameters())["min"] = "0";
  (*request.mutable_settings())["max_threads"] = "2";
  request.set_query_id("q-54460");
  request.set_send_progress(true);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  auto reader = stub_->Query(&context, request);
  std::vector<v1::QueryResponse> responses;
  v1::QueryResponse r;
  while (reader->Read(&r)) responses.push_back(r);
  grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(fake.Wait().ok());

  // What ClickHouse received.
  EXPECT_EQ(seen.query_id, "q-54460");
  EXPECT_EQ(seen.query, "SELECT id, name FROM t WHERE id > {min:UInt64}");
  ASSERT_EQ(seen.parameters.size(), 1u);
  EXPECT_EQ(seen.parameters[0].first, "min");
  EXPECT_EQ(seen.parameters[0].second, "0");
  ASSERT_GE(seen.settings.size(), 3u);
  EXPECT_EQ(seen.settings[0].name, "max_threads");
  EXPECT_EQ(seen.settings[0].value, "2");
  EXPECT_EQ(seen.settings[seen.settings.size() - 2].name, "max_execution_time");
  EXPECT_EQ(seen.settings.back().name, "readonly");
  EXPECT_EQ(seen.settings.back().value, "2");

  // What the caller received: header, progress, one block, summary.
  ASSERT_EQ(responses.size(), 4u);
  ASSERT_TRUE(responses[0].has_header());
  EXPECT_EQ(responses[0].header().columns(1).type(), "String");
  EXPECT_EQ(responses[0].header().query_id(), "q-54460");
  ASSERT_TRUE(responses[1].has_progress());
  EXPECT_EQ(responses[1].progress().read_rows(), 3u);
  ASSERT_TRUE(responses[2].has_block());
  const v1::Block& block = responses[2].block();
  EXPECT_EQ(block.rows(), 3u);
  EXPECT_EQ(block.columns(0).data(),
            std::string("\1\0\0\0\0\0\0\0\2\0\0\0\0\0\0\0\3\0\0\0\0\0\0\0", 24));
  EXPECT_EQ(block.columns(1).data(), "ac");
  EXPECT_EQ(
      std::vector<uint64_t>(block.columns(1).offsets().begin(), block.columns(1).offsets().end()),
      (std::vector<uint64_t>{1, 1, 2}));
  ASSERT_TRUE(responses[3].has_summary());
  EXPECT_EQ(responses[3].summary().rows(), 3u);
  EXPECT_EQ(responses[3].summary().progress().read_rows(), 3u);
  EXPECT_EQ(responses[3].summary().profile_info().rows(), 3u);
  EXPECT_EQ(responses[3].summary().received_bytes(), responses[3].summary().decoded_bytes());
}

// A caller's query_id never reaches chgate's own ids (refused) nor another identity's: it is sent
// as "<identity>:<query_id>".
TEST_F(QueryFakeServerTest, CallerQueryIdsAreScopedByIdentityAndKeptOutOfChgatesOwn) {
  const std::string dir = ::testing::TempDir() + "/query-ids";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokens") << "svc:a tok-a-0123456789abcdef\n";
  std::ofstream(dir + "/policy") << "[svc:a]\nquery = true\n";
  auto authorizer =
      auth::Authorizer::Create({.tokens_file = dir + "/tokens", .policy_file = dir + "/policy"});
  ASSERT_TRUE(authorizer.ok()) << authorizer.status();
  cht::FakeServer fake({.revision = kRevision});
  ch::QueryParams seen;
  fake.Handshake();
  cht::ServeSettings(fake, kRevision, {{"max_threads", "MaxThreads"}});
  fake.ExpectPacket(cht::ClientPacket::kQuery,
                    [&](std::string_view bytes) { seen = ParseQuery(bytes); });
  fake.ExpectPacket(cht::ClientPacket::kData);
  fake.Send(cht::EndOfStreamPacket());
  ASSERT_NO_FATAL_FAILURE(Start(fake, authorizer->get()));
  auto run = [&](const std::string& query_id, v1::QueryResponse* header) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    context.AddMetadata("authorization", "Bearer tok-a-0123456789abcdef");
    v1::QueryRequest request;
    request.set_sql("SELECT 1");
    request.set_query_id(query_id);
    auto reader = stub_->Query(&context, request);
    v1::QueryResponse r;
    while (reader->Read(&r)) {
      if (r.has_header() && header != nullptr) *header = r;
    }
    return reader->Finish();
  };
  for (const char* own : {"chgate-0123456789abcdef0123456789abcdef", "CHGATE-x"}) {
    EXPECT_EQ(run(own, nullptr).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << own;
  }
  v1::QueryResponse header;
  const grpc::Status status = run("report-1", &header);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(fake.Wait().ok());
  EXPECT_EQ(seen.query_id, "svc%3Aa:report-1");
  EXPECT_EQ(header.header().query_id(), "svc%3Aa:report-1");
}

TEST_F(QueryFakeServerTest, ExceptionAfterABlockEndsTheStreamWithTheMappedCode) {
  cht::FakeServer fake({.revision = kRevision});
  fake.Handshake();
  cht::ServeSettings(fake, kRevision, {{"max_threads", "MaxThreads"}});
  fake.ExpectPacket(cht::ClientPacket::kQuery);
  fake.ExpectPacket(cht::ClientPacket::kData);
  fake.Send(cht::DataPacket(cht::HeaderBlock({{"x", "UInt64"}}), kRevision));
  fake.Send(cht::DataPacket(cht::MakeBlock({{"x", cht::UInt64Column({7})}}), kRevision));
  fake.Send(cht::ExceptionPacket({{.code = ch::error_code::kMemoryLimitExceeded,
                                   .name = "DB::Exception",
                                   .message = "Memory limit (for query) exceeded"}}));
  ASSERT_NO_FATAL_FAILURE(Start(fake));

  v1::QueryRequest request;
  request.set_sql("SELECT x FROM big");
  grpc::ClientContext context;
  auto reader = stub_->Query(&context, request);
  std::vector<v1::QueryResponse> responses;
  v1::QueryResponse r;
  while (reader->Read(&r)) responses.push_back(r);
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("241"), std::string::npos) << status.error_message();
  EXPECT_NE(status.error_message().find("MEMORY_LIMIT_EXCEEDED"), std::string::npos)
      << status.error_message();
  ASSERT_EQ(responses.size(), 2u);
  EXPECT_TRUE(responses[0].has_header());
  EXPECT_EQ(responses[1].block().rows(), 1u);
  EXPECT_TRUE(fake.Wait().ok());
}

// Variant and JSON result columns reach the caller in String layout: each row's plain text (a
// String alternative's bytes unescaped), NULL rows in `nulls`.
TEST_F(QueryFakeServerTest, VariantAndJsonResultsArriveAsText) {
  ch::ColumnPtr variant = cht::MakeColumn("Variant(String, UInt64)");
  ch::ColumnPtr json = cht::MakeColumn("JSON");
  const auto append = [](ch::Column& column, ingest::ValueRef value) {
    ASSERT_TRUE(ingest::AppendValue(value, column, {}).ok());
  };
  const std::string_view texts[] = {"a\tb", R"({"k":"x\ty"})", "{}"};
  append(*variant, ingest::TextValue(&texts[0]));
  append(*variant, ingest::NullValue());
  v1::Value number;
  number.set_uint64_value(42);
  append(*variant, proto_convert::ProtoValue(number));
  append(*json, ingest::TextValue(&texts[1]));
  append(*json, ingest::TextValue(&texts[2]));
  append(*json, ingest::TextValue(&texts[2]));

  cht::FakeServer fake({.revision = kRevision});
  fake.Handshake();
  cht::ServeSettings(fake, kRevision, {{"max_threads", "MaxThreads"}});
  fake.ExpectPacket(cht::ClientPacket::kQuery);
  fake.ExpectPacket(cht::ClientPacket::kData);
  fake.Send(cht::DataPacket(cht::HeaderBlock({{"v", "Variant(String, UInt64)"}, {"j", "JSON"}}),
                            kRevision));
  fake.Send(cht::DataPacket(cht::MakeBlock({{"v", variant}, {"j", json}}), kRevision));
  fake.Send(cht::EndOfStreamPacket());
  ASSERT_NO_FATAL_FAILURE(Start(fake));

  v1::QueryRequest request;
  request.set_sql("SELECT v, j FROM t");
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  auto reader = stub_->Query(&context, request);
  std::vector<v1::QueryResponse> responses;
  v1::QueryResponse r;
  while (reader->Read(&r)) responses.push_back(r);
  grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(fake.Wait().ok());

  ASSERT_GE(responses.size(), 2u);
  ASSERT_TRUE(responses[0].has_header());
  EXPECT_EQ(responses[0].header().columns(0).type(), "Variant(String, UInt64)");
  EXPECT_EQ(responses[0].header().columns(1).type(), "JSON");
  ASSERT_TRUE(responses[1].has_block());
  const v1::Block& block = responses[1].block();
  EXPECT_EQ(block.rows(), 3u);
  const v1::Column& v = block.columns(0);
  EXPECT_EQ(v.data(), "a\tb42");
  EXPECT_EQ(std::vector<uint64_t>(v.offsets().begin(), v.offsets().end()),
            (std::vector<uint64_t>{3, 3, 5}));
  EXPECT_EQ(v.nulls(), std::string("\0\1\0", 3));
  const v1::Column& j = block.columns(1);
  EXPECT_EQ(j.data(), R"({"k":"x\ty"}{}{})");
  EXPECT_EQ(std::vector<uint64_t>(j.offsets().begin(), j.offsets().end()),
            (std::vector<uint64_t>{12, 14, 16}));
  EXPECT_EQ(j.nulls(), "");
}

// The caller's traceparent reaches a 54460 server in the query's ClientInfo (the local 18.16
// server predates the field: only this fake checks it).
TEST_F(QueryFakeServerTest, TheCallersTraceContextReachesClickHouse) {
  cht::FakeServer fake({.revision = kRevision});
  ch::ClientInfo info;
  fake.Handshake();
  cht::ServeSettings(fake, kRevision, {{"max_threads", "MaxThreads"}});
  fake.ExpectPacket(cht::ClientPacket::kQuery, [&](std::string_view bytes) {
    absl::StatusOr<cht::ClientQuery> q = cht::DecodeClientQuery(bytes, kRevision);
    ASSERT_TRUE(q.ok()) << q.status();
    info = q->client_info;
  });
  fake.ExpectPacket(cht::ClientPacket::kData);
  fake.Send(cht::DataPacket(cht::HeaderBlock({{"x", "UInt8"}}), kRevision));
  fake.Send(cht::EndOfStreamPacket());
  ASSERT_NO_FATAL_FAILURE(Start(fake));

  v1::QueryRequest request;
  request.set_sql("SELECT 1 AS x WHERE 0");
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  context.AddMetadata("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  context.AddMetadata("tracestate", "congo=t61rcWkgMzE");
  auto reader = stub_->Query(&context, request);
  v1::QueryResponse r;
  while (reader->Read(&r)) {
  }
  grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(fake.Wait().ok());
  ASSERT_TRUE(info.has_trace_context);
  EXPECT_EQ(info.trace_id_high, 0x0af7651916cd43ddu);
  EXPECT_EQ(info.trace_id_low, 0x8448eb211c80319cu);
  EXPECT_EQ(info.span_id, 0xb7ad6b7169203331u);
  EXPECT_EQ(info.tracestate, "congo=t61rcWkgMzE");
  EXPECT_EQ(info.trace_flags, 1);
}

// What an INSERT asks of a 24.3 server (the fake's version): the batch's deduplication token,
// and with `async` the server's asynchronous insert that still answers after writing the part;
// a 21.8 server gets neither setting (it would refuse them as unknown).
TEST(InserterFakeServerTest, SendsTheDeduplicationTokenAndAsyncInsertWhereTheServerHasThem) {
  for (const uint64_t major : {24u, 21u}) {
    cht::FakeServer fake({.revision = kRevision});
    ch::QueryParams seen;
    fake.Handshake({.version_major = major, .version_minor = major == 24 ? 3u : 8u});
    fake.ExpectPacket(cht::ClientPacket::kQuery,
                      [&](std::string_view bytes) { seen = ParseQuery(bytes); });
    fake.ExpectPacket(cht::ClientPacket::kData);
    fake.Send(cht::DataPacket(cht::HeaderBlock({{"id", "UInt64"}}), kRevision));
    fake.ExpectPacket(cht::ClientPacket::kData);
    fake.ExpectPacket(cht::ClientPacket::kData);  // the empty block that ends the INSERT
    fake.Send(cht::EndOfStreamPacket());
    fake.Start();
    ch::Pool pool(cht::OneConnectionPool(fake.port()));
    pool.Start();
    ingest::ClickHouseInserter inserter(&pool);
    const ch::Block block = cht::MakeBlock({{"id", cht::UInt64Column({1, 2})}});
    const absl::Status st =
        inserter.Insert({"db", "t"}, ch::BlockParts::View(block),
                        {.query_id = "spool-7", .deduplication_key = "spool-7", .async = true},
                        absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_TRUE(fake.Wait().ok()) << fake.Wait();
    pool.Shutdown();
    std::map<std::string, std::string> settings;
    for (const auto& setting : seen.settings) settings[setting.name] = setting.value;
    if (major == 24) {
      EXPECT_EQ(settings["insert_deduplication_token"], "spool-7");
      EXPECT_EQ(settings["async_insert"], "1");
      EXPECT_EQ(settings["wait_for_async_insert"], "1");
    } else {
      EXPECT_TRUE(settings.empty());
    }
    EXPECT_EQ(seen.query_id, "spool-7");
  }
}

}  // namespace
}  // namespace chgate::service
