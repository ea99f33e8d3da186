// Every type the 18.16 server supports, with boundary values as clickhouse-client prints them in
// TabSeparated output. Shared by the native round-trip tests and the Query RPC tests.
#pragma once

#include <string>
#include <vector>

namespace chgate::clickhouse::testing {

struct TypeCase {
  std::string name;  // test name suffix
  std::string type;
  std::vector<std::string> values;  // TabSeparated text of column v, one per row
};

std::vector<TypeCase> AllTypeCases();

}  // namespace chgate::clickhouse::testing
