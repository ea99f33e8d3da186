#include "tests/unit/clickhouse/test_tls.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "asio/ssl/context.hpp"

namespace chgate::clickhouse::testing {
namespace {

using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&::EVP_PKEY_free)>;
using CertPtr = std::unique_ptr<X509, decltype(&::X509_free)>;

KeyPtr NewKey() { return KeyPtr(::EVP_EC_gen("P-256"), &::EVP_PKEY_free); }

absl::Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = ::X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return absl::InternalError(absl::StrCat("extension ", value));
  ::X509_add_ext(cert, ext, -1);
  ::X509_EXTENSION_free(ext);
  return absl::OkStatus();
}

absl::StatusOr<CertPtr> MakeCert(const std::string& cn, EVP_PKEY* key, X509* issuer,
                                 absl::Duration not_before, absl::Duration not_after, long serial) {
  CertPtr cert(::X509_new(), &::X509_free);
  ::X509_set_version(cert.get(), 2);
  ::ASN1_INTEGER_set(::X509_get_serialNumber(cert.get()), serial);
  ::X509_gmtime_adj(::X509_getm_notBefore(cert.get()), absl::ToInt64Seconds(not_before));
  ::X509_gmtime_adj(::X509_getm_notAfter(cert.get()), absl::ToInt64Seconds(not_after));
  ::X509_set_pubkey(cert.get(), key);
  X509_NAME* name = ::X509_get_subject_name(cert.get());
  ::X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  ::X509_set_issuer_name(cert.get(), issuer != nullptr ? ::X509_get_subject_name(issuer) : name);
  return cert;
}

absl::Status WritePem(const std::string& path, X509* cert, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return absl::InternalError(absl::StrCat("cannot write ", path));
  int ok = cert != nullptr ? ::PEM_write_X509(f, cert)
                           : ::PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  if (ok != 1) return absl::InternalError(absl::StrCat("cannot write PEM to ", path));
  return absl::OkStatus();
}

}  // namespace

struct TestCa::State {
  KeyPtr key{nullptr, &::EVP_PKEY_free};
  CertPtr cert{nullptr, &::X509_free};
  long next_serial = 2;
};

TestCa::~TestCa() = default;

absl::StatusOr<std::unique_ptr<TestCa>> TestCa::Create(const std::string& dir,
                                                       const std::string& name) {
  std::unique_ptr<TestCa> ca(new TestCa());
  ca->dir_ = dir;
  ca->state_ = std::make_unique<State>();
  ca->state_->key = NewKey();
  auto cert =
      MakeCert(name, ca->state_->key.get(), nullptr, -absl::Hours(1), absl::Hours(24 * 30), 1);
  if (!cert.ok()) return cert.status();
  ca->state_->cert = *std::move(cert);
  X509* c = ca->state_->cert.get();
  for (auto [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:TRUE"},
                            std::pair{NID_key_usage, "critical,keyCertSign,cRLSign"},
                            std::pair{NID_subject_key_identifier, "hash"}}) {
    if (absl::Status st = AddExtension(c, c, nid, value); !st.ok()) return st;
  }
  if (::X509_sign(c, ca->state_->key.get(), ::EVP_sha256()) == 0) {
    return absl::InternalError("cannot sign the CA certificate");
  }
  ca->files_.cert = absl::StrCat(dir, "/", name, "-ca.crt");
  ca->files_.key = absl::StrCat(dir, "/", name, "-ca.key");
  if (absl::Status st = WritePem(ca->files_.cert, c, nullptr); !st.ok()) return st;
  if (absl::Status st = WritePem(ca->files_.key, nullptr, ca->state_->key.get()); !st.ok()) {
    return st;
  }
  return ca;
}

absl::StatusOr<CertFiles> TestCa::Issue(const std::string& file_stem, const LeafSpec& spec) {
  KeyPtr key = NewKey();
  auto cert = MakeCert(spec.common_name, key.get(), state_->cert.get(), spec.not_before,
                       spec.not_after, state_->next_serial++);
  if (!cert.ok()) return cert.status();
  X509* c = cert->get();
  std::vector<std::pair<int, std::string>> extensions = {
      {NID_basic_constraints, "critical,CA:FALSE"},
      {NID_key_usage, "critical,digitalSignature,keyAgreement"},
      {NID_ext_key_usage, spec.client ? "clientAuth" : "serverAuth"},
      {NID_authority_key_identifier, "keyid"}};
  if (!spec.names.empty()) {
    extensions.emplace_back(NID_subject_alt_name, absl::StrJoin(spec.names, ","));
  }
  for (const auto& [nid, value] : extensions) {
    if (absl::Status st = AddExtension(c, state_->cert.get(), nid, value); !st.ok()) return st;
  }
  if (::X509_sign(c, state_->key.get(), ::EVP_sha256()) == 0) {
    return absl::InternalError("cannot sign a leaf certificate");
  }
  CertFiles files{.cert = absl::StrCat(dir_, "/", file_stem, ".crt"),
                  .key = absl::StrCat(dir_, "/", file_stem, ".key")};
  if (absl::Status st = WritePem(files.cert, c, nullptr); !st.ok()) return st;
  if (absl::Status st = WritePem(files.key, nullptr, key.get()); !st.ok()) return st;
  return files;
}

absl::StatusOr<std::shared_ptr<asio::ssl::context>> ServerContext(
    const CertFiles& server, const std::string& client_ca_file) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  ::SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  asio::error_code ec;
  ctx->use_certificate_chain_file(server.cert, ec);
  if (!ec) ctx->use_private_key_file(server.key, asio::ssl::context::pem, ec);
  if (!ec && !client_ca_file.empty()) {
    ctx->load_verify_file(client_ca_file, ec);
    if (!ec) {
      ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert, ec);
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("server TLS context: ", ec.message()));
  return ctx;
}

std::string MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string templ =
      absl::StrCat(base != nullptr && *base != '\0' ? base : "/tmp", "/", prefix, "-XXXXXX");
  char* made = ::mkdtemp(templ.data());
  return made != nullptr ? std::string(made) : std::string();
}

}  // namespace chgate::clickhouse::testing
