// The messages of a rejected value (the error path of convert.cc): what the type takes, its
// range, and the value as the caller gave it.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/ingest/converter.h"
#include "server/ingest/value_error.h"
#include "text/value_parse.h"
#include "text/value_text.h"

namespace chgate::ingest::convert_internal {
namespace {

using text::U256;

constexpr size_t kRenderLimit = 1024;

void RenderValue(ValueRef value, bool nested, std::string* out) {
  if (out->size() > kRenderLimit) return;
  switch (value.kind()) {
    case ValueKind::kUnset:
    case ValueKind::kNull:
      if (nested) out->append(ValueKindName(value.kind()));
      return;
    case ValueKind::kBool:
      out->append(value.bool_value() ? "true" : "false");
      return;
    case ValueKind::kInt64:
      absl::StrAppend(out, value.int64_value());
      return;
    case ValueKind::kUInt64:
      absl::StrAppend(out, value.uint64_value());
      return;
    case ValueKind::kDouble: {
      char buf[64];
      out->append(text::ShortestText(value.double_value(), buf));
      return;
    }
    case ValueKind::kString:
    case ValueKind::kBytes: {
      std::string_view s = value.bytes_value();
      if (s.size() > kRenderLimit) s = s.substr(0, kRenderLimit);
      if (nested) out->push_back('"');
      out->append(s);
      if (nested) out->push_back('"');
      return;
    }
    case ValueKind::kTimestamp: {
      const Timestamp ts = value.timestamp_value();
      out->append(absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ",
                                   absl::FromUnixSeconds(ts.seconds) + absl::Nanoseconds(ts.nanos),
                                   absl::UTCTimeZone()));
      return;
    }
    case ValueKind::kArray:
    case ValueKind::kTuple: {
      const bool array = value.kind() == ValueKind::kArray;
      out->push_back(array ? '[' : '(');
      for (size_t i = 0, n = value.size(); i < n; ++i) {
        if (i != 0) out->append(", ");
        if (out->size() > kRenderLimit) return;
        RenderValue(value.element(i), true, out);
      }
      out->push_back(array ? ']' : ')');
      return;
    }
    case ValueKind::kMap:
      out->push_back('{');
      for (size_t i = 0, n = value.size(); i < n; ++i) {
        if (i != 0) out->append(", ");
        if (out->size() > kRenderLimit) return;
        RenderValue(value.map_key(i), true, out);
        out->append(": ");
        RenderValue(value.map_value(i), true, out);
      }
      out->push_back('}');
      return;
  }
}

// What a column of `node`'s op takes, for the error of a value it does not; null for the ops
// whose error names more (Tuple) or is their child's (Nullable, LowCardinality).
const char* Accepts(const Node& node) {
  switch (node.op) {
    case Op::kInt:
    case Op::kUInt:
      return "int64, uint64 or decimal integer text";
    case Op::kFloat32:
    case Op::kFloat64:
    case Op::kBFloat16:
      return "double, int64, uint64 or numeric text";
    case Op::kTime:
      return node.scale == 0 ? "seconds as int64/uint64, or '[-]hh:mm:ss' text"
                             : "ticks as int64/uint64, or '[-]hh:mm:ss[.fff]' text";
    case Op::kBool:
      return "bool, int64/uint64 0 or 1, or text true/false";
    case Op::kString:
      return "string or bytes";
    case Op::kFixedString:
      return "string or bytes of at most its length";
    case Op::kDate:
    case Op::kDate32:
      return "timestamp, days since 1970-01-01 as int64/uint64, or 'YYYY-MM-DD' text";
    case Op::kDateTime:
      return "timestamp, Unix seconds as int64/uint64, or RFC 3339 or 'YYYY-MM-DD hh:mm:ss' text";
    case Op::kDateTime64:
      return "timestamp, ticks as int64, or RFC 3339 or 'YYYY-MM-DD hh:mm:ss[.fff]' text";
    case Op::kDecimal:
      return "decimal text, int64, uint64 or double";
    case Op::kUuid:
      return "UUID text or 16 bytes";
    case Op::kIpv4:
      return "'a.b.c.d' text, int64/uint64 or 4 bytes";
    case Op::kIpv6:
      return "IPv6 or IPv4 text, or 16 bytes";
    case Op::kEnum:
      return "an element name as string or an element value as int64";
    case Op::kNothing:
      return "only null";
    case Op::kArray:
      return "an array";
    case Op::kMap:
      return "a map";
    case Op::kTuple:
    case Op::kNullable:
    case Op::kLowCardinality:
      return nullptr;
    case Op::kVariant:
      return "null or a value one of its types takes";
    case Op::kDynamic:
      return "null, bool, int64, uint64, double, string, bytes, timestamp, or arrays, tuples "
             "and maps of them";
    case Op::kJson:
      return "a JSON object as string";
    case Op::kAggregateState:
      return "one state's bytes, as a query of the same type returns them";
  }
  return nullptr;
}

}  // namespace

