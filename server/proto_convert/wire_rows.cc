#include "server/proto_convert/wire_rows.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "text/utf8.h"

namespace chgate::proto_convert {
namespace {

using ingest::ValueKind;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Message nesting DecodeRowsRequest follows; protobuf's own limit is 100.
constexpr int kMaxDepth = 64;

// The protobuf wire format, read forward over one message's bytes.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  bool done() const { return p_ == end_; }

  bool Varint(uint64_t* out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p_ == end_) return false;
      const auto byte = static_cast<uint8_t>(*p_++);
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;  // the 10th byte keeps its low bit
      if ((byte & 0x80) == 0) {
        *out = v;
        return true;
      }
    }
    return false;  // more than 10 bytes
  }

  // A varint of at most 5 bytes, kept to its low 32 bits: how protobuf reads a tag or a length
  // (it refuses a longer encoding of either, even of a small value).
  bool Varint32(uint32_t* out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
      if (p_ == end_) return false;
      const auto byte = static_cast<uint8_t>(*p_++);
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *out = static_cast<uint32_t>(v);
        return true;
      }
    }
    return false;
  }

  // A field's number (never 0) and wire type.
  bool Tag(uint32_t* field, uint32_t* type) {
    uint32_t tag = 0;
    if (!Varint32(&tag)) return false;
    *field = tag >> 3;
    *type = tag & 7;
    return *field != 0;
  }

  bool Fixed64(uint64_t* out) {
    if (end_ - p_ < 8) return false;
    std::memcpy(out, p_, 8);  // little-endian, as this machine
    p_ += 8;
    return true;
  }

  // Protobuf refuses a length of 2 GiB or more (and a few bytes less, kept for its own bounds).
  bool LengthDelimited(std::string_view* out) {
    uint32_t n = 0;
    if (!Varint32(&n) || n > static_cast<uint32_t>(std::numeric_limits<int32_t>::max() - 16) ||
        n > static_cast<uint64_t>(end_ - p_)) {
      return false;
    }
    *out = std::string_view(p_, static_cast<size_t>(n));
    p_ += n;
    return true;
  }

  // The value of a field this decoder does not know (protobuf keeps it as an unknown field,
  // which nothing reads); groups are declined.
  bool Skip(uint32_t type) {
    uint64_t ignored = 0;
    std::string_view bytes;
    switch (type) {
      case kVarint:
        return Varint(&ignored);
      case kFixed64:
        return Fixed64(&ignored);
      case kLengthDelimited:
        return LengthDelimited(&bytes);
      case kFixed32:
        if (end_ - p_ < 4) return false;
        p_ += 4;
        return true;
      default:
        return false;
    }
  }

 private:
  const char* p_;
  const char* end_;
};

// A string field's value: protobuf refuses a proto3 string that is not UTF-8.
bool Text(Reader& r, std::string_view* out) {
  return r.LengthDelimited(out) && text::IsValidUtf8(*out);
}

const WireNode& Node(const void* impl) { return *static_cast<const WireNode*>(impl); }

}  // namespace

// Builds a WireRows: every Value gets a node, the elements of a list (and the keys and values of
// a map) contiguous nodes, so a parent reaches its children by an offset. A list is counted
// before it is decoded so that its nodes can be reserved together.
class WireDecoder {
 public:
  explicit WireDecoder(WireRows* out) : nodes_(out->nodes_), rows_(out->rows_) {}

  bool RowSet(std::string_view bytes) {
    size_t count = 0;
    if (!CountRepeated(bytes, &count)) return false;
    rows_.reserve(count);
    return ForEachElement(bytes, [this](std::string_view row) {
      WireRows::RowRange range{};
      if (!List(row, 3, &range.first, &range.count)) return false;
      rows_.push_back(range);
      return true;
    });
  }

 private:
  // Occurrences of field 1 (length-delimited) in a message: the elements of a repeated
  // message field. Checks the other fields' encoding on the way.
  static bool CountRepeated(std::string_view bytes, size_t* count) {
    Reader r(bytes);
    while (!r.done()) {
      uint32_t field = 0, type = 0;
      if (!r.Tag(&field, &type)) return false;
      if (field == 1 && type != kLengthDelimited) return false;
      if (field == 1) ++*count;
      if (!r.Skip(type)) return false;
    }
    return true;
  }

  // Calls `each(element)` for every occurrence of field 1 in a message, in order, skipping the
  // other fields; false as soon as the encoding or `each` fails.
  template <typename Each>
  static bool ForEachElement(std::string_view bytes, Each each) {
    Reader r(bytes);
    while (!r.done()) {
      uint32_t field = 0, type = 0;
      if (!r.Tag(&field, &type)) return false;
      if (field != 1) {
        if (!r.Skip(type)) return false;
        continue;
      }
      std::string_view element;
      if (!r.LengthDelimited(&element) || !each(element)) return false;
    }
    return true;
  }

