// The byte stream under every connection, tried on its own: reads return what is there and wait
// only for an empty socket, every wait ends at its timeout or at Shutdown(), a peer that went
// away is an error and never a signal, and TLS carries large and small spans intact both ways
// with reads that take in many records at once.
#include "server/clickhouse/wire/transport.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "server/clickhouse/wire/tls.h"
#include "tests/unit/tls/test_pki.h"

namespace chgate::clickhouse {
namespace {

// A connected pair of stream sockets: `ours` adopted as a transport, `peer` a raw descriptor.
struct PlainPair {
  PlainPair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    ours = Transport::AdoptPlain(fds[0]);
    peer = fds[1];
  }
  ~PlainPair() {
    if (peer >= 0) ::close(peer);
  }
  void ClosePeer() {
    ::close(peer);
    peer = -1;
  }
  std::unique_ptr<Transport> ours;
  int peer = -1;
};

std::string Pattern(size_t n) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>((i * 131 + i / 977) & 0xff);
  return out;
}

TEST(TransportTest, AReadReturnsWhatIsThereAndTimesOutOnASilentPeer) {
  PlainPair pair;
  ASSERT_EQ(::write(pair.peer, "hello", 5), 5);
  char buf[64];
  auto got = pair.ours->ReadSome(buf, sizeof(buf), absl::Seconds(5));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(std::string(buf, *got), "hello");

  const absl::Time start = absl::Now();
  auto silent = pair.ours->ReadSome(buf, sizeof(buf), absl::Milliseconds(150));
  EXPECT_TRUE(absl::IsDeadlineExceeded(silent.status())) << silent.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(140));
  auto nothing = pair.ours->TryReadSome(buf, sizeof(buf), absl::Milliseconds(20));
  ASSERT_TRUE(nothing.ok()) << nothing.status();
  EXPECT_EQ(*nothing, 0u);
  EXPECT_FALSE(pair.ours->InputPending());
  ASSERT_EQ(::write(pair.peer, "x", 1), 1);
  EXPECT_TRUE(pair.ours->InputPending());
}

TEST(TransportTest, APeerThatClosedIsUnavailableForReadsAndWritesWithoutASignal) {
  PlainPair pair;
  pair.ClosePeer();
  char buf[16];
  auto got = pair.ours->ReadSome(buf, sizeof(buf), absl::Seconds(5));
  EXPECT_TRUE(absl::IsUnavailable(got.status())) << got.status();
  EXPECT_TRUE(absl::StrContains(got.status().message(), "closed by the server"));
  // SIGPIPE is not ignored in this process: a write that raised it would end the test here.
  const std::string data(1 << 20, 'x');
  absl::Status st = pair.ours->WriteAll(data.data(), data.size(), absl::Seconds(5));
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
}

TEST(TransportTest, SpansBeyondTheSystemsLimitPerCallArriveInOrder) {
  PlainPair pair;
  const std::string data = Pattern(3000 * 7);
  std::vector<iovec> spans;
  for (size_t i = 0; i < 3000; ++i) {
    spans.push_back({const_cast<char*>(data.data()) + i * 7, 7});
    spans.push_back({nullptr, 0});  // empty spans are skipped
  }
  std::string received;
  std::thread reader([&] {
    char buf[4096];
    while (received.size() < data.size()) {
      const ssize_t n = ::read(pair.peer, buf, sizeof(buf));
      if (n <= 0) break;
      received.append(buf, static_cast<size_t>(n));
    }
  });
  absl::Status st = pair.ours->WriteAll(spans, absl::Seconds(5));
  reader.join();
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(received, data);
  EXPECT_EQ(pair.ours->bytes_written(), data.size());
}

