// Connections over TLS against a TLS-terminating null server (certificates made at test time):
// inserts and selects arrive intact, and each way a TLS setup can be wrong ends in its own
// message naming the endpoint. The live counterpart, against the local ClickHouse's secure port,
// is tests/integration/clickhouse/tls_chtest.cc.
#include "server/clickhouse/wire/tls.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/connection.h"
#include "server/clickhouse/pool.h"
#include "tests/bench/null_server.h"
#include "tests/unit/clickhouse/fake_server.h"
#include "tests/unit/clickhouse/test_util.h"
#include "tests/unit/tls/test_pki.h"

namespace chgate::clickhouse {
namespace {

using chgate::testing::LeafSpec;
using chgate::testing::TestPki;
using testing::DeadLoopbackPort;

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.MakeCa("main"));
    ASSERT_TRUE(pki_.MakeCa("other"));
  }
  std::string CaFile(const std::string& ca) const { return pki_.Path(ca + ".crt"); }

  // A null server presenting a certificate issued by CA `ca` for `spec`; `client_ca` makes it
  // require client certificates signed by that CA.
  std::unique_ptr<NullServer> StartServer(const std::string& ca, const LeafSpec& spec,
                                          const std::string& client_ca = "") {
    const std::string name = absl::StrCat("server", ++issued_);
    EXPECT_TRUE(pki_.Issue(name, ca, spec));
    auto context = chgate::testing::ServerContext(pki_, name, client_ca);
    EXPECT_TRUE(context.ok()) << context.status();
    NullServerOptions options;
    options.insert_header = testing::HeaderBlock({{"x", "UInt64"}, {"s", "String"}});
    options.select_block = testing::MakeBlock({{"n", testing::UInt64Column({1, 2, 3})}});
    options.select_repeats = 2;
    options.tls = *context;
    auto server = std::make_unique<NullServer>(std::move(options));
    EXPECT_TRUE(server->Start().ok());
    return server;
  }

  std::shared_ptr<TlsClientContext> Client(TlsClientOptions options) {
    auto ctx = TlsClientContext::Create(std::move(options));
    EXPECT_TRUE(ctx.ok()) << ctx.status();
    return ctx.ok() ? *ctx : nullptr;
  }

  ConnectionOptions Options(uint16_t port, std::shared_ptr<TlsClientContext> tls,
                            const std::string& host = "127.0.0.1") {
    ConnectionOptions o;
    o.host = host;
    o.port = port;
    o.tls = std::move(tls);
    o.connect_timeout = absl::Seconds(5);
    o.handshake_timeout = absl::Seconds(5);
    o.read_timeout = absl::Seconds(10);
    return o;
  }

  TestPki pki_;
  int issued_ = 0;
};

TEST_F(TlsTest, InsertsAndSelectsOverTls) {
  auto server = StartServer("main", {});
  for (CompressionMethod method :
       {CompressionMethod::kNone, CompressionMethod::kLz4, CompressionMethod::kZstd}) {
    ConnectionOptions options = Options(server->port(), Client({.ca_file = CaFile("main")}));
    options.compression = method;
    auto conn = Connection::Connect(options);
    ASSERT_TRUE(conn.ok()) << conn.status();
    EXPECT_TRUE(absl::StartsWith((*conn)->transport_description(), "TLSv1.3"))
        << (*conn)->transport_description();
    ASSERT_TRUE((*conn)->Ping().ok());

    // A block with many small spans and a large one: small ones are packed into records, the
    // large one goes straight from column memory.
    ColumnPtr x = testing::MakeColumn("UInt64");
    ColumnPtr s = testing::MakeColumn("String");
    constexpr uint64_t kRows = 300000;
    for (uint64_t i = 0; i < kRows; ++i) {
      static_cast<ColumnFixed&>(*x).Append<uint64_t>(i);
      static_cast<ColumnString&>(*s).Append(absl::StrCat("value-", i));
    }
    Block block;
    block.AddColumn("x", x);
    block.AddColumn("s", s);
    const uint64_t before = server->rows_received();
    const Block* blocks[] = {&block};
    ASSERT_TRUE((*conn)->Insert({.query = "INSERT INTO t (x, s) VALUES"}, blocks).ok());
    EXPECT_EQ(server->rows_received() - before, kRows);

    uint64_t rows = 0;
    ASSERT_TRUE((*conn)
                    ->Select({.query = "SELECT n"},
                             [&](const Block& b) {
                               rows += b.rows();
                               return absl::OkStatus();
                             })
                    .ok());
    EXPECT_EQ(rows, 6u);
    EXPECT_TRUE((*conn)->usable());
  }
}

