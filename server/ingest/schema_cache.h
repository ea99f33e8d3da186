// SchemaCache: the INSERT headers of (table, column list) pairs, as ClickHouse describes them.
// A header is served for `ttl`, then asked for again; while ClickHouse does not answer, the last
// one is served (for kRefreshTimeout at a time) so buffering goes on. With a directory, the
// headers are saved there (a file `headers`) whenever one is new or changed, and Load reads them
// back as stale entries: after a restart while ClickHouse is away, persisted requests for known
// tables are still converted and acknowledged.
//
// Thread-safe. Lock order: save_mu_ before mu_; no other lock is held while either is.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/ingest/clock.h"
#include "server/ingest/inserter.h"

namespace chgate::ingest {

// A key for (table, columns): every name length-prefixed, so that no two different (database,
// table, columns) share one (`db`.`b.c` and `db.b`.`c`, or a column `a,b` and columns a and b).
std::string TableColumnsKey(const TableId& table, const std::vector<std::string>& columns);
// Whether two headers have the same columns of the same types.
bool SameTypes(const TableSchema& a, const TableSchema& b);

class SchemaCache {
 public:
  // How long a refresh may take while an older header is at hand, and how long that one is
  // served after a refresh failed for a connection problem before the next try.
  static constexpr absl::Duration kRefreshTimeout = absl::Seconds(5);

  // `inserter` and `clock` must outlive the cache. `dir`: where headers are saved ("" for none).
  SchemaCache(Inserter* inserter, Clock* clock, absl::Duration ttl, std::string dir);
  SchemaCache(const SchemaCache&) = delete;
  SchemaCache& operator=(const SchemaCache&) = delete;

  // Whether the header of (table, columns) is cached and may be served without asking.
  bool IsFresh(const TableId& table, const std::vector<std::string>& columns)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The header of (table, columns): cached unless `refresh` or older than the ttl. `*fetched`
  // says whether it came from the server just now.
  absl::StatusOr<std::shared_ptr<const TableSchema>> Get(const TableId& table,
                                                         const std::vector<std::string>& columns,
                                                         absl::Time deadline, bool refresh,
                                                         bool* fetched)
      ABSL_LOCKS_EXCLUDED(mu_, save_mu_);
  // Drops every cached header of `table` (any column list).
  void Forget(const TableId& table) ABSL_LOCKS_EXCLUDED(mu_);
  // Reads the saved headers (a missing file is no error; an unreadable one is logged).
  void Load() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Save() ABSL_LOCKS_EXCLUDED(mu_, save_mu_);

  struct Entry {
    std::shared_ptr<const TableSchema> schema;
    absl::Time fetched;
    // After a refresh failed for a connection problem: served as it is until then.
    absl::Time retry_after = absl::InfinitePast();
  };
  bool FreshLocked(const Entry& e, absl::Time now) const;

  Inserter* const inserter_;
  Clock* const clock_;
  const absl::Duration ttl_;
  const std::string dir_;
  absl::Mutex save_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one Save at a time
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chgate::ingest
