#include "server/ingest/schema_cache.h"

#include <fcntl.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/ingest/retry.h"
#include "server/ingest/spool_record.h"
#include "server/log/log.h"
#include "server/spool/file_ops.h"

namespace chgate::ingest {
namespace {

constexpr log::Component kLog("ingest");
constexpr char kHeadersFile[] = "headers";

void AppendKeyPart(std::string_view part, std::string* key) {
  absl::StrAppend(key, part.size(), ":", absl::string_view(part.data(), part.size()));
}

// The saved headers' bytes; NotFound when there is no file.
absl::StatusOr<std::string> ReadHeadersFile(const std::string& path) {
  spool::FileOps* ops = spool::DefaultFileOps();
  absl::StatusOr<int> fd = ops->Open(path, O_RDONLY, 0);
  if (!fd.ok()) return fd.status();
  std::string bytes;
  absl::StatusOr<uint64_t> size = ops->FileSize(*fd);
  absl::Status st = size.status();
  if (st.ok()) {
    bytes.resize(*size);
    absl::StatusOr<size_t> got = ops->ReadAt(*fd, bytes.data(), bytes.size(), 0);
    st = got.status();
    if (st.ok()) bytes.resize(*got);
  }
  (void)ops->Close(*fd);
  if (!st.ok()) return st;
  return bytes;
}

}  // namespace

std::string TableColumnsKey(const TableId& table, const std::vector<std::string>& columns) {
  std::string key;
  AppendKeyPart(table.database, &key);
  AppendKeyPart(table.table, &key);
  key.push_back('|');
  for (const std::string& c : columns) AppendKeyPart(c, &key);
  return key;
}

bool SameTypes(const TableSchema& a, const TableSchema& b) {
  if (a.names != b.names) return false;
  for (size_t i = 0; i < a.prototypes.size(); ++i) {
    if (a.prototypes[i]->type_name() != b.prototypes[i]->type_name()) return false;
  }
  return true;
}

SchemaCache::SchemaCache(Inserter* inserter, Clock* clock, absl::Duration ttl, std::string dir)
    : inserter_(inserter), clock_(clock), ttl_(ttl), dir_(std::move(dir)) {}

bool SchemaCache::FreshLocked(const Entry& e, absl::Time now) const {
  return now - e.fetched < ttl_ || now < e.retry_after;
}

bool SchemaCache::IsFresh(const TableId& table, const std::vector<std::string>& columns) {
  const std::string key = TableColumnsKey(table, columns);
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  return it != entries_.end() && FreshLocked(it->second, clock_->Now());
}

absl::StatusOr<std::shared_ptr<const TableSchema>> SchemaCache::Get(
    const TableId& table, const std::vector<std::string>& columns, absl::Time deadline,
    bool refresh, bool* fetched) {
  const std::string key = TableColumnsKey(table, columns);
  *fetched = false;
  std::shared_ptr<const TableSchema> last_known;
  if (!refresh) {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      if (FreshLocked(it->second, clock_->Now())) return it->second.schema;
      last_known = it->second.schema;
    }
  }
  // With a header at hand, a refresh may not eat the request's deadline: ClickHouse unreachable
  // or stopped must not turn buffering into timeouts.
  const absl::Time describe_deadline =
      last_known == nullptr ? deadline : std::min(deadline, clock_->Now() + kRefreshTimeout);
  absl::StatusOr<TableSchema> described = inserter_->Describe(table, columns, describe_deadline);
  if (!described.ok()) {
    if (last_known != nullptr && IsRetryable(described.status()) &&
        !IsTableChangeError(described.status())) {
      // A connection problem, not an answer about the table: keep buffering with the last
      // header the server gave (a type change is still caught: the insert compares the block
      // with the header the server sends, and the rows path asks again on a mismatch). Ask again
      // in a little while rather than on every request.
      {
        absl::MutexLock lock(&mu_);
        auto it = entries_.find(key);
        if (it != entries_.end()) it->second.retry_after = clock_->Now() + kRefreshTimeout;
      }
      const std::string name = absl::StrCat(table.database, ".", table.table);
      kLog.Throttled(log::Level::kWarn, "table header refresh failed: using the last known one",
                     name, {{"table", name}, {"error", described.status().message()}});
      return last_known;
    }
    if (last_known != nullptr && IsTableChangeError(described.status())) {
      absl::MutexLock lock(&mu_);
      entries_.erase(key);  // the table is not what the header said any more
    }
    return described.status();
  }
  auto schema = std::make_shared<const TableSchema>(*std::move(described));
  *fetched = true;
  bool changed;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    changed = it == entries_.end() || !SameTypes(*it->second.schema, *schema) ||
              it->second.schema->server_time_zone != schema->server_time_zone;
    entries_[key] = {schema, clock_->Now()};
  }
  if (changed && !dir_.empty()) Save();
  return schema;
}

void SchemaCache::Save() {
  absl::MutexLock file(&save_mu_);
  std::vector<std::pair<std::string, std::shared_ptr<const TableSchema>>> snapshot;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, entry] : entries_) snapshot.emplace_back(key, entry.schema);
  }
  std::vector<std::pair<std::string, const TableSchema*>> headers;
  for (const auto& [key, schema] : snapshot) headers.emplace_back(key, schema.get());
  const absl::Status st = spool::WriteFileAtomically(spool::DefaultFileOps(), dir_, kHeadersFile,
                                                     EncodeHeaders(headers));
  if (!st.ok()) {
    kLog.Throttled(log::Level::kWarn, "spool: table headers not saved", "",
                   {{"file", kHeadersFile}, {"error", st.message()}});
  }
}

void SchemaCache::Load() {
  if (dir_.empty()) return;
  const std::string path = absl::StrCat(dir_, "/", kHeadersFile);
  absl::StatusOr<std::string> bytes = ReadHeadersFile(path);
  if (absl::IsNotFound(bytes.status())) return;
  absl::StatusOr<std::vector<KnownHeader>> known =
      bytes.ok() ? DecodeHeaders(*bytes) : absl::StatusOr<std::vector<KnownHeader>>(bytes.status());
  if (!known.ok()) {
    kLog.Warn("spool: saved table headers unreadable; ignored",
              {{"file", path}, {"error", known.status().message()}});
    return;
  }
  absl::MutexLock lock(&mu_);
  for (KnownHeader& h : *known) {
    // Stale from the start: the first request asks ClickHouse, and uses this one only while
    // ClickHouse does not answer.
    entries_.try_emplace(h.key, Entry{std::make_shared<const TableSchema>(std::move(h.schema)),
                                      absl::InfinitePast()});
  }
}

void SchemaCache::Forget(const TableId& table) {
  const std::string prefix = TableColumnsKey(table, {});
  absl::MutexLock lock(&mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (absl::StartsWith(it->first, prefix)) {
      entries_.erase(it++);
    } else {
      ++it;
    }
  }
}

}  // namespace chgate::ingest
