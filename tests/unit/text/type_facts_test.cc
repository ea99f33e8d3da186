// The per-type facts of fixed-width types (text/type_facts.h): each family's kind and width,
// parameters (Decimal precision and width, DateTime zones, DateTime64/Time64 precision), the
// arguments each family refuses, Enum resolution by ClickHouse's rules, the alias layouts (geo,
// Nested, SimpleAggregateFunction), the proto field that carries each kind, and stored ranges.
#include "text/type_facts.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "text/type_name.h"

namespace chgate::text {
namespace {

TypeAst Parsed(std::string_view name) {
  absl::StatusOr<TypeAst> type = ParseTypeName(name);
  EXPECT_TRUE(type.ok()) << name << ": " << type.status();
  return type.ok() ? *std::move(type) : TypeAst{};
}

// The facts of a fixed-width type that must describe cleanly.
FixedType Fixed(std::string_view name, UnknownZone zone = UnknownZone::kError) {
  absl::StatusOr<std::optional<FixedType>> fixed = DescribeFixed(Parsed(name), zone);
  EXPECT_TRUE(fixed.ok()) << name << ": " << fixed.status();
  if (!fixed.ok()) return {};
  EXPECT_TRUE(fixed->has_value()) << name << " is not fixed-width";
  return fixed->value_or(FixedType{});
}

// The error DescribeFixed gives for a fixed-width family with bad arguments.
absl::Status Refused(std::string_view name, UnknownZone zone = UnknownZone::kError) {
  absl::StatusOr<std::optional<FixedType>> fixed = DescribeFixed(Parsed(name), zone);
  EXPECT_FALSE(fixed.ok()) << name << " was accepted";
  return fixed.status();
}

TEST(DescribeFixedTest, EveryPlainFamilyHasItsKindAndWidth) {
  struct Case {
    std::string_view name;
    FixedKind kind;
    size_t width;
  };
  for (const Case& c : {
           Case{"UInt8", FixedKind::kUInt, 1},
           Case{"UInt16", FixedKind::kUInt, 2},
           Case{"UInt32", FixedKind::kUInt, 4},
           Case{"UInt64", FixedKind::kUInt, 8},
           Case{"UInt128", FixedKind::kUInt, 16},
           Case{"UInt256", FixedKind::kUInt, 32},
           Case{"Int8", FixedKind::kInt, 1},
           Case{"Int16", FixedKind::kInt, 2},
           Case{"Int32", FixedKind::kInt, 4},
           Case{"Int64", FixedKind::kInt, 8},
           Case{"Int128", FixedKind::kInt, 16},
           Case{"Int256", FixedKind::kInt, 32},
           Case{"Float32", FixedKind::kFloat, 4},
           Case{"Float64", FixedKind::kFloat, 8},
           Case{"BFloat16", FixedKind::kBFloat16, 2},
           Case{"Bool", FixedKind::kBool, 1},
           Case{"Date", FixedKind::kDate, 2},
           Case{"Date32", FixedKind::kDate32, 4},
           Case{"Time", FixedKind::kTime, 4},
           Case{"UUID", FixedKind::kUuid, 16},
           Case{"IPv4", FixedKind::kIpv4, 4},
           Case{"IPv6", FixedKind::kIpv6, 16},
           Case{"Nothing", FixedKind::kNothing, 1},
           Case{"DateTime", FixedKind::kDateTime, 4},
           Case{"FixedString(7)", FixedKind::kFixedString, 7},
           Case{"FixedString(1)", FixedKind::kFixedString, 1},
           Case{"IntervalSecond", FixedKind::kInt, 8},
           Case{"IntervalNanosecond", FixedKind::kInt, 8},
           Case{"IntervalDay", FixedKind::kInt, 8},
           Case{"IntervalYear", FixedKind::kInt, 8},
       }) {
    SCOPED_TRACE(c.name);
    const FixedType t = Fixed(c.name);
    EXPECT_EQ(t.kind, c.kind);
    EXPECT_EQ(t.width, c.width);
    EXPECT_EQ(t.scale, 0);
    EXPECT_TRUE(t.zone_name.empty());
  }
}

TEST(DescribeFixedTest, SignednessFollowsTheStoredNumber) {
  for (const char* name : {"Int8", "Int256", "Float32", "BFloat16", "Date32", "DateTime64(3)",
                           "Time", "Time64(3)", "Decimal(9, 2)", "Enum8('a' = 1)"}) {
    EXPECT_TRUE(Fixed(name).is_signed()) << name;
  }
  for (const char* name : {"UInt8", "UInt256", "Bool", "Date", "DateTime", "UUID", "IPv4", "IPv6",
                           "FixedString(2)", "Nothing"}) {
    EXPECT_FALSE(Fixed(name).is_signed()) << name;
  }
}

TEST(DescribeFixedTest, OtherFamiliesAreNotFixedWidth) {
  for (const char* name : {"String", "Array(UInt8)", "Nullable(UInt8)", "Tuple(UInt8)",
                           "Map(String, UInt8)", "LowCardinality(String)", "Variant(UInt8, String)",
                           "Dynamic", "JSON", "Point", "Nested(a UInt8)", "Interval"}) {
    absl::StatusOr<std::optional<FixedType>> fixed =
        DescribeFixed(Parsed(name), UnknownZone::kError);
    ASSERT_TRUE(fixed.ok()) << name << ": " << fixed.status();
    EXPECT_FALSE(fixed->has_value()) << name;
  }
}

TEST(DescribeFixedTest, PlainFamiliesRefuseArguments) {
  for (const char* name : {"UInt8(1)", "Float64(2)", "BFloat16(1)", "Time(3)", "UUID('a')",
                           "IntervalSecond(1)", "Date32(1)"}) {
    const absl::Status status = Refused(name);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(status.message().find("takes no arguments"), std::string_view::npos) << status;
  }
  // A literal where a type belongs is not a type.
  TypeAst number{.kind = TypeAst::Kind::kNumber, .number = 1};
  EXPECT_EQ(DescribeFixed(number, UnknownZone::kError).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DescribeFixedTest, FixedStringNeedsOnePositiveLength) {
  EXPECT_EQ(Fixed("FixedString(1073741824)").width, size_t{1} << 30);
  for (const char* name : {"FixedString", "FixedString(0)", "FixedString(1073741825)",
                           "FixedString(2, 3)", "FixedString('a')"}) {
    EXPECT_EQ(Refused(name).code(), absl::StatusCode::kInvalidArgument) << name;
  }
}

TEST(DescribeFixedTest, DecimalWidthFollowsPrecision) {
  struct Case {
    std::string_view name;
    size_t width;
    int precision;
    int scale;
  };
  for (const Case& c : {
           Case{"Decimal(1, 0)", 4, 1, 0},
           Case{"Decimal(9, 2)", 4, 9, 2},
           Case{"Decimal(10, 2)", 8, 10, 2},
           Case{"Decimal(18, 18)", 8, 18, 18},
           Case{"Decimal(19, 0)", 16, 19, 0},
           Case{"Decimal(38, 10)", 16, 38, 10},
           Case{"Decimal(39, 1)", 32, 39, 1},
           Case{"Decimal(76, 76)", 32, 76, 76},
           Case{"Decimal32(4)", 4, 9, 4},
           Case{"Decimal64(4)", 8, 18, 4},
           Case{"Decimal128(4)", 16, 38, 4},
           Case{"Decimal256(4)", 32, 76, 4},
       }) {
    SCOPED_TRACE(c.name);
    const FixedType t = Fixed(c.name);
    EXPECT_EQ(t.kind, FixedKind::kDecimal);
    EXPECT_EQ(t.width, c.width);
    EXPECT_EQ(t.precision, c.precision);
    EXPECT_EQ(t.scale, c.scale);
  }
  for (const char* name :
       {"Decimal(0, 0)", "Decimal(77, 1)", "Decimal(5, 6)", "Decimal(5)", "Decimal(5, 2, 1)",
        "Decimal('a', 1)", "Decimal32(10)", "Decimal32", "Decimal64(4, 2)"}) {
    EXPECT_EQ(Refused(name).code(), absl::StatusCode::kInvalidArgument) << name;
  }
}

TEST(DescribeFixedTest, DateTimeZones) {
  const FixedType plain = Fixed("DateTime");
  EXPECT_EQ(plain.zone_name, "");
  EXPECT_EQ(plain.zone, absl::UTCTimeZone());

  const FixedType moscow = Fixed("DateTime('Europe/Moscow')");
  EXPECT_EQ(moscow.kind, FixedKind::kDateTime);
  EXPECT_EQ(moscow.zone_name, "Europe/Moscow");
  EXPECT_EQ(moscow.zone.name(), "Europe/Moscow");

  const FixedType dt64 = Fixed("DateTime64(6, 'Asia/Tokyo')");
  EXPECT_EQ(dt64.kind, FixedKind::kDateTime64);
  EXPECT_EQ(dt64.width, 8u);
  EXPECT_EQ(dt64.scale, 6);
  EXPECT_EQ(dt64.zone_name, "Asia/Tokyo");
  EXPECT_EQ(dt64.zone.name(), "Asia/Tokyo");
  EXPECT_EQ(Fixed("DateTime64(3)").zone_name, "");

  // An unknown zone: the server refuses the type, the SDK shows its values in UTC.
  const absl::Status unknown = Refused("DateTime('Mars/Olympus')");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("unknown time zone 'Mars/Olympus'"), std::string_view::npos)
      << unknown;
  EXPECT_EQ(Refused("DateTime64(3, 'Mars/Olympus')").code(), absl::StatusCode::kInvalidArgument);
  const FixedType utc = Fixed("DateTime('Mars/Olympus')", UnknownZone::kUtc);
  EXPECT_EQ(utc.zone_name, "Mars/Olympus");
  EXPECT_EQ(utc.zone, absl::UTCTimeZone());
  EXPECT_EQ(Fixed("DateTime64(3, 'Mars/Olympus')", UnknownZone::kUtc).zone, absl::UTCTimeZone());

  for (const char* name : {"DateTime(3)", "DateTime('UTC', 'UTC')", "DateTime64(3, 4)",
                           "DateTime64(3, 'UTC', 'UTC')"}) {
    EXPECT_EQ(Refused(name).code(), absl::StatusCode::kInvalidArgument) << name;
  }
}

TEST(DescribeFixedTest, DateTime64AndTime64PrecisionIsZeroToNine) {
  for (int p = 0; p <= 9; ++p) {
    const std::string dt = "DateTime64(" + std::to_string(p) + ")";
    const std::string t = "Time64(" + std::to_string(p) + ")";
    EXPECT_EQ(Fixed(dt).scale, p) << dt;
    const FixedType time = Fixed(t);
    EXPECT_EQ(time.kind, FixedKind::kTime64) << t;
    EXPECT_EQ(time.width, 8u) << t;
    EXPECT_EQ(time.scale, p) << t;
    EXPECT_TRUE(time.zone_name.empty()) << t;
  }
  for (const char* name : {"DateTime64(10)", "DateTime64", "DateTime64('UTC')", "Time64(10)",
                           "Time64", "Time64('UTC')"}) {
    EXPECT_EQ(Refused(name).code(), absl::StatusCode::kInvalidArgument) << name;
  }
  // Time64 has no zone, not even a known one.
  const absl::Status zoned = Refused("Time64(3, 'UTC')");
  EXPECT_NE(zoned.message().find("Time64 has no zone"), std::string_view::npos) << zoned;
}

TEST(DescribeFixedTest, EnumWidthAndElements) {
  const FixedType e8 = Fixed("Enum8('a' = -128, 'b' = 127)");
  EXPECT_EQ(e8.kind, FixedKind::kEnum);
  EXPECT_EQ(e8.width, 1u);
  ASSERT_EQ(e8.enum_values.size(), 2u);
  EXPECT_EQ(e8.enum_values[0], (std::pair<std::string, int64_t>{"a", -128}));
  EXPECT_EQ(e8.enum_values[1], (std::pair<std::string, int64_t>{"b", 127}));
  ASSERT_NE(e8.EnumName(127), nullptr);
  EXPECT_EQ(*e8.EnumName(127), "b");
  EXPECT_EQ(e8.EnumName(0), nullptr);
  int64_t v = 0;
  EXPECT_TRUE(e8.EnumValue("a", &v));
  EXPECT_EQ(v, -128);
  EXPECT_FALSE(e8.EnumValue("c", &v));

  EXPECT_EQ(Fixed("Enum16('a' = 1)").width, 2u);
  EXPECT_EQ(Fixed("Enum('a' = 1)").width, 1u);
  EXPECT_EQ(Fixed("Enum('a' = 1000)").width, 2u);
  const FixedType bare = Fixed("Enum('x', 'y')");
  ASSERT_EQ(bare.enum_values.size(), 2u);
  EXPECT_EQ(bare.enum_values[1].second, 2);
  EXPECT_EQ(Refused("Enum8('a' = 128)").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Refused("Enum8").code(), absl::StatusCode::kInvalidArgument);
}

// ---- ResolveEnum --------------------------------------------------------------------------------

// The canonical name of the resolved enum, or the error's text.
std::string Resolved(std::string_view name) {
  absl::StatusOr<TypeAst> resolved = ResolveEnum(Parsed(name));
  if (!resolved.ok()) return "error: " + std::string(resolved.status().message());
  return FormatTypeName(*resolved);
}

TEST(ResolveEnumTest, BareNamesCountFromOneOrFromTheFirstValue) {
  EXPECT_EQ(Resolved("Enum('a', 'b', 'c')"), "Enum8('a' = 1, 'b' = 2, 'c' = 3)");
  EXPECT_EQ(Resolved("Enum8('a', 'b')"), "Enum8('a' = 1, 'b' = 2)");
  EXPECT_EQ(Resolved("Enum16('a')"), "Enum16('a' = 1)");
  EXPECT_EQ(Resolved("Enum('a' = 5, 'b', 'c')"), "Enum8('a' = 5, 'b' = 6, 'c' = 7)");
  EXPECT_EQ(Resolved("Enum8('a' = -3, 'b', 'c')"), "Enum8('a' = -3, 'b' = -2, 'c' = -1)");
  EXPECT_EQ(Resolved("Enum('a' = -1000, 'b')"), "Enum16('a' = -1000, 'b' = -999)");
  // A bare first element with explicit values after it: ClickHouse gives the first 1 and keeps
  // the rest (autoAssignNumberForEnum counts bare names after the first only).
  EXPECT_EQ(Resolved("Enum('a', 'b' = 5)"), "Enum8('a' = 1, 'b' = 5)");
  // Explicit values stay as written, in type order.
  EXPECT_EQ(Resolved("Enum8('b' = 2, 'a' = 1)"), "Enum8('b' = 2, 'a' = 1)");
}

TEST(ResolveEnumTest, EnumBecomesEnum8OrEnum16ByRange) {
  EXPECT_EQ(Resolved("Enum('a' = -128, 'b' = 127)"), "Enum8('a' = -128, 'b' = 127)");
  EXPECT_EQ(Resolved("Enum('a' = -129)"), "Enum16('a' = -129)");
  EXPECT_EQ(Resolved("Enum('a' = 128)"), "Enum16('a' = 128)");
  EXPECT_EQ(Resolved("Enum('a' = 127, 'b')"), "Enum16('a' = 127, 'b' = 128)");
  EXPECT_EQ(Resolved("Enum('a' = -32768, 'b' = 32767)"), "Enum16('a' = -32768, 'b' = 32767)");
  // An explicit family keeps its width.
  EXPECT_EQ(Resolved("Enum16('a' = 1)"), "Enum16('a' = 1)");
}

TEST(ResolveEnumTest, RefusesMixedFormsRangesAndRepeats) {
  EXPECT_EQ(Resolved("Enum('a' = 1, 'b', 'c' = 3)"),
            "error: bad type Enum('a' = 1, 'b', 'c' = 3): either every element after the first "
            "has a value or none has");
  EXPECT_EQ(Resolved("Enum('a', 'b', 'c' = 3)"),
            "error: bad type Enum('a', 'b', 'c' = 3): either every element after the first has "
            "a value or none has");
  EXPECT_EQ(Resolved("Enum8('a' = 127, 'b')"),
            "error: bad type Enum8('a' = 127, 'b'): value 128 out of range of Enum8");
  EXPECT_EQ(Resolved("Enum8('a' = -129)"),
            "error: bad type Enum8('a' = -129): value -129 out of range of Enum8");
  EXPECT_EQ(Resolved("Enum16('a' = 32768)"),
            "error: bad type Enum16('a' = 32768): value 32768 out of range of Enum16");
  EXPECT_EQ(Resolved("Enum('a' = 40000)"),
            "error: bad type Enum('a' = 40000): value 40000 out of range of Enum16");
  EXPECT_EQ(Resolved("Enum('a' = 1, 'a' = 2)"),
            "error: bad type Enum('a' = 1, 'a' = 2): repeated name");
  EXPECT_EQ(Resolved("Enum('a' = 1, 'b' = 1)"),
            "error: bad type Enum('a' = 1, 'b' = 1): repeated value");
  EXPECT_EQ(Resolved("Enum('a', 'a')"), "error: bad type Enum('a', 'a'): repeated name");
  // A bare first element takes 1, which an explicit value may already hold.
  EXPECT_EQ(Resolved("Enum('a', 'b' = 1)"), "error: bad type Enum('a', 'b' = 1): repeated value");
  EXPECT_EQ(Resolved("Enum"), "error: bad type Enum: needs values");
  EXPECT_EQ(Resolved("Enum8(1)"),
            "error: bad type Enum8(1): elements must be 'name' = number or 'name'");
  EXPECT_EQ(Resolved("Enum(UInt8)"),
            "error: bad type Enum(UInt8): elements must be 'name' = number or 'name'");
}

// ---- AliasLayout --------------------------------------------------------------------------------

// The layout of an alias type as its canonical name, "none" for a type that is not an alias, or
// the error's text.
std::string Layout(std::string_view name) {
  absl::StatusOr<std::optional<TypeAst>> layout = AliasLayout(Parsed(name));
  if (!layout.ok()) return "error: " + std::string(layout.status().message());
  if (!layout->has_value()) return "none";
  return FormatTypeName(**layout);
}

TEST(AliasLayoutTest, GeoTypesOneLevelAtATime) {
  EXPECT_EQ(Layout("Point"), "Tuple(Float64, Float64)");
  EXPECT_EQ(Layout("Ring"), "Array(Point)");
  EXPECT_EQ(Layout("LineString"), "Array(Point)");
  EXPECT_EQ(Layout("Polygon"), "Array(Ring)");
  EXPECT_EQ(Layout("MultiLineString"), "Array(LineString)");
  EXPECT_EQ(Layout("MultiPolygon"), "Array(Polygon)");
  EXPECT_EQ(Layout("Point(1)"), "error: bad type Point(1): takes no arguments");
  EXPECT_EQ(Layout("Ring(Point)"), "error: bad type Ring(Point): takes no arguments");
}

TEST(AliasLayoutTest, NestedIsAnArrayOfNamedTuples) {
  EXPECT_EQ(Layout("Nested(a UInt8, b Array(String))"), "Array(Tuple(a UInt8, b Array(String)))");
  EXPECT_EQ(Layout("Nested(x Nested(y UInt8))"), "Array(Tuple(x Nested(y UInt8)))");
  EXPECT_EQ(Layout("Nested"), "error: bad type Nested: needs elements");
  EXPECT_EQ(Layout("Nested(UInt8)"), "error: bad type Nested(UInt8): elements must be `name Type`");
  EXPECT_EQ(Layout("Nested(a UInt8, String)"),
            "error: bad type Nested(a UInt8, String): elements must be `name Type`");
  EXPECT_EQ(Layout("Nested(1)"), "error: bad type Nested(1): elements must be `name Type`");
}

TEST(AliasLayoutTest, SimpleAggregateFunctionIsItsValueType) {
  EXPECT_EQ(Layout("SimpleAggregateFunction(sum, UInt64)"), "UInt64");
  EXPECT_EQ(Layout("SimpleAggregateFunction(anyLast, Nullable(String))"), "Nullable(String)");
  EXPECT_EQ(Layout("SimpleAggregateFunction(groupUniqArrayArray, Array(UInt8))"), "Array(UInt8)");
  EXPECT_EQ(Layout("SimpleAggregateFunction(sum)"),
            "error: bad type SimpleAggregateFunction(sum): needs a function and a type");
  EXPECT_EQ(Layout("SimpleAggregateFunction(sum, UInt64, UInt8)"),
            "error: bad type SimpleAggregateFunction(sum, UInt64, UInt8): needs a function and "
            "a type");
  EXPECT_EQ(Layout("SimpleAggregateFunction(sum, 1)"),
            "error: bad type SimpleAggregateFunction(sum, 1): needs a function and a type");
}

TEST(AliasLayoutTest, OtherTypesAreNotAliases) {
  for (const char* name : {"UInt8", "String", "Array(Point)", "Tuple(Float64, Float64)",
                           "AggregateFunction(sum, UInt64)", "Map(String, Ring)"}) {
    EXPECT_EQ(Layout(name), "none") << name;
  }
  TypeAst literal{.kind = TypeAst::Kind::kString, .name = "Point"};
  absl::StatusOr<std::optional<TypeAst>> layout = AliasLayout(literal);
  ASSERT_TRUE(layout.ok());
  EXPECT_FALSE(layout->has_value());
}

// ---- Convenience fields and stored ranges -------------------------------------------------------

TEST(ConvenienceFieldTest, EveryKindHasItsField) {
  struct Case {
    FixedKind kind;
    std::string_view field;
  };
  for (const Case& c : {
           Case{FixedKind::kUInt, "uint64s"},
           Case{FixedKind::kInt, "int64s"},
           Case{FixedKind::kFloat, "float64s"},
           Case{FixedKind::kBFloat16, "float64s"},
           Case{FixedKind::kBool, "uint64s"},
           Case{FixedKind::kDate, "uint64s"},
           Case{FixedKind::kDate32, "int64s"},
           Case{FixedKind::kDateTime, "uint64s"},
           Case{FixedKind::kDateTime64, "int64s"},
           Case{FixedKind::kTime, "int64s"},
           Case{FixedKind::kTime64, "int64s"},
           Case{FixedKind::kDecimal, "int64s"},
           Case{FixedKind::kUuid, "data"},
           Case{FixedKind::kIpv4, "uint64s"},
           Case{FixedKind::kIpv6, "data"},
           Case{FixedKind::kEnum, "int64s"},
           Case{FixedKind::kFixedString, "strings"},
           Case{FixedKind::kNothing, "data"},
       }) {
    EXPECT_EQ(ConvenienceFieldName(ConvenienceFieldOf(c.kind)), c.field)
        << static_cast<int>(c.kind);
  }
}

TEST(StoredRangeTest, RangesOfTheConvenienceForms) {
  struct Case {
    std::string_view type;
    int64_t min;
    uint64_t max;
    std::string_view what;
  };
  for (const Case& c : {
           Case{"Int8", -128, 127, "out of range"},
           Case{"UInt16", 0, 65535, "out of range"},
           Case{"Int64", std::numeric_limits<int64_t>::min(),
                static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "out of range"},
           Case{"UInt64", 0, std::numeric_limits<uint64_t>::max(), "out of range"},
           Case{"Bool", 0, 1, "Bool must be 0 or 1"},
           Case{"Date", 0, 65535, "out of range"},
           Case{"DateTime", 0, 4294967295u, "out of range"},
           Case{"IPv4", 0, 4294967295u, "out of range"},
           Case{"Enum8('a' = 1)", -128, 127, "out of range"},
           Case{"Enum16('a' = 1)", -32768, 32767, "out of range"},
           Case{"Date32", -25567, 120529, "days outside Date32's range 1900-01-01 .. 2299-12-31"},
           // 1900-01-01 00:00:00.000 .. 2299-12-31 23:59:59.999 in milliseconds.
           Case{"DateTime64(3)", -2208988800000, 10413791999999,
                "ticks outside DateTime64's range 1900-01-01 .. 2299-12-31"},
           Case{"DateTime64(0)", -2208988800, 10413791999,
                "ticks outside DateTime64's range 1900-01-01 .. 2299-12-31"},
           Case{"Time", -3599999, 3599999, "seconds outside Time's range -999:59:59 .. 999:59:59"},
           Case{"Time64(3)", -3599999999, 3599999999,
                "ticks outside Time64's range -999:59:59 .. 999:59:59"},
           Case{"Time64(9)", -3599999999999999, 3599999999999999,
                "ticks outside Time64's range -999:59:59 .. 999:59:59"},
           Case{"Decimal(9, 2)", -999999999, 999999999, "more digits than the Decimal's precision"},
           Case{"Decimal(18, 0)", -999999999999999999, 999999999999999999,
                "more digits than the Decimal's precision"},
           Case{"Decimal(38, 2)", std::numeric_limits<int64_t>::min(),
                static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "out of range"},
           Case{"Int128", std::numeric_limits<int64_t>::min(),
                static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "out of range"},
           Case{"Float32", std::numeric_limits<int64_t>::min(),
                std::numeric_limits<uint64_t>::max(), "out of range"},
       }) {
    SCOPED_TRACE(c.type);
    const StoredRange range = StoredRangeOf(Fixed(c.type));
    EXPECT_EQ(range.min, c.min);
    EXPECT_EQ(range.max, c.max);
    EXPECT_EQ(range.what, c.what);
  }
}

TEST(StoredRangeTest, SharedConstantsAreTheCalendarBounds) {
  EXPECT_EQ(kDateTime64MinSeconds, -2208988800);  // 1900-01-01 00:00:00 UTC
  EXPECT_EQ(kDateTime64MaxSeconds, 10413791999);  // 2299-12-31 23:59:59 UTC
  EXPECT_EQ(kTimeMaxSeconds, 3599999);
  EXPECT_EQ(Pow10(0), 1);
  EXPECT_EQ(Pow10(9), 1000000000);
  EXPECT_EQ(Pow10(18), 1000000000000000000);
}

}  // namespace
}  // namespace chgate::text
