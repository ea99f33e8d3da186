// The column types the local 18.16 server lacks ((U)Int128/256, Bool, Date32, DateTime64,
// Decimal256, IPv4, IPv6, Map, LowCardinality inside Array and Map keys, named tuples,
// Nullable(Nothing)), proven without a live server at revision 54460 (PROTOCOL.md §4.7, §7):
//   1. Golden block bodies, written byte by byte in this file from the spec (never produced by
//      the library's writers), are decoded with ReadBlock, checked value by value and as the
//      TabSeparated text current ClickHouse prints, and re-encoded by WriteBlock to the same
//      bytes.
//   2. The same through the fake server: a SELECT (raw and LZ4, with ProfileEvents, Progress and
//      ProfileInfo in between) must print the same text; an INSERT of blocks built value by value
//      through the column API must put exactly the golden body on the wire.
//   3. has_custom = 1 on a column of any of these types is Unimplemented, never misread.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/clickhouse/block.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/low_cardinality.h"
#include "server/clickhouse/columns/nullable.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/columns/tuple.h"
#include "server/clickhouse/compression/frame.h"
#include "server/clickhouse/connection.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/gather.h"
#include "tests/unit/clickhouse/fake_server.h"
#include "tests/unit/clickhouse/golden_file.h"
#include "tests/unit/clickhouse/test_util.h"
#include "text/status_macros.h"

namespace chgate::clickhouse::testing {
namespace {

constexpr uint64_t kRev = revision::kClient;  // what we advertise
constexpr size_t kRows = 4;                   // every golden column has this many rows

// ---- Bytes by hand ----

// A fixed-width value in little-endian two's complement, one byte at a time.
template <typename T>
std::string Le(T v) {
  std::string out;
  for (size_t i = 0; i < sizeof(T); ++i) {
    out.push_back(static_cast<char>(static_cast<uint64_t>(v) >> (8 * i)));
  }
  return out;
}

// Block info as every writer sends it: is_overflows (field 1) = 0, bucket_num (field 2) = -1,
// end (0).
std::string BlockInfoBytes() { return Bytes().VarUInt(1).U8(0).VarUInt(2).I32(-1).VarUInt(0); }

// ---- The golden columns ----

using GoldenCase = GoldenColumn;

// tests/testdata/golden/new-types.golden: each case's bytes, with how they come from ClickHouse's
// serializers in the comments there.
const std::vector<GoldenCase>& Cases() {
  static const auto* cases = new std::vector<GoldenCase>(LoadGoldenColumns("new-types.golden"));
  return *cases;
}

const GoldenCase& Case(std::string_view column) {
  for (const GoldenCase& c : Cases()) {
    if (c.column == column) return c;
  }
  CHGATE_CHECK(false);
  return Cases()[0];
}

// A block body of the given golden columns as the server writes it at `revision`.
std::string GoldenBody(const std::vector<const GoldenCase*>& cases, uint64_t revision = kRev) {
  Bytes b;
  b.Raw(BlockInfoBytes()).VarUInt(cases.size()).VarUInt(kRows);
  for (const GoldenCase* c : cases) {
    b.Str(c->column).Str(c->type);
    if (revision >= revision::kCustomSerialization) b.U8(0);  // has_custom
    b.Raw(c->data);
  }
  return b;
}

std::vector<const GoldenCase*> AllCases() {
  std::vector<const GoldenCase*> out;
  for (const GoldenCase& c : Cases()) out.push_back(&c);
  return out;
}

// The TSV of kRows rows of the given columns.
std::string GoldenTsv(const std::vector<const GoldenCase*>& cases) {
  std::string out;
  for (size_t row = 0; row < kRows; ++row) {
    std::vector<std::string> fields;
    for (const GoldenCase* c : cases) fields.push_back(c->tsv[row]);
    absl::StrAppend(&out, absl::StrJoin(fields, "\t"), "\n");
  }
  return out;
}

absl::Status Decode(std::string_view bytes, Block* block, uint64_t revision = kRev) {
  return testing::DecodeBlock(bytes, revision, block);
}

std::string Encode(const Block& block, uint64_t revision = kRev) {
  return testing::EncodeBlock(block, revision);
}

std::string Format(const Column& c, size_t row, bool nested = false) {
  return testing::FormatCell(c, row, nested);
}

template <typename T>
const T& As(const ColumnPtr& c) {
  const T* p = dynamic_cast<const T*>(c.get());
  CHGATE_CHECK(p != nullptr);
  return *p;
}

// ---- 1. Golden bytes, one type at a time ----

class NewTypesGoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(NewTypesGoldenTest, DecodesPrintsAndReencodesByteForByte) {
  const GoldenCase& c = GetParam();
  ASSERT_EQ(c.tsv.size(), kRows);
  for (uint64_t revision : {kRev, uint64_t{54453}}) {  // with and without the has_custom byte
    SCOPED_TRACE(revision);
    const std::string body = GoldenBody({&c}, revision);
    Block block;
    absl::Status st = Decode(body, &block, revision);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_EQ(block.column_count(), 1u);
    EXPECT_EQ(block.rows(), kRows);
    EXPECT_EQ(block.column(0).name, c.column);
    EXPECT_EQ(block.column(0).column->type_name(), c.type);
    for (size_t row = 0; row < kRows; ++row) {
      EXPECT_EQ(Format(*block.column(0).column, row), c.tsv[row]) << "row " << row;
    }
    EXPECT_EQ(Hex(Encode(block, revision)), Hex(body));
  }
}

// Whether chgate reads the type's sparse layout (block.cc: not Tuple, Nullable or anything with
// LowCardinality, whose layouts differ or which ClickHouse never makes sparse).
bool SparseReadable(const std::string& type) {
  return !absl::StartsWith(type, "Tuple(") && !absl::StartsWith(type, "Nullable(") &&
         !absl::StrContains(type, "LowCardinality(");
}

// The same rows as a sparse column (custom serialization kind 1) in which no row is a default:
// offsets of 0 defaults before every row, then 0 trailing defaults (bit 62 set), then the rows in
// the type's own format. Read as the dense column; refused, naming the column, for the types
// whose sparse layout differs (Tuple, Nullable, LowCardinality).
TEST_P(NewTypesGoldenTest, SparseColumnsReadAsTheDenseOnes) {
  const GoldenCase& c = GetParam();
  Bytes sparse;
  sparse.Raw(BlockInfoBytes()).VarUInt(1).VarUInt(kRows).Str(c.column).Str(c.type).U8(1).U8(1);
  for (size_t row = 0; row < kRows; ++row) sparse.VarUInt(0);
  sparse.VarUInt(uint64_t{1} << 62).Raw(c.data);
  Block block;
  absl::Status st = Decode(sparse.str(), &block);
  if (!SparseReadable(c.type)) {
    EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "custom serialization")) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), absl::StrCat("column ", c.column))) << st;
    return;
  }
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(block.rows(), kRows);
  for (size_t row = 0; row < kRows; ++row) {
    EXPECT_EQ(Format(*block.column(0).column, row), c.tsv[row]) << "row " << row;
  }
}

