#include "server/proto_convert/wire_check.h"

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
  Walker(int varint_field, WireCheck* out) : varint_field_(varint_field), out_(out) {}

  // Reads fields until the current limit; false on broken framing.
  bool Message(CodedInputStream& in, const Descriptor& type, const std::string& at, int depth) {
    if (depth > kMaxDepth) return false;
    absl::flat_hash_map<int, int> index;  // elements seen of each repeated field
    while (true) {
      const uint32_t tag = in.ReadTag();
      if (tag == 0) return in.BytesUntilLimit() == 0;
      const int number = WireFormatLite::GetTagFieldNumber(tag);
      const WireFormatLite::WireType wire_type = WireFormatLite::GetTagWireType(tag);
      if (depth == 0 && number == varint_field_ && wire_type == WireFormatLite::WIRETYPE_VARINT) {
        uint64_t v = 0;
        if (!in.ReadVarint64(&v)) return false;
        out_->top_level_varint = v;
        continue;
      }
      const FieldDescriptor* field = type.FindFieldByNumber(number);
      const bool walked = field != nullptr &&
                          wire_type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED &&
                          (field->type() == FieldDescriptor::TYPE_STRING ||
                           field->type() == FieldDescriptor::TYPE_MESSAGE);
      if (!walked) {
        if (!WireFormatLite::SkipField(&in, tag)) return false;
        continue;
      }
      std::string path = at.empty() ? field->name() : absl::StrCat(at, ".", field->name());
      if (field->is_repeated()) absl::StrAppend(&path, "[", index[number]++, "]");
      uint32_t length = 0;
      if (!in.ReadVarint32(&length)) return false;
      if (field->type() == FieldDescriptor::TYPE_STRING) {
        // The stream is over one flat buffer: the whole rest is directly readable.
        const void* data = nullptr;
        int available = 0;
        if (!in.GetDirectBufferPointer(&data, &available) ||
            static_cast<uint32_t>(available) < length) {
          return false;
        }
        const std::string_view text(static_cast<const char*>(data), length);
        if (out_->bad_utf8_field.empty() && !text::IsValidUtf8(text)) out_->bad_utf8_field = path;
        if (!in.Skip(static_cast<int>(length))) return false;
        continue;
      }
      const CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(length));
      if (in.BytesUntilLimit() != static_cast<int>(length)) return false;  // past the end
      if (!Message(in, *field->message_type(), path, depth + 1)) return false;
      in.PopLimit(limit);
    }
  }

 private:
  const int varint_field_;
  WireCheck* const out_;
};

}  // namespace

WireCheck CheckWire(std::string_view wire, const Descriptor& type, int varint_field) {
  WireCheck out;
  CodedInputStream in(reinterpret_cast<const uint8_t*>(wire.data()), static_cast<int>(wire.size()));
  in.PushLimit(static_cast<int>(wire.size()));
  out.well_formed = Walker(varint_field, &out).Message(in, type, "", 0);
  if (!out.well_formed) out.top_level_varint.reset();
  return out;
}

}  // namespace chgate::proto_convert
