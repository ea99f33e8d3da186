#include "server/service/grpc_log.h"

#include <grpc/support/log.h>

#include <atomic>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "server/log/log.h"

namespace chgate::service {
namespace {

constexpr log::Component kLog("grpc");
constexpr log::Component kProtobufLog("protobuf");

std::atomic<uint64_t> handshake_failures{0};

// gRPC's TLS layer (ssl_transport_security.cc) reports each failed handshake, on either side, as
// an error starting with this text; chgate's only gRPC TLS is the API listener's.
bool IsHandshakeFailure(const gpr_log_func_args& args) {
  return args.severity == GPR_LOG_SEVERITY_ERROR && args.file != nullptr &&
         args.message != nullptr &&
         absl::EndsWith(absl::string_view(args.file), "ssl_transport_security.cc") &&
         absl::StartsWith(absl::string_view(args.message), "Handshake failed");
}

void Forward(gpr_log_func_args* args) {
  if (IsHandshakeFailure(*args)) handshake_failures.fetch_add(1, std::memory_order_relaxed);
  const log::Level level = args->severity == GPR_LOG_SEVERITY_ERROR  ? log::Level::kError
                           : args->severity == GPR_LOG_SEVERITY_INFO ? log::Level::kInfo
                                                                     : log::Level::kDebug;
  const std::string source =
      absl::StrCat(args->file != nullptr ? args->file : "?", ":", args->line);
  // The text varies (peers, addresses): the source line is the event class.
  kLog.Throttled(level, "gRPC library message", source,
                 {{"text", args->message != nullptr ? args->message : ""}, {"source", source}});
}

void ForwardProtobuf(google::protobuf::LogLevel severity, const char* file, int line,
                     const std::string& message) {
  // "String field '...' contains invalid UTF-8 data when parsing a protocol buffer": a caller's
  // request, answered as such (the parse's own log line adds nothing for the operator).
  const bool callers = absl::StrContains(message, "invalid UTF-8 data when parsing");
  const log::Level level = callers                                          ? log::Level::kDebug
                           : severity >= google::protobuf::LOGLEVEL_ERROR   ? log::Level::kError
                           : severity == google::protobuf::LOGLEVEL_WARNING ? log::Level::kWarn
                                                                            : log::Level::kInfo;
  const std::string source = absl::StrCat(file != nullptr ? file : "?", ":", line);
  // One source line reports several events (the UTF-8 check, parsing or serializing, per
  // field): the text, which names no value, is the event class.
  kProtobufLog.Throttled(level, "protobuf library message", message,
                         {{"text", message}, {"source", source}});
}

}  // namespace

void RouteGrpcLogs() {
  gpr_set_log_function(Forward);
  google::protobuf::SetLogHandler(ForwardProtobuf);
}

uint64_t ApiHandshakeFailures() { return handshake_failures.load(std::memory_order_relaxed); }

}  // namespace chgate::service
