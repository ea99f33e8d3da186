// Columns: encode -> decode round trips through WriteBlock/ReadBlock for every core type, golden
// bytes for the layouts of PROTOCOL.md §7, TSV rendering, and corrupt or hostile input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/clickhouse/block.h"
#include "server/clickhouse/block_parts.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/low_cardinality.h"
#include "server/clickhouse/columns/nullable.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/columns/tuple.h"
#include "server/clickhouse/protocol/revision.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/gather.h"
#include "tests/unit/clickhouse/test_util.h"

namespace chgate::clickhouse {
namespace {

using ::chgate::clickhouse::testing::Hex;
using ::chgate::clickhouse::testing::Unhex;

constexpr uint64_t kRevision = 54412;  // what the 18.16 server negotiates

ColumnPtr Make(std::string_view type) {
  absl::StatusOr<ColumnPtr> c = CreateColumn(type);
  EXPECT_TRUE(c.ok()) << type << ": " << c.status();
  return c.ok() ? *c : nullptr;
}

template <typename T>
T& As(const ColumnPtr& c) {
  T* p = dynamic_cast<T*>(c.get());
  EXPECT_NE(p, nullptr) << c->type_name();
  return *p;
}

// The column's Native bytes: all prefixes, then the body.
std::string ColumnBytes(const Column& c) {
  GatherWriter w;
  c.SavePrefix(w);
  c.SaveBody(w);
  return w.ToString();
}

std::string Format(const Column& c, size_t row, bool nested = false) {
  return testing::FormatCell(c, row, nested);
}

std::vector<std::string> FormatAll(const Column& c) {
  std::vector<std::string> out;
  for (size_t i = 0; i < c.Size(); ++i) out.push_back(Format(c, i));
  return out;
}

std::string EncodeBlock(const Block& b, uint64_t revision = kRevision) {
  return testing::EncodeBlock(b, revision);
}

// Sends `column` through WriteBlock/ReadBlock and checks that the decoded column has the same
// type, rows, text and bytes. Returns the decoded column.
ColumnPtr RoundTrip(const ColumnPtr& column, uint64_t revision = kRevision) {
  Block block;
  block.AddColumn("c", column);
  const std::string bytes = EncodeBlock(block, revision);
  MemoryReadBuffer in(bytes);
  Block back;
  absl::Status st = ReadBlock(in, revision, &back);
  EXPECT_TRUE(st.ok()) << column->type_name() << ": " << st;
  if (!st.ok()) return nullptr;
  EXPECT_TRUE(in.AtEnd());
  EXPECT_EQ(back.column_count(), 1u);
  EXPECT_EQ(back.column(0).name, "c");
  const ColumnPtr& got = back.column(0).column;
  EXPECT_EQ(got->type_name(), column->type_name());
  EXPECT_EQ(got->Size(), column->Size());
  EXPECT_EQ(FormatAll(*got), FormatAll(*column));
  EXPECT_EQ(Hex(EncodeBlock(back, revision)), Hex(bytes));
  // Reading past the values (discard_values) consumes exactly the same bytes.
  MemoryReadBuffer skip_in(bytes);
  Block skipped;
  absl::Status skip = ReadBlock(skip_in, revision, &skipped, /*discard_values=*/true);
  EXPECT_TRUE(skip.ok()) << column->type_name() << ": " << skip;
  EXPECT_TRUE(skip_in.AtEnd()) << column->type_name();
  EXPECT_EQ(skipped.rows(), column->Size());
  EXPECT_EQ(skipped.column_count(), 0u);
  return got;
}

// A one-column block body as the server writes it, around the given column bytes.
std::string BlockWith(std::string_view type, uint64_t rows, std::string_view column_bytes,
                      uint64_t revision = kRevision, int has_custom = -1) {
  ByteBuffer b;
  b.Append(Unhex("0100 02ffffffff 00"));
  b.AppendVarUInt(1);
  b.AppendVarUInt(rows);
  b.AppendString("c");
  b.AppendString(type);
  if (revision >= revision::kCustomSerialization) {
    b.PushBack(static_cast<char>(has_custom < 0 ? 0 : has_custom));
  }
  b.Append(column_bytes);
  return std::string(b.view());
}

absl::Status ReadOne(std::string_view bytes, Block* block, uint64_t revision = kRevision) {
  MemoryReadBuffer in(bytes);
  return ReadBlock(in, revision, block);
}

std::string U64(uint64_t v) {
  ByteBuffer b;
  b.AppendFixed(v);
  return std::string(b.view());
}

// ---------------------------------------------------------------------------------------------
// Round trips per type.

TEST(ColumnRoundTripTest, UnsignedIntegers) {
  ColumnPtr u8 = Make("UInt8");
  As<ColumnFixed>(u8).Append<uint8_t>(0);
  As<ColumnFixed>(u8).Append<uint8_t>(255);
  ColumnPtr u16 = Make("UInt16");
  As<ColumnFixed>(u16).Append<uint16_t>(0);
  As<ColumnFixed>(u16).Append<uint16_t>(65535);
  ColumnPtr u32 = Make("UInt32");
  As<ColumnFixed>(u32).Append<uint32_t>(0);
  As<ColumnFixed>(u32).Append<uint32_t>(4294967295u);
  ColumnPtr u64 = Make("UInt64");
  As<ColumnFixed>(u64).Append<uint64_t>(0);
  As<ColumnFixed>(u64).Append<uint64_t>(std::numeric_limits<uint64_t>::max());
  for (const ColumnPtr& c : {u8, u16, u32, u64}) RoundTrip(c);
  EXPECT_EQ(FormatAll(*u8), (std::vector<std::string>{"0", "255"}));
  EXPECT_EQ(FormatAll(*u16), (std::vector<std::string>{"0", "65535"}));
  EXPECT_EQ(FormatAll(*u32), (std::vector<std::string>{"0", "4294967295"}));
  EXPECT_EQ(FormatAll(*u64), (std::vector<std::string>{"0", "18446744073709551615"}));
  EXPECT_EQ(Hex(ColumnBytes(*u32)), "00000000ffffffff");
}

TEST(ColumnRoundTripTest, SignedIntegers) {
  ColumnPtr i8 = Make("Int8");
  for (int8_t v : {int8_t{-128}, int8_t{-1}, int8_t{127}}) As<ColumnFixed>(i8).Append(v);
  ColumnPtr i16 = Make("Int16");
  for (int16_t v : {int16_t{-32768}, int16_t{-1}, int16_t{32767}}) As<ColumnFixed>(i16).Append(v);
  ColumnPtr i32 = Make("Int32");
  for (int32_t v : {std::numeric_limits<int32_t>::min(), -1, 7}) As<ColumnFixed>(i32).Append(v);
  ColumnPtr i64 = Make("Int64");
  for (int64_t v :
       {std::numeric_limits<int64_t>::min(), int64_t{-1}, std::numeric_limits<int64_t>::max()}) {
    As<ColumnFixed>(i64).Append(v);
  }
  for (const ColumnPtr& c : {i8, i16, i32, i64}) RoundTrip(c);
  EXPECT_EQ(FormatAll(*i8), (std::vector<std::string>{"-128", "-1", "127"}));
  EXPECT_EQ(FormatAll(*i16), (std::vector<std::string>{"-32768", "-1", "32767"}));
  EXPECT_EQ(FormatAll(*i32), (std::vector<std::string>{"-2147483648", "-1", "7"}));
  EXPECT_EQ(FormatAll(*i64),
            (std::vector<std::string>{"-9223372036854775808", "-1", "9223372036854775807"}));
  EXPECT_EQ(Hex(ColumnBytes(*i16)), "0080ffffff7f");
}

TEST(ColumnRoundTripTest, Floats) {
  ColumnPtr f32 = Make("Float32");
  for (float v : {1.5f, 0.0f, -0.5f, 0.1f, std::numeric_limits<float>::infinity()}) {
    As<ColumnFixed>(f32).Append(v);
  }
  ColumnPtr f64 = Make("Float64");
  for (double v :
       {-2.25, 1e100, 3.141592653589793, 0.1, 1e20, 1e21, 1e-7, 0.000001, -0.0,
        -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    As<ColumnFixed>(f64).Append(v);
  }
  RoundTrip(f32);
  RoundTrip(f64);
  EXPECT_EQ(FormatAll(*f32), (std::vector<std::string>{"1.5", "0", "-0.5", "0.1", "inf"}));
  EXPECT_EQ(FormatAll(*f64), (std::vector<std::string>{"-2.25", "1e100", "3.141592653589793", "0.1",
                                                       "100000000000000000000", "1e21", "1e-7",
                                                       "0.000001", "-0", "-inf", "nan"}));
  EXPECT_EQ(Hex(ColumnBytes(*f32)).substr(0, 16), "0000c03f00000000");
}

TEST(ColumnRoundTripTest, Strings) {
  ColumnPtr s = Make("String");
  for (std::string_view v :
       {std::string_view(""), std::string_view("hello"), std::string_view("tab\there\nnew \\ 'q'"),
        std::string_view("\xd0\xbf\xd1\x80\xd0\xb8")}) {
    As<ColumnString>(s).Append(v);
  }
  As<ColumnString>(s).Append(std::string(300, 'x'));
  ColumnPtr back = RoundTrip(s);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(As<ColumnString>(back).At(2), "tab\there\nnew \\ 'q'");
  EXPECT_EQ(As<ColumnString>(back).At(4), std::string(300, 'x'));
  EXPECT_EQ(Format(*s, 2), "tab\\there\\nnew \\\\ \\'q\\'");
  EXPECT_EQ(Format(*s, 2, /*nested=*/true), "'tab\\there\\nnew \\\\ \\'q\\''");
  EXPECT_EQ(Hex(ColumnBytes(*s)).substr(0, 14), "000568656c6c6f");
  // 300 = VarUInt ac 02.
  EXPECT_NE(Hex(ColumnBytes(*s)).find("ac02" + Hex(std::string(300, 'x'))), std::string::npos);
}

TEST(ColumnStringTest, SlicesOfConcatenatedBytesAppendAsEachValueWould) {
  // Sizes around the short copy (16 bytes) and the one-byte length prefix (127/128), the last
  // value ending at data's end (no 16 bytes after it), and a first value not at 0.
  const std::vector<size_t> sizes = {0, 1, 15, 16, 17, 3, 127, 128, 300, 0, 16, 2};
  std::string data = "skipped";
  const uint64_t first_begin = data.size();
  std::vector<uint64_t> ends;
  std::vector<std::string> values;
  for (size_t i = 0; i < sizes.size(); ++i) {
    values.push_back(std::string(sizes[i], static_cast<char>('a' + i)));
    data += values.back();
    ends.push_back(data.size());
  }
  ColumnPtr sliced = Make("String");
  ColumnPtr one_by_one = Make("String");
  As<ColumnString>(sliced).Append("already here");
  As<ColumnString>(one_by_one).Append("already here");
  As<ColumnString>(sliced).AppendSlices(data, ends.data(), ends.size(), first_begin);
  for (const std::string& v : values) As<ColumnString>(one_by_one).Append(v);
  As<ColumnString>(sliced).AppendSlices(data, ends.data(), 0, first_begin);  // nothing
  // Appends after the slices land after them, not over the slack the copy used.
  As<ColumnString>(sliced).Append("after");
  As<ColumnString>(one_by_one).Append("after");

  ASSERT_EQ(sliced->Size(), values.size() + 2);
  EXPECT_EQ(As<ColumnString>(sliced).At(0), "already here");
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(As<ColumnString>(sliced).At(i + 1), values[i]) << "row " << i + 1;
  }
  EXPECT_EQ(As<ColumnString>(sliced).At(values.size() + 1), "after");
  EXPECT_EQ(Hex(ColumnBytes(*sliced)), Hex(ColumnBytes(*one_by_one)));
  EXPECT_EQ(sliced->ByteSize(), one_by_one->ByteSize());
}

TEST(ColumnRoundTripTest, FixedStringPadsWithZeros) {
  ColumnPtr fs = Make("FixedString(4)");
  As<ColumnFixed>(fs).AppendRaw("abcd");
  As<ColumnFixed>(fs).AppendRaw(std::string("ab\0\0", 4).data());
  As<ColumnFixed>(fs).AppendDefault();
  RoundTrip(fs);
  EXPECT_EQ(ColumnBytes(*fs), std::string("abcdab\0\0\0\0\0\0", 12));
  EXPECT_EQ(FormatAll(*fs), (std::vector<std::string>{"abcd", "ab\\0\\0", "\\0\\0\\0\\0"}));
  EXPECT_EQ(Format(*fs, 1, true), "'ab\\0\\0'");
  // The same padding through a LowCardinality dictionary of FixedString.
  ColumnPtr lc = Make("LowCardinality(FixedString(4))");
  ASSERT_TRUE(As<ColumnLowCardinality>(lc).AppendString("ab").ok());
  EXPECT_EQ(As<ColumnLowCardinality>(lc).AppendString("abcde").code(),
            absl::StatusCode::kInvalidArgument);
  ColumnPtr back = RoundTrip(lc);
  ASSERT_NE(back, nullptr);
  EXPECT_NE(ColumnBytes(*back).find(std::string("ab\0\0", 4)), std::string::npos);
}

TEST(ColumnRoundTripTest, DatesAndDateTimes) {
  ColumnPtr date = Make("Date");
  for (uint16_t v : {uint16_t{0}, uint16_t{17898}, uint16_t{11016}, uint16_t{65535}}) {
    As<ColumnFixed>(date).Append(v);
  }
  ColumnPtr dt = Make("DateTime");
  for (uint32_t v : {0u, 1546398245u, 951825600u, 4294967295u}) As<ColumnFixed>(dt).Append(v);
  ColumnPtr dtz = Make("DateTime('Europe/Moscow')");
  for (uint32_t v : {1546387445u, 2147472847u, 951814800u}) As<ColumnFixed>(dtz).Append(v);
  for (const ColumnPtr& c : {date, dt, dtz}) RoundTrip(c);
  EXPECT_EQ(FormatAll(*date),
            (std::vector<std::string>{"1970-01-01", "2019-01-02", "2000-02-29", "2149-06-06"}));
  EXPECT_EQ(FormatAll(*dt),
            (std::vector<std::string>{"1970-01-01 00:00:00", "2019-01-02 03:04:05",
                                      "2000-02-29 12:00:00", "2106-02-07 06:28:15"}));
  // The time zone only changes how the same UInt32 prints (PROTOCOL.md §7).
  EXPECT_EQ(FormatAll(*dtz), (std::vector<std::string>{"2019-01-02 03:04:05", "2038-01-19 03:14:07",
                                                       "2000-02-29 12:00:00"}));
  EXPECT_EQ(Hex(ColumnBytes(*dtz)).substr(0, 8), "f5ff2b5c");
  EXPECT_EQ(Format(*date, 1, true), "'2019-01-02'");
  EXPECT_EQ(Format(*dt, 1, true), "'2019-01-02 03:04:05'");
}

TEST(ColumnRoundTripTest, DateTime64WithPrecisionAndZone) {
  ColumnPtr c = Make("DateTime64(3, 'UTC')");
  As<ColumnFixed>(c).Append<int64_t>(1546398245123);
  As<ColumnFixed>(c).Append<int64_t>(-1);
  RoundTrip(c);
  EXPECT_EQ(FormatAll(*c),
            (std::vector<std::string>{"2019-01-02 03:04:05.123", "1969-12-31 23:59:59.999"}));
}

TEST(ColumnRoundTripTest, NullableWritesNullMapThenValues) {
  ColumnPtr c = Make("Nullable(String)");
  auto& n = As<ColumnNullable>(c);
  n.AppendNull();
  n.AppendNotNull();
  As<ColumnString>(n.nested()).Append("not null");
  n.AppendNotNull();
  As<ColumnString>(n.nested()).Append("x");
  RoundTrip(c);
  EXPECT_EQ(Hex(ColumnBytes(*c)),
            "010000"
            "00"
            "08" +
                Hex("not null") + "01" + Hex("x"));
  EXPECT_EQ(FormatAll(*c), (std::vector<std::string>{"\\N", "not null", "x"}));
  EXPECT_EQ(Format(*c, 0, true), "NULL");
}

// A part of rows `first`..`first + rows` with a String, a Nullable(String), an
// Array(Nullable(UInt32)) and a Tuple(UInt8, String) column, every value derived from its row.
Block ConcatPart(size_t first, size_t rows) {
  Block b;
  ColumnPtr s = Make("String");
  ColumnPtr n = Make("Nullable(String)");
  ColumnPtr a = Make("Array(Nullable(UInt32))");
  ColumnPtr t = Make("Tuple(UInt8, String)");
  auto& nullable = As<ColumnNullable>(n);
  auto& array = As<ColumnArray>(a);
  auto& elements = As<ColumnNullable>(array.nested());
  auto& tuple = As<ColumnTuple>(t);
  for (size_t r = first; r < first + rows; ++r) {
    const std::string text = "row " + std::to_string(r) + std::string(r % 7, 'x');
    As<ColumnString>(s).Append(text);
    if (r % 3 == 0) {
      nullable.AppendNull();
    } else {
      nullable.AppendNotNull();
      As<ColumnString>(nullable.nested()).Append(text);
    }
    for (size_t i = 0; i < r % 4; ++i) {
      if (i == 1) {
        elements.AppendNull();
      } else {
        elements.AppendNotNull();
        As<ColumnFixed>(elements.nested()).Append<uint32_t>(static_cast<uint32_t>(r * 10 + i));
      }
    }
    array.FinishRow();
    As<ColumnFixed>(tuple.element(0)).Append<uint8_t>(static_cast<uint8_t>(r));
    As<ColumnString>(tuple.element(1)).Append(text);
  }
  b.AddColumn("s", s);
  b.AddColumn("n", n);
  b.AddColumn("a", a);
  b.AddColumn("t", t);
  return b;
}

// Parts of consecutive rows, `make(first, rows)` for each of `sizes`; `*total` gets every part's
// rows together.
template <typename Make>
std::vector<Block> ConsecutiveParts(Make make, std::initializer_list<size_t> sizes, size_t* total) {
  std::vector<Block> parts;
  *total = 0;
  for (size_t rows : sizes) {
    parts.push_back(make(*total, rows));
    *total += rows;
  }
  return parts;
}

TEST(BlockConcatTest, GathersEveryPartInOrderAllocatingEachBufferOnce) {
  size_t first = 0;
  const std::vector<Block> parts = ConsecutiveParts(ConcatPart, {5, 1, 0, 80, 17}, &first);
  std::vector<const Block*> views;
  for (const Block& b : parts) views.push_back(&b);
  const Block joined = Block::Concat(views);
  ASSERT_TRUE(joined.Validate().ok());
  EXPECT_EQ(joined.rows(), first);
  // The same bytes as one part holding every row.
  EXPECT_EQ(Hex(testing::EncodeBlock(joined, kRevision)),
            Hex(testing::EncodeBlock(ConcatPart(0, first), kRevision)));
  // Reserved up front: no buffer grew past what its rows need.
  const auto& s = As<ColumnString>(joined.column(0).column);
  EXPECT_EQ(s.wire().capacity(), s.wire().size());
  const auto& n = As<ColumnNullable>(joined.column(1).column);
  EXPECT_EQ(n.nulls().capacity(), n.nulls().size());
  EXPECT_EQ(As<ColumnString>(n.nested()).wire().capacity(),
            As<ColumnString>(n.nested()).wire().size());
  const auto& a = As<ColumnArray>(joined.column(2).column);
  EXPECT_EQ(a.offsets().capacity(), a.offsets().size());
  const auto& t = As<ColumnTuple>(joined.column(3).column);
  EXPECT_EQ(As<ColumnString>(t.element(1)).wire().capacity(),
            As<ColumnString>(t.element(1)).wire().size());
  // One part is a copy; none is an empty block.
  const Block* one[] = {&parts[3]};
  EXPECT_EQ(Hex(testing::EncodeBlock(Block::Concat(one), kRevision)),
            Hex(testing::EncodeBlock(parts[3], kRevision)));
  EXPECT_EQ(Block::Concat({}).column_count(), 0u);
}

// A part of rows `first`..`first + rows` with a UInt64, a String and a FixedString(3) column:
// the kinds whose bodies concatenate.
Block FlatPart(size_t first, size_t rows) {
  Block b;
  ColumnPtr id = Make("UInt64");
  ColumnPtr msg = Make("String");
  ColumnPtr code = Make("FixedString(3)");
  for (size_t r = first; r < first + rows; ++r) {
    As<ColumnFixed>(id).Append<uint64_t>(r * 1000003);
    As<ColumnString>(msg).Append("message " + std::to_string(r) + std::string(r % 300, 'm'));
    const char tag[3] = {static_cast<char>('a' + r % 26), 'x', static_cast<char>(r % 256)};
    As<ColumnFixed>(code).AppendRaw(tag);
  }
  b.AddColumn("id", std::move(id));
  b.AddColumn("msg", std::move(msg));
  b.AddColumn("code", std::move(code));
  return b;
}

std::string EncodeParts(const BlockParts& parts, uint64_t revision) {
  GatherWriter out;
  WriteBlock(parts, revision, out);
  return out.ToString();
}

// Owned copies of `parts` (a BlockParts owns what it is given).
std::vector<std::unique_ptr<Block>> Owned(const std::vector<Block>& parts) {
  std::vector<std::unique_ptr<Block>> owned;
  for (const Block& b : parts) owned.push_back(std::make_unique<Block>(b.Clone()));
  return owned;
}

TEST(BlockPartsTest, FixedAndStringPartsGoOutFromTheirOwnMemoryAsTheGatheredBlock) {
  size_t first = 0;
  const std::vector<Block> parts = ConsecutiveParts(FlatPart, {5, 1, 0, 80, 17}, &first);
  BlockParts block(Owned(parts));
  ASSERT_TRUE(block.Validate().ok()) << block.Validate();
  EXPECT_EQ(block.parts().size(), 5u) << "kept as they are";
  EXPECT_EQ(block.rows(), first);
  const Block whole = FlatPart(0, first);
  EXPECT_EQ(block.ByteSize(), whole.ByteSize());
  // The same bytes as one block of every row, before and after the revision that added the
  // custom-serialization flag.
  for (uint64_t revision : {kRevision, uint64_t{54460}}) {
    EXPECT_EQ(Hex(EncodeParts(block, revision)), Hex(testing::EncodeBlock(whole, revision)))
        << revision;
  }
  EXPECT_EQ(Hex(testing::EncodeBlock(block.Gathered(), kRevision)),
            Hex(testing::EncodeBlock(whole, kRevision)));
  // Referenced, not copied: the big part's String body is in the message as its own memory.
  GatherWriter out;
  WriteBlock(block, kRevision, out);
  const auto& big = As<ColumnString>(block.parts()[3]->column(1).column);
  ASSERT_GE(big.wire().size(), GatherWriter::kMinReference);
  bool referenced = false;
  for (const iovec& v : out.spans()) referenced |= v.iov_base == big.wire().data();
  EXPECT_TRUE(referenced);
}

TEST(BlockPartsTest, PartsWithOtherColumnsAreGatheredWhenTaken) {
  size_t first = 0;
  const std::vector<Block> parts = ConsecutiveParts(ConcatPart, {3, 0, 40, 9}, &first);
  BlockParts block(Owned(parts));
  EXPECT_EQ(block.parts().size(), 1u) << "a Nullable's null map cannot be written in parts";
  EXPECT_EQ(block.rows(), first);
  EXPECT_EQ(Hex(EncodeParts(block, kRevision)),
            Hex(testing::EncodeBlock(ConcatPart(0, first), kRevision)));
}

TEST(BlockPartsTest, PartsTheCallerKeepsAndPartsItOwnsMix) {
  const Block kept = FlatPart(0, 30);  // the caller's, e.g. a cache's
  std::vector<std::unique_ptr<Block>> owned;
  owned.push_back(std::make_unique<Block>(FlatPart(30, 12)));
  const Block* views[] = {&kept, owned.front().get(), &kept};
  const BlockParts block(std::vector<const Block*>(std::begin(views), std::end(views)),
                         std::move(owned));
  EXPECT_EQ(block.parts().size(), 3u);
  EXPECT_EQ(block.rows(), 72u);
  std::vector<const Block*> again(std::begin(views), std::end(views));
  EXPECT_EQ(Hex(EncodeParts(block, kRevision)),
            Hex(testing::EncodeBlock(Block::Concat(again), kRevision)));
  EXPECT_EQ(block.parts()[0], &kept) << "not copied";

  // Parts that cannot be written in place are gathered, and the owned ones freed.
  const Block nullable = ConcatPart(0, 5);
  std::vector<std::unique_ptr<Block>> more;
  more.push_back(std::make_unique<Block>(ConcatPart(5, 5)));
  const BlockParts gathered({&nullable, more.front().get()}, std::move(more));
  ASSERT_EQ(gathered.parts().size(), 1u);
  EXPECT_NE(gathered.parts()[0], &nullable);
  EXPECT_EQ(Hex(EncodeParts(gathered, kRevision)),
            Hex(testing::EncodeBlock(ConcatPart(0, 10), kRevision)));
}

TEST(BlockPartsTest, OneBlockAndNoBlock) {
  const Block one = FlatPart(0, 20);
  const BlockParts view = BlockParts::View(one);
  EXPECT_EQ(&view.Gathered(), &one);
  EXPECT_EQ(Hex(EncodeParts(view, kRevision)), Hex(testing::EncodeBlock(one, kRevision)));
  const BlockParts none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(Hex(EncodeParts(none, kRevision)), Hex(testing::EncodeBlock(Block(), kRevision)));
}

TEST(BlockPartsTest, ValidateNamesAPartLaidOutOtherwise) {
  std::vector<std::unique_ptr<Block>> parts;
  parts.push_back(std::make_unique<Block>(FlatPart(0, 2)));
  auto other = std::make_unique<Block>();
  other->AddColumn("id", Make("UInt32"));
  other->AddColumn("msg", Make("String"));
  other->AddColumn("code", Make("FixedString(3)"));
  parts.push_back(std::move(other));
  const absl::Status st = BlockParts(std::move(parts)).Validate();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("UInt32"));
}

TEST(ColumnRoundTripTest, ArraysNestThreeDeep) {
  ColumnPtr c = Make("Array(Array(Array(UInt8)))");
  auto& outer = As<ColumnArray>(c);
  auto& mid = As<ColumnArray>(outer.nested());
  auto& inner = As<ColumnArray>(mid.nested());
  auto& values = As<ColumnFixed>(inner.nested());
  // Row 0: [[[1,2],[]],[[3]]]
  values.Append<uint8_t>(1);
  values.Append<uint8_t>(2);
  inner.FinishRow();
  inner.FinishRow();
  mid.FinishRow();
  values.Append<uint8_t>(3);
  inner.FinishRow();
  mid.FinishRow();
  outer.FinishRow();
  // Row 1: []
  outer.FinishRow();
  // Row 2: [[[]]]
  inner.FinishRow();
  mid.FinishRow();
  outer.FinishRow();
  RoundTrip(c);
  EXPECT_EQ(FormatAll(*c), (std::vector<std::string>{"[[[1,2],[]],[[3]]]", "[]", "[[[]]]"}));
  // Outer offsets, then the middle level's, then the innermost, then the data.
  EXPECT_EQ(Hex(ColumnBytes(*c)), Hex(U64(2) + U64(2) + U64(3) + U64(2) + U64(3) + U64(4) + U64(2) +
                                      U64(2) + U64(3) + U64(3) + "\x01\x02\x03"));
}

TEST(ColumnGoldenTest, NestedArrayOffsetsMatchTheCapture) {
  // [[a,b],[]],[],[['']] -> outer 2,2,3 / inner 2,2,3 / a,b,'' (PROTOCOL.md §7).
  ColumnPtr c = Make("Array(Array(String))");
  auto& outer = As<ColumnArray>(c);
  auto& inner = As<ColumnArray>(outer.nested());
  auto& strings = As<ColumnString>(inner.nested());
  strings.Append("a");
  strings.Append("b");
  inner.FinishRow();
  inner.FinishRow();
  outer.FinishRow();
  outer.FinishRow();
  strings.Append("");
  inner.FinishRow();
  outer.FinishRow();
  EXPECT_EQ(Hex(ColumnBytes(*c)), Hex(U64(2) + U64(2) + U64(3) + U64(2) + U64(2) + U64(3) +
                                      std::string("\x01"
                                                  "a"
                                                  "\x01"
                                                  "b"
                                                  "\x00",
                                                  5)));
  EXPECT_EQ(FormatAll(*c), (std::vector<std::string>{"[['a','b'],[]]", "[]", "[['']]"}));
  RoundTrip(c);
}

TEST(ColumnRoundTripTest, Decimals) {
  ColumnPtr d32 = Make("Decimal(9, 2)");
  for (int32_t v : {12345, -1, 999999999}) As<ColumnFixed>(d32).Append(v);
  ColumnPtr d64 = Make("Decimal(18, 4)");
  for (int64_t v : {int64_t{-10001}, int64_t{0}, int64_t{999999999999999999}}) {
    As<ColumnFixed>(d64).Append(v);
  }
  ColumnPtr d128 = Make("Decimal(38, 10)");
  // 12345678901234567890.0123456789 = 123456789012345678900123456789 * 10^-10, and -1.
  const std::string big = Unhex("15 d5 04 0c ee e0 73 c3 f6 0f e9 8e 01 00 00 00");
  As<ColumnFixed>(d128).AppendRaw(big.data());
  As<ColumnFixed>(d128).AppendRaw(std::string(16, '\xff').data());
  ColumnPtr d256 = Make("Decimal(76, 5)");
  As<ColumnFixed>(d256).AppendRaw(std::string(32, '\xff').data());
  for (const ColumnPtr& c : {d32, d64, d128, d256}) RoundTrip(c);
  EXPECT_EQ(FormatAll(*d32), (std::vector<std::string>{"123.45", "-0.01", "9999999.99"}));
  EXPECT_EQ(FormatAll(*d64),
            (std::vector<std::string>{"-1.0001", "0.0000", "99999999999999.9999"}));
  EXPECT_EQ(FormatAll(*d128),
            (std::vector<std::string>{"12345678901234567890.0123456789", "-0.0000000001"}));
  EXPECT_EQ(FormatAll(*d256), (std::vector<std::string>{"-0.00001"}));
  EXPECT_EQ(d32->type_name(), "Decimal(9, 2)");
  EXPECT_EQ(Make("Decimal32(2)")->type_name(), "Decimal32(2)");
}

TEST(ColumnGoldenTest, UuidIsHighHalfThenLowHalfEachLittleEndian) {
  ColumnPtr c = Make("UUID");
  // 61f0c404-5cb3-11e7-907b-a6006ad3dba0 as its two 64-bit halves.
  const std::string value = U64(0x61f0c4045cb311e7) + U64(0x907ba6006ad3dba0);
  As<ColumnFixed>(c).AppendRaw(value.data());
  ASSERT_EQ(c->Size(), 1u);
  EXPECT_EQ(Hex(ColumnBytes(*c)), "e711b35c04c4f061a0dbd36a00a67b90");
  EXPECT_EQ(Format(*c, 0), "61f0c404-5cb3-11e7-907b-a6006ad3dba0");
  EXPECT_EQ(Format(*c, 0, true), "'61f0c404-5cb3-11e7-907b-a6006ad3dba0'");
  RoundTrip(c);
}

TEST(ColumnRoundTripTest, EnumsPrintTheirNames) {
  ColumnPtr e8 = Make("Enum8('a' = 1, 'b' = 2)");
  for (int8_t v : {int8_t{1}, int8_t{2}, int8_t{1}}) As<ColumnFixed>(e8).Append(v);
  ColumnPtr e16 = Make("Enum16('x' = -1000, 'y' = 1000)");
  for (int16_t v : {int16_t{1000}, int16_t{-1000}, int16_t{5}}) As<ColumnFixed>(e16).Append(v);
  RoundTrip(e8);
  RoundTrip(e16);
  EXPECT_EQ(FormatAll(*e8), (std::vector<std::string>{"a", "b", "a"}));
  EXPECT_EQ(FormatAll(*e16), (std::vector<std::string>{"y", "x", "5"}));
  EXPECT_EQ(Format(*e8, 1, true), "'b'");
  EXPECT_EQ(Hex(ColumnBytes(*e16)), "e80318fc0500");
  // The default of an Enum is its first value.
  ColumnPtr d = Make("Enum8('z' = 7, 'w' = 3)");
  d->AppendDefault();
  EXPECT_EQ(Format(*d, 0), "z");
  int64_t v = 0;
  ASSERT_TRUE(As<ColumnFixed>(e16).EnumValue("x", &v));
  EXPECT_EQ(v, -1000);
}

TEST(ColumnRoundTripTest, TuplesWriteEachElementInTurn) {
  ColumnPtr c = Make("Tuple(UInt8, String)");
  auto& t = As<ColumnTuple>(c);
  As<ColumnFixed>(t.element(0)).Append<uint8_t>(7);
  As<ColumnString>(t.element(1)).Append("seven");
  As<ColumnFixed>(t.element(0)).Append<uint8_t>(255);
  As<ColumnString>(t.element(1)).Append("z");
  RoundTrip(c);
  EXPECT_EQ(Hex(ColumnBytes(*c)),
            "07ff"
            "05" +
                Hex("seven") + "01" + Hex("z"));
  EXPECT_EQ(FormatAll(*c), (std::vector<std::string>{"(7,'seven')", "(255,'z')"}));

  ColumnPtr named = Make("Tuple(a Nullable(Decimal(18, 4)), b Array(Tuple(UInt8, String)))");
  named->AppendDefault();
  ColumnPtr back = RoundTrip(named);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->type_name(), "Tuple(a Nullable(Decimal(18, 4)), b Array(Tuple(UInt8, String)))");
  EXPECT_EQ(Format(*back, 0), "(NULL,[])");
}

