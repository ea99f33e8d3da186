// Helpers shared by the native-protocol tests: the capture directory, file reading, hex, a dead
// loopback port.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chgate::clickhouse::testing {

// The directory of the 18.16 captures (CHGATE_TESTDATA_DIR); fails the test when unset.
std::string TestDataDir();
// The whole file; fails the test (and returns "") when it cannot be read.
std::string ReadFileOrDie(const std::string& path);
std::string Hex(std::string_view bytes);
std::string Unhex(std::string_view hex);
// Files in `dir` whose names end with `suffix`, sorted.
std::vector<std::string> ListFiles(const std::string& dir, std::string_view suffix);
// A loopback port with nothing listening (bound, then closed): connecting is refused.
uint16_t DeadLoopbackPort();

}  // namespace chgate::clickhouse::testing
