#include "server/proto_convert/result_block.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "columnar/column_layout.h"
#include "server/clickhouse/columns/aggregate_state.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/dynamic.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/json.h"
#include "server/clickhouse/columns/low_cardinality.h"
#include "server/clickhouse/columns/nullable.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/columns/tuple.h"
#include "server/clickhouse/columns/variant.h"
#include "server/clickhouse/text_form.h"
#include "text/status_macros.h"
#include "text/value_text.h"

namespace chgate::proto_convert {
namespace {

using clickhouse::Column;
using clickhouse::ColumnArray;
using clickhouse::ColumnFixed;
using clickhouse::ColumnKind;
using clickhouse::ColumnLowCardinality;
using clickhouse::ColumnNullable;
using clickhouse::ColumnString;
using clickhouse::ColumnTuple;
using clickhouse::ColumnVariant;
using clickhouse::FixedKind;

// Reads the VarUInt length prefix at `p`; returns the first byte after it.
const char* SkipLength(const char* p, uint64_t* len) {
  uint64_t v = 0;
  int shift = 0;
  while (true) {
    const auto byte = static_cast<uint8_t>(*p++);
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) break;
    shift += 7;
  }
  *len = v;
  return p;
}

// Appends `n` values of `width` bytes at `p` in the API's layout for `kind`.
void AppendFixedData(FixedKind kind, size_t width, const char* p, size_t n, std::string* data) {
  if (kind == FixedKind::kNothing) return;
  const size_t at = data->size();
  data->append(p, n * width);
  if (kind == FixedKind::kUuid) text::SwapUuidHalves(p, n, data->data() + at);
}

void AppendStrings(const ColumnString& src, size_t begin, size_t end, v1::Column* dst) {
  if (begin >= end) return;
  std::string* data = dst->mutable_data();
  const uint64_t base = data->size();
  const uint64_t wire = src.WireBytes(begin, end);
  data->reserve(base + wire);
  auto* offsets = dst->mutable_offsets();
  offsets->Reserve(offsets->size() + static_cast<int>(end - begin));
  const char* p = src.wire().data() + src.WireBegin(begin);
  for (size_t r = begin; r < end; ++r) {
    uint64_t len;
    p = SkipLength(p, &len);
    data->append(p, len);
    p += len;
    offsets->AddAlreadyReserved(data->size());
  }
}

// `with_nulls`: also append the rows' null flags (LowCardinality(Nullable)).
void AppendLowCardinality(const ColumnLowCardinality& src, size_t begin, size_t end,
                          bool with_nulls, v1::Column* dst) {
  const Column& dict = *src.dictionary();
  if (with_nulls) {
    std::string* nulls = dst->mutable_nulls();
    for (size_t r = begin; r < end; ++r) nulls->push_back(src.IsNull(r) ? 1 : 0);
  }
  if (dict.kind() == ColumnKind::kString) {
    const auto* strings = static_cast<const ColumnString*>(&dict);
    std::string* data = dst->mutable_data();
    auto* offsets = dst->mutable_offsets();
    offsets->Reserve(offsets->size() + static_cast<int>(end - begin));
    for (size_t r = begin; r < end; ++r) {
      const std::string_view v = strings->At(src.Index(r));
      data->append(v.data(), v.size());
      offsets->AddAlreadyReserved(data->size());
    }
    return;
  }
  const auto& fixed = static_cast<const ColumnFixed&>(dict);
  for (size_t r = begin; r < end; ++r) {
    AppendFixedData(fixed.fixed_kind(), fixed.width(), fixed.RawAt(src.Index(r)), 1,
                    dst->mutable_data());
  }
}

absl::Status CheckColumn(const Column& col, std::string_view path) {
  switch (col.kind()) {
    case ColumnKind::kFixed:
    case ColumnKind::kString:
      return absl::OkStatus();
    case ColumnKind::kNullable:
      return CheckColumn(*static_cast<const ColumnNullable&>(col).nested(), path);
    case ColumnKind::kArray:
    case ColumnKind::kMap:
      return CheckColumn(*static_cast<const ColumnArray&>(col).nested(), path);
    case ColumnKind::kTuple: {
      const auto& tuple = static_cast<const ColumnTuple&>(col);
      for (size_t i = 0; i < tuple.element_count(); ++i) {
        CHGATE_RETURN_IF_ERROR(CheckColumn(*tuple.element(i), path));
      }
      return absl::OkStatus();
    }
    case ColumnKind::kLowCardinality: {
      const ColumnKind dict = static_cast<const ColumnLowCardinality&>(col).dictionary()->kind();
      if (dict == ColumnKind::kString || dict == ColumnKind::kFixed) return absl::OkStatus();
      break;
    }
    case ColumnKind::kVariant:
    case ColumnKind::kDynamic:
    case ColumnKind::kJson:
    case ColumnKind::kAggregateState:
      return absl::OkStatus();  // carried as text or bytes (AppendTextRows)
  }
  return absl::UnimplementedError(
      absl::StrCat("result column ", std::string(path), " has type ", col.type_name(),
                   ", which the Query API cannot carry; cast it in SQL (e.g. with toString)"));
}

// Whether row `row` of a Variant or Dynamic column is NULL (the other kinds have no NULLs of
// their own here).
bool IsTextNull(const Column& col, size_t row) {
  if (col.kind() == ColumnKind::kVariant) {
    return static_cast<const clickhouse::ColumnVariant&>(col).IsNull(row);
  }
  if (col.kind() == ColumnKind::kDynamic) {
    return static_cast<const clickhouse::ColumnDynamic&>(col).IsNull(row);
  }
  return false;
}

// The value's text without TabSeparated escapes: a String's bytes, a fixed-width value's plain
// text (text/value_text.h), anything else as ClickHouse prints it.
void AppendPlainValue(const Column& col, size_t row, std::string* out) {
  switch (col.kind()) {
    case ColumnKind::kString:
      out->append(static_cast<const ColumnString&>(col).At(row));
      return;
    case ColumnKind::kFixed: {
      const auto& fixed = static_cast<const ColumnFixed&>(col);
      text::AppendPlainText(fixed.params(), fixed.RawAt(row), out);
      return;
    }
    case ColumnKind::kVariant: {
      const auto& variant = static_cast<const clickhouse::ColumnVariant&>(col);
      AppendPlainValue(*variant.alternative(variant.discriminator(row)),
                       static_cast<size_t>(variant.offset(row)), out);
      return;
    }
    case ColumnKind::kDynamic: {
      const auto& dynamic = static_cast<const clickhouse::ColumnDynamic&>(col);
      if (!dynamic.IsShared(row)) {
        AppendPlainValue(dynamic.variant(), row, out);
        return;
      }
      // A value in SharedVariant: its type's binary encoding and the value, decoded into a
      // one-row column of that type so a String is its bytes here too.
      const ColumnVariant& variant = dynamic.variant();
      const auto& shared =
          static_cast<const ColumnString&>(*variant.alternative(dynamic.shared_index()));
      absl::StatusOr<clickhouse::ColumnPtr> value =
          clickhouse::DecodeBinaryValue(shared.At(static_cast<size_t>(variant.offset(row))));
      if (!value.ok()) break;  // checked when loaded; AppendTsvValue prints what it can
      AppendPlainValue(**value, 0, out);
      return;
    }
    case ColumnKind::kJson:
      out->append(static_cast<const clickhouse::ColumnJson&>(col).Text(row));
      return;
    case ColumnKind::kAggregateState:
      out->append(static_cast<const clickhouse::ColumnAggregateState&>(col).State(row));
      return;
    case ColumnKind::kLowCardinality: {
      // A Variant alternative or Dynamic type LowCardinality(T) (never Nullable there): T's
      // plain text, so LowCardinality(String) is its bytes like String.
      const auto& lc = static_cast<const ColumnLowCardinality&>(col);
      if (lc.IsNull(row)) break;
      AppendPlainValue(*lc.dictionary(), static_cast<size_t>(lc.Index(row)), out);
      return;
    }
    case ColumnKind::kNullable:
    case ColumnKind::kArray:
    case ColumnKind::kMap:
    case ColumnKind::kTuple:
      break;
  }
  AppendTsvValue(col, row, false, out);
}

// Variant, Dynamic, JSON and AggregateFunction results in String layout: each row's text (an
// aggregate state's bytes), NULL rows of Variant and Dynamic in `nulls` with the back-fill rule.
void AppendTextRows(const Column& src, size_t begin, size_t end, size_t dst_rows, v1::Column* dst) {
  std::string* nulls = dst->mutable_nulls();
  bool any_null = !nulls->empty();
  for (size_t r = begin; r < end && !any_null; ++r) any_null = IsTextNull(src, r);
  if (any_null && nulls->size() < dst_rows) nulls->append(dst_rows - nulls->size(), '\0');
  std::string* data = dst->mutable_data();
  auto* offsets = dst->mutable_offsets();
  offsets->Reserve(offsets->size() + static_cast<int>(end - begin));
  for (size_t r = begin; r < end; ++r) {
    const bool is_null = IsTextNull(src, r);
    if (any_null) nulls->push_back(is_null ? 1 : 0);
    if (!is_null) AppendPlainValue(src, r, data);
    offsets->AddAlreadyReserved(data->size());
  }
}

// Names of a tuple's elements ("" for unnamed tuples).
std::string_view ElementName(const Column& tuple, size_t i) {
  const auto& args = tuple.type().args;
  return i < args.size() ? std::string_view(args[i].element_name) : std::string_view();
}

}  // namespace

