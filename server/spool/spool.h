// Spool: a durable local write-ahead log of opaque records (for chgate, insert requests), for an
// ack mode where a request is acknowledged once it is on local disk and sent to ClickHouse later.
//
// Append() queues a record; one writer thread writes everything queued with one write and one
// fdatasync (group commit), and a completion thread then completes every caller of that batch
// with the record's LSN, or the error, while the writer goes on with the next batch.
// MarkCommitted() records that ClickHouse has the records; a segment file whose every data record
// is committed is deleted. Open() recovers a directory: it validates every record, cuts a torn tail
// (a crash mid-append), quarantines corrupt parts into `*.corrupt` files, and hands back the
// records not yet committed, in LSN order, for replay. Bounds: max_bytes on disk and min_free_bytes
// left on the file system; appends beyond them are refused at once.
//
// Thread safety: every public method may be called from any thread at once. Append's `done`
// runs on the completion thread, in LSN order, outside the spool's lock; it must not block
// (AppendAndWait, Flush or Close from inside it would wait for the very thread running it), but
// may call Append or MarkCommitted. Lifetime: the Spool owns its files while open (an flock on
// <dir>/LOCK keeps a second process out); Close(), or the destructor, writes and syncs what is
// queued first.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/spool/file_ops.h"
#include "server/spool/format.h"

namespace chgate::spool {

struct SpoolOptions {
  // A new segment file starts when the active one would grow past this (a single record larger
  // than a segment is refused).
  uint64_t segment_bytes = 64 << 20;
  // Total bytes of the segment files. A data record that would take the spool past it is refused
  // with ResourceExhausted. Commit records and segment headers are not refused (refusing them
  // would keep the spool full); they may exceed it by a few KiB.
  uint64_t max_bytes = uint64_t{1} << 30;
  // Appends are refused while the file system has less free space than this (statvfs, checked
  // when a segment starts and at most every space_check_interval on the append path). 0: the
  // default, 2 x segment_bytes.
  uint64_t min_free_bytes = 0;
  absl::Duration space_check_interval = absl::Seconds(1);
  // 0: a batch is written as soon as the previous fdatasync returned. > 0: while appends arrive
  // concurrently (the previous batch held more than one data record), the writer waits up to
  // this long after a batch's first record for more (or until max_batch_bytes are queued), so
  // one fdatasync serves more of them; a lone caller appending one record at a time is never
  // delayed.
  absl::Duration group_commit_delay = absl::ZeroDuration();
  uint64_t max_batch_bytes = 8 << 20;
  // Commit records are written at once but synced lazily: with the next data batch, or on their
  // own this long after being written. A commit mark lost in a crash only means its rows are
  // replayed again, which ClickHouse deduplicates (the insert's deduplication token).
  absl::Duration commit_sync_delay = absl::Seconds(1);
  // Whether Open hands back the payloads of the records to replay. false: only their LSNs and
  // sizes, and the caller reads each with Read() when it needs it, so recovering a large spool
  // does not hold it all in memory.
  bool replay_payloads = true;
  // Without replay_payloads: how many leading bytes of each record to replay Open hands back
  // (SpoolRecord::head), read during the scan it makes anyway, so the caller learns what a record
  // is about without reading it again.
  uint64_t replay_head_bytes = 0;
  // How often the writer thread adds up the bytes set aside beside the segments (dead letters
  // and quarantined *.corrupt files, which count against max_bytes), besides at Open and
  // AddSetAside. Files removed by hand (`chgate spool delete`) free their room by the next scan.
  absl::Duration set_aside_scan_interval = absl::Seconds(10);
  // The file operations; tests inject faults. Must outlive the Spool.
  FileOps* file_ops = DefaultFileOps();
};

// A record to replay: appended and durable, not yet marked committed.
struct SpoolRecord {
  uint64_t lsn = 0;
  std::string payload;  // empty unless SpoolOptions::replay_payloads
  uint64_t size = 0;    // of the payload
  // Without replay_payloads: the payload's first SpoolOptions::replay_head_bytes (all of it when
  // shorter), checked with the rest of the record at Open.
  std::string head;
};

// What Open() found and did.
struct RecoveryReport {
  uint64_t segments = 0;           // segment files scanned
  uint64_t records = 0;            // valid records of all types
  uint64_t data_records = 0;       // valid kData records
  uint64_t committed_records = 0;  // kData records covered by a commit record
  uint64_t replayed_records = 0;   // kData records handed back (not committed)
  uint64_t bytes_cut = 0;          // torn tail removed from the last segment
  uint64_t segments_deleted = 0;   // fully committed or empty segments removed
  // A corrupt part moved aside. The good records before it are kept, and so are those after it
  // when the damaged record's length survived (`kept_in`).
  struct Quarantine {
    std::string segment;   // the segment's file name
    std::string moved_to;  // the file name now holding the corrupt bytes
    uint64_t offset = 0;   // where the corrupt part started in the segment
    uint64_t bytes = 0;
    std::string reason;
    // The one damaged record's LSN, when the records after it were kept (0: every record from
    // `offset` to the end of the segment is in `moved_to`).
    uint64_t lost_lsn = 0;
    std::string kept_in;  // the new segment file holding the records after it, or ""
  };
  std::vector<Quarantine> quarantined;
  uint64_t bytes_quarantined = 0;
  uint64_t next_lsn = 0;  // the LSN the next record gets
};

// Counters and levels for metrics.
struct SpoolStats {
  uint64_t disk_bytes = 0;  // of all segment files
  uint64_t segments = 0;
  uint64_t pending_records = 0;  // durable kData records not yet committed
  // When the oldest pending record was appended (Open's time for replayed ones);
  // InfiniteFuture when nothing is pending.
  absl::Time oldest_pending_time = absl::InfiniteFuture();
  uint64_t queued_records = 0;  // accepted, not yet durable
  uint64_t appends = 0;         // data records made durable
  uint64_t bytes_appended = 0;  // bytes of those records on disk (headers included)
  uint64_t refusals = 0;        // appends refused at once (max_bytes, free space, closed)
  uint64_t failed_appends = 0;  // appends completed with a write or sync error
  uint64_t fsyncs = 0;
  absl::Duration fsync_total;
  absl::Duration fsync_last;
  uint64_t segments_deleted = 0;
  uint64_t free_bytes = 0;  // of the file system, as last checked
  // From Open's recovery.
  uint64_t bytes_cut = 0;
  uint64_t bytes_quarantined = 0;
  // Bytes of the dead-letter directory and of quarantined *.corrupt files, as last added up.
  uint64_t set_aside_bytes = 0;
};

class Spool {
 public:
  // `done` receives the record's LSN once it is durable, or the write/sync error:
  // ResourceExhausted for ENOSPC, Unavailable for EIO and other I/O errors, or Unavailable when
  // the spool was closed before the record could be written.
  using AppendCallback = absl::AnyInvocable<void(absl::StatusOr<uint64_t> lsn)>;

