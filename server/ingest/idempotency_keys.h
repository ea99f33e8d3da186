// IdempotencyKeys: the recent requests' idempotency keys (in memory only). A repeat of a request
// in flight waits for its outcome; a repeat of a successful one gets its result at once; a failed
// request's key is forgotten, so a retry of it runs, and so is an acknowledged one whose rows were
// lost after all (an accepted-mode batch that failed). Successful keys are remembered for `window`
// and at most `max_keys` of them (the oldest are forgotten first).
//
// Thread-safe. Followers' callbacks are returned to the caller, never run under the lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/ingest/clock.h"
#include "server/ingest/request.h"
#include "text/identifier.h"

namespace chgate::ingest {

class IdempotencyKeys {
 public:
  // `clock` must outlive it.
  IdempotencyKeys(Clock* clock, absl::Duration window, size_t max_keys);

  // The key of `idempotency_key` scoped by the caller's identity and the table: one caller's key
  // never answers another's request, nor a request for another table.
  static std::string Scoped(std::string_view identity, const text::TableId& table,
                            std::string_view idempotency_key);

  enum class Claim {
    kOwner,      // the first with this key: the caller does the work and calls Finish
    kDone,       // a request with this key succeeded: *earlier is its result
    kFollowing,  // one is in flight: *on_done was taken and runs with its outcome
  };
  Claim Take(const std::string& key, std::function<void(Result)>* on_done, Result* earlier)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The owner's outcome: remembered if it succeeded, forgotten otherwise. Returns the followers'
  // callbacks, for the caller to run (with deduplicated = true) once it holds no lock.
  std::vector<std::function<void(Result)>> Finish(const std::string& key, const Result& result)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A request known to have succeeded (found in the spool at a restart), remembered from now, or
  // from `finished` (its window ends `window` after it; callers restoring several give them
  // oldest first).
  void RememberDone(const std::string& key, Result result) ABSL_LOCKS_EXCLUDED(mu_);
  void RememberDone(const std::string& key, Result result, absl::Time finished)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A request answered as done whose rows did not reach ClickHouse after all: a repeat of it
  // runs again instead of being answered "deduplicated". A key still in flight can only be that
  // request's own (its rows were lost before its answer was recorded): its Finish forgets it.
  void Forget(const std::string& key) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void RememberDoneLocked(const std::string& key, Result result, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Entry {
    bool done = false;
    bool lost = false;        // forgotten while in flight: Finish does not remember it
    uint64_t generation = 0;  // which DoneKey is this entry's, once done
    Result result;            // once done (success only)
    std::vector<std::function<void(Result)>> followers;  // repeats waiting for the outcome
  };
  // Keys of successful requests in the order they finished, which is the order they expire in
  // (one window for all): forgetting expired keys looks at the front only.
  // A key forgotten and claimed again leaves its old DoneKey behind: the generation tells it
  // from the entry's own, so that it never expires the new one.
  struct DoneKey {
    std::string key;
    absl::Time expires;
    uint64_t generation;
  };
  // Forgets the front DoneKey, and its key when the entry is still that generation's.
  void PopFrontLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock* const clock_;
  const absl::Duration window_;
  const size_t max_keys_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> keys_ ABSL_GUARDED_BY(mu_);
  std::deque<DoneKey> done_ ABSL_GUARDED_BY(mu_);
  uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace chgate::ingest