INSTANTIATE_TEST_SUITE_P(NewTypes, NewTypesGoldenTest, ::testing::ValuesIn(Cases()),
                         [](const auto& p) { return p.param.column; });

// ---- 1. Golden bytes, every type in one block, value by value ----

TEST(NewTypesGoldenBlockTest, EveryTypeInOneBlock) {
  const std::string body = GoldenBody(AllCases());
  Block block;
  absl::Status st = Decode(body, &block);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(block.column_count(), Cases().size());
  EXPECT_EQ(BlockToTsv(block), GoldenTsv(AllCases()));
  EXPECT_EQ(Hex(Encode(block)), Hex(body));

  auto col = [&](std::string_view name) -> const ColumnPtr& {
    for (const NamedColumn& c : block.columns()) {
      if (c.name == name) return c.column;
    }
    CHGATE_CHECK(false);
    return block.column(0).column;
  };

  // Wide integers: fixed columns of the right width, signedness and raw bytes.
  for (const auto& [name, kind, width] :
       std::vector<std::tuple<std::string, FixedKind, size_t>>{{"i128", FixedKind::kInt, 16},
                                                               {"u128", FixedKind::kUInt, 16},
                                                               {"i256", FixedKind::kInt, 32},
                                                               {"u256", FixedKind::kUInt, 32}}) {
    const auto& f = As<ColumnFixed>(col(name));
    EXPECT_EQ(f.fixed_kind(), kind) << name;
    EXPECT_EQ(f.width(), width) << name;
    EXPECT_EQ(Hex(std::string_view(f.data(), kRows * width)), Hex(Case(name).data)) << name;
  }
  const auto& i128 = As<ColumnFixed>(col("i128"));
  EXPECT_EQ(Hex(std::string_view(i128.RawAt(0), 16)), "00000000000000000000000000000080");
  EXPECT_EQ(Hex(std::string_view(i128.RawAt(3), 16)), "ffffffffffffffffffffffffffffff7f");

  const auto& b = As<ColumnFixed>(col("b"));
  EXPECT_EQ(b.fixed_kind(), FixedKind::kBool);
  EXPECT_EQ(b.Get<uint8_t>(0), 1);
  EXPECT_EQ(b.Get<uint8_t>(1), 0);
  EXPECT_EQ(Format(b, 0, /*nested=*/true), "true");

  const auto& d32 = As<ColumnFixed>(col("d32"));
  EXPECT_EQ(d32.fixed_kind(), FixedKind::kDate32);
  EXPECT_EQ(d32.Get<int32_t>(0), -25567);
  EXPECT_EQ(d32.Get<int32_t>(1), -1);
  EXPECT_EQ(d32.Get<int32_t>(3), 120529);
  EXPECT_EQ(Format(d32, 0, /*nested=*/true), "'1900-01-01'");

  const auto& dt3 = As<ColumnFixed>(col("dt64_3"));
  EXPECT_EQ(dt3.fixed_kind(), FixedKind::kDateTime64);
  EXPECT_EQ(dt3.params().scale, 3);
  EXPECT_EQ(dt3.params().zone.name(), "UTC");
  EXPECT_EQ(dt3.Get<int64_t>(0), -2208988800000);
  EXPECT_EQ(dt3.Get<int64_t>(2), -1500);
  EXPECT_EQ(Format(dt3, 1, /*nested=*/true), "'1969-12-31 23:59:59.999'");
  const auto& dt9 = As<ColumnFixed>(col("dt64_9"));
  EXPECT_EQ(dt9.params().scale, 9);
  EXPECT_EQ(dt9.params().zone.name(), "Asia/Tokyo");
  EXPECT_EQ(dt9.Get<int64_t>(2), 1700000000123456789);
  EXPECT_EQ(dt9.Get<int64_t>(3), std::numeric_limits<int64_t>::max());
  const auto& dt0 = As<ColumnFixed>(col("dt64_0"));
  EXPECT_EQ(dt0.params().scale, 0);
  EXPECT_EQ(dt0.Get<int64_t>(3), 10413791999);

  for (const auto& [name, width, precision, scale] :
       std::vector<std::tuple<std::string, size_t, int, int>>{
           {"d76", 32, 76, 10}, {"d256", 32, 76, 20}, {"d38", 16, 38, 38}}) {
    const auto& d = As<ColumnFixed>(col(name));
    EXPECT_EQ(d.fixed_kind(), FixedKind::kDecimal) << name;
    EXPECT_EQ(d.width(), width) << name;
    EXPECT_EQ(d.params().precision, precision) << name;
    EXPECT_EQ(d.params().scale, scale) << name;
  }

  const auto& ip4 = As<ColumnFixed>(col("ip4"));
  EXPECT_EQ(ip4.fixed_kind(), FixedKind::kIpv4);
  EXPECT_EQ(ip4.Get<uint32_t>(1), 0x01020304u);
  EXPECT_EQ(ip4.Get<uint32_t>(2), 0xffffffffu);
  EXPECT_EQ(Format(ip4, 1, /*nested=*/true), "'1.2.3.4'");
  const auto& ip6 = As<ColumnFixed>(col("ip6"));
  EXPECT_EQ(ip6.fixed_kind(), FixedKind::kIpv6);
  EXPECT_EQ(ip6.width(), 16u);
  EXPECT_EQ(Hex(std::string_view(ip6.RawAt(2), 16)), "00000000000000000000ffff01020304");
  EXPECT_EQ(Format(ip6, 2, /*nested=*/true), "'::ffff:1.2.3.4'");

  const auto& m = As<ColumnArray>(col("m"));
  EXPECT_TRUE(m.is_map());
  EXPECT_EQ(m.Offset(0), 2u);
  EXPECT_EQ(m.Offset(1), 2u);
  EXPECT_EQ(m.Offset(2), 3u);
  EXPECT_EQ(m.Offset(3), 3u);
  const auto& kv = As<ColumnTuple>(m.nested());
  ASSERT_EQ(kv.element_count(), 2u);
  EXPECT_EQ(As<ColumnString>(kv.element(0)).At(2), "it's");
  EXPECT_EQ(As<ColumnFixed>(kv.element(1)).Get<uint64_t>(2), std::numeric_limits<uint64_t>::max());

  const auto& ma = As<ColumnArray>(col("ma"));
  const auto& ma_values = As<ColumnArray>(As<ColumnTuple>(ma.nested()).element(1));
  EXPECT_FALSE(ma_values.is_map());
  EXPECT_EQ(ma_values.Size(), 3u);
  EXPECT_EQ(ma_values.Offset(0), 2u);
  EXPECT_EQ(ma_values.Offset(1), 2u);
  EXPECT_EQ(As<ColumnFixed>(ma_values.nested()).Get<uint64_t>(2), 3u);

  const auto& alc = As<ColumnArray>(col("alc"));
  EXPECT_EQ(alc.Offset(3), 6u);
  const auto& lc = As<ColumnLowCardinality>(alc.nested());
  EXPECT_TRUE(lc.nullable());
  ASSERT_EQ(lc.Size(), 6u);
  EXPECT_FALSE(lc.IsNull(0));
  EXPECT_TRUE(lc.IsNull(1));
  EXPECT_FALSE(lc.IsNull(2));
  EXPECT_TRUE(lc.IsNull(3));
  EXPECT_EQ(As<ColumnString>(lc.dictionary()).At(lc.Index(0)), "a");
  EXPECT_EQ(As<ColumnString>(lc.dictionary()).At(lc.Index(2)), "");
  EXPECT_EQ(As<ColumnString>(lc.dictionary()).At(lc.Index(5)), "b");

  const auto& t = As<ColumnTuple>(col("t"));
  EXPECT_EQ(t.type_name(), "Tuple(a Nullable(Decimal(18, 4)), b Array(Tuple(UInt8, String)))");
  ASSERT_EQ(t.element_count(), 2u);
  const auto& ta = As<ColumnNullable>(t.element(0));
  EXPECT_TRUE(ta.IsNull(1));
  EXPECT_EQ(As<ColumnFixed>(ta.nested()).Get<int64_t>(0), 12345);
  EXPECT_EQ(As<ColumnFixed>(ta.nested()).Get<int64_t>(2), -1);
  const auto& tb = As<ColumnArray>(t.element(1));
  const auto& tb_tuple = As<ColumnTuple>(tb.nested());
  EXPECT_EQ(As<ColumnFixed>(tb_tuple.element(0)).Get<uint8_t>(2), 255);
  EXPECT_EQ(As<ColumnString>(tb_tuple.element(1)).At(2), "y\tz");

  const auto& mlc = As<ColumnArray>(col("mlc"));
  const auto& mlc_kv = As<ColumnTuple>(mlc.nested());
  const auto& keys = As<ColumnLowCardinality>(mlc_kv.element(0));
  EXPECT_FALSE(keys.nullable());
  ASSERT_EQ(keys.Size(), 4u);
  EXPECT_EQ(As<ColumnString>(keys.dictionary()).At(keys.Index(2)), "a");
  EXPECT_EQ(As<ColumnString>(keys.dictionary()).At(keys.Index(3)), "c");
  const auto& values = As<ColumnNullable>(mlc_kv.element(1));
  EXPECT_TRUE(values.IsNull(1));
  EXPECT_EQ(As<ColumnFixed>(values.nested()).Get<int8_t>(2), -128);

  const auto& nn = As<ColumnNullable>(col("nn"));
  for (size_t row = 0; row < kRows; ++row) EXPECT_TRUE(nn.IsNull(row));
  EXPECT_EQ(As<ColumnFixed>(nn.nested()).fixed_kind(), FixedKind::kNothing);
  EXPECT_EQ(Format(nn, 0, /*nested=*/true), "NULL");
}

