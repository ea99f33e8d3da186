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
#include <iterator>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "server/common/failpoint.h"
#include "text/status_macros.h"

namespace chgate::spool {
namespace {

constexpr uint64_t kFirstLsn = 1;
// The writer keeps its chunk buffer up to this size between chunks.
constexpr size_t kKeptWriteBuffer = size_t{4} << 20;
// Payload strings kept for TakeBuffer: enough for the records of a few group commits.
constexpr size_t kKeptBuffers = 64;
constexpr size_t kKeptBufferBytes = size_t{64} << 10;  // at most 4 MiB kept in all

absl::Status WithContext(const absl::Status& s, const std::string& context) {
  return absl::Status(s.code(), absl::StrCat(context, ": ", s.message()));
}

}  // namespace

struct Spool::Entry {
  enum class Kind { kData, kCommit, kBarrier };
  Kind kind = Kind::kData;
  std::string payload;
  AppendCallback done;  // kData and kBarrier
  absl::Time enqueued;
  std::vector<uint64_t> committed;  // kCommit: the LSNs its record marks committed
  uint64_t bytes() const { return kind == Kind::kBarrier ? 0 : RecordSize(payload.size()); }
};

// ---------------------------------------------------------------------------------------------
// Recovery: what Open does before the writer starts.

class Spool::Recovery {
 public:
  Recovery(Spool& spool, RecoveryReport& report)
      : spool_(spool), ops_(spool.ops_), report_(report) {}

  // Scans every segment, cuts or quarantines what is bad, and fills the spool's segments,
  // pending records and next LSN. Returns the records to replay.
  absl::StatusOr<std::vector<SpoolRecord>> Run() {
    CHGATE_ASSIGN_OR_RETURN(std::vector<std::string> names, ops_->ListDir(spool_.dir_));
    std::vector<uint64_t> firsts;
    for (const std::string& name : names) {
      if (auto lsn = ParseSegmentFileName(name)) firsts.push_back(*lsn);
    }
    std::sort(firsts.begin(), firsts.end());
    // Before anything is changed: a segment of another format version (written by a newer
    // chgate, say, before a rollback) stops the start with every file left as it is.
    for (uint64_t first : firsts) CHGATE_RETURN_IF_ERROR(CheckVersion(first));
    for (size_t i = 0; i < firsts.size(); ++i) {
      CHGATE_RETURN_IF_ERROR(RecoverSegment(firsts[i], i + 1 == firsts.size()));
    }
    if (dir_changed_) CHGATE_RETURN_IF_ERROR(spool_.SyncDir());
    return Finish();
  }

 private:
  struct Data {
    std::string payload;  // only with replay_payloads
    std::string head;     // without: the first replay_head_bytes of it
    uint64_t segment = 0;
    uint64_t offset = 0;
    uint64_t size = 0;
  };

  absl::Status CheckVersion(uint64_t first) {
    const std::string name = SegmentFileName(first);
    CHGATE_ASSIGN_OR_RETURN(const int fd,
                            ops_->Open(absl::StrCat(spool_.dir_, "/", name), O_RDONLY, 0));
    std::string head(kSegmentHeaderSize, '\0');
    absl::StatusOr<size_t> got = ops_->ReadAt(fd, head.data(), head.size(), 0);
    const absl::Status closed = ops_->Close(fd);
    CHGATE_RETURN_IF_ERROR(got.status());
    CHGATE_RETURN_IF_ERROR(closed);
    head.resize(*got);
    const SegmentScan scan = ScanSegment(head, first);
    if (scan.unknown_version) {
      return absl::FailedPreconditionError(
          absl::StrCat("spool segment ", spool_.dir_, "/", name, " has format version ",
                       scan.version, "; this chgate reads version ", kFormatVersion,
                       ". No file was changed: start a chgate that reads version ", scan.version,
                       " on this directory to drain it"));
    }
    return absl::OkStatus();
  }

