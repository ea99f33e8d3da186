// Lexer: splits SQL text into ClickHouse's tokens (src/Parsers/Lexer.cpp is the reference),
// dropping whitespace and comments. String literals and quoted identifiers are single tokens, so
// nothing inside them is ever read as a keyword or a call. Plain functions, thread-safe.
//
// ClickHouse versions disagree on two lexical rules: whether `/* */` comments nest and whether
// `$tag$ ... $tag$` is a string (heredoc). LexerOptions picks one reading; callers that must not
// be fooled by the difference (query_policy.h) tokenize under every reading.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace chgate::sql {

enum class TokenKind {
  kBareWord,          // SELECT, url, t1, 1abc (a word that starts with digits)
  kQuotedIdentifier,  // `a``b` or "a b" (text keeps the quotes; see UnquoteIdentifier)
  kString,            // 'x', heredoc $$x$$
  kNumber,            // 1, 1.5e3, 0x1F
  kOpenParen,
  kCloseParen,
  kDot,
  kComma,
  kSemicolon,
  kOther,  // any other operator or punctuation, one token per character
};

struct Token {
  TokenKind kind;
  std::string_view text;  // a view into the tokenized SQL
};

struct LexerOptions {
  // `/* /* */ */` is one comment (ClickHouse from about 20.x) or ends at the first `*/` (older).
  bool nested_comments = true;
  // `$tag$ ... $tag$` is a string literal (newer ClickHouse) or `$` is part of words (older).
  bool heredoc = true;
};

// The significant tokens of `sql`. InvalidArgument for an unterminated string, quoted
// identifier or comment, naming the offset.
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view sql, LexerOptions options = {});

// Whether a kBareWord token is `keyword` (ASCII case-insensitive).
bool IsKeyword(const Token& token, std::string_view keyword);

}  // namespace chgate::sql
