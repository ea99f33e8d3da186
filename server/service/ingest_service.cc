#include "server/service/ingest_service.h"

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/log/log.h"
#include "server/service/api_security.h"
#include "server/service/call_trace.h"
#include "server/service/insert_request.h"
#include "server/service/raw_messages.h"
#include "server/service/status.h"
#include "text/status_macros.h"

namespace chgate::service {
namespace {

google::protobuf::Timestamp ToProtoTime(absl::Time t) {
  google::protobuf::Timestamp ts;
  const int64_t seconds = absl::ToUnixSeconds(t);
  ts.set_seconds(seconds);
  ts.set_nanos(static_cast<int32_t>((t - absl::FromUnixSeconds(seconds)) / absl::Nanoseconds(1)));
  return ts;
}

// Fills the success fields shared by InsertResponse and InsertAck.
template <typename Message>
void FillSuccess(const ingest::Result& result, const PreparedInsert& prepared, Message* out) {
  out->set_rows(result.rows);
  if (prepared.row_count == 0) {
    // Vacuously committed, unless the caller asked for the weaker guarantee.
    out->set_ack_mode(prepared.requested_ack == v1::ACK_MODE_ACCEPTED ? v1::ACK_MODE_ACCEPTED
                                                                      : v1::ACK_MODE_COMMITTED);
    return;
  }
  out->set_ack_mode(result.committed   ? v1::ACK_MODE_COMMITTED
                    : result.persisted ? v1::ACK_MODE_PERSISTED
                                       : v1::ACK_MODE_ACCEPTED);
  out->set_query_id(result.query_id);
  out->set_deduplicated(result.deduplicated);
  if (result.committed) *out->mutable_commit_time() = ToProtoTime(result.commit_time);
}

v1::InsertAck FailureAck(uint64_t sequence, const absl::Status& status) {
  v1::InsertAck ack;
  ack.set_sequence(sequence);
  ToProtoStatus(status, ack.mutable_status());
  return ack;
}

bool HasDeadline(const grpc::CallbackServerContext& context) {
  return context.deadline() != std::chrono::system_clock::time_point::max();
}

absl::Status ShuttingDown() {
  return absl::UnavailableError(absl::StrCat(
      kShuttingDownMessage, "; retry against another instance with the same idempotency_key"));
}

// A streaming call that ends at once with a status.
class FinishedWriter final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit FinishedWriter(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

class FinishedBidi final : public grpc::ServerGenericBidiReactor {
 public:
  explicit FinishedBidi(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

constexpr char kInsertMethod[] = "/chgate.v1.Ingest/Insert";

}  // namespace

// ---------------------------------------------------------------------------------------------
// Insert
// ---------------------------------------------------------------------------------------------

// Insert is served as a generic call (a bidi stream of raw messages on the wire of a unary call)
// so that chgate decides when its message is read: a slot of the ReadGate first, then one read,
// one response written with the status. gRPC's unary handler would receive every caller's whole
// message before chgate could count or refuse it.
class IngestService::InsertCall final : public grpc::ServerGenericBidiReactor {
 public:
  InsertCall(IngestService* service, grpc::GenericCallbackServerContext* context)
      : service_(service), context_(context), state_(std::make_shared<State>()) {
    absl::MutexLock lock(&state_->mu);
    state_->call = this;
  }

  void Start() {
    if (service_->shutting_down()) return FinishEarly(ShuttingDown());
    trace_ = CallTrace(*context_);
    if (service_->auth_enabled()) {
      // Who is calling is known before anything is read; what they may insert needs the message.
      credentials_ = CallCredentials(*context_);
      absl::Status who =
          service_->Refused(service_->options_.authorizer->Authenticate(credentials_));
      if (!who.ok()) return FinishEarly(who);
    }
    std::shared_ptr<State> state = state_;
    const bool now = service_->read_gate_.Acquire([state] {
      absl::MutexLock lock(&state->mu);
      if (state->call == nullptr) return false;  // ended while it waited: pass the slot on
      state->phase = Phase::kReading;
      state->call->StartRead(&state->call->raw_);
      return true;
    });
    if (now) {
      absl::MutexLock lock(&state->mu);
      state->phase = Phase::kReading;
      StartRead(&raw_);
    }
  }

  void OnReadDone(bool ok) override {
    // The message is in (or the call ended): its slot goes to the next call, and the memory
    // budget counts the message from here on.
    service_->read_gate_.Release();
    if (!ok) {
      // Cancelled, over --max-message-bytes (gRPC has ended the call), or half-closed without
      // a message.
      return FinishEarly(
          absl::InvalidArgumentError("the Insert call ended before its request message arrived"));
    }
    {
      absl::MutexLock lock(&state_->mu);
      state_->phase = Phase::kProcessing;
    }
    // Counted from the moment its bytes arrived; refused at once when the budget is full.
    const size_t wire = raw_.Length();
    absl::StatusOr<ingest::MemoryBudget::Reservation> reservation =
        service_->ingestor_->Reserve(ArrivalBytes(wire));
    if (!reservation.ok()) {
      raw_.Clear();
      return FinishEarly(reservation.status());
    }
    state_->arena = NewRequestArena();
    state_->message =
        google::protobuf::Arena::CreateMessage<v1::InsertRequest>(state_->arena.get());
    const v1::InsertRequest& message = *state_->message;
    absl::Status parsed = ParseInsert(raw_, state_->message, &state_->prepared);
    raw_.Clear();  // not read again
    if (!parsed.ok()) return FinishEarly(parsed);
    reservation->Resize(ConvertingBytes(message, wire, state_->prepared));
    std::string identity;
    if (service_->auth_enabled()) {
      absl::Status allowed = service_->AuthorizeInsert(credentials_, message, &identity);
      if (!allowed.ok()) return FinishEarly(allowed);
    }
    const absl::Time deadline = HasDeadline(*context_)
                                    ? absl::FromChrono(context_->deadline())
                                    : absl::Now() + service_->options_.default_deadline;
    if (absl::Status s = Prepare(message, deadline, trace_, &state_->prepared); !s.ok()) {
      return FinishEarly(s);
    }
    state_->prepared.request.identity = std::move(identity);
    // The callbacks keep the state (and so the prepared views) alive until the outcome; the
    // message and its converted block are freed as soon as the Ingestor has converted them.
    std::shared_ptr<State> state = state_;
    state->prepared.request.release_input = [state] { state->ReleaseInput(); };
    service_->ingestor_->Submit(
        std::move(state->prepared.request), *std::move(reservation),
        [state] { OnAdmitted(*state); },
        [state](ingest::Result result) { OnResult(*state, std::move(result)); });
  }

  void OnCancel() override {
    const std::shared_ptr<State> state = state_;  // outlives this reactor once it finished
    absl::MutexLock lock(&state->mu);
    state->cancelled = true;
    // Waiting for a read slot: nothing is pending, end now (the slot, when it comes, is passed
    // on). Reading: OnReadDone follows. Before admission the Ingestor may still read the request,
    // which lives only as long as the call: finish once it was admitted (or at the outcome).
    if (state->phase == Phase::kWaiting || state->admitted) {
      FinishLocked(*state, absl::CancelledError("the call was cancelled"));
    }
  }

  void OnDone() override { delete this; }

 private:
  enum class Phase { kWaiting, kReading, kProcessing };

  struct State {
    absl::Mutex mu;
    InsertCall* call ABSL_GUARDED_BY(mu) = nullptr;  // null once Finish was called
    Phase phase ABSL_GUARDED_BY(mu) = Phase::kWaiting;
    bool admitted ABSL_GUARDED_BY(mu) = false;
    bool cancelled ABSL_GUARDED_BY(mu) = false;
    // Written before Submit; afterwards only ReleaseInput (once, on an Ingestor thread) frees
    // the message and the views into it, and the outcome reads the plain fields of `prepared`.
    std::unique_ptr<google::protobuf::Arena> arena;
    v1::InsertRequest* message = nullptr;  // on `arena`
    PreparedInsert prepared;

    void ReleaseInput() {
      prepared.ReleaseInput();
      message = nullptr;
      arena.reset();
    }
  };

  void FinishEarly(const absl::Status& status) {
    absl::MutexLock lock(&state_->mu);
    FinishLocked(*state_, status);
  }

  // Finishes the call with `status` unless it already finished. The reactor may be deleted as
  // soon as Finish returns, so nothing touches it afterwards.
  static void FinishLocked(State& state, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
    InsertCall* call = std::exchange(state.call, nullptr);
    if (call != nullptr) call->Finish(ToGrpcStatus(status, call->context_));
  }

  static void OnAdmitted(State& state) {
    absl::MutexLock lock(&state.mu);
    state.admitted = true;
    if (state.cancelled) FinishLocked(state, absl::CancelledError("the call was cancelled"));
  }

  static void OnResult(State& state, ingest::Result result) {
    absl::MutexLock lock(&state.mu);
    InsertCall* call = std::exchange(state.call, nullptr);
    if (call == nullptr) return;
    if (!result.status.ok()) {
      call->Finish(ToGrpcStatus(result.status, call->context_));
      return;
    }
    v1::InsertResponse response;
    FillSuccess(result, state.prepared, &response);
    SerializeRawMessage(response, &call->response_);
    call->StartWriteAndFinish(&call->response_, grpc::WriteOptions(), grpc::Status::OK);
  }

  IngestService* const service_;
  grpc::GenericCallbackServerContext* const context_;
  std::optional<text::TraceContext> trace_;  // the caller's, from the metadata
  auth::Credentials credentials_;            // written in Start, read-only afterwards
  grpc::ByteBuffer raw_;                     // the request, until parsed
  grpc::ByteBuffer response_;
  const std::shared_ptr<State> state_;
};

// ---------------------------------------------------------------------------------------------
// InsertStream
// ---------------------------------------------------------------------------------------------

// Lifetime: gRPC holds one reference until OnDone, and every request read holds one (through its
// Slot) until the Ingestor has dropped both of its callbacks, so callbacks that arrive after the
// stream ended still find a live object; they see `finished_` and do nothing.
class IngestService::StreamCall final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  StreamCall(IngestService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context) {}

  void Start() {
    trace_ = CallTrace(*context_);  // one trace for every request of the stream
    registered_ = service_->Register(this);
    if (registered_ && service_->auth_enabled()) {
      // Once per stream; every request is then checked against the policy in force when it is
      // read, so a revoked token or grant takes effect on open streams too.
      credentials_ = CallCredentials(*context_);
      absl::Status who =
          service_->Refused(service_->options_.authorizer->Authenticate(credentials_));
      if (!who.ok()) {
        absl::MutexLock lock(&mu_);
        return FinishLocked(who);
      }
    }
    absl::MutexLock lock(&mu_);
    if (!registered_) return DrainLocked(ShuttingDown());
    StartReadLocked();
  }

  // Stops reading; once every request read so far is acknowledged, ends the stream with
  // `status`.
  void Drain(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    DrainLocked(status);
  }

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  void OnReadDone(bool ok) override {
    std::shared_ptr<Slot> slot;  // released after the lock
    {
      absl::MutexLock lock(&mu_);
      slot = std::move(reading_);
      if (!ok) {
        read_closed_ = true;
        return MaybeFinishLocked();
      }
      if (finished_) return;
      const size_t wire = slot->raw.Length();
      absl::Status parsed = ParseInsert(slot->raw, slot->request, &slot->prepared);
      slot->raw.Clear();  // not read again
      if (!parsed.ok()) {
        if (slot->prepared.refused_sequence.has_value()) {
          // One bad value in a sound message: its request fails alone.
          ++unacked_;
          AckLocked(FailureAck(*slot->prepared.refused_sequence, parsed));
          StartReadLocked();
          return MaybeWriteLocked();
        }
        // The message has no sequence to acknowledge: end the stream with the reason, after
        // the acks already owed.
        return DrainLocked(parsed);
      }
      slot->sequence = slot->request->sequence();
      slot->wire_bytes = wire;
      ++unacked_;
      if (draining_) {
        AckLocked(FailureAck(slot->sequence, drain_status_));
        MaybeWriteLocked();
        return MaybeFinishLocked();
      }
    }
    Submit(std::move(slot));
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) broken_ = true;
    MaybeWriteLocked();
    MaybeFinishLocked();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    broken_ = true;
    MaybeFinishLocked();
  }

  void OnDone() override {
    if (registered_) service_->Unregister(this);
    Unref();
  }

 private:
  // One request read from the stream.
  struct Slot {
    explicit Slot(StreamCall* c) : call(c) { call->Ref(); }
    ~Slot() { call->Unref(); }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;

    // Frees the message and the views into it (the Ingestor has converted it); the ack needs
    // only `sequence` and the plain fields of `prepared`.
    void ReleaseInput() {
      prepared.ReleaseInput();
      request = nullptr;
      arena.reset();
    }

    StreamCall* const call;
    grpc::ByteBuffer raw;
    std::unique_ptr<google::protobuf::Arena> arena = NewRequestArena();
    v1::InsertRequest* request =
        google::protobuf::Arena::CreateMessage<v1::InsertRequest>(arena.get());
    uint64_t sequence = 0;
    size_t wire_bytes = 0;
    PreparedInsert prepared;
    bool deadline_from_stream = false;
    bool read_released = false;  // guarded by call->mu_
  };

  void Submit(std::shared_ptr<Slot> slot) {
    absl::Time deadline = absl::Now() + service_->options_.default_deadline;
    if (HasDeadline(*context_)) {
      const absl::Time stream_deadline = absl::FromChrono(context_->deadline());
      if (stream_deadline <= deadline) {
        deadline = stream_deadline;
        slot->deadline_from_stream = true;
      }
    }
    // A request already read is counted from now on, and never refused for memory: the stream
    // reads nothing more until it is admitted, so it waits for room in the buffer like before
    // and gRPC's flow control holds the writer back (one request per stream beyond the budget at
    // most; --max-concurrent-streams bounds the streams per connection).
    ingest::MemoryBudget::Reservation reservation = service_->ingestor_->Hold(
        ConvertingBytes(*slot->request, slot->wire_bytes, slot->prepared));
    absl::Status s;
    std::string identity;
    if (s.ok() && service_->auth_enabled()) {
      s = service_->AuthorizeInsert(credentials_, *slot->request, &identity);
    }
    if (s.ok()) s = Prepare(*slot->request, deadline, trace_, &slot->prepared);
    if (s.ok()) slot->prepared.request.identity = std::move(identity);
    if (!s.ok()) {
      absl::MutexLock lock(&mu_);
      AckLocked(FailureAck(slot->sequence, s));
      ReleaseReadLocked(*slot);
      MaybeWriteLocked();
      return MaybeFinishLocked();
    }
    Slot* raw = slot.get();
    raw->prepared.request.release_input = [slot] { slot->ReleaseInput(); };
    service_->ingestor_->Submit(
        std::move(raw->prepared.request), std::move(reservation),
        [slot] { slot->call->OnAdmitted(*slot); },
        [slot](ingest::Result result) { slot->call->OnResult(*slot, std::move(result)); });
  }

  void OnAdmitted(Slot& slot) {
    absl::MutexLock lock(&mu_);
    ReleaseReadLocked(slot);
  }

  void OnResult(Slot& slot, ingest::Result result) {
    absl::MutexLock lock(&mu_);
    v1::InsertAck ack;
    if (result.status.ok()) {
      ack.set_sequence(slot.sequence);
      FillSuccess(result, slot.prepared, &ack);
    } else {
      ack = FailureAck(slot.sequence, result.status);
      // The stream's own deadline, not the per-request default, ran out while waiting for room:
      // end the stream (after the acks it owes) instead of reading more.
      if (result.status.code() == absl::StatusCode::kResourceExhausted &&
          slot.deadline_from_stream) {
        DrainLocked(result.status);
      }
    }
    AckLocked(std::move(ack));
    ReleaseReadLocked(slot);  // a rejected request is never admitted
    MaybeWriteLocked();
    MaybeFinishLocked();
  }

  // The first of admission or outcome lets the next request be read: at most one request per
  // stream waits for room in the buffer.
  void ReleaseReadLocked(Slot& slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (slot.read_released) return;
    slot.read_released = true;
    StartReadLocked();
  }

  void StartReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (read_closed_ || draining_ || broken_ || finished_ || reading_ != nullptr) return;
    reading_ = std::make_shared<Slot>(this);
    StartRead(&reading_->raw);
  }

