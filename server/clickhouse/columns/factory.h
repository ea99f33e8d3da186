// Builds an empty column for a ClickHouse type name (or a parsed type).
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "server/clickhouse/columns/column.h"
#include "server/clickhouse/types/type_ast.h"

namespace chgate::clickhouse {

// Returns the column, InvalidArgument for a malformed name or bad parameters (e.g. an unknown
// time zone, Decimal precision out of range), Unimplemented for types this client cannot carry.
absl::StatusOr<ColumnPtr> CreateColumn(std::string_view type_name);
absl::StatusOr<ColumnPtr> CreateColumn(const TypeAst& type);

// Whether `type` may be an alternative of Variant (or a type of Dynamic): ClickHouse refuses
// Nullable, LowCardinality(Nullable(...)), Variant and Dynamic there. Returns InvalidArgument.
absl::Status CheckVariantAlternative(const TypeAst& type);

}  // namespace chgate::clickhouse
