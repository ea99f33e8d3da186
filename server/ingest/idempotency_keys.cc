#include "server/ingest/idempotency_keys.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace chgate::ingest {
namespace {

// Every part length-prefixed, so that no two different (identity, database, table, key) share
// one scoped key.
void AppendKeyPart(std::string_view part, std::string* key) {
  absl::StrAppend(key, part.size(), ":", absl::string_view(part.data(), part.size()));
}

}  // namespace

IdempotencyKeys::IdempotencyKeys(Clock* clock, absl::Duration window, size_t max_keys)
    : clock_(clock), window_(window), max_keys_(max_keys) {}

std::string IdempotencyKeys::Scoped(std::string_view identity, const text::TableId& table,
                                    std::string_view idempotency_key) {
  std::string key;
  AppendKeyPart(identity, &key);
  AppendKeyPart(table.database, &key);
  AppendKeyPart(table.table, &key);
  AppendKeyPart(idempotency_key, &key);
  return key;
}

IdempotencyKeys::Claim IdempotencyKeys::Take(const std::string& key,
                                             std::function<void(Result)>* on_done,
                                             Result* earlier) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  // Keys expire in the order they were done: only the front can be due.
  while (!done_.empty() && done_.front().expires <= now) PopFrontLocked();
  auto [it, inserted] = keys_.try_emplace(key);
  if (inserted) return Claim::kOwner;
  if (it->second.done) {
    *earlier = it->second.result;
    return Claim::kDone;
  }
  // Wait for the first request's outcome instead of inserting again.
  it->second.followers.push_back(std::move(*on_done));
  *on_done = nullptr;
  return Claim::kFollowing;
}

std::vector<std::function<void(Result)>> IdempotencyKeys::Finish(const std::string& key,
                                                                 const Result& result) {
  std::vector<std::function<void(Result)>> followers;
  absl::MutexLock lock(&mu_);
  auto it = keys_.find(key);
  if (it == keys_.end()) return followers;
  followers = std::move(it->second.followers);
  if (result.status.ok() && !it->second.lost) {
    RememberDoneLocked(key, result, clock_->Now());
  } else {
    keys_.erase(it);
  }
  return followers;
}

void IdempotencyKeys::RememberDone(const std::string& key, Result result) {
  absl::MutexLock lock(&mu_);
  RememberDoneLocked(key, std::move(result), clock_->Now());
}

void IdempotencyKeys::RememberDone(const std::string& key, Result result, absl::Time finished) {
  absl::MutexLock lock(&mu_);
  RememberDoneLocked(key, std::move(result), std::min(finished, clock_->Now()));
}

void IdempotencyKeys::RememberDoneLocked(const std::string& key, Result result, absl::Time now) {
  Entry& entry = keys_[key];
  entry.done = true;
  entry.generation = next_generation_++;
  entry.result = std::move(result);
  entry.followers.clear();
  done_.push_back({key, now + window_, entry.generation});
  // Bounded: beyond the cap the oldest keys are forgotten before their window ends.
  while (done_.size() > max_keys_) PopFrontLocked();
}

void IdempotencyKeys::Forget(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = keys_.find(key);
  if (it == keys_.end()) return;
  if (!it->second.done) {
    // The answer is on its way (an accepted ack runs after its rows joined the batch): it must
    // not be remembered.
    it->second.lost = true;
    return;
  }
  // Its DoneKey stays in the queue until due; the generation keeps it from touching a later claim.
  keys_.erase(it);
}

void IdempotencyKeys::PopFrontLocked() {
  const DoneKey& front = done_.front();
  auto it = keys_.find(front.key);
  if (it != keys_.end() && it->second.done && it->second.generation == front.generation) {
    keys_.erase(it);
  }
  done_.pop_front();
}

}  // namespace chgate::ingest
