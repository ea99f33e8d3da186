// ParseColumnType: every type the Column layout table lists, wrappers, aliases, time zones, and
// the errors for malformed or unsupported text.
#include "client/sdk/types.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace chgate::client {
namespace {

ColumnType Parse(std::string_view text) {
  absl::StatusOr<ColumnType> type = ParseColumnType(text);
  EXPECT_TRUE(type.ok()) << text << ": " << type.status();
  return type.ok() ? *type : ColumnType{};
}

TEST(ParseColumnTypeTest, ReadsFixedWidthScalars) {
  struct Case {
    const char* text;
    TypeKind kind;
    size_t width;
  } cases[] = {
      {"Int8", TypeKind::kInt, 1},
      {"Int256", TypeKind::kInt, 32},
      {"UInt16", TypeKind::kUInt, 2},
      {"UInt128", TypeKind::kUInt, 16},
      {"Float32", TypeKind::kFloat, 4},
      {"Float64", TypeKind::kFloat, 8},
      {"BFloat16", TypeKind::kBFloat16, 2},
      {"Bool", TypeKind::kBool, 1},
      {"Date", TypeKind::kDate, 2},
      {"Date32", TypeKind::kDate32, 4},
      {"DateTime", TypeKind::kDateTime, 4},
      {"UUID", TypeKind::kUuid, 16},
      {"IPv4", TypeKind::kIpv4, 4},
      {"IPv6", TypeKind::kIpv6, 16},
      {"IntervalSecond", TypeKind::kInterval, 8},
      {"FixedString(7)", TypeKind::kFixedString, 7},
  };
  for (const Case& c : cases) {
    ColumnType t = Parse(c.text);
    EXPECT_EQ(t.kind, c.kind) << c.text;
    EXPECT_EQ(t.width_bytes, c.width) << c.text;
    EXPECT_EQ(t.text, c.text);
    EXPECT_FALSE(t.nullable);
  }
  EXPECT_EQ(Parse("String").kind, TypeKind::kString);
  EXPECT_FALSE(Parse("String").is_fixed_width());
  EXPECT_EQ(Parse("Nothing").kind, TypeKind::kNothing);
}

TEST(ParseColumnTypeTest, ReadsDecimalWidthsFromPrecision) {
  ColumnType d = Parse("Decimal(9, 2)");
  EXPECT_EQ(d.kind, TypeKind::kDecimal);
  EXPECT_EQ(d.width_bytes, 4u);
  EXPECT_EQ(d.precision, 9);
  EXPECT_EQ(d.scale, 2);
  EXPECT_EQ(Parse("Decimal(18, 0)").width_bytes, 8u);
  EXPECT_EQ(Parse("Decimal(19,4)").width_bytes, 16u);
  EXPECT_EQ(Parse("Decimal(76, 30)").width_bytes, 32u);
  ColumnType d64 = Parse("Decimal64(3)");
  EXPECT_EQ(d64.precision, 18);
  EXPECT_EQ(d64.scale, 3);
  EXPECT_EQ(d64.width_bytes, 8u);
  EXPECT_EQ(Parse("Decimal128(5)").width_bytes, 16u);
  EXPECT_EQ(Parse("Decimal256(5)").width_bytes, 32u);
  EXPECT_FALSE(ParseColumnType("Decimal(77, 2)").ok());
  EXPECT_FALSE(ParseColumnType("Decimal(5, 6)").ok());
}

TEST(ParseColumnTypeTest, ReadsTimeZonesAndDateTime64Precision) {
  ColumnType dt = Parse("DateTime('Europe/Berlin')");
  EXPECT_EQ(dt.time_zone, "Europe/Berlin");
  EXPECT_EQ(dt.zone.name(), "Europe/Berlin");
  ColumnType dt64 = Parse("DateTime64(6, 'Asia/Tokyo')");
  EXPECT_EQ(dt64.kind, TypeKind::kDateTime64);
  EXPECT_EQ(dt64.scale, 6);
  EXPECT_EQ(dt64.time_zone, "Asia/Tokyo");
  ColumnType plain = Parse("DateTime64(3)");
  EXPECT_EQ(plain.time_zone, "");
  EXPECT_EQ(plain.zone.name(), "UTC");
  // A zone this machine does not know falls back to UTC for display.
  EXPECT_EQ(Parse("DateTime('No/Such_Zone')").zone.name(), "UTC");
  EXPECT_FALSE(ParseColumnType("DateTime64(10)").ok());
}

TEST(ParseColumnTypeTest, DefaultTimeZoneReachesNestedDateTimesWithoutOwnZone) {
  ColumnType t = Parse("Tuple(DateTime, Array(DateTime64(3, 'UTC')), Nullable(DateTime))");
  ApplyDefaultTimeZone(LoadZoneOrUtc("Asia/Tokyo"), &t);
  EXPECT_EQ(t.elements[0].zone.name(), "Asia/Tokyo");
  EXPECT_EQ(t.elements[1].elements[0].zone.name(), "UTC");
  EXPECT_EQ(t.elements[2].zone.name(), "Asia/Tokyo");
}

TEST(ParseColumnTypeTest, ReadsEnumNamesWithEscapesAndNegativeValues) {
  ColumnType e = Parse("Enum8('a' = 1, 'b\\'c' = -2, 'x,y' = 3)");
  EXPECT_EQ(e.kind, TypeKind::kEnum);
  EXPECT_EQ(e.width_bytes, 1u);
  ASSERT_EQ(e.enum_values.size(), 3u);
  EXPECT_EQ(e.enum_values[1].first, "b'c");
  EXPECT_EQ(e.enum_values[1].second, -2);
  ASSERT_NE(e.EnumName(3), nullptr);
  EXPECT_EQ(*e.EnumName(3), "x,y");
  EXPECT_EQ(e.EnumName(9), nullptr);
  int64_t v = 0;
  EXPECT_TRUE(e.EnumValue("a", &v));
  EXPECT_EQ(v, 1);
  EXPECT_EQ(Parse("Enum16('big' = 1000)").width_bytes, 2u);
  EXPECT_FALSE(ParseColumnType("Enum8('big' = 1000)").ok());
}

TEST(ParseColumnTypeTest, UnwrapsNullableAndLowCardinality) {
  ColumnType n = Parse("Nullable(String)");
  EXPECT_EQ(n.kind, TypeKind::kString);
  EXPECT_TRUE(n.nullable);
  EXPECT_EQ(n.text, "Nullable(String)");
  ColumnType lc = Parse("LowCardinality(Nullable(FixedString(2)))");
  EXPECT_EQ(lc.kind, TypeKind::kFixedString);
  EXPECT_TRUE(lc.nullable);
  EXPECT_TRUE(lc.low_cardinality);
  EXPECT_FALSE(ParseColumnType("Nullable(Array(UInt8))").ok());
  EXPECT_FALSE(ParseColumnType("Nullable(Nullable(UInt8))").ok());
}

TEST(ParseColumnTypeTest, ReadsCompositesWithElementTexts) {
  ColumnType a = Parse("Array(Nullable(String))");
  EXPECT_EQ(a.kind, TypeKind::kArray);
  ASSERT_EQ(a.elements.size(), 1u);
  EXPECT_EQ(a.elements[0].text, "Nullable(String)");
  ColumnType m = Parse("Map(String, Array(UInt8))");
  EXPECT_EQ(m.kind, TypeKind::kMap);
  ASSERT_EQ(m.elements.size(), 2u);
  EXPECT_EQ(m.elements[1].text, "Array(UInt8)");
  ColumnType t = Parse("Tuple(a UInt8, `b c` Nullable(String), DateTime('UTC'))");
  EXPECT_EQ(t.kind, TypeKind::kTuple);
  ASSERT_EQ(t.elements.size(), 3u);
  EXPECT_EQ(t.element_names[0], "a");
  EXPECT_EQ(t.element_names[1], "b c");
  EXPECT_EQ(t.element_names[2], "");
  EXPECT_EQ(t.elements[1].text, "Nullable(String)");
  EXPECT_EQ(t.elements[2].text, "DateTime('UTC')");
  EXPECT_EQ(t.elements[2].time_zone, "UTC");
  // An element named like a type.
  ColumnType odd = Parse("Tuple(String String)");
  EXPECT_EQ(odd.element_names[0], "String");
  EXPECT_EQ(odd.elements[0].kind, TypeKind::kString);
}

TEST(ParseColumnTypeTest, ResolvesAliases) {
  ColumnType saf = Parse("SimpleAggregateFunction(anyLast, Nullable(UInt64))");
  EXPECT_EQ(saf.kind, TypeKind::kUInt);
  EXPECT_TRUE(saf.nullable);
  ColumnType point = Parse("Point");
  EXPECT_EQ(point.kind, TypeKind::kTuple);
  EXPECT_EQ(point.elements.size(), 2u);
  EXPECT_EQ(point.elements[0].kind, TypeKind::kFloat);
  ColumnType polygon = Parse("Polygon");
  EXPECT_EQ(polygon.kind, TypeKind::kArray);
  EXPECT_EQ(polygon.elements[0].kind, TypeKind::kArray);
  EXPECT_EQ(polygon.elements[0].elements[0].kind, TypeKind::kTuple);
  EXPECT_EQ(Parse("MultiPolygon").elements[0].elements[0].kind, TypeKind::kArray);
}

TEST(ParseColumnTypeTest, SharedFactsDescribeNestedTimeAndEnumsWithoutValues) {
  ColumnType nested = Parse("Nested(a UInt8, b String)");
  ASSERT_EQ(nested.kind, TypeKind::kArray);
  ASSERT_EQ(nested.elements[0].kind, TypeKind::kTuple);
  EXPECT_THAT(nested.elements[0].element_names, ::testing::ElementsAre("a", "b"));
  ColumnType time = Parse("Time");
  EXPECT_EQ(time.kind, TypeKind::kTime);
  EXPECT_EQ(time.width_bytes, 4u);
  ColumnType time64 = Parse("Time64(3)");
  EXPECT_EQ(time64.kind, TypeKind::kTime64);
  EXPECT_EQ(time64.scale, 3);
  ColumnType e = Parse("Enum('a', 'b')");
  EXPECT_EQ(e.width_bytes, 1u);
  EXPECT_THAT(e.enum_values,
              ::testing::ElementsAre(::testing::Pair("a", 1), ::testing::Pair("b", 2)));
  EXPECT_EQ(Parse("Enum('a' = 1000)").width_bytes, 2u);
  EXPECT_EQ(Parse("SimpleAggregateFunction(sum, UInt64)").kind, TypeKind::kUInt);
  EXPECT_FALSE(ParseColumnType("Time64(10)").ok());
  EXPECT_FALSE(ParseColumnType("Enum8('a' = 1, 'a' = 2)").ok());
}

TEST(ParseColumnTypeTest, TextCarriedTypesAreStringsNamingTheirType) {
  for (const char* type : {"Variant(String, UInt64)", "Dynamic", "Dynamic(max_types=4)"}) {
    ColumnType t = Parse(type);
    EXPECT_EQ(t.kind, TypeKind::kString) << type;
    EXPECT_TRUE(t.nullable) << type;
    EXPECT_EQ(t.text, type);
  }
  for (const char* type : {"JSON", "JSON(a.b UInt32, SKIP c)", "AggregateFunction(uniq, UInt64)",
                           "AggregateFunction(quantiles(0.5, 0.9), Float64)"}) {
    ColumnType t = Parse(type);
    EXPECT_EQ(t.kind, TypeKind::kString) << type;
    EXPECT_FALSE(t.nullable) << type;
  }
  EXPECT_EQ(Parse("Array(Variant(String, UInt64))").elements[0].kind, TypeKind::kString);
}

TEST(ParseColumnTypeTest, RejectsMalformedAndUnsupportedText) {
  for (const char* bad : {"", "Array(", "Array(UInt8", "Map(String)", "FixedString(0)",
                          "UInt8 junk", "Tuple(a)", "Enum8('a' 1)", "DateTime(UTC)"}) {
    absl::StatusOr<ColumnType> t = ParseColumnType(bad);
    EXPECT_FALSE(t.ok()) << bad;
  }
  EXPECT_EQ(ParseColumnType("Array(Array(Array(").status().code(),
            absl::StatusCode::kInvalidArgument);
  for (const char* unsupported : {"Object('json')", "Geometry2"}) {
    EXPECT_EQ(ParseColumnType(unsupported).status().code(), absl::StatusCode::kUnimplemented)
        << unsupported;
  }
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "Array(";
  deep += "UInt8";
  for (int i = 0; i < 100; ++i) deep += ")";
  EXPECT_EQ(ParseColumnType(deep).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace chgate::client
