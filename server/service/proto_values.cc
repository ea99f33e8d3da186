#include "server/service/proto_values.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/low_cardinality.h"
#include "server/clickhouse/columns/nullable.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/columns/tuple.h"
#include "server/ingest/convert.h"
#include "server/ingest/value_error.h"
#include "server/service/query_block.h"
#include "text/status_macros.h"
#include "text/type_facts.h"
#include "text/value_parse.h"
#include "text/value_text.h"

namespace chgate::service {

// ---------------------------------------------------------------------------------------------
// Row path: ValueRef over chgate.v1.Value
// ---------------------------------------------------------------------------------------------

namespace {

const v1::Value& AsValue(const void* impl) { return *static_cast<const v1::Value*>(impl); }

ingest::ValueKind ProtoKind(const void* impl) {
  switch (AsValue(impl).kind_case()) {
    case v1::Value::kNullValue:
      return ingest::ValueKind::kNull;
    case v1::Value::kBoolValue:
      return ingest::ValueKind::kBool;
    case v1::Value::kInt64Value:
      return ingest::ValueKind::kInt64;
    case v1::Value::kUint64Value:
      return ingest::ValueKind::kUInt64;
    case v1::Value::kDoubleValue:
      return ingest::ValueKind::kDouble;
    case v1::Value::kStringValue:
      return ingest::ValueKind::kString;
    case v1::Value::kBytesValue:
      return ingest::ValueKind::kBytes;
    case v1::Value::kTimestampValue:
      return ingest::ValueKind::kTimestamp;
    case v1::Value::kArrayValue:
      return ingest::ValueKind::kArray;
    case v1::Value::kTupleValue:
      return ingest::ValueKind::kTuple;
    case v1::Value::kMapValue:
      return ingest::ValueKind::kMap;
    case v1::Value::KIND_NOT_SET:
      break;
  }
  return ingest::ValueKind::kUnset;
}

const v1::ValueList& AsList(const v1::Value& v) {
  return v.kind_case() == v1::Value::kTupleValue ? v.tuple_value() : v.array_value();
}

}  // namespace

const ingest::ValueRef::Ops kProtoValueOps = {
    .kind = &ProtoKind,
    .bool_value = [](const void* p) { return AsValue(p).bool_value(); },
    .int64_value = [](const void* p) { return static_cast<int64_t>(AsValue(p).int64_value()); },
    .uint64_value = [](const void* p) { return static_cast<uint64_t>(AsValue(p).uint64_value()); },
    .double_value = [](const void* p) { return AsValue(p).double_value(); },
    .bytes_value =
        [](const void* p) {
          const v1::Value& v = AsValue(p);
          const std::string& s =
              v.kind_case() == v1::Value::kBytesValue ? v.bytes_value() : v.string_value();
          return std::string_view(s);
        },
    .timestamp_value =
        [](const void* p) {
          const google::protobuf::Timestamp& ts = AsValue(p).timestamp_value();
          return ingest::Timestamp{.seconds = ts.seconds(), .nanos = ts.nanos()};
        },
    .size =
        [](const void* p) {
          const v1::Value& v = AsValue(p);
          if (v.kind_case() == v1::Value::kMapValue) {
            return static_cast<size_t>(v.map_value().entries_size());
          }
          return static_cast<size_t>(AsList(v).values_size());
        },
    .element = [](const void* p,
                  size_t i) { return ProtoValue(AsList(AsValue(p)).values(static_cast<int>(i))); },
    .map_key =
        [](const void* p, size_t i) {
          return ProtoValue(AsValue(p).map_value().entries(static_cast<int>(i)).key());
        },
    .map_value =
        [](const void* p, size_t i) {
          return ProtoValue(AsValue(p).map_value().entries(static_cast<int>(i)).value());
        },
};

// ---------------------------------------------------------------------------------------------
// Columnar path: chgate.v1.Column -> clickhouse::Column
// ---------------------------------------------------------------------------------------------

namespace {

static_assert(std::endian::native == std::endian::little,
              "the columnar path copies little-endian wire values as host integers");

using Offsets = google::protobuf::RepeatedField<uint64_t>;

// The top-level column a conversion works on, for error messages.
struct Scope {
  std::string column;
  std::string type;
};

// Abseil 20220623 keeps its own string_view type.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// How a node's rows relate to its parent's (to report the top-level row and the nested path).
enum class Link { kRoot, kSame, kArrayElement, kMapKey, kMapValue, kTupleElement };

// One level of the conversion of a proto column into a typed column, resolved and validated once
// (layout and sizes); Append then copies row ranges.
class Node {
 public:
  virtual ~Node() = default;
  // Appends source rows [begin, end) to the destination column.
  [[nodiscard]] virtual absl::Status Append(uint64_t begin, uint64_t end) = 0;

  const Scope* scope = nullptr;
  const Node* parent = nullptr;
  Link link = Link::kRoot;
  const Offsets* parent_offsets = nullptr;  // kArrayElement, kMapKey, kMapValue
  std::string label;                        // kTupleElement: ".name" or ".1"

