#include "server/clickhouse/columns/factory.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/aggregate_state.h"
#include "server/clickhouse/columns/aliases.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/low_cardinality.h"
#include "server/clickhouse/columns/nullable.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/columns/tuple.h"
#include "server/common/status_macros.h"

namespace chgate::clickhouse {
namespace {

struct SimpleFixed {
  FixedKind kind;
  size_t width;
};

const absl::flat_hash_map<std::string_view, SimpleFixed>& SimpleFixedTypes() {
  static const auto* types = new absl::flat_hash_map<std::string_view, SimpleFixed>{
      {"UInt8", {FixedKind::kUInt, 1}},      {"UInt16", {FixedKind::kUInt, 2}},
      {"UInt32", {FixedKind::kUInt, 4}},     {"UInt64", {FixedKind::kUInt, 8}},
      {"UInt128", {FixedKind::kUInt, 16}},   {"UInt256", {FixedKind::kUInt, 32}},
      {"Int8", {FixedKind::kInt, 1}},        {"Int16", {FixedKind::kInt, 2}},
      {"Int32", {FixedKind::kInt, 4}},       {"Int64", {FixedKind::kInt, 8}},
      {"Int128", {FixedKind::kInt, 16}},     {"Int256", {FixedKind::kInt, 32}},
      {"Float32", {FixedKind::kFloat, 4}},   {"Float64", {FixedKind::kFloat, 8}},
      {"Bool", {FixedKind::kBool, 1}},       {"Date", {FixedKind::kDate, 2}},
      {"Date32", {FixedKind::kDate32, 4}},   {"UUID", {FixedKind::kUuid, 16}},
      {"IPv4", {FixedKind::kIpv4, 4}},       {"IPv6", {FixedKind::kIpv6, 16}},
      {"Nothing", {FixedKind::kNothing, 1}},
  };
  return *types;
}

absl::Status Bad(const TypeAst& type, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad type ", FormatTypeName(type), ": ", std::string(why)));
}

absl::StatusOr<absl::TimeZone> TimeZoneArg(const TypeAst& type, size_t index) {
  if (type.args.size() <= index) return absl::UTCTimeZone();
  const TypeAst& arg = type.args[index];
  if (arg.kind != TypeAst::Kind::kString) return Bad(type, "time zone must be a string");
  absl::TimeZone tz;
  if (!absl::LoadTimeZone(arg.name, &tz))
    return Bad(type, absl::StrCat("unknown time zone '", arg.name, "'"));
  return tz;
}

absl::StatusOr<int64_t> NumberArg(const TypeAst& type, size_t index) {
  if (type.args.size() <= index || type.args[index].kind != TypeAst::Kind::kNumber) {
    return Bad(type, absl::StrCat("argument ", index + 1, " must be a number"));
  }
  return type.args[index].number;
}

absl::StatusOr<ColumnPtr> MakeDecimal(const TypeAst& type, const std::string& name,
                                      int64_t precision, int64_t scale) {
  if (precision < 1 || precision > 76) return Bad(type, "precision must be in [1, 76]");
  if (scale < 0 || scale > precision) return Bad(type, "scale must be in [0, precision]");
  size_t width = precision <= 9 ? 4 : precision <= 18 ? 8 : precision <= 38 ? 16 : 32;
  FixedParams params;
  params.precision = static_cast<int>(precision);
  params.scale = static_cast<int>(scale);
  return std::make_shared<ColumnFixed>(name, type, FixedKind::kDecimal, width, std::move(params));
}

// The column of `type` (no alias) under the type name `name`.
absl::StatusOr<ColumnPtr> Build(const TypeAst& type, const std::string& name) {
  const std::string& family = type.name;

  if (auto it = SimpleFixedTypes().find(family); it != SimpleFixedTypes().end()) {
    if (!type.args.empty()) return Bad(type, "takes no arguments");
    return std::make_shared<ColumnFixed>(name, type, it->second.kind, it->second.width);
  }
  if (family == "String") {
    if (!type.args.empty()) return Bad(type, "takes no arguments");
    return std::make_shared<ColumnString>(name, type);
  }
  if (family == "FixedString") {
    ASSIGN_OR_RETURN(int64_t n, NumberArg(type, 0));
    if (n < 1 || n > (int64_t{1} << 30)) return Bad(type, "length out of range");
    return std::make_shared<ColumnFixed>(name, type, FixedKind::kFixedString,
                                         static_cast<size_t>(n));
  }
  if (family == "DateTime") {
    if (type.args.size() > 1) return Bad(type, "takes at most a time zone");
    FixedParams params;
    ASSIGN_OR_RETURN(params.time_zone, TimeZoneArg(type, 0));
    return std::make_shared<ColumnFixed>(name, type, FixedKind::kDateTime, 4, std::move(params));
  }
  if (family == "DateTime64") {
    ASSIGN_OR_RETURN(int64_t precision, NumberArg(type, 0));
    if (precision < 0 || precision > 9) return Bad(type, "precision must be in [0, 9]");
    if (type.args.size() > 2) return Bad(type, "too many arguments");
    FixedParams params;
    params.scale = static_cast<int>(precision);
    ASSIGN_OR_RETURN(params.time_zone, TimeZoneArg(type, 1));
    return std::make_shared<ColumnFixed>(name, type, FixedKind::kDateTime64, 8, std::move(params));
  }
  if (family == "Decimal") {
    if (type.args.size() != 2) return Bad(type, "needs precision and scale");
    ASSIGN_OR_RETURN(int64_t precision, NumberArg(type, 0));
    ASSIGN_OR_RETURN(int64_t scale, NumberArg(type, 1));
    return MakeDecimal(type, name, precision, scale);
  }
  if (family == "Decimal32" || family == "Decimal64" || family == "Decimal128" ||
      family == "Decimal256") {
    if (type.args.size() != 1) return Bad(type, "needs a scale");
    ASSIGN_OR_RETURN(int64_t scale, NumberArg(type, 0));
    int64_t precision = family == "Decimal32"    ? 9
                        : family == "Decimal64"  ? 18
                        : family == "Decimal128" ? 38
                                                 : 76;
    return MakeDecimal(type, name, precision, scale);
  }
  if (family == "Enum8" || family == "Enum16" || family == "Enum") {
    ASSIGN_OR_RETURN(TypeAst resolved, ResolveEnum(type));
    FixedParams params;
    for (const TypeAst& arg : resolved.args) params.enum_values.emplace_back(arg.name, arg.number);
    // A column is named by the resolved type (`Enum8('a' = 1)`), as the server names it.
    const bool alias = name != FormatTypeName(type);
    return std::make_shared<ColumnFixed>(alias ? name : FormatTypeName(resolved), resolved,
                                         FixedKind::kEnum, resolved.name == "Enum8" ? 1 : 2,
                                         std::move(params));
  }
  if (absl::StartsWith(family, "Interval")) {
    return std::make_shared<ColumnFixed>(name, type, FixedKind::kInt, 8);
  }
  if (family == "Nullable") {
    if (type.args.size() != 1) return Bad(type, "needs one type");
    ASSIGN_OR_RETURN(ColumnPtr nested, CreateColumn(type.args[0]));
    if (dynamic_cast<ColumnNullable*>(nested.get()) != nullptr) return Bad(type, "nested Nullable");
    return std::make_shared<ColumnNullable>(name, type, std::move(nested));
  }
  if (family == "Array") {
    if (type.args.size() != 1) return Bad(type, "needs one type");
    ASSIGN_OR_RETURN(ColumnPtr nested, CreateColumn(type.args[0]));
    return std::make_shared<ColumnArray>(name, type, std::move(nested));
  }
  if (family == "Tuple") {
    std::vector<ColumnPtr> elements;
    for (const TypeAst& arg : type.args) {
      ASSIGN_OR_RETURN(ColumnPtr element, CreateColumn(arg));
      elements.push_back(std::move(element));
    }
    return std::make_shared<ColumnTuple>(name, type, std::move(elements));
  }
  if (family == "Map") {
    if (type.args.size() != 2) return Bad(type, "needs key and value types");
    ASSIGN_OR_RETURN(ColumnPtr key, CreateColumn(type.args[0]));
    ASSIGN_OR_RETURN(ColumnPtr value, CreateColumn(type.args[1]));
    TypeAst tuple_type{.name = "Tuple", .args = {type.args[0], type.args[1]}};
    auto tuple = std::make_shared<ColumnTuple>(FormatTypeName(tuple_type), tuple_type,
                                               std::vector<ColumnPtr>{key, value});
    return std::make_shared<ColumnArray>(name, type, std::move(tuple), /*is_map=*/true);
  }
  if (family == "LowCardinality") {
    if (type.args.size() != 1) return Bad(type, "needs one type");
    const TypeAst* inner = &type.args[0];
    bool nullable = false;
    if (inner->name == "Nullable" && inner->args.size() == 1) {
      nullable = true;
      inner = &inner->args[0];
    }
    ASSIGN_OR_RETURN(ColumnPtr dictionary, CreateColumn(*inner));
    return std::make_shared<ColumnLowCardinality>(name, type, std::move(dictionary), nullable);
  }
  if (family == "AggregateFunction") {
    ASSIGN_OR_RETURN(AggregateStateFormat format, AggregateStateFormat::Create(type));
    return std::make_shared<ColumnAggregateState>(name, type, std::move(format));
  }
  return absl::UnimplementedError(absl::StrCat("unsupported column type ", name));
}

}  // namespace

absl::StatusOr<ColumnPtr> CreateColumn(std::string_view type_name) {
  ASSIGN_OR_RETURN(TypeAst type, ParseTypeName(type_name));
  return CreateColumn(type);
}

absl::StatusOr<ColumnPtr> CreateColumn(const TypeAst& input) {
  // Element names of named tuples belong to the parent's type name, not to the element.
  TypeAst type = input;
  type.element_name.clear();
  if (type.kind != TypeAst::Kind::kType) return Bad(type, "expected a type");
  const std::string name = FormatTypeName(type);
  // An alias keeps its own name on a column of its layout type (whose nested columns are built
  // from the layout, so they keep the names of nested aliases: Ring holds Points).
  for (int depth = 0;; ++depth) {
    ASSIGN_OR_RETURN(std::optional<TypeAst> layout, AliasLayout(type));
    if (!layout.has_value()) break;
    if (depth > 8) return Bad(input, "aliases nested too deeply");
    type = *std::move(layout);
    type.element_name.clear();
  }
  return Build(type, name);
}

}  // namespace chgate::clickhouse
