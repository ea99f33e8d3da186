// The tokens file, the policy file and the Authorizer's decisions and reloads, without gRPC.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/auth/authorizer.h"
#include "server/auth/policy.h"
#include "server/auth/tokens.h"
#include "tests/unit/tls/test_pki.h"

namespace chgate::auth {
namespace {

constexpr char kWriterToken[] = "writer-token-0123456789";
constexpr char kOtherToken[] = "other-token-0123456789";

Credentials Token(const std::string& token) {
  return Credentials{.has_token = true, .token_digest = DigestToken(token)};
}

Credentials Certificate(std::vector<std::string> names) {
  return Credentials{.certificate_names = std::move(names)};
}

TEST(TokenSetTest, FindsTheIdentityOfEachToken) {
  auto tokens =
      TokenSet::Parse(absl::StrCat("# comment\n\nwriter ", kWriterToken, "\n  other\t", kOtherToken,
                                   "  \nwriter ", "writer-second-token-xyz\n"));
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->size(), 3u);
  EXPECT_EQ(tokens->Find(DigestToken(kWriterToken)), "writer");
  EXPECT_EQ(tokens->Find(DigestToken("writer-second-token-xyz")), "writer");
  EXPECT_EQ(tokens->Find(DigestToken(kOtherToken)), "other");
  EXPECT_EQ(tokens->Find(DigestToken("writer-token-012345678")), std::nullopt);
  EXPECT_EQ(tokens->Find(DigestToken("")), std::nullopt);
}

TEST(TokenSetTest, RejectsBadLinesWithoutEchoingTokens) {
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {"onlyidentity\n", "line 1: expected"},
      {"a b c\n", "line 1: expected"},
      {"\nwriter short\n", "line 2: the token is shorter than 16"},
      {absl::StrCat("a ", kWriterToken, "\nb ", kWriterToken, "\n"),
       "line 2: the token is already listed for 'a'"},
  };
  for (const Case& c : cases) {
    auto tokens = TokenSet::Parse(c.text);
    ASSERT_FALSE(tokens.ok()) << c.text;
    EXPECT_EQ(tokens.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(tokens.status().message()).find(c.message), std::string::npos)
        << tokens.status();
    EXPECT_EQ(std::string(tokens.status().message()).find(kWriterToken), std::string::npos);
  }
}

TEST(PolicyTest, GrantsTablesWildcardsQueryAndAckModes) {
  auto policy = Policy::Parse(
      "# shop\n"
      "[spiffe://cluster.local/ns/shop/sa/orders]\n"
      "insert = shop.orders, shop.order_items\n"
      "insert = logs.*\n"
      "ack = committed\n"
      "\n"
      "[reporting]\n"
      "query = true\n"
      "[admin]\n"
      "insert = *\n"
      "query = true\n"
      "[quoted]\n"
      "insert = `we.ird`.`t`\n");
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->size(), 4u);
  const Grant* orders = policy->Find("spiffe://cluster.local/ns/shop/sa/orders");
  ASSERT_NE(orders, nullptr);
  EXPECT_TRUE(orders->MayInsert("shop", "orders"));
  EXPECT_TRUE(orders->MayInsert("shop", "order_items"));
  EXPECT_FALSE(orders->MayInsert("shop", "payments"));
  EXPECT_FALSE(orders->MayInsert("shop2", "orders"));
  EXPECT_TRUE(orders->MayInsert("logs", "anything"));
  EXPECT_FALSE(orders->MayInsert("logs2", "anything"));
  EXPECT_FALSE(orders->query);
  EXPECT_TRUE(orders->MayAck("committed"));
  EXPECT_FALSE(orders->MayAck("accepted"));
  const Grant* reporting = policy->Find("reporting");
  ASSERT_NE(reporting, nullptr);
  EXPECT_TRUE(reporting->query);
  EXPECT_FALSE(reporting->MayInsert("shop", "orders"));
  EXPECT_TRUE(reporting->MayAck("accepted"));  // every mode unless `ack` says otherwise
  EXPECT_TRUE(policy->Find("admin")->MayInsert("any", "table"));
  EXPECT_TRUE(policy->Find("quoted")->MayInsert("we.ird", "t"));
  EXPECT_FALSE(policy->Find("quoted")->MayInsert("we", "ird"));
  EXPECT_EQ(policy->Find("nobody"), nullptr);
  EXPECT_EQ(policy->Find("Reporting"), nullptr);
}

TEST(PolicyTest, RejectsMistakesWithTheirLine) {
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {"insert = a.b\n", "line 1: 'insert' comes before any [identity]"},
      {"[a]\ninsert = orders\n", "line 2: 'orders' is not database.table"},
      {"[a]\ninsert = *.orders\n", "line 2: '*.orders': a database cannot be '*'"},
      {"[a]\nquery = yes\n", "line 2: query is true or false"},
      {"[a]\nack = eventually\n", "line 2: unknown ack mode 'eventually'"},
      {"[a]\ntables = a.b\n", "line 2: unknown key 'tables'"},
      {"[a]\n[a]\n", "line 2: identity 'a' appears twice"},
      {"[a\n", "line 1: a section is [identity]"},
      {"[a]\ninsert\n", "line 2: expected key = value"},
  };
  for (const Case& c : cases) {
    auto policy = Policy::Parse(c.text);
    ASSERT_FALSE(policy.ok()) << c.text;
    EXPECT_NE(std::string(policy.status().message()).find(c.message), std::string::npos)
        << policy.status();
  }
}

