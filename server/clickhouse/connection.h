// Connection: one native-protocol session with a ClickHouse server. It connects with timeouts,
// negotiates the revision (advertising revision::kClient and gating every field on
// min(client, server)), runs SELECTs (yielding blocks as they arrive) and INSERTs (checking the
// caller's columns against the server's header block before any row is sent).
//
// A Connection is used by one thread at a time. Cancel() may be called from any thread: it
// interrupts a blocked read or write, after which the connection is no longer usable.
// After any I/O or protocol error the connection is marked broken (usable() == false) and must
// be discarded. A server Exception ends the query and leaves the connection usable (after an
// Exception that came before any Data packet, a Ping/Pong exchange first makes sure the server
// holds no unread bytes of that query).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/clickhouse/block.h"
#include "server/clickhouse/block_parts.h"
#include "server/clickhouse/compression/frame.h"
#include "server/clickhouse/protocol/packet_reader.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/clickhouse/wire/gather.h"
#include "server/clickhouse/wire/stream.h"
#include "server/clickhouse/wire/tls.h"
#include "server/clickhouse/wire/transport.h"
#include "server/common/secret_file.h"

namespace chgate::clickhouse {

struct ConnectionOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 9000;
  std::string database;  // empty: the user's default
  std::string user = "default";
  std::string password;
  // When set, the password comes from this file, read again when it changes (each new
  // connection uses the file's current content), instead of `password`.
  std::shared_ptr<SecretFile> password_file;
  std::string quota_key;
  std::string client_name = "chgate";
  // kNone sends the query's compression flag 0 (blocks travel raw); kLz4/kZstd set the flag and
  // ask the server for that method through network_compression_method.
  CompressionMethod compression = CompressionMethod::kLz4;
  int zstd_level = 1;
  absl::Duration connect_timeout = absl::Seconds(5);
  // Bounds the TLS handshake and the native Hello exchange, each.
  absl::Duration handshake_timeout = absl::Seconds(5);
  // TLS to the secure native port when set; plain TCP when null.
  std::shared_ptr<TlsClientContext> tls;
  // Bounds each wait for the socket, not whole queries.
  absl::Duration read_timeout = absl::Seconds(60);
  absl::Duration write_timeout = absl::Seconds(60);
  size_t receive_buffer_size = 1 << 20;
  // Optional process-wide byte counters this connection also adds to (must outlive it).
  IoCounters* counters = nullptr;
  // The revision advertised in Hello (tests may lower it).
  uint64_t client_revision = 0;  // 0: revision::kClient
};

// Totals gathered while a query runs.
struct QueryResult {
  uint64_t rows = 0;
  uint64_t blocks = 0;
  Progress progress;
  std::optional<ProfileInfo> profile;
};

class Connection {
 public:
  // Connects and performs the handshake. Errors: Unavailable (connect failed or the server
  // closed), DeadlineExceeded, Unauthenticated and the like (the server's Exception), DataLoss
  // (not a ClickHouse server).
  static absl::StatusOr<std::unique_ptr<Connection>> Connect(const ConnectionOptions& options);

  const ServerInfo& server_info() const { return server_; }
  const ConnectionOptions& options() const { return options_; }
  // The negotiated revision, min(client, server).
  uint64_t revision() const { return revision_; }
  bool usable() const { return !broken_ && !in_query_; }
  uint64_t received_bytes() const { return in_.received_bytes(); }
  uint64_t decoded_bytes() const { return reader_.decoded_bytes() + in_.plain_bytes(); }
  uint64_t sent_bytes() const { return transport_->bytes_written(); }
  // "plain", or the TLS version and cipher.
  std::string transport_description() const { return transport_->Description(); }

  // Sends Ping and waits for Pong.
  absl::Status Ping();

  // Low-level query API. SendQuery sends Query plus the empty external-tables block; then call
  // ReceivePacket until it returns kEndOfStream or an error. A server Exception is returned as
  // its status (ExceptionToStatus) and ends the query. The packet is valid until the next call.
  absl::Status SendQuery(QueryParams query);
  absl::StatusOr<Packet*> ReceivePacket();
  // Sends one Data packet with `block` (compressed when the query asked for it).
  absl::Status SendData(const Block& block);
  // Asks the server to stop the running query; keep reading until EndOfStream or Exception.
  absl::Status SendCancel();