// ---- 1. More golden layouts ----

// The 18.16 capture orders a nullable dictionary NULL placeholder, default, values (PROTOCOL.md
// §7); the decoder keeps whatever order arrives and re-encodes it unchanged.
TEST(NewTypesGoldenBlockTest, LowCardinalityDictionaryInClickHouseOrder) {
  const GoldenCase c{"alc",
                     "Array(LowCardinality(Nullable(String)))",
                     kRows,
                     Bytes()
                         .U64(1)
                         .U64(3)
                         .U64(3)
                         .U64(4)
                         .U64(6)
                         .U64(0x600)
                         .U64(4)
                         .Str("")
                         .Str("")
                         .Str("a")
                         .Str("b")
                         .U64(6)
                         .U8(2)
                         .U8(0)
                         .U8(1)
                         .U8(0)
                         .U8(2)
                         .U8(3),
                     {}};
  const std::string body = GoldenBody({&c});
  Block block;
  absl::Status st = Decode(body, &block);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(BlockToTsv(block), "['a',NULL,'']\n[]\n[NULL]\n['a','b']\n");
  EXPECT_EQ(Hex(Encode(block)), Hex(body));
}

// When every array is empty, the LowCardinality column has no rows: ClickHouse writes its
// version word (prefix) but no dictionary, and the next column follows the offsets directly.
TEST(NewTypesGoldenBlockTest, LowCardinalityWithoutRowsWritesOnlyItsPrefix) {
  const std::string body = Bytes()
                               .Raw(BlockInfoBytes())
                               .VarUInt(2)
                               .VarUInt(2)
                               .Str("m")
                               .Str("Map(LowCardinality(String), Nullable(Int8))")
                               .U8(0)
                               .U64(1)  // keys' version word
                               .U64(0)
                               .U64(0)  // {}, {}
                               .Str("x")
                               .Str("Bool")
                               .U8(0)
                               .U8(1)
                               .U8(0);
  Block block;
  absl::Status st = Decode(body, &block);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(BlockToTsv(block), "{}\ttrue\n{}\tfalse\n");
  EXPECT_EQ(Hex(Encode(block)), Hex(body));
}

