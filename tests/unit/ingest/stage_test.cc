// Staging a request against its table's header: the elements of a Nested structure (Array
// columns `n.a`, `n.b`) must have arrays of one size in each row, or ClickHouse refuses the whole
// INSERT and with it every other request of the batch. Both the rows and the typed block paths.
#include "server/ingest/stage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "server/clickhouse/columns/factory.h"
#include "server/ingest/value_error.h"
#include "tests/unit/ingest/test_values.h"

namespace chgate::ingest {
namespace {

using testing::Array;
using ::testing::HasSubstr;
using testing::Int;
using testing::Str;
using testing::TestRows;
using testing::TestValue;

TableSchema Schema(const std::vector<std::pair<std::string, std::string>>& columns) {
  TableSchema s;
  s.server_time_zone = "UTC";
  for (const auto& [name, type] : columns) {
    s.names.push_back(name);
    s.prototypes.push_back(*clickhouse::CreateColumn(type));
  }
  return s;
}

const std::vector<std::pair<std::string, std::string>> kNested = {
    {"id", "UInt64"}, {"n.a", "Array(UInt8)"}, {"n.b", "Array(String)"}};

absl::Status StageRows(const TableSchema& s, std::vector<std::vector<TestValue>> rows) {
  TestRows source(std::move(rows));
  Request r{.rows = &source};
  return Stage(r, s, ConvertOptions{}).status();
}

// The rows as a typed block, converted the way the columnar path would give them.
std::unique_ptr<clickhouse::Block> TypedBlock(const TableSchema& s,
                                              std::vector<std::vector<TestValue>> rows) {
  auto block = std::make_unique<clickhouse::Block>();
  std::vector<clickhouse::Column*> columns;
  for (size_t i = 0; i < s.names.size(); ++i) {
    block->AddColumn(s.names[i], s.prototypes[i]->CloneEmpty());
    columns.push_back(block->column(i).column.get());
  }
  TestRows source(std::move(rows));
  EXPECT_TRUE(AppendRows(source, s.names, columns, ConvertOptions{}).ok());
  return block;
}

TEST(StageNestedTest, RowsWithElementsOfOneSizeInEachRowAreStaged) {
  const TableSchema s = Schema(kNested);
  EXPECT_TRUE(StageRows(s, {{Int(1), Array({Int(1), Int(2)}), Array({Str("a"), Str("b")})},
                            {Int(2), Array({}), Array({})},
                            {Int(3), Array({Int(3)}), Array({Str("c")})}})
                  .ok());
}

TEST(StageNestedTest, ARowWhoseElementsDifferInSizeIsRefusedNamingTheRowAndBothColumns) {
  const TableSchema s = Schema(kNested);
  const absl::Status st = StageRows(s, {{Int(1), Array({Int(1)}), Array({Str("a")})},
                                        {Int(2), Array({Int(1), Int(2)}), Array({Str("a")})}});
  ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("row 1: columns 'n.a' and 'n.b'"));
  EXPECT_THAT(st.message(), HasSubstr("Nested structure 'n'"));
  EXPECT_THAT(st.message(), HasSubstr("'n.a' has 2 elements and 'n.b' 1"));
  const std::optional<ValueError> e = GetValueError(st);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->row, 1u);
  EXPECT_EQ(e->column, "n.b");
  EXPECT_EQ(e->type, "Array(String)");
}

TEST(StageNestedTest, OnlyArraysSharingAPrefixAsClickHouseReadsItAreCompared) {
  // Different prefixes, a non-Array column with a dot, a Map, names whose dot is first or last:
  // none of them are elements of one Nested structure.
  const TableSchema s = Schema({{"a.x", "Array(UInt8)"},
                                {"b.x", "Array(UInt8)"},
                                {"a.n", "UInt8"},
                                {"a.m", "Map(String, UInt8)"},
                                {".a", "Array(UInt8)"},
                                {".b", "Array(UInt8)"},
                                {"c.", "Array(UInt8)"},
                                {"c.d", "Array(UInt8)"}});
  const std::vector<TestValue> row = {Array({Int(1)}),
                                      Array({Int(1), Int(2)}),
                                      Int(7),
                                      testing::Map({{Str("k"), Int(1)}, {Str("l"), Int(2)}}),
                                      Array({}),
                                      Array({Int(1)}),
                                      Array({Int(1), Int(2), Int(3)}),
                                      Array({})};
  EXPECT_TRUE(StageRows(s, {row}).ok());
  // A third prefix shared only on its first dot: `a.x.y` is an element of `a`.
  const TableSchema deeper = Schema({{"a.x", "Array(UInt8)"}, {"a.x.y", "Array(UInt8)"}});
  EXPECT_EQ(StageRows(deeper, {{Array({Int(1)}), Array({})}}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StageNestedTest, ATypedBlockIsCheckedTooAndLeftUntouchedWhenRefused) {
  const TableSchema s = Schema(kNested);
  std::unique_ptr<clickhouse::Block> bad =
      TypedBlock(s, {{Int(1), Array({Int(1), Int(2)}), Array({Str("a"), Str("b")})},
                     {Int(2), Array({}), Array({Str("a")})}});
  Request r{.block = bad.get()};
  const absl::Status st = Stage(r, s, ConvertOptions{}).status();
  ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("row 1: columns 'n.a' and 'n.b'"));
  ASSERT_EQ(bad->column_count(), 3u);
  for (size_t c = 0; c < 3; ++c) {
    ASSERT_NE(bad->column(c).column, nullptr) << "column " << c << " was taken";
    EXPECT_EQ(bad->column(c).column->Size(), 2u);
  }

  std::unique_ptr<clickhouse::Block> good =
      TypedBlock(s, {{Int(1), Array({Int(1)}), Array({Str("a")})}});
  Request ok{.block = good.get()};
  absl::StatusOr<std::unique_ptr<clickhouse::Block>> staged = Stage(ok, s, ConvertOptions{});
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_EQ((*staged)->rows(), 1u);
}

TEST(StageNestedTest, ATypedBlockOfTheWrongTypeNamesTheColumnInItsValueError) {
  const TableSchema s = Schema({{"id", "UInt64"}});
  std::unique_ptr<clickhouse::Block> block =
      TypedBlock(Schema({{"id", "UInt32"}}), {{Int(1)}, {Int(2)}});
  Request r{.block = block.get()};
  const absl::Status st = Stage(r, s, ConvertOptions{}).status();
  ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  const std::optional<ValueError> e = GetValueError(st);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->column, "id");
  EXPECT_EQ(e->type, "UInt64");
}

}  // namespace
}  // namespace chgate::ingest