  // An InvalidArgument naming the top-level row, the nested position and the value.
  absl::Status BadValue(uint64_t index, std::string value, std::string_view kind,
                        std::string_view what) const {
    std::vector<std::string> segments;
    uint64_t i = index;
    for (const Node* n = this; n->parent != nullptr; n = n->parent) {
      switch (n->link) {
        case Link::kArrayElement:
        case Link::kMapKey:
        case Link::kMapValue: {
          const Offsets& offsets = *n->parent_offsets;
          const uint64_t row = static_cast<uint64_t>(
              std::upper_bound(offsets.begin(), offsets.end(), i) - offsets.begin());
          const uint64_t start = row == 0 ? 0 : offsets.Get(static_cast<int>(row - 1));
          std::string segment = absl::StrCat("[", i - start, "]");
          if (n->link == Link::kMapKey) segment += ".key";
          if (n->link == Link::kMapValue) segment += ".value";
          segments.push_back(std::move(segment));
          i = row;
          break;
        }
        case Link::kTupleElement:
          segments.push_back(n->label);
          break;
        case Link::kRoot:
        case Link::kSame:
          break;
      }
    }
    std::string path;
    for (auto it = segments.rbegin(); it != segments.rend(); ++it) path += *it;
    return ingest::InvalidValue({.row = i,
                                 .column = scope->column,
                                 .type = scope->type,
                                 .value = std::move(value),
                                 .path = std::move(path),
                                 .kind = std::string(kind)},
                                what);
  }
};

// Where a node is being built, for layout errors ("children[0]" of the column ...).
struct Position {
  const Scope* scope;
  const Node* parent = nullptr;
  Link link = Link::kRoot;
  const Offsets* parent_offsets = nullptr;
  std::string label;
  std::string where;  // proto path inside the top-level column, e.g. "children[1]"
  // The source Column also holds an enclosing Nullable's `nulls` (so they are not unexpected).
  bool shares_nulls = false;
};

// The position of a node that reads the same source rows as `parent` (at `pos`) into another
// column: a Nullable's values, a LowCardinality's or a text-carried type's scratch column.
Position SameRows(const Position& pos, const Node* parent) {
  Position same = pos;
  same.parent = parent;
  same.link = Link::kSame;
  same.parent_offsets = nullptr;
  same.label.clear();
  return same;
}

absl::Status LayoutError(const Position& pos, std::string_view what) {
  std::string message = absl::StrCat("block column '", ingest::PrintableName(pos.scope->column),
                                     "' (", ingest::PrintableName(pos.scope->type), ")");
  if (!pos.where.empty()) absl::StrAppend(&message, " ", pos.where);
  absl::StrAppend(&message, ": ", Sv(what));
  return ingest::WithValueError(absl::InvalidArgumentError(message),
                                {.column = pos.scope->column, .type = pos.scope->type});
}

std::string ChildWhere(const Position& pos, int index) {
  return pos.where.empty() ? absl::StrCat("children[", index, "]")
                           : absl::StrCat(pos.where, ".children[", index, "]");
}

void Place(const Position& pos, Node* node) {
  node->scope = pos.scope;
  node->parent = pos.parent;
  node->link = pos.link;
  node->parent_offsets = pos.parent_offsets;
  node->label = pos.label;
}

// The value fields a Column sets.
enum Field : unsigned {
  kNulls = 1 << 0,
  kOffsets = 1 << 1,
  kData = 1 << 2,
  kChildren = 1 << 3,
  kInt64s = 1 << 4,
  kUInt64s = 1 << 5,
  kFloat64s = 1 << 6,
  kStrings = 1 << 7,
};

unsigned PresentFields(const v1::Column& c) {
  unsigned f = 0;
  if (!c.nulls().empty()) f |= kNulls;
  if (c.offsets_size() > 0) f |= kOffsets;
  if (!c.data().empty()) f |= kData;
  if (c.children_size() > 0) f |= kChildren;
  if (c.int64s_size() > 0) f |= kInt64s;
  if (c.uint64s_size() > 0) f |= kUInt64s;
  if (c.float64s_size() > 0) f |= kFloat64s;
  if (c.strings_size() > 0) f |= kStrings;
  return f;
}

const char* FieldName(unsigned field) {
  switch (field) {
    case kNulls:
      return "nulls";
    case kOffsets:
      return "offsets";
    case kData:
      return "data";
    case kChildren:
      return "children";
    case kInt64s:
      return "int64s";
    case kUInt64s:
      return "uint64s";
    case kFloat64s:
      return "float64s";
    case kStrings:
      return "strings";
  }
  return "?";
}

// Rejects fields of `src` outside `allowed` (an enclosing Nullable's `nulls` are always allowed).
absl::Status CheckFields(const v1::Column& src, const Position& pos, unsigned allowed) {
  if (pos.shares_nulls) allowed |= kNulls;
  const unsigned extra = PresentFields(src) & ~allowed;
  if (extra == 0) return absl::OkStatus();
  const unsigned first = extra & (~extra + 1);
  if (first == kNulls) return LayoutError(pos, "`nulls` is only for Nullable types");
  return LayoutError(pos, absl::StrCat("unexpected field `", FieldName(first), "` for this type"));
}

// Checks that `offsets` has one non-decreasing entry per row; returns the last one.
absl::StatusOr<uint64_t> CheckOffsets(const Offsets& offsets, uint64_t rows, const Position& pos,
                                      std::string_view unit) {
  if (static_cast<uint64_t>(offsets.size()) != rows) {
    return LayoutError(pos, absl::StrCat("`offsets` has ", offsets.size(), " entries, expected ",
                                         rows, " (one per row)"));
  }
  uint64_t previous = 0;
  for (int i = 0; i < offsets.size(); ++i) {
    if (offsets.Get(i) < previous) {
      return LayoutError(pos, absl::StrCat("`offsets` decreases at row ", i, " (", offsets.Get(i),
                                           " after ", previous, " ", Sv(unit), ")"));
    }
    previous = offsets.Get(i);
  }
  return previous;
}

uint64_t RowStart(const Offsets& offsets, uint64_t row) {
  return row == 0 ? 0 : offsets.Get(static_cast<int>(row - 1));
}

absl::StatusOr<std::unique_ptr<Node>> Build(const v1::Column& src, uint64_t rows,
                                            clickhouse::Column* dst, Position pos);

// ---- fixed-width types ----

enum class FixedForm { kNone, kData, kInt64s, kUInt64s, kFloat64s, kStrings };

const char* FixedFormName(FixedForm form) {
  switch (form) {
    case FixedForm::kNone:
      return "no values";
    case FixedForm::kData:
      return "data";
    case FixedForm::kInt64s:
      return "int64s";
    case FixedForm::kUInt64s:
      return "uint64s";
    case FixedForm::kFloat64s:
      return "float64s";
    case FixedForm::kStrings:
      return "strings";
  }
  return "?";
}

// Which convenience form a fixed-width kind accepts (kNone: only `data`): the type facts say.
FixedForm ConvenienceForm(clickhouse::FixedKind kind) {
  switch (text::ConvenienceFieldOf(kind)) {
    case text::ConvenienceField::kNone:
      return FixedForm::kNone;
    case text::ConvenienceField::kInt64s:
      return FixedForm::kInt64s;
    case text::ConvenienceField::kUInt64s:
      return FixedForm::kUInt64s;
    case text::ConvenienceField::kFloat64s:
      return FixedForm::kFloat64s;
    case text::ConvenienceField::kStrings:
      return FixedForm::kStrings;
  }
  return FixedForm::kNone;
}

class FixedNode final : public Node {
 public:
  FixedNode(const v1::Column& src, clickhouse::ColumnFixed* dst, FixedForm form)
      : src_(src), dst_(*dst), form_(form) {}

