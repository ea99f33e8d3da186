#include "server/ingest/value.h"

namespace chgate::ingest {

const char* ValueKindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kUnset:
      return "unset";
    case ValueKind::kNull:
      return "null";
    case ValueKind::kBool:
      return "bool";
    case ValueKind::kInt64:
      return "int64";
    case ValueKind::kUInt64:
      return "uint64";
    case ValueKind::kDouble:
      return "double";
    case ValueKind::kString:
      return "string";
    case ValueKind::kBytes:
      return "bytes";
    case ValueKind::kTimestamp:
      return "timestamp";
    case ValueKind::kArray:
      return "array";
    case ValueKind::kTuple:
      return "tuple";
    case ValueKind::kMap:
      return "map";
  }
  return "unknown";
}

namespace {

// Scalar cells: every accessor but the kind's own is never called (conversion checks the kind).
template <ValueKind kKind>
const ValueRef::Ops kScalarOps = {
    .kind = [](const void*) { return kKind; },
    .bool_value = [](const void*) { return false; },
    .int64_value = [](const void*) { return int64_t{0}; },
    .uint64_value = [](const void*) { return uint64_t{0}; },
    .double_value = [](const void*) { return 0.0; },
    .bytes_value = [](const void* impl) { return *static_cast<const std::string_view*>(impl); },
    .timestamp_value = [](const void*) { return Timestamp{}; },
    .size = [](const void*) { return size_t{0}; },
    .element = [](const void*, size_t) { return NullValue(); },
    .map_key = [](const void*, size_t) { return NullValue(); },
    .map_value = [](const void*, size_t) { return NullValue(); },
};

const std::string_view kNoText;

}  // namespace

ValueRef TextValue(const std::string_view* text) {
  return ValueRef(text, &kScalarOps<ValueKind::kString>);
}

ValueRef NullValue() { return ValueRef(&kNoText, &kScalarOps<ValueKind::kNull>); }

}  // namespace chgate::ingest
