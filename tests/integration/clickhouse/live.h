// Access to the local ClickHouse for integration tests: CHGATE_CLICKHOUSE=host:port names it
// (default 127.0.0.1:29000, the server of deploy/clickhouse/clickhousectl.sh). When it cannot be
// reached the tests skip, unless CHGATE_REQUIRE_CLICKHOUSE=1 (as in CI), where that is a failure.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "server/clickhouse/connection.h"

namespace chgate::clickhouse::testing {

struct LiveEndpoint {
  std::string host = "127.0.0.1";
  uint16_t port = 29000;
};

LiveEndpoint LiveServer();
ConnectionOptions LiveOptions(CompressionMethod compression = CompressionMethod::kLz4);

// Connects, or skips/fails the test as described above (use with ASSERT_NO_FATAL_FAILURE and
// check for nullptr).
std::unique_ptr<Connection> ConnectOrSkip(CompressionMethod compression = CompressionMethod::kLz4);

// Runs `sql` with clickhouse-client against the same server; returns its stdout (TSV) or fails
// the test when the client exits non-zero. `stdin_data` is piped to the client when non-empty.
std::string ClickHouseClient(const std::string& sql, const std::string& stdin_data = "");

// A test-name suffix for a compression method ("None", "Lz4", "Zstd").
std::string CompressionName(CompressionMethod method);
// Parameter name generator for suites parameterized on the compression method.
struct CompressionParamName {
  template <typename Info>
  std::string operator()(const Info& info) const {
    return CompressionName(info.param);
  }
};

// Runs a statement with our connection; fails the test on error.
void Exec(Connection& conn, const std::string& sql);

// All rows of a query as TSV text rendered by our columns.
absl::StatusOr<std::string> SelectTsv(Connection& conn, const std::string& sql);

}  // namespace chgate::clickhouse::testing