  absl::Status RecoverSegment(uint64_t first, bool last) {
    const std::string name = SegmentFileName(first);
    const std::string path = absl::StrCat(spool_.dir_, "/", name);
    ++report_.segments;
    CHGATE_ASSIGN_OR_RETURN(const int fd, ops_->Open(path, O_RDWR, 0));
    absl::Status st = RecoverOpenSegment(fd, first, last, name, path);
    const absl::Status closed = ops_->Close(fd);
    CHGATE_RETURN_IF_ERROR(st);
    CHGATE_RETURN_IF_ERROR(closed);
    return absl::OkStatus();
  }

  absl::Status RecoverOpenSegment(int fd, uint64_t first, bool last, const std::string& name,
                                  const std::string& path) {
    // What was read may so far be only in the page cache (a process that died before its sync):
    // make it durable before its commit marks let any segment go.
    CHGATE_RETURN_IF_ERROR(ops_->DataSync(fd));
    CHGATE_ASSIGN_OR_RETURN(const uint64_t size, ops_->FileSize(fd));
    // One buffer for every segment: a fresh one each time would fault in (and zero) a whole
    // segment's pages again, which measured as most of a full spool's start.
    if (buffer_.size() < size) buffer_.resize(size);
    CHGATE_ASSIGN_OR_RETURN(const size_t got, ops_->ReadAt(fd, buffer_.data(), size, 0));
    const std::string_view data(buffer_.data(), got);
    const SegmentScan scan = ScanSegment(data, first);
    if (!scan.bad_reason.empty()) {
      const uint64_t bad_bytes = data.size() - scan.good_end;
      if (last && !scan.valid_record_after_bad) {
        // A crash mid-append: nothing but the unfinished write follows the last good record.
        report_.bytes_cut += bad_bytes;
      } else {
        CHGATE_ASSIGN_OR_RETURN(std::string moved_to,
                                WriteQuarantine(name, data.substr(scan.good_end)));
        report_.quarantined.push_back(RecoveryReport::Quarantine{
            name, std::move(moved_to), scan.good_end, bad_bytes, scan.bad_reason});
        report_.bytes_quarantined += bad_bytes;
      }
      CHGATE_RETURN_IF_ERROR(ops_->Truncate(fd, scan.good_end));
      CHGATE_RETURN_IF_ERROR(ops_->DataSync(fd));
    }
    if (scan.records.empty()) {
      // Nothing in it (a segment started just before a crash, or wholly bad): no information.
      CHGATE_RETURN_IF_ERROR(ops_->Unlink(path));
      dir_changed_ = true;
      ++report_.segments_deleted;
      return absl::OkStatus();
    }
    for (const ScannedRecord& r : scan.records) {
      ++report_.records;
      next_lsn_ = std::max(next_lsn_, r.lsn + 1);
      if (r.type == RecordType::kData) {
        ++report_.data_records;
        const bool whole = spool_.options_.replay_payloads;
        data_[r.lsn] =
            Data{whole ? std::string(r.payload) : std::string(),
                 whole ? std::string()
                       : std::string(r.payload.substr(0, spool_.options_.replay_head_bytes)),
                 first, r.offset, r.payload.size()};
      } else {
        CHGATE_ASSIGN_OR_RETURN(std::vector<LsnRange> ranges, DecodeCommitPayload(r.payload));
        commits_.insert(commits_.end(), ranges.begin(), ranges.end());
      }
    }
    absl::MutexLock l(&spool_.mu_);
    spool_.segments_[first] = Segment{path, scan.good_end, 0};
    spool_.disk_bytes_ += scan.good_end;
    return absl::OkStatus();
  }

