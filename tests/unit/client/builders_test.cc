// BlockBuilder produces the Column layout of the proto (checked byte for byte for the tricky
// types and read back through the column readers for all of them), range-checks values, and
// reports the first bad value with its column and row; the row Value helpers.
#include "client/sdk/builders.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/client/test_columns.h"

namespace chgate::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Le;
using testing::Texts;

TEST(BlockBuilderTest, BuildsScalarColumnsInTheProtoLayout) {
  BlockBuilder b;
  b.AddColumn("id", "UInt64").AppendUInt64(1).AppendUInt64(18446744073709551615u);
  b.AddColumn("i8", "Int8").AppendInt64(-128).AppendInt64(127);
  b.AddColumn("f", "Float64").AppendFloat64(0.5).AppendFloat64(-1e300);
  b.AddColumn("s", "String").AppendString("ab").AppendString("");
  b.AddColumn("uuid", "UUID")
      .AppendString("00112233-4455-6677-8899-AABBCCDDEEFF")
      .AppendString("ffffffff-ffff-ffff-ffff-ffffffffffff");
  b.AddColumn("ip", "IPv4").AppendString("1.2.3.4").AppendUInt64(0x0a000001);
  absl::StatusOr<v1::Block> block = b.Build();
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_EQ(block->rows(), 2u);
  ASSERT_EQ(block->columns_size(), 6);
  EXPECT_EQ(block->columns(0).name(), "id");
  EXPECT_EQ(block->columns(0).type(), "UInt64");
  EXPECT_EQ(block->columns(0).data(), Le<uint64_t>({1, 18446744073709551615u}));
  EXPECT_EQ(block->columns(1).data(), std::string("\x80\x7f", 2));
  EXPECT_EQ(block->columns(3).data(), "ab");
  EXPECT_THAT(block->columns(3).offsets(), ElementsAre(2, 2));
  EXPECT_EQ(block->columns(4).data().substr(0, 4), std::string("\x00\x11\x22\x33", 4));
  EXPECT_EQ(block->columns(5).data(), Le<uint32_t>({0x01020304, 0x0a000001}));
  EXPECT_THAT(Texts(block->columns(2), 2), ElementsAre("0.5", "-1e300"));
  EXPECT_THAT(Texts(block->columns(4), 2), ElementsAre("00112233-4455-6677-8899-aabbccddeeff",
                                                       "ffffffff-ffff-ffff-ffff-ffffffffffff"));
}

TEST(BlockBuilderTest, RoundTripsEveryFamilyThroughTheReaders) {
  const absl::Time t = absl::FromUnixMillis(1640995200123);  // 2022-01-01 00:00:00.123 UTC
  struct Case {
    std::string type;
    std::function<void(ColumnBuilder&)> append;
    std::string text;
  } cases[] = {
      {"Int128",
       [](ColumnBuilder& c) { c.AppendString("-170141183460469231731687303715884105728"); },
       "-170141183460469231731687303715884105728"},
      {"UInt256", [](ColumnBuilder& c) { c.AppendInt64(42); }, "42"},
      {"Int256", [](ColumnBuilder& c) { c.AppendInt64(-2); }, "-2"},
      {"Float32", [](ColumnBuilder& c) { c.AppendFloat64(0.1); }, "0.1"},
      {"BFloat16", [](ColumnBuilder& c) { c.AppendFloat64(1.5); }, "1.5"},
      {"Bool", [](ColumnBuilder& c) { c.AppendBool(true); }, "true"},
      {"Decimal(9, 2)", [](ColumnBuilder& c) { c.AppendString("-12.3"); }, "-12.30"},
      {"Decimal(9, 2)", [](ColumnBuilder& c) { c.AppendInt64(5); }, "5.00"},
      {"Decimal(9, 2)", [](ColumnBuilder& c) { c.AppendDecimalRaw(1234); }, "12.34"},
      {"Decimal(38, 4)", [](ColumnBuilder& c) { c.AppendString("12345678901234567890.1200"); },
       "12345678901234567890.1200"},
      {"Decimal256(2)", [](ColumnBuilder& c) { c.AppendString("-0.01"); }, "-0.01"},
      {"Date", [&](ColumnBuilder& c) { c.AppendTime(t); }, "2022-01-01"},
      {"Date32", [](ColumnBuilder& c) { c.AppendTime(absl::FromUnixSeconds(-1)); }, "1969-12-31"},
      {"DateTime('UTC')", [&](ColumnBuilder& c) { c.AppendTime(t); }, "2022-01-01 00:00:00"},
      {"DateTime64(3, 'UTC')", [&](ColumnBuilder& c) { c.AppendTime(t); },
       "2022-01-01 00:00:00.123"},
      {"DateTime64(2, 'UTC')", [](ColumnBuilder& c) { c.AppendTime(absl::FromUnixMillis(-1)); },
       "1969-12-31 23:59:59.99"},
      {"Enum8('a' = 1, 'b' = -2)", [](ColumnBuilder& c) { c.AppendString("b"); }, "b"},
      {"Enum16('x' = 300)", [](ColumnBuilder& c) { c.AppendInt64(300); }, "x"},
      {"IPv6", [](ColumnBuilder& c) { c.AppendString("1.2.3.4"); }, "::ffff:1.2.3.4"},
      {"IPv6", [](ColumnBuilder& c) { c.AppendString("2001:db8::1"); }, "2001:db8::1"},
      {"FixedString(4)", [](ColumnBuilder& c) { c.AppendString("ab"); }, "ab\\0\\0"},
      {"LowCardinality(Nullable(String))", [](ColumnBuilder& c) { c.AppendNull(); }, "\\N"},
      {"Nullable(Int32)", [](ColumnBuilder& c) { c.AppendInt64(-1); }, "-1"},
      {"IntervalSecond", [](ColumnBuilder& c) { c.AppendInt64(-9); }, "-9"},
  };
  for (const Case& c : cases) {
    BlockBuilder b;
    c.append(b.AddColumn("c", c.type));
    absl::StatusOr<v1::Block> block = b.Build();
    ASSERT_TRUE(block.ok()) << c.type << ": " << block.status();
    EXPECT_THAT(Texts(block->columns(0), 1), ElementsAre(c.text)) << c.type;
  }
}

