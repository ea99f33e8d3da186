// Batcher: the batches of every (table, column list), made on first use and never removed, and
// the rules that say when each is flushed: its rows or bytes limit (per table or the default),
// its oldest row's age against its adaptive delay, a waiting caller's deadline, a replay found at
// the start, a drain. It decides; the Ingestor starts the flushes it names.
//
// Not thread-safe: the Ingestor holds its lock around every call, as for the batches themselves.
// Batches are never removed, so a Batch& stays valid as long as the Batcher.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "server/ingest/batch.h"
#include "server/ingest/flush_delay.h"
#include "server/ingest/observer.h"
#include "server/ingest/schema_cache.h"
#include "text/identifier.h"

namespace chgate::ingest {

struct BatcherSettings {
  BatchLimits limits;
  absl::flat_hash_map<std::string, BatchLimits> table_limits;  // "db.table" -> limits
  // A batch is due this long before its earliest waiting caller's deadline.
  absl::Duration deadline_margin = absl::Milliseconds(100);
  FlushDelaySettings delay;
};

class Batcher {
 public:
  // `observer` (may be null) hears of each table's first batch and of its delay's changes.
  Batcher(BatcherSettings settings, IngestObserver* observer);
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // The in-memory batch of `key` (see TableColumnsKey), made empty when missing.
  Batch& Get(const std::string& key, const std::string& label, const TableId& table);
  // The spooled batch of (table, columns), made when missing: apart from the in-memory one, so
  // that its blocks are made only of spooled records and a replay can make them again. `key`,
  // when given, is TableColumnsKey(table, columns) already made; found without allocating.
  Batch& Spooled(const TableId& table, const std::vector<std::string>& columns,
                 const std::string* key = nullptr);

  const BatchLimits& LimitsFor(const std::string& label) const;
  absl::Duration deadline_margin() const { return settings_.deadline_margin; }

  // Why `batch` is to be flushed now that it grew: its rows or its bytes limit; none when it is
  // under both.
  std::optional<FlushReason> Full(const Batch& batch) const;
  // Why `batch` is to be flushed again right after its flush ended: a replay waiting, the drain,
  // a limit, or its due time passed; none when it can wait.
  std::optional<FlushReason> AfterFlush(const Batch& batch, bool draining, absl::Time now) const;
  // Whether spooled batches are looked at by Due and NextDue: after the drain's deadline their
  // records wait in the spool for the next start, so they are never due again.
  enum class SpooledBatches { kIncluded, kHeld };
  // The batches that are idle, hold rows and are due at `now`, with why (a caller's deadline or
  // the rows' age).
  std::vector<std::pair<Batch*, FlushReason>> Due(
      absl::Time now, SpooledBatches spooled = SpooledBatches::kIncluded);
  // The earliest due time of an idle batch, or `limit` when that is earlier.
  absl::Time NextDue(absl::Time limit, SpooledBatches spooled = SpooledBatches::kIncluded) const;
  // Whether no batch holds rows (flushes in flight aside).
  bool Empty() const;

  // Every batch, in no particular order.
  std::vector<Batch*> All();

 private:
  const BatcherSettings settings_;
  IngestObserver* const observer_;  // may be null
  absl::flat_hash_map<std::string, std::unique_ptr<Batch>> batches_;
};

}  // namespace chgate::ingest
