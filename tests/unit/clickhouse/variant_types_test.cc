// Variant, Dynamic and JSON at the column layer, proven without a live server at revision 54460.
// Every golden body below is written byte by byte from ClickHouse's serialization rules (never
// produced by the library's writers):
//   Variant: prefix UInt64 mode (0 BASIC, 1 COMPACT); body UInt8 global discriminators (255 =
//     NULL, alternatives sorted by type name), then each alternative's rows.
//   Dynamic V1: prefix UInt64 1, VarUInt (skipped), VarUInt n, n type names, the Variant prefix
//     over the types plus SharedVariant; body the Variant body. V2 (UInt64 2) lacks the skipped
//     number.
//   JSON V1: prefix UInt64 0, VarUInt max_dynamic_paths, VarUInt n, n dynamic paths, typed paths'
//     prefixes, dynamic paths' Dynamic prefixes; body typed paths, dynamic paths, then shared data
//     as Array(Tuple(path String, binary value String)). STRING: UInt64 1, then a String per row.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/clickhouse/block.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/dynamic.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/json.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/columns/variant.h"
#include "server/clickhouse/connection.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/gather.h"
#include "tests/unit/clickhouse/fake_server.h"
#include "tests/unit/clickhouse/test_util.h"
#include "text/status_macros.h"