TEST(ColumnRoundTripTest, MapsAreArraysOfKeyValueTuples) {
  ColumnPtr c = Make("Map(String, Array(UInt64))");
  auto& map = As<ColumnArray>(c);
  ASSERT_TRUE(map.is_map());
  auto& kv = As<ColumnTuple>(map.nested());
  auto& keys = As<ColumnString>(kv.element(0));
  auto& values = As<ColumnArray>(kv.element(1));
  auto& numbers = As<ColumnFixed>(values.nested());
  keys.Append("a");
  numbers.Append<uint64_t>(1);
  numbers.Append<uint64_t>(2);
  values.FinishRow();
  keys.Append("b");
  values.FinishRow();
  map.FinishRow();
  map.FinishRow();  // {}
  RoundTrip(c);
  EXPECT_EQ(FormatAll(*c), (std::vector<std::string>{"{'a':[1,2],'b':[]}", "{}"}));
  // Map offsets, all keys, then all values (their own offsets and data).
  EXPECT_EQ(Hex(ColumnBytes(*c)), Hex(U64(2) + U64(2) +
                                      "\x01"
                                      "a"
                                      "\x01"
                                      "b" +
                                      U64(2) + U64(2) + U64(1) + U64(2)));
}

TEST(ColumnRoundTripTest, LowCardinalityDeduplicatesAndWritesItsDictionary) {
  ColumnPtr c = Make("LowCardinality(String)");
  auto& lc = As<ColumnLowCardinality>(c);
  for (std::string_view v : {"red", "green", "red"}) ASSERT_TRUE(lc.AppendString(v).ok());
  EXPECT_EQ(lc.dictionary()->Size(), 2u);
  RoundTrip(c);
  // version 1 | index type 0x600 (UInt8 keys) | 2 keys | red green | 3 rows | 0 1 0
  EXPECT_EQ(Hex(ColumnBytes(*c)), Hex(U64(1) + U64(0x600) + U64(2) + "\x03red\x05green" + U64(3) +
                                      std::string("\x00\x01\x00", 3)));
  EXPECT_EQ(FormatAll(*c), (std::vector<std::string>{"red", "green", "red"}));
}

