// Certificates for TLS tests, made at test time by the `openssl` command in a fresh temporary
// directory: CAs, and leaf certificates signed by them with the subject alternative names a test
// needs, valid or already expired. Not thread-safe; one per test fixture.
#pragma once

#include <string>

namespace chgate::testing {

class TestPki {
 public:
  // Makes the temporary directory; aborts the test binary if that fails.
  TestPki();
  ~TestPki();  // removes the directory
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  // Makes <name>.crt and <name>.key: a self-signed CA. Returns false if openssl failed.
  bool MakeCa(const std::string& name);
  // Makes <name>.crt and <name>.key signed by CA `ca` with `sans` ("DNS:localhost,IP:127.0.0.1",
  // "URI:spiffe://test/a"). days < 0 makes a certificate whose validity ended yesterday.
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
  bool Run(const std::string& command) const;
  std::string dir_;
};

}  // namespace chgate::testing
