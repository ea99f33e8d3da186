#include "client/cli/cli.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/cli/bench.h"
#include "client/cli/subcommands.h"
#include "client/sdk/client.h"
#include "client/sdk/health.h"

namespace chgate::cli {

int RunHealth(const Command& command, const CliIo& io) {
  absl::StatusOr<client::ClientOptions> options = ClientOptionsFor(command);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      options.ok() ? client::CreateChannel(command.addr, *options)
                   : absl::StatusOr<std::shared_ptr<grpc::Channel>>(options.status());
  if (!channel.ok()) {
    PrintError(io, client::FormatError(channel.status()));
    return kExitUsage;
  }
  absl::StatusOr<client::ServingStatus> status =
      client::CheckHealth(*channel, command.health.service, command.timeout);
  if (!status.ok()) {
    PrintError(io, absl::StrCat("health check of ", command.addr,
                                " failed: ", client::FormatError(status.status())));
    return ExitCodeFor(status.status());
  }
  *io.out << client::ServingStatusName(*status) << "\n";
  return *status == client::ServingStatus::kServing ? kExitOk : kExitFailure;
}

int RunCommand(const Command& command, const CliIo& io) {
  switch (command.subcommand) {
    case Subcommand::kHelp:
      *io.out << command.help;
      return kExitOk;
    case Subcommand::kInsert:
      return RunInsert(command, io);
    case Subcommand::kQuery:
      return RunQuery(command, io);
    case Subcommand::kBench:
      return RunBench(command, io);
    case Subcommand::kHealth:
      return RunHealth(command, io);
  }
  return kExitUsage;
}

int RunCli(const std::vector<std::string>& args, const CliIo& io) {
  absl::StatusOr<Command> command = ParseCommandLine(args);
  if (!command.ok()) {
    PrintError(io, command.status().message());
    *io.err << "Run 'chgate-cli --help' for usage.\n";
    return kExitUsage;
  }
  return RunCommand(*command, io);
}

}  // namespace chgate::cli
