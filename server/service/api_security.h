// Transport security and caller credentials of the API listener: TLS server credentials whose
// certificate, key and client CA are re-read from their files when they change (open connections
// keep the certificate they were made with; new handshakes use the new one), and the
// extraction of a call's credentials (bearer token, verified client certificate names) for
// auth::Authorizer. Thread-safe free functions.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/auth/authorizer.h"

namespace chgate::service {

enum class ClientAuth {
  kRequire,   // the handshake fails without a client certificate signed by the client CA
  kOptional,  // a client certificate is verified when sent; callers may use a token instead
};

struct ApiTlsOptions {
  std::string cert_file;       // PEM certificate chain; "" = plaintext API
  std::string key_file;        // PEM private key of the certificate
  std::string client_ca_file;  // PEM CA bundle for client certificates; "" = none requested
  ClientAuth client_auth = ClientAuth::kRequire;
  // How often the files are checked for changes.
  absl::Duration reload_interval = absl::Seconds(10);

  bool enabled() const { return !cert_file.empty(); }
};

// The API's key and certificate as the TLS credentials read them: one in-memory file
// (/proc/self/fd/N) holding both, which only a pair whose key matches its certificate replaces.
// A renewal that rewrites the two files one after the other, or a key alone, never reaches a
// handshake: until both match again the previous pair is served. Thread-safe.
class ApiIdentity {
 public:
  // Reads and checks the files (the errors of ApiServerCredentials).
  static absl::StatusOr<std::unique_ptr<ApiIdentity>> Create(const ApiTlsOptions& options);
  ~ApiIdentity();
  ApiIdentity(const ApiIdentity&) = delete;
  ApiIdentity& operator=(const ApiIdentity&) = delete;

  // The file the credentials read.
  const std::string& path() const { return path_; }
  // Reads the key and certificate files again: true when a matching pair other than the one
  // served replaced it, false when nothing changed; an error (InvalidArgument: the key is not
  // the certificate's, a file is unreadable or not PEM) leaves the served pair as it is.
  absl::StatusOr<bool> Reload();
  // The end of the validity (notAfter) of the certificate served now: what a handshake presents,
  // which stays the previous one while the files on disk do not form a matching pair.
  absl::StatusOr<absl::Time> ServedNotAfter();

 private:
  ApiIdentity(ApiTlsOptions options, int fd, std::string served);

  const ApiTlsOptions options_;
  const int fd_;
  const std::string path_;
  absl::Mutex mu_;
  std::string served_ ABSL_GUARDED_BY(mu_);
};

// Checks the files now (so that a mistake stops the start instead of failing every handshake
// later) and returns credentials that reload them on change: the client CA from its file, the
// key and certificate from `*identity` (set here), which the caller keeps as long as the server
// and reloads (ApiIdentity::Reload). TLS 1.2 is the lowest version offered (gRPC's default,
// which this relies on). Plaintext credentials when `options` is not enabled. Errors:
// InvalidArgument naming the file for a missing key or certificate, a file that is not PEM, a
// key that does not match the certificate, or an empty CA bundle.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ApiServerCredentials(
    const ApiTlsOptions& options, std::unique_ptr<ApiIdentity>* identity);

// The end of the validity (notAfter) of the first certificate in `pem_file`. Errors: NotFound when
// the file cannot be read, InvalidArgument when it holds no PEM certificate or its notAfter cannot
// be read.
absl::StatusOr<absl::Time> CertificateNotAfter(const std::string& pem_file);

// The credentials a call presented: its `authorization` metadata (digested, never kept as text)
// and the URI and DNS names of a client certificate the TLS handshake verified.
auth::Credentials CallCredentials(const grpc::ServerContextBase& context);

}  // namespace chgate::service
