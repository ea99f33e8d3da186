#include "server/service/health_service.h"

#include <optional>
#include <utility>

namespace chgate::service {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One Watch stream: writes the name's status whenever it differs from the last one written (a
// change while a write is in flight is written after it, only the latest), and finishes after
// the write of the last status on Shutdown.
class HealthService::Watcher final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  Watcher(HealthService* service, std::string name) : service_(service), name_(std::move(name)) {}

  const std::string& name() const { return name_; }

  // Tells the watcher `status`; with `last`, the stream ends once it is written. Called with the
  // service's mutex held (so OnDone, which takes it, cannot delete the watcher meanwhile); gRPC
  // never runs this reactor's reactions inline in StartWrite or Finish.
  void Update(Status status, bool last) {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    latest_ = status;
    end_after_write_ |= last;
    Advance();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {  // the caller went away; OnCancel or the end of the call follows
      FinishOnce(grpc::Status::CANCELLED);
      return;
    }
    Advance();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishOnce(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    service_->Remove(this);
    delete this;
  }

 private:
  // Starts the next write, or the finish, if one is due.
  void Advance() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (!written_.has_value() || *written_ != latest_) {
      written_ = latest_;
      response_.set_status(latest_);
      writing_ = true;
      StartWrite(&response_);
      return;
    }
    if (end_after_write_) FinishOnce(grpc::Status::OK);
  }

  void FinishOnce(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  HealthService* const service_;
  const std::string name_;
  absl::Mutex mu_;
  HealthCheckResponse response_ ABSL_GUARDED_BY(mu_);  // the write in flight
  Status latest_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::SERVICE_UNKNOWN;
  std::optional<Status> written_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool end_after_write_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

HealthService::~HealthService() = default;

void HealthService::SetServing(std::string_view name, bool serving) {
  const Status status = serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  auto [it, added] = statuses_.try_emplace(std::string(name), status);
  if (!added) {
    if (it->second == status) return;
    it->second = status;
  }
  for (Watcher* watcher : watchers_) {
    if (watcher->name() == name) watcher->Update(status, /*last=*/false);
  }
}

HealthService::Status HealthService::Get(std::string_view name) const {
  absl::MutexLock lock(&mu_);
  auto it = statuses_.find(name);
  return it == statuses_.end() ? HealthCheckResponse::SERVICE_UNKNOWN : it->second;
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  shut_down_ = true;
  for (auto& [name, status] : statuses_) status = HealthCheckResponse::NOT_SERVING;
  for (Watcher* watcher : watchers_) {
    watcher->Update(HealthCheckResponse::NOT_SERVING, /*last=*/true);
  }
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* context,
                                               const HealthCheckRequest* request,
                                               HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const Status status = Get(request->service());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
  } else {
    response->set_status(status);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* /*context*/, const HealthCheckRequest* request) {
  auto* watcher = new Watcher(this, request->service());
  absl::MutexLock lock(&mu_);
  watchers_.insert(watcher);
  auto it = statuses_.find(request->service());
  watcher->Update(it == statuses_.end() ? HealthCheckResponse::SERVICE_UNKNOWN : it->second,
                  /*last=*/shut_down_);
  return watcher;
}

void HealthService::Remove(Watcher* watcher) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(watcher);
}

}  // namespace chgate::service
