#include "server/clickhouse/columns/factory.h"

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/low_cardinality.h"
#include "server/clickhouse/columns/nullable.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/columns/tuple.h"
#include "server/common/status_macros.h"

namespace chgate::clickhouse {
namespace {

absl::Status Bad(const TypeAst& type, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad type ", FormatTypeName(type), ": ", std::string(why)));
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
  const std::string& family = type.name;

  // Fixed-width families (numbers, dates, times, Decimal, Enum, UUID, IP, FixedString...): the
  // shared type facts describe them.
  ASSIGN_OR_RETURN(std::optional<text::FixedType> fixed,
                   text::DescribeFixed(type, text::UnknownZone::kError));
  if (fixed.has_value()) return std::make_shared<ColumnFixed>(name, type, *std::move(fixed));
  if (family == "String") {
    if (!type.args.empty()) return Bad(type, "takes no arguments");
    return std::make_shared<ColumnString>(name, type);
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
    if (type.args.empty()) return Bad(type, "needs element types");
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
  if (family == "SimpleAggregateFunction" && type.args.size() == 2) {
    return CreateColumn(type.args[1]);
  }
  return absl::UnimplementedError(absl::StrCat("unsupported column type ", name));
}

}  // namespace chgate::clickhouse
