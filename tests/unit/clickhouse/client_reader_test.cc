// ClientPacketReader and the client-packet readers: what our writers send is read back at every
// revision gate (ClientInfo, settings in both encodings, parameters, Addendum), and malformed
// client streams are refused.
#include "server/clickhouse/protocol/client_reader.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "server/clickhouse/block.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/compression/frame.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/clickhouse/protocol/revision.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/gather.h"
#include "tests/unit/clickhouse/test_util.h"
#include "text/trace_context.h"

namespace chgate::clickhouse {
namespace {

// The local 18.16 server's revision, the oldest chgate is tested against live.
constexpr uint64_t kRevision1816 = 54412;

using ::chgate::clickhouse::testing::Hex;

HelloParams TestClient(uint64_t revision) {
  HelloParams h;
  h.client_name = "chgate-test";
  h.version_major = 2;
  h.version_minor = 3;
  h.version_patch = 4;
  h.revision = revision;
  h.database = "db";
  h.user = "alice";
  h.password = "secret";
  h.quota_key = "qk";
  h.os_user = "me";
  h.client_hostname = "host";
  return h;
}

std::string Written(const std::function<void(GatherWriter&)>& write) {
  GatherWriter w;
  write(w);
  return w.ToString();
}

// Reads `bytes` as a client stream that starts after the Hello, at `revision`.
absl::StatusOr<ClientPacket> ReadOnePacket(const std::string& bytes, uint64_t revision,
                                           size_t* consumed = nullptr) {
  MemoryReadBuffer in(bytes);
  ClientPacketReader reader(&in, kMaxClientReaderRevision);
  reader.set_revision(revision);
  absl::StatusOr<ClientPacket*> p = reader.Next();
  if (!p.ok()) return p.status();
  if (consumed != nullptr) *consumed = in.position();
  return **p;
}

TEST(ClientHelloTest, ReadsWhatWriteHelloWrites) {
  const HelloParams sent = TestClient(revision::kClient);
  const std::string bytes = Written([&](GatherWriter& w) { WriteHello(sent, w); });
  MemoryReadBuffer in(bytes);
  absl::StatusOr<HelloParams> got = ReadClientHello(in);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->client_name, "chgate-test");
  EXPECT_EQ(got->version_major, 2u);
  EXPECT_EQ(got->version_minor, 3u);
  EXPECT_EQ(got->revision, 54460u);
  EXPECT_EQ(got->database, "db");
  EXPECT_EQ(got->user, "alice");
  EXPECT_EQ(got->password, "secret");
  // Not part of the Hello.
  EXPECT_EQ(got->version_patch, 0u);
  EXPECT_EQ(got->quota_key, "");
  EXPECT_TRUE(in.AtEnd());
}

TEST(ClientHelloTest, OtherFirstPacketIsDataLoss) {
  MemoryReadBuffer in(std::string_view("\x04", 1));  // Ping
  EXPECT_EQ(ReadClientHello(in).status().code(), absl::StatusCode::kDataLoss);
}

TEST(ClientHelloTest, InterserverAuthenticationIsUnimplemented) {
  HelloParams h = TestClient(revision::kClient);
  h.user = " INTERSERVER SECRET ";
  h.password = "";
  const std::string bytes = Written([&](GatherWriter& w) { WriteHello(h, w); });
  MemoryReadBuffer in(bytes);
  EXPECT_EQ(ReadClientHello(in).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(ClientAddendumTest, FieldsFollowTheRevision) {
  struct Case {
    uint64_t revision;
    size_t size;
  };
  for (const Case& c :
       {Case{revision::kAddendum - 1, 0}, Case{revision::kAddendum, 3},
        Case{revision::kChunkedPackets, 25}, Case{revision::kVersionedParallelReplicas, 26}}) {
    SCOPED_TRACE(c.revision);
    const std::string bytes = Written([&](GatherWriter& w) { WriteAddendum(c.revision, "qk", w); });
    EXPECT_EQ(bytes.size(), c.size);
    MemoryReadBuffer in(bytes);
    ClientAddendum a;
    ASSERT_TRUE(ReadAddendum(in, c.revision, &a).ok());
    EXPECT_EQ(in.position(), bytes.size());
    EXPECT_EQ(a.quota_key, c.revision >= revision::kAddendum ? "qk" : "");
    EXPECT_EQ(a.proto_send_chunked, c.revision >= revision::kChunkedPackets ? "notchunked" : "");
    EXPECT_EQ(a.proto_recv_chunked, c.revision >= revision::kChunkedPackets ? "notchunked" : "");
  }
}

TEST(ClientQueryTest, ReadsWhatWriteQueryWritesAtEveryRevisionGate) {
  for (uint64_t revision :
       {revision::kClientInfo, revision::kQuotaKeyInClientInfo, revision::kVersionPatch,
        kRevision1816, revision::kSettingsAsStrings, revision::kInterserverSecret,
        revision::kOpenTelemetry, revision::kDistributedDepth, revision::kInitialQueryStartTime,
        revision::kParallelReplicas, revision::kParameters, revision::kClient}) {
    SCOPED_TRACE(revision);
    const HelloParams client = TestClient(revision::kClient);
    QueryParams q;
    q.query_id = "qid";
    q.query = "SELECT {p:String}";
    q.stage = QueryStage::kWithMergeableState;
    q.compression = true;
    q.settings = {{.name = "max_threads", .value = "4"},
                  {.name = "send_logs_level", .value = "trace"}};
    if (revision >= revision::kParameters) q.parameters = {{"p", "it's"}};
    const std::string bytes =
        Written([&](GatherWriter& w) { ASSERT_TRUE(WriteQuery(q, client, revision, w).ok()); });
    size_t consumed = 0;
    absl::StatusOr<ClientPacket> p = ReadOnePacket(bytes, revision, &consumed);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(consumed, bytes.size());
    ASSERT_EQ(p->type, ClientPacketType::kQuery);
    EXPECT_EQ(p->query.query_id, "qid");
    EXPECT_EQ(p->query.query, "SELECT {p:String}");
    EXPECT_EQ(p->query.stage, QueryStage::kWithMergeableState);
    EXPECT_TRUE(p->query.compression);
    ASSERT_EQ(p->query.settings.size(), 2u);
    EXPECT_EQ(p->query.settings[0].name, "max_threads");
    EXPECT_EQ(p->query.settings[0].value, "4");
    EXPECT_EQ(p->query.settings[1].value, "trace");
    EXPECT_EQ(p->query.parameters, q.parameters);
    const ClientInfo& ci = p->client_info;
    EXPECT_EQ(ci.query_kind, ClientInfo::kQueryKindInitial);
    EXPECT_EQ(ci.initial_address, "0.0.0.0:0");
    EXPECT_EQ(ci.interface, ClientInfo::kInterfaceTcp);
    EXPECT_EQ(ci.os_user, "me");
    EXPECT_EQ(ci.client_hostname, "host");
    EXPECT_EQ(ci.client_name, "chgate-test");
    EXPECT_EQ(ci.client_version_major, 2u);
    EXPECT_EQ(ci.client_version_minor, 3u);
    EXPECT_EQ(ci.client_tcp_protocol_version, 54460u);
    EXPECT_EQ(ci.quota_key, revision >= revision::kQuotaKeyInClientInfo ? "qk" : "");
    EXPECT_EQ(ci.client_version_patch, revision >= revision::kVersionPatch ? 4u : 0u);
    EXPECT_FALSE(ci.has_trace_context);
  }
}

TEST(ClientQueryTest, BinarySettingsBecomeText) {
  QueryParams q;
  q.query = "SELECT 1";
  q.settings = {{.name = "max_block_size", .value = "100000"},
                {.name = "extremes", .value = "true"},
                {.name = "network_zstd_compression_level", .value = "-5"},
                {.name = "totals_auto_threshold", .value = "0.3"},
                {.name = "network_compression_method", .value = "zstd"}};
  const std::string bytes = Written([&](GatherWriter& w) {
    ASSERT_TRUE(WriteQuery(q, TestClient(kRevision1816), kRevision1816, w).ok());
  });
  // -5 travels as zigzag VarInt 9.
  EXPECT_NE(Hex(bytes).find(Hex("\x1enetwork_zstd_compression_level\x09")), std::string::npos);
  absl::StatusOr<ClientPacket> p = ReadOnePacket(bytes, kRevision1816);
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<std::pair<std::string, std::string>> got;
  for (const Setting& s : p->query.settings) got.emplace_back(s.name, s.value);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, std::string>>{
                     {"max_block_size", "100000"},
                     {"extremes", "1"},
                     {"network_zstd_compression_level", "-5"},
                     {"totals_auto_threshold", "0.3"},
                     {"network_compression_method", "zstd"}}));
}

TEST(ClientQueryTest, UnknownBinarySettingFailsClearly) {
  // Query "" | ClientInfo kind 0 | setting "no_such_setting" = 1 | ...
  GatherWriter w;
  w.WriteVarUInt(static_cast<uint64_t>(ClientCode::kQuery));
  w.WriteString("");
  w.WriteFixed<uint8_t>(0);
  w.WriteString("no_such_setting");
  w.WriteVarUInt(1);
  absl::StatusOr<ClientPacket> p = ReadOnePacket(w.ToString(), kRevision1816);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("no_such_setting"), std::string_view::npos);
  EXPECT_NE(p.status().message().find(absl::StrCat(revision::kSettingsAsStrings)),
            std::string_view::npos);
}

