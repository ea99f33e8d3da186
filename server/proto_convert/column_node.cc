#include "server/proto_convert/column_node.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/ingest/value_error.h"

namespace chgate::proto_convert::internal {
namespace {

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

}  // namespace

absl::Status Node::BadValue(uint64_t index, std::string value, std::string_view kind,
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

absl::Status CheckFields(const v1::Column& src, const Position& pos, unsigned allowed) {
  if (pos.shares_nulls) allowed |= kNulls;
  const unsigned extra = PresentFields(src) & ~allowed;
  if (extra == 0) return absl::OkStatus();
  const unsigned first = extra & (~extra + 1);
  if (first == kNulls) return LayoutError(pos, "`nulls` is only for Nullable types");
  return LayoutError(pos, absl::StrCat("unexpected field `", FieldName(first), "` for this type"));
}

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

}  // namespace chgate::proto_convert::internal
