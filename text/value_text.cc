#include "text/value_text.h"

#include <arpa/inet.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "text/escape.h"
#include "text/json.h"

namespace chgate::text {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the wire loads and stores assume a little-endian host");

template <typename F>
void AppendFloatImpl(F v, std::string* out) {
  if (std::isnan(v)) {
    out->append(std::signbit(v) ? "-nan" : "nan");
    return;
  }
  if (std::isinf(v)) {
    out->append(v < 0 ? "-inf" : "inf");
    return;
  }
  if (v == 0) {
    out->append(std::signbit(v) ? "-0" : "0");
    return;
  }
  // Shortest round-trip digits in scientific form, re-laid out like double-conversion's
  // ToShortest (fixed notation for exponents in [-6, 21), otherwise `d.ddde-7`).
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  const bool negative = sci.front() == '-';
  if (negative) sci.remove_prefix(1);
  const size_t e_pos = sci.find('e');
  char digits[32];
  size_t n = 0;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits[n++] = c;
  }
  int exponent = 0;
  std::from_chars(sci.data() + e_pos + (sci[e_pos + 1] == '+' ? 2 : 1), sci.data() + sci.size(),
                  exponent);
  while (n > 1 && digits[n - 1] == '0') --n;
  const std::string_view d(digits, n);
  if (negative) out->push_back('-');
  const int count = static_cast<int>(n);
  if (exponent >= -6 && exponent < 21) {
    if (exponent < 0) {
      out->append("0.");
      out->append(static_cast<size_t>(-exponent - 1), '0');
      out->append(d);
    } else if (exponent + 1 >= count) {
      out->append(d);
      out->append(static_cast<size_t>(exponent + 1 - count), '0');
    } else {
      out->append(d.substr(0, static_cast<size_t>(exponent + 1)));
      out->push_back('.');
      out->append(d.substr(static_cast<size_t>(exponent + 1)));
    }
    return;
  }
  out->push_back(d[0]);
  if (n > 1) {
    out->push_back('.');
    out->append(d.substr(1));
  }
  absl::StrAppend(out, "e", exponent);
}

void Quote(bool on, std::string* out) {
  if (on) out->push_back('\'');
}

}  // namespace

void AppendFloat(double v, std::string* out) { AppendFloatImpl(v, out); }
void AppendFloat(float v, std::string* out) { AppendFloatImpl(v, out); }

