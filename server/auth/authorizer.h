// Authorizer: decides, per call and per request, who the caller is and whether it may do what it
// asks, from the tokens file (tokens.h) and the policy file (policy.h). Both files are read at
// Create and re-read by ReloadChanged whenever they changed (modification time, size and inode,
// so an atomic rename and a Kubernetes Secret update are both seen), which the owner calls
// periodically (chgate: every --api-reload-interval, on its housekeeping scheduler); a file that
// fails to parse keeps the previous content in force. It starts no thread.
//
// Without a policy file the Authorizer is disabled and allows everything (the loopback default).
// With one, a caller is identified by a bearer token, else by the names of its verified client
// certificate (URI SANs first, then DNS SANs; the first name the policy has a section for), and
// everything the policy does not grant is refused.
//
// Thread-safe; decisions take a short lock to read the current files.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/auth/policy.h"
#include "server/auth/tokens.h"
#include "server/common/file_stamp.h"

namespace chgate::auth {

// What a call presented, extracted by the service layer.
struct Credentials {
  bool has_token = false;        // an `authorization` header was sent
  bool token_malformed = false;  // ... but it is not exactly one "Bearer <token>"
  TokenDigest token_digest{};    // DigestToken(<token>) when has_token && !token_malformed
  // Names of the client certificate, when the TLS handshake verified one: URI SANs, then DNS SANs.
  std::vector<std::string> certificate_names;
};

// Why a call or request was refused; the `reason` label of chgate_api_auth_failures_total.
enum class DenyReason {
  kNone,
  kNoCredentials,    // neither token nor client certificate
  kBadToken,         // malformed, unknown, or tokens not configured
  kUnknownIdentity,  // authenticated, but the policy has no section for it
  kInsertDenied,     // the table is not granted
  kAckDenied,        // the ack mode is not granted
  kQueryDenied,      // Query is not granted
};
std::string_view DenyReasonLabel(DenyReason reason);
// Every reason but kNone, for metrics that export each label from the start.
const std::vector<DenyReason>& AllDenyReasons();

struct Decision {
  absl::Status status;  // OK, Unauthenticated or PermissionDenied (the message names the identity)
  DenyReason reason = DenyReason::kNone;
  std::string identity;  // empty when disabled or unauthenticated
};

struct AuthorizerOptions {
  std::string tokens_file;  // "": bearer tokens are refused
  std::string policy_file;  // "": disabled, everything is allowed
  // Called on ReloadChanged's thread after each attempt to reload a changed file: `kind` is
  // "tokens" or "policy", `status` OK or why the previous content stays in force. Not called for
  // the loads in Create.
  std::function<void(std::string_view kind, const std::string& path, const absl::Status& status)>
      on_reload;
};

class Authorizer {
 public:
  // Reads both files. Returns InvalidArgument for a file that does not parse or a tokens file
  // without a policy file, NotFound for a file that cannot be read.
  static absl::StatusOr<std::unique_ptr<Authorizer>> Create(AuthorizerOptions options);
  ~Authorizer();
  Authorizer(const Authorizer&) = delete;
  Authorizer& operator=(const Authorizer&) = delete;

  // Whether a policy is in force (false: every decision is OK).
  bool enabled() const { return !options_.policy_file.empty(); }

  // Who the caller is: OK with the identity, Unauthenticated (no or bad credentials) or
  // PermissionDenied (an identity the policy does not name).
  Decision Authenticate(const Credentials& credentials) const;
  // Authenticate, then whether the identity may insert into `database`.`table` (unquoted names)
  // with `ack_mode` ("committed", "accepted" or "persisted"): PermissionDenied naming both
  // otherwise.
  Decision AuthorizeInsert(const Credentials& credentials, absl::string_view database,
                           absl::string_view table, absl::string_view ack_mode) const;
  // Authenticate, then whether the identity may run Query.
  Decision AuthorizeQuery(const Credentials& credentials) const;

  // Re-reads the files that changed since they were last read (one call at a time; concurrent
  // calls wait).
  void ReloadChanged();

 private:
  struct FileState {
    std::string path;
    FileStamp stamp;  // taken before the last read, so a change made while reading is seen
  };

  explicit Authorizer(AuthorizerOptions options);
  absl::Status LoadTokens() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reload_mu_);
  absl::Status LoadPolicy() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reload_mu_);
  // Resolves the identity; on success `*grant` points into `policy`.
  Decision Resolve(const Credentials& credentials, const Policy& policy, const TokenSet* tokens,
                   const Grant** grant) const;
  void Snapshot(std::shared_ptr<const Policy>* policy,
                std::shared_ptr<const TokenSet>* tokens) const;

  const AuthorizerOptions options_;
  absl::Mutex reload_mu_;  // one reload at a time
  FileState tokens_file_ ABSL_GUARDED_BY(reload_mu_);
  FileState policy_file_ ABSL_GUARDED_BY(reload_mu_);
  mutable absl::Mutex mu_;
  std::shared_ptr<const Policy> policy_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const TokenSet> tokens_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chgate::auth
