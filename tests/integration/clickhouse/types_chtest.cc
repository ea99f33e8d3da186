// Every core column type through the local ClickHouse, both ways: rows inserted by our client
// must print exactly so in clickhouse-client's TabSeparated output, and rows inserted by
// clickhouse-client must decode to the same text in our SELECT. NULLs, empty strings and arrays,
// nested arrays and each type's extremes included.
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/block_parts.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/nullable.h"
#include "server/clickhouse/columns/string.h"
#include "tests/integration/clickhouse/live.h"

namespace chgate::clickhouse::testing {
namespace {

constexpr char kTable[] = "chgate_chtest.core_types";
constexpr char kSchema[] =
    "(u8 UInt8, u16 UInt16, u32 UInt32, u64 UInt64, i8 Int8, i16 Int16, i32 Int32, i64 Int64, "
    "f32 Float32, f64 Float64, s String, fs FixedString(4), d Date, dt DateTime, "
    "dtz DateTime('Asia/Tokyo'), ns Nullable(String), ni Nullable(Int32), a Array(UInt64), "
    "aas Array(Array(String)), an Array(Nullable(Int8))) ENGINE = Memory";

// What ClickHouse prints for the three rows (ORDER BY u8).
constexpr char kExpectedTsv[] =
    "0\t0\t0\t0\t-128\t-32768\t-2147483648\t-9223372036854775808\t-0.5\t-2.25\t\tab\\0\\0\t"
    "1970-01-02\t1970-01-01 00:00:01\t1970-01-01 09:00:01\t\\N\t\\N\t[]\t[[]]\t[NULL]\n"
    "7\t7\t7\t7\t7\t7\t7\t7\t1e-7\t2.2250738585072014e-308\tx\t\\0\\0\\0\\0\t2000-02-29\t"
    "2000-02-29 12:00:00\t2000-02-29 21:00:00\tnull?\t-5\t[0]\t[['tab\\there','q\\'s']]\t[]\n"
    "255\t65535\t4294967295\t18446744073709551615\t127\t32767\t2147483647\t9223372036854775807\t"
    "3.4028235e38\t1e100\ttab\\there\\nnl\\\\ q\\'s "
    "\xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82\t"
    "abcd\t2105-12-31\t2099-12-31 23:59:59\t2038-01-19 12:14:07\t\t0\t[1,2,18446744073709551615]\t"
    "[['a','b'],[],['']]\t[1,NULL,-128]\n";

template <typename T>
ColumnPtr Fixed(const std::string& type, std::initializer_list<T> values) {
  ColumnPtr col = *CreateColumn(type);
  auto& fixed = static_cast<ColumnFixed&>(*col);
  for (T v : values) fixed.Append<T>(v);
  return col;
}

ColumnPtr Strings(const std::string& type, std::initializer_list<std::string_view> values) {
  ColumnPtr col = *CreateColumn(type);
  for (std::string_view v : values) {
    if (auto* s = dynamic_cast<ColumnString*>(col.get())) {
      s->Append(v);
    } else {
      auto& fixed = static_cast<ColumnFixed&>(*col);
      char buf[4] = {0, 0, 0, 0};
      std::memcpy(buf, v.data(), v.size());
      fixed.AppendRaw(buf);
    }
  }
  return col;
}

Block CoreTypesBlock() {
  using L8 = std::numeric_limits<int8_t>;
  using L16 = std::numeric_limits<int16_t>;
  using L32 = std::numeric_limits<int32_t>;
  using L64 = std::numeric_limits<int64_t>;
  Block b;
  b.AddColumn("u8", Fixed<uint8_t>("UInt8", {0, 7, 255}));
  b.AddColumn("u16", Fixed<uint16_t>("UInt16", {0, 7, 65535}));
  b.AddColumn("u32", Fixed<uint32_t>("UInt32", {0, 7, 4294967295u}));
  b.AddColumn("u64", Fixed<uint64_t>("UInt64", {0, 7, std::numeric_limits<uint64_t>::max()}));
  b.AddColumn("i8", Fixed<int8_t>("Int8", {L8::min(), 7, L8::max()}));
  b.AddColumn("i16", Fixed<int16_t>("Int16", {L16::min(), 7, L16::max()}));
  b.AddColumn("i32", Fixed<int32_t>("Int32", {L32::min(), 7, L32::max()}));
  b.AddColumn("i64", Fixed<int64_t>("Int64", {L64::min(), 7, L64::max()}));
  b.AddColumn("f32", Fixed<float>("Float32", {-0.5f, 1e-7f, 3.4028235e38f}));
  b.AddColumn("f64", Fixed<double>("Float64", {-2.25, 2.2250738585072014e-308, 1e100}));
  b.AddColumn(
      "s",
      Strings("String",
              {"", "x", "tab\there\nnl\\ q's \xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82"}));
  b.AddColumn("fs", Strings("FixedString(4)",
                            {std::string_view("ab", 2), std::string_view("\0\0\0\0", 4), "abcd"}));
  b.AddColumn("d", Fixed<uint16_t>("Date", {1, 11016, 49672}));
  b.AddColumn("dt", Fixed<uint32_t>("DateTime", {1, 951825600u, 4102444799u}));
  b.AddColumn("dtz", Fixed<uint32_t>("DateTime('Asia/Tokyo')", {1, 951825600u, 2147483647u}));

  ColumnPtr ns = *CreateColumn("Nullable(String)");
  auto& ns_col = static_cast<ColumnNullable&>(*ns);
  ns_col.AppendNull();
  ns_col.AppendNotNull();
  static_cast<ColumnString&>(*ns_col.nested()).Append("null?");
  ns_col.AppendNotNull();
  static_cast<ColumnString&>(*ns_col.nested()).Append("");
  b.AddColumn("ns", ns);

  ColumnPtr ni = *CreateColumn("Nullable(Int32)");
  auto& ni_col = static_cast<ColumnNullable&>(*ni);
  ni_col.AppendNull();
  ni_col.AppendNotNull();
  static_cast<ColumnFixed&>(*ni_col.nested()).Append<int32_t>(-5);
  ni_col.AppendNotNull();
  static_cast<ColumnFixed&>(*ni_col.nested()).Append<int32_t>(0);
  b.AddColumn("ni", ni);

  ColumnPtr a = *CreateColumn("Array(UInt64)");
  auto& a_col = static_cast<ColumnArray&>(*a);
  auto& a_items = static_cast<ColumnFixed&>(*a_col.nested());
  a_col.FinishRow();  // []
  a_items.Append<uint64_t>(0);
  a_col.FinishRow();  // [0]
  for (uint64_t v : {uint64_t{1}, uint64_t{2}, std::numeric_limits<uint64_t>::max()}) {
    a_items.Append<uint64_t>(v);
  }
  a_col.FinishRow();
  b.AddColumn("a", a);

  ColumnPtr aas = *CreateColumn("Array(Array(String))");
  auto& outer = static_cast<ColumnArray&>(*aas);
  auto& inner = static_cast<ColumnArray&>(*outer.nested());
  auto& leaf = static_cast<ColumnString&>(*inner.nested());
  inner.FinishRow();  // row 0: [[]]
  outer.FinishRow();
  leaf.Append("tab\there");
  leaf.Append("q's");
  inner.FinishRow();  // row 1: [['tab\there','q\'s']]
  outer.FinishRow();
  leaf.Append("a");
  leaf.Append("b");
  inner.FinishRow();
  inner.FinishRow();
  leaf.Append("");
  inner.FinishRow();  // row 2: [['a','b'],[],['']]
  outer.FinishRow();
  b.AddColumn("aas", aas);

  ColumnPtr an = *CreateColumn("Array(Nullable(Int8))");
  auto& an_col = static_cast<ColumnArray&>(*an);
  auto& an_items = static_cast<ColumnNullable&>(*an_col.nested());
  auto& an_values = static_cast<ColumnFixed&>(*an_items.nested());
  an_items.AppendNull();
  an_col.FinishRow();  // [NULL]
  an_col.FinishRow();  // []
  an_items.AppendNotNull();
  an_values.Append<int8_t>(1);
  an_items.AppendNull();
  an_items.AppendNotNull();
  an_values.Append<int8_t>(-128);
  an_col.FinishRow();  // [1,NULL,-128]
  b.AddColumn("an", an);
  return b;
}

class CoreTypesTest : public ::testing::TestWithParam<CompressionMethod> {
 protected:
  void SetUp() override {
    conn_ = ConnectOrSkip(GetParam());
    if (conn_ == nullptr) return;
    Exec(*conn_, "CREATE DATABASE IF NOT EXISTS chgate_chtest");
    Exec(*conn_, absl::StrCat("DROP TABLE IF EXISTS ", kTable));
    Exec(*conn_, absl::StrCat("CREATE TABLE ", kTable, " ", kSchema));
  }
  std::unique_ptr<Connection> conn_;
};

TEST_P(CoreTypesTest, OurInsertPrintsExactlyInClickHouseClient) {
  if (conn_ == nullptr) return;
  Block block = CoreTypesBlock();
  const Block* blocks[] = {&block};
  QueryResult result;
  absl::Status st =
      conn_->Insert({.query = absl::StrCat("INSERT INTO ", kTable, " VALUES")}, blocks, &result);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(result.rows, 3u);
  EXPECT_EQ(
      ClickHouseClient(absl::StrCat("SELECT * FROM ", kTable, " ORDER BY u8 FORMAT TabSeparated")),
      kExpectedTsv);
  // And our own SELECT decodes the same text.
  auto ours = SelectTsv(*conn_, absl::StrCat("SELECT * FROM ", kTable, " ORDER BY u8"));
  ASSERT_TRUE(ours.ok()) << ours.status();
  EXPECT_EQ(*ours, kExpectedTsv);
}

TEST_P(CoreTypesTest, ClickHouseClientInsertDecodesExactlyInOurSelect) {
  if (conn_ == nullptr) return;
  ClickHouseClient(absl::StrCat("INSERT INTO ", kTable, " FORMAT TabSeparated"), kExpectedTsv);
  auto ours = SelectTsv(*conn_, absl::StrCat("SELECT * FROM ", kTable, " ORDER BY u8"));
  ASSERT_TRUE(ours.ok()) << ours.status();
  EXPECT_EQ(*ours, kExpectedTsv);
}

TEST_P(CoreTypesTest, MismatchedColumnsAreRefusedBeforeAnyRowIsSent) {
  if (conn_ == nullptr) return;
  Block good = CoreTypesBlock();
  // A wrong name.
  Block renamed = CoreTypesBlock();
  renamed.column(3).name = "u64_typo";
  const Block* renamed_blocks[] = {&renamed};
  absl::Status st =
      conn_->Insert({.query = absl::StrCat("INSERT INTO ", kTable, " VALUES")}, renamed_blocks);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(std::string(st.message()).find("u64_typo"), std::string::npos) << st;
  // A wrong type.
  Block retyped = CoreTypesBlock();
  retyped.column(0).column = Fixed<uint16_t>("UInt16", {1, 2, 3});
  const Block* retyped_blocks[] = {&retyped};
  st = conn_->Insert({.query = absl::StrCat("INSERT INTO ", kTable, " VALUES")}, retyped_blocks);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(std::string(st.message()).find("UInt16"), std::string::npos) << st;
  // A missing column.
  Block narrow;
  narrow.AddColumn("u8", Fixed<uint8_t>("UInt8", {1}));
  const Block* narrow_blocks[] = {&narrow};
  st = conn_->Insert({.query = absl::StrCat("INSERT INTO ", kTable, " VALUES")}, narrow_blocks);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;

  EXPECT_TRUE(conn_->usable());
  EXPECT_EQ(ClickHouseClient(absl::StrCat("SELECT count() FROM ", kTable)), "0\n");
  // The connection still works for a correct insert.
  const Block* good_blocks[] = {&good};
  st = conn_->Insert({.query = absl::StrCat("INSERT INTO ", kTable, " VALUES")}, good_blocks);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(ClickHouseClient(absl::StrCat("SELECT count() FROM ", kTable)), "3\n");
}

INSTANTIATE_TEST_SUITE_P(Compression, CoreTypesTest,
                         ::testing::Values(CompressionMethod::kNone, CompressionMethod::kLz4,
                                           CompressionMethod::kZstd),
                         CompressionParamName());

TEST(LargeInsertTest, MillionRowsInManyFramesArriveIntact) {
  for (CompressionMethod method :
       {CompressionMethod::kNone, CompressionMethod::kLz4, CompressionMethod::kZstd}) {
    auto conn = ConnectOrSkip(method);
    if (conn == nullptr) return;
    Exec(*conn, "CREATE DATABASE IF NOT EXISTS chgate_chtest");
    Exec(*conn, "DROP TABLE IF EXISTS chgate_chtest.large");
    Exec(*conn, "CREATE TABLE chgate_chtest.large (n UInt64, s String) ENGINE = Memory");
    constexpr uint64_t kRows = 1000000;
    Block block;
    ColumnPtr n = *CreateColumn("UInt64");
    ColumnPtr s = *CreateColumn("String");
    for (uint64_t i = 0; i < kRows; ++i) {
      static_cast<ColumnFixed&>(*n).Append<uint64_t>(i * 3);
      static_cast<ColumnString&>(*s).Append(std::to_string(i));
    }
    block.AddColumn("n", n);
    block.AddColumn("s", s);
    const Block* blocks[] = {&block};
    absl::Status st = conn->Insert({.query = "INSERT INTO chgate_chtest.large VALUES"}, blocks);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(
        ClickHouseClient("SELECT count(), sum(n), sum(toUInt64(s)) FROM chgate_chtest.large"),
        absl::StrCat(kRows, "\t", 3 * kRows * (kRows - 1) / 2, "\t", kRows * (kRows - 1) / 2, "\n"))
        << "compression method " << static_cast<int>(method);
  }
}

// Rows `first`.. `first + rows` of (n UInt64, s String, f FixedString(3)); strings up to 3 KiB,
// so some bodies are referenced in place and frames end inside parts.
std::unique_ptr<Block> PartRows(uint64_t first, uint64_t rows) {
  auto block = std::make_unique<Block>();
  ColumnPtr n = *CreateColumn("UInt64");
  ColumnPtr s = *CreateColumn("String");
  ColumnPtr f = *CreateColumn("FixedString(3)");
  for (uint64_t i = first; i < first + rows; ++i) {
    static_cast<ColumnFixed&>(*n).Append<uint64_t>(i);
    static_cast<ColumnString&>(*s).Append(
        absl::StrCat(i, ":", std::string(i % 3001, static_cast<char>('a' + i % 26))));
    const char tag[3] = {static_cast<char>('A' + i % 26), static_cast<char>(i % 256), 'z'};
    static_cast<ColumnFixed&>(*f).AppendRaw(tag);
  }
  block->AddColumn("n", n);
  block->AddColumn("s", s);
  block->AddColumn("f", f);
  return block;
}

// An ingest batch's requests go out as one block written from their own memory (BlockParts):
// the server must store exactly the rows of one block holding them all, as one part.
TEST(BlockPartsLiveTest, PartsSentAsOneBlockLandAsOnePartWithEveryRow) {
  for (CompressionMethod method :
       {CompressionMethod::kNone, CompressionMethod::kLz4, CompressionMethod::kZstd}) {
    auto conn = ConnectOrSkip(method);
    if (conn == nullptr) return;
    Exec(*conn, "CREATE DATABASE IF NOT EXISTS chgate_chtest");
    for (const char* table : {"parts_sent", "parts_whole"}) {
      Exec(*conn, absl::StrCat("DROP TABLE IF EXISTS chgate_chtest.", table));
      Exec(*conn, absl::StrCat("CREATE TABLE chgate_chtest.", table,
                               " (n UInt64, s String, f FixedString(3)) "
                               "ENGINE = MergeTree ORDER BY n"));
    }
    std::vector<std::unique_ptr<Block>> parts;
    uint64_t first = 0;
    for (uint64_t rows : {700, 0, 1, 2500, 800}) {
      parts.push_back(PartRows(first, rows));
      first += rows;
    }
    const BlockParts block(std::move(parts));
    ASSERT_EQ(block.parts().size(), 5u) << "written in place";
    QueryResult result;
    absl::Status st =
        conn->Insert({.query = "INSERT INTO chgate_chtest.parts_sent VALUES"}, block, &result);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(result.rows, first);
    EXPECT_EQ(result.blocks, 1u);
    const std::unique_ptr<Block> whole = PartRows(0, first);
    const Block* one[] = {whole.get()};
    st = conn->Insert({.query = "INSERT INTO chgate_chtest.parts_whole VALUES"}, one);
    ASSERT_TRUE(st.ok()) << st;
    const std::string digest =
        "SELECT count(), sum(n), sum(cityHash64(n, s, f)), max(length(s)) FROM chgate_chtest.";
    const std::string sent = ClickHouseClient(digest + "parts_sent");
    EXPECT_EQ(sent, ClickHouseClient(digest + "parts_whole"))
        << "compression method " << static_cast<int>(method);
    EXPECT_EQ(sent.substr(0, sent.find('\t')), std::to_string(first));
    EXPECT_EQ(ClickHouseClient("SELECT count() FROM system.parts WHERE database = 'chgate_chtest' "
                               "AND table = 'parts_sent' AND active"),
              "1\n");
  }
}

}  // namespace
}  // namespace chgate::clickhouse::testing
