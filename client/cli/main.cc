// chgate-cli: see client/cli/cli.h and `chgate-cli --help`.
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/cli/cli.h"

int main(int argc, char** argv) {
  // Debian's abseil tracks lock order for deadlock detection on every absl::Mutex (gRPC's too);
  // a command-line tool, and a load generator above all, has no use for that bookkeeping.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::ios::sync_with_stdio(false);
  const std::vector<std::string> args(argv + 1, argv + argc);
  return chgate::cli::RunCli(args, {.in = &std::cin,
                                    .out = &std::cout,
                                    .err = &std::cerr,
                                    .err_is_tty = ::isatty(STDERR_FILENO) == 1});
}
