// A scriptable fake ClickHouse server for tests of the native-protocol client, and builders of
// server packets as bytes. The server listens on 127.0.0.1 (port 0), accepts connections on its
// own thread and runs a script of steps: read N bytes or one client packet (handing the raw bytes
// to a checker), send bytes, close, stall. Scripts are built before Start() and are not changed
// afterwards; Wait() and the destructor may be called from the test thread. The destructor
// unblocks and joins the server thread.
//
// Client packets are framed with the library's server-side reader (protocol/client_reader.h),
// which follows the negotiated revision min(client, server) and the compression flag of the last
// Query, as a real server does. Framing is not the check: tests compare the framed bytes with
// expected bytes built by hand (Bytes), independently of the library's writers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/clickhouse/block.h"
#include "server/clickhouse/compression/frame.h"
#include "server/clickhouse/connection.h"
#include "server/clickhouse/pool.h"
#include "server/clickhouse/protocol/client_reader.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/clickhouse/protocol/revision.h"

namespace chgate::clickhouse::testing {

// Builds bytes by hand (little-endian fixed widths, VarUInt, String), independently of the
// library's writers, for expected client bytes and for malformed server input.
class Bytes {
 public:
  Bytes& U8(uint8_t v) { return Fixed(v); }
  Bytes& U32(uint32_t v) { return Fixed(v); }
  Bytes& I32(int32_t v) { return Fixed(v); }
  Bytes& U64(uint64_t v) { return Fixed(v); }
  Bytes& VarUInt(uint64_t v);
  Bytes& Str(std::string_view s) { return VarUInt(s.size()).Raw(s); }
  Bytes& Raw(std::string_view s) {
    out_.append(s);
    return *this;
  }
  Bytes& Raw(const Bytes& b) { return Raw(b.str()); }
  const std::string& str() const { return out_; }
  operator std::string() const { return out_; }  // NOLINT: builder reads naturally as a string

 private:
  template <typename T>
  Bytes& Fixed(T v) {
    for (size_t i = 0; i < sizeof(T); ++i) {
      out_.push_back(static_cast<char>(static_cast<uint64_t>(v) >> (8 * i)));
    }
    return *this;
  }
  std::string out_;
};

// ---- Server packet builders ----

struct ServerHelloSpec {
  std::string name = "ClickHouse";
  uint64_t version_major = 24;
  uint64_t version_minor = 3;
  uint64_t version_patch = 7;
  std::string timezone = "UTC";
  std::string display_name = "fake";
};

// ServerHello from a server at `server_revision` answering a client at `client_revision`: every
// optional field of PROTOCOL.md §4.2 whose gate is <= min(server, client) is present.
std::string ServerHelloPacket(uint64_t server_revision,
                              uint64_t client_revision = revision::kClient,
                              const ServerHelloSpec& spec = {});

struct ExceptionSpec {
  int32_t code = 0;
  std::string name = "DB::Exception";
  std::string message;
  std::string stack_trace;
};
// Exception packet; chain[0] is the outer exception, each later one is nested in the previous.
std::string ExceptionPacket(const std::vector<ExceptionSpec>& chain);
// Progress with the fields present at `revision` (§4.8).
std::string ProgressPacket(const Progress& progress, uint64_t revision);
std::string ProfileInfoPacket(const ProfileInfo& info, uint64_t revision);

struct ProfileEvent {
  std::string name;
  int64_t value = 0;
  bool gauge = false;
};
// ProfileEvents (code 14, from revision::kIncrementalProfileEvents): an uncompressed block with
// host_name, current_time, thread_id, type, name, value.
std::string ProfileEventsPacket(uint64_t revision, const std::vector<ProfileEvent>& events);
// Log (code 10): an uncompressed block of the Log columns, one row per text.
std::string LogPacket(uint64_t revision, const std::vector<std::string>& texts);
// Data, Totals or Extremes: code, table name, then the block body (WriteBlock, with has_custom
// bytes from revision::kCustomSerialization), in frames of `compression` when given.
std::string DataPacket(const Block& block, uint64_t revision,
                       std::optional<CompressionMethod> compression = std::nullopt,
                       ServerCode code = ServerCode::kData, std::string_view table_name = "");
std::string TableColumnsPacket(std::string_view table_name, std::string_view description);
std::string PongPacket();
std::string EndOfStreamPacket();
// `body` as one compression frame (checksum included).
std::string CompressFrame(std::string_view body, CompressionMethod method);

// ---- Blocks ----

// An empty column of `type`; fails the test (and aborts) if the type is not supported.
ColumnPtr MakeColumn(std::string_view type);
ColumnPtr UInt64Column(std::initializer_list<uint64_t> values);
ColumnPtr StringColumn(std::initializer_list<std::string_view> values);
Block MakeBlock(std::vector<std::pair<std::string, ColumnPtr>> columns);
// A header block (0 rows) of (name, type) pairs.
Block HeaderBlock(std::vector<std::pair<std::string, std::string>> columns);
// Every value of the block as TSV lines ("a\tb\n" per row), for comparisons.
std::string BlockToTsv(const Block& block);

// ---- Client packets ----

enum class ClientPacket { kHello, kAddendum, kQuery, kData, kCancel, kPing };
const char* ClientPacketName(ClientPacket kind);

// Decodes a client Data packet (code, table name, body) captured by the fake.
absl::StatusOr<Block> DecodeClientData(std::string_view packet, uint64_t revision, bool compressed);

// The query and the client info of a client Query packet captured by the fake, at `revision`.
struct ClientQuery {
  QueryParams query;
  clickhouse::ClientInfo client_info;
};
absl::StatusOr<ClientQuery> DecodeClientQuery(std::string_view packet, uint64_t revision);

// Options of a pool of at most one connection to a fake server on 127.0.0.1:`port`, without
// compression and without endpoint probes (a scripted fake serves one connection at a time).
PoolOptions OneConnectionPool(uint16_t port);

struct FakeServerOptions {
  // The revision the server announces and gates on (with the client's).
  uint64_t revision = revision::kClient;
  // Bounds every wait of the server thread (accept, read, write).
  absl::Duration step_timeout = absl::Seconds(10);
};

class FakeServer {
 public:
  // Receives the raw bytes of what a step read.
  using Checker = std::function<void(std::string_view bytes)>;

