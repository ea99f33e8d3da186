#include "server/auth/authorizer.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chgate::auth {
namespace {

// Names echoed in messages are capped: a caller controls table names, and a long one must not
// push the status past a client's metadata limit.
constexpr size_t kMaxEchoedName = 200;

std::string Echo(absl::string_view name) {
  if (name.size() <= kMaxEchoedName) return std::string(name);
  return absl::StrCat(name.substr(0, kMaxEchoedName), "...(", name.size(), " bytes)");
}

Decision Deny(absl::Status status, DenyReason reason, std::string identity = "") {
  return Decision{std::move(status), reason, std::move(identity)};
}

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat(what, ": cannot read '", path, "'"));
  std::stringstream text;
  text << file.rdbuf();
  if (file.bad()) return absl::NotFoundError(absl::StrCat(what, ": cannot read '", path, "'"));
  return text.str();
}

// Stamps, reads and parses one of the files (T::Parse); errors name the file.
template <typename T, typename File>
absl::StatusOr<std::shared_ptr<const T>> LoadFile(File* file, const char* what) {
  file->stamp = FileStamp::Of(file->path);
  absl::StatusOr<std::string> text = ReadFile(file->path, what);
  if (!text.ok()) return text.status();
  absl::StatusOr<T> parsed = T::Parse(*text);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", file->path, "': ", parsed.status().message()));
  }
  return std::make_shared<const T>(*std::move(parsed));
}

}  // namespace

std::string_view DenyReasonLabel(DenyReason reason) {
  switch (reason) {
    case DenyReason::kNone:
      return "none";
    case DenyReason::kNoCredentials:
      return "no_credentials";
    case DenyReason::kBadToken:
      return "bad_token";
    case DenyReason::kUnknownIdentity:
      return "unknown_identity";
    case DenyReason::kInsertDenied:
      return "insert_denied";
    case DenyReason::kAckDenied:
      return "ack_denied";
    case DenyReason::kQueryDenied:
      return "query_denied";
  }
  return "none";
}

const std::vector<DenyReason>& AllDenyReasons() {
  static const auto* reasons = new std::vector<DenyReason>{
      DenyReason::kNoCredentials, DenyReason::kBadToken,  DenyReason::kUnknownIdentity,
      DenyReason::kInsertDenied,  DenyReason::kAckDenied, DenyReason::kQueryDenied};
  return *reasons;
}

Authorizer::Authorizer(AuthorizerOptions options) : options_(std::move(options)) {
  tokens_file_.path = options_.tokens_file;
  policy_file_.path = options_.policy_file;
}

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::Create(AuthorizerOptions options) {
  if (!options.tokens_file.empty() && options.policy_file.empty()) {
    return absl::InvalidArgumentError(
        "a tokens file needs a policy file: tokens name identities, the policy says what they "
        "may do");
  }
  std::unique_ptr<Authorizer> authorizer(new Authorizer(std::move(options)));
  if (!authorizer->enabled()) return authorizer;
  {
    absl::MutexLock lock(&authorizer->reload_mu_);
    if (!authorizer->options_.tokens_file.empty()) {
      if (absl::Status s = authorizer->LoadTokens(); !s.ok()) return s;
    }
    if (absl::Status s = authorizer->LoadPolicy(); !s.ok()) return s;
  }
  return authorizer;
}

Authorizer::~Authorizer() = default;

absl::Status Authorizer::LoadTokens() {
  absl::StatusOr<std::shared_ptr<const TokenSet>> tokens =
      LoadFile<TokenSet>(&tokens_file_, "tokens file");
  if (!tokens.ok()) return tokens.status();
  absl::MutexLock lock(&mu_);
  tokens_ = *std::move(tokens);
  return absl::OkStatus();
}

absl::Status Authorizer::LoadPolicy() {
  absl::StatusOr<std::shared_ptr<const Policy>> policy =
      LoadFile<Policy>(&policy_file_, "policy file");
  if (!policy.ok()) return policy.status();
  absl::MutexLock lock(&mu_);
  policy_ = *std::move(policy);
  return absl::OkStatus();
}

void Authorizer::ReloadChanged() {
  if (!enabled()) return;
  absl::MutexLock lock(&reload_mu_);
  // A file that went missing is a change once (its stamp then says so), not at every check.
  auto changed = [](const FileState& file) { return !(FileStamp::Of(file.path) == file.stamp); };
  auto report = [this](std::string_view kind, const std::string& path, const absl::Status& status) {
    if (options_.on_reload) options_.on_reload(kind, path, status);
  };
  if (!tokens_file_.path.empty() && changed(tokens_file_)) {
    absl::Status s = LoadTokens();
    report("tokens", tokens_file_.path, s);
  }
  if (changed(policy_file_)) {
    absl::Status s = LoadPolicy();
    report("policy", policy_file_.path, s);
  }
}

