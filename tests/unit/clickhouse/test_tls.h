// Certificates for TLS tests, made with OpenSSL at test time: a CA, and leaf certificates it
// signs with chosen names and validity, written as PEM files into a directory. Also builds the
// server-side asio context a fake or null server serves TLS with.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace asio::ssl {
class context;
}  // namespace asio::ssl

namespace chgate::clickhouse::testing {

struct CertFiles {
  std::string cert;  // PEM certificate
  std::string key;   // PEM private key
};

struct LeafSpec {
  std::string common_name = "localhost";
  // "DNS:name" or "IP:1.2.3.4" (IPv4).
  std::vector<std::string> names = {"DNS:localhost", "IP:127.0.0.1"};
  // Validity relative to now.
  absl::Duration not_before = -absl::Hours(1);
  absl::Duration not_after = absl::Hours(24);
  bool client = false;  // extended key usage clientAuth instead of serverAuth
};

// A CA that writes its files and the leaves it signs under `dir` (which must exist).
class TestCa {
 public:
  static absl::StatusOr<std::unique_ptr<TestCa>> Create(const std::string& dir,
                                                        const std::string& name);
  ~TestCa();

  // The CA's own certificate (PEM file), for a client's CA file.
  const std::string& cert_file() const { return files_.cert; }
  // A leaf certificate and key signed by this CA, written as <dir>/<file_stem>.{crt,key}.
  absl::StatusOr<CertFiles> Issue(const std::string& file_stem, const LeafSpec& spec);

 private:
  TestCa() = default;
  struct State;
  std::unique_ptr<State> state_;
  std::string dir_;
  CertFiles files_;
};

// A TLS 1.2+ server context presenting `server` (and asking for client certificates signed by
// `client_ca_file` when that is not empty).
absl::StatusOr<std::shared_ptr<asio::ssl::context>> ServerContext(
    const CertFiles& server, const std::string& client_ca_file = "");

// A fresh directory under the system's temp dir.
std::string MakeTempDir(const std::string& prefix);

}  // namespace chgate::clickhouse::testing
