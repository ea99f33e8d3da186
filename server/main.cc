// chgate entry point. For now: connect to ClickHouse, report the server and the negotiated
// protocol revision, and run --query, printing the result as TSV.
#include <cstdio>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/connection.h"
#include "server/config/config.h"

extern char** environ;

namespace {

int Run(int argc, char** argv) {
  auto config = chgate::config::Parse(argc, argv, environ);
  if (!config.ok()) {
    std::cerr << "chgate: " << config.status().message() << "\n";
    return 2;
  }
  if (config->help) {
    std::cout << chgate::config::Usage();
    return 0;
  }
  namespace ch = chgate::clickhouse;
  absl::Status last;
  for (const auto& endpoint : config->endpoints) {
    ch::ConnectionOptions options{
        .host = endpoint.host,
        .port = endpoint.port,
        .database = config->database,
        .user = config->user,
        .password = config->password,
        .compression = config->compression == "none"   ? ch::CompressionMethod::kNone
                       : config->compression == "zstd" ? ch::CompressionMethod::kZstd
                                                       : ch::CompressionMethod::kLz4,
        .connect_timeout = config->connect_timeout,
        .handshake_timeout = config->connect_timeout,
        .read_timeout = config->read_timeout,
    };
    auto conn = ch::Connection::Connect(options);
    if (!conn.ok()) {
      std::cerr << "chgate: " << conn.status().message() << "\n";
      last = conn.status();
      continue;
    }
    const ch::ServerInfo& info = (*conn)->server_info();
    std::cerr << "connected to " << info.name << " " << info.version_major << "."
              << info.version_minor << "." << info.version_patch << " at " << endpoint.host
              << ":" << endpoint.port << " (server revision " << info.revision
              << ", negotiated " << (*conn)->revision() << ", time zone " << info.timezone
              << ")\n";
    if (config->query.empty()) return 0;
    std::string line;
    ch::QueryResult result;
    absl::Status status = (*conn)->Select(
        {.query = config->query},
        [&](const ch::Block& block) {
          for (size_t row = 0; row < block.rows(); ++row) {
            line.clear();
            for (size_t c = 0; c < block.column_count(); ++c) {
              if (c != 0) line.push_back('\t');
              block.column(c).column->FormatValue(row, false, &line);
            }
            line.push_back('\n');
            std::fwrite(line.data(), 1, line.size(), stdout);
          }
          return absl::OkStatus();
        },
        &result);
    std::fflush(stdout);
    if (!status.ok()) {
      std::cerr << "chgate: query failed: " << status.message() << "\n";
      return 1;
    }
    std::cerr << result.rows << " rows in " << result.blocks << " blocks; received "
              << (*conn)->received_bytes() << " bytes from the socket, decoded "
              << (*conn)->decoded_bytes() << " bytes from compressed frames\n";
    return 0;
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
