#include "server/clickhouse/columns/fixed.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace chgate::clickhouse {
namespace {

constexpr size_t kBulkStep = size_t{1} << 20;

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
  bool negative = sci.front() == '-';
  if (negative) sci.remove_prefix(1);
  size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = 0;
  std::from_chars(sci.data() + e_pos + (sci[e_pos + 1] == '+' ? 2 : 1), sci.data() + sci.size(),
                  exponent);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (negative) out->push_back('-');
  const int n = static_cast<int>(digits.size());
  if (exponent >= -6 && exponent < 21) {
    if (exponent < 0) {
      out->append("0.");
      out->append(static_cast<size_t>(-exponent - 1), '0');
      out->append(digits);
    } else if (exponent + 1 >= n) {
      out->append(digits);
      out->append(static_cast<size_t>(exponent + 1 - n), '0');
    } else {
      out->append(digits, 0, static_cast<size_t>(exponent + 1));
      out->push_back('.');
      out->append(digits, static_cast<size_t>(exponent + 1));
    }
    return;
  }
  out->push_back(digits[0]);
  if (n > 1) {
    out->push_back('.');
    out->append(digits, 1);
  }
  absl::StrAppend(out, "e", exponent);
}

void AppendDate(int64_t days, std::string* out) {
  absl::CivilDay day = absl::CivilDay(1970, 1, 1) + days;
  absl::StrAppendFormat(out, "%04d-%02d-%02d", day.year(), day.month(), day.day());
}

void AppendDateTime(int64_t seconds, const absl::TimeZone& tz, std::string* out) {
  absl::CivilSecond cs = absl::ToCivilSecond(absl::FromUnixSeconds(seconds), tz);
  absl::StrAppendFormat(out, "%04d-%02d-%02d %02d:%02d:%02d", cs.year(), cs.month(), cs.day(),
                        cs.hour(), cs.minute(), cs.second());
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

}  // namespace

absl::Status ReadBulk(ReadBuffer& in, size_t bytes, ByteBuffer* out) {
  while (bytes > 0) {
    size_t step = std::min(bytes, std::max(kBulkStep, in.available()));
    char* dst = out->Prepare(step);
    RETURN_IF_ERROR(in.Read(dst, step));
    out->Commit(step);
    bytes -= step;
  }
  return absl::OkStatus();
}

void AppendFloat(double v, std::string* out) { AppendFloatImpl(v, out); }
void AppendFloat(float v, std::string* out) { AppendFloatImpl(v, out); }

