#include "server/service/server.h"

#include <dlfcn.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <climits>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/log/log.h"
#include "server/service/health_service.h"
#include "server/service/ingest_service.h"
#include "server/service/unix_socket.h"

namespace chgate::service {
namespace {

constexpr log::Component kLog("api");

// grpc.health.v1 service names (Kubernetes probes name them in `grpc.service`). "readiness" and
// "" mean "accepting calls" (NOT_SERVING only once a drain began): a sidecar off the request path
// must not take its application out of its Services because ClickHouse is slow. "buffer" carries
// the buffer-based readiness (Ingestor::Ready, with hysteresis) for the opt-in probe.
constexpr char kOverall[] = "";
constexpr char kLiveness[] = "liveness";
constexpr char kReadiness[] = "readiness";
constexpr char kBuffer[] = "buffer";

// gRPC's own (synchronous) health service is off: HealthService serves the protocol.
void InitGrpcOnce() {
  static absl::once_flag once;
  absl::call_once(once, [] { grpc::EnableDefaultHealthCheckService(false); });
}

// Loads gRPC's reflection library, whose static initializer adds reflection to every server built
// afterwards (process-wide, and for good). Not linked, so without --grpc-reflection no server
// gets it.
absl::Status LoadReflection() {
  static absl::once_flag once;
  static std::string* error = nullptr;
  absl::call_once(once, [] {
    if (::dlopen(CHGATE_GRPC_REFLECTION_LIBRARY, RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      const char* why = ::dlerror();
      error = new std::string(why != nullptr ? why : "unknown error");
    }
  });
  if (error == nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("gRPC reflection was asked for but ", CHGATE_GRPC_REFLECTION_LIBRARY,
                   " cannot be loaded (install the gRPC C++ runtime package): ", *error));
}

// gRPC sets SO_REUSEPORT by default on Linux, so a second instance on the same port would start
// and silently share the traffic; fail to start instead.
void ExclusivePort(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

int ClampedMillis(absl::Duration d) {
  return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 1, INT_MAX));
}

absl::Status CannotListen(const std::string& address, const char* what) {
  return absl::UnavailableError(absl::StrCat("cannot listen on ", address, " (", what,
                                             " address): in use, or not a local address"));
}

class HealthListenerImpl final : public HealthListener {
 public:
  ~HealthListenerImpl() override { Shutdown(absl::Now()); }

  absl::Status Start(const std::string& address, bool reflection) {
    InitGrpcOnce();
    // gRPC gives a server the plugins registered when its builder is made: the reflection
    // library registers its plugin as it loads, so it is loaded before the builder.
    if (reflection) {
      if (absl::Status loaded = LoadReflection(); !loaded.ok()) return loaded;
    }
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port_);
    ExclusivePort(builder);
    builder.RegisterService(&health_);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) return CannotListen(address, "health");
    health_.SetServing(kLiveness, true);
    for (const char* name : {kReadiness, kOverall, kBuffer}) health_.SetServing(name, false);
    return absl::OkStatus();
  }

  int port() const override { return port_; }
  HealthService* health() override { return &health_; }

  void Shutdown(absl::Time deadline) override {
    health_.Shutdown();
    if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(deadline));
  }

  void Wait() override {
    if (server_ != nullptr) server_->Wait();
  }

 private:
  HealthService health_;  // outlives server_, declared before it
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

class ServerImpl final : public Server {
 public:
  ServerImpl(const ServerOptions& options, ingest::Ingestor* ingestor)
      : options_(options),
        ingestor_(ingestor),
        service_(ingestor, {.default_deadline = options.default_deadline,
                            .queries = options.queries,
                            .authorizer = options.authorizer,
                            .auth_observer = options.auth_observer,
                            .default_database = options.default_database,
                            .default_ack = options.default_ack,
                            .read_slots = options.read_slots}) {}

