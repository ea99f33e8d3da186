// Routes the gRPC library's own messages (gpr_log: TLS handshake failures, certificate reload
// errors of the API's file watcher, transport errors) through chgate's logger as component "grpc",
// so they share the format of every other line (JSON output stays JSON) and are throttled per
// source line like any repeating event. Call once, after the logger is installed.
#pragma once

namespace chgate::service {

void RouteGrpcLogs();

}  // namespace chgate::service