// The index width follows the key count as the server's own encoder does: UInt8 up to 255 keys,
// UInt16 from 256 to 65,535, UInt32 from 65,536. Seen on 18.16 with
// `SELECT toLowCardinality(toString(number)) FROM numbers(N) FORMAT Native` (N values plus the
// default '' as keys): index type 0x600 at 255 keys, 0x601 at 256 and 65,535, 0x602 at 65,536.
TEST(ColumnRoundTripTest, LowCardinalityIndexWidthFollowsTheServersThresholds) {
  for (const auto& [keys, width_code] : std::vector<std::pair<size_t, uint64_t>>{
           {1, 0}, {255, 0}, {256, 1}, {65535, 1}, {65536, 2}}) {
    ColumnPtr c = Make("LowCardinality(String)");
    auto& lc = As<ColumnLowCardinality>(c);
    for (size_t k = 0; k < keys; ++k) ASSERT_TRUE(lc.AppendString(std::to_string(k)).ok());
    ASSERT_EQ(lc.dictionary()->Size(), keys);
    const std::string bytes = ColumnBytes(*c);
    // version (8 bytes), then the index type word.
    EXPECT_EQ(Hex(bytes.substr(8, 8)), Hex(U64(0x600 | width_code))) << keys << " keys";
    const ColumnPtr back = RoundTrip(c);
    ASSERT_NE(back, nullptr);
    EXPECT_EQ(Format(*back, keys - 1), std::to_string(keys - 1)) << keys << " keys";
  }
}

