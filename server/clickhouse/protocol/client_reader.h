// The server side of the native protocol's client packets (PROTOCOL.md §4.1, §4.3, §4.4, §4.7):
// parses what a ClickHouse client sends (Hello, Addendum, Query with ClientInfo, settings and
// parameters, Data blocks, Ping, Cancel, KeepAlive), gated on the negotiated revision exactly like
// the writers in packets.h. Used by tests over captured bytes and by in-process fake servers.
// The free functions are thread-compatible; a ClientPacketReader is not thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/clickhouse/block.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/stream.h"

namespace chgate::clickhouse {

// The highest negotiated revision whose client packets this reader parses completely. Above it,
// fields whose position is not known here (ClientInfo at 54485+) or block-info field 3 (54480)
// may appear.
inline constexpr uint64_t kMaxClientReaderRevision = 54479;

// Who sent a query and how (ClickHouse's ClientInfo), every field of the wire format. Fields are
// present from the revision noted; below it they keep their defaults.
struct ClientInfo {
  static constexpr uint8_t kQueryKindNone = 0;  // nothing else follows on the wire
  static constexpr uint8_t kQueryKindInitial = 1;
  static constexpr uint8_t kQueryKindSecondary = 2;
  static constexpr uint8_t kInterfaceTcp = 1;
  static constexpr uint8_t kInterfaceHttp = 2;

  uint8_t query_kind = kQueryKindNone;
  std::string initial_user;
  std::string initial_query_id;
  std::string initial_address;               // "ip:port"
  uint64_t initial_query_start_time_us = 0;  // 54449
  uint8_t interface = 0;  // other interfaces carry none of the TCP/HTTP fields below
  // interface == kInterfaceTcp
  std::string os_user;
  std::string client_hostname;
  std::string client_name;
  uint64_t client_version_major = 0;
  uint64_t client_version_minor = 0;
  uint64_t client_tcp_protocol_version = 0;
  // interface == kInterfaceHttp
  uint8_t http_method = 0;
  std::string http_user_agent;
  std::string forwarded_for;          // 54443
  std::string http_referer;           // 54447
  std::string quota_key;              // 54060
  uint64_t distributed_depth = 0;     // 54448
  uint64_t client_version_patch = 0;  // 54401, TCP only
  // OpenTelemetry trace context, 54442. trace_id keeps the wire's UUID layout: the first 8
  // bytes are `trace_id_high` as UInt64 LE, the next 8 `trace_id_low`.
  bool has_trace_context = false;
  uint64_t trace_id_high = 0;
  uint64_t trace_id_low = 0;
  uint64_t span_id = 0;
  std::string tracestate;
  uint8_t trace_flags = 0;
  // Parallel replicas, 54453.
  uint64_t collaborate_with_initiator = 0;
  uint64_t count_participating_replicas = 0;
  uint64_t number_of_current_replica = 0;
  // 54475.
  uint64_t script_query_number = 0;
  uint64_t script_line_number = 0;
  // 54476.
  bool has_jwt = false;
  std::string jwt;
};

// What a client sends right after the server's Hello when the revision is at least 54458.
struct ClientAddendum {
  std::string quota_key;
  std::string proto_send_chunked;  // 54470: "chunked", "notchunked" or "*_optional"
  std::string proto_recv_chunked;  // 54470
  uint64_t parallel_replicas_protocol_version = 0;  // 54471
};

enum class ClientPacketType { kHello, kAddendum, kQuery, kData, kCancel, kPing, kKeepAlive };

struct ClientPacket {
  ClientPacketType type = ClientPacketType::kPing;
  // kHello. version_patch and quota_key stay empty: the Hello does not carry them (see
  // client_info and addendum).
  HelloParams hello;
  ClientAddendum addendum;  // kAddendum
  // kQuery: query_id, text, stage, compression, settings and parameters. Below 54429 setting
  // values arrive in binary form and are turned into text here (VarUInt and zigzag VarInt as
  // decimal, floats and strings as sent). Parameter values are unquoted.
  QueryParams query;
  ClientInfo client_info;          // kQuery, from 54032
  std::string external_roles;      // kQuery, from 54472 (interserver only; "" from clients)
  std::string interserver_secret;  // kQuery, from 54441 ("" from normal clients)
  std::string table_name;          // kData: "" for the main data, else an external table
  Block block;                     // kData
};

// Reads a client Hello, packet code included. Returns DataLoss if the first packet is not a
// Hello or is malformed, OutOfRange if the data ends early, Unimplemented for interserver
// authentication (user " INTERSERVER SECRET "), plus errors of the source.
absl::StatusOr<HelloParams> ReadClientHello(ReadBuffer& in);

// Reads the Addendum at negotiated `revision` (nothing is read below 54458). Errors: OutOfRange,
// DataLoss for a malformed field, plus errors of the source.
absl::Status ReadAddendum(ReadBuffer& in, uint64_t revision, ClientAddendum* out);

// Reads a ClientInfo at negotiated `revision` (only call it from 54032). Errors as ReadAddendum.
absl::Status ReadClientInfo(ReadBuffer& in, uint64_t revision, ClientInfo* out);

// Reads the packets of one client connection in order. The revision is negotiated from the
// Hello: min(client revision, `server_revision`); after a Hello at 54458 or above, the next
// Next() reads the Addendum (call it only once the server's Hello is sent, or it may wait for
// bytes the client has not sent yet). Data blocks are read through compression frames when the
// last Query asked for compression. The packet returned is owned by the reader and valid until
// the next Next(). After an error the reader's position in the stream is undefined.
class ClientPacketReader {
 public:
  // `in` must outlive the reader; `server_revision` must not exceed kMaxClientReaderRevision.
  ClientPacketReader(ReadBuffer* in, uint64_t server_revision);

  // For a stream that starts after the Hello: sets the negotiated revision directly (at most
  // kMaxClientReaderRevision). No Addendum is expected afterwards.
  void set_revision(uint64_t revision);
  uint64_t revision() const { return revision_; }
  // Whether Data blocks arrive in compression frames; every Query sets it from its flag.
  void set_compressed(bool compressed) { compressed_ = compressed; }
  bool compressed() const { return compressed_; }
  // Data blocks are read past without keeping their values (ReadBlock's discard_values): the
  // packet's block has rows() but no columns.
  void set_discard_data(bool discard) { discard_data_ = discard; }

  // Reads the next packet. Errors: those of the source (OutOfRange at the end of the data,
  // Unavailable, DeadlineExceeded); DataLoss for malformed packets, unknown packet codes, a
  // packet other than Hello before the revision is known, or a second Hello; InvalidArgument
  // for a setting whose binary type is unknown below 54429 (the rest of the Query cannot be
  // parsed); Unimplemented for client packets of interserver use (TablesStatusRequest, Scalar,
  // ...) and column types this library cannot decode.
  absl::StatusOr<ClientPacket*> Next();

 private:
  absl::Status ReadQuery(ClientPacket* p);
  absl::Status ReadData(ClientPacket* p);

  ReadBuffer* in_;
  CompressedReadBuffer compressed_in_;
  uint64_t server_revision_;
  uint64_t revision_ = 0;
  bool revision_known_ = false;
  bool addendum_pending_ = false;
  bool compressed_ = false;
  ClientPacket packet_;
  bool discard_data_ = false;
};

}  // namespace chgate::clickhouse
