// Serializing a QueryResponse for gRPC without copying its column data: the bytes are exactly
// what protobuf's serializer produces, but the large fields of a Block (a column's `data`,
// `nulls` and `offsets`) go into the grpc::ByteBuffer as slices that point into the message's own
// buffers, so a result value is copied once (from the native column into the message) instead of
// twice. The Block then belongs to the slices: it is handed back through a BlockRecycler when
// gRPC has released the last of them, which may be after the write completed (the transport
// keeps the slices until the socket has taken them). Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <memory>
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

// Serializes `message` into `out` (replacing its contents), byte-identical to
// message.SerializeAsString(). A Block in `message` (block, totals or extremes) is moved out of
// it: its large fields are referenced by `out`'s slices, and it goes to `recycler` (when not
// null) once every slice is released. Other message kinds are serialized by protobuf.
void SerializeQueryResponse(v1::QueryResponse* message, std::shared_ptr<BlockRecycler> recycler,
                            grpc::ByteBuffer* out);

}  // namespace chgate::service
