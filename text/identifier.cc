#include "text/identifier.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace chgate::text {
namespace {

// absl::string_view is its own type in this Abseil build; absl's string functions take it.
inline absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// How much of a caller's text an error message repeats.
constexpr size_t kEchoBytes = 64;

std::string Echo(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, kEchoBytes)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || u >= 0x80) {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    } else {
      out.push_back(c);
    }
  }
  if (text.size() > kEchoBytes) out += "...";
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads a quoted identifier starting at text[*pos] (the quote) into `out`; *pos ends after the
// closing quote.
absl::Status ReadQuoted(std::string_view text, size_t* pos, std::string* out) {
  const char quote = text[*pos];
  const size_t start = *pos;
  size_t i = *pos + 1;
  out->clear();
  while (i < text.size()) {
    const char c = text[i++];
    if (c == quote) {
      if (i < text.size() && text[i] == quote) {
        out->push_back(quote);
        ++i;
        continue;
      }
      *pos = i;
      return absl::OkStatus();
    }
    if (c != '\\') {
      out->push_back(c);
      continue;
    }
    if (i >= text.size()) break;
    const char e = text[i++];
    switch (e) {
      case '\\':
      case '\'':
      case '"':
      case '`':
      case '/':
      case '=':
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
      case '0':
        out->push_back('\0');
        break;
      case 'x': {
        const int hi = i < text.size() ? HexValue(text[i]) : -1;
        const int lo = i + 1 < text.size() ? HexValue(text[i + 1]) : -1;
        if (hi < 0 || lo < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("identifier ", Echo(text.substr(start)), ": \\x needs two hex digits"));
        }
        out->push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        break;
      }
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "identifier ", Echo(text.substr(start)), ": escape \\", Echo(std::string_view(&e, 1)),
            " is read differently by different ClickHouse versions; write the character "
            "itself, or use \\xHH"));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("identifier ", Echo(text.substr(start)), " has no closing ", Echo({&quote, 1})));
}

bool IsBareStart(char c) { return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsBareChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsBlank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

std::string QuoteIdentifier(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 2);
  out.push_back('`');
  for (char c : name) {
    if (c == '`' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('`');
  return out;
}

absl::StatusOr<std::string> ReadQuotedIdentifier(std::string_view text, size_t* pos) {
  if (*pos >= text.size() || (text[*pos] != '`' && text[*pos] != '"')) {
    return absl::InvalidArgumentError("expected a quoted identifier");
  }
  std::string out;
  if (absl::Status st = ReadQuoted(text, pos, &out); !st.ok()) return st;
  return out;
}

absl::StatusOr<std::string> UnquoteIdentifier(std::string_view quoted) {
  if (quoted.size() < 2 || (quoted.front() != '`' && quoted.front() != '"')) {
    return absl::InvalidArgumentError(
        absl::StrCat("identifier ", Echo(quoted), " is not quoted with ` or \""));
  }
  size_t pos = 0;
  std::string out;
  if (absl::Status st = ReadQuoted(quoted, &pos, &out); !st.ok()) return st;
  if (pos != quoted.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("identifier ", Echo(quoted), " has text after its closing quote"));
  }
  return out;
}

absl::StatusOr<QualifiedName> ParseQualifiedName(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("table must be \"table\" or \"database.table\" "
                     "(quote names with ` or \"), got '",
                     Echo(text), "': ", A(why)));
  };
  std::string parts[2];
  size_t count = 0;
  size_t pos = 0;
  auto skip_blanks = [&] {
    while (pos < text.size() && IsBlank(text[pos])) ++pos;
  };
  while (true) {
    skip_blanks();
    if (count == 2) return bad("more than two parts");
    if (pos >= text.size()) return bad("empty name");
    std::string& part = parts[count++];
    const char c = text[pos];
    if (c == '`' || c == '"') {
      if (absl::Status st = ReadQuoted(text, &pos, &part); !st.ok()) return st;
      if (part.empty()) return bad("empty quoted name");
    } else if (IsBareStart(c)) {
      const size_t start = pos;
      while (pos < text.size() && IsBareChar(text[pos])) ++pos;
      part.assign(text.substr(start, pos - start));
    } else if (c == '.') {
      return bad("empty name");
    } else {
      return bad("a name without quotes is letters, digits and _ and starts with a letter or _");
    }
    skip_blanks();
    if (pos == text.size()) break;
    if (text[pos] != '.') {
      return bad("a name without quotes is letters, digits and _ and starts with a letter or _");
    }
    ++pos;
  }
  if (count == 1) return QualifiedName{.database = "", .name = std::move(parts[0])};
  return QualifiedName{.database = std::move(parts[0]), .name = std::move(parts[1])};
}

bool IsPlainIdentifier(std::string_view name) {
  if (name.empty() || !IsBareStart(name[0])) return false;
  for (char c : name) {
    if (!IsBareChar(c)) return false;
  }
  return true;
}

absl::StatusOr<TableId> ParseTableName(std::string_view text, const std::string& default_database) {
  absl::StatusOr<QualifiedName> name = ParseQualifiedName(text);
  if (!name.ok()) return name.status();
  if (name->database.empty()) return TableId{default_database, std::move(name->name)};
  return TableId{std::move(name->database), std::move(name->name)};
}

}  // namespace chgate::text
