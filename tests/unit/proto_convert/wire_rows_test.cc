// Rows read in place (DecodeRowsRequest, WireRows): every request it reads must read exactly as
// protobuf's parse of the same bytes (random requests of every value kind and nesting, unknown
// fields at every level, every prefix and many single-byte changes of a request), and what it
// declines is what protobuf would read differently or what gains nothing (blocks, merged fields,
// bad UTF-8, deep nesting).
#include "server/proto_convert/wire_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "google/protobuf/unknown_field_set.h"
#include "tests/unit/proto_convert/same_rows.h"

namespace chgate::proto_convert {
namespace {

using testing::RequestDifference;

class RandomValues {
 public:
  explicit RandomValues(uint32_t seed) : rng_(seed) {}

  void Fill(v1::Value* v, int depth) {
    switch (Pick(depth < 3 ? 12 : 9)) {
      case 0:
        break;  // no kind
      case 1:
        v->set_null_value(google::protobuf::NULL_VALUE);
        break;
      case 2:
        v->set_bool_value(Pick(2) == 1);
        break;
      case 3:
        v->set_int64_value(static_cast<int64_t>(rng_()));  // any int64, negative ones too
        break;
      case 4:
        v->set_uint64_value(rng_() << (Pick(4) * 16));
        break;
      case 5: {
        const double special[] = {0.0,
                                  -0.0,
                                  std::numeric_limits<double>::infinity(),
                                  std::numeric_limits<double>::quiet_NaN(),
                                  1e-310,
                                  3.25};
        v->set_double_value(special[Pick(6)]);
        break;
      }
      case 6:
        v->set_string_value(Text());
        break;
      case 7:
        v->set_bytes_value(std::string(Pick(40), static_cast<char>(Pick(256))));
        break;
      case 8:
        v->mutable_timestamp_value()->set_seconds(static_cast<int64_t>(rng_() % 4000000000) -
                                                  1000000000);
        if (Pick(2) == 1) v->mutable_timestamp_value()->set_nanos(static_cast<int32_t>(Pick(1000)));
        break;
      case 9:
      case 10: {
        v1::ValueList* list = Pick(2) == 0 ? v->mutable_array_value() : v->mutable_tuple_value();
        for (int i = Pick(5); i > 0; --i) Fill(list->add_values(), depth + 1);
        break;
      }
      case 11: {
        v1::MapValue* map = v->mutable_map_value();
        for (int i = Pick(4); i > 0; --i) {
          v1::MapValue::Entry* e = map->add_entries();
          if (Pick(5) != 0) Fill(e->mutable_key(), depth + 1);
          if (Pick(5) != 0) Fill(e->mutable_value(), depth + 1);
        }
        break;
      }
    }
  }

  v1::InsertRequest Request(int rows, int columns) {
    v1::InsertRequest request;
    request.set_table(Pick(2) == 0 ? "db.events" : "t\xc3\xa9st");
    for (int c = 0; c < columns; ++c) request.add_columns("c" + std::to_string(c));
    request.set_sequence(rng_());
    if (Pick(2) == 0) request.set_idempotency_key("key-" + std::to_string(Pick(1000)));
    request.set_ack_mode(static_cast<v1::AckMode>(Pick(4)));
    v1::RowSet* set = request.mutable_rows();
    for (int r = 0; r < rows; ++r) {
      v1::Row* row = set->add_rows();
      for (int c = 0; c < columns; ++c) Fill(row->add_values(), 0);
    }
    return request;
  }

  int Pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

 private:
  std::string Text() {
    const char* pieces[] = {"a", "0123456789abcdef", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                            ""};
    std::string out;
    for (int i = Pick(6); i > 0; --i) out += pieces[Pick(6)];
    return out;
  }

