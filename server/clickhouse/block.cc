#include "server/clickhouse/block.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/nullable.h"
#include "server/clickhouse/columns/tuple.h"
#include "server/clickhouse/protocol/revision.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {
namespace {

// Serialization kinds a server may announce for a column (SerializationInfo, one byte each).
constexpr uint8_t kKindDefault = 0;
constexpr uint8_t kKindSparse = 1;
// Set on the last entry of a sparse column's offsets: the count of trailing default rows.
constexpr uint64_t kEndOfGranule = uint64_t{1} << 62;

// Reads a sparse column's body into `column` (empty, prefix already read): the offsets (per
// non-default row, the number of default rows before it; last, the trailing defaults flagged
// with kEndOfGranule), then the non-default values in the type's own format. The result is the
// ordinary column of `rows` rows, the defaults filled in.
absl::Status LoadSparseBody(ReadBuffer& in, size_t rows, bool discard, Column& column) {
  std::vector<uint64_t> gaps;  // defaults before each non-default row
  uint64_t trailing = 0;
  uint64_t total = 0;
  while (true) {
    uint64_t entry = 0;
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&entry));
    const bool last = (entry & kEndOfGranule) != 0;
    const uint64_t count = entry & ~kEndOfGranule;
    if (count > rows || total + count + (last ? 0 : 1) > rows) {
      return absl::DataLossError(absl::StrCat("sparse offsets describe more than ", rows, " rows"));
    }
    total += count + (last ? 0 : 1);
    if (last) {
      trailing = count;
      break;
    }
    gaps.push_back(count);
  }
  if (total != rows) {
    return absl::DataLossError(
        absl::StrCat("sparse offsets describe ", total, " rows, the block has ", rows));
  }
  ColumnPtr values = column.CloneEmpty();
  if (!gaps.empty()) {
    CHGATE_RETURN_IF_ERROR(discard ? values->SkipBody(in, gaps.size())
                                   : values->LoadBody(in, gaps.size()));
  }
  if (discard) return absl::OkStatus();
  for (size_t k = 0; k < gaps.size(); ++k) {
    for (uint64_t d = 0; d < gaps[k]; ++d) column.AppendDefault();
    column.AppendRange(*values, k, k + 1);
  }
  for (uint64_t d = 0; d < trailing; ++d) column.AppendDefault();
  return absl::OkStatus();
}

// The serialization kinds a server announced for a column (after has_custom = 1): one byte, and
// for a column whose layout is a Tuple the tuple's own byte followed by each element's kinds,
// recursively (SerializationInfoTuple::deserializeFromKindsBinary). Servers send sparse tuple
// elements even when the tuple itself is default.
struct Kinds {
  uint8_t kind = kKindDefault;
  std::vector<Kinds> elements;

  bool AllDefault() const {
    if (kind != kKindDefault) return false;
    for (const Kinds& e : elements) {
      if (!e.AllDefault()) return false;
    }
    return true;
  }
};

absl::Status ReadKinds(ReadBuffer& in, const Column& column, Kinds* kinds) {
  CHGATE_RETURN_IF_ERROR(in.ReadFixed(&kinds->kind));
  if (column.kind() == ColumnKind::kTuple) {
    const auto& tuple = static_cast<const ColumnTuple&>(column);
    kinds->elements.resize(tuple.element_count());
    for (size_t i = 0; i < tuple.element_count(); ++i) {
      CHGATE_RETURN_IF_ERROR(ReadKinds(in, *tuple.element(i), &kinds->elements[i]));
    }
  }
  return absl::OkStatus();
}

// Whether `column` has a serialization-state prefix somewhere inside (LowCardinality's version
// word, the headers of the dynamic types).
bool HasPrefix(const Column& column) {
  switch (column.kind()) {
    case ColumnKind::kFixed:
    case ColumnKind::kString:
    case ColumnKind::kAggregateState:
      return false;
    case ColumnKind::kNullable:
      return HasPrefix(*static_cast<const ColumnNullable&>(column).nested());
    case ColumnKind::kArray:
    case ColumnKind::kMap:
      return HasPrefix(*static_cast<const ColumnArray&>(column).nested());
    case ColumnKind::kTuple: {
      const auto& tuple = static_cast<const ColumnTuple&>(column);
      for (size_t i = 0; i < tuple.element_count(); ++i) {
        if (HasPrefix(*tuple.element(i))) return true;
      }
      return false;
    }
    case ColumnKind::kLowCardinality:
    case ColumnKind::kVariant:
    case ColumnKind::kDynamic:
    case ColumnKind::kJson:
      return true;
  }
  return true;
}