namespace chgate::clickhouse::testing {
namespace {

constexpr uint64_t kRev = revision::kClient;

// Block info as every writer sends it.
std::string BlockInfoBytes() { return Bytes().VarUInt(1).U8(0).VarUInt(2).I32(-1).VarUInt(0); }

struct Golden {
  std::string column;
  std::string type;
  size_t rows;
  std::string data;
  std::vector<std::string> tsv;
};

// ---- The golden columns ----

// Variant(String, UInt64) of [42, 'hi', NULL]: String sorts first, so 'hi' is 0 and 42 is 1.
Golden VariantGolden() {
  return {"v",
          "Variant(String, UInt64)",
          3,
          Bytes().U64(0).Raw(Unhex("01 00 ff")).Str("hi").U64(42),
          {"42", "hi", "\\N"}};
}

// Dynamic V1 of [42::Int64, 'hi', NULL]: alternatives Int64 (0), SharedVariant (1), String (2).
std::string DynamicPrefixV1(const std::vector<std::string>& types) {
  Bytes b;
  b.U64(1).VarUInt(types.size()).VarUInt(types.size());
  for (const std::string& t : types) b.Str(t);
  return b.U64(0);  // the Variant's BASIC mode
}

Golden DynamicGolden() {
  return {"d",
          "Dynamic",
          3,
          Bytes()
              .Raw(DynamicPrefixV1({"Int64", "String"}))
              .Raw(Unhex("00 02 ff"))
              .U64(42)  // Int64 rows
              .Str("hi"),
          {"42", "hi", "\\N"}};
}

// JSON(n UInt8) in V1 of two rows: {"a":42,"b":{"c":"x"},"n":1} and {"n":2,"s":"q"}. Paths "a"
// and "b.c" are dynamic; "s" is in shared data as the String 'q' (binary type 0x15).
Golden JsonGolden() {
  return {"j",
          "JSON(n UInt8)",
          2,
          Bytes()
              .U64(0)         // V1
              .VarUInt(1024)  // max_dynamic_paths (skipped by readers)
              .VarUInt(2)     // dynamic paths
              .Str("a")
              .Str("b.c")
              .Raw(DynamicPrefixV1({"Int64"}))   // "a"
              .Raw(DynamicPrefixV1({"String"}))  // "b.c"
              .Raw(Unhex("01 02"))               // typed path n
              .Raw(Unhex("00 ff"))               // "a": Int64, NULL
              .U64(42)                           //
              .Raw(Unhex("01 ff"))               // "b.c": [SharedVariant, String], so String is 1
              .Str("x")
              .U64(0)  // shared data offsets
              .U64(1)
              .Str("s")                 // path
              .Str(Unhex("15 01 71")),  // String 'q'
          {R"({"a":42,"b":{"c":"x"},"n":1})", R"({"n":2,"s":"q"})"}};
}

// JSON in STRING form, as chgate writes it (and a server sends with
// output_format_native_write_json_as_string=1).
Golden JsonStringGolden() {
  return {"js",
          "JSON",
          3,
          Bytes().U64(1).Str(R"({"a":1})").Str("{}").Str(R"({"s":"x\ty"})"),
          {R"({"a":1})", "{}", R"({"s":"x\\ty"})"}};
}

// Array(Variant(String, UInt64)) of [[42, 'hi'], [], [NULL]]: the Variant's prefix comes before
// the array offsets.
Golden ArrayOfVariantGolden() {
  return {"av",
          "Array(Variant(String, UInt64))",
          3,
          Bytes().U64(0).U64(2).U64(2).U64(3).Raw(Unhex("01 00 ff")).Str("hi").U64(42),
          {"[42,'hi']", "[]", "[NULL]"}};
}

std::string Body(const std::vector<Golden>& cases) {
  Bytes b;
  b.Raw(BlockInfoBytes()).VarUInt(cases.size()).VarUInt(cases[0].rows);
  for (const Golden& c : cases) b.Str(c.column).Str(c.type).U8(0).Raw(c.data);
  return b;
}

absl::Status Decode(std::string_view bytes, Block* block) {
  return testing::DecodeBlock(bytes, kRev, block);
}

std::string Encode(const Block& block) { return testing::EncodeBlock(block, kRev); }

std::string Format(const Column& c, size_t row, bool nested = false) {
  return testing::FormatCell(c, row, nested);
}

// Decodes the golden column alone, checks its text, and re-encodes it.
void CheckGolden(const Golden& g, bool reencodes_identically = true) {
  SCOPED_TRACE(g.type);
  Block block;
  const std::string body = Body({g});
  absl::Status st = Decode(body, &block);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(block.rows(), g.rows);
  const Column& c = *block.column(0).column;
  EXPECT_EQ(c.type_name(), g.type);
  for (size_t row = 0; row < g.rows; ++row) EXPECT_EQ(Format(c, row), g.tsv[row]) << row;
  if (reencodes_identically) {
    EXPECT_EQ(Hex(Encode(block)), Hex(body));
  }
}

TEST(VariantGoldenTest, DecodesPrintsAndReencodes) {
  CheckGolden(VariantGolden());
  CheckGolden(ArrayOfVariantGolden());
  CheckGolden(DynamicGolden());
  CheckGolden(JsonStringGolden());
}

TEST(VariantGoldenTest, JsonV1BecomesObjectText) {
  // Read as V1, written back as STRING: the text is what is compared.
  CheckGolden(JsonGolden(), /*reencodes_identically=*/false);
  Block block;
  ASSERT_TRUE(Decode(Body({JsonGolden()}), &block).ok());
  const std::string want =
      Body({{"j",
             "JSON(n UInt8)",
             2,
             Bytes().U64(1).Str(R"({"a":42,"b":{"c":"x"},"n":1})").Str(R"({"n":2,"s":"q"})"),
             {}}});
  EXPECT_EQ(Hex(Encode(block)), Hex(want));
}

TEST(VariantGoldenTest, VariantDiscriminatorsAndOffsets) {
  Block block;
  ASSERT_TRUE(Decode(Body({VariantGolden()}), &block).ok());
  const auto& v = static_cast<const ColumnVariant&>(*block.column(0).column);
  EXPECT_EQ(v.kind(), ColumnKind::kVariant);
  ASSERT_EQ(v.alternative_count(), 2u);
  EXPECT_EQ(v.alternative(0)->type_name(), "String");
  EXPECT_EQ(v.discriminator(0), 1);
  EXPECT_EQ(v.discriminator(1), 0);
  EXPECT_TRUE(v.IsNull(2));
  EXPECT_EQ(v.offset(0), 0u);
  EXPECT_EQ(Format(v, 1, /*nested=*/true), "'hi'");
  EXPECT_EQ(Format(v, 2, /*nested=*/true), "NULL");
  EXPECT_EQ(v.FindAlternative("UInt64"), 1u);
}

TEST(VariantGoldenTest, CompactDiscriminatorsAreRead) {
  // Mode 1: per granule VarUInt rows, UInt8 format (0 plain, 1 one discriminator for all).
  Block block;
  Golden plain = VariantGolden();
  plain.data = Bytes().U64(1).VarUInt(3).U8(0).Raw(Unhex("01 00 ff")).Str("hi").U64(42);
  ASSERT_TRUE(Decode(Body({plain}), &block).ok());
  EXPECT_EQ(BlockToTsv(block), "42\nhi\n\\N\n");
  Golden same = VariantGolden();
  same.data = Bytes().U64(1).VarUInt(3).U8(1).U8(1).U64(7).U64(8).U64(9);
  ASSERT_TRUE(Decode(Body({same}), &block).ok());
  EXPECT_EQ(BlockToTsv(block), "7\n8\n9\n");
  // Written back in BASIC mode.
  EXPECT_EQ(Hex(Encode(block)),
            Hex(Body({{"v",
                       "Variant(String, UInt64)",
                       3,
                       Bytes().U64(0).Raw(Unhex("01 01 01")).U64(7).U64(8).U64(9),
                       {}}})));
}

TEST(VariantGoldenTest, DynamicV2AndSharedVariantAreRead) {
  Golden v2 = DynamicGolden();
  v2.data = Bytes()
                .U64(2)
                .VarUInt(2)
                .Str("Int64")
                .Str("String")
                .U64(0)
                .Raw(Unhex("00 02 ff"))
                .U64(42)
                .Str("hi");
  CheckGolden(v2, /*reencodes_identically=*/false);
  // A Float64 1.5 (binary type 0x0e) and an Array(UInt8) [1,2] (0x1e 0x01) in SharedVariant.
  Golden shared = {"d",
                   "Dynamic",
                   3,
                   Bytes()
                       .Raw(DynamicPrefixV1({"String"}))
                       .Raw(Unhex("00 01 00"))
                       .Str(Unhex("0e 000000000000f83f"))
                       .Str(Unhex("1e 01 02 01 02"))
                       .Str("s"),
                   {"1.5", "s", "[1,2]"}};
  CheckGolden(shared);
}

TEST(VariantGoldenTest, EmptyArraysWriteOnlyThePrefix) {
  Golden empty = {
      "av", "Array(Variant(String, UInt64))", 2, Bytes().U64(0).U64(0).U64(0), {"[]", "[]"}};
  CheckGolden(empty);
  Golden dyn = {"ad", "Array(Dynamic)", 1, Bytes().Raw(DynamicPrefixV1({})).U64(0), {"[]"}};
  CheckGolden(dyn);
}

TEST(VariantGoldenTest, EveryColumnInOneBlockThroughBlockToTsv) {
  const std::vector<Golden> all = {VariantGolden(), DynamicGolden(), ArrayOfVariantGolden(),
                                   JsonStringGolden()};
  Block block;
  const std::string body = Body(all);
  ASSERT_TRUE(Decode(body, &block).ok());
  EXPECT_EQ(
      BlockToTsv(block),
      "42\t42\t[42,'hi']\t{\"a\":1}\nhi\thi\t[]\t{}\n\\N\t\\N\t[NULL]\t{\"s\":\"x\\\\ty\"}\n");
  EXPECT_EQ(Hex(Encode(block)), Hex(body));
}

// ---- Types ----

TEST(VariantFactoryTest, CanonicalNamesAndRefusals) {
  auto v = CreateColumn("Variant(UInt64, String, Nothing, String)");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)->type_name(), "Variant(String, UInt64)");
  EXPECT_EQ((*v)->kind(), ColumnKind::kVariant);
  auto d = CreateColumn("Dynamic(max_types=8)");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->type_name(), "Dynamic(max_types=8)");
  EXPECT_EQ(static_cast<const ColumnDynamic&>(**d).max_types(), 8);
  const std::string json =
      "JSON(max_dynamic_types=8, max_dynamic_paths=10, `a.b` UInt32, SKIP `c.d`, SKIP REGEXP "
      "'x\\\\..*')";
  auto j = CreateColumn(json);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)->type_name(), json);
  const auto& params = static_cast<const ColumnJson&>(**j).params();
  EXPECT_EQ(params.max_dynamic_paths, 10);
  EXPECT_EQ(params.max_dynamic_types, 8);
  ASSERT_EQ(params.typed_paths.size(), 1u);
  EXPECT_EQ(params.typed_paths[0].first, "a.b");
  EXPECT_EQ(params.skip_paths, std::vector<std::string>{"c.d"});
  EXPECT_EQ(params.skip_regexps, std::vector<std::string>{"x\\..*"});

  for (const char* bad :
       {"Nullable(Variant(String))", "Nullable(Dynamic)", "Nullable(JSON)", "LowCardinality(JSON)",
        "Variant(Nullable(String))", "Variant(LowCardinality(Nullable(String)))",
        "Variant(Variant(String))", "Variant(Dynamic)", "Variant(Nothing)", "Variant()",
        "Dynamic(max_types=300)", "Dynamic(8)", "JSON(max_depth=3)", "JSON(UInt8)"}) {
    auto c = CreateColumn(bad);
    EXPECT_FALSE(c.ok()) << bad;
  }
  EXPECT_TRUE(CreateColumn("Array(Variant(String, UInt64))").ok());
  EXPECT_TRUE(CreateColumn("Map(String, Dynamic)").ok());
  EXPECT_TRUE(CreateColumn("Tuple(a JSON, b Variant(Int8, String))").ok());
}