  // Not shut down (e.g. a failed Start): stop the listeners at once but leave the ingestor,
  // which the caller owns, alone.
  ~ServerImpl() override {
    {
      absl::MutexLock lock(&mu_);
      if (shutting_down_) return;
      shutting_down_ = true;
    }
    service_.BeginShutdown();
    StopListeners(absl::Now());
  }

  absl::Status Start() {
    InitGrpcOnce();
    if (options_.reflection) {
      if (absl::Status loaded = LoadReflection(); !loaded.ok()) return loaded;
    }
    std::unique_ptr<ApiIdentity> identity;
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> api_credentials =
        ApiServerCredentials(options_.tls, &identity);
    if (!api_credentials.ok()) return api_credentials.status();
    api_identity_ = std::move(identity);
    const std::optional<std::string> socket_path = UnixSocketPath(options_.api_address);
    if (socket_path.has_value()) {
      if (absl::Status ready = PrepareUnixSocket(*socket_path); !ready.ok()) {
        return absl::UnavailableError(
            absl::StrCat("cannot listen on ", options_.api_address, ": ", ready.message()));
      }
    }
    {
      grpc::ServerBuilder builder;
      builder.AddListeningPort(options_.api_address, *api_credentials, &api_port_);
      ExclusivePort(builder);
      builder.RegisterService(&service_);
      builder.RegisterService(&api_health_);
      builder.RegisterCallbackGenericService(service_.insert_handler());
      builder.SetMaxReceiveMessageSize(
          static_cast<int>(std::min<size_t>(options_.max_message_bytes, INT_MAX)));
      if (options_.max_concurrent_streams > 0) {
        builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                                   static_cast<int>(options_.max_concurrent_streams));
      }
      // A stream that chgate stops reading (its buffer is full) must not keep flowing into
      // gRPC's own buffers: without BDP probing, each stream's receive window stays at its
      // initial 64 KiB instead of growing to megabytes, so flow control reaches the producer.
      builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
      if (options_.max_connection_age > absl::ZeroDuration()) {
        builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                                   ClampedMillis(options_.max_connection_age));
        builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                                   ClampedMillis(options_.max_connection_age_grace));
      }
      api_ = builder.BuildAndStart();
      if (api_ == nullptr || api_port_ == 0) return CannotListen(options_.api_address, "API");
    }
    if (socket_path.has_value()) {
      absl::StatusOr<UnixSocketFile> socket =
          FinishUnixSocket(*socket_path, options_.api_socket_mode);
      if (!socket.ok()) return socket.status();
      api_socket_ = *std::move(socket);
    }
    health_port_ = api_port_;
    health_listener_ = options_.health_listener;
    if (health_listener_ == nullptr && !options_.health_address.empty()) {
      absl::StatusOr<std::unique_ptr<HealthListener>> started =
          StartHealthListener(options_.health_address, options_.reflection);
      if (!started.ok()) return started.status();
      own_health_listener_ = *std::move(started);
      health_listener_ = own_health_listener_.get();
    }
    if (health_listener_ != nullptr) health_port_ = health_listener_->port();
    absl::MutexLock lock(&mu_);
    SetStatusLocked({kLiveness}, true);
    SetStatusLocked({kReadiness, kOverall}, true);
    SetStatusLocked({kBuffer}, ingestor_->Ready());
    return absl::OkStatus();
  }

  int api_port() const override { return api_port_; }
  int health_port() const override { return health_port_; }

  void RefreshHealth() override {
    // Asked before taking mu_: a wedged ingestor must not hold up SetLiveness.
    const bool ready = ingestor_->Ready();
    const ingest::IngestStats stats = ingestor_->Stats();
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return;
    if (buffer_ready_.has_value() && *buffer_ready_ != ready) {
      kLog.Throttled(ready ? log::Level::kInfo : log::Level::kWarn,
                     ready ? "buffer readiness SERVING" : "buffer readiness NOT_SERVING", "",
                     {{"reason", ready ? "buffer below the low-water mark"
                                       : "buffer above the high-water mark"},
                      {"buffered_bytes", stats.buffered_bytes},
                      {"waiting_callers", stats.waiting_requests}});
    }
    buffer_ready_ = ready;
    SetStatusLocked({kBuffer}, ready);
  }

  void ReloadApiCertificate() override {
    if (api_identity_ == nullptr) return;
    absl::StatusOr<bool> reloaded = api_identity_->Reload();
    if (reloaded.ok()) {
      if (*reloaded) {
        kLog.Info("API TLS key and certificate reloaded", {{"cert_file", options_.tls.cert_file}});
      }
      return;
    }
    kLog.Throttled(log::Level::kWarn,
                   "API TLS key and certificate not reloaded; the previous pair stays in use",
                   options_.tls.cert_file, {{"error", reloaded.status().message()}});
  }

  std::shared_ptr<ApiIdentity> api_identity() const override { return api_identity_; }

  void SetLiveness(bool live) override {
    absl::MutexLock lock(&mu_);
    SetStatusLocked({kLiveness}, live);
  }

  void Shutdown(absl::Time deadline) override {
    {
      absl::MutexLock lock(&mu_);
      if (!shutting_down_) {
        shutting_down_ = true;
        SetStatusLocked({kReadiness, kOverall, kBuffer}, false);
      }
    }
    service_.BeginShutdown();
    ingestor_->Shutdown(deadline);
    StopListeners(deadline);
  }

  void Wait() override {
    if (api_ != nullptr) api_->Wait();
    if (health_listener_ != nullptr) health_listener_->Wait();
  }

 private:
  // grpc::Server::Shutdown is idempotent; it returns once every call has finished.
  void StopListeners(absl::Time deadline) {
    // Health Watch streams never end by themselves: end them (after a last NOT_SERVING) so the
    // servers' shutdown does not wait for the deadline.
    api_health_.Shutdown();
    if (api_ != nullptr) api_->Shutdown(absl::ToChronoTime(deadline));
    if (health_listener_ != nullptr) health_listener_->Shutdown(deadline);
    RemoveUnixSocket(api_socket_);
  }

  void SetStatusLocked(std::initializer_list<const char*> names, bool serving)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const char* name : names) {
      api_health_.SetServing(name, serving);
      if (health_listener_ != nullptr) health_listener_->health()->SetServing(name, serving);
    }
  }

  const ServerOptions options_;
  ingest::Ingestor* const ingestor_;
  IngestService service_;  // outlives the servers below, declared after it
  // One per listener (a service is registered on one server); both carry the same statuses.
  HealthService api_health_;
  std::unique_ptr<HealthListener> own_health_listener_;  // when none was given
  std::shared_ptr<ApiIdentity> api_identity_;            // with API TLS; set by Start
  HealthListener* health_listener_ = nullptr;            // null: health on the API listener only
  std::unique_ptr<grpc::Server> api_;
  int api_port_ = 0;
  UnixSocketFile api_socket_;  // path empty unless the API listens on a Unix socket
  int health_port_ = 0;
  absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<bool> buffer_ready_ ABSL_GUARDED_BY(mu_);  // what "buffer" says
};

}  // namespace

absl::StatusOr<std::unique_ptr<HealthListener>> StartHealthListener(const std::string& address,
                                                                    bool reflection) {
  auto listener = std::make_unique<HealthListenerImpl>();
  if (absl::Status status = listener->Start(address, reflection); !status.ok()) return status;
  return listener;
}

absl::StatusOr<std::unique_ptr<Server>> StartServer(const ServerOptions& options,
                                                    ingest::Ingestor* ingestor) {
  auto server = std::make_unique<ServerImpl>(options, ingestor);
  if (absl::Status status = server->Start(); !status.ok()) return status;
  return server;
}

}  // namespace chgate::service
