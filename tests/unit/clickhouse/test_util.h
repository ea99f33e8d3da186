// Helpers shared by the native-protocol tests: the capture directory, file reading, hex, block
// encoding and decoding, cell text, a dead loopback port.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "server/clickhouse/block.h"
#include "server/clickhouse/columns/column.h"

namespace chgate::clickhouse::testing {

// The directory of the 18.16 captures (CHGATE_TESTDATA_DIR); fails the test when unset.
std::string TestDataDir();
// The whole file; fails the test (and returns "") when it cannot be read.
std::string ReadFileOrDie(const std::string& path);
std::string Hex(std::string_view bytes);
std::string Unhex(std::string_view hex);
// The value of one hex digit, or -1.
int HexNibble(char c);
// Files in `dir` whose names end with `suffix`, sorted.
std::vector<std::string> ListFiles(const std::string& dir, std::string_view suffix);
// The bytes WriteBlock writes for `block` at `revision`.
std::string EncodeBlock(const Block& block, uint64_t revision);
// ReadBlock of exactly `bytes` at `revision` (DataLoss when bytes are left over).
absl::Status DecodeBlock(std::string_view bytes, uint64_t revision, Block* block);
// The TabSeparated text of one cell (`nested`: as inside an Array, Tuple or Map).
std::string FormatCell(const Column& column, size_t row, bool nested = false);
// A loopback port with nothing listening (bound, then closed): connecting is refused.
uint16_t DeadLoopbackPort();

}  // namespace chgate::clickhouse::testing