absl::Status CheckResultColumns(const clickhouse::Block& header) {
  for (const clickhouse::NamedColumn& c : header.columns()) {
    CHGATE_RETURN_IF_ERROR(CheckColumn(*c.column, c.name));
  }
  return absl::OkStatus();
}

void InitResultColumn(const Column& src, std::string_view name, v1::Column* dst) {
  dst->set_name(std::string(name));
  dst->set_type(src.type_name());
  const Column* inner = &src;
  if (inner->kind() == ColumnKind::kNullable) {
    inner = static_cast<const ColumnNullable*>(inner)->nested().get();
  }
  switch (inner->kind()) {
    case ColumnKind::kMap: {
      const auto& kv =
          static_cast<const ColumnTuple&>(*static_cast<const ColumnArray*>(inner)->nested());
      InitResultColumn(*kv.element(0), "keys", dst->add_children());
      InitResultColumn(*kv.element(1), "values", dst->add_children());
      return;
    }
    case ColumnKind::kArray:
      InitResultColumn(*static_cast<const ColumnArray*>(inner)->nested(), "", dst->add_children());
      return;
    case ColumnKind::kTuple: {
      const auto& tuple = static_cast<const ColumnTuple&>(*inner);
      for (size_t i = 0; i < tuple.element_count(); ++i) {
        InitResultColumn(*tuple.element(i), ElementName(tuple, i), dst->add_children());
      }
      return;
    }
    case ColumnKind::kFixed:
    case ColumnKind::kString:
    case ColumnKind::kNullable:
    case ColumnKind::kLowCardinality:
    case ColumnKind::kVariant:
    case ColumnKind::kDynamic:
    case ColumnKind::kJson:
    case ColumnKind::kAggregateState:
      return;
  }
}

