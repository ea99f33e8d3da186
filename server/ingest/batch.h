// Batch: what one (table, column list) has waiting for its next INSERT. Rows of committed and
// accepted requests are buffered in memory as one block; persisted requests' rows are in the
// spool, and the batch queues only where (a spooled batch, apart from the in-memory one, so that a
// replay can make the same block again). Not thread-safe: the Ingestor holds its lock around
// every call.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/clickhouse/block.h"
#include "server/ingest/batch_traces.h"
#include "server/ingest/flush_delay.h"
#include "server/ingest/inserter.h"
#include "server/ingest/memory_budget.h"
#include "server/ingest/observer.h"
#include "server/ingest/request.h"
#include "server/ingest/spool_bridge.h"

namespace chgate::ingest {

struct BatchLimits {
  uint64_t max_rows = 100000;
  uint64_t max_bytes = 16 << 20;
  absl::Duration max_delay = absl::Milliseconds(200);
};

// A request from Submit to its outcome.
struct PendingRequest {
  std::string idempotency_key;  // scoped by identity and table, when there is one
  TableId table;
  std::string key;    // batch key
  std::string label;  // "db.table" for metrics
  std::vector<std::string> columns;
  std::shared_ptr<const TableSchema> schema;
  std::unique_ptr<clickhouse::Block> staged;  // its converted rows, until they join a batch
  uint64_t rows = 0;
  uint64_t bytes = 0;
  absl::Time received;
  absl::Time deadline;
  AckMode ack = AckMode::kCommitted;
  std::optional<text::TraceContext> trace;
  MemoryBudget::Reservation reservation;  // until the rows join a batch
  std::function<void()> on_admitted;
  std::function<void(Result)> on_done;
  bool done = false;
};

// An empty block laid out as `schema`.
std::unique_ptr<clickhouse::Block> EmptyBlock(const TableSchema& schema);

class Batch {
 public:
  Batch(std::string key, std::string label, TableId table, std::unique_ptr<FlushDelay> delay);
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  const std::string& key() const { return key_; }
  const std::string& label() const { return label_; }
  const TableId& table() const { return table_; }
  FlushDelay* delay() const { return delay_.get(); }
  // When it is due for a flush: its oldest row's age reaching the delay, or `margin` before the
  // earliest waiting caller's deadline. Never while empty.
  absl::Time Due(absl::Duration margin) const;
  // Whether the due time comes from a caller's deadline rather than the rows' age.
  bool DueByDeadline(absl::Duration margin) const;

  uint64_t rows() const { return rows_; }
  uint64_t bytes() const { return bytes_; }
  bool flushing = false;     // one flush in flight at most
  uint64_t table_bytes = 0;  // buffered + in flight, for the per-table budget

  // --- Rows in memory.
  const std::shared_ptr<const TableSchema>& schema() const { return schema_; }
  // Starts the block over, laid out as `schema` (the batch must be empty).
  void Relayout(std::shared_ptr<const TableSchema> schema);
  // Takes the request's converted rows (p->staged) into the batch, as they are: the flush sends
  // the requests' blocks as one block (clickhouse::BlockParts), from their own memory where the
  // columns allow it, else gathered into one on the flush thread, not under the caller's lock.
  // A committed-mode request waits in the batch for the commit; the others do not.
  void Append(const std::shared_ptr<PendingRequest>& p, absl::Time now);
  // The query id of the INSERT that will carry the rows buffered now: assigned with the first of
  // them (so an accepted-mode ack can name it), kept through the INSERT's retries. Unguessable
  // (128 random bits): a caller who may Query must not be able to take it first and make the
  // INSERT fail as "already running". Empty while nothing is buffered.
  const std::string& query_id() const { return query_id_; }
  // Everything buffered, for one INSERT; the batch is left empty.
  struct Contents {
    std::vector<std::unique_ptr<clickhouse::Block>> parts;  // in arrival order, laid out alike
    std::vector<std::shared_ptr<PendingRequest>> pendings;  // committed-mode requests in parts
    // Idempotency keys of the accepted-mode requests in parts: answered as done already, to be
    // forgotten if the INSERT fails and their rows are lost.
    std::vector<std::string> accepted_keys;
    std::string query_id;
    BatchTraces traces;
    // What the batch counted for the parts (their requests' bytes when admitted): what the
    // buffer and the table's budget release when the flush ends, whatever the INSERT's block
    // measures (a gathered LowCardinality column has a dictionary of its own).
    uint64_t rows = 0;
    uint64_t bytes = 0;
  };
  Contents Take();

  // --- Records in the spool (a spooled batch).
  bool spooled() const { return spooled_; }
  // The INSERT's column list, as the requests gave it.
  const std::vector<std::string>& columns() const { return columns_; }
  void MakeSpooled(const std::vector<std::string>& columns);
  void Queue(SpoolEntry entry);
  // Records written before their columns changed go back to the front, for the next INSERT.
  void Requeue(const std::vector<SpoolEntry>& later);
  bool HasSpooledWork() const { return !spool_queue_.empty() || !replays_.empty(); }
  // The next spooled INSERT: a replayed intent first, as it was; else the queued records up to
  // the limits (at least one). `*replay` says which.
  SpooledFlush TakeSpooled(const BatchLimits& limits, bool* replay);
  void AddReplay(SpooledFlush flush) { replays_.push_back(std::move(flush)); }
  bool HasReplays() const { return !replays_.empty(); }

 private:
  const std::string key_;
  const std::string label_;
  const TableId table_;
  const std::unique_ptr<FlushDelay> delay_;
  uint64_t rows_ = 0;
  uint64_t bytes_ = 0;
  absl::Time oldest_ = absl::InfiniteFuture();
  absl::Time earliest_deadline_ = absl::InfiniteFuture();
  std::shared_ptr<const TableSchema> schema_;
  std::vector<std::unique_ptr<clickhouse::Block>> parts_;
  std::vector<std::shared_ptr<PendingRequest>> pendings_;
  std::vector<std::string> accepted_keys_;
  std::string query_id_;
  BatchTraces traces_;
  bool spooled_ = false;
  std::vector<std::string> columns_;
  std::deque<SpoolEntry> spool_queue_;  // in LSN order
  std::deque<SpooledFlush> replays_;    // intents found at the start, sent first, as they were
};

}  // namespace chgate::ingest
