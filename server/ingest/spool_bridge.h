// SpoolBridge: the persisted ack mode between the Ingestor and the spool. It writes persisted
// requests' rows to the spool (keeping recent blocks in memory for their INSERT while the cache
// has room), sends a table's spooled records as one INSERT under a durable intent (the same block
// under the same identity after any restart), marks them committed, moves batches ClickHouse can
// never take to the dead-letter directory, and reads the spool back at a start.
//
// The Ingestor owns the spooled batches (which records wait, which flush is in flight); the
// bridge owns what touches the spool and ClickHouse for them. Thread-safe: its only mutable
// state, the cache's byte count and when each table's deduplication window is looked at next,
// is atomic or behind its own lock, which is never held while calling out.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/clickhouse/block.h"
#include "server/clickhouse/block_parts.h"
#include "server/ingest/clock.h"
#include "server/ingest/flush_delay.h"
#include "server/ingest/inserter.h"
#include "server/ingest/key_log.h"
#include "server/ingest/memory_budget.h"
#include "server/ingest/observer.h"
#include "server/ingest/retry.h"
#include "server/ingest/schema_cache.h"
#include "server/spool/spool.h"

namespace chgate::ingest {

class SpoolBridge;
struct SpoolRecordHeader;  // spool_record.h

// A persisted request's converted block, kept after its sync so its INSERT need not read it back;
// gives its bytes back to the cache and the memory budget when the last entry holding it goes.
struct CachedBlock {
  CachedBlock(SpoolBridge* owner, std::unique_ptr<clickhouse::Block> b, uint64_t n)
      : bridge(owner), block(std::move(b)), bytes(n) {}
  ~CachedBlock();
  CachedBlock(const CachedBlock&) = delete;
  CachedBlock& operator=(const CachedBlock&) = delete;
  SpoolBridge* bridge;
  std::unique_ptr<clickhouse::Block> block;
  uint64_t bytes;
};

// A persisted request's record in the spool, queued for its table's spooled batch.
struct SpoolEntry {
  uint64_t lsn = 0;
  uint64_t rows = 0;
  uint64_t bytes = 0;  // of the record's payload
  absl::Time appended;
  std::shared_ptr<const CachedBlock> cached;  // the block itself, when kept in memory
  std::string key;                            // the request's scoped idempotency key, or ""
};

// The records of one spooled INSERT, and its intent once written (0: not yet).
struct SpooledFlush {
  std::vector<SpoolEntry> entries;
  uint64_t intent_lsn = 0;
  // Records of a replayed intent that could not be read back (then nothing is sent).
  std::vector<uint64_t> unreadable;
};

// The table a spooled batch goes to.
struct SpoolTarget {
  const std::string& label;  // "db.table"
  const TableId& table;
  const std::vector<std::string>& columns;  // the INSERT's column list, as the requests gave it
  FlushDelay* delay = nullptr;
};

// How one spooled INSERT ended.
struct SpooledOutcome {
  bool sent = false;  // an INSERT was attempted
  absl::Status status;
  uint64_t rows = 0;       // in the block sent
  uint64_t committed = 0;  // rows ClickHouse committed
  uint64_t lost_rows = 0;  // of records that could not be read back
  // Rows moved to the dead-letter directory (refused by ClickHouse for their data, or a damaged
  // intent's readable records).
  uint64_t dead_lettered = 0;
  // Rows of this flush's records still pending in the spool after it: the drain ended (or the
  // spool closed) before they were settled, or they could not be set aside. They go out after
  // the next start.
  uint64_t left_rows = 0;
  uint64_t bytes = 0;  // of the block sent
  // Records whose columns differ from the first's: the table changed between their requests;
  // they go in the next INSERT.
  std::vector<SpoolEntry> later;
};

// What Recover found in the spool.
struct RecoverySummary {
  uint64_t records = 0;          // pending row records
  uint64_t rows = 0;             // in them
  uint64_t intents = 0;          // batches to re-send exactly as they were (sent before the crash)
  uint64_t unreadable = 0;       // records that could not be read back (counted as lost)
  uint64_t orphaned = 0;         // intent entries whose row records are gone
  uint64_t damaged_intents = 0;  // intents with some records gone: set aside, not sent
};

// The spool's pending records, sorted for their tables' spooled batches.
struct RecoveryPlan {
  struct Table {
    TableId table;
    std::vector<std::string> columns;
  };
  struct Replay {
    Table to;
    SpooledFlush flush;
  };
  struct Queued {
    Table to;
    SpoolEntry entry;
  };
  // A persisted request's idempotency key (scoped) and its rows.
  struct Key {
    std::string idempotency_key;
    uint64_t rows = 0;
  };
  RecoverySummary summary;
  std::vector<Replay> replays;  // intents to send again as they were, in LSN order
  std::vector<Replay> damaged;  // intents some of whose records are gone: to set aside
  std::vector<Queued> queued;   // records without an intent, in LSN order
  // The keys of every readable pending record, queued or in an intent: their requests were
  // acknowledged, so a resend under the same key is answered, not spooled again.
  std::vector<Key> keys;
};

class SpoolBridge {
 public:
  struct Options {
    spool::Spool* spool = nullptr;
    std::string spool_id;  // a spooled batch's identity is `<spool_id>-<intent LSN>`
    // Where the keys of a committed batch's requests are written before its records are marked
    // committed; null: they are not kept beyond the records.
    KeyLog* key_log = nullptr;
    uint64_t cache_bytes = 0;  // blocks kept in memory after their sync, at most
    RetryPolicy retry;
  };
  // Everything given must outlive the bridge; `observer` may be null.
  SpoolBridge(Options options, MemoryBudget* budget, InsertRetrier* retrier, SchemaCache* schemas,
              Inserter* inserter, Clock* clock, IngestObserver* observer);
  SpoolBridge(const SpoolBridge&) = delete;
  SpoolBridge& operator=(const SpoolBridge&) = delete;