TEST(NewTypesGoldenBlockTest, Decimal256AliasReadsTheSameBody) {
  ColumnPtr alias = MakeColumn("Decimal256(20)");
  EXPECT_EQ(alias->type_name(), "Decimal256(20)");
  MemoryReadBuffer in(Case("d256").data);
  ASSERT_TRUE(alias->LoadBody(in, kRows).ok());
  EXPECT_TRUE(in.AtEnd());
  for (size_t row = 0; row < kRows; ++row) {
    EXPECT_EQ(Format(*alias, row), Case("d256").tsv[row]);
  }
}

// Known difference, kept on purpose: FormatValue prints every scale digit, as 18.16 (the server
// the live tests compare against) and current ClickHouse with
// output_format_decimal_trailing_zeros = 1 do. Current ClickHouse's default (0, since 21.9)
// prints `1.5` and `(1.5,[(1,'x')])` instead.
TEST(NewTypesGoldenBlockTest, DecimalTextKeepsEveryScaleDigit) {
  const GoldenCase c{"t",
                     "Tuple(a Nullable(Decimal(18, 4)), b Array(Tuple(UInt8, String)))",
                     1,
                     Bytes().U8(0).Raw(Le<int64_t>(15000)).U64(1).U8(1).Str("x"),
                     {}};
  const std::string body = Bytes()
                               .Raw(BlockInfoBytes())
                               .VarUInt(1)
                               .VarUInt(1)
                               .Str(c.column)
                               .Str(c.type)
                               .U8(0)
                               .Raw(c.data);
  Block block;
  absl::Status st = Decode(body, &block);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(BlockToTsv(block), "(1.5000,[(1,'x')])\n");
  EXPECT_EQ(Hex(Encode(block)), Hex(body));
}

