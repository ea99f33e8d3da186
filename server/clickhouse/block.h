// A Block: named columns of equal length plus BlockInfo, and its Native encoding (the body of a
// Data/Totals/Extremes packet). Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/clickhouse/columns/column.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/gather.h"

namespace chgate::clickhouse {

struct BlockInfo {
  bool is_overflows = false;
  int32_t bucket_num = -1;
};

struct NamedColumn {
  std::string name;
  ColumnPtr column;
};

class Block {
 public:
  Block() = default;

  void AddColumn(std::string name, ColumnPtr column) {
    columns_.push_back({std::move(name), std::move(column)});
  }
  size_t column_count() const { return columns_.size(); }
  const NamedColumn& column(size_t i) const { return columns_[i]; }
  NamedColumn& column(size_t i) { return columns_[i]; }
  const std::vector<NamedColumn>& columns() const { return columns_; }
  // Rows of the first column (0 without columns).
  size_t rows() const { return columns_.empty() ? rows_ : columns_[0].column->Size(); }
  bool empty() const { return rows() == 0; }
  BlockInfo& info() { return info_; }
  const BlockInfo& info() const { return info_; }
  void Clear() {
    columns_.clear();
    rows_ = 0;
    info_ = {};
  }
  // Returns InvalidArgument unless every column has the same number of rows.
  absl::Status Validate() const;
  // Bytes the column values occupy.
  size_t ByteSize() const;
  // A deep copy that owns all its memory (a block read from a connection may view the
  // connection's buffers and is valid only until the next read).
  Block Clone() const;
  // One owning block of every part's rows in order. The parts have the first part's columns (the
  // same names and types, checked by the caller); each buffer is allocated once.
  static Block Concat(std::span<const Block* const> parts);

 private:
  friend absl::Status ReadBlock(ReadBuffer& in, uint64_t revision, Block* block,
                                bool discard_values);
  std::vector<NamedColumn> columns_;
  // Emptied columns of earlier reads that the last block did not use (e.g. while an INSERT's
  // terminating empty block passes), kept for ReadBlock to reuse.
  std::vector<NamedColumn> spare_;
  size_t rows_ = 0;  // only for blocks without columns
  BlockInfo info_;
};

// Limits that protect the reader from corrupt or hostile input.
inline constexpr uint64_t kMaxBlockColumns = 1 << 20;
inline constexpr uint64_t kMaxBlockRows = uint64_t{1} << 40;

// Replaces `block` with the block body read from `in`, decoded at protocol `revision`.
// Errors: DataLoss (corrupt data), OutOfRange (truncated), InvalidArgument/Unimplemented (a type
// this client cannot read, or a column with custom serialization), plus source errors.
// With `discard_values`, the values are read past without being kept (fixed-width bodies are
// skipped without a copy): `block` then has rows() but no columns. For servers that accept data
// only to drop it (benchmark peers).
absl::Status ReadBlock(ReadBuffer& in, uint64_t revision, Block* block,
                       bool discard_values = false);

// Appends the block body to `out`; column data is referenced, not copied.
void WriteBlock(const Block& block, uint64_t revision, GatherWriter& out);
// Appends the body of ONE block holding every row of `parts` in order (laid out alike), its
// BlockInfo the first part's. Each column's prefix is written once and then every part's body:
// the same bytes as WriteBlock of the parts gathered only where those bodies concatenate (see
// BlockParts, which checks it).
void WriteBlockOfParts(std::span<const Block* const> parts, uint64_t revision, GatherWriter& out);

}  // namespace chgate::clickhouse
