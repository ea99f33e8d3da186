// ParseInsert, Prepare and ConvertingBytes: a request of rows is read in place from a copy of its
// bytes however gRPC cut them into slices, counted in the memory budget with that copy and its
// index, and freed by ReleaseInput; anything else (a columnar block, bytes protobuf refuses) takes
// protobuf's parse with its usual answer.
#include "server/service/insert_request.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"

namespace chgate::service {
namespace {

// `bytes` as gRPC might hold them: cut into slices at each offset in `cuts`.
grpc::ByteBuffer Received(const std::string& bytes, const std::vector<size_t>& cuts) {
  std::vector<grpc::Slice> slices;
  size_t from = 0;
  for (size_t cut : cuts) {
    slices.emplace_back(bytes.data() + from, cut - from);
    from = cut;
  }
  slices.emplace_back(bytes.data() + from, bytes.size() - from);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

v1::InsertRequest RowsRequest(int rows) {
  v1::InsertRequest request;
  request.set_table("db.events");
  request.add_columns("id");
  request.add_columns("msg");
  request.set_sequence(9);
  request.set_idempotency_key("k");
  request.set_ack_mode(v1::ACK_MODE_PERSISTED);
  for (int i = 0; i < rows; ++i) {
    v1::Row* row = request.mutable_rows()->add_rows();
    row->add_values()->set_uint64_value(static_cast<uint64_t>(i));
    row->add_values()->set_string_value("a value longer than fifteen bytes");
  }
  return request;
}

TEST(InsertRequestTest, RowsAreReadInPlaceAcrossSlicesAndCounted) {
  const std::string bytes = RowsRequest(50).SerializeAsString();
  for (const std::vector<size_t>& cuts :
       {std::vector<size_t>{}, {1}, {7, 100}, {bytes.size() / 2}, {bytes.size() - 1}}) {
    v1::InsertRequest message;
    PreparedInsert prepared;
    ASSERT_TRUE(ParseInsert(Received(bytes, cuts), &message, &prepared).ok());
    EXPECT_TRUE(prepared.rows_in_place);
    EXPECT_EQ(prepared.wire, bytes);
    EXPECT_EQ(message.table(), "db.events");
    EXPECT_EQ(message.sequence(), 9u);
    EXPECT_EQ(message.data_case(), v1::InsertRequest::kRows);
    EXPECT_EQ(message.rows().rows_size(), 0) << "the rows stay in the bytes";
    // The copy, the index and the converted columns (about the wire size again).
    EXPECT_GE(ConvertingBytes(message, bytes.size(), prepared),
              2 * bytes.size() + prepared.wire_rows.memory_bytes());
    ASSERT_TRUE(Prepare(message, absl::InfiniteFuture(), std::nullopt, &prepared).ok());
    EXPECT_EQ(prepared.row_count, 50u);
    ASSERT_EQ(prepared.request.rows, &prepared.wire_rows);
    EXPECT_EQ(prepared.request.rows->value(49, 0).uint64_value(), 49u);
    EXPECT_EQ(prepared.request.rows->value(3, 1).bytes_value(),
              "a value longer than fifteen bytes");
    EXPECT_EQ(prepared.request.ack, ingest::AckMode::kPersisted);
    prepared.ReleaseInput();
    EXPECT_TRUE(prepared.wire.empty());
    EXPECT_EQ(prepared.wire_rows.memory_bytes(), 0u);
  }
}

TEST(InsertRequestTest, BlocksAndRefusedBytesTakeProtobufsParse) {
  v1::InsertRequest block;
  block.set_table("t");
  block.mutable_block()->set_rows(0);
  const std::string block_bytes = block.SerializeAsString();
  v1::InsertRequest message;
  PreparedInsert prepared;
  ASSERT_TRUE(ParseInsert(Received(block_bytes, {1}), &message, &prepared).ok());
  EXPECT_FALSE(prepared.rows_in_place);
  EXPECT_TRUE(prepared.wire.empty()) << "a columnar request is not copied";
  EXPECT_TRUE(message.has_block());

  // A string value that is not UTF-8: the in-place reader declines, protobuf refuses.
  v1::InsertRequest bad = RowsRequest(1);
  bad.mutable_rows()->mutable_rows(0)->mutable_values(1)->set_bytes_value("\xff");
  std::string bad_bytes = bad.SerializeAsString();
  bad_bytes[bad_bytes.find('\x3a')] = '\x32';  // bytes_value -> string_value
  PreparedInsert refused;
  absl::Status s = ParseInsert(Received(bad_bytes, {}), &message, &refused);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  // Named precisely, with the request's sequence so that a stream answers it alone.
  EXPECT_TRUE(absl::StrContains(s.message(),
                                "field rows.rows[0].values[1].string_value is not valid UTF-8"))
      << s;
  EXPECT_EQ(refused.refused_sequence, std::optional<uint64_t>(bad.sequence()));
  EXPECT_FALSE(refused.rows_in_place);
  EXPECT_TRUE(refused.wire.empty());

  const std::string garbage = "\x1a\xff\xff\xff\x0f";
  s = ParseInsert(Received(garbage, {2}), &message, &refused);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "not a valid chgate.v1.InsertRequest")) << s;
  EXPECT_FALSE(refused.refused_sequence.has_value()) << "no sound framing, no sequence";
}

}  // namespace
}  // namespace chgate::service