TEST_F(TlsTest, UnknownCaIsNamed) {
  auto server = StartServer("other", {});
  auto conn = Connection::Connect(Options(server->port(), Client({.ca_file = CaFile("main")})));
  ASSERT_FALSE(conn.ok());
  EXPECT_TRUE(absl::IsUnavailable(conn.status())) << conn.status();
  EXPECT_TRUE(absl::StrContains(conn.status().message(), "unknown CA")) << conn.status();
  EXPECT_TRUE(
      absl::StrContains(conn.status().message(), absl::StrCat("127.0.0.1:", server->port())))
      << conn.status();
  EXPECT_TRUE(absl::StrContains(conn.status().message(), "--clickhouse-tls-ca-file"));
}

TEST_F(TlsTest, SystemStoreDoesNotTrustAPrivateCa) {
  auto server = StartServer("main", {});
  auto conn = Connection::Connect(Options(server->port(), Client({})));
  ASSERT_FALSE(conn.ok());
  EXPECT_TRUE(absl::StrContains(conn.status().message(), "unknown CA")) << conn.status();
  EXPECT_TRUE(absl::StrContains(conn.status().message(), "system's trust store"));
}

TEST_F(TlsTest, NameMismatchIsNamed) {
  auto server = StartServer("main", {.common_name = "ch.example", .names = {"DNS:ch.example"}});
  auto conn = Connection::Connect(Options(server->port(), Client({.ca_file = CaFile("main")})));
  ASSERT_FALSE(conn.ok());
  EXPECT_TRUE(absl::StrContains(conn.status().message(), "name mismatch")) << conn.status();
  EXPECT_TRUE(absl::StrContains(conn.status().message(), "'127.0.0.1'")) << conn.status();
  EXPECT_TRUE(absl::StrContains(conn.status().message(), "DNS:ch.example")) << conn.status();

  // The configured server name is what is sent and checked.
  auto named = Connection::Connect(
      Options(server->port(), Client({.ca_file = CaFile("main"), .server_name = "ch.example"})));
  EXPECT_TRUE(named.ok()) << named.status();
}

TEST_F(TlsTest, ExpiredCertificateIsNamed) {
  auto server = StartServer("main", {.not_before = -absl::Hours(48), .not_after = -absl::Hours(1)});
  auto conn = Connection::Connect(Options(server->port(), Client({.ca_file = CaFile("main")})));
  ASSERT_FALSE(conn.ok());
  EXPECT_TRUE(absl::StrContains(conn.status().message(), "has expired")) << conn.status();
}

TEST_F(TlsTest, InsecureSkipVerifyConnectsToAnyServer) {
  auto server = StartServer("other", {.names = {"DNS:elsewhere"}});
  auto conn = Connection::Connect(
      Options(server->port(), Client({.ca_file = CaFile("main"), .insecure_skip_verify = true})));
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_TRUE((*conn)->Ping().ok());
}

TEST_F(TlsTest, PlainPortSpokenToWithTls) {
  NullServerOptions options;
  NullServer plain(std::move(options));
  ASSERT_TRUE(plain.Start().ok());
  auto conn = Connection::Connect(Options(plain.port(), Client({.ca_file = CaFile("main")})));
  ASSERT_FALSE(conn.ok());
  EXPECT_TRUE(absl::IsUnavailable(conn.status())) << conn.status();
  EXPECT_TRUE(absl::StrContains(conn.status().message(), "plain")) << conn.status();
}

TEST_F(TlsTest, TlsPortSpokenToWithoutTls) {
  auto server = StartServer("main", {});
  auto conn = Connection::Connect(Options(server->port(), nullptr));
  ASSERT_FALSE(conn.ok());
  EXPECT_TRUE(absl::IsUnavailable(conn.status())) << conn.status();
  EXPECT_TRUE(absl::StrContains(conn.status().message(), "--clickhouse-tls")) << conn.status();
}

