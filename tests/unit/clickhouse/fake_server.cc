#include "tests/unit/clickhouse/fake_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/protocol/client_reader.h"
#include "server/clickhouse/text_form.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/gather.h"
#include "tests/unit/clickhouse/test_util.h"
#include "text/status_macros.h"

namespace chgate::clickhouse::testing {

Bytes& Bytes::VarUInt(uint64_t v) {
  while (v >= 0x80) {
    out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out_.push_back(static_cast<char>(v));
  return *this;
}

// ---- Server packet builders ----

std::string ServerHelloPacket(uint64_t server_revision, uint64_t client_revision,
                              const ServerHelloSpec& spec) {
  const uint64_t r = std::min(server_revision, client_revision);
  GatherWriter out;
  out.WriteVarUInt(static_cast<uint64_t>(ServerCode::kHello));
  out.WriteString(spec.name);
  out.WriteVarUInt(spec.version_major);
  out.WriteVarUInt(spec.version_minor);
  out.WriteVarUInt(server_revision);
  if (r >= revision::kVersionedParallelReplicas) {
    out.WriteVarUInt(1);  // parallel replicas protocol version
  }
  if (r >= revision::kServerTimezone) out.WriteString(spec.timezone);
  if (r >= revision::kServerDisplayName) out.WriteString(spec.display_name);
  if (r >= revision::kVersionPatch) out.WriteVarUInt(spec.version_patch);
  if (r >= revision::kChunkedPackets) {
    out.WriteString("notchunked");
    out.WriteString("notchunked");
  }
  if (r >= revision::kPasswordComplexityRules) {
    out.WriteVarUInt(1);
    out.WriteString("^.{12,}$");
    out.WriteString("be at least 12 characters long");
  }
  if (r >= revision::kInterserverSecretV2) {
    out.WriteFixed<uint64_t>(0x0123456789abcdefULL);  // nonce
  }
  if (r >= revision::kServerCatalog) out.WriteString("");  // none
  if (r >= revision::kQueryPlanSerialization) out.WriteVarUInt(0);
  if (r >= revision::kVersionedClusterFunctionProtocol) out.WriteVarUInt(0);
  return out.ToString();
}

std::string ExceptionPacket(const std::vector<ExceptionSpec>& chain) {
  GatherWriter out;
  out.WriteVarUInt(static_cast<uint64_t>(ServerCode::kException));
  for (size_t i = 0; i < chain.size(); ++i) {
    out.WriteFixed<int32_t>(chain[i].code);
    out.WriteString(chain[i].name);
    out.WriteString(chain[i].message);
    out.WriteString(chain[i].stack_trace);
    out.WriteFixed<uint8_t>(i + 1 < chain.size() ? 1 : 0);
  }
  return out.ToString();
}

std::string ProgressPacket(const Progress& p, uint64_t revision) {
  GatherWriter out;
  out.WriteVarUInt(static_cast<uint64_t>(ServerCode::kProgress));
  out.WriteVarUInt(p.rows);
  out.WriteVarUInt(p.bytes);
  if (revision >= revision::kTotalRowsInProgress) out.WriteVarUInt(p.total_rows);
  if (revision >= revision::kTotalBytesInProgress) out.WriteVarUInt(p.total_bytes);
  if (revision >= revision::kClientWriteInfo) {
    out.WriteVarUInt(p.written_rows);
    out.WriteVarUInt(p.written_bytes);
  }
  if (revision >= revision::kServerQueryTimeInProgress) out.WriteVarUInt(p.elapsed_ns);
  return out.ToString();
}

std::string ProfileInfoPacket(const ProfileInfo& p, uint64_t revision) {
  GatherWriter out;
  out.WriteVarUInt(static_cast<uint64_t>(ServerCode::kProfileInfo));
  out.WriteVarUInt(p.rows);
  out.WriteVarUInt(p.blocks);
  out.WriteVarUInt(p.bytes);
  out.WriteFixed<uint8_t>(p.applied_limit ? 1 : 0);
  out.WriteVarUInt(p.rows_before_limit);
  out.WriteFixed<uint8_t>(p.calculated_rows_before_limit ? 1 : 0);
  if (revision >= revision::kRowsBeforeAggregation) {
    out.WriteFixed<uint8_t>(p.applied_aggregation ? 1 : 0);
    out.WriteVarUInt(p.rows_before_aggregation);
  }
  return out.ToString();
}

namespace {

std::string BlockPacket(ServerCode code, std::string_view table_name, const Block& block,
                        uint64_t revision, std::optional<CompressionMethod> compression) {
  GatherWriter out;
  out.WriteVarUInt(static_cast<uint64_t>(code));
  out.WriteString(table_name);
  GatherWriter body;
  WriteBlock(block, revision, body);
  if (!compression.has_value()) return out.ToString() + body.ToString();
  return out.ToString() + CompressFrame(body.ToString(), *compression);
}

template <typename T>
void AppendFixed(const ColumnPtr& column, T value) {
  static_cast<ColumnFixed&>(*column).Append<T>(value);
}

}  // namespace

std::string ProfileEventsPacket(uint64_t revision, const std::vector<ProfileEvent>& events) {
  ColumnPtr host = MakeColumn("String");
  ColumnPtr time = MakeColumn("DateTime");
  ColumnPtr thread = MakeColumn("UInt64");
  ColumnPtr type = MakeColumn("Enum8('increment' = 1, 'gauge' = 2)");
  ColumnPtr name = MakeColumn("String");
  ColumnPtr value = MakeColumn("Int64");
  for (const ProfileEvent& e : events) {
    static_cast<ColumnString&>(*host).Append("fake-host");
    AppendFixed<uint32_t>(time, 1700000000);
    AppendFixed<uint64_t>(thread, 4242);
    AppendFixed<int8_t>(type, e.gauge ? 2 : 1);
    static_cast<ColumnString&>(*name).Append(e.name);
    AppendFixed<int64_t>(value, e.value);
  }
  Block block = MakeBlock({{"host_name", host},
                           {"current_time", time},
                           {"thread_id", thread},
                           {"type", type},
                           {"name", name},
                           {"value", value}});
  return BlockPacket(ServerCode::kProfileEvents, "", block, revision, std::nullopt);
}

std::string LogPacket(uint64_t revision, const std::vector<std::string>& texts) {
  ColumnPtr time = MakeColumn("DateTime");
  ColumnPtr micros = MakeColumn("UInt32");
  ColumnPtr host = MakeColumn("String");
  ColumnPtr query_id = MakeColumn("String");
  ColumnPtr thread = MakeColumn("UInt64");
  ColumnPtr priority = MakeColumn("Int8");
  ColumnPtr source = MakeColumn("String");
  ColumnPtr text = MakeColumn("String");
  for (const std::string& t : texts) {
    AppendFixed<uint32_t>(time, 1700000000);
    AppendFixed<uint32_t>(micros, 123456);
    static_cast<ColumnString&>(*host).Append("fake-host");
    static_cast<ColumnString&>(*query_id).Append("q-1");
    AppendFixed<uint64_t>(thread, 4242);
    AppendFixed<int8_t>(priority, 6);
    static_cast<ColumnString&>(*source).Append("executeQuery");
    static_cast<ColumnString&>(*text).Append(t);
  }
  Block block = MakeBlock({{"event_time", time},
                           {"event_time_microseconds", micros},
                           {"host_name", host},
                           {"query_id", query_id},
                           {"thread_id", thread},
                           {"priority", priority},
                           {"source", source},
                           {"text", text}});
  return BlockPacket(ServerCode::kLog, "", block, revision, std::nullopt);
}

std::string DataPacket(const Block& block, uint64_t revision,
                       std::optional<CompressionMethod> compression, ServerCode code,
                       std::string_view table_name) {
  return BlockPacket(code, table_name, block, revision, compression);
}

std::string TableColumnsPacket(std::string_view table_name, std::string_view description) {
  return Bytes()
      .VarUInt(static_cast<uint64_t>(ServerCode::kTableColumns))
      .Str(table_name)
      .Str(description);
}

std::string PongPacket() { return Bytes().VarUInt(static_cast<uint64_t>(ServerCode::kPong)); }

std::string EndOfStreamPacket() {
  return Bytes().VarUInt(static_cast<uint64_t>(ServerCode::kEndOfStream));
}

std::string CompressFrame(std::string_view body, CompressionMethod method) {
  FrameCompressor compressor(method);
  ByteBuffer frames;
  // Frames of at most kMaxFrameInput bytes, as a real server cuts them.
  size_t offset = 0;
  do {
    const size_t take = std::min(body.size() - offset, kMaxFrameInput);
    const std::span<const char> piece(body.data() + offset, take);
    absl::Status st =
        compressor.Compress(std::span<const std::span<const char>>(&piece, 1), &frames);
    CHGATE_CHECK(st.ok());
    offset += take;
  } while (offset < body.size());
  return std::string(frames.data(), frames.size());
}

// ---- Blocks ----

ColumnPtr MakeColumn(std::string_view type) {
  absl::StatusOr<ColumnPtr> column = CreateColumn(type);
  if (!column.ok()) {
    ADD_FAILURE() << "cannot create column " << type << ": " << column.status();
    CHGATE_CHECK(column.ok());
  }
  return *std::move(column);
}

ColumnPtr UInt64Column(std::initializer_list<uint64_t> values) {
  ColumnPtr c = MakeColumn("UInt64");
  for (uint64_t v : values) AppendFixed<uint64_t>(c, v);
  return c;
}

ColumnPtr StringColumn(std::initializer_list<std::string_view> values) {
  ColumnPtr c = MakeColumn("String");
  for (std::string_view v : values) static_cast<ColumnString&>(*c).Append(v);
  return c;
}

Block MakeBlock(std::vector<std::pair<std::string, ColumnPtr>> columns) {
  Block block;
  for (auto& [name, column] : columns) block.AddColumn(std::move(name), std::move(column));
  return block;
}

Block HeaderBlock(std::vector<std::pair<std::string, std::string>> columns) {
  Block block;
  for (const auto& [name, type] : columns) block.AddColumn(name, MakeColumn(type));
  return block;
}

std::string BlockToTsv(const Block& block) {
  std::string out;
  for (size_t row = 0; row < block.rows(); ++row) {
    for (size_t i = 0; i < block.column_count(); ++i) {
      if (i != 0) out.push_back('\t');
      AppendTsvValue(*block.column(i).column, row, false, &out);
    }
    out.push_back('\n');
  }
  return out;
}

// ---- Client packets ----

const char* ClientPacketName(ClientPacket kind) {
  switch (kind) {
    case ClientPacket::kHello:
      return "Hello";
    case ClientPacket::kAddendum:
      return "Addendum";
    case ClientPacket::kQuery:
      return "Query";
    case ClientPacket::kData:
      return "Data";
    case ClientPacket::kCancel:
      return "Cancel";
    case ClientPacket::kPing:
      return "Ping";
  }
  return "?";
}

namespace {

// The code a client packet starts with (the Addendum has none).
ClientCode CodeOf(ClientPacket kind) {
  switch (kind) {
    case ClientPacket::kHello:
    case ClientPacket::kAddendum:
      return ClientCode::kHello;
    case ClientPacket::kQuery:
      return ClientCode::kQuery;
    case ClientPacket::kData:
      return ClientCode::kData;
    case ClientPacket::kCancel:
      return ClientCode::kCancel;
    case ClientPacket::kPing:
      return ClientCode::kPing;
  }
  return ClientCode::kHello;
}

// Checks the packet code alone, so that an unexpected packet is named as such instead of
// failing somewhere in a body parsed as the wrong packet.
absl::Status ExpectCode(std::string_view bytes, ClientPacket kind) {
  MemoryReadBuffer in(bytes);
  const ClientCode want = CodeOf(kind);
  uint64_t code = 0;
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&code));
  if (code != static_cast<uint64_t>(want)) {
    return absl::InvalidArgumentError(absl::StrCat("expected client ", ClientPacketName(kind),
                                                   " (code ", static_cast<uint64_t>(want),
                                                   "), got code ", code));
  }
  return absl::OkStatus();
}

// Parses one client packet after the Hello (Query, Data, Cancel or Ping) with the library's
// server-side reader at negotiated `revision`, Data blocks through compression frames when
// `compressed`. The packet is owned by `reader`.
absl::StatusOr<clickhouse::ClientPacket*> ReadAfterHello(ClientPacketReader& reader,
                                                         std::string_view bytes, ClientPacket kind,
                                                         uint64_t revision, bool compressed) {
  CHGATE_RETURN_IF_ERROR(ExpectCode(bytes, kind));
  if (revision > kMaxClientReaderRevision) {
    return absl::FailedPreconditionError(
        absl::StrCat("the fake parses client packets up to revision ", kMaxClientReaderRevision,
                     ", not ", revision));
  }
  reader.set_revision(revision);
  reader.set_compressed(compressed);
  CHGATE_ASSIGN_OR_RETURN(clickhouse::ClientPacket * packet, reader.Next());
  // The reader also accepts HTTP ClientInfo, which a native client never sends.
  const ClientInfo& info = packet->client_info;
  if (kind == ClientPacket::kQuery && info.query_kind != ClientInfo::kQueryKindNone &&
      info.interface != ClientInfo::kInterfaceTcp) {
    return absl::InvalidArgumentError("ClientInfo interface is not TCP");
  }
  return packet;
}

}  // namespace

