// What the Ingestor reports as it works, as plain calls: server/metrics turns them into
// Prometheus series (metrics::IngestMetricsObserver), tests record them. The ingest module knows
// nothing of Prometheus. Calls come from any of the Ingestor's threads, some with its lock (or
// Admission's) held: an observer must be thread-safe, quick, take no lock of chgate's and must
// not call back into the Ingestor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace chgate::ingest {

// When a request is acknowledged: once its rows are committed in ClickHouse, once they are
// buffered in memory, or once they are durable in the local spool.
enum class AckMode { kCommitted, kAccepted, kPersisted };

// Why a table's batch was flushed.
enum class FlushReason {
  kRows,      // --batch-max-rows reached
  kBytes,     // --batch-max-bytes reached
  kAge,       // the oldest row is --batch-max-delay old
  kDeadline,  // a waiting caller's deadline is near
  kShutdown,  // the drain on SIGTERM
  kReplay,    // re-sent from the spool after a restart, as it was before (its batch intent)
};

// Why rows were lost without their caller learning it.
enum class DropReason {
  kAcceptedFlushFailed,  // acknowledged in accepted mode, then their flush failed for good
  kShutdown,             // still buffered when the shutdown drain ended
  kSpoolDeadLetter,      // persisted, then refused by ClickHouse for good: kept in the spool's
                         // dead-letter directory, not in the table
  kSpoolDamaged,         // persisted, then unreadable in the spool (bytes damaged on disk)
};

class IngestObserver {
 public:
  virtual ~IngestObserver() = default;

  // At start: the whole memory budget and the share rows may be buffered in.
  virtual void Budgets(uint64_t memory_budget_bytes, uint64_t buffer_budget_bytes) = 0;
  // A table's first batch was made; `max_delay` is its configured flush delay.
  virtual void TableStarted(const std::string& table, absl::Duration max_delay) = 0;
  // A request ended. `table` is "db.table", or "" when the request was refused before its
  // table was known; `acked` says what an OK status acknowledged.
  virtual void RequestDone(const std::string& table, const absl::Status& status, AckMode acked,
                           uint64_t rows) = 0;
  // A committed request's rows were committed `latency` after the request arrived.
  virtual void CommitLatency(const std::string& table, absl::Duration latency) = 0;
  // A request was refused because the memory budget was full (RequestDone follows as well).
  virtual void MemoryRefused() = 0;
  // A batch's INSERT ended, committed or failed for good, after `took` (retries included).
  virtual void BatchFlushed(const std::string& table, FlushReason reason, uint64_t rows,
                            uint64_t bytes, absl::Duration took) = 0;
  // A flush attempt failed and will be retried.
  virtual void FlushRetry(const std::string& table) = 0;
  // A batch failed for good with `status`; `clickhouse_code` is the ClickHouse exception's code
  // when the server refused it.
  virtual void FlushFailed(const std::string& table, const absl::Status& status,
                           std::optional<int32_t> clickhouse_code) = 0;
  virtual void RowsDropped(const std::string& table, DropReason reason, uint64_t rows) = 0;
  // The table's flush delay changed (adaptive delay, IngestOptions::max_delay_ceiling).
  virtual void DelayChanged(const std::string& table, absl::Duration delay) = 0;
  // Totals now: rows and bytes buffered, requests waiting for buffer room, bytes held by
  // requests being converted or waiting.
  virtual void Buffered(uint64_t rows, uint64_t bytes) = 0;
  virtual void WaitingRequests(size_t requests) = 0;
  virtual void RequestBytes(uint64_t bytes) = 0;
  // Records of persisted requests found in the spool at start, to be sent again.
  virtual void SpoolReplayed(uint64_t records) = 0;
  // How many seconds of a Replicated table's INSERTs (from every writer) its block
  // deduplication window covers (see Ingestor's check at a table's first spooled flush).
  virtual void DedupWindowCovers(const std::string& table, double seconds) {
    (void)table;
    (void)seconds;
  }
};

}  // namespace chgate::ingest