TEST(ColumnRoundTripTest, LowCardinalityNullableUsesKeyZeroForNull) {
  ColumnPtr c = Make("LowCardinality(Nullable(String))");
  auto& lc = As<ColumnLowCardinality>(c);
  ASSERT_TRUE(lc.nullable());
  lc.AppendNull();
  ASSERT_TRUE(lc.AppendString("lc").ok());
  ASSERT_TRUE(lc.AppendString("lc").ok());
  ASSERT_TRUE(lc.AppendString("").ok());  // an empty string is not NULL
  ColumnPtr back = RoundTrip(c);
  ASSERT_NE(back, nullptr);
  EXPECT_TRUE(As<ColumnLowCardinality>(back).IsNull(0));
  EXPECT_FALSE(As<ColumnLowCardinality>(back).IsNull(3));
  EXPECT_EQ(FormatAll(*c), (std::vector<std::string>{"\\N", "lc", "lc", ""}));
  EXPECT_EQ(Hex(ColumnBytes(*c)),
            Hex(U64(1) + U64(0x600) + U64(3) + std::string("\x00\x02lc\x00", 5) + U64(4) +
                std::string("\x00\x01\x01\x02", 4)));
}

TEST(ColumnRoundTripTest, LowCardinalityWidensKeysForLargeDictionaries) {
  ColumnPtr c = Make("LowCardinality(String)");
  auto& lc = As<ColumnLowCardinality>(c);
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(lc.AppendString(std::to_string(i)).ok());
  const std::string bytes = ColumnBytes(*c);
  EXPECT_EQ(Hex(bytes.substr(8, 8)), Hex(U64(0x601)));  // UInt16 keys
  RoundTrip(c);
}

