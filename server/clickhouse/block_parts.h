// BlockParts: blocks laid out alike (the same column names and types, in the same order) whose
// rows are sent as ONE block. Where the Native format allows, WriteBlock writes the parts' column
// bodies one after another, so the rows go out from the memory they were converted into, without
// being gathered into new buffers first: fixed-width and String columns, whose bodies are their
// rows' bytes in order. A part with any other column (Nullable, Array, LowCardinality...: a body
// that is not the concatenation of its rows') makes the parts be gathered into one block when
// they are taken. The bytes on the wire are the same either way. Not thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "server/clickhouse/block.h"
#include "server/clickhouse/wire/gather.h"

namespace chgate::clickhouse {

class BlockParts {
 public:
  BlockParts() = default;
  // Parts in row order, laid out alike (checked by the caller). Gathered at once into one block
  // (the parts freed) unless every column can be written in place.
  explicit BlockParts(std::vector<std::unique_ptr<Block>> parts);
  explicit BlockParts(std::unique_ptr<Block> block);
  // One block the caller keeps alive (and unchanged) as long as the BlockParts.
  static BlockParts View(const Block& block);
  // Parts in row order, laid out alike, of which the BlockParts keeps `owned` alive (the others
  // the caller keeps alive and unchanged as long as the BlockParts). Gathered at once as above.
  // `owned` is taken by reference, so `BlockParts({p, owned[0].get()}, std::move(owned))` reads
  // the pointers before anything is moved.
  BlockParts(std::vector<const Block*> parts, std::vector<std::unique_ptr<Block>>&& owned);
  BlockParts(BlockParts&&) = default;
  BlockParts& operator=(BlockParts&&) = default;

  size_t rows() const { return rows_; }
  bool empty() const { return rows_ == 0; }
  // Bytes the column values occupy, over every part.
  size_t ByteSize() const;
  // The parts (one when they were gathered); never empty unless the BlockParts is.
  std::span<const Block* const> parts() const { return views_; }
  // The rows as one block: the only part, or (once, kept) the parts gathered. For code that
  // reads the columns (a conversion, tests); sending needs no gathered block.
  const Block& Gathered() const;
  // InvalidArgument unless each part is valid and laid out as the first.
  absl::Status Validate() const;

 private:
  static std::vector<const Block*> Views(const std::vector<std::unique_ptr<Block>>& parts);

  std::vector<std::unique_ptr<Block>> owned_;
  std::vector<const Block*> views_;
  size_t rows_ = 0;
  mutable std::unique_ptr<Block> gathered_;
};

// Whether the Native body of `column` is the concatenation of its rows' bodies, so that the
// bodies of several columns of its type written in turn are the body of their rows together.
bool ConcatenatesOnWire(const Column& column);

// Appends the body of one block holding every part's rows, in order (the same bytes as
// WriteBlock of the parts gathered). Column data is referenced, not copied.
void WriteBlock(const BlockParts& block, uint64_t revision, GatherWriter& out);

}  // namespace chgate::clickhouse