void AppendWideInteger(const char* p, size_t width, bool is_signed, std::string* out) {
  // Little-endian 32-bit limbs; repeated division by 10^9.
  std::vector<uint32_t> limbs((width + 3) / 4, 0);
  std::memcpy(limbs.data(), p, width);
  bool negative = is_signed && (static_cast<uint8_t>(p[width - 1]) & 0x80) != 0;
  if (negative) {
    // Two's complement negate.
    uint64_t carry = 1;
    for (uint32_t& limb : limbs) {
      uint64_t v = static_cast<uint64_t>(static_cast<uint32_t>(~limb)) + carry;
      limb = static_cast<uint32_t>(v);
      carry = v >> 32;
    }
  }
  std::vector<uint32_t> chunks;  // base 10^9, least significant first
  while (std::any_of(limbs.begin(), limbs.end(), [](uint32_t l) { return l != 0; })) {
    uint64_t rem = 0;
    for (size_t i = limbs.size(); i-- > 0;) {
      uint64_t cur = (rem << 32) | limbs[i];
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
  bool negative = !digits.empty() && digits[0] == '-';
  if (negative) {
    out->push_back('-');
    digits.erase(0, 1);
  }
  if (scale <= 0) {
    out->append(digits);
    return;
  }
  size_t s = static_cast<size_t>(scale);
  if (digits.size() <= s) digits.insert(0, s + 1 - digits.size(), '0');
  out->append(digits, 0, digits.size() - s);
  out->push_back('.');
  out->append(digits, digits.size() - s);
}

ColumnFixed::ColumnFixed(std::string type_name, TypeAst type, FixedKind kind, size_t width,
                         FixedParams params)
    : Column(std::move(type_name), std::move(type)),
      kind_(kind),
      width_(width),
      params_(std::move(params)) {
  CHGATE_CHECK(width_ > 0);
}

const std::string* ColumnFixed::EnumName(int64_t value) const {
  for (const auto& [name, v] : params_.enum_values) {
    if (v == value) return &name;
  }
  return nullptr;
}

bool ColumnFixed::EnumValue(std::string_view name, int64_t* value) const {
  for (const auto& [n, v] : params_.enum_values) {
    if (n == name) {
      *value = v;
      return true;
    }
  }
  return false;
}

void ColumnFixed::AppendDefault() {
  char* p = values_.Prepare(width_);
  std::memset(p, 0, width_);
  if (kind_ == FixedKind::kEnum && !params_.enum_values.empty()) {
    // ClickHouse's default for an Enum is its first value.
    int64_t v = params_.enum_values.front().second;
    if (width_ == 1) {
      int8_t b = static_cast<int8_t>(v);
      std::memcpy(p, &b, 1);
    } else {
      int16_t b = static_cast<int16_t>(v);
      std::memcpy(p, &b, 2);
    }
  } else if (kind_ == FixedKind::kNothing) {
    p[0] = '0';
  }
  values_.Commit(width_);
}

ColumnPtr ColumnFixed::CloneEmpty() const {
  return std::make_shared<ColumnFixed>(type_name(), type(), kind_, width_, params_);
}

absl::Status ColumnFixed::SkipBody(ReadBuffer& in, size_t rows) {
  if (rows > std::numeric_limits<size_t>::max() / width_) {
    return absl::DataLossError(absl::StrCat("row count ", rows, " overflows"));
  }
  Clear();
  return in.Skip(rows * width_);
}

absl::Status ColumnFixed::LoadBody(ReadBuffer& in, size_t rows) {
  if (rows > std::numeric_limits<size_t>::max() / width_) {
    return absl::DataLossError(absl::StrCat("row count ", rows, " overflows"));
  }
  const size_t bytes = rows * width_;
  if (values_.empty() && in.WindowIsStable() && in.available() >= bytes) {
    // Zero copy: the values are used where they were decompressed.
    values_.SetView(in.pos(), bytes);
    in.Advance(bytes);
    return absl::OkStatus();
  }
  return ReadBulk(in, bytes, &values_);
}

void ColumnFixed::FormatValue(size_t row, bool nested, std::string* out) const {
  const char* p = RawAt(row);
  switch (kind_) {
    case FixedKind::kUInt:
      if (width_ <= 8) {
        absl::StrAppend(out, LoadUnsigned(p, width_));
      } else {
        AppendWideInteger(p, width_, false, out);
      }
      return;
    case FixedKind::kInt:
      if (width_ <= 8) {
        absl::StrAppend(out, LoadSigned(p, width_));
      } else {
        AppendWideInteger(p, width_, true, out);
      }
      return;
    case FixedKind::kFloat:
      if (width_ == 4) {
        float f;
        std::memcpy(&f, p, 4);
        AppendFloat(f, out);
      } else {
        double d;
        std::memcpy(&d, p, 8);
        AppendFloat(d, out);
      }
      return;
    case FixedKind::kBool:
      out->append(p[0] != 0 ? "true" : "false");
      return;
    case FixedKind::kDate:
    case FixedKind::kDate32: {
      if (nested) out->push_back('\'');
      AppendDate(
          kind_ == FixedKind::kDate ? static_cast<int64_t>(LoadUnsigned(p, 2)) : LoadSigned(p, 4),
          out);
      if (nested) out->push_back('\'');
      return;
    }
    case FixedKind::kDateTime:
      if (nested) out->push_back('\'');
      AppendDateTime(static_cast<int64_t>(LoadUnsigned(p, 4)), params_.time_zone, out);
      if (nested) out->push_back('\'');
      return;
    case FixedKind::kDateTime64: {
      if (nested) out->push_back('\'');
      int64_t ticks = LoadSigned(p, 8);
      int64_t scale = 1;
      for (int i = 0; i < params_.scale; ++i) scale *= 10;
      int64_t seconds = ticks / scale;
      int64_t frac = ticks % scale;
      if (frac < 0) {
        frac += scale;
        --seconds;
      }
      AppendDateTime(seconds, params_.time_zone, out);
      if (params_.scale > 0) absl::StrAppendFormat(out, ".%0*d", params_.scale, frac);
      if (nested) out->push_back('\'');
      return;
    }
    case FixedKind::kDecimal:
      AppendDecimal(p, width_, params_.scale, out);
      return;
    case FixedKind::kUuid: {
      if (nested) out->push_back('\'');
      uint64_t high, low;
      std::memcpy(&high, p, 8);
      std::memcpy(&low, p + 8, 8);
      absl::StrAppendFormat(out, "%08x-%04x-%04x-%04x-%012x", high >> 32, (high >> 16) & 0xffff,
                            high & 0xffff, low >> 48, low & 0xffffffffffffULL);
      if (nested) out->push_back('\'');
      return;
    }
    case FixedKind::kIpv4: {
      if (nested) out->push_back('\'');
      uint32_t v = static_cast<uint32_t>(LoadUnsigned(p, 4));
      absl::StrAppend(out, v >> 24, ".", (v >> 16) & 0xff, ".", (v >> 8) & 0xff, ".", v & 0xff);
      if (nested) out->push_back('\'');
      return;
    }
    case FixedKind::kIpv6: {
      if (nested) out->push_back('\'');
      char text[INET6_ADDRSTRLEN];
      ::inet_ntop(AF_INET6, p, text, sizeof(text));
      out->append(text);
      if (nested) out->push_back('\'');
      return;
    }
    case FixedKind::kEnum: {
      int64_t v = LoadSigned(p, width_);
      const std::string* name = EnumName(v);
      if (name == nullptr) {
        absl::StrAppend(out, v);
      } else if (nested) {
        AppendQuoted(*name, out);
      } else {
        AppendTsvEscaped(*name, out);
      }
      return;
    }
    case FixedKind::kFixedString:
      if (nested) {
        AppendQuoted(std::string_view(p, width_), out);
      } else {
        AppendTsvEscaped(std::string_view(p, width_), out);
      }
      return;
    case FixedKind::kNothing:
      out->append(nested ? "NULL" : "\\N");
      return;
  }
}

}  // namespace chgate::clickhouse