  absl::Status Append(uint64_t begin, uint64_t end) override {
    if (begin == end) return absl::OkStatus();
    switch (form_) {
      case FixedForm::kNone:
        for (uint64_t i = begin; i < end; ++i) dst_.AppendDefault();
        return absl::OkStatus();
      case FixedForm::kData:
        return AppendData(begin, end);
      case FixedForm::kInt64s:
        return AppendInt64s(begin, end);
      case FixedForm::kUInt64s:
        return AppendUInt64s(begin, end);
      case FixedForm::kFloat64s:
        return AppendFloat64s(begin, end);
      case FixedForm::kStrings:
        return AppendStrings(begin, end);
    }
    return absl::OkStatus();
  }

 private:
  using Kind = clickhouse::FixedKind;

  absl::Status AppendData(uint64_t begin, uint64_t end) {
    const size_t width = dst_.width();
    const char* p = src_.data().data() + begin * width;
    const size_t n = static_cast<size_t>(end - begin);
    switch (dst_.fixed_kind()) {
      case Kind::kUuid: {
        // RFC 4122 byte order -> two little-endian UInt64 halves (high half first).
        text::SwapUuidHalves(p, n, dst_.values().Prepare(n * 16));
        dst_.values().Commit(n * 16);
        return absl::OkStatus();
      }
      case Kind::kBool:
        for (size_t r = 0; r < n; ++r) {
          const auto v = static_cast<unsigned char>(p[r]);
          if (v > 1) return BadValue(begin + r, absl::StrCat(v), "data", "Bool must be 0 or 1");
        }
        break;
      case Kind::kEnum:
        for (size_t r = 0; r < n; ++r) {
          int64_t v;
          if (width == 1) {
            v = static_cast<int8_t>(p[r]);
          } else {
            int16_t v16;
            std::memcpy(&v16, p + r * 2, 2);
            v = v16;
          }
          if (dst_.EnumName(v) == nullptr) {
            return BadValue(begin + r, absl::StrCat(v), "data", "no such enum value");
          }
        }
        break;
      case Kind::kDate32:
      case Kind::kDateTime64:
      case Kind::kTime:
      case Kind::kTime64: {
        // Signed values with a calendar or clock range narrower than their width.
        const text::StoredRange range = text::StoredRangeOf(dst_.params());
        for (size_t r = 0; r < n; ++r) {
          const int64_t v = text::LoadSigned(p + r * width, width);
          if (v < range.min || v > static_cast<int64_t>(range.max)) {
            return BadValue(begin + r, absl::StrCat(v), "data", range.what);
          }
        }
        break;
      }
      default:
        break;
    }
    dst_.values().Append(p, n * width);
    return absl::OkStatus();
  }