TEST_F(TlsTest, HandshakeTimesOutAgainstASilentPort) {
  // A listening socket nobody accepts on: TCP connects (the kernel's backlog), the TLS hello is
  // never answered.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ConnectionOptions options = Options(ntohs(addr.sin_port), Client({.ca_file = CaFile("main")}));
  options.handshake_timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  auto conn = Connection::Connect(options);
  ::close(fd);
  ASSERT_FALSE(conn.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(conn.status())) << conn.status();
  EXPECT_TRUE(absl::StrContains(conn.status().message(), "TLS handshake")) << conn.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(TlsTest, MutualTls) {
  auto server = StartServer("main", {}, "other");
  // Without a client certificate the server refuses.
  auto refused = Connection::Connect(Options(server->port(), Client({.ca_file = CaFile("main")})));
  ASSERT_FALSE(refused.ok());
  // With TLS 1.3 the refusal arrives after the client's side of the handshake is done: either
  // the handshake or the first read reports it.
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();

  ASSERT_TRUE(pki_.Issue("client", "other", LeafSpec{.common_name = "chgate", .names = {}}));
  auto conn =
      Connection::Connect(Options(server->port(), Client({.ca_file = CaFile("main"),
                                                          .cert_file = pki_.Path("client.crt"),
                                                          .key_file = pki_.Path("client.key")})));
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_TRUE((*conn)->Ping().ok());
}

TEST_F(TlsTest, BadClientFilesAreRefusedAtStart) {
  auto missing = TlsClientContext::Create({.ca_file = pki_.Path("missing.crt")});
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "missing.crt")) << missing.status();

  auto half = TlsClientContext::Create({.cert_file = CaFile("main")});
  EXPECT_FALSE(half.ok());

  ASSERT_TRUE(pki_.Issue("a", "main", LeafSpec{}) && pki_.Issue("b", "main", LeafSpec{}));
  auto mismatched =
      TlsClientContext::Create({.cert_file = pki_.Path("a.crt"), .key_file = pki_.Path("b.key")});
  ASSERT_FALSE(mismatched.ok());
  EXPECT_TRUE(absl::StrContains(mismatched.status().message(), "does not match"))
      << mismatched.status();
}

TEST_F(TlsTest, RotatedCaFileIsUsedForNewConnections) {
  const std::string ca_file = pki_.Path("trusted.crt");
  pki_.Replace("trusted.crt", "main.crt");
  auto tls = Client({.ca_file = ca_file, .reload_check_interval = absl::ZeroDuration()});
  auto old_server = StartServer("main", {});
  auto new_server = StartServer("other", {});
  auto kept = Connection::Connect(Options(old_server->port(), tls));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(Connection::Connect(Options(new_server->port(), tls)).ok());

  // Rotation as a secret volume does it: a new file moved over the old one.
  pki_.Replace("trusted.crt", "other.crt");
  auto fresh = Connection::Connect(Options(new_server->port(), tls));
  EXPECT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(tls->reloads(), 1u);
  // The connection made before the rotation keeps working.
  EXPECT_TRUE((*kept)->Ping().ok());

  // A broken file during rotation keeps the last good context.
  pki_.Write("trusted.crt", "-----BEGIN CERTIFICATE-----\ngarbage\n");
  auto still = Connection::Connect(Options(new_server->port(), tls));
  EXPECT_TRUE(still.ok()) << still.status();
  EXPECT_EQ(tls->reload_failures(), 1u);
  EXPECT_FALSE(tls->last_reload_error().ok());
}

TEST_F(TlsTest, CancelWakesABlockedTlsRead) {
  // Nothing is coming: the wait for input blocks until Cancel() from another thread wakes it.
  auto server = StartServer("main", {});
  auto conn = Connection::Connect(Options(server->port(), Client({.ca_file = CaFile("main")})));
  ASSERT_TRUE(conn.ok()) << conn.status();
  Connection* c = conn->get();
  std::thread canceller([c] {
    absl::SleepFor(absl::Milliseconds(100));
    c->Cancel();
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<bool> ready = c->WaitForInput(absl::Seconds(20));
  canceller.join();
  EXPECT_FALSE(ready.ok());
  EXPECT_TRUE(absl::IsCancelled(ready.status())) << ready.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_FALSE(c->usable());
}

TEST_F(TlsTest, PoolFailsOverFromADeadTlsEndpoint) {
  auto server = StartServer("main", {});
  const uint16_t dead_port = DeadLoopbackPort();

  PoolOptions options;
  options.endpoints = {{.host = "127.0.0.1", .port = dead_port, .tls = true},
                       {.host = "127.0.0.1", .port = server->port(), .tls = true}};
  options.connection = Options(0, Client({.ca_file = CaFile("main")}));
  options.min_connections = 0;
  Pool pool(options);
  auto conn = pool.Acquire(absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_EQ(conn->endpoint().port, server->port());
  EXPECT_TRUE((*conn)->Ping().ok());
  auto stats = pool.Stats();
  EXPECT_EQ(stats[0].connect_failures, 1u);
  EXPECT_FALSE(stats[0].healthy);
}

}  // namespace
}  // namespace chgate::clickhouse