// ---- The append API ----

TEST(VariantAppendTest, ValuesBuildTheGoldenBytes) {
  auto v = std::static_pointer_cast<ColumnVariant>(*CreateColumn("Variant(String, UInt64)"));
  v->AppendAlternative(1);
  static_cast<ColumnFixed&>(*v->alternative(1)).Append<uint64_t>(42);
  v->AppendAlternative(0);
  static_cast<ColumnString&>(*v->alternative(0)).Append("hi");
  v->AppendDefault();
  auto d = std::static_pointer_cast<ColumnDynamic>(*CreateColumn("Dynamic"));
  ASSERT_TRUE(d->AppendValueOf("String").ok());  // added first, sorted after Int64 anyway
  d->Truncate(0);
  auto i64 = d->AppendValueOf("Int64");
  ASSERT_TRUE(i64.ok()) << i64.status();
  static_cast<ColumnFixed&>(**i64).Append<int64_t>(42);
  static_cast<ColumnString&>(**d->AppendValueOf("String")).Append("hi");
  d->AppendNull();
  auto js = std::static_pointer_cast<ColumnJson>(*CreateColumn("JSON"));
  ASSERT_TRUE(js->AppendJson(R"({"a":1})").ok());
  js->AppendDefault();
  ASSERT_TRUE(js->AppendJson(R"({"s":"x\ty"})").ok());

  const Block block = MakeBlock({{"v", v}, {"d", d}, {"js", js}});
  Golden variant = VariantGolden(), dynamic = DynamicGolden(), json = JsonStringGolden();
  EXPECT_EQ(Hex(Encode(block)), Hex(Body({variant, dynamic, json})));
}

