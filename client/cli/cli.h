// chgate-cli: command-line front end of the chgate SDK. `ParseCommandLine` turns arguments into a
// Command, `RunCommand` executes it against the given streams, and `RunCli` does both; tests call
// them in-process. main.cc only passes the process's argv and standard streams. The command model
// and the exit codes are in command.h.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cli/command.h"

namespace chgate::cli {

// Parses the arguments (without the program name). `--help` anywhere yields kHelp with the right
// text. Returns InvalidArgument (a usage error) for unknown subcommands or options, missing or
// malformed values.
absl::StatusOr<Command> ParseCommandLine(const std::vector<std::string>& args);

// Runs `command`; returns the exit code. Output goes to io.out, diagnostics to io.err.
int RunCommand(const Command& command, const CliIo& io);

// ParseCommandLine + RunCommand; usage errors print the message and a hint to io.err and
// return kExitUsage.
int RunCli(const std::vector<std::string>& args, const CliIo& io);

// The tool's help text (also printed by `chgate-cli --help`).
std::string ToolHelp();

}  // namespace chgate::cli