  // Runs a query and calls `on_block` for each non-empty data block.
  absl::Status Select(QueryParams query, const std::function<absl::Status(const Block&)>& on_block,
                      QueryResult* result = nullptr);
  // Runs `insert_query` (text ending in VALUES or FORMAT Native, e.g.
  // "INSERT INTO db.t (a, b) VALUES"), checks `blocks` against the server's header block, sends
  // them and waits for EndOfStream. A mismatch (missing or extra column, other order, other
  // type) is InvalidArgument and no row is sent. Returns the server's status otherwise.
  absl::Status Insert(QueryParams insert_query, std::span<const Block* const> blocks,
                      QueryResult* result = nullptr);
  // The same with the rows of `block`'s parts sent as one block (one Data packet, one part on
  // the server), written from the parts' own memory.
  absl::Status Insert(QueryParams insert_query, const BlockParts& block,
                      QueryResult* result = nullptr);

  // The header block (column names and types, no rows) the server expects for `insert_query`,
  // without inserting anything (the INSERT is ended with an empty block). Errors as Insert().
  absl::StatusOr<Block> DescribeInsert(QueryParams insert_query);

  // Changes the timeout of each wait for data (e.g. a short one while draining a cancel).
  void set_read_timeout(absl::Duration timeout) { in_.set_read_timeout(timeout); }

  // Interrupts a blocked operation from another thread; the connection becomes unusable.
  void Cancel();

  // Waits at most `timeout` until a packet can be read without blocking for its first byte
  // (bytes already buffered count). Returns false on timeout. Errors as ReceivePacket().
  absl::StatusOr<bool> WaitForInput(absl::Duration timeout);

 private:
  Connection(const ConnectionOptions& options, std::unique_ptr<Transport> transport);
  // A reply to Hello that is a TLS record: the port speaks TLS and we did not.
  absl::Status CheckNotTls();
  absl::Status Handshake();
  absl::Status Flush();                    // writes out_ to the socket
  absl::Status Fail(absl::Status status);  // marks broken, returns status
  // Ping until Pong, skipping the server's complaint about a block it had not read; marks the
  // connection broken on failure.
  absl::Status Resync();
  absl::Status WriteCompressedBody();
  // One Data packet of the parts' rows as one block (see WriteBlockOfParts); the caller has
  // validated each part.
  absl::Status SendDataOfParts(std::span<const Block* const> parts);
  // Insert's work; `as_one`: the blocks are the parts of one block (BlockParts).
  absl::Status InsertBlocks(QueryParams insert_query, std::span<const Block* const> blocks,
                            bool as_one, QueryResult* result);
  // After an INSERT query: reads packets up to the server's header block.
  absl::StatusOr<Block> ReadInsertHeader();
  // Ends an INSERT with an empty block and waits for EndOfStream.
  absl::Status FinishInsert(QueryResult* result);
  // Between the blocks of an INSERT: reads what the server already sent (ProfileEvents after
  // every block from revision 54456 on, Progress, Log) without waiting for more. A server that
  // writes a packet per block and is not read stops reading our blocks once its send buffer is
  // full, and the INSERT would stall. An exception ends the INSERT (the connection is then
  // dropped: blocks may be in flight behind it).
  absl::Status ReadWhileInserting(QueryResult* result);

  ConnectionOptions options_;
  std::unique_ptr<Transport> transport_;
  SocketReadBuffer in_;
  ServerPacketReader reader_;
  GatherWriter out_;
  GatherWriter body_;
  ByteBuffer frames_;
  std::optional<FrameCompressor> compressor_;
  HelloParams hello_;
  ServerInfo server_;
  uint64_t revision_ = 0;
  bool broken_ = false;
  bool data_received_ = false;  // a Data packet arrived since the last SendQuery
  bool in_query_ = false;
  bool query_compressed_ = false;
};

}  // namespace chgate::clickhouse