// Whether this client reads a sparse body of `column`. ClickHouse makes only scalars sparse (and
// the scalar elements of tuples); the offsets and values of other layouts read the same way
// unless a state prefix (which would come before the offsets) is inside. Sparse Nullable (from
// revision 54483 on) leaves out the null map, and a Tuple announces kinds per element instead.
bool ReadsSparse(const Column& column) {
  switch (column.kind()) {
    case ColumnKind::kFixed:
    case ColumnKind::kString:
    case ColumnKind::kAggregateState:
      return true;
    case ColumnKind::kArray:
    case ColumnKind::kMap:
      return !HasPrefix(column);
    case ColumnKind::kNullable:
    case ColumnKind::kTuple:
    case ColumnKind::kLowCardinality:
    case ColumnKind::kVariant:
    case ColumnKind::kDynamic:
    case ColumnKind::kJson:
      return false;
  }
  return false;
}

absl::Status CheckReadable(const Kinds& kinds, const Column& column) {
  if ((kinds.kind == kKindSparse && ReadsSparse(column)) || kinds.kind == kKindDefault) {
    for (size_t i = 0; i < kinds.elements.size(); ++i) {
      CHGATE_RETURN_IF_ERROR(
          CheckReadable(kinds.elements[i], *static_cast<const ColumnTuple&>(column).element(i)));
    }
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat(
      "a ", column.type_name(), " value uses custom serialization kind ", kinds.kind,
      ", which this client does not read (it reads sparse columns and sparse tuple elements, "
      "except Nullable ones and those with LowCardinality inside)"));
}

// Reads the body of `column` (prefix already read) serialized with `kinds` (CheckReadable).
absl::Status LoadBodyOfKinds(ReadBuffer& in, size_t rows, const Kinds& kinds, bool discard,
                             Column& column) {
  if (kinds.kind == kKindSparse) return LoadSparseBody(in, rows, discard, column);
  if (column.kind() == ColumnKind::kTuple && !kinds.AllDefault()) {
    // A tuple's body is its elements' bodies in turn, each in its own kind.
    const auto& tuple = static_cast<const ColumnTuple&>(column);
    for (size_t i = 0; i < tuple.element_count(); ++i) {
      CHGATE_RETURN_IF_ERROR(
          LoadBodyOfKinds(in, rows, kinds.elements[i], discard, *tuple.element(i)));
    }
    return absl::OkStatus();
  }
  return discard ? column.SkipBody(in, rows) : column.LoadBody(in, rows);
}

}  // namespace

absl::Status Block::Validate() const {
  for (const NamedColumn& c : columns_) {
    if (c.column->Size() != rows()) {
      return absl::InvalidArgumentError(
          absl::StrCat("column ", c.name, " has ", c.column->Size(), " rows, expected ", rows()));
    }
  }
  return absl::OkStatus();
}

Block Block::Clone() const {
  Block copy;
  copy.info_ = info_;
  copy.rows_ = rows_;
  for (const NamedColumn& c : columns_) {
    ColumnPtr column = c.column->CloneEmpty();
    column->AppendRange(*c.column, 0, c.column->Size());
    copy.AddColumn(c.name, std::move(column));
  }
  return copy;
}

Block Block::Concat(std::span<const Block* const> parts) {
  Block out;
  if (parts.empty()) return out;
  out.info_ = parts.front()->info_;
  std::vector<const Column*> sources(parts.size());
  for (size_t c = 0; c < parts.front()->column_count(); ++c) {
    for (size_t i = 0; i < parts.size(); ++i) sources[i] = parts[i]->column(c).column.get();
    ColumnPtr column = sources.front()->CloneEmpty();
    column->ReserveForAppend(sources);
    for (const Column* src : sources) column->AppendRange(*src, 0, src->Size());
    out.AddColumn(parts.front()->column(c).name, std::move(column));
  }
  if (out.columns_.empty()) {
    for (const Block* part : parts) out.rows_ += part->rows();
  }
  return out;
}

size_t Block::ByteSize() const {
  size_t n = 0;
  for (const NamedColumn& c : columns_) n += c.column->ByteSize();
  return n;
}

