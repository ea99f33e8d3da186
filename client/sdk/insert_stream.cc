#include "client/sdk/insert_stream.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "client/sdk/internal/call_util.h"
#include "client/sdk/status.h"

namespace chgate::client {
namespace {

// The failure of a request whose ack never came because the stream ended with `stream_status`.
absl::Status Unanswered(const absl::Status& stream_status, uint64_t sequence) {
  if (stream_status.ok()) {
    return absl::InternalError(
        absl::StrCat("InsertStream ended without an ack for sequence ", sequence));
  }
  absl::Status out(
      stream_status.code(),
      absl::StrCat("InsertStream ended before the ack for sequence ", sequence,
                   " (the rows may or may not be committed): ", stream_status.message()));
  stream_status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace

// The call, on gRPC's callback API. Requests wait in `unsent_` and are written one at a time,
// each as soon as the previous write completed; a read is always outstanding for the next ack.
// Lifetime: created with the InsertStream, which waits for OnDone before destroying it. A hold
// keeps OnDone from running while writes may still be started from outside a reaction; it is
// released once no write will start again (WritesDone sent, a write failed, the call ended or
// was cancelled) and no write is in flight.
class InsertStream::Reactor final
    : public grpc::ClientBidiReactor<v1::InsertRequest, v1::InsertAck> {
 public:
  // A request waiting to be written.
  struct Unsent {
    v1::InsertRequest request;                  // owned, or
    std::shared_ptr<v1::InsertRequest> shared;  // written as it is, its sequence set
    size_t bytes = 0;
  };

  Reactor(grpc::ClientContext* context, v1::Ingest::Stub* stub) : context_(context) {
    stub->async()->InsertStream(context, this);
    AddHold();
    StartRead(&ack_);
    StartCall();
  }

  void Send(v1::InsertRequest request, AckCallback done) {
    Send(Unsent{.request = std::move(request)}, std::move(done));
  }

  void Send(Unsent item, AckCallback done) {
    v1::InsertRequest& request = item.shared != nullptr ? *item.shared : item.request;
    absl::Status refused;
    bool start = false;
    {
      absl::MutexLock lock(&mu_);
      auto has_room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return finished_ || write_failed_ || stop_writes_ || closing_ ||
               (unsent_.size() < kMaxUnsentRequests && unsent_bytes_ < kMaxUnsentBytes);
      };
      mu_.Await(absl::Condition(&has_room));
      if (finished_) {
        refused = final_status_.ok() ? absl::FailedPreconditionError("InsertStream already ended")
                                     : absl::Status(final_status_.code(),
                                                    absl::StrCat("InsertStream already ended: ",
                                                                 final_status_.message()));
      } else if (closing_) {
        refused = absl::FailedPreconditionError("InsertStream is closed");
      } else {
        const uint64_t sequence = next_sequence_++;
        request.set_sequence(sequence);
        // Registered before the write, so the ack can never arrive before its entry exists. A
        // request queued after a failed write is never written: OnDone fails it with the
        // stream's status.
        pending_.emplace(sequence, std::move(done));
        if (!write_failed_ && !stop_writes_) {
          item.bytes = request.ByteSizeLong();
          unsent_bytes_ += item.bytes;
          unsent_.push_back(std::move(item));
          start = TakeNextWriteLocked();
        }
      }
    }
    if (!refused.ok()) {
      done(std::move(refused));
      return;
    }
    if (start) StartNextWrite();
  }

  void Close() {
    bool start = false;
    {
      absl::MutexLock lock(&mu_);
      if (closing_) return;
      closing_ = true;
      start = TakeNextWriteLocked();
    }
    if (start) StartNextWrite();
  }

  // Waits for OnDone to have returned; the stream's status.
  absl::Status Wait() {
    {
      // A std::mutex, which may be destroyed as soon as OnDone's unlock released it.
      std::unique_lock<std::mutex> lock(done_mu_);
      done_cv_.wait(lock, [this] { return done_; });
    }
    absl::MutexLock lock(&mu_);
    return final_status_;
  }

  // Cancels the call (Cancel(), or the stream's destruction).
  void Cancel() {
    {
      absl::MutexLock lock(&mu_);
      if (!finished_) cancelled_ = true;
    }
    context_->TryCancel();
    StopWrites();
  }

  size_t pending() const {
    absl::MutexLock lock(&mu_);
    return pending_.size();
  }

  bool ended() const {
    absl::MutexLock lock(&mu_);
    return finished_ || write_failed_;
  }

  void OnWriteDone(bool ok) override {
    bool start = false;
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      unsent_bytes_ -= writing_bytes_;
      if (!ok) {
        // The call is over; its requests were registered and OnDone fails them.
        write_failed_ = true;
        unsent_.clear();
        unsent_bytes_ = 0;
      } else {
        start = TakeNextWriteLocked();
      }
      release = ReleaseHoldLocked();
    }
    if (start) StartNextWrite();
    if (release) RemoveHold();
  }

