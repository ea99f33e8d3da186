// The chgate.v1.Column layout shared by the server and the SDK: each check accepts the layout it
// describes and names the field and the sizes when refusing one; reads and appends agree.
#include "columnar/column_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace chgate::columnar {
namespace {

using ::testing::HasSubstr;

std::string Message(const absl::Status& status) { return std::string(status.message()); }

v1::Column Strings(std::initializer_list<std::string_view> values) {
  v1::Column column;
  for (std::string_view v : values) AppendString(v, &column);
  return column;
}

TEST(ColumnLayoutTest, PresentFieldsNamesEverySetField) {
  v1::Column c;
  EXPECT_EQ(PresentFields(c), 0u);
  c.set_nulls(std::string(1, '\0'));
  c.add_offsets(1);
  c.set_data("x");
  c.add_children();
  c.add_int64s(1);
  c.add_uint64s(1);
  c.add_float64s(1);
  c.add_strings("s");
  EXPECT_EQ(PresentFields(c),
            kNulls | kOffsets | kData | kChildren | kInt64s | kUInt64s | kFloat64s | kStrings);
  for (unsigned f = kNulls; f <= kStrings; f <<= 1) EXPECT_STRNE(FieldName(f), "?");
  EXPECT_STREQ(FieldName(kFloat64s), "float64s");
}

TEST(ColumnLayoutTest, CheckFieldsRefusesTheFirstFieldOutsideTheAllowedSet) {
  v1::Column c;
  c.set_data("abcd");
  c.add_strings("x");
  EXPECT_TRUE(CheckFields(c, kData | kStrings).ok());
  const absl::Status refused = CheckFields(c, kData);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(refused), "unexpected field `strings` for this type");
  c.set_nulls(std::string(1, '\1'));
  EXPECT_EQ(Message(CheckFields(c, kData | kStrings)), "`nulls` is only for Nullable types");
}

TEST(ColumnLayoutTest, OffsetsNeedOneNonDecreasingEntryPerRow) {
  v1::Column c = Strings({"ab", "", "cde"});
  absl::StatusOr<uint64_t> last = CheckOffsets(c.offsets(), 3, "bytes");
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, 5u);
  EXPECT_EQ(*CheckOffsets(v1::Column().offsets(), 0, "bytes"), 0u);
  EXPECT_EQ(Message(CheckOffsets(c.offsets(), 4, "bytes").status()),
            "`offsets` has 3 entries, expected 4 (one per row)");
  c.set_offsets(1, 1);
  EXPECT_EQ(Message(CheckOffsets(c.offsets(), 3, "bytes").status()),
            "`offsets` decreases at row 1 (1 after 2 bytes)");
}

TEST(ColumnLayoutTest, StringDataEndsWhereTheLastOffsetDoes) {
  v1::Column c = Strings({"ab", "cde"});
  EXPECT_TRUE(CheckStringData(c, 2).ok());
  EXPECT_EQ(StringAt(c, 0), "ab");
  EXPECT_EQ(StringAt(c, 1), "cde");
  c.mutable_data()->push_back('!');
  EXPECT_EQ(Message(CheckStringData(c, 2)), "`offsets` end at byte 5 but `data` has 6 bytes");
  c.set_offsets(1, 9);
  EXPECT_THAT(Message(CheckStringData(c, 2)), HasSubstr("end at byte 9"));
}

TEST(ColumnLayoutTest, FixedDataHoldsExactlyRowsTimesWidth) {
  v1::Column c;
  c.set_data(std::string("\x01\x00\x00\x00\x02\x00\x00\x00", 8));
  EXPECT_TRUE(CheckFixedData(c, 2, 4).ok());
  EXPECT_EQ(FixedAt(c, 4, 1)[0], '\x02');
  EXPECT_EQ(Message(CheckFixedData(c, 3, 4)), "`data` has 8 bytes, expected 3 rows x 4 bytes");
  EXPECT_FALSE(CheckFixedData(c, 2, 3).ok());  // 8 is not a multiple of 3
  EXPECT_FALSE(CheckFixedData(c, 0, 0).ok());  // no width is never a fixed layout
}

