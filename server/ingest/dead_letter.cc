#include "server/ingest/dead_letter.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "server/common/little_endian.h"
#include "server/ingest/spool_record.h"
#include "text/status_macros.h"

namespace chgate::ingest {
namespace {

inline absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }

constexpr std::string_view kMagic = "chgate dead letter v1\n";

absl::Status Bad(std::string_view why) {
  return absl::DataLossError(absl::StrCat("not a chgate dead-letter file: ", A(why)));
}

// One header value on one line: line breaks would end the header early.
std::string OneLine(std::string_view text) {
  return absl::StrReplaceAll(A(text), {{"\r", " "}, {"\n", " "}});
}

absl::StatusOr<std::vector<uint64_t>> ParseLsns(absl::string_view text) {
  std::vector<uint64_t> lsns;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    uint64_t v;
    if (!absl::SimpleAtoi(part, &v)) return Bad(absl::StrCat("LSN list '", text, "'"));
    lsns.push_back(v);
  }
  return lsns;
}

}  // namespace

std::string DeadLetterFileName(uint64_t intent_lsn) {
  return absl::StrFormat("%016x.batch", intent_lsn);
}

std::string EncodeDeadLetter(const DeadLetter& letter) {
  std::string out(kMagic);
  // "table:" keeps the dotted label older readers expect; "database:" and "table_name:" are the
  // structured pair (a name may itself hold a dot).
  absl::StrAppend(&out, "table: ", OneLine(letter.table.database), ".", OneLine(letter.table.table),
                  "\ndatabase: ", OneLine(letter.table.database),
                  "\ntable_name: ", OneLine(letter.table.table),
                  "\ncolumns: ", OneLine(absl::StrJoin(letter.columns, ",")),
                  "\nrecords: ", letter.records, "\nrows: ", letter.rows, "\n");
  if (!letter.identity.empty()) absl::StrAppend(&out, "identity: ", OneLine(letter.identity), "\n");
  if (!letter.unreadable.empty()) {
    absl::StrAppend(&out, "unreadable: ", absl::StrJoin(letter.unreadable, ","), "\n");
  }
  absl::StrAppend(&out, "error: ", OneLine(letter.error), "\n\n");
  for (const DeadLetter::Record& r : letter.payloads) {
    AppendLittleEndian(&out, r.lsn, 8);
    AppendLittleEndian(&out, r.payload.size(), 4);
    out += r.payload;
  }
  return out;
}

absl::StatusOr<DeadLetter> DecodeDeadLetter(std::string_view bytes, bool header_only) {
  if (bytes.substr(0, kMagic.size()) != kMagic) return Bad("no 'chgate dead letter v1' line");
  const size_t end = bytes.find("\n\n", kMagic.size() - 1);
  if (end == std::string_view::npos) return Bad("the header does not end");
  DeadLetter letter;
  std::string dotted;
  bool structured = false;
  const absl::string_view header = A(bytes.substr(kMagic.size(), end + 1 - kMagic.size()));
  for (absl::string_view line : absl::StrSplit(header, '\n', absl::SkipEmpty())) {
    const size_t colon = line.find(": ");
    if (colon == absl::string_view::npos) continue;
    const absl::string_view key = line.substr(0, colon);
    const absl::string_view value = line.substr(colon + 2);
    if (key == "table") {
      dotted = std::string(value);
    } else if (key == "database") {
      letter.table.database = std::string(value);
      structured = true;
    } else if (key == "table_name") {
      letter.table.table = std::string(value);
      structured = true;
    } else if (key == "columns") {
      for (absl::string_view c : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        letter.columns.emplace_back(c);
      }
    } else if (key == "records") {
      if (!absl::SimpleAtoi(value, &letter.records)) return Bad("records");
    } else if (key == "rows") {
      if (!absl::SimpleAtoi(value, &letter.rows)) return Bad("rows");
    } else if (key == "identity") {
      letter.identity = std::string(value);
    } else if (key == "unreadable") {
      CHGATE_ASSIGN_OR_RETURN(letter.unreadable, ParseLsns(value));
    } else if (key == "error") {
      letter.error = std::string(value);
    }
  }
  if (!structured) {
    // Files from before the structured pair: the database is everything before the first dot.
    const size_t dot = dotted.find('.');
    if (dot == std::string::npos) return Bad("no table");
    letter.table = {dotted.substr(0, dot), dotted.substr(dot + 1)};
  }
  if (header_only) return letter;
  std::string_view rest = bytes.substr(end + 2);
  while (!rest.empty()) {
    if (rest.size() < 12) return Bad("a record header is cut short");
    const uint64_t lsn = LoadLittleEndian(rest, 8);
    const uint64_t size = LoadLittleEndian(rest.substr(8), 4);
    if (rest.size() - 12 < size) return Bad(absl::StrCat("record ", lsn, " is cut short"));
    letter.payloads.push_back({lsn, std::string(rest.substr(12, size))});
    rest.remove_prefix(12 + size);
  }
  return letter;
}

absl::StatusOr<clickhouse::Block> DeadLetterBlock(const DeadLetter& letter) {
  clickhouse::Block block;
  bool first = true;
  for (const DeadLetter::Record& r : letter.payloads) {
    clickhouse::Block one;
    absl::StatusOr<SpoolRecordHeader> h = DecodeSpoolRecord(r.payload, &one);
    if (!h.ok()) {
      return absl::DataLossError(absl::StrCat("record ", r.lsn, ": ", h.status().message()));
    }
    if (first) {
      block = std::move(one);
      first = false;
      continue;
    }
    bool same = block.column_count() == one.column_count();
    for (size_t c = 0; same && c < one.column_count(); ++c) {
      same = block.column(c).name == one.column(c).name &&
             block.column(c).column->type_name() == one.column(c).column->type_name();
    }
    if (!same) {
      return absl::DataLossError(
          absl::StrCat("record ", r.lsn, " has other columns than the batch's first record"));
    }
    for (size_t c = 0; c < block.column_count(); ++c) {
      block.column(c).column->AppendRange(*one.column(c).column, 0, one.rows());
    }
  }
  return block;
}

}  // namespace chgate::ingest
