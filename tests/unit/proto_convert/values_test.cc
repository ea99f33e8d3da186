// The API's data to and from native columns (server/proto_convert): ProtoRows/ProtoValue over
// chgate.v1 rows, and ConvertBlock from the columnar Block layout to typed ClickHouse columns
// (every layout family, the UUID byte order, range checks, and errors naming row, column, value and
// nested position); Variant, Dynamic, JSON and AggregateFunction as String layout both ways (Block
// inserts parse ClickHouse text, Query results carry each row's plain text); and the Float32 rule
// both insert paths share.
#include "server/proto_convert/values.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/aggregate_state.h"
#include "server/clickhouse/columns/dynamic.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/json.h"
#include "server/clickhouse/columns/variant.h"
#include "server/clickhouse/text_form.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/ingest/convert.h"
#include "server/ingest/value_error.h"
#include "server/proto_convert/result_block.h"
#include "tests/unit/clickhouse/fake_server.h"
#include "text/value_parse.h"

namespace chgate::proto_convert {
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
      AppendTsvValue(*block.column(c).column, r, false, &text);
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

// Columns of a type seen before are cloned from one kept per thread: each conversion still gets
// its own empty columns of exactly the named type, past the cache's bound too.
TEST(ConvertBlockTest, ColumnsOfARepeatedTypeAreFreshEachTime) {
  auto block_of = [](const std::string& text) {
    v1::Block block;
    block.set_rows(1);
    v1::Column* s = block.add_columns();
    s->set_type("Nullable(String)");
    s->add_strings(text);
    s->set_nulls(std::string(1, 0));
    v1::Column* t = block.add_columns();
    t->set_type("DateTime64(3, 'UTC')");
    t->set_data(LittleEndian<int64_t>({1500}));
    return block;
  };
  const std::vector<std::string> names = {"s", "t"};
  clickhouse::Block first, second;
  ASSERT_TRUE(ConvertBlock(block_of("one"), names, &first).ok());
  ASSERT_TRUE(ConvertBlock(block_of("two"), names, &second).ok());
  EXPECT_THAT(Rows(first), ::testing::ElementsAre("one\t1970-01-01 00:00:01.500"));
  EXPECT_THAT(Rows(second), ::testing::ElementsAre("two\t1970-01-01 00:00:01.500"));
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_NE(first.column(c).column.get(), second.column(c).column.get());
    EXPECT_EQ(first.column(c).column->type_name(), second.column(c).column->type_name());
  }
  EXPECT_EQ(second.column(1).column->type_name(), "DateTime64(3, 'UTC')");

  // More distinct types than the cache keeps, then the first again.
  for (int n = 1; n <= 300; ++n) {
    v1::Column c = Col(absl::StrCat("FixedString(", n, ")"));
    c.set_data(std::string(static_cast<size_t>(n), 'x'));
    EXPECT_THAT(Converted(c, 1), ::testing::ElementsAre(std::string(static_cast<size_t>(n), 'x')));
  }
  clickhouse::Block again;
  ASSERT_TRUE(ConvertBlock(block_of("three"), names, &again).ok());
  EXPECT_THAT(Rows(again), ::testing::ElementsAre("three\t1970-01-01 00:00:01.500"));
  // A type that does not parse fails every time.
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::vector<std::string>> bad = ConvertOne(Col("NoSuchType"), 0);
    EXPECT_FALSE(bad.ok());
  }
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

