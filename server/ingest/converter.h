// The converter (convert.h's internals): appends one value to a planned column (convert_plan.h).
// The per-value appends live in convert.cc, the messages of a rejection in convert_errors.cc.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/ingest/convert_plan.h"
#include "server/ingest/value.h"

namespace chgate::ingest::convert_internal {

// Append returns false on a rejected value and records why in failure(); nothing is allocated on
// success.
class Converter {
 public:
  Converter(const Node* nodes, const ConvertOptions& options) : nodes_(nodes), options_(options) {}

  bool Append(const Node& node, ValueRef value);

  // Why the last Append failed, and where inside the column ("[2].b").
  const std::string& reason() const { return reason_; }
  const std::string& path() const { return path_; }

  // The InvalidValue status for the last failed Append.
  absl::Status Error(std::optional<uint64_t> row, std::string_view column, std::string_view type,
                     std::string_view path_prefix) const;

 private:
  bool Fail(ValueRef value, std::string reason) {
    value_.emplace(value);
    reason_ = std::move(reason);
    return false;
  }
  bool Unaccepted(const Node& node, ValueRef value);
  bool OutOfRange(const Node& node, ValueRef value);
  void PrependPath(std::string_view segment) { path_.insert(0, segment.data(), segment.size()); }

  bool AppendNull(const Node& node, ValueRef value);
  bool AppendInteger(const Node& node, ValueRef value);
  bool AppendFloat(const Node& node, ValueRef value);
  bool AppendBool(const Node& node, ValueRef value);
  bool AppendFixedString(const Node& node, ValueRef value);
  bool AppendDate(const Node& node, ValueRef value);
  bool AppendDateTime(const Node& node, ValueRef value);
  bool AppendDateTime64(const Node& node, ValueRef value);
  bool AppendTime(const Node& node, ValueRef value);
  bool AppendDecimal(const Node& node, ValueRef value);
  bool AppendUuid(const Node& node, ValueRef value);
  bool AppendIpv4(const Node& node, ValueRef value);
  bool AppendIpv6(const Node& node, ValueRef value);
  bool AppendEnum(const Node& node, ValueRef value);
  bool AppendArray(const Node& node, ValueRef value);
  bool AppendMap(const Node& node, ValueRef value);
  bool AppendTuple(const Node& node, ValueRef value);
  bool AppendLowCardinality(const Node& node, ValueRef value);
  bool AppendVariant(const Node& node, ValueRef value);
  bool AppendDynamic(const Node& node, ValueRef value);
  bool AppendJson(const Node& node, ValueRef value);

  const Node* nodes_;
  const ConvertOptions& options_;
  // The failure: the rejected (innermost) value, why, and where inside the column.
  std::optional<ValueRef> value_;
  std::string reason_;
  std::string path_;
};

inline clickhouse::ColumnFixed& Fixed(const Node& node) {
  return *static_cast<clickhouse::ColumnFixed*>(node.column);
}

inline bool IsText(ValueKind kind) {
  return kind == ValueKind::kString || kind == ValueKind::kBytes;
}

inline bool ValidTimestamp(const Timestamp& ts) { return ts.nanos >= 0 && ts.nanos < 1000000000; }

inline constexpr char kBadNanos[] = "timestamp nanos outside [0, 999999999]";

}  // namespace chgate::ingest::convert_internal