  // Reserves `n` nodes; false past what a 32-bit count (and this process) can hold.
  bool Reserve(size_t n, size_t* first) {
    *first = nodes_.size();
    if (n > std::numeric_limits<uint32_t>::max() - nodes_.size()) return false;
    nodes_.resize(nodes_.size() + n);
    return true;
  }

  // The elements of a repeated message field (field 1): counted, `width` contiguous nodes each
  // reserved from `*first`, then each decoded by `decode(element, its first node)`.
  template <typename Decode>
  bool Elements(std::string_view bytes, int depth, size_t width, size_t* first, size_t* count,
                Decode decode) {
    if (depth > kMaxDepth) return false;
    *count = 0;
    if (!CountRepeated(bytes, count) || !Reserve(width * *count, first)) return false;
    size_t next = *first;
    return ForEachElement(bytes, [&](std::string_view element) {
      const size_t at = next;
      next += width;
      return decode(element, at);
    });
  }

  // The Values of a Row or ValueList: one node each.
  bool List(std::string_view bytes, int depth, size_t* first, size_t* count) {
    return Elements(bytes, depth, 1, first, count,
                    [&](std::string_view value, size_t at) { return Value(value, depth + 1, at); });
  }

  // A MapValue's entries: a key node and a value node each.
  bool Map(std::string_view bytes, int depth, size_t* first, size_t* count) {
    return Elements(bytes, depth, 2, first, count,
                    [&](std::string_view entry, size_t at) { return Entry(entry, depth + 1, at); });
  }

  // A MapValue.Entry: key (1) into nodes_[at], value (2) into nodes_[at + 1]; an absent one
  // stays kUnset, as protobuf's default Value reads.
  bool Entry(std::string_view bytes, int depth, size_t at) {
    bool seen[2] = {false, false};
    Reader r(bytes);
    while (!r.done()) {
      uint32_t field = 0, type = 0;
      if (!r.Tag(&field, &type)) return false;
      if (field != 1 && field != 2) {
        if (!r.Skip(type)) return false;
        continue;
      }
      std::string_view value;
      if (type != kLengthDelimited || seen[field - 1] || !r.LengthDelimited(&value)) return false;
      seen[field - 1] = true;
      if (!Value(value, depth + 1, at + field - 1)) return false;
    }
    return true;
  }

  static bool Timestamp(std::string_view bytes, ingest::Timestamp* out) {
    Reader r(bytes);
    while (!r.done()) {
      uint32_t field = 0, type = 0;
      if (!r.Tag(&field, &type)) return false;
      if (field != 1 && field != 2) {
        if (!r.Skip(type)) return false;
        continue;
      }
      uint64_t v = 0;
      if (type != kVarint || !r.Varint(&v)) return false;
      if (field == 1) {
        out->seconds = static_cast<int64_t>(v);
      } else {
        out->nanos = static_cast<int32_t>(static_cast<uint32_t>(v));
      }
    }
    return true;
  }

  // One Value into nodes_[at]. A second kind field (which protobuf would merge or let replace
  // the first) is declined.
  bool Value(std::string_view bytes, int depth, size_t at) {
    if (depth > kMaxDepth) return false;
    WireNode node;
    bool seen = false;
    Reader r(bytes);
    while (!r.done()) {
      uint32_t field = 0, type = 0;
      if (!r.Tag(&field, &type)) return false;
      if (field > 11) {
        if (!r.Skip(type)) return false;
        continue;
      }
      if (seen) return false;
      seen = true;
      if (!Kind(r, field, type, depth, at, &node)) return false;
    }
    nodes_[at] = node;  // after the children: decoding them may have moved the nodes
    return true;
  }

  bool Kind(Reader& r, uint32_t field, uint32_t type, int depth, size_t at, WireNode* node) {
    const uint32_t want = field == 5 ? kFixed64 : field >= 6 ? kLengthDelimited : kVarint;
    if (type != want) return false;
    uint64_t v = 0;
    std::string_view bytes;
    size_t first = 0, count = 0;
    switch (field) {
      case 1:
        node->kind = ValueKind::kNull;
        return r.Varint(&v);
      case 2:
        if (!r.Varint(&v)) return false;
        node->kind = ValueKind::kBool;
        node->b = v != 0;
        return true;
      case 3:
        if (!r.Varint(&v)) return false;
        node->kind = ValueKind::kInt64;
        node->i = static_cast<int64_t>(v);
        return true;
      case 4:
        if (!r.Varint(&v)) return false;
        node->kind = ValueKind::kUInt64;
        node->u = v;
        return true;
      case 5:
        if (!r.Fixed64(&v)) return false;
        node->kind = ValueKind::kDouble;
        std::memcpy(&node->d, &v, sizeof(double));
        return true;
      case 6:
      case 7:
        if (!(field == 6 ? Text(r, &bytes) : r.LengthDelimited(&bytes))) return false;
        node->kind = field == 6 ? ValueKind::kString : ValueKind::kBytes;
        node->text = bytes.data();
        node->count = static_cast<uint32_t>(bytes.size());
        return true;
      case 8:
        node->kind = ValueKind::kTimestamp;
        node->ts = {};
        return r.LengthDelimited(&bytes) && Timestamp(bytes, &node->ts);
      case 9:
      case 10:
      case 11:
        if (!r.LengthDelimited(&bytes)) return false;
        if (!(field == 11 ? Map(bytes, depth + 1, &first, &count)
                          : List(bytes, depth + 1, &first, &count))) {
          return false;
        }
        node->kind = field == 9    ? ValueKind::kArray
                     : field == 10 ? ValueKind::kTuple
                                   : ValueKind::kMap;
        node->count = static_cast<uint32_t>(count);
        node->child = first - at;
        return true;
      default:
        return false;
    }
  }

