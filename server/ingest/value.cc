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

}  // namespace chgate::ingest
