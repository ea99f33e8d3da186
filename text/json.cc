#include "text/json.h"

#include "text/utf8.h"

namespace chgate::text {

namespace {

void AppendJsonStringWith(std::string_view bytes, bool clickhouse, std::string* out) {
  constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (size_t i = 0; i < bytes.size();) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x80) {
      const size_t n = clickhouse ? 1 : Utf8SequenceLength(bytes, i);
      if (n == 0) {
        out->append("\\ufffd");
        ++i;
      } else {
        out->append(bytes.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '/':
        if (clickhouse) {
          out->append("\\/");
        } else {
          out->push_back('/');
        }
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xf]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
}

}  // namespace

void AppendJsonString(std::string_view bytes, std::string* out) {
  AppendJsonStringWith(bytes, false, out);
}

void AppendClickHouseJsonString(std::string_view bytes, std::string* out) {
  AppendJsonStringWith(bytes, true, out);
}

}  // namespace chgate::text