bool Converter::Unaccepted(const Node& node, ValueRef value) {
  if (node.op == Op::kNullable || node.op == Op::kLowCardinality) {
    return Unaccepted(nodes_[node.first_child], value);
  }
  if (node.op == Op::kTuple) {
    return Fail(value, absl::StrCat(node.column->type_name(), " takes a tuple of ",
                                    node.child_count, " elements"));
  }
  return Fail(value, absl::StrCat(node.column->type_name(), " takes ", Accepts(node)));
}

bool Converter::OutOfRange(const Node& node, ValueRef value) {
  std::string range;
  switch (node.op) {
    case Op::kInt:
    case Op::kUInt:
      if (node.width <= 8) {
        range = node.op == Op::kInt ? absl::StrCat("[", node.min, ", ", node.max, "]")
                                    : absl::StrCat("[0, ", node.umax, "]");
      } else {
        const bool is_signed = node.op == Op::kInt;
        const U256 min = text::Negated(node.max_negative);
        range = "[";
        if (is_signed) {
          text::AppendWideInteger(reinterpret_cast<const char*>(min.w), node.width, true, &range);
        } else {
          range.push_back('0');
        }
        range.append(", ");
        text::AppendWideInteger(reinterpret_cast<const char*>(node.max_positive.w), node.width,
                                is_signed, &range);
        range.push_back(']');
      }
      break;
    case Op::kFloat32:
    case Op::kBFloat16:
      range = "(finite values beyond +-3.4028235e38)";
      break;
    case Op::kTime:
      range = "[-999:59:59, 999:59:59]";
      break;
    case Op::kDate:
      range = "[1970-01-01, 2149-06-06]";
      break;
    case Op::kDate32:
      range = "[1900-01-01, 2299-12-31]";
      break;
    case Op::kDateTime:
      range = "[1970-01-01 00:00:00, 2106-02-07 06:28:15] UTC (Unix seconds [0, 4294967295])";
      break;
    case Op::kDateTime64:
      range = "[1900-01-01 00:00:00, 2299-12-31 23:59:59] UTC";
      break;
    case Op::kDecimal:
      range = absl::StrCat("(at most ", node.precision - node.scale, " digits before the point)");
      break;
    case Op::kIpv4:
      range = "[0, 4294967295]";
      break;
    default:
      break;
  }
  return Fail(value, absl::StrCat("out of range for ", node.column->type_name(), " ", range));
}

absl::Status Converter::Error(std::optional<uint64_t> row, std::string_view column,
                              std::string_view type, std::string_view path_prefix) const {
  ValueError error;
  error.row = row;
  error.column = std::string(column);
  error.type = std::string(type);
  error.path = absl::StrCat(absl::string_view(path_prefix.data(), path_prefix.size()), path_);
  if (value_.has_value()) {
    error.kind = ValueKindName(value_->kind());
    RenderValue(*value_, false, &error.value);
  }
  return InvalidValue(error, reason_);
}

}  // namespace chgate::ingest::convert_internal
