// The per-type facts of ClickHouse's fixed-width types, in one place for the server and the SDK:
// which family a type name belongs to, its width, the range of values it stores, the
// chgate.v1.Column field that carries it besides `data`, and its parameters (precision, scale,
// time zone, enum elements). The column decoder (server/clickhouse/columns/factory.cc), the rows
// conversion, the Block conversion, the Query response builder and the SDK's type parser all ask
// this file; none of them keeps its own list of widths or ranges.
//
// Adding a fixed-width type: a FixedKind member, a row in kFixedFamilies (type_facts.cc) or a
// case in DescribeFixed for a parametric family, its range in StoredRange, its text in
// value_text.cc; then follow the compiler (-Wswitch) to every switch over FixedKind. The recipe
// is in server/clickhouse/README.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "text/type_name.h"

namespace chgate::text {

enum class FixedKind {
  kUInt,         // UInt8..UInt256
  kInt,          // Int8..Int256, Interval* (Int64)
  kFloat,        // Float32, Float64
  kBFloat16,     // the upper 16 bits of a Float32
  kBool,         // one byte, 0 or 1
  kDate,         // UInt16 days since 1970-01-01
  kDate32,       // Int32 days since 1970-01-01, 1900-01-01 .. 2299-12-31
  kDateTime,     // UInt32 Unix seconds; the zone is only in the type
  kDateTime64,   // Int64 ticks of 10^-scale seconds since the epoch
  kTime,         // Int32 seconds, -999:59:59 .. 999:59:59
  kTime64,       // Int64 ticks of 10^-scale seconds, same range
  kDecimal,      // value x 10^scale in 4, 8, 16 or 32 bytes
  kUuid,         // on the wire two little-endian UInt64 halves, high half first
  kIpv4,         // UInt32, host order as a number
  kIpv6,         // 16 bytes, network order
  kEnum,         // Int8 (Enum8) or Int16 (Enum16) element values
  kFixedString,  // N bytes, zero-padded
  kNothing,      // one byte per row on the wire ('0'); only NULLs in Nullable(Nothing)
};

// The chgate.v1.Column field that carries a fixed-width type's values besides `data`.
enum class ConvenienceField { kNone, kInt64s, kUInt64s, kFloat64s, kStrings };

// One fixed-width type with its parameters.
struct FixedType {
  FixedKind kind = FixedKind::kNothing;
  size_t width = 1;
  int precision = 0;      // kDecimal
  int scale = 0;          // kDecimal scale; kDateTime64 and kTime64 precision (0..9)
  std::string zone_name;  // kDateTime, kDateTime64: the zone the type names, "" if none
  absl::TimeZone zone = absl::UTCTimeZone();  // ... and that zone (UTC when it names none)
  std::vector<std::pair<std::string, int64_t>> enum_values;  // kEnum, in type order

  bool is_signed() const;
  // The element name of an enum value / the value of a name.
  const std::string* EnumName(int64_t value) const;
  bool EnumValue(std::string_view name, int64_t* value) const;
};

// What to do with a time zone this machine does not know.
enum class UnknownZone {
  kError,  // InvalidArgument (the server: it must print and convert values in that zone)
  kUtc,    // show values in UTC (the SDK: the type is still usable)
};

// Describes `type` if its family is fixed-width: nullopt for other families (String, Array...),
// InvalidArgument for a fixed-width family with bad arguments (`Decimal(99, 2)`, `Enum8('a' =
// 300)`, `DateTime64(12)`).
absl::StatusOr<std::optional<FixedType>> DescribeFixed(const TypeAst& type,
                                                       UnknownZone unknown_zone);

// Types ClickHouse stores in another type's layout under their own name: the geo types (Point =
// Tuple(Float64, Float64), Ring and LineString = Array(Point), Polygon = Array(Ring),
// MultiLineString = Array(LineString), MultiPolygon = Array(Polygon)), Nested(a T, b U) =
// Array(Tuple(a T, b U)) (sent with flatten_nested = 0) and SimpleAggregateFunction(f, T) = T.
// Returns the layout type of such an alias (one level: Ring gives Array(Point)), nullopt for any
// other type, InvalidArgument for an alias with bad arguments.
absl::StatusOr<std::optional<TypeAst>> AliasLayout(const TypeAst& type);

// `type` (family Enum, Enum8 or Enum16) with every value explicit and the family Enum8 or Enum16,
// as ClickHouse's type parser resolves it: values left out count on from the first element's
// (from 1 when it has none); either every element after the first has a value or none has; Enum
// is Enum8 when every value fits Int8, else Enum16. InvalidArgument for no elements, a mixed
// form, a value out of range, or a repeated name or value.
absl::StatusOr<TypeAst> ResolveEnum(const TypeAst& type);

ConvenienceField ConvenienceFieldOf(FixedKind kind);
// The proto field's name ("int64s", ...; "data" for kNone).
std::string_view ConvenienceFieldName(ConvenienceField field);

// The inclusive range of the integers a type stores, for types up to 64 bits carried as int64s
// or uint64s (widths above 8 bytes and floats: the full 64-bit range; see FitsStored). `what`
// says in words what a value outside it is ("days outside Date32's range 1900-01-01 ..
// 2299-12-31").
struct StoredRange {
  int64_t min = 0;
  uint64_t max = 0;
  std::string_view what;
};
StoredRange StoredRangeOf(const FixedType& type);

// Ranges the conversions share.
inline constexpr int64_t kDateMaxDays = 65535;     // 2149-06-06
inline constexpr int64_t kDate32MinDays = -25567;  // 1900-01-01
inline constexpr int64_t kDate32MaxDays = 120529;  // 2299-12-31
inline constexpr int64_t kDateTime64MinSeconds = kDate32MinDays * 86400;
inline constexpr int64_t kDateTime64MaxSeconds = kDate32MaxDays * 86400 + 86399;
inline constexpr int64_t kTimeMaxSeconds = 999 * 3600 + 59 * 60 + 59;  // 999:59:59
inline constexpr double kFloat32Max = 3.40282346638528859811704183484516925e+38;

// 10^n for n in [0, 18].
int64_t Pow10(int n);

}  // namespace chgate::text
