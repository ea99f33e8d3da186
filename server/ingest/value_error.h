// Errors about one rejected value of an insert request: a ValueError names the row, the column,
// its type and the value; InvalidValue turns it into an InvalidArgument status whose message says
// all of that and which carries the ValueError as a payload, so the service can put it into the
// API's `chgate.v1.ValueError` without parsing the message. Plain functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace chgate::ingest {

// Longest printable value text (bytes) kept in a ValueError and its message.
inline constexpr size_t kMaxValueTextBytes = 256;
// Longest name (table, column, type, path) echoed in a message or a ValueError, in bytes. Names
// are the caller's text too: echoed whole, a 10 KB name would push the status past what gRPC
// clients accept in trailing metadata (8 KiB by default), which they report as
// RESOURCE_EXHAUSTED.
inline constexpr size_t kMaxNameTextBytes = 128;

struct ValueError {
  // Zero-based row index in the request; unset for errors about a whole column.
  std::optional<uint64_t> row;
  // Top-level column name.
  std::string column;
  // The column's full ClickHouse type, e.g. "Nullable(DateTime('UTC'))".
  std::string type;
  // The rejected value as text. InvalidValue accepts any bytes and stores the printable form
  // (see PrintableValue).
  std::string value;
  // Position of the rejected value inside the column's nested types: "[2]" is element 2 of an
  // Array, ".b" or ".1" a named or (1-based) unnamed Tuple element, "[3].key" / "[3].value" the
  // key or value of Map entry 3. Empty for the column's own value.
  std::string path;
  // Kind of the rejected value as ValueKindName spells it ("string", "int64", "null"...); may be
  // empty.
  std::string kind;
};

// Returns an InvalidArgument status for `error`, with `what` saying why the value was rejected:
//   row 3, column 'ts' (DateTime('UTC')): cannot convert string "abc": not RFC 3339 or ...
//   row 0, column 't' (Tuple(a UInt8)) at .a: cannot convert int64 256: out of range ...
// The value is made printable and cut (see PrintableValue); the returned status carries `error`
// with that printable value as a payload (GetValueError).
absl::Status InvalidValue(const ValueError& error, std::string_view what);

// Attaches `error` (its value made printable) to `status` as the ValueError payload and returns
// it; for errors about a row or column that are not a conversion (wrong number of values, a
// column type that cannot be converted). `status` must not be OK.
absl::Status WithValueError(absl::Status status, const ValueError& error);

// The ValueError attached by InvalidValue or WithValueError, or nullopt.
std::optional<ValueError> GetValueError(const absl::Status& status);

// `name` as printable text for a message (PrintableValue's escaping), cut to kMaxNameTextBytes.
std::string PrintableName(std::string_view name);

// `text` cut at a UTF-8 character boundary to at most `limit` bytes, ending in "..." when cut;
// the bytes kept are not escaped (for structured fields that carry names as data).
std::string TruncateText(std::string_view text, size_t limit);

// `bytes` as printable UTF-8: valid UTF-8 sequences are kept; control bytes and bytes that are
// not valid UTF-8 become \n, \t, \r or \xHH; a backslash becomes \\. Cut at a character boundary
// to at most kMaxValueTextBytes bytes, ending in "..." when cut.
std::string PrintableValue(std::string_view bytes);

}  // namespace chgate::ingest
