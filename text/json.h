// JSON text, shared by the server (log lines, the JSON type's objects) and the SDK (query rows as
// JSON): string literals, a strict check of an object document, and nested objects from dotted
// paths.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace chgate::text {

// Appends `bytes` as a JSON string, quotes included: `"` and `\` escaped, \n \r \t \b \f by
// name, other control characters as \u00XX, well-formed UTF-8 as it is, and every byte that does
// not start a well-formed sequence (utf8.h) as \ufffd, so the output is valid JSON whatever the
// input.
void AppendJsonString(std::string_view bytes, std::string* out);

// ClickHouse's own JSON string output (its defaults): the same escapes plus `/` as `\/`, and bytes
// that are not well-formed UTF-8 kept as they are. For JSON text that must match the server's.
void AppendClickHouseJsonString(std::string_view bytes, std::string* out);

// Checks that `text` is exactly one strict JSON value (RFC 8259: no comments, trailing commas or
// single quotes; at most 1000 levels deep) whose top level is an object. Returns InvalidArgument
// with the offset of the first error.
absl::Status ValidateJsonObject(std::string_view text);

// One (dotted path, JSON value text) of an object.
struct JsonPathValue {
  std::string path;
  std::string value;
};

// Appends `entries` (sorted by path) as one JSON object, the paths split at '.' into nested
// objects (`a.b` and `a.c` as {"a":{"b":..,"c":..}}), keys as ClickHouse writes them.
void AppendNestedJsonObject(const std::vector<JsonPathValue>& entries, std::string* out);

}  // namespace chgate::text
