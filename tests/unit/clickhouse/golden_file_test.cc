// The loader of tests/testdata/golden/: what it accepts, and that a malformed file fails loudly
// rather than quietly dropping cases.
#include "tests/unit/clickhouse/golden_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace chgate::clickhouse::testing {
namespace {

using ::testing::HasSubstr;

TEST(GoldenFileTest, ReadsCasesWithBytesAndEscapedText) {
  absl::StatusOr<std::vector<GoldenColumn>> cases = ParseGoldenColumns(
      "# a comment\n"
      "column a 2\n"
      "type Nullable(String)\n"
      "data 01 00\n"
      "data 0003 6162 63\n"
      "tsv \\\\N\n"
      "tsv a\\tb\\x05\n"
      "\n"
      "column b 0\n"
      "type Tuple()\n");
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_EQ(cases->size(), 2u);
  const GoldenColumn& a = (*cases)[0];
  EXPECT_EQ(a.column, "a");
  EXPECT_EQ(a.type, "Nullable(String)");
  EXPECT_EQ(a.rows, 2u);
  EXPECT_EQ(a.data, std::string("\x01\x00\x00\x03"
                                "abc",
                                7));
  EXPECT_EQ(a.tsv, (std::vector<std::string>{"\\N", "a\tb\x05"}));
  EXPECT_EQ((*cases)[1].type, "Tuple()");
  EXPECT_TRUE((*cases)[1].tsv.empty());
}

TEST(GoldenFileTest, MalformedFilesNameTheLine) {
  const struct {
    const char* text;
    const char* error;
  } cases[] = {
      {"type UInt8\n", "line 1: an item before the first `column`"},
      {"column a\n", "line 1: expected `column <name> <rows>`"},
      {"column a 1\ntype UInt8\ndata 0\ntsv 0\n", "line 3: `data` is not whole bytes of hex"},
      {"column a 1\ntype UInt8\ndata zz\n", "line 3: `data` is not whole bytes of hex"},
      {"column a 1\ntype String\ntsv \\q\n", "line 3: a bad escape"},
      {"column a 1\ntype String\ntsv \\x4\n", "line 3: a bad escape"},
      {"column a 1\ntype UInt8\nrows 1\n", "line 3: unknown item `rows`"},
      {"column a 2\ntype UInt8\ndata 0001\ntsv 0\n", "case a has 1 tsv lines for 2 rows"},
      {"column a 0\ncolumn b 0\ntype UInt8\n", "line 2: case a has no type"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<std::vector<GoldenColumn>> parsed = ParseGoldenColumns(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(c.error)) << c.text;
  }
}

TEST(GoldenFileTest, AMissingFileIsOneFailingCaseNamingIt) {
  const std::vector<GoldenColumn> cases = LoadGoldenColumns("no-such-file.golden");
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].column, "golden_file_error");
  EXPECT_THAT(cases[0].type, HasSubstr("no-such-file.golden: cannot be read"));
}

TEST(GoldenFileTest, TheProjectsGoldenFilesParse) {
  for (const char* name : {"new-types.golden", "more-types.golden"}) {
    const std::vector<GoldenColumn> cases = LoadGoldenColumns(name);
    ASSERT_FALSE(cases.empty()) << name;
    EXPECT_NE(cases[0].column, "golden_file_error") << cases[0].type;
  }
}

}  // namespace
}  // namespace chgate::clickhouse::testing
