// Recovery: what Spool::Open does before the writer starts. It keeps the rule of spool.cc: every
// segment read is synced before anything is decided from it.
#include <fcntl.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string_view>
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
      // A segment being written from the records after a damaged one when a crash came: never
      // renamed, so never complete. The damage is found again and the segment written anew.
      const std::string_view view(name);
      if (view.size() == 24 && view.substr(20) == ".tmp" &&
          ParseSegmentFileName(view.substr(0, 20)).has_value()) {
        CHGATE_RETURN_IF_ERROR(ops_->Unlink(absl::StrCat(spool_.dir_, "/", name)));
        dir_changed_ = true;
      }
    }
    // Before anything is changed: a segment of another format version (written by a newer
    // chgate, say, before a rollback) stops the start with every file left as it is.
    for (uint64_t first : firsts) CHGATE_RETURN_IF_ERROR(CheckVersion(first));
    // In LSN order; a segment made from the records after a damaged one comes right after the
    // segment it was taken from, and is recovered as any other.
    std::set<uint64_t> order(firsts.begin(), firsts.end());
    for (auto it = order.begin(); it != order.end();) {
      const uint64_t first = *it;
      CHGATE_ASSIGN_OR_RETURN(std::optional<uint64_t> split,
                              RecoverSegment(first, std::next(it) == order.end()));
      if (split.has_value()) order.insert(*split);
      it = order.upper_bound(first);
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

  // Recovers one segment; returns the first LSN of the segment it made of the records after a
  // damaged one, if it did.
  absl::StatusOr<std::optional<uint64_t>> RecoverSegment(uint64_t first, bool last) {
    const std::string name = SegmentFileName(first);
    const std::string path = absl::StrCat(spool_.dir_, "/", name);
    ++report_.segments;
    CHGATE_ASSIGN_OR_RETURN(const int fd, ops_->Open(path, O_RDWR, 0));
    std::optional<uint64_t> split;
    absl::Status st = RecoverOpenSegment(fd, first, last, name, path, &split);
    const absl::Status closed = ops_->Close(fd);
    CHGATE_RETURN_IF_ERROR(st);
    CHGATE_RETURN_IF_ERROR(closed);
    return split;
  }

  // The damaged part of a segment whose scan stopped at a bad record: moved aside (or, a torn
  // tail, cut), and the segment truncated to its good records. When the damaged record's length
  // survived and a valid record with the next LSN follows it, only that record is lost: the
  // records after it become a segment of their own (`*split`, its first LSN), written and synced
  // before this one is truncated, so a crash anywhere here loses nothing (the next start finds
  // the damage again and writes the same segment again).
  absl::Status HandleDamage(int fd, uint64_t first, bool last, const std::string& name,
                            std::string_view data, const SegmentScan& scan,
                            std::optional<uint64_t>* split) {
    const uint64_t bad_lsn = first + scan.records.size();
    const std::optional<uint64_t> next =
        scan.header_ok ? RecordsResumeAt(data, scan.good_end, bad_lsn) : std::nullopt;
    const bool resumes = next.has_value();
    const uint64_t bad_end = next.value_or(data.size());
    const uint64_t bad_bytes = bad_end - scan.good_end;
    std::string kept_in;
    if (resumes) {
      kept_in = SegmentFileName(bad_lsn + 1);
      std::string segment = EncodeSegmentHeader(bad_lsn + 1);
      segment.append(data.substr(bad_end));
      CHGATE_RETURN_IF_ERROR(WriteFileAtomically(ops_, spool_.dir_, kept_in, segment));
      dir_changed_ = true;
      *split = bad_lsn + 1;
    }
    if (!resumes && last && !scan.valid_record_after_bad) {
      // A crash mid-append: nothing but the unfinished write follows the last good record.
      report_.bytes_cut += bad_bytes;
    } else {
      CHGATE_ASSIGN_OR_RETURN(std::string moved_to,
                              WriteQuarantine(name, data.substr(scan.good_end, bad_bytes)));
      report_.quarantined.push_back(
          RecoveryReport::Quarantine{name, std::move(moved_to), scan.good_end, bad_bytes,
                                     scan.bad_reason, resumes ? bad_lsn : 0, std::move(kept_in)});
      report_.bytes_quarantined += bad_bytes;
    }
    CHGATE_RETURN_IF_ERROR(ops_->Truncate(fd, scan.good_end));
    return ops_->DataSync(fd);
  }

  absl::Status RecoverOpenSegment(int fd, uint64_t first, bool last, const std::string& name,
                                  const std::string& path, std::optional<uint64_t>* split) {
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
      CHGATE_RETURN_IF_ERROR(HandleDamage(fd, first, last, name, data, scan, split));
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
