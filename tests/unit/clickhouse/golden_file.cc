#include "tests/unit/clickhouse/golden_file.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/unit/clickhouse/test_util.h"

namespace chgate::clickhouse::testing {
namespace {

bool AppendHex(std::string_view hex, std::string* out) {
  int high = -1;
  for (char c : hex) {
    if (c == ' ') continue;
    const int d = HexNibble(c);
    if (d < 0) return false;
    if (high < 0) {
      high = d;
    } else {
      out->push_back(static_cast<char>(high * 16 + d));
      high = -1;
    }
  }
  return high < 0;
}

bool Unescape(std::string_view text, std::string* out) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out->push_back(text[i]);
      continue;
    }
    if (++i == text.size()) return false;
    switch (text[i]) {
      case '\\':
        out->push_back('\\');
        break;
      case 't':
        out->push_back('\t');
        break;
      case 'n':
        out->push_back('\n');
        break;
      case 'x': {
        if (i + 2 >= text.size()) return false;
        const int high = HexNibble(text[i + 1]);
        const int low = HexNibble(text[i + 2]);
        if (high < 0 || low < 0) return false;
        out->push_back(static_cast<char>(high * 16 + low));
        i += 2;
        break;
      }
      default:
        return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<GoldenColumn>> ParseGoldenColumns(std::string_view text) {
  std::vector<GoldenColumn> cases;
  size_t number = 0;
  const auto check_last = [&]() -> absl::Status {
    if (cases.empty()) return absl::OkStatus();
    const GoldenColumn& c = cases.back();
    if (c.type.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("case ", c.column, " has no type"));
    }
    if (c.tsv.size() != c.rows) {
      return absl::InvalidArgumentError(absl::StrCat("case ", c.column, " has ", c.tsv.size(),
                                                     " tsv lines for ", c.rows, " rows"));
    }
    return absl::OkStatus();
  };
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.find(' ');
    const absl::string_view key = line.substr(0, space);
    const absl::string_view value =
        space == absl::string_view::npos ? absl::string_view() : line.substr(space + 1);
    const auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat("line ", number, ": ", what));
    };
    if (key == "column") {
      if (absl::Status st = check_last(); !st.ok()) return bad(st.message());
      std::vector<absl::string_view> parts = absl::StrSplit(value, ' ');
      GoldenColumn c;
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &c.rows)) {
        return bad("expected `column <name> <rows>`");
      }
      c.column = std::string(parts[0]);
      cases.push_back(std::move(c));
      continue;
    }
    if (cases.empty()) return bad("an item before the first `column`");
    GoldenColumn& c = cases.back();
    if (key == "type") {
      c.type = std::string(value);
    } else if (key == "data") {
      if (!AppendHex(std::string_view(value.data(), value.size()), &c.data))
        return bad("`data` is not whole bytes of hex");
    } else if (key == "tsv") {
      std::string row;
      if (!Unescape(std::string_view(value.data(), value.size()), &row))
        return bad("a bad escape in `tsv` (\\\\ \\t \\n \\xHH)");
      c.tsv.push_back(std::move(row));
    } else {
      return bad(absl::StrCat("unknown item `", key, "`"));
    }
  }
  if (absl::Status st = check_last(); !st.ok()) return st;
  return cases;
}

std::vector<GoldenColumn> LoadGoldenColumns(std::string_view name) {
  const std::string path =
      absl::StrCat(CHGATE_GOLDEN_DIR, "/", absl::string_view(name.data(), name.size()));
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  absl::StatusOr<std::vector<GoldenColumn>> cases =
      file ? ParseGoldenColumns(text.str())
           : absl::StatusOr<std::vector<GoldenColumn>>(absl::NotFoundError("cannot be read"));
  if (cases.ok() && !cases->empty()) return *std::move(cases);
  GoldenColumn error;
  error.column = "golden_file_error";
  error.type =
      absl::StrCat(path, ": ", cases.ok() ? "no cases" : std::string(cases.status().message()));
  return {error};
}

}  // namespace chgate::clickhouse::testing