  void AckLocked(v1::InsertAck ack) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    --unacked_;
    if (finished_ || broken_) return;
    acks_.push_back(std::move(ack));
  }

  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_ || broken_ || acks_.empty()) return;
    writing_ack_ = std::move(acks_.front());
    acks_.pop_front();
    writing_ = true;
    SerializeRawMessage(writing_ack_, &writing_bytes_);
    // With more acks queued, this one may wait in gRPC's buffer (the write completes at once)
    // and leave with the next: the acks of a group commit or a batch go out in one send instead
    // of a system call each. The last of a run is written without the hint, which flushes.
    grpc::WriteOptions options;
    if (!acks_.empty()) options.set_buffer_hint();
    StartWrite(&writing_bytes_, options);
  }

  void DrainLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (draining_ || finished_) return;
    draining_ = true;
    drain_status_ = status;
    MaybeFinishLocked();
  }

  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || writing_) return;
    if (broken_) return FinishLocked(absl::CancelledError("the stream was cancelled"));
    if (!acks_.empty() || unacked_ > 0) return;
    // A read may still be outstanding; it completes (and is ignored) after Finish.
    if (draining_) return FinishLocked(drain_status_);
    if (read_closed_) FinishLocked(absl::OkStatus());
  }

  void FinishLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    finished_ = true;
    acks_.clear();
    Finish(ToGrpcStatus(status, context_));
  }

  IngestService* const service_;
  grpc::CallbackServerContext* const context_;  // valid until finished_
  std::optional<text::TraceContext> trace_;     // the caller's, from the metadata
  std::atomic<int> refs_{1};
  bool registered_ = false;        // written in Start, read in OnDone
  auth::Credentials credentials_;  // written in Start, read-only afterwards

  absl::Mutex mu_;
  std::shared_ptr<Slot> reading_ ABSL_GUARDED_BY(mu_);  // the read in flight, if any
  bool read_closed_ ABSL_GUARDED_BY(mu_) = false;       // half-closed by the client
  bool draining_ ABSL_GUARDED_BY(mu_) = false;          // no more reads; end after the acks
  absl::Status drain_status_ ABSL_GUARDED_BY(mu_);
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // cancelled, or a write failed
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t unacked_ ABSL_GUARDED_BY(mu_) = 0;  // read, no ack queued yet
  std::deque<v1::InsertAck> acks_ ABSL_GUARDED_BY(mu_);
  v1::InsertAck writing_ack_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer writing_bytes_ ABSL_GUARDED_BY(mu_);  // writing_ack_, serialized
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
};