  void AppendInteger(int64_t v) {
    const size_t width = dst_.width();
    char buf[32];
    std::memcpy(buf, &v, std::min<size_t>(width, 8));
    if (width > 8) std::memset(buf + 8, v < 0 ? 0xff : 0, width - 8);
    dst_.AppendRaw(buf);
  }

  void AppendUnsigned(uint64_t v) {
    const size_t width = dst_.width();
    char buf[32];
    std::memcpy(buf, &v, std::min<size_t>(width, 8));
    if (width > 8) std::memset(buf + 8, 0, width - 8);
    dst_.AppendRaw(buf);
  }

  absl::Status AppendInt64s(uint64_t begin, uint64_t end) {
    const size_t width = dst_.width();
    const int64_t* values = src_.int64s().data();
    // The stored range (the type facts); 128- and 256-bit values from int64 always fit.
    const text::StoredRange range = text::StoredRangeOf(dst_.params());
    const int64_t lo = range.min;
    const int64_t hi = static_cast<int64_t>(
        std::min<uint64_t>(range.max, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
    const std::string_view what = range.what;
    const bool is_enum = dst_.fixed_kind() == Kind::kEnum;
    for (uint64_t i = begin; i < end; ++i) {
      const int64_t v = values[i];
      if (v < lo || v > hi) return BadValue(i, absl::StrCat(v), "int64", what);
      if (is_enum && dst_.EnumName(v) == nullptr) {
        return BadValue(i, absl::StrCat(v), "int64", "no such enum value");
      }
    }
    if (width == 8) {
      dst_.values().Append(values + begin, static_cast<size_t>(end - begin) * 8);
    } else {
      for (uint64_t i = begin; i < end; ++i) AppendInteger(values[i]);
    }
    return absl::OkStatus();
  }

  absl::Status AppendUInt64s(uint64_t begin, uint64_t end) {
    const size_t width = dst_.width();
    const uint64_t* values = src_.uint64s().data();
    const text::StoredRange range = text::StoredRangeOf(dst_.params());
    const uint64_t hi = range.max;
    for (uint64_t i = begin; i < end; ++i) {
      if (values[i] > hi) {
        return BadValue(i, absl::StrCat(values[i]), "uint64", range.what);
      }
    }
    if (width == 8) {
      dst_.values().Append(values + begin, static_cast<size_t>(end - begin) * 8);
    } else {
      for (uint64_t i = begin; i < end; ++i) AppendUnsigned(values[i]);
    }
    return absl::OkStatus();
  }

  absl::Status AppendFloat64s(uint64_t begin, uint64_t end) {
    const double* values = src_.float64s().data();
    if (dst_.fixed_kind() == Kind::kFloat && dst_.width() == 8) {
      dst_.values().Append(values + begin, static_cast<size_t>(end - begin) * 8);
      return absl::OkStatus();
    }
    // Float32 and BFloat16: the rows path's rule (text/value_parse.h), so both paths accept the
    // same doubles.
    const bool bf16 = dst_.fixed_kind() == Kind::kBFloat16;
    for (uint64_t i = begin; i < end; ++i) {
      const double v = values[i];
      if (bf16) {
        uint16_t b;
        if (!text::ToBFloat16(v, &b)) {
          return BadValue(i, absl::StrCat(v), "double", "out of BFloat16's range");
        }
        dst_.Append(b);
        continue;
      }
      float f;
      if (!text::ToFloat32(v, &f))
        return BadValue(i, absl::StrCat(v), "double", "out of Float32's range");
      dst_.Append(f);
    }
    return absl::OkStatus();
  }

  absl::Status AppendStrings(uint64_t begin, uint64_t end) {
    const size_t width = dst_.width();
    for (uint64_t i = begin; i < end; ++i) {
      const std::string& s = src_.strings(static_cast<int>(i));
      if (s.size() > width) {
        return BadValue(i, s, "bytes", absl::StrCat("longer than ", width, " bytes"));
      }
      char* p = dst_.values().Prepare(width);
      std::memcpy(p, s.data(), s.size());
      std::memset(p + s.size(), 0, width - s.size());
      dst_.values().Commit(width);
    }
    return absl::OkStatus();
  }

  const v1::Column& src_;
  clickhouse::ColumnFixed& dst_;
  const FixedForm form_;
};

absl::StatusOr<std::unique_ptr<Node>> BuildFixed(const v1::Column& src, uint64_t rows,
                                                 clickhouse::ColumnFixed* dst,
                                                 const Position& pos) {
  const FixedForm convenience = ConvenienceForm(dst->fixed_kind());
  if (dst->fixed_kind() == clickhouse::FixedKind::kNothing) {
    CHGATE_RETURN_IF_ERROR(CheckFields(src, pos, 0));
    if (rows > 0) return LayoutError(pos, "Nothing has no values (only NULLs in Nullable)");
    return std::make_unique<FixedNode>(src, dst, FixedForm::kNone);
  }
  unsigned allowed = kData;
  switch (convenience) {
    case FixedForm::kInt64s:
      allowed |= kInt64s;
      break;
    case FixedForm::kUInt64s:
      allowed |= kUInt64s;
      break;
    case FixedForm::kFloat64s:
      allowed |= kFloat64s;
      break;
    case FixedForm::kStrings:
      allowed |= kStrings;
      break;
    default:
      break;
  }
  CHGATE_RETURN_IF_ERROR(CheckFields(src, pos, allowed));
  const unsigned present = PresentFields(src) & allowed;
  if (std::popcount(present) > 1) {
    return LayoutError(pos,
                       "sets more than one value form; use exactly one of `data` or the "
                       "typed field");
  }
  FixedForm form = FixedForm::kNone;
  uint64_t count = 0;
  if (present == kData) {
    form = FixedForm::kData;
    const size_t width = dst->width();
    if (src.data().size() % width != 0 || src.data().size() / width != rows) {
      return LayoutError(pos, absl::StrCat("`data` has ", src.data().size(), " bytes, expected ",
                                           rows, " rows x ", width, " bytes"));
    }
    count = rows;
  } else if (present != 0) {
    form = convenience;
    count = static_cast<uint64_t>(form == FixedForm::kInt64s     ? src.int64s_size()
                                  : form == FixedForm::kUInt64s  ? src.uint64s_size()
                                  : form == FixedForm::kFloat64s ? src.float64s_size()
                                                                 : src.strings_size());
  }
  if (count != rows) {
    return LayoutError(pos, absl::StrCat("has ", count, " values in ", FixedFormName(form),
                                         ", expected ", rows, " (one per row)"));
  }
  return std::make_unique<FixedNode>(src, dst, form);
}

// ---- String ----

class StringNode final : public Node {
 public:
  StringNode(const v1::Column& src, clickhouse::ColumnString* dst, bool from_strings)
      : src_(src), dst_(*dst), from_strings_(from_strings) {}

  absl::Status Append(uint64_t begin, uint64_t end) override {
    if (from_strings_) {
      for (uint64_t i = begin; i < end; ++i) dst_.Append(src_.strings(static_cast<int>(i)));
      return absl::OkStatus();
    }
    const std::string& data = src_.data();
    const Offsets& offsets = src_.offsets();
    for (uint64_t i = begin; i < end; ++i) {
      const uint64_t start = RowStart(offsets, i);
      dst_.Append(std::string_view(data).substr(start, offsets.Get(static_cast<int>(i)) - start));
    }
    return absl::OkStatus();
  }

 private:
  const v1::Column& src_;
  clickhouse::ColumnString& dst_;
  const bool from_strings_;
};

absl::StatusOr<std::unique_ptr<Node>> BuildString(const v1::Column& src, uint64_t rows,
                                                  clickhouse::ColumnString* dst,
                                                  const Position& pos) {
  CHGATE_RETURN_IF_ERROR(CheckFields(src, pos, kData | kOffsets | kStrings));
  const unsigned present = PresentFields(src);
  if ((present & kStrings) != 0) {
    if ((present & (kData | kOffsets)) != 0) {
      return LayoutError(pos, "sets both `strings` and `data`/`offsets`; use one form");
    }
    if (static_cast<uint64_t>(src.strings_size()) != rows) {
      return LayoutError(pos, absl::StrCat("`strings` has ", src.strings_size(),
                                           " values, expected ", rows, " (one per row)"));
    }
    return std::make_unique<StringNode>(src, dst, true);
  }
  if (rows == 0 && present == 0) return std::make_unique<StringNode>(src, dst, true);
  CHGATE_ASSIGN_OR_RETURN(const uint64_t last, CheckOffsets(src.offsets(), rows, pos, "bytes"));
  if (last != src.data().size()) {
    return LayoutError(pos, absl::StrCat("`offsets` end at byte ", last, " but `data` has ",
                                         src.data().size(), " bytes"));
  }
  return std::make_unique<StringNode>(src, dst, false);
}

// ---- Nullable ----

class NullableNode final : public Node {
 public:
  NullableNode(const v1::Column& src, clickhouse::ColumnNullable* dst) : src_(src), dst_(*dst) {}

  absl::Status Append(uint64_t begin, uint64_t end) override {
    if (begin == end) return absl::OkStatus();  // nested_ may be absent for zero rows
    const std::string& nulls = src_.nulls();
    if (nulls.empty()) {
      for (uint64_t i = begin; i < end; ++i) dst_.AppendNotNull();
      return nested_->Append(begin, end);
    }
    // Runs of present values go to the nested column in one call each.
    uint64_t i = begin;
    while (i < end) {
      if (nulls[i] != 0) {
        dst_.AppendNull();
        ++i;
        continue;
      }
      uint64_t run_end = i;
      while (run_end < end && nulls[run_end] == 0) ++run_end;
      for (uint64_t r = i; r < run_end; ++r) dst_.AppendNotNull();
      CHGATE_RETURN_IF_ERROR(nested_->Append(i, run_end));
      i = run_end;
    }
    return absl::OkStatus();
  }

  std::unique_ptr<Node> nested_;  // null when every row is NULL and no values were sent

 private:
  const v1::Column& src_;
  clickhouse::ColumnNullable& dst_;
};

absl::StatusOr<std::unique_ptr<Node>> BuildNullable(const v1::Column& src, uint64_t rows,
                                                    clickhouse::ColumnNullable* dst,
                                                    const Position& pos) {
  const std::string& nulls = src.nulls();
  bool all_null = rows == 0 || !nulls.empty();
  if (!nulls.empty()) {
    if (nulls.size() != rows) {
      return LayoutError(pos, absl::StrCat("`nulls` has ", nulls.size(), " bytes, expected ", rows,
                                           " (one per row)"));
    }
    for (size_t i = 0; i < nulls.size(); ++i) {
      if (nulls[i] != 0 && nulls[i] != 1) {
        return LayoutError(pos, absl::StrCat("`nulls` byte ", i, " is ",
                                             static_cast<int>(static_cast<unsigned char>(nulls[i])),
                                             "; use 1 for NULL and 0 otherwise"));
      }
      if (nulls[i] == 0) all_null = false;
    }
  }
  auto node = std::make_unique<NullableNode>(src, dst);
  Place(pos, node.get());
  if (all_null && (PresentFields(src) & ~kNulls) == 0) return node;  // only NULLs, no values
  Position nested = SameRows(pos, node.get());
  nested.shares_nulls = true;
  CHGATE_ASSIGN_OR_RETURN(node->nested_, Build(src, rows, dst->nested().get(), std::move(nested)));
  return node;
}

// ---- Array and Map ----

class ArrayNode final : public Node {
 public:
  ArrayNode(const v1::Column& src, clickhouse::ColumnArray* dst) : src_(src), dst_(*dst) {}

  absl::Status Append(uint64_t begin, uint64_t end) override {
    const Offsets& offsets = src_.offsets();
    for (uint64_t row = begin; row < end; ++row) {
      const uint64_t from = RowStart(offsets, row);
      const uint64_t to = offsets.Get(static_cast<int>(row));
      for (const auto& child : children_) CHGATE_RETURN_IF_ERROR(child->Append(from, to));
      dst_.FinishRow();
    }
    return absl::OkStatus();
  }

  std::vector<std::unique_ptr<Node>> children_;  // elements, or keys and values

 private:
  const v1::Column& src_;
  clickhouse::ColumnArray& dst_;
};

absl::StatusOr<std::unique_ptr<Node>> BuildArray(const v1::Column& src, uint64_t rows,
                                                 clickhouse::ColumnArray* dst,
                                                 const Position& pos) {
  CHGATE_RETURN_IF_ERROR(CheckFields(src, pos, kOffsets | kChildren));
  CHGATE_ASSIGN_OR_RETURN(const uint64_t elements,
                          CheckOffsets(src.offsets(), rows, pos, "elements"));
  auto node = std::make_unique<ArrayNode>(src, dst);
  Place(pos, node.get());
  std::vector<clickhouse::Column*> targets;
  if (dst->is_map()) {
    auto& entries = static_cast<clickhouse::ColumnTuple&>(*dst->nested());
    targets = {entries.element(0).get(), entries.element(1).get()};
  } else {
    targets = {dst->nested().get()};
  }
  const int expected = static_cast<int>(targets.size());
  if (src.children_size() != expected) {
    if (elements == 0 && src.children_size() == 0) return node;  // every array is empty
    return LayoutError(pos,
                       absl::StrCat("has ", src.children_size(), " children, expected ", expected,
                                    dst->is_map() ? " (keys, values)" : " (the elements)"));
  }
  for (int i = 0; i < expected; ++i) {
    Position child{.scope = pos.scope,
                   .parent = node.get(),
                   .link = !dst->is_map() ? Link::kArrayElement
                           : i == 0       ? Link::kMapKey
                                          : Link::kMapValue,
                   .parent_offsets = &src.offsets(),
                   .where = ChildWhere(pos, i)};
    CHGATE_ASSIGN_OR_RETURN(
        std::unique_ptr<Node> c,
        Build(src.children(i), elements, targets[static_cast<size_t>(i)], std::move(child)));
    node->children_.push_back(std::move(c));
  }
  return node;
}

// ---- Tuple ----

class TupleNode final : public Node {
 public:
  absl::Status Append(uint64_t begin, uint64_t end) override {
    for (const auto& element : elements_) CHGATE_RETURN_IF_ERROR(element->Append(begin, end));
    return absl::OkStatus();
  }

  std::vector<std::unique_ptr<Node>> elements_;
};

absl::StatusOr<std::unique_ptr<Node>> BuildTuple(const v1::Column& src, uint64_t rows,
                                                 clickhouse::ColumnTuple* dst,
                                                 const Position& pos) {
  CHGATE_RETURN_IF_ERROR(CheckFields(src, pos, kChildren));
  const size_t n = dst->element_count();
  auto node = std::make_unique<TupleNode>();
  Place(pos, node.get());
  if (rows == 0 && src.children_size() == 0) return node;
  if (static_cast<size_t>(src.children_size()) != n) {
    return LayoutError(pos, absl::StrCat("has ", src.children_size(), " children, expected ", n,
                                         " (one per tuple element)"));
  }
  const auto& args = dst->type().args;
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = i < args.size() ? args[i].element_name : std::string();
    Position child{.scope = pos.scope,
                   .parent = node.get(),
                   .link = Link::kTupleElement,
                   .label = name.empty() ? absl::StrCat(".", i + 1) : absl::StrCat(".", name),
                   .where = ChildWhere(pos, static_cast<int>(i))};
    CHGATE_ASSIGN_OR_RETURN(
        std::unique_ptr<Node> c,
        Build(src.children(static_cast<int>(i)), rows, dst->element(i).get(), std::move(child)));
    node->elements_.push_back(std::move(c));
  }
  return node;
}

// ---- LowCardinality: sent as its inner type, then deduplicated into the dictionary ----

class LowCardinalityNode final : public Node {
 public:
  LowCardinalityNode(clickhouse::ColumnLowCardinality* dst, clickhouse::ColumnPtr scratch)
      : dst_(*dst), scratch_(std::move(scratch)) {}

