// Types current ClickHouse servers send that need more than a fixed layout, proven without a live
// server at revision 54460: AggregateFunction states (server/clickhouse/columns/aggregate_state.h
// lists the functions and their state layouts, from ClickHouse's source), the geo types, Nested,
// SimpleAggregateFunction, Enum with values left out, the empty Tuple, LowCardinality(Nullable)
// in every position, and sparse tuple elements.
//   1. Golden block bodies written byte by byte in this file from those facts (never produced by
//      the library's writers) decode to the expected values and TabSeparated text, and re-encode
//      to the same bytes; every truncation is an error.
//   2. A SELECT through the fake server prints the same text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/clickhouse/block.h"
#include "server/clickhouse/columns/aggregate_state.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/low_cardinality.h"
#include "server/clickhouse/columns/tuple.h"
#include "server/clickhouse/connection.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/gather.h"
#include "tests/unit/clickhouse/fake_server.h"
#include "tests/unit/clickhouse/golden_file.h"
#include "tests/unit/clickhouse/test_util.h"
#include "text/status_macros.h"

namespace chgate::clickhouse::testing {
namespace {

constexpr uint64_t kRev = revision::kClient;
constexpr uint64_t kEndOfGranule = uint64_t{1} << 62;

// ---- Bytes by hand ----

template <typename T>
std::string Le(T v) {
  std::string out(sizeof(T), '\0');
  std::memcpy(out.data(), &v, sizeof(T));  // the test machine is little-endian, like the wire
  return out;
}
std::string F64(double v) { return Le(v); }
std::string Str(std::string_view s) { return Bytes().Str(s); }
std::string Var(uint64_t v) { return Bytes().VarUInt(v); }
std::string Zeros(size_t n) { return std::string(n, '\0'); }

std::string BlockInfoBytes() { return Bytes().Raw(Unhex("01 00 02 ffffffff 00")); }

// The text the pcg32_fast generator of a ReservoirSampler seeded with 123456 serializes to.
constexpr std::string_view kRng = "6364136223846793005 0 123459";
std::string EmptyReservoir() {
  return absl::StrCat(Le<uint64_t>(8192), Le<uint64_t>(0), Str(kRng));
}

// ---- The golden columns ----

using GoldenCase = GoldenColumn;

// tests/testdata/golden/more-types.golden: each case's bytes, with how they come from ClickHouse's
// serializers in the comments there.
const std::vector<GoldenCase>& Cases() {
  static const auto* cases = new std::vector<GoldenCase>(LoadGoldenColumns("more-types.golden"));
  return *cases;
}

std::string Body(const std::vector<const GoldenCase*>& cases, size_t rows,
                 uint64_t revision = kRev) {
  Bytes b;
  b.Raw(BlockInfoBytes()).VarUInt(cases.size()).VarUInt(rows);
  for (const GoldenCase* c : cases) {
    b.Str(c->column).Str(c->type);
    if (revision >= revision::kCustomSerialization) b.U8(0);
    b.Raw(c->data);
  }
  return b;
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

std::vector<std::string> FormatAll(const Column& c) {
  std::vector<std::string> out;
  for (size_t row = 0; row < c.Size(); ++row) out.push_back(Format(c, row));
  return out;
}

// ---- 1. Golden bytes ----

class MoreTypesGoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(MoreTypesGoldenTest, DecodesPrintsAndReencodesByteForByte) {
  const GoldenCase& c = GetParam();
  ASSERT_EQ(c.tsv.size(), c.rows);
  const std::string body = Body({&c}, c.rows);
  Block block;
  absl::Status st = Decode(body, &block);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(block.rows(), c.rows);
  EXPECT_EQ(block.column(0).column->type_name(), c.type);
  EXPECT_EQ(FormatAll(*block.column(0).column), c.tsv);
  EXPECT_EQ(Hex(Encode(block)), Hex(body));
  // A copy (Block::Clone appends row ranges) prints the same.
  EXPECT_EQ(FormatAll(*block.Clone().column(0).column), c.tsv);
}

TEST_P(MoreTypesGoldenTest, EveryTruncationIsAnError) {
  const GoldenCase& c = GetParam();
  const std::string body = Body({&c}, c.rows);
  for (size_t n = 0; n < body.size(); ++n) {
    Block block;
    EXPECT_FALSE(Decode(body.substr(0, n), &block).ok()) << "prefix of " << n << " bytes";
  }
}

INSTANTIATE_TEST_SUITE_P(MoreTypes, MoreTypesGoldenTest, ::testing::ValuesIn(Cases()),
                         [](const auto& p) { return p.param.column; });

const GoldenCase& Case(std::string_view column) {
  for (const GoldenCase& c : Cases()) {
    if (c.column == column) return c;
  }
  CHGATE_CHECK(false);
  return Cases()[0];
}

TEST(MoreTypesTest, ColumnsKeepTheirOwnNamesOnTheLayoutOfAnother) {
  struct Want {
    std::string type;
    ColumnKind kind;
    std::string layout;  // FormatTypeName(column->type())
  };
  for (const Want& w : std::vector<Want>{
           {"Point", ColumnKind::kTuple, "Tuple(Float64, Float64)"},
           {"Ring", ColumnKind::kArray, "Array(Point)"},
           {"MultiPolygon", ColumnKind::kArray, "Array(Polygon)"},
           {"Nested(a UInt8, `b c` String)", ColumnKind::kArray,
            "Array(Tuple(a UInt8, `b c` String))"},
           {"SimpleAggregateFunction(sum, UInt64)", ColumnKind::kFixed, "UInt64"},
           {"SimpleAggregateFunction(anyLast, Nullable(String))", ColumnKind::kNullable,
            "Nullable(String)"},
           {"SimpleAggregateFunction(anyLast, Point)", ColumnKind::kTuple,
            "Tuple(Float64, Float64)"},
           {"AggregateFunction(quantiles(0.5, 0.9), UInt64)", ColumnKind::kAggregateState,
            "AggregateFunction(quantiles(0.5, 0.9), UInt64)"},
           {"AggregateFunction(1, uniq, String, UInt8)", ColumnKind::kAggregateState,
            "AggregateFunction(1, uniq, String, UInt8)"},
           {"AggregateFunction(quantile(1e-3), Float32)", ColumnKind::kAggregateState,
            "AggregateFunction(quantile(1e-3), Float32)"},
           {"Tuple()", ColumnKind::kTuple, "Tuple()"},
       }) {
    SCOPED_TRACE(w.type);
    absl::StatusOr<ColumnPtr> c = CreateColumn(w.type);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ((*c)->type_name(), w.type);  // sent back unchanged on INSERT
    EXPECT_EQ((*c)->kind(), w.kind);
    EXPECT_EQ(FormatTypeName((*c)->type()), w.layout);
    EXPECT_EQ((*c)->CloneEmpty()->type_name(), w.type);
  }
  // Tuple element names of Nested stay on the layout (converters name elements from it).
  ColumnPtr nested = *CreateColumn("Nested(a UInt8, b String)");
  EXPECT_EQ(nested->type().args[0].args[1].element_name, "b");
  // Geo types take no arguments; Nested needs named elements.
  for (const char* bad :
       {"Point(1)", "Nested(UInt8)", "Nested()", "SimpleAggregateFunction(sum)"}) {
    EXPECT_EQ(CreateColumn(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(MoreTypesTest, EmptyTupleCountsItsRows) {
  ColumnPtr c = *CreateColumn("Tuple()");
  c->AppendDefault();
  c->AppendDefault();
  EXPECT_EQ(c->Size(), 2u);
  ColumnPtr copy = c->CloneEmpty();
  copy->AppendRange(*c, 0, 2);
  EXPECT_EQ(copy->Size(), 2u);
  copy->Truncate(1);
  EXPECT_EQ(copy->Size(), 1u);
  EXPECT_EQ(Format(*copy, 0), "()");
  GatherWriter w;
  c->SaveBody(w);
  EXPECT_EQ(w.ToString(), "00");
  c->Clear();
  EXPECT_EQ(c->Size(), 0u);
}

// ---- Enum: what ClickHouse's type parser accepts (DataTypeEnum.cpp) ----

TEST(MoreTypesTest, EnumValuesLeftOutAreAssignedAsClickHouseDoes) {
  for (const auto& [in, want] : std::vector<std::pair<std::string, std::string>>{
           {"Enum('a', 'b', 'c')", "Enum8('a' = 1, 'b' = 2, 'c' = 3)"},
           {"Enum8('a', 'b')", "Enum8('a' = 1, 'b' = 2)"},
           {"Enum('a' = 5, 'b', 'c')", "Enum8('a' = 5, 'b' = 6, 'c' = 7)"},
           {"Enum('a' = -3, 'b')", "Enum8('a' = -3, 'b' = -2)"},
           {"Enum('a', 'b' = 7)", "Enum8('a' = 1, 'b' = 7)"},
           {"Enum('a' = 1, 'b' = 2)", "Enum8('a' = 1, 'b' = 2)"},
           {"Enum('a' = 127, 'b')", "Enum16('a' = 127, 'b' = 128)"},
           {"Enum('a' = -129)", "Enum16('a' = -129)"},
           {"Enum16('a', 'b')", "Enum16('a' = 1, 'b' = 2)"},
           {"Enum8('a' = -128, 'b' = 127)", "Enum8('a' = -128, 'b' = 127)"},
           {"Enum8('it\\'s' = 1, 'a''b' = 2, 'c\\\\' = 3)",
            "Enum8('it\\'s' = 1, 'a\\'b' = 2, 'c\\\\' = 3)"},
       }) {
    SCOPED_TRACE(in);
    absl::StatusOr<ColumnPtr> c = CreateColumn(in);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ((*c)->type_name(), want);
  }
  ColumnPtr e = *CreateColumn("Enum('it''s', 'b')");
  const std::string bytes = Unhex("01 02");  // outlives the buffer that reads it
  MemoryReadBuffer in(bytes);
  ASSERT_TRUE(e->LoadBody(in, 2).ok());
  EXPECT_EQ(Format(*e, 0), "it\\'s");
  EXPECT_EQ(Format(*e, 0, /*nested=*/true), "'it\\'s'");
  EXPECT_EQ(Format(*e, 1), "b");
  for (const char* bad :
       {"Enum()", "Enum('a' = 1, 'b', 'c' = 5)", "Enum('a', 'b' = 2, 'c')", "Enum8('a' = 128)",
        "Enum16('a' = 40000)", "Enum('a' = 40000)", "Enum('a', 'a')", "Enum('a' = 1, 'b' = 1)",
        "Enum(1)", "Enum('a' = 'b')"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(CreateColumn(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << CreateColumn(bad).status();
  }
}

// ---- AggregateFunction: formats, empty states, refusals ----

TEST(AggregateStateTest, EmptyStatesAreWhatAFreshAggregationSerializes) {
  for (const auto& [type, want] : std::vector<std::pair<std::string, std::string>>{
           {"AggregateFunction(count)", Unhex("00")},
           {"AggregateFunction(countIf, UInt8)", Unhex("00")},
           {"AggregateFunction(sum, UInt8)", Zeros(8)},
           {"AggregateFunction(sum, Int128)", Zeros(16)},
           {"AggregateFunction(sum, Decimal(18, 2))", Zeros(16)},
           {"AggregateFunction(sum, Decimal256(2))", Zeros(32)},
           {"AggregateFunction(sumWithOverflow, Int8)", Zeros(1)},
           {"AggregateFunction(sumKahan, Float32)", Zeros(16)},
           {"AggregateFunction(avg, Int8)", Zeros(9)},
           {"AggregateFunction(min, String)", Unhex("ffffffff")},
           {"AggregateFunction(max, UUID)", Unhex("00")},
           {"AggregateFunction(argMin, String, Date)", Unhex("ffffffff 00")},
           {"AggregateFunction(uniq, UInt64, String)", Unhex("0000")},
           {"AggregateFunction(1, uniq, UInt64)", Unhex("000000")},
           {"AggregateFunction(uniqExact, Float64)", Unhex("00")},
           {"AggregateFunction(groupArray, String)", Unhex("00")},
           {"AggregateFunction(groupArrayIf(10), Date, UInt8)", Unhex("00")},
           {"AggregateFunction(quantile(0.5), UInt8)", EmptyReservoir()},
           {"AggregateFunction(uniqMerge, AggregateFunction(uniq, UInt64))", Unhex("0000")},
           {"AggregateFunction(sumArrayIf, Array(UInt16), UInt8)", Zeros(8)},
       }) {
    SCOPED_TRACE(type);
    absl::StatusOr<ColumnPtr> c = CreateColumn(type);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_EQ((*c)->kind(), ColumnKind::kAggregateState);
    auto& states = static_cast<ColumnAggregateState&>(**c);
    states.AppendDefault();
    EXPECT_EQ(Hex(states.State(0)), Hex(want));
    // The empty state is one whole state of the function.
    EXPECT_TRUE(states.AppendState(want).ok());
  }
}

TEST(AggregateStateTest, UnknownStateFormatsAreRefusedNamingTheFunction) {
  for (const auto& [type, function] : std::vector<std::pair<std::string, std::string>>{
           {"AggregateFunction(topK(10), String)", "topK"},
           {"AggregateFunction(uniqCombined, UInt64)", "uniqCombined"},
           {"AggregateFunction(sum, Nullable(UInt64))", "sum"},
           {"AggregateFunction(uniq, Nullable(UInt64))", "uniq"},
           {"AggregateFunction(groupArray, Decimal(9, 2))", "groupArray"},
           {"AggregateFunction(min, Array(UInt8))", "min"},
           {"AggregateFunction(2, uniq, UInt64)", "uniq"},
           {"AggregateFunction(1, sum, UInt64)", "sum"},
           {"AggregateFunction(sumDistinct, UInt64)", "sumDistinct"},
           {"AggregateFunction(sumOrNull, UInt64)", "sumOrNull"},
           {"AggregateFunction(quantile, String)", "quantile"},
           {"AggregateFunction(uniqExact, UInt8, UInt8)", "uniqExact"},
           {"AggregateFunction(uniqExact, Array(UInt8))", "uniqExact"},
       }) {
    SCOPED_TRACE(type);
    absl::Status st = CreateColumn(type).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), absl::StrCat("aggregate function ", function)))
        << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "cannot be read by a client")) << st;
  }
  for (const char* bad :
       {"AggregateFunction()", "AggregateFunction(sum)", "AggregateFunction(sum, UInt8, UInt8)",
        "AggregateFunction(sumIf, UInt64, String)", "AggregateFunction(sumArray, UInt64)",
        "AggregateFunction(sum(1), UInt64)", "AggregateFunction('sum', UInt64)",
        "AggregateFunction(uniqMerge, AggregateFunction(sum, UInt64))",
        "AggregateFunction(groupArray, UInt8, UInt8)", "AggregateFunction(quantiles, UInt8, UInt8)",
        "AggregateFunction(argMin, UInt8)", "AggregateFunction(uniq)"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(CreateColumn(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << CreateColumn(bad).status();
  }
}

TEST(AggregateStateTest, AppendStateTakesExactlyOneState) {
  auto c = *CreateColumn("AggregateFunction(groupArray, String)");
  auto& states = static_cast<ColumnAggregateState&>(*c);
  EXPECT_TRUE(states.AppendState(Unhex("01 0161")).ok());
  EXPECT_EQ(states.AppendState(Unhex("01 0161 00")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(states.AppendState(Unhex("02 0161")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(states.AppendState("").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(states.Size(), 1u);
  EXPECT_EQ(Hex(states.State(0)), "010161");
  EXPECT_EQ(Format(states, 0, /*nested=*/true),
            "'\x01\x01"
            "a'");
}

TEST(AggregateStateTest, CorruptStatesAreErrorsNeverCrashes) {
  for (const auto& [type, state] : std::vector<std::pair<std::string, std::string>>{
           {"AggregateFunction(uniq, UInt64)", absl::StrCat(Unhex("00"), Var(70000))},
           {"AggregateFunction(uniq, UInt64)", Unhex("11 00")},        // skip degree past 16
           {"AggregateFunction(1, uniq, UInt64)", Unhex("02 00 00")},  // unknown flags
           {"AggregateFunction(min, String)", Le<int32_t>(0x7fffffff)},
           {"AggregateFunction(groupArray, String)", Var(uint64_t{1} << 40)},
           {"AggregateFunction(uniqExact, UInt64)", Var(uint64_t{1} << 62)},
           {"AggregateFunction(quantile, UInt64)",
            absl::StrCat(Le<uint64_t>(~uint64_t{0}), Le<uint64_t>(~uint64_t{0}), Var(0))},
           {"AggregateFunction(count)", Unhex("ffffffffffffffffffff01")},  // 11-byte VarUInt
       }) {
    SCOPED_TRACE(type);
    const std::string body = Bytes()
                                 .Raw(BlockInfoBytes())
                                 .VarUInt(1)
                                 .VarUInt(1)
                                 .Str("c")
                                 .Str(type)
                                 .U8(0)
                                 .Raw(state)
                                 .Raw(std::string(64, '\0'));
    Block block;
    absl::Status st = Decode(body, &block);
    EXPECT_FALSE(st.ok());
    EXPECT_TRUE(st.code() == absl::StatusCode::kDataLoss ||
                st.code() == absl::StatusCode::kOutOfRange)
        << st;
  }
}

// ---- LowCardinality(Nullable) across blocks: each block brings its own dictionary ----

TEST(LowCardinalityNullableTest, EachBlockDecodesWithItsOwnDictionary) {
  const GoldenCase& first = Case("lcs");
  GoldenCase second{"lcs",
                    "LowCardinality(Nullable(String))",
                    3,
                    absl::StrCat(Le<uint64_t>(1), Le<uint64_t>(0x600), Le<uint64_t>(2),
                                 Unhex("00 0179"), Le<uint64_t>(3), Unhex("01 00 01")),
                    {"y", "\\N", "y"}};
  Block block;
  ASSERT_TRUE(Decode(Body({&first}, first.rows), &block).ok());
  EXPECT_EQ(FormatAll(*block.column(0).column), first.tsv);
  const std::string body = Body({&second}, second.rows);
  absl::Status st = Decode(body, &block);  // reuses the column
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(FormatAll(*block.column(0).column), second.tsv);
  EXPECT_EQ(Hex(Encode(block)), Hex(body));
  // Rows appended after decoding keep NULL and '' apart.
  Block copy = block.Clone();
  ColumnPtr c = copy.column(0).column;
  c->AppendDefault();
  EXPECT_EQ(Format(*c, 3), "\\N");
}

// Values appended through the column API (the INSERT path) encode with key 0 for NULL and ''
// as a key of its own.
TEST(LowCardinalityNullableTest, AppendedValuesEncodeWithKeyZeroForNull) {
  ColumnPtr s = *CreateColumn("LowCardinality(Nullable(String))");
  auto& lc = static_cast<ColumnLowCardinality&>(*s);
  ASSERT_TRUE(lc.AppendString("x").ok());
  lc.AppendNull();
  ASSERT_TRUE(lc.AppendString("").ok());
  ASSERT_TRUE(lc.AppendString("x").ok());
  Block block;
  block.AddColumn("c", s);
  const GoldenCase golden{"c",
                          "LowCardinality(Nullable(String))",
                          4,
                          absl::StrCat(Le<uint64_t>(1), Le<uint64_t>(0x600), Le<uint64_t>(3),
                                       Unhex("00 0178 00"), Le<uint64_t>(4), Unhex("01 00 02 01")),
                          {}};
  const std::string want = Body({&golden}, 4);
  EXPECT_EQ(Hex(Encode(block)), Hex(want));
  EXPECT_EQ(FormatAll(*s), (std::vector<std::string>{"x", "\\N", "", "x"}));

  ColumnPtr m = *CreateColumn("Map(LowCardinality(String), LowCardinality(Nullable(String)))");
  auto& map = static_cast<ColumnArray&>(*m);
  const auto& kv = static_cast<const ColumnTuple&>(*map.nested());
  ASSERT_TRUE(static_cast<ColumnLowCardinality&>(*kv.element(0)).AppendString("k").ok());
  static_cast<ColumnLowCardinality&>(*kv.element(1)).AppendNull();
  map.FinishRow();
  map.AppendDefault();
  Block maps;
  maps.AddColumn("m", m);
  const std::string want_map = absl::StrCat(
      BlockInfoBytes(), Var(1), Var(2), Str("m"), Str(m->type_name()), Unhex("00"), Le<uint64_t>(1),
      Le<uint64_t>(1), Le<uint64_t>(1), Le<uint64_t>(1), Le<uint64_t>(0x600), Le<uint64_t>(1),
      Unhex("016b"), Le<uint64_t>(1), Unhex("00"), Le<uint64_t>(0x600), Le<uint64_t>(1),
      Unhex("00"), Le<uint64_t>(1), Unhex("00"));
  EXPECT_EQ(Hex(Encode(maps)), Hex(want_map));
  Block back;
  ASSERT_TRUE(Decode(want_map, &back).ok());
  EXPECT_EQ(FormatAll(*back.column(0).column), (std::vector<std::string>{"{'k':NULL}", "{}"}));
}

// ---- 8. Sparse tuple elements ----

struct SparseCase {
  std::string type;
  size_t rows;
  std::string kinds;   // after has_custom = 1
  std::string sparse;  // the column's bytes with the sparse elements
  std::string dense;   // the same rows written densely
  std::vector<std::string> tsv;
};

std::string Flagged(uint64_t n) { return Var(n | kEndOfGranule); }

std::vector<SparseCase> SparseCases() {
  return {
      // Tuple(a UInt64, s String), a sparse [0, 5, 0, 0]: kinds tuple 00, a 01, s 00.
      {"Tuple(a UInt64, s String)",
       4,
       Unhex("00 01 00"),
       absl::StrCat(Var(1), Flagged(2), Le<uint64_t>(5), Unhex("0170 00 00 0171")),
       absl::StrCat(Le<uint64_t>(0), Le<uint64_t>(5), Le<uint64_t>(0), Le<uint64_t>(0),
                    Unhex("0170 00 00 0171")),
       {"(0,'p')", "(5,'')", "(0,'')", "(0,'q')"}},
      // A tuple in a tuple, its String sparse ['', 'm', '']: kinds 00 | 00 00 01 | 00.
      {"Tuple(Tuple(UInt8, String), UInt8)",
       3,
       Unhex("00 00 00 01 00"),
       absl::StrCat(Unhex("01 02 03"), Var(1), Flagged(1), Unhex("016d"), Unhex("07 08 09")),
       absl::StrCat(Unhex("01 02 03"), Unhex("00 016d 00"), Unhex("07 08 09")),
       {"((1,''),7)", "((2,'m'),8)", "((3,''),9)"}},
      // Point: its x sparse [2.5, 0].
      {"Point",
       2,
       Unhex("00 01 00"),
       absl::StrCat(Var(0), Flagged(1), F64(2.5), F64(1), F64(2)),
       absl::StrCat(F64(2.5), F64(0), F64(1), F64(2)),
       {"(2.5,1)", "(0,2)"}},
      // The LowCardinality element's version word (the tuple's prefix) comes before every body.
      {"Tuple(LowCardinality(String), UInt64)",
       2,
       Unhex("00 00 01"),
       absl::StrCat(Le<uint64_t>(1), Le<uint64_t>(0x600), Le<uint64_t>(1), Unhex("016b"),
                    Le<uint64_t>(2), Unhex("00 00"), Var(1), Flagged(0), Le<uint64_t>(3)),
       absl::StrCat(Le<uint64_t>(1), Le<uint64_t>(0x600), Le<uint64_t>(1), Unhex("016b"),
                    Le<uint64_t>(2), Unhex("00 00"), Le<uint64_t>(0), Le<uint64_t>(3)),
       {"('k',0)", "('k',3)"}},
      // Every element default, announced anyway.
      {"Tuple(UInt8, UInt8)", 1, Unhex("00 00 00"), Unhex("01 02"), Unhex("01 02"), {"(1,2)"}},
  };
}

std::string SparseBody(const SparseCase& c, bool sparse) {
  Bytes b;
  b.Raw(BlockInfoBytes()).VarUInt(1).VarUInt(c.rows).Str("t").Str(c.type);
  if (sparse) {
    b.U8(1).Raw(c.kinds).Raw(c.sparse);
  } else {
    b.U8(0).Raw(c.dense);
  }
  return b;
}

TEST(SparseTupleTest, SparseElementsDecodeIntoOrdinaryColumns) {
  for (const SparseCase& c : SparseCases()) {
    SCOPED_TRACE(c.type);
    Block block;
    absl::Status st = Decode(SparseBody(c, true), &block);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_EQ(block.rows(), c.rows);
    EXPECT_EQ(FormatAll(*block.column(0).column), c.tsv);
    // Written back densely: the plain layout.
    EXPECT_EQ(Hex(Encode(block)), Hex(SparseBody(c, false)));
    // Skipped as well as read.
    const std::string bytes = SparseBody(c, true);
    MemoryReadBuffer in(bytes);
    Block skipped;
    ASSERT_TRUE(ReadBlock(in, kRev, &skipped, /*discard_values=*/true).ok());
    EXPECT_TRUE(in.AtEnd());
    // Every truncation is an error.
    for (size_t n = 0; n < bytes.size(); ++n) {
      Block partial;
      EXPECT_FALSE(Decode(bytes.substr(0, n), &partial).ok()) << n;
    }
  }
}

TEST(SparseTupleTest, HeaderBlocksCarryTheKindsOfEveryElement) {
  const std::string body = Bytes()
                               .Raw(BlockInfoBytes())
                               .VarUInt(2)
                               .VarUInt(0)
                               .Str("t")
                               .Str("Tuple(a UInt64, b Tuple(UInt8, String))")
                               .U8(1)
                               .Raw(Unhex("00 01 00 00 01"))
                               .Str("u")
                               .Str("UInt8")
                               .U8(0);
  Block block;
  absl::Status st = Decode(body, &block);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(block.column_count(), 2u);
  EXPECT_EQ(block.column(1).column->type_name(), "UInt8");
}

TEST(SparseTupleTest, RefusesSparseElementsItCannotRead) {
  for (const auto& [type, kinds] : std::vector<std::pair<std::string, std::string>>{
           {"Tuple(Nullable(UInt8), UInt8)", Unhex("00 01 00")},
           {"Tuple(LowCardinality(String), UInt8)", Unhex("00 01 00")},
           {"Tuple(Tuple(UInt8), UInt8)", Unhex("00 01 00 00")},
           {"Tuple(UInt8, UInt8)", Unhex("00 00 03")},
       }) {
    SCOPED_TRACE(type);
    const std::string body = Bytes()
                                 .Raw(BlockInfoBytes())
                                 .VarUInt(1)
                                 .VarUInt(1)
                                 .Str("t")
                                 .Str(type)
                                 .U8(1)
                                 .Raw(kinds)
                                 .Raw(std::string(32, '\0'));
    Block block;
    absl::Status st = Decode(body, &block);
    EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "custom serialization")) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "column t")) << st;
  }
}

// ---- 2. Through the fake server ----

ConnectionOptions OptionsFor(const FakeServer& server) { return ClientOptionsFor(server); }

TEST(MoreTypesFakeServerTest, SelectPrintsEveryTwoRowColumn) {
  std::vector<const GoldenCase*> cases;
  std::vector<std::pair<std::string, std::string>> header;
  for (const GoldenCase& c : Cases()) {
    if (c.rows != 2) continue;
    cases.push_back(&c);
    header.emplace_back(c.column, c.type);
  }
  // AggregateFunction, geo, Nested and the empty Tuple are among them.
  for (const char* must : {"s", "q", "argm", "pt", "ring", "nst", "at0"}) {
    EXPECT_TRUE(std::any_of(cases.begin(), cases.end(), [&](const GoldenCase* c) {
      return c->column == must;
    })) << must;
  }
  GoldenCase empty_tuple{"t0", "Tuple()", 2, "00", {"()", "()"}};
  cases.push_back(&empty_tuple);
  header.emplace_back(empty_tuple.column, empty_tuple.type);
  std::string want;
  for (size_t row = 0; row < 2; ++row) {
    std::vector<std::string> fields;
    for (const GoldenCase* c : cases) fields.push_back(c->tsv[row]);
    absl::StrAppend(&want, absl::StrJoin(fields, "\t"), "\n");
  }

  FakeServer server({.revision = kRev});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);
  server.Send(DataPacket(HeaderBlock(header), kRev));
  server.Send(Bytes().VarUInt(1).Str("").Raw(Body(cases, 2)));
  server.Send(ProgressPacket({.rows = 2}, kRev));
  server.Send(EndOfStreamPacket());
  server.ExpectPacket(ClientPacket::kPing);
  server.Send(PongPacket());
  server.Start();

  auto conn = Connection::Connect(OptionsFor(server));
  ASSERT_TRUE(conn.ok()) << conn.status();
  std::string tsv;
  std::vector<std::string> types;
  absl::Status st = (*conn)->Select({.query = "SELECT * FROM more_types"}, [&](const Block& b) {
    tsv += BlockToTsv(b);
    types.clear();
    for (const NamedColumn& c : b.columns()) types.push_back(c.column->type_name());
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(tsv, want);
  ASSERT_EQ(types.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(types[i], cases[i]->type);
  EXPECT_TRUE((*conn)->Ping().ok());
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

}  // namespace
}  // namespace chgate::clickhouse::testing
