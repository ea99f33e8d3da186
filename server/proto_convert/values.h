// The API's insert data (chgate.v1 messages) as ingest sees it.
//
// Row path: ProtoRows is an ingest::RowSource over a chgate.v1.RowSet, and ProtoValue hands out
// ingest::ValueRefs over chgate.v1.Value. Both are views: nothing is copied or allocated per row
// or cell, and they are valid as long as the messages they point into.
//
// Columnar path: ConvertBlock turns a chgate.v1.Block into a typed clickhouse::Block following the
// Column layout of the proto (fixed-width `data` copied as bytes, UUID reordered from RFC 4122 to
// ClickHouse's two little-endian halves, String from data+offsets or `strings`, Nullable from
// `nulls`, Array/Map offsets and children, Tuple children, LowCardinality laid out as its inner
// type, the convenience int64s/uint64s/float64s/strings range-checked). The target types come
// from each top-level Column.type, which this server requires on insert; the Ingestor then checks
// them against the table (a mismatch is INVALID_ARGUMENT). AppendProtoColumn is the per-column
// building block and takes any destination column, e.g. one made from a table's schema.
//
// Functions are thread-compatible: they only read the messages and write the columns they get.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "chgate/v1/chgate.pb.h"
#include "server/clickhouse/block.h"
#include "server/clickhouse/columns/column.h"
#include "server/ingest/value.h"

namespace chgate::proto_convert {

// The function table behind ProtoValue; `impl` is a `const v1::Value*`.
extern const ingest::ValueRef::Ops kProtoValueOps;

// A view of `value`. A Value with no kind set is ValueKind::kUnset; string_value is kString and
// bytes_value kBytes; a Map entry without a key or value reads as kUnset.
inline ingest::ValueRef ProtoValue(const v1::Value& value) {
  return ingest::ValueRef(&value, &kProtoValueOps);
}

// The rows of a RowSet; `rows` must outlive this view.
class ProtoRows final : public ingest::RowSource {
 public:
  explicit ProtoRows(const v1::RowSet* rows) : rows_(rows) {}

  size_t row_count() const override { return static_cast<size_t>(rows_->rows_size()); }
  size_t value_count(size_t row) const override {
    return static_cast<size_t>(rows_->rows(static_cast<int>(row)).values_size());
  }
  ingest::ValueRef value(size_t row, size_t column) const override {
    return ProtoValue(rows_->rows(static_cast<int>(row)).values(static_cast<int>(column)));
  }

 private:
  const v1::RowSet* rows_;
};

// Replaces `out` with the typed form of `block`: block.columns(i) becomes a column named
// names[i] (names.size() must equal block.columns_size()) of the type in its `type` field, with
// block.rows() rows.
//
// Returns InvalidArgument, with an ingest::ValueError payload naming the column (and, for a
// rejected value, the row and value), for: a top-level column without `type`; a malformed type
// name; a layout that does not match the type or the row count (wrong data size, offsets that
// decrease or do not match, missing or extra children, more than one value form, `nulls` on a
// type that is not Nullable); a value out of its type's range (convenience forms, Bool, Enum).
// Returns Unimplemented (with the column named) for a type this API cannot carry.
[[nodiscard]] absl::Status ConvertBlock(const v1::Block& block, std::span<const std::string> names,
                                        clickhouse::Block* out);

// Appends `rows` rows of `src`, laid out as the proto describes for `dst`'s type, to `dst`.
// `column` names the top-level column in errors. Errors as ConvertBlock's. No rollback: after an
// error `dst` may hold part of the rows.
[[nodiscard]] absl::Status AppendProtoColumn(const v1::Column& src, uint64_t rows,
                                             std::string_view column, clickhouse::Column* dst);

}  // namespace chgate::proto_convert
