#include "server/clickhouse/columns/factory.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
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
#include "text/status_macros.h"

namespace chgate::clickhouse {
namespace {

absl::Status Bad(const TypeAst& type, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad type ", FormatTypeName(type), ": ", std::string(why)));
}

// Types ClickHouse never wraps in Nullable or LowCardinality.
bool CannotBeWrapped(const Column& column) {
  const ColumnKind kind = column.kind();
  return kind == ColumnKind::kVariant || kind == ColumnKind::kDynamic || kind == ColumnKind::kJson;
}

// Variant(T1, ..., Tn): alternatives sorted by type name, duplicates and Nothing dropped.
absl::StatusOr<ColumnPtr> MakeVariant(const TypeAst& type) {
  if (type.args.empty()) return Bad(type, "needs at least one type");
  std::vector<TypeAst> args;
  for (TypeAst arg : type.args) {
    if (arg.kind != TypeAst::Kind::kType) return Bad(type, "arguments must be types");
    arg.element_name.clear();
    CHGATE_RETURN_IF_ERROR(CheckVariantAlternative(arg));
    if (arg.name == "Nothing" && arg.args.empty()) continue;
    args.push_back(std::move(arg));
  }
  std::sort(args.begin(), args.end(), [](const TypeAst& a, const TypeAst& b) {
    return FormatTypeName(a) < FormatTypeName(b);
  });
  args.erase(std::unique(args.begin(), args.end(),
                         [](const TypeAst& a, const TypeAst& b) {
                           return FormatTypeName(a) == FormatTypeName(b);
                         }),
             args.end());
  if (args.empty()) return Bad(type, "needs at least one type besides Nothing");
  if (args.size() > ColumnVariant::kMaxAlternatives) return Bad(type, "too many types");
  std::vector<ColumnPtr> alternatives;
  for (const TypeAst& arg : args) {
    CHGATE_ASSIGN_OR_RETURN(ColumnPtr alternative, CreateColumn(arg));
    alternatives.push_back(std::move(alternative));
  }
  TypeAst canonical{.name = "Variant", .args = std::move(args)};
  std::string name = FormatTypeName(canonical);
  return std::make_shared<ColumnVariant>(std::move(name), std::move(canonical),
                                         std::move(alternatives));
}

// Dynamic or Dynamic(max_types=N).
absl::StatusOr<ColumnPtr> MakeDynamic(const TypeAst& type, const std::string& name) {
  int64_t max_types = ColumnDynamic::kDefaultMaxTypes;
  for (const TypeAst& arg : type.args) {
    if (arg.kind != TypeAst::Kind::kSetting || arg.name != "max_types") {
      return Bad(type, "takes only max_types=N");
    }
    if (arg.number < 0 || arg.number > 254) return Bad(type, "max_types must be in [0, 254]");
    max_types = arg.number;
  }
  return std::make_shared<ColumnDynamic>(name, type, max_types);
}

// JSON(max_dynamic_paths=N, max_dynamic_types=M, path Type, ..., SKIP path, SKIP REGEXP 're').
absl::StatusOr<ColumnPtr> MakeJson(const TypeAst& type, const std::string& name) {
  JsonParams params;
  for (const TypeAst& arg : type.args) {
    switch (arg.kind) {
      case TypeAst::Kind::kSetting:
        if (arg.name == "max_dynamic_paths") {
          if (arg.number < 0) return Bad(type, "max_dynamic_paths must not be negative");
          params.max_dynamic_paths = arg.number;
        } else if (arg.name == "max_dynamic_types") {
          if (arg.number < 0 || arg.number > 254) {
            return Bad(type, "max_dynamic_types must be in [0, 254]");
          }
          params.max_dynamic_types = arg.number;
        } else {
          return Bad(type, absl::StrCat("unknown parameter ", arg.name));
        }
        break;
      case TypeAst::Kind::kType: {
        if (arg.element_name.empty()) return Bad(type, "a typed path needs a path and a type");
        for (const auto& [path, column] : params.typed_paths) {
          if (path == arg.element_name) return Bad(type, "a path is typed twice");
        }
        CHGATE_ASSIGN_OR_RETURN(ColumnPtr column, CreateColumn(arg));
        params.typed_paths.emplace_back(arg.element_name, std::move(column));
        break;
      }
      case TypeAst::Kind::kSkip:
        params.skip_paths.push_back(arg.name);
        break;
      case TypeAst::Kind::kSkipRegexp:
        params.skip_regexps.push_back(arg.name);
        break;
      case TypeAst::Kind::kNumber:
      case TypeAst::Kind::kString:
      case TypeAst::Kind::kEnumEntry:
      case TypeAst::Kind::kLiteral:
        return Bad(type, "unexpected argument");
    }
  }
  std::sort(params.typed_paths.begin(), params.typed_paths.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return std::make_shared<ColumnJson>(name, type, std::move(params));
}

// The column of `type` (no alias) under the type name `name`.
absl::StatusOr<ColumnPtr> Build(const TypeAst& type, const std::string& name) {
  const std::string& family = type.name;

  // Fixed-width families (numbers, dates, times, Decimal, Enum, UUID, IP, FixedString...): the
  // shared type facts describe them.
  CHGATE_ASSIGN_OR_RETURN(std::optional<text::FixedType> fixed,
                          text::DescribeFixed(type, text::UnknownZone::kError));
  if (fixed.has_value()) {
    if (fixed->kind == FixedKind::kEnum && name == FormatTypeName(type)) {
      // Named by the resolved type (`Enum8('a' = 1)`), as the server names it.
      CHGATE_ASSIGN_OR_RETURN(TypeAst resolved, text::ResolveEnum(type));
      return std::make_shared<ColumnFixed>(FormatTypeName(resolved), resolved, *std::move(fixed));
    }
    return std::make_shared<ColumnFixed>(name, type, *std::move(fixed));
  }
  if (family == "String") {
    if (!type.args.empty()) return Bad(type, "takes no arguments");
    return std::make_shared<ColumnString>(name, type);
  }
  if (family == "Nullable") {
    if (type.args.size() != 1) return Bad(type, "needs one type");
    CHGATE_ASSIGN_OR_RETURN(ColumnPtr nested, CreateColumn(type.args[0]));
    if (nested->kind() == ColumnKind::kNullable) return Bad(type, "nested Nullable");
    if (CannotBeWrapped(*nested)) return Bad(type, "Variant, Dynamic and JSON cannot be Nullable");
    return std::make_shared<ColumnNullable>(name, type, std::move(nested));
  }
  if (family == "Array") {
    if (type.args.size() != 1) return Bad(type, "needs one type");
    CHGATE_ASSIGN_OR_RETURN(ColumnPtr nested, CreateColumn(type.args[0]));
    return std::make_shared<ColumnArray>(name, type, std::move(nested));
  }
  if (family == "Tuple") {
    std::vector<ColumnPtr> elements;
    for (const TypeAst& arg : type.args) {
      CHGATE_ASSIGN_OR_RETURN(ColumnPtr element, CreateColumn(arg));
      elements.push_back(std::move(element));
    }
    return std::make_shared<ColumnTuple>(name, type, std::move(elements));
  }
  if (family == "Map") {
    if (type.args.size() != 2) return Bad(type, "needs key and value types");
    CHGATE_ASSIGN_OR_RETURN(ColumnPtr key, CreateColumn(type.args[0]));
    CHGATE_ASSIGN_OR_RETURN(ColumnPtr value, CreateColumn(type.args[1]));
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
    CHGATE_ASSIGN_OR_RETURN(ColumnPtr dictionary, CreateColumn(*inner));
    if (CannotBeWrapped(*dictionary)) {
      return Bad(type, "Variant, Dynamic and JSON cannot be LowCardinality");
    }
    // ClickHouse keeps dictionaries of single values only (numbers, dates, strings, UUID, IP,
    // ...): it refuses LowCardinality of an Array, Tuple, Map or of another wrapper.
    const ColumnKind kind = dictionary->kind();
    if (kind != ColumnKind::kFixed && kind != ColumnKind::kString) {
      return Bad(type, "LowCardinality holds numbers, dates, strings and other single values only");
    }
    return std::make_shared<ColumnLowCardinality>(name, type, std::move(dictionary), nullable);
  }
  if (family == "Variant") return MakeVariant(type);
  if (family == "Dynamic") return MakeDynamic(type, name);
  if (family == "JSON") return MakeJson(type, name);
  if (family == "AggregateFunction") {
    CHGATE_ASSIGN_OR_RETURN(AggregateStateFormat format, AggregateStateFormat::Create(type));
    return std::make_shared<ColumnAggregateState>(name, type, std::move(format));
  }
  return absl::UnimplementedError(absl::StrCat("unsupported column type ", name));
}

}  // namespace

absl::Status CheckVariantAlternative(const TypeAst& type) {
  if (type.kind != TypeAst::Kind::kType) return Bad(type, "expected a type");
  const bool lc_nullable =
      type.name == "LowCardinality" && type.args.size() == 1 && type.args[0].name == "Nullable";
  if (type.name == "Nullable" || lc_nullable || type.name == "Variant" || type.name == "Dynamic") {
    return Bad(type, "not allowed inside Variant or Dynamic");
  }
  return absl::OkStatus();
}

absl::StatusOr<ColumnPtr> CreateColumn(std::string_view type_name) {
  CHGATE_ASSIGN_OR_RETURN(TypeAst type, ParseTypeName(type_name));
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
    CHGATE_ASSIGN_OR_RETURN(std::optional<TypeAst> layout, text::AliasLayout(type));
    if (!layout.has_value()) break;
    if (depth > 8) return Bad(input, "aliases nested too deeply");
    type = *std::move(layout);
    type.element_name.clear();
  }
  return Build(type, name);
}

}  // namespace chgate::clickhouse
