#include "tests/unit/clickhouse/test_util.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "server/clickhouse/text_form.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/gather.h"

namespace chgate::clickhouse::testing {

std::string TestDataDir() {
  const char* dir = std::getenv("CHGATE_TESTDATA_DIR");
  if (dir == nullptr || !std::filesystem::is_directory(dir)) {
    ADD_FAILURE() << "CHGATE_TESTDATA_DIR must name tests/testdata/native-18.16";
    return "";
  }
  return dir;
}

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

int HexNibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string Unhex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size();) {
    if (hex[i] == ' ') {
      ++i;
      continue;
    }
    out.push_back(static_cast<char>(HexNibble(hex[i]) * 16 + HexNibble(hex[i + 1])));
    i += 2;
  }
  return out;
}

std::vector<std::string> ListFiles(const std::string& dir, std::string_view suffix) {
  std::vector<std::string> out;
  if (dir.empty()) return out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(entry.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

uint16_t DeadLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string EncodeBlock(const Block& block, uint64_t revision) {
  GatherWriter w;
  WriteBlock(block, revision, w);
  return w.ToString();
}

absl::Status DecodeBlock(std::string_view bytes, uint64_t revision, Block* block) {
  MemoryReadBuffer in(bytes);
  if (absl::Status s = ReadBlock(in, revision, block); !s.ok()) return s;
  if (!in.AtEnd()) return absl::DataLossError("bytes left after the block");
  return absl::OkStatus();
}

std::string FormatCell(const Column& column, size_t row, bool nested) {
  std::string out;
  AppendTsvValue(column, row, nested, &out);
  return out;
}

}  // namespace chgate::clickhouse::testing
