// The client against a scripted fake server: the exact bytes of our Hello, Addendum, Query and
// Data packets at several revisions (expected bytes are written out by hand from PROTOCOL.md,
// not produced by the library's writers), and the newer server packet forms the client must
// accept.
#include "tests/unit/clickhouse/fake_server.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/connection.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/clickhouse/text_form.h"
#include "server/common/secret_file.h"
#include "tests/unit/clickhouse/test_util.h"
#include "tests/unit/tls/test_pki.h"

namespace chgate::clickhouse::testing {
namespace {

constexpr uint64_t kOurRevision = revision::kClient;
// The local 18.16 server's revision, the oldest chgate is tested against live.
constexpr uint64_t kRevision1816 = 54412;
// A server newer than every revision chgate knows.
constexpr uint64_t kFutureRevision = 54490;

ConnectionOptions OptionsFor(const FakeServer& server,
                             CompressionMethod compression = CompressionMethod::kNone) {
  return {.host = "127.0.0.1",
          .port = server.port(),
          .database = "analytics",
          .user = "writer",
          .password = "s3cret",
          .quota_key = "qk",
          .compression = compression,
          .connect_timeout = absl::Seconds(5),
          .handshake_timeout = absl::Seconds(5),
          .read_timeout = absl::Seconds(5),
          .write_timeout = absl::Seconds(5)};
}

// Fails the test unless `got` equals `want`, showing both in hex.
FakeServer::Checker BytesAre(std::string want) {
  return [want = std::move(want)](std::string_view got) { EXPECT_EQ(Hex(got), Hex(want)); };
}

// ---- Expected client bytes, by hand (PROTOCOL.md §4.1, §4.3, §4.4, §4.7) ----

std::string ExpectedHello() {
  return Bytes()
      .VarUInt(0)
      .Str("chgate")
      .VarUInt(1)  // version major
      .VarUInt(0)  // version minor
      .VarUInt(kOurRevision)
      .Str("analytics")
      .Str("writer")
      .Str("s3cret");
}

std::string ExpectedAddendum() { return Bytes().Str("qk"); }

std::string ExpectedClientInfo(uint64_t r) {
  Bytes b;
  b.U8(1).Str("").Str("").Str("0.0.0.0:0");             // initial query: user, id, address
  if (r >= revision::kInitialQueryStartTime) b.U64(0);  // initial_query_start_time_us
  b.U8(1);                                              // interface TCP
  b.Str("").Str("").Str("chgate");                      // os_user, client_hostname, client_name
  b.VarUInt(1).VarUInt(0).VarUInt(kOurRevision);
  b.Str("qk");                                         // quota_key (>= 54060)
  if (r >= revision::kDistributedDepth) b.VarUInt(0);  // distributed_depth
  b.VarUInt(0);                                        // version patch (>= 54401)
  if (r >= revision::kOpenTelemetry) b.U8(0);          // no OpenTelemetry context
  if (r >= revision::kParallelReplicas) b.VarUInt(0).VarUInt(0).VarUInt(0);  // parallel replicas
  return b;
}

struct TestSetting {
  std::string name;
  std::string value;
  bool important;
  std::string binary;  // the value in the pre-54429 typed form
};

std::vector<TestSetting> TestSettings() {
  return {
      {"max_block_size", "1000", false, Bytes().VarUInt(1000)},
      {"extremes", "1", true, Bytes().VarUInt(1)},
      {"totals_auto_threshold", "0.3", false, Bytes().Str("0.3")},
      {"network_zstd_compression_level", "-3", false, Bytes().VarUInt(5)},  // zigzag(-3)
      {"send_logs_level", "trace", false, Bytes().Str("trace")},
  };
}

std::vector<Setting> ToSettings(const std::vector<TestSetting>& settings) {
  std::vector<Setting> out;
  for (const TestSetting& s : settings) {
    out.push_back({.name = s.name, .value = s.value, .important = s.important});
  }
  return out;
}

// Parameters as sent: name, then the quoted literal.
std::vector<std::pair<std::string, std::string>> TestParameters() {
  return {{"p", "a'b"}, {"q", std::string("x\\y\n\t\0z", 7)}};
}
std::vector<std::string> QuotedTestParameters() { return {"'a\\'b'", "'x\\\\y\\n\\t\\0z'"}; }

std::string ExpectedQuery(uint64_t r, std::string_view query_id, std::string_view text,
                          bool compression, const std::vector<TestSetting>& settings,
                          bool with_parameters) {
  Bytes b;
  b.VarUInt(1).Str(query_id).Raw(ExpectedClientInfo(r));
  for (const TestSetting& s : settings) {
    b.Str(s.name);
    if (r >= revision::kSettingsAsStrings) {
      b.VarUInt(s.important ? 1 : 0).Str(s.value);
    } else {
      b.Raw(s.binary);
    }
  }
  b.Str("");                                         // end of settings
  if (r >= revision::kInterserverSecret) b.Str("");  // interserver secret
  b.VarUInt(2);                                      // stage Complete
  b.VarUInt(compression ? 1 : 0);
  b.Str(text);
  if (r >= revision::kParameters) {
    if (with_parameters) {
      const auto params = TestParameters();
      const auto quoted = QuotedTestParameters();
      for (size_t i = 0; i < params.size(); ++i) b.Str(params[i].first).VarUInt(2).Str(quoted[i]);
    }
    b.Str("");
  }
  return b;
}

// The empty block body: block info (is_overflows 0, bucket_num -1), 0 columns, 0 rows.
std::string EmptyBlockBody() {
  return Bytes().VarUInt(1).U8(0).VarUInt(2).I32(-1).VarUInt(0).VarUInt(0).VarUInt(0);
}

// The client's empty Data packet; compressed, it is the LZ4 frame of PROTOCOL.md §6.
std::string ExpectedEmptyData(bool lz4) {
  Bytes b;
  b.VarUInt(2).Str("");
  if (lz4) {
    b.Raw(Unhex("a783ac6cd55c7a7cb5ac46bddb86e214"));
    b.U8(0x82).U32(20).U32(10).U8(0xa0);  // method, sizes, LZ4 token: 10 literals
  }
  b.Raw(EmptyBlockBody());
  return b;
}

void ExpectStatus(const absl::Status& status, absl::StatusCode code, std::string_view text) {
  EXPECT_EQ(status.code(), code) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), absl::string_view(text.data(), text.size())))
      << status;
}

