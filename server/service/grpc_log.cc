#include "server/service/grpc_log.h"

#include <grpc/support/log.h>

#include <atomic>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/log/log.h"

namespace chgate::service {
namespace {

constexpr log::Component kLog("grpc");

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

}  // namespace

void RouteGrpcLogs() { gpr_set_log_function(Forward); }

uint64_t ApiHandshakeFailures() { return handshake_failures.load(std::memory_order_relaxed); }

}  // namespace chgate::service
