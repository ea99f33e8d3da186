#include "server/sql/lexer.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace chgate::sql {
namespace {

// absl::string_view is its own type in this Abseil build; absl's string functions take it.
inline absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool IsWordChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }

bool IsSpace(char c) {
  // Bytes outside ASCII are skipped too: ClickHouse skips Unicode whitespace between tokens and
  // rejects other non-ASCII bytes outside quotes, so treating them as separators never merges
  // two tokens the server keeps apart.
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' ||
         static_cast<unsigned char>(c) >= 0x80;
}

class Lexer {
 public:
  Lexer(std::string_view sql, LexerOptions options) : sql_(sql), options_(options) {}

  absl::StatusOr<std::vector<Token>> Run() {
    std::vector<Token> out;
    while (pos_ < sql_.size()) {
      const size_t start = pos_;
      const char c = sql_[pos_];
      if (IsSpace(c)) {
        ++pos_;
      } else if (c == '\'' || c == '"' || c == '`') {
        if (!SkipQuoted(c)) {
          return Unterminated(start, c == '\'' ? "string literal" : "quoted identifier");
        }
        out.push_back(
            {c == '\'' ? TokenKind::kString : TokenKind::kQuotedIdentifier, Slice(start)});
      } else if (c == '-' && Next(1) == '-') {
        SkipLine();
      } else if (c == '/' && Next(1) == '/') {
        SkipLine();
      } else if (c == '#' && (Next(1) == ' ' || Next(1) == '!')) {
        SkipLine();
      } else if (c == '/' && Next(1) == '*') {
        if (!SkipBlockComment()) return Unterminated(start, "/* comment");
      } else if (c == '$' && options_.heredoc && SkipHeredoc()) {
        out.push_back({TokenKind::kString, Slice(start)});
      } else if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
        out.push_back({ReadNumber(out), Slice(start)});
      } else if (IsWordChar(c) || c == '$') {
        while (pos_ < sql_.size() && (IsWordChar(sql_[pos_]) || sql_[pos_] == '$')) ++pos_;
        out.push_back({TokenKind::kBareWord, Slice(start)});
      } else {
        ++pos_;
        TokenKind kind = TokenKind::kOther;
        if (c == '(') kind = TokenKind::kOpenParen;
        if (c == ')') kind = TokenKind::kCloseParen;
        if (c == '.') kind = TokenKind::kDot;
        if (c == ',') kind = TokenKind::kComma;
        if (c == ';') kind = TokenKind::kSemicolon;
        out.push_back({kind, Slice(start)});
      }
    }
    return out;
  }

 private:
  char Next(size_t ahead) const { return pos_ + ahead < sql_.size() ? sql_[pos_ + ahead] : '\0'; }
  std::string_view Slice(size_t start) const { return sql_.substr(start, pos_ - start); }

  absl::Status Unterminated(size_t start, std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("SQL has an unterminated ", A(what), " starting at offset ", start));
  }

  // At the opening quote. A doubled quote stands for itself; a backslash escapes the next byte.
  bool SkipQuoted(char quote) {
    ++pos_;
    while (pos_ < sql_.size()) {
      const char c = sql_[pos_++];
      if (c == '\\') {
        if (pos_ >= sql_.size()) return false;
        ++pos_;
      } else if (c == quote) {
        if (pos_ < sql_.size() && sql_[pos_] == quote) {
          ++pos_;
          continue;
        }
        return true;
      }
    }
    return false;
  }

  void SkipLine() {
    const size_t nl = sql_.find('\n', pos_);
    pos_ = nl == std::string_view::npos ? sql_.size() : nl;
  }

  bool SkipBlockComment() {
    pos_ += 2;
    int depth = 1;
    while (pos_ + 1 < sql_.size()) {
      if (options_.nested_comments && sql_[pos_] == '/' && sql_[pos_ + 1] == '*') {
        ++depth;
        pos_ += 2;
      } else if (sql_[pos_] == '*' && sql_[pos_ + 1] == '/') {
        pos_ += 2;
        if (--depth == 0) return true;
      } else {
        ++pos_;
      }
    }
    pos_ = sql_.size();
    return false;
  }

  // At `$`: a heredoc is `$tag$` (tag: any bytes but `$`), anything, and the same `$tag$` again.
  bool SkipHeredoc() {
    const size_t tag_end = sql_.find('$', pos_ + 1);
    if (tag_end == std::string_view::npos) return false;
    const std::string_view tag = sql_.substr(pos_, tag_end - pos_ + 1);
    const size_t close = sql_.find(tag, tag_end + 1);
    if (close == std::string_view::npos) return false;
    pos_ = close + tag.size();
    return true;
  }

  // Digits, a fraction and an exponent (or 0x/0b digits). Letters right after make the whole run
  // a word, as in ClickHouse (`1abc` is an identifier). After a dot only digits are read, so
  // `t.1.2` stays tuple access.
  TokenKind ReadNumber(const std::vector<Token>& before) {
    const bool after_dot = !before.empty() && before.back().kind == TokenKind::kDot;
    auto digits = [&](bool hex) {
      while (pos_ < sql_.size() &&
             (hex ? absl::ascii_isxdigit(static_cast<unsigned char>(sql_[pos_]))
                  : absl::ascii_isdigit(static_cast<unsigned char>(sql_[pos_])))) {
        ++pos_;
      }
    };
    bool hex = false;
    if (!after_dot && sql_[pos_] == '0' && (Next(1) == 'x' || Next(1) == 'X') &&
        absl::ascii_isxdigit(static_cast<unsigned char>(Next(2)))) {
      hex = true;
      pos_ += 2;
    }
    digits(hex);
    if (!after_dot) {
      if (pos_ < sql_.size() && sql_[pos_] == '.') {
        ++pos_;
        digits(hex);
      }
      const char e = pos_ < sql_.size() ? sql_[pos_] : '\0';
      if ((hex && (e == 'p' || e == 'P')) || (!hex && (e == 'e' || e == 'E'))) {
        const char sign = Next(1);
        const size_t digit_at = (sign == '+' || sign == '-') ? 2 : 1;
        if (absl::ascii_isdigit(static_cast<unsigned char>(Next(digit_at)))) {
          pos_ += digit_at;
          digits(false);
        }
      }
    }
    if (pos_ < sql_.size() && (IsWordChar(sql_[pos_]) || sql_[pos_] == '$')) {
      while (pos_ < sql_.size() && (IsWordChar(sql_[pos_]) || sql_[pos_] == '$')) ++pos_;
      return TokenKind::kBareWord;
    }
    return TokenKind::kNumber;
  }

  const std::string_view sql_;
  const LexerOptions options_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view sql, LexerOptions options) {
  return Lexer(sql, options).Run();
}

bool IsKeyword(const Token& token, std::string_view keyword) {
  return token.kind == TokenKind::kBareWord && absl::EqualsIgnoreCase(A(token.text), A(keyword));
}

}  // namespace chgate::sql
