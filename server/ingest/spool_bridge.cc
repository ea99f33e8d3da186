#include "server/ingest/spool_bridge.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/failpoint.h"
#include "server/common/random_id.h"
#include "server/ingest/dead_letter.h"
#include "server/ingest/spool_record.h"
#include "server/ingest/task_runner.h"
#include "server/log/log.h"

namespace chgate::ingest {
namespace {

constexpr log::Component kLog("ingest");

// How long after its commit a spooled batch may still be sent again: a crash, the restart
// (with the kubelet's back-off) and the replay. A Replicated table's deduplication window should
// cover at least this much of its INSERTs.
constexpr absl::Duration kReplayHorizon = absl::Minutes(5);
// How often a table's deduplication window is looked at again (after a failed look: sooner).
constexpr absl::Duration kDedupCheckInterval = absl::Hours(1);
constexpr absl::Duration kDedupRetryInterval = absl::Minutes(10);
// How long a start keeps reading a record whose read fails with an error that may pass.
constexpr absl::Duration kStartReadPatience = absl::Minutes(1);

bool SameColumns(const clickhouse::Block& a, const clickhouse::Block& b) {
  if (a.column_count() != b.column_count()) return false;
  for (size_t c = 0; c < a.column_count(); ++c) {
    if (a.column(c).name != b.column(c).name ||
        a.column(c).column->type_name() != b.column(c).column->type_name()) {
      return false;
    }
  }
  return true;
}

}  // namespace

CachedBlock::~CachedBlock() {
  bridge->cache_used_.fetch_sub(bytes, std::memory_order_relaxed);
  bridge->budget_->RemoveBuffered(bytes);
}

SpoolBridge::SpoolBridge(Options options, MemoryBudget* budget, InsertRetrier* retrier,
                         SchemaCache* schemas, Inserter* inserter, Clock* clock,
                         IngestObserver* observer)
    : options_(std::move(options)),
      budget_(budget),
      retrier_(retrier),
      schemas_(schemas),
      inserter_(inserter),
      clock_(clock),
      observer_(observer) {}

void SpoolBridge::MarkCommitted(const std::vector<uint64_t>& lsns, const char* what) {
  if (lsns.empty()) return;
  if (absl::Status st = options_.spool->MarkCommitted(lsns); !st.ok()) {
    kLog.Error(absl::StrCat("spool: marking ", what, " records failed"), {{"error", st.message()}});
  }
}

// ---------------------------------------------------------------------------------------------
// Persisting a request.

SpoolBridge::Record SpoolBridge::Encode(const TableId& table,
                                        const std::vector<std::string>& columns,
                                        const std::string& idempotency_key,
                                        std::unique_ptr<clickhouse::Block> block) {
  Record record;
  record.rows = block->rows();
  record.key = idempotency_key;
  record.payload = options_.spool->TakeBuffer();
  EncodeRowsRecord(table, columns, idempotency_key, *block, &record.payload);
  // Keep the block for its INSERT while the cache has room.
  const uint64_t bytes = block->ByteSize();
  if (cache_used_.fetch_add(bytes, std::memory_order_relaxed) + bytes <= options_.cache_bytes) {
    budget_->AddBuffered(bytes);
    record.cached = std::make_shared<const CachedBlock>(this, std::move(block), bytes);
  } else {
    cache_used_.fetch_sub(bytes, std::memory_order_relaxed);
  }
  return record;
}

absl::Status SpoolBridge::Append(Record record,
                                 std::function<void(absl::StatusOr<SpoolEntry>)> done) {
  const uint64_t bytes = record.payload.size();
  return options_.spool->AppendOwned(
      std::move(record.payload),
      [this, done = std::move(done), bytes, rows = record.rows, cached = std::move(record.cached),
       key = std::move(record.key)](absl::StatusOr<uint64_t> lsn) mutable {
        if (!lsn.ok()) return done(lsn.status());
        done(SpoolEntry{*lsn, rows, bytes, clock_->Now(), std::move(cached), std::move(key)});
      });
}

// ---------------------------------------------------------------------------------------------
// Sending a spooled batch.

absl::StatusOr<std::string> SpoolBridge::ReadRecord(const std::string& label, uint64_t lsn,
                                                    const std::function<absl::Time()>& stop_at) {
  for (int tries = 0;; ++tries) {
    absl::StatusOr<std::string> payload = options_.spool->Read(lsn);
    if (payload.ok() || absl::IsDataLoss(payload.status()) || absl::IsNotFound(payload.status()) ||
        absl::IsFailedPrecondition(payload.status())) {
      return payload;
    }
    // Not the record's fault (no file descriptor or memory now, an I/O error): its rows are
    // not given up for it.
    kLog.Throttled(log::Level::kError, "spooled record could not be read; the batch waits", label,
                   {{"table", label}, {"lsn", lsn}, {"error", payload.status().message()}});
    const absl::Time resume = clock_->Now() + BackoffCap(options_.retry, tries + 1);
    if (resume >= stop_at()) return payload;
    clock_->SleepUntil(resume);
    TaskRunner::MarkProgress(clock_);
  }
}

absl::StatusOr<const clickhouse::Block*> SpoolBridge::EntryBlock(
    const SpoolTarget& target, const SpoolEntry& e, const std::function<absl::Time()>& stop_at,
    std::unique_ptr<clickhouse::Block>* decoded) {
  if (e.cached != nullptr) return e.cached->block.get();
  absl::StatusOr<std::string> payload = ReadRecord(target.label, e.lsn, stop_at);
  if (!payload.ok()) return payload.status();
  *decoded = std::make_unique<clickhouse::Block>();
  absl::StatusOr<SpoolRecordHeader> h = DecodeSpoolRecord(*payload, decoded->get());
  if (!h.ok()) return absl::DataLossError(h.status().message());
  if (h->kind != SpoolRecordKind::kRows) {
    return absl::DataLossError("an intent where a rows record was expected");
  }
  return decoded->get();
}

void SpoolBridge::LeaveInSpool(const SpoolTarget& target, const SpooledFlush& flush,
                               const std::vector<uint64_t>& lost, const absl::Status& status,
                               SpooledOutcome* outcome) {
  // As if the flush had not started, but for a new flush's records already found unreadable:
  // those are gone. A replay's intent keeps all of its records.
  outcome->status = status;
  if (flush.intent_lsn != 0) outcome->lost_rows = 0;
  for (const SpoolEntry& left : flush.entries) {
    if (flush.intent_lsn != 0 || std::find(lost.begin(), lost.end(), left.lsn) == lost.end()) {
      outcome->left_rows += left.rows;
    }
  }
  if (flush.intent_lsn == 0) {
    MarkCommitted(lost, "unreadable");
    ReportLost(target, *outcome);
  }
}

void SpoolBridge::KeepKeys(const SpoolTarget& target, const SpooledFlush& flush) {
  if (options_.key_log == nullptr) return;
  std::vector<KeyLog::Key> keys;
  for (const SpoolEntry& e : flush.entries) {
    if (!e.key.empty()) keys.push_back({e.key, e.rows});
  }
  // Durable before the records that hold the keys now may go (MarkCommitted, right after).
  if (absl::Status st = options_.key_log->Record(keys); !st.ok()) {
    kLog.Throttled(log::Level::kWarn,
                   "spool: idempotency keys of a committed batch not written; a resend of its "
                   "requests after a restart would insert them again",
                   target.label,
                   {{"table", target.label}, {"keys", keys.size()}, {"error", st.message()}});
  }
}

void SpoolBridge::ReportLost(const SpoolTarget& target, const SpooledOutcome& outcome) {
  // Reported once they are known lost: a flush left in the spool is read again later.
  if (observer_ != nullptr && outcome.lost_rows > 0) {
    observer_->RowsDropped(target.label, DropReason::kSpoolDamaged, outcome.lost_rows);
  }
}

clickhouse::BlockParts SpoolBridge::Read(const SpoolTarget& target, SpooledFlush& flush,
                                         const std::function<absl::Time()>& stop_at,
                                         SpooledOutcome* outcome) {
  // The readable records' blocks: those kept since their sync (alive as long as their entries in
  // `flush`) and those read back, which the BlockParts owns. They go out as one block, written
  // from where they are where the columns allow it (see clickhouse::BlockParts).
  std::vector<const clickhouse::Block*> parts;
  std::vector<std::unique_ptr<clickhouse::Block>> decoded;
  std::vector<SpoolEntry> kept;
  std::vector<uint64_t> lost;
  const auto lose = [&](const SpoolEntry& e) {
    lost.push_back(e.lsn);
    outcome->lost_rows += e.rows;
  };
  for (size_t i = 0; i < flush.entries.size(); ++i) {
    SpoolEntry& e = flush.entries[i];
    std::unique_ptr<clickhouse::Block> one;
    absl::StatusOr<const clickhouse::Block*> src = EntryBlock(target, e, stop_at, &one);
    if (!src.ok() && !absl::IsDataLoss(src.status()) && !absl::IsNotFound(src.status())) {
      // Out of time (or the spool closed) with the record still pending.
      LeaveInSpool(target, flush, lost, src.status(), outcome);
      return {};
    }
    if (!src.ok()) {
      kLog.Error("spooled record unreadable; its rows are lost",
                 {{"table", target.label}, {"lsn", e.lsn}, {"error", src.status().message()}});
      lose(e);
      continue;
    }
    e.rows = (*src)->rows();
    if (!parts.empty() && !SameColumns(*parts.front(), **src)) {
      if (flush.intent_lsn == 0) {
        // The table changed between these requests: the rest goes in the next INSERT.
        outcome->later.assign(flush.entries.begin() + static_cast<std::ptrdiff_t>(i),
                              flush.entries.end());
        break;
      }
      // A replayed intent was one layout when it was written; anything else is damage.
      kLog.Error("spooled record does not match its batch's columns; its rows are lost",
                 {{"table", target.label}, {"lsn", e.lsn}});
      lose(e);
      continue;
    }
    parts.push_back(*src);
    if (one != nullptr) decoded.push_back(std::move(one));
    kept.push_back(e);
  }
  if (flush.intent_lsn != 0 && !lost.empty()) {
    // An intent is sent whole or not at all: a smaller block under its identity would be a new
    // block to ClickHouse (a duplicate of what the first attempt may have written). The caller
    // sets the batch aside, marking it committed in one record with its intent.
    flush.unreadable = std::move(lost);
    ReportLost(target, *outcome);
    return {};
  }
  flush.entries = std::move(kept);
  MarkCommitted(lost, "unreadable");
  ReportLost(target, *outcome);
  return clickhouse::BlockParts(std::move(parts), std::move(decoded));
}

absl::Status SpoolBridge::WriteIntent(const SpoolTarget& target, SpooledFlush& flush, uint64_t rows,
                                      const std::function<absl::Time()>& stop_at) {
  std::vector<uint64_t> lsns;
  for (const SpoolEntry& e : flush.entries) lsns.push_back(e.lsn);
  // Which records, in which order, make this INSERT. Durable before the INSERT is sent, so a
  // restart sends the same block under the same identity.
  for (int tries = 0;; ++tries) {
    absl::StatusOr<uint64_t> lsn = options_.spool->AppendAndWait(
        EncodeIntentRecord(target.table, target.columns, lsns), /*exempt=*/true);
    if (lsn.ok()) {
      flush.intent_lsn = *lsn;
      return absl::OkStatus();
    }
    kLog.Throttled(log::Level::kError, "spool: batch intent not written; the batch waits",
                   target.label,
                   {{"table", target.label}, {"rows", rows}, {"error", lsn.status().message()}});
    const absl::Time resume = clock_->Now() + BackoffCap(options_.retry, tries + 1);
    if (lsn.status().code() == absl::StatusCode::kFailedPrecondition || resume >= stop_at()) {
      return lsn.status();
    }
    clock_->SleepUntil(resume);
    TaskRunner::MarkProgress(clock_);
  }
}

SpooledOutcome SpoolBridge::Send(const SpoolTarget& target, SpooledFlush& flush, FlushReason reason,
                                 const std::function<absl::Time()>& stop_at) {
  const absl::Time start = clock_->Now();
  SpooledOutcome out;
  // Read the records first: their columns decide how many go into this INSERT.
  clickhouse::BlockParts block = Read(target, flush, stop_at, &out);
  if (!flush.unreadable.empty()) {
    if (std::optional<uint64_t> set_aside = SetAsideDamagedIntent(target, flush)) {
      out.dead_lettered = *set_aside;
    } else {
      for (const SpoolEntry& e : flush.entries) out.left_rows += e.rows;
    }
    return out;
  }
  if (block.parts().empty()) return out;
  out.rows = block.rows();
  out.bytes = block.ByteSize();
  if (flush.intent_lsn == 0) out.status = WriteIntent(target, flush, out.rows, stop_at);
  InsertAttempt attempt;
  bool too_many_parts = false;
  if (flush.intent_lsn != 0) {
    CheckDedupWindow(target);
    failpoint::Hit("spool_intent_before_insert");
    // The block's identity is stable across replays (its deduplication token); the query id is
    // not needed for that, so it is unguessable like every batch's.
    attempt.deduplication_key = absl::StrCat(options_.spool_id, "-", flush.intent_lsn);
    attempt.query_id = absl::StrCat("chgate-", RandomHex128());
    const auto fields = [&](std::vector<log::Field>* line) {
      line->emplace_back("ack_mode", "persisted");
      line->emplace_back("intent_lsn", flush.intent_lsn);
    };
    const InsertTarget to{
        .label = target.label, .table = target.table, .spooled = true, .delay = target.delay};
    // The table changed after these rows were acknowledged: where its new columns take them
    // without loss, they go so rather than to the dead-letter directory.
    out.status = retrier_->InsertConverting(
        to, block, attempt, stop_at, fields, &too_many_parts, schemas_,
        {.converted_line = "table changed: spooled batch converted to its new columns"});
    out.sent = true;
  }
  const absl::Time end = clock_->Now();
  block = {};  // before Settle, which may release the cached blocks it points to
  if (out.sent) {
    if (!too_many_parts && target.delay != nullptr) {
      target.delay->Adapt(false, end - start, attempt.attempt);
    }
    if (observer_ != nullptr) {
      observer_->BatchFlushed(target.label, reason, out.rows, out.bytes, end - start);
    }
  }
  Settle(target, flush, reason, attempt, end - start, out);
  return out;
}

void SpoolBridge::Settle(const SpoolTarget& target, SpooledFlush& flush, FlushReason reason,
                         const InsertAttempt& attempt, absl::Duration elapsed,
                         SpooledOutcome& out) {
  if (out.sent && out.status.ok()) {
    std::vector<uint64_t> done;
    for (const SpoolEntry& e : flush.entries) done.push_back(e.lsn);
    done.push_back(flush.intent_lsn);
    failpoint::Hit("insert_committed_before_mark");
    KeepKeys(target, flush);
    // On failure the rows are in ClickHouse; the next start sends them again under the same
    // identity.
    MarkCommitted(done, "committed");
    if (attempt.attempt > 1 || reason == FlushReason::kReplay) {
      kLog.Info(reason == FlushReason::kReplay ? "replayed batch committed"
                                               : "batch committed after retries",
                {{"table", target.label},
                 {"batch_id", attempt.query_id},
                 {"attempts", attempt.attempt},
                 {"rows", out.rows},
                 {"elapsed", absl::Trunc(elapsed, absl::Milliseconds(1))}});
    }
    out.committed = out.rows;
  } else if (out.sent && IsDataError(out.status)) {
    if (IsTableChangeError(out.status)) schemas_->Forget(target.table);
    if (observer_ != nullptr) {
      observer_->FlushFailed(target.label, out.status, clickhouse::ClickHouseCode(out.status));
    }
    if (WriteDeadLetter(target, flush, out.rows, out.status)) {
      out.dead_lettered = out.rows;
    } else {
      out.left_rows = out.rows;
    }
  } else {
    // The drain ended (or the spool closed) first: the records stay pending in the spool and go
    // out after the restart, under the same identity if the intent was written. So does a
    // refusal for a changed table whose new columns ClickHouse did not give before the drain
    // ended (InsertConverting answers Unavailable then): the rows may well fit them.
    out.left_rows = out.rows;
    kLog.Warn("spooled batch left in the spool for the next start",
              {{"table", target.label},
               {"rows", out.rows},
               {"intent_lsn", flush.intent_lsn},
               {"code", ErrorCodeLabel(out.status)},
               {"error", out.status.message()}});
  }
}

void SpoolBridge::CheckDedupWindow(const SpoolTarget& target) {
  const absl::Time now = clock_->Now();
  {
    absl::MutexLock lock(&mu_);
    auto it = dedup_check_at_.find(target.label);
    if (it != dedup_check_at_.end() && now < it->second) return;
    // Looked at by this flush; a failed look is tried again sooner (below).
    dedup_check_at_[target.label] = now + kDedupCheckInterval;
  }
  absl::StatusOr<DedupWindow> w =
      inserter_->DedupWindowOf(target.table, now + SchemaCache::kRefreshTimeout);
  if (!w.ok()) {
    {
      absl::MutexLock lock(&mu_);
      dedup_check_at_[target.label] = now + kDedupRetryInterval;
    }
    if (!absl::IsUnimplemented(w.status())) {
      kLog.Throttled(log::Level::kWarn, "table's deduplication window could not be read",
                     target.label, {{"table", target.label}, {"error", w.status().message()}});
    }
    return;
  }
  if (!w->replicated) {
    kLog.Throttled(log::Level::kInfo,
                   "persisted rows go to a table without block deduplication (not Replicated): "
                   "a crash between a commit and the spool's record of it sends that batch again",
                   target.label, {{"table", target.label}});
    return;
  }
  // Seconds of the table's INSERTs the window holds: its blocks at the table's rate, and never
  // more than its age limit.
  double covers = std::numeric_limits<double>::infinity();
  if (w->inserts_per_second.has_value() && *w->inserts_per_second > 0) {
    covers = static_cast<double>(w->window_blocks) / *w->inserts_per_second;
  }
  if (w->window_seconds > 0) covers = std::min(covers, static_cast<double>(w->window_seconds));
  if (observer_ != nullptr) observer_->DedupWindowCovers(target.label, covers);
  const double horizon = absl::ToDoubleSeconds(kReplayHorizon);
  if (covers < horizon) {
    const double per_second = w->inserts_per_second.value_or(0);
    kLog.Throttled(
        log::Level::kWarn,
        "table's deduplication window is shorter than a replay after a crash may take: a batch "
        "sent again then can be stored twice; raise replicated_deduplication_window",
        target.label,
        {{"table", target.label},
         {"window_blocks", w->window_blocks},
         {"window_seconds", w->window_seconds},
         {"inserts_per_second", per_second},
         {"covers_seconds", covers},
         {"needed_seconds", horizon},
         {"suggested_window_blocks", static_cast<uint64_t>(std::ceil(per_second * horizon * 2))}});
  }
}

// ---------------------------------------------------------------------------------------------
// Setting batches aside.

std::optional<uint64_t> SpoolBridge::SetAsideDamagedIntent(const SpoolTarget& target,
                                                           const SpooledFlush& flush) {
  uint64_t rows = 0;
  for (const SpoolEntry& e : flush.entries) {
    if (std::find(flush.unreadable.begin(), flush.unreadable.end(), e.lsn) ==
        flush.unreadable.end()) {
      rows += e.rows;
    }
  }
  const std::string lsns = absl::StrJoin(flush.unreadable, ",");
  kLog.Error(
      "spooled batch damaged: not sent again, since a smaller block under its identity would be "
      "stored as a new one; its readable records go to the dead-letter directory",
      {{"table", target.label},
       {"intent_lsn", flush.intent_lsn},
       {"unreadable_lsns", lsns},
       {"readable_records", flush.entries.size() - flush.unreadable.size()},
       {"readable_rows", rows}});
  if (!WriteDeadLetter(
          target, flush, rows,
          absl::DataLossError(absl::StrCat("records ", lsns, " of batch intent ", flush.intent_lsn,
                                           " are unreadable in the spool")))) {
    return std::nullopt;
  }
  return rows;
}

bool SpoolBridge::WriteDeadLetter(const SpoolTarget& target, const SpooledFlush& flush,
                                  uint64_t rows, const absl::Status& status) {
  spool::FileOps* ops = options_.spool->file_ops();
  const std::string dir = options_.spool->dead_letter_dir();
  const std::string name = DeadLetterFileName(flush.intent_lsn);
  ingest::DeadLetter letter{.table = target.table,
                            .columns = target.columns,
                            .records = flush.entries.size(),
                            .rows = rows,
                            .identity = absl::StrCat(options_.spool_id, "-", flush.intent_lsn),
                            .unreadable = flush.unreadable,
                            .error = status.ToString()};
  absl::Status st = absl::OkStatus();
  for (const SpoolEntry& e : flush.entries) {
    if (std::find(flush.unreadable.begin(), flush.unreadable.end(), e.lsn) !=
        flush.unreadable.end()) {
      continue;
    }
    absl::StatusOr<std::string> payload = options_.spool->Read(e.lsn);
    if (!payload.ok()) {
      st = payload.status();
      break;
    }
    letter.payloads.push_back({e.lsn, *std::move(payload)});
  }
  const std::string out = EncodeDeadLetter(letter);
  letter.payloads.clear();
  if (st.ok()) st = spool::MakeDirDurably(ops, dir);
  if (st.ok()) st = spool::WriteFileAtomically(ops, dir, name, out);
  if (st.ok()) options_.spool->AddSetAside(out.size());
  if (!st.ok()) {
    // Kept in the spool instead: the next start tries again.
    kLog.Error(
        "spooled batch refused by ClickHouse and not moved to the dead-letter directory; "
        "it stays in the spool",
        {{"table", target.label},
         {"rows", rows},
         {"clickhouse_error", status.message()},
         {"error", st.message()}});
    return false;
  }
  std::vector<uint64_t> done;
  for (const SpoolEntry& e : flush.entries) done.push_back(e.lsn);
  done.push_back(flush.intent_lsn);
  if (absl::Status marked = options_.spool->MarkCommitted(done); !marked.ok()) {
    kLog.Error("spool: marking dead-lettered records failed", {{"error", marked.message()}});
  }
  if (observer_ != nullptr) {
    observer_->RowsDropped(target.label, DropReason::kSpoolDeadLetter, rows);
  }
  kLog.Error("spooled batch refused by ClickHouse; moved to the dead-letter directory",
             {{"table", target.label},
              {"rows", rows},
              {"file", absl::StrCat("dead-letter/", name)},
              {"code", ErrorCodeLabel(status)},
              {"error", status.message()}});
  return true;
}

// ---------------------------------------------------------------------------------------------
// Reading the spool back at a start.

absl::StatusOr<SpoolRecordHeader> SpoolBridge::HeaderAtStart(const spool::SpoolRecord& r) {
  if (r.payload.empty() && !r.head.empty()) {
    // The head the spool's scan checked: enough unless the header is longer.
    absl::StatusOr<SpoolRecordHeader> h = DecodeSpoolRecord(r.head);
    if (h.ok()) return h;
  }
  if (!r.payload.empty()) return DecodeSpoolRecord(r.payload);
  // Read again while the error may pass, for a while: the start waits rather than dropping
  // acknowledged rows for a moment without a file descriptor.
  const absl::Time give_up = clock_->Now() + kStartReadPatience;
  absl::StatusOr<std::string> read =
      ReadRecord("(table not yet known)", r.lsn, [give_up] { return give_up; });
  if (!read.ok()) return read.status();
  return DecodeSpoolRecord(*read);
}

RecoveryPlan SpoolBridge::Plan(const std::vector<spool::SpoolRecord>& records, absl::Time now) {
  RecoveryPlan plan;
  RecoverySummary& summary = plan.summary;
  struct Found {
    SpoolRecordHeader header;
    uint64_t size = 0;
  };
  std::map<uint64_t, Found> rows, intents;
  std::vector<uint64_t> unreadable;
  for (const spool::SpoolRecord& r : records) {
    absl::StatusOr<SpoolRecordHeader> h = HeaderAtStart(r);
    if (!h.ok()) {
      kLog.Error("spool record unreadable at start; it is dropped",
                 {{"lsn", r.lsn}, {"error", h.status().message()}});
      unreadable.push_back(r.lsn);
      continue;
    }
    (h->kind == SpoolRecordKind::kIntent ? intents : rows)[r.lsn] = Found{*std::move(h), r.size};
  }
  summary.unreadable = unreadable.size();
  MarkCommitted(unreadable, "unreadable");
  summary.records = rows.size();
  for (const auto& [lsn, f] : rows) {
    summary.rows += f.header.rows;
    if (!f.header.idempotency_key.empty()) {
      plan.keys.push_back({f.header.idempotency_key, f.header.rows});
    }
  }
  std::vector<uint64_t> empty_intents;
  for (const auto& [intent_lsn, f] : intents) {
    SpooledFlush flush{.intent_lsn = intent_lsn};
    for (uint64_t lsn : f.header.lsns) {
      auto it = rows.find(lsn);
      if (it == rows.end()) {
        ++summary.orphaned;
        flush.unreadable.push_back(lsn);
        flush.entries.push_back(SpoolEntry{lsn, 0, 0, now});
        continue;
      }
      flush.entries.push_back(SpoolEntry{lsn, it->second.header.rows, it->second.size, now, nullptr,
                                         it->second.header.idempotency_key});
      rows.erase(it);
    }
    if (flush.unreadable.size() == flush.entries.size()) {
      // None of its records is pending: nothing can be sent under this identity.
      if (!flush.entries.empty()) {
        kLog.Error(
            "spooled batch intent without any of its records; nothing to send",
            {{"intent_lsn", intent_lsn}, {"missing_lsns", absl::StrJoin(flush.unreadable, ",")}});
      }
      empty_intents.push_back(intent_lsn);
      continue;
    }
    RecoveryPlan::Table to{f.header.table, f.header.columns};
    if (!flush.unreadable.empty()) {
      ++summary.damaged_intents;
      plan.damaged.push_back({std::move(to), std::move(flush)});
      continue;
    }
    ++summary.intents;
    plan.replays.push_back({std::move(to), std::move(flush)});
  }
  for (const auto& [lsn, f] : rows) {
    plan.queued.push_back(
        {RecoveryPlan::Table{f.header.table, f.header.columns},
         SpoolEntry{lsn, f.header.rows, f.size, now, nullptr, f.header.idempotency_key}});
  }
  MarkCommitted(empty_intents, "empty intents'");
  return plan;
}

}  // namespace chgate::ingest