TEST(VariantAppendTest, DynamicAddsTypesInNameOrderAndKeepsRows) {
  auto d = std::static_pointer_cast<ColumnDynamic>(*CreateColumn("Dynamic(max_types=2)"));
  static_cast<ColumnString&>(**d->AppendValueOf("String")).Append("a");
  static_cast<ColumnFixed&>(**d->AppendValueOf("Float64")).Append<double>(2.5);
  static_cast<ColumnString&>(**d->AppendValueOf("String")).Append("b");
  EXPECT_EQ(d->alternative_type(0), "Float64");
  EXPECT_EQ(Format(*d, 0), "a");
  EXPECT_EQ(Format(*d, 1), "2.5");
  EXPECT_EQ(Format(*d, 2), "b");
  auto third = d->AppendValueOf("UInt8");
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(d->AppendValueOf("Nullable(String)").ok());
  EXPECT_FALSE(d->AppendValueOf("SharedVariant").ok());
  EXPECT_EQ(d->Size(), 3u);
}

TEST(VariantAppendTest, AppendRangeAndTruncate) {
  Block block;
  ASSERT_TRUE(Decode(Body({VariantGolden(), DynamicGolden(), JsonStringGolden()}), &block).ok());
  for (const NamedColumn& c : block.columns()) {
    SCOPED_TRACE(c.column->type_name());
    ColumnPtr copy = c.column->CloneEmpty();
    copy->AppendRange(*c.column, 1, 3);
    copy->AppendRange(*c.column, 0, 1);
    ASSERT_EQ(copy->Size(), 3u);
    EXPECT_EQ(Format(*copy, 0), Format(*c.column, 1));
    EXPECT_EQ(Format(*copy, 1), Format(*c.column, 2));
    EXPECT_EQ(Format(*copy, 2), Format(*c.column, 0));
    copy->Truncate(1);
    ASSERT_EQ(copy->Size(), 1u);
    EXPECT_EQ(Format(*copy, 0), Format(*c.column, 1));
    copy->AppendRange(*c.column, 2, 3);
    EXPECT_EQ(Format(*copy, 1), Format(*c.column, 2));
    EXPECT_GT(c.column->ByteSize(), 0u);
  }
  // A truncated variant writes only what is left.
  auto v = block.column(0).column->CloneEmpty();
  v->AppendRange(*block.column(0).column, 0, 3);
  v->Truncate(1);
  GatherWriter w;
  v->SaveBody(w);
  EXPECT_EQ(Hex(w.ToString()), Hex(Bytes().U8(1).U64(42).str()));
}

