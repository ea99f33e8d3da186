// ColumnDynamic: `Dynamic` / `Dynamic(max_types=N)`, a column whose set of value types lives in
// the data, not in the type name. It is a ColumnVariant over its current types plus
// `SharedVariant` (a String column of values whose types did not fit, each the type's binary
// encoding followed by the value in RowBinary form), its alternatives sorted by type name.
// On the wire (serialization V1, what a client at revision 54460 receives and what this column
// writes; V2 is read too): prefix `UInt64 version` (1 V1, 2 V2), V1 only a VarUInt that readers
// skip, `VarUInt n`, n type names (Strings, without SharedVariant), then the Variant's prefix;
// body the Variant's body. Each block brings its own types; rows of several blocks are merged by
// type name.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/clickhouse/columns/variant.h"

namespace chgate::clickhouse {

class ColumnDynamic final : public Column {
 public:
  static constexpr int64_t kDefaultMaxTypes = 32;
  static constexpr std::string_view kSharedVariant = "SharedVariant";

  ColumnDynamic(std::string type_name, TypeAst type, int64_t max_types);

  int64_t max_types() const { return max_types_; }
  // The rows: a variant whose alternative i has type alternative_type(i).
  const ColumnVariant& variant() const { return *variant_; }
  const std::string& alternative_type(size_t i) const { return names_[i]; }
  size_t shared_index() const { return shared_index_; }
  bool IsNull(size_t row) const { return variant_->IsNull(row); }
  bool IsShared(size_t row) const { return variant_->discriminator(row) == shared_index_; }

  // Adds `type_name` (canonicalised) to the types if it is new, and returns its alternative
  // index. InvalidArgument for a malformed or unsupported type or one not allowed inside Dynamic
  // (Nullable, LowCardinality(Nullable), Variant, Dynamic), ResourceExhausted when max_types
  // types are already in use.
  absl::StatusOr<size_t> AddType(std::string_view type_name);
  // Starts a row of type `type_name` (adding the type if needed) and returns the column to which
  // the caller appends exactly one value. Errors as AddType.
  absl::StatusOr<Column*> AppendValueOf(std::string_view type_name);
  void AppendNull() { variant_->AppendNull(); }

  ColumnKind kind() const override { return ColumnKind::kDynamic; }
  size_t Size() const override { return variant_->Size(); }
  // Removes the rows; the types stay.
  void Clear() override { variant_->Clear(); }
  void AppendDefault() override { AppendNull(); }
  void Truncate(size_t rows) override { variant_->Truncate(rows); }
  void AppendRange(const Column& src, size_t begin, size_t end) override;
  ColumnPtr CloneEmpty() const override;
  size_t ByteSize() const override { return variant_->ByteSize(); }
  absl::Status LoadPrefix(ReadBuffer& in) override;
  absl::Status LoadBody(ReadBuffer& in, size_t rows) override;
  void SavePrefix(GatherWriter& out) const override;
  void SaveBody(GatherWriter& out) const override;

 private:
  // A variant over `names` (which include SharedVariant), sorted; `names` is sorted in place.
  static absl::StatusOr<std::shared_ptr<ColumnVariant>> MakeVariant(
      std::vector<std::string>* names);
  // Index of the alternative named `name` in names_, or names_.size().
  size_t Find(std::string_view name) const;
  // Adds the canonical type name `name` (no checks of max_types).
  absl::StatusOr<size_t> Insert(const std::string& name);

  int64_t max_types_;
  std::vector<std::string> names_;  // alternative type names, sorted, SharedVariant included
  size_t shared_index_ = 0;
  std::shared_ptr<ColumnVariant> variant_;
  // The types and rows of the block being read (LoadPrefix to LoadBody).
  std::vector<std::string> incoming_names_;
  std::shared_ptr<ColumnVariant> incoming_;
};

// Decodes a value in ClickHouse's self-describing binary form (the type's binary encoding, then
// the value in RowBinary form), as SharedVariant rows and JSON shared data hold them. Returns a
// one-row column of that type; Unimplemented for type encodings this client does not decode
// (supported: integers, floats, Date, Date32, DateTime[64] with or without zone, String,
// FixedString, Decimal, UUID, and Array and Tuple of those), DataLoss for corrupt bytes.
absl::StatusOr<ColumnPtr> DecodeBinaryValue(std::string_view bytes);

}  // namespace chgate::clickhouse
