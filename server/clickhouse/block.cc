#include "server/clickhouse/block.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/protocol/revision.h"
#include "server/common/status_macros.h"

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
    RETURN_IF_ERROR(in.ReadVarUInt(&entry));
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
    RETURN_IF_ERROR(discard ? values->SkipBody(in, gaps.size())
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
      RETURN_IF_ERROR(in.ReadVarUInt(&field));
      if (field == 0) break;
      if (field == 1) {
        uint8_t v = 0;
        RETURN_IF_ERROR(in.ReadFixed(&v));
        block->info_.is_overflows = v != 0;
      } else if (field == 2) {
        RETURN_IF_ERROR(in.ReadFixed(&block->info_.bucket_num));
      } else {
        return absl::DataLossError(absl::StrCat("unknown block info field ", field));
      }
    }
  }
  uint64_t columns = 0, rows = 0;
  RETURN_IF_ERROR(in.ReadVarUInt(&columns));
  RETURN_IF_ERROR(in.ReadVarUInt(&rows));
  if (columns > kMaxBlockColumns || rows > kMaxBlockRows) {
    return absl::DataLossError(
        absl::StrCat("implausible block of ", columns, " columns and ", rows, " rows"));
  }
  block->rows_ = static_cast<size_t>(rows);
  std::string name, type;
  for (uint64_t i = 0; i < columns; ++i) {
    RETURN_IF_ERROR(in.ReadString(&name, 1 << 20));
    RETURN_IF_ERROR(in.ReadString(&type, 1 << 20));
    bool sparse = false;
    if (revision >= revision::kCustomSerialization) {
      uint8_t has_custom = 0;
      RETURN_IF_ERROR(in.ReadFixed(&has_custom));
      if (has_custom != 0) {
        // One kind byte per column (a Tuple would announce one per element as well: such
        // columns are refused below, as is any kind but default and sparse).
        uint8_t kind = 0;
        RETURN_IF_ERROR(in.ReadFixed(&kind));
        // Tuples announce a kind per element too, sparse Nullable (revision 54483 on) leaves out
        // the null map, and ClickHouse makes nothing with LowCardinality sparse (its dictionary
        // prefix would come before the offsets): none is read here.
        const bool readable = !absl::StartsWith(type, "Tuple(") &&
                              !absl::StartsWith(type, "Nullable(") &&
                              !absl::StrContains(type, "LowCardinality(");
        if (kind == kKindSparse && readable) {
          sparse = true;
        } else if (kind != kKindDefault || !readable) {
          return absl::UnimplementedError(absl::StrCat(
              "column ", name, " (", type, ") uses custom serialization kind ", kind,
              ", which this client does not read (it reads sparse columns of types other than "
              "Tuple, Nullable and those with LowCardinality)"));
        }
      }
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
    if (rows > 0) {
      RETURN_IF_ERROR((*column)->LoadPrefix(in));
      absl::Status loaded =
          sparse           ? LoadSparseBody(in, static_cast<size_t>(rows), discard_values, **column)
          : discard_values ? (*column)->SkipBody(in, static_cast<size_t>(rows))
                           : (*column)->LoadBody(in, static_cast<size_t>(rows));
      if (!loaded.ok()) {
        return absl::Status(loaded.code(),
                            absl::StrCat("column ", name, " (", type, "): ", loaded.message()));
      }
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
  if (revision >= revision::kBlockInfo) {
    out.WriteVarUInt(1);
    out.WriteFixed<uint8_t>(block.info().is_overflows ? 1 : 0);
    out.WriteVarUInt(2);
    out.WriteFixed<int32_t>(block.info().bucket_num);
    out.WriteVarUInt(0);
  }
  const size_t rows = block.rows();
  out.WriteVarUInt(block.column_count());
  out.WriteVarUInt(rows);
  for (const NamedColumn& c : block.columns()) {
    out.WriteString(c.name);
    out.WriteString(c.column->type_name());
    if (revision >= revision::kCustomSerialization) out.WriteFixed<uint8_t>(0);
    if (rows > 0) {
      c.column->SavePrefix(out);
      c.column->SaveBody(out);
    }
  }
}

}  // namespace chgate::clickhouse
