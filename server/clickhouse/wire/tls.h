// TLS settings for connections to ClickHouse's secure native port. TlsClientContext owns the
// OpenSSL context built from certificate files and rebuilds it when a file changes (rotation by
// cert-manager or a secret update): connections opened afterwards use the new files, connections
// already open keep theirs. A rebuild that fails (a half-written file during rotation) keeps the
// previous context and is reported by last_reload_error(). Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/common/file_stamp.h"

namespace asio::ssl {
class context;
}  // namespace asio::ssl

namespace chgate::clickhouse {

struct TlsClientOptions {
  // PEM file of the CA certificates that may sign the server's certificate. Empty: the system's
  // trust store (/etc/ssl/certs on Debian).
  std::string ca_file;
  // Client certificate chain and private key (PEM) for mutual TLS; both or neither.
  std::string cert_file;
  std::string key_file;
  // The name sent in SNI and checked against the server's certificate. Empty: the endpoint's
  // host (a DNS name, or an IP address checked against the certificate's IP SANs).
  std::string server_name;
  // Skips verification of the server's certificate (encrypts, but trusts any server).
  bool insecure_skip_verify = false;
  // How often the files' metadata is looked at for changes (cheap: stat() of each file).
  absl::Duration reload_check_interval = absl::Seconds(1);
};

class TlsClientContext {
 public:
  // Loads the files once. Errors: InvalidArgument naming the file and what is wrong with it (not
  // found, not PEM, key does not match the certificate), or for a cert without key.
  static absl::StatusOr<std::shared_ptr<TlsClientContext>> Create(TlsClientOptions options);
  ~TlsClientContext();
  TlsClientContext(const TlsClientContext&) = delete;
  TlsClientContext& operator=(const TlsClientContext&) = delete;

  // The context for a new connection: rebuilt first when a file changed since the last build.
  std::shared_ptr<asio::ssl::context> Current();

  const TlsClientOptions& options() const { return options_; }
  // Successful rebuilds after the first load, and failed ones.
  uint64_t reloads() const { return reloads_.load(std::memory_order_relaxed); }
  uint64_t reload_failures() const { return reload_failures_.load(std::memory_order_relaxed); }
  absl::Status last_reload_error() const;

 private:
  explicit TlsClientContext(TlsClientOptions options);
  absl::StatusOr<std::shared_ptr<asio::ssl::context>> Build() const;
  // The stamps of the CA, certificate and key files (those set), in that order.
  std::vector<FileStamp> Stamps() const;

  const TlsClientOptions options_;
  mutable absl::Mutex mu_;
  std::shared_ptr<asio::ssl::context> current_ ABSL_GUARDED_BY(mu_);
  std::vector<FileStamp> stamps_ ABSL_GUARDED_BY(mu_);
  absl::Time next_check_ ABSL_GUARDED_BY(mu_);
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> reloads_{0};
  std::atomic<uint64_t> reload_failures_{0};
};

}  // namespace chgate::clickhouse
