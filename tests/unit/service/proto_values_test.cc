// The service's views of the API's insert data: ProtoRows/ProtoValue over chgate.v1 rows, and
// ConvertBlock from the columnar Block layout to typed ClickHouse columns (every layout family,
// the UUID byte order, range checks, and errors naming row, column, value and nested position).
#include "server/service/proto_values.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "server/ingest/value_error.h"

namespace chgate::service {
namespace {

using ::testing::HasSubstr;

template <typename T>
std::string LittleEndian(std::initializer_list<T> values) {
  std::string out;
  for (T v : values) out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return out;
}

// Each row of `block` (converted) as TabSeparated text.
std::vector<std::string> Rows(const clickhouse::Block& block) {
  std::vector<std::string> rows;
  for (size_t r = 0; r < block.rows(); ++r) {
    std::string text;
    for (size_t c = 0; c < block.column_count(); ++c) {
      if (c > 0) text.push_back('\t');
      block.column(c).column->FormatValue(r, false, &text);
    }
    rows.push_back(std::move(text));
  }
  return rows;
}

// Converts a one-column block of `type` with `rows` rows; returns its rows as text.
absl::StatusOr<std::vector<std::string>> ConvertOne(v1::Column column, uint64_t rows) {
  v1::Block block;
  block.set_rows(rows);
  *block.add_columns() = std::move(column);
  const std::vector<std::string> names = {"c"};
  clickhouse::Block out;
  absl::Status status = ConvertBlock(block, names, &out);
  if (!status.ok()) return status;
  return Rows(out);
}

// The rows of a conversion that must succeed (an error shows up as the only row).
std::vector<std::string> Converted(v1::Column column, uint64_t rows) {
  absl::StatusOr<std::vector<std::string>> out = ConvertOne(std::move(column), rows);
  if (!out.ok()) return {"error: " + out.status().ToString()};
  return *out;
}

v1::Column Col(const std::string& type) {
  v1::Column c;
  c.set_type(type);
  return c;
}

TEST(ProtoValueTest, ExposesEveryKindWithoutCopying) {
  v1::RowSet set;
  v1::Row* row = set.add_rows();
  row->add_values()->set_null_value(google::protobuf::NULL_VALUE);
  row->add_values()->set_bool_value(true);
  row->add_values()->set_int64_value(-5);
  row->add_values()->set_uint64_value(7);
  row->add_values()->set_double_value(1.5);
  row->add_values()->set_string_value("text");
  row->add_values()->set_bytes_value(std::string("\0\1", 2));
  v1::Value* ts = row->add_values();
  ts->mutable_timestamp_value()->set_seconds(100);
  ts->mutable_timestamp_value()->set_nanos(5);
  v1::Value* array = row->add_values();
  array->mutable_array_value()->add_values()->set_int64_value(1);
  array->mutable_array_value()->add_values()->set_int64_value(2);
  row->add_values()->mutable_tuple_value()->add_values()->set_string_value("t");
  v1::MapValue::Entry* entry = row->add_values()->mutable_map_value()->add_entries();
  entry->mutable_key()->set_string_value("k");
  entry->mutable_value()->set_uint64_value(9);
  row->add_values();  // no kind
  set.add_rows();

  ProtoRows rows(&set);
  ASSERT_EQ(rows.row_count(), 2u);
  ASSERT_EQ(rows.value_count(0), 12u);
  EXPECT_EQ(rows.value_count(1), 0u);
  using K = ingest::ValueKind;
  EXPECT_EQ(rows.value(0, 0).kind(), K::kNull);
  EXPECT_TRUE(rows.value(0, 1).bool_value());
  EXPECT_EQ(rows.value(0, 2).int64_value(), -5);
  EXPECT_EQ(rows.value(0, 3).uint64_value(), 7u);
  EXPECT_EQ(rows.value(0, 4).double_value(), 1.5);
  EXPECT_EQ(rows.value(0, 5).kind(), K::kString);
  // A view into the message, not a copy.
  EXPECT_EQ(rows.value(0, 5).bytes_value().data(), set.rows(0).values(5).string_value().data());
  EXPECT_EQ(rows.value(0, 6).kind(), K::kBytes);
  EXPECT_EQ(rows.value(0, 6).bytes_value(), std::string_view("\0\1", 2));
  EXPECT_EQ(rows.value(0, 7).timestamp_value().seconds, 100);
  EXPECT_EQ(rows.value(0, 7).timestamp_value().nanos, 5);
  ASSERT_EQ(rows.value(0, 8).kind(), K::kArray);
  ASSERT_EQ(rows.value(0, 8).size(), 2u);
  EXPECT_EQ(rows.value(0, 8).element(1).int64_value(), 2);
  ASSERT_EQ(rows.value(0, 9).kind(), K::kTuple);
  EXPECT_EQ(rows.value(0, 9).element(0).bytes_value(), "t");
  ASSERT_EQ(rows.value(0, 10).kind(), K::kMap);
  ASSERT_EQ(rows.value(0, 10).size(), 1u);
  EXPECT_EQ(rows.value(0, 10).map_key(0).bytes_value(), "k");
  EXPECT_EQ(rows.value(0, 10).map_value(0).uint64_value(), 9u);
  EXPECT_EQ(rows.value(0, 11).kind(), K::kUnset);
}

TEST(ConvertBlockTest, CopiesFixedWidthData) {
  v1::Column c = Col("Int32");
  c.set_data(LittleEndian<int32_t>({-1, 2, 300000}));
  EXPECT_THAT(Converted(c, 3), ::testing::ElementsAre("-1", "2", "300000"));
}

TEST(ConvertBlockTest, ReordersUuidFromRfcToClickHouseLayout) {
  v1::Column c = Col("UUID");
  std::string rfc;
  for (int i = 0; i < 16; ++i) rfc.push_back(static_cast<char>(i * 0x11));
  c.set_data(rfc);
  ASSERT_THAT(Converted(c, 1), ::testing::ElementsAre("00112233-4455-6677-8899-aabbccddeeff"));
}

TEST(ConvertBlockTest, ReadsStringsFromDataAndOffsetsOrStrings) {
  v1::Column packed = Col("String");
  packed.set_data("abcdef");
  for (uint64_t o : {2, 2, 6}) packed.add_offsets(o);
  EXPECT_THAT(Converted(packed, 3), ::testing::ElementsAre("ab", "", "cdef"));

  v1::Column list = Col("String");
  list.add_strings("x");
  list.add_strings("");
  EXPECT_THAT(Converted(list, 2), ::testing::ElementsAre("x", ""));
}

TEST(ConvertBlockTest, ArrayOfNullableStringAsDocumented) {
  // README: Array(Nullable(String)) with rows ['a', NULL] and [].
  v1::Column c = Col("Array(Nullable(String))");
  c.add_offsets(2);
  c.add_offsets(2);
  v1::Column* child = c.add_children();
  child->set_type("Nullable(String)");
  child->set_nulls(std::string("\0\1", 2));
  child->set_data("a");
  child->add_offsets(1);
  child->add_offsets(1);
  EXPECT_THAT(Converted(c, 2), ::testing::ElementsAre("['a',NULL]", "[]"));
}

TEST(ConvertBlockTest, NullableWithoutValuesWhenEveryRowIsNull) {
  v1::Column c = Col("Nullable(UInt8)");
  c.set_nulls(std::string("\1\1", 2));
  EXPECT_THAT(Converted(c, 2), ::testing::ElementsAre("\\N", "\\N"));
}

// An Array whose rows are all empty has a Nullable element column with zero rows and no values.
TEST(ConvertBlockTest, EmptyArraysOfNullableElements) {
  for (const char* type : {"Array(Nullable(String))", "Array(LowCardinality(Nullable(String)))"}) {
    v1::Column c = Col(type);
    c.add_offsets(0);
    c.add_offsets(0);
    c.add_children()->set_type("Nullable(String)");
    EXPECT_THAT(Converted(c, 2), ::testing::ElementsAre("[]", "[]")) << type;
  }
}

TEST(ConvertBlockTest, MapTupleAndLowCardinality) {
  v1::Column map = Col("Map(String, UInt64)");
  map.add_offsets(2);
  map.add_offsets(2);
  v1::Column* keys = map.add_children();
  keys->add_strings("a");
  keys->add_strings("b");
  v1::Column* values = map.add_children();
  values->add_uint64s(1);
  values->add_uint64s(2);
  EXPECT_THAT(Converted(map, 2), ::testing::ElementsAre("{'a':1,'b':2}", "{}"));

  v1::Column tuple = Col("Tuple(a UInt8, b String)");
  tuple.add_children()->add_uint64s(7);
  tuple.add_children()->add_strings("x");
  EXPECT_THAT(Converted(tuple, 1), ::testing::ElementsAre("(7,'x')"));

  v1::Column lc = Col("LowCardinality(Nullable(String))");
  lc.set_nulls(std::string("\0\1\0", 3));
  lc.add_strings("v");
  lc.add_strings("");
  lc.add_strings("v");
  EXPECT_THAT(Converted(lc, 3), ::testing::ElementsAre("v", "\\N", "v"));

  v1::Column lc_fixed = Col("LowCardinality(UInt32)");
  lc_fixed.set_data(LittleEndian<uint32_t>({5, 6, 5}));
  EXPECT_THAT(Converted(lc_fixed, 3), ::testing::ElementsAre("5", "6", "5"));
}

TEST(ConvertBlockTest, ConvenienceFormsAreRangeChecked) {
  v1::Column decimal = Col("Decimal(18, 4)");
  decimal.add_int64s(123456);
  decimal.add_int64s(-5);
  EXPECT_THAT(Converted(decimal, 2), ::testing::ElementsAre("12.3456", "-0.0005"));

  v1::Column wide = Col("Int128");
  wide.add_int64s(-2);
  EXPECT_THAT(Converted(wide, 1), ::testing::ElementsAre("-2"));

  v1::Column fixed = Col("FixedString(3)");
  fixed.add_strings("ab");
  absl::StatusOr<std::vector<std::string>> padded = ConvertOne(fixed, 1);
  ASSERT_TRUE(padded.ok()) << padded.status();
  EXPECT_THAT((*padded)[0], HasSubstr("ab"));

  v1::Column int8 = Col("Int8");
  for (int64_t v : {1, -128, 200}) int8.add_int64s(v);
  absl::StatusOr<std::vector<std::string>> bad = ConvertOne(int8, 3);
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("row 2"));
  EXPECT_THAT(bad.status().message(), HasSubstr("200"));
  std::optional<ingest::ValueError> error = ingest::GetValueError(bad.status());
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->row, 2u);
  EXPECT_EQ(error->column, "c");
  EXPECT_EQ(error->type, "Int8");
  EXPECT_EQ(error->value, "200");