absl::StatusOr<ClientQuery> DecodeClientQuery(std::string_view packet, uint64_t revision) {
  MemoryReadBuffer in(packet);
  ClientPacketReader reader(&in, std::min(revision, kMaxClientReaderRevision));
  reader.set_revision(std::min(revision, kMaxClientReaderRevision));
  CHGATE_ASSIGN_OR_RETURN(clickhouse::ClientPacket * p, reader.Next());
  if (p->type != ClientPacketType::kQuery) {
    return absl::InvalidArgumentError("not a Query packet");
  }
  return ClientQuery{.query = std::move(p->query), .client_info = std::move(p->client_info)};
}

PoolOptions OneConnectionPool(uint16_t port) {
  return PoolOptions{
      .endpoints = {{.host = "127.0.0.1", .port = port}},
      .connection = {.compression = CompressionMethod::kNone},
      .max_connections = 1,
      .min_connections = 0,
      .probe_interval = absl::ZeroDuration(),
  };
}

absl::StatusOr<Block> DecodeClientData(std::string_view packet, uint64_t revision,
                                       bool compressed) {
  MemoryReadBuffer in(packet);
  ClientPacketReader reader(&in, std::min(revision, kMaxClientReaderRevision));
  CHGATE_ASSIGN_OR_RETURN(
      clickhouse::ClientPacket * p,
      ReadAfterHello(reader, packet, ClientPacket::kData, revision, compressed));
  if (in.position() != packet.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Data packet has ", packet.size() - in.position(), " trailing bytes"));
  }
  return std::move(p->block);
}

