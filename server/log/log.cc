#include "server/log/log.h"

#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "text/json.h"
#include "text/utf8.h"

namespace chgate::log {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// Appends `s` with control bytes, backslashes, invalid UTF-8 and (when `quoted`) double quotes
// escaped, so that it cannot break the line or be mistaken for another field.
void AppendTextEscaped(std::string* out, std::string_view s, bool quoted) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = text::Utf8SequenceLength(s, i);
      if (n == 0) {
        out->append("\\x");
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 0xf]);
        ++i;
      } else {
        out->append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    if (c == '\n') {
      out->append("\\n");
    } else if (c == '\r') {
      out->append("\\r");
    } else if (c == '\t') {
      out->append("\\t");
    } else if (c == '\\') {
      out->append("\\\\");
    } else if (c == '"' && quoted) {
      out->append("\\\"");
    } else if (c < 0x20 || c == 0x7f) {
      out->append("\\x");
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 0xf]);
    } else {
      out->push_back(static_cast<char>(c));
    }
    ++i;
  }
}

bool NeedsQuotes(std::string_view s) {
  if (s.empty()) return true;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = text::Utf8SequenceLength(s, i);
      if (n == 0) return true;
      i += n;
      continue;
    }
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f) return true;
    ++i;
  }
  return false;
}

void AppendTextValue(std::string* out, const Field& field) {
  if (field.kind() != Field::Kind::kString || !NeedsQuotes(field.value())) {
    AppendTextEscaped(out, field.value(), /*quoted=*/false);
    return;
  }
  out->push_back('"');
  AppendTextEscaped(out, field.value(), /*quoted=*/true);
  out->push_back('"');
}

// "10s", "2.5s", "150ms": the span of suppressed repeats, to a tenth of a second.
std::string WindowText(absl::Duration window) {
  if (window < absl::Seconds(1))
    return absl::FormatDuration(absl::Trunc(window, absl::Milliseconds(1)));
  return absl::FormatDuration(absl::Trunc(window, absl::Milliseconds(100)));
}

// RFC 3339 in UTC with milliseconds, as the line's own time.
std::string TimeText(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

spdlog::level::level_enum SpdLevel(Level level) {
  switch (level) {
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
  }
  return spdlog::level::err;
}

// %* in the line pattern: our level names ("warn", not spdlog's "warning"), upper case in text.
class LevelFlag final : public spdlog::custom_flag_formatter {
 public:
  explicit LevelFlag(bool upper) : upper_(upper) {}
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string_view name;
    switch (msg.level) {
      case spdlog::level::trace:
      case spdlog::level::debug:
        name = upper_ ? "DEBUG" : "debug";
        break;
      case spdlog::level::info:
        name = upper_ ? "INFO" : "info";
        break;
      case spdlog::level::warn:
        name = upper_ ? "WARN" : "warn";
        break;
      default:
        name = upper_ ? "ERROR" : "error";
        break;
    }
    dest.append(name.data(), name.data() + name.size());
  }
  std::unique_ptr<spdlog::custom_flag_formatter> clone() const override {
    return std::make_unique<LevelFlag>(upper_);
  }

 private:
  bool upper_;
};

std::unique_ptr<spdlog::formatter> LineFormatter(Format format) {
  // Time in UTC, RFC 3339 with milliseconds; the payload (%v) comes from FormatPayload.
  const char* pattern = format == Format::kJson
                            ? R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%*",%v})"
                            : "%Y-%m-%dT%H:%M:%S.%eZ %* %v";
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  formatter->add_flag<LevelFlag>('*', format == Format::kText);
  formatter->set_pattern(pattern);
  return formatter;
}

}  // namespace

std::optional<Level> ParseLevel(std::string_view text) {
  for (Level level : {Level::kDebug, Level::kInfo, Level::kWarn, Level::kError}) {
    if (text == LevelName(level)) return level;
  }
  return std::nullopt;
}

std::optional<Format> ParseFormat(std::string_view text) {
  if (text == "text") return Format::kText;
  if (text == "json") return Format::kJson;
  return std::nullopt;
}

std::string_view LevelName(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
  }
  return "error";
}

Field::Field(std::string_view key, double value) : key_(key) {
  if (std::isfinite(value)) {
    value_ = absl::StrCat(value);
    kind_ = Kind::kNumber;
  } else {
    value_ = absl::StrCat(value);  // "nan", "inf", "-inf"
    kind_ = Kind::kString;
  }
}

std::string FormatPayload(Format format, std::string_view component, std::string_view message,
                          absl::Span<const Field> fields, const Suppressed& suppressed) {
  std::string out;
  out.reserve(64 + message.size() + 32 * fields.size());
  if (format == Format::kJson) {
    out.append("\"component\":");
    text::AppendJsonString(component, &out);
    out.append(",\"msg\":");
    text::AppendJsonString(message, &out);
    for (const Field& f : fields) {
      out.push_back(',');
      text::AppendJsonString(f.key(), &out);
      out.push_back(':');
      if (f.kind() == Field::Kind::kString) {
        text::AppendJsonString(f.value(), &out);
      } else {
        out.append(f.value());
      }
    }
    if (suppressed.count > 0) {
      absl::StrAppend(&out, ",\"suppressed\":", suppressed.count, ",\"suppressed_window\":");
      text::AppendJsonString(WindowText(suppressed.window), &out);
      if (suppressed.last_at != absl::InfinitePast()) {
        absl::StrAppend(&out, ",\"last_at\":\"", TimeText(suppressed.last_at), "\"");
      }
    }
    return out;
  }
  out.push_back('[');
  out.append(component);
  out.append("] ");
  AppendTextEscaped(&out, message, /*quoted=*/false);
  for (const Field& f : fields) {
    out.push_back(' ');
    AppendTextEscaped(&out, f.key(), /*quoted=*/false);
    out.push_back('=');
    AppendTextValue(&out, f);
  }
  if (suppressed.count > 0) {
    absl::StrAppend(&out, " (", suppressed.count, " similar suppressed in the last ",
                    WindowText(suppressed.window));
    if (suppressed.last_at != absl::InfinitePast()) {
      absl::StrAppend(&out, ", the last at ", TimeText(suppressed.last_at));
    }
    out.push_back(')');
  }
  return out;
}

