// chgate.v1.Column into String, Nullable, Array, Map, Tuple, LowCardinality and the text-carried
// types (Variant, Dynamic, JSON, aggregate states), and Build, which picks the node for a type.
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/low_cardinality.h"
#include "server/clickhouse/columns/nullable.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/columns/tuple.h"
#include "server/ingest/convert.h"
#include "server/proto_convert/column_node.h"
#include "text/status_macros.h"

namespace chgate::proto_convert::internal {
namespace {

// ---- String ----

class StringNode final : public Node {
 public:
  StringNode(const v1::Column& src, clickhouse::ColumnString* dst, bool from_strings)
      : src_(src), dst_(*dst), from_strings_(from_strings) {}

  absl::Status Append(uint64_t begin, uint64_t end) override {
    if (begin >= end) return absl::OkStatus();
    if (from_strings_) {
      size_t bytes = 0;
      for (uint64_t i = begin; i < end; ++i) bytes += src_.strings(static_cast<int>(i)).size();
      dst_.Reserve(end - begin, bytes);
      for (uint64_t i = begin; i < end; ++i) dst_.Append(src_.strings(static_cast<int>(i)));
      return absl::OkStatus();
    }
    // BuildString checked the offsets against `data` (non-decreasing, the last at its end).
    dst_.AppendSlices(src_.data(), src_.offsets().data() + begin, end - begin,
                      columnar::RowBegin(src_.offsets(), begin));
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
  CHGATE_RETURN_IF_ERROR(AtPosition(pos, columnar::CheckStringData(src, rows)));
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
  CHGATE_RETURN_IF_ERROR(AtPosition(pos, columnar::CheckNulls(src, rows)));
  const std::string& nulls = src.nulls();
  const bool all_null = rows == 0 || (!nulls.empty() && nulls.find('\0') == std::string::npos);
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
      const uint64_t from = RowBegin(offsets, row);
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
    return AtPosition(pos, columnar::CheckChildren(
                               src, expected, dst->is_map() ? "keys, values" : "the elements"));
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
  CHGATE_RETURN_IF_ERROR(
      AtPosition(pos, columnar::CheckChildren(src, static_cast<int>(n), "one per tuple element")));
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

}  // namespace

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

}  // namespace chgate::proto_convert::internal
