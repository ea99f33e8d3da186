// Values into Variant, Dynamic and JSON columns (convert.cc's other appends are per type): the
// alternative a value goes to, the type a Dynamic value is stored as, and JSON text.
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/dynamic.h"
#include "server/clickhouse/columns/json.h"
#include "server/clickhouse/columns/variant.h"
#include "server/ingest/converter.h"
#include "text/value_parse.h"

namespace chgate::ingest::convert_internal {
namespace {

using clickhouse::Column;
using text::Parse;
using text::U256;

// The type ClickHouse infers for the corresponding literal: Bool, Int64, UInt64, Float64, String,
// DateTime64(9, 'UTC'), and Array/Tuple/Map of those. Empty arrays are Array(Nothing); NULL
// elements make the element type Nullable. nullopt for a value no one type holds (mixed element
// types, NULL, nesting deeper than 32).
std::optional<std::string> DynamicTypeOf(ValueRef value, int depth = 0) {
  if (depth > 32) return std::nullopt;
  switch (value.kind()) {
    case ValueKind::kBool:
      return "Bool";
    case ValueKind::kInt64:
      return "Int64";
    case ValueKind::kUInt64:
      return "UInt64";
    case ValueKind::kDouble:
      return "Float64";
    case ValueKind::kString:
    case ValueKind::kBytes:
      return "String";
    case ValueKind::kTimestamp:
      return "DateTime64(9, 'UTC')";
    case ValueKind::kArray: {
      std::optional<std::string> element;
      bool has_null = false;
      for (size_t i = 0; i < value.size(); ++i) {
        const ValueRef e = value.element(i);
        if (e.kind() == ValueKind::kNull) {
          has_null = true;
          continue;
        }
        std::optional<std::string> t = DynamicTypeOf(e, depth + 1);
        if (!t.has_value() || (element.has_value() && *element != *t)) return std::nullopt;
        element = std::move(t);
      }
      if (!element.has_value()) return has_null ? "Array(Nullable(Nothing))" : "Array(Nothing)";
      if (has_null) {
        if (absl::StartsWith(*element, "Array(") || absl::StartsWith(*element, "Tuple(") ||
            absl::StartsWith(*element, "Map(")) {
          return std::nullopt;
        }
        return absl::StrCat("Array(Nullable(", *element, "))");
      }
      return absl::StrCat("Array(", *element, ")");
    }
    case ValueKind::kTuple: {
      std::string t = "Tuple(";
      for (size_t i = 0; i < value.size(); ++i) {
        std::optional<std::string> e = DynamicTypeOf(value.element(i), depth + 1);
        if (!e.has_value()) return std::nullopt;
        absl::StrAppend(&t, i > 0 ? ", " : "", *e);
      }
      if (value.size() == 0) return std::nullopt;
      t.push_back(')');
      return t;
    }
    case ValueKind::kMap: {
      std::optional<std::string> key, mapped;
      for (size_t i = 0; i < value.size(); ++i) {
        std::optional<std::string> k = DynamicTypeOf(value.map_key(i), depth + 1);
        std::optional<std::string> v = DynamicTypeOf(value.map_value(i), depth + 1);
        if (!k.has_value() || !v.has_value() ||
            (key.has_value() && (*key != *k || *mapped != *v))) {
          return std::nullopt;
        }
        key = std::move(k);
        mapped = std::move(v);
      }
      if (!key.has_value()) return std::nullopt;
      return absl::StrCat("Map(", *key, ", ", *mapped, ")");
    }
    case ValueKind::kUnset:
    case ValueKind::kNull:
      return std::nullopt;
  }
  return std::nullopt;
}

// The type ClickHouse infers for a Dynamic value given as text: Bool for true/false, Int64 or
// UInt64 for integers, Float64 for other numbers, else String.
std::string TextTypeOf(std::string_view text) {
  if (text == "true" || text == "false") return "Bool";
  bool negative = false;
  U256 magnitude;
  if (text::ParseIntegerText(text, &negative, &magnitude) == Parse::kOk) {
    if (magnitude.w[1] == 0 && magnitude.w[2] == 0 && magnitude.w[3] == 0) {
      if (negative ? magnitude.w[0] <= (uint64_t{1} << 63) : magnitude.w[0] < (uint64_t{1} << 63)) {
        return "Int64";
      }
      if (!negative) return "UInt64";
    }
    return "String";
  }
  double d;
  if (text::ParseFloatText(text, &d) == Parse::kOk) return "Float64";
  return "String";
}

}  // namespace

// The first alternative, in type order, that takes the value; text tries String alternatives
// first and the others after, other values try String alternatives last, so "123" into
// Variant(String, UInt64) stays a String and 123 becomes a UInt64.
bool Converter::AppendVariant(const Node& node, ValueRef value) {
  auto& variant = *static_cast<clickhouse::ColumnVariant*>(node.column);
  const bool text = IsText(value.kind()) && !options_.text_is_literal;
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t i = 0; i < node.child_count; ++i) {
      const Node& child = nodes_[node.first_child + i];
      // LowCardinality(String) is a String alternative too (ClickHouse orders Variant text
      // parsing by the dictionary type).
      const bool is_string = child.op == Op::kString || (child.op == Op::kLowCardinality &&
                                                         child.dictionary == Dictionary::kString);
      if (is_string != (text == (pass == 0))) continue;
      const size_t before = child.column->Size();
      if (Append(child, value)) {
        variant.AppendAlternative(i);
        return true;
      }
      child.column->Truncate(before);
    }
  }
  value_.reset();
  reason_.clear();
  path_.clear();
  return Unaccepted(node, value);
}

bool Converter::AppendDynamic(const Node& node, ValueRef value) {
  auto& dynamic = *static_cast<clickhouse::ColumnDynamic*>(node.column);
  const std::optional<std::string> type =
      options_.text_is_literal && IsText(value.kind())
          ? std::optional<std::string>(TextTypeOf(value.bytes_value()))
          : DynamicTypeOf(value);
  if (!type.has_value()) {
    return Fail(value, absl::StrCat(node.column->type_name(),
                                    " takes scalars, and arrays, tuples and maps whose elements "
                                    "share one type (a Dynamic value's type comes from its kind)"));
  }
  const size_t rows = dynamic.Size();
  absl::StatusOr<Column*> target = dynamic.AppendValueOf(*type);
  if (!target.ok()) return Fail(value, std::string(target.status().message()));
  Nodes plan(1);
  if (!PlanNode(*target, options_, &plan, 0).ok()) {
    dynamic.Truncate(rows);
    return Fail(value, absl::StrCat("values cannot be converted to ", *type));
  }
  const size_t before = (*target)->Size();
  Converter inner(plan.data(), options_);
  if (inner.Append(plan[0], value)) return true;
  (*target)->Truncate(before);
  dynamic.Truncate(rows);
  value_ = inner.value_;
  reason_ = std::move(inner.reason_);
  path_ = std::move(inner.path_);
  return false;
}

bool Converter::AppendJson(const Node& node, ValueRef value) {
  if (!IsText(value.kind())) return Unaccepted(node, value);
  absl::Status status =
      static_cast<clickhouse::ColumnJson*>(node.column)->AppendJson(value.bytes_value());
  if (!status.ok()) return Fail(value, std::string(status.message()));
  return true;
}

}  // namespace chgate::ingest::convert_internal