  explicit FakeServer(FakeServerOptions options = {});
  ~FakeServer();
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  uint16_t port() const { return port_; }

  // Script steps, run in order on the server thread once Start() is called. The first
  // connection is accepted before the first step.
  FakeServer& ExpectBytes(size_t n, Checker check = nullptr);
  FakeServer& ExpectPacket(ClientPacket kind, Checker check = nullptr);
  FakeServer& Send(std::string bytes);
  // Reads Hello, answers ServerHelloPacket(revision, client revision) and reads the Addendum
  // when the negotiated revision has one.
  FakeServer& Handshake(ServerHelloSpec spec = {});
  // Closes the connection (FIN after everything sent so far).
  FakeServer& Close();
  // Stops answering but keeps the socket open: discards what the client sends until it closes
  // the connection (or the server is destroyed).
  FakeServer& Stall();
  // Closes the current connection and accepts the next one.
  FakeServer& AcceptNext();
  // Runs `fn` on the server thread (e.g. to notify the test that a point was reached).
  FakeServer& Call(std::function<void()> fn);

  void Start();
  // Waits until the script has run to its end and returns its outcome: OK, or what went wrong
  // (a packet that did not parse, the client closing early, a step timing out).
  absl::Status Wait(absl::Duration timeout = absl::Seconds(30));

  // The revision negotiated with the last client Hello (the server's before one arrives).
  uint64_t negotiated_revision() const;

 private:
  struct Step;
  struct ParseState {
    uint64_t client_revision = 0;
    uint64_t revision = 0;
    bool compressed = false;
  };

  void Run();
  absl::Status RunStep(const Step& step);
  absl::Status Accept();
  absl::Status ReadMore(absl::Time deadline);
  absl::Status SendAll(std::string_view bytes, absl::Time deadline);
  absl::Status ReadPacket(ClientPacket kind, absl::Time deadline, std::string* packet);
  // Waits for `events` on `fd`; Cancelled when the server is being destroyed.
  absl::Status WaitFd(int fd, short events, absl::Time deadline);
  void CloseConnection();

  FakeServerOptions options_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  uint16_t port_ = 0;
  std::vector<Step> steps_;
  std::thread thread_;

  // Server-thread state.
  std::string input_;  // received, not yet consumed
  ParseState parse_;

  mutable absl::Mutex mu_;
  int conn_fd_ ABSL_GUARDED_BY(mu_) = -1;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  size_t current_step_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t negotiated_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

// Connection options for a client of `server`: user default, 5 s timeouts.
inline ConnectionOptions ClientOptionsFor(
    const FakeServer& server, CompressionMethod compression = CompressionMethod::kNone) {
  return {.host = "127.0.0.1",
          .port = server.port(),
          .user = "default",
          .compression = compression,
          .connect_timeout = absl::Seconds(5),
          .handshake_timeout = absl::Seconds(5),
          .read_timeout = absl::Seconds(5),
          .write_timeout = absl::Seconds(5)};
}

// Scripts `fake` to answer what a server is asked before a caller's settings are sent
// (clickhouse::ReadServerCatalog): whether system.settings has a `type` column (it does when
// `typed`), then every (name, type) of `settings`, then its table functions (numbers, url,
// remote, file).
void ServeSettings(FakeServer& fake, uint64_t revision,
                   std::vector<std::pair<std::string, std::string>> settings, bool typed = true);

}  // namespace chgate::clickhouse::testing