TEST(ColumnGoldenTest, PrefixesOfNestedLowCardinalityComeBeforeAnyData) {
  ColumnPtr arr = Make("Array(LowCardinality(String))");
  auto& a = As<ColumnArray>(arr);
  ASSERT_TRUE(As<ColumnLowCardinality>(a.nested()).AppendString("x").ok());
  a.FinishRow();
  // [version][offsets][LowCardinality body]
  EXPECT_EQ(Hex(ColumnBytes(*arr)),
            Hex(U64(1) + U64(1) + U64(0x600) + U64(1) + "\x01x" + U64(1) + std::string("\x00", 1)));
  RoundTrip(arr);

  ColumnPtr tup = Make("Tuple(LowCardinality(String), LowCardinality(String))");
  auto& t = As<ColumnTuple>(tup);
  ASSERT_TRUE(As<ColumnLowCardinality>(t.element(0)).AppendString("a").ok());
  ASSERT_TRUE(As<ColumnLowCardinality>(t.element(1)).AppendString("b").ok());
  // [v][v][body1][body2]
  const std::string body_a = U64(0x600) + U64(1) +
                             "\x01"
                             "a" +
                             U64(1) + std::string("\x00", 1);
  const std::string body_b = U64(0x600) + U64(1) +
                             "\x01"
                             "b" +
                             U64(1) + std::string("\x00", 1);
  EXPECT_EQ(Hex(ColumnBytes(*tup)), Hex(U64(1) + U64(1) + body_a + body_b));
  RoundTrip(tup);
}

