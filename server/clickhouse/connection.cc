#include "server/clickhouse/connection.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/protocol/error_codes.h"
#include "server/clickhouse/protocol/revision.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {

Connection::Connection(const ConnectionOptions& options, std::unique_ptr<Transport> transport)
    : options_(options),
      transport_(std::move(transport)),
      in_(transport_.get(), options.receive_buffer_size, options.handshake_timeout),
      reader_(&in_, 0) {
  if (options_.client_revision == 0) options_.client_revision = revision::kClient;
  in_.set_counters(options_.counters);
  reader_.set_counters(options_.counters);
  // Blocks handed out by ReceivePacket are documented as valid until the next call.
  reader_.set_zero_copy(true);
  if (options_.compression != CompressionMethod::kNone) {
    compressor_.emplace(options_.compression, options_.zstd_level);
  }
  hello_.client_name = options_.client_name;
  hello_.revision = options_.client_revision;
  hello_.database = options_.database;
  hello_.user = options_.user;
  hello_.password =
      options_.password_file != nullptr ? options_.password_file->Get() : options_.password;
  hello_.quota_key = options_.quota_key;
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Connect(const ConnectionOptions& options) {
  CHGATE_ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport,
                          Transport::Connect(options.host, options.port,
                                             {.connect_timeout = options.connect_timeout,
                                              .handshake_timeout = options.handshake_timeout,
                                              .tls = options.tls}));
  std::unique_ptr<Connection> conn(new Connection(options, std::move(transport)));
  absl::Status status = conn->Handshake();
  if (!status.ok()) {
    absl::Status annotated(status.code(), absl::StrCat("handshake with ", options.host, ":",
                                                       options.port, ": ", status.message()));
    // Keep the payloads (the server's error code for ClickHouseCode()).
    status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
      annotated.SetPayload(url, payload);
    });
    return annotated;
  }
  return conn;
}

absl::Status Connection::Fail(absl::Status status) {
  broken_ = true;
  in_query_ = false;
  transport_->Shutdown();
  return status;
}

absl::Status Connection::Flush() {
  const uint64_t before = transport_->bytes_written();
  absl::Status status = transport_->WriteAll(out_.spans(), options_.write_timeout);
  if (options_.counters != nullptr) {
    options_.counters->sent.fetch_add(transport_->bytes_written() - before,
                                      std::memory_order_relaxed);
  }
  out_.Clear();
  if (!status.ok()) return Fail(std::move(status));
  return absl::OkStatus();
}

absl::Status Connection::Handshake() {
  out_.Clear();
  WriteHello(hello_, out_);
  CHGATE_RETURN_IF_ERROR(Flush());
  CHGATE_RETURN_IF_ERROR(CheckNotTls());
  absl::StatusOr<ServerInfo> info = ReadServerHello(in_, options_.client_revision);
  if (!info.ok()) return Fail(info.status());
  server_ = *std::move(info);
  revision_ = std::min(options_.client_revision, server_.revision);
  reader_.set_revision(revision_);
  if (revision_ >= revision::kAddendum) {
    WriteAddendum(revision_, hello_.quota_key, out_);
    CHGATE_RETURN_IF_ERROR(Flush());
  }
  in_.set_read_timeout(options_.read_timeout);
  return absl::OkStatus();
}

absl::Status Connection::CheckNotTls() {
  if (transport_->tls()) return absl::OkStatus();
  absl::Status ready = in_.Ensure();
  if (!ready.ok()) {
    if (absl::IsUnavailable(ready) && in_.received_bytes() == 0) {
      return Fail(absl::UnavailableError(absl::StrCat(
          ready.message(),
          " before answering Hello (if this is a TLS port such as 9440, turn TLS on for it: "
          "--clickhouse-tls)")));
    }
    return Fail(ready);
  }
  // A server Hello starts with packet type 0 (Hello) or 2 (Exception); a TLS record with its
  // content type (21 alert, 22 handshake) and major version 3.
  const auto* p = reinterpret_cast<const unsigned char*>(in_.pos());
  if (in_.available() >= 2 && (p[0] == 21 || p[0] == 22) && p[1] == 3) {
    return Fail(absl::UnavailableError(
        "the server answered with TLS: this is a secure (TLS) port; turn TLS on for it "
        "(--clickhouse-tls, or a tls:// endpoint)"));
  }
  return absl::OkStatus();
}

