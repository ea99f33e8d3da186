// The rule every step here keeps: nothing is deleted before the record that makes deleting it
// safe is durable. A segment file goes only when every data record in it is covered by a commit
// record (or a segment's commit snapshot) that was written and fdatasync'ed; until then the
// segment keeps counting those records (Segment::pending_data), even though MarkCommitted has
// taken them out of `pending_` at once. Deleting earlier would let a crash lose the rows of a
// batch intent whose own record survives, and a replay would then send a smaller block under
// the old identity, which ClickHouse stores as a new one (a duplicate). Recovery syncs every
// segment it reads before acting on what it read, so a commit mark seen only in the page cache
// never justifies a deletion either. tests/unit/spool/spool_test.cc crashes at every file
// operation (a simulated disk that loses what was not synced) and checks this.
#include "server/spool/spool.h"

#include <fcntl.h>

#include <algorithm>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "text/status_macros.h"
namespace chgate::spool {

Spool::Spool(std::string dir, SpoolOptions options)
    : dir_(std::move(dir)), options_(std::move(options)), ops_(options_.file_ops) {}

absl::StatusOr<Spool::Opened> Spool::Open(std::string dir, SpoolOptions options) {
  if (options.file_ops == nullptr) options.file_ops = DefaultFileOps();
  if (options.segment_bytes < kSegmentHeaderSize + 2 * kRecordHeaderSize + 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment_bytes ", options.segment_bytes, " is too small"));
  }
  if (options.min_free_bytes == 0) options.min_free_bytes = 2 * options.segment_bytes;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  FileOps* ops = options.file_ops;
  CHGATE_RETURN_IF_ERROR(MakeDirDurably(ops, dir));

  std::unique_ptr<Spool> spool(new Spool(dir, std::move(options)));
  const std::string lock_path = absl::StrCat(dir, "/LOCK");
  CHGATE_ASSIGN_OR_RETURN(spool->lock_fd_, ops->Open(lock_path, O_RDWR | O_CREAT, 0644));
  if (absl::Status st = ops->LockExclusive(spool->lock_fd_); !st.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("spool directory ", dir, " is in use by another spool (", st.message(), ")"));
  }

  CHGATE_RETURN_IF_ERROR(spool->LoadOrMakeId());
  Opened opened;
  CHGATE_ASSIGN_OR_RETURN(opened.replay, spool->Recover(opened.report));
  {
    absl::MutexLock l(&spool->mu_);
    spool->RefreshFreeBytesLocked(/*force=*/true);
  }
  spool->ScanSetAside();
  spool->last_set_aside_scan_ = absl::Now();
  // Appends go to a new segment: the recovered ones stay as they are, and the new one's commit
  // snapshot lets the committed ones go.
  CHGATE_RETURN_IF_ERROR(spool->StartSegment());
  const uint64_t deleted_before = spool->Stats().segments_deleted;
  spool->DeleteCommittedSegments();
  opened.report.segments_deleted += spool->Stats().segments_deleted - deleted_before;
  spool->writer_ = std::thread([s = spool.get()] { s->WriterLoop(); });
  spool->completer_ = std::thread([s = spool.get()] { s->CompleterLoop(); });
  opened.spool = std::move(spool);
  return opened;
}

absl::Status Spool::LoadOrMakeId() {
  const std::string path = absl::StrCat(dir_, "/ID");
  if (absl::StatusOr<int> fd = ops_->Open(path, O_RDONLY, 0); fd.ok()) {
    char buf[64];
    absl::StatusOr<size_t> got = ops_->ReadAt(*fd, buf, sizeof(buf), 0);
    (void)ops_->Close(*fd);
    CHGATE_RETURN_IF_ERROR(got.status());
    std::string_view text(buf, *got);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
    if (text.size() != 32 || text.find_first_not_of("0123456789abcdef") != text.npos) {
      return absl::DataLossError(absl::StrCat(path, " does not hold a spool id"));
    }
    id_ = std::string(text);
    return absl::OkStatus();
  } else if (!absl::IsNotFound(fd.status())) {
    return fd.status();
  }
  std::random_device random;
  std::string id;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&id, absl::Hex(random(), absl::kZeroPad8));
  CHGATE_RETURN_IF_ERROR(WriteFileAtomically(ops_, dir_, "ID", absl::StrCat(id, "\n")));
  id_ = std::move(id);
  return absl::OkStatus();
}

Spool::~Spool() {
  Close();
  if (active_fd_ >= 0) CloseActive();  // Open failed before the writer started
  if (lock_fd_ >= 0) (void)ops_->Close(lock_fd_);
}

void Spool::Close() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_) {
      mu_.Await(absl::Condition(&closed_));
      return;
    }
    stopping_ = true;
  }
  if (writer_.joinable()) writer_.join();
  if (completer_.joinable()) completer_.join();
  if (active_fd_ >= 0) CloseActive();
  {
    absl::MutexLock w(&read_mu_);
    for (const auto& [segment, fd] : read_fds_) (void)ops_->Close(fd);
    read_fds_.clear();
  }
  absl::MutexLock l(&mu_);
  closed_ = true;
}