TEST(ClientQueryTest, SettingFlagsSurviveFrom54429) {
  QueryParams q;
  q.query = "SELECT 1";
  q.settings = {{.name = "anything_at_all", .value = "x", .important = true},
                {.name = "custom_tag", .value = "'v'", .custom = true}};
  const std::string bytes = Written([&](GatherWriter& w) {
    ASSERT_TRUE(WriteQuery(q, TestClient(revision::kClient), revision::kSettingsAsStrings, w).ok());
  });
  absl::StatusOr<ClientPacket> p = ReadOnePacket(bytes, revision::kSettingsAsStrings);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->query.settings.size(), 2u);
  EXPECT_TRUE(p->query.settings[0].important);
  EXPECT_FALSE(p->query.settings[0].custom);
  EXPECT_EQ(p->query.settings[0].value, "x");
  EXPECT_FALSE(p->query.settings[1].important);
  EXPECT_TRUE(p->query.settings[1].custom);
  EXPECT_EQ(p->query.settings[1].value, "'v'");
}

TEST(ClientQueryTest, ParametersAreUnquoted) {
  QueryParams q;
  q.query = "SELECT {a:String}, {b:String}, {c:Nullable(String)}";
  q.parameters = {{"a", "x'y\\z"}, {"b", std::string("tab\tnl\nnul\0end", 15)}, {"c", "\\N"}};
  const std::string bytes = Written([&](GatherWriter& w) {
    ASSERT_TRUE(WriteQuery(q, TestClient(revision::kClient), revision::kClient, w).ok());
  });
  EXPECT_NE(bytes.find("'x\\'y\\\\z'"), std::string::npos);
  absl::StatusOr<ClientPacket> p = ReadOnePacket(bytes, revision::kClient);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->query.parameters, q.parameters);
}

