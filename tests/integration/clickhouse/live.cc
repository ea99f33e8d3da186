#include "tests/integration/clickhouse/live.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/clickhouse/text_form.h"

namespace chgate::clickhouse::testing {

LiveEndpoint LiveServer() {
  LiveEndpoint ep;
  if (const char* env = std::getenv("CHGATE_CLICKHOUSE"); env != nullptr && *env != '\0') {
    std::string text(env);
    size_t colon = text.rfind(':');
    if (colon != std::string::npos) {
      ep.host = text.substr(0, colon);
      uint32_t port = 0;
      if (absl::SimpleAtoi(text.substr(colon + 1), &port)) ep.port = static_cast<uint16_t>(port);
    } else {
      ep.host = text;
    }
  }
  return ep;
}

ConnectionOptions LiveOptions(CompressionMethod compression) {
  LiveEndpoint ep = LiveServer();
  return ConnectionOptions{.host = ep.host,
                           .port = ep.port,
                           .compression = compression,
                           .connect_timeout = absl::Seconds(5),
                           .handshake_timeout = absl::Seconds(10),
                           .read_timeout = absl::Seconds(60),
                           .write_timeout = absl::Seconds(60)};
}

std::unique_ptr<Connection> ConnectOrSkip(CompressionMethod compression) {
  auto conn = Connection::Connect(LiveOptions(compression));
  if (conn.ok()) return *std::move(conn);
  const char* require = std::getenv("CHGATE_REQUIRE_CLICKHOUSE");
  if (require != nullptr && std::string(require) == "1") {
    ADD_FAILURE() << "CHGATE_REQUIRE_CLICKHOUSE=1 but the ClickHouse server is unreachable: "
                  << conn.status();
  } else {
    GTEST_MESSAGE_("no ClickHouse server (start one with deploy/clickhouse/clickhousectl.sh start)",
                   ::testing::TestPartResult::kSkip);
  }
  return nullptr;
}

std::string ClickHouseClient(const std::string& sql, const std::string& stdin_data) {
  LiveEndpoint ep = LiveServer();
  const char* client = std::getenv("CHGATE_CLICKHOUSE_CLIENT");
  std::string binary = client != nullptr ? client : "clickhouse-client";
  char in_path[] = "/tmp/chgate-chtest-in-XXXXXX";
  char out_path[] = "/tmp/chgate-chtest-out-XXXXXX";
  int in_fd = ::mkstemp(in_path);
  int out_fd = ::mkstemp(out_path);
  if (in_fd < 0 || out_fd < 0) {
    ADD_FAILURE() << "mkstemp failed";
    return "";
  }
  if (!stdin_data.empty() && ::write(in_fd, stdin_data.data(), stdin_data.size()) !=
                                 static_cast<ssize_t>(stdin_data.size())) {
    ADD_FAILURE() << "write failed";
  }
  ::close(in_fd);
  ::close(out_fd);
  pid_t pid = ::fork();
  if (pid == 0) {
    std::freopen(in_path, "rb", stdin);
    std::freopen(out_path, "wb", stdout);
    std::string port = std::to_string(ep.port);
    ::execlp(binary.c_str(), binary.c_str(), "--host", ep.host.c_str(), "--port", port.c_str(),
             "--query", sql.c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::ifstream out(out_path, std::ios::binary);
  std::string result((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  ::unlink(in_path);
  ::unlink(out_path);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    ADD_FAILURE() << binary << " failed (status " << status << ") for: " << sql;
  }
  return result;
}

std::string CompressionName(CompressionMethod method) {
  switch (method) {
    case CompressionMethod::kNone:
      return "None";
    case CompressionMethod::kLz4:
      return "Lz4";
    case CompressionMethod::kZstd:
      return "Zstd";
  }
  return "Unknown";
}

void Exec(Connection& conn, const std::string& sql) {
  absl::Status st = conn.Select({.query = sql}, [](const Block&) { return absl::OkStatus(); });
  ASSERT_TRUE(st.ok()) << sql << ": " << st;
}

absl::StatusOr<std::string> SelectTsv(Connection& conn, const std::string& sql) {
  std::string out;
  absl::Status st = conn.Select({.query = sql}, [&](const Block& block) {
    for (size_t row = 0; row < block.rows(); ++row) {
      for (size_t c = 0; c < block.column_count(); ++c) {
        if (c != 0) out.push_back('\t');
        AppendTsvValue(*block.column(c).column, row, false, &out);
      }
      out.push_back('\n');
    }
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  return out;
}

}  // namespace chgate::clickhouse::testing
