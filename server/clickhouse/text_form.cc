#include "server/clickhouse/text_form.h"

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
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
#include "text/escape.h"
#include "text/json.h"
#include "text/value_text.h"

namespace chgate::clickhouse {
namespace {

void AppendNullText(bool nested, std::string* out) { out->append(nested ? "NULL" : "\\N"); }

// Bytes as a TabSeparated value: escaped at the top level, quoted inside composite values.
void AppendTextTsv(std::string_view bytes, bool nested, std::string* out) {
  if (nested) {
    text::AppendQuoted(bytes, out);
  } else {
    AppendTsvEscaped(bytes, out);
  }
}

// An Array as [a,b], a Map as {k:v}, elements quoted as nested values.
void AppendArrayTsv(const ColumnArray& c, size_t row, std::string* out) {
  const auto begin = static_cast<size_t>(c.RowBegin(row));
  const auto end = static_cast<size_t>(c.Offset(row));
  if (c.is_map()) {
    const auto& pairs = static_cast<const ColumnTuple&>(*c.nested());
    out->push_back('{');
    for (size_t i = begin; i < end; ++i) {
      if (i != begin) out->push_back(',');
      AppendTsvValue(*pairs.element(0), i, true, out);
      out->push_back(':');
      AppendTsvValue(*pairs.element(1), i, true, out);
    }
    out->push_back('}');
    return;
  }
  out->push_back('[');
  for (size_t i = begin; i < end; ++i) {
    if (i != begin) out->push_back(',');
    AppendTsvValue(*c.nested(), i, true, out);
  }
  out->push_back(']');
}

// A Dynamic value: one in the shared variant is decoded first.
void AppendDynamicTsv(const ColumnDynamic& c, size_t row, bool nested, std::string* out) {
  if (!c.IsShared(row)) {
    AppendTsvValue(c.variant(), row, nested, out);
    return;
  }
  const auto& values = static_cast<const ColumnString&>(*c.variant().alternative(c.shared_index()));
  absl::StatusOr<ColumnPtr> value =
      DecodeBinaryValue(values.At(static_cast<size_t>(c.variant().offset(row))));
  // Checked when loaded; only values appended through the API can fail here.
  if (value.ok()) {
    AppendTsvValue(**value, 0, nested, out);
  } else {
    AppendNullText(nested, out);
  }
}

// An Array as a JSON array, a Map as a JSON object (keys as their text).
void AppendJsonArrayOrMap(const Column& column, size_t row, std::string* out) {
  const auto& c = static_cast<const ColumnArray&>(column);
  const size_t begin = static_cast<size_t>(c.RowBegin(row));
  const size_t end = static_cast<size_t>(c.Offset(row));
  if (column.kind() == ColumnKind::kArray) {
    out->push_back('[');
    for (size_t i = begin; i < end; ++i) {
      if (i != begin) out->push_back(',');
      AppendJsonValue(*c.nested(), i, out);
    }
    out->push_back(']');
    return;
  }
  const auto& pairs = static_cast<const ColumnTuple&>(*c.nested());
  out->push_back('{');
  for (size_t i = begin; i < end; ++i) {
    if (i != begin) out->push_back(',');
    std::string key;
    AppendTsvValue(*pairs.element(0), i, false, &key);
    text::AppendClickHouseJsonString(key, out);
    out->push_back(':');
    AppendJsonValue(*pairs.element(1), i, out);
  }
  out->push_back('}');
}

// A named Tuple as a JSON object, an unnamed one as a JSON array.
void AppendJsonTuple(const Column& column, size_t row, std::string* out) {
  const auto& c = static_cast<const ColumnTuple&>(column);
  const bool named = !column.type().args.empty() && !column.type().args[0].element_name.empty();
  out->push_back(named ? '{' : '[');
  for (size_t i = 0; i < c.element_count(); ++i) {
    if (i != 0) out->push_back(',');
    if (named) {
      text::AppendClickHouseJsonString(column.type().args[i].element_name, out);
      out->push_back(':');
    }
    AppendJsonValue(*c.element(i), row, out);
  }
  out->push_back(named ? '}' : ']');
}

// A Dynamic value as its type's JSON (a value in the shared variant decoded first).
void AppendJsonDynamic(const Column& column, size_t row, std::string* out) {
  const auto& c = static_cast<const ColumnDynamic&>(column);
  if (c.IsNull(row)) {
    out->append("null");
  } else if (c.IsShared(row)) {
    const auto& values =
        static_cast<const ColumnString&>(*c.variant().alternative(c.shared_index()));
    absl::StatusOr<ColumnPtr> value =
        DecodeBinaryValue(values.At(static_cast<size_t>(c.variant().offset(row))));
    if (value.ok()) {
      AppendJsonValue(**value, 0, out);
    } else {
      out->append("null");
    }
  } else {
    AppendJsonValue(*c.variant().alternative(c.variant().discriminator(row)),
                    static_cast<size_t>(c.variant().offset(row)), out);
  }
}

}  // namespace

void AppendTsvValue(const Column& column, size_t row, bool nested, std::string* out) {
  switch (column.kind()) {
    case ColumnKind::kFixed: {
      const auto& c = static_cast<const ColumnFixed&>(column);
      text::AppendTsvText(c.params(), c.RawAt(row), nested, out);
      return;
    }
    case ColumnKind::kString:
      AppendTextTsv(static_cast<const ColumnString&>(column).At(row), nested, out);
      return;
    case ColumnKind::kNullable: {
      const auto& c = static_cast<const ColumnNullable&>(column);
      if (c.IsNull(row)) return AppendNullText(nested, out);
      AppendTsvValue(*c.nested(), row, nested, out);
      return;
    }
    case ColumnKind::kArray:
    case ColumnKind::kMap:
      AppendArrayTsv(static_cast<const ColumnArray&>(column), row, out);
      return;
    case ColumnKind::kTuple: {
      const auto& c = static_cast<const ColumnTuple&>(column);
      out->push_back('(');
      for (size_t i = 0; i < c.element_count(); ++i) {
        if (i != 0) out->push_back(',');
        AppendTsvValue(*c.element(i), row, true, out);
      }
      out->push_back(')');
      return;
    }
    case ColumnKind::kLowCardinality: {
      const auto& c = static_cast<const ColumnLowCardinality&>(column);
      if (c.IsNull(row)) return AppendNullText(nested, out);
      AppendTsvValue(*c.dictionary(), static_cast<size_t>(c.Index(row)), nested, out);
      return;
    }
    case ColumnKind::kVariant: {
      const auto& c = static_cast<const ColumnVariant&>(column);
      if (c.IsNull(row)) return AppendNullText(nested, out);
      AppendTsvValue(*c.alternative(c.discriminator(row)), static_cast<size_t>(c.offset(row)),
                     nested, out);
      return;
    }
    case ColumnKind::kDynamic:
      AppendDynamicTsv(static_cast<const ColumnDynamic&>(column), row, nested, out);
      return;
    case ColumnKind::kJson:
      AppendTextTsv(static_cast<const ColumnJson&>(column).Text(row), nested, out);
      return;
    case ColumnKind::kAggregateState:
      AppendTextTsv(static_cast<const ColumnAggregateState&>(column).State(row), nested, out);
      return;
  }
}

void AppendJsonValue(const Column& column, size_t row, std::string* out) {
  switch (column.kind()) {
    case ColumnKind::kFixed: {
      const auto& c = static_cast<const ColumnFixed&>(column);
      text::AppendJsonText(c.params(), c.RawAt(row), out);
      return;
    }
    case ColumnKind::kString:
      text::AppendClickHouseJsonString(static_cast<const ColumnString&>(column).At(row), out);
      return;
    case ColumnKind::kNullable: {
      const auto& c = static_cast<const ColumnNullable&>(column);
      if (c.IsNull(row)) {
        out->append("null");
      } else {
        AppendJsonValue(*c.nested(), row, out);
      }
      return;
    }
    case ColumnKind::kArray:
    case ColumnKind::kMap:
      AppendJsonArrayOrMap(column, row, out);
      return;
    case ColumnKind::kTuple:
      AppendJsonTuple(column, row, out);
      return;
    case ColumnKind::kLowCardinality: {
      const auto& c = static_cast<const ColumnLowCardinality&>(column);
      if (c.IsNull(row)) {
        out->append("null");
      } else {
        AppendJsonValue(*c.dictionary(), static_cast<size_t>(c.Index(row)), out);
      }
      return;
    }
    case ColumnKind::kVariant: {
      const auto& c = static_cast<const ColumnVariant&>(column);
      if (c.IsNull(row)) {
        out->append("null");
      } else {
        AppendJsonValue(*c.alternative(c.discriminator(row)), static_cast<size_t>(c.offset(row)),
                        out);
      }
      return;
    }
    case ColumnKind::kDynamic:
      AppendJsonDynamic(column, row, out);
      return;
    case ColumnKind::kJson:
      out->append(static_cast<const ColumnJson&>(column).Text(row));
      return;
    case ColumnKind::kAggregateState: {
      std::string text;
      AppendTsvValue(column, row, false, &text);
      text::AppendClickHouseJsonString(text, out);
      return;
    }
  }
}

}  // namespace chgate::clickhouse