TEST(ClientQueryTest, MalformedParameterLiteralIsDataLoss) {
  for (const char* literal : {"abc", "'abc", "'a'b'", "'ends in escape\\'", "'"}) {
    SCOPED_TRACE(literal);
    GatherWriter w;
    w.WriteVarUInt(static_cast<uint64_t>(ClientCode::kQuery));
    w.WriteString("");
    w.WriteFixed<uint8_t>(0);  // ClientInfo: no query
    w.WriteString("");         // no settings
    w.WriteString("");         // interserver secret
    w.WriteVarUInt(2);
    w.WriteVarUInt(0);
    w.WriteString("SELECT {p:String}");
    w.WriteString("p");
    w.WriteVarUInt(2);
    w.WriteString(literal);
    w.WriteString("");
    EXPECT_EQ(ReadOnePacket(w.ToString(), revision::kClient).status().code(),
              absl::StatusCode::kDataLoss);
  }
}

// ClientInfo fields no writer of ours produces: HTTP interface, trace context, script numbers,
// JWT, and an empty ClientInfo.
TEST(ClientInfoTest, ReadsEveryFieldUpToTheReaderLimit) {
  GatherWriter w;
  w.WriteFixed<uint8_t>(2);  // secondary
  w.WriteString("init-user");
  w.WriteString("init-id");
  w.WriteString("10.0.0.1:9000");
  w.WriteFixed<uint64_t>(1700000000000000);
  w.WriteFixed<uint8_t>(2);  // HTTP
  w.WriteFixed<uint8_t>(1);  // GET
  w.WriteString("curl/8");
  w.WriteString("1.2.3.4");  // 54443
  w.WriteString("ref");      // 54447
  w.WriteString("quota");
  w.WriteVarUInt(3);  // distributed_depth
  // no patch: HTTP
  w.WriteFixed<uint8_t>(1);  // trace context
  w.WriteFixed<uint64_t>(0x1111);
  w.WriteFixed<uint64_t>(0x2222);
  w.WriteFixed<uint64_t>(0x3333);
  w.WriteString("state");
  w.WriteFixed<uint8_t>(1);
  w.WriteVarUInt(1);  // parallel replicas
  w.WriteVarUInt(2);
  w.WriteVarUInt(3);
  w.WriteVarUInt(7);  // 54475: script numbers
  w.WriteVarUInt(8);
  w.WriteFixed<uint8_t>(1);  // 54476: JWT
  w.WriteString("jwt");
  const std::string bytes = w.ToString();
  MemoryReadBuffer in(bytes);
  ClientInfo ci;
  ASSERT_TRUE(ReadClientInfo(in, kMaxClientReaderRevision, &ci).ok());
  EXPECT_EQ(in.position(), bytes.size());
  EXPECT_EQ(ci.query_kind, ClientInfo::kQueryKindSecondary);
  EXPECT_EQ(ci.initial_user, "init-user");
  EXPECT_EQ(ci.initial_query_id, "init-id");
  EXPECT_EQ(ci.initial_address, "10.0.0.1:9000");
  EXPECT_EQ(ci.initial_query_start_time_us, 1700000000000000u);
  EXPECT_EQ(ci.interface, ClientInfo::kInterfaceHttp);
  EXPECT_EQ(ci.http_method, 1);
  EXPECT_EQ(ci.http_user_agent, "curl/8");
  EXPECT_EQ(ci.forwarded_for, "1.2.3.4");
  EXPECT_EQ(ci.http_referer, "ref");
  EXPECT_EQ(ci.quota_key, "quota");
  EXPECT_EQ(ci.distributed_depth, 3u);
  EXPECT_TRUE(ci.has_trace_context);
  EXPECT_EQ(ci.trace_id_high, 0x1111u);
  EXPECT_EQ(ci.trace_id_low, 0x2222u);
  EXPECT_EQ(ci.span_id, 0x3333u);
  EXPECT_EQ(ci.tracestate, "state");
  EXPECT_EQ(ci.trace_flags, 1);
  EXPECT_EQ(ci.collaborate_with_initiator, 1u);
  EXPECT_EQ(ci.count_participating_replicas, 2u);
  EXPECT_EQ(ci.number_of_current_replica, 3u);
  EXPECT_EQ(ci.script_query_number, 7u);
  EXPECT_EQ(ci.script_line_number, 8u);
  EXPECT_TRUE(ci.has_jwt);
  EXPECT_EQ(ci.jwt, "jwt");

  // Every truncation fails.
  for (size_t n = 0; n < bytes.size(); ++n) {
    MemoryReadBuffer cut(std::string_view(bytes).substr(0, n));
    ClientInfo partial;
    EXPECT_FALSE(ReadClientInfo(cut, kMaxClientReaderRevision, &partial).ok()) << n;
  }
}