// ---- 2. Blocks built value by value through the column API ----

void AppendRawRows(const GoldenCase& c, Column& column) {
  auto& f = static_cast<ColumnFixed&>(column);
  for (size_t row = 0; row < kRows; ++row) f.AppendRaw(c.data.data() + row * f.width());
}

std::string Ipv6Bytes(const char* text) {
  unsigned char buf[16];
  CHGATE_CHECK(::inet_pton(AF_INET6, text, buf) == 1);
  return std::string(reinterpret_cast<const char*>(buf), 16);
}

void AppendValues(const GoldenCase& c, Column& column) {
  const std::string& n = c.column;
  if (n == "i128" || n == "u128" || n == "i256" || n == "u256" || n == "d76" || n == "d256" ||
      n == "d38") {
    // Wide values have no typed API; their bytes are the golden rows.
    AppendRawRows(c, column);
  } else if (n == "b") {
    auto& f = static_cast<ColumnFixed&>(column);
    for (uint8_t v : {uint8_t{1}, uint8_t{0}, uint8_t{0}, uint8_t{1}}) f.Append<uint8_t>(v);
  } else if (n == "d32") {
    auto& f = static_cast<ColumnFixed&>(column);
    for (int32_t v : {-25567, -1, 0, 120529}) f.Append<int32_t>(v);
  } else if (n == "dt64_3") {
    auto& f = static_cast<ColumnFixed&>(column);
    for (int64_t v :
         {int64_t{-2208988800000}, int64_t{-1}, int64_t{-1500}, int64_t{1700000000123}}) {
      f.Append<int64_t>(v);
    }
  } else if (n == "dt64_9") {
    auto& f = static_cast<ColumnFixed&>(column);
    for (int64_t v : {int64_t{-1}, int64_t{0}, int64_t{1700000000123456789},
                      std::numeric_limits<int64_t>::max()}) {
      f.Append<int64_t>(v);
    }
  } else if (n == "dt64_0") {
    auto& f = static_cast<ColumnFixed&>(column);
    for (int64_t v : {int64_t{-2208988800}, int64_t{-1}, int64_t{0}, int64_t{10413791999}}) {
      f.Append<int64_t>(v);
    }
  } else if (n == "ip4") {
    auto& f = static_cast<ColumnFixed&>(column);
    for (uint32_t v : {0u, 0x01020304u, 0xffffffffu, 0xc0a80001u}) f.Append<uint32_t>(v);
  } else if (n == "ip6") {
    auto& f = static_cast<ColumnFixed&>(column);
    for (const char* text : {"::", "::1", "::ffff:1.2.3.4", "2001:db8::ff00:42:8329"}) {
      f.AppendRaw(Ipv6Bytes(text).data());
    }
  } else if (n == "m") {
    auto& map = static_cast<ColumnArray&>(column);
    const auto& kv = static_cast<const ColumnTuple&>(*map.nested());
    auto& keys = static_cast<ColumnString&>(*kv.element(0));
    auto& values = static_cast<ColumnFixed&>(*kv.element(1));
    const std::vector<std::vector<std::pair<std::string, uint64_t>>> rows = {
        {{"a", 1}, {"b", 2}}, {}, {{"it's", std::numeric_limits<uint64_t>::max()}}, {}};
    for (const auto& row : rows) {
      for (const auto& [k, v] : row) {
        keys.Append(k);
        values.Append<uint64_t>(v);
      }
      map.FinishRow();
    }
  } else if (n == "ma") {
    auto& map = static_cast<ColumnArray&>(column);
    const auto& kv = static_cast<const ColumnTuple&>(*map.nested());
    auto& keys = static_cast<ColumnString&>(*kv.element(0));
    auto& arrays = static_cast<ColumnArray&>(*kv.element(1));
    auto& numbers = static_cast<ColumnFixed&>(*arrays.nested());
    const std::vector<std::vector<std::pair<std::string, std::vector<uint64_t>>>> rows = {
        {{"a", {1, 2}}, {"b", {}}}, {}, {{"c", {3}}}, {}};
    for (const auto& row : rows) {
      for (const auto& [k, v] : row) {
        keys.Append(k);
        for (uint64_t x : v) numbers.Append<uint64_t>(x);
        arrays.FinishRow();
      }
      map.FinishRow();
    }
  } else if (n == "alc") {
    auto& array = static_cast<ColumnArray&>(column);
    auto& lc = static_cast<ColumnLowCardinality&>(*array.nested());
    const std::vector<std::vector<std::optional<std::string>>> rows = {
        {"a", std::nullopt, ""}, {}, {std::nullopt}, {"a", "b"}};
    for (const auto& row : rows) {
      for (const auto& v : row) {
        if (v.has_value()) {
          CHGATE_CHECK(lc.AppendString(*v).ok());
        } else {
          lc.AppendNull();
        }
      }
      array.FinishRow();
    }
  } else if (n == "t") {
    const auto& tuple = static_cast<const ColumnTuple&>(column);
    auto& a = static_cast<ColumnNullable&>(*tuple.element(0));
    auto& b = static_cast<ColumnArray&>(*tuple.element(1));
    const auto& pairs = static_cast<const ColumnTuple&>(*b.nested());
    auto& small = static_cast<ColumnFixed&>(*pairs.element(0));
    auto& text = static_cast<ColumnString&>(*pairs.element(1));
    const std::vector<std::optional<int64_t>> decimals = {12345, std::nullopt, -1,
                                                          999999999999999999};
    const std::vector<std::vector<std::pair<uint8_t, std::string>>> arrays = {
        {{1, "x"}}, {}, {{2, ""}, {255, "y\tz"}}, {}};
    for (size_t row = 0; row < kRows; ++row) {
      if (decimals[row].has_value()) {
        a.AppendNotNull();
        static_cast<ColumnFixed&>(*a.nested()).Append<int64_t>(*decimals[row]);
      } else {
        a.AppendNull();
      }
      for (const auto& [u, s] : arrays[row]) {
        small.Append<uint8_t>(u);
        text.Append(s);
      }
      b.FinishRow();
    }
  } else if (n == "mlc") {
    auto& map = static_cast<ColumnArray&>(column);
    const auto& kv = static_cast<const ColumnTuple&>(*map.nested());
    auto& keys = static_cast<ColumnLowCardinality&>(*kv.element(0));
    auto& values = static_cast<ColumnNullable&>(*kv.element(1));
    auto& ints = static_cast<ColumnFixed&>(*values.nested());
    const std::vector<std::vector<std::pair<std::string, std::optional<int8_t>>>> rows = {
        {{"a", 1}, {"b", std::nullopt}}, {}, {{"a", -128}}, {{"c", 127}}};
    for (const auto& row : rows) {
      for (const auto& [k, v] : row) {
        CHGATE_CHECK(keys.AppendString(k).ok());
        if (v.has_value()) {
          values.AppendNotNull();
          ints.Append<int8_t>(*v);
        } else {
          values.AppendNull();
        }
      }
      map.FinishRow();
    }
  } else if (n == "nn") {
    auto& nullable = static_cast<ColumnNullable&>(column);
    for (size_t row = 0; row < kRows; ++row) nullable.AppendNull();
  } else {
    ADD_FAILURE() << "no values for " << n;
  }
}

