#include "server/ingest/batcher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace chgate::ingest {

Batcher::Batcher(BatcherSettings settings, IngestObserver* observer)
    : settings_(std::move(settings)), observer_(observer) {}

const BatchLimits& Batcher::LimitsFor(const std::string& label) const {
  auto it = settings_.table_limits.find(label);
  return it == settings_.table_limits.end() ? settings_.limits : it->second;
}

Batch& Batcher::Get(const std::string& key, const std::string& label, const TableId& table) {
  auto& slot = batches_[key];
  if (slot == nullptr) {
    const absl::Duration configured = LimitsFor(label).max_delay;
    slot = std::make_unique<Batch>(
        key, label, table,
        std::make_unique<FlushDelay>(label, configured, settings_.delay, observer_));
    // The table's series exist from its first batch on, at 0, so a first loss shows.
    if (observer_ != nullptr) observer_->TableStarted(label, configured);
  }
  return *slot;
}

Batch& Batcher::Spooled(const TableId& table, const std::vector<std::string>& columns,
                        const std::string* key) {
  // A persisted request looks its batch up once per ack: the key is built in a buffer the
  // thread keeps.
  thread_local std::string spooled_key;
  if (key != nullptr) {
    spooled_key.assign(*key);  // (a conditional expression would copy *key into a temporary)
  } else {
    spooled_key = TableColumnsKey(table, columns);
  }
  spooled_key.append("\x1fspooled");
  if (auto it = batches_.find(spooled_key); it != batches_.end()) return *it->second;
  Batch& batch = Get(spooled_key, absl::StrCat(table.database, ".", table.table), table);
  batch.MakeSpooled(columns);
  return batch;
}

std::optional<FlushReason> Batcher::Full(const Batch& batch) const {
  const BatchLimits& limits = LimitsFor(batch.label());
  if (batch.rows() >= limits.max_rows) return FlushReason::kRows;
  if (batch.bytes() >= limits.max_bytes) return FlushReason::kBytes;
  return std::nullopt;
}

std::optional<FlushReason> Batcher::AfterFlush(const Batch& batch, bool draining,
                                               absl::Time now) const {
  if (batch.HasReplays()) return FlushReason::kReplay;
  if (draining) return FlushReason::kShutdown;
  if (std::optional<FlushReason> full = Full(batch)) return full;
  if (batch.Due(settings_.deadline_margin) <= now) return FlushReason::kAge;
  return std::nullopt;
}

std::vector<std::pair<Batch*, FlushReason>> Batcher::Due(absl::Time now, SpooledBatches spooled) {
  std::vector<std::pair<Batch*, FlushReason>> due;
  for (auto& [key, batch] : batches_) {
    if (batch->flushing || batch->rows() == 0) continue;
    if (spooled == SpooledBatches::kHeld && batch->spooled()) continue;
    if (batch->Due(settings_.deadline_margin) <= now) {
      due.emplace_back(batch.get(), batch->DueByDeadline(settings_.deadline_margin)
                                        ? FlushReason::kDeadline
                                        : FlushReason::kAge);
    }
  }
  return due;
}

absl::Time Batcher::NextDue(absl::Time limit, SpooledBatches spooled) const {
  for (const auto& [key, batch] : batches_) {
    if (batch->flushing || (spooled == SpooledBatches::kHeld && batch->spooled())) continue;
    limit = std::min(limit, batch->Due(settings_.deadline_margin));
  }
  return limit;
}

std::vector<Batch*> Batcher::All() {
  std::vector<Batch*> all;
  all.reserve(batches_.size());
  for (auto& [key, batch] : batches_) all.push_back(batch.get());
  return all;
}

bool Batcher::Empty() const {
  return std::none_of(batches_.begin(), batches_.end(),
                      [](const auto& entry) { return entry.second->rows() > 0; });
}

}  // namespace chgate::ingest
