// A small JSON reader for chgate-cli's input (JSON lines) and the mapping of JSON values to
// chgate.v1.Value. Strict RFC 8259: no comments, no trailing commas; nesting is limited to 256
// levels. Plain values and functions, thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "chgate/v1/chgate.pb.h"

namespace chgate::cli {

struct Json {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  // kNumber: the number's text exactly as written; kString: the decoded UTF-8 text.
  std::string text;
  std::vector<Json> items;                            // kArray
  std::vector<std::pair<std::string, Json>> members;  // kObject, in input order
};

// Parses one JSON document (surrounding whitespace allowed). Returns InvalidArgument naming the
// 1-based column of the problem.
absl::StatusOr<Json> ParseJson(std::string_view text);

// Converts to a row value: null -> null_value, true/false -> bool_value, integers -> int64_value
// (or uint64_value above INT64_MAX, or string_value beyond 64 bits, which Int128/256 and Decimal
// columns take as exact text), other numbers -> double_value, strings -> string_value, arrays ->
// array_value, objects -> map_value with string keys.
v1::Value JsonToValue(const Json& json);

}  // namespace chgate::cli
