// IngestService: the chgate.v1.Ingest gRPC service over an ingest::Ingestor, on gRPC's callback
// API. Handlers never block: they validate, hand the request to Ingestor::Submit and finish later
// from its callbacks.
//
//   Insert        one request; the call finishes when the Ingestor reports the outcome (after
//                 commit by default), with the mapped status and `chgate-status-bin` on failure.
//                 The call's deadline (or Options::default_deadline) is the request's deadline.
//                 Served as a generic call whose message is read only once a ReadGate slot is
//                 free (read_gate.h), then counted in the memory budget (refused at once with
//                 RESOURCE_EXHAUSTED when it does not fit).
//   InsertStream  one request is read at a time; the next read starts only once the Ingestor has
//                 admitted the previous one into its buffer (or rejected it), so while the buffer
//                 is full chgate stops reading and gRPC flow control pushes back on the writer.
//                 A request read is counted in the memory budget but never refused for memory.
//                 Exactly one InsertAck per request, in completion order, one write in flight.
//                 The stream ends OK after the client half-closed and every ack was written.
//   Query         run by a QueryExecutor (query_service.h); UNIMPLEMENTED when none is given.
//
// Columnar inserts (InsertRequest.block) need `type` set on every top-level Column (see
// server/proto_convert/values.h); a missing type is INVALID_ARGUMENT.
//
// Thread-safe. The service must outlive the grpc::Server it is registered with; the Ingestor must
// outlive the service. Reactors own their lifetime and stay safe when Ingestor callbacks arrive
// after the call was cancelled.
#pragma once

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "chgate/v1/chgate.grpc.pb.h"
#include "server/auth/authorizer.h"
#include "server/ingest/ingestor.h"
#include "server/service/observers.h"
#include "server/service/query_service.h"
#include "server/service/read_gate.h"

namespace chgate::service {

// Message of the UNAVAILABLE status for calls refused or ended because chgate is shutting down.
inline constexpr char kShuttingDownMessage[] = "chgate is shutting down";

struct IngestServiceOptions {
  // Deadline of requests whose call has none (a stream's requests: counted from when each one
  // is read). Bounds how long a request waits for room in the buffer.
  absl::Duration default_deadline = absl::Seconds(30);
  // Runs Query calls; must outlive the service. Null: Query is UNIMPLEMENTED.
  QueryExecutor* queries = nullptr;
  // Caller authorization, checked before any work: a call whose caller cannot be identified
  // ends with UNAUTHENTICATED before anything is read; Insert, every InsertStream request and
  // Query are checked against the policy (PERMISSION_DENIED; a stream answers with a failed ack
  // and goes on). Null, or disabled: everything is allowed. Must outlive the service.
  const auth::Authorizer* authorizer = nullptr;
  // Counts refusals; may be null.
  AuthObserver* auth_observer = nullptr;
  // What the Ingestor does for tables without a database and requests without an ack mode; the
  // policy is checked against the same resolution.
  std::string default_database = "default";
  ingest::AckMode default_ack = ingest::AckMode::kCommitted;
  // Insert messages read at once (ReadGate): each may be as large as the largest message, so
  // these many x --max-message-bytes bound what gRPC pulls in before chgate counts it.
  size_t read_slots = 8;
};

// The three methods are registered raw (grpc::ByteBuffer): the service parses each request
// itself so that bytes that are not a valid message end the call (or the stream, after the acks
// it owes) with INVALID_ARGUMENT and a message, where gRPC's own parsing would answer
// UNIMPLEMENTED with none. The wire format is unchanged.
// Insert is left to a generic callback service (insert_handler()) that reads each call's message
// only once a ReadGate slot is free: see read_gate.h. Register both with the server.
using IngestRawService =
    v1::Ingest::WithGenericMethod_Insert<v1::Ingest::WithRawCallbackMethod_InsertStream<
        v1::Ingest::WithRawCallbackMethod_Query<v1::Ingest::Service>>>;

class IngestService final : public IngestRawService {
 public:
  // `ingestor` must outlive the service.
  IngestService(ingest::Ingestor* ingestor, IngestServiceOptions options);
  ~IngestService() override;
  IngestService(const IngestService&) = delete;
  IngestService& operator=(const IngestService&) = delete;

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* InsertStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Query(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request) override;

  // From now on Insert and InsertStream calls are refused with UNAVAILABLE (kShuttingDownMessage);
  // open streams stop reading, send the acks of the requests they hold as those complete, then
  // end with UNAVAILABLE. In-flight Inserts finish normally. Queries are refused, waiting and
  // running ones end with UNAVAILABLE (QueryExecutor::BeginShutdown). Idempotent; does not wait.
  void BeginShutdown();
  bool shutting_down() const { return shutting_down_.load(std::memory_order_acquire); }

  // Serves Insert (and answers UNIMPLEMENTED for methods no service knows): register it with
  // grpc::ServerBuilder::RegisterCallbackGenericService beside the service.
  grpc::CallbackGenericService* insert_handler() { return &insert_handler_; }

 private:
  class InsertCall;
  class StreamCall;
  class InsertHandler final : public grpc::CallbackGenericService {
   public:
    explicit InsertHandler(IngestService* service) : service_(service) {}
    grpc::ServerGenericBidiReactor* CreateReactor(
        grpc::GenericCallbackServerContext* context) override;

   private:
    IngestService* const service_;
  };

  // Counts a refusal and returns its status (OK for an allowed decision).
  absl::Status Refused(const auth::Decision& decision) const;
  // Whether the caller with `credentials` may insert `request` (its table and effective ack
  // mode). OK when allowed or when the table does not parse (Prepare reports that).
  // Sets `*identity` to the caller's identity as the authorizer names it.
  absl::Status AuthorizeInsert(const auth::Credentials& credentials,
                               const v1::InsertRequest& request, std::string* identity) const;
  bool auth_enabled() const {
    return options_.authorizer != nullptr && options_.authorizer->enabled();
  }

  // Adds an open stream; false (and not added) once shutting down.
  bool Register(StreamCall* stream);
  void Unregister(StreamCall* stream);

  ingest::Ingestor* const ingestor_;
  const IngestServiceOptions options_;
  std::atomic<bool> shutting_down_{false};
  absl::Mutex streams_mu_;
  absl::flat_hash_set<StreamCall*> streams_ ABSL_GUARDED_BY(streams_mu_);
  ReadGate read_gate_;
  InsertHandler insert_handler_;
};

}  // namespace chgate::service