  // Writes `bytes` to a new "<segment>.corrupt[.N]" file; returns its name.
  absl::StatusOr<std::string> WriteQuarantine(const std::string& segment, std::string_view bytes) {
    for (int n = 0;; ++n) {
      std::string name = absl::StrCat(segment, ".corrupt");
      if (n > 0) absl::StrAppend(&name, ".", n);
      const std::string path = absl::StrCat(spool_.dir_, "/", name);
      absl::StatusOr<int> fd = ops_->Open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
      if (absl::IsAlreadyExists(fd.status())) continue;
      if (!fd.ok()) return fd.status();
      absl::Status st = absl::OkStatus();
      size_t done = 0;
      while (st.ok() && done < bytes.size()) {
        absl::StatusOr<size_t> w = ops_->Write(*fd, bytes.data() + done, bytes.size() - done);
        if (!w.ok()) {
          st = w.status();
        } else if (*w == 0) {
          st = absl::UnavailableError(absl::StrCat("write to ", path, " made no progress"));
        } else {
          done += *w;
        }
      }
      if (st.ok()) st = ops_->DataSync(*fd);
      const absl::Status closed = ops_->Close(*fd);
      CHGATE_RETURN_IF_ERROR(st);
      CHGATE_RETURN_IF_ERROR(closed);
      dir_changed_ = true;
      return name;
    }
  }

  std::vector<SpoolRecord> Finish() {
    std::sort(commits_.begin(), commits_.end(),
              [](const LsnRange& a, const LsnRange& b) { return a.first < b.first; });
    std::vector<LsnRange> merged;
    for (const LsnRange& r : commits_) {
      if (!merged.empty() && r.first <= merged.back().last + 1) {
        merged.back().last = std::max(merged.back().last, r.last);
      } else {
        merged.push_back(r);
      }
    }
    auto committed = [&merged](uint64_t lsn) {
      auto it = std::upper_bound(merged.begin(), merged.end(), lsn,
                                 [](uint64_t v, const LsnRange& r) { return v < r.first; });
      return it != merged.begin() && std::prev(it)->last >= lsn;
    };
    std::vector<SpoolRecord> replay;
    const absl::Time now = absl::Now();
    absl::MutexLock l(&spool_.mu_);
    for (auto& [lsn, d] : data_) {
      if (committed(lsn)) {
        ++report_.committed_records;
        continue;
      }
      spool_.pending_[lsn] = Pending{now, d.segment, d.offset, d.size};
      ++spool_.segments_[d.segment].pending_data;
      replay.push_back(SpoolRecord{lsn, std::move(d.payload), d.size, std::move(d.head)});
    }
    report_.replayed_records = replay.size();
    report_.next_lsn = next_lsn_;
    spool_.writer_lsn_ = next_lsn_;
    spool_.durable_lsn_end_ = next_lsn_;
    spool_.stats_.bytes_cut = report_.bytes_cut;
    spool_.stats_.bytes_quarantined = report_.bytes_quarantined;
    return replay;
  }

  Spool& spool_;
  FileOps* const ops_;
  RecoveryReport& report_;
  std::map<uint64_t, Data> data_;
  std::vector<LsnRange> commits_;
  std::string buffer_;  // the segment being scanned
  uint64_t next_lsn_ = kFirstLsn;
  bool dir_changed_ = false;
};

// ---------------------------------------------------------------------------------------------

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
  CHGATE_RETURN_IF_ERROR(ops->MakeDir(dir));

  std::unique_ptr<Spool> spool(new Spool(dir, std::move(options)));
  const std::string lock_path = absl::StrCat(dir, "/LOCK");
  CHGATE_ASSIGN_OR_RETURN(spool->lock_fd_, ops->Open(lock_path, O_RDWR | O_CREAT, 0644));
  if (absl::Status st = ops->LockExclusive(spool->lock_fd_); !st.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("spool directory ", dir, " is in use by another spool (", st.message(), ")"));
  }

  CHGATE_RETURN_IF_ERROR(spool->LoadOrMakeId());
  Opened opened;
  CHGATE_ASSIGN_OR_RETURN(opened.replay, Recovery(*spool, opened.report).Run());
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