// ---------------------------------------------------------------------------------------------
// Callers' side.

absl::Status Spool::Append(std::string_view payload, AppendCallback done) {
  return AppendData(std::string(payload), std::move(done), /*exempt=*/false);
}

absl::Status Spool::AppendOwned(std::string payload, AppendCallback done) {
  return AppendData(std::move(payload), std::move(done), /*exempt=*/false);
}

std::string Spool::TakeBuffer() {
  absl::MutexLock l(&buffers_mu_);
  if (buffers_.empty()) return std::string();
  std::string buf = std::move(buffers_.back());
  buffers_.pop_back();
  buf.clear();
  return buf;
}

absl::Status Spool::AppendExempt(std::string_view payload, AppendCallback done) {
  return AppendData(std::string(payload), std::move(done), /*exempt=*/true);
}

absl::Status Spool::AppendData(std::string payload, AppendCallback done, bool exempt) {
  const uint64_t bytes = RecordSize(payload.size());
  if (payload.size() > kMaxPayloadSize || kSegmentHeaderSize + bytes > options_.segment_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("a record of ", payload.size(),
                                                   " bytes does not fit in a segment of ",
                                                   options_.segment_bytes, " bytes"));
  }
  absl::MutexLock l(&mu_);
  if (stopping_) {
    ++stats_.refusals;
    return absl::FailedPreconditionError("spool is closed");
  }
  if (absl::Status st = exempt ? absl::OkStatus() : CheckSpaceLocked(bytes); !st.ok()) {
    ++stats_.refusals;
    return st;
  }
  const absl::Time now = absl::Now();
  if (queue_.empty()) first_queued_ = now;
  queue_.push_back(Entry{Entry::Kind::kData, std::move(payload), std::move(done), now});
  queued_bytes_ += bytes;
  ++queued_data_;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Spool::AppendAndWait(std::string_view payload, bool exempt) {
  absl::Notification done;
  absl::StatusOr<uint64_t> result;
  CHGATE_RETURN_IF_ERROR(AppendData(
      std::string(payload),
      [&](absl::StatusOr<uint64_t> lsn) {
        result = std::move(lsn);
        done.Notify();
      },
      exempt));
  done.WaitForNotification();
  return result;
}

absl::StatusOr<std::string> Spool::Read(uint64_t lsn) const {
  std::string path;
  Pending where;
  {
    absl::MutexLock l(&mu_);
    auto it = pending_.find(lsn);
    if (it == pending_.end()) {
      return absl::NotFoundError(absl::StrCat("no pending spool record ", lsn));
    }
    where = it->second;
    path = segments_.at(where.segment).path;
  }
  // A pending record's segment is not deleted: only records no longer pending let it go.
  std::string bytes(RecordSize(where.size), '\0');
  std::optional<absl::StatusOr<size_t>> got;
  {
    absl::ReaderMutexLock r(&read_mu_);
    auto it = read_fds_.find(where.segment);
    if (it != read_fds_.end()) {
      got = ops_->ReadAt(it->second, bytes.data(), bytes.size(), where.offset);
    }
  }
  if (!got.has_value()) {
    absl::MutexLock w(&read_mu_);
    auto it = read_fds_.find(where.segment);
    if (it == read_fds_.end()) {
      CHGATE_ASSIGN_OR_RETURN(const int fd, ops_->Open(path, O_RDONLY, 0));
      it = read_fds_.emplace(where.segment, fd).first;
    }
    got = ops_->ReadAt(it->second, bytes.data(), bytes.size(), where.offset);
  }
  CHGATE_RETURN_IF_ERROR(got->status());
  bytes.resize(**got);
  CHGATE_ASSIGN_OR_RETURN(std::string_view payload, CheckDataRecord(bytes, lsn));
  bytes.erase(0, payload.data() - bytes.data());
  return bytes;
}

absl::Status Spool::MarkCommitted(const std::vector<uint64_t>& lsns) {
  absl::MutexLock l(&mu_);
  if (stopping_) return absl::FailedPreconditionError("spool is closed");
  for (uint64_t lsn : lsns) {
    if (lsn < kFirstLsn || lsn >= durable_lsn_end_) {
      return absl::InvalidArgumentError(
          absl::StrCat("LSN ", lsn, " was never written (the next LSN is ", durable_lsn_end_, ")"));
    }
  }
  std::vector<uint64_t> newly;
  for (uint64_t lsn : lsns) {
    auto it = pending_.find(lsn);
    if (it == pending_.end()) continue;
    // The segment keeps counting the record until the commit record is durable (the rule at
    // the top of this file).
    not_durable_commits_.emplace(lsn, it->second.segment);
    pending_.erase(it);
    newly.push_back(lsn);
  }
  if (newly.empty()) return absl::OkStatus();
  const absl::Time now = absl::Now();
  if (queue_.empty()) first_queued_ = now;
  Entry e{Entry::Kind::kCommit, EncodeCommitPayload(RangesOf(newly)), nullptr, now,
          std::move(newly)};
  queued_bytes_ += e.bytes();
  queue_.push_back(std::move(e));
  return absl::OkStatus();
}

