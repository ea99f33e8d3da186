// The standard grpc.health.v1.Health/Check call, without generated health stubs: the request and
// response are two tiny protobuf messages, encoded here by hand. chgate serves the names "",
// "liveness" and "readiness" on its health listener. Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace chgate::client {

// grpc.health.v1.HealthCheckResponse.ServingStatus.
enum class ServingStatus {
  kUnknown = 0,
  kServing = 1,
  kNotServing = 2,
  kServiceUnknown = 3,
};

// "SERVING", "NOT_SERVING", "UNKNOWN", "SERVICE_UNKNOWN".
std::string_view ServingStatusName(ServingStatus status);

// Asks the server behind `channel` for the status of `service` within `timeout`. Returns the
// serving status, or the call's error (NOT_FOUND for a service the server does not know,
// UNAVAILABLE when nothing answers, DEADLINE_EXCEEDED, UNIMPLEMENTED without a health service,
// INTERNAL for a response that does not parse).
absl::StatusOr<ServingStatus> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                          std::string_view service, absl::Duration timeout);

}  // namespace chgate::client
