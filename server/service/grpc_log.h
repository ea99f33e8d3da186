// Routes the gRPC library's own messages (gpr_log: TLS handshake failures, certificate reload
// errors of the API's file watcher, transport errors) through chgate's logger as component "grpc",
// so they share the format of every other line (JSON output stays JSON) and are throttled per
// source line like any repeating event; and the protobuf library's (component "protobuf"), where a
// request whose string field is not UTF-8 is a caller's mistake that chgate answers with
// INVALID_ARGUMENT naming the field, so protobuf's own line about it goes to debug level. Call
// once, after the logger is installed.
#pragma once

#include <cstdint>

namespace chgate::service {

void RouteGrpcLogs();

// TLS handshakes of the API listener that failed (a plaintext caller, an untrusted or expired
// client certificate, no shared protocol version or cipher) since RouteGrpcLogs, as the gRPC
// library reported them (its TLS layer logs each failed handshake as an error). Thread-safe.
uint64_t ApiHandshakeFailures();

}  // namespace chgate::service