// ---------------------------------------------------------------------------------------------
// Writer thread.

void Spool::WriterLoop() {
  std::vector<Entry> batch;
  std::vector<Completion> completions;
  while (true) {
    bool stopping;
    {
      absl::MutexLock l(&mu_);
      auto has_work = [this]()
                          ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || !queue_.empty(); };
      mu_.AwaitWithDeadline(absl::Condition(&has_work),
                            std::min(unsynced_since_ + options_.commit_sync_delay,
                                     last_set_aside_scan_ + options_.set_aside_scan_interval));
      if (options_.group_commit_delay > absl::ZeroDuration() && queued_data_ > 0 && !stopping_ &&
          last_batch_data_ > 1) {
        auto full = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return stopping_ || queued_bytes_ >= options_.max_batch_bytes;
        };
        mu_.AwaitWithDeadline(absl::Condition(&full), first_queued_ + options_.group_commit_delay);
      }
      batch.swap(queue_);
      stopping = stopping_;
      if (queued_data_ > 0) last_batch_data_ = queued_data_;
    }
    if (!batch.empty()) WriteBatch(batch, completions);
    batch.clear();
    if (unsynced_since_ != absl::InfiniteFuture() &&
        (stopping || absl::Now() >= unsynced_since_ + options_.commit_sync_delay)) {
      if (!SyncActive().ok()) {
        // Not retried on this file (see WriteChunk): the next write starts a segment, whose
        // commit snapshot carries the marks that may not have reached the disk.
        active_broken_ = true;
        unsynced_since_ = absl::InfiniteFuture();
      }
    }
    DeleteCommittedSegments();
    if (const absl::Time now = absl::Now();
        now >= last_set_aside_scan_ + options_.set_aside_scan_interval) {
      last_set_aside_scan_ = now;
      ScanSetAside();
    }
    if (!completions.empty()) {
      // Run by the completion thread, so the next batch's write and sync start at once.
      absl::MutexLock l(&done_mu_);
      for (Completion& c : completions) done_queue_.push_back(std::move(c));
      completions.clear();
    }
    if (stopping) {
      absl::MutexLock l(&mu_);
      if (queue_.empty()) break;
    }
  }
  absl::MutexLock l(&done_mu_);
  writer_done_ = true;
}

void Spool::CompleterLoop() {
  std::vector<Completion> run;
  while (true) {
    bool last;
    {
      absl::MutexLock l(&done_mu_);
      auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return writer_done_ || !done_queue_.empty();
      };
      done_mu_.Await(absl::Condition(&ready));
      run.swap(done_queue_);
      last = writer_done_;
    }
    for (Completion& c : run) c.done(std::move(c.result));
    run.clear();
    if (last) {
      absl::MutexLock l(&done_mu_);
      if (done_queue_.empty()) return;
    }
  }
}

