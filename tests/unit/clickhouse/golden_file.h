// Golden column bodies kept as text files in tests/testdata/golden/, one loader for them. The
// bytes in those files come from ClickHouse's serializers (its source, PROTOCOL.md) or from real
// captures, never from this project's writers; the tests decode them, print them and re-encode
// them byte for byte.
//
// Format, one item per line:
//   # ...                   a comment (whole lines only)
//   column <name> <rows>    starts a case: the column's name in the block and its row count
//   type <type name>        the column's type as the server prints it (the rest of the line)
//   data <hex>              Native bytes of the column, appended in order (spaces ignored)
//   tsv <text>              one row as ClickHouse prints it in TabSeparated, with C escapes for
//                           what a line cannot hold: \\ \t \n \xHH
// Every case has a type, and as many tsv lines as rows.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace chgate::clickhouse::testing {

struct GoldenColumn {
  std::string column;
  std::string type;
  size_t rows = 0;
  std::string data;              // the column's Native bytes (prefixes, then body)
  std::vector<std::string> tsv;  // each row as ClickHouse prints it in TabSeparated
};

inline void PrintTo(const GoldenColumn& c, std::ostream* os) { *os << c.type; }

// Parses the text of a golden file; InvalidArgument names the line of a malformed item.
absl::StatusOr<std::vector<GoldenColumn>> ParseGoldenColumns(std::string_view text);

// The cases of tests/testdata/golden/<name>. A file that cannot be read or parsed yields one
// case whose type is the error, so every test over the cases fails naming it.
std::vector<GoldenColumn> LoadGoldenColumns(std::string_view name);

}  // namespace chgate::clickhouse::testing