absl::Status Connection::Ping() {
  if (!usable()) return absl::FailedPreconditionError("connection is not usable");
  out_.WriteVarUInt(static_cast<uint64_t>(ClientCode::kPing));
  CHGATE_RETURN_IF_ERROR(Flush());
  in_query_ = true;
  while (true) {
    CHGATE_ASSIGN_OR_RETURN(Packet * packet, ReceivePacket());
    // Progress or log packets may precede Pong on some servers.
    if (packet->type == PacketType::kPong) {
      in_query_ = false;
      return absl::OkStatus();
    }
    if (packet->type != PacketType::kProgress && packet->type != PacketType::kLog &&
        packet->type != PacketType::kProfileEvents) {
      return Fail(absl::DataLossError("unexpected packet while waiting for Pong"));
    }
  }
}

absl::Status Connection::SendQuery(QueryParams query) {
  if (broken_) return absl::FailedPreconditionError("connection is broken");
  if (in_query_) return absl::FailedPreconditionError("a query is already running");
  query.compression = options_.compression != CompressionMethod::kNone;
  if (options_.compression == CompressionMethod::kZstd) {
    query.settings.push_back({.name = "network_compression_method", .value = "zstd"});
  }
  out_.Clear();
  absl::Status written = WriteQuery(query, hello_, revision_, out_);
  if (!written.ok()) {
    out_.Clear();
    return written;  // nothing was sent; the connection stays usable
  }
  query_compressed_ = query.compression;
  data_received_ = false;
  reader_.set_compressed(query_compressed_);
  in_.set_plain(!query_compressed_);
  in_query_ = true;
  // The end of external tables: an empty block, in the same write.
  WriteDataHeader(revision_, out_);
  if (query_compressed_) {
    Block empty;
    WriteBlock(empty, revision_, body_);
    CHGATE_RETURN_IF_ERROR(WriteCompressedBody());
    return absl::OkStatus();
  }
  Block empty;
  WriteBlock(empty, revision_, out_);
  return Flush();
}

absl::Status Connection::WriteCompressedBody() {
  // Frames of at most kMaxFrameInput bytes, compressed straight from the spans of body_ (column
  // memory). Compressed frames are written out whenever about a frame's worth is pending, so
  // memory stays bounded whatever the block size.
  frames_.clear();
  std::vector<std::span<const char>> pieces;
  size_t piece_bytes = 0;
  auto emit = [&]() -> absl::Status {
    absl::Status st = compressor_->Compress(pieces, &frames_);
    pieces.clear();
    piece_bytes = 0;
    if (!st.ok()) return st;
    if (frames_.size() >= kMaxFrameInput) {
      out_.Reference(frames_.data(), frames_.size());
      CHGATE_RETURN_IF_ERROR(Flush());
      frames_.clear();
    }
    return absl::OkStatus();
  };
  for (const iovec& v : body_.spans()) {
    const char* p = static_cast<const char*>(v.iov_base);
    size_t n = v.iov_len;
    while (n > 0) {
      size_t take = std::min(n, kMaxFrameInput - piece_bytes);
      pieces.emplace_back(p, take);
      piece_bytes += take;
      p += take;
      n -= take;
      if (piece_bytes == kMaxFrameInput) {
        absl::Status st = emit();
        if (!st.ok()) {
          body_.Clear();
          return broken_ ? st : Fail(st);
        }
      }
    }
  }
  absl::Status st = piece_bytes > 0 ? emit() : absl::OkStatus();
  body_.Clear();
  if (!st.ok()) return broken_ ? st : Fail(st);
  if (!frames_.empty()) out_.Reference(frames_.data(), frames_.size());
  return Flush();
}

absl::Status Connection::SendData(const Block& block) {
  CHGATE_RETURN_IF_ERROR(block.Validate());
  const Block* one[] = {&block};
  return SendDataOfParts(one);
}

absl::Status Connection::SendDataOfParts(std::span<const Block* const> parts) {
  if (broken_) return absl::FailedPreconditionError("connection is broken");
  out_.Clear();
  WriteDataHeader(revision_, out_);
  if (query_compressed_) {
    WriteBlockOfParts(parts, revision_, body_);
    return WriteCompressedBody();
  }
  WriteBlockOfParts(parts, revision_, out_);
  return Flush();
}

