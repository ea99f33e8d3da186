// The API listener's TLS, mutual TLS and caller authorization through real gRPC servers on
// 127.0.0.1:0, with certificates made by openssl at test time: handshakes that must fail (no
// client certificate, another CA, an expired certificate, plaintext), identities from client
// certificates and bearer tokens, the policy applied to Insert, every InsertStream request and
// Query, refusals counted in chgate_api_auth_failures_total, and certificate and policy files
// replaced while the server runs.
#include "server/service/api_security.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "chgate/v1/chgate.grpc.pb.h"
#include "server/auth/authorizer.h"
#include "server/clickhouse/columns/factory.h"
#include "server/ingest/ingestor.h"
#include "server/metrics/metrics.h"
#include "server/service/grpc_log.h"
#include "server/service/server.h"
#include "tests/unit/tls/test_pki.h"

namespace chgate::service {
namespace {

constexpr char kWriterToken[] = "logs-writer-token-0123456789";

// Tables named "events" exist in every database, with one UInt64 column `id`.
class EventsInserter final : public ingest::Inserter {
 public:
  absl::StatusOr<ingest::TableSchema> Describe(const ingest::TableId& table,
                                               const std::vector<std::string>&,
                                               absl::Time) override {
    if (table.table != "events") return absl::NotFoundError("no such table");
    ingest::TableSchema schema;
    schema.server_time_zone = "UTC";
    schema.names = {"id"};
    schema.prototypes.push_back(*clickhouse::CreateColumn("UInt64"));
    return schema;
  }
  absl::Status Insert(const ingest::TableId& table, const clickhouse::BlockParts& block,
                      const ingest::InsertAttempt&, absl::Time) override {
    absl::MutexLock lock(&mu_);
    inserted_.push_back(absl::StrCat(table.database, ".", table.table, ":", block.rows()));
    return absl::OkStatus();
  }
  std::vector<std::string> inserted() {
    absl::MutexLock lock(&mu_);
    return inserted_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> inserted_ ABSL_GUARDED_BY(mu_);
};

v1::InsertRequest Rows(const std::string& table, uint64_t sequence = 0) {
  v1::InsertRequest request;
  request.set_table(table);
  request.set_sequence(sequence);
  request.mutable_rows()->add_rows()->add_values()->set_uint64_value(sequence);
  return request;
}

bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(200));  // each try is a new TLS connection
  }
  return true;
}

class ApiSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.MakeCa("ca"));
    ASSERT_TRUE(pki_.MakeCa("other-ca"));
    ASSERT_TRUE(pki_.Issue("server", "ca", "DNS:localhost,IP:127.0.0.1"));
    ASSERT_TRUE(pki_.Issue("writer", "ca", "URI:spiffe://test/writer"));
    ASSERT_TRUE(pki_.Issue("reader", "ca", "DNS:reader.test"));
    ASSERT_TRUE(pki_.Issue("stranger", "other-ca", "URI:spiffe://test/writer"));
    ASSERT_TRUE(pki_.Issue("expired", "ca", "URI:spiffe://test/writer", -1));
    pki_.Write("tokens", absl::StrCat("logs-writer ", kWriterToken, "\n"));
    pki_.Write("policy",
               "[spiffe://test/writer]\n"
               "insert = app.events\n"
               "ack = committed\n"
               "[reader.test]\n"
               "query = true\n"
               "[logs-writer]\n"
               "insert = logs.*\n");
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::Now() + absl::Seconds(10));
    server_.reset();
    ingestor_.reset();
  }

  ApiTlsOptions Tls(ClientAuth client_auth = ClientAuth::kOptional) const {
    return ApiTlsOptions{.cert_file = pki_.Path("server.crt"),
                         .key_file = pki_.Path("server.key"),
                         .client_ca_file = pki_.Path("ca.crt"),
                         .client_auth = client_auth,
                         .reload_interval = absl::Seconds(1)};
  }

  void Start(ApiTlsOptions tls, bool with_policy = true) {
    if (with_policy) {
      auto authorizer = auth::Authorizer::Create(
          {.tokens_file = pki_.Path("tokens"), .policy_file = pki_.Path("policy")});
      ASSERT_TRUE(authorizer.ok()) << authorizer.status();
      authorizer_ = *std::move(authorizer);
    }
    ingest::IngestOptions options;
    options.limits.max_delay = absl::Milliseconds(5);
    options.background = true;
    ingestor_ = std::make_unique<ingest::Ingestor>(options, &inserter_, ingest::RealClock());
    auto server = StartServer({.api_address = "127.0.0.1:0",
                               .health_address = "127.0.0.1:0",
                               .tls = std::move(tls),
                               .authorizer = authorizer_.get(),
                               .auth_observer = metrics_.auth_observer()},
                              ingestor_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  // A TLS channel trusting `ca`, presenting `client` ("" = no client certificate). A fresh
  // channel each time (its own connection), so a test sees the server's current certificate.
  std::unique_ptr<v1::Ingest::Stub> Stub(const std::string& client, const std::string& ca = "ca") {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = pki_.Read(ca + ".crt");
    if (!client.empty()) {
      ssl.pem_cert_chain = pki_.Read(client + ".crt");
      ssl.pem_private_key = pki_.Read(client + ".key");
    }
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // no connection shared between channels
    return v1::Ingest::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", server_->api_port()), grpc::SslCredentials(ssl), args));
  }

  std::unique_ptr<v1::Ingest::Stub> PlainStub() {
    return v1::Ingest::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->api_port()),
                                                   grpc::InsecureChannelCredentials()));
  }

  static grpc::Status Insert(v1::Ingest::Stub& stub, const v1::InsertRequest& request,
                             const std::string& token = "") {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    if (!token.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    v1::InsertResponse response;
    return stub.Insert(&context, request, &response);
  }

  static grpc::Status Query(v1::Ingest::Stub& stub, const std::string& token = "") {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    if (!token.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    v1::QueryRequest request;
    request.set_sql("SELECT 1");
    auto reader = stub.Query(&context, request);
    v1::QueryResponse response;
    while (reader->Read(&response)) {
    }
    return reader->Finish();
  }

  double Failures(const std::string& reason) {
    return metrics_.auth().failures->Add({{"reason", reason}}).Value();
  }

  chgate::testing::TestPki pki_;
  metrics::Metrics metrics_;
  EventsInserter inserter_;
  std::unique_ptr<auth::Authorizer> authorizer_;
  std::unique_ptr<ingest::Ingestor> ingestor_;
  std::unique_ptr<Server> server_;
};

TEST_F(ApiSecurityTest, ServerOnlyTlsServesCallersThatTrustItsCa) {
  ApiTlsOptions tls = Tls();
  tls.client_ca_file.clear();
  Start(tls, /*with_policy=*/false);
  EXPECT_TRUE(Insert(*Stub(""), Rows("app.events")).ok());
  // A plaintext caller, or one that does not trust the server's CA, never gets a call through.
  EXPECT_EQ(Insert(*PlainStub(), Rows("app.events")).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Insert(*Stub("", "other-ca"), Rows("app.events")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(inserter_.inserted(), std::vector<std::string>{"app.events:1"});
}

TEST_F(ApiSecurityTest, RequiredClientCertificatesRejectMissingForeignAndExpiredOnes) {
  Start(Tls(ClientAuth::kRequire));
  EXPECT_TRUE(Insert(*Stub("writer"), Rows("app.events")).ok());
  for (const char* client : {"", "stranger", "expired"}) {
    EXPECT_EQ(Insert(*Stub(client), Rows("app.events")).error_code(), grpc::StatusCode::UNAVAILABLE)
        << "client certificate '" << client << "'";
  }
  EXPECT_EQ(inserter_.inserted().size(), 1u);
}

TEST_F(ApiSecurityTest, FailedHandshakesAreCounted) {
  RouteGrpcLogs();
  Start(Tls(ClientAuth::kRequire));
  const uint64_t before = ApiHandshakeFailures();
  EXPECT_TRUE(Insert(*Stub("writer"), Rows("app.events")).ok());
  EXPECT_EQ(ApiHandshakeFailures(), before) << "a good handshake is no failure";
  // Each refused caller fails at least one handshake (gRPC may try to connect again).
  uint64_t expected = before;
  for (const char* client : {"", "stranger", "expired"}) {
    EXPECT_EQ(Insert(*Stub(client), Rows("app.events")).error_code(),
              grpc::StatusCode::UNAVAILABLE);
    EXPECT_TRUE(WaitFor([&] { return ApiHandshakeFailures() > expected; }))
        << "client certificate '" << client << "'";
    expected = ApiHandshakeFailures();
  }
  EXPECT_EQ(Insert(*PlainStub(), Rows("app.events")).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(WaitFor([&] { return ApiHandshakeFailures() > expected; })) << "plaintext caller";
}

TEST_F(ApiSecurityTest, TheServingCertificatesExpiryIsReadFromItsFile) {
  ASSERT_TRUE(pki_.Issue("short", "ca", "DNS:localhost", 3));
  ASSERT_TRUE(pki_.Issue("long", "ca", "DNS:localhost", 400));
  absl::StatusOr<absl::Time> short_end = CertificateNotAfter(pki_.Path("short.crt"));
  absl::StatusOr<absl::Time> long_end = CertificateNotAfter(pki_.Path("long.crt"));
  ASSERT_TRUE(short_end.ok()) << short_end.status();
  ASSERT_TRUE(long_end.ok()) << long_end.status();
  // openssl counts the days from now.
  EXPECT_LT(absl::AbsDuration(*short_end - (absl::Now() + absl::Hours(72))), absl::Minutes(10));
  EXPECT_LT(absl::AbsDuration(*long_end - (absl::Now() + absl::Hours(24 * 400))),
            absl::Minutes(10));
  EXPECT_EQ(CertificateNotAfter(pki_.Path("server.key")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CertificateNotAfter(pki_.Path("missing.crt")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ApiSecurityTest, TheCertificateNamesTheIdentityThePolicyJudges) {
  Start(Tls());
  auto writer = Stub("writer");
  EXPECT_TRUE(Insert(*writer, Rows("app.events")).ok());
  grpc::Status denied = Insert(*writer, Rows("other.events"));
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(denied.error_message(),
            "identity 'spiffe://test/writer' may not insert into table other.events");
  v1::InsertRequest accepted = Rows("app.events");
  accepted.set_ack_mode(v1::ACK_MODE_ACCEPTED);
  EXPECT_EQ(Insert(*writer, accepted).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // A backquoted name is judged as the table it resolves to.
  EXPECT_TRUE(Insert(*writer, Rows("`app`.`events`")).ok());
  EXPECT_EQ(Query(*writer).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // Allowed to query; this server has no QueryExecutor, so getting past the policy means
  // UNIMPLEMENTED.
  EXPECT_EQ(Query(*Stub("reader")).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(Insert(*Stub("reader"), Rows("app.events")).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(inserter_.inserted(), (std::vector<std::string>{"app.events:1", "app.events:1"}));
  EXPECT_EQ(Failures("insert_denied"), 2);
  EXPECT_EQ(Failures("ack_denied"), 1);
  EXPECT_EQ(Failures("query_denied"), 1);
}

TEST_F(ApiSecurityTest, BearerTokensIdentifyCallersWithoutCertificates) {
  Start(Tls());
  auto anonymous = Stub("");
  EXPECT_TRUE(Insert(*anonymous, Rows("logs.events"), kWriterToken).ok());
  grpc::Status denied = Insert(*anonymous, Rows("app.events"), kWriterToken);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(denied.error_message(), "identity 'logs-writer' may not insert into table app.events");
  grpc::Status bad = Insert(*anonymous, Rows("logs.events"), "logs-writer-token-0123456788");
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(bad.error_message().find("0123456788"), std::string::npos);
  EXPECT_EQ(Insert(*anonymous, Rows("logs.events")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Query(*anonymous).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(inserter_.inserted(), std::vector<std::string>{"logs.events:1"});
  EXPECT_EQ(Failures("bad_token"), 1);
  EXPECT_EQ(Failures("no_credentials"), 2);
  EXPECT_EQ(Failures("insert_denied"), 1);
}

TEST_F(ApiSecurityTest, AStreamIsJudgedPerRequestAndSeesPolicyChanges) {
  Start(Tls());
  auto stub = Stub("");
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  context.AddMetadata("authorization", absl::StrCat("bearer ", kWriterToken));
  auto stream = stub->InsertStream(&context);
  v1::InsertAck ack;
  ASSERT_TRUE(stream->Write(Rows("logs.events", 1)));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.sequence(), 1u);
  EXPECT_FALSE(ack.has_status()) << ack.status().message();
  ASSERT_TRUE(stream->Write(Rows("app.events", 2)));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.sequence(), 2u);
  EXPECT_EQ(ack.status().code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(ack.status().message().find("app.events"), std::string::npos);

  // The grant arrives while the stream stays open.
  pki_.Write("policy", "[logs-writer]\ninsert = logs.*, app.events\n");
  authorizer_->ReloadChanged();
  ASSERT_TRUE(stream->Write(Rows("app.events", 3)));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.sequence(), 3u);
  EXPECT_FALSE(ack.has_status()) << ack.status().message();
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(inserter_.inserted(), (std::vector<std::string>{"logs.events:1", "app.events:1"}));
}

TEST_F(ApiSecurityTest, AStreamWithoutCredentialsEndsBeforeReading) {
  Start(Tls());
  auto stub = Stub("");
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  auto stream = stub->InsertStream(&context);
  stream->Write(Rows("logs.events", 1));
  v1::InsertAck ack;
  EXPECT_FALSE(stream->Read(&ack));
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(inserter_.inserted().empty());
}

TEST_F(ApiSecurityTest, ARotatedCertificateServesNewConnectionsWhileOpenStreamsGoOn) {
  // server2's certificate ends a day after server's, so the exported expiry tells them apart.
  ASSERT_TRUE(pki_.Issue("server2", "other-ca", "DNS:localhost,IP:127.0.0.1", 3));
  Start(Tls(), /*with_policy=*/false);
  const absl::StatusOr<absl::Time> first_end = CertificateNotAfter(pki_.Path("server.crt"));
  const absl::StatusOr<absl::Time> second_end = CertificateNotAfter(pki_.Path("server2.crt"));
  ASSERT_TRUE(first_end.ok() && second_end.ok());
  ASSERT_NE(*first_end, *second_end);
  const std::shared_ptr<ApiIdentity> served = server_->api_identity();
  ASSERT_NE(served, nullptr);
  EXPECT_EQ(served->ServedNotAfter().value_or(absl::InfinitePast()), *first_end);
  auto old_stub = Stub("");
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  auto stream = old_stub->InsertStream(&context);
  v1::InsertAck ack;
  ASSERT_TRUE(stream->Write(Rows("app.events", 1)));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_FALSE(ack.has_status());

  // Replace the key first, then the certificate, as a renewal that rewrites both files does;
  // the new pair is served once they match again. In between (longer than gRPC's own reload
  // interval), new connections still get the previous pair (docs/security.md), not an error.
  pki_.Replace("server.key", "server2.key");
  server_->ReloadApiCertificate();  // what main does every --api-reload-interval
  absl::SleepFor(absl::Milliseconds(2500));
  EXPECT_TRUE(Insert(*Stub("", "ca"), Rows("app.events")).ok())
      << "a key without its certificate broke new connections";
  EXPECT_EQ(Insert(*Stub("", "other-ca"), Rows("app.events")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // The expiry exported is the served certificate's, not that of a file that waits for its key.
  EXPECT_EQ(served->ServedNotAfter().value_or(absl::InfinitePast()), *first_end);
  pki_.Replace("server.crt", "server2.crt");
  EXPECT_TRUE(WaitFor([&] {
    server_->ReloadApiCertificate();
    return Insert(*Stub("", "other-ca"), Rows("app.events")).ok();
  })) << "new connections never got the new certificate";
  EXPECT_EQ(Insert(*Stub("", "ca"), Rows("app.events")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(served->ServedNotAfter().value_or(absl::InfinitePast()), *second_end);

  ASSERT_TRUE(stream->Write(Rows("app.events", 2)));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.sequence(), 2u);
  EXPECT_FALSE(ack.has_status()) << ack.status().message();
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ApiSecurityTest, HealthStaysPlaintextNextToATlsApi) {
  Start(Tls(ClientAuth::kRequire));
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->health_port()),
                                     grpc::InsecureChannelCredentials());
  EXPECT_TRUE(channel->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Seconds(10))));
}

TEST_F(ApiSecurityTest, UnusableTlsFilesStopTheStart) {
  ASSERT_TRUE(pki_.Issue("server2", "ca", "DNS:localhost"));
  struct Case {
    ApiTlsOptions tls;
    std::string message;
  };
  ApiTlsOptions mismatched = Tls();
  mismatched.key_file = pki_.Path("server2.key");
  ApiTlsOptions missing = Tls();
  missing.cert_file = pki_.Path("nothing.crt");
  ApiTlsOptions not_pem = Tls();
  not_pem.client_ca_file = pki_.Path("tokens");
  ApiTlsOptions no_key = Tls();
  no_key.key_file.clear();
  const Case cases[] = {
      {mismatched, "is not the key of the certificate"},
      {missing, "cannot read"},
      {not_pem, "holds no PEM certificate"},
      {no_key, "needs --api-tls-key-file"},
  };
  for (const Case& c : cases) {
    std::unique_ptr<ApiIdentity> identity;
    auto credentials = ApiServerCredentials(c.tls, &identity);
    ASSERT_FALSE(credentials.ok()) << c.message;
    EXPECT_EQ(credentials.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(credentials.status().message()).find(c.message), std::string::npos)
        << credentials.status();
  }
}

}  // namespace
}  // namespace chgate::service
