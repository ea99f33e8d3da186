#include "server/service/response_wire.h"

#include <atomic>
#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "server/service/raw_messages.h"

namespace chgate::service {

static_assert(std::endian::native == std::endian::little,
              "a packed fixed64 field is referenced as the RepeatedField's memory");

std::unique_ptr<v1::Block> BlockRecycler::Take() {
  absl::MutexLock lock(&mu_);
  if (spare_.empty()) return std::make_unique<v1::Block>();
  std::unique_ptr<v1::Block> block = std::move(spare_.back());
  spare_.pop_back();
  return block;
}

void BlockRecycler::Return(std::unique_ptr<v1::Block> block) {
  block->Clear();  // outside the lock: clearing walks every column
  absl::MutexLock lock(&mu_);
  if (spare_.size() < keep_) spare_.push_back(std::move(block));
}

namespace {

// protobuf wire types.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kLengthDelimited = 2;
// Column.data's field number.
constexpr uint32_t kColumnData = 5;

size_t VarintSize(uint64_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

// Bytes of a length-delimited field (tag of one byte) with `size` bytes of content.
size_t FieldSize(size_t size) { return 1 + VarintSize(size) + size; }

// The serialized size of `column` with `held` data (null: none); the column's cached size must
// be current.
size_t ColumnSize(const v1::Column& column, const QueryMessage::HeldColumn* held) {
  const size_t size = column.GetCachedSize();
  return held == nullptr || held->bytes == 0 ? size : size + FieldSize(held->bytes);
}

// The serialized size of `block` with the held data of `held` (by increasing column); cached
// sizes must be current.
size_t BlockSize(const v1::Block& block, const std::vector<QueryMessage::HeldColumn>& held) {
  if (held.empty()) return block.GetCachedSize();
  size_t size = block.rows() != 0 ? 1 + VarintSize(block.rows()) : 0;
  auto next = held.begin();
  for (int i = 0; i < block.columns_size(); ++i) {
    const QueryMessage::HeldColumn* h = nullptr;
    if (next != held.end() && next->column == i) h = &*next++;
    size += FieldSize(ColumnSize(block.columns(i), h));
  }
  return size;
}

// What the slices of one serialized message share: the Block they point into and the framing
// bytes between the referenced fields. Deleted when the last slice is released.
struct SliceOwner {
  std::unique_ptr<v1::Block> block;
  std::vector<QueryMessage::HeldColumn> held;
  std::string framing;
  std::shared_ptr<BlockRecycler> recycler;
  std::atomic<size_t> slices{0};
};

void ReleaseSlice(void* user_data) {
  auto* owner = static_cast<SliceOwner*>(user_data);
  if (owner->slices.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (owner->recycler != nullptr && owner->block != nullptr) {
    owner->recycler->Return(std::move(owner->block));
  }
  delete owner;
}

// Writes a message's bytes as a list of segments: runs of framing (tags, lengths and short
// fields, appended to the owner's string) and referenced ranges of the Block's buffers.
class SegmentWriter {
 public:
  explicit SegmentWriter(SliceOwner* owner) : owner_(owner) {}

  void Varint(uint64_t value) {
    char bytes[10];
    size_t n = 0;
    while (value >= 0x80) {
      bytes[n++] = static_cast<char>(value | 0x80);
      value >>= 7;
    }
    bytes[n++] = static_cast<char>(value);
    owner_->framing.append(bytes, n);
  }

  void Tag(uint32_t field, uint32_t wire_type) { Varint((field << 3) | wire_type); }

  // A length-delimited field, omitted when empty (proto3 semantics, as protobuf writes it).
  void Bytes(uint32_t field, const char* data, size_t size) {
    if (size == 0) return;
    Tag(field, kLengthDelimited);
    Varint(size);
    if (size < kReferencedFieldBytes) {
      owner_->framing.append(data, size);
      return;
    }
    CloseFraming();
    segments_.push_back({.referenced = data, .offset = 0, .size = size});
  }
  void Bytes(uint32_t field, const std::string& value) { Bytes(field, value.data(), value.size()); }

  // A length-delimited field whose content is `ranges` concatenated (`bytes` in all).
  void Ranges(uint32_t field, const std::vector<HeldBytes>& ranges, size_t bytes) {
    if (bytes == 0) return;
    Tag(field, kLengthDelimited);
    Varint(bytes);
    for (const HeldBytes& range : ranges) {
      if (range.size == 0) continue;
      if (range.size < kReferencedFieldBytes) {
        owner_->framing.append(range.data, range.size);
        continue;
      }
      CloseFraming();
      segments_.push_back({.referenced = range.data, .offset = 0, .size = range.size});
    }
  }

  // protobuf's own serialization of `message` (whose cached size is current) into the framing.
  void Message(const google::protobuf::MessageLite& message) {
    std::string& framing = owner_->framing;
    const size_t at = framing.size();
    framing.resize(at + message.GetCachedSize());
    message.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(framing.data() + at));
  }

  // The slices, in order; every one holds a reference to the owner.
  std::vector<grpc::Slice> Finish() {
    CloseFraming();
    owner_->slices.store(segments_.size(), std::memory_order_release);
    std::vector<grpc::Slice> slices;
    slices.reserve(segments_.size());
    for (const Segment& s : segments_) {
      const char* data = s.referenced != nullptr ? s.referenced : owner_->framing.data() + s.offset;
      slices.emplace_back(const_cast<char*>(data), s.size, &ReleaseSlice, owner_);
    }
    return slices;
  }

 private:
  struct Segment {
    const char* referenced;  // null: framing bytes [offset, offset + size)
    size_t offset;
    size_t size;
  };

  void CloseFraming() {
    const size_t end = owner_->framing.size();
    if (end > framing_start_) {
      segments_.push_back(
          {.referenced = nullptr, .offset = framing_start_, .size = end - framing_start_});
    }
    framing_start_ = end;
  }

  SliceOwner* const owner_;
  std::vector<Segment> segments_;
  size_t framing_start_ = 0;
};

// `held`: the column's data outside the message (null: none).
void WriteColumn(const v1::Column& column, const QueryMessage::HeldColumn* held,
                 SegmentWriter* out) {
  if (held == nullptr && (column.int64s_size() > 0 || column.uint64s_size() > 0 ||
                          column.float64s_size() > 0 || column.strings_size() > 0)) {
    // The convenience fields are for requests; a response never sets them, but a column that
    // has them is still serialized correctly, by protobuf.
    out->Message(column);
    return;
  }
  out->Bytes(1, column.name());
  out->Bytes(2, column.type());
  out->Bytes(3, column.nulls());
  out->Bytes(4, reinterpret_cast<const char*>(column.offsets().data()),
             static_cast<size_t>(column.offsets_size()) * sizeof(uint64_t));
  if (held != nullptr) {
    out->Ranges(kColumnData, held->ranges, held->bytes);
  } else {
    out->Bytes(kColumnData, column.data());
  }
  for (const v1::Column& child : column.children()) {
    out->Tag(6, kLengthDelimited);
    out->Varint(child.GetCachedSize());
    WriteColumn(child, nullptr, out);
  }
}

void WriteBlock(uint32_t field, const v1::Block& block,
                const std::vector<QueryMessage::HeldColumn>& held, SegmentWriter* out) {
  out->Tag(field, kLengthDelimited);
  out->Varint(BlockSize(block, held));
  if (block.rows() != 0) {
    out->Tag(1, kVarint);
    out->Varint(block.rows());
  }
  auto next = held.begin();
  for (int i = 0; i < block.columns_size(); ++i) {
    const QueryMessage::HeldColumn* h = nullptr;
    if (next != held.end() && next->column == i) h = &*next++;
    out->Tag(2, kLengthDelimited);
    out->Varint(ColumnSize(block.columns(i), h));
    WriteColumn(block.columns(i), h, out);
  }
}

// The Block of a block, totals or extremes message, or null for the other kinds.
const v1::Block* BlockOf(const v1::QueryResponse& message) {
  switch (message.kind_case()) {
    case v1::QueryResponse::kBlock:
      return &message.block();
    case v1::QueryResponse::kTotals:
      return &message.totals();
    case v1::QueryResponse::kExtremes:
      return &message.extremes();
    case v1::QueryResponse::kHeader:
    case v1::QueryResponse::kProgress:
    case v1::QueryResponse::kSummary:
    case v1::QueryResponse::KIND_NOT_SET:
      break;
  }
  return nullptr;
}

}  // namespace

QueryMessage::HeldColumn* QueryMessage::held_column(int column) {
  for (HeldColumn& h : held) {
    if (h.column == column) return &h;
  }
  return nullptr;
}

void QueryMessage::Hold(int column, HeldBytes range) {
  HeldColumn* h = held_column(column);
  if (h == nullptr) {
    auto at = held.begin();
    while (at != held.end() && at->column < column) ++at;
    h = &*held.insert(at, HeldColumn{.column = column});
    std::string* data = response.mutable_block()->mutable_columns(column)->mutable_data();
    if (!data->empty()) {
      auto copied = std::make_shared<std::string>(std::move(*data));
      data->clear();
      h->bytes += copied->size();
      h->ranges.push_back({.data = copied->data(), .size = copied->size()});
      h->ranges.back().owner = std::move(copied);
    }
  }
  h->bytes += range.size;
  h->ranges.push_back(std::move(range));
}

size_t QueryMessage::ByteSize() {
  const size_t plain = response.ByteSizeLong();
  const v1::Block* block = BlockOf(response);
  if (held.empty() || block == nullptr) return plain;
  const size_t block_bytes = BlockSize(*block, held);
  return plain - FieldSize(block->GetCachedSize()) + FieldSize(block_bytes);
}

void QueryMessage::Materialize() {
  if (held.empty()) return;
  v1::Block* block = response.mutable_block();
  for (const HeldColumn& h : held) {
    std::string* data = block->mutable_columns(h.column)->mutable_data();
    for (const HeldBytes& range : h.ranges) data->append(range.data, range.size);
  }
  held.clear();
}

void SerializeQueryResponse(QueryMessage* message, std::shared_ptr<BlockRecycler> recycler,
                            grpc::ByteBuffer* out) {
  v1::QueryResponse& response = message->response;
  uint32_t field = 0;
  v1::Block* block = nullptr;
  switch (response.kind_case()) {
    case v1::QueryResponse::kBlock:
      field = v1::QueryResponse::kBlockFieldNumber;
      response.ByteSizeLong();  // sets the cached sizes the framing needs
      block = response.release_block();
      break;
    case v1::QueryResponse::kTotals:
      field = v1::QueryResponse::kTotalsFieldNumber;
      response.ByteSizeLong();
      block = response.release_totals();
      break;
    case v1::QueryResponse::kExtremes:
      field = v1::QueryResponse::kExtremesFieldNumber;
      response.ByteSizeLong();
      block = response.release_extremes();
      break;
    case v1::QueryResponse::kHeader:
    case v1::QueryResponse::kProgress:
    case v1::QueryResponse::kSummary:
    case v1::QueryResponse::KIND_NOT_SET:
      SerializeRawMessage(response, out);
      return;
  }
  auto* owner = new SliceOwner();
  owner->block.reset(block);
  owner->held = std::move(message->held);
  message->held.clear();
  owner->recycler = std::move(recycler);
  owner->framing.reserve(32 + 64 * static_cast<size_t>(block->columns_size()));
  SegmentWriter writer(owner);
  WriteBlock(field, *owner->block, owner->held, &writer);
  std::vector<grpc::Slice> slices = writer.Finish();
  grpc::ByteBuffer serialized(slices.data(), slices.size());
  out->Swap(&serialized);
}

void SerializeQueryResponse(v1::QueryResponse* message, std::shared_ptr<BlockRecycler> recycler,
                            grpc::ByteBuffer* out) {
  QueryMessage wrapped(std::move(*message));
  SerializeQueryResponse(&wrapped, std::move(recycler), out);
  *message = std::move(wrapped.response);
}

}  // namespace chgate::service