TEST(ColumnRoundTripTest, NestedValuesPrintQuotedInsideArraysAndTuples) {
  ColumnPtr c = Make("Array(Nullable(String))");
  auto& a = As<ColumnArray>(c);
  auto& n = As<ColumnNullable>(a.nested());
  n.AppendNotNull();
  As<ColumnString>(n.nested()).Append("x'y");
  n.AppendNull();
  a.FinishRow();
  EXPECT_EQ(Format(*c, 0), "['x\\'y',NULL]");
  RoundTrip(c);

  ColumnPtr dates = Make("Array(Date)");
  As<ColumnFixed>(As<ColumnArray>(dates).nested()).Append<uint16_t>(17898);
  As<ColumnArray>(dates).FinishRow();
  EXPECT_EQ(Format(*dates, 0), "['2019-01-02']");

  ColumnPtr decimals = Make("Array(Decimal(9, 2))");
  As<ColumnFixed>(As<ColumnArray>(decimals).nested()).Append<int32_t>(-1);
  As<ColumnArray>(decimals).FinishRow();
  EXPECT_EQ(Format(*decimals, 0), "[-0.01]");
}

TEST(ColumnRoundTripTest, EmptyColumnsCarryNoDataAndManyRowsSurvive) {
  // Rows = 0: the column data is absent, even the LowCardinality prefix.
  Block header;
  header.AddColumn("lc", Make("LowCardinality(String)"));
  header.AddColumn("s", Make("String"));
  const std::string bytes = EncodeBlock(header);
  EXPECT_EQ(Hex(bytes),
            "010002ffffffff00"
            "0200"
            "02" +
                Hex("lc") + "16" + Hex("LowCardinality(String)") + "01" + Hex("s") + "06" +
                Hex("String"));
  Block back;
  ASSERT_TRUE(ReadOne(bytes, &back).ok());
  EXPECT_EQ(back.column_count(), 2u);
  EXPECT_EQ(back.rows(), 0u);

  ColumnPtr big = Make("UInt64");
  for (uint64_t i = 0; i < 200000; ++i) As<ColumnFixed>(big).Append(i);
  RoundTrip(big);
}

