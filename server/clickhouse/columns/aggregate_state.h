// ColumnAggregateState: a column of AggregateFunction(...) states, each kept as the opaque bytes
// the function's own serialize wrote. In the Native format the states follow one another with no
// length prefix, so reading one needs the function's state layout: AggregateStateFormat knows it
// for the functions below and refuses the others (Unimplemented, naming the function). States
// are written back byte for byte; a row prints as ClickHouse prints it in TabSeparated, the state
// bytes escaped (quoted inside arrays and tuples). Not thread-safe (like every column).
//
// Supported, with the state each writes (ClickHouse src/AggregateFunctions; LE = little-endian):
//   count(...)                      VarUInt count (AggregateFunctionCount.h); any arguments,
//                                   Nullable ones included (AggregateFunctionCountNotNullUnary)
//   sum(T)                          the sum, LE: UInt64 for unsigned integers of up to 64 bits and
//                                   Bool, Int64 for signed ones, Float64 for floats, T for wider
//                                   integers, Decimal128 for Decimal32/64/128, Decimal256 for
//                                   Decimal256 (AggregateFunctionSum.cpp: SumSimple)
//   sumWithOverflow(T)              the sum as T (SumSameType)
//   sumKahan(T)                     Float64 sum + Float64 compensation; Decimal as sum
//   avg(T)                          numerator as sum(T)'s, then VarUInt denominator
//                                   (AggregateFunctionAvg.h)
//   min, max, any, anyLast(T)       UInt8 has, then T's value if has (SingleValueDataFixed, and
//                                   SingleValueDataGeneric for fixed-width types); for String an
//                                   Int32 size (-1 = none; the size counts a trailing zero byte),
//                                   then the bytes (SingleValueDataString)
//   argMin, argMax(R, V)            R's single value, then V's (AggregateFunctionArgMinMax)
//   uniq(...)                       UInt8 skip degree, VarUInt n (<= 65536), n UInt32 hashes
//                                   (UniquesHashSet.h); state version 1 (`AggregateFunction(1,
//                                   uniq, ...)`): UInt8 flags (bit 0: 32-bit hashes) first, then
//                                   the same with UInt64 hashes unless bit 0 is set
//   uniqExact(T)                    VarUInt n, n keys: T for numbers, a 16-byte SipHash for
//                                   String and FixedString (HashTable::write)
//   groupArray[(N)](T)              VarUInt n, then n values of T for numbers, Date, DateTime;
//                                   n times VarUInt length + bytes for String
//                                   (AggregateFunctionGroupArray)
//   quantile(s)(...)(T)             UInt64 sample count, UInt64 total, the generator's state as a
//                                   String, then min(sample count, total) values of T
//                                   (ReservoirSampler.h) for numbers
// with the combinators -If (the condition argument dropped), -Array (one Array level off each
// argument) and -Merge (the state of the AggregateFunction argument). The empty state (for
// AppendDefault) is what each function's create then serialize writes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/clickhouse/columns/column.h"

namespace chgate::clickhouse {

// The layout of one function's state: a sequence of parts.
class AggregateStateFormat {
 public:
  enum class Part : uint8_t {
    kFixed,          // `width` bytes
    kVarUInt,        // one VarUInt
    kSingleValue,    // UInt8 has, then `width` bytes if has != 0
    kSingleString,   // Int32 size, then size bytes if size >= 0
    kUniq,           // UInt8 skip degree, VarUInt n, n * 4 bytes
    kUniqV1,         // UInt8 flags, UInt8 skip degree, VarUInt n, n * (flags & 1 ? 4 : 8) bytes
    kCountedFixed,   // VarUInt n, n * `width` bytes
    kCountedString,  // VarUInt n, n * (VarUInt length + bytes)
    kReservoir,      // UInt64 sample count, UInt64 total, String, min(count, total) * `width`
  };
  struct Step {
    Part part;
    uint32_t width = 0;
  };

  // The format of `type`, an AggregateFunction(...) type. Unimplemented for a function (or an
  // argument type of it) whose state layout this client does not know; InvalidArgument for a
  // malformed type.
  static absl::StatusOr<AggregateStateFormat> Create(const TypeAst& type);

  const std::string& function() const { return function_; }
  const std::vector<Step>& steps() const { return steps_; }
  // The bytes of the state a fresh (empty) aggregation serializes to.
  const std::string& empty_state() const { return empty_state_; }

  // Reads one state from `in` and appends its bytes, exactly as read, to `out`. DataLoss for
  // values no state can hold, OutOfRange when `in` ends first.
  absl::Status CopyState(ReadBuffer& in, ByteBuffer* out) const;

 private:
  std::string function_;
  std::vector<Step> steps_;
  std::string empty_state_;

  friend class AggregateFormatBuilder;
};

class ColumnAggregateState final : public Column {
 public:
  ColumnAggregateState(std::string type_name, TypeAst type, AggregateStateFormat format);

  const AggregateStateFormat& format() const { return format_; }
  // The state bytes of row `row`.
  std::string_view State(size_t row) const {
    const uint64_t begin = row == 0 ? 0 : ends_[row - 1];
    return std::string_view(data_.data() + begin, static_cast<size_t>(ends_[row] - begin));
  }
  // Appends one state given as its serialized bytes (e.g. a state read from a query, or its
  // TabSeparated text unescaped). InvalidArgument unless `state` is exactly one whole state of
  // this function.
  absl::Status AppendState(std::string_view state);

  ColumnKind kind() const override { return ColumnKind::kAggregateState; }
  size_t Size() const override { return ends_.size(); }
  void Clear() override {
    data_.clear();
    ends_.clear();
  }
  void AppendDefault() override {
    data_.Append(format_.empty_state());
    ends_.push_back(data_.size());
  }
  void Truncate(size_t rows) override {
    data_.resize(rows == 0 ? 0 : static_cast<size_t>(ends_[rows - 1]));
    ends_.resize(rows);
  }
  void AppendRange(const Column& src, size_t begin, size_t end) override;
  ColumnPtr CloneEmpty() const override;
  size_t ByteSize() const override { return data_.size() + ends_.size() * sizeof(uint64_t); }
  absl::Status LoadBody(ReadBuffer& in, size_t rows) override;
  void SaveBody(GatherWriter& out) const override { out.Reference(data_.data(), data_.size()); }

 private:
  AggregateStateFormat format_;
  ByteBuffer data_;
  std::vector<uint64_t> ends_;  // where each row's state ends in data_
};

}  // namespace chgate::clickhouse