  std::vector<WireNode>& nodes_;
  std::vector<WireRows::RowRange>& rows_;
};

const ingest::ValueRef::Ops kWireValueOps = {
    .kind = [](const void* p) { return Node(p).kind; },
    .bool_value = [](const void* p) { return Node(p).b; },
    .int64_value = [](const void* p) { return Node(p).i; },
    .uint64_value = [](const void* p) { return Node(p).u; },
    .double_value = [](const void* p) { return Node(p).d; },
    .bytes_value = [](const void* p) { return std::string_view(Node(p).text, Node(p).count); },
    .timestamp_value = [](const void* p) { return Node(p).ts; },
    .size = [](const void* p) { return static_cast<size_t>(Node(p).count); },
    .element = [](const void* p, size_t i) { return WireValue(&Node(p) + Node(p).child + i); },
    .map_key = [](const void* p, size_t i) { return WireValue(&Node(p) + Node(p).child + 2 * i); },
    .map_value = [](const void* p,
                    size_t i) { return WireValue(&Node(p) + Node(p).child + 2 * i + 1); },
};

bool CarriesRows(std::span<const std::string_view> pieces) {
  size_t piece = 0, at = 0;
  const auto at_end = [&] {
    while (piece < pieces.size() && at == pieces[piece].size()) {
      ++piece;
      at = 0;
    }
    return piece == pieces.size();
  };
  const auto next_byte = [&](uint8_t* out) {
    if (at_end()) return false;
    *out = static_cast<uint8_t>(pieces[piece][at++]);
    return true;
  };
  const auto varint = [&](uint64_t* out) {
    *out = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t byte = 0;
      if (!next_byte(&byte)) return false;
      *out |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  };
  const auto skip = [&](uint64_t n) {
    while (n > 0 && piece < pieces.size()) {
      const uint64_t here = std::min<uint64_t>(n, pieces[piece].size() - at);
      at += here;
      n -= here;
      if (at == pieces[piece].size()) {
        ++piece;
        at = 0;
      }
    }
    return n == 0;
  };
  bool rows = false;
  while (!at_end()) {
    uint64_t tag = 0, v = 0;
    if (!varint(&tag)) return false;
    switch (tag & 7) {
      case kVarint:
        if (!varint(&v)) return false;
        break;
      case kFixed64:
        if (!skip(8)) return false;
        break;
      case kLengthDelimited:
        if (!varint(&v) || !skip(v)) return false;
        break;
      case kFixed32:
        if (!skip(4)) return false;
        break;
      default:
        return false;
    }
    if ((tag >> 3) == 4) return false;
    if ((tag >> 3) == 3) rows = true;
  }
  return rows;
}

bool DecodeRowsRequest(std::string_view bytes, v1::InsertRequest* fields, WireRows* rows) {
  fields->Clear();
  rows->Clear();
  bool have_rows = false;
  Reader r(bytes);
  std::string_view text;
  uint64_t v = 0;
  while (!r.done()) {
    uint32_t field = 0, type = 0;
    if (!r.Tag(&field, &type)) return false;
    const uint32_t want = field >= 5 && field != 6 ? kVarint : kLengthDelimited;
    if (field >= 1 && field <= 7 && type != want) return false;
    switch (field) {
      case 1:
        if (!Text(r, &text)) return false;
        fields->set_table(text.data(), text.size());
        break;
      case 2:
        if (!Text(r, &text)) return false;
        fields->add_columns(text.data(), text.size());
        break;
      case 3:
        if (have_rows || !r.LengthDelimited(&text) || !WireDecoder(rows).RowSet(text)) {
          return false;
        }
        have_rows = true;
        break;
      case 4:
        return false;  // a columnar block: protobuf's parse
      case 5:
        if (!r.Varint(&v)) return false;
        fields->set_sequence(v);
        break;
      case 6:
        if (!Text(r, &text)) return false;
        fields->set_idempotency_key(text.data(), text.size());
        break;
      case 7:
        if (!r.Varint(&v)) return false;
        fields->set_ack_mode(static_cast<v1::AckMode>(static_cast<int32_t>(v)));
        break;
      default:
        if (!r.Skip(type)) return false;
    }
  }
  if (!have_rows) return false;
  fields->mutable_rows();
  return true;
}

}  // namespace chgate::proto_convert
