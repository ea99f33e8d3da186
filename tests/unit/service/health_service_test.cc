// HealthService: grpc.health.v1 Check and Watch on the callback API, through the generated stub
// on a real server on 127.0.0.1:0: statuses by name, NOT_FOUND for unknown names, Watch's first
// status and its changes (SERVICE_UNKNOWN until a name exists), and Shutdown ending every watch
// after a last NOT_SERVING.
#include "server/service/health_service.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace chgate::service {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

class HealthServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&health_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = Health::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    health_.Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  grpc::Status Check(const std::string& name, HealthCheckResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    HealthCheckRequest request;
    request.set_service(name);
    return stub_->Check(&context, request, response);
  }

  HealthService health_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Health::Stub> stub_;
};

TEST_F(HealthServiceTest, CheckAnswersKnownNamesAndNotFoundForOthers) {
  health_.SetServing("", true);
  health_.SetServing("readiness", false);
  HealthCheckResponse response;
  ASSERT_TRUE(Check("", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  ASSERT_TRUE(Check("readiness", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Check("nope", &response).error_code(), grpc::StatusCode::NOT_FOUND);
  health_.SetServing("readiness", true);
  ASSERT_TRUE(Check("readiness", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
}

TEST_F(HealthServiceTest, WatchSendsTheStatusThenEachChangeAndEndsAtShutdown) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  HealthCheckRequest request;
  request.set_service("buffer");
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> reader = stub_->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVICE_UNKNOWN);
  health_.SetServing("buffer", true);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  health_.SetServing("other", false);  // another name: nothing for this watch
  health_.SetServing("buffer", true);  // no change: nothing either
  health_.SetServing("buffer", false);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  health_.SetServing("buffer", true);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  health_.Shutdown();
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_TRUE(reader->Finish().ok());
  // After Shutdown every name stays NOT_SERVING.
  health_.SetServing("buffer", true);
  EXPECT_EQ(health_.Get("buffer"), HealthCheckResponse::NOT_SERVING);
}

TEST_F(HealthServiceTest, ACancelledWatchGoesAway) {
  health_.SetServing("", true);
  for (int i = 0; i < 20; ++i) {
    grpc::ClientContext context;
    HealthCheckRequest request;
    std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> reader =
        stub_->Watch(&context, request);
    HealthCheckResponse response;
    ASSERT_TRUE(reader->Read(&response));
    context.TryCancel();
    EXPECT_FALSE(reader->Read(&response));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // Updates after the cancels reach no dead watcher (this would crash or hang otherwise).
  health_.SetServing("", false);
  health_.SetServing("", true);
}

}  // namespace
}  // namespace chgate::service
