#include "text/value_parse.h"

#include <arpa/inet.h>

#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstring>
#include <system_error>

#include "absl/time/civil_time.h"

namespace chgate::text {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Accumulates decimal digits into a U256, 19 at a time.
class DigitAccumulator {
 public:
  void Push(unsigned digit) {
    chunk_ = chunk_ * 10 + digit;
    if (++chunk_digits_ == 19) Flush();
  }
  // The value; false if it overflowed 256 bits.
  bool Finish(U256* out) {
    if (chunk_digits_ > 0) Flush();
    *out = value_;
    return !overflow_;
  }

 private:
  void Flush() {
    if (!MulAdd(value_, kPow10U64[chunk_digits_], chunk_)) overflow_ = true;
    chunk_ = 0;
    chunk_digits_ = 0;
  }

  U256 value_;
  uint64_t chunk_ = 0;
  size_t chunk_digits_ = 0;
  bool overflow_ = false;
};

// "[+-]digits" as sign and magnitude.
Parse ParseIntegerText(std::string_view s, bool* negative, U256* magnitude) {
  size_t i = 0;
  *negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    *negative = s[0] == '-';
    i = 1;
  }
  if (i == s.size()) return Parse::kSyntax;
  DigitAccumulator acc;
  for (; i < s.size(); ++i) {
    if (!IsDigit(s[i])) return Parse::kSyntax;
    acc.Push(static_cast<unsigned>(s[i] - '0'));
  }
  return acc.Finish(magnitude) ? Parse::kOk : Parse::kOverflow;
}

// Decimal text "[+-]digits[.digits][(e|E)[+-]digits]" (at least one digit) as a magnitude in
// units of 10^-scale. Digits below one unit must be zeros (kFraction otherwise) unless `round`,
// which rounds them half away from zero. kOverflow when the magnitude reaches 10^precision.
Parse ParseDecimalText(std::string_view s, int scale, int precision, bool round, bool* negative,
                       U256* magnitude) {
  const size_t n = s.size();
  size_t i = 0;
  *negative = false;
  if (i < n && (s[i] == '-' || s[i] == '+')) {
    *negative = s[i] == '-';
    ++i;
  }
  const size_t int_begin = i;
  while (i < n && IsDigit(s[i])) ++i;
  const size_t int_end = i;
  size_t frac_begin = i, frac_end = i;
  if (i < n && s[i] == '.') {
    frac_begin = ++i;
    while (i < n && IsDigit(s[i])) ++i;
    frac_end = i;
  }
  if (int_begin == int_end && frac_begin == frac_end) return Parse::kSyntax;
  int64_t exponent = 0;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool exponent_negative = false;
    if (i < n && (s[i] == '-' || s[i] == '+')) {
      exponent_negative = s[i] == '-';
      ++i;
    }
    if (i == n) return Parse::kSyntax;
    for (; i < n && IsDigit(s[i]); ++i) {
      if (exponent < 1000000) exponent = exponent * 10 + (s[i] - '0');
    }
    if (exponent_negative) exponent = -exponent;
  }
  if (i != n) return Parse::kSyntax;

  // The digits D (integer part, then fraction) stand for D x 10^(exponent - fraction digits),
  // that is D x 10^shift units. Digits [0, keep) are whole units, the rest fall below one unit.
  const int64_t int_digits = static_cast<int64_t>(int_end - int_begin);
  const int64_t total = int_digits + static_cast<int64_t>(frac_end - frac_begin);
  const int64_t shift = exponent - static_cast<int64_t>(frac_end - frac_begin) + scale;
  const int64_t keep = shift >= 0 ? total : total + shift;
  const auto digit = [&](int64_t k) {
    const size_t pos = k < int_digits ? int_begin + static_cast<size_t>(k)
                                      : frac_begin + static_cast<size_t>(k - int_digits);
    return static_cast<unsigned>(s[pos] - '0');
  };
  bool round_up = false;
  if (round) {
    round_up = keep >= 0 && keep < total && digit(keep) >= 5;
  } else {
    for (int64_t k = keep < 0 ? 0 : keep; k < total; ++k) {
      if (digit(k) != 0) return Parse::kFraction;
    }
  }
  DigitAccumulator acc;
  for (int64_t k = 0; k < keep; ++k) acc.Push(digit(k));
  U256 m;
  if (!acc.Finish(&m)) return Parse::kOverflow;
  if (round_up && !MulAdd(m, 1, 1)) return Parse::kOverflow;
  if (shift > 0 && !IsZero(m) && (shift >= 77 || !MulPow10(m, shift))) return Parse::kOverflow;
  if (!Less(m, kPow10[static_cast<size_t>(precision)])) return Parse::kOverflow;
  *magnitude = m;
  return Parse::kOk;
}

// Text of a double: decimal or scientific as std::to_chars writes its shortest round trip.
std::string_view ShortestText(double d, char (&buf)[64]) {
  const auto result = std::to_chars(buf, buf + sizeof(buf), d);
  return std::string_view(buf, static_cast<size_t>(result.ptr - buf));
}

