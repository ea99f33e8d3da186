#include "server/ingest/convert_plan.h"

#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/low_cardinality.h"
#include "server/clickhouse/columns/nullable.h"
#include "server/clickhouse/columns/tuple.h"
#include "server/clickhouse/columns/variant.h"
#include "text/status_macros.h"
#include "text/type_facts.h"

namespace chgate::ingest::convert_internal {
namespace {

using clickhouse::Column;
using clickhouse::ColumnArray;
using clickhouse::ColumnFixed;
using clickhouse::ColumnLowCardinality;
using clickhouse::ColumnNullable;
using clickhouse::ColumnTuple;
using clickhouse::FixedKind;
using text::kPow10U64;
using text::LowMask;
using text::MulAdd;

// The op of a fixed kind that needs nothing from its type but the op; none for the others.
std::optional<Op> PlainOp(FixedKind kind) {
  switch (kind) {
    case FixedKind::kBFloat16:
      return Op::kBFloat16;
    case FixedKind::kBool:
      return Op::kBool;
    case FixedKind::kDate:
      return Op::kDate;
    case FixedKind::kDate32:
      return Op::kDate32;
    case FixedKind::kUuid:
      return Op::kUuid;
    case FixedKind::kIpv4:
      return Op::kIpv4;
    case FixedKind::kIpv6:
      return Op::kIpv6;
    case FixedKind::kEnum:
      return Op::kEnum;
    case FixedKind::kFixedString:
      return Op::kFixedString;
    case FixedKind::kNothing:
      return Op::kNothing;
    case FixedKind::kUInt:
    case FixedKind::kInt:
    case FixedKind::kFloat:
    case FixedKind::kTime:
    case FixedKind::kTime64:
    case FixedKind::kDateTime:
    case FixedKind::kDateTime64:
    case FixedKind::kDecimal:
      return std::nullopt;
  }
  return std::nullopt;
}

void PlanInteger(bool is_signed, int bits, Node* node) {
  if (!is_signed) {
    node->op = Op::kUInt;
    node->max_positive = LowMask(bits);
    node->umax = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    return;
  }
  node->op = Op::kInt;
  node->max_positive = LowMask(bits - 1);
  node->max_negative = LowMask(bits - 1);
  MulAdd(node->max_negative, 1, 1);
  node->max = bits >= 64 ? std::numeric_limits<int64_t>::max()
                         : static_cast<int64_t>((uint64_t{1} << (bits - 1)) - 1);
  node->min = -node->max - 1;
}

// DateTime and DateTime64; false for a scale outside 0..9.
bool PlanDateTime(ColumnFixed& column, const ConvertOptions& options, Node* node) {
  const auto& params = column.params();
  const bool datetime = column.fixed_kind() == FixedKind::kDateTime;
  node->op = datetime ? Op::kDateTime : Op::kDateTime64;
  // A type without a zone argument shows its values in the server's zone.
  node->zone =
      column.type().args.size() > (datetime ? 0u : 1u) ? params.zone : options.server_time_zone;
  node->utc = node->zone == absl::UTCTimeZone();
  if (datetime) return true;
  if (params.scale < 0 || params.scale > 9) return false;
  node->scale = params.scale;
  node->ticks_per_second = static_cast<int64_t>(kPow10U64[static_cast<size_t>(params.scale)]);
  node->nanos_per_tick = static_cast<int64_t>(kPow10U64[static_cast<size_t>(9 - params.scale)]);
  return true;
}

absl::Status PlanFixed(ColumnFixed& column, const ConvertOptions& options, Node* node) {
  node->width = static_cast<uint32_t>(column.width());
  const auto& params = column.params();
  const FixedKind kind = column.fixed_kind();
  if (std::optional<Op> op = PlainOp(kind)) {
    node->op = *op;
    return absl::OkStatus();
  }
  bool planned = true;
  if (kind == FixedKind::kUInt || kind == FixedKind::kInt) {
    PlanInteger(kind == FixedKind::kInt, static_cast<int>(column.width() * 8), node);
  } else if (kind == FixedKind::kFloat) {
    planned = column.width() == 4 || column.width() == 8;
    node->op = column.width() == 4 ? Op::kFloat32 : Op::kFloat64;
  } else if (kind == FixedKind::kTime || kind == FixedKind::kTime64) {
    node->op = Op::kTime;
    node->scale = params.scale;
    const text::StoredRange range = text::StoredRangeOf(params);
    node->min = range.min;
    node->max = static_cast<int64_t>(range.max);
  } else if (kind == FixedKind::kDateTime || kind == FixedKind::kDateTime64) {
    planned = PlanDateTime(column, options, node);
  } else if (kind == FixedKind::kDecimal) {
    planned = params.precision >= 1 && params.precision <= 76 && params.scale >= 0 &&
              params.scale <= params.precision;
    node->op = Op::kDecimal;
    node->scale = params.scale;
    node->precision = params.precision;
  } else {
    planned = false;  // a kind PlainOp does not name and none of the above: not convertible
  }
  if (planned) return absl::OkStatus();
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

}  // namespace

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

}  // namespace chgate::ingest::convert_internal
