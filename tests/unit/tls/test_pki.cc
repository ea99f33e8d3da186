#include "tests/unit/tls/test_pki.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "asio/ssl/context.hpp"

namespace chgate::testing {
namespace {

using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&::EVP_PKEY_free)>;
using CertPtr = std::unique_ptr<X509, decltype(&::X509_free)>;

bool Fail(const std::string& what) {
  std::cerr << "test PKI: " << what << "\n";
  ::ERR_print_errors_fp(stderr);
  return false;
}

bool AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = ::X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return Fail(absl::StrCat("extension '", value, "'"));
  ::X509_add_ext(cert, ext, -1);
  ::X509_EXTENSION_free(ext);
  return true;
}

CertPtr NewCert(const std::string& cn, EVP_PKEY* key, absl::Duration not_before,
                absl::Duration not_after, long serial) {
  CertPtr cert(::X509_new(), &::X509_free);
  ::X509_set_version(cert.get(), 2);
  ::ASN1_INTEGER_set(::X509_get_serialNumber(cert.get()), serial);
  ::X509_gmtime_adj(::X509_getm_notBefore(cert.get()), absl::ToInt64Seconds(not_before));
  ::X509_gmtime_adj(::X509_getm_notAfter(cert.get()), absl::ToInt64Seconds(not_after));
  ::X509_set_pubkey(cert.get(), key);
  ::X509_NAME_add_entry_by_txt(::X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  return cert;
}

// Writes <dir>/<name>.crt and .key.
bool WriteFiles(const TestPki& pki, const std::string& name, X509* cert, EVP_PKEY* key) {
  for (const bool is_cert : {true, false}) {
    const std::string path = pki.Path(name + (is_cert ? ".crt" : ".key"));
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) return Fail(absl::StrCat("cannot write ", path));
    const int ok = is_cert ? ::PEM_write_X509(f, cert)
                           : ::PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
    if (ok != 1) return Fail(absl::StrCat("cannot write PEM to ", path));
  }
  return true;
}

}  // namespace

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

bool TestPki::MakeCa(const std::string& name) {
  KeyPtr key(::EVP_EC_gen("P-256"), &::EVP_PKEY_free);
  if (key == nullptr) return Fail("EC key");
  CertPtr cert = NewCert(name, key.get(), -absl::Hours(1), absl::Hours(48), next_serial_++);
  X509* c = cert.get();
  ::X509_set_issuer_name(c, ::X509_get_subject_name(c));
  if (!AddExtension(c, c, NID_basic_constraints, "critical,CA:TRUE") ||
      !AddExtension(c, c, NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !AddExtension(c, c, NID_subject_key_identifier, "hash")) {
    return false;
  }
  if (::X509_sign(c, key.get(), ::EVP_sha256()) == 0) return Fail("signing the CA");
  return WriteFiles(*this, name, c, key.get());
}

bool TestPki::Issue(const std::string& name, const std::string& ca, const LeafSpec& spec) {
  auto read = [&](auto reader, const std::string& file) {
    FILE* f = std::fopen(Path(file).c_str(), "r");
    auto* value = f != nullptr ? reader(f, nullptr, nullptr, nullptr) : nullptr;
    if (f != nullptr) std::fclose(f);
    return value;
  };
  CertPtr ca_cert(read(::PEM_read_X509, ca + ".crt"), &::X509_free);
  KeyPtr ca_key(read(::PEM_read_PrivateKey, ca + ".key"), &::EVP_PKEY_free);
  if (ca_cert == nullptr || ca_key == nullptr) return Fail(absl::StrCat("no CA '", ca, "'"));
  KeyPtr key(::EVP_EC_gen("P-256"), &::EVP_PKEY_free);
  if (key == nullptr) return Fail("EC key");
  CertPtr cert =
      NewCert(spec.common_name, key.get(), spec.not_before, spec.not_after, next_serial_++);
  X509* c = cert.get();
  ::X509_set_issuer_name(c, ::X509_get_subject_name(ca_cert.get()));
  if (!AddExtension(c, ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE") ||
      !AddExtension(c, ca_cert.get(), NID_key_usage, "critical,digitalSignature,keyAgreement") ||
      !AddExtension(c, ca_cert.get(), NID_ext_key_usage, "serverAuth,clientAuth") ||
      !AddExtension(c, ca_cert.get(), NID_authority_key_identifier, "keyid")) {
    return false;
  }
  if (!spec.names.empty() &&
      !AddExtension(c, ca_cert.get(), NID_subject_alt_name, absl::StrJoin(spec.names, ","))) {
    return false;
  }
  if (::X509_sign(c, ca_key.get(), ::EVP_sha256()) == 0) return Fail("signing a certificate");
  return WriteFiles(*this, name, c, key.get());
}

bool TestPki::Issue(const std::string& name, const std::string& ca, const std::string& sans,
                    int days) {
  LeafSpec spec{.common_name = name, .names = {sans}};
  if (days < 0) {
    spec.not_before = absl::Hours(24) * (days - 1);
    spec.not_after = absl::Hours(24) * days;
  } else {
    spec.not_after = absl::Hours(24) * days;
  }
  return Issue(name, ca, spec);
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

absl::StatusOr<std::shared_ptr<asio::ssl::context>> ServerContext(const TestPki& pki,
                                                                  const std::string& name,
                                                                  const std::string& client_ca) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  ::SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  asio::error_code ec;
  ctx->use_certificate_chain_file(pki.Path(name + ".crt"), ec);
  if (!ec) ctx->use_private_key_file(pki.Path(name + ".key"), asio::ssl::context::pem, ec);
  if (!ec && !client_ca.empty()) {
    ctx->load_verify_file(pki.Path(client_ca + ".crt"), ec);
    if (!ec) {
      ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert, ec);
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("server TLS context: ", ec.message()));
  return ctx;
}

}  // namespace chgate::testing
