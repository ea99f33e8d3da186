#include "client/cli/command.h"

#include <ostream>
#include <string>
#include <utility>

#include "client/sdk/client.h"

namespace chgate::cli {

absl::StatusOr<client::ClientOptions> ClientOptionsFor(const Command& command) {
  client::ClientOptions options{.default_timeout = command.timeout, .tls = command.tls};
  if (!command.token_file.empty()) {
    absl::StatusOr<std::string> token = client::ReadTokenFile(command.token_file);
    if (!token.ok()) return token.status();
    options.bearer_token = *std::move(token);
  }
  options.traceparent = command.traceparent;
  options.tracestate = command.tracestate;
  return options;
}

absl::StatusOr<std::unique_ptr<client::Client>> ClientFor(const Command& command) {
  absl::StatusOr<client::ClientOptions> options = ClientOptionsFor(command);
  if (!options.ok()) return options.status();
  return client::Client::Create(command.addr, *std::move(options));
}

void PrintError(const CliIo& io, absl::string_view what) {
  *io.err << "chgate-cli: " << what << "\n";
}

int ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  if (status.code() == absl::StatusCode::kUnavailable) return kExitUnavailable;
  return kExitFailure;
}

}  // namespace chgate::cli
