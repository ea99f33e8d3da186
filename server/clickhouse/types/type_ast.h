// Type names are parsed and printed by the shared text library (text/type_name.h); this module
// uses them under its own namespace, with ClickHouse's backslash escapes (text/escape.h) for the
// type names, values and parameters it prints and reads.
#pragma once

#include "text/escape.h"
#include "text/type_name.h"

namespace chgate::clickhouse {

using text::AppendEscaped;
using text::AppendQuoted;
using text::FormatTypeName;
using text::ParseTypeName;
using text::TypeAst;
using text::UnescapeChar;

}  // namespace chgate::clickhouse
