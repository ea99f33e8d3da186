// Structured logging. Every line is one event: time (UTC, RFC 3339 with milliseconds), level, the
// component that logged it ("pool", "ingest", ...), a fixed message and typed fields (table,
// endpoint, batch_id, ...), written as text or as one JSON object per line (spdlog underneath;
// nothing here exposes it). Components log through a `log::Component`; main installs the process's
// Logger once at start (SetLogger), before any other thread runs.
//
// Events that repeat (a batch retried, a caller refused) go through Component::Throttled: the first
// event of a class is written at once, later ones at most once per repeat interval, each with the
// count of those suppressed since the previous line; a class whose interval ends with suppressed
// events gets a summary line from the Logger's sweeper. Never put secrets (passwords, tokens, key
// material) in a message or field. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace chgate::log {

enum class Level { kDebug, kInfo, kWarn, kError };
enum class Format { kText, kJson };

// "debug" | "info" | "warn" | "error" -> Level; nullopt for anything else.
std::optional<Level> ParseLevel(std::string_view text);
// "text" | "json" -> Format; nullopt for anything else.
std::optional<Format> ParseFormat(std::string_view text);
// "debug", "info", "warn", "error".
std::string_view LevelName(Level level);

// One field of an event: a key (a fixed identifier such as "table") and a value. Strings are
// quoted and escaped as the format needs; integers, floating point numbers and booleans are
// written bare (JSON numbers and booleans); durations as text ("1.5s").
class Field {
 public:
  enum class Kind { kString, kNumber, kBool };

  Field(std::string_view key, std::string_view value)
      : key_(key), value_(value), kind_(Kind::kString) {}
  Field(std::string_view key, const char* value) : Field(key, std::string_view(value)) {}
  Field(std::string_view key, const std::string& value) : Field(key, std::string_view(value)) {}
  Field(std::string_view key, absl::string_view value)
      : Field(key, std::string_view(value.data(), value.size())) {}
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Field(std::string_view key, T value)
      : key_(key), value_(absl::StrCat(value)), kind_(Kind::kNumber) {}
  Field(std::string_view key, bool value)
      : key_(key), value_(value ? "true" : "false"), kind_(Kind::kBool) {}
  // Not finite (NaN, infinity): written as a string, JSON has no such number.
  Field(std::string_view key, double value);
  Field(std::string_view key, absl::Duration value)
      : key_(key), value_(absl::FormatDuration(value)), kind_(Kind::kString) {}

  const std::string& key() const { return key_; }
  const std::string& value() const { return value_; }
  Kind kind() const { return kind_; }

 private:
  std::string key_;
  std::string value_;
  Kind kind_;
};

// Fields of one event: a braced list (`{{"table", t}, {"rows", n}}`) or a vector.
using Fields = absl::Span<const Field>;

// Repeats of a throttled event that were not written.
struct Suppressed {
  uint64_t count = 0;
  absl::Duration window;  // since the previous line of the class
  // For a summary written by the sweeper: when the event it shows happened (it may be seconds
  // before the line). InfinitePast otherwise.
  absl::Time last_at = absl::InfinitePast();
};

// The part of a line after time and level, for `format`. Text:
//   [pool] endpoint down endpoint=a:9000 error="connect: refused" (3 similar suppressed in the
//   last 10s)
// JSON (members without braces; the Logger's line pattern adds time, level and the braces):
//   "component":"pool","msg":"endpoint down","endpoint":"a:9000",...,"suppressed":3,...
// Text values are quoted when empty or holding spaces, quotes, '=', backslashes, control bytes or
// invalid UTF-8, which are escaped (\n, \", \xHH), so every event stays on one line; JSON strings
// are escaped per RFC 8259, invalid UTF-8 becoming U+FFFD. A `suppressed.count` > 0 adds the count
// of suppressed repeats, the time they span and, for a summary, when the shown one happened (text:
// "..., the last at <time>)"; JSON: "suppressed", "suppressed_window", "last_at").
std::string FormatPayload(Format format, std::string_view component, std::string_view message,
                          absl::Span<const Field> fields, const Suppressed& suppressed = {});