struct Logger::Impl {
  std::shared_ptr<spdlog::logger> logger;

  // One throttled event class.
  struct Repeat {
    absl::Time last_written;
    uint64_t suppressed = 0;
    // The latest suppressed event, for the summary line.
    absl::Time last_at;
    Level level = Level::kInfo;
    std::string component;
    std::string message;
    std::vector<Field> fields;
  };
  absl::Mutex mu;
  absl::flat_hash_map<std::string, Repeat> repeats ABSL_GUARDED_BY(mu);

  absl::Notification stop;
  std::thread sweeper;
};

Logger::Logger(LoggerOptions options) : options_(std::move(options)), impl_(new Impl) {
  spdlog::sink_ptr sink;
  if (options_.out != nullptr) {
    sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*options_.out, /*force_flush=*/true);
  } else {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();  // flushes every line
  }
  sink->set_formatter(LineFormatter(options_.format));
  // Not registered in spdlog's global registry: this object owns it.
  impl_->logger = std::make_shared<spdlog::logger>("chgate", std::move(sink));
  impl_->logger->set_level(SpdLevel(options_.level));
  impl_->logger->flush_on(spdlog::level::trace);
  if (options_.sweep_interval > absl::ZeroDuration()) {
    impl_->sweeper = std::thread([this] {
      while (!impl_->stop.WaitForNotificationWithTimeout(options_.sweep_interval)) Sweep();
    });
  }
}

Logger::~Logger() { Finish(); }

void Logger::Finish() {
  if (!impl_->stop.HasBeenNotified()) impl_->stop.Notify();
  if (impl_->sweeper.joinable()) impl_->sweeper.join();
  Sweep(/*all=*/true);
  impl_->logger->flush();
}

absl::Time Logger::Now() const { return options_.clock ? options_.clock() : absl::Now(); }

void Logger::Emit(absl::Time time, Level level, std::string_view component,
                  std::string_view message, absl::Span<const Field> fields,
                  const Suppressed& suppressed) {
  const std::string payload =
      FormatPayload(options_.format, component, message, fields, suppressed);
  impl_->logger->log(absl::ToChronoTime(time), spdlog::source_loc{}, SpdLevel(level),
                     spdlog::string_view_t(payload.data(), payload.size()));
}

void Logger::Write(Level level, std::string_view component, std::string_view message,
                   absl::Span<const Field> fields) {
  if (!Enabled(level)) return;
  Emit(Now(), level, component, message, fields, {});
}

void Logger::WriteThrottled(Level level, std::string_view component, std::string_view message,
                            std::string_view key, absl::Span<const Field> fields) {
  if (!Enabled(level)) return;
  // Unit separators keep ("a", "b c") and ("a b", "c") apart.
  std::string class_key;
  class_key.reserve(component.size() + message.size() + key.size() + 2);
  class_key.append(component).append(1, '\x1f').append(message).append(1, '\x1f').append(key);
  absl::MutexLock lock(&impl_->mu);
  const absl::Time now = Now();
  auto [it, fresh] = impl_->repeats.try_emplace(std::move(class_key));
  Impl::Repeat& r = it->second;
  if (!fresh && now - r.last_written < options_.repeat_interval) {
    ++r.suppressed;
    r.last_at = now;
    r.level = level;
    if (r.component != component) r.component = std::string(component);
    if (r.message != message) r.message = std::string(message);
    r.fields.assign(fields.begin(), fields.end());
    return;
  }
  const Suppressed suppressed{.count = fresh ? 0 : r.suppressed,
                              .window = fresh ? absl::ZeroDuration() : now - r.last_written};
  r.last_written = now;
  r.suppressed = 0;
  r.fields.clear();
  // Under the lock, so a class's lines come out in the order they were decided.
  Emit(now, level, component, message, fields, suppressed);
}

void Logger::Sweep(bool all) {
  absl::MutexLock lock(&impl_->mu);
  const absl::Time now = Now();
  for (auto it = impl_->repeats.begin(); it != impl_->repeats.end();) {
    Impl::Repeat& r = it->second;
    const bool interval_over = now - r.last_written >= options_.repeat_interval;
    if (r.suppressed > 0 && (interval_over || all)) {
      Emit(now, r.level, r.component, r.message, r.fields,
           {.count = r.suppressed, .window = now - r.last_written, .last_at = r.last_at});
      r.last_written = now;
      r.suppressed = 0;
      r.fields.clear();
      ++it;
    } else if (r.suppressed == 0 && interval_over) {
      // The next event of this class would be written at once anyway: nothing to remember.
      impl_->repeats.erase(it++);
    } else {
      ++it;
    }
  }
}

namespace {
std::atomic<Logger*> installed{nullptr};
}  // namespace

void SetLogger(Logger* logger) { installed.store(logger, std::memory_order_release); }

Logger& CurrentLogger() {
  if (Logger* logger = installed.load(std::memory_order_acquire)) return *logger;
  // Never destroyed: components may log from threads that outlive static destruction.
  static Logger* fallback = new Logger({.sweep_interval = absl::ZeroDuration()});
  return *fallback;
}

}  // namespace chgate::log
