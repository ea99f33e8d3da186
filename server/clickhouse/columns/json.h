// ColumnJson: the `JSON` type (`JSON(max_dynamic_paths=N, max_dynamic_types=M, a.b UInt32,
// SKIP c, SKIP REGEXP 'x.*')`). Each row is kept as its JSON object text, the form ClickHouse
// prints and parses.
//
// Reading accepts the serializations a server sends in Native format: V1 (what a client at
// revision 54460 receives by default), V2, and STRING (one String of JSON text per row, sent with
// output_format_native_write_json_as_string=1). V1/V2 carry typed paths (their declared types),
// dynamic paths (each a Dynamic column) and shared data (per row, an array of (path, binary
// value)); the rows are turned into JSON text as the server prints it. Writing uses STRING
// (prefix `UInt64 1`, then one String per row), which servers since 24.10 read on INSERT.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/clickhouse/columns/column.h"
#include "server/clickhouse/columns/string.h"

namespace chgate::clickhouse {

struct JsonParams {
  int64_t max_dynamic_paths = 1024;
  int64_t max_dynamic_types = 32;
  // Typed paths sorted by path, each an empty column of its declared type.
  std::vector<std::pair<std::string, ColumnPtr>> typed_paths;
  std::vector<std::string> skip_paths;
  std::vector<std::string> skip_regexps;
};

class ColumnJson final : public Column {
 public:
  ColumnJson(std::string type_name, TypeAst type, JsonParams params);

  const JsonParams& params() const { return params_; }
  // The row's JSON object text.
  std::string_view Text(size_t row) const { return texts_.At(row); }

  // Appends a row from its JSON object text, which must be one strict JSON object (RFC 8259:
  // no comments, trailing commas or single quotes; at most 1000 levels deep). Returns
  // InvalidArgument naming the offset of the first error; the column is unchanged then.
  absl::Status AppendJson(std::string_view text);

  ColumnKind kind() const override { return ColumnKind::kJson; }
  size_t Size() const override { return texts_.Size(); }
  void Clear() override { texts_.Clear(); }
  void AppendDefault() override { texts_.Append("{}"); }
  void Truncate(size_t rows) override { texts_.Truncate(rows); }
  void AppendRange(const Column& src, size_t begin, size_t end) override {
    texts_.AppendRange(static_cast<const ColumnJson&>(src).texts_, begin, end);
  }
  void ReserveForAppend(std::span<const Column* const> parts) override {
    std::vector<const Column*> texts;
    texts.reserve(parts.size());
    for (const Column* p : parts) texts.push_back(&static_cast<const ColumnJson&>(*p).texts_);
    texts_.ReserveForAppend(texts);
  }
  ColumnPtr CloneEmpty() const override;
  size_t ByteSize() const override { return texts_.ByteSize(); }
  absl::Status LoadPrefix(ReadBuffer& in) override;
  absl::Status LoadBody(ReadBuffer& in, size_t rows) override;
  void SavePrefix(GatherWriter& out) const override;
  void SaveBody(GatherWriter& out) const override { texts_.SaveBody(out); }

 private:
  // Builds the text of every row of the V1/V2 block just read (paths_ and shared_).
  void AppendObjectRows(size_t rows);

  JsonParams params_;
  ColumnString texts_;
  // State of the block being read.
  uint64_t version_ = 0;
  std::vector<std::pair<std::string, ColumnPtr>> dynamic_paths_;
  ColumnPtr shared_;  // Array(Tuple(String, String)): (path, binary value) per row
};

}  // namespace chgate::clickhouse
