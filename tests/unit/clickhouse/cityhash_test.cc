#include "server/clickhouse/compression/cityhash.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace chgate::clickhouse {
namespace {

// Rows of the vector file whose input frame is not shipped with the captures. They duplicate a
// checksum that the capture itself carries, so nothing else depends on them; any other missing
// file fails the test.
const std::set<std::string> kKnownMissingFrames = {
    "select_multiframe_zstd.frames/s2c_frame_at_101.frame.bin",
};

std::string WireHex(const Hash128& h) {
  std::string out;
  char buf[3];
  for (int half = 0; half < 2; ++half) {
    const uint64_t v = half == 0 ? h.low : h.high;
    for (int i = 0; i < 8; ++i) {
      std::snprintf(buf, sizeof(buf), "%02x", static_cast<unsigned>((v >> (8 * i)) & 0xff));
      out += buf;
    }
  }
  return out;
}

bool HexToBytes(const std::string& hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const std::string byte = hex.substr(i, 2);
    char* end = nullptr;
    const unsigned long v = std::strtoul(byte.c_str(), &end, 16);
    if (end != byte.c_str() + 2) return false;
    out->push_back(static_cast<char>(v));
  }
  return true;
}

std::vector<std::string> SplitTabs(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, '\t')) fields.push_back(field);
  if (!line.empty() && line.back() == '\t') fields.emplace_back();
  return fields;
}

class CityHashVectorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* env = std::getenv("CHGATE_TESTDATA_DIR");
    if (env == nullptr || *env == '\0') {
      GTEST_FAIL() << "CHGATE_TESTDATA_DIR is not set; point it at tests/testdata/native-18.16";
    }
    dir_ = env;
    if (!std::filesystem::is_directory(dir_)) {
      GTEST_FAIL() << "CHGATE_TESTDATA_DIR=" << dir_ << " is not a directory";
    }
  }

  std::filesystem::path dir_;
};

// Builds a row's input from its input_hex / input_source columns. Returns false with `*error`
// set if the row cannot be understood; sets `*missing` if it names a frame file that is absent.
bool BuildInput(const std::filesystem::path& dir, const std::string& input_hex,
                const std::string& source, std::string* input, std::string* frame_checksum,
                std::string* missing, std::string* error) {
  static const std::string kFramePrefix = "bytes 16..end of vectors/";
  unsigned first = 0;
  unsigned last = 0;
  unsigned modulus = 0;
  unsigned count_last = 0;
  if (source == "literal") {
    if (!HexToBytes(input_hex, input)) {
      *error = "bad input_hex";
      return false;
    }
  } else if (std::sscanf(source.c_str(), "bytes 0x%x..0x%x", &first, &last) == 2) {
    input->clear();
    for (unsigned b = first; b <= last; ++b) input->push_back(static_cast<char>(b));
  } else if (std::sscanf(source.c_str(), "byte i = i %% %u, i=0..%u", &modulus, &count_last) == 2 &&
             modulus != 0) {
    input->clear();
    for (unsigned i = 0; i <= count_last; ++i) input->push_back(static_cast<char>(i % modulus));
  } else if (source.rfind(kFramePrefix, 0) == 0) {
    const std::string rel = source.substr(
        kFramePrefix.size(), source.find(' ', kFramePrefix.size()) - kFramePrefix.size());
    std::ifstream f(dir / rel, std::ios::binary);
    if (!f) {
      *missing = rel;
      return true;
    }
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (bytes.size() < 16) {
      *error = rel + " is shorter than a checksum";
      return false;
    }
    *frame_checksum = bytes.substr(0, 16);
    *input = bytes.substr(16);
  } else {
    *error = "unrecognised input_source";
    return false;
  }
  // Where the file spells out input_hex, it must agree with the input built from the source.
  if (input_hex != "(see source)" && source != "literal") {
    std::string literal;
    if (!HexToBytes(input_hex, &literal) || literal != *input) {
      *error = "input_hex disagrees with input_source";
      return false;
    }
  }
  return true;
}

