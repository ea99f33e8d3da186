// Parsing ClickHouse value text and converting numbers into the stored forms, shared by the
// server (rows conversion) and the SDK (builders): 256-bit magnitudes for wide integers and
// decimals, floats, dates, date-times, times, UUIDs and IP addresses. The ranges they are checked
// against are the type facts (text/type_facts.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/time/time.h"
#include "text/type_facts.h"

namespace chgate::text {

__extension__ typedef unsigned __int128 Uint128;
__extension__ typedef __int128 Int128;

// ---------------------------------------------------------------------------------------------
// 256-bit magnitudes: wide integers and decimals are parsed into one, range-checked, then stored
// as the low `width` bytes of its two's complement.

// Little-endian 64-bit limbs; on the (little-endian) host its bytes are also ClickHouse's layout.
struct U256 {
  uint64_t w[4] = {0, 0, 0, 0};
};

constexpr U256 U256Of(uint64_t v) {
  U256 r;
  r.w[0] = v;
  return r;
}

// x = x * m + a; false when the result does not fit 256 bits.
constexpr bool MulAdd(U256& x, uint64_t m, uint64_t a) {
  uint64_t carry = a;
  for (uint64_t& limb : x.w) {
    const Uint128 p = static_cast<Uint128>(limb) * m + carry;
    limb = static_cast<uint64_t>(p);
    carry = static_cast<uint64_t>(p >> 64);
  }
  return carry == 0;
}

constexpr bool Less(const U256& a, const U256& b) {
  for (int i = 3; i >= 0; --i) {
    if (a.w[i] != b.w[i]) return a.w[i] < b.w[i];
  }
  return false;
}

constexpr bool IsZero(const U256& a) { return (a.w[0] | a.w[1] | a.w[2] | a.w[3]) == 0; }

// Two's complement negation.
constexpr U256 Negated(U256 x) {
  uint64_t carry = 1;
  for (uint64_t& limb : x.w) {
    limb = ~limb + carry;
    carry = carry != 0 && limb == 0 ? 1 : 0;
  }
  return x;
}

// 2^bits - 1.
constexpr U256 LowMask(int bits) {
  U256 r;
  for (int i = 0; i < 4; ++i) {
    const int b = bits - 64 * i;
    r.w[i] = b >= 64 ? ~uint64_t{0} : b <= 0 ? 0 : (uint64_t{1} << b) - 1;
  }
  return r;
}

inline constexpr std::array<uint64_t, 20> kPow10U64 = [] {
  std::array<uint64_t, 20> t{};
  t[0] = 1;
  for (size_t i = 1; i < t.size(); ++i) t[i] = t[i - 1] * 10;
  return t;
}();

// 10^0 .. 10^76 (10^77 exceeds 256 bits).
inline constexpr std::array<U256, 77> kPow10 = [] {
  std::array<U256, 77> t{};
  t[0] = U256Of(1);
  for (size_t i = 1; i < t.size(); ++i) {
    t[i] = t[i - 1];
    MulAdd(t[i], 10, 0);
  }
  return t;
}();

// x *= 10^n; false on overflow (x unchanged in meaning then).
inline bool MulPow10(U256& x, int64_t n) {
  if (IsZero(x)) return true;
  while (n > 0) {
    const int64_t k = n < 19 ? n : 19;
    if (!MulAdd(x, kPow10U64[static_cast<size_t>(k)], 0)) return false;
    n -= k;
  }
  return true;
}

// Outcome of parsing number text.
enum class Parse { kOk, kSyntax, kFraction, kOverflow };

// "[+-]digits" as sign and magnitude.
Parse ParseIntegerText(std::string_view s, bool* negative, U256* magnitude);
// Decimal text "[+-]digits[.digits][(e|E)[+-]digits]" (at least one digit) as a magnitude in
// units of 10^-scale. Digits below one unit must be zeros (kFraction otherwise) unless `round`,
// which rounds them half away from zero. kOverflow when the magnitude reaches 10^precision.
Parse ParseDecimalText(std::string_view s, int scale, int precision, bool round, bool* negative,
                       U256* magnitude);
// Text of a double: decimal or scientific as std::to_chars writes its shortest round trip.
std::string_view ShortestText(double d, char (&buf)[64]);
// "1.5", "-2e10", ".5", "nan", "inf", "-Infinity" (an optional leading '+' too).
Parse ParseFloatText(std::string_view s, double* out);
// Float32 from a double: rounded to nearest; finite values that round beyond FLT_MAX fail. The
// one rule for every path that stores a Float32 (rows, Block float64s, the SDK).
bool ToFloat32(double d, float* out);
// BFloat16 (the upper half of a Float32) from a double as ClickHouse converts it: to Float32
// (ToFloat32's rule), then the upper 16 bits (truncation toward zero). NaN stays NaN.
bool ToBFloat16(double d, uint16_t* out);

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
constexpr int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

inline constexpr int64_t kDateMax = kDateMaxDays;
inline constexpr int64_t kDate32Min = kDate32MinDays;
inline constexpr int64_t kDate32Max = kDate32MaxDays;
inline constexpr int64_t kDateTimeMax = 4294967295;
static_assert(DaysFromCivil(2149, 6, 6) == kDateMax);
static_assert(DaysFromCivil(1900, 1, 1) == kDate32Min && DaysFromCivil(2299, 12, 31) == kDate32Max);

int64_t FloorDiv(int64_t a, int64_t b);
// "YYYY-MM-DD" as days since 1970-01-01; nullptr, or why not.
const char* ParseDateText(std::string_view s, int64_t* days);
// "YYYY-MM-DD(T|t| )hh:mm:ss[.fraction][Z|z|(+|-)hh:mm]" as Unix seconds and nanoseconds (digits
// of the fraction beyond 9 are dropped). Without an offset the time is local to `zone` (`utc`:
// the zone is UTC, a faster path). nullptr, or why not.
const char* ParseDateTimeText(std::string_view s, const absl::TimeZone& zone, bool utc,
                              int64_t* seconds, uint32_t* nanos);
// "[-]h+:mm:ss[.fraction]" (or "[-]mm:ss", or "[-]seconds[.fraction]") as ticks of 10^-scale
// seconds, sub-tick digits dropped; nullptr, or why not. Range: Time's +-999:59:59.
const char* ParseTimeText(std::string_view s, int scale, int64_t* ticks);
// "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (any case) as 16 bytes in RFC 4122 order.
bool ParseUuidText(std::string_view s, unsigned char* out);
// inet_pton of text that is not NUL-terminated; text with a NUL byte inside is rejected.
bool InetPton(int family, std::string_view s, void* out);
// Dotted-quad text as the address number (1.2.3.4 = 0x01020304).
bool ParseIpv4Text(std::string_view s, uint32_t* out);
// IPv6 text as 16 bytes in network order; IPv4 text becomes ::ffff:a.b.c.d.
bool ParseIpv6Text(std::string_view s, unsigned char* out);

}  // namespace chgate::text
