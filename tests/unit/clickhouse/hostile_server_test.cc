// The client against broken and hostile servers: every case must end with a clear error status
// within the client's timeouts, never a crash, a hang or a huge allocation, and a protocol
// error must leave the connection unusable (later calls fail with FailedPrecondition).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/connection.h"
#include "tests/unit/clickhouse/fake_server.h"
#include "tests/unit/clickhouse/test_util.h"

// ---- Largest single allocation ----
// A replacement operator new records the largest request while a test watches, so that a bogus
// length on the wire cannot go unnoticed just because the kernel overcommits. AddressSanitizer
// brings its own operator new (with checks we do not want to lose), so the watch is off there.
#if defined(__SANITIZE_ADDRESS__)
#define CHGATE_WATCH_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHGATE_WATCH_ALLOCATIONS 0
#endif
#endif
#ifndef CHGATE_WATCH_ALLOCATIONS
#define CHGATE_WATCH_ALLOCATIONS 1
#endif

namespace {
std::atomic<size_t> g_largest_allocation{0};

#if CHGATE_WATCH_ALLOCATIONS
void* CountedAllocate(size_t n) {
  size_t seen = g_largest_allocation.load(std::memory_order_relaxed);
  while (n > seen && !g_largest_allocation.compare_exchange_weak(seen, n)) {
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
#endif
}  // namespace

#if CHGATE_WATCH_ALLOCATIONS
void* operator new(size_t n) { return CountedAllocate(n); }
void* operator new[](size_t n) { return CountedAllocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
#endif

namespace chgate::clickhouse::testing {
namespace {

// No hostile input may make the client allocate more than this at once (its receive buffer is
// 1 MiB; columns reserve at most a few MiB ahead of the data).
constexpr size_t kAllocationLimit = size_t{32} << 20;
constexpr uint64_t kRev = 54460;

ConnectionOptions HostileOptions(const FakeServer& server,
                                 CompressionMethod compression = CompressionMethod::kNone) {
  return {.host = "127.0.0.1",
          .port = server.port(),
          .compression = compression,
          .connect_timeout = absl::Seconds(5),
          .handshake_timeout = absl::Milliseconds(300),
          .read_timeout = absl::Milliseconds(300),
          .write_timeout = absl::Seconds(5)};
}

void ExpectStatus(const absl::Status& status, absl::StatusCode code, std::string_view text) {
  EXPECT_EQ(status.code(), code) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), absl::string_view(text.data(), text.size())))
      << "'" << text << "' not in " << status;
}

absl::Status SelectAll(Connection& conn) {
  return conn.Select({.query = "SELECT * FROM t"}, [](const Block&) { return absl::OkStatus(); });
}

// After a protocol error nothing more may be sent or read on the connection.
void ExpectBroken(Connection& conn) {
  EXPECT_FALSE(conn.usable());
  EXPECT_EQ(conn.Ping().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(SelectAll(conn).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(conn.SendQuery({.query = "SELECT 1"}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(conn.ReceivePacket().status().code(), absl::StatusCode::kFailedPrecondition);
  const Block block = MakeBlock({{"id", UInt64Column({1})}});
  const Block* blocks[] = {&block};
  EXPECT_EQ(conn.Insert({.query = "INSERT INTO t VALUES"}, blocks).code(),
            absl::StatusCode::kFailedPrecondition);
}

// Watches the largest allocation made while it is alive.
class AllocationWatch {
 public:
  AllocationWatch() { g_largest_allocation.store(0); }
  ~AllocationWatch() {
    if (CHGATE_WATCH_ALLOCATIONS) {
      EXPECT_LT(g_largest_allocation.load(), kAllocationLimit)
          << "the client allocated " << g_largest_allocation.load() << " bytes at once";
    }
  }
};

std::string BlockInfo() { return Bytes().VarUInt(1).U8(0).VarUInt(2).I32(-1).VarUInt(0); }

// A Data packet whose body is `body` (uncompressed).
std::string RawData(const std::string& body) { return Bytes().VarUInt(1).Str("").Raw(body); }

// A frame header: checksum (not matching), method, sizes.
std::string FrameHead(uint8_t method, uint32_t compressed_size, uint32_t decompressed_size) {
  return Bytes()
      .Raw(std::string(16, '\x5a'))
      .U8(method)
      .U32(compressed_size)
      .U32(decompressed_size);
}

// A valid LZ4 frame of `body` with its checksum bytes flipped at `flip` (none if npos).
std::string Lz4Frame(std::string_view body, size_t flip = std::string::npos) {
  std::string frame = CompressFrame(body, CompressionMethod::kLz4);
  if (flip != std::string::npos) frame[flip] = static_cast<char>(frame[flip] ^ 0x01);
  return frame;
}

// A one-row UInt8 body.
std::string OneRowBody() {
  return Bytes().Raw(BlockInfo()).VarUInt(1).VarUInt(1).Str("x").Str("UInt8").U8(0).U8(7);
}

// ---- The handshake ----

TEST(HostileServerTest, EveryTruncatedServerHelloFailsWithUnavailable) {
  const std::string hello = ServerHelloPacket(kRev);
  for (size_t n = 0; n < hello.size(); ++n) {
    SCOPED_TRACE(absl::StrCat("first ", n, " bytes of ServerHello"));
    FakeServer server({.revision = kRev});
    server.ExpectPacket(ClientPacket::kHello).Send(hello.substr(0, n)).Close();
    server.Start();
    AllocationWatch watch;
    auto conn = Connection::Connect(HostileOptions(server));
    ASSERT_FALSE(conn.ok());
    EXPECT_EQ(conn.status().code(), absl::StatusCode::kUnavailable) << conn.status();
    EXPECT_TRUE(server.Wait().ok()) << server.Wait();
  }
}

TEST(HostileServerTest, ServerThatNeverAnswersHelloTimesOut) {
  FakeServer server({.revision = kRev});
  server.ExpectPacket(ClientPacket::kHello).Stall();
  server.Start();
  auto conn = Connection::Connect(HostileOptions(server));
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(conn.status().code(), absl::StatusCode::kDeadlineExceeded) << conn.status();
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

TEST(HostileServerTest, NotAClickHouseServer) {
  FakeServer server({.revision = kRev});
  server.ExpectPacket(ClientPacket::kHello).Send("HTTP/1.0 400 Bad Request\r\n\r\n").Stall();
  server.Start();
  auto conn = Connection::Connect(HostileOptions(server));
  ASSERT_FALSE(conn.ok());
  ExpectStatus(conn.status(), absl::StatusCode::kDataLoss,
               "expected server Hello, got packet code 72");
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

TEST(HostileServerTest, HugeStringInServerHello) {
  FakeServer server({.revision = kRev});
  server.ExpectPacket(ClientPacket::kHello)
      .Send(Bytes().VarUInt(0).VarUInt(uint64_t{1} << 40).Raw("Click"))
      .Stall();
  server.Start();
  AllocationWatch watch;
  auto conn = Connection::Connect(HostileOptions(server));
  ASSERT_FALSE(conn.ok());
  ExpectStatus(conn.status(), absl::StatusCode::kDataLoss, "exceeds the limit");
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

// ---- During a query ----

struct HostileCase {
  std::string name;
  bool compressed;
  std::string after_header;  // what the server sends after the header block
  bool close;                // then closes (true) or stalls (false)
  absl::StatusCode code;
  std::string text;  // part of the error message
};

std::vector<HostileCase> HostileCases() {
  const uint64_t kHuge = uint64_t{1} << 40;
  const std::string one_row = OneRowBody();
  std::vector<HostileCase> cases = {
      {"UnknownPacketCode", false, Bytes().VarUInt(99), false, absl::StatusCode::kDataLoss,
       "unknown server packet code 99"},
      {"TimezoneUpdateIsUnknownAt54460", false, Bytes().VarUInt(17).Str("UTC"), false,
       absl::StatusCode::kDataLoss, "unknown server packet code 17"},
      {"MalformedVarUInt", false, Bytes().Raw(std::string(10, '\xff')).U8(1), false,
       absl::StatusCode::kDataLoss, "malformed VarUInt"},
      {"UnknownTypeName", false,
       RawData(Bytes()
                   .Raw(BlockInfo())
                   .VarUInt(1)
                   .VarUInt(1)
                   .Str("x")
                   .Str("Frobnicate(8)")
                   .U8(0)
                   .U8(1)),
       false, absl::StatusCode::kUnimplemented, "Frobnicate"},
      {"MalformedTypeName", false,
       RawData(Bytes().Raw(BlockInfo()).VarUInt(1).VarUInt(1).Str("x").Str("Array(UInt8").U8(0)),
       false, absl::StatusCode::kInvalidArgument, "Array(UInt8"},
      {"ImplausibleColumnCount", false,
       RawData(Bytes().Raw(BlockInfo()).VarUInt(uint64_t{1} << 21).VarUInt(1)), false,
       absl::StatusCode::kDataLoss, "implausible block"},
      {"ImplausibleRowCount", false,
       RawData(Bytes().Raw(BlockInfo()).VarUInt(1).VarUInt(uint64_t{1} << 41)), false,
       absl::StatusCode::kDataLoss, "implausible block"},
      {"HugeRowCountOfFixedStrings", false,
       RawData(Bytes()
                   .Raw(BlockInfo())
                   .VarUInt(1)
                   .VarUInt(uint64_t{1} << 40)
                   .Str("x")
                   .Str("FixedString(1073741824)")
                   .U8(0)),
       false, absl::StatusCode::kDataLoss, "overflows"},
      {"UnknownBlockInfoField", false, RawData(Bytes().VarUInt(9).VarUInt(0).VarUInt(0)), false,
       absl::StatusCode::kDataLoss, "block info field 9"},
      {"StringOfTwoToTheFortyThenClose", false,
       RawData(Bytes()
                   .Raw(BlockInfo())
                   .VarUInt(1)
                   .VarUInt(1)
                   .Str("s")
                   .Str("String")
                   .U8(0)
                   .VarUInt(kHuge)
                   .Raw("abc")),
       true, absl::StatusCode::kDataLoss, "exceeds the limit"},
      {"ColumnNameOfTwoToTheForty", false,
       RawData(Bytes().Raw(BlockInfo()).VarUInt(1).VarUInt(1).VarUInt(kHuge).Raw("abc")), true,
       absl::StatusCode::kDataLoss, "exceeds the limit"},
      {"TableNameOfTwoToTheForty", false, Bytes().VarUInt(1).VarUInt(kHuge).Raw("abc"), true,
       absl::StatusCode::kDataLoss, "exceeds the limit"},
      {"ExceptionMessageOfTwoToTheForty", false,
       Bytes().VarUInt(2).I32(60).Str("DB::Exception").VarUInt(kHuge).Raw("abc"), true,
       absl::StatusCode::kDataLoss, "exceeds the limit"},
      {"TableColumnsOfTwoToTheForty", false, Bytes().VarUInt(11).Str("").VarUInt(kHuge).Raw("a"),
       true, absl::StatusCode::kDataLoss, "exceeds the limit"},
      {"LowCardinalityDictionaryOfTwoToTheForty", false,
       RawData(Bytes()
                   .Raw(BlockInfo())
                   .VarUInt(1)
                   .VarUInt(1)
                   .Str("lc")
                   .Str("LowCardinality(String)")
                   .U8(0)
                   .U64(1)        // version
                   .U64(0x200)    // UInt8 keys, additional keys
                   .U64(kHuge)),  // keys
       true, absl::StatusCode::kDataLoss, "LowCardinality dictionary"},
      {"LowCardinalityIndexOutsideDictionary", false,
       RawData(Bytes()
                   .Raw(BlockInfo())
                   .VarUInt(1)
                   .VarUInt(1)
                   .Str("lc")
                   .Str("LowCardinality(String)")
                   .U8(0)
                   .U64(1)
                   .U64(0x200)
                   .U64(1)
                   .Str("a")
                   .U64(1)
                   .U8(5)),
       false, absl::StatusCode::kDataLoss, "outside a dictionary"},
      {"DecreasingArrayOffsets", false,
       RawData(Bytes()
                   .Raw(BlockInfo())
                   .VarUInt(1)
                   .VarUInt(2)
                   .Str("a")
                   .Str("Array(UInt8)")
                   .U8(0)
                   .U64(5)
                   .U64(2)),
       false, absl::StatusCode::kDataLoss, "corrupt array offsets"},
      {"HugeArrayOffsetThenClose", false,
       RawData(Bytes()
                   .Raw(BlockInfo())
                   .VarUInt(1)
                   .VarUInt(1)
                   .Str("a")
                   .Str("Array(String)")
                   .U8(0)
                   .U64(uint64_t{1} << 39)
                   .Str("x")),
       true, absl::StatusCode::kUnavailable, "closed"},
      {"ExceptionsNestedTooDeeply", false,
       [] {
         Bytes b;
         b.VarUInt(2);
         for (int i = 0; i < 40; ++i) b.I32(1).Str("E").Str("m").Str("").U8(1);
         return b.str();
       }(),
       false, absl::StatusCode::kDataLoss, "nested too deeply"},
      {"TruncatedProgressThenClose", false, Bytes().VarUInt(3).VarUInt(1).U8(0x80), true,
       absl::StatusCode::kUnavailable, "closed"},
      {"ClosesAfterACompleteBlock", false, RawData(one_row), true, absl::StatusCode::kUnavailable,
       "closed"},
      {"StallsMidQuery", false, RawData(one_row), false, absl::StatusCode::kDeadlineExceeded,
       "timed out"},
      {"StallsInsideABlock", false, RawData(one_row.substr(0, one_row.size() - 1)), false,
       absl::StatusCode::kDeadlineExceeded, "timed out"},
      // Compression frames.
      {"WrongChecksum", true, Bytes().VarUInt(1).Str("").Raw(Lz4Frame(one_row, 3)), false,
       absl::StatusCode::kDataLoss, "checksum"},
      {"CorruptPayloadFailsTheChecksum", true,
       Bytes().VarUInt(1).Str("").Raw(Lz4Frame(one_row, 16 + 9 + 2)), false,
       absl::StatusCode::kDataLoss, "checksum"},
      {"CompressedSizeOverOneGiB", true,
       Bytes().VarUInt(1).Str("").Raw(FrameHead(0x82, (uint32_t{1} << 30) + 1, 10)).Raw("xyz"),
       false, absl::StatusCode::kDataLoss, "compressed_size"},
      {"CompressedSizeOfFourGiB", true,
       Bytes().VarUInt(1).Str("").Raw(FrameHead(0x82, 0xffffffff, 10)).Raw("xyz"), false,
       absl::StatusCode::kDataLoss, "compressed_size"},
      {"DecompressedSizeOverOneGiB", true,
       Bytes().VarUInt(1).Str("").Raw(FrameHead(0x82, 12, (uint32_t{1} << 30) + 1)).Raw("xyz"),
       false, absl::StatusCode::kDataLoss, "decompressed_size"},
      // At the limits: the frame must have arrived (and its checksum matched) before the
      // client allocates what its header claims.
      {"CompressedSizeOfOneGiBThenClose", true,
       Bytes().VarUInt(1).Str("").Raw(FrameHead(0x82, uint32_t{1} << 30, 10)).Raw("xyz"), true,
       absl::StatusCode::kUnavailable, "closed"},
      {"DecompressedSizeOfOneGiBInATinyFrame", true,
       Bytes().VarUInt(1).Str("").Raw(FrameHead(0x82, 12, uint32_t{1} << 30)).Raw("xyz"), false,
       absl::StatusCode::kDataLoss, "more than a payload of 3 bytes can hold"},
      {"CompressedSizeBelowHeader", true, Bytes().VarUInt(1).Str("").Raw(FrameHead(0x82, 8, 10)),
       false, absl::StatusCode::kDataLoss, "smaller than the 9-byte header"},
      {"StorageCodecMethod", true, Bytes().VarUInt(1).Str("").Raw(FrameHead(0x91, 12, 10)), false,
       absl::StatusCode::kDataLoss, "method byte 0x91"},
      {"TruncatedFrameThenClose", true,
       Bytes().VarUInt(1).Str("").Raw(Lz4Frame(one_row).substr(0, 30)), true,
       absl::StatusCode::kUnavailable, "closed"},
      {"BlockEndsBeforeItsFrame", true,
       Bytes().VarUInt(1).Str("").Raw(Lz4Frame(one_row + "trailing")), false,
       absl::StatusCode::kDataLoss, "before the end of its compression frame"},
  };
  // A block split over two frames is fine; check that the second frame is also verified.
  {
    const std::string first = Lz4Frame(one_row.substr(0, 5));
    const std::string second = Lz4Frame(one_row.substr(5), 0);
    cases.push_back({"WrongChecksumInSecondFrame", true,
                     Bytes().VarUInt(1).Str("").Raw(first).Raw(second), false,
                     absl::StatusCode::kDataLoss, "checksum"});
  }
  return cases;
}

void PrintTo(const HostileCase& c, std::ostream* os) { *os << c.name; }

class HostileServerQueryTest : public ::testing::TestWithParam<HostileCase> {};

TEST_P(HostileServerQueryTest, FailsClearlyAndBreaksTheConnection) {
  const HostileCase& c = GetParam();
  const auto frames =
      c.compressed ? std::optional<CompressionMethod>(CompressionMethod::kLz4) : std::nullopt;
  FakeServer server({.revision = kRev});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);
  server.Send(DataPacket(HeaderBlock({{"x", "UInt8"}}), kRev, frames));
  server.Send(c.after_header);
  if (c.close) {
    server.Close();
  } else {
    server.Stall();
  }
  server.Start();
  auto conn = Connection::Connect(
      HostileOptions(server, c.compressed ? CompressionMethod::kLz4 : CompressionMethod::kNone));
  ASSERT_TRUE(conn.ok()) << conn.status();
  {
    AllocationWatch watch;
    ExpectStatus(SelectAll(**conn), c.code, c.text);
  }
  ExpectBroken(**conn);
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

INSTANTIATE_TEST_SUITE_P(HostileServerCases, HostileServerQueryTest,
                         ::testing::ValuesIn(HostileCases()),
                         [](const auto& p) { return p.param.name; });

TEST(HostileServerTest, EveryTruncatedDataPacketFailsWithUnavailable) {
  for (const bool compressed : {false, true}) {
    const auto frames =
        compressed ? std::optional<CompressionMethod>(CompressionMethod::kLz4) : std::nullopt;
    Block block = MakeBlock({{"id", UInt64Column({1, 2, 3})}, {"s", StringColumn({"a", "", "c"})}});
    const std::string packet = DataPacket(block, kRev, frames);
    for (size_t n = 0; n < packet.size(); ++n) {
      SCOPED_TRACE(absl::StrCat(compressed ? "LZ4" : "raw", ", first ", n, " bytes"));
      FakeServer server({.revision = kRev});
      server.Handshake();
      server.ExpectPacket(ClientPacket::kQuery);
      server.ExpectPacket(ClientPacket::kData);
      server.Send(DataPacket(HeaderBlock({{"id", "UInt64"}, {"s", "String"}}), kRev, frames));
      server.Send(packet.substr(0, n));
      server.Close();
      server.Start();
      auto conn = Connection::Connect(
          HostileOptions(server, compressed ? CompressionMethod::kLz4 : CompressionMethod::kNone));
      ASSERT_TRUE(conn.ok()) << conn.status();
      EXPECT_EQ(SelectAll(**conn).code(), absl::StatusCode::kUnavailable);
      EXPECT_FALSE((*conn)->usable());
      EXPECT_TRUE(server.Wait().ok()) << server.Wait();
    }
  }
}

TEST(HostileServerTest, StallDuringInsertTimesOut) {
  FakeServer server({.revision = kRev});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);
  server.Stall();  // never sends the header block
  server.Start();
  auto conn = Connection::Connect(HostileOptions(server));
  ASSERT_TRUE(conn.ok()) << conn.status();
  const Block block = MakeBlock({{"id", UInt64Column({1})}});
  const Block* blocks[] = {&block};
  absl::Status status = (*conn)->Insert({.query = "INSERT INTO t VALUES"}, blocks);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  ExpectBroken(**conn);
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

TEST(HostileServerTest, UnexpectedPacketInsteadOfPong) {
  FakeServer server({.revision = kRev});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kPing);
  server.Send(EndOfStreamPacket());
  server.Stall();
  server.Start();
  auto conn = Connection::Connect(HostileOptions(server));
  ASSERT_TRUE(conn.ok()) << conn.status();
  ExpectStatus((*conn)->Ping(), absl::StatusCode::kDataLoss, "Pong");
  ExpectBroken(**conn);
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

TEST(HostileServerTest, CancelFromAnotherThreadUnblocksAStalledRead) {
  absl::Notification stalled;
  FakeServer server({.revision = kRev});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);
  server.Send(DataPacket(HeaderBlock({{"x", "UInt8"}}), kRev));
  server.Call([&] { stalled.Notify(); });
  server.Stall();
  server.Start();
  ConnectionOptions options = HostileOptions(server);
  // Long enough that only Cancel() can end the wait within the test's lifetime.
  options.read_timeout = absl::Seconds(120);
  auto conn = Connection::Connect(options);
  ASSERT_TRUE(conn.ok()) << conn.status();
  Connection* c = conn->get();
  std::thread canceller([&] {
    stalled.WaitForNotification();
    c->Cancel();
  });
  absl::Status status = SelectAll(*c);
  canceller.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  ExpectBroken(*c);
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

// ---- Regressions found by the fuzzers (inputs also in tests/fuzz/corpus/) ----

// type_name_fuzz: tuple element names that are not plain identifiers were printed bare, so the
// column's type name no longer parsed, and no longer matched the server's spelling (an INSERT
// into such a table was refused as a type mismatch).
TEST(HostileServerRegressionTest, TupleElementNamesThatNeedQuotingKeepTheirQuotes) {
  const std::string type = "Tuple(`a b` UInt8, `null` String, `x\\`y` Int8)";
  FakeServer server({.revision = kRev});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);
  server.Send(DataPacket(HeaderBlock({{"t", type}}), kRev));
  server.ExpectPacket(ClientPacket::kData, [&](std::string_view packet) {
    absl::StatusOr<Block> block = DecodeClientData(packet, kRev, false);
    ASSERT_TRUE(block.ok()) << block.status();
    ASSERT_EQ(block->column_count(), 1u);
    EXPECT_EQ(block->column(0).column->type_name(), type);
    EXPECT_EQ(BlockToTsv(*block), "(0,'',0)\n");
  });
  server.ExpectPacket(ClientPacket::kData);
  server.Send(EndOfStreamPacket());
  server.Start();
  auto conn = Connection::Connect(HostileOptions(server));
  ASSERT_TRUE(conn.ok()) << conn.status();
  Block block = HeaderBlock({{"t", type}});
  EXPECT_EQ(block.column(0).column->type_name(), type);
  block.column(0).column->AppendDefault();
  const Block* blocks[] = {&block};
  absl::Status status = (*conn)->Insert({.query = "INSERT INTO t VALUES"}, blocks);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

// block_fuzz: LowCardinality wrote a dictionary header for zero rows (the elements of a block
// of empty arrays), which ClickHouse does not write and no reader reads, so the bytes were taken
// for the next column.
TEST(HostileServerRegressionTest, EmptyArraysOfLowCardinalityWriteNoDictionary) {
  Block block = HeaderBlock({{"a", "Array(LowCardinality(String))"}, {"b", "UInt8"}});
  block.column(0).column->AppendDefault();
  block.column(0).column->AppendDefault();
  static_cast<ColumnFixed&>(*block.column(1).column).Append<uint8_t>(1);
  static_cast<ColumnFixed&>(*block.column(1).column).Append<uint8_t>(2);
  const std::string expected = Bytes()
                                   .VarUInt(2)
                                   .Str("")
                                   .Raw(BlockInfo())
                                   .VarUInt(2)
                                   .VarUInt(2)
                                   .Str("a")
                                   .Str("Array(LowCardinality(String))")
                                   .U8(0)
                                   .U64(1)  // LowCardinality state prefix
                                   .U64(0)  // offsets: two empty arrays
                                   .U64(0)
                                   .Str("b")
                                   .Str("UInt8")
                                   .U8(0)
                                   .U8(1)
                                   .U8(2);
  FakeServer server({.revision = kRev});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);
  server.Send(
      DataPacket(HeaderBlock({{"a", "Array(LowCardinality(String))"}, {"b", "UInt8"}}), kRev));
  server.ExpectPacket(ClientPacket::kData, [&](std::string_view packet) {
    EXPECT_EQ(Hex(packet), Hex(expected));
    absl::StatusOr<Block> decoded = DecodeClientData(packet, kRev, false);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(BlockToTsv(*decoded), "[]\t1\n[]\t2\n");
  });
  server.ExpectPacket(ClientPacket::kData);
  server.Send(EndOfStreamPacket());
  server.Start();
  auto conn = Connection::Connect(HostileOptions(server));
  ASSERT_TRUE(conn.ok()) << conn.status();
  const Block* blocks[] = {&block};
  absl::Status status = (*conn)->Insert({.query = "INSERT INTO t VALUES"}, blocks);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

}  // namespace
}  // namespace chgate::clickhouse::testing