  v1::Column date_time = Col("DateTime('UTC')");
  date_time.add_uint64s(uint64_t{1} << 32);
  EXPECT_EQ(ConvertOne(date_time, 1).status().code(), absl::StatusCode::kInvalidArgument);

  v1::Column precision = Col("Decimal(9, 2)");
  precision.add_int64s(1000000000);
  EXPECT_EQ(ConvertOne(precision, 1).status().code(), absl::StatusCode::kInvalidArgument);

  v1::Column float32 = Col("Float32");
  float32.add_float64s(1e300);
  EXPECT_EQ(ConvertOne(float32, 1).status().code(), absl::StatusCode::kInvalidArgument);

  v1::Column long_fixed = Col("FixedString(2)");
  long_fixed.add_strings("abc");
  EXPECT_EQ(ConvertOne(long_fixed, 1).status().code(), absl::StatusCode::kInvalidArgument);

  v1::Column flag = Col("Bool");
  flag.set_data(std::string("\0\2", 2));
  EXPECT_EQ(ConvertOne(flag, 2).status().code(), absl::StatusCode::kInvalidArgument);

  v1::Column level = Col("Enum8('a' = 1, 'b' = 2)");
  level.add_int64s(3);
  EXPECT_EQ(ConvertOne(level, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConvertBlockTest, NestedErrorNamesTopLevelRowAndPosition) {
  v1::Column c = Col("Array(UInt8)");
  c.add_offsets(2);
  c.add_offsets(5);
  v1::Column* child = c.add_children();
  for (uint64_t v : {1, 2, 3, 4, 300}) child->add_uint64s(v);
  absl::Status status = ConvertOne(c, 2).status();
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("row 1"));
  EXPECT_THAT(status.message(), HasSubstr("at [2]"));
  EXPECT_THAT(status.message(), HasSubstr("300"));
  ASSERT_TRUE(ingest::GetValueError(status).has_value());
  EXPECT_EQ(ingest::GetValueError(status)->row, 1u);
}

TEST(ConvertBlockTest, RejectsInconsistentLayouts) {
  auto code = [](v1::Column c, uint64_t rows) { return ConvertOne(std::move(c), rows).status(); };

  v1::Column no_type;
  no_type.set_data(LittleEndian<uint64_t>({1}));
  absl::Status missing = code(no_type, 1);
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.message(), HasSubstr("`type` is required"));

