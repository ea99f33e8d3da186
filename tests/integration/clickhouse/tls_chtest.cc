// TLS against the local ClickHouse's secure native port (deploy/clickhouse/clickhousectl.sh makes
// its certificate and CA at start): inserts and selects with each compression, and each wrong
// setup failing with its own message. CHGATE_CLICKHOUSE_SECURE=host:port names the port (default
// 127.0.0.1:29440), CHGATE_CLICKHOUSE_SECURE_CA the CA file (default the state dir's tls/ca.crt).
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/pool.h"
#include "server/clickhouse/wire/tls.h"
#include "tests/integration/clickhouse/live.h"
#include "tests/unit/clickhouse/test_util.h"
#include "tests/unit/tls/test_pki.h"

namespace chgate::clickhouse::testing {
namespace {

LiveEndpoint LiveTlsServer() {
  LiveEndpoint ep{.port = 29440};
  if (const char* env = std::getenv("CHGATE_CLICKHOUSE_SECURE"); env != nullptr && *env != '\0') {
    std::string text(env);
    size_t colon = text.rfind(':');
    uint32_t port = 0;
    if (colon != std::string::npos && absl::SimpleAtoi(text.substr(colon + 1), &port)) {
      ep.host = text.substr(0, colon);
      ep.port = static_cast<uint16_t>(port);
    }
  }
  return ep;
}

std::string LiveTlsCaFile() {
  if (const char* env = std::getenv("CHGATE_CLICKHOUSE_SECURE_CA");
      env != nullptr && *env != '\0') {
    return env;
  }
  const char* source = std::getenv("CHGATE_SOURCE_DIR");
  return absl::StrCat(source != nullptr ? source : ".", "/.local/clickhouse/tls/ca.crt");
}

std::shared_ptr<TlsClientContext> Tls(TlsClientOptions options) {
  auto ctx = TlsClientContext::Create(std::move(options));
  EXPECT_TRUE(ctx.ok()) << ctx.status();
  return ctx.ok() ? *ctx : nullptr;
}

ConnectionOptions TlsOptions(std::shared_ptr<TlsClientContext> tls,
                             CompressionMethod compression = CompressionMethod::kLz4) {
  ConnectionOptions o = LiveOptions(compression);
  const LiveEndpoint ep = LiveTlsServer();
  o.host = ep.host;
  o.port = ep.port;
  o.tls = std::move(tls);
  return o;
}

class TlsLiveTest : public ::testing::TestWithParam<CompressionMethod> {
 protected:
  void SetUp() override {
    plain_ = ConnectOrSkip();
    if (plain_ == nullptr) GTEST_SKIP();
    // In CI (CHGATE_REQUIRE_CLICKHOUSE=1) a missing CA file is a failure, not a skip: the
    // secure port is part of the local server.
    ASSERT_TRUE(std::filesystem::exists(LiveTlsCaFile()))
        << "no CA file " << LiveTlsCaFile() << " (restart the local ClickHouse with "
        << "deploy/clickhouse/clickhousectl.sh restart to make it)";
  }
  std::unique_ptr<Connection> plain_;
};

TEST_P(TlsLiveTest, InsertsAndSelectsOverTls) {
  auto conn = Connection::Connect(TlsOptions(Tls({.ca_file = LiveTlsCaFile()}), GetParam()));
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_TRUE(absl::StartsWith((*conn)->transport_description(), "TLSv1."))
      << (*conn)->transport_description();
  const std::string table = absl::StrCat("chgate_test.tls_", CompressionName(GetParam()));
  Exec(*plain_, "CREATE DATABASE IF NOT EXISTS chgate_test");
  Exec(*plain_, absl::StrCat("DROP TABLE IF EXISTS ", table));
  Exec(*plain_, absl::StrCat("CREATE TABLE ", table, " (x UInt64, s String) ENGINE = Memory"));

  // Large enough for many TLS records and several compression frames; strings make many spans.
  constexpr uint64_t kRows = 400000;
  ColumnPtr x = *CreateColumn("UInt64");
  ColumnPtr s = *CreateColumn("String");
  uint64_t text_bytes = 0;
  for (uint64_t i = 0; i < kRows; ++i) {
    static_cast<ColumnFixed&>(*x).Append<uint64_t>(i);
    const std::string text = absl::StrCat("row-", i);
    text_bytes += text.size();
    static_cast<ColumnString&>(*s).Append(text);
  }
  Block block;
  block.AddColumn("x", x);
  block.AddColumn("s", s);
  const Block* blocks[] = {&block};
  ASSERT_TRUE((*conn)
                  ->Insert({.query = absl::StrCat("INSERT INTO ", table, " (x, s) VALUES")}, blocks)
                  .ok());

  // What the server holds, read through the plain port by the real client.
  EXPECT_EQ(ClickHouseClient(absl::StrCat("SELECT count(), sum(x), sum(length(s)) FROM ", table)),
            absl::StrCat(kRows, "\t", kRows * (kRows - 1) / 2, "\t", text_bytes, "\n"));
  // And the same read back over TLS.
  auto tsv = SelectTsv(**conn, absl::StrCat("SELECT count(), sum(x), max(s) FROM ", table));
  ASSERT_TRUE(tsv.ok()) << tsv.status();
  EXPECT_EQ(*tsv, absl::StrCat(kRows, "\t", kRows * (kRows - 1) / 2, "\trow-99999\n"));
  uint64_t rows = 0;
  ASSERT_TRUE((*conn)
                  ->Select({.query = "SELECT number, toString(number) FROM system.numbers "
                                     "LIMIT 2000000"},
                           [&](const Block& b) {
                             rows += b.rows();
                             return absl::OkStatus();
                           })
                  .ok());
  EXPECT_EQ(rows, 2000000u);
  EXPECT_TRUE((*conn)->usable());
  Exec(*plain_, absl::StrCat("DROP TABLE ", table));
}

INSTANTIATE_TEST_SUITE_P(Compression, TlsLiveTest,
                         ::testing::Values(CompressionMethod::kNone, CompressionMethod::kLz4,
                                           CompressionMethod::kZstd),
                         CompressionParamName());

class TlsLiveErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ConnectOrSkip() == nullptr) GTEST_SKIP();
    ASSERT_TRUE(std::filesystem::exists(LiveTlsCaFile())) << LiveTlsCaFile();
  }
  chgate::testing::TestPki pki_;
};

