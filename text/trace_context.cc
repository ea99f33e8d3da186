#include "text/trace_context.h"

#include <cstdio>

namespace chgate::text {
namespace {

constexpr size_t kTraceparentSize = 55;  // 2 + 1 + 32 + 1 + 16 + 1 + 2
constexpr size_t kMaxTracestate = 512;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is invalid in traceparent
}

bool ParseHex(std::string_view text, uint64_t* out) {
  uint64_t v = 0;
  for (char c : text) {
    const int d = HexDigit(c);
    if (d < 0) return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

}  // namespace

std::string TraceContext::TraceIdHex() const {
  char buffer[33];
  std::snprintf(buffer, sizeof buffer, "%016llx%016llx",
                static_cast<unsigned long long>(trace_id_high),
                static_cast<unsigned long long>(trace_id_low));
  return buffer;
}

std::string TraceContext::Traceparent() const {
  char buffer[kTraceparentSize + 1];
  std::snprintf(buffer, sizeof buffer, "00-%016llx%016llx-%016llx-%02x",
                static_cast<unsigned long long>(trace_id_high),
                static_cast<unsigned long long>(trace_id_low),
                static_cast<unsigned long long>(span_id), static_cast<unsigned>(trace_flags));
  return buffer;
}

std::optional<TraceContext> ParseTraceparent(std::string_view traceparent,
                                             std::string_view tracestate) {
  if (traceparent.size() < kTraceparentSize) return std::nullopt;
  uint64_t version = 0;
  if (!ParseHex(traceparent.substr(0, 2), &version) || version == 0xff) return std::nullopt;
  // Version 00 is exactly 55 characters; a later one may append fields after a '-'.
  if (version == 0 && traceparent.size() != kTraceparentSize) return std::nullopt;
  if (version != 0 && traceparent.size() > kTraceparentSize && traceparent[kTraceparentSize] != '-')
    return std::nullopt;
  if (traceparent[2] != '-' || traceparent[35] != '-' || traceparent[52] != '-')
    return std::nullopt;
  TraceContext t;
  uint64_t flags = 0;
  if (!ParseHex(traceparent.substr(3, 16), &t.trace_id_high) ||
      !ParseHex(traceparent.substr(19, 16), &t.trace_id_low) ||
      !ParseHex(traceparent.substr(36, 16), &t.span_id) ||
      !ParseHex(traceparent.substr(53, 2), &flags)) {
    return std::nullopt;
  }
  if ((t.trace_id_high == 0 && t.trace_id_low == 0) || t.span_id == 0) return std::nullopt;
  t.trace_flags = static_cast<uint8_t>(flags);
  t.tracestate = std::string(tracestate.substr(0, kMaxTracestate));
  return t;
}

}  // namespace chgate::text
