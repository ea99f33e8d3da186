#include "server/ingest/convert.h"

#include <arpa/inet.h>

#include <array>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>

#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "server/clickhouse/columns/aggregate_state.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/dynamic.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/json.h"
#include "server/clickhouse/columns/low_cardinality.h"
#include "server/clickhouse/columns/nullable.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/columns/tuple.h"
#include "server/clickhouse/columns/variant.h"
#include "server/ingest/converter.h"
#include "text/status_macros.h"
#include "text/type_facts.h"
#include "text/value_parse.h"
#include "text/value_text.h"

namespace chgate::ingest {
namespace convert_internal {

using clickhouse::Column;
using clickhouse::ColumnArray;
using clickhouse::ColumnFixed;
using clickhouse::ColumnLowCardinality;
using clickhouse::ColumnNullable;
using clickhouse::ColumnString;

// Value text and 256-bit magnitudes (text/value_parse.h).
using text::FloorDiv;
using text::Int128;
using text::IsZero;
using text::kDate32Max;
using text::kDate32Min;
using text::kDateMax;
using text::kDateTime64MaxSeconds;
using text::kDateTime64MinSeconds;
using text::kDateTimeMax;
using text::kPow10;
using text::Less;
using text::MulPow10;
using text::Negated;
using text::Parse;
using text::ParseDateText;
using text::ParseDateTimeText;
using text::ParseDecimalText;
using text::ParseFloatText;
using text::ParseIntegerText;
using text::ParseIpv4Text;
using text::ParseIpv6Text;
using text::ParseTimeText;
using text::ParseUuidText;
using text::ShortestText;
using text::ToBFloat16;
using text::ToFloat32;
using text::U256;
using text::U256Of;

// Flattened: the per-type appends inline into the dispatch, as they did when they had internal
// linkage (6% fewer instructions per row than plain calls, by callgrind on BM_ConvertRows).
[[gnu::flatten]] bool Converter::Append(const Node& node, ValueRef value) {
  const ValueKind kind = value.kind();
  if (kind == ValueKind::kNull) return AppendNull(node, value);
  if (kind == ValueKind::kUnset) return Fail(value, "the Value has no kind set");
  switch (node.op) {
    case Op::kInt:
    case Op::kUInt:
      return AppendInteger(node, value);
    case Op::kFloat32:
    case Op::kFloat64:
    case Op::kBFloat16:
      return AppendFloat(node, value);
    case Op::kBool:
      return AppendBool(node, value);
    case Op::kString:
      if (!IsText(kind)) return Unaccepted(node, value);
      static_cast<ColumnString*>(node.column)->Append(value.bytes_value());
      return true;
    case Op::kFixedString:
      return AppendFixedString(node, value);
    case Op::kDate:
    case Op::kDate32:
      return AppendDate(node, value);
    case Op::kDateTime:
      return AppendDateTime(node, value);
    case Op::kDateTime64:
      return AppendDateTime64(node, value);
    case Op::kTime:
      return AppendTime(node, value);
    case Op::kDecimal:
      return AppendDecimal(node, value);
    case Op::kUuid:
      return AppendUuid(node, value);
    case Op::kIpv4:
      return AppendIpv4(node, value);
    case Op::kIpv6:
      return AppendIpv6(node, value);
    case Op::kEnum:
      return AppendEnum(node, value);
    case Op::kNothing:
      return Unaccepted(node, value);
    case Op::kNullable:
      static_cast<ColumnNullable*>(node.column)->AppendNotNull();
      return Append(nodes_[node.first_child], value);
    case Op::kArray:
      return AppendArray(node, value);
    case Op::kMap:
      return AppendMap(node, value);
    case Op::kTuple:
      return AppendTuple(node, value);
    case Op::kLowCardinality:
      return AppendLowCardinality(node, value);
    case Op::kVariant:
      return AppendVariant(node, value);
    case Op::kDynamic:
      return AppendDynamic(node, value);
    case Op::kJson:
      return AppendJson(node, value);
    case Op::kAggregateState: {
      // States are opaque: only bytes read from a column of the same type (a query's result) are
      // meaningful; the function's state format checks that they hold exactly one state.
      if (!IsText(kind)) return Unaccepted(node, value);
      absl::Status status = static_cast<clickhouse::ColumnAggregateState*>(node.column)
                                ->AppendState(value.bytes_value());
      if (!status.ok()) return Fail(value, std::string(status.message()));
      return true;
    }
  }
  return Unaccepted(node, value);
}

bool Converter::AppendNull(const Node& node, ValueRef value) {
  switch (node.op) {
    case Op::kNullable:
      static_cast<ColumnNullable*>(node.column)->AppendNull();
      return true;
    case Op::kLowCardinality:
      if (node.nullable) {
        static_cast<ColumnLowCardinality*>(node.column)->AppendNull();
        return true;
      }
      break;
    case Op::kNothing:  // Nothing's only value is NULL
    case Op::kVariant:  // Variant and Dynamic hold NULL without Nullable
    case Op::kDynamic:
      node.column->AppendDefault();
      return true;
    default:
      break;
  }
  if (options_.null_as_default) {
    node.column->AppendDefault();
    return true;
  }
  return Fail(value, absl::StrCat(node.column->type_name(),
                                  " is not Nullable (make the column Nullable, or enable "
                                  "null_as_default to store the type's default instead)"));
}

namespace {

bool FitsInteger(const Node& node, bool negative, const U256& magnitude) {
  if (negative && !IsZero(magnitude)) return !Less(node.max_negative, magnitude);
  return !Less(node.max_positive, magnitude);
}

// Stores sign and magnitude as the column's width of two's complement.
void StoreInteger(const U256& magnitude, bool negative, ColumnFixed& column) {
  const U256 v = negative ? Negated(magnitude) : magnitude;
  column.AppendRaw(v.w);
}

}  // namespace

bool Converter::AppendInteger(const Node& node, ValueRef value) {
  ColumnFixed& column = Fixed(node);
  const bool is_signed = node.op == Op::kInt;
  switch (value.kind()) {
    case ValueKind::kInt64: {
      const int64_t x = value.int64_value();
      if (is_signed ? (x < node.min || x > node.max)
                    : (x < 0 || static_cast<uint64_t>(x) > node.umax)) {
        return OutOfRange(node, value);
      }
      // Sign-extended to any width (min/max/umax span int64 for types wider than 64 bits).
      const uint64_t fill = x < 0 ? ~uint64_t{0} : 0;
      const uint64_t limbs[4] = {static_cast<uint64_t>(x), fill, fill, fill};
      column.AppendRaw(limbs);
      return true;
    }
    case ValueKind::kUInt64: {
      // Every uint64 fits the 128- and 256-bit types.
      const uint64_t u = value.uint64_value();
      if (node.width <= 8 && u > (is_signed ? static_cast<uint64_t>(node.max) : node.umax)) {
        return OutOfRange(node, value);
      }
      const uint64_t limbs[4] = {u, 0, 0, 0};
      column.AppendRaw(limbs);
      return true;
    }
    case ValueKind::kString: {
      bool negative;
      U256 magnitude;
      switch (ParseIntegerText(value.bytes_value(), &negative, &magnitude)) {
        case Parse::kOk:
          break;
        case Parse::kOverflow:
          return OutOfRange(node, value);
        default:
          return Fail(value, "not decimal integer text");
      }
      if (!FitsInteger(node, negative, magnitude)) return OutOfRange(node, value);
      StoreInteger(magnitude, negative, column);
      return true;
    }
    default:
      return Unaccepted(node, value);
  }
}

bool Converter::AppendFloat(const Node& node, ValueRef value) {
  const bool f32 = node.op == Op::kFloat32;
  const bool bf16 = node.op == Op::kBFloat16;
  double d;
  switch (value.kind()) {
    case ValueKind::kDouble:
      d = value.double_value();
      break;
    case ValueKind::kInt64:
      // Rounded once, straight to the column's precision.
      if (f32) {
        const float f = static_cast<float>(value.int64_value());
        Fixed(node).AppendRaw(&f);
        return true;
      }
      d = static_cast<double>(value.int64_value());
      break;
    case ValueKind::kUInt64:
      if (f32) {
        const float f = static_cast<float>(value.uint64_value());
        Fixed(node).AppendRaw(&f);
        return true;
      }
      d = static_cast<double>(value.uint64_value());
      break;
    case ValueKind::kString:
      switch (ParseFloatText(value.bytes_value(), &d)) {
        case Parse::kOk:
          break;
        case Parse::kOverflow:
          return Fail(value, "out of range for Float64");
        default:
          return Fail(value, "not a number (decimal or scientific text, nan, inf, -inf)");
      }
      break;
    default:
      return Unaccepted(node, value);
  }
  if (bf16) {
    uint16_t b;
    if (!ToBFloat16(d, &b)) return OutOfRange(node, value);
    Fixed(node).AppendRaw(&b);
    return true;
  }
  if (!f32) {
    Fixed(node).AppendRaw(&d);
    return true;
  }
  float f;
  if (!ToFloat32(d, &f)) return OutOfRange(node, value);
  Fixed(node).AppendRaw(&f);
  return true;
}

bool Converter::AppendBool(const Node& node, ValueRef value) {
  uint8_t b;
  switch (value.kind()) {
    case ValueKind::kBool:
      b = value.bool_value() ? 1 : 0;
      break;
    case ValueKind::kInt64:
    case ValueKind::kUInt64: {
      const uint64_t u = value.kind() == ValueKind::kInt64
                             ? static_cast<uint64_t>(value.int64_value())
                             : value.uint64_value();
      if (u > 1) return Fail(value, "Bool takes 0 or 1");
      b = static_cast<uint8_t>(u);
      break;
    }
    case ValueKind::kString:
      // ClickHouse's text of a Bool.
      if (value.bytes_value() != "true" && value.bytes_value() != "false") {
        return Fail(value, "Bool text is true or false");
      }
      b = value.bytes_value() == "true" ? 1 : 0;
      break;
    default:
      return Unaccepted(node, value);
  }
  Fixed(node).AppendRaw(&b);
  return true;
}

bool Converter::AppendFixedString(const Node& node, ValueRef value) {
  if (!IsText(value.kind())) return Unaccepted(node, value);
  const std::string_view s = value.bytes_value();
  if (s.size() > node.width) {
    return Fail(value, absl::StrCat(s.size(), " bytes do not fit ", node.column->type_name()));
  }
  clickhouse::ByteBuffer& values = Fixed(node).values();
  char* p = values.Prepare(node.width);
  if (!s.empty()) std::memcpy(p, s.data(), s.size());
  std::memset(p + s.size(), 0, node.width - s.size());
  values.Commit(node.width);
  return true;
}

bool Converter::AppendDate(const Node& node, ValueRef value) {
  int64_t days;
  switch (value.kind()) {
    case ValueKind::kTimestamp: {
      const Timestamp ts = value.timestamp_value();
      if (!ValidTimestamp(ts)) return Fail(value, kBadNanos);
      days = FloorDiv(ts.seconds, 86400);
      break;
    }
    case ValueKind::kInt64:
      days = value.int64_value();
      break;
    case ValueKind::kUInt64:
      if (value.uint64_value() > static_cast<uint64_t>(kDate32Max)) return OutOfRange(node, value);
      days = static_cast<int64_t>(value.uint64_value());
      break;
    case ValueKind::kString:
      if (const char* why = ParseDateText(value.bytes_value(), &days)) return Fail(value, why);
      break;
    default:
      return Unaccepted(node, value);
  }
  if (node.op == Op::kDate) {
    if (days < 0 || days > kDateMax) return OutOfRange(node, value);
    const uint16_t v = static_cast<uint16_t>(days);
    Fixed(node).AppendRaw(&v);
  } else {
    if (days < kDate32Min || days > kDate32Max) return OutOfRange(node, value);
    const int32_t v = static_cast<int32_t>(days);
    Fixed(node).AppendRaw(&v);
  }
  return true;
}

bool Converter::AppendDateTime(const Node& node, ValueRef value) {
  int64_t seconds;
  switch (value.kind()) {
    case ValueKind::kTimestamp: {
      const Timestamp ts = value.timestamp_value();
      if (!ValidTimestamp(ts)) return Fail(value, kBadNanos);
      seconds = ts.seconds;
      break;
    }
    case ValueKind::kInt64:
      seconds = value.int64_value();
      break;
    case ValueKind::kUInt64:
      if (value.uint64_value() > static_cast<uint64_t>(kDateTimeMax)) {
        return OutOfRange(node, value);
      }
      seconds = static_cast<int64_t>(value.uint64_value());
      break;
    case ValueKind::kString: {
      uint32_t nanos;
      if (const char* why =
              ParseDateTimeText(value.bytes_value(), node.zone, node.utc, &seconds, &nanos)) {
        return Fail(value, why);
      }
      break;
    }
    default:
      return Unaccepted(node, value);
  }
  if (seconds < 0 || seconds > kDateTimeMax) return OutOfRange(node, value);
  const uint32_t v = static_cast<uint32_t>(seconds);
  Fixed(node).AppendRaw(&v);
  return true;
}

bool Converter::AppendDateTime64(const Node& node, ValueRef value) {
  int64_t seconds;
  uint32_t nanos;
  switch (value.kind()) {
    case ValueKind::kTimestamp: {
      const Timestamp ts = value.timestamp_value();
      if (!ValidTimestamp(ts)) return Fail(value, kBadNanos);
      seconds = ts.seconds;
      nanos = static_cast<uint32_t>(ts.nanos);
      break;
    }
    case ValueKind::kInt64: {
      const int64_t ticks = value.int64_value();
      const int64_t s = FloorDiv(ticks, node.ticks_per_second);
      if (s < kDateTime64MinSeconds || s > kDateTime64MaxSeconds) return OutOfRange(node, value);
      Fixed(node).AppendRaw(&ticks);
      return true;
    }
    case ValueKind::kString:
      if (const char* why =
              ParseDateTimeText(value.bytes_value(), node.zone, node.utc, &seconds, &nanos)) {
        return Fail(value, why);
      }
      break;
    default:
      return Unaccepted(node, value);
  }
  if (seconds < kDateTime64MinSeconds || seconds > kDateTime64MaxSeconds) {
    return OutOfRange(node, value);
  }
  // Sub-tick digits are dropped (nanos >= 0, so this rounds toward the past).
  const Int128 ticks = static_cast<Int128>(seconds) * node.ticks_per_second +
                       static_cast<int64_t>(nanos) / node.nanos_per_tick;
  if (ticks > std::numeric_limits<int64_t>::max() || ticks < std::numeric_limits<int64_t>::min()) {
    return OutOfRange(node, value);
  }
  const int64_t v = static_cast<int64_t>(ticks);
  Fixed(node).AppendRaw(&v);
  return true;
}

// Time: seconds; Time64(P): ticks of 10^-P seconds. Numbers are taken in those units, text as
// `[-]h:mm:ss[.fff]`.
bool Converter::AppendTime(const Node& node, ValueRef value) {
  int64_t ticks;
  switch (value.kind()) {
    case ValueKind::kInt64:
      ticks = value.int64_value();
      break;
    case ValueKind::kUInt64:
      if (value.uint64_value() > static_cast<uint64_t>(node.max)) return OutOfRange(node, value);
      ticks = static_cast<int64_t>(value.uint64_value());
      break;
    case ValueKind::kString:
      if (const char* why = ParseTimeText(value.bytes_value(), node.scale, &ticks)) {
        return Fail(value, why);
      }
      break;
    default:
      return Unaccepted(node, value);
  }
  if (ticks < node.min || ticks > node.max) return OutOfRange(node, value);
  if (node.width == 4) {
    const int32_t v = static_cast<int32_t>(ticks);
    Fixed(node).AppendRaw(&v);
  } else {
    Fixed(node).AppendRaw(&ticks);
  }
  return true;
}

bool Converter::AppendDecimal(const Node& node, ValueRef value) {
  bool negative = false;
  U256 magnitude;
  Parse result = Parse::kOk;
  switch (value.kind()) {
    case ValueKind::kString:
      result = ParseDecimalText(value.bytes_value(), node.scale, node.precision, /*round=*/false,
                                &negative, &magnitude);
      break;
    case ValueKind::kInt64:
    case ValueKind::kUInt64: {
      uint64_t u;
      if (value.kind() == ValueKind::kInt64) {
        const int64_t x = value.int64_value();
        negative = x < 0;
        u = negative ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
      } else {
        u = value.uint64_value();
      }
      magnitude = U256Of(u);
      if (!MulPow10(magnitude, node.scale) ||
          !Less(magnitude, kPow10[static_cast<size_t>(node.precision)])) {
        result = Parse::kOverflow;
      }
      break;
    }
    case ValueKind::kDouble: {
      const double d = value.double_value();
      if (!std::isfinite(d)) return Fail(value, "Decimal takes only finite numbers");
      // The shortest text that reads back as `d` is the decimal the caller meant (1.005, not
      // 1.00499999999999989...); it is rounded half away from zero to the scale.
      char buf[64];
      result = ParseDecimalText(ShortestText(d, buf), node.scale, node.precision, /*round=*/true,
                                &negative, &magnitude);
      break;
    }
    default:
      return Unaccepted(node, value);
  }
  switch (result) {
    case Parse::kOk:
      break;
    case Parse::kSyntax:
      return Fail(value, "not decimal text ([-]digits[.digits][e[-]digits])");
    case Parse::kFraction:
      return Fail(value, absl::StrCat("more than ", node.scale, " fractional digits for ",
                                      node.column->type_name()));
    case Parse::kOverflow:
      return OutOfRange(node, value);
  }
  StoreInteger(magnitude, negative, Fixed(node));
  return true;
}

bool Converter::AppendUuid(const Node& node, ValueRef value) {
  unsigned char rfc[16];
  switch (value.kind()) {
    case ValueKind::kString:
      if (!ParseUuidText(value.bytes_value(), rfc)) {
        return Fail(value, "not a UUID 'xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx'");
      }
      break;
    case ValueKind::kBytes: {
      const std::string_view s = value.bytes_value();
      if (s.size() != 16) return Fail(value, absl::StrCat("UUID bytes must be 16, not ", s.size()));
      std::memcpy(rfc, s.data(), 16);
      break;
    }
    default:
      return Unaccepted(node, value);
  }
  // ClickHouse keeps a UUID as two little-endian UInt64 halves (high, then low).
  char native[16];
  text::SwapUuidHalves(reinterpret_cast<const char*>(rfc), 1, native);
  Fixed(node).AppendRaw(native);
  return true;
}

bool Converter::AppendIpv4(const Node& node, ValueRef value) {
  uint32_t address;
  switch (value.kind()) {
    case ValueKind::kString:
      if (!ParseIpv4Text(value.bytes_value(), &address)) {
        return Fail(value, "not an IPv4 address 'a.b.c.d'");
      }
      break;
    case ValueKind::kInt64:
    case ValueKind::kUInt64: {
      const bool negative = value.kind() == ValueKind::kInt64 && value.int64_value() < 0;
      const uint64_t u = value.kind() == ValueKind::kInt64
                             ? static_cast<uint64_t>(value.int64_value())
                             : value.uint64_value();
      if (negative || u > 0xffffffffu) return OutOfRange(node, value);
      address = static_cast<uint32_t>(u);
      break;
    }
    case ValueKind::kBytes: {
      const std::string_view s = value.bytes_value();
      if (s.size() != 4) return Fail(value, absl::StrCat("IPv4 bytes must be 4, not ", s.size()));
      const auto b = [&](size_t i) { return uint32_t{static_cast<unsigned char>(s[i])}; };
      address = b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
      break;
    }
    default:
      return Unaccepted(node, value);
  }
  Fixed(node).AppendRaw(&address);
  return true;
}

bool Converter::AppendIpv6(const Node& node, ValueRef value) {
  unsigned char address[16];
  switch (value.kind()) {
    case ValueKind::kString: {
      // IPv4 text becomes the IPv4-mapped address ::ffff:a.b.c.d.
      if (!ParseIpv6Text(value.bytes_value(), address)) {
        return Fail(value, "not an IPv6 or IPv4 address");
      }
      break;
    }
    case ValueKind::kBytes: {
      const std::string_view s = value.bytes_value();
      if (s.size() != 16) return Fail(value, absl::StrCat("IPv6 bytes must be 16, not ", s.size()));
      std::memcpy(address, s.data(), 16);
      break;
    }
    default:
      return Unaccepted(node, value);
  }
  Fixed(node).AppendRaw(address);
  return true;
}

bool Converter::AppendEnum(const Node& node, ValueRef value) {
  ColumnFixed& column = Fixed(node);
  int64_t v;
  switch (value.kind()) {
    case ValueKind::kString:
      if (!column.EnumValue(value.bytes_value(), &v)) {
        return Fail(value, absl::StrCat("no element of this name in ", column.type_name()));
      }
      break;
    case ValueKind::kInt64:
      v = value.int64_value();
      if (column.EnumName(v) == nullptr) {
        return Fail(value, absl::StrCat("no element of this value in ", column.type_name()));
      }
      break;
    default:
      return Unaccepted(node, value);
  }
  if (node.width == 1) {
    const int8_t b = static_cast<int8_t>(v);
    column.AppendRaw(&b);
  } else {
    const int16_t b = static_cast<int16_t>(v);
    column.AppendRaw(&b);
  }
  return true;
}

bool Converter::AppendArray(const Node& node, ValueRef value) {
  if (value.kind() != ValueKind::kArray) return Unaccepted(node, value);
  const Node& element = nodes_[node.first_child];
  for (size_t i = 0, n = value.size(); i < n; ++i) {
    if (!Append(element, value.element(i))) {
      PrependPath(absl::StrCat("[", i, "]"));
      return false;
    }
  }
  static_cast<ColumnArray*>(node.column)->FinishRow();
  return true;
}

bool Converter::AppendMap(const Node& node, ValueRef value) {
  if (value.kind() != ValueKind::kMap) return Unaccepted(node, value);
  const Node& key = nodes_[node.first_child];
  const Node& mapped = nodes_[node.first_child + 1];
  for (size_t i = 0, n = value.size(); i < n; ++i) {
    if (!Append(key, value.map_key(i))) {
      PrependPath(absl::StrCat("[", i, "].key"));
      return false;
    }
    if (!Append(mapped, value.map_value(i))) {
      PrependPath(absl::StrCat("[", i, "].value"));
      return false;
    }
  }
  static_cast<ColumnArray*>(node.column)->FinishRow();
  return true;
}

bool Converter::AppendTuple(const Node& node, ValueRef value) {
  if (value.kind() != ValueKind::kTuple) return Unaccepted(node, value);
  const size_t n = value.size();
  if (n != node.child_count) {
    return Fail(value, absl::StrCat(node.column->type_name(), " takes a tuple of ",
                                    node.child_count, " elements, not ", n));
  }
  for (size_t i = 0; i < n; ++i) {
    if (!Append(nodes_[node.first_child + i], value.element(i))) {
      const std::string& name = node.column->type().args[i].element_name;
      PrependPath(name.empty() ? absl::StrCat(".", i + 1) : absl::StrCat(".", name));
      return false;
    }
  }
  return true;
}

bool Converter::AppendLowCardinality(const Node& node, ValueRef value) {
  auto* column = static_cast<ColumnLowCardinality*>(node.column);
  const Node& inner = nodes_[node.first_child];
  absl::Status status;
  switch (node.dictionary) {
    case Dictionary::kString:
      if (!IsText(value.kind())) return Unaccepted(inner, value);
      status = column->AppendString(value.bytes_value());
      break;
    case Dictionary::kFixedString:
      if (!IsText(value.kind())) return Unaccepted(inner, value);
      if (value.bytes_value().size() > inner.width) {
        return Fail(value, absl::StrCat(value.bytes_value().size(), " bytes do not fit ",
                                        inner.column->type_name()));
      }
      status = column->AppendString(value.bytes_value());
      break;
    case Dictionary::kOther:
      if (!Append(inner, value)) return false;
      status = column->AppendFromDictionaryTail();
      break;
  }
  if (!status.ok()) return Fail(value, std::string(status.message()));
  return true;
}

}  // namespace convert_internal

namespace {

using clickhouse::Column;
using convert_internal::Converter;
using convert_internal::Nodes;
using convert_internal::PlanNode;

absl::Status ColumnError(const absl::Status& status, std::string_view name, const Column& column) {
  ValueError error;
  error.column = std::string(name);
  error.type = column.type_name();
  return WithValueError(
      absl::Status(status.code(),
                   absl::StrCat("column '", PrintableName(name), "' (",
                                PrintableName(column.type_name()), "): ", status.message())),
      error);
}

}  // namespace

absl::Status AppendRows(const RowSource& rows, std::span<const std::string> names,
                        std::span<Column* const> columns, const ConvertOptions& options) {
  CHGATE_CHECK(names.size() == columns.size());
  const size_t n_columns = columns.size();
  Nodes nodes(n_columns);
  for (size_t c = 0; c < n_columns; ++c) {
    if (absl::Status status = PlanNode(columns[c], options, &nodes, c); !status.ok()) {
      return ColumnError(status, names[c], *columns[c]);
    }
  }
  absl::InlinedVector<size_t, 16> sizes(n_columns);
  for (size_t c = 0; c < n_columns; ++c) sizes[c] = columns[c]->Size();
  const auto rollback = [&] {
    for (size_t c = 0; c < n_columns; ++c) columns[c]->Truncate(sizes[c]);
  };

  Converter converter(nodes.data(), options);
  for (size_t r = 0, n_rows = rows.row_count(); r < n_rows; ++r) {
    if (const size_t count = rows.value_count(r); count != n_columns) {
      rollback();
      ValueError error;
      error.row = r;
      return WithValueError(absl::InvalidArgumentError(absl::StrCat(
                                "row ", r, " has ", count, " values for ", n_columns, " columns")),
                            error);
    }
    for (size_t c = 0; c < n_columns; ++c) {
      if (!converter.Append(nodes[c], rows.value(r, c))) {
        rollback();
        return converter.Error(r, names[c], columns[c]->type_name(), {});
      }
    }
  }
  return absl::OkStatus();
}

absl::Status AppendValue(ValueRef value, Column& column, const ConvertOptions& options,
                         const ValueError& context) {
  Nodes nodes(1);
  if (absl::Status status = PlanNode(&column, options, &nodes, 0); !status.ok()) {
    return ColumnError(status, context.column, column);
  }
  Converter converter(nodes.data(), options);
  if (converter.Append(nodes[0], value)) return absl::OkStatus();
  return converter.Error(context.row, context.column,
                         context.type.empty() ? column.type_name() : context.type, context.path);
}

bool TryAppendValue(ValueRef value, Column& column, const ConvertOptions& options,
                    std::string* why) {
  Nodes nodes(1);
  if (absl::Status status = PlanNode(&column, options, &nodes, 0); !status.ok()) {
    *why = std::string(status.message());
    return false;
  }
  Converter converter(nodes.data(), options);
  if (converter.Append(nodes[0], value)) return true;
  *why = converter.path().empty() ? converter.reason()
                                  : absl::StrCat("at ", converter.path(), ": ", converter.reason());
  return false;
}

}  // namespace chgate::ingest
