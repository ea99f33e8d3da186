// The conversion of a chgate.v1.Column into a typed column (values.h's columnar path),
// internals: a tree of Nodes, one per level of the type, resolved and validated once (layout and
// sizes) and then asked to append row ranges. column_node.cc has the shared checks and the
// error messages, fixed.cc the fixed-width types, columns.cc the others and Build.
#pragma once

#include <bit>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chgate/v1/chgate.pb.h"
#include "columnar/column_layout.h"
#include "server/clickhouse/columns/column.h"
#include "server/clickhouse/columns/fixed.h"

namespace chgate::proto_convert::internal {

static_assert(std::endian::native == std::endian::little,
              "the columnar path copies little-endian wire values as host integers");

using columnar::Offsets;

// The top-level column a conversion works on, for error messages.
struct Scope {
  std::string column;
  std::string type;
};

// Abseil 20220623 keeps its own string_view type.
inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

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
                        std::string_view what) const;
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
Position SameRows(const Position& pos, const Node* parent);

// An InvalidArgument for a layout that does not match the type, naming the column and `where`.
absl::Status LayoutError(const Position& pos, std::string_view what);

// The proto path of child `index` of the column at `pos`.
std::string ChildWhere(const Position& pos, int index);

// Places `node` in the tree at `pos` (its parent, link and label).
void Place(const Position& pos, Node* node);

// The value fields of a Column and their checks: the layout shared with the SDK.
using columnar::kChildren;
using columnar::kData;
using columnar::kFloat64s;
using columnar::kInt64s;
using columnar::kNulls;
using columnar::kOffsets;
using columnar::kStrings;
using columnar::kUInt64s;
using columnar::PresentFields;
using columnar::RowBegin;

// A shared layout check's result at `pos`: OK as it is, an error as LayoutError(pos, message).
absl::Status AtPosition(const Position& pos, const absl::Status& checked);

// Rejects fields of `src` outside `allowed` (an enclosing Nullable's `nulls` are always allowed).
absl::Status CheckFields(const v1::Column& src, const Position& pos, unsigned allowed);

// Checks that `offsets` has one non-decreasing entry per row; returns the last one.
absl::StatusOr<uint64_t> CheckOffsets(const Offsets& offsets, uint64_t rows, const Position& pos,
                                      std::string_view unit);

// The node that appends `src` (`rows` rows) to `dst`, for dst's type, after checking the layout.
absl::StatusOr<std::unique_ptr<Node>> Build(const v1::Column& src, uint64_t rows,
                                            clickhouse::Column* dst, Position pos);

// Build for fixed-width types (fixed.cc).
absl::StatusOr<std::unique_ptr<Node>> BuildFixed(const v1::Column& src, uint64_t rows,
                                                 clickhouse::ColumnFixed* dst, const Position& pos);

}  // namespace chgate::proto_convert::internal
