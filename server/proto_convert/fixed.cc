// chgate.v1.Column into fixed-width columns: `data` as little-endian bytes (UUID reordered), or
// the convenience fields (int64s, uint64s, float64s, strings), range-checked.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/proto_convert/column_node.h"
#include "text/status_macros.h"
#include "text/type_facts.h"
#include "text/value_parse.h"
#include "text/value_text.h"

namespace chgate::proto_convert::internal {
namespace {

enum class FixedForm { kNone, kData, kInt64s, kUInt64s, kFloat64s, kStrings };

const char* FixedFormName(FixedForm form) {
  switch (form) {
    case FixedForm::kNone:
      return "no values";
    case FixedForm::kData:
      return "data";
    case FixedForm::kInt64s:
      return "int64s";
    case FixedForm::kUInt64s:
      return "uint64s";
    case FixedForm::kFloat64s:
      return "float64s";
    case FixedForm::kStrings:
      return "strings";
  }
  return "?";
}

// 10^precision (precision <= 76, so it fits 4 limbs: 10^76 < 2^253), made once per column, and
// whether a Decimal's stored integer has at most `precision` digits.
class DecimalBound {
 public:
  explicit DecimalBound(int precision) {
    for (int d = 0; d < precision; ++d) {
      text::Uint128 carry = 0;
      for (uint64_t& limb : bound_) {
        const text::Uint128 product = static_cast<text::Uint128>(limb) * 10 + carry;
        limb = static_cast<uint64_t>(product);
        carry = product >> 64;
      }
    }
  }

  // The little-endian two's-complement integer of `width` bytes (4, 8, 16 or 32) at `p`: is its
  // magnitude below 10^precision?
  bool Holds(const char* p, size_t width) const {
    uint64_t magnitude[kLimbs] = {};
    const size_t limbs = std::max<size_t>(1, width / 8);
    if (width == 4) {
      int32_t v;
      std::memcpy(&v, p, 4);
      magnitude[0] = static_cast<uint64_t>(static_cast<int64_t>(v));
    } else {
      std::memcpy(magnitude, p, limbs * 8);
    }
    if (static_cast<int64_t>(magnitude[limbs - 1]) < 0) {  // negative: two's complement back
      uint64_t carry = 1;
      for (size_t i = 0; i < limbs; ++i) {
        magnitude[i] = ~magnitude[i] + carry;
        carry = carry != 0 && magnitude[i] == 0 ? 1 : 0;
      }
    }
    for (size_t i = kLimbs; i-- > 0;) {
      if (magnitude[i] != bound_[i]) return magnitude[i] < bound_[i];
    }
    return false;  // equal to 10^precision
  }

 private:
  static constexpr size_t kLimbs = 4;
  uint64_t bound_[kLimbs] = {1, 0, 0, 0};
};

// Which convenience form a fixed-width kind accepts (kNone: only `data`): the type facts say.
FixedForm ConvenienceForm(clickhouse::FixedKind kind) {
  switch (text::ConvenienceFieldOf(kind)) {
    case text::ConvenienceField::kNone:
      return FixedForm::kNone;
    case text::ConvenienceField::kInt64s:
      return FixedForm::kInt64s;
    case text::ConvenienceField::kUInt64s:
      return FixedForm::kUInt64s;
    case text::ConvenienceField::kFloat64s:
      return FixedForm::kFloat64s;
    case text::ConvenienceField::kStrings:
      return FixedForm::kStrings;
  }
  return FixedForm::kNone;
}

class FixedNode final : public Node {
 public:
  FixedNode(const v1::Column& src, clickhouse::ColumnFixed* dst, FixedForm form)
      : src_(src), dst_(*dst), form_(form) {}

  absl::Status Append(uint64_t begin, uint64_t end) override {
    if (begin == end) return absl::OkStatus();
    switch (form_) {
      case FixedForm::kNone:
        for (uint64_t i = begin; i < end; ++i) dst_.AppendDefault();
        return absl::OkStatus();
      case FixedForm::kData:
        return AppendData(begin, end);
      case FixedForm::kInt64s:
        return AppendInt64s(begin, end);
      case FixedForm::kUInt64s:
        return AppendUInt64s(begin, end);
      case FixedForm::kFloat64s:
        return AppendFloat64s(begin, end);
      case FixedForm::kStrings:
        return AppendStrings(begin, end);
    }
    return absl::OkStatus();
  }

 private:
  using Kind = clickhouse::FixedKind;