TEST(TransportTest, AWriteToAPeerThatDoesNotReadTimesOut) {
  PlainPair pair;
  const std::string data(64 << 20, 'x');
  const absl::Time start = absl::Now();
  absl::Status st = pair.ours->WriteAll(data.data(), data.size(), absl::Milliseconds(200));
  EXPECT_TRUE(absl::IsDeadlineExceeded(st)) << st;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(TransportTest, ShutdownWakesABlockedReadAndABlockedWrite) {
  PlainPair reading;
  absl::StatusOr<size_t> read = 0;
  std::thread reader([&] {
    char buf[16];
    read = reading.ours->ReadSome(buf, sizeof(buf), absl::InfiniteDuration());
  });
  PlainPair writing;
  absl::Status written;
  std::thread writer([&] {
    const std::string data(64 << 20, 'x');
    written = writing.ours->WriteAll(data.data(), data.size(), absl::InfiniteDuration());
  });
  absl::SleepFor(absl::Milliseconds(100));
  reading.ours->Shutdown();
  writing.ours->Shutdown();
  reader.join();
  writer.join();
  EXPECT_TRUE(absl::IsCancelled(read.status())) << read.status();
  EXPECT_TRUE(absl::IsCancelled(written)) << written;
  char buf[4];
  EXPECT_TRUE(absl::IsCancelled(reading.ours->ReadSome(buf, 4, absl::Seconds(1)).status()));
}

// A TLS connection over loopback TCP: the server side adopted from an accepted socket.
class TlsTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.MakeCa("ca"));
    ASSERT_TRUE(pki_.Issue("server", "ca", chgate::testing::LeafSpec{}));
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(::listen(listener_, 4), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  void TearDown() override { ::close(listener_); }

  // Connects a client and a server transport to each other.
  void Connect() {
    auto context = chgate::testing::ServerContext(pki_, "server");
    ASSERT_TRUE(context.ok()) << context.status();
    std::thread acceptor([&] {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      auto adopted = Transport::AdoptTlsServer(fd, *context, absl::Seconds(5));
      ASSERT_TRUE(adopted.ok()) << adopted.status();
      server_ = *std::move(adopted);
    });
    auto tls = TlsClientContext::Create({.ca_file = pki_.Path("ca.crt")});
    ASSERT_TRUE(tls.ok()) << tls.status();
    auto client = Transport::Connect("127.0.0.1", port_, {.tls = *tls});
    acceptor.join();
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    ASSERT_NE(server_, nullptr);
    EXPECT_TRUE(client_->tls());
    EXPECT_TRUE(absl::StrContains(client_->Description(), "TLS")) << client_->Description();
  }

  chgate::testing::TestPki pki_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::unique_ptr<Transport> client_;
  std::unique_ptr<Transport> server_;
};

// Reads exactly `n` bytes; the largest single read in `largest`.
std::string ReadExactly(Transport& t, size_t n, size_t* largest) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    auto r = t.ReadSome(out.data() + got, n - got, absl::Seconds(10));
    if (!r.ok()) {
      ADD_FAILURE() << r.status();
      break;
    }
    got += *r;
    *largest = std::max(*largest, *r);
  }
  out.resize(got);
  return out;
}

TEST_F(TlsTransportTest, LargeAndSmallSpansArriveIntactBothWays) {
  Connect();
  const std::string data = Pattern(6 << 20);
  // Spans of every size: tiny ones packed into records, large ones encrypted in place.
  std::vector<iovec> spans;
  size_t at = 0;
  for (size_t i = 0; at < data.size(); ++i) {
    const size_t len = std::min(
        data.size() - at, i % 3 == 0 ? size_t{3} : (i % 3 == 1 ? size_t{20000} : size_t{700000}));
    spans.push_back({const_cast<char*>(data.data()) + at, len});
    at += len;
  }
  std::string at_server;
  size_t largest_at_server = 0;
  std::thread reader([&] { at_server = ReadExactly(*server_, data.size(), &largest_at_server); });
  absl::Status st = client_->WriteAll(spans, absl::Seconds(10));
  reader.join();
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(at_server == data);
  // Encrypted: every record adds a header and a tag.
  EXPECT_GT(client_->bytes_written(), data.size());

  std::string at_client;
  size_t largest_at_client = 0;
  std::thread writer(
      [&] { EXPECT_TRUE(server_->WriteAll(data.data(), data.size(), absl::Seconds(10)).ok()); });
  at_client = ReadExactly(*client_, data.size(), &largest_at_client);
  writer.join();
  EXPECT_TRUE(at_client == data);
  // Reads take in what is already here: more than one record's 16 KiB at a time.
  EXPECT_GT(std::max(largest_at_client, largest_at_server), size_t{16 * 1024});
}

TEST_F(TlsTransportTest, AClosedPeerAndShutdownEndTlsReadsAndWrites) {
  Connect();
  char buf[64];
  auto silent = client_->ReadSome(buf, sizeof(buf), absl::Milliseconds(100));
  EXPECT_TRUE(absl::IsDeadlineExceeded(silent.status())) << silent.status();

  absl::StatusOr<size_t> blocked = 0;
  std::thread reader(
      [&] { blocked = server_->ReadSome(buf, sizeof(buf), absl::InfiniteDuration()); });
  absl::SleepFor(absl::Milliseconds(50));
  server_->Shutdown();
  reader.join();
  EXPECT_TRUE(absl::IsCancelled(blocked.status())) << blocked.status();

  // The server's socket is shut down: the client sees the connection end, and writes fail
  // without a signal.
  auto ended = client_->ReadSome(buf, sizeof(buf), absl::Seconds(5));
  EXPECT_TRUE(absl::IsUnavailable(ended.status())) << ended.status();
  const std::string data(4 << 20, 'y');
  absl::Status st = client_->WriteAll(data.data(), data.size(), absl::Seconds(5));
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
}

}  // namespace
}  // namespace chgate::clickhouse