TEST_F(CityHashVectorsTest, MatchesEveryV102Vector) {
  std::ifstream tsv(dir_ / "cityhash128_v1_0_2_vectors.tsv");
  ASSERT_TRUE(tsv) << "cannot open " << (dir_ / "cityhash128_v1_0_2_vectors.tsv");
  std::string line;
  ASSERT_TRUE(std::getline(tsv, line)) << "empty vector file";
  std::map<std::string, size_t> column;
  const std::vector<std::string> header = SplitTabs(line);
  for (size_t i = 0; i < header.size(); ++i) column[header[i]] = i;
  size_t v11_column = header.size();
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i].rfind("cityhash128_v1_1_1", 0) == 0) v11_column = i;
  }
  for (const char* name :
       {"name", "length", "input_hex", "input_source", "cityhash128_v1_0_2_wire_bytes"}) {
    ASSERT_TRUE(column.count(name)) << "vector file has no column " << name;
  }
  ASSERT_LT(v11_column, header.size()) << "vector file has no v1.1.1 column";

  int checked = 0;
  int known_missing = 0;
  while (std::getline(tsv, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> f = SplitTabs(line);
    ASSERT_EQ(f.size(), header.size()) << line;
    const std::string& name = f[column["name"]];
    SCOPED_TRACE(name);
    std::string input;
    std::string frame_checksum;
    std::string missing;
    std::string error;
    ASSERT_TRUE(BuildInput(dir_, f[column["input_hex"]], f[column["input_source"]], &input,
                           &frame_checksum, &missing, &error))
        << error;
    if (!missing.empty()) {
      ASSERT_TRUE(kKnownMissingFrames.count(missing)) << "vector input file missing: " << missing;
      std::printf("note: vector %s not checked: %s is not in the captures\n", name.c_str(),
                  missing.c_str());
      ++known_missing;
      continue;
    }
    EXPECT_EQ(std::to_string(input.size()), f[column["length"]]);
    const Hash128 h = CityHash128(input.data(), input.size());
    const std::string want = f[column["cityhash128_v1_0_2_wire_bytes"]];
    EXPECT_EQ(WireHex(h), want);
    // Rows with distinct v1.0.2 and v1.1.1 values prove that this is not the newer algorithm.
    if (f[v11_column] != want) {
      EXPECT_NE(WireHex(h), f[v11_column]);
    }
    if (!frame_checksum.empty()) {
      std::string want_bytes;
      ASSERT_TRUE(HexToBytes(want, &want_bytes));
      EXPECT_EQ(frame_checksum, want_bytes) << "the frame's own checksum differs from the row";
    }
    ++checked;
  }
  EXPECT_GE(checked, 13);
  EXPECT_LE(known_missing, static_cast<int>(kKnownMissingFrames.size()));
}

// Vectors that need no test data, so the algorithm is pinned even when run alone.
TEST(CityHash128Test, MatchesKnownValuesWithoutTestdata) {
  EXPECT_EQ(WireHex(CityHash128(nullptr, 0)), "2b9ac064fc9df03d291ee592c340b53c");
  EXPECT_EQ(WireHex(CityHash128("abc", 3)), "fe48775795f10f907e0db2556317a913");
  EXPECT_EQ(WireHex(CityHash128("abcdefgh", 8)), "b4af68d27442a34b3406f18709a90efb");
  // The empty-block LZ4 frame body of PROTOCOL.md §6.
  const char frame_body[] =
      "\x82\x14\x00\x00\x00\x0a\x00\x00\x00\xa0\x01\x00\x02\xff\xff\xff\xff"
      "\x00\x00\x00";
  EXPECT_EQ(WireHex(CityHash128(frame_body, sizeof(frame_body) - 1)),
            "a783ac6cd55c7a7cb5ac46bddb86e214");
  std::string ramp;
  for (int i = 0; i < 1000; ++i) ramp.push_back(static_cast<char>(i % 251));
  EXPECT_EQ(WireHex(CityHash128(ramp.data(), ramp.size())), "450f243c877c37445d221cca06d1a19d");
}

// Every length takes one of several code paths (0, 1-3, 4-8, 9-15, 16-143 via CityMurmur,
// 144+ with a 0..127-byte tail). Each input sits alone in an exact-size heap block so that
// AddressSanitizer catches any read past either end.
TEST(CityHash128Test, ReadsOnlyItsInputAtEveryLength) {
  std::set<std::pair<uint64_t, uint64_t>> seen;
  for (size_t len = 0; len <= 700; ++len) {
    auto buf = std::make_unique<char[]>(len == 0 ? 1 : len);
    for (size_t i = 0; i < len; ++i) buf[i] = static_cast<char>((i * 131 + 7) & 0xff);
    const Hash128 h = CityHash128(buf.get() + (len == 0 ? 1 : 0), len);
    seen.insert({h.low, h.high});
  }
  EXPECT_EQ(seen.size(), 701u);
}

TEST(CityHash128Test, DependsOnEveryByte) {
  std::string data(300, 'x');
  const Hash128 base = CityHash128(data.data(), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    std::string flipped = data;
    flipped[i] ^= 1;
    EXPECT_NE(CityHash128(flipped.data(), flipped.size()), base) << "byte " << i;
  }
}

}  // namespace
}  // namespace chgate::clickhouse
