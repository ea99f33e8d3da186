// How the ingest path judges ClickHouse's errors and retries INSERTs: which errors are worth
// another attempt, which say the table changed, which say the rows themselves can never go in;
// exponential backoff with full jitter; and InsertRetrier, the loop that sends one block until
// ClickHouse commits it, refuses it for good, or time runs out.
#pragma once

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/clickhouse/block.h"
#include "server/ingest/clock.h"
#include "server/ingest/flush_delay.h"
#include "server/ingest/inserter.h"
#include "server/ingest/observer.h"
#include "server/ingest/schema_cache.h"
#include "server/log/log.h"

namespace chgate::ingest {

struct RetryPolicy {
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
  // Retries stop this long after the first attempt (and at the latest deadline of the batch's
  // callers: none is left waiting after it).
  absl::Duration max_elapsed = absl::Seconds(60);
};

// Whether another attempt may succeed: connection errors, timeouts and the server's transient
// refusals (too many parts or queries, memory, read-only replicas, ZooKeeper away).
bool IsRetryable(const absl::Status& status);
// Whether a failed insert (or header lookup) says the table is not what its cached header
// described.
bool IsTableChangeError(const absl::Status& status);
// Whether ClickHouse (or chgate's own check against the INSERT's header) refused the rows
// themselves: the block can never be inserted into the table as it is now. For spooled batches
// these are the only errors that end in the dead-letter directory; everything else (space,
// ZooKeeper, permissions, a missing table, quotas, read-only replicas, timeouts) is something
// the server or its operator can fix, and is retried without end.
bool IsDataError(const absl::Status& status);
// The `code` field of log lines: the ClickHouse error code, or the status code's name.
std::string ErrorCodeLabel(const absl::Status& status);
// The backoff before attempt `attempt + 1` without jitter: initial x 2^(attempt-1), capped.
absl::Duration BackoffCap(const RetryPolicy& policy, int attempt);

// Where a block goes, and how its retries are reported.
struct InsertTarget {
  const std::string& label;  // "db.table"
  const TableId& table;
  // A spooled batch (persisted rows): no caller waits, so each attempt gets
  // RetryPolicy::max_elapsed and only data errors end the retries.
  bool spooled = false;
  FlushDelay* delay = nullptr;  // raised at once at the first TOO_MANY_PARTS (may be null)
};

class InsertRetrier {
 public:
  // `inserter` and `clock` must outlive it; `observer` may be null.
  InsertRetrier(RetryPolicy policy, Inserter* inserter, Clock* clock, IngestObserver* observer);

  // The INSERT of `block` with retries (backoff with full jitter) while the status is retryable
  // and the clock is before stop_at(); `fields` adds the batch's own fields to the retry log
  // lines. At the first TOO_MANY_PARTS it sets *too_many_parts and raises the target's delay.
  absl::Status Insert(const InsertTarget& target, const clickhouse::BlockParts& block,
                      InsertAttempt& attempt, const std::function<absl::Time()>& stop_at,
                      const std::function<void(std::vector<log::Field>*)>& fields,
                      bool* too_many_parts);

  // What to do when ClickHouse refuses a block because its table changed after the rows were
  // checked against it.
  struct OnTableChange {
    const char* converted_line;  // logged when the block goes again, converted
    // A block the new header cannot take unchanged: ABORTED ("resend them") instead of the
    // server's refusal (for callers whose rows were valid when checked).
    bool abort_unconvertible = false;
  };
  // Insert, and when the table changed under the block (a data error that is a table change),
  // `schemas` forgets the table and the block goes again, converted to the table's new header,
  // where nothing is lost (see ConvertToChangedTable). A refusal with the header unchanged is
  // about the rows and stays as it is. When ClickHouse does not describe the table before
  // stop_at(), the answer is Unavailable: nothing is known against the rows.
  absl::Status InsertConverting(const InsertTarget& target, const clickhouse::BlockParts& block,
                                InsertAttempt& attempt, const std::function<absl::Time()>& stop_at,
                                const std::function<void(std::vector<log::Field>*)>& fields,
                                bool* too_many_parts, SchemaCache* schemas,
                                const OnTableChange& on_change);

  // A backoff drawn with full jitter for attempt `attempt` (uniform in [0, BackoffCap)).
  absl::Duration Jittered(int attempt) ABSL_LOCKS_EXCLUDED(mu_);

  const RetryPolicy& policy() const { return policy_; }

 private:
  const RetryPolicy policy_;
  Inserter* const inserter_;
  Clock* const clock_;
  IngestObserver* const observer_;
  absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chgate::ingest
