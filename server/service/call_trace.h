// The caller's W3C trace context from a call's gRPC metadata: `traceparent` (and `tracestate`),
// as OpenTelemetry's gRPC instrumentation sends them. A missing or malformed traceparent means
// no trace (the call is served as usual; a malformed one is not an error, as the W3C
// specification asks of receivers).
#pragma once

#include <grpcpp/grpcpp.h>

#include <optional>

#include "text/trace_context.h"

namespace chgate::service {

std::optional<text::TraceContext> CallTrace(const grpc::ServerContextBase& context);

}  // namespace chgate::service
