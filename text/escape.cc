#include "text/escape.h"

namespace chgate::text {

void AppendEscaped(std::string_view s, std::string* out) {
  for (char c : s) {
    switch (c) {
      case '\'':
        out->append("\\'");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\0':
        out->append("\\0");
        break;
      default:
        out->push_back(c);
    }
  }
}

void AppendQuoted(std::string_view s, std::string* out) {
  out->push_back('\'');
  AppendEscaped(s, out);
  out->push_back('\'');
}

char UnescapeChar(char e) {
  switch (e) {
    case 'n':
      return '\n';
    case 't':
      return '\t';
    case 'r':
      return '\r';
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case '0':
      return '\0';
    case 'a':
      return '\a';
    case 'v':
      return '\v';
    default:
      return e;
  }
}

}  // namespace chgate::text
