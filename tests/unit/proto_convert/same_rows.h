// The check that rows read in place (proto_convert::WireRows) are what protobuf's parse gives,
// for the unit tests and the insert_request fuzz target. Reads the parsed messages directly (not
// through ProtoRows), so the fuzz target needs only the decoder and the messages.
#pragma once

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "chgate/v1/chgate.pb.h"
#include "server/ingest/value.h"

namespace chgate::proto_convert::testing {

inline ingest::ValueKind ParsedKind(const v1::Value& v) {
  using ingest::ValueKind;
  switch (v.kind_case()) {
    case v1::Value::kNullValue:
      return ValueKind::kNull;
    case v1::Value::kBoolValue:
      return ValueKind::kBool;
    case v1::Value::kInt64Value:
      return ValueKind::kInt64;
    case v1::Value::kUint64Value:
      return ValueKind::kUInt64;
    case v1::Value::kDoubleValue:
      return ValueKind::kDouble;
    case v1::Value::kStringValue:
      return ValueKind::kString;
    case v1::Value::kBytesValue:
      return ValueKind::kBytes;
    case v1::Value::kTimestampValue:
      return ValueKind::kTimestamp;
    case v1::Value::kArrayValue:
      return ValueKind::kArray;
    case v1::Value::kTupleValue:
      return ValueKind::kTuple;
    case v1::Value::kMapValue:
      return ValueKind::kMap;
    case v1::Value::KIND_NOT_SET:
      break;
  }
  return ValueKind::kUnset;
}

// "" when `a` reads as `b` (kind, scalar bit for bit, text, children), else where and how they
// differ.
inline std::string ValueDifference(ingest::ValueRef a, const v1::Value& b, const std::string& at) {
  using ingest::ValueKind;
  if (a.kind() != ParsedKind(b)) {
    return absl::StrCat(at, ": kind ", static_cast<int>(a.kind()), " vs ",
                        static_cast<int>(ParsedKind(b)));
  }
  const auto same = [&](bool equal, const char* what) {
    return equal ? std::string() : absl::StrCat(at, ": ", what);
  };
  switch (a.kind()) {
    case ValueKind::kUnset:
    case ValueKind::kNull:
      return "";
    case ValueKind::kBool:
      return same(a.bool_value() == b.bool_value(), "bool");
    case ValueKind::kInt64:
      return same(a.int64_value() == b.int64_value(), "int64");
    case ValueKind::kUInt64:
      return same(a.uint64_value() == b.uint64_value(), "uint64");
    case ValueKind::kDouble: {
      const double x = a.double_value(), y = b.double_value();
      return same(std::memcmp(&x, &y, sizeof(double)) == 0, "double");
    }
    case ValueKind::kString:
      return same(a.bytes_value() == b.string_value(), "string");
    case ValueKind::kBytes:
      return same(a.bytes_value() == b.bytes_value(), "bytes");
    case ValueKind::kTimestamp:
      return same(a.timestamp_value().seconds == b.timestamp_value().seconds() &&
                      a.timestamp_value().nanos == b.timestamp_value().nanos(),
                  "timestamp");
    case ValueKind::kMap: {
      const auto& entries = b.map_value().entries();
      if (a.size() != static_cast<size_t>(entries.size())) return at + ": map size";
      for (int i = 0; i < entries.size(); ++i) {
        const auto k = static_cast<size_t>(i);
        std::string d =
            ValueDifference(a.map_key(k), entries[i].key(), absl::StrCat(at, ".key[", i, "]"));
        if (d.empty()) {
          d = ValueDifference(a.map_value(k), entries[i].value(),
                              absl::StrCat(at, ".value[", i, "]"));
        }
        if (!d.empty()) return d;
      }
      return "";
    }
    case ValueKind::kArray:
    case ValueKind::kTuple:
      break;
  }
  const v1::ValueList& list = a.kind() == ValueKind::kArray ? b.array_value() : b.tuple_value();
  if (a.size() != static_cast<size_t>(list.values_size())) return at + ": list size";
  for (int i = 0; i < list.values_size(); ++i) {
    std::string d = ValueDifference(a.element(static_cast<size_t>(i)), list.values(i),
                                    absl::StrCat(at, "[", i, "]"));
    if (!d.empty()) return d;
  }
  return "";
}

// "" when `fields` and `rows` (DecodeRowsRequest's output) equal `parsed` (protobuf's parse of
// the same bytes).
inline std::string RequestDifference(const v1::InsertRequest& fields, const ingest::RowSource& rows,
                                     const v1::InsertRequest& parsed) {
  if (fields.table() != parsed.table()) return "table";
  if (fields.columns_size() != parsed.columns_size()) return "column count";
  for (int i = 0; i < fields.columns_size(); ++i) {
    if (fields.columns(i) != parsed.columns(i)) return absl::StrCat("column ", i);
  }
  if (fields.sequence() != parsed.sequence()) return "sequence";
  if (fields.idempotency_key() != parsed.idempotency_key()) return "idempotency_key";
  if (fields.ack_mode() != parsed.ack_mode()) return "ack_mode";
  if (fields.data_case() != parsed.data_case()) return "data case";
  const auto& expected = parsed.rows().rows();
  if (rows.row_count() != static_cast<size_t>(expected.size())) {
    return absl::StrCat("rows ", rows.row_count(), " vs ", expected.size());
  }
  for (int r = 0; r < expected.size(); ++r) {
    const auto row = static_cast<size_t>(r);
    if (rows.value_count(row) != static_cast<size_t>(expected[r].values_size())) {
      return absl::StrCat("row ", r, " values ", rows.value_count(row), " vs ",
                          expected[r].values_size());
    }
    for (int c = 0; c < expected[r].values_size(); ++c) {
      std::string d = ValueDifference(rows.value(row, static_cast<size_t>(c)),
                                      expected[r].values(c), absl::StrCat("row ", r, " value ", c));
      if (!d.empty()) return d;
    }
  }
  return "";
}

}  // namespace chgate::proto_convert::testing