// A star is a wildcard only unquoted: `*`.somewhere is the database named *, db.`*` the table
// named *.
TEST(PolicyTest, AQuotedStarIsANameNotAWildcard) {
  auto policy = Policy::Parse(
      "[a]\n"
      "insert = `*`.somewhere\n"
      "insert = db.`*`, \"*\".x\n");
  ASSERT_TRUE(policy.ok()) << policy.status();
  const Grant* a = policy->Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->MayInsert("*", "somewhere"));
  EXPECT_TRUE(a->MayInsert("db", "*"));
  EXPECT_TRUE(a->MayInsert("*", "x"));
  EXPECT_FALSE(a->MayInsert("shop", "somewhere"));
  EXPECT_FALSE(a->MayInsert("shop", "orders"));
  EXPECT_FALSE(a->MayInsert("db", "orders"));
}

TEST(PolicyTest, CommentsFollowValuesButNotInsideQuotedNames) {
  auto policy = Policy::Parse(
      "[a]   # the writer\n"
      "insert = shop.orders   # the orders\n"
      "insert = shop.`a # b`\n"
      "query = true\t# may query\n");
  ASSERT_TRUE(policy.ok()) << policy.status();
  const Grant* a = policy->Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->MayInsert("shop", "orders"));
  EXPECT_TRUE(a->MayInsert("shop", "a # b"));
  EXPECT_TRUE(a->query);
}

// Every policy and tokens example in docs/security.md parses as chgate reads the files: the block
// after
// "**Policy file**", and the block after "**Tokens file**".
std::string CodeBlockAfter(const std::string& text, const std::string& marker) {
  const size_t at = text.find(marker);
  if (at == std::string::npos) return "";
  const size_t open = text.find("```", at);
  const size_t body = text.find('\n', open) + 1;
  const size_t close = text.find("\n```", body);
  if (open == std::string::npos || close == std::string::npos) return "";
  return text.substr(body, close - body + 1);
}

TEST(PolicyTest, TheDocumentedExamplesParse) {
  const char* source_dir = std::getenv("CHGATE_SOURCE_DIR");
  ASSERT_NE(source_dir, nullptr) << "CHGATE_SOURCE_DIR names the checkout (ctest sets it)";
  std::ifstream in(std::string(source_dir) + "/docs/security.md");
  const std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string policy_text = CodeBlockAfter(readme, "**Policy file**");
  ASSERT_FALSE(policy_text.empty());
  auto policy = Policy::Parse(policy_text);
  ASSERT_TRUE(policy.ok()) << policy.status() << "\n" << policy_text;
  const Grant* orders = policy->Find("spiffe://cluster.local/ns/shop/sa/orders");
  ASSERT_NE(orders, nullptr);
  EXPECT_TRUE(orders->MayInsert("shop", "order_items"));
  EXPECT_TRUE(orders->MayInsert("logs", "anything"));
  EXPECT_FALSE(orders->MayInsert("shop", "payments"));
  const std::string tokens_text = CodeBlockAfter(readme, "**Tokens file**");
  ASSERT_FALSE(tokens_text.empty());
  auto tokens = TokenSet::Parse(tokens_text);
  EXPECT_TRUE(tokens.ok()) << tokens.status() << "\n" << tokens_text;
}

class AuthorizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_.Write("tokens", absl::StrCat("writer ", kWriterToken, "\nstranger ", kOtherToken, "\n"));
    pki_.Write("policy",
               "[writer]\ninsert = app.*\nack = committed\n"
               "[spiffe://test/reader]\nquery = true\n");
  }

  std::unique_ptr<Authorizer> Make() {
    auto a = Authorizer::Create(
        {.tokens_file = pki_.Path("tokens"),
         .policy_file = pki_.Path("policy"),
         .on_reload = [this](std::string_view kind, const std::string&,
                             const absl::Status& status) {
           reloads_.push_back(absl::StrCat(std::string(kind), ":", status.ok() ? "ok" : "error"));
         }});
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *std::move(a) : nullptr;
  }

  chgate::testing::TestPki pki_;
  std::vector<std::string> reloads_;
};

