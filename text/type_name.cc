#include "text/type_name.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "text/escape.h"
#include "text/identifier.h"

namespace chgate::text {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  absl::StatusOr<TypeAst> ParseAll() {
    TypeAst result;
    if (absl::Status s = ParseType(&result, 0); !s.ok()) return s;
    SkipSpaces();
    if (pos_ != text_.size()) return Error("unexpected trailing characters");
    return result;
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("cannot parse type name '", std::string(text_),
                                                   "': ", std::string(what), " at offset ", pos_));
  }
  void SkipSpaces() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Peek(char c) {
    SkipSpaces();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  static bool IsIdentStart(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
  }
  static bool IsIdentChar(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  }

  absl::Status ParseIdentifier(std::string* out) {
    SkipSpaces();
    if (pos_ < text_.size() && (text_[pos_] == '`' || text_[pos_] == '"')) {
      absl::StatusOr<std::string> name = text::ReadQuotedIdentifier(text_, &pos_);
      if (!name.ok()) return Error(std::string(name.status().message()));
      *out = *std::move(name);
      return absl::OkStatus();
    }
    if (pos_ >= text_.size() || !IsIdentStart(text_[pos_])) return Error("expected a name");
    size_t start = pos_;
    while (pos_ < text_.size() && IsIdentChar(text_[pos_])) ++pos_;
    out->assign(text_.substr(start, pos_ - start));
    return absl::OkStatus();
  }

  absl::Status ParseQuoted(std::string* out) {
    // at the opening quote
    ++pos_;
    out->clear();
    while (pos_ < text_.size()) {
      char c = text_[pos_++];
      if (c == '\'') {
        // SQL style: a doubled quote stands for one quote.
        if (pos_ < text_.size() && text_[pos_] == '\'') {
          out->push_back(text_[pos_++]);
          continue;
        }
        return absl::OkStatus();
      }
      if (c == '\\') {
        if (pos_ >= text_.size()) break;
        c = UnescapeChar(text_[pos_++]);
      }
      out->push_back(c);
    }
    return Error("unterminated string literal");
  }

  absl::Status ParseNumber(int64_t* out) {
    SkipSpaces();
    bool negative = false;
    if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) {
      negative = text_[pos_] == '-';
      ++pos_;
    }
    if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      return Error("expected a number");
    }
    uint64_t value = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (value > (uint64_t{1} << 63) / 10) return Error("number too large");
      value = value * 10 + digit;
      ++pos_;
    }
    if (value > (uint64_t{1} << 63) || (!negative && value == (uint64_t{1} << 63))) {
      return Error("number too large");
    }
    *out = negative ? static_cast<int64_t>(0 - value) : static_cast<int64_t>(value);
    return absl::OkStatus();
  }

  // An integer that fits Int64 becomes kNumber; any other numeric literal (a fraction, an
  // exponent, a larger integer: the parameters of parametric aggregate functions) kLiteral with
  // its text.
  absl::Status ParseNumericLiteral(TypeAst* arg) {
    const size_t start = pos_;
    size_t end = pos_;
    auto digits = [&] {
      const size_t from = end;
      while (end < text_.size() && std::isdigit(static_cast<unsigned char>(text_[end]))) ++end;
      return end > from;
    };
    if (text_[end] == '-' || text_[end] == '+') ++end;
    bool integral = digits();
    if (!integral) return Error("expected a number");
    if (end < text_.size() && text_[end] == '.') {
      ++end;
      digits();
      integral = false;
    }
    if (end < text_.size() && (text_[end] == 'e' || text_[end] == 'E')) {
      size_t mark = end++;
      if (end < text_.size() && (text_[end] == '-' || text_[end] == '+')) ++end;
      if (digits()) {
        integral = false;
      } else {
        end = mark;
      }
    }
    if (integral && ParseNumber(&arg->number).ok() && pos_ == end) {
      arg->kind = TypeAst::Kind::kNumber;
      return absl::OkStatus();
    }
    arg->kind = TypeAst::Kind::kLiteral;
    arg->name.assign(text_.substr(start, end - start));
    pos_ = end;
    return absl::OkStatus();
  }

  absl::Status ParseArg(TypeAst* arg, int depth, bool in_json) {
    SkipSpaces();
    if (pos_ >= text_.size()) return Error("unexpected end");
    char c = text_[pos_];
    if (c == '\'') {
      std::string s;
      if (absl::Status st = ParseQuoted(&s); !st.ok()) return st;
      if (Peek('=')) {
        ++pos_;
        arg->kind = TypeAst::Kind::kEnumEntry;
        arg->name = std::move(s);
        return ParseNumber(&arg->number);
      }
      arg->kind = TypeAst::Kind::kString;
      arg->name = std::move(s);
      return absl::OkStatus();
    }
    if (c == '-' || c == '+' || std::isdigit(static_cast<unsigned char>(c))) {
      return ParseNumericLiteral(arg);
    }
    // A type, `name Type` (named tuple element or JSON typed path), `name=number` (a type
    // setting), or JSON's `SKIP path` / `SKIP REGEXP 'regexp'`.
    size_t save = pos_;
    const bool quoted = c == '`' || c == '"';
    std::string first;
    if (absl::Status st = ParseIdentifier(&first); !st.ok()) return st;
    size_t after = pos_;
    SkipSpaces();
    if (!quoted && pos_ < text_.size() && text_[pos_] == '=') {
      ++pos_;
      arg->kind = TypeAst::Kind::kSetting;
      arg->name = std::move(first);
      return ParseNumber(&arg->number);
    }
    if (in_json && !quoted && EqualsIgnoringCase(first, "SKIP") && pos_ > after &&
        pos_ < text_.size()) {
      return ParseSkip(arg);
    }
    if (pos_ < text_.size() && pos_ > after && (IsIdentStart(text_[pos_]) || text_[pos_] == '`')) {
      if (absl::Status st = ParseType(arg, depth + 1); !st.ok()) return st;
      arg->element_name = std::move(first);
      return absl::OkStatus();
    }
    pos_ = save;
    return ParseType(arg, depth + 1);
  }

  static bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::toupper(static_cast<unsigned char>(a[i])) != b[i]) return false;
    }
    return true;
  }

  // After the SKIP keyword: `REGEXP 'regexp'` or a path.
  absl::Status ParseSkip(TypeAst* arg) {
    const size_t save = pos_;
    const bool quoted = text_[pos_] == '`' || text_[pos_] == '"';
    std::string word;
    if (absl::Status st = ParseIdentifier(&word); !st.ok()) return st;
    if (!quoted && EqualsIgnoringCase(word, "REGEXP") && Peek('\'')) {
      arg->kind = TypeAst::Kind::kSkipRegexp;
      return ParseQuoted(&arg->name);
    }
    pos_ = save;
    arg->kind = TypeAst::Kind::kSkip;
    return ParseIdentifier(&arg->name);
  }

  absl::Status ParseType(TypeAst* type, int depth) {
    if (depth > kMaxDepth) return Error("type nested too deeply");
    type->kind = TypeAst::Kind::kType;
    if (absl::Status st = ParseIdentifier(&type->name); !st.ok()) return st;
    if (!Peek('(')) return absl::OkStatus();
    ++pos_;
    if (Peek(')')) {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      TypeAst arg;
      if (absl::Status st = ParseArg(&arg, depth, type->name == "JSON"); !st.ok()) return st;
      type->args.push_back(std::move(arg));
      if (Peek(',')) {
        ++pos_;
        continue;
      }
      if (Peek(')')) {
        ++pos_;
        return absl::OkStatus();
      }
      return Error("expected ',' or ')'");
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// A name as ClickHouse prints it (backQuoteIfNeed): bare when it is a plain identifier,
// otherwise in backquotes with ` and \ escaped, so that the printed type parses back to the same
// names. Element names are also quoted when they are NULL (in any case), as ClickHouse does.
void AppendName(std::string_view name, bool element, std::string* out) {
  bool plain = !name.empty() &&
               (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
               !(element && name.size() == 4 && (name[0] | 0x20) == 'n' &&
                 (name[1] | 0x20) == 'u' && (name[2] | 0x20) == 'l' && (name[3] | 0x20) == 'l');
  for (size_t i = 1; plain && i < name.size(); ++i) {
    plain = std::isalnum(static_cast<unsigned char>(name[i])) || name[i] == '_';
  }
  if (plain) {
    out->append(name);
    return;
  }
  out->append(text::QuoteIdentifier(name));
}

void FormatInto(const TypeAst& t, std::string* out) {
  switch (t.kind) {
    case TypeAst::Kind::kNumber:
      absl::StrAppend(out, t.number);
      return;
    case TypeAst::Kind::kString:
      AppendQuoted(t.name, out);
      return;
    case TypeAst::Kind::kEnumEntry:
      AppendQuoted(t.name, out);
      absl::StrAppend(out, " = ", t.number);
      return;
    case TypeAst::Kind::kSetting:
      absl::StrAppend(out, t.name, "=", t.number);
      return;
    case TypeAst::Kind::kSkip:
      out->append("SKIP ");
      AppendName(t.name, /*element=*/true, out);
      return;
    case TypeAst::Kind::kSkipRegexp:
      out->append("SKIP REGEXP ");
      AppendQuoted(t.name, out);
      return;
    case TypeAst::Kind::kLiteral:
      out->append(t.name);
      return;
    case TypeAst::Kind::kType:
      break;
  }
  if (!t.element_name.empty()) {
    AppendName(t.element_name, /*element=*/true, out);
    out->push_back(' ');
  }
  AppendName(t.name, /*element=*/false, out);
  // The empty tuple keeps its parentheses, as ClickHouse prints it.
  if (t.args.empty() && t.name != "Tuple") return;
  out->push_back('(');
  for (size_t i = 0; i < t.args.size(); ++i) {
    if (i != 0) out->append(", ");
    FormatInto(t.args[i], out);
  }
  out->push_back(')');
}

}  // namespace

absl::StatusOr<TypeAst> ParseTypeName(std::string_view text) { return Parser(text).ParseAll(); }

std::string FormatTypeName(const TypeAst& type) {
  std::string out;
  FormatInto(type, &out);
  return out;
}

}  // namespace chgate::text
