// Transport security and caller credentials of the API listener: TLS server credentials whose
// certificate, key and client CA are re-read from their files when they change (open connections
// keep the certificate they were made with; new handshakes use the new one), and the
// extraction of a call's credentials (bearer token, verified client certificate names) for
// auth::Authorizer. Thread-safe free functions.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
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

// Checks the files now (so that a mistake stops the start instead of failing every handshake
// later) and returns credentials that reload them on change; TLS 1.2 is the lowest version
// offered (gRPC's default, which this relies on). Plaintext credentials when `options` is not
// enabled. Errors: InvalidArgument naming the file for a missing key or certificate, a file that
// is not PEM, a key that does not match the certificate, or an empty CA bundle.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ApiServerCredentials(
    const ApiTlsOptions& options);

// The end of the validity (notAfter) of the first certificate in `pem_file`: the API's serving
// certificate as the next handshake will present it. Errors: NotFound when the file cannot be
// read, InvalidArgument when it holds no PEM certificate or its notAfter cannot be read.
absl::StatusOr<absl::Time> CertificateNotAfter(const std::string& pem_file);

// The credentials a call presented: its `authorization` metadata (digested, never kept as text)
// and the URI and DNS names of a client certificate the TLS handshake verified.
auth::Credentials CallCredentials(const grpc::ServerContextBase& context);

}  // namespace chgate::service
