// `chgate-cli bench`: a load generator over the SDK's InsertStream. Internal to chgate-cli.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chgate/v1/chgate.pb.h"
#include "client/cli/cli.h"

namespace chgate::cli {

// The row the benchmark sends: target columns (empty: table order) and one value per column.
struct BenchRow {
  std::vector<std::string> columns;
  std::vector<v1::Value> values;
};

// Reads --row: a JSON object (its keys are the columns; --columns must then be empty or equal)
// or a JSON array (with --columns of the same length, or none for the table's column order).
// Returns InvalidArgument when it is neither or the lengths differ.
absl::StatusOr<BenchRow> ParseBenchRow(const std::string& json,
                                       const std::vector<std::string>& columns);

// Runs the benchmark of `command.bench`; prints the result table on io.out. Returns kExitOk
// when every request succeeded, else the exit code of the first failure.
int RunBench(const Command& command, const CliIo& io);

}  // namespace chgate::cli
