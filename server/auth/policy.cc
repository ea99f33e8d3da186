#include "server/auth/policy.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "text/identifier.h"

namespace chgate::auth {
namespace {

absl::Status LineError(int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("policy line ", line, ": ", what));
}

// The items of a list value: split at commas and blanks outside quotes (a quoted name may hold
// either).
std::vector<absl::string_view> ListItems(absl::string_view value) {
  std::vector<absl::string_view> items;
  size_t start = 0;
  char quote = 0;
  for (size_t i = 0; i <= value.size(); ++i) {
    const char c = i < value.size() ? value[i] : ',';
    if (quote != 0) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    if (c == '`' || c == '"') {
      quote = c;
    } else if (c == ',' || c == ' ' || c == '\t') {
      if (i > start) items.push_back(value.substr(start, i - start));
      start = i + 1;
    }
  }
  if (quote != 0 && start < value.size()) items.push_back(value.substr(start));
  return items;
}

absl::StatusOr<Grant::TablePattern> ParsePattern(absl::string_view item) {
  if (item == "*") return Grant::TablePattern{.any_database = true, .any_table = true};
  if (absl::StartsWith(item, "*.")) {
    return absl::InvalidArgumentError(absl::StrCat("'", item, "': a database cannot be '*'"));
  }
  const auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("'", item, "' is not database.table, database.* or *"));
  };
  // The same parser as InsertRequest.table, so a pattern means what a request naming it means.
  // No default database: a pattern must say which database it opens. `db.*` is the database's
  // name (parsed alone) with every table.
  if (absl::EndsWith(item, ".*")) {
    absl::string_view database = item.substr(0, item.size() - 2);
    absl::StatusOr<text::TableId> id =
        text::ParseTableName(std::string_view(database.data(), database.size()), "");
    if (!id.ok() || !id->database.empty()) return bad();
    return Grant::TablePattern{.database = id->table, .any_table = true};
  }
  absl::StatusOr<text::TableId> id =
      text::ParseTableName(std::string_view(item.data(), item.size()), "");
  if (!id.ok() || id->database.empty()) return bad();
  return Grant::TablePattern{.database = id->database, .table = id->table};
}

// `line` without a comment: from a `#` at its start or after a blank, outside quotes (a quoted
// name may hold a #).
absl::string_view WithoutComment(absl::string_view line) {
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote != 0) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    if (c == '`' || c == '"') {
      quote = c;
    } else if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
      return line.substr(0, i);
    }
  }
  return line;
}

}  // namespace

bool Grant::MayInsert(absl::string_view database, absl::string_view table) const {
  return std::any_of(insert.begin(), insert.end(), [&](const TablePattern& p) {
    if (p.any_database) return true;
    return p.database == database && (p.any_table || p.table == table);
  });
}

bool Grant::MayAck(absl::string_view mode) const {
  return std::find(ack_modes.begin(), ack_modes.end(), mode) != ack_modes.end();
}

absl::StatusOr<Policy> Policy::Parse(absl::string_view text) {
  Policy policy;
  Grant* current = nullptr;
  bool ack_set = false;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(WithoutComment(line));
    if (line.empty()) continue;
    if (line.front() == '[') {
      if (line.back() != ']' || line.size() < 3) {
        return LineError(line_number, "a section is [identity]");
      }
      const std::string identity(absl::StripAsciiWhitespace(line.substr(1, line.size() - 2)));
      if (identity.empty()) return LineError(line_number, "empty identity");
      auto [it, inserted] = policy.grants_.try_emplace(identity);
      if (!inserted) {
        return LineError(line_number, absl::StrCat("identity '", identity, "' appears twice"));
      }
      current = &it->second;
      ack_set = false;
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) return LineError(line_number, "expected key = value");
    const absl::string_view key = absl::StripAsciiWhitespace(line.substr(0, eq));
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(eq + 1));
    if (current == nullptr) {
      return LineError(line_number, absl::StrCat("'", key, "' comes before any [identity]"));
    }
    if (key == "insert") {
      for (absl::string_view item : ListItems(value)) {
        absl::StatusOr<Grant::TablePattern> pattern = ParsePattern(item);
        if (!pattern.ok()) return LineError(line_number, pattern.status().message());
        current->insert.push_back(*std::move(pattern));
      }
    } else if (key == "query") {
      if (value == "true") {
        current->query = true;
      } else if (value == "false") {
        current->query = false;
      } else {
        return LineError(line_number, "query is true or false");
      }
    } else if (key == "ack") {
      if (!ack_set) current->ack_modes.clear();
      ack_set = true;
      for (absl::string_view item : ListItems(value)) {
        if (item != "committed" && item != "accepted" && item != "persisted") {
          return LineError(line_number, absl::StrCat("unknown ack mode '", item,
                                                     "' (committed, accepted, persisted)"));
        }
        current->ack_modes.emplace_back(item);
      }
    } else {
      return LineError(line_number, absl::StrCat("unknown key '", key, "' (insert, query, ack)"));
    }
  }
  return policy;
}

const Grant* Policy::Find(absl::string_view identity) const {
  auto it = grants_.find(identity);
  return it == grants_.end() ? nullptr : &it->second;
}

}  // namespace chgate::auth
