// Why protobuf refused a message: a walk over its serialized bytes, led by the message's
// descriptor, that finds the first string field holding bytes that are not UTF-8 (protobuf refuses
// a proto3 string that is not, and says so only in a log line of its own) and reads a top-level
// varint field (a stream request's sequence) without parsing the rest.
//
// Plain functions over bytes, thread-safe. Used on the error path only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "google/protobuf/descriptor.h"

namespace chgate::proto_convert {

struct WireCheck {
  // Every field's framing is sound (tags, lengths, nested messages ending where they should).
  bool well_formed = false;
  // The first string field whose bytes are not UTF-8, as a path of field names with the index
  // of repeated elements ("rows.rows[2].values[0].string_value"); empty when there is none.
  std::string bad_utf8_field;
};

WireCheck CheckWire(std::string_view wire, const google::protobuf::Descriptor& type);

// The value of the top-level varint field `number` (the last one, as protobuf reads it), if the
// top level's framing is sound up to the end and the field is there.
std::optional<uint64_t> TopLevelVarint(std::string_view wire, int number);

}  // namespace chgate::proto_convert
