// JSON string text, shared by the server (log lines) and the SDK (query rows as JSON).
#pragma once

#include <string>
#include <string_view>

namespace chgate::text {

// Appends `bytes` as a JSON string, quotes included: `"` and `\` escaped, \n \r \t \b \f by
// name, other control characters as \u00XX, well-formed UTF-8 as it is, and every byte that does
// not start a well-formed sequence (utf8.h) as \ufffd, so the output is valid JSON whatever the
// input.
void AppendJsonString(std::string_view bytes, std::string* out);

// ClickHouse's own JSON string output (its defaults): the same escapes plus `/` as `\/`, and bytes
// that are not well-formed UTF-8 kept as they are. For JSON text that must match the server's.
void AppendClickHouseJsonString(std::string_view bytes, std::string* out);

}  // namespace chgate::text
