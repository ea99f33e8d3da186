#include "server/service/api_security.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace chgate::service {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read '", path, "'"));
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "not PEM";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

std::unique_ptr<BIO, BioFree> MemoryBio(const std::string& text) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// The first certificate of `pem`, and how many there are.
absl::StatusOr<std::unique_ptr<X509, X509Free>> FirstCertificate(const std::string& pem,
                                                                 const std::string& path,
                                                                 const char* flag, int* count) {
  auto bio = MemoryBio(pem);
  std::unique_ptr<X509, X509Free> first;
  *count = 0;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    if (first == nullptr) {
      first.reset(cert);
    } else {
      X509_free(cert);
    }
    ++*count;
  }
  ERR_clear_error();  // the end of the input reads as an error
  if (first == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", path, "' holds no PEM certificate"));
  }
  return first;
}

// The key and the certificate chain of `options`, as one PEM text (the key first), when the key
// is the certificate's.
absl::StatusOr<std::string> ReadPair(const ApiTlsOptions& options) {
  if (options.key_file.empty()) {
    return absl::InvalidArgumentError("--api-tls-cert-file needs --api-tls-key-file");
  }
  absl::StatusOr<std::string> cert_pem = ReadPem(options.cert_file, "--api-tls-cert-file");
  if (!cert_pem.ok()) return cert_pem.status();
  absl::StatusOr<std::string> key_pem = ReadPem(options.key_file, "--api-tls-key-file");
  if (!key_pem.ok()) return key_pem.status();
  int count = 0;
  auto cert = FirstCertificate(*cert_pem, options.cert_file, "--api-tls-cert-file", &count);
  if (!cert.ok()) return cert.status();
  auto key_bio = MemoryBio(*key_pem);
  std::unique_ptr<EVP_PKEY, KeyFree> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--api-tls-key-file: '", options.key_file,
                                                   "' holds no PEM private key (", OpenSslError(),
                                                   ")"));
  }
  if (X509_check_private_key(cert->get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat("--api-tls-key-file: '", options.key_file,
                                                   "' is not the key of the certificate in '",
                                                   options.cert_file, "'"));
  }
  std::string pair = *std::move(key_pem);
  if (!pair.empty() && pair.back() != '\n') pair.push_back('\n');
  pair += *cert_pem;
  return pair;
}

absl::Status CheckClientCa(const ApiTlsOptions& options) {
  if (options.client_ca_file.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> ca_pem = ReadPem(options.client_ca_file, "--api-tls-client-ca-file");
  if (!ca_pem.ok()) return ca_pem.status();
  int count = 0;
  return FirstCertificate(*ca_pem, options.client_ca_file, "--api-tls-client-ca-file", &count)
      .status();
}

// An anonymous in-memory file holding `text`, or -1 (errno set).
int MemoryFile(const std::string& text) {
  const int fd = ::memfd_create("chgate-api-identity", MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int saved = errno;
      ::close(fd);
      errno = saved == 0 ? EIO : saved;
      return -1;
    }
    done += static_cast<size_t>(n);
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ApiIdentity>> ApiIdentity::Create(const ApiTlsOptions& options) {
  absl::StatusOr<std::string> pair = ReadPair(options);
  if (!pair.ok()) return pair.status();
  const int fd = MemoryFile(*pair);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot hold the API's key and certificate in memory: ",
                                            std::strerror(errno)));
  }
  auto identity = std::unique_ptr<ApiIdentity>(new ApiIdentity(options, fd, *std::move(pair)));
  // gRPC reads it by name: /proc must be mounted (it is in containers and pods).
  if (std::ifstream probe(identity->path(), std::ios::binary); !probe) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read the API's key and certificate back from ", identity->path(),
                     " (is /proc mounted?)"));
  }
  return identity;
}

ApiIdentity::ApiIdentity(ApiTlsOptions options, int fd, std::string served)
    : options_(std::move(options)),
      fd_(fd),
      path_(absl::StrCat("/proc/self/fd/", fd)),
      served_(std::move(served)) {}

ApiIdentity::~ApiIdentity() { ::close(fd_); }

