#include "text/type_facts.h"

#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace chgate::text {
namespace {

// The fixed-width families that take no arguments, with their kind and width.
struct FixedFamily {
  std::string_view name;
  FixedKind kind;
  size_t width;
};

constexpr FixedFamily kFixedFamilies[] = {
    {"UInt8", FixedKind::kUInt, 1},        {"UInt16", FixedKind::kUInt, 2},
    {"UInt32", FixedKind::kUInt, 4},       {"UInt64", FixedKind::kUInt, 8},
    {"UInt128", FixedKind::kUInt, 16},     {"UInt256", FixedKind::kUInt, 32},
    {"Int8", FixedKind::kInt, 1},          {"Int16", FixedKind::kInt, 2},
    {"Int32", FixedKind::kInt, 4},         {"Int64", FixedKind::kInt, 8},
    {"Int128", FixedKind::kInt, 16},       {"Int256", FixedKind::kInt, 32},
    {"Float32", FixedKind::kFloat, 4},     {"Float64", FixedKind::kFloat, 8},
    {"BFloat16", FixedKind::kBFloat16, 2}, {"Bool", FixedKind::kBool, 1},
    {"Date", FixedKind::kDate, 2},         {"Date32", FixedKind::kDate32, 4},
    {"Time", FixedKind::kTime, 4},         {"UUID", FixedKind::kUuid, 16},
    {"IPv4", FixedKind::kIpv4, 4},         {"IPv6", FixedKind::kIpv6, 16},
    {"Nothing", FixedKind::kNothing, 1},
};

absl::Status Bad(const TypeAst& type, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad type ", FormatTypeName(type), ": ", std::string(why)));
}

absl::StatusOr<int64_t> NumberArg(const TypeAst& type, size_t index) {
  if (type.args.size() <= index || type.args[index].kind != TypeAst::Kind::kNumber) {
    return Bad(type, absl::StrCat("argument ", index + 1, " must be a number"));
  }
  return type.args[index].number;
}

absl::Status ZoneArg(const TypeAst& type, size_t index, UnknownZone unknown_zone, FixedType* out) {
  if (type.args.size() <= index) return absl::OkStatus();
  if (type.args.size() > index + 1) return Bad(type, "too many arguments");
  const TypeAst& arg = type.args[index];
  if (arg.kind != TypeAst::Kind::kString) return Bad(type, "time zone must be a string");
  out->zone_name = arg.name;
  if (absl::LoadTimeZone(arg.name, &out->zone)) return absl::OkStatus();
  if (unknown_zone == UnknownZone::kUtc) {
    out->zone = absl::UTCTimeZone();
    return absl::OkStatus();
  }
  return Bad(type, absl::StrCat("unknown time zone '", arg.name, "'"));
}

absl::Status Decimal(const TypeAst& type, int64_t precision, int64_t scale, FixedType* out) {
  if (precision < 1 || precision > 76) return Bad(type, "precision must be in [1, 76]");
  if (scale < 0 || scale > precision) return Bad(type, "scale must be in [0, precision]");
  out->kind = FixedKind::kDecimal;
  out->width = precision <= 9 ? 4 : precision <= 18 ? 8 : precision <= 38 ? 16 : 32;
  out->precision = static_cast<int>(precision);
  out->scale = static_cast<int>(scale);
  return absl::OkStatus();
}

absl::Status Enum(const TypeAst& type, FixedType* out) {
  absl::StatusOr<TypeAst> resolved = ResolveEnum(type);
  if (!resolved.ok()) return resolved.status();
  for (const TypeAst& arg : resolved->args) out->enum_values.emplace_back(arg.name, arg.number);
  out->kind = FixedKind::kEnum;
  out->width = resolved->name == "Enum8" ? 1 : 2;
  return absl::OkStatus();
}

TypeAst Named(std::string name, std::vector<TypeAst> args = {}) {
  return TypeAst{.name = std::move(name), .args = std::move(args)};
}

TypeAst ArrayOf(TypeAst element) { return Named("Array", {std::move(element)}); }

}  // namespace