  absl::Status AppendData(uint64_t begin, uint64_t end) {
    const size_t width = dst_.width();
    const char* p = src_.data().data() + begin * width;
    const size_t n = static_cast<size_t>(end - begin);
    switch (dst_.fixed_kind()) {
      case Kind::kUuid: {
        // RFC 4122 byte order -> two little-endian UInt64 halves (high half first).
        text::SwapUuidHalves(p, n, dst_.values().Prepare(n * 16));
        dst_.values().Commit(n * 16);
        return absl::OkStatus();
      }
      case Kind::kBool:
        for (size_t r = 0; r < n; ++r) {
          const auto v = static_cast<unsigned char>(p[r]);
          if (v > 1) return BadValue(begin + r, absl::StrCat(v), "data", "Bool must be 0 or 1");
        }
        break;
      case Kind::kEnum:
        for (size_t r = 0; r < n; ++r) {
          int64_t v;
          if (width == 1) {
            v = static_cast<int8_t>(p[r]);
          } else {
            int16_t v16;
            std::memcpy(&v16, p + r * 2, 2);
            v = v16;
          }
          if (dst_.EnumName(v) == nullptr) {
            return BadValue(begin + r, absl::StrCat(v), "data", "no such enum value");
          }
        }
        break;
      case Kind::kDecimal: {
        // The rows path refuses more digits than the precision; ClickHouse would store them and
        // print a number the type cannot hold.
        const DecimalBound bound(dst_.params().precision);
        for (size_t r = 0; r < n; ++r) {
          if (!bound.Holds(p + r * width, width)) {
            std::string text;
            text::AppendDecimal(p + r * width, width, dst_.params().scale, &text);
            return BadValue(begin + r, text, "data", "more digits than the Decimal's precision");
          }
        }
        break;
      }
      case Kind::kDate32:
      case Kind::kDateTime64:
      case Kind::kTime:
      case Kind::kTime64: {
        // Signed values with a calendar or clock range narrower than their width.
        const text::StoredRange range = text::StoredRangeOf(dst_.params());
        for (size_t r = 0; r < n; ++r) {
          const int64_t v = text::LoadSigned(p + r * width, width);
          if (v < range.min || v > static_cast<int64_t>(range.max)) {
            return BadValue(begin + r, absl::StrCat(v), "data", range.what);
          }
        }
        break;
      }
      default:
        break;
    }
    dst_.values().Append(p, n * width);
    return absl::OkStatus();
  }

  void AppendInteger(int64_t v) {
    const size_t width = dst_.width();
    char buf[32];
    std::memcpy(buf, &v, std::min<size_t>(width, 8));
    if (width > 8) std::memset(buf + 8, v < 0 ? 0xff : 0, width - 8);
    dst_.AppendRaw(buf);
  }

  void AppendUnsigned(uint64_t v) {
    const size_t width = dst_.width();
    char buf[32];
    std::memcpy(buf, &v, std::min<size_t>(width, 8));
    if (width > 8) std::memset(buf + 8, 0, width - 8);
    dst_.AppendRaw(buf);
  }