// ---- FakeServer ----

struct FakeServer::Step {
  enum class Kind {
    kExpectBytes,
    kExpectPacket,
    kSend,
    kHandshake,
    kClose,
    kStall,
    kAccept,
    kCall
  };
  Kind kind;
  size_t n = 0;
  ClientPacket packet = ClientPacket::kHello;
  Checker check;
  std::string bytes;
  ServerHelloSpec hello;
  std::function<void()> fn;
};

FakeServer::FakeServer(FakeServerOptions options) : options_(options) {
  parse_.revision = options_.revision;
  negotiated_ = options_.revision;
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  CHGATE_CHECK(listen_fd_ >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  CHGATE_CHECK(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  CHGATE_CHECK(::listen(listen_fd_, 8) == 0);
  socklen_t len = sizeof(addr);
  CHGATE_CHECK(::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  port_ = ntohs(addr.sin_port);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  CHGATE_CHECK(wake_fd_ >= 0);
}

FakeServer::~FakeServer() {
  // Wakes every wait of the server thread; a stalled step then ends.
  uint64_t one = 1;
  CHGATE_CHECK(::write(wake_fd_, &one, sizeof(one)) == sizeof(one));
  {
    absl::MutexLock lock(&mu_);
    if (conn_fd_ >= 0) ::shutdown(conn_fd_, SHUT_RDWR);
  }
  if (thread_.joinable()) thread_.join();
  CloseConnection();
  ::close(listen_fd_);
  ::close(wake_fd_);
}

FakeServer& FakeServer::ExpectBytes(size_t n, Checker check) {
  steps_.push_back({.kind = Step::Kind::kExpectBytes, .n = n, .check = std::move(check)});
  return *this;
}

FakeServer& FakeServer::ExpectPacket(ClientPacket kind, Checker check) {
  steps_.push_back({.kind = Step::Kind::kExpectPacket, .packet = kind, .check = std::move(check)});
  return *this;
}

FakeServer& FakeServer::Send(std::string bytes) {
  steps_.push_back({.kind = Step::Kind::kSend, .bytes = std::move(bytes)});
  return *this;
}

FakeServer& FakeServer::Handshake(ServerHelloSpec spec) {
  steps_.push_back({.kind = Step::Kind::kHandshake, .hello = std::move(spec)});
  return *this;
}

FakeServer& FakeServer::Close() {
  steps_.push_back({.kind = Step::Kind::kClose});
  return *this;
}

FakeServer& FakeServer::Stall() {
  steps_.push_back({.kind = Step::Kind::kStall});
  return *this;
}

FakeServer& FakeServer::AcceptNext() {
  steps_.push_back({.kind = Step::Kind::kAccept});
  return *this;
}

FakeServer& FakeServer::Call(std::function<void()> fn) {
  steps_.push_back({.kind = Step::Kind::kCall, .fn = std::move(fn)});
  return *this;
}

void FakeServer::Start() {
  CHGATE_CHECK(!thread_.joinable());
  thread_ = std::thread([this] { Run(); });
}

absl::Status FakeServer::Wait(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithTimeout(absl::Condition(&done_), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat("fake server script still at step ",
                                                    current_step_ + 1, " of ", steps_.size(),
                                                    " after ", absl::FormatDuration(timeout)));
  }
  return status_;
}

uint64_t FakeServer::negotiated_revision() const {
  absl::MutexLock lock(&mu_);
  return negotiated_;
}

void FakeServer::Run() {
  absl::Status status = Accept();
  for (size_t i = 0; status.ok() && i < steps_.size(); ++i) {
    {
      absl::MutexLock lock(&mu_);
      current_step_ = i;
    }
    status = RunStep(steps_[i]);
    if (!status.ok()) {
      status = absl::Status(status.code(), absl::StrCat("fake server step ", i + 1, " of ",
                                                        steps_.size(), ": ", status.message()));
    }
  }
  absl::MutexLock lock(&mu_);
  status_ = status;
  done_ = true;
}

absl::Status FakeServer::WaitFd(int fd, short events, absl::Time deadline) {
  while (true) {
    pollfd fds[2] = {{fd, events, 0}, {wake_fd_, POLLIN, 0}};
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return absl::DeadlineExceededError("fake server timed out");
    const int ms = static_cast<int>(std::min<int64_t>(
        absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), int64_t{1} << 30));
    const int rc = ::poll(fds, 2, ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return absl::InternalError(absl::StrCat("poll: ", std::strerror(errno)));
    if (fds[1].revents != 0) return absl::CancelledError("fake server is shutting down");
    if (fds[0].revents != 0) return absl::OkStatus();
  }
}

absl::Status FakeServer::Accept() {
  const absl::Time deadline = absl::Now() + options_.step_timeout;
  while (true) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      // Every Send step goes out at once (no Nagle delay against the client's delayed ACKs).
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      absl::MutexLock lock(&mu_);
      conn_fd_ = fd;
      input_.clear();
      parse_ = ParseState{.revision = options_.revision};
      return absl::OkStatus();
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return absl::InternalError(absl::StrCat("accept: ", std::strerror(errno)));
    }
    CHGATE_RETURN_IF_ERROR(WaitFd(listen_fd_, POLLIN, deadline));
  }
}

