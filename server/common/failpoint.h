// Failpoints: named places where chgate can be made to die as a `kill -9` would, so crash tests
// can stop it exactly between two steps (after an fsync and before the ack, after ClickHouse
// committed and before the spool recorded it), or where a thread can be made to hang, as one
// wedged in a system call would (Stall), so the liveness watchdog can be tried. Off unless the
// environment variable CHGATE_FAILPOINTS lists "name=probability" pairs (comma-separated,
// probability in (0, 1]), read once at the first pass; each pass through an armed point then
// fires with that probability: a line on stderr naming the point, then SIGKILL to the process
// itself (Hit) or a sleep that never ends (Stall). Unarmed, a pass costs one load of a static.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <string_view>

namespace chgate::failpoint {

namespace internal {
inline const std::map<std::string, double, std::less<>>& Armed() {
  static const auto* armed = [] {
    auto* points = new std::map<std::string, double, std::less<>>();
    const char* env = std::getenv("CHGATE_FAILPOINTS");
    std::string_view text = env == nullptr ? "" : env;
    while (!text.empty()) {
      const size_t comma = text.find(',');
      const std::string_view item = text.substr(0, comma);
      text = comma == text.npos ? "" : text.substr(comma + 1);
      const size_t eq = item.find('=');
      if (eq == item.npos) continue;
      const double p = std::strtod(std::string(item.substr(eq + 1)).c_str(), nullptr);
      if (p > 0) (*points)[std::string(item.substr(0, eq))] = p;
    }
    return points;
  }();
  return *armed;
}

// Whether the armed point `name` fires on this pass.
inline bool Fires(std::string_view name) {
  const auto& armed = Armed();
  if (armed.empty()) return false;
  auto it = armed.find(name);
  if (it == armed.end()) return false;
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0, 1)(rng) < it->second;
}
}  // namespace internal

inline void Hit(std::string_view name) {
  if (!internal::Fires(name)) return;
  std::fprintf(stderr, "chgate: failpoint %.*s: killing the process\n",
               static_cast<int>(name.size()), name.data());
  std::fflush(stderr);
  ::kill(::getpid(), SIGKILL);
  std::_Exit(137);
}

// The calling thread hangs for good when the point fires.
inline void Stall(std::string_view name) {
  if (!internal::Fires(name)) return;
  std::fprintf(stderr, "chgate: failpoint %.*s: this thread hangs\n", static_cast<int>(name.size()),
               name.data());
  std::fflush(stderr);
  while (true) ::pause();
}

}  // namespace chgate::failpoint