  void OnWritesDoneDone(bool /*ok*/) override {}

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The call is over: no ack will come, and OnDone (which fails what is pending) may run
      // once no write is in flight.
      StopWrites();
      return;
    }
    AckCallback done;
    {
      absl::MutexLock lock(&mu_);
      auto it = pending_.find(ack_.sequence());
      if (it != pending_.end()) {  // else not ours (a server bug); nothing waits for it
        done = std::move(it->second);
        pending_.erase(it);
      }
    }
    if (done) {
      absl::Status status = FromProtoStatus(ack_.status());
      if (status.ok()) {
        done(internal::ToInsertResult(ack_));
      } else {
        done(std::move(status));
      }
    }
    StartRead(&ack_);
  }

  void OnDone(const grpc::Status& grpc_status) override {
    absl::Status status = FromGrpcStatus(grpc_status, *context_);
    std::map<uint64_t, AckCallback> unanswered;
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_ && status.code() == absl::StatusCode::kCancelled) {
        status = absl::CancelledError("InsertStream cancelled by the client");
      }
      // In the same critical section as `finished_`, so no Send registers after the swap.
      unanswered.swap(pending_);
      unsent_.clear();
      final_status_ = status;
      finished_ = true;
    }
    for (auto& [sequence, done] : unanswered) done(Unanswered(status, sequence));
    std::lock_guard<std::mutex> lock(done_mu_);
    done_ = true;
    done_cv_.notify_all();
  }

 private:
  // Claims the next write when none is in flight: moves the front of `unsent_` into `writing_`
  // (or decides on WritesDone once the queue is empty after Close). True when the caller must
  // call StartNextWrite, outside the lock.
  bool TakeNextWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || write_failed_ || stop_writes_ || !hold_) return false;
    if (unsent_.empty()) {
      if (!closing_ || writes_done_) return false;
      writes_done_ = true;
      next_is_writes_done_ = true;
      return true;
    }
    Unsent& next = unsent_.front();
    if (next.shared != nullptr) {
      in_flight_shared_ = std::move(next.shared);
      writing_message_ = in_flight_shared_.get();
    } else {
      in_flight_ = std::move(next.request);
      in_flight_shared_.reset();
      writing_message_ = &in_flight_;
    }
    writing_bytes_ = next.bytes;
    unsent_.pop_front();
    writing_ = true;
    // More requests are waiting: let gRPC buffer this one instead of flushing it alone.
    buffer_hint_ = !unsent_.empty();
    next_is_writes_done_ = false;
    return true;
  }

  // Starts what TakeNextWriteLocked claimed; the fields it set are this thread's until the write
  // completes.
  void StartNextWrite() {
    if (next_is_writes_done_) {
      StartWritesDone();
      StopWrites();
      return;
    }
    grpc::WriteOptions options;
    if (buffer_hint_) options.set_buffer_hint();
    StartWrite(writing_message_, options);
  }

  // No write starts from now on; the hold goes once none is in flight.
  void StopWrites() {
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      stop_writes_ = true;
      release = ReleaseHoldLocked();
    }
    if (release) RemoveHold();
  }

  // True once, when the hold is to be removed: no write will start again and none is in flight.
  bool ReleaseHoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!hold_ || writing_ || !(stop_writes_ || write_failed_)) return false;
    hold_ = false;
    return true;
  }

  grpc::ClientContext* const context_;
  v1::InsertAck ack_;  // the read in flight
  // The write in flight: an owned request, or one shared with the caller (Send of a
  // shared_ptr), which holds it until the request's outcome.
  v1::InsertRequest in_flight_;
  std::shared_ptr<v1::InsertRequest> in_flight_shared_;
  const v1::InsertRequest* writing_message_ = nullptr;
  bool buffer_hint_ = false;  // set with the write in flight
  bool next_is_writes_done_ = false;

  mutable absl::Mutex mu_;
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, AckCallback> pending_ ABSL_GUARDED_BY(mu_);
  std::deque<Unsent> unsent_ ABSL_GUARDED_BY(mu_);
  size_t unsent_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // including the write in flight
  size_t writing_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_writes_ ABSL_GUARDED_BY(mu_) = false;  // WritesDone sent, cancelled, or call over
  bool hold_ ABSL_GUARDED_BY(mu_) = true;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // no more acks; pending_ taken over
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);

  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool done_ = false;  // OnDone ran, and so did every callback (guarded by done_mu_)
};

InsertStream::InsertStream(std::unique_ptr<grpc::ClientContext> context, v1::Ingest::Stub* stub)
    : context_(std::move(context)), reactor_(std::make_unique<Reactor>(context_.get(), stub)) {}

InsertStream::~InsertStream() {
  reactor_->Cancel();
  (void)reactor_->Wait();  // OnDone has run: no callback touches the reactor any more
}

std::future<absl::StatusOr<InsertResult>> InsertStream::Send(v1::InsertRequest request) {
  return internal::FutureOf([&](AckCallback done) { Send(std::move(request), std::move(done)); });
}

void InsertStream::Send(v1::InsertRequest request, AckCallback done) {
  reactor_->Send(std::move(request), std::move(done));
}

void InsertStream::Send(std::shared_ptr<v1::InsertRequest> request, AckCallback done) {
  reactor_->Send(Reactor::Unsent{.shared = std::move(request)}, std::move(done));
}

absl::Status InsertStream::Close() {
  reactor_->Close();
  return reactor_->Wait();
}

void InsertStream::Cancel() { reactor_->Cancel(); }

size_t InsertStream::pending() const { return reactor_->pending(); }

bool InsertStream::ended() const { return reactor_->ended(); }

}  // namespace chgate::client