TEST(VariantAppendTest, JsonTextIsCheckedStrictly) {
  auto js = std::static_pointer_cast<ColumnJson>(*CreateColumn("JSON"));
  for (const char* good :
       {"{}", R"( {"a": [1, -2.5e3, true, null, {"b": "\u00e9\n"}]} )", R"({"a":{"b":{"c":0}}})"}) {
    EXPECT_TRUE(js->AppendJson(good).ok()) << good;
  }
  for (const char* bad : {"", "[]", "1", "{", R"({"a":1,})", R"({'a':1})", R"({"a":01})",
                          R"({"a":1} x)", R"({"a":"\x"})", "{\"a\":\"\x01\"}", R"({"a":tru})",
                          R"({a:1})", R"({"a":.5})", R"({"a":"\u12"})"}) {
    absl::Status st = js->AppendJson(bad);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(js->Size(), 3u);
  std::string deep(2000, '[');
  EXPECT_FALSE(js->AppendJson(absl::StrCat("{\"a\":", deep)).ok());
  EXPECT_EQ(Format(*js, 2, /*nested=*/true), R"('{"a":{"b":{"c":0}}}')");
}

// ---- Several blocks into one column ----

TEST(VariantBlocksTest, DynamicMergesBlocksWithOtherTypes) {
  auto d = *CreateColumn("Dynamic");
  auto load = [&](const std::string& data, size_t rows) {
    MemoryReadBuffer in(data);
    ASSERT_TRUE(d->LoadPrefix(in).ok());
    absl::Status st = d->LoadBody(in, rows);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_TRUE(in.AtEnd());
  };
  load(DynamicGolden().data, 3);
  load(Bytes().Raw(DynamicPrefixV1({"Float64", "String"})).Raw(Unhex("02 00")).U64(0).Str("z"), 2);
  ASSERT_EQ(d->Size(), 5u);
  std::vector<std::string> text;
  for (size_t row = 0; row < 5; ++row) text.push_back(Format(*d, row));
  EXPECT_EQ(text, (std::vector<std::string>{"42", "hi", "\\N", "z", "0"}));
  auto v = *CreateColumn("Variant(String, UInt64)");
  const std::string variant_data = VariantGolden().data;
  for (int i = 0; i < 2; ++i) {
    MemoryReadBuffer in(variant_data);
    ASSERT_TRUE(v->LoadPrefix(in).ok());
    ASSERT_TRUE(v->LoadBody(in, 3).ok());
  }
  ASSERT_EQ(v->Size(), 6u);
  EXPECT_EQ(Format(*v, 3), "42");
  EXPECT_EQ(Format(*v, 4), "hi");
  EXPECT_EQ(static_cast<const ColumnVariant&>(*v).offset(3), 1u);
}

// ---- Corrupt input ----

TEST(VariantCorruptTest, BadDiscriminatorModeAndVersionsAreErrors) {
  struct Bad {
    std::string type;
    std::string data;
    absl::StatusCode code;
  };
  const std::vector<Bad> cases = {
      {"Variant(String, UInt64)", Bytes().U64(0).Raw(Unhex("05 00 ff")).Str("hi"),
       absl::StatusCode::kDataLoss},
      {"Variant(String, UInt64)", Bytes().U64(7).Raw(Unhex("01 00 ff")),
       absl::StatusCode::kDataLoss},
      {"Variant(String, UInt64)", Bytes().U64(1).VarUInt(9).U8(0), absl::StatusCode::kDataLoss},
      {"Variant(String, UInt64)", Bytes().U64(1).VarUInt(3).U8(5), absl::StatusCode::kDataLoss},
      {"Dynamic", Bytes().U64(9), absl::StatusCode::kDataLoss},
      {"Dynamic", Bytes().U64(3).VarUInt(0), absl::StatusCode::kUnimplemented},
      {"Dynamic", Bytes().U64(1).VarUInt(1).VarUInt(1).Str("Nullable(String)"),
       absl::StatusCode::kInvalidArgument},
      {"Dynamic", Bytes().U64(2).VarUInt(2).Str("String").Str("String"),
       absl::StatusCode::kDataLoss},
      {"Dynamic",
       Bytes().Raw(DynamicPrefixV1({})).Raw(Unhex("00 00 00")).Str(Unhex("ee")).Str("").Str(""),
       absl::StatusCode::kUnimplemented},
      {"JSON", Bytes().U64(7), absl::StatusCode::kDataLoss},
      {"JSON", Bytes().U64(3).VarUInt(0), absl::StatusCode::kUnimplemented},
      {"JSON", Bytes().U64(2).VarUInt(1).Str("a").U64(9), absl::StatusCode::kDataLoss},
  };
  for (const Bad& c : cases) {
    Block block;
    absl::Status st = Decode(Body({{"c", c.type, 3, c.data, {}}}), &block);
    EXPECT_EQ(st.code(), c.code) << c.type << " " << Hex(c.data) << ": " << st;
  }
}

TEST(VariantCorruptTest, EveryTruncationIsAnErrorNotACrash) {
  for (const Golden& g : {VariantGolden(), DynamicGolden(), JsonGolden(), JsonStringGolden(),
                          ArrayOfVariantGolden()}) {
    const std::string body = Body({g});
    const size_t header = body.size() - g.data.size();
    for (size_t n = header; n < body.size(); ++n) {
      Block block;
      EXPECT_FALSE(Decode(std::string_view(body).substr(0, n), &block).ok())
          << g.type << " cut at " << n;
    }
  }
}

// ---- Through the fake server ----

ConnectionOptions OptionsFor(const FakeServer& server) { return ClientOptionsFor(server); }

TEST(VariantFakeServerTest, SelectDecodesV1Blocks) {
  const std::vector<Golden> first = {VariantGolden(), DynamicGolden(), ArrayOfVariantGolden()};
  Golden json = JsonGolden();
  FakeServer server({.revision = kRev});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);
  server.Send(DataPacket(
      HeaderBlock({{"v", first[0].type}, {"d", first[1].type}, {"av", first[2].type}}), kRev));
  server.Send(Bytes().VarUInt(1).Str("").Raw(Body(first)));
  server.Send(ProgressPacket({.rows = 3, .bytes = 100}, kRev));
  server.Send(Bytes().VarUInt(1).Str("").Raw(Body({json})));
  server.Send(EndOfStreamPacket());
  server.Start();

  auto conn = Connection::Connect(OptionsFor(server));
  ASSERT_TRUE(conn.ok()) << conn.status();
  std::string tsv;
  absl::Status st = (*conn)->Select({.query = "SELECT v, d, av FROM t"}, [&](const Block& block) {
    tsv += BlockToTsv(block);
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(tsv,
            "42\t42\t[42,'hi']\nhi\thi\t[]\n\\N\t\\N\t[NULL]\n"
            "{\"a\":42,\"b\":{\"c\":\"x\"},\"n\":1}\n{\"n\":2,\"s\":\"q\"}\n");
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
}

TEST(VariantFakeServerTest, InsertSendsTheGoldenBytes) {
  const std::vector<Golden> golden = {VariantGolden(), DynamicGolden(), JsonStringGolden()};
  bool checked = false;
  FakeServer server({.revision = kRev});
  server.Handshake();
  server.ExpectPacket(ClientPacket::kQuery);
  server.ExpectPacket(ClientPacket::kData);
  server.Send(DataPacket(
      HeaderBlock({{"v", golden[0].type}, {"d", golden[1].type}, {"js", golden[2].type}}), kRev));
  server.ExpectPacket(ClientPacket::kData, [&](std::string_view packet) {
    EXPECT_EQ(Hex(packet), Hex(Bytes().VarUInt(2).Str("").Raw(Body(golden)).str()));
    checked = true;
  });
  server.ExpectPacket(ClientPacket::kData);  // the empty block that ends the INSERT
  server.Send(EndOfStreamPacket());
  server.Start();

  auto conn = Connection::Connect(OptionsFor(server));
  ASSERT_TRUE(conn.ok()) << conn.status();
  // The rows are built value by value, not decoded from the golden bytes.
  auto v = std::static_pointer_cast<ColumnVariant>(*CreateColumn(golden[0].type));
  v->AppendAlternative(1);
  static_cast<ColumnFixed&>(*v->alternative(1)).Append<uint64_t>(42);
  v->AppendAlternative(0);
  static_cast<ColumnString&>(*v->alternative(0)).Append("hi");
  v->AppendNull();
  auto d = std::static_pointer_cast<ColumnDynamic>(*CreateColumn("Dynamic"));
  static_cast<ColumnFixed&>(**d->AppendValueOf("Int64")).Append<int64_t>(42);
  static_cast<ColumnString&>(**d->AppendValueOf("String")).Append("hi");
  d->AppendNull();
  auto js = std::static_pointer_cast<ColumnJson>(*CreateColumn("JSON"));
  ASSERT_TRUE(js->AppendJson(R"({"a":1})").ok());
  ASSERT_TRUE(js->AppendJson("{}").ok());
  ASSERT_TRUE(js->AppendJson(R"({"s":"x\ty"})").ok());
  const Block block = MakeBlock({{"v", v}, {"d", d}, {"js", js}});
  const Block* blocks[] = {&block};
  absl::Status st = (*conn)->Insert({.query = "INSERT INTO t (v, d, js) VALUES"}, blocks);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(server.Wait().ok()) << server.Wait();
  EXPECT_TRUE(checked);
}

}  // namespace
}  // namespace chgate::clickhouse::testing
