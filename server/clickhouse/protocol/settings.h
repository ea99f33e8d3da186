// Query settings as ClickHouse types them, for the settings chgate sends itself and those a caller
// may be allowed to send. Below protocol revision 54429 a setting's value travels in the binary
// form of its type, and the server reads it by the type it knows: a name it does not know, a value
// of another form or one its type refuses (an unknown enum value) makes it stop reading the Query
// packet in the middle and read the rest as new packets. So nothing is sent that is not in this
// catalog with a value its checker accepts (WriteQuery refuses it before writing a byte).
// Types and enum values are those of ClickHouse 18.16 (checked against a live 18.16 server by
// tests/integration/settings_differential_test.cc), which later servers keep.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace chgate::clickhouse {

enum class SettingType {
  kUInt,    // UInt64, Seconds, Milliseconds, MaxThreads: VarUInt below 54429
  kBool,    // 0/1 (also true/false): VarUInt
  kInt,     // Int64: zigzag VarUInt
  kFloat,   // decimal text: String
  kEnum,    // one of `values`, exactly: String
  kChar,    // exactly one byte: String
  kString,  // any text: String
};

struct SettingSpec {
  std::string_view name;
  SettingType type;
  // kEnum: the values the server accepts (case as it wants them).
  std::span<const std::string_view> values;
  // The type's name as a server's system.settings reports it (from ClickHouse 20.5 on), without a
  // "Setting" prefix: "UInt64", "Seconds", "OverflowMode", ...
  std::string_view server_type;
};

// chgate's knowledge of the setting `name`, or null.
const SettingSpec* FindSetting(std::string_view name);

// Every setting in the catalog, in name order.
std::span<const SettingSpec> AllSettings();

// `value` checked against `spec`; returns the form sent to the server (true/false become 1/0).
// Errors: InvalidArgument naming the setting, the value and what it needs.
absl::StatusOr<std::string> CheckSettingValue(const SettingSpec& spec, std::string_view value);

// Whether a server whose system.settings types `spec`'s setting as `server_type` reads values
// `spec` accepts the same way ("Setting" prefixes are ignored; an enum may also be a String).
bool ServerTypeAgrees(const SettingSpec& spec, std::string_view server_type);

}  // namespace chgate::clickhouse
