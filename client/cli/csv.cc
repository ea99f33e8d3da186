#include "client/cli/csv.h"

#include "absl/strings/str_cat.h"

namespace chgate::cli {

absl::StatusOr<bool> CsvReader::Next(std::vector<CsvField>* fields) {
  fields->clear();
  std::string line;
  // Skip empty lines between records.
  do {
    if (!std::getline(*in_, line)) return false;
    ++line_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
  } while (line.empty());
  record_line_ = line_;

  CsvField field;
  size_t i = 0;
  bool at_field_start = true;
  while (true) {
    if (at_field_start && i < line.size() && line[i] == '"') {
      field.quoted = true;
      ++i;
      // Inside quotes, possibly across lines.
      while (true) {
        if (i >= line.size()) {
          field.text.push_back('\n');
          if (!std::getline(*in_, line)) {
            return absl::InvalidArgumentError(absl::StrCat(
                "CSV line ", record_line_, ": quoted field not terminated before the end"));
          }
          ++line_;
          if (!line.empty() && line.back() == '\r') line.pop_back();
          i = 0;
          continue;
        }
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field.text.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field.text.push_back(line[i++]);
      }
      if (i < line.size() && line[i] != delimiter_) {
        return absl::InvalidArgumentError(
            absl::StrCat("CSV line ", line_, ": text after a closing quote"));
      }
      at_field_start = false;
      continue;
    }
    if (i >= line.size()) {
      fields->push_back(std::move(field));
      return true;
    }
    if (line[i] == delimiter_) {
      fields->push_back(std::move(field));
      field = CsvField{};
      at_field_start = true;
      ++i;
      if (i == line.size()) {
        // A trailing delimiter ends the record with one more empty field.
        fields->push_back(CsvField{});
        return true;
      }
      continue;
    }
    at_field_start = false;
    field.text.push_back(line[i++]);
  }
}

v1::Value CsvFieldToValue(const CsvField& field) {
  v1::Value out;
  if (!field.quoted && field.text == "\\N") {
    out.set_null_value(google::protobuf::NULL_VALUE);
  } else {
    out.set_string_value(field.text);
  }
  return out;
}

}  // namespace chgate::cli
