// The caller's values as ingest sees them: a type-erased, non-owning view (ValueRef) of one cell,
// and RowSource, rows of such cells. The service implements both over its request messages
// without copying; tests implement them over plain structs. Conversion (convert.h) reads them to
// fill typed ClickHouse columns. Views are valid as long as the data they point into.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace chgate::ingest {

enum class ValueKind : uint8_t {
  kUnset,  // no value given
  kNull,
  kBool,
  kInt64,
  kUInt64,
  kDouble,
  kString,  // text (UTF-8 expected, not checked)
  kBytes,   // arbitrary bytes
  kTimestamp,
  kArray,
  kTuple,
  kMap,
};

const char* ValueKindName(ValueKind kind);

struct Timestamp {
  int64_t seconds = 0;  // since the Unix epoch, UTC
  int32_t nanos = 0;    // [0, 1e9)
};

class ValueRef {
 public:
  // One function table per implementation; `impl` is whatever it points into.
  struct Ops {
    ValueKind (*kind)(const void* impl);
    bool (*bool_value)(const void* impl);
    int64_t (*int64_value)(const void* impl);
    uint64_t (*uint64_value)(const void* impl);
    double (*double_value)(const void* impl);
    std::string_view (*bytes_value)(const void* impl);  // kString and kBytes
    Timestamp (*timestamp_value)(const void* impl);
    size_t (*size)(const void* impl);  // elements of kArray/kTuple, entries of kMap
    ValueRef (*element)(const void* impl, size_t i);
    ValueRef (*map_key)(const void* impl, size_t i);
    ValueRef (*map_value)(const void* impl, size_t i);
  };

  ValueRef(const void* impl, const Ops* ops) : impl_(impl), ops_(ops) {}

  ValueKind kind() const { return ops_->kind(impl_); }
  bool bool_value() const { return ops_->bool_value(impl_); }
  int64_t int64_value() const { return ops_->int64_value(impl_); }
  uint64_t uint64_value() const { return ops_->uint64_value(impl_); }
  double double_value() const { return ops_->double_value(impl_); }
  std::string_view bytes_value() const { return ops_->bytes_value(impl_); }
  Timestamp timestamp_value() const { return ops_->timestamp_value(impl_); }
  size_t size() const { return ops_->size(impl_); }
  ValueRef element(size_t i) const { return ops_->element(impl_, i); }
  ValueRef map_key(size_t i) const { return ops_->map_key(impl_, i); }
  ValueRef map_value(size_t i) const { return ops_->map_value(impl_, i); }

 private:
  const void* impl_;
  const Ops* ops_;
};

// A text cell (kString) over `*text`, and a NULL cell: for callers that hold ClickHouse text
// rather than typed values (Block columns of Variant, Dynamic and JSON).
ValueRef TextValue(const std::string_view* text);
ValueRef NullValue();

// Rows of values; row r has value_count(r) cells (conversion checks it equals the column count).
class RowSource {
 public:
  virtual ~RowSource() = default;
  virtual size_t row_count() const = 0;
  virtual size_t value_count(size_t row) const = 0;
  virtual ValueRef value(size_t row, size_t column) const = 0;
};

}  // namespace chgate::ingest
