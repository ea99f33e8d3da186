// Reading values out of the columnar layout of chgate.v1.Column (see the Column comment in
// proto/chgate/v1/chgate.proto): layout validation, typed reads and text rendering in
// ClickHouse's TabSeparated style, CSV, or JSON. QueryCursor uses these for the current row;
// they are public for code that handles Blocks itself.
//
// Every function except ValidateColumn requires that ValidateColumn(column, type, rows) returned
// OK and that `row < rows`: after validation no read goes outside the message. Plain functions,
// thread-safe on const data.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chgate/v1/chgate.pb.h"
#include "client/sdk/types.h"

namespace chgate::client {

// How AppendValueText renders a value.
enum class TextFormat {
  // ClickHouse TabSeparated: strings escaped with backslashes, NULL as \N, inside arrays, maps
  // and tuples strings/dates quoted ('a') and NULL as NULL: `['a',NULL]`, `{'k':1}`, `(1,'x')`.
  kTsv,
  // ClickHouse CSV: numbers and Bool bare, other values in double quotes ("" doubles a quote),
  // composite values as their TabSeparated text in quotes ("['a','b']"), NULL as \N.
  kCsv,
  // JSON: integers up to 64 bits, Decimal and finite floats as numbers (nan/inf as null),
  // Int128/256 as strings, other scalars as strings (bytes that are not UTF-8 become U+FFFD),
  // Array and unnamed Tuple as arrays, Map and named Tuple as objects, NULL as null.
  kJson,
};

// Checks that `column` carries `rows` rows laid out as `type` says: sizes of `data`, `nulls` and
// `offsets`, non-decreasing offsets within range, the number of children and their rows,
// recursively. Returns InvalidArgument naming the problem; OK means the readers below stay in
// bounds.
absl::Status ValidateColumn(const v1::Column& column, const ColumnType& type, uint64_t rows);

// Whether row `row` is NULL (false for columns that are not Nullable; true for Nothing).
bool IsNullAt(const v1::Column& column, const ColumnType& type, uint64_t row);

// Appends the value of row `row` as text in `format` to `out`.
void AppendValueText(const v1::Column& column, const ColumnType& type, uint64_t row,
                     TextFormat format, std::string* out);

// Typed reads. Each returns FailedPrecondition when the value is NULL or the type cannot be read
// that way, and OutOfRange when the value does not fit the result type.
//
// UInt64: UInt8..UInt256, Int8..Int256 (non-negative values), Bool, Date, DateTime, IPv4, Enum
// values and Interval.
absl::StatusOr<uint64_t> ReadUInt64(const v1::Column& column, const ColumnType& type, uint64_t row);
// Int64: all integer types, Bool, Date, Date32, DateTime, DateTime64 (ticks), Enum values,
// Interval.
absl::StatusOr<int64_t> ReadInt64(const v1::Column& column, const ColumnType& type, uint64_t row);
// Float64: Float32, Float64, BFloat16, Decimal (nearest double), integers (nearest double), Bool.
absl::StatusOr<double> ReadFloat64(const v1::Column& column, const ColumnType& type, uint64_t row);
// Bool: Bool and integer types (non-zero is true).
absl::StatusOr<bool> ReadBool(const v1::Column& column, const ColumnType& type, uint64_t row);
// String: String and FixedString (all N bytes, zero padding included) as a view into `column`;
// Enum names as a view into `type`. Valid while both live.
absl::StatusOr<std::string_view> ReadString(const v1::Column& column, const ColumnType& type,
                                            uint64_t row);
// Time: DateTime, DateTime64 (exact to the nanosecond), Date and Date32 (midnight UTC).
absl::StatusOr<absl::Time> ReadTime(const v1::Column& column, const ColumnType& type, uint64_t row);

// For Array and Map: the range [begin, end) of this row's elements in the child column(s).
// FailedPrecondition for other types.
absl::StatusOr<std::pair<uint64_t, uint64_t>> ReadArrayBounds(const v1::Column& column,
                                                              const ColumnType& type, uint64_t row);

// ---- Columnar views: a whole column of a validated block without per-value calls ----

// The fixed-width values of a column as T (its `data`, no copy): `view[i]` is row i. T must be
// the column's stored type: uint8_t..uint64_t / int8_t..int64_t of the type's width for
// integers, Bool, dates, DateTime, DateTime64 ticks, Enum values and IPv4, float / double for
// Float32 / Float64. Slots under NULL hold the type's default. Valid while `column` lives.
template <typename T>
class FixedColumnView {
 public:
  FixedColumnView() = default;
  FixedColumnView(const char* data, size_t size) : data_(data), size_(size) {}
  size_t size() const { return size_; }
  // A load of sizeof(T) bytes (the data need not be aligned).
  T operator[](size_t i) const {
    T v;
    std::memcpy(&v, data_ + i * sizeof(T), sizeof(T));
    return v;
  }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
};

// The view of `column` as T; FailedPrecondition when the type is not stored as T (wrong width,
// not a fixed-width number-like type, or a composite). Requires ValidateColumn(...) to be OK.
template <typename T>
absl::StatusOr<FixedColumnView<T>> ViewFixed(const v1::Column& column, const ColumnType& type);

// The values of a String column (FixedString: all N bytes per row): `view[i]` is row i's bytes,
// a view into `column`.
class StringColumnView {
 public:
  StringColumnView() = default;
  StringColumnView(const v1::Column* column, size_t width) : column_(column), width_(width) {}
  size_t size() const;
  std::string_view operator[](size_t i) const;

 private:
  const v1::Column* column_ = nullptr;
  size_t width_ = 0;  // FixedString(N); 0 for String
};
absl::StatusOr<StringColumnView> ViewStrings(const v1::Column& column, const ColumnType& type);

// Appends `bytes` escaped as in ClickHouse TabSeparated text (\\ \' \t \n \r \b \f \0).
void AppendTsvEscaped(std::string_view bytes, std::string* out);

// Appends `bytes` as a JSON string literal (quotes included); invalid UTF-8 becomes U+FFFD.
void AppendJsonString(std::string_view bytes, std::string* out);

// Appends the decimal text of a little-endian two's complement (or unsigned) integer of `width`
// bytes (1..32).
void AppendWideInteger(const char* bytes, size_t width, bool is_signed, std::string* out);

// Appends `v` in the shortest text that reads back to the same value, laid out like
// ClickHouse's float output (`0.1`, `1e21`, `1.5e-7`, `nan`, `-inf`).
void AppendShortestDouble(double v, std::string* out);
void AppendShortestFloat(float v, std::string* out);

}  // namespace chgate::client