TEST_F(TlsLiveErrorTest, ACaThatDidNotSignTheServerIsAnUnknownCa) {
  ASSERT_TRUE(pki_.MakeCa("other"));
  auto conn = Connection::Connect(TlsOptions(Tls({.ca_file = pki_.Path("other.crt")})));
  ASSERT_FALSE(conn.ok());
  EXPECT_TRUE(absl::IsUnavailable(conn.status())) << conn.status();
  EXPECT_TRUE(absl::StrContains(conn.status().message(), "unknown CA")) << conn.status();
  EXPECT_TRUE(absl::StrContains(conn.status().message(),
                                absl::StrCat(LiveTlsServer().host, ":", LiveTlsServer().port)))
      << conn.status();
}

TEST_F(TlsLiveErrorTest, ANameTheCertificateDoesNotListIsANameMismatch) {
  auto conn = Connection::Connect(
      TlsOptions(Tls({.ca_file = LiveTlsCaFile(), .server_name = "clickhouse.example"})));
  ASSERT_FALSE(conn.ok());
  EXPECT_TRUE(absl::StrContains(conn.status().message(), "name mismatch")) << conn.status();
  EXPECT_TRUE(absl::StrContains(conn.status().message(), "clickhouse.example"));
  // The certificate lists localhost: that name verifies.
  ConnectionOptions by_name = TlsOptions(Tls({.ca_file = LiveTlsCaFile()}));
  by_name.host = "localhost";
  auto ok = Connection::Connect(by_name);
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST_F(TlsLiveErrorTest, ThePlainPortSpokenToWithTlsSaysSo) {
  ConnectionOptions options = TlsOptions(Tls({.ca_file = LiveTlsCaFile()}));
  options.port = LiveServer().port;
  auto conn = Connection::Connect(options);
  ASSERT_FALSE(conn.ok());
  EXPECT_TRUE(absl::StrContains(conn.status().message(), "plain (non-TLS) port")) << conn.status();
}

TEST_F(TlsLiveErrorTest, TheSecurePortSpokenToWithoutTlsSaysSo) {
  ConnectionOptions options = TlsOptions(nullptr);
  auto conn = Connection::Connect(options);
  ASSERT_FALSE(conn.ok());
  EXPECT_TRUE(absl::StrContains(conn.status().message(), "--clickhouse-tls")) << conn.status();
}

TEST_F(TlsLiveErrorTest, APoolFailsOverFromADeadTlsEndpointToTheLiveOne) {
  const LiveEndpoint live = LiveTlsServer();
  PoolOptions options{.endpoints = {{.host = "127.0.0.1", .port = DeadLoopbackPort(), .tls = true},
                                    {.host = live.host, .port = live.port, .tls = true}},
                      .connection = TlsOptions(Tls({.ca_file = LiveTlsCaFile()})),
                      .max_connections = 2,
                      .min_connections = 0};
  Pool pool(options);
  for (int i = 0; i < 3; ++i) {
    auto conn = pool.Acquire(absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(conn.ok()) << conn.status();
    EXPECT_EQ(conn->endpoint().port, live.port);
    auto tsv = SelectTsv(**conn, "SELECT 42");
    ASSERT_TRUE(tsv.ok()) << tsv.status();
    EXPECT_EQ(*tsv, "42\n");
  }
  auto stats = pool.Stats();
  EXPECT_GE(stats[0].connect_failures, 1u);
  EXPECT_FALSE(stats[0].healthy);
  EXPECT_TRUE(stats[1].healthy);
}

}  // namespace
}  // namespace chgate::clickhouse::testing