TEST(ColumnLayoutTest, NullMapsAreEmptyOrOneFlagPerRow) {
  v1::Column c;
  EXPECT_TRUE(CheckNulls(c, 5).ok());  // empty: no row is NULL
  c.set_nulls(std::string("\0\1\0", 3));
  EXPECT_TRUE(CheckNulls(c, 3).ok());
  EXPECT_FALSE(IsNull(c, 0));
  EXPECT_TRUE(IsNull(c, 1));
  EXPECT_EQ(Message(CheckNulls(c, 2)), "`nulls` has 3 bytes, expected 2 (one per row)");
  c.set_nulls(std::string("\0\2", 2));
  EXPECT_EQ(Message(CheckNulls(c, 2)), "`nulls` byte 1 is 2; use 1 for NULL and 0 otherwise");
  EXPECT_TRUE(CheckNulls(c, 2, NullFlags::kAnyByte).ok());
  EXPECT_TRUE(IsNull(c, 1));  // a reader takes any non-zero flag as NULL
}

TEST(ColumnLayoutTest, ChildrenCountNamesWhatIsExpected) {
  v1::Column c;
  c.add_children();
  EXPECT_TRUE(CheckChildren(c, 1, "the elements").ok());
  EXPECT_EQ(Message(CheckChildren(c, 2, "keys, values")),
            "has 1 children, expected 2 (keys, values)");
  EXPECT_EQ(Message(CheckChildren(c, 3, "")), "has 1 children, expected 3");
}

TEST(ColumnLayoutTest, ArrayRowsAreCumulativeElementCounts) {
  v1::Column c;
  AppendRowEnd(2, &c);
  AppendRowEnd(2, &c);
  AppendRowEnd(5, &c);
  EXPECT_EQ(*CheckOffsets(c.offsets(), 3, "elements"), 5u);
  EXPECT_EQ(RowBegin(c.offsets(), 0), 0u);
  EXPECT_EQ(RowEnd(c.offsets(), 1) - RowBegin(c.offsets(), 1), 0u);  // an empty array
  EXPECT_EQ(RowBegin(c.offsets(), 2), 2u);
  EXPECT_EQ(RowEnd(c.offsets(), 2), 5u);
}

TEST(ColumnLayoutTest, NullFlagsStayCompactUntilTheFirstNullThenBackFill) {
  v1::Column c;
  AppendNullFlags(std::string(3, '\0').data(), 3, 0, &c);
  EXPECT_TRUE(c.nulls().empty());  // no NULL yet: the compact form
  AppendNullFlags(std::string("\0\1", 2).data(), 2, 3, &c);
  EXPECT_EQ(c.nulls(), std::string("\0\0\0\0\1", 5));  // rows 0-2 back-filled
  AppendNullFlags(std::string(2, '\0').data(), 2, 5, &c);
  EXPECT_EQ(c.nulls().size(), 7u);  // once present, every row has its flag
  EXPECT_TRUE(CheckNulls(c, 7).ok());
}

}  // namespace
}  // namespace chgate::columnar

