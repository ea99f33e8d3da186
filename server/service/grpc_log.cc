#include "server/service/grpc_log.h"

#include <grpc/support/log.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "server/log/log.h"

namespace chgate::service {
namespace {

constexpr log::Component kLog("grpc");

void Forward(gpr_log_func_args* args) {
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

}  // namespace chgate::service
