// Hand-made chgate.v1.Column values for the client tests: little-endian bytes, strings with
// offsets, and one-column formatting through the SDK's readers.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "chgate/v1/chgate.pb.h"
#include "client/sdk/column_reader.h"
#include "client/sdk/types.h"

namespace chgate::client::testing {

// Little-endian bytes of `values`.
template <typename T>
std::string Le(std::initializer_list<T> values) {
  std::string out;
  for (T v : values) {
    for (size_t i = 0; i < sizeof(T); ++i) {
      out.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
    }
  }
  return out;
}

// A column of `type` with `data`.
v1::Column Col(const std::string& type, std::string data = "");

// A String-layout column (String, or Nullable(String) with `nulls`) holding `values`.
v1::Column StringCol(const std::string& type, const std::vector<std::string>& values,
                     std::string nulls = "");

// Every row of `column` (its `rows` rows) as text in `format`, after ParseColumnType and
// ValidateColumn; an error shows up as the only element, "error: ...".
std::vector<std::string> Texts(const v1::Column& column, uint64_t rows,
                               TextFormat format = TextFormat::kTsv,
                               const std::string& default_zone = "UTC");

}  // namespace chgate::client::testing
