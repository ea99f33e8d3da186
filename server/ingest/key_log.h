// KeyLog: the idempotency keys of persisted requests whose rows ClickHouse committed, kept on disk
// for the key window, so that a caller who resends such a request after chgate restarted (it saw
// no answer: the connection broke, or chgate was killed) is answered "deduplicated" instead of
// having its rows inserted twice.
//
// A persisted request's key is in its own spool record while that record waits; once the record
// is committed, its segment may be deleted at any time, and with it the key. So before a batch's
// records are marked committed, the keys its requests carried are appended (and synced) to a
// spool of their own (`<spool-dir>/keys`), one record per batch. A record of that spool is marked
// committed (its segment may go) once its keys are past the window, or once more than `max_keys`
// keys are newer than it. At a start, Recover hands back the keys still within the window.
//
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/ingest/clock.h"
#include "server/spool/spool.h"

namespace chgate::ingest {

class KeyLog {
 public:
  // A committed request's scoped key (IdempotencyKeys::Scoped) and its rows.
  struct Key {
    std::string key;
    uint64_t rows = 0;
  };
  struct RecoveredKey {
    Key key;
    absl::Time committed;
  };

  // `spool` (the keys' own) and `clock` must outlive it.
  KeyLog(spool::Spool* spool, Clock* clock, absl::Duration window, size_t max_keys);
  KeyLog(const KeyLog&) = delete;
  KeyLog& operator=(const KeyLog&) = delete;

  // Takes the records the keys' spool handed back at open: returns the keys committed within
  // the window, oldest first, and marks the others (and unreadable records) committed.
  std::vector<RecoveredKey> Recover(const std::vector<spool::SpoolRecord>& records)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Writes `keys` as committed now and waits until they are durable; then lets records past the
  // window or the key bound go.
  absl::Status Record(const std::vector<Key>& keys) ABSL_LOCKS_EXCLUDED(mu_);

  // The payload of one record, and back (InvalidArgument for anything malformed).
  static std::string Encode(absl::Time committed, const std::vector<Key>& keys);
  static absl::StatusOr<std::pair<absl::Time, std::vector<Key>>> Decode(std::string_view payload);

 private:
  struct Live {
    uint64_t lsn = 0;
    absl::Time committed;
    size_t keys = 0;
  };
  // Marks the records that left the window or the bound committed.
  void Expire() ABSL_LOCKS_EXCLUDED(mu_);

  spool::Spool* const spool_;
  Clock* const clock_;
  const absl::Duration window_;
  const size_t max_keys_;
  absl::Mutex mu_;
  // In the order their writes returned (concurrent flushes may swap neighbours; expiring by the
  // front only then keeps a record a moment longer, never shorter).
  std::deque<Live> live_ ABSL_GUARDED_BY(mu_);
  size_t live_keys_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace chgate::ingest
