// Value text and parsing shared by the server and the SDK (text/value_text.h,
// text/value_parse.h): shortest floats, wide integers and decimals, dates, times, UUIDs and
// addresses as ClickHouse prints them; the TabSeparated form inside and outside containers; the
// Float32 and BFloat16 rules (BFloat16 truncates as ClickHouse does); and the parsers' accepted
// and refused forms.
#include "text/value_text.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "text/type_facts.h"
#include "text/type_name.h"
#include "text/value_parse.h"

namespace chgate::text {
namespace {

FixedType Fixed(std::string_view name) {
  absl::StatusOr<TypeAst> type = ParseTypeName(name);
  EXPECT_TRUE(type.ok()) << name << ": " << type.status();
  if (!type.ok()) return {};
  absl::StatusOr<std::optional<FixedType>> fixed = DescribeFixed(*type, UnknownZone::kError);
  EXPECT_TRUE(fixed.ok() && fixed->has_value()) << name;
  return fixed.ok() && fixed->has_value() ? **fixed : FixedType{};
}

template <typename T>
std::string Wire(T v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(T));
}

std::string FloatText(double v) {
  std::string out;
  AppendFloat(v, &out);
  return out;
}

std::string FloatText(float v) {
  std::string out;
  AppendFloat(v, &out);
  return out;
}

// ---- Floats -------------------------------------------------------------------------------------

TEST(AppendFloatTest, ShortestRoundTripInClickHouseNotation) {
  EXPECT_EQ(FloatText(0.1), "0.1");
  EXPECT_EQ(FloatText(-1.5), "-1.5");
  EXPECT_EQ(FloatText(123.456), "123.456");
  EXPECT_EQ(FloatText(1.0), "1");
  EXPECT_EQ(FloatText(100.0), "100");
  EXPECT_EQ(FloatText(1e20), "100000000000000000000");
  EXPECT_EQ(FloatText(1e21), "1e21");
  EXPECT_EQ(FloatText(1.2345e25), "1.2345e25");
  EXPECT_EQ(FloatText(1e100), "1e100");
  EXPECT_EQ(FloatText(0.000001), "0.000001");
  EXPECT_EQ(FloatText(0.0000015), "0.0000015");
  EXPECT_EQ(FloatText(1e-7), "1e-7");
  EXPECT_EQ(FloatText(-2.5e-10), "-2.5e-10");
  EXPECT_EQ(FloatText(0.0), "0");
  EXPECT_EQ(FloatText(-0.0), "-0");
  EXPECT_EQ(FloatText(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(FloatText(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(FloatText(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(FloatText(DBL_MAX), "1.7976931348623157e308");
  EXPECT_EQ(FloatText(5e-324), "5e-324");
  // Float32 values print their own shortest digits, not the double's.
  EXPECT_EQ(FloatText(0.1f), "0.1");
  EXPECT_EQ(FloatText(FLT_MAX), "3.4028235e38");
  EXPECT_EQ(FloatText(1.1f), "1.1");
  EXPECT_EQ(FloatText(-0.0f), "-0");
}

TEST(ToFloat32Test, RoundsToNearestAndRefusesWhatRoundsToInfinity) {
  float f = 0;
  EXPECT_TRUE(ToFloat32(0.1, &f));
  EXPECT_EQ(f, 0.1f);
  EXPECT_EQ(kFloat32Max, static_cast<double>(FLT_MAX));
  // Above FLT_MAX but below the midpoint to 2^128: rounds down to FLT_MAX.
  EXPECT_TRUE(ToFloat32(3.4028235e38, &f));
  EXPECT_EQ(f, FLT_MAX);
  EXPECT_TRUE(ToFloat32(-3.4028235e38, &f));
  EXPECT_EQ(f, -FLT_MAX);
  EXPECT_TRUE(ToFloat32(std::nextafter(0x1.ffffffp127, 0.0), &f));
  EXPECT_EQ(f, FLT_MAX);
  // The midpoint (FLT_MAX + half an ulp) and beyond round to infinity: refused.
  f = 7;
  EXPECT_FALSE(ToFloat32(0x1.ffffffp127, &f));
  EXPECT_FALSE(ToFloat32(3.4028236e38, &f));
  EXPECT_FALSE(ToFloat32(-3.4028236e38, &f));
  EXPECT_FALSE(ToFloat32(3.5e38, &f));
  EXPECT_FALSE(ToFloat32(1e39, &f));
  EXPECT_FALSE(ToFloat32(DBL_MAX, &f));
  EXPECT_EQ(f, 7);  // untouched on refusal
  // Infinities and NaN are values of the type; tiny values become zero.
  EXPECT_TRUE(ToFloat32(std::numeric_limits<double>::infinity(), &f));
  EXPECT_TRUE(std::isinf(f) && f > 0);
  EXPECT_TRUE(ToFloat32(std::numeric_limits<double>::quiet_NaN(), &f));
  EXPECT_TRUE(std::isnan(f));
  EXPECT_TRUE(ToFloat32(1e-50, &f));
  EXPECT_EQ(f, 0.0f);
}

// The BFloat16 bits of `d`, or -1 if refused.
int BFloat16Bits(double d) {
  uint16_t b = 0;
  if (!ToBFloat16(d, &b)) return -1;
  return b;
}

std::string BFloat16Text(uint16_t bits) {
  std::string out;
  AppendFloat(BFloat16ToFloat(Wire(bits).data()), &out);
  return out;
}

TEST(BFloat16Test, TruncatesTheFloat32LikeClickHouse) {
  EXPECT_EQ(BFloat16Bits(0.1), 0x3dcc);  // Float32 0x3dcccccd; rounding would give 0x3dcd
  EXPECT_EQ(BFloat16Text(0x3dcc), "0.099609375");
  EXPECT_EQ(BFloat16Bits(-0.1), 0xbdcc);  // toward zero for negatives too
  EXPECT_EQ(BFloat16Text(0xbdcc), "-0.099609375");
  EXPECT_EQ(BFloat16Bits(3.14159), 0x4049);
  EXPECT_EQ(BFloat16Text(0x4049), "3.140625");
  EXPECT_EQ(BFloat16Bits(1e38), 0x7e96);
  EXPECT_EQ(BFloat16Text(0x7e96), "9.96921e37");
  // 1 + 2^-7 - 2^-20 is 0x3f80fff8: truncation keeps 1, rounding would give 1.0078125.
  EXPECT_EQ(BFloat16Bits(1.0 + 0x1p-7 - 0x1p-20), 0x3f80);
  EXPECT_EQ(BFloat16Bits(1.0), 0x3f80);
  EXPECT_EQ(BFloat16Text(0x3f80), "1");
  EXPECT_EQ(BFloat16Bits(0.0), 0x0000);
  EXPECT_EQ(BFloat16Bits(-0.0), 0x8000);
  EXPECT_EQ(BFloat16Text(0x8000), "-0");
  EXPECT_EQ(BFloat16Bits(std::numeric_limits<double>::infinity()), 0x7f80);
  EXPECT_EQ(BFloat16Text(0x7f80), "inf");
  EXPECT_EQ(BFloat16Bits(-std::numeric_limits<double>::infinity()), 0xff80);
  // The largest finite: FLT_MAX's upper half.
  EXPECT_EQ(BFloat16Bits(3.4028235e38), 0x7f7f);
  EXPECT_EQ(BFloat16Text(0x7f7f), "3.3895314e38");
}

TEST(BFloat16Test, NaNStaysNaNAndFloat32RangeApplies) {
  const int nan = BFloat16Bits(std::numeric_limits<double>::quiet_NaN());
  ASSERT_GE(nan, 0);
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(Wire(static_cast<uint16_t>(nan)).data())));
  EXPECT_EQ(BFloat16Text(static_cast<uint16_t>(nan)), "nan");
  EXPECT_EQ(BFloat16Bits(1e39), -1);
  EXPECT_EQ(BFloat16Bits(-1e39), -1);
  EXPECT_EQ(BFloat16Bits(3.4028236e38), -1);
}

// ---- Integers and decimals ----------------------------------------------------------------------

std::string WideText(std::string_view hex_le, size_t width, bool is_signed) {
  std::string bytes(width, '\0');
  for (size_t i = 0; i < width && 2 * i + 1 < hex_le.size(); ++i) {
    bytes[i] = static_cast<char>(std::stoi(std::string(hex_le.substr(2 * i, 2)), nullptr, 16));
  }
  std::string out;
  AppendWideInteger(bytes.data(), width, is_signed, &out);
  return out;
}

TEST(AppendWideIntegerTest, EveryWidthAndSign) {
  const std::string ones(64, 'f');
  EXPECT_EQ(WideText("ff", 1, true), "-1");
  EXPECT_EQ(WideText("ff", 1, false), "255");
  EXPECT_EQ(WideText("0080", 2, true), "-32768");
  EXPECT_EQ(WideText("0000000000000080", 8, true), "-9223372036854775808");
  EXPECT_EQ(WideText("ffffffffffffffff", 8, false), "18446744073709551615");
  EXPECT_EQ(WideText("", 16, true), "0");
  EXPECT_EQ(WideText("", 32, false), "0");
  EXPECT_EQ(WideText(ones, 16, true), "-1");
  EXPECT_EQ(WideText(ones, 16, false), "340282366920938463463374607431768211455");
  EXPECT_EQ(WideText("00000000000000000000000000000080", 16, true),
            "-170141183460469231731687303715884105728");
  EXPECT_EQ(WideText(ones, 32, false),
            "115792089237316195423570985008687907853269984665640564039457584007913129639935");
  // (append rather than operator+: GCC 12 warns falsely about the latter, PR 105329)
  EXPECT_EQ(WideText(std::string(62, '0').append("80"), 32, true),
            "-57896044618658097711785492504343953926634992332820282019728792003956564819968");
  // 10^18 crosses a base-10^9 chunk boundary: the inner chunk keeps its zeros.
  EXPECT_EQ(WideText("000064a7b3b6e00d", 16, false), "1000000000000000000");
}

TEST(AppendDecimalTest, PointScaleDigitsFromTheRight) {
  auto text = [](int64_t v, size_t width, int scale) {
    std::string bytes(width, v < 0 ? '\xff' : '\0');
    std::memcpy(bytes.data(), &v, std::min<size_t>(width, 8));
    std::string out;
    AppendDecimal(bytes.data(), width, scale, &out);
    return out;
  };
  EXPECT_EQ(text(12345, 4, 2), "123.45");
  EXPECT_EQ(text(-5, 4, 2), "-0.05");
  EXPECT_EQ(text(0, 4, 2), "0.00");
  EXPECT_EQ(text(150, 8, 2), "1.50");
  EXPECT_EQ(text(42, 8, 0), "42");
  EXPECT_EQ(text(-1, 16, 10), "-0.0000000001");
  EXPECT_EQ(text(999999999, 4, 9), "0.999999999");
  EXPECT_EQ(text(-123456789012345678, 32, 3), "-123456789012345.678");
}

// ---- Dates, date-times, times -------------------------------------------------------------------

TEST(AppendDateTest, DaysAndSecondsAsCalendarText) {
  auto date = [](int64_t days) {
    std::string out;
    AppendDate(days, &out);
    return out;
  };
  EXPECT_EQ(date(0), "1970-01-01");
  EXPECT_EQ(date(18321), "2020-02-29");
  EXPECT_EQ(date(kDateMaxDays), "2149-06-06");
  EXPECT_EQ(date(kDate32MinDays), "1900-01-01");
  EXPECT_EQ(date(kDate32MaxDays), "2299-12-31");

  absl::TimeZone moscow;
  ASSERT_TRUE(absl::LoadTimeZone("Europe/Moscow", &moscow));
  std::string out;
  AppendDateTime(0, absl::UTCTimeZone(), &out);
  EXPECT_EQ(out, "1970-01-01 00:00:00");
  out.clear();
  AppendDateTime(1000000000, moscow, &out);  // 01:46:40 UTC, Moscow summer time +4 in 2001
  EXPECT_EQ(out, "2001-09-09 05:46:40");
  out.clear();
  AppendDateTime(4294967295, absl::UTCTimeZone(), &out);
  EXPECT_EQ(out, "2106-02-07 06:28:15");

  out.clear();
  AppendDateTime64(1500, 3, absl::UTCTimeZone(), &out);
  EXPECT_EQ(out, "1970-01-01 00:00:01.500");
  out.clear();
  AppendDateTime64(-1, 3, absl::UTCTimeZone(), &out);
  EXPECT_EQ(out, "1969-12-31 23:59:59.999");
  out.clear();
  AppendDateTime64(kDateTime64MinSeconds, 0, absl::UTCTimeZone(), &out);
  EXPECT_EQ(out, "1900-01-01 00:00:00");
  out.clear();
  AppendDateTime64(1714564800123456789, 9, absl::UTCTimeZone(), &out);
  EXPECT_EQ(out, "2024-05-01 12:00:00.123456789");

  int64_t seconds = 0, fraction = 0;
  SplitTicks(-1500, 3, &seconds, &fraction);
  EXPECT_EQ(seconds, -2);
  EXPECT_EQ(fraction, 500);
}

std::string TimeText(int64_t seconds) {
  std::string out;
  AppendTime(seconds, &out);
  return out;
}

std::string Time64Text(int64_t ticks, int scale) {
  std::string out;
  AppendTime64(ticks, scale, &out);
  return out;
}

TEST(AppendTimeTest, SignedHoursOfAtLeastTwoDigitsSaturated) {
  EXPECT_EQ(TimeText(0), "00:00:00");
  EXPECT_EQ(TimeText(3723), "01:02:03");
  EXPECT_EQ(TimeText(-3723), "-01:02:03");
  EXPECT_EQ(TimeText(59), "00:00:59");
  EXPECT_EQ(TimeText(360000), "100:00:00");
  EXPECT_EQ(TimeText(kTimeMaxSeconds), "999:59:59");
  EXPECT_EQ(TimeText(-kTimeMaxSeconds), "-999:59:59");
  EXPECT_EQ(TimeText(3600000), "999:59:59");
  EXPECT_EQ(TimeText(-3600000), "-999:59:59");
  EXPECT_EQ(TimeText(std::numeric_limits<int32_t>::min()), "-999:59:59");
  EXPECT_EQ(TimeText(std::numeric_limits<int64_t>::min()), "-999:59:59");
}

TEST(AppendTimeTest, Time64SignCoversTheFraction) {
  EXPECT_EQ(Time64Text(3723123, 3), "01:02:03.123");
  EXPECT_EQ(Time64Text(-1500, 3), "-00:00:01.500");
  EXPECT_EQ(Time64Text(-1, 3), "-00:00:00.001");
  EXPECT_EQ(Time64Text(0, 3), "00:00:00.000");
  EXPECT_EQ(Time64Text(5, 1), "00:00:00.5");
  EXPECT_EQ(Time64Text(3723, 0), "01:02:03");
  EXPECT_EQ(Time64Text(-3723000000001, 9), "-01:02:03.000000001");
  // Saturated at 999:59:59 with every fraction digit 9.
  EXPECT_EQ(Time64Text(3600000000, 3), "999:59:59.999");
  EXPECT_EQ(Time64Text(-3600000000, 3), "-999:59:59.999");
  EXPECT_EQ(Time64Text(std::numeric_limits<int64_t>::min(), 6), "-999:59:59.999999");
}

// ---- UUID and addresses -------------------------------------------------------------------------

TEST(AppendUuidTest, RfcOrderAndWireHalves) {
  unsigned char rfc[16];
  for (int i = 0; i < 16; ++i) rfc[i] = static_cast<unsigned char>(i + 1);
  std::string out;
  AppendUuid(rfc, &out);
  EXPECT_EQ(out, "01020304-0506-0708-090a-0b0c0d0e0f10");

  // On the wire: two little-endian UInt64 halves, high half first.
  const std::string wire = Wire<uint64_t>(0x0102030405060708) + Wire<uint64_t>(0x090a0b0c0d0e0f10);
  out.clear();
  AppendPlainText(Fixed("UUID"), wire.data(), &out);
  EXPECT_EQ(out, "01020304-0506-0708-090a-0b0c0d0e0f10");

  unsigned char parsed[16];
  ASSERT_TRUE(ParseUuidText("01020304-0506-0708-090A-0B0C0D0E0F10", parsed));
  EXPECT_EQ(std::memcmp(parsed, rfc, 16), 0);
  for (const char* bad :
       {"", "01020304050607080910111213141516", "01020304-0506-0708-090a-0b0c0d0e0f1",
        "01020304-0506-0708-090a-0b0c0d0e0f1g", "0102030-40506-0708-090a-0b0c0d0e0f10",
        "01020304-0506-0708-090a-0b0c0d0e0f100"}) {
    EXPECT_FALSE(ParseUuidText(bad, parsed)) << bad;
  }
}

TEST(AppendIpTest, Ipv4AndIpv6Text) {
  std::string out;
  AppendIpv4(0x01020304, &out);
  EXPECT_EQ(out, "1.2.3.4");
  out.clear();
  AppendPlainText(Fixed("IPv4"), Wire<uint32_t>(0xc0a80001).data(), &out);
  EXPECT_EQ(out, "192.168.0.1");

  unsigned char v6[16] = {};
  out.clear();
  AppendIpv6(v6, &out);
  EXPECT_EQ(out, "::");
  v6[0] = 0x20;
  v6[1] = 0x01;
  v6[2] = 0x0d;
  v6[3] = 0xb8;
  v6[15] = 1;
  out.clear();
  AppendIpv6(v6, &out);
  EXPECT_EQ(out, "2001:db8::1");

  uint32_t v4 = 0;
  ASSERT_TRUE(ParseIpv4Text("1.2.3.4", &v4));
  EXPECT_EQ(v4, 0x01020304u);
  ASSERT_TRUE(ParseIpv4Text("255.255.255.255", &v4));
  EXPECT_EQ(v4, 0xffffffffu);
  for (const char* bad : {"", "1.2.3", "256.1.1.1", "1.2.3.4.5", "::1", " 1.2.3.4"}) {
    EXPECT_FALSE(ParseIpv4Text(bad, &v4)) << bad;
  }
  EXPECT_FALSE(ParseIpv4Text(std::string_view("1.2.3.4\0", 8), &v4));

  unsigned char addr[16];
  ASSERT_TRUE(ParseIpv6Text("1.2.3.4", addr));
  out.clear();
  AppendIpv6(addr, &out);
  EXPECT_EQ(out, "::ffff:1.2.3.4");
  ASSERT_TRUE(ParseIpv6Text("2001:DB8::1", addr));
  EXPECT_EQ(std::memcmp(addr, v6, 16), 0);
  for (const char* bad : {"", "gg::1", "1::2::3", "1.2.3"}) {
    EXPECT_FALSE(ParseIpv6Text(bad, addr)) << bad;
  }
}

// ---- Plain and TabSeparated text of wire values -------------------------------------------------

std::string Plain(std::string_view type, const std::string& wire) {
  std::string out;
  AppendPlainText(Fixed(type), wire.data(), &out);
  return out;
}

std::string Tsv(std::string_view type, const std::string& wire, bool nested) {
  std::string out;
  AppendTsvText(Fixed(type), wire.data(), nested, &out);
  return out;
}

TEST(AppendPlainTextTest, EveryKindFromItsWireBytes) {
  EXPECT_EQ(Plain("UInt8", Wire<uint8_t>(200)), "200");
  EXPECT_EQ(Plain("Int16", Wire<int16_t>(-300)), "-300");
  EXPECT_EQ(Plain("Int128", Wire<int64_t>(-1) + Wire<int64_t>(-1)), "-1");
  EXPECT_EQ(Plain("Float32", Wire<float>(0.1f)), "0.1");
  EXPECT_EQ(Plain("Float64", Wire<double>(1e-7)), "1e-7");
  EXPECT_EQ(Plain("BFloat16", Wire<uint16_t>(0x3dcc)), "0.099609375");
  EXPECT_EQ(Plain("Bool", Wire<uint8_t>(1)), "true");
  EXPECT_EQ(Plain("Bool", Wire<uint8_t>(0)), "false");
  EXPECT_EQ(Plain("Date", Wire<uint16_t>(65535)), "2149-06-06");
  EXPECT_EQ(Plain("Date32", Wire<int32_t>(-25567)), "1900-01-01");
  EXPECT_EQ(Plain("DateTime('Asia/Tokyo')", Wire<uint32_t>(0)), "1970-01-01 09:00:00");
  EXPECT_EQ(Plain("DateTime64(3, 'UTC')", Wire<int64_t>(-1)), "1969-12-31 23:59:59.999");
  EXPECT_EQ(Plain("Time", Wire<int32_t>(-3723)), "-01:02:03");
  EXPECT_EQ(Plain("Time64(3)", Wire<int64_t>(3723123)), "01:02:03.123");
  EXPECT_EQ(Plain("Decimal(9, 2)", Wire<int32_t>(-12345)), "-123.45");
  EXPECT_EQ(Plain("Decimal(18, 3)", Wire<int64_t>(1)), "0.001");
  EXPECT_EQ(Plain("Enum8('a' = 1, 'b\\'c' = -2)", Wire<int8_t>(-2)), "b'c");
  EXPECT_EQ(Plain("Enum16('a' = 1000)", Wire<int16_t>(1000)), "a");
  EXPECT_EQ(Plain("Enum8('a' = 1)", Wire<int8_t>(9)), "9");  // not an element: its number
  EXPECT_EQ(Plain("FixedString(3)", std::string("a\tb", 3)), "a\tb");
  EXPECT_EQ(Plain("FixedString(3)", std::string("a\0\0", 3)), std::string("a\0\0", 3));
  EXPECT_EQ(Plain("Nothing", Wire<uint8_t>(0)), "\\N");
}

TEST(AppendTsvTextTest, QuotesInsideContainersAndEscapes) {
  struct Case {
    std::string_view type;
    std::string wire;
    std::string top;
    std::string nested;
  };
  const std::string uuid = Wire<uint64_t>(0x0102030405060708) + Wire<uint64_t>(0x090a0b0c0d0e0f10);
  const std::string ipv6 = std::string(10, '\0').append("\xff\xff\x01\x02\x03\x04");
  for (const Case& c : {
           Case{"Date", Wire<uint16_t>(18262), "2020-01-01", "'2020-01-01'"},
           Case{"Date32", Wire<int32_t>(-1), "1969-12-31", "'1969-12-31'"},
           Case{"DateTime('UTC')", Wire<uint32_t>(1), "1970-01-01 00:00:01",
                "'1970-01-01 00:00:01'"},
           Case{"DateTime64(1, 'UTC')", Wire<int64_t>(15), "1970-01-01 00:00:01.5",
                "'1970-01-01 00:00:01.5'"},
           Case{"Time", Wire<int32_t>(3723), "01:02:03", "'01:02:03'"},
           Case{"Time64(3)", Wire<int64_t>(-1500), "-00:00:01.500", "'-00:00:01.500'"},
           Case{"UUID", uuid, "01020304-0506-0708-090a-0b0c0d0e0f10",
                "'01020304-0506-0708-090a-0b0c0d0e0f10'"},
           Case{"IPv4", Wire<uint32_t>(0x01020304), "1.2.3.4", "'1.2.3.4'"},
           Case{"IPv6", ipv6, "::ffff:1.2.3.4", "'::ffff:1.2.3.4'"},
           // Enum names and FixedString bytes are escaped, and quoted inside containers.
           Case{"Enum8('it\\'s' = 1, 'a\\tb' = 2)", Wire<int8_t>(1), "it\\'s", "'it\\'s'"},
           Case{"Enum8('it\\'s' = 1, 'a\\tb' = 2)", Wire<int8_t>(2), "a\\tb", "'a\\tb'"},
           Case{"Enum8('a' = 1)", Wire<int8_t>(5), "5", "5"},  // outside the type: its number
           Case{"FixedString(4)", std::string("a\tb\0", 4), "a\\tb\\0", "'a\\tb\\0'"},
           Case{"FixedString(3)", std::string("\\'\n", 3), "\\\\\\'\\n", "'\\\\\\'\\n'"},
           // Numbers and Bool are never quoted.
           Case{"UInt8", Wire<uint8_t>(7), "7", "7"},
           Case{"Int64", Wire<int64_t>(-7), "-7", "-7"},
           Case{"Float64", Wire<double>(1.5), "1.5", "1.5"},
           Case{"BFloat16", Wire<uint16_t>(0x4049), "3.140625", "3.140625"},
           Case{"Decimal(9, 2)", Wire<int32_t>(150), "1.50", "1.50"},
           Case{"Bool", Wire<uint8_t>(1), "true", "true"},
           Case{"Nothing", Wire<uint8_t>(0), "\\N", "NULL"},
       }) {
    SCOPED_TRACE(c.type);
    EXPECT_EQ(Tsv(c.type, c.wire, false), c.top);
    EXPECT_EQ(Tsv(c.type, c.wire, true), c.nested);
  }
}

TEST(AppendTsvTextTest, KindsThatEscapeOrQuote) {
  EXPECT_TRUE(NeedsEscaping(FixedKind::kFixedString));
  EXPECT_TRUE(NeedsEscaping(FixedKind::kEnum));
  EXPECT_FALSE(NeedsEscaping(FixedKind::kUuid));
  EXPECT_FALSE(NeedsEscaping(FixedKind::kTime));
  for (FixedKind k :
       {FixedKind::kDate, FixedKind::kDate32, FixedKind::kDateTime, FixedKind::kDateTime64,
        FixedKind::kTime, FixedKind::kTime64, FixedKind::kUuid, FixedKind::kIpv4, FixedKind::kIpv6,
        FixedKind::kEnum, FixedKind::kFixedString}) {
    EXPECT_TRUE(QuotedWhenNested(k)) << static_cast<int>(k);
  }
  for (FixedKind k : {FixedKind::kUInt, FixedKind::kInt, FixedKind::kFloat, FixedKind::kBFloat16,
                      FixedKind::kBool, FixedKind::kDecimal, FixedKind::kNothing}) {
    EXPECT_FALSE(QuotedWhenNested(k)) << static_cast<int>(k);
  }
}

// ---- Parsing ------------------------------------------------------------------------------------

// The ticks ParseTimeText reads, or "error: why".
std::string TimeTicks(std::string_view s, int scale) {
  int64_t ticks = 0;
  if (const char* why = ParseTimeText(s, scale, &ticks)) return std::string("error: ") + why;
  return std::to_string(ticks);
}

TEST(ParseTimeTextTest, AcceptedForms) {
  EXPECT_EQ(TimeTicks("00:00:00", 0), "0");
  EXPECT_EQ(TimeTicks("01:02:03", 0), "3723");
  EXPECT_EQ(TimeTicks("-01:02:03", 0), "-3723");
  EXPECT_EQ(TimeTicks("+01:02:03", 0), "3723");
  EXPECT_EQ(TimeTicks("100:00:00", 0), "360000");
  EXPECT_EQ(TimeTicks("999:59:59", 0), "3599999");
  EXPECT_EQ(TimeTicks("-999:59:59", 0), "-3599999");
  EXPECT_EQ(TimeTicks("02:03", 0), "123");  // mm:ss
  EXPECT_EQ(TimeTicks("-02:03", 0), "-123");
  EXPECT_EQ(TimeTicks("3723", 0), "3723");  // seconds
  EXPECT_EQ(TimeTicks("-3723", 0), "-3723");
  EXPECT_EQ(TimeTicks("3599999", 0), "3599999");
  EXPECT_EQ(TimeTicks("-0", 0), "0");
  // Fractions: to the scale, sub-tick digits dropped (not rounded).
  EXPECT_EQ(TimeTicks("01:02:03.123", 3), "3723123");
  EXPECT_EQ(TimeTicks("01:02:03.1", 3), "3723100");
  EXPECT_EQ(TimeTicks("01:02:03.123999", 3), "3723123");
  EXPECT_EQ(TimeTicks("01:02:03.9", 0), "3723");
  EXPECT_EQ(TimeTicks("-00:00:01.5", 3), "-1500");
  EXPECT_EQ(TimeTicks("-00:00:00.001", 3), "-1");
  EXPECT_EQ(TimeTicks("3723.5", 3), "3723500");
  EXPECT_EQ(TimeTicks("999:59:59.999999999", 9), "3599999999999999");
  EXPECT_EQ(TimeTicks("01:02:03", 3), "3723000");
}

TEST(ParseTimeTextTest, RefusedForms) {
  const std::string not_time = "error: not a time '[-]hh:mm:ss[.fff]' or seconds";
  for (const char* s :
       {"", "-", "+", "a", "01:02:03 ", " 01:02:03", "01:02:", ":02:03", "01::03", "1:2:3:4",
        "01:02:03.", "01:02:03.1.2", "01:02:03Z", "--1", "01-02-03", "1e3"}) {
    EXPECT_EQ(TimeTicks(s, 3), not_time) << s;
  }
  const std::string bad_clock = "error: not a valid time (minutes and seconds are 0..59)";
  EXPECT_EQ(TimeTicks("01:60:00", 0), bad_clock);
  EXPECT_EQ(TimeTicks("01:00:60", 0), bad_clock);
  EXPECT_EQ(TimeTicks("60:00", 0), bad_clock);
  const std::string range = "error: time outside -999:59:59 .. 999:59:59";
  EXPECT_EQ(TimeTicks("1000:00:00", 0), range);
  EXPECT_EQ(TimeTicks("-1000:00:00", 0), range);
  EXPECT_EQ(TimeTicks("3600000", 0), range);
  EXPECT_EQ(TimeTicks("-3600000", 0), range);
  EXPECT_EQ(TimeTicks("99999999999999999999", 0), "error: time out of range");
  EXPECT_EQ(TimeTicks("99999999999999999999:00:00", 0), "error: time out of range");
}

TEST(ParseDateTextTest, CalendarDatesOnly) {
  int64_t days = 0;
  ASSERT_EQ(ParseDateText("1970-01-01", &days), nullptr);
  EXPECT_EQ(days, 0);
  ASSERT_EQ(ParseDateText("2020-02-29", &days), nullptr);
  EXPECT_EQ(days, 18321);
  ASSERT_EQ(ParseDateText("1900-01-01", &days), nullptr);
  EXPECT_EQ(days, kDate32MinDays);
  ASSERT_EQ(ParseDateText("2299-12-31", &days), nullptr);
  EXPECT_EQ(days, kDate32MaxDays);
  EXPECT_STREQ(ParseDateText("2021-02-29", &days), "not a valid calendar date");
  EXPECT_STREQ(ParseDateText("2021-13-01", &days), "not a valid calendar date");
  EXPECT_STREQ(ParseDateText("2021-00-10", &days), "not a valid calendar date");
  for (const char* bad : {"", "2020-1-01", "2020-01-01 ", "2020/01/01", "20200101",
                          "2020-01-01T00:00:00", "202a-01-01"}) {
    EXPECT_STREQ(ParseDateText(bad, &days), "not a date 'YYYY-MM-DD'") << bad;
  }
}

TEST(ParseDateTimeTextTest, OffsetsZonesAndFractions) {
  int64_t seconds = 0;
  uint32_t nanos = 0;
  ASSERT_EQ(
      ParseDateTimeText("2024-05-01T12:00:00.5Z", absl::UTCTimeZone(), true, &seconds, &nanos),
      nullptr);
  EXPECT_EQ(seconds, 1714564800);
  EXPECT_EQ(nanos, 500000000u);
  ASSERT_EQ(ParseDateTimeText("2024-05-01 12:00:00.1234567891", absl::UTCTimeZone(), true, &seconds,
                              &nanos),
            nullptr);
  EXPECT_EQ(nanos, 123456789u);
  ASSERT_EQ(
      ParseDateTimeText("2024-05-01T14:00:00+02:00", absl::UTCTimeZone(), true, &seconds, &nanos),
      nullptr);
  EXPECT_EQ(seconds, 1714564800);
  absl::TimeZone tokyo;
  ASSERT_TRUE(absl::LoadTimeZone("Asia/Tokyo", &tokyo));
  ASSERT_EQ(ParseDateTimeText("2024-05-01 21:00:00", tokyo, false, &seconds, &nanos), nullptr);
  EXPECT_EQ(seconds, 1714564800);
  EXPECT_STREQ(
      ParseDateTimeText("2024-05-01T24:00:00Z", absl::UTCTimeZone(), true, &seconds, &nanos),
      "not a valid time of day");
  EXPECT_STREQ(
      ParseDateTimeText("2024-02-30T00:00:00Z", absl::UTCTimeZone(), true, &seconds, &nanos),
      "not a valid calendar date");
  EXPECT_STREQ(
      ParseDateTimeText("2024-05-01T00:00:00+24:00", absl::UTCTimeZone(), true, &seconds, &nanos),
      "not a valid UTC offset");
  EXPECT_NE(ParseDateTimeText("2024-05-01", absl::UTCTimeZone(), true, &seconds, &nanos), nullptr);
}

TEST(ParseNumberTextTest, FloatsIntegersAndDecimals) {
  double d = 0;
  EXPECT_EQ(ParseFloatText("1.5", &d), Parse::kOk);
  EXPECT_EQ(d, 1.5);
  EXPECT_EQ(ParseFloatText("-2e10", &d), Parse::kOk);
  EXPECT_EQ(d, -2e10);
  EXPECT_EQ(ParseFloatText(".5", &d), Parse::kOk);
  EXPECT_EQ(d, 0.5);
  EXPECT_EQ(ParseFloatText("+7", &d), Parse::kOk);
  EXPECT_EQ(d, 7);
  EXPECT_EQ(ParseFloatText("-Infinity", &d), Parse::kOk);
  EXPECT_TRUE(std::isinf(d) && d < 0);
  EXPECT_EQ(ParseFloatText("nan", &d), Parse::kOk);
  EXPECT_TRUE(std::isnan(d));
  EXPECT_EQ(ParseFloatText("1e-400", &d), Parse::kOk);  // below the smallest subnormal: zero
  EXPECT_EQ(d, 0);
  EXPECT_EQ(ParseFloatText("1e400", &d), Parse::kOverflow);
  for (const char* bad : {"", "+", "+-1", "1.5x", " 1", "0x10", "1,5"}) {
    EXPECT_EQ(ParseFloatText(bad, &d), Parse::kSyntax) << bad;
  }

  bool negative = false;
  U256 m;
  EXPECT_EQ(ParseIntegerText("+7", &negative, &m), Parse::kOk);
  EXPECT_FALSE(negative);
  EXPECT_EQ(m.w[0], 7u);
  EXPECT_EQ(ParseIntegerText("-0", &negative, &m), Parse::kOk);
  EXPECT_TRUE(negative);
  EXPECT_TRUE(IsZero(m));
  EXPECT_EQ(ParseIntegerText(std::string(78, '9'), &negative, &m), Parse::kOverflow);
  for (const char* bad : {"", "-", "1a", "1.0", " 1"}) {
    EXPECT_EQ(ParseIntegerText(bad, &negative, &m), Parse::kSyntax) << bad;
  }

  EXPECT_EQ(ParseDecimalText("1.23", 2, 9, false, &negative, &m), Parse::kOk);
  EXPECT_EQ(m.w[0], 123u);
  EXPECT_EQ(ParseDecimalText("1.230", 2, 9, false, &negative, &m), Parse::kOk);
  EXPECT_EQ(m.w[0], 123u);
  EXPECT_EQ(ParseDecimalText("1.234", 2, 9, false, &negative, &m), Parse::kFraction);
  EXPECT_EQ(ParseDecimalText("1.235", 2, 9, true, &negative, &m), Parse::kOk);
  EXPECT_EQ(m.w[0], 124u);
  EXPECT_EQ(ParseDecimalText("-0.5", 0, 9, true, &negative, &m), Parse::kOk);
  EXPECT_TRUE(negative);
  EXPECT_EQ(m.w[0], 1u);  // half away from zero
  EXPECT_EQ(ParseDecimalText("1e2", 2, 9, false, &negative, &m), Parse::kOk);
  EXPECT_EQ(m.w[0], 10000u);
  EXPECT_EQ(ParseDecimalText("1234567e-1", 1, 9, false, &negative, &m), Parse::kOk);
  EXPECT_EQ(m.w[0], 1234567u);
  EXPECT_EQ(ParseDecimalText("1234567.8e-1", 1, 9, false, &negative, &m), Parse::kFraction);
  EXPECT_EQ(ParseDecimalText("9999999.99", 2, 9, false, &negative, &m), Parse::kOk);
  EXPECT_EQ(ParseDecimalText("10000000", 2, 9, false, &negative, &m), Parse::kOverflow);
  for (const char* bad : {"", ".", "-", "1e", "1.2.3", "abc", "1 "}) {
    EXPECT_EQ(ParseDecimalText(bad, 2, 9, false, &negative, &m), Parse::kSyntax) << bad;
  }
}

}  // namespace
}  // namespace chgate::text
