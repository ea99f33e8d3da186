// The conversion plan (convert.h's internals): one Node per (nested) column, built once per call
// by walking the column tree, so the per-value work is a switch on `op` with every parameter at
// hand. Used by convert.cc, convert_errors.cc and convert_plan.cc only.
#pragma once

#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/clickhouse/columns/column.h"
#include "server/ingest/convert.h"
#include "text/value_parse.h"

namespace chgate::ingest::convert_internal {

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
  text::U256 max_positive;       // kInt, kUInt: largest magnitude of a non-negative value
  text::U256 max_negative;       // kInt: largest magnitude of a negative value (0 for kUInt)
  int64_t ticks_per_second = 1;  // kDateTime64
  int64_t nanos_per_tick = 1;    // kDateTime64
  absl::TimeZone zone;           // kDateTime, kDateTime64: for text without an offset
  clickhouse::Column* column = nullptr;
};

using Nodes = absl::InlinedVector<Node, 8>;

// Fills nodes[index] for `column` and, recursively, its children (appended to `nodes`).
// Unimplemented for a type values cannot be converted to.
absl::Status PlanNode(clickhouse::Column* column, const ConvertOptions& options, Nodes* nodes,
                      size_t index);

}  // namespace chgate::ingest::convert_internal
