// SerializeQueryResponse: the bytes are exactly protobuf's (compared with SerializeAsString and
// parsed back by the generated code) for every Column shape, the large fields are referenced
// rather than copied, and the Block comes back to the recycler only when gRPC's last slice is
// released.
#include "server/service/response_wire.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chgate::service {
namespace {

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

void FillFixed(v1::Column* column, const std::string& name, size_t rows) {
  column->set_name(name);
  column->set_type("UInt64");
  std::string* data = column->mutable_data();
  for (uint64_t i = 0; i < rows; ++i) data->append(reinterpret_cast<const char*>(&i), sizeof(i));
}

void FillStrings(v1::Column* column, size_t rows, size_t width) {
  column->set_name("s");
  column->set_type("Nullable(String)");
  uint64_t end = 0;
  for (size_t i = 0; i < rows; ++i) {
    column->mutable_nulls()->push_back(i % 3 == 0 ? '\1' : '\0');
    const std::string value(i % 3 == 0 ? 0 : width, static_cast<char>('a' + i % 26));
    column->mutable_data()->append(value);
    end += value.size();
    column->add_offsets(end);
  }
}

// A block with every field shape: short and long data, nulls and offsets, nested children
// (Array(Tuple(...))), an empty column, and one with the request-side convenience fields.
v1::QueryResponse EveryShape(size_t rows) {
  v1::QueryResponse response;
  v1::Block* block = response.mutable_block();
  block->set_rows(rows);
  FillFixed(block->add_columns(), "n", rows);
  FillStrings(block->add_columns(), rows, 40);
  v1::Column* array = block->add_columns();
  array->set_name("a");
  array->set_type("Array(Tuple(x UInt64, y String))");
  for (size_t i = 0; i < rows; ++i) array->add_offsets(2 * (i + 1));
  v1::Column* tuple = array->add_children();
  tuple->set_type("Tuple(x UInt64, y String)");
  FillFixed(tuple->add_children(), "x", 2 * rows);
  FillStrings(tuple->add_children(), 2 * rows, 3);
  block->add_columns()->set_type("Nothing");
  v1::Column* convenience = block->add_columns();
  convenience->set_name("c");
  convenience->set_type("Int64");
  convenience->add_int64s(-1);
  convenience->add_strings("x");
  return response;
}

TEST(ResponseWireTest, BytesAreProtobufsForEveryShapeAndSize) {
  for (size_t rows : {0, 1, 3, 100, 5000}) {
    SCOPED_TRACE(rows);
    v1::QueryResponse response = EveryShape(rows);
    if (rows == 0) response.mutable_block()->Clear();
    const v1::QueryResponse original = response;
    const std::string expected = original.SerializeAsString();
    grpc::ByteBuffer out;
    SerializeQueryResponse(&response, nullptr, &out);
    const std::string bytes = Flatten(out);
    EXPECT_EQ(bytes, expected);
    v1::QueryResponse parsed;
    ASSERT_TRUE(parsed.ParseFromString(bytes));
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, original));
    EXPECT_FALSE(response.has_block()) << "the Block moves into the serialized bytes";
  }
}

TEST(ResponseWireTest, TotalsExtremesAndOtherKindsMatchProtobuf) {
  v1::QueryResponse totals;
  *totals.mutable_totals() = EveryShape(1).block();
  v1::QueryResponse extremes;
  *extremes.mutable_extremes() = EveryShape(2).block();
  v1::QueryResponse header;
  header.mutable_header()->set_query_id("q");
  header.mutable_header()->add_columns()->set_name("n");
  v1::QueryResponse summary;
  summary.mutable_summary()->set_rows(7);
  for (v1::QueryResponse* message : {&totals, &extremes, &header, &summary}) {
    const std::string expected = message->SerializeAsString();
    grpc::ByteBuffer out;
    SerializeQueryResponse(message, nullptr, &out);
    EXPECT_EQ(Flatten(out), expected);
  }
}

TEST(ResponseWireTest, LargeFieldsAreReferencedNotCopied) {
  v1::QueryResponse response = EveryShape(1000);
  const char* data = response.block().columns(0).data().data();
  const auto* offsets = response.block().columns(1).offsets().data();
  grpc::ByteBuffer out;
  SerializeQueryResponse(&response, nullptr, &out);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(out.Dump(&slices).ok());
  bool data_referenced = false;
  bool offsets_referenced = false;
  for (const grpc::Slice& s : slices) {
    data_referenced |= reinterpret_cast<const char*>(s.begin()) == data;
    offsets_referenced |= reinterpret_cast<const void*>(s.begin()) == offsets;
  }
  EXPECT_TRUE(data_referenced);
  EXPECT_TRUE(offsets_referenced);
}