  absl::Status Append(uint64_t begin, uint64_t end) override {
    scratch_->Clear();
    CHGATE_RETURN_IF_ERROR(inner_->Append(begin, end));
    const clickhouse::Column* values = scratch_.get();
    const clickhouse::ColumnNullable* nullable = nullptr;
    if (dst_.nullable()) {
      nullable = static_cast<const clickhouse::ColumnNullable*>(scratch_.get());
      values = nullable->nested().get();
    }
    const auto* strings = values->kind() == clickhouse::ColumnKind::kString
                              ? static_cast<const clickhouse::ColumnString*>(values)
                              : nullptr;
    const auto* fixed = values->kind() == clickhouse::ColumnKind::kFixed
                            ? static_cast<const clickhouse::ColumnFixed*>(values)
                            : nullptr;
    const bool fixed_string =
        fixed != nullptr && fixed->fixed_kind() == clickhouse::FixedKind::kFixedString;
    const size_t n = scratch_->Size();
    for (size_t i = 0; i < n; ++i) {
      if (nullable != nullptr && nullable->IsNull(i)) {
        dst_.AppendNull();
      } else if (strings != nullptr) {
        CHGATE_RETURN_IF_ERROR(dst_.AppendString(strings->At(i)));
      } else if (fixed_string) {
        std::string_view v(fixed->RawAt(i), fixed->width());
        while (!v.empty() && v.back() == '\0') v.remove_suffix(1);
        CHGATE_RETURN_IF_ERROR(dst_.AppendString(v));
      } else {
        dst_.dictionary()->AppendRange(*values, i, i + 1);
        CHGATE_RETURN_IF_ERROR(dst_.AppendFromDictionaryTail());
      }
    }
    return absl::OkStatus();
  }