absl::Status Connection::SendCancel() {
  if (broken_) return absl::FailedPreconditionError("connection is broken");
  out_.Clear();
  out_.WriteVarUInt(static_cast<uint64_t>(ClientCode::kCancel));
  return Flush();
}

void Connection::Cancel() { transport_->Shutdown(); }

absl::StatusOr<bool> Connection::WaitForInput(absl::Duration timeout) {
  if (broken_) return absl::FailedPreconditionError("connection is broken");
  absl::StatusOr<bool> ready = in_.WaitForData(timeout);
  if (!ready.ok()) return Fail(ready.status());
  return *ready;
}

absl::Status Connection::Resync() {
  out_.Clear();
  out_.WriteVarUInt(static_cast<uint64_t>(ClientCode::kPing));
  CHGATE_RETURN_IF_ERROR(Flush());
  while (true) {
    absl::StatusOr<Packet*> packet = reader_.Next();
    if (!packet.ok()) return Fail(packet.status());
    switch ((*packet)->type) {
      case PacketType::kPong:
        return absl::OkStatus();
      case PacketType::kException:
        if ((*packet)->exception.code == error_code::kUnexpectedPacketFromClient) continue;
        return Fail(ExceptionToStatus((*packet)->exception));
      case PacketType::kProgress:
      case PacketType::kLog:
      case PacketType::kProfileEvents:
        continue;
      default:
        return Fail(absl::DataLossError("unexpected packet while waiting for Pong after an error"));
    }
  }
}

absl::StatusOr<Packet*> Connection::ReceivePacket() {
  if (broken_) return absl::FailedPreconditionError("connection is broken");
  absl::StatusOr<Packet*> packet = reader_.Next();
  if (!packet.ok()) return Fail(packet.status());
  switch ((*packet)->type) {
    case PacketType::kEndOfStream:
      in_query_ = false;
      break;
    case PacketType::kException:
      in_query_ = false;
      if (!data_received_) {
        // The server may have refused the query before reading the empty block that ends our
        // external tables (18.16 does for a syntax error or an unknown setting): that block would
        // then be taken as the start of the next query ("Unexpected packet Data received from
        // client"). A Ping settles it: the server answers a stale block with that exception, then
        // Pong. The connection is usable again only after the Pong.
        absl::Status exception = ExceptionToStatus((*packet)->exception);
        (void)Resync();
        return exception;
      }
      return ExceptionToStatus((*packet)->exception);
    case PacketType::kData:
    case PacketType::kTotals:
    case PacketType::kExtremes:
      data_received_ = true;
      break;
    default:
      break;
  }
  return packet;
}

absl::Status Connection::Select(QueryParams query,
                                const std::function<absl::Status(const Block&)>& on_block,
                                QueryResult* result) {
  QueryResult local;
  if (result == nullptr) result = &local;
  *result = {};
  CHGATE_RETURN_IF_ERROR(SendQuery(std::move(query)));
  while (true) {
    CHGATE_ASSIGN_OR_RETURN(Packet * p, ReceivePacket());
    switch (p->type) {
      case PacketType::kData:
        if (p->block.rows() > 0) {
          result->rows += p->block.rows();
          ++result->blocks;
          absl::Status st = on_block(p->block);
          if (!st.ok()) {
            // The caller gave up: the rest of the stream is unread, so the connection cannot be
            // reused.
            return Fail(st);
          }
        }
        break;
      case PacketType::kProgress:
        result->progress.Add(p->progress);
        break;
      case PacketType::kProfileInfo:
        result->profile = p->profile;
        break;
      case PacketType::kEndOfStream:
        return absl::OkStatus();
      default:
        break;
    }
  }
}

absl::Status Connection::Insert(QueryParams insert_query, std::span<const Block* const> blocks,
                                QueryResult* result) {
  return InsertBlocks(std::move(insert_query), blocks, /*as_one=*/false, result);
}

absl::Status Connection::Insert(QueryParams insert_query, const BlockParts& block,
                                QueryResult* result) {
  // InsertBlocks validates each part and checks each against the server's header, so the parts
  // are laid out alike before anything is sent.
  return InsertBlocks(std::move(insert_query), block.parts(), /*as_one=*/true, result);
}

