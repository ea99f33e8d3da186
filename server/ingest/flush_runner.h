// FlushRunner: one in-memory batch's INSERT, from its identity to its log line. It sends the
// batch under its query id (its deduplication token too) with retries for as long
// as one of its callers still waits (rows acknowledged in accepted mode get every attempt the
// retry policy allows), converts it when the table changed under it, adapts the table's flush
// delay, and reports the outcome (metrics and one log line). The spooled counterpart is
// SpoolBridge::Send.
//
// Thread-safe and stateless: everything it changes belongs to the parts it is given.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/clickhouse/block.h"
#include "server/ingest/batch_traces.h"
#include "server/ingest/clock.h"
#include "server/ingest/observer.h"
#include "server/ingest/retry.h"
#include "server/ingest/schema_cache.h"

namespace chgate::ingest {

// Who waits for a batch's INSERT, and under which query id it goes (Batch::query_id).
struct BatchCallers {
  std::string query_id;
  size_t count = 0;           // committed-mode requests in the batch
  uint64_t waiting_rows = 0;  // their rows; the batch's other rows were acknowledged already
  absl::Time last_deadline = absl::InfinitePast();  // the latest of their deadlines
};

// How a batch's INSERT ended.
struct FlushOutcome {
  absl::Status status;   // with "(gave up after N attempts)" when it was retried
  std::string query_id;  // the INSERT's, when committed
  absl::Time end;
};

class FlushRunner {
 public:
  // Everything given must outlive the runner; `observer` may be null. `async_insert`: see
  // IngestOptions::async_insert.
  FlushRunner(const RetryPolicy& retry, bool async_insert, InsertRetrier* retrier,
              SchemaCache* schemas, Clock* clock, IngestObserver* observer);

  FlushOutcome Run(const InsertTarget& target, const clickhouse::BlockParts& block,
                   const BatchTraces& traces, const BatchCallers& callers, FlushReason reason);

 private:
  void Report(const InsertTarget& target, const absl::Status& status, const InsertAttempt& attempt,
              uint64_t rows, const BatchCallers& callers, const BatchTraces& traces,
              absl::Duration took);

  const RetryPolicy retry_;
  const bool async_insert_;
  InsertRetrier* const retrier_;
  SchemaCache* const schemas_;
  Clock* const clock_;
  IngestObserver* const observer_;
};

// The ack mode of a batch's rows, for log lines: committed (callers wait for the commit),
// accepted (already acknowledged), or mixed.
const char* BatchAckMode(uint64_t rows, uint64_t waiting_rows);

}  // namespace chgate::ingest
