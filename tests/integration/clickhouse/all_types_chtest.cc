// Every type the 18.16 server supports, both directions: rows inserted with clickhouse-client
// must decode in our SELECT to exactly the text clickhouse-client prints, and the blocks we
// decoded, inserted back with our client into a twin table, must print identically again.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/integration/clickhouse/live.h"

namespace chgate::clickhouse::testing {
namespace {

struct TypeCase {
  std::string name;  // test name suffix
  std::string type;
  std::vector<std::string> values;  // TabSeparated text of column v, one per row
};

std::vector<TypeCase> Cases() {
  std::string mib(1 << 20, 'm');
  return {
      {"Decimal32", "Decimal(9, 2)", {"0.00", "-0.01", "9999999.99", "-9999999.99", "123.45"}},
      {"Decimal64",
       "Decimal(18, 4)",
       {"-1.0001", "0.0000", "99999999999999.9999", "-99999999999999.9999"}},
      {"Decimal128",
       "Decimal(38, 10)",
       {"9999999999999999999999999999.9999999999", "-9999999999999999999999999999.9999999999",
        "0.0000000001", "12345678901234567890.0123456789"}},
      {"Uuid",
       "UUID",
       {"61f0c404-5cb3-11e7-907b-a6006ad3dba0", "00000000-0000-0000-0000-000000000001",
        "ffffffff-ffff-ffff-ffff-fffffffffffe"}},
      // The server prints enum values in value order.
      {"Enum8",
       "Enum8('c,d' = -128, 'a' = 1, 'b\\'q' = 2, 'e)' = 127)",
       {"a", "b\\'q", "c,d", "e)"}},
      {"Enum16", "Enum16('x' = -1000, 'y' = 1000)", {"x", "y"}},
      {"Tuple",
       "Tuple(UInt8, String, Nullable(Int64))",
       {"(1,'a',NULL)", "(255,'',-9223372036854775808)"}},
      // (18.16 stores an Array(Tuple(...)) column as Nested subcolumns, so that case is covered by
      // the golden tests instead.)
      {"LowCardinalityString", "LowCardinality(String)", {"red", "green", "red", "", "green"}},
      {"LowCardinalityNullable", "LowCardinality(Nullable(String))", {"\\N", "lc", "lc", ""}},
      {"ArrayLowCardinalityNullable",
       "Array(LowCardinality(Nullable(String)))",
       {"[]", "['a',NULL,'a']", "[NULL]", "['']"}},
      {"NullableDecimal", "Nullable(Decimal(18, 4))", {"\\N", "1.2345", "-0.0001"}},
      {"NestedNullableStrings",
       "Array(Array(Nullable(String)))",
       {"[[NULL,'a'],[]]", "[]", "[[]]"}},
      {"DateBoundaries", "Date", {"1970-01-02", "2000-02-29", "2105-12-31"}},
      {"DateTimeBoundaries",
       "DateTime('UTC')",
       {"1970-01-01 00:00:01", "2038-01-19 03:14:08", "2105-12-31 23:59:59"}},
      {"DateTimeZone",
       "DateTime('America/New_York')",
       {"1970-01-01 00:00:00", "2021-03-14 03:30:00"}},
      {"Strings",
       "String",
       {"", "\\0\\t\\n\\\\", "\xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80", mib}},
      {"FixedStringBytes", "FixedString(3)", {"\\0\\0\\0", "\xe2\x82\xac", "ab\\0"}},
      {"Float32", "Float32", {"0", "-1.5", "3.4028235e38", "1e-7", "inf", "-inf", "nan"}},
      {"Float64",
       "Float64",
       {"0.1", "1e100", "-2.2250738585072014e-308", "1.7976931348623157e308"}},
  };
}

class AllTypesTest : public ::testing::TestWithParam<TypeCase> {};

TEST_P(AllTypesTest, RoundTripsBothWays) {
  const TypeCase& tc = GetParam();
  auto reader = ConnectOrSkip(CompressionMethod::kLz4);
  if (reader == nullptr) return;
  auto writer = ConnectOrSkip(CompressionMethod::kZstd);
  if (writer == nullptr) return;
  const std::string src = absl::StrCat("chgate_chtest.types_", tc.name, "_src");
  const std::string dst = absl::StrCat("chgate_chtest.types_", tc.name, "_dst");
  Exec(*reader, "CREATE DATABASE IF NOT EXISTS chgate_chtest");
  for (const std::string& t : {src, dst}) {
    Exec(*reader, absl::StrCat("DROP TABLE IF EXISTS ", t));
    Exec(*reader,
         absl::StrCat("CREATE TABLE ", t, " (id UInt32, v ", tc.type, ") ENGINE = Memory"));
  }
  std::string tsv;
  for (size_t i = 0; i < tc.values.size(); ++i) absl::StrAppend(&tsv, i, "\t", tc.values[i], "\n");
  ClickHouseClient(absl::StrCat("INSERT INTO ", src, " FORMAT TabSeparated"), tsv);
  const std::string printed =
      ClickHouseClient(absl::StrCat("SELECT * FROM ", src, " ORDER BY id FORMAT TabSeparated"));
  ASSERT_FALSE(printed.empty());

  // Our SELECT, and each decoded block inserted into the twin table by the other connection.
  std::string ours;
  uint64_t rows = 0;
  absl::Status st = reader->Select(
      {.query = absl::StrCat("SELECT * FROM ", src, " ORDER BY id")}, [&](const Block& block) {
        EXPECT_EQ(block.column(1).column->type_name(), tc.type);
        for (size_t row = 0; row < block.rows(); ++row) {
          block.column(0).column->FormatValue(row, false, &ours);
          ours.push_back('\t');
          block.column(1).column->FormatValue(row, false, &ours);
          ours.push_back('\n');
        }
        rows += block.rows();
        const Block* blocks[] = {&block};
        return writer->Insert({.query = absl::StrCat("INSERT INTO ", dst, " VALUES")}, blocks);
      });
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(rows, tc.values.size());
  EXPECT_EQ(ours, printed);
  EXPECT_EQ(
      ClickHouseClient(absl::StrCat("SELECT * FROM ", dst, " ORDER BY id FORMAT TabSeparated")),
      printed);
}

INSTANTIATE_TEST_SUITE_P(Types, AllTypesTest, ::testing::ValuesIn(Cases()),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(AllTypesReadOnlyTest, NullableNothingAndExpressions) {
  auto conn = ConnectOrSkip();
  if (conn == nullptr) return;
  auto out = SelectTsv(*conn,
                       "SELECT NULL, [NULL], toInt8(-1), toDecimal32(-1.5, 3), "
                       "toIntervalSecond(5), toFixedString('ab', 3)");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            ClickHouseClient("SELECT NULL, [NULL], toInt8(-1), toDecimal32(-1.5, 3), "
                             "toIntervalSecond(5), toFixedString('ab', 3) FORMAT TabSeparated"));
}

}  // namespace
}  // namespace chgate::clickhouse::testing
