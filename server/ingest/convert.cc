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
#include "text/status_macros.h"
#include "text/type_facts.h"
#include "text/value_parse.h"
#include "text/value_text.h"

namespace chgate::ingest {
namespace {

using clickhouse::Column;
using clickhouse::ColumnArray;
using clickhouse::ColumnFixed;
using clickhouse::ColumnLowCardinality;
using clickhouse::ColumnNullable;
using clickhouse::ColumnString;
using clickhouse::ColumnTuple;
using clickhouse::FixedKind;

// Value text and 256-bit magnitudes (text/value_parse.h).
using text::DaysFromCivil;
using text::FloorDiv;
using text::InetPton;
using text::Int128;
using text::IsZero;
using text::kDate32Max;
using text::kDate32Min;
using text::kDateMax;
using text::kDateTime64MaxSeconds;
using text::kDateTime64MinSeconds;
using text::kDateTimeMax;
using text::kPow10;
using text::kPow10U64;
using text::Less;
using text::LowMask;
using text::MulAdd;
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
using text::Uint128;

// ---------------------------------------------------------------------------------------------
// The plan: one Node per (nested) column, built once per call by walking the column tree, so the
// per-value work is a switch on `op` with every parameter at hand.

enum class Op : uint8_t {
  kInt,
  kUInt,
  kFloat32,
  kFloat64,
  kBFloat16,
  kBool,
  kString,
  kFixedString,
  kDate,
  kDate32,
  kDateTime,
  kDateTime64,
  kTime,  // Time and Time64 (`scale` fraction digits)
  kDecimal,
  kUuid,
  kIpv4,
  kIpv6,
  kEnum,
  kNothing,
  kNullable,
  kArray,
  kMap,
  kTuple,
  kLowCardinality,
  kVariant,  // children: the alternatives, in type order
  kDynamic,  // types are added per value: no children in the plan
  kJson,
  kAggregateState,  // opaque state bytes, checked by the function's state format
};

// How a LowCardinality column takes values.
enum class Dictionary : uint8_t {
  kString,       // ColumnLowCardinality::AppendString
  kFixedString,  // AppendString after the length check
  kOther,        // convert into the dictionary, then AppendFromDictionaryTail
};

struct Node {
  Op op = Op::kNothing;
  Dictionary dictionary = Dictionary::kOther;  // kLowCardinality
  bool nullable = false;                       // kLowCardinality of Nullable(T)
  bool utc = true;                             // kDateTime, kDateTime64: `zone` is UTC
  uint32_t width = 0;                          // bytes of a fixed-width value
  int scale = 0;                               // kDecimal scale, kDateTime64 precision
  int precision = 0;                           // kDecimal
  uint32_t first_child = 0;  // children are nodes[first_child, first_child + child_count)
  uint32_t child_count = 0;
  int64_t min = 0;               // kInt up to 64 bits
  int64_t max = 0;               // kInt up to 64 bits
  uint64_t umax = 0;             // kUInt up to 64 bits
  U256 max_positive;             // kInt, kUInt: largest magnitude of a non-negative value
  U256 max_negative;             // kInt: largest magnitude of a negative value (0 for kUInt)
  int64_t ticks_per_second = 1;  // kDateTime64
  int64_t nanos_per_tick = 1;    // kDateTime64
  absl::TimeZone zone;           // kDateTime, kDateTime64: for text without an offset
  Column* column = nullptr;
};

using Nodes = absl::InlinedVector<Node, 8>;

absl::Status PlanFixed(ColumnFixed& column, const ConvertOptions& options, Node* node) {
  node->width = static_cast<uint32_t>(column.width());
  const int bits = static_cast<int>(column.width() * 8);
  const auto& params = column.params();
  const auto& args = column.type().args;
  switch (column.fixed_kind()) {
    case FixedKind::kUInt:
      node->op = Op::kUInt;
      node->max_positive = LowMask(bits);
      node->umax = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
      return absl::OkStatus();
    case FixedKind::kInt:
      node->op = Op::kInt;
      node->max_positive = LowMask(bits - 1);
      node->max_negative = LowMask(bits - 1);
      MulAdd(node->max_negative, 1, 1);
      node->max = bits >= 64 ? std::numeric_limits<int64_t>::max()
                             : static_cast<int64_t>((uint64_t{1} << (bits - 1)) - 1);
      node->min = -node->max - 1;
      return absl::OkStatus();
    case FixedKind::kFloat:
      if (column.width() != 4 && column.width() != 8) break;
      node->op = column.width() == 4 ? Op::kFloat32 : Op::kFloat64;
      return absl::OkStatus();
    case FixedKind::kBFloat16:
      node->op = Op::kBFloat16;
      return absl::OkStatus();
    case FixedKind::kTime:
    case FixedKind::kTime64: {
      node->op = Op::kTime;
      node->scale = params.scale;
      const text::StoredRange range = text::StoredRangeOf(params);
      node->min = range.min;
      node->max = static_cast<int64_t>(range.max);
      return absl::OkStatus();
    }
    case FixedKind::kBool:
      node->op = Op::kBool;
      return absl::OkStatus();
    case FixedKind::kDate:
      node->op = Op::kDate;
      return absl::OkStatus();
    case FixedKind::kDate32:
      node->op = Op::kDate32;
      return absl::OkStatus();
    case FixedKind::kDateTime:
    case FixedKind::kDateTime64: {
      const bool datetime = column.fixed_kind() == FixedKind::kDateTime;
      node->op = datetime ? Op::kDateTime : Op::kDateTime64;
      // A type without a zone argument shows its values in the server's zone.
      node->zone = args.size() > (datetime ? 0u : 1u) ? params.zone : options.server_time_zone;
      node->utc = node->zone == absl::UTCTimeZone();
      if (!datetime) {
        if (params.scale < 0 || params.scale > 9) break;
        node->scale = params.scale;
        node->ticks_per_second = static_cast<int64_t>(kPow10U64[static_cast<size_t>(params.scale)]);
        node->nanos_per_tick =
            static_cast<int64_t>(kPow10U64[static_cast<size_t>(9 - params.scale)]);
      }
      return absl::OkStatus();
    }
    case FixedKind::kDecimal:
      if (params.precision < 1 || params.precision > 76 || params.scale < 0 ||
          params.scale > params.precision) {
        break;
      }
      node->op = Op::kDecimal;
      node->scale = params.scale;
      node->precision = params.precision;
      return absl::OkStatus();
    case FixedKind::kUuid:
      node->op = Op::kUuid;
      return absl::OkStatus();
    case FixedKind::kIpv4:
      node->op = Op::kIpv4;
      return absl::OkStatus();
    case FixedKind::kIpv6:
      node->op = Op::kIpv6;
      return absl::OkStatus();
    case FixedKind::kEnum:
      node->op = Op::kEnum;
      return absl::OkStatus();
    case FixedKind::kFixedString:
      node->op = Op::kFixedString;
      return absl::OkStatus();
    case FixedKind::kNothing:
      node->op = Op::kNothing;
      return absl::OkStatus();
  }
  return absl::UnimplementedError(
      absl::StrCat("values cannot be converted to ", column.type_name()));
}

// Child `i` of a container node's column.
Column* ChildColumn(const Node& node, size_t i) {
  switch (node.op) {
    case Op::kNullable:
      return static_cast<ColumnNullable*>(node.column)->nested().get();
    case Op::kArray:
      return static_cast<ColumnArray*>(node.column)->nested().get();
    case Op::kMap:
      return static_cast<ColumnTuple&>(*static_cast<ColumnArray*>(node.column)->nested())
          .element(i)
          .get();
    case Op::kTuple:
      return static_cast<ColumnTuple*>(node.column)->element(i).get();
    case Op::kLowCardinality:
      return static_cast<ColumnLowCardinality*>(node.column)->dictionary().get();
    case Op::kVariant:
      return static_cast<clickhouse::ColumnVariant*>(node.column)->alternative(i).get();
    default:
      CHGATE_CHECK(false);
      return nullptr;
  }
}

// Fills nodes[index] for `column` and, recursively, its children.
absl::Status PlanNode(Column* column, const ConvertOptions& options, Nodes* nodes, size_t index) {
  Node node;
  node.column = column;
  switch (column->kind()) {
    case clickhouse::ColumnKind::kFixed:
      CHGATE_RETURN_IF_ERROR(PlanFixed(static_cast<ColumnFixed&>(*column), options, &node));
      break;
    case clickhouse::ColumnKind::kString:
      node.op = Op::kString;
      break;
    case clickhouse::ColumnKind::kNullable:
      node.op = Op::kNullable;
      node.child_count = 1;
      break;
    case clickhouse::ColumnKind::kArray:
      node.op = Op::kArray;
      node.child_count = 1;
      break;
    case clickhouse::ColumnKind::kMap:
      node.op = Op::kMap;
      node.child_count = 2;
      CHGATE_CHECK(static_cast<ColumnArray*>(column)->nested()->kind() ==
                   clickhouse::ColumnKind::kTuple);
      break;
    case clickhouse::ColumnKind::kTuple:
      node.op = Op::kTuple;
      node.child_count = static_cast<uint32_t>(static_cast<ColumnTuple*>(column)->element_count());
      break;
    case clickhouse::ColumnKind::kLowCardinality: {
      auto* lc = static_cast<ColumnLowCardinality*>(column);
      node.op = Op::kLowCardinality;
      node.nullable = lc->nullable();
      node.child_count = 1;
      const Column& dictionary = *lc->dictionary();
      if (dictionary.kind() == clickhouse::ColumnKind::kString) {
        node.dictionary = Dictionary::kString;
      } else if (dictionary.kind() == clickhouse::ColumnKind::kFixed) {
        node.dictionary =
            static_cast<const ColumnFixed&>(dictionary).fixed_kind() == FixedKind::kFixedString
                ? Dictionary::kFixedString
                : Dictionary::kOther;
      } else {
        return absl::UnimplementedError(
            absl::StrCat("values cannot be converted to ", column->type_name()));
      }
      break;
    }
    case clickhouse::ColumnKind::kVariant:
      node.op = Op::kVariant;
      node.child_count = static_cast<uint32_t>(
          static_cast<clickhouse::ColumnVariant*>(column)->alternative_count());
      break;
    case clickhouse::ColumnKind::kDynamic:
      node.op = Op::kDynamic;
      break;
    case clickhouse::ColumnKind::kJson:
      node.op = Op::kJson;
      break;
    case clickhouse::ColumnKind::kAggregateState:
      node.op = Op::kAggregateState;
      break;
  }
  node.first_child = static_cast<uint32_t>(nodes->size());
  nodes->resize(nodes->size() + node.child_count);
  (*nodes)[index] = node;
  for (size_t i = 0; i < node.child_count; ++i) {
    CHGATE_RETURN_IF_ERROR(PlanNode(ChildColumn(node, i), options, nodes, node.first_child + i));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Rendering a rejected value for messages (error path only).

constexpr size_t kRenderLimit = 1024;

void RenderValue(ValueRef value, bool nested, std::string* out) {
  if (out->size() > kRenderLimit) return;
  switch (value.kind()) {
    case ValueKind::kUnset:
    case ValueKind::kNull:
      if (nested) out->append(ValueKindName(value.kind()));
      return;
    case ValueKind::kBool:
      out->append(value.bool_value() ? "true" : "false");
      return;
    case ValueKind::kInt64:
      absl::StrAppend(out, value.int64_value());
      return;
    case ValueKind::kUInt64:
      absl::StrAppend(out, value.uint64_value());
      return;
    case ValueKind::kDouble: {
      char buf[64];
      out->append(ShortestText(value.double_value(), buf));
      return;
    }
    case ValueKind::kString:
    case ValueKind::kBytes: {
      std::string_view s = value.bytes_value();
      if (s.size() > kRenderLimit) s = s.substr(0, kRenderLimit);
      if (nested) out->push_back('"');
      out->append(s);
      if (nested) out->push_back('"');
      return;
    }
    case ValueKind::kTimestamp: {
      const Timestamp ts = value.timestamp_value();
      out->append(absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ",
                                   absl::FromUnixSeconds(ts.seconds) + absl::Nanoseconds(ts.nanos),
                                   absl::UTCTimeZone()));
      return;
    }
    case ValueKind::kArray:
    case ValueKind::kTuple: {
      const bool array = value.kind() == ValueKind::kArray;
      out->push_back(array ? '[' : '(');
      for (size_t i = 0, n = value.size(); i < n; ++i) {
        if (i != 0) out->append(", ");
        if (out->size() > kRenderLimit) return;
        RenderValue(value.element(i), true, out);
      }
      out->push_back(array ? ']' : ')');
      return;
    }
    case ValueKind::kMap:
      out->push_back('{');
      for (size_t i = 0, n = value.size(); i < n; ++i) {
        if (i != 0) out->append(", ");
        if (out->size() > kRenderLimit) return;
        RenderValue(value.map_key(i), true, out);
        out->append(": ");
        RenderValue(value.map_value(i), true, out);
      }
      out->push_back('}');
      return;
  }
}

// ---------------------------------------------------------------------------------------------
// The converter. Append returns false on a rejected value and records why in failure(); nothing
// is allocated on success.

class Converter {
 public:
  Converter(const Node* nodes, const ConvertOptions& options) : nodes_(nodes), options_(options) {}

  bool Append(const Node& node, ValueRef value);

  // Why the last Append failed, and where inside the column ("[2].b").
  const std::string& reason() const { return reason_; }
  const std::string& path() const { return path_; }

  // The InvalidValue status for the last failed Append.
  absl::Status Error(std::optional<uint64_t> row, std::string_view column, std::string_view type,
                     std::string_view path_prefix) const;

 private:
  bool Fail(ValueRef value, std::string reason) {
    value_.emplace(value);
    reason_ = std::move(reason);
    return false;
  }
  bool Unaccepted(const Node& node, ValueRef value);
  bool OutOfRange(const Node& node, ValueRef value);
  void PrependPath(std::string_view segment) { path_.insert(0, segment.data(), segment.size()); }

  bool AppendNull(const Node& node, ValueRef value);
  bool AppendInteger(const Node& node, ValueRef value);
  bool AppendFloat(const Node& node, ValueRef value);
  bool AppendBool(const Node& node, ValueRef value);
  bool AppendFixedString(const Node& node, ValueRef value);
  bool AppendDate(const Node& node, ValueRef value);
  bool AppendDateTime(const Node& node, ValueRef value);
  bool AppendDateTime64(const Node& node, ValueRef value);
  bool AppendTime(const Node& node, ValueRef value);
  bool AppendDecimal(const Node& node, ValueRef value);
  bool AppendUuid(const Node& node, ValueRef value);
  bool AppendIpv4(const Node& node, ValueRef value);
  bool AppendIpv6(const Node& node, ValueRef value);
  bool AppendEnum(const Node& node, ValueRef value);
  bool AppendArray(const Node& node, ValueRef value);
  bool AppendMap(const Node& node, ValueRef value);
  bool AppendTuple(const Node& node, ValueRef value);
  bool AppendLowCardinality(const Node& node, ValueRef value);
  bool AppendVariant(const Node& node, ValueRef value);
  bool AppendDynamic(const Node& node, ValueRef value);
  bool AppendJson(const Node& node, ValueRef value);

  const Node* nodes_;
  const ConvertOptions& options_;
  // The failure: the rejected (innermost) value, why, and where inside the column.
  std::optional<ValueRef> value_;
  std::string reason_;
  std::string path_;
};

ColumnFixed& Fixed(const Node& node) { return *static_cast<ColumnFixed*>(node.column); }

bool IsText(ValueKind kind) { return kind == ValueKind::kString || kind == ValueKind::kBytes; }

bool ValidTimestamp(const Timestamp& ts) { return ts.nanos >= 0 && ts.nanos < 1000000000; }

constexpr char kBadNanos[] = "timestamp nanos outside [0, 999999999]";

bool Converter::Append(const Node& node, ValueRef value) {
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

bool Converter::Unaccepted(const Node& node, ValueRef value) {
  const char* accepts = "";
  switch (node.op) {
    case Op::kInt:
    case Op::kUInt:
      accepts = "int64, uint64 or decimal integer text";
      break;
    case Op::kFloat32:
    case Op::kFloat64:
    case Op::kBFloat16:
      accepts = "double, int64, uint64 or numeric text";
      break;
    case Op::kTime:
      accepts = node.scale == 0 ? "seconds as int64/uint64, or '[-]hh:mm:ss' text"
                                : "ticks as int64/uint64, or '[-]hh:mm:ss[.fff]' text";
      break;
    case Op::kBool:
      accepts = "bool, int64/uint64 0 or 1, or text true/false";
      break;
    case Op::kString:
      accepts = "string or bytes";
      break;
    case Op::kFixedString:
      accepts = "string or bytes of at most its length";
      break;
    case Op::kDate:
    case Op::kDate32:
      accepts = "timestamp, days since 1970-01-01 as int64/uint64, or 'YYYY-MM-DD' text";
      break;
    case Op::kDateTime:
      accepts =
          "timestamp, Unix seconds as int64/uint64, or RFC 3339 or 'YYYY-MM-DD hh:mm:ss' text";
      break;
    case Op::kDateTime64:
      accepts = "timestamp, ticks as int64, or RFC 3339 or 'YYYY-MM-DD hh:mm:ss[.fff]' text";
      break;
    case Op::kDecimal:
      accepts = "decimal text, int64, uint64 or double";
      break;
    case Op::kUuid:
      accepts = "UUID text or 16 bytes";
      break;
    case Op::kIpv4:
      accepts = "'a.b.c.d' text, int64/uint64 or 4 bytes";
      break;
    case Op::kIpv6:
      accepts = "IPv6 or IPv4 text, or 16 bytes";
      break;
    case Op::kEnum:
      accepts = "an element name as string or an element value as int64";
      break;
    case Op::kNothing:
      accepts = "only null";
      break;
    case Op::kArray:
      accepts = "an array";
      break;
    case Op::kMap:
      accepts = "a map";
      break;
    case Op::kTuple:
      return Fail(value, absl::StrCat(node.column->type_name(), " takes a tuple of ",
                                      node.child_count, " elements"));
    case Op::kNullable:
    case Op::kLowCardinality:
      return Unaccepted(nodes_[node.first_child], value);
    case Op::kVariant:
      accepts = "null or a value one of its types takes";
      break;
    case Op::kDynamic:
      accepts =
          "null, bool, int64, uint64, double, string, bytes, timestamp, or arrays, tuples "
          "and maps of them";
      break;
    case Op::kJson:
      accepts = "a JSON object as string";
      break;
    case Op::kAggregateState:
      accepts = "one state's bytes, as a query of the same type returns them";
      break;
  }
  return Fail(value, absl::StrCat(node.column->type_name(), " takes ", accepts));
}

bool Converter::OutOfRange(const Node& node, ValueRef value) {
  std::string range;
  switch (node.op) {
    case Op::kInt:
    case Op::kUInt:
      if (node.width <= 8) {
        range = node.op == Op::kInt ? absl::StrCat("[", node.min, ", ", node.max, "]")
                                    : absl::StrCat("[0, ", node.umax, "]");
      } else {
        const bool is_signed = node.op == Op::kInt;
        const U256 min = Negated(node.max_negative);
        range = "[";
        if (is_signed) {
          text::AppendWideInteger(reinterpret_cast<const char*>(min.w), node.width, true, &range);
        } else {
          range.push_back('0');
        }
        range.append(", ");
        text::AppendWideInteger(reinterpret_cast<const char*>(node.max_positive.w), node.width,
                                is_signed, &range);
        range.push_back(']');
      }
      break;
    case Op::kFloat32:
    case Op::kBFloat16:
      range = "(finite values beyond +-3.4028235e38)";
      break;
    case Op::kTime:
      range = "[-999:59:59, 999:59:59]";
      break;
    case Op::kDate:
      range = "[1970-01-01, 2149-06-06]";
      break;
    case Op::kDate32:
      range = "[1900-01-01, 2299-12-31]";
      break;
    case Op::kDateTime:
      range = "[1970-01-01 00:00:00, 2106-02-07 06:28:15] UTC (Unix seconds [0, 4294967295])";
      break;
    case Op::kDateTime64:
      range = "[1900-01-01 00:00:00, 2299-12-31 23:59:59] UTC";
      break;
    case Op::kDecimal:
      range = absl::StrCat("(at most ", node.precision - node.scale, " digits before the point)");
      break;
    case Op::kIpv4:
      range = "[0, 4294967295]";
      break;
    default:
      break;
  }
  return Fail(value, absl::StrCat("out of range for ", node.column->type_name(), " ", range));
}

bool FitsInteger(const Node& node, bool negative, const U256& magnitude) {
  if (negative && !IsZero(magnitude)) return !Less(node.max_negative, magnitude);
  return !Less(node.max_positive, magnitude);
}

// Stores sign and magnitude as the column's width of two's complement.
void StoreInteger(const U256& magnitude, bool negative, ColumnFixed& column) {
  const U256 v = negative ? Negated(magnitude) : magnitude;
  column.AppendRaw(v.w);
}

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

namespace {

// The ClickHouse type a Dynamic column stores a value as (the type ClickHouse infers for the
// corresponding literal): Bool, Int64, UInt64, Float64, String, DateTime64(9, 'UTC'), and
// Array/Tuple/Map of those. Empty arrays are Array(Nothing); NULL elements make the element type
// Nullable.
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
  if (ParseIntegerText(text, &negative, &magnitude) == Parse::kOk) {
    if (magnitude.w[1] == 0 && magnitude.w[2] == 0 && magnitude.w[3] == 0) {
      if (negative ? magnitude.w[0] <= (uint64_t{1} << 63) : magnitude.w[0] < (uint64_t{1} << 63)) {
        return "Int64";
      }
      if (!negative) return "UInt64";
    }
    return "String";
  }
  double d;
  if (ParseFloatText(text, &d) == Parse::kOk) return "Float64";
  return "String";
}

}  // namespace

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

absl::Status Converter::Error(std::optional<uint64_t> row, std::string_view column,
                              std::string_view type, std::string_view path_prefix) const {
  ValueError error;
  error.row = row;
  error.column = std::string(column);
  error.type = std::string(type);
  error.path = absl::StrCat(absl::string_view(path_prefix.data(), path_prefix.size()), path_);
  if (value_.has_value()) {
    error.kind = ValueKindName(value_->kind());
    RenderValue(*value_, false, &error.value);
  }
  return InvalidValue(error, reason_);
}

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
