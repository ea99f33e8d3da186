#include "client/cli/flags.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/sdk/internal/strings.h"

namespace chgate::cli {

using client::internal::Sv;

std::string ParsedFlags::Get(std::string_view name, std::string fallback) const {
  auto it = values_.find(std::string(name));
  if (it == values_.end() || it->second.empty()) return fallback;
  return it->second.back();
}

std::vector<std::string> ParsedFlags::All(std::string_view name) const {
  auto it = values_.find(std::string(name));
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

absl::StatusOr<ParsedFlags> ParseFlags(const std::vector<FlagSpec>& specs,
                                       const std::vector<std::string>& args) {
  ParsedFlags parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      parsed.positional_.insert(parsed.positional_.end(), args.begin() + static_cast<long>(i) + 1,
                                args.end());
      break;
    }
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0 || arg == "-") {
      if (!arg.empty() && arg[0] == '-' && arg != "-") {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown option '", arg, "' (options are spelled --name)"));
      }
      parsed.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      has_value = true;
    }
    auto spec =
        std::find_if(specs.begin(), specs.end(), [&](const FlagSpec& s) { return s.name == name; });
    if (spec == specs.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown option --", name));
    }
    if (spec->value_name.empty()) {
      if (has_value && value != "true" && value != "false") {
        return absl::InvalidArgumentError(absl::StrCat("option --", name, " takes no value"));
      }
      if (!has_value) value = "true";
    } else if (!has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("option --", name, " needs a value (", spec->value_name, ")"));
      }
      value = args[++i];
    }
    std::vector<std::string>& values = parsed.values_[name];
    if (!values.empty() && !spec->repeated) {
      return absl::InvalidArgumentError(absl::StrCat("option --", name, " given twice"));
    }
    values.push_back(std::move(value));
  }
  return parsed;
}

std::string FormatFlagsHelp(const std::vector<FlagSpec>& specs) {
  std::vector<std::string> heads;
  size_t width = 0;
  for (const FlagSpec& spec : specs) {
    std::string head = absl::StrCat("  --", spec.name);
    if (!spec.value_name.empty()) absl::StrAppend(&head, " ", spec.value_name);
    width = std::max(width, head.size());
    heads.push_back(std::move(head));
  }
  std::string out;
  for (size_t i = 0; i < specs.size(); ++i) {
    absl::StrAppend(&out, heads[i], std::string(width + 3 - heads[i].size(), ' '), specs[i].help,
                    specs[i].repeated ? " (repeatable)" : "", "\n");
  }
  return out;
}

absl::StatusOr<absl::Duration> ParseDurationFlag(std::string_view flag, std::string_view text) {
  absl::Duration d;
  int64_t seconds = 0;
  if (absl::SimpleAtoi(Sv(text), &seconds)) {
    d = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(Sv(text), &d)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", Sv(flag), ": '", Sv(text), "' is not a duration (e.g. 500ms, 30s, 5m)"));
  }
  if (d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("--", Sv(flag), " must be positive"));
  }
  return d;
}

absl::StatusOr<uint64_t> ParseCountFlag(std::string_view flag, std::string_view text,
                                        uint64_t min) {
  uint64_t v = 0;
  if (!absl::SimpleAtoi(Sv(text), &v) || v < min) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", Sv(flag), ": '", Sv(text), "' is not an integer >= ", min));
  }
  return v;
}

absl::StatusOr<std::pair<std::string, std::string>> ParseKeyValueFlag(std::string_view flag,
                                                                      std::string_view text) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", Sv(flag), ": '", Sv(text), "' is not of the form name=value"));
  }
  return std::make_pair(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
}

absl::StatusOr<std::vector<std::string>> ParseListFlag(std::string_view flag,
                                                       std::string_view text) {
  std::vector<std::string> out = absl::StrSplit(Sv(text), ',');
  for (std::string& part : out) {
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", Sv(flag), ": empty name in '", Sv(text), "'"));
    }
  }
  return out;
}

}  // namespace chgate::cli