  std::unique_ptr<Node> inner_;

 private:
  clickhouse::ColumnLowCardinality& dst_;
  clickhouse::ColumnPtr scratch_;  // the rows of one Append, in the inner type
};

absl::StatusOr<std::unique_ptr<Node>> BuildLowCardinality(const v1::Column& src, uint64_t rows,
                                                          clickhouse::ColumnLowCardinality* dst,
                                                          const Position& pos) {
  if (dst->type().args.size() != 1) return LayoutError(pos, "malformed LowCardinality type");
  CHGATE_ASSIGN_OR_RETURN(clickhouse::ColumnPtr scratch,
                          clickhouse::CreateColumn(dst->type().args[0]));
  auto node = std::make_unique<LowCardinalityNode>(dst, scratch);
  Place(pos, node.get());
  CHGATE_ASSIGN_OR_RETURN(node->inner_, Build(src, rows, scratch.get(), SameRows(pos, node.get())));
  return node;
}

// ---- Variant, Dynamic, JSON: ClickHouse text in String layout ----

// The rows are read as Nullable(String) (the layout Query results carry them in) and each is
// converted by the rows conversion with text taken as ClickHouse text (ConvertOptions::
// text_is_literal), so both insert paths share one rule.
class TextNode final : public Node {
 public:
  TextNode(clickhouse::Column* dst, clickhouse::ColumnPtr scratch)
      : dst_(*dst), scratch_(std::move(scratch)) {}

