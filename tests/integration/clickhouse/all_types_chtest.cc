// Every type the 18.16 server supports, both directions: rows inserted with clickhouse-client
// must decode in our SELECT to exactly the text clickhouse-client prints, and the blocks we
// decoded, inserted back with our client into a twin table, must print identically again.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/clickhouse/text_form.h"
#include "tests/integration/clickhouse/live.h"
#include "tests/integration/clickhouse/type_cases.h"

namespace chgate::clickhouse::testing {
namespace {

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
          AppendTsvValue(*block.column(0).column, row, false, &ours);
          ours.push_back('\t');
          AppendTsvValue(*block.column(1).column, row, false, &ours);
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

INSTANTIATE_TEST_SUITE_P(Types, AllTypesTest, ::testing::ValuesIn(AllTypeCases()),
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
