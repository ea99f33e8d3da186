// A column of one ClickHouse type: owns its values in the native wire layout so that encoding is
// a reference to its memory (see GatherWriter) and decoding is a bulk read. One subclass per
// layout family; CreateColumn (factory.h) builds the right one from a type name.
//
// Serialization follows ClickHouse's Native format: all state prefixes of a (nested) column are
// written before any bulk data (SavePrefix/LoadPrefix, recursive), then the bodies.
// Columns are not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "server/clickhouse/types/type_ast.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/gather.h"

namespace chgate::clickhouse {

class Column;
using ColumnPtr = std::shared_ptr<Column>;

// The layout family of a column: which subclass it is. Code that handles columns switches over
// this (never `dynamic_cast` ladders), so adding a family makes the compiler name every place that
// must handle it (-Wswitch). Per-type facts within a family (widths, ranges, text forms) are in
// text/type_facts.h.
enum class ColumnKind {
  kFixed,           // ColumnFixed: one fixed width per value (numbers, dates, UUID, IP, Enum...)
  kString,          // ColumnString
  kNullable,        // ColumnNullable
  kArray,           // ColumnArray (not a Map)
  kMap,             // ColumnArray with is_map(): Array(Tuple(K, V)) on the wire
  kTuple,           // ColumnTuple
  kLowCardinality,  // ColumnLowCardinality
  kVariant,         // ColumnVariant
  kDynamic,         // ColumnDynamic
  kJson,            // ColumnJson
  kAggregateState,  // ColumnAggregateState: opaque AggregateFunction states
};

class Column {
 public:
  virtual ~Column() = default;

  // The type's canonical text (e.g. `Nullable(DateTime('UTC'))`) and its parsed form.
  const std::string& type_name() const { return type_name_; }
  const TypeAst& type() const { return type_; }

  virtual ColumnKind kind() const = 0;
  virtual size_t Size() const = 0;
  // Removes every row, keeping capacity.
  virtual void Clear() = 0;
  // Appends the type's default value (0, '', [], NULL for Nullable...).
  virtual void AppendDefault() = 0;
  // Drops every row from `rows` on (rows <= Size()), keeping capacity: the undo of appends, so a
  // request whose later value fails to convert leaves the column as it was.
  virtual void Truncate(size_t rows) = 0;
  // Appends rows [begin, end) of `src`, a column of the same type (same class and parameters).
  virtual void AppendRange(const Column& src, size_t begin, size_t end) = 0;
  // Makes room to append every row of `parts` (columns of this type) without growing again, so a
  // column gathered from many parts allocates each buffer once. A hint: the default does nothing.
  virtual void ReserveForAppend(std::span<const Column* const> parts) { (void)parts; }
  // A new empty column of the same type.
  virtual ColumnPtr CloneEmpty() const = 0;
  // Bytes of memory the values occupy (for budgets and metrics).
  virtual size_t ByteSize() const = 0;

  // Serialization-state prefix (LowCardinality's version word), recursive.
  virtual absl::Status LoadPrefix(ReadBuffer& in) {
    (void)in;
    return absl::OkStatus();
  }
  // Reads `rows` rows of body and appends them.
  virtual absl::Status LoadBody(ReadBuffer& in, size_t rows) = 0;
  // Reads past `rows` rows of body without keeping them (the column is left empty). The default
  // loads and clears; layouts that can skip without copying override it.
  virtual absl::Status SkipBody(ReadBuffer& in, size_t rows) {
    Clear();
    absl::Status loaded = LoadBody(in, rows);
    Clear();
    return loaded;
  }
  virtual void SavePrefix(GatherWriter& out) const { (void)out; }
  virtual void SaveBody(GatherWriter& out) const = 0;

 protected:
  Column(std::string type_name, TypeAst type)
      : type_name_(std::move(type_name)), type_(std::move(type)) {}

 private:
  std::string type_name_;
  TypeAst type_;
};

// Escapes `s` for TabSeparated output (backslash escapes for \t \n \\ and control bytes).
void AppendTsvEscaped(std::string_view s, std::string* out);

}  // namespace chgate::clickhouse
