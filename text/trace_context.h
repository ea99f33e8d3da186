// W3C trace context (the `traceparent` and `tracestate` headers), shared by the server and the
// SDK, which checks what it is given. ClickHouse's native protocol carries it in a query's
// ClientInfo from revision 54442: the server then records its spans for the query under the
// caller's trace (system.opentelemetry_span_log), the caller's span as their parent. Servers
// before 54442 receive nothing.
//
// Wire layout (ClientInfo, after version_patch): UInt8 1, then trace_id as ClickHouse's UUID
// (the traceparent's first 16 hex digits as a UInt64 LE, then its last 16 as a UInt64 LE),
// span_id UInt64 LE (the parent id's 16 hex digits), tracestate String, trace_flags UInt8.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace chgate::text {

struct TraceContext {
  uint64_t trace_id_high = 0;  // the first 16 hex digits of the trace id
  uint64_t trace_id_low = 0;   // the last 16
  uint64_t span_id = 0;        // the caller's span: the parent of the server's spans
  std::string tracestate;      // passed through as given (vendor data)
  uint8_t trace_flags = 0;     // bit 0: sampled

  // "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>".
  std::string Traceparent() const;
  // The 32 hex digits of the trace id, as log lines and tracing systems show it.
  std::string TraceIdHex() const;

  friend bool operator==(const TraceContext&, const TraceContext&) = default;
};

// Parses a `traceparent` header: version 00 exactly as the W3C format has it (55 characters,
// lower-case hex), or a later version whose first 55 characters have that form (the rest is
// ignored, as the specification asks). nullopt for anything else, an all-zero trace or span id,
// or version ff. `tracestate` is kept as given, cut to 512 bytes (the specification's limit).
std::optional<TraceContext> ParseTraceparent(std::string_view traceparent,
                                             std::string_view tracestate = {});

}  // namespace chgate::text
