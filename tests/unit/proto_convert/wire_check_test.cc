// CheckWire: the path of the first string field that is not UTF-8, through
// nested and repeated messages and maps, and the top-level sequence read on the way; broken
// framing is told apart from a bad string.
#include "server/proto_convert/wire_check.h"

#include <gtest/gtest.h>

#include <string>

#include "chgate/v1/chgate.pb.h"

namespace chgate::proto_convert {
namespace {

// `message` serialized with its first "@@" (in a string field) replaced by bytes that are not
// UTF-8: protobuf would not serialize them as a string itself without complaint.
template <class Message>
std::string WithBadBytes(const Message& message) {
  std::string wire = message.SerializeAsString();
  const size_t at = wire.find("@@");
  EXPECT_NE(at, std::string::npos);
  if (at != std::string::npos) wire.replace(at, 2, "\xc3\x28");  // a lead byte without its tail
  return wire;
}

v1::InsertRequest Request() {
  v1::InsertRequest request;
  request.set_table("events");
  request.set_sequence(42);
  for (int r = 0; r < 3; ++r) {
    v1::Row* row = request.mutable_rows()->add_rows();
    row->add_values()->set_uint64_value(r);
    row->add_values()->set_string_value("fine");
  }
  return request;
}

TEST(WireCheckTest, NamesTheFirstStringThatIsNotUtf8WithItsIndexes) {
  v1::InsertRequest request = Request();
  request.mutable_rows()->mutable_rows(2)->mutable_values(1)->set_string_value("x@@");
  const std::string wire = WithBadBytes(request);
  v1::InsertRequest parsed;
  EXPECT_FALSE(parsed.ParseFromString(wire)) << "protobuf refuses it";
  const WireCheck check =
      CheckWire(wire, *v1::InsertRequest::descriptor(), v1::InsertRequest::kSequenceFieldNumber);
  EXPECT_TRUE(check.well_formed);
  EXPECT_EQ(check.bad_utf8_field, "rows.rows[2].values[1].string_value");
  EXPECT_EQ(check.top_level_varint, 42u);
}

TEST(WireCheckTest, ReachesIntoArraysAndMapsAndTopLevelStrings) {
  v1::InsertRequest in_array = Request();
  v1::Value* array = in_array.mutable_rows()->mutable_rows(0)->add_values();
  array->mutable_array_value()->add_values()->set_string_value("a");
  array->mutable_array_value()->add_values()->set_string_value("@@");
  EXPECT_EQ(CheckWire(WithBadBytes(in_array), *v1::InsertRequest::descriptor()).bad_utf8_field,
            "rows.rows[0].values[2].array_value.values[1].string_value");

  v1::InsertRequest in_table = Request();
  in_table.set_table("t@@");
  EXPECT_EQ(CheckWire(WithBadBytes(in_table), *v1::InsertRequest::descriptor()).bad_utf8_field,
            "table");
}

TEST(WireCheckTest, AValidMessageHasNoFindingAndBrokenFramingIsNotWellFormed) {
  const std::string wire = Request().SerializeAsString();
  const WireCheck fine = CheckWire(wire, *v1::InsertRequest::descriptor());
  EXPECT_TRUE(fine.well_formed);
  EXPECT_TRUE(fine.bad_utf8_field.empty());
  // Cut inside the last row: a length runs past the end.
  const std::string cut = wire.substr(0, wire.size() - 3);
  const WireCheck broken =
      CheckWire(cut, *v1::InsertRequest::descriptor(), v1::InsertRequest::kSequenceFieldNumber);
  EXPECT_FALSE(broken.well_formed);
  EXPECT_FALSE(broken.top_level_varint.has_value());
  // A nested message whose last field runs past the nested length, though not past the end.
  EXPECT_FALSE(CheckWire(std::string("\x1a\x02\x0a\x05hello", 9), *v1::InsertRequest::descriptor())
                   .well_formed);
  EXPECT_FALSE(CheckWire(std::string("\x0b", 1), *v1::InsertRequest::descriptor()).well_formed);
  // No sequence field: absent, though the framing is sound.
  v1::InsertRequest no_sequence = Request();
  no_sequence.clear_sequence();
  EXPECT_FALSE(CheckWire(no_sequence.SerializeAsString(), *v1::InsertRequest::descriptor(),
                         v1::InsertRequest::kSequenceFieldNumber)
                   .top_level_varint.has_value());
}

}  // namespace
}  // namespace chgate::proto_convert