void Authorizer::Snapshot(std::shared_ptr<const Policy>* policy,
                          std::shared_ptr<const TokenSet>* tokens) const {
  absl::MutexLock lock(&mu_);
  *policy = policy_;
  *tokens = tokens_;
}

Decision Authorizer::Resolve(const Credentials& credentials, const Policy& policy,
                             const TokenSet* tokens, const Grant** grant) const {
  if (credentials.has_token) {
    if (credentials.token_malformed) {
      return Deny(
          absl::UnauthenticatedError("the authorization header is not a single \"Bearer <token>\""),
          DenyReason::kBadToken);
    }
    if (tokens == nullptr) {
      return Deny(absl::UnauthenticatedError(
                      "bearer tokens are not accepted here (chgate has no --api-tokens-file)"),
                  DenyReason::kBadToken);
    }
    std::optional<std::string> identity = tokens->Find(credentials.token_digest);
    if (!identity.has_value()) {
      return Deny(absl::UnauthenticatedError("the bearer token is not valid"),
                  DenyReason::kBadToken);
    }
    *grant = policy.Find(*identity);
    if (*grant == nullptr) {
      return Deny(absl::PermissionDeniedError(absl::StrCat("identity '", Echo(*identity),
                                                           "' has no section in the API policy")),
                  DenyReason::kUnknownIdentity, *identity);
    }
    return Decision{absl::OkStatus(), DenyReason::kNone, *std::move(identity)};
  }
  if (!credentials.certificate_names.empty()) {
    for (const std::string& name : credentials.certificate_names) {
      *grant = policy.Find(name);
      if (*grant != nullptr) return Decision{absl::OkStatus(), DenyReason::kNone, name};
    }
    std::vector<std::string> names;
    for (size_t i = 0; i < credentials.certificate_names.size() && i < 4; ++i) {
      names.push_back(Echo(credentials.certificate_names[i]));
    }
    return Deny(absl::PermissionDeniedError(absl::StrCat("no name of the client certificate (",
                                                         absl::StrJoin(names, ", "),
                                                         ") has a section in the API policy")),
                DenyReason::kUnknownIdentity, credentials.certificate_names.front());
  }
  return Deny(absl::UnauthenticatedError(
                  "no credentials: present a client certificate or an \"authorization: Bearer "
                  "<token>\" header"),
              DenyReason::kNoCredentials);
}

Decision Authorizer::Authenticate(const Credentials& credentials) const {
  if (!enabled()) return {};
  std::shared_ptr<const Policy> policy;
  std::shared_ptr<const TokenSet> tokens;
  Snapshot(&policy, &tokens);
  const Grant* grant = nullptr;
  return Resolve(credentials, *policy, tokens.get(), &grant);
}

Decision Authorizer::AuthorizeInsert(const Credentials& credentials, absl::string_view database,
                                     absl::string_view table, absl::string_view ack_mode) const {
  if (!enabled()) return {};
  std::shared_ptr<const Policy> policy;
  std::shared_ptr<const TokenSet> tokens;
  Snapshot(&policy, &tokens);
  const Grant* grant = nullptr;
  Decision decision = Resolve(credentials, *policy, tokens.get(), &grant);
  if (!decision.status.ok()) return decision;
  if (!grant->MayInsert(database, table)) {
    return Deny(absl::PermissionDeniedError(absl::StrCat("identity '", Echo(decision.identity),
                                                         "' may not insert into table ",
                                                         Echo(database), ".", Echo(table))),
                DenyReason::kInsertDenied, decision.identity);
  }
  if (!grant->MayAck(ack_mode)) {
    return Deny(absl::PermissionDeniedError(
                    absl::StrCat("identity '", Echo(decision.identity), "' may not use ack mode ",
                                 ack_mode, " (table ", Echo(database), ".", Echo(table), ")")),
                DenyReason::kAckDenied, decision.identity);
  }
  return decision;
}

Decision Authorizer::AuthorizeQuery(const Credentials& credentials) const {
  if (!enabled()) return {};
  std::shared_ptr<const Policy> policy;
  std::shared_ptr<const TokenSet> tokens;
  Snapshot(&policy, &tokens);
  const Grant* grant = nullptr;
  Decision decision = Resolve(credentials, *policy, tokens.get(), &grant);
  if (!decision.status.ok()) return decision;
  if (!grant->query) {
    return Deny(absl::PermissionDeniedError(
                    absl::StrCat("identity '", Echo(decision.identity), "' may not run Query")),
                DenyReason::kQueryDenied, decision.identity);
  }
  return decision;
}

}  // namespace chgate::auth
