// Parses ClickHouse type names as the server prints them (e.g. `Nullable(DateTime('UTC'))`,
// `Enum8('a\'b' = 1, 'c' = -2)`, `Tuple(a UInt8, b Array(String))`, `Decimal(18, 4)`,
// `Dynamic(max_types=8)`, `JSON(max_dynamic_paths=10, `a.b` UInt32, SKIP c, SKIP REGEXP 'x.*')`)
// into a small tree, and prints a tree back in the server's canonical spelling.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace chgate::text {

struct TypeAst {
  enum class Kind {
    kType,        // `name` with optional `args`; `element_name` set for named tuple elements
    kNumber,      // a literal integer in `number`
    kString,      // a quoted literal, unescaped, in `name`
    kEnumEntry,   // `'name' = number` inside Enum8/Enum16
    kSetting,     // `name=number` (Dynamic's max_types, JSON's max_dynamic_paths/types)
    kSkip,        // `SKIP path` inside JSON: the path in `name`
    kSkipRegexp,  // `SKIP REGEXP 'regexp'` inside JSON: the regexp, unescaped, in `name`
    kLiteral,     // any other literal (`0.5`, `1e-3`, an integer beyond Int64), as written
  };
  Kind kind = Kind::kType;
  std::string name;
  std::string element_name;
  int64_t number = 0;
  std::vector<TypeAst> args;
};

// Returns the parsed type, or InvalidArgument naming the offset of the problem.
absl::StatusOr<TypeAst> ParseTypeName(std::string_view text);

// The canonical text of a type, as ClickHouse prints it (`Decimal(9, 2)`, `Enum8('a' = 1)`).
std::string FormatTypeName(const TypeAst& type);

}  // namespace chgate::text