TEST(ColumnRoundTripTest, RevisionWithCustomSerializationWritesTheFlag) {
  ColumnPtr c = Make("UInt8");
  As<ColumnFixed>(c).Append<uint8_t>(9);
  Block b;
  b.AddColumn("c", c);
  EXPECT_EQ(EncodeBlock(b, revision::kCustomSerialization),
            BlockWith("UInt8", 1, "\x09", revision::kCustomSerialization));
  RoundTrip(c, revision::kClient);
}

// ---------------------------------------------------------------------------------------------
// Corrupt and hostile input.

TEST(ColumnCorruptInputTest, DecreasingArrayOffsetsAreDataLoss) {
  Block block;
  absl::Status st = ReadOne(BlockWith("Array(UInt8)", 2, U64(3) + U64(1) + "\x01\x02\x03"), &block);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find("corrupt array offsets"), std::string_view::npos) << st;
}

TEST(ColumnCorruptInputTest, ArrayOffsetsBeyondAnyPlausibleSizeAreDataLoss) {
  Block block;
  absl::Status st = ReadOne(BlockWith("Array(UInt8)", 1, U64(uint64_t{1} << 62)), &block);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
}

TEST(ColumnCorruptInputTest, LowCardinalityIndexOutOfRangeIsDataLoss) {
  Block block;
  const std::string lc = U64(1) + U64(0x600) + U64(1) + "\x01x" + U64(1) + "\x05";
  absl::Status st = ReadOne(BlockWith("LowCardinality(String)", 1, lc), &block);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find("index 5"), std::string_view::npos) << st;
}

TEST(ColumnCorruptInputTest, LowCardinalityHeaderViolationsAreRejected) {
  struct Case {
    std::string bytes;
    absl::StatusCode code;
  };
  const std::string keys = U64(1) + "\x01x" + U64(1) + std::string("\x00", 1);
  for (const Case& c : {
           Case{U64(2) + U64(0x600) + keys, absl::StatusCode::kDataLoss},       // version 2
           Case{U64(1) + U64(0x700) + keys, absl::StatusCode::kUnimplemented},  // global dict
           Case{U64(1) + U64(0x400) + keys, absl::StatusCode::kDataLoss},  // no additional keys
           Case{U64(1) + U64(0x604) + keys, absl::StatusCode::kDataLoss},  // key width code 4
           Case{U64(1) + U64(0x600) + U64(uint64_t{1} << 33), absl::StatusCode::kDataLoss},
           Case{U64(1) + U64(0x600) + U64(1) + "\x01x" + U64(2) + std::string("\x00\x00", 2),
                absl::StatusCode::kDataLoss},  // chunk longer than the block
       }) {
    SCOPED_TRACE(Hex(c.bytes));
    Block block;
    EXPECT_EQ(ReadOne(BlockWith("LowCardinality(String)", 1, c.bytes), &block).code(), c.code);
  }
}

TEST(ColumnCorruptInputTest, LowCardinalityChunksAppendTheirDictionaries) {
  // Two chunks in one block, each with its own keys (as a server may send).
  const std::string chunk1 = U64(0x600) + U64(2) +
                             "\x01"
                             "a"
                             "\x01"
                             "b" +
                             U64(2) + std::string("\x00\x01", 2);
  const std::string chunk2 = U64(0x600) + U64(1) +
                             "\x01"
                             "c" +
                             U64(1) + std::string("\x00", 1);
  Block block;
  ASSERT_TRUE(
      ReadOne(BlockWith("LowCardinality(String)", 3, U64(1) + chunk1 + chunk2), &block).ok());
  EXPECT_EQ(FormatAll(*block.column(0).column), (std::vector<std::string>{"a", "b", "c"}));

  // Nullable: key 0 of every chunk is NULL.
  const std::string n1 = U64(0x600) + U64(2) +
                         std::string(
                             "\x00\x01"
                             "a",
                             3) +
                         U64(2) + std::string("\x01\x00", 2);
  const std::string n2 = U64(0x600) + U64(2) +
                         std::string(
                             "\x00\x01"
                             "b",
                             3) +
                         U64(2) + std::string("\x00\x01", 2);
  ASSERT_TRUE(
      ReadOne(BlockWith("LowCardinality(Nullable(String))", 4, U64(1) + n1 + n2), &block).ok());
  EXPECT_EQ(FormatAll(*block.column(0).column), (std::vector<std::string>{"a", "\\N", "\\N", "b"}));
}

TEST(ColumnCorruptInputTest, HugeRowCountsWithTruncatedDataFailWithoutGiantAllocations) {
  constexpr uint64_t kRows = kMaxBlockRows;  // the largest count ReadBlock accepts
  for (const char* type :
       {"UInt64", "String", "Nullable(String)", "Array(UInt8)", "FixedString(16)",
        "LowCardinality(String)", "Tuple(UInt8, String)", "Decimal(38, 10)"}) {
    SCOPED_TRACE(type);
    Block block;
    absl::Status st = ReadOne(BlockWith(type, kRows, std::string(64, '\x01')), &block);
    EXPECT_FALSE(st.ok());
  }
  // The column itself only grows with the data that actually arrived.
  ColumnPtr u64 = Make("UInt64");
  MemoryReadBuffer in(std::string_view("0123456789abcdef"));
  EXPECT_EQ(u64->LoadBody(in, size_t{1} << 40).code(), absl::StatusCode::kOutOfRange);
  EXPECT_LT(As<ColumnFixed>(u64).values().capacity(), size_t{4} << 20);

  ColumnPtr s = Make("String");
  const std::string strings =
      "\x01"
      "a"
      "\x01"
      "b"
      "\x80\x80\x80\x04"
      "trunc";
  MemoryReadBuffer sin(strings);
  EXPECT_EQ(s->LoadBody(sin, size_t{1} << 40).code(), absl::StatusCode::kOutOfRange);
  EXPECT_LT(As<ColumnString>(s).wire().capacity(), size_t{4} << 20);

  // Past the limit the block is refused before any column is read.
  Block block;
  EXPECT_EQ(ReadOne(BlockWith("UInt8", kMaxBlockRows + 1, ""), &block).code(),
            absl::StatusCode::kDataLoss);
  // Row count times width overflowing size_t is refused, not wrapped.
  ColumnPtr fs = Make("FixedString(1073741824)");
  MemoryReadBuffer fin(std::string_view("x"));
  EXPECT_EQ(fs->LoadBody(fin, size_t{1} << 40).code(), absl::StatusCode::kDataLoss);
}

