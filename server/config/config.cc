#include "server/config/config.h"

#include <fstream>
#include <functional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace chgate::config {
namespace {

struct Option {
  std::string name;
  std::string default_text;
  std::string help;
  std::function<absl::Status(absl::string_view, Config*)> set;
};

absl::Status SetDuration(absl::string_view name, absl::string_view v, absl::Duration* out) {
  absl::Duration d;
  if (!absl::ParseDuration(v, &d) || d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": '", v, "' is not a positive duration (e.g. 5s, 250ms)"));
  }
  *out = d;
  return absl::OkStatus();
}

const std::vector<Option>& Options() {
  static const auto* options = new std::vector<Option>{
      {"endpoints", "127.0.0.1:9000", "ClickHouse native endpoints, host:port[,host:port...]",
       [](absl::string_view v, Config* c) -> absl::Status {
         auto eps = ParseEndpoints(v);
         if (!eps.ok()) return eps.status();
         c->endpoints = *std::move(eps);
         return absl::OkStatus();
       }},
      {"user", "default", "ClickHouse user",
       [](absl::string_view v, Config* c) {
         c->user = std::string(v);
         return absl::OkStatus();
       }},
      {"password-file", "", "file holding the ClickHouse password (trailing newline ignored)",
       [](absl::string_view v, Config* c) {
         c->password_file = std::string(v);
         return absl::OkStatus();
       }},
      {"database", "", "default database (empty: the user's default)",
       [](absl::string_view v, Config* c) {
         c->database = std::string(v);
         return absl::OkStatus();
       }},
      {"compression", "lz4", "block compression on the wire: none, lz4 or zstd",
       [](absl::string_view v, Config* c) -> absl::Status {
         if (v != "none" && v != "lz4" && v != "zstd") {
           return absl::InvalidArgumentError(
               absl::StrCat("--compression: '", v, "' is not one of none, lz4, zstd"));
         }
         c->compression = std::string(v);
         return absl::OkStatus();
       }},
      {"connect-timeout", "5s", "timeout for connecting and the handshake",
       [](absl::string_view v, Config* c) {
         return SetDuration("connect-timeout", v, &c->connect_timeout);
       }},
      {"read-timeout", "300s", "longest wait for data from ClickHouse",
       [](absl::string_view v, Config* c) { return SetDuration("read-timeout", v, &c->read_timeout); }},
      {"query", "", "run this SQL, print the result as TSV and exit",
       [](absl::string_view v, Config* c) {
         c->query = std::string(v);
         return absl::OkStatus();
       }},
  };
  return *options;
}

const Option* FindOption(absl::string_view name) {
  for (const Option& o : Options()) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

std::string EnvName(absl::string_view option) {
  return absl::StrCat("CHGATE_", absl::AsciiStrToUpper(absl::StrReplaceAll(option, {{"-", "_"}})));
}

}  // namespace

absl::StatusOr<std::vector<Endpoint>> ParseEndpoints(absl::string_view text) {
  std::vector<Endpoint> result;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    Endpoint ep;
    size_t colon = part.rfind(':');
    if (colon == absl::string_view::npos || (part.front() == '[' && part.back() == ']')) {
      ep.host = std::string(part);
    } else {
      ep.host = std::string(part.substr(0, colon));
      uint32_t port = 0;
      if (!absl::SimpleAtoi(part.substr(colon + 1), &port) || port == 0 || port > 65535) {
        return absl::InvalidArgumentError(absl::StrCat("bad port in endpoint '", part, "'"));
      }
      ep.port = static_cast<uint16_t>(port);
    }
    if (absl::StartsWith(ep.host, "[") && absl::EndsWith(ep.host, "]")) {
      ep.host = ep.host.substr(1, ep.host.size() - 2);
    }
    if (ep.host.empty()) return absl::InvalidArgumentError(absl::StrCat("empty host in '", part, "'"));
    result.push_back(std::move(ep));
  }
  if (result.empty()) return absl::InvalidArgumentError("no ClickHouse endpoint given");
  return result;
}

absl::StatusOr<Config> Parse(int argc, const char* const* argv, const char* const* envp) {
  Config config;
  // Environment first, so flags override it.
  for (const char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
    absl::string_view entry(*e);
    if (!absl::StartsWith(entry, "CHGATE_")) continue;
    size_t eq = entry.find('=');
    if (eq == absl::string_view::npos) continue;
    for (const Option& o : Options()) {
      if (EnvName(o.name) == entry.substr(0, eq)) {
        absl::Status s = o.set(entry.substr(eq + 1), &config);
        if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(EnvName(o.name), ": ", s.message()));
      }
    }
  }
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg(argv[i]);
    if (arg == "--help" || arg == "-h") {
      config.help = true;
      continue;
    }
    if (!absl::ConsumePrefix(&arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    absl::string_view name = arg, value;
    bool has_value = false;
    if (size_t eq = arg.find('='); eq != absl::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    const Option* option = FindOption(name);
    if (option == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown option --", name, " (see --help)"));
    }
    if (!has_value) {
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      value = argv[++i];
    }
    if (absl::Status s = option->set(value, &config); !s.ok()) return s;
  }
  if (!config.password_file.empty()) {
    std::ifstream file(config.password_file);
    if (!file) {
      return absl::NotFoundError(
          absl::StrCat("--password-file: cannot read '", config.password_file, "'"));
    }
    std::stringstream ss;
    ss << file.rdbuf();
    config.password = ss.str();
    while (!config.password.empty() &&
           (config.password.back() == '\n' || config.password.back() == '\r')) {
      config.password.pop_back();
    }
  }
  return config;
}

std::string Usage() {
  std::string out =
      "Usage: chgate [options]\n"
      "Connects to ClickHouse over the native protocol, reports the server's version and\n"
      "negotiated protocol revision, and runs --query if given (result as TSV on stdout).\n\n"
      "Options (each also read from the environment variable shown; flags win):\n";
  for (const Option& o : Options()) {
    absl::StrAppend(&out, "  --", o.name, "=VALUE  [", EnvName(o.name), "]\n      ", o.help,
                    " (default: ", o.default_text.empty() ? "\"\"" : o.default_text, ")\n");
  }
  absl::StrAppend(&out, "  --help\n      print this text\n");
  return out;
}

}  // namespace chgate::config