absl::Status Connection::InsertBlocks(QueryParams insert_query,
                                      std::span<const Block* const> blocks, bool as_one,
                                      QueryResult* result) {
  QueryResult local;
  if (result == nullptr) result = &local;
  *result = {};
  for (const Block* b : blocks) CHGATE_RETURN_IF_ERROR(b->Validate());
  CHGATE_RETURN_IF_ERROR(SendQuery(std::move(insert_query)));
  CHGATE_ASSIGN_OR_RETURN(Block header, ReadInsertHeader());
  absl::Status mismatch;
  for (const Block* b : blocks) {
    if (b->column_count() != header.column_count()) {
      mismatch = absl::InvalidArgumentError(absl::StrCat(
          "block has ", b->column_count(), " columns, the table expects ", header.column_count()));
      break;
    }
    for (size_t i = 0; i < header.column_count() && mismatch.ok(); ++i) {
      const NamedColumn& want = header.column(i);
      const NamedColumn& got = b->column(i);
      if (got.name != want.name) {
        mismatch = absl::InvalidArgumentError(absl::StrCat(
            "column ", i + 1, " is '", got.name, "', the table expects '", want.name, "'"));
      } else if (got.column->type_name() != want.column->type_name()) {
        mismatch = absl::InvalidArgumentError(
            absl::StrCat("column '", got.name, "' has type ", got.column->type_name(),
                         ", the table has ", want.column->type_name()));
      }
    }
    if (!mismatch.ok()) break;
  }
  if (!mismatch.ok()) {
    // End the INSERT without rows so the connection stays usable, then report.
    QueryResult ignored;
    (void)FinishInsert(&ignored);
    return mismatch;
  }
  if (as_one) {
    size_t rows = 0;
    for (const Block* b : blocks) rows += b->rows();
    if (rows > 0) {
      CHGATE_RETURN_IF_ERROR(SendDataOfParts(blocks));
      result->rows += rows;
      ++result->blocks;
      CHGATE_RETURN_IF_ERROR(ReadWhileInserting(result));
    }
    return FinishInsert(result);
  }
  for (const Block* b : blocks) {
    if (b->rows() == 0) continue;
    const Block* one[] = {b};
    CHGATE_RETURN_IF_ERROR(SendDataOfParts(one));
    result->rows += b->rows();
    ++result->blocks;
    CHGATE_RETURN_IF_ERROR(ReadWhileInserting(result));
  }
  return FinishInsert(result);
}

absl::Status Connection::ReadWhileInserting(QueryResult* result) {
  while (!broken_ && in_.InputPending()) {
    absl::StatusOr<Packet*> packet = ReceivePacket();
    if (!packet.ok()) return broken_ ? packet.status() : Fail(packet.status());
    switch ((*packet)->type) {
      case PacketType::kProgress:
        result->progress.Add((*packet)->progress);
        break;
      case PacketType::kProfileEvents:
      case PacketType::kLog:
      case PacketType::kTableColumns:
        break;
      default:
        return Fail(absl::DataLossError(
            absl::StrCat("unexpected packet ", static_cast<int>((*packet)->type),
                         " from the server in the middle of an INSERT")));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Block> Connection::ReadInsertHeader() {
  // The server answers with the table's header block (0 rows), maybe after TableColumns.
  while (true) {
    CHGATE_ASSIGN_OR_RETURN(Packet * p, ReceivePacket());
    if (p->type == PacketType::kData) return std::move(p->block);
    if (p->type == PacketType::kEndOfStream) {
      return absl::FailedPreconditionError("server ended the INSERT before sending its header");
    }
  }
}

absl::Status Connection::FinishInsert(QueryResult* result) {
  Block empty;
  CHGATE_RETURN_IF_ERROR(SendData(empty));
  while (true) {
    CHGATE_ASSIGN_OR_RETURN(Packet * p, ReceivePacket());
    if (p->type == PacketType::kEndOfStream) return absl::OkStatus();
    if (p->type == PacketType::kProgress) result->progress.Add(p->progress);
  }
}

absl::StatusOr<Block> Connection::DescribeInsert(QueryParams insert_query) {
  CHGATE_RETURN_IF_ERROR(SendQuery(std::move(insert_query)));
  CHGATE_ASSIGN_OR_RETURN(Block header, ReadInsertHeader());
  QueryResult ignored;
  CHGATE_RETURN_IF_ERROR(FinishInsert(&ignored));
  return header;
}

}  // namespace chgate::clickhouse
