// What the Query RPC and the API's caller checks report, as plain calls: server/metrics turns
// them into Prometheus series (metrics::QueryMetricsObserver, metrics::AuthMetricsObserver);
// the service module knows nothing of Prometheus. Thread-safe, quick, no calls back.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace chgate::service {

class QueryObserver {
 public:
  virtual ~QueryObserver() = default;
  // A query was admitted; it runs until QueryFinished.
  virtual void QueryStarted() = 0;
  // `rows` rows in `bytes` bytes of responses were handed to gRPC (as they go out, so that long
  // queries show progress).
  virtual void Streamed(uint64_t rows, uint64_t bytes) = 0;
  // An admitted query ended with `status` after `took`.
  virtual void QueryFinished(const absl::Status& status, absl::Duration took) = 0;
  // A call ended with `status` before it was admitted (refused, cancelled while waiting, shut
  // down).
  virtual void QueryRefused(const absl::Status& status) = 0;
};

class AuthObserver {
 public:
  virtual ~AuthObserver() = default;
  // A call was refused by authentication or the policy; `reason` is auth::DenyReasonLabel's.
  virtual void Failure(std::string_view reason) = 0;
  // A tokens, policy or TLS file was reloaded (or failed to load: `ok` false).
  virtual void Reloaded(std::string_view file, bool ok) = 0;
};

}  // namespace chgate::service
