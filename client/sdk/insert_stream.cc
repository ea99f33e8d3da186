#include "client/sdk/insert_stream.h"

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

InsertStream::InsertStream(std::unique_ptr<grpc::ClientContext> context,
                           std::unique_ptr<Stream> stream)
    : context_(std::move(context)), stream_(std::move(stream)) {
  reader_ = std::thread([this] { ReadAcks(); });
}

InsertStream::~InsertStream() {
  {
    absl::MutexLock lock(&mu_);
    if (!finished_) cancelled_ = true;
  }
  context_->TryCancel();
  if (reader_.joinable()) reader_.join();
}

std::future<absl::StatusOr<InsertResult>> InsertStream::Send(v1::InsertRequest request) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<InsertResult>>>();
  std::future<absl::StatusOr<InsertResult>> future = promise->get_future();
  Send(std::move(request),
       [promise](absl::StatusOr<InsertResult> result) { promise->set_value(std::move(result)); });
  return future;
}

void InsertStream::Send(v1::InsertRequest request, AckCallback done) {
  uint64_t sequence = 0;
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    if (finished_) {
      refused =
          final_status_.ok()
              ? absl::FailedPreconditionError("InsertStream already ended")
              : absl::Status(final_status_.code(),
                             absl::StrCat("InsertStream already ended: ", final_status_.message()));
    } else if (closing_) {
      refused = absl::FailedPreconditionError("InsertStream is closed");
    } else {
      sequence = next_sequence_++;
      // Registered before the write, so the ack can never arrive before its entry exists.
      pending_.emplace(sequence, std::move(done));
    }
  }
  if (!refused.ok()) {
    done(std::move(refused));
    return;
  }
  request.set_sequence(sequence);
  {
    absl::MutexLock lock(&write_mu_);
    if (!writes_done_ && !call_over_) {
      // A failed write means the call is over; the reader thread sees the end and fails every
      // pending request (this one included) with the stream's status.
      (void)stream_->Write(request);
      return;
    }
  }
  // Close() half-closed the stream, or the call ended, between the registration above and this
  // write.
  AckCallback unsent;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(sequence);
    if (it == pending_.end()) return;  // the reader thread already failed it
    unsent = std::move(it->second);
    pending_.erase(it);
  }
  unsent(absl::FailedPreconditionError("InsertStream is closed or ended"));
}

absl::Status InsertStream::Close() {
  bool first = false;
  {
    absl::MutexLock lock(&mu_);
    first = !closing_;
    closing_ = true;
  }
  if (first) {
    absl::MutexLock lock(&write_mu_);
    writes_done_ = true;
    if (!call_over_) (void)stream_->WritesDone();
  }
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&drained_));
  return final_status_;
}

void InsertStream::Cancel() {
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
  }
  context_->TryCancel();
}

size_t InsertStream::pending() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

void InsertStream::ReadAcks() {
  v1::InsertAck ack;
  while (stream_->Read(&ack)) {
    AckCallback done;
    {
      absl::MutexLock lock(&mu_);
      auto it = pending_.find(ack.sequence());
      if (it == pending_.end()) continue;  // not ours (a server bug); nothing waits for it
      done = std::move(it->second);
      pending_.erase(it);
    }
    absl::Status status = FromProtoStatus(ack.status());
    if (status.ok()) {
      done(internal::ToInsertResult(ack));
    } else {
      done(std::move(status));
    }
  }
  absl::Status status;
  {
    // Not concurrently with a Write: a writer blocked by flow control returns as soon as the call
    // is over, which it is once Read returned false.
    absl::MutexLock lock(&write_mu_);
    call_over_ = true;
    status = FromGrpcStatus(stream_->Finish(), *context_);
  }
  std::map<uint64_t, AckCallback> unanswered;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_ && status.code() == absl::StatusCode::kCancelled) {
      status = absl::CancelledError("InsertStream cancelled by the client");
    }
    // In the same critical section as `finished_`, so no Send registers after the swap.
    unanswered.swap(pending_);
    final_status_ = status;
    finished_ = true;
  }
  for (auto& [sequence, done] : unanswered) done(Unanswered(status, sequence));
  absl::MutexLock lock(&mu_);
  drained_ = true;
}

}  // namespace chgate::client