// ---------------------------------------------------------------------------------------------
// Service
// ---------------------------------------------------------------------------------------------

namespace {

// A Query refused before it started: ends at once with `status`.
class RefusedQuery final : public grpc::ServerWriteReactor<v1::QueryResponse> {
 public:
  explicit RefusedQuery(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

absl::string_view AckName(v1::AckMode requested, ingest::AckMode fallback) {
  switch (requested) {
    case v1::ACK_MODE_COMMITTED:
      return "committed";
    case v1::ACK_MODE_ACCEPTED:
      return "accepted";
    case v1::ACK_MODE_PERSISTED:
      return "persisted";
    default:
      switch (fallback) {
        case ingest::AckMode::kAccepted:
          return "accepted";
        case ingest::AckMode::kPersisted:
          return "persisted";
        case ingest::AckMode::kCommitted:
          break;
      }
      return "committed";
  }
}

}  // namespace

absl::Status IngestService::Refused(const auth::Decision& decision) const {
  if (!decision.status.ok() && options_.auth_observer != nullptr) {
    options_.auth_observer->Failure(auth::DenyReasonLabel(decision.reason));
  }
  if (!decision.status.ok()) {
    // The message names the identity and the table, never a token.
    static constexpr log::Component kLog("api");
    kLog.Throttled(log::Level::kWarn, "call refused", auth::DenyReasonLabel(decision.reason),
                   {{"reason", auth::DenyReasonLabel(decision.reason)},
                    {"code", absl::StatusCodeToString(decision.status.code())},
                    {"identity", decision.identity},
                    {"error", decision.status.message()}});
  }
  return decision.status;
}

absl::Status IngestService::AuthorizeInsert(const auth::Credentials& credentials,
                                            const v1::InsertRequest& request,
                                            std::string* identity) const {
  // The Ingestor's own parser and default database, so the policy judges the table the rows
  // would go to. A name that does not parse is refused by Prepare or the Ingestor; an empty one
  // by Prepare.
  absl::StatusOr<ingest::TableId> table =
      ingest::ParseTableName(request.table(), options_.default_database);
  if (!table.ok() || request.table().empty()) {
    const auth::Decision decision = options_.authorizer->Authenticate(credentials);
    *identity = decision.identity;
    return Refused(decision);
  }
  const auth::Decision decision =
      options_.authorizer->AuthorizeInsert(credentials, table->database, table->table,
                                           AckName(request.ack_mode(), options_.default_ack));
  *identity = decision.identity;
  return Refused(decision);
}

IngestService::IngestService(ingest::Ingestor* ingestor, IngestServiceOptions options)
    : ingestor_(ingestor),
      options_(options),
      read_gate_(std::max<size_t>(options.read_slots, 1)),
      insert_handler_(this) {}

IngestService::~IngestService() = default;

grpc::ServerGenericBidiReactor* IngestService::InsertHandler::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  if (context->method() != kInsertMethod) {
    return new FinishedBidi(
        grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                     absl::StrCat("unknown method ", ingest::PrintableName(context->method()))));
  }
  auto* call = new InsertCall(service_, context);
  call->Start();
  return call;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* IngestService::InsertStream(
    grpc::CallbackServerContext* context) {
  auto* call = new StreamCall(this, context);
  call->Start();
  return call;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* IngestService::Query(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  std::string identity;
  if (auth_enabled()) {
    const auth::Decision decision = options_.authorizer->AuthorizeQuery(CallCredentials(*context));
    identity = decision.identity;
    absl::Status allowed = Refused(decision);
    if (!allowed.ok()) return new FinishedWriter(ToGrpcStatus(allowed, context));
  }
  if (options_.queries != nullptr) return options_.queries->Start(context, request, identity);
  return new FinishedWriter(
      grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "Query is not enabled on this server"));
}

void IngestService::BeginShutdown() {
  if (options_.queries != nullptr) options_.queries->BeginShutdown();
  std::vector<StreamCall*> streams;
  {
    absl::MutexLock lock(&streams_mu_);
    shutting_down_.store(true, std::memory_order_release);
    for (StreamCall* s : streams_) {
      s->Ref();
      streams.push_back(s);
    }
  }
  for (StreamCall* s : streams) {
    s->Drain(ShuttingDown());
    s->Unref();
  }
}

bool IngestService::Register(StreamCall* stream) {
  absl::MutexLock lock(&streams_mu_);
  if (shutting_down()) return false;
  streams_.insert(stream);
  return true;
}

void IngestService::Unregister(StreamCall* stream) {
  absl::MutexLock lock(&streams_mu_);
  streams_.erase(stream);
}

}  // namespace chgate::service