  // A persisted request's record, encoded, with its block kept in the cache when there is room.
  struct Record {
    std::string payload;
    std::shared_ptr<const CachedBlock> cached;
    uint64_t rows = 0;
    std::string key;  // the request's scoped idempotency key, or ""
  };
  Record Encode(const TableId& table, const std::vector<std::string>& columns,
                const std::string& idempotency_key, std::unique_ptr<clickhouse::Block> block);
  // Appends the record; `done` runs on the spool's completion thread with its entry once it is
  // durable (or the error). An error returned here means `done` never runs.
  absl::Status Append(Record record, std::function<void(absl::StatusOr<SpoolEntry>)> done);

  // One INSERT of `flush`'s records: reads them (`want_later`: a new flush, which may stop at a
  // change of columns), makes the intent durable (unless re-sending one), sends the block until
  // ClickHouse commits it, refuses it for good, or stop_at() passes; then marks the records
  // committed or moves them to the dead-letter directory. A replayed intent some of whose records
  // cannot be read is set aside whole, never sent smaller.
  SpooledOutcome Send(const SpoolTarget& target, SpooledFlush& flush, FlushReason reason,
                      const std::function<absl::Time()>& stop_at);
  // Sets aside a replayed intent some of whose records are unreadable or gone: its readable
  // records go to the dead-letter directory with the intent; the loss is logged with the LSNs.
  // Returns the readable rows set aside, or nullopt when they could not be (they stay pending).
  std::optional<uint64_t> SetAsideDamagedIntent(const SpoolTarget& target,
                                                const SpooledFlush& flush);

  // Sorts the records the spool's Open handed back (headers only; payloads are read as needed).
  // Unreadable records and intents without any record are marked committed here.
  RecoveryPlan Plan(const std::vector<spool::SpoolRecord>& records, absl::Time now);

  spool::Spool* spool() const { return options_.spool; }

 private:
  friend struct CachedBlock;

  // The flush's readable records as one block. Unreadable records are lost (a new flush) or make
  // the intent damaged (a replay); an error that may pass (not DataLoss or NotFound: a file that
  // cannot be opened now, an I/O error) is retried with backoff until stop_at(), and then leaves
  // the whole flush in the spool (outcome->left_rows, and an empty block).
  clickhouse::BlockParts Read(const SpoolTarget& target, SpooledFlush& flush,
                              const std::function<absl::Time()>& stop_at, SpooledOutcome* outcome);
  // The block of one of a flush's entries: the one kept since its sync, or its record read back
  // and decoded into `*decoded`. DataLoss or NotFound: the record is unreadable (or not a rows
  // record); any other error may pass (see Read).
  absl::StatusOr<const clickhouse::Block*> EntryBlock(const SpoolTarget& target,
                                                      const SpoolEntry& e,
                                                      const std::function<absl::Time()>& stop_at,
                                                      std::unique_ptr<clickhouse::Block>* decoded);
  // Read's end when a record could not be read in time: the flush stays in the spool, its rows
  // counted in outcome->left_rows; a new flush's records already found unreadable are lost.
  void LeaveInSpool(const SpoolTarget& target, const SpooledFlush& flush,
                    const std::vector<uint64_t>& lost, const absl::Status& status,
                    SpooledOutcome* outcome);
  // Counts outcome.lost_rows as dropped for a damaged spool.
  void ReportLost(const SpoolTarget& target, const SpooledOutcome& outcome);
  // Writes the keys of a committed batch's requests to the key log (Options::key_log).
  void KeepKeys(const SpoolTarget& target, const SpooledFlush& flush);
  // The header of a record the spool's Open handed back: from its checked head, its payload, or
  // the record read again (retrying errors that may pass for a while).
  absl::StatusOr<SpoolRecordHeader> HeaderAtStart(const spool::SpoolRecord& r);
  // One record's payload, retrying errors that may pass until stop_at().
  absl::StatusOr<std::string> ReadRecord(const std::string& label, uint64_t lsn,
                                         const std::function<absl::Time()>& stop_at);
  // Writes the intent of `flush` (its records in order), retrying with backoff until stop_at().
  absl::Status WriteIntent(const SpoolTarget& target, SpooledFlush& flush, uint64_t rows,
                           const std::function<absl::Time()>& stop_at);
  // After Send's INSERT (or its end before one): marks the records committed, moves them to the
  // dead-letter directory for a data error, or leaves them for the next start, and logs which.
  void Settle(const SpoolTarget& target, SpooledFlush& flush, FlushReason reason,
              const InsertAttempt& attempt, absl::Duration elapsed, SpooledOutcome& out);
  void CheckDedupWindow(const SpoolTarget& target) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the records were moved (false: they stay pending in the spool).
  bool WriteDeadLetter(const SpoolTarget& target, const SpooledFlush& flush, uint64_t rows,
                       const absl::Status& status);
  void MarkCommitted(const std::vector<uint64_t>& lsns, const char* what);

  const Options options_;
  MemoryBudget* const budget_;
  InsertRetrier* const retrier_;
  SchemaCache* const schemas_;
  Inserter* const inserter_;
  Clock* const clock_;
  IngestObserver* const observer_;
  std::atomic<uint64_t> cache_used_{0};
  absl::Mutex mu_;
  // When each table's deduplication window is to be looked at next.
  absl::flat_hash_map<std::string, absl::Time> dedup_check_at_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chgate::ingest