// `data` is held to the Decimal's precision like the rows path and int64s: every width, both
// signs, the largest value that fits and the first that does not.
TEST(ConvertBlockTest, DecimalDataIsHeldToItsPrecision) {
  v1::Column d32 = Col("Decimal(9, 2)");
  d32.set_data(LittleEndian<int32_t>({999999999, -999999999}));
  EXPECT_THAT(Converted(d32, 2), ::testing::ElementsAre("9999999.99", "-9999999.99"));
  v1::Column d32_over = Col("Decimal(9, 2)");
  d32_over.set_data(LittleEndian<int32_t>({1, -1000000000}));
  absl::Status over = ConvertOne(d32_over, 2).status();
  ASSERT_EQ(over.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(over.message(), HasSubstr("row 1"));
  EXPECT_THAT(over.message(), HasSubstr("precision"));
  ASSERT_TRUE(ingest::GetValueError(over).has_value());
  EXPECT_EQ(ingest::GetValueError(over)->value, "-10000000.00");

  v1::Column d64 = Col("Decimal(18, 0)");
  d64.set_data(LittleEndian<int64_t>({999999999999999999, -999999999999999999}));
  EXPECT_EQ(ConvertOne(d64, 2).status().code(), absl::StatusCode::kOk);
  v1::Column d64_min = Col("Decimal(18, 0)");
  d64_min.set_data(LittleEndian<int64_t>({std::numeric_limits<int64_t>::min()}));
  EXPECT_EQ(ConvertOne(d64_min, 1).status().code(), absl::StatusCode::kInvalidArgument);

  // Decimal(38, 0) in 16 bytes: 10^38 - 1 fits, 10^38 does not; Decimal(20, 0) has less room.
  const text::Uint128 ten38 =
      static_cast<text::Uint128>(10000000000000000000ULL) * 10000000000000000000ULL;  // 10^38
  auto wide = [](const std::string& type, std::vector<text::Int128> values) {
    v1::Column c = Col(type);
    std::string data(values.size() * 16, '\0');
    std::memcpy(data.data(), values.data(), data.size());
    c.set_data(data);
    return ConvertOne(c, values.size()).status().code();
  };
  const auto max38 = static_cast<text::Int128>(ten38 - 1);
  EXPECT_EQ(wide("Decimal(38, 0)", {max38, -max38}), absl::StatusCode::kOk);
  EXPECT_EQ(wide("Decimal(38, 0)", {static_cast<text::Int128>(ten38)}),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(wide("Decimal(20, 0)", {static_cast<text::Int128>(ten38 / 1000000000000000000ULL) - 1}),
            absl::StatusCode::kOk);
  EXPECT_EQ(wide("Decimal(20, 0)", {max38}), absl::StatusCode::kInvalidArgument);

  // 32 bytes: Decimal(76, 0) takes any 10^76 - 1 but not a value with bit 253 set.
  v1::Column d256 = Col("Decimal(76, 0)");
  std::string big(32, '\0');
  big[31] = 0x20;  // 2^253 > 10^76
  d256.set_data(big);
  EXPECT_EQ(ConvertOne(d256, 1).status().code(), absl::StatusCode::kInvalidArgument);
  v1::Column d256_small = Col("Decimal(76, 0)");
  std::string minus_one(32, '\xff');
  d256_small.set_data(minus_one);
  EXPECT_THAT(Converted(d256_small, 1), ::testing::ElementsAre("-1"));
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

// ---- Variant, Dynamic, JSON and AggregateFunction in String layout -----------------------------

// Converts a one-column block; the block itself (the conversion must succeed).
clickhouse::Block ConvertedBlock(v1::Column column, uint64_t rows) {
  v1::Block block;
  block.set_rows(rows);
  *block.add_columns() = std::move(column);
  const std::vector<std::string> names = {"c"};
  clickhouse::Block out;
  absl::Status status = ConvertBlock(block, names, &out);
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// Each row of a Variant or Dynamic column as "text as alternative type", or "NULL".
std::vector<std::string> Alternatives(const clickhouse::Column& column) {
  const clickhouse::ColumnVariant* variant = nullptr;
  const clickhouse::ColumnDynamic* dynamic = nullptr;
  if (column.kind() == clickhouse::ColumnKind::kDynamic) {
    dynamic = static_cast<const clickhouse::ColumnDynamic*>(&column);
    variant = &dynamic->variant();
  } else {
    variant = static_cast<const clickhouse::ColumnVariant*>(&column);
  }
  std::vector<std::string> rows;
  for (size_t r = 0; r < column.Size(); ++r) {
    if (variant->IsNull(r)) {
      rows.push_back("NULL");
      continue;
    }
    std::string text;
    AppendTsvValue(column, r, false, &text);
    const size_t d = variant->discriminator(r);
    absl::StrAppend(
        &text, " as ",
        dynamic != nullptr ? dynamic->alternative_type(d) : variant->alternative(d)->type_name());
    rows.push_back(std::move(text));
  }
  return rows;
}

TEST(ConvertBlockTextTest, VariantParsesClickHouseTextTryingStringLast) {
  v1::Column c = Col("Variant(String, UInt64)");
  for (const char* s : {"5", "x", "", "-1", "18446744073709551616"}) c.add_strings(s);
  c.set_nulls(std::string("\0\0\1\0\0", 5));
  clickhouse::Block block = ConvertedBlock(c, 5);
  ASSERT_EQ(block.column_count(), 1u);
  EXPECT_THAT(Alternatives(*block.column(0).column),
              ::testing::ElementsAre("5 as UInt64", "x as String", "NULL", "-1 as String",
                                     "18446744073709551616 as String"));

  // The same rows as data + offsets.
  v1::Column packed = Col("Variant(String, UInt64)");
  packed.set_data("5x");
  for (uint64_t o : {1, 2, 2}) packed.add_offsets(o);
  packed.set_nulls(std::string("\0\0\1", 3));
  EXPECT_THAT(Alternatives(*ConvertedBlock(packed, 3).column(0).column),
              ::testing::ElementsAre("5 as UInt64", "x as String", "NULL"));

  // Without `nulls` every row has a value.
  v1::Column dates = Col("Variant(Date, String)");
  dates.add_strings("2024-05-01");
  dates.add_strings("2024-13-01");
  EXPECT_THAT(Alternatives(*ConvertedBlock(dates, 2).column(0).column),
              ::testing::ElementsAre("2024-05-01 as Date", "2024-13-01 as String"));
}

TEST(ConvertBlockTextTest, VariantErrorNamesTheRowAndValue) {
  v1::Column c = Col("Variant(Date, UInt8)");
  c.add_strings("7");
  c.add_strings("2024-05-01");
  c.add_strings("x");
  absl::Status status = ConvertOne(c, 3).status();
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("row 2"));
  EXPECT_THAT(status.message(), HasSubstr("cannot convert string \"x\""));
  EXPECT_THAT(status.message(),
              HasSubstr("Variant(Date, UInt8) takes null or a value one of its types takes"));
  std::optional<ingest::ValueError> error = ingest::GetValueError(status);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->row, 2u);
  EXPECT_EQ(error->column, "c");
  EXPECT_EQ(error->type, "Variant(Date, UInt8)");
  EXPECT_EQ(error->value, "x");
}

TEST(ConvertBlockTextTest, DynamicInfersTheTypeFromTheText) {
  v1::Column c = Col("Dynamic");
  for (const char* s :
       {"true", "12", "-9223372036854775808", "9223372036854775808", "1.5", "x", "", "False"}) {
    c.add_strings(s);
  }
  c.set_nulls(std::string("\0\0\0\0\0\0\1\0", 8));
  EXPECT_THAT(Alternatives(*ConvertedBlock(c, 8).column(0).column),
              ::testing::ElementsAre("true as Bool", "12 as Int64", "-9223372036854775808 as Int64",
                                     "9223372036854775808 as UInt64", "1.5 as Float64",
                                     "x as String", "NULL", "False as String"));
}

TEST(ConvertBlockTextTest, JsonTakesObjectTextAndNamesTheBadRow) {
  v1::Column c = Col("JSON");
  c.add_strings(R"({"a":1})");
  c.add_strings("{}");
  clickhouse::Block block = ConvertedBlock(c, 2);
  const auto& json = static_cast<const clickhouse::ColumnJson&>(*block.column(0).column);
  ASSERT_EQ(json.Size(), 2u);
  EXPECT_EQ(json.Text(0), R"({"a":1})");
  EXPECT_EQ(json.Text(1), "{}");

  for (const char* bad : {"[1]", "{bad"}) {
    v1::Column b = Col("JSON");
    b.add_strings("{}");
    b.add_strings(bad);
    absl::Status status = ConvertOne(b, 2).status();
    ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(status.message(), HasSubstr("row 1")) << status;
    EXPECT_THAT(status.message(), HasSubstr(bad)) << status;
    ASSERT_TRUE(ingest::GetValueError(status).has_value());
    EXPECT_EQ(ingest::GetValueError(status)->value, bad);
  }

  // JSON has no NULL.
  v1::Column nulls = Col("JSON");
  nulls.add_strings("");
  nulls.set_nulls(std::string(1, '\1'));
  absl::Status status = ConvertOne(nulls, 1).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("not Nullable")) << status;
}

TEST(ConvertBlockTextTest, AggregateStatesAreOneStatesBytesPerRow) {
  v1::Column c = Col("AggregateFunction(count)");
  c.set_data(std::string("\x05\x80\x01", 3));
  c.add_offsets(1);
  c.add_offsets(3);
  clickhouse::Block block = ConvertedBlock(c, 2);
  const auto& states =
      static_cast<const clickhouse::ColumnAggregateState&>(*block.column(0).column);
  ASSERT_EQ(states.Size(), 2u);
  EXPECT_EQ(states.State(0), "\x05");
  EXPECT_EQ(states.State(1), "\x80\x01");

  v1::Column trailing = Col("AggregateFunction(count)");
  trailing.add_strings(std::string("\x05\x00", 2));
  absl::Status status = ConvertOne(trailing, 1).status();
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("row 0"));
  EXPECT_THAT(status.message(), HasSubstr("1 bytes left over"));
}

