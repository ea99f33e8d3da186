#include "client/cli/flags.h"

#include <algorithm>

#include "CLI/CLI.hpp"
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

namespace {

// Whether `text` is one of `specs` ("--name" or "--name=value").
bool IsOption(const std::vector<FlagSpec>& specs, const std::string& text) {
  if (text.rfind("--", 0) != 0) return false;
  const std::string name = text.substr(2, text.find('=') - 2);
  return std::any_of(specs.begin(), specs.end(), [&](const FlagSpec& s) { return s.name == name; });
}

// The positional arguments among what CLI11 left over (everything after "--" is positional);
// InvalidArgument for an unknown option.
absl::StatusOr<std::vector<std::string>> Positional(const std::vector<std::string>& extras) {
  std::vector<std::string> positional;
  for (size_t i = 0; i < extras.size(); ++i) {
    const std::string& arg = extras[i];
    if (arg == "--") {
      positional.insert(positional.end(), extras.begin() + static_cast<long>(i) + 1, extras.end());
      break;
    }
    if (arg.rfind("--", 0) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown option --", arg.substr(2, arg.find('=') - 2)));
    }
    if (arg.size() > 1 && arg[0] == '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown option '", arg, "' (options are spelled --name)"));
    }
    positional.push_back(arg);
  }
  return positional;
}

// Checks the values given for `spec`: a flag's are true/false, an option's are not another
// option, and only a repeated option is given more than once.
absl::Status CheckValues(const std::vector<FlagSpec>& specs, const FlagSpec& spec,
                         const std::vector<std::string>& values) {
  for (const std::string& v : values) {
    if (spec.value_name.empty() && v != "true" && v != "false") {
      return absl::InvalidArgumentError(absl::StrCat("option --", spec.name, " takes no value"));
    }
    if (!spec.value_name.empty() && IsOption(specs, v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("option --", spec.name, " needs a value (", spec.value_name, "), not ", v));
    }
  }
  if (values.size() > 1 && !spec.repeated) {
    return absl::InvalidArgumentError(absl::StrCat("option --", spec.name, " given twice"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ParsedFlags> ParseFlags(const std::vector<FlagSpec>& specs,
                                       const std::vector<std::string>& args) {
  // CLI11 parses; the checks it does not make (a value that is really the next option, a bare
  // "-x") and the wording of its errors are ours.
  CLI::App app;
  app.set_help_flag();  // --help is one of the specs where a command has it
  app.allow_extras();   // unknown options and positional arguments are sorted out below
  app.positionals_at_end(false);
  std::vector<std::pair<const FlagSpec*, CLI::Option*>> options;
  for (const FlagSpec& spec : specs) {
    const std::string flag = absl::StrCat("--", spec.name);
    CLI::Option* option = spec.value_name.empty() ? app.add_flag(flag) : app.add_option(flag);
    option->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    options.emplace_back(&spec, option);
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11's order
  try {
    app.parse(reversed);
  } catch (const CLI::ArgumentMismatch& e) {
    // An option with a value at the end of the line ("--name: 1 required ... missing").
    const std::string what = e.what();
    for (const FlagSpec& spec : specs) {
      if (!spec.value_name.empty() && what.rfind(absl::StrCat("--", spec.name, ":"), 0) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("option --", spec.name, " needs a value (", spec.value_name, ")"));
      }
    }
    return absl::InvalidArgumentError(e.what());
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  ParsedFlags parsed;
  absl::StatusOr<std::vector<std::string>> positional = Positional(app.remaining());
  if (!positional.ok()) return positional.status();
  parsed.positional_ = *std::move(positional);
  for (const auto& [spec, option] : options) {
    if (option->count() == 0) continue;
    std::vector<std::string> values = option->results();
    if (absl::Status st = CheckValues(specs, *spec, values); !st.ok()) return st;
    parsed.values_[spec->name] = std::move(values);
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
                    specs[i].default_text.empty() ? "" : " (default: ", specs[i].default_text,
                    specs[i].default_text.empty() ? "" : ")",
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