struct LoggerOptions {
  Level level = Level::kInfo;  // events below it are neither written nor counted
  Format format = Format::kText;
  // Within this interval, repeats of a throttled event class are counted instead of written.
  absl::Duration repeat_interval = absl::Seconds(10);
  // Where lines go; null: stderr.
  std::ostream* out = nullptr;
  // Time of each event; null: absl::Now. Tests inject a fake clock.
  std::function<absl::Time()> clock;
  // How often a background thread writes the summaries of throttled classes whose interval ended
  // with suppressed events; zero: no thread (the owner calls Sweep()).
  absl::Duration sweep_interval = absl::Seconds(1);
};

class Logger {
 public:
  explicit Logger(LoggerOptions options);
  // Finish(), then releases the sink.
  ~Logger();
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  bool Enabled(Level level) const { return level >= options_.level; }
  const LoggerOptions& options() const { return options_; }

  // Writes one event (when its level is enabled).
  void Write(Level level, std::string_view component, std::string_view message,
             absl::Span<const Field> fields);
  // Writes the event if it is the first of its class (component, message, key) or the class's
  // last line is at least repeat_interval old, adding the count of repeats suppressed since;
  // otherwise counts it and keeps it for the summary.
  void WriteThrottled(Level level, std::string_view component, std::string_view message,
                      std::string_view key, absl::Span<const Field> fields);
  // Writes a summary line (the latest suppressed event with the count) for every class whose
  // interval ended with suppressed events, and forgets idle classes. `all`: every class with
  // suppressed events, interval ended or not (at exit).
  void Sweep(bool all = false);
  // Stops the sweeper thread and writes every pending summary (at exit). Events are still written
  // afterwards; their repeats are summarized only by the next event of their class.
  void Finish();

 private:
  struct Impl;
  absl::Time Now() const;
  void Emit(absl::Time time, Level level, std::string_view component, std::string_view message,
            absl::Span<const Field> fields, const Suppressed& suppressed);

  const LoggerOptions options_;
  std::unique_ptr<Impl> impl_;
};

// Makes `logger` the one every Component writes to; null restores the default (text, info, to
// stderr, no sweeper). The logger must outlive every use: install it before other threads start
// and remove it after they stopped (main never destroys its logger: library threads such as
// gRPC's may log until the process exits).
void SetLogger(Logger* logger);
// The installed logger, or the default one.
Logger& CurrentLogger();

// A component's handle on the installed logger: `constexpr log::Component kLog("pool");` then
// `kLog.Warn("endpoint down", {{"endpoint", name}, {"error", status.message()}});`.
class Component {
 public:
  constexpr explicit Component(std::string_view name) : name_(name) {}

  void Debug(std::string_view message, Fields fields = {}) const {
    Write(Level::kDebug, message, fields);
  }
  void Info(std::string_view message, Fields fields = {}) const {
    Write(Level::kInfo, message, fields);
  }
  void Warn(std::string_view message, Fields fields = {}) const {
    Write(Level::kWarn, message, fields);
  }
  void Error(std::string_view message, Fields fields = {}) const {
    Write(Level::kError, message, fields);
  }
  void Write(Level level, std::string_view message, Fields fields) const {
    Logger& logger = CurrentLogger();
    if (logger.Enabled(level)) logger.Write(level, name_, message, fields);
  }
  // Rate-limited per (this component, message, key): see Logger::WriteThrottled. `key` separates
  // classes that must not hide each other, e.g. the endpoint of "endpoint down"; it must come from
  // a bounded set (tables, endpoints, reasons), not from per-request data.
  void Throttled(Level level, std::string_view message, std::string_view key,
                 Fields fields = {}) const {
    Logger& logger = CurrentLogger();
    if (logger.Enabled(level)) {
      logger.WriteThrottled(level, name_, message, key, fields);
    }
  }

  std::string_view name() const { return name_; }

 private:
  std::string_view name_;
};

}  // namespace chgate::log
