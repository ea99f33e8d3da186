// Serializing a QueryResponse for gRPC without copying its column data: the bytes are exactly
// what protobuf's serializer produces, but the large fields of a Block (a column's `data`,
// `nulls` and `offsets`) go into the grpc::ByteBuffer as slices that point into the message's own
// buffers, and a column whose data is held outside the message (QueryMessage: a large
// fixed-width result column, still in the native column's buffer) is written from there. A
// result value is thus copied into the message at most once, and a fixed-width one not at all.
// The Block and the held buffers then belong to the slices: the Block is handed back through a
// BlockRecycler and the held buffers released when gRPC has released the last of them, which may
// be after the write completed (the transport keeps the slices until the socket has taken
// them). Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "chgate/v1/chgate.pb.h"

namespace chgate::service {

// Blocks whose buffers can be reused for the next response (Clear() keeps a column's capacity,
// and fresh half-megabyte buffers per message would cost page faults). Shared by a Query call and
// the slices of its written messages, which may outlive the call.
class BlockRecycler {
 public:
  explicit BlockRecycler(size_t keep) : keep_(keep) {}

  // A cleared Block with buffers from an earlier response when one is free, else a new one.
  std::unique_ptr<v1::Block> Take();
  // Clears `block` and keeps it for Take, or frees it when `keep` blocks are already kept.
  void Return(std::unique_ptr<v1::Block> block);

 private:
  const size_t keep_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<v1::Block>> spare_ ABSL_GUARDED_BY(mu_);
};

// Fields at least this long are referenced rather than copied into the framing.
inline constexpr size_t kReferencedFieldBytes = 2048;

// Bytes that stay valid and unchanged while `owner` is held.
struct HeldBytes {
  std::shared_ptr<const void> owner;
  const char* data = nullptr;
  size_t size = 0;
};

// A response whose Block may leave the `data` of some top-level columns outside the message:
// the native column memory a result was read into, written to the client from where it is
// (no copy into the message). Such a column's `data` in `response` stays empty; its value is
// the concatenation of its held ranges.
struct QueryMessage {
  QueryMessage() = default;
  explicit QueryMessage(v1::QueryResponse r) : response(std::move(r)) {}

  struct HeldColumn {
    int column = 0;  // index in the Block's columns
    std::vector<HeldBytes> ranges;
    size_t bytes = 0;  // sum of the ranges' sizes
  };

  // Appends `range` to the held data of `column` (of the response's Block), first moving any
  // `data` the column already has in the message into a held range of its own.
  void Hold(int column, HeldBytes range);
  // The held column `column`, or null when its data is in the message.
  HeldColumn* held_column(int column);
  // The serialized size (as SerializeQueryResponse writes it, held data included). Sets the
  // message's cached sizes.
  size_t ByteSize();
  // Copies the held data into the message's columns (what a parser of the bytes would see).
  void Materialize();

  v1::QueryResponse response;
  std::vector<HeldColumn> held;  // by increasing column
};

// Serializes `message` into `out` (replacing its contents), byte-identical to the
// SerializeAsString() of the materialized message. A Block in it (block, totals or extremes) is
// moved out: its large fields and held ranges are referenced by `out`'s slices, the held ranges'
// owners are kept until the last slice is released, and the Block then goes to `recycler` (when not
// null). Other message kinds are serialized by protobuf.
void SerializeQueryResponse(QueryMessage* message, std::shared_ptr<BlockRecycler> recycler,
                            grpc::ByteBuffer* out);
// The same for a message without held data.
void SerializeQueryResponse(v1::QueryResponse* message, std::shared_ptr<BlockRecycler> recycler,
                            grpc::ByteBuffer* out);

}  // namespace chgate::service
