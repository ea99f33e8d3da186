// Why protobuf refused a message: a walk over its serialized bytes, led by the message's
// descriptor, that finds the first string field holding bytes that are not UTF-8 (protobuf refuses
// a proto3 string that is not, and says so only in a log line of its own) and reads a top-level
// varint field on the way (a stream request's sequence).
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
  // The top-level varint field asked for (the last one, as protobuf reads it), when the message
  // is well formed and has it.
  std::optional<uint64_t> top_level_varint;
};

// `varint_field`: the number of a top-level varint field to read on the way (0: none).
WireCheck CheckWire(std::string_view wire, const google::protobuf::Descriptor& type,
                    int varint_field = 0);

}  // namespace chgate::proto_convert
