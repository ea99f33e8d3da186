// ClickHouse type text, as chgate puts it in ColumnSchema.type and Column.type, parsed into the
// facts the client needs to read and write the columnar layout of chgate.v1.Column: which value
// fields a column uses, the width of fixed-width values, Decimal scale, time zone, enum names,
// and the element types of Nullable, LowCardinality, Array, Map and Tuple.
//
// Plain values; ParseColumnType is a pure function, safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace chgate::client {

// What a type is, after aliases are resolved (SimpleAggregateFunction(f, T) is T, geo types are
// the Tuple/Array types they stand for, IntervalX is kInterval).
enum class TypeKind {
  kInt,          // Int8..Int256 (width_bytes 1..32)
  kUInt,         // UInt8..UInt256
  kFloat,        // Float32 (4), Float64 (8)
  kBFloat16,     // 2 bytes, the upper half of a Float32
  kBool,         // 1 byte
  kDecimal,      // width_bytes 4/8/16/32, precision, scale
  kDate,         // UInt16 days
  kDate32,       // Int32 days
  kDateTime,     // UInt32 seconds, time_zone optional
  kDateTime64,   // Int64 ticks of 10^-scale s, time_zone optional
  kTime,         // Int32 seconds, -999:59:59 .. 999:59:59
  kTime64,       // Int64 ticks of 10^-scale s, same range
  kEnum,         // Int8 (Enum8) or Int16 (Enum16) values, names in enum_values
  kUuid,         // 16 bytes, RFC 4122 order
  kIpv4,         // UInt32
  kIpv6,         // 16 bytes, network order
  kFixedString,  // width_bytes = N
  kString,       // data + offsets
  kInterval,     // Int64
  kNothing,      // no values
  kNullable,     // nulls + elements[0]'s fields in the same column
  kArray,        // offsets + children[0]
  kMap,          // offsets + children[0] (keys) + children[1] (values)
  kTuple,        // children[0..n-1]
};

// One parsed type. For kNullable and kLowCardinality wrappers see `nullable` and
// `low_cardinality`: a Nullable(T) is described by T's fields with `nullable = true`, so code
// that reads values can ignore the wrapper and check the null map first.
struct ColumnType {
  TypeKind kind = TypeKind::kNothing;

  // The text this was parsed from (for a child: its own part of the text).
  std::string text;

  // Nullable(T): this struct describes T, and the column carries `nulls`.
  bool nullable = false;

  // LowCardinality(T) (possibly around Nullable): informational, the layout is T's.
  bool low_cardinality = false;

  // Bytes per value of fixed-width kinds (0 for String, Array, Map, Tuple, Nothing).
  size_t width_bytes = 0;

  // kDecimal: precision and scale. kDateTime64: scale is the precision P (ticks of 10^-P s).
  int precision = 0;
  int scale = 0;

  // kDateTime, kDateTime64: the zone named in the type text, "" if none.
  std::string time_zone;

  // kDateTime, kDateTime64: the zone values are shown in. ParseColumnType loads `time_zone`
  // (falling back to UTC when this machine does not know the zone); for types that name none,
  // it is UTC until ApplyDefaultTimeZone sets the server's zone.
  absl::TimeZone zone = absl::UTCTimeZone();

  // kEnum: (name, value) pairs in type order.
  std::vector<std::pair<std::string, int64_t>> enum_values;

  // kArray: 1 element type; kMap: key and value types; kTuple: one per element.
  std::vector<ColumnType> elements;

  // kTuple: element names ("" for unnamed elements), same size as `elements`.
  std::vector<std::string> element_names;

  // True for kinds whose values are fixed-width bytes in `data`.
  bool is_fixed_width() const { return width_bytes > 0; }

  // The name of an enum value, or nullptr when the value is not in the type.
  const std::string* EnumName(int64_t value) const;
  // The value of an enum name; false when the name is not in the type.
  bool EnumValue(std::string_view name, int64_t* value) const;
};

// Parses `text` ("Nullable(DateTime64(3, 'UTC'))", "Map(String, Array(UInt8))",
// "Tuple(a UInt8, b String)", "Enum8('a' = 1, 'b\\'c' = -2)", ...).
// Variant, Dynamic, JSON and AggregateFunction are described as String (Variant and Dynamic as
// Nullable(String)) with `text` naming the real type: chgate.v1.Column carries their values as
// ClickHouse text (JSON: the object's text) and aggregate states as opaque bytes.
// Returns InvalidArgument for malformed text and Unimplemented for types that chgate.v1.Column
// cannot carry (the old experimental Object('json'), unknown families).
absl::StatusOr<ColumnType> ParseColumnType(std::string_view text);

// Sets `zone` on every DateTime and DateTime64 in `type` (children included) whose text names no
// zone: the server's zone, from QueryHeader.timezone.
void ApplyDefaultTimeZone(const absl::TimeZone& zone, ColumnType* type);

// The zone called `name` ("UTC", "Europe/Berlin"), or UTC when `name` is empty or unknown here.
absl::TimeZone LoadZoneOrUtc(const std::string& name);

}  // namespace chgate::client
