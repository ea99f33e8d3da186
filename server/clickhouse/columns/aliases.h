// Type names the factory resolves before building a column:
//   - types ClickHouse stores in another type's layout under their own name: the geo types
//     (Point = Tuple(Float64, Float64), Ring and LineString = Array(Point), Polygon =
//     Array(Ring), MultiLineString = Array(LineString), MultiPolygon = Array(Polygon)),
//     Nested(a T, b U) = Array(Tuple(a T, b U)) (sent with flatten_nested = 0), and
//     SimpleAggregateFunction(f, T) = T. Their text forms are those of the layout type;
//   - Enum, Enum8 and Enum16 with values left out, and Enum without a width, resolved as
//     ClickHouse's type parser does (DataTypeEnum.cpp: autoAssignNumberForEnum, create).
// Pure functions of the parsed type; thread-safe.
#pragma once

#include <optional>

#include "absl/status/statusor.h"
#include "server/clickhouse/types/type_ast.h"
#include "text/type_facts.h"

namespace chgate::clickhouse {

// The layout type of `type` when it is one of the aliases above (one level: Ring gives
// Array(Point)), nullopt for any other type. InvalidArgument for an alias with bad arguments.
absl::StatusOr<std::optional<TypeAst>> AliasLayout(const TypeAst& type);

// Enum resolution is a type fact (text/type_facts.h).
using text::ResolveEnum;

}  // namespace chgate::clickhouse
