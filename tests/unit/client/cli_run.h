// Runs chgate-cli in-process for tests: RunCli with string streams, the exit code and both
// outputs returned.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "client/cli/cli.h"

namespace chgate::cli::testing {

struct CliRun {
  int code = -1;
  std::string out;
  std::string err;
};

inline CliRun Cli(const std::vector<std::string>& args, const std::string& input = "") {
  std::istringstream in(input);
  std::ostringstream out;
  std::ostringstream err;
  CliRun run;
  run.code = RunCli(args, {.in = &in, .out = &out, .err = &err});
  run.out = out.str();
  run.err = err.str();
  return run;
}

}  // namespace chgate::cli::testing
