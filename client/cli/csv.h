// A CSV record reader for chgate-cli's input (RFC 4180: fields separated by commas, optionally in
// double quotes, "" for a quote inside quotes, quoted fields may span lines; LF or CRLF line
// ends). Not thread-safe; one reader per stream.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chgate/v1/chgate.pb.h"

namespace chgate::cli {

struct CsvField {
  std::string text;
  bool quoted = false;
};

class CsvReader {
 public:
  explicit CsvReader(std::istream* in, char delimiter = ',') : in_(in), delimiter_(delimiter) {}

  // Reads the next record into `fields`. Returns true for a record, false at the end of input,
  // or InvalidArgument (naming the line) for an unterminated quote or text after a closing
  // quote. Empty lines are skipped.
  absl::StatusOr<bool> Next(std::vector<CsvField>* fields);

  // 1-based input line on which the last record returned by Next started.
  uint64_t record_line() const { return record_line_; }

 private:
  std::istream* in_;
  char delimiter_;
  uint64_t line_ = 0;  // lines consumed so far
  uint64_t record_line_ = 0;
};

// The row value of a CSV field: unquoted \N is NULL, anything else its text (string_value; chgate
// converts text for numbers, dates, UUIDs, IPs, decimals and enums).
v1::Value CsvFieldToValue(const CsvField& field);

}  // namespace chgate::cli
