// The text of ClickHouse values, as the server prints them in TabSeparated output, shared by the
// server (column FormatValue, error messages) and the SDK (TSV, CSV and JSON output): shortest
// floats, integers of any width, decimals, dates, times, UUIDs, IP addresses, and the text of any
// fixed-width value from its wire bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "text/type_facts.h"

namespace chgate::text {

// Shortest round-trip text of a float, in ClickHouse's notation (`1e100`, `0.000001`, `inf`,
// `nan`, `-0`).
void AppendFloat(double v, std::string* out);
void AppendFloat(float v, std::string* out);
// The Float32 value of a BFloat16 (its two wire bytes, little-endian).
float BFloat16ToFloat(const char* p);

// Decimal text of a little-endian two's-complement (or unsigned) integer of any width.
void AppendWideInteger(const char* p, size_t width, bool is_signed, std::string* out);
// The same with a decimal point `scale` digits from the right (ClickHouse's Decimal text).
void AppendDecimal(const char* p, size_t width, int scale, std::string* out);

// `YYYY-MM-DD` of days since 1970-01-01.
void AppendDate(int64_t days, std::string* out);
// `YYYY-MM-DD hh:mm:ss` of Unix seconds in `zone`.
void AppendDateTime(int64_t seconds, const absl::TimeZone& zone, std::string* out);
// The same with `scale` fraction digits, from ticks of 10^-scale seconds.
void AppendDateTime64(int64_t ticks, int scale, const absl::TimeZone& zone, std::string* out);
// `[-]hhh:mm:ss` of seconds (hours at least two digits, saturated at 999:59:59).
void AppendTime(int64_t seconds, std::string* out);
// The same with `scale` fraction digits, from ticks of 10^-scale seconds.
void AppendTime64(int64_t ticks, int scale, std::string* out);
// Converts `n` UUIDs between RFC 4122 (text) order and ClickHouse's wire layout (two
// little-endian UInt64 halves, high half first); the same swap goes both ways. `in` and `out`
// must not overlap.
void SwapUuidHalves(const char* in, size_t n, char* out);
// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` of 16 bytes in RFC 4122 (text) order.
void AppendUuid(const unsigned char* rfc, std::string* out);
// Dotted quad of an IPv4 address held as a number.
void AppendIpv4(uint32_t address, std::string* out);
// RFC 5952 text of 16 bytes in network order (`::ffff:1.2.3.4` for mapped IPv4).
void AppendIpv6(const unsigned char* address, std::string* out);

// Splits ticks of 10^-scale seconds into whole seconds (rounded down) and the remaining ticks.
void SplitTicks(int64_t ticks, int scale, int64_t* seconds, int64_t* fraction);

// The plain text of one value of `type` from its native wire bytes (UUID as two little-endian
// halves): no quotes and no escapes, so FixedString bytes and enum names are appended as they are
// (see NeedsEscaping). An enum value outside the type prints as its number; Nothing as `\N`.
void AppendPlainText(const FixedType& type, const char* wire, std::string* out);
// Whether a kind's plain text is arbitrary bytes that TSV/CSV/JSON output must escape (FixedString
// and enum names).
bool NeedsEscaping(FixedKind kind);
// Whether ClickHouse single-quotes a kind's values inside an Array, Tuple or Map (dates, times,
// UUIDs, addresses, enum names, FixedString).
bool QuotedWhenNested(FixedKind kind);
// The TabSeparated text ClickHouse prints for the value: plain text, escaped when NeedsEscaping,
// single-quoted when `nested` and QuotedWhenNested (NULL for Nothing inside containers).
void AppendTsvText(const FixedType& type, const char* wire, bool nested, std::string* out);
// Appends the value as ClickHouse's JSON output writes it: integers, Decimal and Bool bare; finite
// floats bare and nan/inf as null (without quote_denormals); Nothing as null; FixedString as a
// string of its bytes; dates, times, UUID, IP and Enum as strings of their text.
void AppendJsonText(const FixedType& type, const char* wire, std::string* out);

// Loads a little-endian integer of `width` bytes: LoadSigned takes 1, 2, 4 or 8, LoadUnsigned
// any width up to 8.
int64_t LoadSigned(const char* p, size_t width);
uint64_t LoadUnsigned(const char* p, size_t width);

}  // namespace chgate::text
