#include "text/json.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "text/status_macros.h"
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

namespace {

constexpr int kMaxJsonDepth = 1000;

// A strict recursive-descent JSON checker.
class JsonChecker {
 public:
  explicit JsonChecker(std::string_view text) : text_(text) {}

  absl::Status CheckObjectDocument() {
    SkipSpaces();
    if (!At('{')) return Error("expected a JSON object");
    CHGATE_RETURN_IF_ERROR(Value(0));
    SkipSpaces();
    if (pos_ != text_.size()) return Error("unexpected characters after the object");
    return absl::OkStatus();
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid JSON: ", std::string(what), " at offset ", pos_));
  }
  bool At(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  void SkipSpaces() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }

  absl::Status Value(int depth) {
    if (depth > kMaxJsonDepth) return Error("nested too deeply");
    SkipSpaces();
    if (pos_ >= text_.size()) return Error("unexpected end");
    switch (text_[pos_]) {
      case '{':
        return Object(depth);
      case '[':
        return Array(depth);
      case '"':
        return String();
      case 't':
        return Literal("true") ? absl::OkStatus() : Error("bad literal");
      case 'f':
        return Literal("false") ? absl::OkStatus() : Error("bad literal");
      case 'n':
        return Literal("null") ? absl::OkStatus() : Error("bad literal");
      default:
        return Number();
    }
  }

  absl::Status Object(int depth) {
    ++pos_;  // {
    SkipSpaces();
    if (At('}')) {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      SkipSpaces();
      if (!At('"')) return Error("expected a key");
      CHGATE_RETURN_IF_ERROR(String());
      SkipSpaces();
      if (!At(':')) return Error("expected ':'");
      ++pos_;
      CHGATE_RETURN_IF_ERROR(Value(depth + 1));
      SkipSpaces();
      if (At(',')) {
        ++pos_;
        continue;
      }
      if (At('}')) {
        ++pos_;
        return absl::OkStatus();
      }
      return Error("expected ',' or '}'");
    }
  }

  absl::Status Array(int depth) {
    ++pos_;  // [
    SkipSpaces();
    if (At(']')) {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      CHGATE_RETURN_IF_ERROR(Value(depth + 1));
      SkipSpaces();
      if (At(',')) {
        ++pos_;
        continue;
      }
      if (At(']')) {
        ++pos_;
        return absl::OkStatus();
      }
      return Error("expected ',' or ']'");
    }
  }

  absl::Status String() {
    ++pos_;  // "
    while (pos_ < text_.size()) {
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (c < 0x20) return Error("control character in a string");
      if (c == '\\') {
        ++pos_;
        if (pos_ >= text_.size()) break;
        const char e = text_[pos_];
        if (e == 'u') {
          for (int i = 1; i <= 4; ++i) {
            if (pos_ + static_cast<size_t>(i) >= text_.size() ||
                !std::isxdigit(static_cast<unsigned char>(text_[pos_ + static_cast<size_t>(i)]))) {
              return Error("bad \\u escape");
            }
          }
          pos_ += 4;
        } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
          return Error("bad escape");
        }
      }
      ++pos_;
    }
    return Error("unterminated string");
  }

  absl::Status Number() {
    const size_t start = pos_;
    if (At('-')) ++pos_;
    if (At('0')) {
      ++pos_;
    } else if (pos_ < text_.size() && IsDigit(text_[pos_])) {
      while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    } else {
      pos_ = start;
      return Error("expected a value");
    }
    if (At('.')) {
      ++pos_;
      if (pos_ >= text_.size() || !IsDigit(text_[pos_])) return Error("bad number");
      while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    }
    if (At('e') || At('E')) {
      ++pos_;
      if (At('+') || At('-')) ++pos_;
      if (pos_ >= text_.size() || !IsDigit(text_[pos_])) return Error("bad number");
      while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    }
    return absl::OkStatus();
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

absl::Status ValidateJsonObject(std::string_view text) {
  return JsonChecker(text).CheckObjectDocument();
}

void AppendNestedJsonObject(const std::vector<JsonPathValue>& entries, std::string* out) {
  std::vector<std::string_view> open;  // components of the nested objects currently open
  out->push_back('{');
  bool first_at_level = true;
  for (const JsonPathValue& entry : entries) {
    std::vector<std::string_view> parts;
    std::string_view rest = entry.path;
    while (true) {
      const size_t dot = rest.find('.');
      parts.push_back(rest.substr(0, dot));
      if (dot == std::string_view::npos) break;
      rest.remove_prefix(dot + 1);
    }
    size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common]) {
      ++common;
    }
    while (open.size() > common) {
      out->push_back('}');
      open.pop_back();
      first_at_level = false;
    }
    for (size_t i = common; i < parts.size(); ++i) {
      if (!first_at_level) out->push_back(',');
      AppendClickHouseJsonString(parts[i], out);
      out->push_back(':');
      if (i + 1 == parts.size()) {
        out->append(entry.value);
        first_at_level = false;
      } else {
        out->push_back('{');
        open.push_back(parts[i]);
        first_at_level = true;
      }
    }
  }
  while (!open.empty()) {
    out->push_back('}');
    open.pop_back();
  }
  out->push_back('}');
}

}  // namespace chgate::text