void Spool::WriteBatch(std::vector<Entry>& batch, std::vector<Completion>& completions) {
  if (!retry_commits_.empty()) {
    batch.insert(batch.begin(), std::make_move_iterator(retry_commits_.begin()),
                 std::make_move_iterator(retry_commits_.end()));
    retry_commits_.clear();
  }
  size_t i = 0;
  absl::Status failure;
  while (i < batch.size()) {
    if (active_fd_ < 0 || active_broken_ || roll_) {
      roll_ = false;
      failure = StartSegment();
      if (!failure.ok()) break;
    }
    // One chunk: the records that fit in the active segment (at least one, so a segment that
    // holds nothing but its header takes any record).
    // Kept across chunks (the writer thread's alone), so a chunk allocates nothing once the
    // buffer has grown to the usual group's size.
    std::string& buf = write_buf_;
    if (buf.capacity() > kKeptWriteBuffer) std::string().swap(buf);  // after an unusual chunk
    buf.clear();
    std::vector<uint64_t>& offsets = write_offsets_;  // of each record in `buf`
    offsets.clear();
    const uint64_t chunk_start = active_size_;
    const uint64_t first_lsn = writer_lsn_;
    uint64_t lsn = first_lsn;
    bool sync = false;
    size_t j = i;
    for (; j < batch.size(); ++j) {
      Entry& e = batch[j];
      if (e.kind == Entry::Kind::kBarrier) {
        sync = true;
        continue;
      }
      const uint64_t size = active_size_ + buf.size() + e.bytes();
      if (size > options_.segment_bytes && active_size_ + buf.size() > active_base_size_) break;
      const RecordType type =
          e.kind == Entry::Kind::kData ? RecordType::kData : RecordType::kCommit;
      offsets.push_back(buf.size());
      AppendRecord(buf, lsn++, type, e.payload);
      if (type == RecordType::kData) sync = true;
    }
    const bool rollover = j < batch.size();
    if (!buf.empty() && (options_.commit_sync_delay <= absl::ZeroDuration() || rollover)) {
      sync = true;
    }
    absl::Status st = absl::OkStatus();
    if (!buf.empty()) {
      st = WriteChunk(buf, sync);
    } else if (sync) {
      st = SyncActive();
    }
    if (!st.ok()) {
      // The records of a failed write are gone (truncated); their LSNs are given again unless
      // the segment is abandoned (then they may still be on disk and must not repeat).
      if (active_broken_) writer_lsn_ = lsn;
      failure = st;
      break;
    }
    writer_lsn_ = lsn;
    if (!sync && !buf.empty()) unsynced_since_ = std::min(unsynced_since_, absl::Now());
    absl::MutexLock l(&mu_);
    Segment& seg = segments_[active_first_];
    seg.bytes += buf.size();
    disk_bytes_ += buf.size();
    written_since_check_ += buf.size();
    durable_lsn_end_ = writer_lsn_;
    uint64_t rec_lsn = first_lsn;
    size_t rec = 0;  // index into `offsets`
    for (size_t k = i; k < j; ++k) {
      Entry& e = batch[k];
      queued_bytes_ -= e.bytes();
      switch (e.kind) {
        case Entry::Kind::kData:
          --queued_data_;
          pending_[rec_lsn] =
              Pending{e.enqueued, active_first_, chunk_start + offsets[rec], e.payload.size()};
          ++rec;
          ++seg.pending_data;
          ++stats_.appends;
          stats_.bytes_appended += e.bytes();
          completions.push_back(Completion{std::move(e.done), rec_lsn++});
          if (e.payload.capacity() <= kKeptBufferBytes) spent_.push_back(std::move(e.payload));
          break;
        case Entry::Kind::kCommit:
          ++rec_lsn;
          ++rec;
          if (sync) {
            ReleaseCommitsLocked(e.committed);
          } else {
            written_unsynced_commits_.insert(written_unsynced_commits_.end(), e.committed.begin(),
                                             e.committed.end());
          }
          break;
        case Entry::Kind::kBarrier:
          completions.push_back(Completion{std::move(e.done), uint64_t{0}});
          break;
      }
    }
    i = j;
    roll_ = rollover;
  }
  if (!spent_.empty()) {
    absl::MutexLock l(&buffers_mu_);
    for (std::string& s : spent_) {
      if (buffers_.size() >= kKeptBuffers) break;
      buffers_.push_back(std::move(s));
    }
    spent_.clear();
  }
  if (failure.ok()) return;
  absl::MutexLock l(&mu_);
  for (size_t k = i; k < batch.size(); ++k) {
    Entry& e = batch[k];
    queued_bytes_ -= e.bytes();
    switch (e.kind) {
      case Entry::Kind::kData:
        --queued_data_;
        ++stats_.failed_appends;
        completions.push_back(Completion{std::move(e.done), failure});
        break;
      case Entry::Kind::kCommit:
        // Already applied in memory; written again with the next batch.
        retry_commits_.push_back(std::move(e));
        break;
      case Entry::Kind::kBarrier:
        completions.push_back(Completion{std::move(e.done), failure});
        break;
    }
  }
}