void AppendResultRows(const Column& src, size_t begin, size_t end, size_t dst_rows,
                      v1::Column* dst) {
  if (begin >= end) return;
  switch (src.kind()) {
    case ColumnKind::kFixed: {
      const auto& fixed = static_cast<const ColumnFixed&>(src);
      AppendFixedData(fixed.fixed_kind(), fixed.width(), fixed.RawAt(begin), end - begin,
                      dst->mutable_data());
      return;
    }
    case ColumnKind::kString:
      AppendStrings(static_cast<const ColumnString&>(src), begin, end, dst);
      return;
    case ColumnKind::kNullable: {
      const auto& nullable = static_cast<const ColumnNullable&>(src);
      columnar::AppendNullFlags(nullable.nulls().data() + begin, end - begin, dst_rows, dst);
      AppendResultRows(*nullable.nested(), begin, end, dst_rows, dst);
      return;
    }
    case ColumnKind::kArray:
    case ColumnKind::kMap: {
      const auto& array = static_cast<const ColumnArray&>(src);
      auto* offsets = dst->mutable_offsets();
      const uint64_t dst_elements = offsets->empty() ? 0 : offsets->Get(offsets->size() - 1);
      const uint64_t first = array.RowBegin(begin);
      const uint64_t last = array.Offset(end - 1);
      offsets->Reserve(offsets->size() + static_cast<int>(end - begin));
      for (size_t r = begin; r < end; ++r) {
        offsets->AddAlreadyReserved(dst_elements + (array.Offset(r) - first));
      }
      if (array.is_map()) {
        const auto& kv = static_cast<const ColumnTuple&>(*array.nested());
        AppendResultRows(*kv.element(0), first, last, dst_elements, dst->mutable_children(0));
        AppendResultRows(*kv.element(1), first, last, dst_elements, dst->mutable_children(1));
      } else {
        AppendResultRows(*array.nested(), first, last, dst_elements, dst->mutable_children(0));
      }
      return;
    }
    case ColumnKind::kTuple: {
      const auto& tuple = static_cast<const ColumnTuple&>(src);
      for (size_t i = 0; i < tuple.element_count(); ++i) {
        AppendResultRows(*tuple.element(i), begin, end, dst_rows,
                         dst->mutable_children(static_cast<int>(i)));
      }
      return;
    }
    case ColumnKind::kLowCardinality: {
      const auto& lc = static_cast<const ColumnLowCardinality&>(src);
      // A LowCardinality(Nullable) column's null map follows the same back-fill rule.
      bool with_nulls = false;
      if (lc.nullable()) {
        with_nulls = !dst->nulls().empty();
        for (size_t r = begin; r < end && !with_nulls; ++r) with_nulls = lc.IsNull(r);
        std::string* nulls = dst->mutable_nulls();
        if (with_nulls && nulls->size() < dst_rows) nulls->append(dst_rows - nulls->size(), '\0');
      }
      AppendLowCardinality(lc, begin, end, with_nulls, dst);
      return;
    }
    case ColumnKind::kVariant:
    case ColumnKind::kDynamic:
    case ColumnKind::kJson:
    case ColumnKind::kAggregateState:
      AppendTextRows(src, begin, end, dst_rows, dst);
      return;
  }
}