float BFloat16ToFloat(const char* p) {
  const uint32_t bits = static_cast<uint32_t>(LoadUnsigned(p, 2)) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

int64_t LoadSigned(const char* p, size_t width) {
  switch (width) {
    case 1: {
      int8_t v;
      std::memcpy(&v, p, 1);
      return v;
    }
    case 2: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case 4: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

uint64_t LoadUnsigned(const char* p, size_t width) {
  uint64_t v = 0;
  std::memcpy(&v, p, std::min<size_t>(width, 8));
  return v;
}

void AppendWideInteger(const char* p, size_t width, bool is_signed, std::string* out) {
  if (width <= 8 && (width & (width - 1)) == 0) {
    if (is_signed) {
      absl::StrAppend(out, LoadSigned(p, width));
    } else {
      absl::StrAppend(out, LoadUnsigned(p, width));
    }
    return;
  }
  // Little-endian 32-bit limbs; repeated division by 10^9.
  std::vector<uint32_t> limbs((width + 3) / 4, 0);
  std::memcpy(limbs.data(), p, width);
  const bool negative = is_signed && (static_cast<uint8_t>(p[width - 1]) & 0x80) != 0;
  if (negative) {
    // Two's complement negate.
    uint64_t carry = 1;
    for (uint32_t& limb : limbs) {
      const uint64_t v = static_cast<uint64_t>(static_cast<uint32_t>(~limb)) + carry;
      limb = static_cast<uint32_t>(v);
      carry = v >> 32;
    }
  }
  std::vector<uint32_t> chunks;  // base 10^9, least significant first
  while (std::any_of(limbs.begin(), limbs.end(), [](uint32_t l) { return l != 0; })) {
    uint64_t rem = 0;
    for (size_t i = limbs.size(); i-- > 0;) {
      const uint64_t cur = (rem << 32) | limbs[i];
      limbs[i] = static_cast<uint32_t>(cur / 1000000000u);
      rem = cur % 1000000000u;
    }
    chunks.push_back(static_cast<uint32_t>(rem));
  }
  if (negative) out->push_back('-');
  if (chunks.empty()) {
    out->push_back('0');
    return;
  }
  absl::StrAppend(out, chunks.back());
  for (size_t i = chunks.size() - 1; i-- > 0;) absl::StrAppendFormat(out, "%09u", chunks[i]);
}

void AppendDecimal(const char* p, size_t width, int scale, std::string* out) {
  std::string digits;
  AppendWideInteger(p, width, true, &digits);
  if (!digits.empty() && digits[0] == '-') {
    out->push_back('-');
    digits.erase(0, 1);
  }
  if (scale <= 0) {
    out->append(digits);
    return;
  }
  const size_t s = static_cast<size_t>(scale);
  if (digits.size() <= s) digits.insert(0, s + 1 - digits.size(), '0');
  out->append(digits, 0, digits.size() - s);
  out->push_back('.');
  out->append(digits, digits.size() - s);
}

void AppendDate(int64_t days, std::string* out) {
  const absl::CivilDay day = absl::CivilDay(1970, 1, 1) + days;
  absl::StrAppendFormat(out, "%04d-%02d-%02d", day.year(), day.month(), day.day());
}

void AppendDateTime(int64_t seconds, const absl::TimeZone& zone, std::string* out) {
  const absl::CivilSecond cs = absl::ToCivilSecond(absl::FromUnixSeconds(seconds), zone);
  absl::StrAppendFormat(out, "%04d-%02d-%02d %02d:%02d:%02d", cs.year(), cs.month(), cs.day(),
                        cs.hour(), cs.minute(), cs.second());
}

void SplitTicks(int64_t ticks, int scale, int64_t* seconds, int64_t* fraction) {
  const int64_t unit = Pow10(scale);
  *seconds = ticks / unit;
  *fraction = ticks % unit;
  if (*fraction < 0) {
    *fraction += unit;
    --*seconds;
  }
}

void AppendDateTime64(int64_t ticks, int scale, const absl::TimeZone& zone, std::string* out) {
  int64_t seconds = 0, fraction = 0;
  SplitTicks(ticks, scale, &seconds, &fraction);
  AppendDateTime(seconds, zone, out);
  if (scale > 0) absl::StrAppendFormat(out, ".%0*d", scale, fraction);
}

namespace {

void AppendClock(bool negative, uint64_t seconds, std::string* out) {
  constexpr uint64_t kMax = static_cast<uint64_t>(kTimeMaxSeconds);
  if (seconds > kMax) seconds = kMax;
  if (negative && seconds != 0) out->push_back('-');
  absl::StrAppendFormat(out, "%02u:%02u:%02u", seconds / 3600, seconds / 60 % 60, seconds % 60);
}

}  // namespace

void AppendTime(int64_t seconds, std::string* out) {
  const bool negative = seconds < 0;
  AppendClock(negative,
              negative ? 0 - static_cast<uint64_t>(seconds) : static_cast<uint64_t>(seconds), out);
}

void AppendTime64(int64_t ticks, int scale, std::string* out) {
  // The sign applies to the whole value: -1.5 s is `-00:00:01.500`.
  const bool negative = ticks < 0;
  const uint64_t magnitude =
      negative ? 0 - static_cast<uint64_t>(ticks) : static_cast<uint64_t>(ticks);
  const uint64_t unit = static_cast<uint64_t>(Pow10(scale));
  const uint64_t seconds = magnitude / unit;
  uint64_t fraction = magnitude % unit;
  if (seconds > static_cast<uint64_t>(kTimeMaxSeconds)) fraction = unit - 1;
  if (negative && seconds == 0 && fraction != 0) out->push_back('-');
  AppendClock(negative, seconds, out);
  if (scale > 0) absl::StrAppendFormat(out, ".%0*u", scale, fraction);
}

void SwapUuidHalves(const char* in, size_t n, char* out) {
  for (size_t r = 0; r < n; ++r) {
    const char* i = in + r * 16;
    char* o = out + r * 16;
    for (int b = 0; b < 8; ++b) {
      o[b] = i[7 - b];
      o[8 + b] = i[15 - b];
    }
  }
}

void AppendUuid(const unsigned char* rfc, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out->push_back('-');
    out->push_back(kHex[rfc[i] >> 4]);
    out->push_back(kHex[rfc[i] & 0xf]);
  }
}

void AppendIpv4(uint32_t address, std::string* out) {
  absl::StrAppend(out, address >> 24, ".", (address >> 16) & 0xff, ".", (address >> 8) & 0xff, ".",
                  address & 0xff);
}

void AppendIpv6(const unsigned char* address, std::string* out) {
  char text[INET6_ADDRSTRLEN];
  if (::inet_ntop(AF_INET6, address, text, sizeof(text)) != nullptr) out->append(text);
}

bool NeedsEscaping(FixedKind kind) {
  return kind == FixedKind::kFixedString || kind == FixedKind::kEnum;
}

bool QuotedWhenNested(FixedKind kind) {
  switch (kind) {
    case FixedKind::kDate:
    case FixedKind::kDate32:
    case FixedKind::kDateTime:
    case FixedKind::kDateTime64:
    case FixedKind::kTime:
    case FixedKind::kTime64:
    case FixedKind::kUuid:
    case FixedKind::kIpv4:
    case FixedKind::kIpv6:
    case FixedKind::kEnum:
    case FixedKind::kFixedString:
      return true;
    case FixedKind::kUInt:
    case FixedKind::kInt:
    case FixedKind::kFloat:
    case FixedKind::kBFloat16:
    case FixedKind::kBool:
    case FixedKind::kDecimal:
    case FixedKind::kNothing:
      return false;
  }
  return false;
}

void AppendPlainText(const FixedType& type, const char* p, std::string* out) {
  switch (type.kind) {
    case FixedKind::kUInt:
    case FixedKind::kInt:
      AppendWideInteger(p, type.width, type.kind == FixedKind::kInt, out);
      return;
    case FixedKind::kFloat:
      if (type.width == 4) {
        float f;
        std::memcpy(&f, p, 4);
        AppendFloat(f, out);
      } else {
        double d;
        std::memcpy(&d, p, 8);
        AppendFloat(d, out);
      }
      return;
    case FixedKind::kBFloat16:
      AppendFloat(BFloat16ToFloat(p), out);
      return;
    case FixedKind::kBool:
      out->append(p[0] != 0 ? "true" : "false");
      return;
    case FixedKind::kDate:
      AppendDate(static_cast<int64_t>(LoadUnsigned(p, 2)), out);
      return;
    case FixedKind::kDate32:
      AppendDate(LoadSigned(p, 4), out);
      return;
    case FixedKind::kDateTime:
      AppendDateTime(static_cast<int64_t>(LoadUnsigned(p, 4)), type.zone, out);
      return;
    case FixedKind::kDateTime64:
      AppendDateTime64(LoadSigned(p, 8), type.scale, type.zone, out);
      return;
    case FixedKind::kTime:
      AppendTime(LoadSigned(p, 4), out);
      return;
    case FixedKind::kTime64:
      AppendTime64(LoadSigned(p, 8), type.scale, out);
      return;
    case FixedKind::kDecimal:
      AppendDecimal(p, type.width, type.scale, out);
      return;
    case FixedKind::kUuid: {
      char rfc[16];
      SwapUuidHalves(p, 1, rfc);
      AppendUuid(reinterpret_cast<const unsigned char*>(rfc), out);
      return;
    }
    case FixedKind::kIpv4:
      AppendIpv4(static_cast<uint32_t>(LoadUnsigned(p, 4)), out);
      return;
    case FixedKind::kIpv6:
      AppendIpv6(reinterpret_cast<const unsigned char*>(p), out);
      return;
    case FixedKind::kEnum: {
      const int64_t v = LoadSigned(p, type.width);
      if (const std::string* name = type.EnumName(v)) {
        out->append(*name);
      } else {
        absl::StrAppend(out, v);
      }
      return;
    }
    case FixedKind::kFixedString:
      out->append(p, type.width);
      return;
    case FixedKind::kNothing:
      out->append("\\N");
      return;
  }
}

void AppendTsvText(const FixedType& type, const char* wire, bool nested, std::string* out) {
  if (type.kind == FixedKind::kNothing) {
    out->append(nested ? "NULL" : "\\N");
    return;
  }
  if (type.kind == FixedKind::kEnum && type.EnumName(LoadSigned(wire, type.width)) == nullptr) {
    AppendPlainText(type, wire, out);  // a value outside the type: its number, unquoted
    return;
  }
  if (NeedsEscaping(type.kind)) {
    std::string plain;
    AppendPlainText(type, wire, &plain);
    if (nested) {
      AppendQuoted(plain, out);
    } else {
      AppendEscaped(plain, out);
    }
    return;
  }
  const bool quoted = nested && QuotedWhenNested(type.kind);
  Quote(quoted, out);
  AppendPlainText(type, wire, out);
  Quote(quoted, out);
}

void AppendJsonText(const FixedType& type, const char* wire, std::string* out) {
  switch (type.kind) {
    case FixedKind::kUInt:
    case FixedKind::kInt:
    case FixedKind::kDecimal:
    case FixedKind::kBool:
      AppendPlainText(type, wire, out);
      return;
    case FixedKind::kFloat:
    case FixedKind::kBFloat16: {
      std::string text;
      AppendPlainText(type, wire, &text);
      const bool finite = !text.empty() && text.find_first_of("ni") == std::string::npos;
      out->append(finite ? text : "null");
      return;
    }
    case FixedKind::kNothing:
      out->append("null");
      return;
    case FixedKind::kFixedString:
      AppendClickHouseJsonString(std::string_view(wire, type.width), out);
      return;
    case FixedKind::kDate:
    case FixedKind::kDate32:
    case FixedKind::kDateTime:
    case FixedKind::kDateTime64:
    case FixedKind::kTime:
    case FixedKind::kTime64:
    case FixedKind::kUuid:
    case FixedKind::kIpv4:
    case FixedKind::kIpv6:
    case FixedKind::kEnum: {
      std::string text;
      AppendPlainText(type, wire, &text);
      AppendClickHouseJsonString(text, out);
      return;
    }
  }
}

}  // namespace chgate::text