  std::mt19937_64 rng_;
};

// DecodeRowsRequest on `bytes`: when it reads them, protobuf must read the same; returns whether
// it read them.
bool ReadsAsProtobuf(const std::string& bytes) {
  v1::InsertRequest fields;
  WireRows rows;
  if (!DecodeRowsRequest(bytes, &fields, &rows)) return false;
  v1::InsertRequest parsed;
  EXPECT_TRUE(parsed.ParseFromString(bytes)) << "read what protobuf refuses";
  EXPECT_EQ(RequestDifference(fields, rows, parsed), "");
  return true;
}

TEST(WireRowsTest, RandomRequestsReadAsProtobufReadsThem) {
  RandomValues random(7);
  for (int i = 0; i < 300; ++i) {
    const v1::InsertRequest request = random.Request(random.Pick(20), 1 + random.Pick(5));
    EXPECT_TRUE(ReadsAsProtobuf(request.SerializeAsString())) << i;
  }
}

TEST(WireRowsTest, EmptyRowsAndEmptyValues) {
  v1::InsertRequest request;
  request.set_table("t");
  request.mutable_rows();  // rows present, none in it
  EXPECT_TRUE(ReadsAsProtobuf(request.SerializeAsString()));
  request.mutable_rows()->add_rows();                // a row without values
  request.mutable_rows()->add_rows()->add_values();  // a value without a kind
  v1::InsertRequest fields;
  WireRows rows;
  ASSERT_TRUE(DecodeRowsRequest(request.SerializeAsString(), &fields, &rows));
  ASSERT_EQ(rows.row_count(), 2u);
  EXPECT_EQ(rows.value_count(0), 0u);
  EXPECT_EQ(rows.value(1, 0).kind(), ingest::ValueKind::kUnset);
  EXPECT_EQ(fields.data_case(), v1::InsertRequest::kRows);
}

TEST(WireRowsTest, UnknownFieldsAtEveryLevelAreSkipped) {
  RandomValues random(11);
  v1::InsertRequest request = random.Request(3, 2);
  v1::Value* value = request.mutable_rows()->mutable_rows(1)->mutable_values(0);
  value->set_string_value("x");
  v1::Value* ts = request.mutable_rows()->mutable_rows(2)->mutable_values(1);
  ts->mutable_timestamp_value()->set_seconds(5);
  const auto add_unknown = [](google::protobuf::Message* m) {
    google::protobuf::UnknownFieldSet* u = m->GetReflection()->MutableUnknownFields(m);
    u->AddVarint(100, 3);
    u->AddFixed32(101, 4);
    u->AddFixed64(102, 5);
    u->AddLengthDelimited(103, "\xff\xfe");  // not UTF-8, and not read
  };
  add_unknown(&request);
  add_unknown(request.mutable_rows());
  add_unknown(request.mutable_rows()->mutable_rows(0));
  add_unknown(value);
  add_unknown(ts->mutable_timestamp_value());
  EXPECT_TRUE(ReadsAsProtobuf(request.SerializeAsString()));
}

TEST(WireRowsTest, EveryPrefixAndByteChangeReadsAsProtobufOrIsDeclined) {
  RandomValues random(3);
  const std::string bytes = random.Request(6, 3).SerializeAsString();
  int read = 0;
  for (size_t n = 0; n <= bytes.size(); ++n) read += ReadsAsProtobuf(bytes.substr(0, n)) ? 1 : 0;
  EXPECT_GT(read, 0);
  std::mt19937 rng(5);
  for (int i = 0; i < 3000; ++i) {
    std::string changed = bytes;
    changed[rng() % changed.size()] = static_cast<char>(rng());
    ReadsAsProtobuf(changed);
  }
}

TEST(WireRowsTest, DeclinesWhatProtobufWouldMergeOrRefuse) {
  v1::InsertRequest fields;
  WireRows rows;
  const auto declines = [&](const std::string& bytes) {
    return !DecodeRowsRequest(bytes, &fields, &rows);
  };
  v1::InsertRequest base;
  base.set_table("t");
  base.mutable_rows()->add_rows()->add_values()->set_int64_value(1);
  ASSERT_FALSE(declines(base.SerializeAsString()));

  v1::InsertRequest block = base;
  block.mutable_block()->set_rows(0);
  EXPECT_TRUE(declines(block.SerializeAsString())) << "a columnar block";
  v1::InsertRequest no_rows;
  no_rows.set_table("t");
  EXPECT_TRUE(declines(no_rows.SerializeAsString())) << "no rows";
  EXPECT_TRUE(declines(base.SerializeAsString() + base.SerializeAsString()))
      << "the RowSet twice (protobuf merges)";

  // A Value with two kinds: protobuf keeps the last.
  const std::string two_kinds("\x18\x01\x20\x02", 4);  // int64_value 1, uint64_value 2
  const std::string row = "\x0a" + std::string(1, static_cast<char>(two_kinds.size())) + two_kinds;
  const std::string set = "\x0a" + std::string(1, static_cast<char>(row.size())) + row;
  EXPECT_TRUE(declines("\x1a" + std::string(1, static_cast<char>(set.size())) + set));

  v1::InsertRequest bad_text;
  bad_text.mutable_rows()->add_rows()->add_values()->set_bytes_value("\xff");
  std::string bytes = bad_text.SerializeAsString();
  bytes[bytes.find('\x3a')] = '\x32';  // bytes_value (7) -> string_value (6): invalid UTF-8
  EXPECT_TRUE(declines(bytes));
  v1::InsertRequest parsed;
  EXPECT_FALSE(parsed.ParseFromString(bytes)) << "protobuf refuses it as well";

  v1::InsertRequest deep;
  v1::Value* v = deep.mutable_rows()->add_rows()->add_values();
  for (int i = 0; i < 40; ++i) v = v->mutable_array_value()->add_values();
  v->set_int64_value(1);
  EXPECT_TRUE(declines(deep.SerializeAsString())) << "nesting past 64 levels";
  v1::InsertRequest shallow;
  v = shallow.mutable_rows()->add_rows()->add_values();
  for (int i = 0; i < 20; ++i) v = v->mutable_array_value()->add_values();
  v->set_int64_value(1);
  EXPECT_TRUE(ReadsAsProtobuf(shallow.SerializeAsString()));

  v1::InsertRequest map;
  v1::MapValue::Entry* entry =
      map.mutable_rows()->add_rows()->add_values()->mutable_map_value()->add_entries();
  entry->mutable_key()->set_string_value("k");
  entry->mutable_value()->set_int64_value(1);
  EXPECT_TRUE(ReadsAsProtobuf(map.SerializeAsString()));
  // The entry's key repeated inside the entry: protobuf would merge the two keys.
  v1::MapValue::Entry again;
  again.mutable_key()->set_string_value("k");
  const std::string key_twice = again.SerializeAsString() + again.SerializeAsString();
  const std::string value_bytes = "\x5a" + std::string(1, static_cast<char>(key_twice.size() + 2)) +
                                  "\x0a" + std::string(1, static_cast<char>(key_twice.size())) +
                                  key_twice;
  const std::string row2 =
      "\x0a" + std::string(1, static_cast<char>(value_bytes.size())) + value_bytes;
  const std::string set2 = "\x0a" + std::string(1, static_cast<char>(row2.size())) + row2;
  EXPECT_TRUE(declines("\x1a" + std::string(1, static_cast<char>(set2.size())) + set2));

  // A known field of the wrong wire type (table as a varint).
  EXPECT_TRUE(declines("\x08\x01" + base.SerializeAsString()));

  // Tags and lengths longer than 5 bytes, even of small values, which protobuf refuses (found by
  // insert_request_fuzz: an unknown field's tag in 8 bytes).
  const auto one_row_of = [](const std::string& value) {
    const std::string one = "\x0a" + std::string(1, static_cast<char>(value.size())) + value;
    const std::string set_bytes = "\x0a" + std::string(1, static_cast<char>(one.size())) + one;
    return "\x1a" + std::string(1, static_cast<char>(set_bytes.size())) + set_bytes;
  };
  const std::string long_tag("\xf2\x80\x80\x80\x80\x80\x80\x00\x00", 9);  // field 14, length 0
  const std::string long_length("\x32\x81\x80\x80\x80\x80\x00x", 8);      // string_value "x"
  for (const std::string& value : {long_tag, long_length}) {
    EXPECT_TRUE(declines(one_row_of(value)));
    EXPECT_FALSE(parsed.ParseFromString(one_row_of(value))) << "protobuf refuses it as well";
  }
  const std::string five_byte_tag("\xf2\x80\x80\x80\x00\x00", 6);  // the longest protobuf reads
  EXPECT_TRUE(ReadsAsProtobuf(one_row_of(five_byte_tag)));
}

// `bytes` cut at each offset in `cuts` (ascending).
std::vector<std::string_view> Pieces(std::string_view bytes, std::vector<size_t> cuts) {
  std::vector<std::string_view> out;
  size_t from = 0;
  for (size_t cut : cuts) {
    out.push_back(bytes.substr(from, cut - from));
    from = cut;
  }
  out.push_back(bytes.substr(from));
  return out;
}

TEST(WireRowsTest, CarriesRowsIsToldAcrossPiecesWithoutCopying) {
  RandomValues random(13);
  const std::string rows = random.Request(5, 2).SerializeAsString();
  for (size_t cut = 0; cut <= rows.size(); ++cut) {
    EXPECT_TRUE(CarriesRows(Pieces(rows, {cut}))) << cut;
    EXPECT_TRUE(CarriesRows(Pieces(rows, {cut / 2, cut, cut}))) << cut;
  }
  v1::InsertRequest block;
  block.set_table("t");
  block.mutable_block()->set_rows(3);
  EXPECT_FALSE(CarriesRows(Pieces(block.SerializeAsString(), {2})));
  v1::InsertRequest nothing;
  nothing.set_table("t");
  nothing.set_sequence(4);
  EXPECT_FALSE(CarriesRows(Pieces(nothing.SerializeAsString(), {})));
  EXPECT_FALSE(CarriesRows({}));
  // A prefix carries rows when it is a whole request with them (cut between two fields after
  // the rows), as protobuf reads it; never when the cut tears a field.
  for (size_t n = 0; n < rows.size(); ++n) {
    const std::string prefix = rows.substr(0, n);
    v1::InsertRequest parsed;
    const bool whole = parsed.ParseFromString(prefix) && parsed.has_rows();
    EXPECT_EQ(CarriesRows(Pieces(prefix, {n / 3})), whole) << "cut at " << n;
  }
}

TEST(WireRowsTest, StringsPointIntoTheBytesAndMemoryIsCounted) {
  v1::InsertRequest request;
  v1::Row* row = request.mutable_rows()->add_rows();
  row->add_values()->set_string_value(std::string(100, 'x'));
  row->add_values()->mutable_array_value()->add_values()->set_uint64_value(9);
  const std::string bytes = request.SerializeAsString();
  v1::InsertRequest fields;
  WireRows rows;
  ASSERT_TRUE(DecodeRowsRequest(bytes, &fields, &rows));
  const std::string_view text = rows.value(0, 0).bytes_value();
  EXPECT_GE(text.data(), bytes.data());
  EXPECT_LE(text.data() + text.size(), bytes.data() + bytes.size());
  EXPECT_EQ(rows.node_count(), 3u);
  EXPECT_EQ(rows.value(0, 1).element(0).uint64_value(), 9u);
  EXPECT_GE(rows.memory_bytes(), 3 * sizeof(WireNode));
  rows.Clear();
  EXPECT_EQ(rows.memory_bytes(), 0u);
}

}  // namespace
}  // namespace chgate::proto_convert
