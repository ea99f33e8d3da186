#include "server/ingest/flush_runner.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/common/failpoint.h"
#include "server/log/log.h"

namespace chgate::ingest {
namespace {
constexpr log::Component kLog("ingest");
}  // namespace

const char* BatchAckMode(uint64_t rows, uint64_t waiting_rows) {
  if (waiting_rows == rows) return "committed";
  return waiting_rows == 0 ? "accepted" : "mixed";
}

FlushRunner::FlushRunner(const RetryPolicy& retry, bool async_insert, InsertRetrier* retrier,
                         SchemaCache* schemas, Clock* clock, IngestObserver* observer)
    : retry_(retry),
      async_insert_(async_insert),
      retrier_(retrier),
      schemas_(schemas),
      clock_(clock),
      observer_(observer) {}

FlushOutcome FlushRunner::Run(const InsertTarget& target, const clickhouse::BlockParts& block,
                              const BatchTraces& traces, const BatchCallers& callers,
                              FlushReason reason) {
  const absl::Time start = clock_->Now();
  // Attempts go on while some caller of the batch still waits: a caller whose deadline passed
  // (it already has its DEADLINE_EXCEEDED) must not cut short the others' flush. Rows acknowledged
  // in accepted mode have no caller waiting: they get every attempt --retry-max-elapsed allows.
  const absl::Time last_deadline =
      block.rows() > callers.waiting_rows ? absl::InfiniteFuture() : callers.last_deadline;
  const absl::Time stop_at = std::min(start + retry_.max_elapsed, last_deadline);
  InsertAttempt attempt;
  attempt.query_id = callers.query_id;
  attempt.deduplication_key = attempt.query_id;
  attempt.trace = traces.first;
  attempt.async = async_insert_;
  bool too_many_parts = false;
  failpoint::Stall("flush_stalled");  // a flush thread wedged before its INSERT (tests only)
  const auto batch_fields = [&](std::vector<log::Field>* fields) {
    fields->emplace_back("callers", callers.count);
    fields->emplace_back("ack_mode", BatchAckMode(block.rows(), callers.waiting_rows));
    traces.AppendFields(fields);
  };
  // Rows valid when checked against the table's header go in converted to its new columns
  // where that loses nothing; otherwise the callers learn that the table changed (ABORTED:
  // resend against the new table), never that their rows were invalid.
  absl::Status status = retrier_->InsertConverting(
      target, block, attempt, [stop_at] { return stop_at; }, batch_fields, &too_many_parts,
      schemas_,
      {.converted_line = "table changed: batch converted to its new columns",
       .abort_unconvertible = true});
  const absl::Time end = clock_->Now();
  if (!too_many_parts && target.delay != nullptr) {
    target.delay->Adapt(false, end - start, attempt.attempt);
  }
  if (!status.ok()) {
    if (attempt.attempt > 1) {
      status = absl::Status(status.code(), absl::StrCat(status.message(), " (gave up after ",
                                                        attempt.attempt, " attempts)"));
    }
    // The table changed under the batch (dropped, column removed or retyped): the next request
    // asks the server for its header again.
    if (IsTableChangeError(status)) schemas_->Forget(target.table);
  }
  if (observer_ != nullptr) {
    observer_->BatchFlushed(target.label, reason, block.rows(), block.ByteSize(), end - start);
    if (!status.ok()) {
      observer_->FlushFailed(target.label, status, clickhouse::ClickHouseCode(status));
    }
  }
  Report(target, status, attempt, block.rows(), callers, traces, end - start);
  return {.status = status, .query_id = status.ok() ? attempt.query_id : "", .end = end};
}

void FlushRunner::Report(const InsertTarget& target, const absl::Status& status,
                         const InsertAttempt& attempt, uint64_t rows, const BatchCallers& callers,
                         const BatchTraces& traces, absl::Duration took) {
  // Failures and retried commits always; a first-attempt commit only for a traced caller (where
  // its rows went: the INSERT's query id, in the trace's terms), at debug level.
  if (status.ok() && attempt.attempt == 1 && !traces.first.has_value()) return;
  std::vector<log::Field> fields{{"table", target.label},
                                 {"batch_id", attempt.query_id},
                                 {"attempts", attempt.attempt},
                                 {"rows", rows},
                                 {"callers", callers.count}};
  if (!status.ok()) {
    fields.insert(fields.end(), {{"ack_mode", BatchAckMode(rows, callers.waiting_rows)},
                                 {"rows_dropped", rows - callers.waiting_rows},
                                 {"retryable", IsRetryable(status)},
                                 {"code", ErrorCodeLabel(status)},
                                 {"error", status.message()}});
  } else if (attempt.attempt > 1) {
    fields.emplace_back("elapsed", absl::Trunc(took, absl::Milliseconds(1)));
  }
  traces.AppendFields(&fields);
  if (!status.ok()) {
    // Rows lost (acknowledged in accepted mode), or a failure that is the operator's (ClickHouse
    // unreachable, overloaded): an error. Rows refused for what they hold, every caller told: a
    // warning (the callers have the error; the operator has nothing to mend).
    const log::Level level =
        rows > callers.waiting_rows || IsRetryable(status) ? log::Level::kError : log::Level::kWarn;
    kLog.Throttled(level, "batch failed", target.label, fields);
  } else if (attempt.attempt > 1) {
    kLog.Throttled(log::Level::kInfo, "batch committed after retries", target.label, fields);
  } else {
    kLog.Debug("batch committed", fields);
  }
}

}  // namespace chgate::ingest