absl::Status Spool::WriteChunk(const std::string& buf, bool sync) {
  const uint64_t start = active_size_;
  absl::Status st = absl::OkStatus();
  size_t done = 0;
  while (done < buf.size()) {
    absl::StatusOr<size_t> n = ops_->Write(active_fd_, buf.data() + done, buf.size() - done);
    if (!n.ok()) {
      st = n.status();
      break;
    }
    if (*n == 0) {
      st = absl::UnavailableError("write made no progress");
      break;
    }
    done += *n;
  }
  bool sync_failed = false;
  failpoint::Hit("spool_written_before_sync");
  if (st.ok() && sync) {
    st = SyncActive();
    sync_failed = !st.ok();
  }
  if (st.ok()) {
    active_size_ += buf.size();
    return st;
  }
  // No partial record may stay: cut back to the last good byte. After a failed fdatasync the
  // kernel may have dropped the dirty pages and a second fdatasync can report success for data
  // that never reached the disk, so such a segment is not written again.
  const absl::Status cut = ops_->Truncate(active_fd_, start);
  if (!cut.ok() || sync_failed) active_broken_ = true;
  std::string path;
  {
    absl::MutexLock l(&mu_);
    path = segments_[active_first_].path;
  }
  return WithContext(st, absl::StrCat("spool segment ", path));
}

absl::Status Spool::SyncActive() {
  const absl::Time start = absl::Now();
  const absl::Status st = ops_->DataSync(active_fd_);
  const absl::Duration took = absl::Now() - start;
  if (st.ok()) unsynced_since_ = absl::InfiniteFuture();
  absl::MutexLock l(&mu_);
  if (st.ok()) {
    ReleaseCommitsLocked(written_unsynced_commits_);
    written_unsynced_commits_.clear();
  }
  ++stats_.fsyncs;
  stats_.fsync_total += took;
  stats_.fsync_last = took;
  return st;
}

void Spool::CloseActive() {
  if (active_fd_ < 0) return;
  if (unsynced_since_ != absl::InfiniteFuture() && !active_broken_) (void)SyncActive();
  unsynced_since_ = absl::InfiniteFuture();
  (void)ops_->Close(active_fd_);
  active_fd_ = -1;
  absl::MutexLock l(&mu_);
  has_active_ = false;
}

