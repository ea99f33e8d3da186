// Test doubles for server/ingest/value.h: TestValue, a plain recursive value that hands out
// ValueRefs, small builders for it, and TestRows, a RowSource over rows of TestValues.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/ingest/value.h"

namespace chgate::ingest::testing {

struct TestValue {
  ValueKind kind = ValueKind::kUnset;
  bool b = false;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  std::string s;  // kString, kBytes
  Timestamp ts;
  // kArray and kTuple: the elements; kMap: key, value, key, value, ...
  std::vector<TestValue> elements;

  ValueRef ref() const;
};

inline const TestValue& AsTestValue(const void* impl) {
  return *static_cast<const TestValue*>(impl);
}

inline const ValueRef::Ops kTestValueOps = {
    .kind = [](const void* p) { return AsTestValue(p).kind; },
    .bool_value = [](const void* p) { return AsTestValue(p).b; },
    .int64_value = [](const void* p) { return AsTestValue(p).i; },
    .uint64_value = [](const void* p) { return AsTestValue(p).u; },
    .double_value = [](const void* p) { return AsTestValue(p).d; },
    .bytes_value = [](const void* p) { return std::string_view(AsTestValue(p).s); },
    .timestamp_value = [](const void* p) { return AsTestValue(p).ts; },
    .size =
        [](const void* p) {
          const TestValue& v = AsTestValue(p);
          return v.kind == ValueKind::kMap ? v.elements.size() / 2 : v.elements.size();
        },
    .element = [](const void* p, size_t i) { return AsTestValue(p).elements[i].ref(); },
    .map_key = [](const void* p, size_t i) { return AsTestValue(p).elements[2 * i].ref(); },
    .map_value = [](const void* p, size_t i) { return AsTestValue(p).elements[2 * i + 1].ref(); },
};

inline ValueRef TestValue::ref() const { return ValueRef(this, &kTestValueOps); }

inline TestValue Unset() { return {}; }
inline TestValue Null() { return {.kind = ValueKind::kNull}; }
inline TestValue Bool(bool v) { return {.kind = ValueKind::kBool, .b = v}; }
inline TestValue Int(int64_t v) { return {.kind = ValueKind::kInt64, .i = v}; }
inline TestValue UInt(uint64_t v) { return {.kind = ValueKind::kUInt64, .u = v}; }
inline TestValue Double(double v) { return {.kind = ValueKind::kDouble, .d = v}; }
inline TestValue Str(std::string v) { return {.kind = ValueKind::kString, .s = std::move(v)}; }
inline TestValue Bytes(std::string v) { return {.kind = ValueKind::kBytes, .s = std::move(v)}; }
inline TestValue Ts(int64_t seconds, int32_t nanos = 0) {
  return {.kind = ValueKind::kTimestamp, .ts = {seconds, nanos}};
}
inline TestValue Array(std::vector<TestValue> elements) {
  return {.kind = ValueKind::kArray, .elements = std::move(elements)};
}
inline TestValue Tuple(std::vector<TestValue> elements) {
  return {.kind = ValueKind::kTuple, .elements = std::move(elements)};
}
inline TestValue Map(std::initializer_list<std::pair<TestValue, TestValue>> entries) {
  TestValue v{.kind = ValueKind::kMap};
  for (const auto& [key, value] : entries) {
    v.elements.push_back(key);
    v.elements.push_back(value);
  }
  return v;
}

class TestRows : public RowSource {
 public:
  TestRows() = default;
  explicit TestRows(std::vector<std::vector<TestValue>> rows) : rows_(std::move(rows)) {}

  void Add(std::vector<TestValue> row) { rows_.push_back(std::move(row)); }
  std::vector<TestValue>& row(size_t r) { return rows_[r]; }

  size_t row_count() const override { return rows_.size(); }
  size_t value_count(size_t row) const override { return rows_[row].size(); }
  ValueRef value(size_t row, size_t column) const override { return rows_[row][column].ref(); }

 private:
  std::vector<std::vector<TestValue>> rows_;
};

}  // namespace chgate::ingest::testing