// "1.5", "-2e10", ".5", "nan", "inf", "-Infinity" (an optional leading '+' too).
Parse ParseFloatText(std::string_view s, double* out) {
  if (s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  if (s.empty()) return Parse::kSyntax;
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, *out);
  if (ec == std::errc::invalid_argument || ptr != end) return Parse::kSyntax;
  if (ec == std::errc::result_out_of_range) {
    // Too large, or too small: a magnitude below the smallest subnormal rounds to zero.
    long double wide = 0;
    const auto r = std::from_chars(s.data(), end, wide);
    if (r.ec == std::errc() && r.ptr == end && std::fabs(wide) <= DBL_MAX) {
      *out = static_cast<double>(wide);
      return Parse::kOk;
    }
    return Parse::kOverflow;
  }
  return ec == std::errc() ? Parse::kOk : Parse::kSyntax;
}

// Float32 from a double: rounded to nearest; finite values that round beyond FLT_MAX fail.
bool ToFloat32(double d, float* out) {
  if (std::isfinite(d) && std::fabs(d) > FLT_MAX) {
    // FLT_MAX + half an ulp (2^128 - 2^103) and above round to infinity.
    if (std::fabs(d) >= 0x1.ffffffp127) return false;
    *out = d > 0 ? FLT_MAX : -FLT_MAX;
    return true;
  }
  *out = static_cast<float>(d);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Dates and times.

int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

bool IsLeapYear(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int DaysInMonth(int64_t y, int m) {
  constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeapYear(y) ? 29 : kDays[m - 1];
}

// `n` digits at s[pos]; false if any is not a digit.
bool Digits(std::string_view s, size_t pos, size_t n, int* out) {
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (!IsDigit(s[i])) return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

constexpr char kNotDate[] = "not a date 'YYYY-MM-DD'";
constexpr char kNotDateTime[] =
    "not RFC 3339 ('YYYY-MM-DDThh:mm:ss[.fff]Z' or with an offset) or 'YYYY-MM-DD hh:mm:ss'";

// "YYYY-MM-DD" at the start of `s` (exactly 10 bytes); nullptr or why not.
const char* ParseDateParts(std::string_view s, int* y, int* m, int* d) {
  if (s.size() < 10 || s[4] != '-' || s[7] != '-' || !Digits(s, 0, 4, y) || !Digits(s, 5, 2, m) ||
      !Digits(s, 8, 2, d)) {
    return kNotDate;
  }
  if (*m < 1 || *m > 12 || *d < 1 || *d > DaysInMonth(*y, *m)) return "not a valid calendar date";
  return nullptr;
}

const char* ParseDateText(std::string_view s, int64_t* days) {
  int y, m, d;
  if (s.size() != 10) return kNotDate;
  if (const char* why = ParseDateParts(s, &y, &m, &d)) return why;
  *days = DaysFromCivil(y, m, d);
  return nullptr;
}

// "YYYY-MM-DD(T|t| )hh:mm:ss[.fraction][Z|z|(+|-)hh:mm]" as Unix seconds and nanoseconds (digits
// of the fraction beyond 9 are dropped). Without an offset the time is local to `zone`.
const char* ParseDateTimeText(std::string_view s, const absl::TimeZone& zone, bool utc,
                              int64_t* seconds, uint32_t* nanos) {
  int y, mo, d, h, mi, sec;
  if (s.size() < 19) return kNotDateTime;
  if (const char* why = ParseDateParts(s, &y, &mo, &d); why == kNotDate) {
    return kNotDateTime;
  } else if (why != nullptr) {
    return why;
  }
  if ((s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' || s[16] != ':' ||
      !Digits(s, 11, 2, &h) || !Digits(s, 14, 2, &mi) || !Digits(s, 17, 2, &sec)) {
    return kNotDateTime;
  }
  // Second 60 is a leap second (RFC 3339); Unix time counts it as the next second.
  if (h > 23 || mi > 59 || sec > 60) return "not a valid time of day";
  size_t i = 19;
  uint32_t frac = 0;
  if (i < s.size() && s[i] == '.') {
    const size_t begin = ++i;
    for (; i < s.size() && IsDigit(s[i]); ++i) {
      if (i - begin < 9) frac = frac * 10 + static_cast<uint32_t>(s[i] - '0');
    }
    if (i == begin) return kNotDateTime;
    for (size_t k = i - begin; k < 9; ++k) frac *= 10;
  }
  bool has_offset = false;
  int offset = 0;
  if (i < s.size()) {
    if (s[i] == 'Z' || s[i] == 'z') {
      has_offset = true;
      ++i;
    } else if (s[i] == '+' || s[i] == '-') {
      int oh, om;
      if (s.size() - i != 6 || s[i + 3] != ':' || !Digits(s, i + 1, 2, &oh) ||
          !Digits(s, i + 4, 2, &om)) {
        return kNotDateTime;
      }
      if (oh > 23 || om > 59) return "not a valid UTC offset";
      has_offset = true;
      offset = (s[i] == '-' ? -1 : 1) * (oh * 3600 + om * 60);
      i += 6;
    }
  }
  if (i != s.size()) return kNotDateTime;
  if (has_offset || utc) {
    *seconds = DaysFromCivil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset;
  } else {
    *seconds = absl::ToUnixSeconds(absl::FromCivil(absl::CivilSecond(y, mo, d, h, mi, sec), zone));
  }
  *nanos = frac;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Other text forms.

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (any case) as 16 bytes in RFC 4122 order.
bool ParseUuidText(std::string_view s, unsigned char* out) {
  if (s.size() != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-') return false;
  size_t byte = 0;
  for (size_t i = 0; i < 36;) {
    if (s[i] == '-') {
      ++i;
      continue;
    }
    const int hi = HexDigit(s[i]), lo = HexDigit(s[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[byte++] = static_cast<unsigned char>(hi << 4 | lo);
    i += 2;
  }
  return true;
}

// inet_pton needs a NUL-terminated string; text with a NUL byte inside is rejected.
bool InetPton(int family, std::string_view s, void* out) {
  char buf[64];
  if (s.empty() || s.size() >= sizeof(buf) || std::memchr(s.data(), '\0', s.size()) != nullptr) {
    return false;
  }
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = '\0';
  return ::inet_pton(family, buf, out) == 1;
}

// Dotted-quad text as the address number (1.2.3.4 = 0x01020304).
bool ParseIpv4Text(std::string_view s, uint32_t* out) {
  unsigned char bytes[4];
  if (!InetPton(AF_INET, s, bytes)) return false;
  *out = uint32_t{bytes[0]} << 24 | uint32_t{bytes[1]} << 16 | uint32_t{bytes[2]} << 8 | bytes[3];
  return true;
}

bool ParseIpv6Text(std::string_view s, unsigned char* out) {
  if (InetPton(AF_INET6, s, out)) return true;
  unsigned char v4[4];
  if (!InetPton(AF_INET, s, v4)) return false;
  std::memset(out, 0, 10);
  out[10] = out[11] = 0xff;
  std::memcpy(out + 12, v4, 4);
  return true;
}

bool ToBFloat16(double d, uint16_t* out) {
  float f;
  if (!ToFloat32(d, &f)) return false;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  // ClickHouse truncates: the Float32's upper 16 bits. A NaN whose payload is only in the
  // dropped bits keeps a payload bit so that it stays a NaN.
  uint16_t upper = static_cast<uint16_t>(bits >> 16);
  if (std::isnan(f)) upper = static_cast<uint16_t>(upper | 0x40);
  *out = upper;
  return true;
}

const char* ParseTimeText(std::string_view s, int scale, int64_t* ticks) {
  static constexpr char kNotTime[] = "not a time '[-]hh:mm:ss[.fff]' or seconds";
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  // Up to three colon-separated fields: hours, minutes, seconds (the last may have a fraction).
  int64_t fields[3] = {0, 0, 0};
  size_t count = 0;
  size_t i = 0;
  uint64_t fraction = 0;
  int fraction_digits = 0;
  while (true) {
    const size_t begin = i;
    int64_t v = 0;
    while (i < s.size() && IsDigit(s[i])) {
      if (v > 100000000) return "time out of range";
      v = v * 10 + (s[i] - '0');
      ++i;
    }
    if (i == begin || count == 3) return kNotTime;
    fields[count++] = v;
    if (i < s.size() && s[i] == ':') {
      ++i;
      continue;
    }
    break;
  }
  if (i < s.size() && s[i] == '.') {
    const size_t begin = ++i;
    for (; i < s.size() && IsDigit(s[i]); ++i) {
      if (fraction_digits < scale) {
        fraction = fraction * 10 + static_cast<uint64_t>(s[i] - '0');
        ++fraction_digits;
      }
    }
    if (i == begin) return kNotTime;
  }
  if (i != s.size()) return kNotTime;
  int64_t seconds = 0;
  if (count == 1) {
    seconds = fields[0];
  } else {
    // hh:mm:ss or mm:ss; minutes and seconds are two-digit clock fields.
    const int64_t h = count == 3 ? fields[0] : 0;
    const int64_t m = fields[count - 2];
    const int64_t sec = fields[count - 1];
    if (m > 59 || sec > 59) return "not a valid time (minutes and seconds are 0..59)";
    seconds = h * 3600 + m * 60 + sec;
  }
  if (seconds > kTimeMaxSeconds) return "time outside -999:59:59 .. 999:59:59";
  for (int k = fraction_digits; k < scale; ++k) fraction *= 10;
  const int64_t v = seconds * Pow10(scale) + static_cast<int64_t>(fraction);
  *ticks = negative ? -v : v;
  return nullptr;
}

}  // namespace chgate::text