TEST(BlockBuilderTest, BuildsNestedColumns) {
  BlockBuilder b;
  ColumnBuilder& tags = b.AddColumn("tags", "Array(Nullable(String))");
  tags.element().AppendString("a").AppendNull();
  tags.EndRow();
  tags.EndRow();  // empty array
  ColumnBuilder& m = b.AddColumn("m", "Map(String, Array(UInt8))");
  m.element(0).AppendString("k");
  m.element(1).element().AppendUInt64(1).AppendUInt64(2);
  m.element(1).EndRow();
  m.EndRow();
  m.EndRow();
  ColumnBuilder& t = b.AddColumn("t", "Tuple(a UInt8, b String)");
  t.element(0).AppendUInt64(1);
  t.element(1).AppendString("x");
  t.EndRow();
  t.element(0).AppendUInt64(2);
  t.element(1).AppendString("y");
  t.EndRow();
  absl::StatusOr<v1::Block> block = b.Build();
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_EQ(block->rows(), 2u);
  // The proto's example: offsets [2, 2], child nulls 00 01, data "a", offsets [1, 1].
  const v1::Column& a = block->columns(0);
  EXPECT_THAT(a.offsets(), ElementsAre(2, 2));
  EXPECT_EQ(a.children(0).nulls(), std::string("\0\1", 2));
  EXPECT_EQ(a.children(0).data(), "a");
  EXPECT_THAT(a.children(0).offsets(), ElementsAre(1, 1));
  EXPECT_THAT(Texts(a, 2), ElementsAre("['a',NULL]", "[]"));
  EXPECT_EQ(block->columns(1).children(0).name(), "keys");
  EXPECT_EQ(block->columns(1).children(1).name(), "values");
  EXPECT_THAT(Texts(block->columns(1), 2), ElementsAre("{'k':[1,2]}", "{}"));
  EXPECT_EQ(block->columns(2).children(1).name(), "b");
  EXPECT_THAT(Texts(block->columns(2), 2), ElementsAre("(1,'x')", "(2,'y')"));
}

