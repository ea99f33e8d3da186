#include "server/clickhouse/columns/aliases.h"

#include <string_view>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace chgate::clickhouse {
namespace {

absl::Status Bad(const TypeAst& type, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad type ", FormatTypeName(type), ": ", std::string(why)));
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
  // autoAssignNumberForEnum: a bare 'name' takes base + (number of bare names after the first
  // element); base is 1, or the first element's value when it has one.
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
  absl::flat_hash_set<std::string> names;
  absl::flat_hash_set<int64_t> values;
  for (const TypeAst& arg : resolved.args) {
    if (arg.number < lo || arg.number > hi) {
      return Bad(type, absl::StrCat("value ", arg.number, " out of range of ", resolved.name));
    }
    if (!names.insert(arg.name).second) return Bad(type, "repeated name");
    if (!values.insert(arg.number).second) return Bad(type, "repeated value");
  }
  return resolved;
}

}  // namespace chgate::clickhouse