TEST(ColumnCorruptInputTest, EveryTruncationOfABlockIsAnError) {
  Block block;
  ColumnPtr s = Make("Nullable(String)");
  As<ColumnNullable>(s).AppendNotNull();
  As<ColumnString>(As<ColumnNullable>(s).nested()).Append("hello");
  As<ColumnNullable>(s).AppendNull();
  block.AddColumn("s", s);
  ColumnPtr lc = Make("Array(LowCardinality(Nullable(String)))");
  As<ColumnLowCardinality>(As<ColumnArray>(lc).nested()).AppendNull();
  ASSERT_TRUE(As<ColumnLowCardinality>(As<ColumnArray>(lc).nested()).AppendString("v").ok());
  As<ColumnArray>(lc).FinishRow();
  As<ColumnArray>(lc).FinishRow();
  block.AddColumn("lc", lc);
  ColumnPtr m = Make("Map(String, UInt8)");
  m->AppendDefault();
  m->AppendDefault();
  block.AddColumn("m", m);
  const std::string bytes = EncodeBlock(block);
  Block ok;
  ASSERT_TRUE(ReadOne(bytes, &ok).ok());
  for (size_t n = 0; n < bytes.size(); ++n) {
    Block partial;
    const std::string prefix = bytes.substr(0, n);
    EXPECT_FALSE(ReadOne(prefix, &partial).ok()) << "prefix of " << n << " bytes";
  }
}

// Sparse columns (custom serialization kind 1, sent from revision 54454 on by servers that store
// them so, until the server gated them on revision 54465): the offsets give, per non-default row,
// the default rows before it, and last the trailing defaults with bit 62 set; then only the
// non-default values. The bytes follow SerializationSparse in ClickHouse's source.
TEST(SparseColumnTest, DecodesIntoOrdinaryColumnsWithTheDefaultsFilledIn) {
  constexpr uint64_t kCustom = revision::kCustomSerialization;
  struct Case {
    const char* type;
    uint64_t rows;
    std::string body;  // kind byte, offsets, values
    std::vector<std::string> want;
  };
  const std::vector<Case> cases = {
      {"UInt64",
       8,
       Unhex("01 02 03 81808080808080 8040 0500000000000000 0700000000000000"),
       {"0", "0", "5", "0", "0", "0", "7", "0"}},
      {"UInt64", 8, Unhex("01 88808080808080 8040"), {"0", "0", "0", "0", "0", "0", "0", "0"}},
      {"UInt64", 2, Unhex("01 01 80808080808080 8040 0900000000000000"), {"0", "9"}},
      {"String", 5, Unhex("01 02 82808080808080 8040 02 6162"), {"", "", "ab", "", ""}},
      {"Array(UInt8)",
       3,
       Unhex("01 01 80808080808080 8040 0200000000000000 0708"),
       {"[]", "[7,8]"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.type);
    Block block;
    absl::Status st = ReadOne(BlockWith(c.type, c.rows, c.body, kCustom, 1), &block, kCustom);
    if (std::string_view(c.type) == "Array(UInt8)") {
      // 3 rows described as 1 default + 1 value + 0 trailing: the block says 3, offsets say 2.
      EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
      continue;
    }
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(block.rows(), c.rows);
    EXPECT_EQ(FormatAll(*block.column(0).column), c.want);
  }
  // Array(UInt8) [[], [7, 8], []]: one default before the value, one after.
  Block arrays;
  ASSERT_TRUE(
      ReadOne(BlockWith("Array(UInt8)", 3, Unhex("01 01 81808080808080 8040 0200000000000000 0708"),
                        kCustom, 1),
              &arrays, kCustom)
          .ok());
  EXPECT_EQ(FormatAll(*arrays.column(0).column), (std::vector<std::string>{"[]", "[7,8]", "[]"}));
  // Skipped (a Query's discarded columns) as well as read.
  Block skipped;
  const std::string bytes = BlockWith(
      "UInt64", 8, Unhex("01 02 03 81808080808080 8040 0500000000000000 0700000000000000"), kCustom,
      1);
  MemoryReadBuffer in(bytes);
  const absl::Status skip = ReadBlock(in, kCustom, &skipped, /*discard_values=*/true);
  ASSERT_TRUE(skip.ok()) << skip;
  EXPECT_TRUE(in.AtEnd());
  EXPECT_EQ(skipped.rows(), 8u);
}

TEST(SparseColumnTest, RefusesWhatItCannotReadAndOffsetsThatDoNotAddUp) {
  constexpr uint64_t kCustom = revision::kCustomSerialization;
  Block block;
  // Offsets describing more rows than the block has.
  absl::Status st =
      ReadOne(BlockWith("UInt8", 1, Unhex("01 01 8040 09"), kCustom, 1), &block, kCustom);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  // A kind this client does not know, and sparse where the layout differs (Nullable from revision
  // 54483 leaves out the null map; a Tuple itself is never sparse, only its elements).
  for (const auto& [type, body] :
       std::vector<std::pair<std::string, std::string>>{{"UInt8", Unhex("02 09")},
                                                        {"Nullable(UInt8)", Unhex("01 8040")},
                                                        {"Tuple(UInt8)", Unhex("01 00 09")},
                                                        {"Tuple(UInt8)", Unhex("00 02 09")}}) {
    SCOPED_TRACE(type);
    st = ReadOne(BlockWith(type, 1, body, kCustom, 1), &block, kCustom);
    EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
    EXPECT_NE(st.message().find("custom serialization"), std::string_view::npos) << st;
  }
  // has_custom = 0 is the plain layout.
  ASSERT_TRUE(ReadOne(BlockWith("UInt8", 1, "\x09", kCustom, 0), &block, kCustom).ok());
  EXPECT_EQ(FormatAll(*block.column(0).column), (std::vector<std::string>{"9"}));
  // Below 54454 there is no flag byte.
  ASSERT_TRUE(ReadOne(BlockWith("UInt8", 1, "\x09", kCustom - 1), &block, kCustom - 1).ok());
  EXPECT_EQ(FormatAll(*block.column(0).column), (std::vector<std::string>{"9"}));
}

TEST(ColumnCorruptInputTest, UnknownAndMalformedTypesAreRejected) {
  EXPECT_EQ(CreateColumn("Foo").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(CreateColumn("Array(Foo)").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(CreateColumn("Array(").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateColumn("").status().code(), absl::StatusCode::kInvalidArgument);
  for (const char* bad :
       {"UInt8(3)", "Decimal(0, 0)", "Decimal(9, 10)", "Decimal(77, 1)",
        "DateTime('Mars/Olympus_Mons')", "FixedString(0)", "Enum8('a' = 128)", "Enum8(1)",
        "Nullable(Nullable(UInt8))", "Map(String)", "DateTime64(10)", "LowCardinality()",
        // Composite dictionaries (ClickHouse refuses them; one round-tripped wrongly before).
        "LowCardinality(Nullable(Tuple(JSON)))", "LowCardinality(Tuple(UInt8, String))",
        "LowCardinality(Array(String))", "LowCardinality(Map(String, UInt8))",
        "LowCardinality(LowCardinality(String))"}) {
    SCOPED_TRACE(bad);
    absl::StatusOr<ColumnPtr> c = CreateColumn(bad);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  }
  Block block;
  absl::Status st = ReadOne(BlockWith("Foo", 0, ""), &block);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("column c"), std::string_view::npos) << st;
}

TEST(ColumnCorruptInputTest, UnknownBlockInfoFieldIsDataLoss) {
  Block block;
  const std::string bytes = Unhex("09 00 00 00");
  EXPECT_EQ(ReadOne(bytes, &block).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace chgate::clickhouse
