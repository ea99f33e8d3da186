// Helpers that build what InsertRequest carries: generic row values (chgate.v1.Value, converted
// by chgate against the table's types) and columnar Blocks in the layout of chgate.v1.Column (the
// fastest form: chgate copies the arrays instead of converting values).
//
//   v1::InsertRequest request;
//   request.set_table("app.events");
//   AddRow(&request, {MakeValue(uint64_t{1}), MakeValue("click"), MakeNull()});
//
//   BlockBuilder block;
//   ColumnBuilder& id = block.AddColumn("id", "UInt64");
//   ColumnBuilder& tags = block.AddColumn("tags", "Array(String)");
//   id.AppendUInt64(1);
//   tags.element().AppendString("a").AppendString("b");
//   tags.EndRow();
//   absl::StatusOr<v1::Block> built = block.Build();
//
// Builders are not thread-safe; use one per thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chgate/v1/chgate.pb.h"
#include "client/sdk/types.h"

namespace chgate::client {

// ---- row values --------------------------------------------------------------------------

v1::Value MakeNull();
v1::Value MakeValue(std::nullptr_t);
v1::Value MakeValue(bool v);
v1::Value MakeValue(double v);
v1::Value MakeValue(std::string_view text);  // string_value (UTF-8 text, big numbers, decimals)
v1::Value MakeValue(const char* text);
v1::Value MakeValue(const std::string& text);
v1::Value MakeValue(absl::Time t);  // timestamp_value
template <typename T>
requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) v1::Value MakeValue(T v) {
  v1::Value out;
  if constexpr (std::is_signed_v<T>) {
    out.set_int64_value(static_cast<int64_t>(v));
  } else {
    out.set_uint64_value(static_cast<uint64_t>(v));
  }
  return out;
}
v1::Value MakeBytes(std::string_view bytes);  // bytes_value (any bytes)
v1::Value MakeArray(std::vector<v1::Value> elements);
v1::Value MakeTuple(std::vector<v1::Value> elements);
v1::Value MakeMap(std::vector<std::pair<v1::Value, v1::Value>> entries);

// Appends one row (one value per target column) to request->rows().
void AddRow(v1::InsertRequest* request, std::vector<v1::Value> values);
// One row of `values`, for Producer sends.
v1::Row MakeRow(std::vector<v1::Value> values);

// ---- columnar blocks ---------------------------------------------------------------------

class BlockBuilder;

// Appends values to one column (or one child of a composite column) in its ClickHouse layout.
// Appenders never fail on the spot: the first bad value is remembered (with the column and row)
// and reported by BlockBuilder::Build, so calls can be chained.
class ColumnBuilder {
 public:
  ColumnBuilder(const ColumnBuilder&) = delete;
  ColumnBuilder& operator=(const ColumnBuilder&) = delete;

  // Integer types of every width, Bool (0/1), Date (days), Date32 (days), DateTime (Unix
  // seconds), DateTime64 (ticks of 10^-P s), Decimal (the integer value, scaled by 10^S here),
  // Enum (the element value), IPv4 (the address as a number), Interval. Range-checked.
  ColumnBuilder& AppendInt64(int64_t v);
  ColumnBuilder& AppendUInt64(uint64_t v);
  // Float32 (rounded to nearest; finite values beyond its range are rejected), Float64,
  // BFloat16 (rounded to nearest even).
  ColumnBuilder& AppendFloat64(double v);
  // Bool, and integer types as 0 or 1.
  ColumnBuilder& AppendBool(bool v);
  // String (any bytes), FixedString(N) (at most N bytes, zero-padded), Enum (element name),
  // UUID ("8-4-4-4-12" text), IPv4 and IPv6 (text), Decimal (exact text such as "-12.340"),
  // integers of every width (decimal text, so Int128/256 values beyond 64 bits fit).
  ColumnBuilder& AppendString(std::string_view v);
  // Date and Date32 (the UTC day), DateTime (whole seconds, rounded down), DateTime64 (ticks,
  // rounded down).
  ColumnBuilder& AppendTime(absl::Time t);
  // Decimal only: the raw value x 10^S (AppendDecimalRaw(1234) is 12.34 in Decimal(9, 2)).
  ColumnBuilder& AppendDecimalRaw(int64_t scaled);
  // Nullable(T) and LowCardinality(Nullable(T)) only.
  ColumnBuilder& AppendNull();

  // Composite columns. Array: element() is the element column; add this row's elements to it,
  // then EndRow(). Map: element(0) keys, element(1) values, then EndRow(). Tuple: append one value
  // to every element(i), then EndRow().
  ColumnBuilder& element(size_t index = 0);
  ColumnBuilder& EndRow();

  // Rows appended so far.
  uint64_t rows() const { return rows_; }
  const ColumnType& type() const { return type_; }

 private:
  friend class BlockBuilder;
  ColumnBuilder(BlockBuilder* owner, std::string path, ColumnType type, v1::Column* column);

  void Fail(std::string_view what);
  bool StartValue();  // handles the null map; false if the column cannot take a scalar
  void AppendInteger(bool negative, uint64_t magnitude);
  void AppendBytes(const char* bytes, size_t size);

  BlockBuilder* owner_;
  std::string path_;  // column name plus position inside composites ("tags[]", "m.keys")
  ColumnType type_;
  v1::Column* column_;
  uint64_t rows_ = 0;
  std::vector<std::unique_ptr<ColumnBuilder>> children_;
};

// Builds one chgate.v1.Block, column by column.
class BlockBuilder {
 public:
  BlockBuilder() = default;
  BlockBuilder(const BlockBuilder&) = delete;
  BlockBuilder& operator=(const BlockBuilder&) = delete;

  // Adds a column named `name` of ClickHouse type `type` (exactly as the server prints the target
  // column's type). The reference stays valid until Build. A type that cannot be parsed makes
  // Build fail; the returned builder then ignores appends.
  ColumnBuilder& AddColumn(std::string name, std::string type);

  // The block, or InvalidArgument for the first bad value (naming column and row), a type that
  // cannot be parsed, an Array/Map/Tuple row left open, or columns with different row counts.
  // Ends the builder: the ColumnBuilder references are invalid afterwards.
  absl::StatusOr<v1::Block> Build();

 private:
  friend class ColumnBuilder;
  void Fail(absl::Status status);

  v1::Block block_;
  std::vector<std::unique_ptr<ColumnBuilder>> columns_;
  absl::Status error_;
};

}  // namespace chgate::client