Block ValuesBlock() {
  Block block;
  for (const GoldenCase& c : Cases()) {
    ColumnPtr column = MakeColumn(c.type);
    AppendValues(c, *column);
    block.AddColumn(c.column, column);
  }
  return block;
}

TEST(NewTypesValuesTest, ColumnsBuiltFromValuesEncodeToTheGoldenBytes) {
  const Block block = ValuesBlock();
  ASSERT_TRUE(block.Validate().ok()) << block.Validate();
  EXPECT_EQ(BlockToTsv(block), GoldenTsv(AllCases()));
  EXPECT_EQ(Hex(Encode(block)), Hex(GoldenBody(AllCases())));
}

// ---- 2. Through the fake server ----

ConnectionOptions OptionsFor(const FakeServer& server, CompressionMethod compression) {
  return ClientOptionsFor(server, compression);
}

std::vector<std::pair<std::string, std::string>> HeaderColumns() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const GoldenCase& c : Cases()) out.emplace_back(c.column, c.type);
  return out;
}

// The block body of a client Data packet (code 2, table name ""), decompressed frame by frame
// with the frame functions alone when `compressed`.
std::string ClientDataBody(std::string_view packet, bool compressed) {
  EXPECT_GE(packet.size(), 2u);
  EXPECT_EQ(Hex(packet.substr(0, 2)), "0200");  // code Data, empty table name
  std::string_view rest = packet.substr(2);
  if (!compressed) return std::string(rest);
  std::string body;
  while (!rest.empty()) {
    if (rest.size() < kFrameChecksumSize + kFrameHeaderSize) {
      ADD_FAILURE() << "truncated frame header";
      return "";
    }
    absl::StatusOr<FrameHeader> h = ParseFrameHeader(rest.data());
    if (!h.ok()) {
      ADD_FAILURE() << h.status();
      return "";
    }
    EXPECT_EQ(h->method, CompressionMethod::kLz4);
    const size_t len = kFrameChecksumSize + h->compressed_size;
    if (rest.size() < len) {
      ADD_FAILURE() << "truncated frame";
      return "";
    }
    std::string out(h->decompressed_size, '\0');
    absl::Status st = DecompressFrame(rest.data(), len, *h, out.data());
    EXPECT_TRUE(st.ok()) << st;
    body += out;
    rest.remove_prefix(len);
  }
  return body;
}

