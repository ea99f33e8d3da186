// The subcommands of chgate-cli other than bench (bench.h): each runs a parsed Command against
// the given streams and returns the exit code (command.h).
#pragma once

#include "client/cli/command.h"

namespace chgate::cli {

// Inserts JSON lines or CSV from io.in (insert.cc).
int RunInsert(const Command& command, const CliIo& io);

// Runs one SELECT and prints its rows to io.out (query.cc).
int RunQuery(const Command& command, const CliIo& io);

// One grpc.health.v1 check (cli.cc).
int RunHealth(const Command& command, const CliIo& io);

}  // namespace chgate::cli
