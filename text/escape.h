// ClickHouse's backslash escapes, as in TabSeparated text and inside quoted literals (type names,
// query parameters): shared by the server and the SDK.
#pragma once

#include <string>
#include <string_view>

namespace chgate::text {

// Appends `s` with ClickHouse's backslash escapes (\\ \' \n \t \r \b \f \0).
void AppendEscaped(std::string_view s, std::string* out);
// Appends `s` as a single-quoted literal with backslash escapes.
void AppendQuoted(std::string_view s, std::string* out);
// The character a backslash escape `\e` stands for (`n` -> newline; unknown ones stand for
// themselves, as in ClickHouse).
char UnescapeChar(char e);

}  // namespace chgate::text