absl::Status ReadBlock(ReadBuffer& in, uint64_t revision, Block* block, bool discard_values) {
  // Columns of the previous block are reused when the next one has the same name and type at
  // the same position (the common case for a query's blocks), so steady-state reads allocate
  // nothing and skip parsing the type name.
  std::vector<NamedColumn> previous = std::move(block->columns_);
  if (previous.empty()) previous = std::move(block->spare_);
  block->spare_.clear();
  block->Clear();
  if (revision >= revision::kBlockInfo) {
    while (true) {
      uint64_t field = 0;
      CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&field));
      if (field == 0) break;
      if (field == 1) {
        uint8_t v = 0;
        CHGATE_RETURN_IF_ERROR(in.ReadFixed(&v));
        block->info_.is_overflows = v != 0;
      } else if (field == 2) {
        CHGATE_RETURN_IF_ERROR(in.ReadFixed(&block->info_.bucket_num));
      } else {
        return absl::DataLossError(absl::StrCat("unknown block info field ", field));
      }
    }
  }
  uint64_t columns = 0, rows = 0;
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&columns));
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&rows));
  if (columns > kMaxBlockColumns || rows > kMaxBlockRows) {
    return absl::DataLossError(
        absl::StrCat("implausible block of ", columns, " columns and ", rows, " rows"));
  }
  block->rows_ = static_cast<size_t>(rows);
  std::string name, type;
  for (uint64_t i = 0; i < columns; ++i) {
    CHGATE_RETURN_IF_ERROR(in.ReadString(&name, 1 << 20));
    CHGATE_RETURN_IF_ERROR(in.ReadString(&type, 1 << 20));
    bool has_custom = false;
    if (revision >= revision::kCustomSerialization) {
      uint8_t flag = 0;
      CHGATE_RETURN_IF_ERROR(in.ReadFixed(&flag));
      has_custom = flag != 0;
    }
    absl::StatusOr<ColumnPtr> column;
    if (i < previous.size() && previous[i].name == name &&
        previous[i].column->type_name() == type && previous[i].column.use_count() == 1) {
      column = std::move(previous[i].column);
      (*column)->Clear();
    } else {
      column = CreateColumn(type);
      if (!column.ok()) {
        return absl::Status(column.status().code(),
                            absl::StrCat("column ", name, ": ", column.status().message()));
      }
    }
    Kinds kinds;
    absl::Status loaded = has_custom ? ReadKinds(in, **column, &kinds) : absl::OkStatus();
    if (loaded.ok()) loaded = CheckReadable(kinds, **column);
    if (loaded.ok() && rows > 0) loaded = (*column)->LoadPrefix(in);
    if (loaded.ok() && rows > 0) {
      loaded = LoadBodyOfKinds(in, static_cast<size_t>(rows), kinds, discard_values, **column);
    }
    if (!loaded.ok()) {
      return absl::Status(loaded.code(),
                          absl::StrCat("column ", name, " (", type, "): ", loaded.message()));
    }
    if (discard_values) {
      block->spare_.push_back({name, *std::move(column)});
    } else {
      block->AddColumn(name, *std::move(column));
    }
  }
  // Keep what this block did not take, emptied (no views left), for the next read.
  for (NamedColumn& c : previous) {
    if (c.column != nullptr && c.column.use_count() == 1) {
      c.column->Clear();
      block->spare_.push_back(std::move(c));
    }
  }
  return absl::OkStatus();
}

void WriteBlock(const Block& block, uint64_t revision, GatherWriter& out) {
  const Block* one[] = {&block};
  WriteBlockOfParts(one, revision, out);
}

void WriteBlockOfParts(std::span<const Block* const> parts, uint64_t revision, GatherWriter& out) {
  static const Block kEmpty;
  const Block& first = parts.empty() ? kEmpty : *parts.front();
  if (revision >= revision::kBlockInfo) {
    out.WriteVarUInt(1);
    out.WriteFixed<uint8_t>(first.info().is_overflows ? 1 : 0);
    out.WriteVarUInt(2);
    out.WriteFixed<int32_t>(first.info().bucket_num);
    out.WriteVarUInt(0);
  }
  size_t rows = 0;
  for (const Block* part : parts) rows += part->rows();
  out.WriteVarUInt(first.column_count());
  out.WriteVarUInt(rows);
  for (size_t i = 0; i < first.column_count(); ++i) {
    const NamedColumn& c = first.column(i);
    out.WriteString(c.name);
    out.WriteString(c.column->type_name());
    if (revision >= revision::kCustomSerialization) out.WriteFixed<uint8_t>(0);
    if (rows == 0) continue;
    c.column->SavePrefix(out);
    for (const Block* part : parts) {
      if (!part->empty()) part->column(i).column->SaveBody(out);
    }
  }
}

}  // namespace chgate::clickhouse