TEST(ResponseWireTest, TheBlockReturnsToTheRecyclerWhenTheLastSliceIsReleased) {
  auto recycler = std::make_shared<BlockRecycler>(2);
  std::unique_ptr<v1::Block> block = recycler->Take();
  *block = EveryShape(1000).block();
  const size_t capacity = block->columns(0).data().capacity();
  v1::Block* const address = block.get();
  v1::QueryResponse response;
  response.set_allocated_block(block.release());
  auto out = std::make_unique<grpc::ByteBuffer>();
  SerializeQueryResponse(&response, recycler, out.get());
  std::vector<grpc::Slice> held;  // like a transport still holding the bytes after the write
  ASSERT_TRUE(out->Dump(&held).ok());
  out.reset();
  std::unique_ptr<v1::Block> fresh = recycler->Take();
  EXPECT_NE(fresh.get(), address) << "returned while slices were still held";
  held.clear();
  std::unique_ptr<v1::Block> reused = recycler->Take();
  ASSERT_EQ(reused.get(), address);
  EXPECT_EQ(reused->columns_size(), 0) << "returned cleared";
  EXPECT_EQ(reused->rows(), 0u);
  EXPECT_GT(capacity, 0u);
}

TEST(ResponseWireTest, TheRecyclerKeepsAtMostItsLimit) {
  BlockRecycler recycler(1);
  auto a = std::make_unique<v1::Block>();
  auto b = std::make_unique<v1::Block>();
  v1::Block* const kept = a.get();
  recycler.Return(std::move(a));
  recycler.Return(std::move(b));  // freed: one is kept
  EXPECT_EQ(recycler.Take().get(), kept);
  EXPECT_NE(recycler.Take().get(), nullptr);
}

// A held range over its own copy of `bytes`; `watch` sees when the range's owner is released.
HeldBytes HeldCopy(const std::string& bytes, std::weak_ptr<const void>* watch = nullptr) {
  auto owned = std::make_shared<const std::string>(bytes);
  HeldBytes range{.data = owned->data(), .size = owned->size()};
  if (watch != nullptr) *watch = owned;
  range.owner = std::move(owned);
  return range;
}

std::string Fixed64(uint64_t first, size_t rows) {
  std::string out;
  for (uint64_t i = first; i < first + rows; ++i) {
    out.append(reinterpret_cast<const char*>(&i), sizeof(i));
  }
  return out;
}

TEST(ResponseWireTest, HeldColumnDataIsWrittenAsIfItWereInTheMessage) {
  for (size_t rows : {1, 100, 5000}) {
    SCOPED_TRACE(rows);
    // Columns 0 and 3 (both UInt64) hold their data outside the message, in ranges short and
    // long, the first of column 0 moved out of the message by Hold.
    QueryMessage message(EveryShape(rows));
    v1::Block* block = message.response.mutable_block();
    FillFixed(block->add_columns(), "m", 0);
    const std::string a = block->columns(0).data();
    const std::string b = Fixed64(7, 300), c = Fixed64(1000, rows), d = Fixed64(5, 3);
    std::weak_ptr<const void> watch_c;
    message.Hold(0, HeldCopy(b));
    message.Hold(0, HeldCopy(c, &watch_c));
    message.Hold(block->columns_size() - 1, HeldCopy(d));
    message.Hold(block->columns_size() - 1, HeldCopy(""));
    ASSERT_EQ(message.held.size(), 2u);
    EXPECT_EQ(message.held[0].column, 0);
    EXPECT_EQ(message.held[0].bytes, a.size() + b.size() + c.size());
    EXPECT_TRUE(message.response.block().columns(0).data().empty());

    QueryMessage materialized = message;
    materialized.Materialize();
    EXPECT_EQ(materialized.response.block().columns(0).data(), a + b + c);
    EXPECT_EQ(materialized.response.block().columns(block->columns_size() - 1).data(), d);
    const std::string expected = materialized.response.SerializeAsString();
    EXPECT_EQ(message.ByteSize(), expected.size());

    auto out = std::make_unique<grpc::ByteBuffer>();
    SerializeQueryResponse(&message, nullptr, out.get());
    EXPECT_EQ(Flatten(*out), expected);
    EXPECT_TRUE(message.held.empty()) << "the ranges move into the serialized bytes";
    materialized = QueryMessage();
    EXPECT_FALSE(watch_c.expired()) << "released while the bytes still reference it";
    out.reset();
    EXPECT_TRUE(watch_c.expired());
  }
}

TEST(ResponseWireTest, LongHeldRangesAreReferencedNotCopied) {
  QueryMessage message;
  message.response.mutable_block()->set_rows(1000);
  FillFixed(message.response.mutable_block()->add_columns(), "n", 0);
  const std::string values = Fixed64(0, 1000);
  auto owned = std::make_shared<const std::string>(values);
  const char* const data = owned->data();
  message.Hold(0, {.owner = owned, .data = data, .size = 4000});
  message.Hold(0, {.owner = owned, .data = data + 4000, .size = 4000});
  owned.reset();
  grpc::ByteBuffer out;
  SerializeQueryResponse(&message, nullptr, &out);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(out.Dump(&slices).ok());
  size_t referenced = 0;
  for (const grpc::Slice& s : slices) {
    const auto* begin = reinterpret_cast<const char*>(s.begin());
    if (begin == data || begin == data + 4000) ++referenced;
  }
  EXPECT_EQ(referenced, 2u);
}

}  // namespace
}  // namespace chgate::service
