// The SDK's and chgate-cli's TLS, mutual TLS and bearer-token options against an in-process
// gRPC server on 127.0.0.1:0 that requires a client certificate and records what each call
// presented. Certificates are made by openssl at test time.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "chgate/v1/chgate.grpc.pb.h"
#include "client/cli/cli.h"
#include "client/sdk/client.h"
#include "tests/unit/tls/test_pki.h"

namespace chgate::client {
namespace {

constexpr char kToken[] = "sdk-token-0123456789abcdef";

// Records the authorization header and client certificate URI of every call.
class RecordingIngest final : public v1::Ingest::Service {
 public:
  grpc::Status Insert(grpc::ServerContext* context, const v1::InsertRequest* request,
                      v1::InsertResponse* response) override {
    Record(*context);
    response->set_rows(static_cast<uint64_t>(request->rows().rows_size()));
    response->set_ack_mode(v1::ACK_MODE_COMMITTED);
    return grpc::Status::OK;
  }
  grpc::Status InsertStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::InsertAck, v1::InsertRequest>* stream) override {
    Record(*context);
    v1::InsertRequest request;
    while (stream->Read(&request)) {
      v1::InsertAck ack;
      ack.set_sequence(request.sequence());
      ack.set_rows(static_cast<uint64_t>(request.rows().rows_size()));
      ack.set_ack_mode(v1::ACK_MODE_COMMITTED);
      stream->Write(ack);
    }
    return grpc::Status::OK;
  }
  std::vector<std::string> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  void Record(const grpc::ServerContext& context) {
    std::string call;
    auto it = context.client_metadata().find("authorization");
    if (it != context.client_metadata().end()) call.assign(it->second.data(), it->second.size());
    for (const auto& uri : context.auth_context()->FindPropertyValues("peer_uri")) {
      absl::StrAppend(&call, " | ", std::string(uri.data(), uri.size()));
    }
    for (const char* key : {"traceparent", "tracestate"}) {
      auto value = context.client_metadata().find(key);
      if (value != context.client_metadata().end()) {
        absl::StrAppend(&call, " | ", key, "=",
                        std::string(value->second.data(), value->second.size()));
      }
    }
    absl::MutexLock lock(&mu_);
    calls_.push_back(call);
  }
  absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

class ClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.MakeCa("ca"));
    ASSERT_TRUE(pki_.Issue("server", "ca", "DNS:chgate.test"));
    ASSERT_TRUE(pki_.Issue("client", "ca", "URI:spiffe://test/sdk"));
    pki_.Write("token", absl::StrCat("  ", kToken, "\n"));
    grpc::SslServerCredentialsOptions ssl(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = pki_.Read("ca.crt");
    ssl.pem_key_cert_pairs.push_back({pki_.Read("server.key"), pki_.Read("server.crt")});
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(ssl), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    target_ = absl::StrCat("127.0.0.1:", port_);
  }
  void TearDown() override { server_->Shutdown(); }

  TlsOptions Tls() const {
    return TlsOptions{.enabled = true,
                      .ca_file = pki_.Path("ca.crt"),
                      .cert_file = pki_.Path("client.crt"),
                      .key_file = pki_.Path("client.key"),
                      .server_name = "chgate.test"};
  }

  static v1::InsertRequest OneRow() {
    v1::InsertRequest request;
    request.set_table("app.events");
    request.mutable_rows()->add_rows()->add_values()->set_uint64_value(1);
    return request;
  }

  chgate::testing::TestPki pki_;
  RecordingIngest service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string target_;
};

TEST_F(ClientTlsTest, SdkSpeaksMutualTlsAndSendsTheToken) {
  auto token = ReadTokenFile(pki_.Path("token"));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, kToken);
  auto client = Client::Create(
      target_, {.default_timeout = absl::Seconds(10), .tls = Tls(), .bearer_token = *token});
  ASSERT_TRUE(client.ok()) << client.status();
  auto result = (*client)->Insert(OneRow());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->rows, 1u);
  auto stream = (*client)->OpenInsertStream();
  auto ack = stream->Send(OneRow());
  ASSERT_TRUE(stream->Close().ok());
  EXPECT_TRUE(ack.get().ok());
  const std::string expected = absl::StrCat("Bearer ", kToken, " | spiffe://test/sdk");
  EXPECT_EQ(service_.calls(), (std::vector<std::string>{expected, expected}));
}

