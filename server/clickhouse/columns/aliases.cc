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

}  // namespace chgate::clickhouse