  v1::Column short_data = Col("UInt64");
  short_data.set_data(std::string(12, '\0'));
  absl::Status size = code(short_data, 2);
  EXPECT_EQ(size.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(size.message(), HasSubstr("`data` has 12 bytes"));
  ASSERT_TRUE(ingest::GetValueError(size).has_value());
  EXPECT_EQ(ingest::GetValueError(size)->column, "c");
  EXPECT_FALSE(ingest::GetValueError(size)->row.has_value());

  v1::Column two_forms = Col("UInt64");
  two_forms.set_data(LittleEndian<uint64_t>({1}));
  two_forms.add_uint64s(1);
  EXPECT_EQ(code(two_forms, 1).code(), absl::StatusCode::kInvalidArgument);

  v1::Column nulls = Col("UInt8");
  nulls.set_data(std::string(1, '\0'));
  nulls.set_nulls(std::string(1, '\1'));
  EXPECT_THAT(code(nulls, 1).message(), HasSubstr("only for Nullable"));

  v1::Column wrong_form = Col("UInt8");
  wrong_form.add_int64s(1);
  EXPECT_THAT(code(wrong_form, 1).message(), HasSubstr("int64s"));

  v1::Column decreasing = Col("Array(UInt8)");
  decreasing.add_offsets(2);
  decreasing.add_offsets(1);
  decreasing.add_children()->set_data(std::string(2, '\0'));
  EXPECT_THAT(code(decreasing, 2).message(), HasSubstr("decreases"));

  v1::Column string_end = Col("String");
  string_end.set_data("abc");
  string_end.add_offsets(2);
  EXPECT_EQ(code(string_end, 1).code(), absl::StatusCode::kInvalidArgument);

  v1::Column tuple = Col("Tuple(UInt8, UInt8)");
  tuple.add_children()->add_uint64s(1);
  EXPECT_THAT(code(tuple, 1).message(), HasSubstr("children"));

  EXPECT_EQ(code(Col("Nothing"), 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Col("Nullable(Strin)"), 0).code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace chgate::service
