#include "server/clickhouse/wire/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "asio/ssl/context.hpp"
#include "asio/ssl/error.hpp"
#include "server/log/log.h"

namespace chgate::clickhouse {
namespace {

constexpr log::Component kLog("tls");

absl::Status CheckReadable(const std::string& path, const char* what) {
  if (::access(path.c_str(), R_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", path, "' cannot be read: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status FileError(const std::string& path, const char* what, const asio::error_code& ec) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, " '", path, "' is not usable: ", ec.message()));
}

}  // namespace

absl::StatusOr<std::shared_ptr<TlsClientContext>> TlsClientContext::Create(
    TlsClientOptions options) {
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs both a certificate file and a key file");
  }
  std::shared_ptr<TlsClientContext> ctx(new TlsClientContext(std::move(options)));
  absl::MutexLock lock(&ctx->mu_);
  ctx->stamps_ = ctx->Stamps();
  auto built = ctx->Build();
  if (!built.ok()) return built.status();
  ctx->current_ = *std::move(built);
  ctx->next_check_ = absl::Now() + ctx->options_.reload_check_interval;
  return ctx;
}

TlsClientContext::TlsClientContext(TlsClientOptions options) : options_(std::move(options)) {}

TlsClientContext::~TlsClientContext() = default;

std::vector<FileStamp> TlsClientContext::Stamps() const {
  std::vector<FileStamp> stamps;
  for (const std::string* path : {&options_.ca_file, &options_.cert_file, &options_.key_file}) {
    if (!path->empty()) stamps.push_back(FileStamp::Of(*path));
  }
  return stamps;
}

absl::StatusOr<std::shared_ptr<asio::ssl::context>> TlsClientContext::Build() const {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  SSL_CTX* native = ctx->native_handle();
  // TLS 1.2 is the oldest version still considered safe; ClickHouse serves 1.2 and 1.3.
  ::SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  ::SSL_CTX_set_options(native, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  asio::error_code ec;
  if (options_.insecure_skip_verify) {
    ctx->set_verify_mode(asio::ssl::verify_none, ec);
  } else {
    ctx->set_verify_mode(asio::ssl::verify_peer, ec);
    if (options_.ca_file.empty()) {
      ctx->set_default_verify_paths(ec);
      if (ec) {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot load the system's trusted CAs: ", ec.message()));
      }
    } else {
      if (absl::Status st = CheckReadable(options_.ca_file, "CA file"); !st.ok()) return st;
      ctx->load_verify_file(options_.ca_file, ec);
      if (ec) return FileError(options_.ca_file, "CA file", ec);
    }
  }
  if (!options_.cert_file.empty()) {
    if (absl::Status st = CheckReadable(options_.cert_file, "client certificate file"); !st.ok()) {
      return st;
    }
    if (absl::Status st = CheckReadable(options_.key_file, "client key file"); !st.ok()) return st;
    ctx->use_certificate_chain_file(options_.cert_file, ec);
    if (ec) return FileError(options_.cert_file, "client certificate file", ec);
    ctx->use_private_key_file(options_.key_file, asio::ssl::context::pem, ec);
    if (ec && ec.category() == asio::error::get_ssl_category() &&
        ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH) {
      return absl::InvalidArgumentError(absl::StrCat("client key file '", options_.key_file,
                                                     "' does not match the certificate in '",
                                                     options_.cert_file, "'"));
    }
    if (ec) return FileError(options_.key_file, "client key file", ec);
    if (::SSL_CTX_check_private_key(native) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("client key file '", options_.key_file,
                                                     "' does not match the certificate in '",
                                                     options_.cert_file, "'"));
    }
  }
  return ctx;
}

std::shared_ptr<asio::ssl::context> TlsClientContext::Current() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  if (now < next_check_) return current_;
  next_check_ = now + options_.reload_check_interval;
  std::vector<FileStamp> stamps = Stamps();
  if (stamps == stamps_) return current_;
  auto built = Build();
  if (!built.ok()) {
    // Keep the previous context; the next check tries again (the files may be mid-rotation),
    // but a failure is counted once per change seen.
    if (last_error_.ok() || last_error_ != built.status()) {
      reload_failures_.fetch_add(1, std::memory_order_relaxed);
      // Files are named, never quoted: the key file is key material.
      kLog.Warn(
          "ClickHouse TLS files changed but could not be loaded; new connections keep the "
          "previous ones",
          {{"ca_file", options_.ca_file},
           {"cert_file", options_.cert_file},
           {"error", built.status().message()}});
    }
    last_error_ = built.status();
    return current_;
  }
  stamps_ = std::move(stamps);
  current_ = *std::move(built);
  last_error_ = absl::OkStatus();
  reloads_.fetch_add(1, std::memory_order_relaxed);
  kLog.Info("ClickHouse TLS files reloaded",
            {{"ca_file", options_.ca_file}, {"cert_file", options_.cert_file}});
  return current_;
}

absl::Status TlsClientContext::last_reload_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

}  // namespace chgate::clickhouse
