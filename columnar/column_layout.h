// The layout of chgate.v1.Column (proto/chgate/v1/chgate.proto), once for both sides of the API:
// which value fields a column sets, the checks of their sizes, and reading and appending values in
// that layout. The server reads insert columns and writes result columns with it; the SDK writes
// insert columns and reads result columns. Type knowledge (which fields a type family uses, its
// width) stays with each side's own type description; this is the layout both agree on.
//
// The checks return InvalidArgument with a message that names the field and the sizes ("`offsets`
// has 3 entries, expected 4 (one per row)") and no column: each side prefixes its own context
// (the column's name and type, the path of a child). Pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chgate/v1/chgate.pb.h"

namespace chgate::columnar {

// The value fields of a Column, as bits.
enum Field : unsigned {
  kNulls = 1 << 0,
  kOffsets = 1 << 1,
  kData = 1 << 2,
  kChildren = 1 << 3,
  kInt64s = 1 << 4,
  kUInt64s = 1 << 5,
  kFloat64s = 1 << 6,
  kStrings = 1 << 7,
};

// The field's name in the .proto ("nulls", "offsets" ...), "?" for anything else.
const char* FieldName(unsigned field);

// The fields `column` sets (non-empty).
unsigned PresentFields(const v1::Column& column);

// Rejects a field outside `allowed`, naming the first one.
absl::Status CheckFields(const v1::Column& column, unsigned allowed);

using Offsets = google::protobuf::RepeatedField<uint64_t>;

// Where row `row` starts and ends in data laid out by cumulative end `offsets`.
inline uint64_t RowBegin(const Offsets& offsets, uint64_t row) {
  return row == 0 ? 0 : offsets.Get(static_cast<int>(row - 1));
}
inline uint64_t RowEnd(const Offsets& offsets, uint64_t row) {
  return offsets.Get(static_cast<int>(row));
}

// Checks that `offsets` has one non-decreasing entry per row and returns the last one (0 for no
// rows). `unit` names what they count in the message ("bytes", "elements").
absl::StatusOr<uint64_t> CheckOffsets(const Offsets& offsets, uint64_t rows, std::string_view unit);

// A String column in `data` + `offsets`: the offsets check, and the last one at data's end.
absl::Status CheckStringData(const v1::Column& column, uint64_t rows);

// `data` holds exactly `rows` values of `width` bytes.
absl::Status CheckFixedData(const v1::Column& column, uint64_t rows, size_t width);

// Which bytes a null map may hold: 0 and 1 only (what a writer must send), or any byte with every
// non-zero one meaning NULL (what a reader tolerates, as IsNull reads them).
enum class NullFlags { kZeroOrOne, kAnyByte };

// `nulls` is empty or has one byte per row, each allowed by `flags`.
absl::Status CheckNulls(const v1::Column& column, uint64_t rows,
                        NullFlags flags = NullFlags::kZeroOrOne);

// The column has `expected` children; `what` names them in the message ("the elements").
absl::Status CheckChildren(const v1::Column& column, int expected, std::string_view what);

// ---- reading (after the checks) ----

inline bool IsNull(const v1::Column& column, uint64_t row) {
  return !column.nulls().empty() && column.nulls()[row] != 0;
}

// The `width` bytes of fixed-width value `row`.
inline const char* FixedAt(const v1::Column& column, size_t width, uint64_t row) {
  return column.data().data() + row * width;
}

// The bytes of String value `row` (the `data` + `offsets` form).
inline std::string_view StringAt(const v1::Column& column, uint64_t row) {
  const uint64_t begin = RowBegin(column.offsets(), row);
  return std::string_view(column.data()).substr(begin, RowEnd(column.offsets(), row) - begin);
}

// ---- appending ----

// Appends one String value: its bytes to `data`, its end to `offsets`.
inline void AppendString(std::string_view value, v1::Column* column) {
  column->mutable_data()->append(value);
  column->add_offsets(column->data().size());
}

// Appends the end of one Array or Map row: the count of elements so far.
inline void AppendRowEnd(uint64_t elements, v1::Column* column) { column->add_offsets(elements); }

// Appends the null flags of `count` rows (1 = NULL) to a column that already has `rows_before`
// rows, in the compact form query results use: `nulls` stays empty while no row is NULL, and the
// first NULL back-fills zeros for the rows before it. A column built row by row may instead
// write every flag; both forms read the same.
void AppendNullFlags(const char* flags, size_t count, uint64_t rows_before, v1::Column* column);

// Appends rows [begin, end) of `src` (which holds `src_rows` rows, in a layout the checks above
// accept) to `dst` (which holds `dst_rows` rows of the same type): the null map with the compact
// rule, offsets rebased after dst's last one, the rows' bytes of `data` (fixed width: data's size
// over src_rows), the elements of Array and Map rows and the rows of Tuple elements (children
// `dst` lacks are added with src's names and types), and the insert-only value fields. Needs no
// type: the fields a column sets say how it is laid out. `dst`'s name and type stay as they are.
void AppendRows(const v1::Column& src, uint64_t src_rows, uint64_t begin, uint64_t end,
                uint64_t dst_rows, v1::Column* dst);

}  // namespace chgate::columnar
