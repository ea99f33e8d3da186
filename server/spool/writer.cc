// The writer thread: group commits of queued records into the active segment, segment roll-over
// and deletion, and the completion thread that runs append callbacks. It keeps the rule of
// spool.cc: a segment goes only once commit records covering all its data records are durable.
#include <fcntl.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/failpoint.h"
#include "server/spool/spool.h"
#include "text/status_macros.h"

namespace chgate::spool {
namespace {

absl::Status WithContext(const absl::Status& s, const std::string& context) {
  return absl::Status(s.code(), absl::StrCat(context, ": ", s.message()));
}

}  // namespace

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
    const uint64_t chunk_start = active_size_;
    const uint64_t first_lsn = writer_lsn_;
    bool sync = false;
    const size_t j = EncodeChunk(batch, i, &sync);
    const bool rollover = j < batch.size();
    const std::string& buf = write_buf_;
    if (!buf.empty() && (options_.commit_sync_delay <= absl::ZeroDuration() || rollover)) {
      sync = true;
    }
    absl::Status st = absl::OkStatus();
    if (!buf.empty()) {
      st = WriteChunk(buf, sync);
    } else if (sync) {
      st = SyncActive();
    }
    const uint64_t lsn_end = first_lsn + write_offsets_.size();
    if (!st.ok()) {
      // The records of a failed write are gone (truncated); their LSNs are given again unless
      // the segment is abandoned (then they may still be on disk and must not repeat).
      if (active_broken_) writer_lsn_ = lsn_end;
      failure = st;
      break;
    }
    writer_lsn_ = lsn_end;
    if (!sync && !buf.empty()) unsynced_since_ = std::min(unsynced_since_, absl::Now());
    {
      absl::MutexLock l(&mu_);
      ApplyChunkLocked(batch, i, j, chunk_start, first_lsn, sync, completions);
    }
    i = j;
    roll_ = rollover;
  }
  ReturnSpentBuffers();
  if (failure.ok()) return;
  absl::MutexLock l(&mu_);
  FailEntriesLocked(batch, i, failure, completions);
}

size_t Spool::EncodeChunk(std::vector<Entry>& batch, size_t i, bool* sync) {
  // Kept across chunks (the writer thread's alone), so a chunk allocates nothing once the buffer
  // has grown to the usual group's size.
  std::string& buf = write_buf_;
  if (buf.capacity() > kKeptWriteBuffer) std::string().swap(buf);  // after an unusual chunk
  buf.clear();
  write_offsets_.clear();
  uint64_t lsn = writer_lsn_;
  size_t j = i;
  for (; j < batch.size(); ++j) {
    Entry& e = batch[j];
    if (e.kind == Entry::Kind::kBarrier) {
      *sync = true;
      continue;
    }
    const uint64_t size = active_size_ + buf.size() + e.bytes();
    if (size > options_.segment_bytes && active_size_ + buf.size() > active_base_size_) break;
    const RecordType type = e.kind == Entry::Kind::kData ? RecordType::kData : RecordType::kCommit;
    write_offsets_.push_back(buf.size());
    AppendRecord(buf, lsn++, type, e.payload);
    if (type == RecordType::kData) *sync = true;
  }
  return j;
}

void Spool::ApplyChunkLocked(std::vector<Entry>& batch, size_t i, size_t j, uint64_t chunk_start,
                             uint64_t first_lsn, bool synced,
                             std::vector<Completion>& completions) {
  Segment& seg = segments_[active_first_];
  seg.bytes += write_buf_.size();
  disk_bytes_ += write_buf_.size();
  written_since_check_ += write_buf_.size();
  durable_lsn_end_ = writer_lsn_;
  uint64_t rec_lsn = first_lsn;
  size_t rec = 0;  // index into write_offsets_
  for (size_t k = i; k < j; ++k) {
    Entry& e = batch[k];
    queued_bytes_ -= e.bytes();
    switch (e.kind) {
      case Entry::Kind::kData:
        --queued_data_;
        pending_[rec_lsn] =
            Pending{e.enqueued, active_first_, chunk_start + write_offsets_[rec], e.payload.size()};
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
        if (synced) {
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
}

void Spool::ReturnSpentBuffers() {
  if (spent_.empty()) return;
  absl::MutexLock l(&buffers_mu_);
  for (std::string& s : spent_) {
    if (buffers_.size() >= kKeptBuffers) break;
    buffers_.push_back(std::move(s));
  }
  spent_.clear();
}

void Spool::FailEntriesLocked(std::vector<Entry>& batch, size_t i, const absl::Status& failure,
                              std::vector<Completion>& completions) {
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

absl::Status Spool::SyncDir() { return SyncDirectory(ops_, dir_); }

}  // namespace chgate::spool
