// ColumnVariant: Variant(T1, ..., Tn), a tagged union. Each row has a one-byte global
// discriminator (the index of its alternative in the type's order, which ClickHouse sorts by type
// name; 255 = NULL) and its value lives in that alternative's column, which holds only the rows of
// that alternative, in row order. On the wire: prefix `UInt64 mode` (0 BASIC, 1 COMPACT) then each
// alternative's prefix; body the discriminators, then each alternative's body for its own rows.
// Writes BASIC (what the server writes to clients and reads from them); reads both.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "server/clickhouse/columns/column.h"

namespace chgate::clickhouse {

class ColumnVariant final : public Column {
 public:
  static constexpr uint8_t kNullDiscriminator = 255;
  // At most 255 alternatives (discriminators 0-254), as in ClickHouse.
  static constexpr size_t kMaxAlternatives = 255;

  // `alternatives` are empty columns in the type's (sorted) order.
  ColumnVariant(std::string type_name, TypeAst type, std::vector<ColumnPtr> alternatives);

  size_t alternative_count() const { return alternatives_.size(); }
  const ColumnPtr& alternative(size_t i) const { return alternatives_[i]; }
  // The index of the alternative whose type name is `type_name`, if any.
  std::optional<size_t> FindAlternative(std::string_view type_name) const;

  // The row's discriminator (kNullDiscriminator for NULL) and its position inside its
  // alternative (meaningless for NULL).
  uint8_t discriminator(size_t row) const {
    return static_cast<uint8_t>(discriminators_.data()[row]);
  }
  uint64_t offset(size_t row) const { return offsets_[row]; }
  bool IsNull(size_t row) const { return discriminator(row) == kNullDiscriminator; }
  const ByteBuffer& discriminators() const { return discriminators_; }

  void AppendNull();
  // Starts a row of alternative `index`; the caller then appends exactly one value to
  // alternative(index) (like ColumnNullable::AppendNotNull). SaveBody checks that every
  // alternative holds exactly its rows.
  void AppendAlternative(size_t index);

  ColumnKind kind() const override { return ColumnKind::kVariant; }
  size_t Size() const override { return offsets_.size(); }
  void Clear() override;
  void AppendDefault() override { AppendNull(); }
  void Truncate(size_t rows) override;
  void AppendRange(const Column& src, size_t begin, size_t end) override;
  ColumnPtr CloneEmpty() const override;
  size_t ByteSize() const override;
  absl::Status LoadPrefix(ReadBuffer& in) override;
  absl::Status LoadBody(ReadBuffer& in, size_t rows) override;
  void SavePrefix(GatherWriter& out) const override;
  void SaveBody(GatherWriter& out) const override;

  // Appends the rows of `src` (a variant over other alternatives), sending src alternative i to
  // this column's alternative `mapping[i]`. Used by Dynamic to merge blocks with other types.
  void AppendRemapped(const ColumnVariant& src, const std::vector<size_t>& mapping, size_t begin,
                      size_t end);

 private:
  absl::Status ReadDiscriminators(ReadBuffer& in, size_t rows);

  std::vector<ColumnPtr> alternatives_;
  ByteBuffer discriminators_;
  std::vector<uint64_t> offsets_;
  // Rows of each alternative (what its column must hold).
  std::vector<uint64_t> counts_;
  uint64_t mode_ = 0;  // discriminators mode of the last prefix read
};

}  // namespace chgate::clickhouse