TEST(ClientInfoTest, QueryKindNoneEndsTheClientInfo) {
  MemoryReadBuffer in(std::string_view("\x00\x07", 2));
  ClientInfo ci;
  ASSERT_TRUE(ReadClientInfo(in, revision::kClient, &ci).ok());
  EXPECT_EQ(in.position(), 1u);
  EXPECT_EQ(ci.query_kind, ClientInfo::kQueryKindNone);
}

std::string EmptyBlockBytes(uint64_t revision) {
  GatherWriter w;
  WriteBlock(Block(), revision, w);
  return w.ToString();
}

std::string Lz4Frames(const std::string& body) {
  FrameCompressor c(CompressionMethod::kLz4);
  ByteBuffer out;
  const std::span<const char> piece(body.data(), body.size());
  EXPECT_TRUE(c.Compress(std::span<const std::span<const char>>(&piece, 1), &out).ok());
  return std::string(out.view());
}

// A whole session as a client sends it, at a revision with the Addendum.
TEST(ClientPacketReaderTest, ReadsASessionAndNegotiatesTheRevision) {
  const HelloParams client = TestClient(revision::kChunkedPackets);
  const uint64_t server_revision = revision::kClient;
  const uint64_t r = revision::kClient;
  Block rows;
  auto ids = CreateColumn("UInt64");
  ASSERT_TRUE(ids.ok());
  static_cast<ColumnFixed&>(**ids).Append<uint64_t>(42);
  rows.AddColumn("id", *ids);

  GatherWriter w;
  WriteHello(client, w);
  WriteAddendum(r, "qk", w);
  w.WriteVarUInt(static_cast<uint64_t>(ClientCode::kPing));
  QueryParams q;
  q.query = "INSERT INTO t VALUES";
  q.compression = true;
  ASSERT_TRUE(WriteQuery(q, client, r, w).ok());
  WriteDataHeader(r, w);
  w.Write(Lz4Frames(EmptyBlockBytes(r)));
  WriteDataHeader(r, w);
  GatherWriter body;
  WriteBlock(rows, r, body);
  w.Write(Lz4Frames(body.ToString()));
  WriteDataHeader(r, w);
  w.Write(Lz4Frames(EmptyBlockBytes(r)));
  w.WriteVarUInt(static_cast<uint64_t>(ClientCode::kCancel));
  w.WriteVarUInt(6);  // KeepAlive
  const std::string bytes = w.ToString();

  MemoryReadBuffer in(bytes);
  ClientPacketReader reader(&in, server_revision);
  std::vector<ClientPacketType> types;
  std::vector<size_t> data_rows;
  while (!in.AtEnd()) {
    absl::StatusOr<ClientPacket*> p = reader.Next();
    ASSERT_TRUE(p.ok()) << p.status() << " at " << in.position();
    types.push_back((*p)->type);
    if ((*p)->type == ClientPacketType::kHello) {
      EXPECT_EQ(reader.revision(), r);  // min(54470, revision::kClient)
    }
    if ((*p)->type == ClientPacketType::kAddendum) {
      EXPECT_EQ((*p)->addendum.quota_key, "qk");
      EXPECT_EQ((*p)->addendum.proto_send_chunked,
                "");  // chunked packets are above the negotiated revision
    }
    if ((*p)->type == ClientPacketType::kQuery) {
      EXPECT_TRUE(reader.compressed());
    }
    if ((*p)->type == ClientPacketType::kData) data_rows.push_back((*p)->block.rows());
  }
  EXPECT_EQ(in.position(), bytes.size());
  EXPECT_EQ(types,
            (std::vector<ClientPacketType>{
                ClientPacketType::kHello, ClientPacketType::kAddendum, ClientPacketType::kPing,
                ClientPacketType::kQuery, ClientPacketType::kData, ClientPacketType::kData,
                ClientPacketType::kData, ClientPacketType::kCancel, ClientPacketType::kKeepAlive}));
  EXPECT_EQ(data_rows, (std::vector<size_t>{0, 1, 0}));
}