TEST_F(AuthorizerTest, WithoutAPolicyEverythingIsAllowed) {
  auto a = Authorizer::Create({});
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE((*a)->enabled());
  EXPECT_TRUE((*a)->AuthorizeInsert({}, "any", "table", "accepted").status.ok());
  EXPECT_TRUE((*a)->AuthorizeQuery({}).status.ok());
  EXPECT_EQ(Authorizer::Create({.tokens_file = pki_.Path("tokens")}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Authorizer::Create({.policy_file = pki_.Path("missing")}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(AuthorizerTest, IdentifiesByTokenThenCertificate) {
  auto a = Make();
  ASSERT_NE(a, nullptr);
  Decision d = a->AuthorizeInsert(Token(kWriterToken), "app", "events", "committed");
  EXPECT_TRUE(d.status.ok()) << d.status;
  EXPECT_EQ(d.identity, "writer");

  d = a->AuthorizeInsert({}, "app", "events", "committed");
  EXPECT_EQ(d.status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(d.reason, DenyReason::kNoCredentials);

  d = a->AuthorizeInsert(Token("not-a-valid-token-at-all"), "app", "events", "committed");
  EXPECT_EQ(d.status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(d.reason, DenyReason::kBadToken);
  EXPECT_EQ(std::string(d.status.message()).find("not-a-valid"), std::string::npos);

  d = a->Authenticate(Credentials{.has_token = true, .token_malformed = true});
  EXPECT_EQ(d.reason, DenyReason::kBadToken);

  d = a->AuthorizeInsert(Token(kOtherToken), "app", "events", "committed");
  EXPECT_EQ(d.status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(d.reason, DenyReason::kUnknownIdentity);
  EXPECT_NE(std::string(d.status.message()).find("'stranger'"), std::string::npos);

  // The first certificate name the policy knows is the identity.
  d = a->AuthorizeQuery(Certificate({"spiffe://test/other", "spiffe://test/reader"}));
  EXPECT_TRUE(d.status.ok()) << d.status;
  EXPECT_EQ(d.identity, "spiffe://test/reader");
  d = a->AuthorizeQuery(Certificate({"spiffe://test/other", "other.test"}));
  EXPECT_EQ(d.status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(std::string(d.status.message()).find("spiffe://test/other, other.test"),
            std::string::npos);
  // A token wins over a certificate.
  d = a->AuthorizeQuery(Credentials{.has_token = true,
                                    .token_digest = DigestToken(kWriterToken),
                                    .certificate_names = {"spiffe://test/reader"}});
  EXPECT_EQ(d.reason, DenyReason::kQueryDenied);
}

TEST_F(AuthorizerTest, RefusalsNameTheIdentityAndTheTable) {
  auto a = Make();
  ASSERT_NE(a, nullptr);
  Decision d = a->AuthorizeInsert(Token(kWriterToken), "billing", "invoices", "committed");
  EXPECT_EQ(d.status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(d.reason, DenyReason::kInsertDenied);
  EXPECT_EQ(d.status.message(), "identity 'writer' may not insert into table billing.invoices");
  d = a->AuthorizeInsert(Token(kWriterToken), "app", "events", "accepted");
  EXPECT_EQ(d.reason, DenyReason::kAckDenied);
  EXPECT_NE(std::string(d.status.message()).find("ack mode accepted"), std::string::npos);
  d = a->AuthorizeQuery(Token(kWriterToken));
  EXPECT_EQ(d.reason, DenyReason::kQueryDenied);
  EXPECT_EQ(d.status.message(), "identity 'writer' may not run Query");
  // Caller-chosen names are capped in messages.
  d = a->AuthorizeInsert(Token(kWriterToken), "billing", std::string(10000, 'x'), "committed");
  EXPECT_LT(d.status.message().size(), 600u);
}

TEST_F(AuthorizerTest, ReloadsChangedFilesAndKeepsTheOldOnesWhenTheNewOnesAreBad) {
  auto a = Make();
  ASSERT_NE(a, nullptr);
  a->ReloadChanged();
  EXPECT_TRUE(reloads_.empty()) << "nothing changed";

  pki_.Write("policy", "[writer]\ninsert = billing.*\n");
  a->ReloadChanged();
  EXPECT_EQ(reloads_, std::vector<std::string>{"policy:ok"});
  EXPECT_TRUE(a->AuthorizeInsert(Token(kWriterToken), "billing", "x", "accepted").status.ok());
  EXPECT_FALSE(a->AuthorizeInsert(Token(kWriterToken), "app", "x", "committed").status.ok());

  // A broken file is reported once and the previous policy stays in force.
  pki_.Write("policy", "[writer]\ninsert = nodatabase\n");
  a->ReloadChanged();
  a->ReloadChanged();
  EXPECT_EQ(reloads_, (std::vector<std::string>{"policy:ok", "policy:error"}));
  EXPECT_TRUE(a->AuthorizeInsert(Token(kWriterToken), "billing", "x", "accepted").status.ok());

  // A revoked token stops working at once.
  pki_.Write("tokens", absl::StrCat("stranger ", kOtherToken, "\n"));
  a->ReloadChanged();
  EXPECT_EQ(reloads_.back(), "tokens:ok");
  EXPECT_EQ(a->Authenticate(Token(kWriterToken)).status.code(), absl::StatusCode::kUnauthenticated);

  // A deleted file keeps the last good content.
  std::filesystem::remove(pki_.Path("tokens"));
  a->ReloadChanged();
  a->ReloadChanged();
  EXPECT_EQ(reloads_.back(), "tokens:error");
  EXPECT_EQ(reloads_.size(), 4u);
  EXPECT_EQ(a->Authenticate(Token(kOtherToken)).identity, "stranger");
}

}  // namespace
}  // namespace chgate::auth