// ---- The handshake and the query at each revision ----

class FakeServerRevisionTest
    : public ::testing::TestWithParam<std::tuple<uint64_t, CompressionMethod>> {};

TEST_P(FakeServerRevisionTest, SendsExactPacketsAndReadsTheResult) {
  const auto [rev, method] = GetParam();
  const bool compressed = method != CompressionMethod::kNone;
  const std::optional<CompressionMethod> frames =
      compressed ? std::optional<CompressionMethod>(method) : std::nullopt;
  const bool params = rev >= revision::kParameters;

  FakeServer server({.revision = rev});
  server.ExpectPacket(ClientPacket::kHello, BytesAre(ExpectedHello()));
  server.Send(ServerHelloPacket(rev));
  if (rev >= revision::kAddendum)
    server.ExpectPacket(ClientPacket::kAddendum, BytesAre(ExpectedAddendum()));
  server.ExpectPacket(ClientPacket::kQuery,
                      BytesAre(ExpectedQuery(rev, "q-42", "SELECT n, s FROM t", compressed,
                                             TestSettings(), params)));
  server.ExpectPacket(ClientPacket::kData, BytesAre(ExpectedEmptyData(compressed)));
  const Block header = HeaderBlock({{"n", "UInt64"}, {"s", "String"}});
  server.Send(DataPacket(header, rev, frames));
  server.Send(DataPacket(
      MakeBlock({{"n", UInt64Column({1, 2})}, {"s", StringColumn({"one", "two"})}}), rev, frames));
  server.Send(ProgressPacket({.rows = 3,
                              .bytes = 100,
                              .total_rows = 3,
                              .total_bytes = 777,
                              .written_rows = 5,
                              .written_bytes = 6,
                              .elapsed_ns = 999},
                             rev));
  if (rev >= revision::kIncrementalProfileEvents)
    server.Send(ProfileEventsPacket(rev, {{.name = "SelectedRows", .value = 3}}));
  server.Send(DataPacket(MakeBlock({{"n", UInt64Column({3})}, {"s", StringColumn({"three"})}}), rev,
                         frames));
  server.Send(ProfileInfoPacket(
      {.rows = 3, .blocks = 2, .bytes = 64, .applied_limit = true, .rows_before_limit = 10}, rev));
  server.Send(DataPacket(header, rev, frames));
  server.Send(EndOfStreamPacket());
  server.Start();

  auto conn = Connection::Connect(OptionsFor(server, method));
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_EQ((*conn)->revision(), rev);
  const ServerInfo& info = (*conn)->server_info();
  EXPECT_EQ(info.name, "ClickHouse");
  EXPECT_EQ(info.revision, rev);
  EXPECT_EQ(info.version_major, 24u);
  EXPECT_EQ(info.timezone, "UTC");
  EXPECT_EQ(info.display_name, "fake");
  EXPECT_EQ(info.version_patch, 7u);

  QueryParams query{
      .query_id = "q-42", .query = "SELECT n, s FROM t", .settings = ToSettings(TestSettings())};
  if (params) query.parameters = TestParameters();
  std::string tsv;
  QueryResult result;
  absl::Status status = (*conn)->Select(
      query,
      [&](const Block& block) {
        tsv += BlockToTsv(block);
        return absl::OkStatus();
      },
      &result);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(tsv, "1\tone\n2\ttwo\n3\tthree\n");
  EXPECT_EQ(result.rows, 3u);
  EXPECT_EQ(result.blocks, 2u);
  EXPECT_EQ(result.progress.rows, 3u);
  EXPECT_EQ(result.progress.bytes, 100u);
  EXPECT_EQ(result.progress.total_rows, 3u);
  EXPECT_EQ(result.progress.total_bytes, 0u);  // only from 54463
  EXPECT_EQ(result.progress.written_rows, rev >= revision::kClientWriteInfo ? 5u : 0u);
  EXPECT_EQ(result.progress.written_bytes, rev >= revision::kClientWriteInfo ? 6u : 0u);
  EXPECT_EQ(result.progress.elapsed_ns, rev >= kOurRevision ? 999u : 0u);
  ASSERT_TRUE(result.profile.has_value());
  EXPECT_EQ(result.profile->rows_before_limit, 10u);
  EXPECT_TRUE(result.profile->applied_limit);
  EXPECT_TRUE((*conn)->usable());
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

INSTANTIATE_TEST_SUITE_P(
    FakeServerRevisions, FakeServerRevisionTest,
    ::testing::Combine(::testing::Values(kOurRevision, revision::kParameters,
                                         revision::kParallelReplicas, revision::kSettingsAsStrings,
                                         kRevision1816),
                       ::testing::Values(CompressionMethod::kNone, CompressionMethod::kLz4)),
    [](const auto& p) {
      return absl::StrCat("Rev", std::get<0>(p.param),
                          std::get<1>(p.param) == CompressionMethod::kNone ? "Raw" : "Lz4");
    });

TEST(FakeServerTest, NewerServerIsGatedOnOurRevision) {
  // A server at 54490 answers with the fields of min(54490, 54460): no chunking strings,
  // password rules or nonce, which would be misread as the next packet otherwise.
  FakeServer server({.revision = kFutureRevision});
  server.ExpectPacket(ClientPacket::kHello, BytesAre(ExpectedHello()));
  server.Send(ServerHelloPacket(kFutureRevision, kOurRevision));
  server.ExpectPacket(ClientPacket::kAddendum, BytesAre(ExpectedAddendum()));
  server.ExpectPacket(ClientPacket::kPing, BytesAre(Bytes().VarUInt(4)));
  server.Send(PongPacket());
  server.Start();

  auto conn = Connection::Connect(OptionsFor(server));
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_EQ((*conn)->revision(), kOurRevision);
  EXPECT_EQ((*conn)->server_info().revision, 54490u);
  EXPECT_TRUE((*conn)->Ping().ok());
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

TEST(FakeServerTest, ZstdAsksForZstdThroughTheSetting) {
  FakeServer server({.revision = kOurRevision});
  server.Handshake();
  server.ExpectPacket(
      ClientPacket::kQuery,
      BytesAre(ExpectedQuery(kOurRevision, "", "SELECT 1", true,
                             {{"network_compression_method", "zstd", false, ""}}, false)));
  server.ExpectPacket(ClientPacket::kData, [](std::string_view packet) {
    absl::StatusOr<Block> block = DecodeClientData(packet, kOurRevision, true);
    ASSERT_TRUE(block.ok()) << block.status();
    EXPECT_EQ(block->column_count(), 0u);
    // The frame carries the ZSTD method byte after the packet code, table name and checksum.
    ASSERT_GT(packet.size(), 2u + 16u);
    EXPECT_EQ(static_cast<uint8_t>(packet[2 + 16]), 0x90);
  });
  server.Send(DataPacket(HeaderBlock({{"x", "UInt8"}}), kOurRevision, CompressionMethod::kZstd));
  server.Send(EndOfStreamPacket());
  server.Start();

  auto conn = Connection::Connect(OptionsFor(server, CompressionMethod::kZstd));
  ASSERT_TRUE(conn.ok()) << conn.status();
  absl::Status status =
      (*conn)->Select({.query = "SELECT 1"}, [](const Block&) { return absl::OkStatus(); });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

// ---- Newer server packet forms at 54460 ----

// A data block written by hand with the has_custom byte (0) after each column's type.
std::string HandWrittenDataBody() {
  return Bytes()
      .Raw(Bytes().VarUInt(1).U8(0).VarUInt(2).I32(-1).VarUInt(0))  // block info
      .VarUInt(2)                                                   // columns
      .VarUInt(2)                                                   // rows
      .Str("n")
      .Str("UInt8")
      .U8(0)
      .U8(7)
      .U8(9)
      .Str("s")
      .Str("String")
      .U8(0)
      .Str("x")
      .Str("yz");
}

// Progress at 54460, by hand: rows, bytes, total_rows, written_rows, written_bytes, elapsed_ns.
std::string HandWrittenProgress() {
  return Bytes().VarUInt(3).VarUInt(2).VarUInt(40).VarUInt(2).VarUInt(11).VarUInt(12).VarUInt(
      123456789);
}

void ScriptNewerSelect(FakeServer& server, bool compressed) {
  const uint64_t r = kOurRevision;
  const auto frames =
      compressed ? std::optional<CompressionMethod>(CompressionMethod::kLz4) : std::nullopt;
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);
  server.Send(ProfileEventsPacket(r, {{.name = "Query", .value = 1}}));
  server.Send(DataPacket(HeaderBlock({{"n", "UInt8"}, {"s", "String"}}), r, frames));
  server.Send(LogPacket(r, {"<Debug> executeQuery: SELECT n, s FROM t"}));
  server.Send(ProfileEventsPacket(r, {{.name = "SelectedRows", .value = 2},
                                      {.name = "MemoryTrackerUsage", .value = -5, .gauge = true}}));
  const std::string body = HandWrittenDataBody();
  server.Send(Bytes().VarUInt(1).Str("").Raw(
      compressed ? CompressFrame(body, CompressionMethod::kLz4) : body));
  server.Send(HandWrittenProgress());
  server.Send(ProfileEventsPacket(r, {{.name = "SelectedBytes", .value = 40}}));
  server.Send(
      DataPacket(MakeBlock({{"n", MakeColumn("UInt8")}, {"s", MakeColumn("String")}}), r, frames));
  Block more = HeaderBlock({{"n", "UInt8"}, {"s", "String"}});
  static_cast<ColumnFixed&>(*more.column(0).column).Append<uint8_t>(42);
  static_cast<ColumnString&>(*more.column(1).column).Append("answer");
  server.Send(DataPacket(more, r, frames));
  Block totals = HeaderBlock({{"n", "UInt8"}, {"s", "String"}});
  static_cast<ColumnFixed&>(*totals.column(0).column).Append<uint8_t>(58);
  static_cast<ColumnString&>(*totals.column(1).column).Append("");
  server.Send(DataPacket(totals, r, frames, ServerCode::kTotals));
  Block extremes = HeaderBlock({{"n", "UInt8"}, {"s", "String"}});
  for (uint8_t v : {uint8_t{7}, uint8_t{42}})
    static_cast<ColumnFixed&>(*extremes.column(0).column).Append(v);
  for (const char* v : {"answer", "yz"})
    static_cast<ColumnString&>(*extremes.column(1).column).Append(v);
  server.Send(DataPacket(extremes, r, frames, ServerCode::kExtremes));
  server.Send(ProfileInfoPacket({.rows = 3, .blocks = 2, .bytes = 30}, r));
  server.Send(DataPacket(HeaderBlock({{"n", "UInt8"}, {"s", "String"}}), r, frames));
  server.Send(ProfileEventsPacket(r, {{.name = "NetworkSendBytes", .value = 999}}));
  server.Send(EndOfStreamPacket());
}

class FakeServerNewerFormsTest : public ::testing::TestWithParam<bool> {};

TEST_P(FakeServerNewerFormsTest, ReceivesEveryPacketInOrder) {
  FakeServer server({.revision = kOurRevision});
  ScriptNewerSelect(server, GetParam());
  server.Start();
  auto conn = Connection::Connect(
      OptionsFor(server, GetParam() ? CompressionMethod::kLz4 : CompressionMethod::kNone));
  ASSERT_TRUE(conn.ok()) << conn.status();
  ASSERT_TRUE((*conn)->SendQuery({.query = "SELECT n, s FROM t"}).ok());
  std::vector<PacketType> types;
  std::string data_tsv, totals_tsv, extremes_tsv, log_text, event_names;
  Progress progress;
  while (true) {
    absl::StatusOr<Packet*> p = (*conn)->ReceivePacket();
    ASSERT_TRUE(p.ok()) << p.status();
    types.push_back((*p)->type);
    const Block& block = (*p)->block;
    switch ((*p)->type) {
      case PacketType::kData:
        data_tsv += BlockToTsv(block);
        break;
      case PacketType::kTotals:
        totals_tsv += BlockToTsv(block);
        break;
      case PacketType::kExtremes:
        extremes_tsv += BlockToTsv(block);
        break;
      case PacketType::kProgress:
        progress.Add((*p)->progress);
        break;
      case PacketType::kLog:
        ASSERT_EQ(block.column_count(), 8u);
        EXPECT_EQ(block.column(7).name, "text");
        log_text += BlockToTsv(block);
        break;
      case PacketType::kProfileEvents:
        ASSERT_EQ(block.column_count(), 6u);
        EXPECT_EQ(block.column(3).column->type_name(), "Enum8('increment' = 1, 'gauge' = 2)");
        for (size_t row = 0; row < block.rows(); ++row) {
          AppendTsvValue(*block.column(4).column, row, false, &event_names);
          event_names += ",";
          AppendTsvValue(*block.column(3).column, row, false, &event_names);
          event_names += ",";
          AppendTsvValue(*block.column(5).column, row, false, &event_names);
          event_names += ";";
        }
        break;
      default:
        break;
    }
    if ((*p)->type == PacketType::kEndOfStream) break;
  }
  using T = PacketType;
  EXPECT_EQ(types, (std::vector<PacketType>{T::kProfileEvents, T::kData, T::kLog, T::kProfileEvents,
                                            T::kData, T::kProgress, T::kProfileEvents, T::kData,
                                            T::kData, T::kTotals, T::kExtremes, T::kProfileInfo,
                                            T::kData, T::kProfileEvents, T::kEndOfStream}));
  EXPECT_EQ(data_tsv, "7\tx\n9\tyz\n42\tanswer\n");
  EXPECT_EQ(totals_tsv, "58\t\n");
  EXPECT_EQ(extremes_tsv, "7\tanswer\n42\tyz\n");
  EXPECT_TRUE(absl::StrContains(log_text, "executeQuery: SELECT n, s FROM t")) << log_text;
  EXPECT_EQ(event_names,
            "Query,increment,1;SelectedRows,increment,2;MemoryTrackerUsage,gauge,-5;"
            "SelectedBytes,increment,40;NetworkSendBytes,increment,999;");
  EXPECT_EQ(progress.rows, 2u);
  EXPECT_EQ(progress.bytes, 40u);
  EXPECT_EQ(progress.total_rows, 2u);
  EXPECT_EQ(progress.total_bytes, 0u);
  EXPECT_EQ(progress.written_rows, 11u);
  EXPECT_EQ(progress.written_bytes, 12u);
  EXPECT_EQ(progress.elapsed_ns, 123456789u);
  EXPECT_TRUE((*conn)->usable());
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

TEST_P(FakeServerNewerFormsTest, SelectSkipsNonDataPackets) {
  FakeServer server({.revision = kOurRevision});
  ScriptNewerSelect(server, GetParam());
  server.ExpectPacket(ClientPacket::kPing);
  server.Send(PongPacket());
  server.Start();
  auto conn = Connection::Connect(
      OptionsFor(server, GetParam() ? CompressionMethod::kLz4 : CompressionMethod::kNone));
  ASSERT_TRUE(conn.ok()) << conn.status();
  std::string tsv;
  QueryResult result;
  absl::Status status = (*conn)->Select(
      {.query = "SELECT n, s FROM t"},
      [&](const Block& block) {
        tsv += BlockToTsv(block);
        return absl::OkStatus();
      },
      &result);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(tsv, "7\tx\n9\tyz\n42\tanswer\n");
  EXPECT_EQ(result.rows, 3u);
  EXPECT_EQ(result.blocks, 2u);
  EXPECT_EQ(result.progress.elapsed_ns, 123456789u);
  ASSERT_TRUE(result.profile.has_value());
  EXPECT_EQ(result.profile->bytes, 30u);
  EXPECT_TRUE((*conn)->Ping().ok());
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

INSTANTIATE_TEST_SUITE_P(FakeServerCompression, FakeServerNewerFormsTest, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "Lz4" : "Raw"; });

// ---- Errors from the server ----

TEST(FakeServerTest, NestedExceptionEndsTheQueryAndKeepsTheConnection) {
  FakeServer server({.revision = kOurRevision});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);
  server.Send(
      ExceptionPacket({{.code = 60,
                        .message = "Table analytics.t doesn't exist",
                        .stack_trace = "0. DB::Exception::Exception()"},
                       {.code = 1000, .name = "Poco::Exception", .message = "inner cause"}}));
  server.ExpectPacket(ClientPacket::kPing);
  server.Send(PongPacket());
  server.Start();

  auto conn = Connection::Connect(OptionsFor(server));
  ASSERT_TRUE(conn.ok()) << conn.status();
  absl::Status status =
      (*conn)->Select({.query = "SELECT * FROM t"}, [](const Block&) { return absl::OkStatus(); });
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  for (const char* part :
       {"60", "UNKNOWN_TABLE", "DB::Exception", "Table analytics.t doesn't exist", "1000",
        "Poco::Exception", "inner cause"}) {
    EXPECT_TRUE(absl::StrContains(status.message(), part)) << part << " not in " << status;
  }
  EXPECT_EQ(ClickHouseCode(status), 60);
  // No Data packet came first: the client pinged (the script's Ping/Pong) before reuse.
  EXPECT_TRUE((*conn)->usable());
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

// 18.16 refuses a query with a syntax error before reading the block that ends the external
// tables; the stale block then draws an UNEXPECTED_PACKET_FROM_CLIENT exception, and the Pong.
TEST(FakeServerTest, EarlyExceptionResynchronizesThroughPing) {
  FakeServer server({.revision = kRevision1816});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);
  server.Send(ExceptionPacket({{.code = 62, .message = "Syntax error"}}));
  server.ExpectPacket(ClientPacket::kPing);
  server.Send(ExceptionPacket({{.code = 101, .message = "Unexpected packet Data"}}));
  server.Send(PongPacket());
  server.ExpectPacket(ClientPacket::kPing);
  server.Send(PongPacket());
  server.Start();

  auto conn = Connection::Connect(OptionsFor(server));
  ASSERT_TRUE(conn.ok()) << conn.status();
  absl::Status status =
      (*conn)->Select({.query = "SELEC 1"}, [](const Block&) { return absl::OkStatus(); });
  EXPECT_EQ(ClickHouseCode(status), 62) << status;
  EXPECT_TRUE((*conn)->usable());
  EXPECT_TRUE((*conn)->Ping().ok());
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

TEST(FakeServerTest, EarlyExceptionWithoutPongBreaksTheConnection) {
  FakeServer server({.revision = kRevision1816});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);
  server.Send(ExceptionPacket({{.code = 115, .message = "Unknown setting"}}));
  server.ExpectPacket(ClientPacket::kPing);
  server.Close();
  server.Start();

  auto conn = Connection::Connect(OptionsFor(server));
  ASSERT_TRUE(conn.ok()) << conn.status();
  absl::Status status =
      (*conn)->Select({.query = "SELECT 1"}, [](const Block&) { return absl::OkStatus(); });
  EXPECT_EQ(ClickHouseCode(status), 115) << status;
  EXPECT_FALSE((*conn)->usable());
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

class FakeServerAuthTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(FakeServerAuthTest, ExceptionInsteadOfHelloFailsConnect) {
  const int32_t code = GetParam();
  FakeServer server({.revision = kOurRevision});
  server.ExpectPacket(ClientPacket::kHello, BytesAre(ExpectedHello()));
  server.Send(ExceptionPacket(
      {{.code = code, .message = "writer: Authentication failed: password is incorrect"}}));
  server.Start();
  auto conn = Connection::Connect(OptionsFor(server));
  ASSERT_FALSE(conn.ok());
  ExpectStatus(conn.status(), absl::StatusCode::kUnauthenticated,
               "writer: Authentication failed: password is incorrect");
  EXPECT_EQ(ClickHouseCode(conn.status()), code);
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

INSTANTIATE_TEST_SUITE_P(FakeServerCodes, FakeServerAuthTest, ::testing::Values(516, 193));

TEST(FakeServerTest, SparseColumnsArriveAsOrdinaryColumns) {
  FakeServer server({.revision = kOurRevision});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);
  server.Send(DataPacket(HeaderBlock({{"n", "UInt8"}}), kOurRevision));
  // has_custom = 1, kind 1 (sparse); offsets: 1 default, the value, then 1 trailing default
  // (flagged with bit 62); the one non-default value.
  server.Send(Bytes()
                  .VarUInt(1)
                  .Str("")
                  .Raw(Bytes().VarUInt(1).U8(0).VarUInt(2).I32(-1).VarUInt(0))
                  .VarUInt(1)
                  .VarUInt(3)
                  .Str("n")
                  .Str("UInt8")
                  .U8(1)
                  .U8(1)
                  .VarUInt(1)
                  .VarUInt((uint64_t{1} << 62) | 1)
                  .U8(5));
  server.Send(EndOfStreamPacket());
  server.ExpectPacket(ClientPacket::kPing);
  server.Send(PongPacket());
  server.Start();
  auto conn = Connection::Connect(OptionsFor(server));
  ASSERT_TRUE(conn.ok()) << conn.status();
  std::string tsv;
  absl::Status status = (*conn)->Select({.query = "SELECT n FROM t"}, [&](const Block& block) {
    tsv += BlockToTsv(block);
    return absl::OkStatus();
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(tsv, "0\n5\n0\n");
  EXPECT_TRUE((*conn)->Ping().ok());
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

TEST(FakeServerTest, ParametersBefore54459FailBeforeAnythingIsSent) {
  FakeServer server({.revision = kRevision1816});
  server.ExpectPacket(ClientPacket::kHello, BytesAre(ExpectedHello()));
  server.Send(ServerHelloPacket(kRevision1816));
  // Nothing may arrive before the Ping: a Query would not parse as one.
  server.ExpectPacket(ClientPacket::kPing, BytesAre(Bytes().VarUInt(4)));
  server.Send(PongPacket());
  server.Start();
  auto conn = Connection::Connect(OptionsFor(server));
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_EQ((*conn)->revision(), 54412u);
  absl::Status status = (*conn)->Select({.query = "SELECT {p:String}", .parameters = {{"p", "v"}}},
                                        [](const Block&) { return absl::OkStatus(); });
  ExpectStatus(status, absl::StatusCode::kInvalidArgument, "54459");
  EXPECT_TRUE((*conn)->usable());
  EXPECT_TRUE((*conn)->Ping().ok());
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

// ---- INSERT ----

Block InsertBlock() {
  return MakeBlock({{"id", UInt64Column({1, 2, 3})}, {"s", StringColumn({"a", "bb", "ccc"})}});
}

// The data packet of InsertBlock() without compression, by hand.
std::string ExpectedInsertData() {
  return Bytes()
      .VarUInt(2)
      .Str("")
      .Raw(Bytes().VarUInt(1).U8(0).VarUInt(2).I32(-1).VarUInt(0))
      .VarUInt(2)
      .VarUInt(3)
      .Str("id")
      .Str("UInt64")
      .U8(0)
      .U64(1)
      .U64(2)
      .U64(3)
      .Str("s")
      .Str("String")
      .U8(0)
      .Str("a")
      .Str("bb")
      .Str("ccc");
}

class FakeServerInsertTest : public ::testing::TestWithParam<CompressionMethod> {};

TEST_P(FakeServerInsertTest, SendsRowsCheckedAgainstTheHeader) {
  const CompressionMethod method = GetParam();
  const bool compressed = method != CompressionMethod::kNone;
  const auto frames = compressed ? std::optional<CompressionMethod>(method) : std::nullopt;
  const std::string text = "INSERT INTO analytics.t (id, s) VALUES";
  std::vector<TestSetting> settings;
  if (method == CompressionMethod::kZstd) {
    settings.push_back({"network_compression_method", "zstd", false, ""});
  }

  FakeServer server({.revision = kOurRevision});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery,
                      BytesAre(ExpectedQuery(kOurRevision, "", text, compressed, settings, false)));
  server.ExpectPacket(ClientPacket::kData, [&](std::string_view packet) {
    absl::StatusOr<Block> block = DecodeClientData(packet, kOurRevision, compressed);
    ASSERT_TRUE(block.ok()) << block.status();
    EXPECT_EQ(block->column_count(), 0u);
    if (method != CompressionMethod::kZstd) {
      EXPECT_EQ(Hex(packet), Hex(ExpectedEmptyData(compressed)));
    }
  });
  server.Send(
      TableColumnsPacket("", "columns format version: 1\n2 columns:\n`id` UInt64\n`s` String\n"));
  server.Send(DataPacket(HeaderBlock({{"id", "UInt64"}, {"s", "String"}}), kOurRevision, frames));
  server.Send(ProfileEventsPacket(kOurRevision, {{.name = "InsertQuery", .value = 1}}));
  server.ExpectPacket(ClientPacket::kData, [&](std::string_view packet) {
    if (!compressed) {
      EXPECT_EQ(Hex(packet), Hex(ExpectedInsertData()));
    }
    absl::StatusOr<Block> block = DecodeClientData(packet, kOurRevision, compressed);
    ASSERT_TRUE(block.ok()) << block.status();
    ASSERT_EQ(block->column_count(), 2u);
    EXPECT_EQ(block->column(0).name, "id");
    EXPECT_EQ(block->column(0).column->type_name(), "UInt64");
    EXPECT_EQ(block->column(1).name, "s");
    EXPECT_EQ(block->column(1).column->type_name(), "String");
    EXPECT_EQ(BlockToTsv(*block), "1\ta\n2\tbb\n3\tccc\n");
  });
  server.ExpectPacket(ClientPacket::kData, [&](std::string_view packet) {
    absl::StatusOr<Block> block = DecodeClientData(packet, kOurRevision, compressed);
    ASSERT_TRUE(block.ok()) << block.status();
    EXPECT_EQ(block->rows(), 0u);
    EXPECT_EQ(block->column_count(), 0u);
  });
  server.Send(ProfileEventsPacket(kOurRevision, {{.name = "InsertedRows", .value = 3}}));
  server.Send(ProgressPacket({.written_rows = 3, .written_bytes = 54}, kOurRevision));
  server.Send(ProfileEventsPacket(kOurRevision, {{.name = "InsertedBytes", .value = 54}}));
  server.Send(EndOfStreamPacket());
  server.ExpectPacket(ClientPacket::kPing);
  server.Send(PongPacket());
  server.Start();

  auto conn = Connection::Connect(OptionsFor(server, method));
  ASSERT_TRUE(conn.ok()) << conn.status();
  const Block block = InsertBlock();
  const Block* blocks[] = {&block};
  QueryResult result;
  absl::Status status = (*conn)->Insert({.query = text}, blocks, &result);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(result.rows, 3u);
  EXPECT_EQ(result.blocks, 1u);
  EXPECT_EQ(result.progress.written_rows, 3u);
  EXPECT_EQ(result.progress.written_bytes, 54u);
  EXPECT_TRUE((*conn)->usable());
  EXPECT_TRUE((*conn)->Ping().ok());
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

// A server at revision >= 54456 writes ProfileEvents after every INSERT block and reads the next
// block only once that write is done. A client that sends every block before reading anything
// stalls as soon as the socket buffers between them are full: here 300 blocks of about 100 KiB
// one way and 64 KiB of ProfileEvents per block the other, far more than loopback buffers hold.
TEST(FakeServerInsertManyBlocksTest, ReadsWhatTheServerSendsBetweenBlocks) {
  constexpr int kBlocks = 300;
  std::vector<ProfileEvent> events;
  for (int i = 0; i < 16; ++i) {
    events.push_back({.name = absl::StrCat("Event", i, "_", std::string(4000, 'e')), .value = i});
  }
  const std::string per_block = ProfileEventsPacket(kOurRevision, events);
  FakeServer server({.revision = kOurRevision, .step_timeout = absl::Seconds(20)});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);  // the end of external tables
  server.Send(DataPacket(HeaderBlock({{"id", "UInt64"}, {"s", "String"}}), kOurRevision));
  for (int i = 0; i < kBlocks; ++i) {
    server.ExpectPacket(ClientPacket::kData);
    server.Send(per_block);
    if (i % 50 == 0) server.Send(ProgressPacket({.written_rows = 3}, kOurRevision));
  }
  server.ExpectPacket(ClientPacket::kData);  // the empty block that ends the INSERT
  server.Send(EndOfStreamPacket());
  server.Start();

  ConnectionOptions options = OptionsFor(server);
  options.write_timeout = absl::Seconds(10);
  auto conn = Connection::Connect(options);
  ASSERT_TRUE(conn.ok()) << conn.status();
  // Blocks of 1,000 rows (about 100 KiB each): together far more than the socket buffers, so a
  // client that does not read blocks on its writes once the server stops reading.
  ColumnPtr ids = MakeColumn("UInt64");
  ColumnPtr texts = MakeColumn("String");
  for (uint64_t r = 0; r < 1000; ++r) {
    static_cast<ColumnFixed&>(*ids).Append<uint64_t>(r);
    static_cast<ColumnString&>(*texts).Append(std::string(96, 'x'));
  }
  const Block block = MakeBlock({{"id", ids}, {"s", texts}});
  std::vector<const Block*> blocks(kBlocks, &block);
  QueryResult result;
  absl::Status status =
      (*conn)->Insert({.query = "INSERT INTO analytics.t (id, s) VALUES"}, blocks, &result);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(result.blocks, static_cast<uint64_t>(kBlocks));
  EXPECT_EQ(result.progress.written_rows, 3u * (kBlocks / 50));
  EXPECT_TRUE((*conn)->usable());
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

TEST(FakeServerInsertManyBlocksTest, AnExceptionBetweenBlocksEndsTheInsert) {
  FakeServer server({.revision = kOurRevision});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);
  server.Send(DataPacket(HeaderBlock({{"id", "UInt64"}, {"s", "String"}}), kOurRevision));
  server.ExpectPacket(ClientPacket::kData);
  server.Send(ExceptionPacket({{.code = 252, .message = "Too many parts"}}));
  server.Stall();
  server.Start();

  auto conn = Connection::Connect(OptionsFor(server));
  ASSERT_TRUE(conn.ok()) << conn.status();
  const Block block = InsertBlock();
  std::vector<const Block*> blocks(1000, &block);
  absl::Status status =
      (*conn)->Insert({.query = "INSERT INTO analytics.t (id, s) VALUES"}, blocks);
  EXPECT_EQ(ClickHouseCode(status), 252) << status;
}

INSTANTIATE_TEST_SUITE_P(FakeServerCompression, FakeServerInsertTest,
                         ::testing::Values(CompressionMethod::kNone, CompressionMethod::kLz4,
                                           CompressionMethod::kZstd),
                         [](const auto& p) {
                           switch (p.param) {
                             case CompressionMethod::kNone:
                               return "Raw";
                             case CompressionMethod::kLz4:
                               return "Lz4";
                             default:
                               return "Zstd";
                           }
                         });

struct MismatchCase {
  std::string name;
  std::vector<std::pair<std::string, std::string>> header;
  std::string error;
};

void PrintTo(const MismatchCase& c, std::ostream* os) { *os << c.name; }

class FakeServerInsertMismatchTest : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(FakeServerInsertMismatchTest, SendsNoRowAndStaysUsable) {
  FakeServer server({.revision = kOurRevision});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData, BytesAre(ExpectedEmptyData(false)));
  server.Send(DataPacket(HeaderBlock(GetParam().header), kOurRevision));
  // The only Data packet after the header is the empty one that ends the INSERT.
  server.ExpectPacket(ClientPacket::kData, BytesAre(ExpectedEmptyData(false)));
  server.Send(ProfileEventsPacket(kOurRevision, {{.name = "InsertQuery", .value = 1}}));
  server.Send(EndOfStreamPacket());
  server.ExpectPacket(ClientPacket::kPing);
  server.Send(PongPacket());
  server.Start();

  auto conn = Connection::Connect(OptionsFor(server));
  ASSERT_TRUE(conn.ok()) << conn.status();
  const Block block = InsertBlock();
  const Block* blocks[] = {&block};
  absl::Status status = (*conn)->Insert({.query = "INSERT INTO t VALUES"}, blocks);
  ExpectStatus(status, absl::StatusCode::kInvalidArgument, GetParam().error);
  EXPECT_TRUE((*conn)->usable());
  EXPECT_TRUE((*conn)->Ping().ok());
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

INSTANTIATE_TEST_SUITE_P(
    FakeServerMismatches, FakeServerInsertMismatchTest,
    ::testing::Values(MismatchCase{"Name", {{"id", "UInt64"}, {"name", "String"}}, "'name'"},
                      MismatchCase{"Type", {{"id", "UInt32"}, {"s", "String"}}, "UInt32"},
                      MismatchCase{"Count", {{"id", "UInt64"}}, "1"}),
    [](const auto& p) { return p.param.name; });

TEST(FakeServerTest, AcceptsSequentialConnections) {
  FakeServer server({.revision = kOurRevision});
  server.Handshake().ExpectPacket(ClientPacket::kPing).Send(PongPacket());
  server.AcceptNext();
  server.Handshake().ExpectPacket(ClientPacket::kPing).Send(PongPacket());
  server.Start();
  for (int i = 0; i < 2; ++i) {
    auto conn = Connection::Connect(OptionsFor(server));
    ASSERT_TRUE(conn.ok()) << conn.status();
    EXPECT_TRUE((*conn)->Ping().ok());
  }
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

TEST(FakeServerTest, ReportsUnexpectedClientPackets) {
  FakeServer server({.revision = kOurRevision});
  server.Handshake().ExpectPacket(ClientPacket::kQuery);
  server.Start();
  auto conn = Connection::Connect(OptionsFor(server));
  ASSERT_TRUE(conn.ok()) << conn.status();
  // A Cancel where the script wants a Query: the script fails and says why.
  EXPECT_TRUE((*conn)->SendCancel().ok());
  absl::Status status = server.Wait();
  ExpectStatus(status, absl::StatusCode::kInvalidArgument, "expected client Query (code 1)");
}

}  // namespace
}  // namespace chgate::clickhouse::testing

namespace chgate::clickhouse::testing {
namespace {

TEST(PasswordFileTest, EachNewConnectionSendsTheFilesCurrentPassword) {
  chgate::testing::TestPki dir;  // a temporary directory
  dir.Write("password", "first-secret\n");
  auto file = SecretFile::Open(dir.Path("password"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->Get(), "first-secret");

  auto hello_has = [](std::string password) {
    return [password](std::string_view bytes) {
      EXPECT_NE(bytes.find(password), std::string_view::npos) << "Hello without " << password;
    };
  };
  FakeServer server({.revision = kOurRevision});
  server.ExpectPacket(ClientPacket::kHello, hello_has("first-secret"))
      .Send(ServerHelloPacket(kOurRevision))
      .ExpectPacket(ClientPacket::kAddendum)
      .AcceptNext()
      .ExpectPacket(ClientPacket::kHello, hello_has("second-secret"))
      .Send(ServerHelloPacket(kOurRevision))
      .ExpectPacket(ClientPacket::kAddendum);
  server.Start();
  ConnectionOptions options = OptionsFor(server);
  options.password = "ignored when a file is set";
  options.password_file = *file;
  auto first = Connection::Connect(options);
  ASSERT_TRUE(first.ok()) << first.status();
  // Rotation as a Secret volume does it: the file is replaced, not edited.
  dir.Write("password", "second-secret\n");
  auto second = Connection::Connect(options);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
  EXPECT_EQ((*file)->reloads(), 1u);

  // A changed file that cannot be read keeps the last password.
  std::filesystem::remove(dir.Path("password"));
  EXPECT_EQ((*file)->Get(), "second-secret");
  EXPECT_FALSE(SecretFile::Open(dir.Path("password")).ok());
}

}  // namespace
}  // namespace chgate::clickhouse::testing
