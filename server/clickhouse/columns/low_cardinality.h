// ColumnLowCardinality: a dictionary of distinct values plus one index per row. On the wire:
// prefix `UInt64 version = 1`; body `UInt64 index_type` (key width in bits 0-7, HasAdditionalKeys
// bit 9, NeedUpdateDictionary bit 10), `UInt64 n_keys`, the keys as a column of the inner type
// without Nullable, `UInt64 n_rows`, the indexes. For LowCardinality(Nullable(T)) key 0 is NULL.
// Appending deduplicates values through a hash of their wire bytes; the written key width is the
// smallest that holds the dictionary.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "server/clickhouse/columns/column.h"

namespace chgate::clickhouse {

class ColumnLowCardinality final : public Column {
 public:
  // `dictionary` is an empty column of the inner type with Nullable removed.
  ColumnLowCardinality(std::string type_name, TypeAst type, ColumnPtr dictionary, bool nullable);

  bool nullable() const { return nullable_; }
  const ColumnPtr& dictionary() const { return dictionary_; }
  uint64_t Index(size_t row) const { return indexes_[row]; }
  bool IsNull(size_t row) const { return nullable_ && indexes_[row] == 0; }

  // Appends a String-like value (for String / FixedString dictionaries), deduplicated.
  absl::Status AppendString(std::string_view value);
  // Appends a row holding the value the caller has just appended to dictionary() (for inner types
  // that are not String-like, e.g. numbers and dates), deduplicated by the value's bytes: when an
  // equal value is already in the dictionary, the new copy is removed again and the existing key
  // used. Returns InvalidArgument if the dictionary is neither String nor fixed-width, or if no
  // value was appended to it.
  absl::Status AppendFromDictionaryTail();
  void AppendNull();

  ColumnKind kind() const override { return ColumnKind::kLowCardinality; }
  size_t Size() const override { return indexes_.size(); }
  void Clear() override;
  void AppendDefault() override;
  // Dictionary entries added by the dropped rows stay (they are still valid keys).
  void Truncate(size_t rows) override { indexes_.resize(rows); }
  void AppendRange(const Column& src, size_t begin, size_t end) override;
  ColumnPtr CloneEmpty() const override;
  size_t ByteSize() const override {
    return dictionary_->ByteSize() + indexes_.size() * sizeof(uint32_t);
  }
  absl::Status LoadPrefix(ReadBuffer& in) override;
  absl::Status LoadBody(ReadBuffer& in, size_t rows) override;
  void SavePrefix(GatherWriter& out) const override;
  void SaveBody(GatherWriter& out) const override;

 private:
  void ResetDictionary();

  ColumnPtr dictionary_;
  bool nullable_;
  std::vector<uint32_t> indexes_;
  // Wire bytes of a dictionary value -> its key, for deduplication on append.
  absl::flat_hash_map<std::string, uint32_t> lookup_;
  // Index bytes staged for SaveBody in the chosen width (rebuilt per save).
  mutable ByteBuffer encoded_indexes_;
  mutable ByteBuffer header_;
};

}  // namespace chgate::clickhouse