  struct Opened;

  // Opens (creating if needed) the spool in `dir` and recovers it (see the top). Errors:
  // FailedPrecondition when another Spool holds the directory; InvalidArgument for bad options;
  // the FileOps error of a failed directory, read or write operation.
  [[nodiscard]] static absl::StatusOr<Opened> Open(std::string dir, SpoolOptions options);

  ~Spool();
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  // Queues `payload` as a data record. OK: `done` will run exactly once (see AppendCallback). An
  // error: nothing was queued and `done` is not called. ResourceExhausted when the record does
  // not fit under max_bytes or the file system is below min_free_bytes (the message has the
  // numbers); InvalidArgument when the record is larger than a segment; FailedPrecondition after
  // Close.
  [[nodiscard]] absl::Status Append(std::string_view payload, AppendCallback done);
  // As Append, taking the payload's string instead of copying it.
  [[nodiscard]] absl::Status AppendOwned(std::string payload, AppendCallback done);
  // An empty string for AppendOwned's payload, with the capacity of an earlier payload whose
  // write is done where one is kept: a caller appending one record per request reuses them
  // instead of allocating one each time.
  std::string TakeBuffer();
  // As Append, but never refused for max_bytes or min_free_bytes: for small records that let
  // the spool shrink (chgate's batch intents, without which the pending records cannot be sent).
  // The write itself can still fail with ENOSPC.
  [[nodiscard]] absl::Status AppendExempt(std::string_view payload, AppendCallback done);
  // Append and wait until the record is durable. Returns its LSN or either kind of error above.
  [[nodiscard]] absl::StatusOr<uint64_t> AppendAndWait(std::string_view payload,
                                                       bool exempt = false);

  // The payload of the durable, not yet committed data record `lsn`, read back from its segment
  // and checked (length, CRC, LSN). NotFound when no such record is pending (never written, or
  // committed); DataLoss when the bytes on disk no longer check out; the read's I/O error.
  [[nodiscard]] absl::StatusOr<std::string> Read(uint64_t lsn) const;