TEST(ClientPacketReaderTest, NoAddendumBelow54458) {
  GatherWriter w;
  WriteHello(TestClient(revision::kClient), w);
  w.WriteVarUInt(static_cast<uint64_t>(ClientCode::kPing));
  const std::string bytes = w.ToString();
  MemoryReadBuffer in(bytes);
  ClientPacketReader reader(&in, kRevision1816);
  ASSERT_TRUE(reader.Next().ok());
  EXPECT_EQ(reader.revision(), 54412u);
  absl::StatusOr<ClientPacket*> p = reader.Next();
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->type, ClientPacketType::kPing);
}

TEST(ClientPacketReaderTest, CorruptCompressedDataIsDataLoss) {
  const uint64_t r = kRevision1816;
  GatherWriter w;
  QueryParams q;
  q.query = "INSERT INTO t VALUES";
  q.compression = true;
  ASSERT_TRUE(WriteQuery(q, TestClient(r), r, w).ok());
  WriteDataHeader(r, w);
  std::string frame = Lz4Frames(EmptyBlockBytes(r));
  frame[frame.size() - 1] ^= 0x40;
  w.Write(frame);
  const std::string bytes = w.ToString();
  MemoryReadBuffer in(bytes);
  ClientPacketReader reader(&in, r);
  reader.set_revision(r);
  ASSERT_TRUE(reader.Next().ok());
  EXPECT_EQ(reader.Next().status().code(), absl::StatusCode::kDataLoss);
}