TEST_F(ClientTlsTest, SdkRefusesTheWrongServerNameOrAMissingClientCertificate) {
  TlsOptions wrong_name = Tls();
  wrong_name.server_name = "other.test";
  auto client = Client::Create(target_, {.default_timeout = absl::Seconds(5), .tls = wrong_name});
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->Insert(OneRow()).status().code(), absl::StatusCode::kUnavailable);
  TlsOptions no_cert = Tls();
  no_cert.cert_file.clear();
  no_cert.key_file.clear();
  client = Client::Create(target_, {.default_timeout = absl::Seconds(5), .tls = no_cert});
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->Insert(OneRow()).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(service_.calls().empty());
}

TEST_F(ClientTlsTest, SdkRejectsInconsistentOptions) {
  TlsOptions half = Tls();
  half.key_file.clear();
  EXPECT_EQ(Client::Create(target_, {.tls = half}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Client::Create(target_, {.tls = {.ca_file = "ca.crt"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  TlsOptions missing = Tls();
  missing.ca_file = pki_.Path("nothing.crt");
  EXPECT_EQ(Client::Create(target_, {.tls = missing}).status().code(), absl::StatusCode::kNotFound);
  pki_.Write("two-words", "a b\n");
  EXPECT_EQ(ReadTokenFile(pki_.Path("two-words")).status().code(),
            absl::StatusCode::kInvalidArgument);
  pki_.Write("empty", "\n");
  EXPECT_EQ(ReadTokenFile(pki_.Path("empty")).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientTlsTest, CliTakesTlsAndTokenOptions) {
  std::istringstream in("{\"id\":1}\n{\"id\":2}\n");
  std::ostringstream out, err;
  const int code = cli::RunCli(
      {"--addr", target_, "--tls-ca-file", pki_.Path("ca.crt"), "--tls-cert-file",
       pki_.Path("client.crt"), "--tls-key-file", pki_.Path("client.key"), "--tls-server-name",
       "chgate.test", "--token-file", pki_.Path("token"), "insert", "--table", "app.events"},
      {.in = &in, .out = &out, .err = &err});
  EXPECT_EQ(code, 0) << err.str();
  ASSERT_FALSE(service_.calls().empty());
  EXPECT_EQ(service_.calls().front(), absl::StrCat("Bearer ", kToken, " | spiffe://test/sdk"));

  // Without TLS the same server is unreachable (exit code for UNAVAILABLE), and a half-given
  // client certificate is a usage error.
  std::istringstream in2("{\"id\":1}\n");
  std::ostringstream out2, err2;
  EXPECT_NE(cli::RunCli({"--addr", target_, "--timeout", "5s", "insert", "--table", "app.events"},
                        {.in = &in2, .out = &out2, .err = &err2}),
            0);
  auto parsed = cli::ParseCommandLine({"--tls-cert-file", "c.crt", "insert", "--table", "t"});
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  parsed = cli::ParseCommandLine({"query", "SELECT 1", "--tls-server-name", "chgate.test"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->tls.enabled);
  EXPECT_EQ(parsed->tls.server_name, "chgate.test");
}

constexpr char kTraceparent[] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

TEST_F(ClientTlsTest, SdkAndCliSendTheTraceContextWithEveryCall) {
  auto client = Client::Create(target_, {.default_timeout = absl::Seconds(10),
                                         .tls = Tls(),
                                         .traceparent = kTraceparent,
                                         .tracestate = "vendor=1"});
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Insert(OneRow()).ok());
  auto stream = (*client)->OpenInsertStream();
  auto ack = stream->Send(OneRow());
  ASSERT_TRUE(stream->Close().ok());
  EXPECT_TRUE(ack.get().ok());
  const std::string traced =
      absl::StrCat(" | spiffe://test/sdk | traceparent=", kTraceparent, " | tracestate=vendor=1");
  EXPECT_EQ(service_.calls(), (std::vector<std::string>{traced, traced}));

  std::istringstream in("{\"id\":1}\n");
  std::ostringstream out, err;
  const int code = cli::RunCli(
      {"--addr", target_, "--tls-ca-file", pki_.Path("ca.crt"), "--tls-cert-file",
       pki_.Path("client.crt"), "--tls-key-file", pki_.Path("client.key"), "--tls-server-name",
       "chgate.test", "--traceparent", kTraceparent, "insert", "--table", "app.events"},
      {.in = &in, .out = &out, .err = &err});
  EXPECT_EQ(code, 0) << err.str();
  EXPECT_EQ(service_.calls().back(),
            absl::StrCat(" | spiffe://test/sdk | traceparent=", kTraceparent));
  // A malformed one is refused before any call: by the SDK, and by the CLI as a usage error.
  EXPECT_EQ(Client::Create(target_, {.traceparent = "00-XYZ"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto parsed = cli::ParseCommandLine({"--traceparent", "00-XYZ", "query", "SELECT 1"});
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("--traceparent"), std::string::npos);
}

}  // namespace
}  // namespace chgate::client
