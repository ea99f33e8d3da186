#include "server/config/config.h"

#include <gtest/gtest.h>

namespace chgate::config {
namespace {

TEST(ConfigTest, DefaultsWithoutArguments) {
  const char* argv[] = {"chgate"};
  auto c = Parse(1, argv, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->endpoints.size(), 1u);
  EXPECT_EQ(c->endpoints[0].port, 9000);
  EXPECT_EQ(c->compression, "lz4");
}

TEST(ConfigTest, FlagsOverrideEnvironment) {
  const char* argv[] = {"chgate", "--endpoints=a:1,b", "--compression", "zstd"};
  const char* env[] = {"CHGATE_ENDPOINTS=x:5", "CHGATE_USER=bob", nullptr};
  auto c = Parse(4, argv, env);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->endpoints.size(), 2u);
  EXPECT_EQ(c->endpoints[0].host, "a");
  EXPECT_EQ(c->endpoints[0].port, 1);
  EXPECT_EQ(c->endpoints[1].host, "b");
  EXPECT_EQ(c->endpoints[1].port, 9000);
  EXPECT_EQ(c->user, "bob");
  EXPECT_EQ(c->compression, "zstd");
}

TEST(ConfigTest, RejectsUnknownOptionsAndBadValues) {
  const char* unknown[] = {"chgate", "--nope=1"};
  EXPECT_EQ(Parse(2, unknown, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  const char* bad_port[] = {"chgate", "--endpoints=h:99999"};
  EXPECT_EQ(Parse(2, bad_port, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  const char* bad_compression[] = {"chgate", "--compression=gzip"};
  EXPECT_EQ(Parse(2, bad_compression, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  const char* bad_duration[] = {"chgate", "--read-timeout=soon"};
  EXPECT_EQ(Parse(2, bad_duration, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  const char* missing_file[] = {"chgate", "--password-file=/nonexistent/secret"};
  EXPECT_EQ(Parse(2, missing_file, nullptr).status().code(), absl::StatusCode::kNotFound);
}

TEST(ConfigTest, UsageListsEveryOptionWithItsVariable) {
  std::string usage = Usage();
  for (const char* name : {"--endpoints", "CHGATE_ENDPOINTS", "--password-file",
                           "CHGATE_PASSWORD_FILE", "--compression", "--query"}) {
    EXPECT_NE(usage.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace chgate::config
