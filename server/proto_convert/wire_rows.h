// The rows of an InsertRequest read in place from its serialized bytes, without protobuf's parse.
//
// Parsing a request of generic rows into chgate.v1 messages was half of chgate's CPU on the
// Producer's 1,000-row requests (perf): an arena object per Value and a heap copy of every string
// longer than 15 bytes (std::string on an arena still allocates its characters). WireRows indexes
// the RowSet once into a flat array of decoded cells (24 bytes each, one allocation per request)
// whose strings point into the received bytes, and serves them as the ingest::RowSource and
// ingest::ValueRefs the row conversion reads, like ProtoRows does over parsed messages.
//
// DecodeRowsRequest reads only what it reads exactly as protobuf would, and declines everything
// else (the caller then parses with protobuf, which accepts or rejects with the usual meaning).
// Thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "chgate/v1/chgate.pb.h"
#include "server/ingest/value.h"

namespace chgate::proto_convert {

// One decoded chgate.v1.Value. Arrays and tuples have `count` children from `child` on (an
// offset in nodes from this node); maps 2 x `count` (key, value for each entry); strings and
// bytes `count` bytes at `text`.
struct WireNode {
  ingest::ValueKind kind = ingest::ValueKind::kUnset;
  uint32_t count = 0;
  union {
    bool b;
    int64_t i;
    uint64_t u;
    double d;
    const char* text;
    uint64_t child;
    ingest::Timestamp ts;
  };
  WireNode() : ts{} {}
};
static_assert(sizeof(WireNode) == 24);

// The function table behind WireValue; `impl` is a `const WireNode*`.
extern const ingest::ValueRef::Ops kWireValueOps;

inline ingest::ValueRef WireValue(const WireNode* node) {
  return ingest::ValueRef(node, &kWireValueOps);
}

// Rows decoded by DecodeRowsRequest; the views point into the bytes it read, which must outlive
// them.
class WireRows final : public ingest::RowSource {
 public:
  size_t row_count() const override { return rows_.size(); }
  size_t value_count(size_t row) const override { return rows_[row].count; }
  ingest::ValueRef value(size_t row, size_t column) const override {
    return WireValue(&nodes_[rows_[row].first + column]);
  }

  // Cells decoded (values at every nesting level), and the memory the index holds.
  size_t node_count() const { return nodes_.size(); }
  uint64_t memory_bytes() const {
    return nodes_.capacity() * sizeof(WireNode) + rows_.capacity() * sizeof(RowRange);
  }

  // Empty, with the index's memory freed.
  void Clear() {
    std::vector<WireNode>().swap(nodes_);
    std::vector<RowRange>().swap(rows_);
  }

 private:
  friend class WireDecoder;
  struct RowRange {
    size_t first;
    size_t count;
  };
  std::vector<WireNode> nodes_;
  std::vector<RowRange> rows_;
};

// Whether the serialized InsertRequest in `pieces` (its bytes in order, as a transport holds them)
// has rows and no block at its top level: the requests DecodeRowsRequest is for, told without
// copying the pieces together. False for a malformed top level too.
bool CarriesRows(std::span<const std::string_view> pieces);

// Reads a serialized chgate.v1.InsertRequest of rows: every field but the rows into `fields`
// (cleared first; it gets an empty RowSet, so its data case is kRows) and the rows into `rows`,
// viewing `bytes`. Returns false, leaving both unspecified, for what protobuf would read
// differently or not at all, and for what gains nothing here: a columnar block or no rows; a field
// seen again where protobuf would merge (a Value's kind, a map entry's key or value, the RowSet);
// a known field of the wrong wire type; groups; invalid UTF-8 in a string field; nesting deeper
// than 64 levels; a truncated or malformed encoding.
bool DecodeRowsRequest(std::string_view bytes, v1::InsertRequest* fields, WireRows* rows);

}  // namespace chgate::proto_convert
