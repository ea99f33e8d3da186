// chgate-cli's command lines, parsed by CLI11: `--name value`, `--name=value`, boolean `--name`
// (or `--name=true|false`), repeatable flags, `--` ending the flags, and positional arguments in
// between. Plain values and functions, thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace chgate::cli {

struct FlagSpec {
  std::string name;        // without the leading "--"
  std::string value_name;  // e.g. "ADDR"; empty for a boolean flag
  std::string help;        // one line, without the default
  // The default as shown in help ("" = none shown). Written from the argument structs' own
  // initializers (e.g. absl::StrCat(InsertArgs{}.batch_rows)), so the default lives there only.
  std::string default_text;
  bool repeated = false;  // may be given more than once
};

// What ParseFlags found.
class ParsedFlags {
 public:
  bool Has(std::string_view name) const { return values_.count(std::string(name)) > 0; }
  // A boolean flag given as itself or =true (its last value): `--tls=false` is off.
  bool On(std::string_view name) const { return Get(name) == "true"; }
  // The (last) value of `name`, or `fallback` when it was not given.
  std::string Get(std::string_view name, std::string fallback = "") const;
  // Every value of a repeated flag, in order.
  std::vector<std::string> All(std::string_view name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend absl::StatusOr<ParsedFlags> ParseFlags(const std::vector<FlagSpec>&,
                                                const std::vector<std::string>&);
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

// Parses `args` against `specs`. Returns InvalidArgument for an unknown flag, a missing value (or
// the next option where a value belongs), a value other than true/false given to a boolean flag,
// or a non-repeatable flag given twice.
absl::StatusOr<ParsedFlags> ParseFlags(const std::vector<FlagSpec>& specs,
                                       const std::vector<std::string>& args);

// The flags as help text: one "  --name VALUE   help" line each, aligned.
std::string FormatFlagsHelp(const std::vector<FlagSpec>& specs);

// Helpers for flag values; each returns InvalidArgument naming the flag.
// Durations as "250ms", "30s", "5m", "1h" (absl::ParseDuration; a bare number means seconds).
absl::StatusOr<absl::Duration> ParseDurationFlag(std::string_view flag, std::string_view text);
// Non-negative integers, at least `min`.
absl::StatusOr<uint64_t> ParseCountFlag(std::string_view flag, std::string_view text, uint64_t min);
// "k=v" (the value may contain '=').
absl::StatusOr<std::pair<std::string, std::string>> ParseKeyValueFlag(std::string_view flag,
                                                                      std::string_view text);
// "a,b,c" (empty parts are an error).
absl::StatusOr<std::vector<std::string>> ParseListFlag(std::string_view flag,
                                                       std::string_view text);

}  // namespace chgate::cli