TEST(ClientPacketReaderTest, ProtocolViolationsAreRefused) {
  struct Case {
    std::string bytes;
    bool after_hello;
    absl::StatusCode code;
  };
  const std::string hello =
      Written([](GatherWriter& w) { WriteHello(TestClient(kRevision1816), w); });
  const std::string query_head = Written([](GatherWriter& w) {
    w.WriteVarUInt(1);
    w.WriteString("");
    w.WriteFixed<uint8_t>(0);
    w.WriteString("");  // settings end
  });
  for (const Case& c : {
           Case{"\x04", false, absl::StatusCode::kDataLoss},                  // Ping before Hello
           Case{hello, true, absl::StatusCode::kDataLoss},                    // second Hello
           Case{"\x63", true, absl::StatusCode::kDataLoss},                   // code 99
           Case{"\x05", true, absl::StatusCode::kUnimplemented},              // TablesStatusRequest
           Case{"\x07", true, absl::StatusCode::kUnimplemented},              // Scalar
           Case{query_head + "\x09", true, absl::StatusCode::kDataLoss},      // stage 9
           Case{query_head + "\x02\x02", true, absl::StatusCode::kDataLoss},  // compression 2
           Case{query_head + std::string("\x02\x00", 2), true,
                absl::StatusCode::kOutOfRange},  // no query text
       }) {
    SCOPED_TRACE(Hex(c.bytes));
    MemoryReadBuffer in(c.bytes);
    ClientPacketReader reader(&in, kRevision1816);
    if (c.after_hello) reader.set_revision(kRevision1816);
    EXPECT_EQ(reader.Next().status().code(), c.code);
  }
}