  // Marks the kData records `lsns` committed in ClickHouse: they are no longer replayed, and a
  // segment whose data records are all committed is deleted. Queues one commit record (synced
  // lazily, see commit_sync_delay). LSNs already committed are ignored. InvalidArgument for an
  // LSN that no durable record has had; FailedPrecondition after Close.
  [[nodiscard]] absl::Status MarkCommitted(const std::vector<uint64_t>& lsns);

  // Waits until everything queued before the call (data and commit records) is durable.
  // Returns the sync's error if it failed; FailedPrecondition after Close.
  [[nodiscard]] absl::Status Flush();

  // Writes and syncs what is queued, stops the writer and closes the files. Idempotent.
  void Close();

  SpoolStats Stats() const;
  const std::string& dir() const { return dir_; }
  // Where batches refused for good are kept (<dir>/dead-letter): their bytes, and those of
  // quarantined files, count against max_bytes.
  std::string dead_letter_dir() const { return dir_ + "/dead-letter"; }
  // The file operations the spool uses (SpoolOptions::file_ops), for files written beside it.
  FileOps* file_ops() const { return ops_; }
  // Counts `bytes` just written to the dead-letter directory at once (the periodic scan would
  // find them later).
  void AddSetAside(uint64_t bytes);
  // The spool's name: 32 random hex digits made when the directory was first opened, kept in
  // <dir>/ID, the same across restarts (and different for a new directory, whose LSNs start
  // over).
  const std::string& id() const { return id_; }

 private:
  static constexpr uint64_t kFirstLsn = 1;
  // The writer keeps its chunk buffer up to this size between chunks.
  static constexpr size_t kKeptWriteBuffer = size_t{4} << 20;
  // Payload strings kept for TakeBuffer: enough for the records of a few group commits.
  static constexpr size_t kKeptBuffers = 64;
  static constexpr size_t kKeptBufferBytes = size_t{64} << 10;  // at most 4 MiB kept in all

  // A queued append, commit record or sync barrier.
  struct Entry {
    enum class Kind { kData, kCommit, kBarrier };
    Kind kind = Kind::kData;
    std::string payload;
    AppendCallback done;  // kData and kBarrier
    absl::Time enqueued;
    std::vector<uint64_t> committed;  // kCommit: the LSNs its record marks committed
    uint64_t bytes() const { return kind == Kind::kBarrier ? 0 : RecordSize(payload.size()); }
  };
  struct Segment {
    std::string path;
    uint64_t bytes = 0;
    // kData records not covered by a durable commit record (see the rule in spool.cc).
    uint64_t pending_data = 0;
  };
  struct Pending {
    absl::Time appended;
    uint64_t segment = 0;  // first LSN of the segment holding it
    uint64_t offset = 0;   // of the record in the segment
    uint64_t size = 0;     // of the payload
  };
  struct Completion {
    AppendCallback done;
    absl::StatusOr<uint64_t> result;
  };
  class Recovery;
  // Scans the segments before the writer starts (recovery.cc): cuts or quarantines what is bad,
  // fills the segments and pending records, and returns the records to replay in LSN order.
  absl::StatusOr<std::vector<SpoolRecord>> Recover(RecoveryReport& report);

  Spool(std::string dir, SpoolOptions options);

