// An InsertRequest made ready for the Ingestor: read from its bytes (rows viewed in the received
// bytes where that reads the same as protobuf's parse), its fields validated, its rows viewed or
// its columnar block converted (server/proto_convert), and what it counts for in the memory budget
// while it is parsed and converted. Shared by the unary Insert and InsertStream calls. Plain
// functions, thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "chgate/v1/chgate.pb.h"
#include "server/clickhouse/block.h"
#include "server/ingest/request.h"
#include "server/proto_convert/values.h"
#include "server/proto_convert/wire_rows.h"
#include "text/trace_context.h"

namespace chgate::service {

// What a request is counted for in the memory budget (ingest::MemoryBudget) before it is
// converted. On arrival: the received bytes and their parsed copy, which exist together while
// the message is parsed.
inline uint64_t ArrivalBytes(size_t wire) { return 2 * static_cast<uint64_t>(wire) + 1024; }

// A request made ready for the Ingestor. The views `request` holds point into this struct and
// into the InsertRequest message; both must stay alive until the Ingestor admits or rejects it.
struct PreparedInsert {
  // Rows read in place (ParseInsert): the received bytes and the index into them.
  std::string wire;
  proto_convert::WireRows wire_rows;
  bool rows_in_place = false;
  std::optional<proto_convert::ProtoRows> rows;  // rows parsed into the message
  clickhouse::Block block;
  ingest::Request request;
  uint64_t row_count = 0;
  v1::AckMode requested_ack = v1::ACK_MODE_UNSPECIFIED;
  // A request ParseInsert refused whose framing is sound (a string field that is not UTF-8): its
  // sequence, so that a stream answers it alone and goes on.
  std::optional<uint64_t> refused_sequence;

  // Frees the input (rows, received bytes, converted block) once the Ingestor has converted it;
  // the outcome needs only the plain fields.
  void ReleaseInput() {
    rows.reset();
    wire_rows.Clear();
    std::string().swap(wire);
    block = clickhouse::Block();
  }
};

// Reads `raw` into `message`: a request of rows in place (every field but the rows into
// `message`, which gets an empty RowSet, and the rows into `out`, which keeps the received
// bytes), anything else by protobuf's parse. InvalidArgument naming the message when the bytes
// are not an InsertRequest, or naming the field when one string field is not UTF-8 (then
// out->refused_sequence is the request's sequence, when it has one).
absl::Status ParseInsert(const grpc::ByteBuffer& raw, v1::InsertRequest* message,
                         PreparedInsert* out);

// Once parsed (the received bytes freed, unless the rows are read in place): the parsed message
// or the received bytes and their index, and the columns converted from them, which exist
// together until the conversion ends. Estimates: a parsed message takes about its wire size plus
// the objects of each row and value (exact for columnar blocks, whose values are bytes fields);
// converted columns about the wire size.
uint64_t ConvertingBytes(const v1::InsertRequest& message, size_t wire,
                         const PreparedInsert& prepared);

// Validates `message` and fills `out` (after ParseInsert for rows read in place). Returns
// InvalidArgument for a request that cannot be submitted (see ConvertBlock for the columnar
// checks).
absl::Status Prepare(const v1::InsertRequest& message, absl::Time deadline,
                     const std::optional<text::TraceContext>& trace, PreparedInsert* out);

}  // namespace chgate::service
