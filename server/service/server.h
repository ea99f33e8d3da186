// The gRPC front end: the chgate.v1.Ingest service (callback API) over an Ingestor, plus
// grpc.health.v1 (names "", "liveness", "readiness", "buffer") and server reflection, on up to two
// listeners: the API address (loopback by default) and the health address (the pod address, so
// kubelet gRPC probes reach it). Both listeners offer health and reflection; only the API
// listener offers chgate.v1.Ingest. Thread-safe.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/auth/authorizer.h"
#include "server/ingest/ingestor.h"
#include "server/service/api_security.h"
#include "server/service/health_service.h"
#include "server/service/observers.h"
#include "server/service/query_service.h"

namespace chgate::service {

// The health address's listener on its own, started before the Server so that probes are answered
// while chgate is still starting (the spool's recovery reads every segment first): "liveness"
// SERVING, "readiness", "" and "buffer" NOT_SERVING until a Server takes it over
// (ServerOptions::health_listener) and sets them as it does its own. Thread-safe.
class HealthListener {
 public:
  virtual ~HealthListener() = default;
  virtual int port() const = 0;
  virtual HealthService* health() = 0;
  // Ends Watch streams and stops the listener, cancelling calls still open at `deadline`.
  // Idempotent.
  virtual void Shutdown(absl::Time deadline) = 0;
  virtual void Wait() = 0;
};

// With `reflection`, the listener serves gRPC reflection too (the reflection library is loaded
// first: gRPC gives a server only the plugins loaded before it is built). Errors: Unavailable
// (naming the address) when it cannot be bound; FailedPrecondition when reflection is asked for
// and its library cannot be loaded.
absl::StatusOr<std::unique_ptr<HealthListener>> StartHealthListener(const std::string& address,
                                                                    bool reflection = false);

struct ServerOptions {
  // Insert/InsertStream/Query: host:port, or unix:PATH for a Unix domain socket (unix_socket.h:
  // a path a live server holds is refused, a stale socket replaced, the file removed at stop).
  std::string api_address = "127.0.0.1:50051";
  // The permission bits of the API's Unix socket (connecting needs write permission).
  mode_t api_socket_mode = 0660;
  std::string health_address = "[::]:50052";  // health (+ reflection) only ("" = API listener)
  // A health listener already serving (StartHealthListener, with the same `reflection`): used
  // instead of binding health_address; it must outlive the Server, which shuts it down with
  // itself.
  HealthListener* health_listener = nullptr;
  // gRPC server reflection on both listeners. A synchronous service: gRPC then runs polling
  // threads that take part in every connection's I/O.
  bool reflection = false;
  // Larger requests are rejected by gRPC itself with RESOURCE_EXHAUSTED.
  size_t max_message_bytes = 16 << 20;
  // Calls open at once on one client connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS; 0: no
  // limit). gRPC receives a unary call's whole message before chgate sees the call, so this
  // bounds what a burst of calls on one connection holds in gRPC's buffers; calls beyond it wait
  // in the client.
  uint32_t max_concurrent_streams = 0;
  // The API listener asks a connection to close (GOAWAY) after this long, so clients reconnect
  // and spread over replicas; calls then open may finish within the grace. Zero: never.
  absl::Duration max_connection_age = absl::ZeroDuration();
  absl::Duration max_connection_age_grace = absl::Seconds(30);
  // Insert messages gRPC may be receiving at once (see read_gate.h).
  size_t read_slots = 8;
  // Requests without a deadline get this one (InsertStream: each request, from when it is read).
  absl::Duration default_deadline = absl::Seconds(30);
  // Runs Query calls (must outlive the Server); null: Query is UNIMPLEMENTED.
  QueryExecutor* queries = nullptr;
  // TLS of the API listener (the health listener stays plaintext: kubelet gRPC probes speak
  // nothing else). Not enabled: plaintext.
  ApiTlsOptions tls;
  // Caller authorization (see IngestServiceOptions); null: everything is allowed. Both must
  // outlive the Server.
  const auth::Authorizer* authorizer = nullptr;
  AuthObserver* auth_observer = nullptr;
  // The Ingestor's defaults, for judging requests as it will resolve them.
  std::string default_database = "default";
  ingest::AckMode default_ack = ingest::AckMode::kCommitted;
};

class Server {
 public:
  virtual ~Server() = default;
  // Ports actually bound (useful with port 0 in tests); health_port() is api_port() when
  // health_address is empty.
  virtual int api_port() const = 0;
  virtual int health_port() const = 0;
  // Health names: "liveness" is SERVING while the process runs; "readiness" and "" are SERVING
  // until Shutdown begins, whatever the buffer holds (the pod stays in its Services while
  // ClickHouse is slow; callers get backpressure instead); "buffer" follows Ingestor::Ready()
  // (NOT_SERVING from the high-water mark until below the low-water mark, and while draining),
  // for deployments that opt into buffer-based readiness.
  // Updates "buffer" from the ingestor. Called periodically by main; no effect once Shutdown
  // began.
  virtual void RefreshHealth() = 0;
  // "liveness": SERVING while the watchdog in main sees the ingestor make progress
  // (Ingestor::CheckProgress), NOT_SERVING while it does not, so the kubelet restarts a wedged
  // chgate. Never takes the ingestor's locks.
  virtual void SetLiveness(bool live) = 0;
  // With API TLS: reads the key and certificate files again and serves them to new connections
  // once they form a matching pair (ApiIdentity::Reload); logs what changed or why not. Called
  // every --api-reload-interval by main.
  virtual void ReloadApiCertificate() = 0;
  // With API TLS, the key and certificate served (ReloadApiCertificate replaces what it holds);
  // null for a plaintext API. It may outlive the server.
  virtual std::shared_ptr<ApiIdentity> api_identity() const = 0;
  // Readiness, "" and "buffer" NOT_SERVING at once, liveness stays SERVING; new Insert/InsertStream
  // calls get UNAVAILABLE; open streams stop reading and end with UNAVAILABLE after the acks
  // they owe. Then drains the ingestor (Ingestor::Shutdown(deadline): buffered batches are
  // flushed, requests still pending at `deadline` fail with UNAVAILABLE) so in-flight calls get
  // their outcome, and finally stops both listeners, cancelling calls still open at `deadline`.
  // Blocks until done; call it from main, never from a gRPC or Ingestor callback. Idempotent.
  virtual void Shutdown(absl::Time deadline) = 0;
  // Blocks until both listeners have stopped.
  virtual void Wait() = 0;
};

// Starts the servers; `ingestor` must outlive the returned Server. Errors: Unavailable (naming
// the address) when an address cannot be bound; InvalidArgument for unusable TLS files (see
// ApiServerCredentials). Destroying a Server that was not shut down stops
// its listeners at once (the ingestor is left alone).
absl::StatusOr<std::unique_ptr<Server>> StartServer(const ServerOptions& options,
                                                    ingest::Ingestor* ingestor);

}  // namespace chgate::service
