#include "server/config/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"

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
  EXPECT_EQ(Parse(2, bad_compression, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
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

namespace chgate::config {
namespace {

TEST(ConfigTest, ParsesSizesDurationsAndTableLimits) {
  const char* argv[] = {"chgate", "--batch-max-bytes=4MiB", "--memory-budget=1GiB",
                        "--batch-max-delay=50ms",
                        "--table-limits=logs:rows=10,delay=1s;x.y:bytes=512KiB"};
  auto c = Parse(5, argv, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->batch_max_bytes, 4u << 20);
  EXPECT_EQ(c->memory_budget, 1u << 30);
  EXPECT_EQ(c->batch_max_delay, absl::Milliseconds(50));
  ASSERT_EQ(c->table_limits.count("default.logs"), 1u);
  EXPECT_EQ(c->table_limits["default.logs"].max_rows, 10u);
  EXPECT_EQ(c->table_limits["default.logs"].max_delay, absl::Seconds(1));
  EXPECT_EQ(c->table_limits["x.y"].max_bytes, 512u << 10);
  EXPECT_EQ(*ParseBytes("1000"), 1000u);
  EXPECT_EQ(*ParseBytes("2KB"), 2000u);
  EXPECT_FALSE(ParseBytes("lots").ok());
}

TEST(ConfigTest, RefusesARemoteApiWithoutTheExplicitOption) {
  const char* remote[] = {"chgate", "--listen=0.0.0.0:50051"};
  auto c = Parse(2, remote, nullptr);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(c.status().message()).find("--allow-remote-api"), std::string::npos);
  // Allowed, but without TLS only by a second, explicit opt-in.
  const char* plain[] = {"chgate", "--listen=0.0.0.0:50051", "--allow-remote-api=true"};
  c = Parse(3, plain, nullptr);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(c.status().message()).find("--allow-insecure-remote-api"),
            std::string::npos);
  const char* insecure[] = {"chgate", "--listen=0.0.0.0:50051", "--allow-remote-api=true",
                            "--allow-insecure-remote-api=true"};
  EXPECT_TRUE(Parse(4, insecure, nullptr).ok());
  const char* tls[] = {"chgate", "--listen=0.0.0.0:50051", "--allow-remote-api=true",
                       "--api-tls-cert-file=server.crt", "--api-tls-key-file=server.key"};
  EXPECT_TRUE(Parse(5, tls, nullptr).ok());
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:1"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:1"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.1:1"));
}

TEST(ConfigTest, UnixSocketListenerIsLocalWithAMode) {
  // A socket file is reachable from this machine only: no --allow-remote-api, no TLS needed.
  const char* argv[] = {"chgate", "--listen=unix:/run/chgate/api.sock",
                        "--listen-socket-mode=0600"};
  auto c = Parse(3, argv, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->listen, "unix:/run/chgate/api.sock");
  EXPECT_EQ(c->listen_socket_mode, 0600u);
  EXPECT_TRUE(IsLoopbackAddress("unix:///run/chgate/api.sock"));

  const char* none[] = {"chgate"};
  c = Parse(1, none, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->listen_socket_mode, 0660u);
  for (const char* bad : {"--listen-socket-mode=0999", "--listen-socket-mode=rw",
                          "--listen-socket-mode=01777", "--listen-socket-mode="}) {
    const char* args[] = {"chgate", bad};
    EXPECT_EQ(Parse(2, args, nullptr).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ConfigTest, ParsesApiSecurityOptions) {
  const char* argv[] = {"chgate",
                        "--api-tls-cert-file=s.crt",
                        "--api-tls-key-file=s.key",
                        "--api-tls-client-ca-file=ca.crt",
                        "--api-tls-client-auth=optional",
                        "--api-tokens-file=tokens",
                        "--api-policy-file=policy",
                        "--api-reload-interval=2s"};
  auto c = Parse(8, argv, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->api_tls_cert_file, "s.crt");
  EXPECT_EQ(c->api_tls_key_file, "s.key");
  EXPECT_EQ(c->api_tls_client_ca_file, "ca.crt");
  EXPECT_EQ(c->api_tls_client_auth, "optional");
  EXPECT_EQ(c->api_tokens_file, "tokens");
  EXPECT_EQ(c->api_policy_file, "policy");
  EXPECT_EQ(c->api_reload_interval, absl::Seconds(2));
  const char* env[] = {"CHGATE_API_POLICY_FILE=p", "CHGATE_API_TOKENS_FILE=t", nullptr};
  const char* none[] = {"chgate"};
  auto e = Parse(1, none, env);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->api_policy_file, "p");
  EXPECT_EQ(Parse(1, none, nullptr)->api_tls_client_auth, "require");
}

TEST(ConfigTest, RejectsIncompleteApiSecurity) {
  struct Case {
    std::vector<const char*> args;
    const char* message;
  };
  const Case cases[] = {
      {{"--api-tls-cert-file=s.crt"}, "given together"},
      {{"--api-tls-key-file=s.key"}, "given together"},
      {{"--api-tls-client-ca-file=ca.crt"}, "needs --api-tls-cert-file"},
      {{"--api-tokens-file=t"}, "needs --api-policy-file"},
      {{"--api-policy-file=p"}, "a way to identify callers"},
      {{"--api-tls-client-auth=sometimes"}, "is not one of"},
      {{"--api-reload-interval=0s"}, "positive duration"},
  };
  for (const Case& test : cases) {
    std::vector<const char*> argv = {"chgate"};
    argv.insert(argv.end(), test.args.begin(), test.args.end());
    auto c = Parse(static_cast<int>(argv.size()), argv.data(), nullptr);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << test.args[0];
    EXPECT_NE(std::string(c.status().message()).find(test.message), std::string::npos)
        << c.status();
  }
}

TEST(ConfigTest, ParsesQueryOptions) {
  const char* argv[] = {"chgate",
                        "--query-max-concurrent=2",
                        "--query-response-bytes=256KiB",
                        "--query-buffer-bytes=8MiB",
                        "--query-allow-writes=true",
                        "--query-default-timeout=30s",
                        "--query-cancel-drain=500ms"};
  auto c = Parse(7, argv, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->query_max_concurrent, 2u);
  EXPECT_EQ(c->query_response_bytes, 256u << 10);
  EXPECT_EQ(c->query_buffer_bytes, 8u << 20);
  EXPECT_TRUE(c->query_allow_writes);
  EXPECT_EQ(c->query_default_timeout, absl::Seconds(30));
  EXPECT_EQ(c->query_cancel_drain, absl::Milliseconds(500));
  auto defaults = Parse(1, argv, nullptr);
  ASSERT_TRUE(defaults.ok());
  EXPECT_FALSE(defaults->query_allow_writes);
  EXPECT_EQ(defaults->query_max_concurrent, 4u);
  // A response message must fit gRPC's default 4 MiB receive limit.
  const char* too_big[] = {"chgate", "--query-response-bytes=8MiB"};
  EXPECT_FALSE(Parse(2, too_big, nullptr).ok());
  const char* zero[] = {"chgate", "--query-max-concurrent=0"};
  EXPECT_FALSE(Parse(2, zero, nullptr).ok());
}

TEST(ConfigTest, RejectsInconsistentSettings) {
  const char* batch_over_budget[] = {"chgate", "--batch-max-bytes=2MiB", "--memory-budget=1MiB"};
  EXPECT_FALSE(Parse(3, batch_over_budget, nullptr).ok());
  const char* pool[] = {"chgate", "--pool-min-connections=5", "--pool-max-connections=2"};
  EXPECT_FALSE(Parse(3, pool, nullptr).ok());
  const char* ack[] = {"chgate", "--ack-mode=maybe"};
  EXPECT_FALSE(Parse(2, ack, nullptr).ok());
  const char* group_delay[] = {"chgate", "--spool-group-commit-delay=1s"};
  EXPECT_FALSE(Parse(2, group_delay, nullptr).ok());
}

TEST(ConfigTest, SpoolGroupCommitDelayDefaultsToTwoMillisecondsAndTakesZero) {
  const char* none[] = {"chgate"};
  auto c = Parse(1, none, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->spool_group_commit_delay, absl::Milliseconds(2));
  const char* off[] = {"chgate", "--spool-group-commit-delay=0"};
  c = Parse(2, off, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->spool_group_commit_delay, absl::ZeroDuration());
}

}  // namespace
}  // namespace chgate::config

namespace chgate::config {
namespace {

absl::StatusOr<Config> ParseArgs(std::vector<const char*> args) {
  args.insert(args.begin(), "chgate");
  return Parse(static_cast<int>(args.size()), args.data(), nullptr);
}

TEST(ConfigTest, EndpointSchemesChooseTlsAndTheDefaultPort) {
  auto c = ParseArgs({"--endpoints=tls://a,tcp://b,c:1,tls://[::1]:9441"});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->endpoints.size(), 4u);
  EXPECT_TRUE(c->endpoints[0].tls);
  EXPECT_EQ(c->endpoints[0].port, 9440);
  EXPECT_FALSE(c->endpoints[1].tls);
  EXPECT_EQ(c->endpoints[1].port, 9000);
  EXPECT_FALSE(c->endpoints[2].tls);
  EXPECT_EQ(c->endpoints[3].host, "::1");
  EXPECT_EQ(c->endpoints[3].port, 9441);
  EXPECT_TRUE(c->endpoints[3].tls);

  // --clickhouse-tls applies to endpoints without a scheme, whatever the order of the flags.
  c = ParseArgs({"--endpoints=a,tcp://b:9000", "--clickhouse-tls=true"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->endpoints[0].tls);
  EXPECT_EQ(c->endpoints[0].port, 9440);
  EXPECT_FALSE(c->endpoints[1].tls);

  auto bad = ParseArgs({"--endpoints=https://a"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tcp:// or tls://"), std::string::npos) << bad.status();
}

TEST(ConfigTest, TlsFilesWithoutATlsEndpointAreRefused) {
  // A CA file that nothing uses would leave the user believing the connection is verified.
  auto c = ParseArgs({"--clickhouse-tls-ca-file=/ca.pem"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("no endpoint uses TLS"), std::string::npos) << c.status();
  c = ParseArgs({"--clickhouse-tls-insecure-skip-verify=true"});
  EXPECT_FALSE(c.ok());
  c = ParseArgs({"--clickhouse-tls=true", "--clickhouse-tls-cert-file=/c.pem"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("go together"), std::string::npos) << c.status();
  c = ParseArgs({"--clickhouse-tls=true", "--clickhouse-tls-ca-file=/ca.pem",
                 "--clickhouse-tls-server-name=ch.internal"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->clickhouse_tls_ca_file, "/ca.pem");
  EXPECT_EQ(c->clickhouse_tls_server_name, "ch.internal");
}

}  // namespace
}  // namespace chgate::config

namespace chgate::config {
namespace {

TEST(ConfigTest, EndpointPolicyIsRoundRobinOrOrdered) {
  auto c = ParseArgs({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->endpoint_policy, "round-robin");
  c = ParseArgs({"--endpoint-policy=ordered"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->endpoint_policy, "ordered");
  EXPECT_FALSE(ParseArgs({"--endpoint-policy=random"}).ok());
}

}  // namespace
}  // namespace chgate::config

namespace chgate::config {
namespace {

TEST(ConfigTest, UnknownChgateVariablesAreListedForAWarning) {
  const char* argv[] = {"chgate"};
  const char* env[] = {"CHGATE_BATCH_MAX_ROWZ=5", "CHGATE_USER=bob", "PATH=/bin", nullptr};
  auto c = Parse(1, argv, env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->user, "bob");
  EXPECT_EQ(c->unknown_environment, std::vector<std::string>{"CHGATE_BATCH_MAX_ROWZ"});
}

}  // namespace
}  // namespace chgate::config

namespace chgate::config {
namespace {

TEST(ConfigTest, ReadyLowWaterMustBeBelowTheHighWaterMark) {
  auto c = ParseArgs({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->ready_low_water, 0.7);
  EXPECT_TRUE(ParseArgs({"--ready-high-water=0.8", "--ready-low-water=0.5"}).ok());
  auto bad = ParseArgs({"--ready-high-water=0.5", "--ready-low-water=0.5"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--ready-low-water"), std::string::npos);
}

}  // namespace
}  // namespace chgate::config

namespace chgate::config {
namespace {

TEST(ConfigTest, LogOptionsTakeTheirNamedValues) {
  auto c = ParseArgs({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->log_level, "info");
  EXPECT_EQ(c->log_format, "text");
  EXPECT_EQ(c->log_repeat_interval, absl::Seconds(10));
  const char* argv[] = {"chgate", "--log-level=debug", "--log-repeat-interval=2s"};
  const char* env[] = {"CHGATE_LOG_FORMAT=json", "CHGATE_LOG_LEVEL=error", nullptr};
  c = Parse(3, argv, env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->log_level, "debug");  // the flag wins over the variable
  EXPECT_EQ(c->log_format, "json");
  EXPECT_EQ(c->log_repeat_interval, absl::Seconds(2));
  for (const char* bad :
       {"--log-level=warning", "--log-level=", "--log-format=logfmt", "--log-repeat-interval=0s"}) {
    auto refused = ParseArgs({bad});
    ASSERT_FALSE(refused.ok()) << bad;
    const std::string option(bad, std::string_view(bad).find('='));
    EXPECT_NE(refused.status().message().find(option), std::string::npos) << refused.status();
  }
}

TEST(ConfigTest, SettingsListEveryOptionsEffectiveValueButNoSecret) {
  const std::string password_file = ::testing::TempDir() + "/config_test_password";
  {
    std::ofstream f(password_file);
    f << "s3cret-pa55\n";
  }
  const std::string password_flag = "--password-file=" + password_file;
  const char* argv[] = {"chgate", "--batch-max-rows=500", password_flag.c_str()};
  const char* env[] = {"CHGATE_USER=writer", "CHGATE_BATCH_MAX_ROWS=7", nullptr};
  auto c = Parse(3, argv, env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->password, "s3cret-pa55");
  std::map<std::string, std::string> settings(c->settings.begin(), c->settings.end());
  EXPECT_EQ(settings.size(), c->settings.size()) << "an option is listed twice";
  EXPECT_EQ(settings["batch-max-rows"], "500");
  EXPECT_EQ(settings["user"], "writer");
  EXPECT_EQ(settings["compression"], "lz4");  // the default
  EXPECT_EQ(settings["log-format"], "text");
  EXPECT_EQ(settings["password-file"], password_file);
  // Every option of --help is there.
  const std::string usage = Usage();
  for (const auto& [name, value] : c->settings) {
    EXPECT_NE(usage.find("--" + name + "="), std::string::npos) << name;
  }
  size_t options_in_usage = 0;
  for (const char* form : {"=VALUE  [", "=true|false  ["}) {
    for (size_t at = usage.find(form); at != std::string::npos; at = usage.find(form, at + 1)) {
      ++options_in_usage;
    }
  }
  EXPECT_EQ(c->settings.size(), options_in_usage);
  for (const auto& [name, value] : c->settings) {
    EXPECT_EQ(value.find("s3cret"), std::string::npos) << name;
  }
  std::remove(password_file.c_str());
}

}  // namespace
}  // namespace chgate::config

namespace chgate::config {
namespace {

// docs/configuration.md's option table is OptionsMarkdown() between two markers. Run this test
// with CHGATE_UPDATE_DOCS=1 to rewrite that copy after changing an option.
TEST(ConfigTest, TheDocumentedOptionTableIsGeneratedFromTheDefinitions) {
  const char* source_dir = std::getenv("CHGATE_SOURCE_DIR");
  ASSERT_NE(source_dir, nullptr) << "CHGATE_SOURCE_DIR names the checkout (ctest sets it)";
  const std::string path = std::string(source_dir) + "/docs/configuration.md";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string readme = buffer.str();
  const std::string begin = "<!-- options: generated from server/config/config.cc -->\n";
  const std::string end = "<!-- options: end -->\n";
  const size_t b = readme.find(begin);
  const size_t e = readme.find(end);
  ASSERT_NE(b, std::string::npos) << path << " lacks the marker " << begin;
  ASSERT_NE(e, std::string::npos) << path << " lacks the marker " << end;
  ASSERT_LT(b, e);
  const std::string table = readme.substr(b + begin.size(), e - b - begin.size());
  const std::string expected = OptionsMarkdown();
  if (table != expected && std::getenv("CHGATE_UPDATE_DOCS") != nullptr) {
    readme.replace(b + begin.size(), e - b - begin.size(), expected);
    std::ofstream(path, std::ios::trunc) << readme;
    GTEST_SKIP() << path << " rewritten; run again";
  }
  EXPECT_EQ(table, expected)
      << "docs/configuration.md's option table differs from the option definitions; run "
         "CHGATE_UPDATE_DOCS=1 build/tests/chgate_config_test (with CHGATE_SOURCE_DIR set) to "
         "regenerate it";
}

TEST(ConfigTest, BooleanOptionsStandAloneOrTakeAValue) {
  const char* bare[] = {"chgate", "--query-allow-writes", "--null-as-default=false",
                        "--grpc-reflection=yes"};
  auto c = Parse(4, bare, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->query_allow_writes);
  EXPECT_FALSE(c->null_as_default);
  EXPECT_TRUE(c->grpc_reflection);
  const char* bad[] = {"chgate", "--null-as-default=perhaps"};
  auto b = Parse(2, bad, nullptr);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("--null-as-default"), std::string::npos) << b.status();
}

TEST(ConfigTest, AnOptionNeverSwallowsTheNextOption) {
  // Before, `--database --null-as-default` read "--null-as-default" as the database name.
  const char* argv[] = {"chgate", "--user", "--null-as-default"};
  auto c = Parse(3, argv, nullptr);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("--user"), std::string::npos) << c.status();
  const char* flags[] = {"chgate", "--null-as-default", "--query-allow-writes"};
  auto f = Parse(3, flags, nullptr);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->null_as_default);
  EXPECT_TRUE(f->query_allow_writes);
  const char* timeout[] = {"chgate", "--read-timeout", "--null-as-default"};
  auto t = Parse(3, timeout, nullptr);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("--read-timeout"), std::string::npos) << t.status();
}

TEST(ConfigTest, TheLastOfARepeatedOptionWinsAndStrayArgumentsAreRefused) {
  const char* argv[] = {"chgate", "--user=a", "--user", "b"};
  auto c = Parse(4, argv, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->user, "b");
  const char* stray[] = {"chgate", "--null-as-default", "true"};
  auto s = Parse(3, stray, nullptr);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("true"), std::string::npos) << s.status();
}

TEST(ConfigTest, DefaultsComeFromTheDefinitionsAndAreListed) {
  const char* argv[] = {"chgate"};
  auto c = Parse(1, argv, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->listen, "127.0.0.1:50051");
  EXPECT_EQ(c->read_timeout, absl::Seconds(60));
  EXPECT_EQ(c->batch_max_bytes, 16u << 20);
  EXPECT_EQ(c->ready_high_water, 0.9);
  EXPECT_EQ(c->ack_mode, "committed");
  EXPECT_FALSE(c->allow_remote_api);
  // Every option appears once in the effective settings, in --help order.
  const std::string usage = Usage();
  size_t last = 0;
  for (const auto& [name, value] : c->settings) {
    const size_t at = usage.find("--" + name + "=");
    ASSERT_NE(at, std::string::npos) << name;
    EXPECT_GT(at, last) << name;
    last = at;
  }
}

}  // namespace
}  // namespace chgate::config

namespace chgate::config {
namespace {

// Every cross-option check refuses the start with a message naming the option to change, and
// the nearest accepted value passes (so the check is the documented bound, not any refusal).
TEST(ConfigTest, EachLimitRefusesTheStartNamingItsOptionAndAcceptsTheBound) {
  const struct {
    std::vector<const char*> refused;
    const char* named;
    std::vector<const char*> accepted;
  } kCases[] = {
      {{"--max-message-bytes=2MiB", "--memory-budget=7MiB", "--batch-max-bytes=1MiB"},
       "--max-message-bytes",
       {"--max-message-bytes=2MiB", "--memory-budget=8MiB", "--batch-max-bytes=1MiB"}},
      {{"--liveness-stall-timeout=40s", "--retry-max-elapsed=30s", "--read-timeout=10s"},
       "--liveness-stall-timeout",
       {"--liveness-stall-timeout=41s", "--retry-max-elapsed=30s", "--read-timeout=10s"}},
      {{"--ack-mode=persisted"}, "--spool-dir", {"--ack-mode=persisted", "--spool-dir=/s"}},
      {{"--spool-dir=/s", "--spool-segment-bytes=63KiB"},
       "--spool-segment-bytes",
       {"--spool-dir=/s", "--spool-segment-bytes=64KiB"}},
      {{"--spool-dir=/s", "--spool-max-bytes=1GiB", "--spool-segment-bytes=513MiB"},
       "--spool-segment-bytes",
       {"--spool-dir=/s", "--spool-max-bytes=1GiB", "--spool-segment-bytes=512MiB"}},
      {{"--spool-group-commit-delay=101ms"},
       "--spool-group-commit-delay",
       {"--spool-group-commit-delay=100ms"}},
      {{"--batch-max-bytes=769KiB", "--memory-budget=1MiB", "--max-message-bytes=64KiB"},
       "--batch-max-bytes",
       {"--batch-max-bytes=768KiB", "--memory-budget=1MiB", "--max-message-bytes=64KiB"}},
      {{"--pool-min-connections=3", "--pool-max-connections=2"},
       "--pool-min-connections",
       {"--pool-min-connections=2", "--pool-max-connections=2"}},
      {{"--retry-initial-backoff=2s", "--retry-max-backoff=1s"},
       "--retry-initial-backoff",
       {"--retry-initial-backoff=1s", "--retry-max-backoff=1s"}},
  };
  for (const auto& c : kCases) {
    const std::string refused = absl::StrJoin(c.refused, " ");
    absl::StatusOr<Config> bad = ParseArgs(c.refused);
    ASSERT_FALSE(bad.ok()) << refused;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << refused;
    EXPECT_NE(bad.status().message().find(c.named), std::string::npos)
        << refused << ": " << bad.status().message();
    absl::StatusOr<Config> good = ParseArgs(c.accepted);
    EXPECT_TRUE(good.ok()) << absl::StrJoin(c.accepted, " ") << ": " << good.status();
  }
}

}  // namespace
}  // namespace chgate::config
