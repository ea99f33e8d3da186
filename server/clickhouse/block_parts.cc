#include "server/clickhouse/block_parts.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace chgate::clickhouse {
namespace {

// Whether every column of `block` can be written part after part.
bool WritesInPlace(const Block& block) {
  return std::all_of(block.columns().begin(), block.columns().end(),
                     [](const NamedColumn& c) { return ConcatenatesOnWire(*c.column); });
}

}  // namespace

bool ConcatenatesOnWire(const Column& column) {
  switch (column.kind()) {
    case ColumnKind::kFixed:
    case ColumnKind::kString:
      return true;
    case ColumnKind::kNullable:  // the null map of every row comes before the values
    case ColumnKind::kArray:     // offsets count from the column's first row
    case ColumnKind::kMap:
    case ColumnKind::kTuple:           // each element's rows come together
    case ColumnKind::kLowCardinality:  // one dictionary per body
    case ColumnKind::kVariant:
    case ColumnKind::kDynamic:
    case ColumnKind::kJson:
    case ColumnKind::kAggregateState:
      return false;
  }
  return false;
}

BlockParts::BlockParts(std::unique_ptr<Block> block) {
  if (block == nullptr) return;
  rows_ = block->rows();
  views_.push_back(block.get());
  owned_.push_back(std::move(block));
}

BlockParts BlockParts::View(const Block& block) {
  BlockParts view;
  view.rows_ = block.rows();
  view.views_.push_back(&block);
  return view;
}

BlockParts::BlockParts(std::vector<std::unique_ptr<Block>> parts)
    : BlockParts(Views(parts), std::move(parts)) {}

BlockParts::BlockParts(std::vector<const Block*> parts, std::vector<std::unique_ptr<Block>>&& owned)
    : owned_(std::move(owned)), views_(std::move(parts)) {
  for (const Block* part : views_) rows_ += part->rows();
  if (views_.size() > 1 && !WritesInPlace(*views_.front())) {
    auto gathered = std::make_unique<Block>(Block::Concat(views_));
    owned_.clear();  // freed before the block is sent, as the gathered copy replaces them
    views_.assign(1, gathered.get());
    owned_.push_back(std::move(gathered));
  }
}

std::vector<const Block*> BlockParts::Views(const std::vector<std::unique_ptr<Block>>& parts) {
  std::vector<const Block*> views;
  views.reserve(parts.size());
  for (const auto& part : parts) views.push_back(part.get());
  return views;
}

size_t BlockParts::ByteSize() const {
  size_t n = 0;
  for (const Block* part : views_) n += part->ByteSize();
  return n;
}

const Block& BlockParts::Gathered() const {
  static const Block kEmpty;
  if (views_.empty()) return kEmpty;
  if (views_.size() == 1) return *views_.front();
  if (gathered_ == nullptr) gathered_ = std::make_unique<Block>(Block::Concat(views_));
  return *gathered_;
}

absl::Status BlockParts::Validate() const {
  for (const Block* part : views_) {
    absl::Status valid = part->Validate();
    if (!valid.ok()) return valid;
    if (part == views_.front()) continue;
    const Block& first = *views_.front();
    if (part->column_count() != first.column_count()) {
      return absl::InvalidArgumentError(absl::StrCat("a part has ", part->column_count(),
                                                     " columns, the first ", first.column_count()));
    }
    for (size_t i = 0; i < first.column_count(); ++i) {
      const NamedColumn& want = first.column(i);
      const NamedColumn& got = part->column(i);
      if (got.name != want.name || got.column->type_name() != want.column->type_name()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a part's column ", i + 1, " is '", got.name, "' ", got.column->type_name(),
            ", the first part's '", want.name, "' ", want.column->type_name()));
      }
    }
  }
  return absl::OkStatus();
}

void WriteBlock(const BlockParts& block, uint64_t revision, GatherWriter& out) {
  // Several parts are kept only when every column is written in place (see the constructor).
  WriteBlockOfParts(block.parts(), revision, out);
}

}  // namespace chgate::clickhouse
