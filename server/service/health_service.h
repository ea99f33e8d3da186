// grpc.health.v1.Health on gRPC's callback API. gRPC's built-in health service is a synchronous
// service, and one synchronous service makes a server run polling threads of its own that take
// part in every connection's I/O: measured with chgate-cli bench (1-row requests), they cost about
// a tenth of chgate's CPU and 0.2 context switches per request. This one serves the same
// protocol from the callback threads. Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <map>
#include <set>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace chgate::service {

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;

  HealthService() = default;
  HealthService(const HealthService&) = delete;
  HealthService& operator=(const HealthService&) = delete;
  // Shutdown() must have been called and every Watch ended (the server stopped) before.
  ~HealthService() override;

  // Sets `name`'s status (adding the name), and tells its watchers when it changed. No effect
  // after Shutdown().
  void SetServing(std::string_view name, bool serving);

  // The status Check would answer; SERVICE_UNKNOWN for an unknown name.
  Status Get(std::string_view name) const;

  // Every name NOT_SERVING, watchers told so and their streams ended; later SetServing calls are
  // ignored. Idempotent.
  void Shutdown();

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class Watcher;

  void Remove(Watcher* watcher);

  mutable absl::Mutex mu_;
  std::map<std::string, Status, std::less<>> statuses_ ABSL_GUARDED_BY(mu_);
  std::set<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace chgate::service
