// ColumnFixed: every type whose values have one fixed width on the wire: integers (8-256 bit),
// floats, BFloat16, Bool, Date, Date32, DateTime, DateTime64, Time, Time64, Decimal32-256, UUID,
// IPv4, IPv6, Enum8/16, FixedString(N) and Nothing (text::FixedKind lists them). Values live in one
// contiguous buffer in wire layout, so SaveBody is a single reference to it and LoadBody a bulk
// copy.
#pragma once

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "server/clickhouse/columns/column.h"
#include "text/status_macros.h"
#include "text/type_facts.h"
#include "text/value_text.h"

namespace chgate::clickhouse {

// The kinds and parameters of fixed-width types are the shared type facts (text/type_facts.h).
using text::FixedKind;
using FixedParams = text::FixedType;

class ColumnFixed final : public Column {
 public:
  ColumnFixed(std::string type_name, TypeAst type, text::FixedType fixed);

  FixedKind fixed_kind() const { return params_.kind; }
  size_t width() const { return width_; }
  // The type's kind, width and parameters (precision, scale, zone, enum elements).
  const text::FixedType& params() const { return params_; }

  const char* data() const { return values_.data(); }
  ByteBuffer& values() { return values_; }
  const ByteBuffer& values() const { return values_; }
  // Exchanges the column's values with `other` (so a reader can keep a decoded result's memory
  // and give the column another buffer to decode the next block into).
  void SwapValues(ByteBuffer* other) { std::swap(values_, *other); }

  // Typed access; sizeof(T) must equal width().
  template <typename T>
  T Get(size_t row) const {
    CHGATE_CHECK(sizeof(T) == width_);
    T v;
    std::memcpy(&v, values_.data() + row * sizeof(T), sizeof(T));
    return v;
  }
  template <typename T>
  void Append(T v) {
    CHGATE_CHECK(sizeof(T) == width_);
    values_.AppendFixed(v);
  }
  // Appends one value given as exactly width() raw bytes.
  void AppendRaw(const void* p) { values_.Append(p, width_); }
  const char* RawAt(size_t row) const { return values_.data() + row * width_; }

  // Enum helpers: the value for a name / the name for a value.
  const std::string* EnumName(int64_t value) const { return params_.EnumName(value); }
  bool EnumValue(std::string_view name, int64_t* value) const {
    return params_.EnumValue(name, value);
  }

  ColumnKind kind() const override { return ColumnKind::kFixed; }
  size_t Size() const override { return values_.size() / width_; }
  void Clear() override { values_.clear(); }
  void Truncate(size_t rows) override { values_.resize(rows * width_); }
  void AppendRange(const Column& src, size_t begin, size_t end) override {
    const auto& s = static_cast<const ColumnFixed&>(src);
    values_.Append(s.values_.data() + begin * width_, (end - begin) * width_);
  }
  void AppendDefault() override;
  void ReserveForAppend(std::span<const Column* const> parts) override {
    size_t bytes = values_.size();
    for (const Column* p : parts) bytes += static_cast<const ColumnFixed&>(*p).values_.size();
    values_.reserve(bytes);
  }
  ColumnPtr CloneEmpty() const override;
  size_t ByteSize() const override { return values_.size(); }
  absl::Status LoadBody(ReadBuffer& in, size_t rows) override;
  absl::Status SkipBody(ReadBuffer& in, size_t rows) override;
  void SaveBody(GatherWriter& out) const override { out.Reference(values_.data(), values_.size()); }

 private:
  size_t width_;
  text::FixedType params_;
  ByteBuffer values_;
};

// Appends `bytes` bytes from `in` to `out`, growing `out` only as data arrives (so a corrupt
// row count cannot force a huge allocation before the data exists).
absl::Status ReadBulk(ReadBuffer& in, size_t bytes, ByteBuffer* out);

// Value text is in the shared library (text/value_text.h).
using text::AppendDecimal;
using text::AppendFloat;
using text::AppendWideInteger;

}  // namespace chgate::clickhouse
