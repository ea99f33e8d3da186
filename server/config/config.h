// chgate's configuration: every option with its default, read from flags (`--name=value` or
// `--name value`) and environment variables (`CHGATE_NAME`, dashes as underscores; flags win),
// then validated. The ClickHouse password is read from a file, never from a flag.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace chgate::config {

struct Endpoint {
  std::string host;
  uint16_t port = 9000;
};

struct Config {
  std::vector<Endpoint> endpoints = {{"127.0.0.1", 9000}};
  std::string user = "default";
  std::string password;  // from password_file
  std::string password_file;
  std::string database;
  std::string compression = "lz4";  // none | lz4 | zstd
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration read_timeout = absl::Seconds(300);
  std::string query;  // run this query, print the result as TSV and exit
  bool help = false;
};

// Parses argv and the environment. Returns InvalidArgument with a message naming the option for
// unknown options and bad values; NotFound if the password file cannot be read.
absl::StatusOr<Config> Parse(int argc, const char* const* argv, const char* const* envp);

// The --help text: every option, its environment variable and its default.
std::string Usage();

// "host:port[,host:port...]" -> endpoints (port defaults to 9000).
absl::StatusOr<std::vector<Endpoint>> ParseEndpoints(absl::string_view text);

}  // namespace chgate::config