size_t EstimateResultBytes(const Column& src, size_t begin, size_t end) {
  if (begin >= end) return 0;
  const size_t rows = end - begin;
  switch (src.kind()) {
    case ColumnKind::kFixed:
      return rows * static_cast<const ColumnFixed&>(src).width();
    case ColumnKind::kString:
      return static_cast<const ColumnString&>(src).WireBytes(begin, end) + rows * 8;
    case ColumnKind::kNullable:
      return rows +
             EstimateResultBytes(*static_cast<const ColumnNullable&>(src).nested(), begin, end);
    case ColumnKind::kArray:
    case ColumnKind::kMap: {
      const auto& array = static_cast<const ColumnArray&>(src);
      return rows * 8 +
             EstimateResultBytes(*array.nested(), array.RowBegin(begin), array.Offset(end - 1));
    }
    case ColumnKind::kTuple: {
      const auto& tuple = static_cast<const ColumnTuple&>(src);
      size_t total = 0;
      for (size_t i = 0; i < tuple.element_count(); ++i) {
        total += EstimateResultBytes(*tuple.element(i), begin, end);
      }
      return total;
    }
    case ColumnKind::kLowCardinality: {
      const Column& dict = *static_cast<const ColumnLowCardinality&>(src).dictionary();
      const size_t keys = dict.Size();
      const size_t per_value = keys == 0 ? 0 : dict.ByteSize() / keys;
      return rows * (per_value + 1);
    }
    case ColumnKind::kVariant:
    case ColumnKind::kDynamic:
    case ColumnKind::kJson:
    case ColumnKind::kAggregateState: {
      // Their result form is text or bytes: the share of the column's memory.
      const size_t total = src.Size();
      return total == 0 ? 0 : src.ByteSize() / total * rows + rows * 8;
    }
  }
  return rows * 8;
}

void AppendResultBlock(const clickhouse::Block& src, size_t begin, size_t end, v1::Block* dst) {
  if (dst->columns_size() == 0) {
    for (const clickhouse::NamedColumn& c : src.columns()) {
      InitResultColumn(*c.column, c.name, dst->add_columns());
    }
  }
  const size_t dst_rows = dst->rows();
  for (size_t i = 0; i < src.column_count(); ++i) {
    AppendResultRows(*src.column(i).column, begin, end, dst_rows,
                     dst->mutable_columns(static_cast<int>(i)));
  }
  dst->set_rows(dst_rows + (end - begin));
}

}  // namespace chgate::proto_convert