  absl::Status AppendInt64s(uint64_t begin, uint64_t end) {
    const size_t width = dst_.width();
    const int64_t* values = src_.int64s().data();
    // The stored range (the type facts); 128- and 256-bit values from int64 always fit.
    const text::StoredRange range = text::StoredRangeOf(dst_.params());
    const int64_t lo = range.min;
    const int64_t hi = static_cast<int64_t>(
        std::min<uint64_t>(range.max, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
    const std::string_view what = range.what;
    const bool is_enum = dst_.fixed_kind() == Kind::kEnum;
    for (uint64_t i = begin; i < end; ++i) {
      const int64_t v = values[i];
      if (v < lo || v > hi) return BadValue(i, absl::StrCat(v), "int64", what);
      if (is_enum && dst_.EnumName(v) == nullptr) {
        return BadValue(i, absl::StrCat(v), "int64", "no such enum value");
      }
    }
    if (width == 8) {
      dst_.values().Append(values + begin, static_cast<size_t>(end - begin) * 8);
    } else {
      for (uint64_t i = begin; i < end; ++i) AppendInteger(values[i]);
    }
    return absl::OkStatus();
  }

  absl::Status AppendUInt64s(uint64_t begin, uint64_t end) {
    const size_t width = dst_.width();
    const uint64_t* values = src_.uint64s().data();
    const text::StoredRange range = text::StoredRangeOf(dst_.params());
    const uint64_t hi = range.max;
    for (uint64_t i = begin; i < end; ++i) {
      if (values[i] > hi) {
        return BadValue(i, absl::StrCat(values[i]), "uint64", range.what);
      }
    }
    if (width == 8) {
      dst_.values().Append(values + begin, static_cast<size_t>(end - begin) * 8);
    } else {
      for (uint64_t i = begin; i < end; ++i) AppendUnsigned(values[i]);
    }
    return absl::OkStatus();
  }

  absl::Status AppendFloat64s(uint64_t begin, uint64_t end) {
    const double* values = src_.float64s().data();
    if (dst_.fixed_kind() == Kind::kFloat && dst_.width() == 8) {
      dst_.values().Append(values + begin, static_cast<size_t>(end - begin) * 8);
      return absl::OkStatus();
    }
    // Float32 and BFloat16: the rows path's rule (text/value_parse.h), so both paths accept the
    // same doubles.
    const bool bf16 = dst_.fixed_kind() == Kind::kBFloat16;
    for (uint64_t i = begin; i < end; ++i) {
      const double v = values[i];
      if (bf16) {
        uint16_t b;
        if (!text::ToBFloat16(v, &b)) {
          return BadValue(i, absl::StrCat(v), "double", "out of BFloat16's range");
        }
        dst_.Append(b);
        continue;
      }
      float f;
      if (!text::ToFloat32(v, &f))
        return BadValue(i, absl::StrCat(v), "double", "out of Float32's range");
      dst_.Append(f);
    }
    return absl::OkStatus();
  }

  absl::Status AppendStrings(uint64_t begin, uint64_t end) {
    const size_t width = dst_.width();
    for (uint64_t i = begin; i < end; ++i) {
      const std::string& s = src_.strings(static_cast<int>(i));
      if (s.size() > width) {
        return BadValue(i, s, "bytes", absl::StrCat("longer than ", width, " bytes"));
      }
      char* p = dst_.values().Prepare(width);
      std::memcpy(p, s.data(), s.size());
      std::memset(p + s.size(), 0, width - s.size());
      dst_.values().Commit(width);
    }
    return absl::OkStatus();
  }

  const v1::Column& src_;
  clickhouse::ColumnFixed& dst_;
  const FixedForm form_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Node>> BuildFixed(const v1::Column& src, uint64_t rows,
                                                 clickhouse::ColumnFixed* dst,
                                                 const Position& pos) {
  const FixedForm convenience = ConvenienceForm(dst->fixed_kind());
  if (dst->fixed_kind() == clickhouse::FixedKind::kNothing) {
    CHGATE_RETURN_IF_ERROR(CheckFields(src, pos, 0));
    if (rows > 0) return LayoutError(pos, "Nothing has no values (only NULLs in Nullable)");
    return std::make_unique<FixedNode>(src, dst, FixedForm::kNone);
  }
  unsigned allowed = kData;
  switch (convenience) {
    case FixedForm::kInt64s:
      allowed |= kInt64s;
      break;
    case FixedForm::kUInt64s:
      allowed |= kUInt64s;
      break;
    case FixedForm::kFloat64s:
      allowed |= kFloat64s;
      break;
    case FixedForm::kStrings:
      allowed |= kStrings;
      break;
    default:
      break;
  }
  CHGATE_RETURN_IF_ERROR(CheckFields(src, pos, allowed));
  const unsigned present = PresentFields(src) & allowed;
  if (std::popcount(present) > 1) {
    return LayoutError(pos,
                       "sets more than one value form; use exactly one of `data` or the "
                       "typed field");
  }
  FixedForm form = FixedForm::kNone;
  uint64_t count = 0;
  if (present == kData) {
    form = FixedForm::kData;
    CHGATE_RETURN_IF_ERROR(AtPosition(pos, columnar::CheckFixedData(src, rows, dst->width())));
    count = rows;
  } else if (present != 0) {
    form = convenience;
    count = static_cast<uint64_t>(form == FixedForm::kInt64s     ? src.int64s_size()
                                  : form == FixedForm::kUInt64s  ? src.uint64s_size()
                                  : form == FixedForm::kFloat64s ? src.float64s_size()
                                                                 : src.strings_size());
  }
  if (count != rows) {
    return LayoutError(pos, absl::StrCat("has ", count, " values in ", FixedFormName(form),
                                         ", expected ", rows, " (one per row)"));
  }
  return std::make_unique<FixedNode>(src, dst, form);
}

}  // namespace chgate::proto_convert::internal
