#include "tests/unit/tls/test_pki.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace chgate::testing {

TestPki::TestPki() {
  std::string pattern = (std::filesystem::temp_directory_path() / "chgate-pki-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    std::cerr << "cannot make a temporary directory\n";
    std::abort();
  }
  dir_ = pattern;
}

TestPki::~TestPki() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

bool TestPki::Run(const std::string& command) const {
  const std::string full = "cd '" + dir_ + "' && " + command + " >>openssl.log 2>&1";
  if (std::system(full.c_str()) == 0) return true;
  std::cerr << "failed: " << command << "\n" << Read("openssl.log");
  return false;
}

bool TestPki::MakeCa(const std::string& name) {
  return Run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " +
             name + ".key -out " + name + ".crt -days 2 -subj /CN=" + name +
             " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign");
}

bool TestPki::Issue(const std::string& name, const std::string& ca, const std::string& sans,
                    int days) {
  Write(name + ".ext", "subjectAltName=" + sans +
                           "\nbasicConstraints=CA:FALSE\n"
                           "extendedKeyUsage=serverAuth,clientAuth\n");
  // A negative -days puts notAfter before now: the certificate has expired.
  return Run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + name +
             ".key -out " + name + ".csr -subj /CN=" + name) &&
         Run("openssl x509 -req -in " + name + ".csr -CA " + ca + ".crt -CAkey " + ca +
             ".key -CAcreateserial -out " + name + ".crt -days " + std::to_string(days) +
             " -extfile " + name + ".ext");
}

std::string TestPki::Read(const std::string& file) const {
  std::ifstream in(Path(file), std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void TestPki::Write(const std::string& file, const std::string& text) const {
  const std::string tmp = Path(file + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  std::filesystem::rename(tmp, Path(file));
}

}  // namespace chgate::testing
