// Reading the Column layout: the text of every type the layout table lists (TabSeparated as
// clickhouse-client prints it, CSV, JSON), typed reads, and validation of malformed columns.
#include "client/sdk/column_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/unit/client/test_columns.h"

namespace chgate::client {
namespace {

using testing::Col;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Le;
using testing::StringCol;
using testing::Texts;

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

// `count` bytes of `fill`.
std::string Fill(size_t count, int fill) { return std::string(count, static_cast<char>(fill)); }

TEST(FormatValueTest, IntegersOfEveryWidth) {
  EXPECT_THAT(Texts(Col("Int8", Le<int8_t>({-128, 127})), 2), ElementsAre("-128", "127"));
  EXPECT_THAT(Texts(Col("Int16", Le<int16_t>({-32768})), 1), ElementsAre("-32768"));
  EXPECT_THAT(Texts(Col("Int32", Le<int32_t>({-2147483647 - 1})), 1), ElementsAre("-2147483648"));
  EXPECT_THAT(Texts(Col("Int64", Le<int64_t>({std::numeric_limits<int64_t>::min()})), 1),
              ElementsAre("-9223372036854775808"));
  EXPECT_THAT(Texts(Col("UInt8", Le<uint8_t>({255})), 1), ElementsAre("255"));
  EXPECT_THAT(Texts(Col("UInt16", Le<uint16_t>({65535})), 1), ElementsAre("65535"));
  EXPECT_THAT(Texts(Col("UInt32", Le<uint32_t>({4294967295u})), 1), ElementsAre("4294967295"));
  EXPECT_THAT(Texts(Col("UInt64", Le<uint64_t>({18446744073709551615u})), 1),
              ElementsAre("18446744073709551615"));
}

TEST(FormatValueTest, WideIntegersInDecimal) {
  // Int128: -1, 2^100, and the minimum.
  std::string data = Fill(16, 0xff);
  std::string two_100(16, '\0');
  two_100[12] = 0x10;  // bit 100 = byte 12, bit 4
  data += two_100;
  std::string min128(16, '\0');
  min128[15] = static_cast<char>(0x80);
  data += min128;
  EXPECT_THAT(Texts(Col("Int128", data), 3),
              ElementsAre("-1", "1267650600228229401496703205376",
                          "-170141183460469231731687303715884105728"));
  EXPECT_THAT(Texts(Col("UInt128", Fill(16, 0xff)), 1),
              ElementsAre("340282366920938463463374607431768211455"));
  EXPECT_THAT(
      Texts(Col("UInt256", Fill(32, 0xff)), 1),
      ElementsAre(
          "115792089237316195423570985008687907853269984665640564039457584007913129639935"));
  std::string min256(32, '\0');
  min256[31] = static_cast<char>(0x80);
  EXPECT_THAT(
      Texts(Col("Int256", min256 + Le<uint64_t>({42, 0, 0, 0})), 2),
      ElementsAre("-57896044618658097711785492504343953926634992332820282019728792003956564819968",
                  "42"));
}

TEST(FormatValueTest, FloatsInShortestRoundTripText) {
  EXPECT_THAT(Texts(Col("Float64", Le<uint64_t>({0})), 1), ElementsAre("0"));
  auto f64 = [](std::initializer_list<double> values) {
    std::string out;
    for (double v : values) {
      uint64_t bits;
      std::memcpy(&bits, &v, 8);
      out += Le<uint64_t>({bits});
    }
    return Col("Float64", out);
  };
  EXPECT_THAT(Texts(f64({0.1, 123.456, 1e21, 1e20, 1.5e-7, 0.000001, -2.5, 1.0 / 3}), 8),
              ElementsAre("0.1", "123.456", "1e21", "100000000000000000000", "1.5e-7", "0.000001",
                          "-2.5", "0.3333333333333333"));
  EXPECT_THAT(Texts(f64({std::nan(""), -std::numeric_limits<double>::infinity(),
                         std::numeric_limits<double>::infinity()}),
                    3),
              ElementsAre("nan", "-inf", "inf"));
  float f = 0.1f;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  EXPECT_THAT(Texts(Col("Float32", Le<uint32_t>({bits})), 1), ElementsAre("0.1"));
  // BFloat16 1.5 is 0x3fc0.
  EXPECT_THAT(Texts(Col("BFloat16", Le<uint16_t>({0x3fc0})), 1), ElementsAre("1.5"));
}

TEST(FormatValueTest, BoolDecimalsAndIntervals) {
  EXPECT_THAT(Texts(Col("Bool", Bytes({1, 0})), 2), ElementsAre("true", "false"));
  EXPECT_THAT(Texts(Col("Decimal(9, 2)", Le<int32_t>({12345, -5, 0})), 3),
              ElementsAre("123.45", "-0.05", "0.00"));
  EXPECT_THAT(Texts(Col("Decimal(18, 0)", Le<int64_t>({-42})), 1), ElementsAre("-42"));
  EXPECT_THAT(Texts(Col("Decimal(38, 10)", Fill(16, 0xff)), 1), ElementsAre("-0.0000000001"));
  std::string big(32, '\0');
  big[16] = 1;  // 2^128
  EXPECT_THAT(Texts(Col("Decimal256(20)", big), 1),
              ElementsAre("3402823669209384634.63374607431768211456"));
  EXPECT_THAT(Texts(Col("IntervalDay", Le<int64_t>({-3})), 1), ElementsAre("-3"));
}

TEST(FormatValueTest, DatesAndTimesInTheirZones) {
  EXPECT_THAT(Texts(Col("Date", Le<uint16_t>({0, 18993, 65535})), 3),
              ElementsAre("1970-01-01", "2022-01-01", "2149-06-06"));
  EXPECT_THAT(Texts(Col("Date32", Le<int32_t>({-1, -25567})), 2),
              ElementsAre("1969-12-31", "1900-01-01"));
  const std::string t = Le<uint32_t>({1640995200});  // 2022-01-01 00:00:00 UTC
  EXPECT_THAT(Texts(Col("DateTime", t), 1), ElementsAre("2022-01-01 00:00:00"));
  EXPECT_THAT(Texts(Col("DateTime('Europe/Berlin')", t), 1), ElementsAre("2022-01-01 01:00:00"));
  // No zone in the type: the server's zone from the header.
  EXPECT_THAT(Texts(Col("DateTime", t), 1, TextFormat::kTsv, "Asia/Tokyo"),
              ElementsAre("2022-01-01 09:00:00"));
  // The type's zone wins over the server's.
  EXPECT_THAT(Texts(Col("DateTime('UTC')", t), 1, TextFormat::kTsv, "Asia/Tokyo"),
              ElementsAre("2022-01-01 00:00:00"));
  EXPECT_THAT(Texts(Col("DateTime64(3, 'UTC')", Le<int64_t>({1640995200123, -1})), 2),
              ElementsAre("2022-01-01 00:00:00.123", "1969-12-31 23:59:59.999"));
  EXPECT_THAT(Texts(Col("DateTime64(0, 'UTC')", Le<int64_t>({5})), 1),
              ElementsAre("1970-01-01 00:00:05"));
  EXPECT_THAT(Texts(Col("DateTime64(9, 'Asia/Kolkata')", Le<int64_t>({1})), 1),
              ElementsAre("1970-01-01 05:30:00.000000001"));
}

TEST(FormatValueTest, UuidAndAddresses) {
  EXPECT_THAT(Texts(Col("UUID", Bytes({0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99,
                                       0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff})),
                    1),
              ElementsAre("00112233-4455-6677-8899-aabbccddeeff"));
  EXPECT_THAT(Texts(Col("IPv4", Le<uint32_t>({0x01020304, 0xffffffff})), 2),
              ElementsAre("1.2.3.4", "255.255.255.255"));
  std::string v6(16, '\0');
  v6[15] = 1;
  std::string mapped(16, '\0');
  mapped[10] = mapped[11] = static_cast<char>(0xff);
  mapped[12] = 1;
  mapped[13] = 2;
  mapped[14] = 3;
  mapped[15] = 4;
  EXPECT_THAT(Texts(Col("IPv6", v6 + mapped), 2), ElementsAre("::1", "::ffff:1.2.3.4"));
}

TEST(FormatValueTest, StringsEscapedLikeTabSeparated) {
  EXPECT_THAT(Texts(StringCol("String", {"plain", "t\tn\nq'b\\", std::string("z\0", 2), ""}), 4),
              ElementsAre("plain", "t\\tn\\nq\\'b\\\\", "z\\0", ""));
  EXPECT_THAT(Texts(Col("FixedString(3)", std::string("ab\0xyz", 6)), 2),
              ElementsAre("ab\\0", "xyz"));
  EXPECT_THAT(Texts(StringCol("LowCardinality(String)", {"lc"}), 1), ElementsAre("lc"));
}

TEST(FormatValueTest, EnumsByName) {
  const std::string type = "Enum8('a' = 1, 'b\\'c' = -2)";
  EXPECT_THAT(Texts(Col(type, Bytes({1, 0xfe, 7})), 3), ElementsAre("a", "b\\'c", "7"));
  EXPECT_THAT(Texts(Col("Enum16('big' = 1000)", Le<int16_t>({1000})), 1), ElementsAre("big"));
  v1::Column array = Col("Array(" + type + ")");
  array.add_offsets(2);
  *array.add_children() = Col(type, Bytes({1, 0xfe}));
  EXPECT_THAT(Texts(array, 1), ElementsAre("['a','b\\'c']"));
}

TEST(FormatValueTest, NullableAndNothing) {
  EXPECT_THAT(Texts(StringCol("Nullable(String)", {"x", ""}, Bytes({0, 1})), 2),
              ElementsAre("x", "\\N"));
  // An empty null map means no NULLs.
  EXPECT_THAT(Texts(Col("Nullable(UInt8)", Bytes({7})), 1), ElementsAre("7"));
  v1::Column nothing = Col("Nullable(Nothing)");
  nothing.set_nulls(Bytes({1, 1}));
  EXPECT_THAT(Texts(nothing, 2), ElementsAre("\\N", "\\N"));
  v1::Column lc = StringCol("LowCardinality(Nullable(String))", {"", "v"}, Bytes({1, 0}));
  EXPECT_THAT(Texts(lc, 2), ElementsAre("\\N", "v"));
}

TEST(FormatValueTest, ArraysMapsAndTuplesNestedQuoted) {
  // Array(Nullable(String)): ['a', NULL], [] (the proto's own example).
  v1::Column a = Col("Array(Nullable(String))");
  a.add_offsets(2);
  a.add_offsets(2);
  *a.add_children() = StringCol("Nullable(String)", {"a", ""}, Bytes({0, 1}));
  EXPECT_THAT(Texts(a, 2), ElementsAre("['a',NULL]", "[]"));

  // Array(Array(UInt8)): [[1,2],[]], [[3]]
  v1::Column inner = Col("Array(UInt8)");
  inner.add_offsets(2);
  inner.add_offsets(2);
  inner.add_offsets(3);
  *inner.add_children() = Col("UInt8", Bytes({1, 2, 3}));
  v1::Column outer = Col("Array(Array(UInt8))");
  outer.add_offsets(2);
  outer.add_offsets(3);
  *outer.add_children() = inner;
  EXPECT_THAT(Texts(outer, 2), ElementsAre("[[1,2],[]]", "[[3]]"));

  // Map(String, UInt8): {'k':1,'l':2}, {}
  v1::Column m = Col("Map(String, UInt8)");
  m.add_offsets(2);
  m.add_offsets(2);
  *m.add_children() = StringCol("String", {"k", "l"});
  *m.add_children() = Col("UInt8", Bytes({1, 2}));
  EXPECT_THAT(Texts(m, 2), ElementsAre("{'k':1,'l':2}", "{}"));

  // Tuple(UInt8, String, Date, Nullable(Int8))
  v1::Column t = Col("Tuple(UInt8, String, Date, Nullable(Int8))");
  *t.add_children() = Col("UInt8", Bytes({1}));
  *t.add_children() = StringCol("String", {"x'y"});
  *t.add_children() = Col("Date", Le<uint16_t>({18993}));
  v1::Column n = Col("Nullable(Int8)", Bytes({0}));
  n.set_nulls(Bytes({1}));
  *t.add_children() = n;
  EXPECT_THAT(Texts(t, 1), ElementsAre("(1,'x\\'y','2022-01-01',NULL)"));

  // Point is Tuple(Float64, Float64).
  v1::Column p = Col("Point");
  double xy[2] = {1.5, -2};
  uint64_t bits[2];
  std::memcpy(bits, xy, 16);
  *p.add_children() = Col("Float64", Le<uint64_t>({bits[0]}));
  *p.add_children() = Col("Float64", Le<uint64_t>({bits[1]}));
  EXPECT_THAT(Texts(p, 1), ElementsAre("(1.5,-2)"));
}

TEST(FormatValueTest, CsvQuotesTextAndComposites) {
  EXPECT_THAT(Texts(StringCol("Nullable(String)", {"a\"b,c", "", "n\nl"}, Bytes({0, 1, 0})), 3,
                    TextFormat::kCsv),
              ElementsAre("\"a\"\"b,c\"", "\\N", "\"n\nl\""));
  EXPECT_THAT(Texts(Col("Int32", Le<int32_t>({-7})), 1, TextFormat::kCsv), ElementsAre("-7"));
  EXPECT_THAT(Texts(Col("Date", Le<uint16_t>({18993})), 1, TextFormat::kCsv),
              ElementsAre("\"2022-01-01\""));
  v1::Column a = Col("Array(String)");
  a.add_offsets(2);
  *a.add_children() = StringCol("String", {"a", "b"});
  EXPECT_THAT(Texts(a, 1, TextFormat::kCsv), ElementsAre("\"['a','b']\""));
}

TEST(FormatValueTest, JsonTypesForEveryFamily) {
  const auto json = TextFormat::kJson;
  EXPECT_THAT(Texts(StringCol("Nullable(String)", {"q\"\t\x01", ""}, Bytes({0, 1})), 2, json),
              ElementsAre("\"q\\\"\\t\\u0001\"", "null"));
  // Bytes that are not UTF-8 become U+FFFD; valid multi-byte text passes.
  EXPECT_THAT(Texts(StringCol("String", {"\xff", "\xc3\xa9"}), 2, json),
              ElementsAre("\"\\ufffd\"", "\"\xc3\xa9\""));
  EXPECT_THAT(Texts(Col("UInt64", Le<uint64_t>({18446744073709551615u})), 1, json),
              ElementsAre("18446744073709551615"));
  EXPECT_THAT(Texts(Col("Int128", Fill(16, 0xff)), 1, json), ElementsAre("\"-1\""));
  EXPECT_THAT(Texts(Col("Decimal(9, 2)", Le<int32_t>({-150})), 1, json), ElementsAre("-1.50"));
  double nan = std::nan("");
  uint64_t bits;
  std::memcpy(&bits, &nan, 8);
  EXPECT_THAT(Texts(Col("Float64", Le<uint64_t>({bits})), 1, json), ElementsAre("null"));
  EXPECT_THAT(Texts(Col("Bool", Bytes({1})), 1, json), ElementsAre("true"));
  EXPECT_THAT(Texts(Col("Date", Le<uint16_t>({18993})), 1, json), ElementsAre("\"2022-01-01\""));
  v1::Column m = Col("Map(UInt8, Array(String))");
  m.add_offsets(1);
  *m.add_children() = Col("UInt8", Bytes({5}));
  v1::Column values = Col("Array(String)");
  values.add_offsets(1);
  *values.add_children() = StringCol("String", {"v"});
  *m.add_children() = values;
  EXPECT_THAT(Texts(m, 1, json), ElementsAre("{\"5\":[\"v\"]}"));
  v1::Column named = Col("Tuple(a UInt8, b String)");
  *named.add_children() = Col("UInt8", Bytes({1}));
  *named.add_children() = StringCol("String", {"x"});
  EXPECT_THAT(Texts(named, 1, json), ElementsAre("{\"a\":1,\"b\":\"x\"}"));
  v1::Column unnamed = Col("Tuple(UInt8, String)");
  *unnamed.add_children() = Col("UInt8", Bytes({1}));
  *unnamed.add_children() = StringCol("String", {"x"});
  EXPECT_THAT(Texts(unnamed, 1, json), ElementsAre("[1,\"x\"]"));
}

TEST(ValidateColumnTest, RejectsLayoutsThatDoNotMatchTheType) {
  EXPECT_THAT(Texts(Col("UInt32", "abc"), 1)[0],
              HasSubstr("`data` has 3 bytes, expected 1 rows x 4 bytes"));
  EXPECT_THAT(Texts(Col("UInt8", "a"), 2)[0], HasSubstr("`data` has 1 bytes"));
  v1::Column nulls = Col("UInt8", "a");
  nulls.set_nulls(Bytes({0}));
  EXPECT_THAT(Texts(nulls, 1)[0], HasSubstr("`nulls` is only for Nullable types"));
  v1::Column short_nulls = Col("Nullable(UInt8)", "ab");
  short_nulls.set_nulls(Bytes({0}));
  EXPECT_THAT(Texts(short_nulls, 2)[0], HasSubstr("`nulls` has 1 bytes, expected 2"));
  v1::Column s = StringCol("String", {"ab"});
  s.set_offsets(0, 5);
  EXPECT_THAT(Texts(s, 1)[0], HasSubstr("`offsets` end at byte 5 but `data` has 2 bytes"));
  v1::Column down = StringCol("String", {"ab", "c"});
  down.set_offsets(1, 1);
  EXPECT_THAT(Texts(down, 2)[0], HasSubstr("decrease"));
  v1::Column array = Col("Array(UInt8)");
  array.add_offsets(3);
  *array.add_children() = Col("UInt8", "ab");
  EXPECT_THAT(Texts(array, 1)[0], HasSubstr("`data` has 2 bytes, expected 3 rows x 1 bytes"));
  v1::Column no_child = Col("Array(UInt8)");
  no_child.add_offsets(0);
  EXPECT_THAT(Texts(no_child, 1)[0], HasSubstr("children"));
  v1::Column tuple = Col("Tuple(UInt8, UInt8)");
  *tuple.add_children() = Col("UInt8", "a");
  EXPECT_THAT(Texts(tuple, 1)[0], HasSubstr("children"));
  EXPECT_THAT(Texts(StringCol("String", {"a"}), 2)[0], HasSubstr("offsets"));
}

class ReadTest : public ::testing::Test {
 protected:
  template <typename T>
  absl::StatusOr<T> Read(absl::StatusOr<T> (*reader)(const v1::Column&, const ColumnType&,
                                                     uint64_t),
                         const v1::Column& column, uint64_t row = 0) {
    types_.push_back(ParseColumnType(column.type()).value());
    EXPECT_TRUE(ValidateColumn(column, types_.back(), row + 1).ok());
    return reader(column, types_.back(), row);
  }
  std::vector<ColumnType> types_;
};

TEST_F(ReadTest, UnsignedAndSignedIntegers) {
  EXPECT_EQ(Read(ReadUInt64, Col("UInt64", Le<uint64_t>({18446744073709551615u}))).value(),
            18446744073709551615u);
  EXPECT_EQ(Read(ReadUInt64, Col("Int8", Le<int8_t>({5}))).value(), 5u);
  EXPECT_EQ(Read(ReadUInt64, Col("Int8", Le<int8_t>({-5}))).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(Read(ReadUInt64, Col("UInt128", Le<uint64_t>({7, 0}))).value(), 7u);
  EXPECT_EQ(Read(ReadUInt64, Col("UInt128", Le<uint64_t>({7, 1}))).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(Read(ReadUInt64, Col("IPv4", Le<uint32_t>({0x01020304}))).value(), 0x01020304u);
  EXPECT_EQ(Read(ReadUInt64, Col("DateTime", Le<uint32_t>({99}))).value(), 99u);
  EXPECT_EQ(Read(ReadUInt64, StringCol("String", {"1"})).status().code(),
            absl::StatusCode::kFailedPrecondition);

  EXPECT_EQ(Read(ReadInt64, Col("Int16", Le<int16_t>({-300}))).value(), -300);
  EXPECT_EQ(Read(ReadInt64, Col("Int128", Fill(16, 0xff))).value(), -1);
  EXPECT_EQ(Read(ReadInt64, Col("UInt64", Le<uint64_t>({18446744073709551615u}))).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(Read(ReadInt64, Col("Date32", Le<int32_t>({-1}))).value(), -1);
  EXPECT_EQ(Read(ReadInt64, Col("DateTime64(3)", Le<int64_t>({1234}))).value(), 1234);
  EXPECT_EQ(Read(ReadInt64, Col("Enum8('a' = -3)", Bytes({0xfd}))).value(), -3);
}

TEST_F(ReadTest, FloatsBoolsStringsAndTimes) {
  EXPECT_DOUBLE_EQ(Read(ReadFloat64, Col("Decimal(9, 2)", Le<int32_t>({-150}))).value(), -1.5);
  EXPECT_DOUBLE_EQ(Read(ReadFloat64, Col("Int32", Le<int32_t>({-3}))).value(), -3.0);
  EXPECT_DOUBLE_EQ(Read(ReadFloat64, Col("BFloat16", Le<uint16_t>({0x3fc0}))).value(), 1.5);
  EXPECT_TRUE(Read(ReadBool, Col("Bool", Bytes({1}))).value());
  EXPECT_FALSE(Read(ReadBool, Col("UInt16", Le<uint16_t>({0}))).value());
  EXPECT_EQ(Read(ReadBool, StringCol("String", {"true"})).status().code(),
            absl::StatusCode::kFailedPrecondition);

  v1::Column s = StringCol("String", {"abc", "de"});
  EXPECT_EQ(Read(ReadString, s, 1).value(), "de");
  EXPECT_EQ(Read(ReadString, Col("FixedString(3)", std::string("a\0\0", 3))).value(),
            std::string_view("a\0\0", 3));
  EXPECT_EQ(Read(ReadString, Col("Enum8('on' = 1)", Bytes({1}))).value(), "on");
  v1::Column null = StringCol("Nullable(String)", {""}, Bytes({1}));
  EXPECT_THAT(Read(ReadString, null).status().message(), HasSubstr("NULL"));

  EXPECT_EQ(Read(ReadTime, Col("DateTime64(3, 'UTC')", Le<int64_t>({-1}))).value(),
            absl::FromUnixMillis(-1));
  EXPECT_EQ(Read(ReadTime, Col("Date", Le<uint16_t>({1}))).value(), absl::FromUnixSeconds(86400));
  EXPECT_EQ(Read(ReadTime, Col("DateTime('Asia/Tokyo')", Le<uint32_t>({60}))).value(),
            absl::FromUnixSeconds(60));
  EXPECT_EQ(Read(ReadTime, Col("UInt32", Le<uint32_t>({60}))).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(ReadTest, ArrayBounds) {
  v1::Column a = Col("Array(UInt8)");
  a.add_offsets(2);
  a.add_offsets(5);
  *a.add_children() = Col("UInt8", "abcde");
  types_.push_back(ParseColumnType(a.type()).value());
  ASSERT_TRUE(ValidateColumn(a, types_.back(), 2).ok());
  EXPECT_EQ(ReadArrayBounds(a, types_.back(), 0).value(), std::make_pair(uint64_t{0}, uint64_t{2}));
  EXPECT_EQ(ReadArrayBounds(a, types_.back(), 1).value(), std::make_pair(uint64_t{2}, uint64_t{5}));
}

}  // namespace
}  // namespace chgate::client
