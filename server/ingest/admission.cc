#include "server/ingest/admission.h"

#include <algorithm>
#include <utility>

#include "server/log/log.h"

namespace chgate::ingest {
namespace {

constexpr log::Component kLog("ingest");

}  // namespace

Admission::Admission(Options options, MemoryBudget* budget, IngestObserver* observer)
    : options_(options), budget_(budget), observer_(observer) {}

void Admission::Wait(std::shared_ptr<PendingRequest> p) {
  absl::MutexLock lock(&mu_);
  waiting_.push_back(std::move(p));
  PublishWaitingLocked();
}

std::shared_ptr<PendingRequest> Admission::Front() const {
  absl::MutexLock lock(&mu_);
  return waiting_.empty() ? nullptr : waiting_.front();
}

std::shared_ptr<PendingRequest> Admission::TakeFrontIfFits(const PendingRequest& front,
                                                           uint64_t table_bytes) {
  absl::MutexLock lock(&mu_);
  if (waiting_.empty() || waiting_.front().get() != &front) return nullptr;
  const PendingRequest& p = *waiting_.front();
  const bool fits_global =
      buffered_bytes_ == 0 || buffered_bytes_ + p.bytes <= options_.buffer_limit;
  const bool fits_table = options_.table_budget_bytes == 0 || table_bytes == 0 ||
                          table_bytes + p.bytes <= options_.table_budget_bytes;
  if (!fits_global || !fits_table) {
    kLog.Throttled(log::Level::kWarn, "memory budget full; callers wait",
                   fits_global ? p.label : "",
                   {{"budget", fits_global ? "table" : "global"},
                    {"table", p.label},
                    {"waiting_callers", waiting_.size()},
                    {"buffered_bytes", fits_global ? table_bytes : buffered_bytes_},
                    {"budget_bytes",
                     fits_global ? options_.table_budget_bytes : options_.memory_budget_bytes}});
    return nullptr;
  }
  std::shared_ptr<PendingRequest> taken = std::move(waiting_.front());
  waiting_.pop_front();
  return taken;
}

void Admission::PutBack(std::shared_ptr<PendingRequest> p) {
  absl::MutexLock lock(&mu_);
  waiting_.push_front(std::move(p));
}

std::vector<std::shared_ptr<PendingRequest>> Admission::Expire(absl::Time now,
                                                               absl::Duration margin) {
  std::vector<std::shared_ptr<PendingRequest>> expired;
  absl::MutexLock lock(&mu_);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->deadline - margin <= now) {
      expired.push_back(std::move(*it));
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  if (!expired.empty()) PublishWaitingLocked();
  return expired;
}

std::vector<std::shared_ptr<PendingRequest>> Admission::TakeAll() {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<PendingRequest>> all(std::make_move_iterator(waiting_.begin()),
                                                   std::make_move_iterator(waiting_.end()));
  waiting_.clear();
  if (!all.empty()) PublishWaitingLocked();
  return all;
}

absl::Time Admission::NextDeadline(absl::Duration margin) const {
  absl::MutexLock lock(&mu_);
  absl::Time next = absl::InfiniteFuture();
  for (const auto& p : waiting_) next = std::min(next, p->deadline - margin);
  return next;
}

void Admission::Buffer(PendingRequest& p) {
  budget_->AddBuffered(p.bytes);
  p.reservation.Release();
  absl::MutexLock lock(&mu_);
  buffered_bytes_ += p.bytes;
  buffered_rows_ += p.rows;
  if (observer_ != nullptr) observer_->Buffered(buffered_rows_, buffered_bytes_);
  PublishWaitingLocked();
}

void Admission::Release(uint64_t rows, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  buffered_bytes_ -= bytes;
  buffered_rows_ -= rows;
  budget_->RemoveBuffered(bytes);
  if (observer_ != nullptr) observer_->Buffered(buffered_rows_, buffered_bytes_);
}

bool Admission::Full() const {
  absl::MutexLock lock(&mu_);
  const double used = static_cast<double>(buffered_bytes_);
  const double limit = static_cast<double>(options_.buffer_limit);
  if (used >= options_.ready_high_water * limit) {
    above_high_water_ = true;
  } else if (used < options_.ready_low_water * limit) {
    above_high_water_ = false;
  }
  return above_high_water_;
}

Admission::Counts Admission::counts() const {
  absl::MutexLock lock(&mu_);
  return {.buffered_rows = buffered_rows_,
          .buffered_bytes = buffered_bytes_,
          .waiting = waiting_.size()};
}

void Admission::PublishWaitingLocked() const {
  if (observer_ != nullptr) observer_->WaitingRequests(waiting_.size());
}

}  // namespace chgate::ingest