TEST(BlockBuilderTest, ReportsTheFirstBadValueWithColumnAndRow) {
  struct Case {
    std::string type;
    std::function<void(ColumnBuilder&)> append;
    std::string error;
  } cases[] = {
      {"UInt8", [](ColumnBuilder& c) { c.AppendUInt64(1).AppendUInt64(256); }, "row 1: 256 is out"},
      {"Int8", [](ColumnBuilder& c) { c.AppendInt64(-129); }, "-129 is out of range"},
      {"UInt64", [](ColumnBuilder& c) { c.AppendInt64(-1); }, "-1 is out of range"},
      {"Int64", [](ColumnBuilder& c) { c.AppendUInt64(9223372036854775808u); }, "out of range"},
      {"Bool", [](ColumnBuilder& c) { c.AppendInt64(2); }, "not 0 or 1"},
      {"Float32", [](ColumnBuilder& c) { c.AppendFloat64(1e39); }, "beyond the range"},
      {"String", [](ColumnBuilder& c) { c.AppendNull(); }, "not Nullable"},
      {"String", [](ColumnBuilder& c) { c.AppendInt64(1); }, "does not take integers"},
      {"FixedString(1)", [](ColumnBuilder& c) { c.AppendString("ab"); }, "do not fit"},
      {"UUID", [](ColumnBuilder& c) { c.AppendString("nope"); }, "not a UUID"},
      {"IPv4", [](ColumnBuilder& c) { c.AppendString("1.2.3"); }, "not an IPv4"},
      {"Enum8('a' = 1)", [](ColumnBuilder& c) { c.AppendString("b"); }, "not an element"},
      {"Enum8('a' = 1)", [](ColumnBuilder& c) { c.AppendInt64(2); }, "not an element"},
      {"Decimal(4, 2)", [](ColumnBuilder& c) { c.AppendString("1.234"); }, "not an exact"},
      {"Decimal(4, 2)", [](ColumnBuilder& c) { c.AppendString("123.4"); }, "out of range"},
      {"Decimal(4, 2)", [](ColumnBuilder& c) { c.AppendInt64(100); }, "exceeds the precision"},
      {"Date", [](ColumnBuilder& c) { c.AppendTime(absl::FromUnixSeconds(-86400)); },
       "out of range"},
      {"Date32",
       [](ColumnBuilder& c) {
         c.AppendTime(absl::FromCivil(absl::CivilDay(2300, 1, 1), absl::UTCTimeZone()));
       },
       "outside 1900-01-01..2299-12-31"},
      {"Array(UInt8)", [](ColumnBuilder& c) { c.AppendUInt64(1); }, "element()"},
      {"UInt8", [](ColumnBuilder& c) { c.EndRow(); }, "EndRow() is for"},
      {"Map(UInt8, UInt8)",
       [](ColumnBuilder& c) {
         c.element(0).AppendUInt64(1);
         c.EndRow();
       },
       "1 keys but 0 values"},
      {"Tuple(UInt8, UInt8)",
       [](ColumnBuilder& c) {
         c.element(0).AppendUInt64(1);
         c.EndRow();
       },
       "has 0 rows, expected 1"},
      {"Array(UInt8)", [](ColumnBuilder& c) { c.element(0).AppendUInt64(1); }, "not closed"},
  };
  for (const Case& c : cases) {
    BlockBuilder b;
    c.append(b.AddColumn("col", c.type));
    absl::StatusOr<v1::Block> block = b.Build();
    ASSERT_FALSE(block.ok()) << c.type;
    EXPECT_EQ(block.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(block.status().message(), HasSubstr(c.error)) << c.type;
    EXPECT_THAT(block.status().message(), HasSubstr("col")) << c.type;
  }
}

TEST(BlockBuilderTest, RejectsUnequalRowCountsAndBadTypes) {
  BlockBuilder b;
  b.AddColumn("a", "UInt8").AppendUInt64(1).AppendUInt64(2);
  b.AddColumn("b", "UInt8").AppendUInt64(1);
  EXPECT_THAT(b.Build().status().message(), HasSubstr("column b has 1 rows, column a has 2"));
  BlockBuilder bad;
  bad.AddColumn("x", "Array(").AppendUInt64(1);
  EXPECT_THAT(bad.Build().status().message(), HasSubstr("column x: cannot parse type"));
}

TEST(RowValuesTest, MakesEveryValueKind) {
  v1::InsertRequest request;
  AddRow(&request,
         {MakeNull(), MakeValue(nullptr), MakeValue(true), MakeValue(-1), MakeValue(uint64_t{7}),
          MakeValue(1.5), MakeValue("text"), MakeValue(std::string("s")),
          MakeBytes(std::string("\0", 1)), MakeValue(absl::FromUnixMillis(-1500)),
          MakeArray({MakeValue(1), MakeValue(2)}), MakeTuple({MakeValue("a")}),
          MakeMap({{MakeValue("k"), MakeValue(1)}}), MakeArray({})});
  ASSERT_EQ(request.rows().rows_size(), 1);
  const v1::Row& row = request.rows().rows(0);
  ASSERT_EQ(row.values_size(), 14);
  EXPECT_TRUE(row.values(0).has_null_value());
  EXPECT_TRUE(row.values(1).has_null_value());
  EXPECT_TRUE(row.values(2).bool_value());
  EXPECT_EQ(row.values(3).int64_value(), -1);
  EXPECT_EQ(row.values(4).uint64_value(), 7u);
  EXPECT_EQ(row.values(5).double_value(), 1.5);
  EXPECT_EQ(row.values(6).string_value(), "text");
  EXPECT_EQ(row.values(7).string_value(), "s");
  EXPECT_EQ(row.values(8).bytes_value(), std::string("\0", 1));
  EXPECT_EQ(row.values(9).timestamp_value().seconds(), -2);
  EXPECT_EQ(row.values(9).timestamp_value().nanos(), 500000000);
  EXPECT_EQ(row.values(10).array_value().values_size(), 2);
  EXPECT_EQ(row.values(11).tuple_value().values(0).string_value(), "a");
  EXPECT_EQ(row.values(12).map_value().entries(0).value().int64_value(), 1);
  EXPECT_TRUE(row.values(13).has_array_value());
  EXPECT_EQ(row.values(13).array_value().values_size(), 0);
}

}  // namespace
}  // namespace chgate::client