// ---- Float32, BFloat16, Time and Time64 through the Block layout -------------------------------

TEST(ConvertBlockTest, Float32AcceptsWhatTheRowsPathAccepts) {
  // 3.4028235e38 is above FLT_MAX but rounds to it; 3.4028236e38 and 1e39 round to infinity.
  v1::Column ok = Col("Float32");
  ok.add_float64s(3.4028235e38);
  ok.add_float64s(-3.4028235e38);
  clickhouse::Block block = ConvertedBlock(ok, 2);
  const auto& fixed = static_cast<const clickhouse::ColumnFixed&>(*block.column(0).column);
  EXPECT_EQ(std::string(fixed.RawAt(0), 4), LittleEndian<float>({FLT_MAX}));
  EXPECT_EQ(std::string(fixed.RawAt(1), 4), LittleEndian<float>({-FLT_MAX}));

  // The rows path stores the same bytes for the same double.
  absl::StatusOr<clickhouse::ColumnPtr> rows_column = clickhouse::CreateColumn("Float32");
  ASSERT_TRUE(rows_column.ok());
  v1::Value value;
  value.set_double_value(3.4028235e38);
  ASSERT_TRUE(ingest::AppendValue(ProtoValue(value), **rows_column, {}).ok());
  EXPECT_EQ(std::string(static_cast<const clickhouse::ColumnFixed&>(**rows_column).RawAt(0), 4),
            LittleEndian<float>({FLT_MAX}));

  for (double bad : {1e39, 3.4028236e38, -1e39}) {
    v1::Column block_bad = Col("Float32");
    block_bad.add_float64s(bad);
    absl::Status block_status = ConvertOne(block_bad, 1).status();
    EXPECT_EQ(block_status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(block_status.message(), HasSubstr("out of Float32's range")) << block_status;

    value.set_double_value(bad);
    absl::Status rows_status = ingest::AppendValue(ProtoValue(value), **rows_column, {});
    EXPECT_EQ(rows_status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(rows_status.message(), HasSubstr("out of range for Float32")) << rows_status;
  }
  EXPECT_EQ((*rows_column)->Size(), 1u);
}

TEST(ConvertBlockTest, BFloat16FromFloat64sOrData) {
  v1::Column c = Col("BFloat16");
  c.add_float64s(0.1);
  c.add_float64s(3.14159);
  c.add_float64s(3.4028235e38);
  EXPECT_THAT(Converted(c, 3), ::testing::ElementsAre("0.099609375", "3.140625", "3.3895314e38"));
  clickhouse::Block block = ConvertedBlock(c, 3);
  EXPECT_EQ(
      std::string(static_cast<const clickhouse::ColumnFixed&>(*block.column(0).column).RawAt(0), 2),
      "\xcc\x3d");

  v1::Column data = Col("BFloat16");
  data.set_data(LittleEndian<uint16_t>({0x3dcc, 0xbf80}));
  EXPECT_THAT(Converted(data, 2), ::testing::ElementsAre("0.099609375", "-1"));

  v1::Column bad = Col("BFloat16");
  bad.add_float64s(1e39);
  absl::Status status = ConvertOne(bad, 1).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("out of BFloat16's range"));
}

TEST(ConvertBlockTest, TimeAndTime64FromInt64sOrData) {
  v1::Column time = Col("Time");
  for (int64_t v : {0, 3723, -3723, 3599999}) time.add_int64s(v);
  EXPECT_THAT(Converted(time, 4),
              ::testing::ElementsAre("00:00:00", "01:02:03", "-01:02:03", "999:59:59"));

  v1::Column time_data = Col("Time");
  time_data.set_data(LittleEndian<int32_t>({3723, -1}));
  EXPECT_THAT(Converted(time_data, 2), ::testing::ElementsAre("01:02:03", "-00:00:01"));

  v1::Column time64 = Col("Time64(3)");
  for (int64_t v : {int64_t{3723123}, int64_t{-1500}, int64_t{3599999999}}) time64.add_int64s(v);
  EXPECT_THAT(Converted(time64, 3),
              ::testing::ElementsAre("01:02:03.123", "-00:00:01.500", "999:59:59.999"));

  v1::Column time64_data = Col("Time64(3)");
  time64_data.set_data(LittleEndian<int64_t>({3723123}));
  EXPECT_THAT(Converted(time64_data, 1), ::testing::ElementsAre("01:02:03.123"));

  v1::Column over = Col("Time");
  over.add_int64s(3600000);
  absl::Status status = ConvertOne(over, 1).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("seconds outside Time's range -999:59:59 .. 999:59:59"));

  v1::Column over64 = Col("Time64(3)");
  over64.add_int64s(-3600000000);
  status = ConvertOne(over64, 1).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("ticks outside Time64's range -999:59:59 .. 999:59:59"));

  v1::Column unsigned_form = Col("Time");
  unsigned_form.add_uint64s(1);
  EXPECT_EQ(ConvertOne(unsigned_form, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- Query results: Variant, Dynamic, JSON and AggregateFunction as String layout --------------

// A column of `type` holding `values` converted by the rows path.
clickhouse::ColumnPtr RowsColumn(std::string_view type, const std::vector<v1::Value>& values) {
  absl::StatusOr<clickhouse::ColumnPtr> column = clickhouse::CreateColumn(type);
  EXPECT_TRUE(column.ok()) << type << ": " << column.status();
  if (!column.ok()) return nullptr;
  for (const v1::Value& v : values) {
    absl::Status status = ingest::AppendValue(ProtoValue(v), **column, {});
    EXPECT_TRUE(status.ok()) << status;
  }
  return *column;
}

v1::Value IntValue(int64_t v) {
  v1::Value value;
  value.set_int64_value(v);
  return value;
}

v1::Value StringValue(std::string v) {
  v1::Value value;
  value.set_string_value(std::move(v));
  return value;
}

v1::Value NullValue() {
  v1::Value value;
  value.set_null_value(google::protobuf::NULL_VALUE);
  return value;
}

std::vector<uint64_t> Offsets(const v1::Column& c) {
  return std::vector<uint64_t>(c.offsets().begin(), c.offsets().end());
}

TEST(QueryResultTextTest, VariantRowsArePlainTextWithNullsBackFilled) {
  clickhouse::ColumnPtr column = RowsColumn(
      "Variant(String, UInt64)",
      {StringValue("a\tb'"), IntValue(5), NullValue(), StringValue(""), StringValue("5")});
  ASSERT_NE(column, nullptr);
  clickhouse::Block src;
  src.AddColumn("v", column);
  ASSERT_TRUE(CheckResultColumns(src).ok());

  v1::Block out;
  AppendResultBlock(src, 0, 2, &out);  // no NULL yet: no `nulls`
  ASSERT_EQ(out.columns_size(), 1);
  const v1::Column& c = out.columns(0);
  EXPECT_EQ(c.name(), "v");
  EXPECT_EQ(c.type(), "Variant(String, UInt64)");
  EXPECT_EQ(c.children_size(), 0);
  EXPECT_EQ(c.nulls(), "");
  AppendResultBlock(src, 2, 5, &out);  // the first NULL back-fills the earlier rows
  EXPECT_EQ(out.rows(), 5u);
  // A String alternative's raw bytes (no TSV escapes), numbers as text, NULL as an empty value.
  EXPECT_EQ(c.data(),
            "a\tb'5"
            "5");
  EXPECT_EQ(Offsets(c), (std::vector<uint64_t>{4, 5, 5, 5, 6}));
  EXPECT_EQ(c.nulls(), std::string("\0\0\1\0\0", 5));
  EXPECT_EQ(c.strings_size(), 0);
}

TEST(QueryResultTextTest, DynamicRowsArePlainTextOfEachType) {
  v1::Value ts;
  ts.mutable_timestamp_value()->set_seconds(1714564800);
  ts.mutable_timestamp_value()->set_nanos(5);
  v1::Value array;
  array.mutable_array_value()->add_values()->set_int64_value(1);
  array.mutable_array_value()->add_values()->set_int64_value(2);
  v1::Value text_array;
  text_array.mutable_array_value()->add_values()->set_string_value("a'b");
  v1::Value flag;
  flag.set_bool_value(true);
  v1::Value number;
  number.set_double_value(1.5);
  clickhouse::ColumnPtr column = RowsColumn(
      "Dynamic",
      {IntValue(-5), number, flag, StringValue("a\\b"), array, NullValue(), ts, text_array});
  ASSERT_NE(column, nullptr);
  clickhouse::Block src;
  src.AddColumn("d", column);
  ASSERT_TRUE(CheckResultColumns(src).ok());
  v1::Block out;
  AppendResultBlock(src, 0, src.rows(), &out);
  const v1::Column& c = out.columns(0);
  EXPECT_EQ(c.type(), "Dynamic");
  std::vector<std::string> rows;
  uint64_t begin = 0;
  for (uint64_t end : c.offsets()) {
    rows.push_back(c.data().substr(begin, end - begin));
    begin = end;
  }
  // Containers print as ClickHouse text; a top-level String is its bytes.
  EXPECT_THAT(rows, ::testing::ElementsAre("-5", "1.5", "true", "a\\b", "[1,2]", "",
                                           "2024-05-01 12:00:00.000000005", "['a\\'b']"));
  EXPECT_EQ(c.nulls(), std::string("\0\0\0\0\0\1\0\0", 8));
}

TEST(QueryResultTextTest, JsonAndAggregateStatesWithoutNulls) {
  clickhouse::ColumnPtr json =
      RowsColumn("JSON", {StringValue(R"({"a":"x\ty"})"), StringValue("{}")});
  v1::Value state;
  state.set_bytes_value(std::string("\x80\x01", 2));
  clickhouse::ColumnPtr states = RowsColumn("AggregateFunction(count)", {state, state});
  ASSERT_NE(json, nullptr);
  ASSERT_NE(states, nullptr);
  clickhouse::Block src;
  src.AddColumn("j", json);
  src.AddColumn("s", states);
  ASSERT_TRUE(CheckResultColumns(src).ok());
  v1::Block out;
  AppendResultBlock(src, 0, 2, &out);
  ASSERT_EQ(out.columns_size(), 2);
  EXPECT_EQ(out.columns(0).type(), "JSON");
  EXPECT_EQ(out.columns(0).data(), R"({"a":"x\ty"}{})");
  EXPECT_EQ(Offsets(out.columns(0)), (std::vector<uint64_t>{12, 14}));
  EXPECT_EQ(out.columns(0).nulls(), "");
  EXPECT_EQ(out.columns(1).type(), "AggregateFunction(count)");
  EXPECT_EQ(out.columns(1).data(), std::string("\x80\x01\x80\x01", 4));
  EXPECT_EQ(Offsets(out.columns(1)), (std::vector<uint64_t>{2, 4}));
  EXPECT_EQ(out.columns(1).nulls(), "");
}

TEST(QueryResultTextTest, ResultTextConvertsBackThroughTheBlockPath) {
  // What a Query returns for Variant is what an insert Block takes (for values whose text is
  // unambiguous).
  clickhouse::ColumnPtr column =
      RowsColumn("Variant(String, UInt64)", {StringValue("x"), IntValue(7), NullValue()});
  clickhouse::Block src;
  src.AddColumn("v", column);
  v1::Block out;
  AppendResultBlock(src, 0, 3, &out);
  EXPECT_THAT(Alternatives(*ConvertedBlock(out.columns(0), 3).column(0).column),
              ::testing::ElementsAre("x as String", "7 as UInt64", "NULL"));
}

TEST(QueryResultTextTest, LowCardinalityStringAlternativeIsItsBytes) {
  constexpr std::string_view kType = "Variant(LowCardinality(String), UInt64)";
  clickhouse::ColumnPtr column =
      RowsColumn(kType, {StringValue("a\tb"), IntValue(5), StringValue("a\tb")});
  ASSERT_NE(column, nullptr);
  clickhouse::Block src;
  src.AddColumn("v", column);
  v1::Block out;
  AppendResultBlock(src, 0, 3, &out);
  EXPECT_EQ(out.columns(0).data(), "a\tb5a\tb");
  EXPECT_EQ(Offsets(out.columns(0)), (std::vector<uint64_t>{3, 4, 7}));

  // Block text tries LowCardinality(String) last, as it does String.
  v1::Column in = Col(std::string(kType));
  in.add_strings("5");
  in.add_strings("x");
  EXPECT_THAT(Alternatives(*ConvertedBlock(in, 2).column(0).column),
              ::testing::ElementsAre("5 as UInt64", "x as LowCardinality(String)"));
}

TEST(QueryResultTextTest, DynamicSharedVariantValuesArePlainTextToo) {
  // Dynamic V1 over [String] (alternatives: SharedVariant 0, String 1) of three rows: a String
  // "a<TAB>b" in SharedVariant (binary type 0x15), "s" in String, a Float64 1.5 in SharedVariant.
  namespace cht = clickhouse::testing;
  const std::string wire = cht::Bytes()
                               .U64(1)
                               .VarUInt(1)
                               .VarUInt(1)
                               .Str("String")
                               .U64(0)
                               .Raw(std::string("\0\1\0", 3))
                               .Str(std::string("\x15\x03"
                                                "a\tb",
                                                5))
                               .Str(std::string("\x0e\0\0\0\0\0\0\xf8\x3f", 9))
                               .Str("s");
  absl::StatusOr<clickhouse::ColumnPtr> column = clickhouse::CreateColumn("Dynamic");
  ASSERT_TRUE(column.ok());
  clickhouse::MemoryReadBuffer in(wire);
  ASSERT_TRUE((*column)->LoadPrefix(in).ok());
  ASSERT_TRUE((*column)->LoadBody(in, 3).ok());
  const auto& dynamic = static_cast<const clickhouse::ColumnDynamic&>(**column);
  ASSERT_TRUE(dynamic.IsShared(0));
  ASSERT_TRUE(dynamic.IsShared(2));

  clickhouse::Block src;
  src.AddColumn("d", *column);
  v1::Block out;
  AppendResultBlock(src, 0, 3, &out);
  EXPECT_EQ(out.columns(0).data(), "a\tbs1.5");
  EXPECT_EQ(Offsets(out.columns(0)), (std::vector<uint64_t>{3, 4, 7}));
  EXPECT_EQ(out.columns(0).nulls(), "");
}

}  // namespace
}  // namespace chgate::proto_convert
