#include "client/sdk/types.h"

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/sdk/internal/strings.h"
#include "text/status_macros.h"
#include "text/type_facts.h"
#include "text/type_name.h"

namespace chgate::client {
namespace {

constexpr int kMaxDepth = 64;

TypeKind KindOf(text::FixedKind kind) {
  switch (kind) {
    case text::FixedKind::kUInt:
      return TypeKind::kUInt;
    case text::FixedKind::kInt:
      return TypeKind::kInt;
    case text::FixedKind::kFloat:
      return TypeKind::kFloat;
    case text::FixedKind::kBFloat16:
      return TypeKind::kBFloat16;
    case text::FixedKind::kBool:
      return TypeKind::kBool;
    case text::FixedKind::kDate:
      return TypeKind::kDate;
    case text::FixedKind::kDate32:
      return TypeKind::kDate32;
    case text::FixedKind::kDateTime:
      return TypeKind::kDateTime;
    case text::FixedKind::kDateTime64:
      return TypeKind::kDateTime64;
    case text::FixedKind::kTime:
      return TypeKind::kTime;
    case text::FixedKind::kTime64:
      return TypeKind::kTime64;
    case text::FixedKind::kDecimal:
      return TypeKind::kDecimal;
    case text::FixedKind::kUuid:
      return TypeKind::kUuid;
    case text::FixedKind::kIpv4:
      return TypeKind::kIpv4;
    case text::FixedKind::kIpv6:
      return TypeKind::kIpv6;
    case text::FixedKind::kEnum:
      return TypeKind::kEnum;
    case text::FixedKind::kFixedString:
      return TypeKind::kFixedString;
    case text::FixedKind::kNothing:
      return TypeKind::kNothing;
  }
  return TypeKind::kNothing;
}

absl::Status Malformed(std::string_view whole, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("type '", internal::Sv(whole), "': ", internal::Sv(what)));
}

// The ColumnType of one parsed type (the shared parser, text/type_name.h; the fixed-width facts,
// text/type_facts.h). `whole` is the full text, for messages.
absl::StatusOr<ColumnType> FromAst(const text::TypeAst& ast, int depth, std::string_view whole);

absl::StatusOr<ColumnType> Composite(TypeKind kind, const std::vector<text::TypeAst>& elements,
                                     int depth, std::string_view whole) {
  ColumnType t;
  t.kind = kind;
  for (const text::TypeAst& element : elements) {
    absl::StatusOr<ColumnType> e = FromAst(element, depth + 1, whole);
    if (!e.ok()) return e;
    t.elements.push_back(*std::move(e));
    if (kind == TypeKind::kTuple) t.element_names.push_back(element.element_name);
  }
  return t;
}

absl::StatusOr<ColumnType> FromAst(const text::TypeAst& input, int depth, std::string_view whole) {
  if (depth > kMaxDepth) return Malformed(whole, "type nested too deeply");
  text::TypeAst ast = input;
  ast.element_name.clear();
  if (ast.kind != text::TypeAst::Kind::kType) return Malformed(whole, "expected a type");
  const std::string& name = ast.name;
  const auto& args = ast.args;
  absl::StatusOr<ColumnType> t;
  // Geo types, Nested and SimpleAggregateFunction: the layout type's description, under the
  // alias's own text.
  absl::StatusOr<std::optional<text::TypeAst>> layout = text::AliasLayout(ast);
  if (!layout.ok()) return Malformed(whole, std::string(layout.status().message()));
  if (layout->has_value()) {
    t = FromAst(**layout, depth + 1, whole);
    if (t.ok()) t->text = text::FormatTypeName(ast);
    return t;
  }
  absl::StatusOr<std::optional<text::FixedType>> fixed =
      text::DescribeFixed(ast, text::UnknownZone::kUtc);
  if (!fixed.ok()) return Malformed(whole, std::string(fixed.status().message()));
  if (fixed->has_value()) {
    const text::FixedType& f = **fixed;
    ColumnType c;
    c.kind = name.rfind("Interval", 0) == 0 ? TypeKind::kInterval : KindOf(f.kind);
    c.width_bytes = f.kind == text::FixedKind::kNothing ? 0 : f.width;
    c.precision = f.precision;
    c.scale = f.scale;
    c.time_zone = f.zone_name;
    c.zone = f.zone;
    c.enum_values = f.enum_values;
    t = std::move(c);
  } else if (name == "String" && args.empty()) {
    ColumnType c;
    c.kind = TypeKind::kString;
    t = std::move(c);
  } else if (name == "Nullable" && args.size() == 1) {
    t = FromAst(args[0], depth + 1, whole);
    if (t.ok() && (t->nullable || t->kind == TypeKind::kArray || t->kind == TypeKind::kMap ||
                   t->kind == TypeKind::kTuple)) {
      return Malformed(whole, "Nullable of a composite or Nullable type");
    }
    if (t.ok()) t->nullable = true;
  } else if (name == "LowCardinality" && args.size() == 1) {
    t = FromAst(args[0], depth + 1, whole);
    if (t.ok()) t->low_cardinality = true;
  } else if (name == "Array" && args.size() == 1) {
    t = Composite(TypeKind::kArray, args, depth, whole);
  } else if (name == "Map" && args.size() == 2) {
    t = Composite(TypeKind::kMap, args, depth, whole);
  } else if (name == "Tuple") {
    t = Composite(TypeKind::kTuple, args, depth, whole);
  } else if (name == "Variant" || name == "Dynamic" || name == "JSON" ||
             name == "AggregateFunction") {
    // Carried in String layout: each value's ClickHouse text (JSON: the object's text), an
    // aggregate state's opaque bytes; Variant and Dynamic NULLs in `nulls`.
    ColumnType c;
    c.kind = TypeKind::kString;
    c.nullable = name == "Variant" || name == "Dynamic";
    t = std::move(c);
  } else {
    return absl::UnimplementedError(absl::StrCat("type '", internal::Sv(whole), "': '", name,
                                                 "' is not supported by chgate.v1.Column"));
  }
  if (t.ok()) t->text = text::FormatTypeName(ast);
  return t;
}

}  // namespace

const std::string* ColumnType::EnumName(int64_t value) const {
  for (const auto& [name, v] : enum_values) {
    if (v == value) return &name;
  }
  return nullptr;
}

bool ColumnType::EnumValue(std::string_view name, int64_t* value) const {
  for (const auto& [n, v] : enum_values) {
    if (n == name) {
      *value = v;
      return true;
    }
  }
  return false;
}

absl::StatusOr<ColumnType> ParseColumnType(std::string_view type_text) {
  absl::StatusOr<text::TypeAst> ast = text::ParseTypeName(type_text);
  if (!ast.ok()) return ast.status();
  absl::StatusOr<ColumnType> type = FromAst(*ast, 0, type_text);
  if (type.ok()) type->text = std::string(type_text);
  return type;
}

void ApplyDefaultTimeZone(const absl::TimeZone& zone, ColumnType* type) {
  if ((type->kind == TypeKind::kDateTime || type->kind == TypeKind::kDateTime64) &&
      type->time_zone.empty()) {
    type->zone = zone;
  }
  for (ColumnType& element : type->elements) ApplyDefaultTimeZone(zone, &element);
}

absl::TimeZone LoadZoneOrUtc(const std::string& name) {
  absl::TimeZone zone;
  if (name.empty() || !absl::LoadTimeZone(name, &zone)) return absl::UTCTimeZone();
  return zone;
}

}  // namespace chgate::client
