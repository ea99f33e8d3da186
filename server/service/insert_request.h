// An InsertRequest made ready for the Ingestor: its fields validated, its rows viewed in place
// or its columnar block converted (server/proto_convert), and what it counts for in the memory
// budget while it is parsed and converted. Shared by the unary Insert and InsertStream calls.
// Plain functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "chgate/v1/chgate.pb.h"
#include "server/clickhouse/block.h"
#include "server/ingest/request.h"
#include "server/proto_convert/values.h"
#include "text/trace_context.h"

namespace chgate::service {

// What a request is counted for in the memory budget (ingest::MemoryBudget) before it is
// converted. On arrival: the received bytes and their parsed copy, which exist together while
// the message is parsed.
inline uint64_t ArrivalBytes(size_t wire) { return 2 * static_cast<uint64_t>(wire) + 1024; }

// Once parsed (the received bytes freed): the parsed message and the columns converted from it,
// which exist together until the conversion ends. Estimates: a parsed message takes about its
// wire size plus the objects of each row and value (exact for columnar blocks, whose values are
// bytes fields); converted columns about the wire size.
uint64_t ConvertingBytes(const v1::InsertRequest& message, size_t wire);

// A request made ready for the Ingestor. The views `request` holds point into this struct and
// into the InsertRequest message; both must stay alive until the Ingestor admits or rejects it.
struct PreparedInsert {
  std::optional<proto_convert::ProtoRows> rows;
  clickhouse::Block block;
  ingest::Request request;
  uint64_t row_count = 0;
  v1::AckMode requested_ack = v1::ACK_MODE_UNSPECIFIED;
};

// Validates `message` and fills `out`. Returns InvalidArgument for a request that cannot be
// submitted (see ConvertBlock for the columnar checks).
absl::Status Prepare(const v1::InsertRequest& message, absl::Time deadline,
                     const std::optional<text::TraceContext>& trace, PreparedInsert* out);

}  // namespace chgate::service