absl::StatusOr<std::optional<TypeAst>> AliasLayout(const TypeAst& type) {
  if (type.kind != TypeAst::Kind::kType) return std::nullopt;
  const std::string& family = type.name;
  const bool geo = family == "Point" || family == "Ring" || family == "LineString" ||
                   family == "Polygon" || family == "MultiLineString" || family == "MultiPolygon";
  if (geo) {
    if (!type.args.empty()) return Bad(type, "takes no arguments");
    if (family == "Point") return Named("Tuple", {Named("Float64"), Named("Float64")});
    if (family == "Ring" || family == "LineString") return ArrayOf(Named("Point"));
    if (family == "Polygon") return ArrayOf(Named("Ring"));
    if (family == "MultiLineString") return ArrayOf(Named("LineString"));
    return ArrayOf(Named("Polygon"));
  }
  if (family == "Nested") {
    if (type.args.empty()) return Bad(type, "needs elements");
    for (const TypeAst& arg : type.args) {
      if (arg.kind != TypeAst::Kind::kType || arg.element_name.empty()) {
        return Bad(type, "elements must be `name Type`");
      }
    }
    return ArrayOf(Named("Tuple", type.args));
  }
  if (family == "SimpleAggregateFunction") {
    if (type.args.size() != 2 || type.args[0].kind != TypeAst::Kind::kType ||
        type.args[1].kind != TypeAst::Kind::kType) {
      return Bad(type, "needs a function and a type");
    }
    return type.args[1];
  }
  return std::nullopt;
}

absl::StatusOr<TypeAst> ResolveEnum(const TypeAst& type) {
  if (type.args.empty()) return Bad(type, "needs values");
  // A bare 'name' takes base + (bare names after the first element so far); base is 1, or the
  // first element's value when it has one (ClickHouse's autoAssignNumberForEnum).
  int64_t base = 1;
  size_t implicit = 0;
  TypeAst resolved = type;
  for (size_t i = 0; i < resolved.args.size(); ++i) {
    TypeAst& arg = resolved.args[i];
    if (arg.kind == TypeAst::Kind::kString) {
      if (i != 0) ++implicit;
      arg.kind = TypeAst::Kind::kEnumEntry;
      arg.number = base + static_cast<int64_t>(implicit);
    } else if (arg.kind == TypeAst::Kind::kEnumEntry) {
      if (i == 0) base = arg.number;
    } else {
      return Bad(type, "elements must be 'name' = number or 'name'");
    }
  }
  if (implicit != 0 && implicit != type.args.size() - 1) {
    return Bad(type, "either every element after the first has a value or none has");
  }
  bool fits8 = true;
  for (const TypeAst& arg : resolved.args) fits8 = fits8 && arg.number >= -128 && arg.number <= 127;
  if (type.name == "Enum") resolved.name = fits8 ? "Enum8" : "Enum16";
  const int64_t lo = resolved.name == "Enum8" ? -128 : -32768;
  const int64_t hi = resolved.name == "Enum8" ? 127 : 32767;
  for (size_t i = 0; i < resolved.args.size(); ++i) {
    const TypeAst& arg = resolved.args[i];
    if (arg.number < lo || arg.number > hi) {
      return Bad(type, absl::StrCat("value ", arg.number, " out of range of ", resolved.name));
    }
    for (size_t j = 0; j < i; ++j) {
      if (resolved.args[j].name == arg.name) return Bad(type, "repeated name");
      if (resolved.args[j].number == arg.number) return Bad(type, "repeated value");
    }
  }
  return resolved;
}

bool FixedType::is_signed() const {
  switch (kind) {
    case FixedKind::kInt:
    case FixedKind::kFloat:
    case FixedKind::kBFloat16:
    case FixedKind::kDate32:
    case FixedKind::kDateTime64:
    case FixedKind::kTime:
    case FixedKind::kTime64:
    case FixedKind::kDecimal:
    case FixedKind::kEnum:
      return true;
    case FixedKind::kUInt:
    case FixedKind::kBool:
    case FixedKind::kDate:
    case FixedKind::kDateTime:
    case FixedKind::kUuid:
    case FixedKind::kIpv4:
    case FixedKind::kIpv6:
    case FixedKind::kFixedString:
    case FixedKind::kNothing:
      return false;
  }
  return false;
}

