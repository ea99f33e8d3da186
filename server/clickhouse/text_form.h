// The text forms of native column values, over the column classes' accessors: ClickHouse's
// TabSeparated text (AppendTsvValue) and its JSON (AppendJsonValue). The column classes only hold
// and (de)serialize values; every scalar's text comes from text/value_text.h and JSON strings
// and objects from text/json.h, the code the SDK renders with too.
#pragma once

#include <cstddef>
#include <string>

#include "server/clickhouse/columns/column.h"

namespace chgate::clickhouse {

// Appends row `row` of `column` as ClickHouse prints it in TabSeparated output. `nested` is true
// inside arrays, tuples and maps, where strings, dates and enums are quoted and NULL is NULL
// (\N outside).
void AppendTsvValue(const Column& column, size_t row, bool nested, std::string* out);

// Appends row `row` of `column` as JSON (numbers and Bool bare, NULL as null, strings, dates and
// other text forms quoted, arrays as arrays, named tuples and maps as objects), as ClickHouse's
// JSON output writes it.
void AppendJsonValue(const Column& column, size_t row, std::string* out);

}  // namespace chgate::clickhouse