class NewTypesFakeServerTest : public ::testing::TestWithParam<bool> {};

TEST_P(NewTypesFakeServerTest, SelectPrintsEveryType) {
  const bool lz4 = GetParam();
  const auto frames =
      lz4 ? std::optional<CompressionMethod>(CompressionMethod::kLz4) : std::nullopt;
  const std::string golden = GoldenBody(AllCases());
  // The second data block goes through the fake's DataPacket builder.
  Block decoded;
  ASSERT_TRUE(Decode(golden, &decoded).ok());

  FakeServer server({.revision = kRev});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);
  server.Send(DataPacket(HeaderBlock(HeaderColumns()), kRev, frames));
  server.Send(ProfileEventsPacket(kRev, {{.name = "SelectedRows", .value = 4}}));
  server.Send(Bytes().VarUInt(1).Str("").Raw(lz4 ? CompressFrame(golden, CompressionMethod::kLz4)
                                                 : golden));
  server.Send(ProgressPacket({.rows = 4, .bytes = golden.size(), .elapsed_ns = 5}, kRev));
  server.Send(ProfileEventsPacket(kRev, {{.name = "SelectedBytes", .value = 1000}}));
  server.Send(DataPacket(decoded, kRev, frames));
  server.Send(ProfileInfoPacket({.rows = 8, .blocks = 2, .bytes = 2000}, kRev));
  server.Send(DataPacket(HeaderBlock(HeaderColumns()), kRev, frames));
  server.Send(EndOfStreamPacket());
  server.ExpectPacket(ClientPacket::kPing);
  server.Send(PongPacket());
  server.Start();

  auto conn = Connection::Connect(
      OptionsFor(server, lz4 ? CompressionMethod::kLz4 : CompressionMethod::kNone));
  ASSERT_TRUE(conn.ok()) << conn.status();
  ASSERT_EQ((*conn)->revision(), kRev);
  std::string tsv;
  std::vector<std::string> types;
  QueryResult result;
  absl::Status st = (*conn)->Select(
      {.query = "SELECT * FROM new_types"},
      [&](const Block& block) {
        tsv += BlockToTsv(block);
        types.clear();
        for (const NamedColumn& c : block.columns()) types.push_back(c.column->type_name());
        return absl::OkStatus();
      },
      &result);
  ASSERT_TRUE(st.ok()) << st;
  const std::string want = GoldenTsv(AllCases());
  EXPECT_EQ(tsv, want + want);
  std::vector<std::string> want_types;
  for (const GoldenCase& c : Cases()) want_types.push_back(c.type);
  EXPECT_EQ(types, want_types);
  EXPECT_EQ(result.rows, 2 * kRows);
  EXPECT_EQ(result.blocks, 2u);
  EXPECT_EQ(result.progress.elapsed_ns, 5u);
  EXPECT_TRUE((*conn)->usable());
  EXPECT_TRUE((*conn)->Ping().ok());
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