const std::string* FixedType::EnumName(int64_t value) const {
  for (const auto& [name, v] : enum_values) {
    if (v == value) return &name;
  }
  return nullptr;
}

bool FixedType::EnumValue(std::string_view name, int64_t* value) const {
  for (const auto& [n, v] : enum_values) {
    if (n == name) {
      *value = v;
      return true;
    }
  }
  return false;
}

absl::StatusOr<std::optional<FixedType>> DescribeFixed(const TypeAst& type,
                                                       UnknownZone unknown_zone) {
  if (type.kind != TypeAst::Kind::kType) return Bad(type, "expected a type");
  const std::string& family = type.name;
  FixedType out;
  for (const FixedFamily& f : kFixedFamilies) {
    if (f.name != family) continue;
    if (!type.args.empty()) return Bad(type, "takes no arguments");
    out.kind = f.kind;
    out.width = f.width;
    return out;
  }
  if (family == "FixedString") {
    absl::StatusOr<int64_t> n = NumberArg(type, 0);
    if (!n.ok()) return n.status();
    if (type.args.size() != 1) return Bad(type, "takes one length");
    if (*n < 1 || *n > (int64_t{1} << 30)) return Bad(type, "length out of range");
    out.kind = FixedKind::kFixedString;
    out.width = static_cast<size_t>(*n);
    return out;
  }
  if (family == "DateTime") {
    out.kind = FixedKind::kDateTime;
    out.width = 4;
    if (absl::Status s = ZoneArg(type, 0, unknown_zone, &out); !s.ok()) return s;
    return out;
  }
  if (family == "DateTime64" || family == "Time64") {
    absl::StatusOr<int64_t> precision = NumberArg(type, 0);
    if (!precision.ok()) return precision.status();
    if (*precision < 0 || *precision > 9) return Bad(type, "precision must be in [0, 9]");
    out.kind = family == "Time64" ? FixedKind::kTime64 : FixedKind::kDateTime64;
    out.width = 8;
    out.scale = static_cast<int>(*precision);
    if (out.kind == FixedKind::kTime64) {
      if (type.args.size() > 1) return Bad(type, "takes only a precision (Time64 has no zone)");
      return out;
    }
    if (absl::Status s = ZoneArg(type, 1, unknown_zone, &out); !s.ok()) return s;
    return out;
  }
  if (family == "Decimal") {
    if (type.args.size() != 2) return Bad(type, "needs precision and scale");
    absl::StatusOr<int64_t> precision = NumberArg(type, 0);
    if (!precision.ok()) return precision.status();
    absl::StatusOr<int64_t> scale = NumberArg(type, 1);
    if (!scale.ok()) return scale.status();
    if (absl::Status s = Decimal(type, *precision, *scale, &out); !s.ok()) return s;
    return out;
  }
  if (family == "Decimal32" || family == "Decimal64" || family == "Decimal128" ||
      family == "Decimal256") {
    if (type.args.size() != 1) return Bad(type, "needs a scale");
    absl::StatusOr<int64_t> scale = NumberArg(type, 0);
    if (!scale.ok()) return scale.status();
    const int64_t precision = family == "Decimal32"    ? 9
                              : family == "Decimal64"  ? 18
                              : family == "Decimal128" ? 38
                                                       : 76;
    if (absl::Status s = Decimal(type, precision, *scale, &out); !s.ok()) return s;
    return out;
  }
  if (family == "Enum8" || family == "Enum16" || family == "Enum") {
    if (absl::Status s = Enum(type, &out); !s.ok()) return s;
    return out;
  }
  if (absl::StartsWith(family, "Interval") && family.size() > 8) {
    if (!type.args.empty()) return Bad(type, "takes no arguments");
    out.kind = FixedKind::kInt;
    out.width = 8;
    return out;
  }
  return std::nullopt;
}