absl::Status Spool::StartSegment() {
  CloseActive();
  const uint64_t first = writer_lsn_;
  const std::string path = absl::StrCat(dir_, "/", SegmentFileName(first));
  std::string buf = EncodeSegmentHeader(first);
  uint64_t lsn_end = first;
  // Every commit made so far is in the snapshot (each such LSN lies in a kept segment, since
  // its segment still counts it), so once the snapshot is synced they are all durable.
  std::vector<uint64_t> covered;
  {
    absl::MutexLock l(&mu_);
    RefreshFreeBytesLocked(/*force=*/true);
    const uint64_t from = segments_.empty() ? first : segments_.begin()->first;
    const std::vector<LsnRange> committed = CommittedRangesLocked(from, first);
    for (const auto& [lsn, segment] : not_durable_commits_) {
      if (lsn >= from && lsn < first) covered.push_back(lsn);
    }
    if (!committed.empty()) {
      AppendRecord(buf, lsn_end++, RecordType::kCommit, EncodeCommitPayload(committed));
    }
  }
  // O_APPEND: every write(2) lands at the file's current end, atomically with respect to the
  // file offset, so a write after an ftruncate continues at the cut (no hole, no overwrite of an
  // earlier record even if our own size bookkeeping were wrong). It does not make a write atomic
  // on disk (a crash can leave any prefix of it, pages out of order, or a size extended over
  // zeros: the CRCs catch that), does not prevent short writes (WriteChunk loops), persists
  // nothing by itself (fdatasync does), and does not make the file's name durable (the
  // directory's fsync does).
  absl::StatusOr<int> fd = ops_->Open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND, 0644);
  if (!fd.ok()) {
    ++writer_lsn_;  // never try the same name twice
    return WithContext(fd.status(), "spool: starting a segment");
  }
  absl::Status st = absl::OkStatus();
  size_t done = 0;
  while (st.ok() && done < buf.size()) {
    absl::StatusOr<size_t> n = ops_->Write(*fd, buf.data() + done, buf.size() - done);
    if (!n.ok()) {
      st = n.status();
    } else if (*n == 0) {
      st = absl::UnavailableError("write made no progress");
    } else {
      done += *n;
    }
  }
  if (st.ok()) st = ops_->DataSync(*fd);
  if (st.ok()) st = SyncDir();
  if (!st.ok()) {
    (void)ops_->Close(*fd);
    (void)ops_->Unlink(path);
    (void)SyncDir();
    ++writer_lsn_;
    return WithContext(st, absl::StrCat("spool: starting segment ", path));
  }
  active_fd_ = *fd;
  active_size_ = buf.size();
  active_base_size_ = buf.size();
  active_broken_ = false;
  writer_lsn_ = lsn_end;
  absl::MutexLock l(&mu_);
  ReleaseCommitsLocked(covered);
  written_unsynced_commits_.clear();  // all among `covered`: written before this snapshot
  segments_[first] = Segment{path, buf.size(), 0};
  disk_bytes_ += buf.size();
  written_since_check_ += buf.size();
  active_first_ = first;
  has_active_ = true;
  durable_lsn_end_ = writer_lsn_;
  return absl::OkStatus();
}

void Spool::ReleaseCommitsLocked(const std::vector<uint64_t>& lsns) {
  for (uint64_t lsn : lsns) {
    auto it = not_durable_commits_.find(lsn);
    if (it == not_durable_commits_.end()) continue;  // released already (by a snapshot)
    auto seg = segments_.find(it->second);
    if (seg != segments_.end() && seg->second.pending_data > 0) --seg->second.pending_data;
    not_durable_commits_.erase(it);
  }
}

void Spool::DeleteCommittedSegments() {
  std::vector<std::pair<uint64_t, std::string>> victims;
  {
    absl::MutexLock l(&mu_);
    if (segments_.size() < 2) return;
    // Never the newest segment: its commit snapshot and records are what make deleting the
    // others safe (they cover every commit mark written in older segments).
    const auto newest = std::prev(segments_.end());
    for (auto it = segments_.begin(); it != newest; ++it) {
      if (it->second.pending_data == 0) victims.emplace_back(it->first, it->second.path);
    }
  }
  if (victims.empty()) return;
  for (const auto& [first, path] : victims) {
    const absl::Status st = ops_->Unlink(path);
    if (!st.ok() && !absl::IsNotFound(st)) continue;  // tried again after the next batch
    {
      absl::MutexLock w(&read_mu_);
      auto fd = read_fds_.find(first);
      if (fd != read_fds_.end()) {
        (void)ops_->Close(fd->second);
        read_fds_.erase(fd);
      }
    }
    absl::MutexLock l(&mu_);
    auto it = segments_.find(first);
    disk_bytes_ -= it->second.bytes;
    segments_.erase(it);
    ++stats_.segments_deleted;
  }
  (void)SyncDir();  // a deletion lost in a crash is redone by the next Open
}

absl::Status Spool::SyncDir() {
  CHGATE_ASSIGN_OR_RETURN(const int fd, ops_->Open(dir_, O_RDONLY | O_DIRECTORY, 0));
  const absl::Status st = ops_->Sync(fd);
  const absl::Status closed = ops_->Close(fd);
  CHGATE_RETURN_IF_ERROR(st);
  return closed;
}

}  // namespace chgate::spool
