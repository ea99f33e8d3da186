// Conversion of callers' values (value.h) into typed ClickHouse columns, following the coercion
// table of the API (proto/chgate/v1/chgate.proto, message Value; docs/api.md, "How values
// convert"). AppendRows is the ingest path: it resolves each column's converter once per call and
// is all-or-nothing. Functions are thread-compatible: they mutate only the columns they are given.
#pragma once

#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/clickhouse/columns/column.h"
#include "server/ingest/value.h"
#include "server/ingest/value_error.h"

namespace chgate::ingest {

struct ConvertOptions {
  // A null value for a column (or nested element) that is not Nullable appends the type's
  // default value (0, '', [], the first Enum element...) instead of being rejected.
  bool null_as_default = false;
  // Time zone of 'YYYY-MM-DD hh:mm:ss' text for DateTime and DateTime64 columns whose type names
  // no time zone (ClickHouse uses its server's zone for them).
  absl::TimeZone server_time_zone = absl::UTCTimeZone();
  // Text values are ClickHouse text, as Block columns of Variant and Dynamic carry them: text goes
  // into the first non-String Variant alternative that parses it (String last, as ClickHouse
  // parses Variant text), and a Dynamic value's type is inferred from the text (Bool, Int64,
  // UInt64, Float64, else String). Without it (the rows path) a string Value is a string: String
  // alternatives first, and Dynamic stores it as String.
  bool text_is_literal = false;
};

// Appends every row of `rows` to `columns` (one per target column, named `names`), converting
// each value to the column's type. All or nothing: on the first bad value every column is
// truncated back to its size before the call and the error is returned.
//
// Returns InvalidArgument (built by InvalidValue, with a ValueError payload naming the row,
// column, type, value and nested path) for a value that cannot be converted or a row whose value
// count differs from the number of columns; Unimplemented (with a ValueError payload naming the
// column) for a column type that values cannot be converted to. `names` and `columns` must have
// the same size.
[[nodiscard]] absl::Status AppendRows(const RowSource& rows, std::span<const std::string> names,
                                      std::span<clickhouse::Column* const> columns,
                                      const ConvertOptions& options);

// Appends one value to `column`, converted to its type. For single values and tests: it resolves
// the converter on every call, so prefer AppendRows for many values.
//
// `context` describes the value in error messages: its row, column name, type (the column's own
// type name when empty) and path, the position of `column` inside the top-level column (e.g.
// "[2].b"), to which the position inside `column` is appended. Its value and kind are ignored.
//
// Returns InvalidArgument (InvalidValue) if the value cannot be converted, Unimplemented if the
// column's type cannot be converted to. No rollback: after an error the column may hold part of
// the value (e.g. the elements before a bad one); Truncate(size before the call) undoes it.
[[nodiscard]] absl::Status AppendValue(ValueRef value, clickhouse::Column& column,
                                       const ConvertOptions& options,
                                       const ValueError& context = {});

// Like AppendValue, but on failure only says why (with the position inside nested types), for
// callers that report the value themselves. The column is left as it was.
[[nodiscard]] bool TryAppendValue(ValueRef value, clickhouse::Column& column,
                                  const ConvertOptions& options, std::string* why);

}  // namespace chgate::ingest
