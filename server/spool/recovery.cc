// Recovery: what Spool::Open does before the writer starts. It keeps the rule of spool.cc: every
// segment read is synced before anything is decided from it.
#include <fcntl.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/spool/spool.h"
#include "text/status_macros.h"

namespace chgate::spool {

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

absl::StatusOr<std::vector<SpoolRecord>> Spool::Recover(RecoveryReport& report) {
  return Recovery(*this, report).Run();
}

}  // namespace chgate::spool