  // Writer thread, and the thread that runs the callbacks of what it wrote.
  void WriterLoop();
  void CompleterLoop();
  // Writes `batch` in chunks (one per segment it fills), completing its appends and barriers.
  void WriteBatch(std::vector<Entry>& batch, std::vector<Completion>& completions);
  // Encodes into write_buf_ the records of batch[i, j) that fit in the active segment (at least
  // one, so a segment holding only its header takes any record), their offsets in
  // write_offsets_; sets *sync for a data record or a barrier among them. Returns j.
  size_t EncodeChunk(std::vector<Entry>& batch, size_t i, bool* sync);
  // After batch[i, j) was written (as write_buf_, at chunk_start, LSNs from first_lsn, synced or
  // not): counts its records, makes its data pending and queues the completions.
  void ApplyChunkLocked(std::vector<Entry>& batch, size_t i, size_t j, uint64_t chunk_start,
                        uint64_t first_lsn, bool synced, std::vector<Completion>& completions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives the written payloads' strings back for TakeBuffer.
  void ReturnSpentBuffers();
  // batch[i, end) was not written: fails its appends and barriers, keeps its commit records to
  // write again.
  void FailEntriesLocked(std::vector<Entry>& batch, size_t i, const absl::Status& failure,
                         std::vector<Completion>& completions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `buf` (records of `lsns` consecutive from `first_lsn`) at the end of the active
  // segment, syncing if `sync`; on an error truncates back so no partial record stays.
  absl::Status WriteChunk(const std::string& buf, bool sync);
  absl::Status SyncActive();
  // Closes the active segment (if any) and starts a new one at writer_lsn_, whose first record
  // is a commit snapshot: every committed LSN from the oldest kept segment on, so that deleting
  // older segments never loses a commit mark of a segment that stays.
  absl::Status StartSegment();
  void CloseActive();
  void DeleteCommittedSegments();
  // `lsns` are now covered by a durable commit record: their segments stop counting them.
  void ReleaseCommitsLocked(const std::vector<uint64_t>& lsns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SyncDir();

  absl::Status CheckSpaceLocked(uint64_t record_bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RefreshFreeBytesLocked(bool force) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AppendData(std::string payload, AppendCallback done, bool exempt);
  std::vector<LsnRange> CommittedRangesLocked(uint64_t from, uint64_t to) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Reads <dir>/ID, or makes it.
  absl::Status LoadOrMakeId();
  // Adds up the bytes of quarantined files and of the dead-letter directory into
  // set_aside_bytes_ (file-system errors leave the last sum).
  void ScanSetAside();

  const std::string dir_;
  std::string id_;
  const SpoolOptions options_;
  FileOps* const ops_;
  int lock_fd_ = -1;

  mutable absl::Mutex mu_;
  std::vector<Entry> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // queued or being written
  uint64_t queued_data_ ABSL_GUARDED_BY(mu_) = 0;   // data records among them
  absl::Time first_queued_ ABSL_GUARDED_BY(mu_);    // of the oldest queued entry
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::map<uint64_t, Segment> segments_ ABSL_GUARDED_BY(mu_);  // by first LSN
  uint64_t active_first_ ABSL_GUARDED_BY(mu_) = 0;
  bool has_active_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t disk_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
  // Marked committed, but no durable commit record says so yet: LSN -> its segment's first LSN.
  std::map<uint64_t, uint64_t> not_durable_commits_ ABSL_GUARDED_BY(mu_);
  // Of those, the ones whose commit record is written to the active segment, awaiting its sync.
  std::vector<uint64_t> written_unsynced_commits_ ABSL_GUARDED_BY(mu_);
  uint64_t durable_lsn_end_ ABSL_GUARDED_BY(mu_) = 0;  // every LSN below was written
  uint64_t free_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t set_aside_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t written_since_check_ ABSL_GUARDED_BY(mu_) = 0;  // bytes written since the statvfs
  absl::Time free_checked_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  SpoolStats stats_ ABSL_GUARDED_BY(mu_);

  // Owned by the writer thread (and by Open before it starts).
  int active_fd_ = -1;
  uint64_t active_size_ = 0;          // bytes of the active segment known good
  uint64_t active_base_size_ = 0;     // its header and commit snapshot
  uint64_t writer_lsn_ = 0;           // the next LSN to give
  bool active_broken_ = false;        // a failed sync or truncate: the next write starts a segment
  bool roll_ = false;                 // the active segment is full: the next write starts a segment
  std::vector<Entry> retry_commits_;  // commit records whose write failed
  uint64_t last_batch_data_ = 0;      // data records in the last batch written
  std::string write_buf_;             // WriteBatch's chunk, reused
  std::vector<std::string> spent_;    // payloads written, to give back to buffers_
  std::vector<uint64_t> write_offsets_;                 // of each record in write_buf_
  absl::Time unsynced_since_ = absl::InfiniteFuture();  // commit records written, not synced
  absl::Time last_set_aside_scan_ = absl::InfinitePast();

  // Read()'s descriptors, one per segment read from: opened at its first Read, closed when the
  // segment is deleted or the spool closes. Reads share the lock; opening and closing take it
  // alone, so no read uses a descriptor being closed.
  // Payload strings whose records were written, for TakeBuffer (at most kKeptBuffers, each of
  // at most kKeptBufferBytes capacity).
  absl::Mutex buffers_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::vector<std::string> buffers_ ABSL_GUARDED_BY(buffers_mu_);

  mutable absl::Mutex read_mu_;
  mutable std::map<uint64_t, int> read_fds_ ABSL_GUARDED_BY(read_mu_);

  std::thread writer_;
  absl::Mutex done_mu_;
  std::vector<Completion> done_queue_ ABSL_GUARDED_BY(done_mu_);
  bool writer_done_ ABSL_GUARDED_BY(done_mu_) = false;
  std::thread completer_;
};

struct Spool::Opened {
  std::unique_ptr<Spool> spool;
  std::vector<SpoolRecord> replay;  // in LSN order
  RecoveryReport report;
};

}  // namespace chgate::spool
