// Certificates for TLS tests, made at test time with OpenSSL's library (no openssl command
// needed) in a fresh temporary directory: CAs, and leaf certificates signed by them with the
// names and validity a test needs, valid, expired or not yet valid. Also the server-side asio
// TLS context a fake or null ClickHouse serves with. Not thread-safe; one per test fixture.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace asio::ssl {
class context;
}  // namespace asio::ssl

namespace chgate::testing {

struct LeafSpec {
  std::string common_name = "localhost";
  // Subject alternative names: "DNS:name", "IP:1.2.3.4", "URI:spiffe://...".
  std::vector<std::string> names = {"DNS:localhost", "IP:127.0.0.1"};
  // Validity relative to now.
  absl::Duration not_before = -absl::Hours(1);
  absl::Duration not_after = absl::Hours(48);
};

class TestPki {
 public:
  // Makes the temporary directory; aborts the test binary if that fails.
  TestPki();
  ~TestPki();  // removes the directory
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  // Makes <name>.crt and <name>.key: a self-signed CA. Returns false (and prints why) on failure.
  bool MakeCa(const std::string& name);
  // Makes <name>.crt and <name>.key signed by CA `ca` (made by MakeCa) for `spec`. The
  // certificate serves both as a server's and as a client's.
  bool Issue(const std::string& name, const std::string& ca, const LeafSpec& spec);
  // The same with `sans` as one list ("DNS:localhost,IP:127.0.0.1", "URI:spiffe://test/a"),
  // valid for `days` days; days < 0 makes a certificate whose validity ended that long ago.
  bool Issue(const std::string& name, const std::string& ca, const std::string& sans, int days = 2);

  // Path of a file in the directory (e.g. Path("ca.crt")).
  std::string Path(const std::string& file) const { return dir_ + "/" + file; }
  // Contents of Path(file); empty if it cannot be read.
  std::string Read(const std::string& file) const;
  // Writes `text` to Path(file) atomically (temporary file, then rename), as Kubernetes and
  // cert-manager replace files.
  void Write(const std::string& file, const std::string& text) const;
  // Copies `from` over `to` atomically.
  void Replace(const std::string& to, const std::string& from) const { Write(to, Read(from)); }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  long next_serial_ = 1;
};

// A TLS 1.2+ server context presenting <name>.crt/<name>.key of `pki`, and requiring client
// certificates signed by `client_ca` (a CA name of `pki`) when that is not empty.
absl::StatusOr<std::shared_ptr<asio::ssl::context>> ServerContext(
    const TestPki& pki, const std::string& name, const std::string& client_ca = "");

}  // namespace chgate::testing