absl::Status Spool::Flush() {
  absl::Notification done;
  absl::Status result;
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return absl::FailedPreconditionError("spool is closed");
    if (queue_.empty()) first_queued_ = absl::Now();
    queue_.push_back(Entry{Entry::Kind::kBarrier, "",
                           [&](absl::StatusOr<uint64_t> r) {
                             result = r.status();
                             done.Notify();
                           },
                           absl::Now()});
  }
  done.WaitForNotification();
  return result;
}

SpoolStats Spool::Stats() const {
  absl::MutexLock l(&mu_);
  SpoolStats s = stats_;
  s.disk_bytes = disk_bytes_;
  s.segments = segments_.size();
  s.pending_records = pending_.size();
  s.oldest_pending_time =
      pending_.empty() ? absl::InfiniteFuture() : pending_.begin()->second.appended;
  s.queued_records = queued_data_;
  s.free_bytes = free_bytes_;
  s.set_aside_bytes = set_aside_bytes_;
  return s;
}

absl::Status Spool::CheckSpaceLocked(uint64_t record_bytes) {
  if (disk_bytes_ + set_aside_bytes_ + queued_bytes_ + record_bytes > options_.max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("spool full: ", disk_bytes_, " bytes in segment files + ", set_aside_bytes_,
                     " in dead-letter and quarantined files + ", queued_bytes_, " queued + ",
                     record_bytes, " for this record exceed max_bytes ", options_.max_bytes, " (",
                     pending_.size(), " records wait for ClickHouse to commit them)"));
  }
  RefreshFreeBytesLocked(/*force=*/false);
  // What the last statvfs saw, less what was written since.
  const uint64_t free = free_bytes_ > written_since_check_ ? free_bytes_ - written_since_check_ : 0;
  const uint64_t needed = options_.min_free_bytes + queued_bytes_ + record_bytes;
  if (free < needed) {
    return absl::ResourceExhaustedError(
        absl::StrCat("file system of spool ", dir_, " has ", free, " bytes free, below ",
                     options_.min_free_bytes, " (min_free_bytes) + ", queued_bytes_, " queued + ",
                     record_bytes, " for this record"));
  }
  return absl::OkStatus();
}

void Spool::AddSetAside(uint64_t bytes) {
  absl::MutexLock l(&mu_);
  set_aside_bytes_ += bytes;
}

void Spool::ScanSetAside() {
  uint64_t total = 0;
  auto add_files = [&](const std::string& dir, bool corrupt_only) -> bool {
    absl::StatusOr<std::vector<std::string>> names = ops_->ListDir(dir);
    if (absl::IsNotFound(names.status())) return true;
    if (!names.ok()) return false;
    for (const std::string& name : *names) {
      if (corrupt_only && name.find(".corrupt") == std::string::npos) continue;
      absl::StatusOr<int> fd = ops_->Open(absl::StrCat(dir, "/", name), O_RDONLY, 0);
      if (!fd.ok()) continue;  // removed meanwhile
      absl::StatusOr<uint64_t> size = ops_->FileSize(*fd);
      (void)ops_->Close(*fd);
      if (size.ok()) total += *size;
    }
    return true;
  };
  if (!add_files(dir_, /*corrupt_only=*/true) || !add_files(dead_letter_dir(), false)) return;
  absl::MutexLock l(&mu_);
  set_aside_bytes_ = total;
  stats_.set_aside_bytes = total;
}

void Spool::RefreshFreeBytesLocked(bool force) {
  const absl::Time now = absl::Now();
  if (!force && now - free_checked_ < options_.space_check_interval) return;
  free_checked_ = now;
  // A failed statvfs keeps the last value: the writes themselves still report ENOSPC.
  if (absl::StatusOr<uint64_t> free = ops_->FreeBytes(dir_); free.ok()) {
    free_bytes_ = *free;
    written_since_check_ = 0;
  }
}

std::vector<LsnRange> Spool::CommittedRangesLocked(uint64_t from, uint64_t to) const {
  std::vector<LsnRange> ranges;
  uint64_t next = from;
  for (auto it = pending_.lower_bound(from); it != pending_.end() && it->first < to; ++it) {
    if (it->first > next) ranges.push_back(LsnRange{next, it->first - 1});
    next = it->first + 1;
  }
  if (next < to) ranges.push_back(LsnRange{next, to - 1});
  return ranges;
}

}  // namespace chgate::spool
