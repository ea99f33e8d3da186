#include "server/ingest/batch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/common/random_id.h"

namespace chgate::ingest {

std::unique_ptr<clickhouse::Block> EmptyBlock(const TableSchema& schema) {
  auto block = std::make_unique<clickhouse::Block>();
  for (size_t i = 0; i < schema.names.size(); ++i) {
    block->AddColumn(schema.names[i], schema.prototypes[i]->CloneEmpty());
  }
  return block;
}

Batch::Batch(std::string key, std::string label, TableId table, std::unique_ptr<FlushDelay> delay)
    : key_(std::move(key)),
      label_(std::move(label)),
      table_(std::move(table)),
      delay_(std::move(delay)) {}

absl::Time Batch::Due(absl::Duration margin) const {
  if (rows_ == 0) return absl::InfiniteFuture();
  return std::min(oldest_ + delay_->Current(), earliest_deadline_ - margin);
}

bool Batch::DueByDeadline(absl::Duration margin) const {
  return earliest_deadline_ - margin < oldest_ + delay_->Current();
}

void Batch::Relayout(std::shared_ptr<const TableSchema> schema) {
  schema_ = std::move(schema);
  parts_.clear();
}

void Batch::Append(const std::shared_ptr<PendingRequest>& p, absl::Time now) {
  if (query_id_.empty()) query_id_ = absl::StrCat("chgate-", RandomHex128());
  parts_.push_back(std::move(p->staged));
  rows_ += p->rows;
  bytes_ += p->bytes;
  table_bytes += p->bytes;
  oldest_ = std::min(oldest_, now);
  if (p->trace.has_value()) traces_.Add(*p->trace);
  if (p->ack == AckMode::kCommitted) {
    pendings_.push_back(p);
    earliest_deadline_ = std::min(earliest_deadline_, p->deadline);
  } else if (!p->idempotency_key.empty()) {
    accepted_keys_.push_back(p->idempotency_key);
  }
}

Batch::Contents Batch::Take() {
  Contents taken{.parts = std::move(parts_),
                 .pendings = std::move(pendings_),
                 .accepted_keys = std::move(accepted_keys_),
                 .query_id = std::move(query_id_),
                 .traces = std::move(traces_),
                 .rows = rows_,
                 .bytes = bytes_};
  parts_.clear();
  pendings_.clear();
  accepted_keys_.clear();
  query_id_.clear();
  traces_ = {};
  rows_ = 0;
  bytes_ = 0;
  oldest_ = absl::InfiniteFuture();
  earliest_deadline_ = absl::InfiniteFuture();
  return taken;
}

void Batch::MakeSpooled(const std::vector<std::string>& columns) {
  spooled_ = true;
  columns_ = columns;
}

void Batch::Queue(SpoolEntry entry) {
  if (spool_queue_.empty()) oldest_ = entry.appended;
  rows_ += entry.rows;
  bytes_ += entry.bytes;
  spool_queue_.push_back(std::move(entry));
}

void Batch::Requeue(const std::vector<SpoolEntry>& later) {
  for (auto it = later.rbegin(); it != later.rend(); ++it) {
    spool_queue_.push_front(*it);
    rows_ += it->rows;
    bytes_ += it->bytes;
  }
  if (!later.empty()) oldest_ = spool_queue_.front().appended;
}

SpooledFlush Batch::TakeSpooled(const BatchLimits& limits, bool* replay) {
  SpooledFlush flush;
  *replay = !replays_.empty();
  if (*replay) {
    flush = std::move(replays_.front());
    replays_.pop_front();
    return flush;
  }
  uint64_t rows = 0, bytes = 0;
  while (!spool_queue_.empty() &&
         (flush.entries.empty() || (rows + spool_queue_.front().rows <= limits.max_rows &&
                                    bytes + spool_queue_.front().bytes <= limits.max_bytes))) {
    const SpoolEntry& e = spool_queue_.front();
    rows += e.rows;
    bytes += e.bytes;
    flush.entries.push_back(e);
    spool_queue_.pop_front();
  }
  rows_ -= rows;
  bytes_ -= bytes;
  oldest_ = spool_queue_.empty() ? absl::InfiniteFuture() : spool_queue_.front().appended;
  return flush;
}

}  // namespace chgate::ingest
