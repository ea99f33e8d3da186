#include "tests/bench/null_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <span>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/clickhouse/protocol/client_reader.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/clickhouse/protocol/revision.h"
#include "server/clickhouse/wire/gather.h"
#include "server/clickhouse/wire/stream.h"
#include "server/clickhouse/wire/transport.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(60);

void WriteServerHello(uint64_t revision, GatherWriter& out) {
  out.WriteVarUInt(static_cast<uint64_t>(ServerCode::kHello));
  out.WriteString("ClickHouse");
  out.WriteVarUInt(24);
  out.WriteVarUInt(3);
  out.WriteVarUInt(revision);
  out.WriteString("UTC");   // timezone (54058)
  out.WriteString("null");  // display name (54372)
  out.WriteVarUInt(0);      // patch (54401)
}

// Appends a Data packet with `body` (an encoded block), compressed with `compressor` if given.
absl::Status AppendData(std::string_view body, FrameCompressor* compressor, ByteBuffer* frames,
                        GatherWriter& out) {
  out.WriteVarUInt(static_cast<uint64_t>(ServerCode::kData));
  out.WriteString("");
  if (compressor == nullptr) {
    out.Write(body);
    return absl::OkStatus();
  }
  frames->clear();
  size_t off = 0;
  do {
    std::span<const char> piece(body.data() + off, std::min(kMaxFrameInput, body.size() - off));
    CHGATE_RETURN_IF_ERROR(
        compressor->Compress(std::span<const std::span<const char>>(&piece, 1), frames));
    off += piece.size();
  } while (off < body.size());
  out.Write(frames->data(), frames->size());
  return absl::OkStatus();
}

}  // namespace

NullServer::NullServer(NullServerOptions options) : options_(std::move(options)) {
  GatherWriter w;
  WriteBlock(options_.select_block, options_.revision, w);
  select_body_ = w.ToString();
}

NullServer::~NullServer() {
  stopping_.store(true);
  if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  std::vector<std::thread> workers;
  {
    absl::MutexLock lock(&mu_);
    for (int fd : client_fds_) ::shutdown(fd, SHUT_RDWR);
    workers.swap(workers_);
  }
  for (std::thread& t : workers) t.join();
}

absl::Status NullServer::Start() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return absl::UnavailableError("socket() failed");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(options_.port);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 64) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot bind 127.0.0.1:", options_.port));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

void NullServer::AcceptLoop() {
  while (!stopping_.load()) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (stopping_.load()) return;
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    absl::MutexLock lock(&mu_);
    client_fds_.push_back(fd);
    workers_.emplace_back([this, fd] { Serve(fd); });
  }
}

void NullServer::Serve(int fd) {
  std::unique_ptr<Transport> transport;
  if (options_.tls != nullptr) {
    absl::StatusOr<std::unique_ptr<Transport>> accepted =
        Transport::AdoptTlsServer(fd, options_.tls, kTimeout);
    if (!accepted.ok()) return;
    transport = *std::move(accepted);
  } else {
    transport = Transport::AdoptPlain(fd);
  }
  Transport& socket = *transport;
  SocketReadBuffer in(transport.get(), 1 << 20, kTimeout);
  ClientPacketReader reader(&in, options_.revision);
  // Inserted values are dropped unread where the layout allows (fixed-width bodies are skipped
  // in the receive buffer), as a server writing to a Null table would.
  reader.set_discard_data(true);
  GatherWriter out;
  ByteBuffer frames;
  std::optional<FrameCompressor> compressor;
  auto send = [&]() {
    absl::Status st = socket.WriteAll(out.spans(), kTimeout);
    out.Clear();
    return st;
  };
  // Hello.
  absl::StatusOr<ClientPacket*> packet = reader.Next();
  if (!packet.ok() || (*packet)->type != ClientPacketType::kHello) return;
  WriteServerHello(options_.revision, out);
  if (!send().ok()) return;
  bool inserting = false;
  while (!stopping_.load()) {
    packet = reader.Next();
    if (!packet.ok()) return;
    ClientPacket& p = **packet;
    switch (p.type) {
      case ClientPacketType::kPing:
        out.WriteVarUInt(static_cast<uint64_t>(ServerCode::kPong));
        if (!send().ok()) return;
        break;
      case ClientPacketType::kQuery: {
        compressor.reset();
        if (p.query.compression) {
          CompressionMethod method = CompressionMethod::kLz4;
          for (const Setting& s : p.query.settings) {
            if (s.name == "network_compression_method" &&
                absl::AsciiStrToLower(s.value) == "zstd") {
              method = CompressionMethod::kZstd;
            }
          }
          compressor.emplace(method);
        }
        std::string_view text = p.query.query;
        while (!text.empty() && absl::ascii_isspace(static_cast<unsigned char>(text.front()))) {
          text.remove_prefix(1);
        }
        inserting =
            text.size() >= 6 && absl::EqualsIgnoreCase(std::string(text.substr(0, 6)), "INSERT");
        // The external-tables terminator follows every query.
        packet = reader.Next();
        if (!packet.ok() || (*packet)->type != ClientPacketType::kData) return;
        FrameCompressor* c = compressor ? &*compressor : nullptr;
        if (inserting) {
          GatherWriter header;
          WriteBlock(options_.insert_header, options_.revision, header);
          if (!AppendData(header.ToString(), c, &frames, out).ok() || !send().ok()) return;
        } else {
          // Header: the select block's columns without rows.
          Block empty_header;
          for (const NamedColumn& col : options_.select_block.columns()) {
            empty_header.AddColumn(col.name, col.column->CloneEmpty());
          }
          GatherWriter header;
          WriteBlock(empty_header, options_.revision, header);
          if (!AppendData(header.ToString(), c, &frames, out).ok() || !send().ok()) return;
          // Encode (and compress) the block once, then send it repeatedly.
          GatherWriter data;
          if (!AppendData(select_body_, c, &frames, data).ok()) return;
          std::string packet_bytes = data.ToString();
          for (uint64_t i = 0; i < options_.select_repeats; ++i) {
            if (!socket.WriteAll(packet_bytes.data(), packet_bytes.size(), kTimeout).ok()) return;
          }
          GatherWriter empty;
          WriteBlock(Block(), options_.revision, empty);
          if (!AppendData(empty.ToString(), c, &frames, out).ok()) return;
          out.WriteVarUInt(static_cast<uint64_t>(ServerCode::kEndOfStream));
          if (!send().ok()) return;
        }
        break;
      }
      case ClientPacketType::kData:
        if (!inserting) return;
        if (p.block.rows() == 0) {
          inserting = false;
          inserts_completed_.fetch_add(1);
          out.WriteVarUInt(static_cast<uint64_t>(ServerCode::kEndOfStream));
          if (!send().ok()) return;
        } else {
          rows_received_.fetch_add(p.block.rows());
        }
        break;
      case ClientPacketType::kCancel:
        out.WriteVarUInt(static_cast<uint64_t>(ServerCode::kEndOfStream));
        if (!send().ok()) return;
        break;
      default:
        break;
    }
  }
}

}  // namespace chgate::clickhouse
