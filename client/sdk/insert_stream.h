// InsertStream: one Ingest.InsertStream call. Each Send() writes one InsertRequest and delivers
// its InsertAck, matched by sequence, to a future or a callback. Created by
// Client::OpenInsertStream.
//
//   std::unique_ptr<InsertStream> stream = client->OpenInsertStream();
//   std::future<absl::StatusOr<InsertResult>> ack = stream->Send(std::move(request));
//   ...
//   absl::Status s = stream->Close();        // half-closes, waits for every pending ack
//   absl::StatusOr<InsertResult> r = ack.get();
//
// The stream assigns each request's `sequence` itself (1, 2, 3, ...); a value set by the caller
// is overwritten. Send() queues the request for writing and returns; it blocks only while the
// queue of requests not yet written is full (kMaxUnsentRequests or kMaxUnsentBytes), which
// happens when gRPC flow control holds the stream back (chgate stops reading while its buffer is
// full): the backpressure a producer should feel. Requests are written in sequence order, one
// gRPC write at a time, without a flush between queued ones.
// Per-request failures arrive in that request's result; when the stream itself ends (server
// shutdown, deadline, cancel, connection loss), every pending request fails with the stream's
// status code and a message naming the sequence; such requests may or may not have been
// committed: resend them with the same idempotency_key.
//
// Thread-safe: Send may be called from several threads. Callbacks run on gRPC's callback
// threads, one at a time per stream; they must not block for long and must not call Send() (it
// can wait for flow control, which needs those threads), Close() or destroy the stream.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "chgate/v1/chgate.grpc.pb.h"
#include "client/sdk/options.h"

namespace chgate::client {

using AckCallback = std::function<void(absl::StatusOr<InsertResult>)>;

class InsertStream {
 public:
  InsertStream(const InsertStream&) = delete;
  InsertStream& operator=(const InsertStream&) = delete;
  // Cancels the stream if Close() was not called; pending requests then fail with CANCELLED.
  ~InsertStream();

  // Sends `request`; the future resolves with its ack. After Close(), or once the stream ended,
  // it resolves at once with FailedPrecondition (or the stream's error).
  std::future<absl::StatusOr<InsertResult>> Send(v1::InsertRequest request);
  // The same, delivering the result to `done` (on a gRPC callback thread, or on this thread when
  // the request could not be sent).
  void Send(v1::InsertRequest request, AckCallback done);
  // The same without a copy for a request the caller keeps (to send it again on another stream,
  // as the Producer does): the stream sets its `sequence` and writes it where it is. The caller
  // must not change it until `done` has run.
  void Send(std::shared_ptr<v1::InsertRequest> request, AckCallback done);

  // Half-closes the stream, waits until every pending request got its ack and the server ended
  // the stream, and returns the stream's status (OK, or e.g. UNAVAILABLE when chgate shut down).
  // Idempotent.
  absl::Status Close();

  // Cancels the stream; pending requests fail with CANCELLED. Thread-safe; Close() still
  // collects the status afterwards.
  void Cancel();

  // Requests sent and not yet answered.
  size_t pending() const;

  // Whether the stream has ended (the server finished it, or it broke): Send then fails at once.
  bool ended() const;

 private:
  friend class Client;
  class Reactor;
  InsertStream(std::unique_ptr<grpc::ClientContext> context, v1::Ingest::Stub* stub);

  // Unwritten requests beyond which Send() waits.
  static constexpr size_t kMaxUnsentRequests = 4096;
  static constexpr size_t kMaxUnsentBytes = 16 << 20;

  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<Reactor> reactor_;
};

}  // namespace chgate::client
