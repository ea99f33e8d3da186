#include "client/cli/json.h"

#include <charconv>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "client/sdk/internal/strings.h"

namespace chgate::cli {
namespace {

using client::internal::Sv;

class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  absl::StatusOr<Json> ParseDocument() {
    Json value;
    if (absl::Status s = ParseValue(0, &value); !s.ok()) return s;
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the JSON value");
    return value;
  }

 private:
  static constexpr int kMaxDepth = 256;

  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid JSON at column ", pos_ + 1, ": ", Sv(what)));
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool ConsumeWord(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  absl::Status ParseValue(int depth, Json* out) {
    if (depth > kMaxDepth) return Error("nested too deeply");
    SkipSpace();
    if (pos_ >= text_.size()) return Error("unexpected end of input");
    const char c = text_[pos_];
    switch (c) {
      case '{':
        return ParseObject(depth, out);
      case '[':
        return ParseArray(depth, out);
      case '"':
        out->kind = Json::Kind::kString;
        return ParseString(&out->text);
      case 't':
      case 'f':
      case 'n':
        if (ConsumeWord("true")) {
          out->kind = Json::Kind::kBool;
          out->boolean = true;
        } else if (ConsumeWord("false")) {
          out->kind = Json::Kind::kBool;
        } else if (ConsumeWord("null")) {
          out->kind = Json::Kind::kNull;
        } else {
          return Error("unknown literal");
        }
        return absl::OkStatus();
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(out);
        return Error(absl::StrCat("unexpected character '", std::string(1, c), "'"));
    }
  }

  absl::Status ParseObject(int depth, Json* out) {
    out->kind = Json::Kind::kObject;
    ++pos_;  // '{'
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') return Error("expected a member name");
      std::string name;
      if (absl::Status s = ParseString(&name); !s.ok()) return s;
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':') return Error("expected ':'");
      ++pos_;
      Json value;
      if (absl::Status s = ParseValue(depth + 1, &value); !s.ok()) return s;
      out->members.emplace_back(std::move(name), std::move(value));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return absl::OkStatus();
      }
      return Error("expected ',' or '}'");
    }
  }

  absl::Status ParseArray(int depth, Json* out) {
    out->kind = Json::Kind::kArray;
    ++pos_;  // '['
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      Json item;
      if (absl::Status s = ParseValue(depth + 1, &item); !s.ok()) return s;
      out->items.push_back(std::move(item));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return absl::OkStatus();
      }
      return Error("expected ',' or ']'");
    }
  }

  absl::Status ParseNumber(Json* out) {
    const size_t start = pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (text_[pos_] == '-') ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return Error("expected digits");
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return Error("expected digits after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) return Error("expected exponent digits");
    }
    out->kind = Json::Kind::kNumber;
    out->text = std::string(text_.substr(start, pos_ - start));
    return absl::OkStatus();
  }

  absl::Status ReadHex4(uint32_t* v) {
    if (pos_ + 4 > text_.size()) return Error("short \\u escape");
    *v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      *v <<= 4;
      if (c >= '0' && c <= '9') {
        *v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        *v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        *v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return Error("bad hex digit in \\u escape");
      }
    }
    return absl::OkStatus();
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  absl::Status ParseString(std::string* out) {
    ++pos_;  // '"'
    while (true) {
      if (pos_ >= text_.size()) return Error("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return absl::OkStatus();
      if (static_cast<unsigned char>(c) < 0x20) return Error("control character in string");
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) return Error("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (absl::Status s = ReadHex4(&cp); !s.ok()) return s;
          if (cp >= 0xd800 && cp <= 0xdbff) {
            uint32_t low = 0;
            if (pos_ + 2 > text_.size() || text_[pos_] != '\\' || text_[pos_ + 1] != 'u') {
              return Error("high surrogate without a low surrogate");
            }
            pos_ += 2;
            if (absl::Status s = ReadHex4(&low); !s.ok()) return s;
            if (low < 0xdc00 || low > 0xdfff) return Error("bad low surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            return Error("low surrogate without a high surrogate");
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Error("unknown escape");
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<Json> ParseJson(std::string_view text) { return JsonParser(text).ParseDocument(); }

v1::Value JsonToValue(const Json& json) {
  v1::Value out;
  switch (json.kind) {
    case Json::Kind::kNull:
      out.set_null_value(google::protobuf::NULL_VALUE);
      break;
    case Json::Kind::kBool:
      out.set_bool_value(json.boolean);
      break;
    case Json::Kind::kNumber: {
      const std::string& t = json.text;
      const bool integral = t.find_first_of(".eE") == std::string::npos;
      if (integral) {
        int64_t i = 0;
        auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), i);
        if (ec == std::errc() && p == t.data() + t.size()) {
          out.set_int64_value(i);
          break;
        }
        uint64_t u = 0;
        auto [pu, ecu] = std::from_chars(t.data(), t.data() + t.size(), u);
        if (ecu == std::errc() && pu == t.data() + t.size()) {
          out.set_uint64_value(u);
          break;
        }
        out.set_string_value(t);  // beyond 64 bits: exact text
        break;
      }
      double d = 0;
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
      if (ec == std::errc() && p == t.data() + t.size()) {
        out.set_double_value(d);
      } else {
        out.set_string_value(t);  // out of double's range: let the server judge the text
      }
      break;
    }
    case Json::Kind::kString:
      out.set_string_value(json.text);
      break;
    case Json::Kind::kArray: {
      v1::ValueList* list = out.mutable_array_value();
      for (const Json& item : json.items) *list->add_values() = JsonToValue(item);
      break;
    }
    case Json::Kind::kObject: {
      v1::MapValue* map = out.mutable_map_value();
      for (const auto& [key, value] : json.members) {
        v1::MapValue::Entry* entry = map->add_entries();
        entry->mutable_key()->set_string_value(key);
        *entry->mutable_value() = JsonToValue(value);
      }
      break;
    }
  }
  return out;
}

}  // namespace chgate::cli