namespace chgate::columnar {
namespace {

v1::Column Fixed32(std::initializer_list<uint32_t> values) {
  v1::Column c;
  for (uint32_t v : values) c.mutable_data()->append(reinterpret_cast<const char*>(&v), 4);
  return c;
}

// Array(String) rows as lists of strings.
v1::Column StringArrays(std::initializer_list<std::initializer_list<std::string_view>> rows) {
  v1::Column c;
  v1::Column* elements = c.add_children();
  uint64_t n = 0;
  for (auto row : rows) {
    for (std::string_view s : row) AppendString(s, elements);
    n += row.size();
    AppendRowEnd(n, &c);
  }
  return c;
}

TEST(AppendRowsTest, FixedAndStringRowsAppendAsIfBuiltTogether) {
  v1::Column fixed = Fixed32({1, 2});
  AppendRows(Fixed32({7, 8, 9}), 3, 1, 3, 2, &fixed);
  EXPECT_EQ(fixed.data(), Fixed32({1, 2, 8, 9}).data());

  v1::Column strings = Strings({"a"});
  AppendRows(Strings({"bc", "", "def"}), 3, 0, 3, 1, &strings);
  const v1::Column expected = Strings({"a", "bc", "", "def"});
  EXPECT_EQ(strings.data(), expected.data());
  EXPECT_THAT(strings.offsets(), ::testing::ElementsAreArray(expected.offsets()));
  EXPECT_TRUE(CheckStringData(strings, 4).ok());
}

TEST(AppendRowsTest, NullMapsKeepTheCompactRuleAcrossAppends) {
  v1::Column dst = Strings({"a", "b"});  // Nullable(String), no NULL yet
  v1::Column with_null = Strings({"", "c"});
  with_null.set_nulls(std::string("\1\0", 2));
  AppendRows(with_null, 2, 0, 2, 2, &dst);
  EXPECT_EQ(dst.nulls(), std::string("\0\0\1\0", 4));
  AppendRows(Strings({"d"}), 1, 0, 1, 4, &dst);  // a part without NULLs after one with
  EXPECT_EQ(dst.nulls(), std::string("\0\0\1\0\0", 5));
  EXPECT_TRUE(CheckNulls(dst, 5).ok());
  EXPECT_TRUE(CheckStringData(dst, 5).ok());
}

TEST(AppendRowsTest, ArrayElementsAreRebasedAndRangesCutAtRowBoundaries) {
  v1::Column dst = StringArrays({{"a"}, {}});
  AppendRows(StringArrays({{"x", "y"}, {"z"}, {}, {"w"}}), 4, 1, 4, 2, &dst);
  const v1::Column expected = StringArrays({{"a"}, {}, {"z"}, {}, {"w"}});
  EXPECT_THAT(dst.offsets(), ::testing::ElementsAreArray(expected.offsets()));
  EXPECT_EQ(dst.children(0).data(), expected.children(0).data());
  EXPECT_THAT(dst.children(0).offsets(),
              ::testing::ElementsAreArray(expected.children(0).offsets()));
  EXPECT_TRUE(CheckOffsets(dst.offsets(), 5, "elements").ok());

  v1::Column fresh;  // children made as needed
  AppendRows(StringArrays({{"p"}, {"q", "r"}}), 2, 0, 2, 0, &fresh);
  ASSERT_EQ(fresh.children_size(), 1);
  EXPECT_EQ(fresh.children(0).data(), "pqr");
}

TEST(AppendRowsTest, TupleElementsTakeTheSameRowsAndInsertFormsTheirRange) {
  v1::Column src;
  *src.add_children() = Fixed32({1, 2, 3});
  *src.add_children() = Strings({"a", "b", "c"});
  v1::Column dst;
  AppendRows(src, 3, 1, 3, 0, &dst);
  ASSERT_EQ(dst.children_size(), 2);
  EXPECT_EQ(dst.children(0).data(), Fixed32({2, 3}).data());
  EXPECT_EQ(dst.children(1).data(), "bc");

  v1::Column typed;
  typed.add_int64s(-1);
  typed.add_int64s(5);
  typed.add_strings("s0");
  typed.add_strings("s1");
  v1::Column out;
  AppendRows(typed, 2, 1, 2, 0, &out);
  EXPECT_THAT(out.int64s(), ::testing::ElementsAre(5));
  EXPECT_THAT(out.strings(), ::testing::ElementsAre("s1"));
}

}  // namespace
}  // namespace chgate::columnar