TEST_P(NewTypesFakeServerTest, InsertSendsTheGoldenBody) {
  const bool lz4 = GetParam();
  const auto frames =
      lz4 ? std::optional<CompressionMethod>(CompressionMethod::kLz4) : std::nullopt;
  const std::string golden = GoldenBody(AllCases());
  bool checked = false;

  FakeServer server({.revision = kRev});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);  // the empty external-tables block
  server.Send(DataPacket(HeaderBlock(HeaderColumns()), kRev, frames));
  server.Send(ProfileEventsPacket(kRev, {{.name = "InsertQuery", .value = 1}}));
  server.ExpectPacket(ClientPacket::kData, [&](std::string_view packet) {
    const std::string body = ClientDataBody(packet, lz4);
    EXPECT_EQ(Hex(body), Hex(golden));
    // Decoded from our own copy of the body, which outlives the block.
    Block block;
    absl::Status st = Decode(body, &block);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(BlockToTsv(block), GoldenTsv(AllCases()));
    checked = true;
  });
  server.ExpectPacket(ClientPacket::kData, [&](std::string_view packet) {
    // The empty block that ends the INSERT.
    EXPECT_EQ(Hex(ClientDataBody(packet, lz4)),
              Hex(Bytes().Raw(BlockInfoBytes()).VarUInt(0).VarUInt(0).str()));
  });
  server.Send(ProfileEventsPacket(kRev, {{.name = "InsertedRows", .value = 4}}));
  server.Send(ProgressPacket({.written_rows = 4, .written_bytes = golden.size()}, kRev));
  server.Send(EndOfStreamPacket());
  server.ExpectPacket(ClientPacket::kPing);
  server.Send(PongPacket());
  server.Start();

  auto conn = Connection::Connect(
      OptionsFor(server, lz4 ? CompressionMethod::kLz4 : CompressionMethod::kNone));
  ASSERT_TRUE(conn.ok()) << conn.status();
  const Block block = ValuesBlock();
  const Block* blocks[] = {&block};
  QueryResult result;
  absl::Status st = (*conn)->Insert({.query = "INSERT INTO new_types VALUES"}, blocks, &result);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(result.rows, kRows);
  EXPECT_EQ(result.progress.written_rows, kRows);
  EXPECT_TRUE((*conn)->usable());
  EXPECT_TRUE((*conn)->Ping().ok());
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
  EXPECT_TRUE(checked);
}

INSTANTIATE_TEST_SUITE_P(NewTypes, NewTypesFakeServerTest, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "Lz4" : "Raw"; });

// ---- 3. Sparse columns (has_custom = 1) through Select ----

class NewTypesCustomSerializationTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(NewTypesCustomSerializationTest, SelectReadsSparseColumnsOrRefusesThem) {
  const GoldenCase& c = GetParam();
  const GoldenCase& first = Case("i128");
  FakeServer server({.revision = kRev});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);
  server.Send(DataPacket(HeaderBlock({{"first", first.type}, {c.column, c.type}}), kRev));
  // A well-formed first column, then has_custom = 1, kind 1 (sparse): no default before any
  // row, no trailing default (bit 62 set), then every row.
  Bytes data;
  data.VarUInt(1)
      .Str("")
      .Raw(BlockInfoBytes())
      .VarUInt(2)
      .VarUInt(kRows)
      .Str("first")
      .Str(first.type)
      .U8(0)
      .Raw(first.data)
      .Str(c.column)
      .Str(c.type)
      .U8(1)
      .U8(1);
  for (size_t row = 0; row < kRows; ++row) data.VarUInt(0);
  data.VarUInt(uint64_t{1} << 62).Raw(c.data);
  server.Send(data.str());
  const bool readable = SparseReadable(c.type);
  if (readable) {
    server.Send(EndOfStreamPacket());
    server.ExpectPacket(ClientPacket::kPing);
    server.Send(PongPacket());
  }
  server.Start();

  auto conn = Connection::Connect(OptionsFor(server, CompressionMethod::kNone));
  ASSERT_TRUE(conn.ok()) << conn.status();
  std::vector<std::string> got;
  absl::Status st = (*conn)->Select({.query = "SELECT * FROM sparse"}, [&](const Block& block) {
    for (size_t row = 0; row < block.rows(); ++row) {
      got.push_back(Format(*block.column(1).column, row));
    }
    return absl::OkStatus();
  });
  if (readable) {
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(got, std::vector<std::string>(c.tsv.begin(), c.tsv.end()));
    EXPECT_TRUE((*conn)->Ping().ok());
  } else {
    EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "custom serialization")) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), absl::StrCat("column ", c.column))) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), c.type)) << st;
    EXPECT_TRUE(got.empty());
    EXPECT_FALSE((*conn)->usable());
  }
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

INSTANTIATE_TEST_SUITE_P(NewTypes, NewTypesCustomSerializationTest, ::testing::ValuesIn(Cases()),
                         [](const auto& p) { return p.param.column; });

}  // namespace
}  // namespace chgate::clickhouse::testing