void FakeServer::CloseConnection() {
  absl::MutexLock lock(&mu_);
  if (conn_fd_ < 0) return;
  // Drain what arrived so that close() sends FIN, not RST (which could discard data the
  // client has not read yet).
  char buf[4096];
  while (::recv(conn_fd_, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
  }
  ::shutdown(conn_fd_, SHUT_WR);
  ::close(conn_fd_);
  conn_fd_ = -1;
}

absl::Status FakeServer::ReadMore(absl::Time deadline) {
  int fd;
  {
    absl::MutexLock lock(&mu_);
    fd = conn_fd_;
  }
  if (fd < 0) return absl::FailedPreconditionError("no connection");
  char buf[64 * 1024];
  while (true) {
    const ssize_t got = ::recv(fd, buf, sizeof(buf), 0);
    if (got > 0) {
      input_.append(buf, static_cast<size_t>(got));
      return absl::OkStatus();
    }
    if (got == 0) return absl::UnavailableError("the client closed the connection");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
    }
    CHGATE_RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline));
  }
}

absl::Status FakeServer::SendAll(std::string_view bytes, absl::Time deadline) {
  int fd;
  {
    absl::MutexLock lock(&mu_);
    fd = conn_fd_;
  }
  if (fd < 0) return absl::FailedPreconditionError("no connection");
  while (!bytes.empty()) {
    const ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent > 0) {
      bytes.remove_prefix(static_cast<size_t>(sent));
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      CHGATE_RETURN_IF_ERROR(WaitFd(fd, POLLOUT, deadline));
      continue;
    }
    return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status FakeServer::ReadPacket(ClientPacket kind, absl::Time deadline, std::string* packet) {
  while (true) {
    ParseState state = parse_;
    MemoryReadBuffer in(input_);
    absl::Status parsed = [&]() -> absl::Status {
      switch (kind) {
        case ClientPacket::kHello: {
          CHGATE_RETURN_IF_ERROR(ExpectCode(input_, kind));
          CHGATE_ASSIGN_OR_RETURN(HelloParams hello, ReadClientHello(in));
          state.client_revision = hello.revision;
          state.revision = std::min(options_.revision, state.client_revision);
          return absl::OkStatus();
        }
        case ClientPacket::kAddendum: {
          if (state.revision < revision::kAddendum) {
            return absl::FailedPreconditionError(absl::StrCat(
                "no Addendum below revision ", revision::kAddendum, " (at ", state.revision, ")"));
          }
          ClientAddendum addendum;
          return ReadAddendum(in, state.revision, &addendum);
        }
        case ClientPacket::kQuery:
        case ClientPacket::kData:
        case ClientPacket::kCancel:
        case ClientPacket::kPing: {
          ClientPacketReader reader(&in, std::min(state.revision, kMaxClientReaderRevision));
          CHGATE_ASSIGN_OR_RETURN(
              clickhouse::ClientPacket * read,
              ReadAfterHello(reader, input_, kind, state.revision, state.compressed));
          if (kind == ClientPacket::kQuery) state.compressed = read->query.compression;
          return absl::OkStatus();
        }
      }
      return absl::InternalError("unknown packet kind");
    }();
    if (parsed.ok()) {
      const size_t n = static_cast<size_t>(in.position());
      packet->assign(input_, 0, n);
      input_.erase(0, n);
      parse_ = state;
      if (kind == ClientPacket::kHello) {
        absl::MutexLock lock(&mu_);
        negotiated_ = state.revision;
      }
      return absl::OkStatus();
    }
    if (!absl::IsOutOfRange(parsed)) {
      return absl::Status(parsed.code(), absl::StrCat("client ", ClientPacketName(kind),
                                                      " packet: ", parsed.message(),
                                                      "; bytes: ", Hex(input_.substr(0, 512))));
    }
    absl::Status more = ReadMore(deadline);
    if (!more.ok()) {
      return absl::Status(more.code(), absl::StrCat("waiting for client ", ClientPacketName(kind),
                                                    ": ", more.message(), "; have ", input_.size(),
                                                    " bytes: ", Hex(input_.substr(0, 256))));
    }
  }
}

absl::Status FakeServer::RunStep(const Step& step) {
  const absl::Time deadline = absl::Now() + options_.step_timeout;
  switch (step.kind) {
    case Step::Kind::kExpectBytes: {
      while (input_.size() < step.n) {
        absl::Status more = ReadMore(deadline);
        if (!more.ok()) {
          return absl::Status(more.code(), absl::StrCat("waiting for ", step.n, " bytes: ",
                                                        more.message(), "; have ", input_.size(),
                                                        ": ", Hex(input_.substr(0, 512))));
        }
      }
      const std::string bytes = input_.substr(0, step.n);
      input_.erase(0, step.n);
      if (step.check) step.check(bytes);
      return absl::OkStatus();
    }
    case Step::Kind::kExpectPacket: {
      std::string packet;
      CHGATE_RETURN_IF_ERROR(ReadPacket(step.packet, deadline, &packet));
      if (step.check) step.check(packet);
      return absl::OkStatus();
    }
    case Step::Kind::kSend:
      return SendAll(step.bytes, deadline);
    case Step::Kind::kHandshake: {
      std::string hello;
      CHGATE_RETURN_IF_ERROR(ReadPacket(ClientPacket::kHello, deadline, &hello));
      CHGATE_RETURN_IF_ERROR(SendAll(
          ServerHelloPacket(options_.revision, parse_.client_revision, step.hello), deadline));
      if (parse_.revision >= revision::kAddendum) {
        std::string addendum;
        CHGATE_RETURN_IF_ERROR(ReadPacket(ClientPacket::kAddendum, deadline, &addendum));
      }
      return absl::OkStatus();
    }
    case Step::Kind::kClose:
      CloseConnection();
      return absl::OkStatus();
    case Step::Kind::kStall:
      while (true) {
        absl::Status more = ReadMore(absl::InfiniteFuture());
        input_.clear();
        if (absl::IsUnavailable(more)) return absl::OkStatus();  // the client closed
        if (!more.ok()) return more;
      }
    case Step::Kind::kAccept:
      CloseConnection();
      return Accept();
    case Step::Kind::kCall:
      step.fn();
      return absl::OkStatus();
  }
  return absl::InternalError("unknown step");
}

void ServeSettings(FakeServer& fake, uint64_t revision,
                   std::vector<std::pair<std::string, std::string>> settings, bool typed) {
  auto answer = [&](Block header, std::optional<Block> rows) {
    fake.ExpectPacket(ClientPacket::kQuery);
    fake.ExpectPacket(ClientPacket::kData);
    fake.Send(DataPacket(header, revision));
    if (rows.has_value()) fake.Send(DataPacket(*rows, revision));
    fake.Send(EndOfStreamPacket());
  };
  Block type_column = MakeBlock({{"name", StringColumn({"type"})}});
  answer(HeaderBlock({{"name", "String"}}),
         typed ? std::optional<Block>(std::move(type_column)) : std::nullopt);
  ColumnPtr names = MakeColumn("String");
  ColumnPtr types = MakeColumn("String");
  for (const auto& [name, type] : settings) {
    static_cast<ColumnString&>(*names).Append(name);
    static_cast<ColumnString&>(*types).Append(typed ? type : "");
  }
  answer(HeaderBlock({{"name", "String"}, {"type", "String"}}),
         MakeBlock({{"name", std::move(names)}, {"type", std::move(types)}}));
  answer(HeaderBlock({{"name", "String"}}),
         MakeBlock({{"name", StringColumn({"numbers", "url", "remote", "file"})}}));
}

}  // namespace chgate::clickhouse::testing