  absl::Status Append(uint64_t begin, uint64_t end) override {
    scratch_->Clear();
    CHGATE_RETURN_IF_ERROR(inner_->Append(begin, end));
    const auto& nullable = static_cast<const clickhouse::ColumnNullable&>(*scratch_);
    const auto& strings = static_cast<const clickhouse::ColumnString&>(*nullable.nested());
    ingest::ConvertOptions options;
    options.text_is_literal = true;
    for (size_t i = 0; i < nullable.Size(); ++i) {
      const std::string_view text = strings.At(i);
      const ingest::ValueRef value =
          nullable.IsNull(i) ? ingest::NullValue() : ingest::TextValue(&text);
      std::string why;
      if (!ingest::TryAppendValue(value, dst_, options, &why)) {
        return BadValue(begin + i, std::string(text), nullable.IsNull(i) ? "null" : "string", why);
      }
    }
    return absl::OkStatus();
  }

  std::unique_ptr<Node> inner_;

 private:
  clickhouse::Column& dst_;
  clickhouse::ColumnPtr scratch_;  // the rows of one Append, as Nullable(String)
};

absl::StatusOr<std::unique_ptr<Node>> BuildText(const v1::Column& src, uint64_t rows,
                                                clickhouse::Column* dst, const Position& pos) {
  CHGATE_ASSIGN_OR_RETURN(clickhouse::ColumnPtr scratch,
                          clickhouse::CreateColumn("Nullable(String)"));
  auto node = std::make_unique<TextNode>(dst, scratch);
  Place(pos, node.get());
  CHGATE_ASSIGN_OR_RETURN(node->inner_, Build(src, rows, scratch.get(), SameRows(pos, node.get())));
  return node;
}

absl::StatusOr<std::unique_ptr<Node>> Build(const v1::Column& src, uint64_t rows,
                                            clickhouse::Column* dst, Position pos) {
  absl::StatusOr<std::unique_ptr<Node>> node;
  switch (dst->kind()) {
    case clickhouse::ColumnKind::kFixed:
      node = BuildFixed(src, rows, static_cast<clickhouse::ColumnFixed*>(dst), pos);
      break;
    case clickhouse::ColumnKind::kString:
      node = BuildString(src, rows, static_cast<clickhouse::ColumnString*>(dst), pos);
      break;
    case clickhouse::ColumnKind::kNullable:
      return BuildNullable(src, rows, static_cast<clickhouse::ColumnNullable*>(dst), pos);
    case clickhouse::ColumnKind::kArray:
    case clickhouse::ColumnKind::kMap:
      return BuildArray(src, rows, static_cast<clickhouse::ColumnArray*>(dst), pos);
    case clickhouse::ColumnKind::kTuple:
      return BuildTuple(src, rows, static_cast<clickhouse::ColumnTuple*>(dst), pos);
    case clickhouse::ColumnKind::kLowCardinality:
      return BuildLowCardinality(src, rows, static_cast<clickhouse::ColumnLowCardinality*>(dst),
                                 pos);
    case clickhouse::ColumnKind::kVariant:
    case clickhouse::ColumnKind::kDynamic:
    case clickhouse::ColumnKind::kJson:
    case clickhouse::ColumnKind::kAggregateState:
      return BuildText(src, rows, dst, pos);
  }
  if (node.ok()) Place(pos, node->get());
  return node;
}

}  // namespace

absl::Status AppendProtoColumn(const v1::Column& src, uint64_t rows, std::string_view column,
                               clickhouse::Column* dst) {
  const Scope scope{.column = std::string(column), .type = dst->type_name()};
  CHGATE_ASSIGN_OR_RETURN(std::unique_ptr<Node> root,
                          Build(src, rows, dst, Position{.scope = &scope}));
  return root->Append(0, rows);
}

absl::Status ConvertBlock(const v1::Block& block, std::span<const std::string> names,
                          clickhouse::Block* out) {
  CHGATE_CHECK(names.size() == static_cast<size_t>(block.columns_size()));
  out->Clear();
  for (int i = 0; i < block.columns_size(); ++i) {
    const v1::Column& src = block.columns(i);
    const std::string& name = names[static_cast<size_t>(i)];
    if (src.type().empty()) {
      return ingest::WithValueError(
          absl::InvalidArgumentError(absl::StrCat(
              "block column '", ingest::PrintableName(name),
              "': `type` is required on insert (the full ClickHouse type of the target column, "
              "e.g. \"Nullable(String)\")")),
          {.column = name});
    }
    absl::StatusOr<clickhouse::ColumnPtr> column = clickhouse::CreateColumn(src.type());
    if (!column.ok()) {
      return ingest::WithValueError(
          absl::Status(
              column.status().code(),
              absl::StrCat("block column '", ingest::PrintableName(name), "' (",
                           ingest::PrintableName(src.type()), "): ", column.status().message())),
          {.column = name, .type = src.type()});
    }
    CHGATE_RETURN_IF_ERROR(AppendProtoColumn(src, block.rows(), name, column->get()));
    out->AddColumn(name, *std::move(column));
  }
  return absl::OkStatus();
}

}  // namespace chgate::service