TEST(ClientPacketReaderTest, EveryTruncationOfAQueryFails) {
  QueryParams q;
  q.query = "SELECT 1";
  q.settings = {{.name = "max_threads", .value = "2"}};
  const std::string bytes = Written([&](GatherWriter& w) {
    ASSERT_TRUE(WriteQuery(q, TestClient(kRevision1816), kRevision1816, w).ok());
  });
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(ReadOnePacket(bytes.substr(0, n), kRevision1816).ok()) << n;
  }
}

// The W3C specification's example traceparent.
constexpr char kTraceparent[] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
using text::ParseTraceparent;

// Golden bytes from ClickHouse's ClientInfo layout at 54442+: flag 1, the trace id as its UUID
// (two UInt64 LE: the first 16 hex digits, then the last 16), the span id UInt64 LE, tracestate
// String, flags UInt8; then the parallel-replicas fields (three VarUInt 0) at 54460.
TEST(TraceContextTest, QueryCarriesTheTraceInClientInfoFrom54442) {
  QueryParams q;
  q.query_id = "qid";
  q.query = "INSERT INTO t VALUES";
  q.trace = ParseTraceparent(kTraceparent, "k=v");
  const uint64_t revision = 54460;
  const std::string bytes = Written(
      [&](GatherWriter& w) { ASSERT_TRUE(WriteQuery(q, TestClient(revision), revision, w).ok()); });
  const std::string expected_trace =
      "01"                // has trace context
      "dd43cd161965f70a"  // 0x0af7651916cd43dd LE
      "9c31801c21eb4884"  // 0x8448eb211c80319c LE
      "31332069716badb7"  // span 0xb7ad6b7169203331 LE
      "036b3d76"          // "k=v"
      "01"                // sampled
      "000000";           // parallel replicas
  EXPECT_NE(Hex(bytes).find(expected_trace), std::string::npos) << Hex(bytes);
  absl::StatusOr<ClientPacket> p = ReadOnePacket(bytes, revision);
  ASSERT_TRUE(p.ok()) << p.status();
  const ClientInfo& ci = p->client_info;
  ASSERT_TRUE(ci.has_trace_context);
  EXPECT_EQ(ci.trace_id_high, 0x0af7651916cd43ddu);
  EXPECT_EQ(ci.trace_id_low, 0x8448eb211c80319cu);
  EXPECT_EQ(ci.span_id, 0xb7ad6b7169203331u);
  EXPECT_EQ(ci.tracestate, "k=v");
  EXPECT_EQ(ci.trace_flags, 1);
  // Without a trace the flag is 0 and nothing follows it.
  QueryParams plain = q;
  plain.trace.reset();
  const std::string plain_bytes = Written([&](GatherWriter& w) {
    ASSERT_TRUE(WriteQuery(plain, TestClient(revision), revision, w).ok());
  });
  EXPECT_EQ(bytes.size(), plain_bytes.size() + 16 + 8 + 4 + 1);
}

TEST(TraceContextTest, ServersBefore54442GetTheQueryWithoutIt) {
  QueryParams q;
  q.query = "SELECT 1";
  const std::string plain = Written([&](GatherWriter& w) {
    ASSERT_TRUE(WriteQuery(q, TestClient(kRevision1816), kRevision1816, w).ok());
  });
  q.trace = ParseTraceparent(kTraceparent);
  const std::string traced = Written([&](GatherWriter& w) {
    ASSERT_TRUE(WriteQuery(q, TestClient(kRevision1816), kRevision1816, w).ok());
  });
  EXPECT_EQ(Hex(traced), Hex(plain));
  const std::string at_54441 = Written(
      [&](GatherWriter& w) { ASSERT_TRUE(WriteQuery(q, TestClient(54441), 54441, w).ok()); });
  absl::StatusOr<ClientPacket> p = ReadOnePacket(at_54441, 54441);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->client_info.has_trace_context);
}

}  // namespace
}  // namespace chgate::clickhouse
