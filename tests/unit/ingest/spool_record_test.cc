// The spool's rows record: a block written into it and read back is the same block, byte for
// byte on the wire, for every kind of column. A persisted batch's INSERT is built from the blocks
// kept in memory since their sync, or, after a restart or when the cache is full, from the
// records read back: both must send the identical block (a replay's deduplication rests on it).
#include "server/ingest/spool_record.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/protocol/revision.h"
#include "server/ingest/convert.h"
#include "tests/unit/ingest/test_values.h"

namespace chgate::ingest {
namespace {

using namespace ::chgate::ingest::testing;  // NOLINT(build/namespaces): value builders

std::string Wire(const clickhouse::Block& block) {
  clickhouse::GatherWriter out;
  clickhouse::WriteBlock(block, clickhouse::revision::kClient, out);
  return out.ToString();
}

struct Case {
  std::string type;
  std::vector<TestValue> values;
};

std::vector<Case> Cases() {
  return {
      {"UInt8", {UInt(0), UInt(255)}},
      {"UInt64", {UInt(0), UInt(18446744073709551615u)}},
      {"Int32", {Int(-2147483648LL), Int(7)}},
      {"Int128", {Str("-170141183460469231731687303715884105728"), Int(1)}},
      {"UInt256",
       {Str("115792089237316195423570985008687907853269984665640564039457584007913129639935"),
        UInt(0)}},
      {"Float32", {Double(1.5), Double(-0.0)}},
      {"Float64", {Double(3.25), Double(1e300)}},
      {"Bool", {Bool(true), Bool(false)}},
      {"Decimal(18, 4)", {Str("12345.6789"), Str("-1")}},
      {"Decimal(38, 10)", {Str("1234567890123456789012345678.0123456789"), Int(0)}},
      {"String", {Str("tab\there"), Bytes(std::string("\0\xff", 2))}},
      {"FixedString(4)", {Str("ab"), Str("abcd")}},
      {"Date", {Str("2024-02-29"), Str("1970-01-01")}},
      {"Date32", {Str("1900-01-01"), Str("2299-12-31")}},
      {"DateTime('UTC')", {Ts(1700000000), Str("2024-01-02 03:04:05")}},
      {"DateTime64(6, 'UTC')", {Ts(1700000000, 123456000), Str("2024-01-02 03:04:05.000001")}},
      {"UUID",
       {Str("61f0c404-5cb3-11e7-907b-a6006ad3dba0"), Str("00000000-0000-0000-0000-000000000000")}},
      {"IPv4", {Str("10.1.2.3"), Str("0.0.0.0")}},
      {"IPv6", {Str("2001:db8::1"), Str("::ffff:1.2.3.4")}},
      {"Enum8('a' = 1, 'b' = -2)", {Str("a"), Str("b")}},
      {"Enum16('x' = 1000)", {Str("x"), Str("x")}},
      {"Nullable(String)", {Null(), Str("s")}},
      {"Nullable(UInt32)", {UInt(5), Null()}},
      {"Array(UInt16)", {Array({UInt(1), UInt(2)}), Array({})}},
      {"Array(Nullable(String))", {Array({Null(), Str("a")}), Array({Str("")})}},
      {"Array(Array(Int8))", {Array({Array({Int(1)}), Array({})}), Array({})}},
      {"Tuple(UInt8, String)", {Tuple({UInt(1), Str("a")}), Tuple({UInt(2), Str("b")})}},
      {"Map(String, UInt64)", {Map({{Str("k"), UInt(1)}}), Map({})}},
      {"LowCardinality(String)", {Str("same"), Str("same")}},
      {"LowCardinality(Nullable(String))", {Null(), Str("v")}},
      {"Array(LowCardinality(String))", {Array({Str("a"), Str("b")}), Array({Str("a")})}},
  };
}

TEST(SpoolRecordTest, EveryTypeReadBackIsTheBlockThatWasWrittenByteForByte) {
  clickhouse::Block block;
  std::vector<std::string> names;
  for (const Case& c : Cases()) {
    absl::StatusOr<clickhouse::ColumnPtr> column = clickhouse::CreateColumn(c.type);
    ASSERT_TRUE(column.ok()) << c.type << ": " << column.status();
    for (const TestValue& v : c.values) {
      const absl::Status st = AppendValue(v.ref(), **column, ConvertOptions{});
      ASSERT_TRUE(st.ok()) << c.type << ": " << st;
    }
    names.push_back("c" + std::to_string(names.size()));
    block.AddColumn(names.back(), *column);
  }
  ASSERT_EQ(block.rows(), 2u);
  const std::string record = EncodeRowsRecord({"db", "t"}, names, "key", block);
  clickhouse::Block back;
  absl::StatusOr<SpoolRecordHeader> h = DecodeSpoolRecord(record, &back);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->rows, 2u);
  EXPECT_EQ(h->idempotency_key, "key");
  ASSERT_EQ(back.column_count(), block.column_count());
  for (size_t i = 0; i < block.column_count(); ++i) {
    EXPECT_EQ(back.column(i).column->type_name(), block.column(i).column->type_name());
    clickhouse::Block one, other;
    one.AddColumn(block.column(i).name, block.column(i).column);
    other.AddColumn(back.column(i).name, back.column(i).column);
    EXPECT_EQ(Wire(other), Wire(one)) << block.column(i).column->type_name();
  }
  EXPECT_EQ(Wire(back), Wire(block));
}

}  // namespace
}  // namespace chgate::ingest
