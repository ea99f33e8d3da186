#include "server/proto_convert/column_node.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/ingest/value_error.h"

namespace chgate::proto_convert::internal {
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

absl::Status AtPosition(const Position& pos, const absl::Status& checked) {
  if (checked.ok()) return checked;
  return LayoutError(pos, std::string_view(checked.message().data(), checked.message().size()));
}

absl::Status CheckFields(const v1::Column& src, const Position& pos, unsigned allowed) {
  if (pos.shares_nulls) allowed |= kNulls;
  return AtPosition(pos, columnar::CheckFields(src, allowed));
}

absl::StatusOr<uint64_t> CheckOffsets(const Offsets& offsets, uint64_t rows, const Position& pos,
                                      std::string_view unit) {
  absl::StatusOr<uint64_t> last = columnar::CheckOffsets(offsets, rows, unit);
  if (!last.ok()) return AtPosition(pos, last.status());
  return last;
}

}  // namespace chgate::proto_convert::internal
