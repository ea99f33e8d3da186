#include "server/proto_convert/wire_check.h"

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "text/utf8.h"

namespace chgate::proto_convert {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// Deeper than any chgate.v1 message nests (protobuf's own limit is 100).
constexpr int kMaxDepth = 100;

class Walker {
 public:
  explicit Walker(std::string* bad_utf8_field) : bad_(bad_utf8_field) {}

  // Reads fields until the current limit; false on broken framing.
  bool Message(CodedInputStream& in, const Descriptor& type, const std::string& at, int depth) {
    if (depth > kMaxDepth) return false;
    absl::flat_hash_map<int, int> index;  // elements seen of each repeated field
    while (true) {
      const uint32_t tag = in.ReadTag();
      if (tag == 0) return in.BytesUntilLimit() == 0;
      const FieldDescriptor* field = type.FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
      const bool delimited =
          WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
      const bool walked = field != nullptr && delimited &&
                          (field->type() == FieldDescriptor::TYPE_STRING ||
                           field->type() == FieldDescriptor::TYPE_MESSAGE);
      if (!walked) {
        if (!WireFormatLite::SkipField(&in, tag)) return false;
        continue;
      }
      std::string path = at.empty() ? field->name() : absl::StrCat(at, ".", field->name());
      if (field->is_repeated()) absl::StrAppend(&path, "[", index[field->number()]++, "]");
      uint32_t length = 0;
      if (!in.ReadVarint32(&length)) return false;
      if (field->type() == FieldDescriptor::TYPE_STRING) {
        const void* data = nullptr;
        int available = 0;
        std::string copy;
        if (in.GetDirectBufferPointer(&data, &available) &&
            static_cast<uint32_t>(available) >= length) {
          const std::string_view text(static_cast<const char*>(data), length);
          if (bad_->empty() && !text::IsValidUtf8(text)) *bad_ = path;
          if (!in.Skip(static_cast<int>(length))) return false;
        } else {
          if (!in.ReadString(&copy, static_cast<int>(length))) return false;
          if (bad_->empty() && !text::IsValidUtf8(copy)) *bad_ = path;
        }
        continue;
      }
      const CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(length));
      if (in.BytesUntilLimit() != static_cast<int>(length)) return false;  // past the end
      if (!Message(in, *field->message_type(), path, depth + 1)) return false;
      in.PopLimit(limit);
    }
  }

 private:
  std::string* const bad_;
};

CodedInputStream Over(std::string_view wire) {
  return CodedInputStream(reinterpret_cast<const uint8_t*>(wire.data()),
                          static_cast<int>(wire.size()));
}

}  // namespace

WireCheck CheckWire(std::string_view wire, const Descriptor& type) {
  WireCheck out;
  CodedInputStream in = Over(wire);
  in.PushLimit(static_cast<int>(wire.size()));
  out.well_formed = Walker(&out.bad_utf8_field).Message(in, type, "", 0);
  return out;
}

std::optional<uint64_t> TopLevelVarint(std::string_view wire, int number) {
  CodedInputStream in = Over(wire);
  in.PushLimit(static_cast<int>(wire.size()));
  std::optional<uint64_t> value;
  while (true) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return in.BytesUntilLimit() == 0 ? value : std::nullopt;
    if (WireFormatLite::GetTagFieldNumber(tag) == number &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_VARINT) {
      uint64_t v = 0;
      if (!in.ReadVarint64(&v)) return std::nullopt;
      value = v;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return std::nullopt;
    }
  }
}

}  // namespace chgate::proto_convert