absl::StatusOr<bool> ApiIdentity::Reload() {
  absl::StatusOr<std::string> pair = ReadPair(options_);
  absl::MutexLock lock(&mu_);
  if (!pair.ok()) return pair.status();
  if (*pair == served_) return false;
  const int fd = MemoryFile(*pair);
  // dup2 replaces what fd_ names in one step: gRPC's next read sees the old pair or the new one.
  if (fd < 0 || ::dup2(fd, fd_) < 0) {
    const int saved = errno;
    if (fd >= 0) ::close(fd);
    return absl::InternalError(
        absl::StrCat("cannot replace the API's key and certificate: ", std::strerror(saved)));
  }
  ::close(fd);
  served_ = *std::move(pair);
  return true;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ApiServerCredentials(
    const ApiTlsOptions& options, std::unique_ptr<ApiIdentity>* identity) {
  if (!options.enabled()) {
    if (!options.key_file.empty() || !options.client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--api-tls-key-file and --api-tls-client-ca-file need --api-tls-cert-file");
    }
    return grpc::InsecureServerCredentials();
  }
  if (absl::Status s = CheckClientCa(options); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<ApiIdentity>> created = ApiIdentity::Create(options);
  if (!created.ok()) return created.status();
  const auto interval = static_cast<unsigned int>(
      std::max<int64_t>(1, absl::ToInt64Seconds(options.reload_interval)));
  // gRPC reads the key and the certificate from the one in-memory file (each read takes the PEM
  // blocks of its kind), which only a matching pair ever replaces; the client CA from its file.
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      (*created)->path(), (*created)->path(), options.client_ca_file, interval);
  grpc::experimental::TlsServerCredentialsOptions tls(provider);
  tls.watch_identity_key_cert_pairs();
  if (options.client_ca_file.empty()) {
    tls.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    tls.watch_root_certs();
    tls.set_cert_request_type(options.client_auth == ClientAuth::kRequire
                                  ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                  : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::experimental::TlsServerCredentials(tls);
  if (credentials == nullptr) {
    return absl::InvalidArgumentError("gRPC refused the API's TLS settings");
  }
  *identity = *std::move(created);
  return credentials;
}

namespace {

// The notAfter of the first certificate in the PEM text `pem` (read from `source`).
absl::StatusOr<absl::Time> NotAfterOf(const std::string& pem, const std::string& source) {
  int count = 0;
  auto cert = FirstCertificate(pem, source, "certificate", &count);
  if (!cert.ok()) return cert.status();
  const ASN1_TIME* not_after = X509_get0_notAfter(cert->get());
  struct tm parts = {};
  if (not_after == nullptr || ASN1_TIME_to_tm(not_after, &parts) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("the certificate in '", source, "' has no readable notAfter"));
  }
  return absl::FromUnixSeconds(timegm(&parts));
}

}  // namespace

absl::StatusOr<absl::Time> ApiIdentity::ServedNotAfter() {
  absl::MutexLock l(&mu_);
  return NotAfterOf(served_, path_);
}

absl::StatusOr<absl::Time> CertificateNotAfter(const std::string& pem_file) {
  std::ifstream file(pem_file, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read '", pem_file, "'"));
  std::stringstream text;
  text << file.rdbuf();
  return NotAfterOf(text.str(), pem_file);
}

auth::Credentials CallCredentials(const grpc::ServerContextBase& context) {
  auth::Credentials credentials;
  const auto& metadata = context.client_metadata();
  const auto [first, last] = metadata.equal_range("authorization");
  if (first != last) {
    credentials.has_token = true;
    const grpc::string_ref value = first->second;
    absl::string_view text(value.data(), value.size());
    constexpr absl::string_view kScheme = "bearer ";
    const bool bearer = text.size() > kScheme.size() &&
                        absl::EqualsIgnoreCase(text.substr(0, kScheme.size()), kScheme);
    if (std::next(first) != last || !bearer) {
      credentials.token_malformed = true;
    } else {
      text.remove_prefix(kScheme.size());
      text = absl::StripAsciiWhitespace(text);
      credentials.token_malformed = text.empty();
      if (!text.empty()) credentials.token_digest = auth::DigestToken(text);
    }
  }
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    for (const char* property : {GRPC_PEER_URI_PROPERTY_NAME, GRPC_PEER_DNS_PROPERTY_NAME}) {
      for (const grpc::string_ref& name : auth->FindPropertyValues(property)) {
        credentials.certificate_names.emplace_back(name.data(), name.size());
      }
    }
  }
  return credentials;
}

}  // namespace chgate::service