ConvenienceField ConvenienceFieldOf(FixedKind kind) {
  switch (kind) {
    case FixedKind::kInt:
    case FixedKind::kDate32:
    case FixedKind::kDateTime64:
    case FixedKind::kTime:
    case FixedKind::kTime64:
    case FixedKind::kDecimal:
    case FixedKind::kEnum:
      return ConvenienceField::kInt64s;
    case FixedKind::kUInt:
    case FixedKind::kBool:
    case FixedKind::kDate:
    case FixedKind::kDateTime:
    case FixedKind::kIpv4:
      return ConvenienceField::kUInt64s;
    case FixedKind::kFloat:
    case FixedKind::kBFloat16:
      return ConvenienceField::kFloat64s;
    case FixedKind::kFixedString:
      return ConvenienceField::kStrings;
    case FixedKind::kUuid:
    case FixedKind::kIpv6:
    case FixedKind::kNothing:
      return ConvenienceField::kNone;
  }
  return ConvenienceField::kNone;
}

std::string_view ConvenienceFieldName(ConvenienceField field) {
  switch (field) {
    case ConvenienceField::kNone:
      return "data";
    case ConvenienceField::kInt64s:
      return "int64s";
    case ConvenienceField::kUInt64s:
      return "uint64s";
    case ConvenienceField::kFloat64s:
      return "float64s";
    case ConvenienceField::kStrings:
      return "strings";
  }
  return "data";
}

int64_t Pow10(int n) {
  int64_t v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

StoredRange StoredRangeOf(const FixedType& type) {
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();
  constexpr uint64_t kMaxI64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  const size_t bits = type.width * 8;
  switch (type.kind) {
    case FixedKind::kUInt:
    case FixedKind::kDate:
    case FixedKind::kDateTime:
    case FixedKind::kIpv4:
      return {0, bits >= 64 ? kMaxU64 : (uint64_t{1} << bits) - 1, "out of range"};
    case FixedKind::kBool:
      return {0, 1, "Bool must be 0 or 1"};
    case FixedKind::kInt:
    case FixedKind::kEnum:
      if (bits >= 64) return {kMin64, kMaxI64, "out of range"};
      return {-(int64_t{1} << (bits - 1)), (uint64_t{1} << (bits - 1)) - 1, "out of range"};
    case FixedKind::kDate32:
      return {kDate32MinDays, static_cast<uint64_t>(kDate32MaxDays),
              "days outside Date32's range 1900-01-01 .. 2299-12-31"};
    case FixedKind::kDateTime64: {
      const int64_t ticks = Pow10(type.scale);
      return {kDateTime64MinSeconds * ticks,
              static_cast<uint64_t>(kDateTime64MaxSeconds * ticks + (ticks - 1)),
              "ticks outside DateTime64's range 1900-01-01 .. 2299-12-31"};
    }
    case FixedKind::kTime:
      return {-kTimeMaxSeconds, static_cast<uint64_t>(kTimeMaxSeconds),
              "seconds outside Time's range -999:59:59 .. 999:59:59"};
    case FixedKind::kTime64: {
      const int64_t ticks = Pow10(type.scale);
      const int64_t max = kTimeMaxSeconds * ticks + (ticks - 1);
      return {-max, static_cast<uint64_t>(max),
              "ticks outside Time64's range -999:59:59 .. 999:59:59"};
    }
    case FixedKind::kDecimal:
      if (type.precision <= 18) {
        const int64_t max = Pow10(type.precision) - 1;
        return {-max, static_cast<uint64_t>(max), "more digits than the Decimal's precision"};
      }
      return {kMin64, kMaxI64, "out of range"};
    case FixedKind::kFloat:
    case FixedKind::kBFloat16:
    case FixedKind::kUuid:
    case FixedKind::kIpv6:
    case FixedKind::kFixedString:
    case FixedKind::kNothing:
      return {kMin64, kMaxU64, "out of range"};
  }
  return {kMin64, kMaxU64, "out of range"};
}

}  // namespace chgate::text
