// The spool: format, recovery (torn tails, corruption), group commit, bounds and injected
// file-system faults, on directories under the test's temp dir.
#include "server/spool/spool.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/spool/crc32c.h"
#include "server/spool/file_ops.h"
#include "server/spool/format.h"

namespace chgate::spool {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Helpers.

std::string FreshDir(std::string_view name) {
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("spool_", std::string(name));
  fs::remove_all(dir);
  return dir.string();
}

std::vector<std::string> FilesWithSuffix(const std::string& dir, std::string_view suffix) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteAll(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string Payload(int i, size_t size = 24) {
  std::string p = absl::StrCat("record-", i, "-");
  while (p.size() < size)
    p.push_back(static_cast<char>('a' + (p.size() + static_cast<size_t>(i)) % 26));
  return p;
}

std::vector<std::string> Payloads(const std::vector<SpoolRecord>& records) {
  std::vector<std::string> out;
  for (const SpoolRecord& r : records) out.push_back(r.payload);
  return out;
}

SpoolOptions SmallOptions() {
  return SpoolOptions{.segment_bytes = 4096, .max_bytes = 64 << 20, .min_free_bytes = 1};
}

Spool::Opened OpenOrDie(const std::string& dir, SpoolOptions options) {
  absl::StatusOr<Spool::Opened> opened = Spool::Open(dir, options);
  EXPECT_TRUE(opened.ok()) << opened.status();
  if (!opened.ok()) std::abort();
  return std::move(*opened);
}

// Callbacks of asynchronous appends, awaited without sleeping.
class Acks {
 public:
  Spool::AppendCallback Callback() {
    return [this](absl::StatusOr<uint64_t> lsn) {
      absl::MutexLock l(&mu_);
      results_.push_back(std::move(lsn));
    };
  }
  std::vector<absl::StatusOr<uint64_t>> WaitFor(size_t n) {
    absl::MutexLock l(&mu_);
    auto enough = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return results_.size() >= n; };
    mu_.Await(absl::Condition(&enough));
    return results_;
  }

 private:
  absl::Mutex mu_;
  std::vector<absl::StatusOr<uint64_t>> results_ ABSL_GUARDED_BY(mu_);
};

// The kernel's calls, with faults on demand.
class FaultyFileOps final : public FileOps {
 public:
  // From now on, writes succeed for `budget` more bytes in total (the write that crosses it is
  // short), then fail with `error_number` until ClearFaults.
  void FailWritesAfter(size_t budget, int error_number) {
    absl::MutexLock l(&mu_);
    write_fault_ = true;
    write_budget_ = budget;
    write_errno_ = error_number;
  }
  // The next `n` writes write only half of what they are given (at least one byte).
  void ShortenWrites(int n) {
    absl::MutexLock l(&mu_);
    short_writes_ = n;
  }
  void FailSyncs(int error_number) {
    absl::MutexLock l(&mu_);
    sync_errno_ = error_number;
  }
  void ClearFaults() {
    absl::MutexLock l(&mu_);
    write_fault_ = false;
    sync_errno_ = 0;
    short_writes_ = 0;
  }
  // From now on DataSync and Sync return at once without syncing: for tests of what recovery
  // reads, where durability is not the question and every sync only costs time.
  void SkipSyncs() {
    absl::MutexLock l(&mu_);
    skip_syncs_ = true;
  }
  void SetFreeBytes(uint64_t bytes) {
    absl::MutexLock l(&mu_);
    free_bytes_ = bytes;
  }
  // While the gate is closed, DataSync blocks (before syncing); SyncsWaiting counts the blocked.
  void CloseSyncGate() {
    absl::MutexLock l(&mu_);
    gate_closed_ = true;
  }
  void OpenSyncGate() {
    absl::MutexLock l(&mu_);
    gate_closed_ = false;
  }
  void AwaitSyncWaiting() {
    absl::MutexLock l(&mu_);
    auto waiting = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return syncs_waiting_ > 0; };
    mu_.Await(absl::Condition(&waiting));
  }

  absl::StatusOr<int> Open(const std::string& path, int flags, int mode) override {
    return real_->Open(path, flags, mode);
  }
  absl::Status Close(int fd) override { return real_->Close(fd); }
  absl::StatusOr<size_t> Write(int fd, const void* data, size_t size) override {
    {
      absl::MutexLock l(&mu_);
      if (write_fault_) {
        if (write_budget_ == 0) return ErrnoStatus(write_errno_, "write", "(injected)");
        size = std::min(size, write_budget_);
        write_budget_ -= size;
      } else if (short_writes_ > 0 && size > 1) {
        --short_writes_;
        size /= 2;
      }
    }
    return real_->Write(fd, data, size);
  }
  absl::StatusOr<size_t> ReadAt(int fd, void* data, size_t size, uint64_t offset) override {
    return real_->ReadAt(fd, data, size, offset);
  }
  absl::Status DataSync(int fd) override {
    {
      absl::MutexLock l(&mu_);
      ++syncs_waiting_;
      auto open = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !gate_closed_; };
      mu_.Await(absl::Condition(&open));
      --syncs_waiting_;
      if (sync_errno_ != 0) return ErrnoStatus(sync_errno_, "fdatasync", "(injected)");
      if (skip_syncs_) return absl::OkStatus();
    }
    return real_->DataSync(fd);
  }
  absl::Status Sync(int fd) override {
    {
      absl::MutexLock l(&mu_);
      if (skip_syncs_) return absl::OkStatus();
    }
    return real_->Sync(fd);
  }
  absl::Status Truncate(int fd, uint64_t size) override { return real_->Truncate(fd, size); }
  absl::StatusOr<uint64_t> FileSize(int fd) override { return real_->FileSize(fd); }
  absl::StatusOr<uint64_t> FreeBytes(const std::string&) override {
    absl::MutexLock l(&mu_);
    return free_bytes_;
  }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    return real_->ListDir(dir);
  }
  absl::Status Rename(const std::string& from, const std::string& to) override {
    return real_->Rename(from, to);
  }
  absl::Status Unlink(const std::string& path) override { return real_->Unlink(path); }
  absl::Status MakeDir(const std::string& path) override { return real_->MakeDir(path); }
  absl::Status LockExclusive(int fd) override { return real_->LockExclusive(fd); }

 private:
  FileOps* const real_ = DefaultFileOps();
  absl::Mutex mu_;
  bool write_fault_ ABSL_GUARDED_BY(mu_) = false;
  size_t write_budget_ ABSL_GUARDED_BY(mu_) = 0;
  int write_errno_ ABSL_GUARDED_BY(mu_) = 0;
  int short_writes_ ABSL_GUARDED_BY(mu_) = 0;
  bool skip_syncs_ ABSL_GUARDED_BY(mu_) = false;
  int sync_errno_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t free_bytes_ ABSL_GUARDED_BY(mu_) = uint64_t{1} << 40;
  bool gate_closed_ ABSL_GUARDED_BY(mu_) = false;
  int syncs_waiting_ ABSL_GUARDED_BY(mu_) = 0;
};

// ---------------------------------------------------------------------------------------------
// Checksum and format.

TEST(Crc32cTest, MatchesTheStandardCheckValue) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  // 32 bytes of zeros and of 0xFF (RFC 3720, B.4).
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
}

TEST(Crc32cTest, TheCpuInstructionAndTheTablesAgreeOnEveryLengthAndAlignment) {
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>((i * 131 + 7) & 0xFF));
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t size = 0; offset + size <= data.size(); size += 1 + size / 8) {
      const char* p = data.data() + offset;
      EXPECT_EQ(Crc32cExtend(0x1234u, p, size), Crc32cExtendPortable(0x1234u, p, size))
          << offset << "+" << size;
    }
  }
  EXPECT_EQ(Crc32cExtendPortable(0, "123456789", 9), 0xE3069283u);
}

TEST(Crc32cTest, ExtendsAcrossPieces) {
  const std::string text = "The quick brown fox jumps over the lazy dog, twice over.";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const uint32_t first = Crc32cExtend(0, text.data(), cut);
    EXPECT_EQ(Crc32cExtend(first, text.data() + cut, text.size() - cut), Crc32c(text));
  }
}

TEST(FormatTest, RecordHasLengthCrcLsnTypeAndPayloadLittleEndian) {
  std::string out;
  AppendRecord(out, 0x0102030405060708u, RecordType::kData, "ab");
  const std::string tail(
      "\x08\x07\x06\x05\x04\x03\x02\x01\x01"
      "ab",
      11);
  const uint32_t crc = Crc32c(tail);
  std::string expected("\x02\x00\x00\x00", 4);
  for (int i = 0; i < 4; ++i) expected.push_back(static_cast<char>((crc >> (8 * i)) & 0xFFu));
  expected += tail;
  EXPECT_EQ(out, expected);
}

TEST(FormatTest, SegmentHeaderStartsWithMagicAndVersion) {
  const std::string header = EncodeSegmentHeader(0x2A);
  ASSERT_EQ(header.size(), kSegmentHeaderSize);
  EXPECT_EQ(header.substr(0, 8), "CHGWAL01");
  EXPECT_EQ(header.substr(8, 4), std::string("\x01\x00\x00\x00", 4));
  const SegmentScan scan = ScanSegment(header, 0x2A);
  EXPECT_TRUE(scan.header_ok);
  EXPECT_TRUE(scan.bad_reason.empty());
  EXPECT_FALSE(ScanSegment(header, 0x2B).header_ok);  // the name must agree
}

TEST(FormatTest, SegmentFileNamesRoundTrip) {
  EXPECT_EQ(SegmentFileName(0xABC), "0000000000000abc.wal");
  EXPECT_EQ(ParseSegmentFileName("0000000000000abc.wal"), 0xABCu);
  EXPECT_EQ(ParseSegmentFileName("0000000000000ABC.wal"), std::nullopt);
  EXPECT_EQ(ParseSegmentFileName("0000000000000abc.wal.corrupt"), std::nullopt);
  EXPECT_EQ(ParseSegmentFileName("LOCK"), std::nullopt);
}

TEST(FormatTest, CommitRangesMergeAndRoundTrip) {
  const std::vector<LsnRange> ranges = RangesOf({7, 3, 4, 5, 9, 4, 10});
  EXPECT_EQ(ranges, (std::vector<LsnRange>{{3, 5}, {7, 7}, {9, 10}}));
  absl::StatusOr<std::vector<LsnRange>> back = DecodeCommitPayload(EncodeCommitPayload(ranges));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, ranges);
  EXPECT_FALSE(DecodeCommitPayload(std::string("\x02\x00\x00\x00", 4)).ok());
}

// ---------------------------------------------------------------------------------------------
// Append, replay, commit.

TEST(SpoolTest, ReplaysAppendedRecordsInOrderAfterReopen) {
  const std::string dir = FreshDir("replay");
  std::vector<std::string> written;
  std::vector<uint64_t> lsns;
  {
    Spool::Opened opened = OpenOrDie(dir, SmallOptions());
    EXPECT_TRUE(opened.replay.empty());
    for (int i = 0; i < 20; ++i) {
      written.push_back(Payload(i));
      absl::StatusOr<uint64_t> lsn = opened.spool->AppendAndWait(written.back());
      ASSERT_TRUE(lsn.ok()) << lsn.status();
      if (!lsns.empty()) {
        EXPECT_GT(*lsn, lsns.back());
      }
      lsns.push_back(*lsn);
    }
    const SpoolStats stats = opened.spool->Stats();
    EXPECT_EQ(stats.appends, 20u);
    EXPECT_EQ(stats.pending_records, 20u);
    EXPECT_NE(stats.oldest_pending_time, absl::InfiniteFuture());
  }
  Spool::Opened reopened = OpenOrDie(dir, SmallOptions());
  EXPECT_EQ(Payloads(reopened.replay), written);
  for (size_t i = 0; i < lsns.size(); ++i) EXPECT_EQ(reopened.replay[i].lsn, lsns[i]);
  EXPECT_EQ(reopened.report.replayed_records, 20u);
  EXPECT_EQ(reopened.report.bytes_cut, 0u);
  EXPECT_TRUE(reopened.report.quarantined.empty());
  EXPECT_GT(reopened.report.next_lsn, lsns.back());
  // New LSNs continue after the recovered ones.
  absl::StatusOr<uint64_t> next = reopened.spool->AppendAndWait("after");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_GT(*next, lsns.back());
}

TEST(SpoolTest, ReplaysOnlyUncommittedRecords) {
  const std::string dir = FreshDir("commit");
  std::vector<uint64_t> lsns;
  {
    Spool::Opened opened = OpenOrDie(dir, SmallOptions());
    for (int i = 0; i < 10; ++i) {
      absl::StatusOr<uint64_t> lsn = opened.spool->AppendAndWait(Payload(i));
      ASSERT_TRUE(lsn.ok()) << lsn.status();
      lsns.push_back(*lsn);
    }
    ASSERT_TRUE(opened.spool->MarkCommitted({lsns[0], lsns[1], lsns[2], lsns[5], lsns[9]}).ok());
    ASSERT_TRUE(opened.spool->MarkCommitted({lsns[1]}).ok());  // again: ignored
    EXPECT_EQ(opened.spool->Stats().pending_records, 5u);
    EXPECT_EQ(opened.spool->MarkCommitted({lsns.back() + 100}).code(),
              absl::StatusCode::kInvalidArgument);
  }
  Spool::Opened reopened = OpenOrDie(dir, SmallOptions());
  EXPECT_EQ(Payloads(reopened.replay),
            (std::vector<std::string>{Payload(3), Payload(4), Payload(6), Payload(7), Payload(8)}));
  EXPECT_EQ(reopened.report.committed_records, 5u);
  // Committing the replayed ones leaves nothing for the next start.
  std::vector<uint64_t> rest;
  for (const SpoolRecord& r : reopened.replay) rest.push_back(r.lsn);
  ASSERT_TRUE(reopened.spool->MarkCommitted(rest).ok());
  reopened.spool->Close();
  reopened.spool.reset();
  Spool::Opened third = OpenOrDie(dir, SmallOptions());
  EXPECT_TRUE(third.replay.empty());
  EXPECT_EQ(FilesWithSuffix(dir, ".wal").size(), 1u);  // only the new active segment
}

TEST(SpoolTest, RollsOverSegmentsAndDeletesThemOnceCommitted) {
  const std::string dir = FreshDir("rollover");
  Spool::Opened opened = OpenOrDie(dir, SmallOptions());
  Spool& spool = *opened.spool;
  std::vector<uint64_t> lsns;
  for (int i = 0; i < 60; ++i) {  // ~13 KiB of records in 4 KiB segments
    absl::StatusOr<uint64_t> lsn = spool.AppendAndWait(Payload(i, 200));
    ASSERT_TRUE(lsn.ok()) << lsn.status();
    lsns.push_back(*lsn);
  }
  const std::vector<std::string> before = FilesWithSuffix(dir, ".wal");
  EXPECT_GE(before.size(), 4u);
  EXPECT_EQ(spool.Stats().segments, before.size());
  for (const std::string& name : before) {
    EXPECT_LE(fs::file_size(fs::path(dir) / name), 4096u) << name;
  }

  // All but the last record committed: every segment but the newest goes.
  ASSERT_TRUE(spool.MarkCommitted(std::vector<uint64_t>(lsns.begin(), lsns.end() - 1)).ok());
  ASSERT_TRUE(spool.Flush().ok());
  const std::vector<std::string> after = FilesWithSuffix(dir, ".wal");
  EXPECT_EQ(after, std::vector<std::string>{before.back()});
  const SpoolStats stats = spool.Stats();
  EXPECT_EQ(stats.segments, 1u);
  EXPECT_EQ(stats.disk_bytes, fs::file_size(fs::path(dir) / after[0]));
  EXPECT_EQ(stats.segments_deleted, before.size() - 1);
  EXPECT_EQ(stats.pending_records, 1u);
}

TEST(SpoolTest, DeletingACommittedSegmentKeepsCommitMarksOfOlderOnes) {
  // The first segment keeps one uncommitted record, while the commit record for its others lands
  // in a later segment that is deleted in turn once its own records are committed. The newest
  // segment's commit snapshot must still say they are committed.
  const std::string dir = FreshDir("snapshot");
  std::vector<uint64_t> lsns;
  std::vector<std::string> payloads;
  Spool* opened_spool = nullptr;
  auto append = [&](int n) {
    for (int i = 0; i < n; ++i) {
      payloads.push_back(Payload(static_cast<int>(payloads.size()), 200));
      absl::StatusOr<uint64_t> lsn = opened_spool->AppendAndWait(payloads.back());
      ASSERT_TRUE(lsn.ok()) << lsn.status();
      lsns.push_back(*lsn);
    }
  };
  {
    Spool::Opened opened = OpenOrDie(dir, SmallOptions());
    opened_spool = opened.spool.get();
    append(40);  // about 2.5 segments
    const std::string first_segment = FilesWithSuffix(dir, ".wal").front();
    std::vector<uint64_t> all_but_one = lsns;
    all_but_one.erase(all_but_one.begin() + 1);
    ASSERT_TRUE(opened.spool->MarkCommitted(all_but_one).ok());  // into the third segment
    append(40);  // the third segment fills up, more follow
    ASSERT_TRUE(
        opened.spool->MarkCommitted(std::vector<uint64_t>(lsns.begin() + 40, lsns.end())).ok());
    ASSERT_TRUE(opened.spool->Flush().ok());
    const std::vector<std::string> files = FilesWithSuffix(dir, ".wal");
    // The first segment (record 1) and the newest remain; the ones between are gone.
    ASSERT_EQ(files.size(), 2u);
    EXPECT_EQ(files[0], first_segment);
    opened_spool = nullptr;
  }
  Spool::Opened reopened = OpenOrDie(dir, SmallOptions());
  EXPECT_EQ(Payloads(reopened.replay), std::vector<std::string>{payloads[1]});
}

// ---------------------------------------------------------------------------------------------
// Recovery from a crash mid-append and from corruption.

TEST(SpoolTest, CutsATornTailAtEveryOffsetAndKeepsWorking) {
  const std::string dir = FreshDir("torn");
  // What recovery reads is the question here, not durability: no syncs (150 opens otherwise
  // spend seconds in fdatasync).
  FaultyFileOps ops;
  ops.SkipSyncs();
  SpoolOptions options = SmallOptions();
  options.file_ops = &ops;
  std::vector<std::string> payloads;
  std::string segment_name;
  {
    Spool::Opened opened = OpenOrDie(dir, options);
    for (int i = 0; i < 5; ++i) {
      payloads.push_back(Payload(i, 30));
      ASSERT_TRUE(opened.spool->AppendAndWait(payloads.back()).ok());
    }
    const std::vector<std::string> files = FilesWithSuffix(dir, ".wal");
    ASSERT_EQ(files.size(), 1u);
    segment_name = files[0];
  }
  const std::string path = (fs::path(dir) / segment_name).string();
  const std::string whole = ReadAll(path);
  const size_t last_record = whole.size() - RecordSize(payloads.back().size());
  const std::vector<std::string> garbages = {"", std::string(13, '\0'),
                                             "\xAB\xCD garbage after a crash \x01\x02\x03"};
  for (size_t cut = last_record; cut <= whole.size(); ++cut) {
    for (const std::string& garbage : garbages) {
      if (cut == whole.size() && garbage.empty()) continue;  // nothing torn
      SCOPED_TRACE(absl::StrCat("cut at ", cut, ", ", garbage.size(), " garbage bytes"));
      fs::remove_all(dir);
      fs::create_directories(dir);
      WriteAll(path, whole.substr(0, cut) + garbage);

      std::vector<std::string> expected(payloads.begin(), payloads.end() - 1);
      if (cut == whole.size()) expected.push_back(payloads.back());
      {
        Spool::Opened opened = OpenOrDie(dir, options);
        EXPECT_EQ(Payloads(opened.replay), expected);
        EXPECT_EQ(opened.report.bytes_cut,
                  cut - (cut == whole.size() ? cut : last_record) + garbage.size());
        EXPECT_TRUE(opened.report.quarantined.empty());
        EXPECT_EQ(fs::file_size(path), cut == whole.size() ? whole.size() : last_record);
        absl::StatusOr<uint64_t> lsn = opened.spool->AppendAndWait("after the crash");
        ASSERT_TRUE(lsn.ok()) << lsn.status();
        EXPECT_EQ(*lsn, opened.report.next_lsn);
      }
      expected.push_back("after the crash");
      Spool::Opened again = OpenOrDie(dir, options);
      EXPECT_EQ(Payloads(again.replay), expected);
      EXPECT_EQ(again.report.bytes_cut, 0u);
      EXPECT_TRUE(again.report.quarantined.empty());
    }
  }
}

// Closes a spool with `n` records of 200 bytes in 4 KiB segments; returns the payloads.
std::vector<std::string> FillSegments(const std::string& dir, int n) {
  std::vector<std::string> payloads;
  Spool::Opened opened = OpenOrDie(dir, SmallOptions());
  for (int i = 0; i < n; ++i) {
    payloads.push_back(Payload(i, 200));
    EXPECT_TRUE(opened.spool->AppendAndWait(payloads.back()).ok());
  }
  return payloads;
}

uint64_t LsnAt(const std::string& bytes, size_t offset) {
  uint64_t lsn = 0;
  for (int i = 7; i >= 0; --i) {
    lsn = (lsn << 8) | static_cast<unsigned char>(bytes[offset + 8 + static_cast<size_t>(i)]);
  }
  return lsn;
}

// Every payload but those at `lost` (indexes).
std::vector<std::string> AllBut(const std::vector<std::string>& payloads,
                                std::vector<size_t> lost) {
  std::vector<std::string> out;
  for (size_t i = 0; i < payloads.size(); ++i) {
    if (std::find(lost.begin(), lost.end(), i) == lost.end()) out.push_back(payloads[i]);
  }
  return out;
}

TEST(SpoolTest, LosesOnlyTheDamagedRecordOfAnOlderSegment) {
  const std::string dir = FreshDir("corrupt_old");
  const std::vector<std::string> payloads = FillSegments(dir, 50);
  const std::vector<std::string> files = FilesWithSuffix(dir, ".wal");
  ASSERT_GE(files.size(), 3u);
  // Flip a payload byte of the fourth record of the first segment.
  const std::string first_path = (fs::path(dir) / files[0]).string();
  std::string bytes = ReadAll(first_path);
  const size_t record_size = RecordSize(200);
  const size_t bad_offset = kSegmentHeaderSize + 3 * record_size;
  const uint64_t bad_lsn = LsnAt(bytes, bad_offset);
  bytes[bad_offset + kRecordHeaderSize + 50] ^= 0x01;
  WriteAll(first_path, bytes);

  // Only that record is lost: the ones after it, in its segment too, are replayed.
  std::vector<std::string> expected = AllBut(payloads, {3});
  const std::string kept_in = SegmentFileName(bad_lsn + 1);
  {
    Spool::Opened opened = OpenOrDie(dir, SmallOptions());
    EXPECT_EQ(Payloads(opened.replay), expected);
    ASSERT_EQ(opened.report.quarantined.size(), 1u);
    const RecoveryReport::Quarantine& q = opened.report.quarantined[0];
    EXPECT_EQ(q.segment, files[0]);
    EXPECT_EQ(q.moved_to, files[0] + ".corrupt");
    EXPECT_EQ(q.offset, bad_offset);
    EXPECT_EQ(q.bytes, record_size);
    EXPECT_EQ(q.lost_lsn, bad_lsn);
    EXPECT_EQ(q.kept_in, kept_in);
    EXPECT_NE(q.reason.find("CRC"), std::string::npos) << q.reason;
    EXPECT_EQ(opened.report.bytes_quarantined, q.bytes);
    EXPECT_EQ(opened.report.bytes_cut, 0u);
    EXPECT_EQ(opened.spool->Stats().bytes_quarantined, q.bytes);
    EXPECT_EQ(ReadAll((fs::path(dir) / q.moved_to).string()),
              bytes.substr(bad_offset, record_size));
    EXPECT_EQ(fs::file_size(first_path), bad_offset);
    EXPECT_EQ(ReadAll((fs::path(dir) / kept_in).string()),
              EncodeSegmentHeader(bad_lsn + 1) + bytes.substr(bad_offset + record_size));
    ASSERT_TRUE(opened.spool->AppendAndWait("later").ok());
  }
  expected.push_back("later");
  Spool::Opened again = OpenOrDie(dir, SmallOptions());
  EXPECT_EQ(Payloads(again.replay), expected);
  EXPECT_TRUE(again.report.quarantined.empty());
}

TEST(SpoolTest, LosesOnlyTheDamagedRecordInTheMiddleOfTheLastSegmentInsteadOfCuttingIt) {
  const std::string dir = FreshDir("corrupt_last");
  const std::vector<std::string> payloads = FillSegments(dir, 10);  // one segment
  const std::vector<std::string> files = FilesWithSuffix(dir, ".wal");
  ASSERT_EQ(files.size(), 1u);
  const std::string path = (fs::path(dir) / files[0]).string();
  std::string bytes = ReadAll(path);
  const size_t bad_offset = kSegmentHeaderSize + 2 * RecordSize(200);
  bytes[bad_offset + 5] ^= 0x40;  // the record's CRC
  WriteAll(path, bytes);

  Spool::Opened opened = OpenOrDie(dir, SmallOptions());
  EXPECT_EQ(Payloads(opened.replay), AllBut(payloads, {2}));
  EXPECT_EQ(opened.report.bytes_cut, 0u);
  ASSERT_EQ(opened.report.quarantined.size(), 1u);
  EXPECT_EQ(opened.report.quarantined[0].bytes, RecordSize(200));
  EXPECT_EQ(FilesWithSuffix(dir, ".corrupt"), std::vector<std::string>{files[0] + ".corrupt"});
}

TEST(SpoolTest, ADamagedLengthMovesTheRestOfTheSegmentAside) {
  // Without a length it can trust, recovery cannot know where the next record starts: it never
  // searches for one (a caller's payload could hold bytes that look like a record).
  const std::string dir = FreshDir("corrupt_length");
  const std::vector<std::string> payloads = FillSegments(dir, 10);
  const std::vector<std::string> files = FilesWithSuffix(dir, ".wal");
  ASSERT_EQ(files.size(), 1u);
  const std::string path = (fs::path(dir) / files[0]).string();
  std::string bytes = ReadAll(path);
  const size_t bad_offset = kSegmentHeaderSize + 2 * RecordSize(200);
  bytes[bad_offset] ^= 0x04;  // the record's length
  WriteAll(path, bytes);

  Spool::Opened opened = OpenOrDie(dir, SmallOptions());
  EXPECT_EQ(Payloads(opened.replay),
            std::vector<std::string>(payloads.begin(), payloads.begin() + 2));
  ASSERT_EQ(opened.report.quarantined.size(), 1u);
  EXPECT_EQ(opened.report.quarantined[0].bytes, bytes.size() - bad_offset);
  EXPECT_EQ(opened.report.quarantined[0].lost_lsn, 0u);
  EXPECT_EQ(opened.report.quarantined[0].kept_in, "");
}

TEST(SpoolTest, ARecordHiddenInADamagedRecordsPayloadIsNeverReplayed) {
  const std::string dir = FreshDir("corrupt_forged");
  std::vector<std::string> payloads;
  std::string forged;
  {
    Spool::Opened opened = OpenOrDie(dir, SmallOptions());
    absl::StatusOr<uint64_t> lsn;
    for (int i = 0; i < 3; ++i) {
      payloads.push_back(Payload(i, 200));
      lsn = opened.spool->AppendAndWait(payloads.back());
      ASSERT_TRUE(lsn.ok());
    }
    // A caller's bytes that form a valid record with the LSN that follows the carrying one's.
    AppendRecord(forged, *lsn + 2, RecordType::kData, "forged");
    payloads.push_back("x" + forged + "y");
    absl::StatusOr<uint64_t> carrier = opened.spool->AppendAndWait(payloads.back());
    ASSERT_TRUE(carrier.ok());
    ASSERT_EQ(*carrier, *lsn + 1);
    for (int i = 0; i < 3; ++i) {
      payloads.push_back(Payload(10 + i, 200));
      ASSERT_TRUE(opened.spool->AppendAndWait(payloads.back()).ok());
    }
  }
  const std::vector<std::string> files = FilesWithSuffix(dir, ".wal");
  ASSERT_EQ(files.size(), 1u);
  const std::string bytes = ReadAll((fs::path(dir) / files[0]).string());
  const size_t header = bytes.find("x" + forged) - kRecordHeaderSize;
  // The carrying record's CRC damaged: it is skipped by its length, to the record after it. Its
  // length damaged: the rest of the segment is moved aside. The hidden record is never read.
  struct Case {
    size_t flip;
    std::vector<std::string> expected;
  };
  const Case cases[] = {{header + 5, AllBut(payloads, {3})},
                        {header, std::vector<std::string>(payloads.begin(), payloads.begin() + 3)}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flip == header ? "length" : "CRC");
    const std::string case_dir = FreshDir(c.flip == header ? "forged_length" : "forged_crc");
    fs::create_directories(case_dir);
    std::string damaged = bytes;
    damaged[c.flip] ^= 0x10;
    WriteAll((fs::path(case_dir) / files[0]).string(), damaged);
    Spool::Opened opened = OpenOrDie(case_dir, SmallOptions());
    EXPECT_EQ(Payloads(opened.replay), c.expected);
  }
}

TEST(SpoolTest, TwoDamagedRecordsLoseTwoRecordsAndACrashMidRecoveryNoMore) {
  const std::string dir = FreshDir("corrupt_two");
  const std::vector<std::string> payloads = FillSegments(dir, 10);
  const std::vector<std::string> files = FilesWithSuffix(dir, ".wal");
  ASSERT_EQ(files.size(), 1u);
  const std::string path = (fs::path(dir) / files[0]).string();
  std::string bytes = ReadAll(path);
  const size_t record_size = RecordSize(200);
  const size_t first_bad = kSegmentHeaderSize + 2 * record_size;
  const size_t second_bad = kSegmentHeaderSize + 6 * record_size;
  bytes[first_bad + kRecordHeaderSize + 7] ^= 0x01;
  bytes[second_bad + 9] ^= 0x01;  // its LSN
  WriteAll(path, bytes);
  // A crash mid-recovery: the segment after the first damage was written, the damaged one not
  // truncated yet. The next start writes the same segment again and replays each record once.
  const uint64_t first_lost = LsnAt(bytes, first_bad);
  WriteAll((fs::path(dir) / SegmentFileName(first_lost + 1)).string(),
           EncodeSegmentHeader(first_lost + 1) + bytes.substr(first_bad + record_size));

  const std::vector<std::string> expected = AllBut(payloads, {2, 6});
  {
    Spool::Opened opened = OpenOrDie(dir, SmallOptions());
    EXPECT_EQ(Payloads(opened.replay), expected);
    ASSERT_EQ(opened.report.quarantined.size(), 2u);
    EXPECT_EQ(opened.report.quarantined[0].lost_lsn, first_lost);
    EXPECT_EQ(opened.report.quarantined[1].lost_lsn, first_lost + 4);
    EXPECT_EQ(opened.report.quarantined[1].segment, SegmentFileName(first_lost + 1));
    EXPECT_EQ(opened.report.bytes_quarantined, 2 * record_size);
  }
  Spool::Opened again = OpenOrDie(dir, SmallOptions());
  EXPECT_EQ(Payloads(again.replay), expected);
  EXPECT_TRUE(again.report.quarantined.empty());
}

TEST(SpoolTest, RemovesASegmentWhoseHeaderACrashCutShort) {
  const std::string dir = FreshDir("torn_header");
  const std::vector<std::string> payloads = FillSegments(dir, 3);
  const std::string started = SegmentFileName(1000);
  WriteAll((fs::path(dir) / started).string(), EncodeSegmentHeader(1000).substr(0, 10));
  Spool::Opened opened = OpenOrDie(dir, SmallOptions());
  EXPECT_EQ(Payloads(opened.replay), payloads);
  EXPECT_EQ(opened.report.bytes_cut, 10u);
  EXPECT_TRUE(opened.report.quarantined.empty());
  EXPECT_FALSE(fs::exists(fs::path(dir) / started));
}

TEST(SpoolTest, ASegmentOfAnotherFormatVersionStopsTheStartAndChangesNoFile) {
  const std::string dir = FreshDir("version");
  {
    Spool::Opened opened = OpenOrDie(dir, SmallOptions());
    for (int i = 0; i < 30; ++i) ASSERT_TRUE(opened.spool->AppendAndWait(Payload(i, 200)).ok());
  }
  // A newer chgate's segment: version 2 in an otherwise intact header (CRC fixed), and a torn
  // tail behind it that a recovery would cut.
  std::vector<std::string> segments = FilesWithSuffix(dir, ".wal");
  ASSERT_GE(segments.size(), 2u);
  const std::string newest = (fs::path(dir) / segments.back()).string();
  std::string bytes = ReadAll(newest);
  bytes[8] = 2;
  const uint32_t crc = Crc32c(std::string_view(bytes).substr(0, kSegmentHeaderSize - 4));
  for (int i = 0; i < 4; ++i) bytes[kSegmentHeaderSize - 4 + i] = static_cast<char>(crc >> (8 * i));
  bytes += "torn";
  WriteAll(newest, bytes);
  std::map<std::string, std::string> before;
  for (const auto& e : fs::directory_iterator(dir)) before[e.path().string()] = ReadAll(e.path());

  absl::StatusOr<Spool::Opened> opened = Spool::Open(dir, SmallOptions());
  ASSERT_EQ(opened.status().code(), absl::StatusCode::kFailedPrecondition) << opened.status();
  // The message names the file and both versions (docs/spool.md): what the operator acts on.
  EXPECT_THAT(std::string(opened.status().message()), ::testing::HasSubstr("format version 2"));
  EXPECT_THAT(std::string(opened.status().message()), ::testing::HasSubstr(segments.back()));
  EXPECT_THAT(std::string(opened.status().message()),
              ::testing::HasSubstr(absl::StrCat("reads version ", kFormatVersion)));
  std::map<std::string, std::string> after;
  for (const auto& e : fs::directory_iterator(dir)) after[e.path().string()] = ReadAll(e.path());
  EXPECT_EQ(after, before);
}

// A spool written by format version 1 (tests/testdata/spool-v1, committed when version 1 was the
// only one): every later chgate must read it, so a format change that forgets the old layout
// fails here. Made by appending records "v1-record-<n>-..." (100 bytes) to 1 KiB segments, marking
// records 1-12 committed except 3 and 7, then appending 13-20.
TEST(SpoolFormatTest, ReadsASpoolWrittenByFormatVersionOne) {
  const char* source = std::getenv("CHGATE_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "CHGATE_SOURCE_DIR names the checkout (ctest sets it)";
  const std::string dir = FreshDir("format_v1");
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(fs::path(source) / "tests/testdata/spool-v1")) {
    fs::copy_file(e.path(), fs::path(dir) / e.path().filename());
  }
  Spool::Opened opened = OpenOrDie(dir, SmallOptions());
  std::vector<uint64_t> lsns;
  std::vector<std::string> names;
  for (const SpoolRecord& r : opened.replay) {
    lsns.push_back(r.lsn);
    names.push_back(r.payload.substr(0, r.payload.find('-', 10)));
  }
  EXPECT_EQ(lsns, (std::vector<uint64_t>{3, 7, 14, 15, 16, 18, 19, 20, 21, 22}));
  EXPECT_EQ(names,
            (std::vector<std::string>{"v1-record-3", "v1-record-7", "v1-record-13", "v1-record-14",
                                      "v1-record-15", "v1-record-16", "v1-record-17",
                                      "v1-record-18", "v1-record-19", "v1-record-20"}));
  for (const SpoolRecord& r : opened.replay) EXPECT_EQ(r.payload.size(), 100u);
  EXPECT_EQ(opened.spool->id(), "e59b87ee273da94c8aa9ce7b1d6fa939");
  EXPECT_TRUE(opened.report.quarantined.empty());
  EXPECT_EQ(opened.report.bytes_cut, 0u);
  // It goes on where it stopped.
  absl::StatusOr<uint64_t> next = opened.spool->AppendAndWait("after");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_GT(*next, 22u);
}

TEST(SpoolTest, RefusesASecondSpoolOnTheSameDirectory) {
  const std::string dir = FreshDir("lock");
  Spool::Opened opened = OpenOrDie(dir, SmallOptions());
  absl::StatusOr<Spool::Opened> second = Spool::Open(dir, SmallOptions());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
}

// ---------------------------------------------------------------------------------------------
// Group commit.

// Small options with 1 MiB segments (every record of a group-commit test in one) over `ops`.
SpoolOptions GroupCommitOptions(FaultyFileOps* ops) {
  SpoolOptions options = SmallOptions();
  options.segment_bytes = 1 << 20;
  options.file_ops = ops;
  return options;
}

TEST(SpoolTest, GroupCommitsConcurrentAppendsIntoFewSyncs) {
  const std::string dir = FreshDir("group");
  FaultyFileOps ops;
  SpoolOptions options = GroupCommitOptions(&ops);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  Acks acks;
  std::vector<std::string> payloads;
  {
    Spool::Opened opened = OpenOrDie(dir, options);
    Spool& spool = *opened.spool;
    const uint64_t syncs_before = spool.Stats().fsyncs;
    // Hold the first batch's sync until every thread has queued all its records: they must all
    // go out together in the next batch.
    ops.CloseSyncGate();
    ASSERT_TRUE(spool.Append("first", acks.Callback()).ok());
    ops.AwaitSyncWaiting();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&spool, &acks, t] {
        for (int i = 0; i < kPerThread; ++i) {
          EXPECT_TRUE(spool.Append(absl::StrCat("t", t, "-", i), acks.Callback()).ok());
        }
      });
    }
    for (std::thread& t : threads) t.join();
    ops.OpenSyncGate();
    const auto results = acks.WaitFor(1 + kThreads * kPerThread);
    std::vector<uint64_t> lsns;
    for (const auto& r : results) {
      ASSERT_TRUE(r.ok()) << r.status();
      lsns.push_back(*r);
    }
    std::sort(lsns.begin(), lsns.end());
    EXPECT_EQ(std::adjacent_find(lsns.begin(), lsns.end()), lsns.end()) << "an LSN given twice";
    const SpoolStats stats = spool.Stats();
    EXPECT_EQ(stats.appends, 1u + kThreads * kPerThread);
    EXPECT_LE(stats.fsyncs - syncs_before, 2u);  // the held batch and everything else
  }
  Spool::Opened reopened = OpenOrDie(dir, SmallOptions());
  ASSERT_EQ(reopened.replay.size(), 1u + kThreads * kPerThread);
  std::vector<std::string> got = Payloads(reopened.replay);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(std::adjacent_find(got.begin(), got.end()), got.end()) << "a record replayed twice";
  // Each thread's records keep their order.
  for (int t = 0; t < kThreads; ++t) {
    int next = 0;
    for (const SpoolRecord& r : reopened.replay) {
      const std::string prefix = absl::StrCat("t", t, "-");
      if (r.payload.rfind(prefix, 0) == 0) {
        EXPECT_EQ(r.payload, absl::StrCat(prefix, next++));
      }
    }
    EXPECT_EQ(next, kPerThread);
  }
}

TEST(SpoolTest, AGroupCommitDelayGathersConcurrentAppendsButNeverDelaysALoneCaller) {
  const std::string dir = FreshDir("group-delay");
  FaultyFileOps ops;
  SpoolOptions options = GroupCommitOptions(&ops);
  // Long enough that appends made one after another from one thread fall in it whatever the
  // machine's load, and that a delayed ack cannot pass for an immediate one.
  options.group_commit_delay = absl::Seconds(2);
  Spool::Opened opened = OpenOrDie(dir, options);
  Spool& spool = *opened.spool;

  // A lone caller: each record is its own batch, written at once.
  absl::Time start = absl::Now();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(spool.AppendAndWait(absl::StrCat("lone", i)).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << "a lone caller waited for the delay";

  // Concurrent appends: while a sync is held, 10 records queue and go out as one batch...
  Acks acks;
  ops.CloseSyncGate();
  ASSERT_TRUE(spool.Append("held", acks.Callback()).ok());
  ops.AwaitSyncWaiting();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(spool.Append(absl::StrCat("queued", i), acks.Callback()).ok());
  }
  ops.OpenSyncGate();
  for (const auto& r : acks.WaitFor(11)) ASSERT_TRUE(r.ok()) << r.status();
  // ...after which the writer gathers: 20 appends arriving one after another share one sync.
  const uint64_t syncs_before = spool.Stats().fsyncs;
  start = absl::Now();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(spool.Append(absl::StrCat("r", i), acks.Callback()).ok());
  }
  for (const auto& r : acks.WaitFor(31)) ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(1900)) << "acked before the delay ended";
  EXPECT_EQ(spool.Stats().fsyncs - syncs_before, 1u);
}

TEST(SpoolTest, PayloadBuffersOfWrittenRecordsAreHandedOutAgain) {
  const std::string dir = FreshDir("buffers");
  SpoolOptions options = SmallOptions();
  options.segment_bytes = 1 << 20;
  Spool::Opened opened = OpenOrDie(dir, options);
  Spool& spool = *opened.spool;
  EXPECT_EQ(spool.TakeBuffer().capacity(), std::string().capacity()) << "nothing written yet";
  std::string payload(3000, 'x');
  const char* storage = payload.data();
  Acks acks;
  ASSERT_TRUE(spool.AppendOwned(std::move(payload), acks.Callback()).ok());
  const absl::StatusOr<uint64_t> lsn = acks.WaitFor(1)[0];
  ASSERT_TRUE(lsn.ok()) << lsn.status();
  std::string again = spool.TakeBuffer();
  EXPECT_TRUE(again.empty());
  EXPECT_GE(again.capacity(), 3000u);
  EXPECT_EQ(again.data(), storage) << "the written record's string, not a new allocation";
  EXPECT_EQ(spool.TakeBuffer().capacity(), std::string().capacity()) << "handed out once";
  // The record itself is intact.
  const absl::StatusOr<std::string> read = spool.Read(*lsn);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, std::string(3000, 'x'));
}

TEST(SpoolTest, ConcurrentWaitingAppendsAreEachReplayedOnce) {
  const std::string dir = FreshDir("concurrent");
  SpoolOptions options = SmallOptions();
  options.segment_bytes = 16 << 10;  // rollovers under concurrency too
  constexpr int kThreads = 8;
  constexpr int kPerThread = 100;
  std::vector<std::vector<uint64_t>> lsns(kThreads);
  uint64_t appends = 0;
  uint64_t fsyncs = 0;
  {
    Spool::Opened opened = OpenOrDie(dir, options);
    Spool& spool = *opened.spool;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&spool, &lsns, t] {
        for (int i = 0; i < kPerThread; ++i) {
          absl::StatusOr<uint64_t> lsn = spool.AppendAndWait(absl::StrCat("t", t, "-", i));
          ASSERT_TRUE(lsn.ok()) << lsn.status();
          lsns[static_cast<size_t>(t)].push_back(*lsn);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    appends = spool.Stats().appends;
    fsyncs = spool.Stats().fsyncs;
  }
  EXPECT_EQ(appends, uint64_t{kThreads * kPerThread});
  // Not asserted (it depends on scheduling), but shown: how much group commit saved.
  std::printf("%llu appends in %llu fsyncs\n", static_cast<unsigned long long>(appends),
              static_cast<unsigned long long>(fsyncs));
  Spool::Opened reopened = OpenOrDie(dir, options);
  ASSERT_EQ(reopened.replay.size(), size_t{kThreads * kPerThread});
  for (size_t i = 1; i < reopened.replay.size(); ++i) {
    EXPECT_LT(reopened.replay[i - 1].lsn, reopened.replay[i].lsn);
  }
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      const uint64_t lsn = lsns[static_cast<size_t>(t)][static_cast<size_t>(i)];
      auto it = std::lower_bound(reopened.replay.begin(), reopened.replay.end(), lsn,
                                 [](const SpoolRecord& r, uint64_t v) { return r.lsn < v; });
      ASSERT_NE(it, reopened.replay.end());
      ASSERT_EQ(it->lsn, lsn);
      EXPECT_EQ(it->payload, absl::StrCat("t", t, "-", i));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Bounds and faults.

TEST(SpoolTest, RefusesAppendsPastMaxBytesWithoutWritingAnything) {
  const std::string dir = FreshDir("max_bytes");
  SpoolOptions options = SmallOptions();
  options.segment_bytes = 1024;
  options.max_bytes = 4096;
  Spool::Opened opened = OpenOrDie(dir, options);
  Spool& spool = *opened.spool;
  std::vector<uint64_t> lsns;
  absl::Status refused;
  for (int i = 0; i < 100 && refused.ok(); ++i) {
    absl::StatusOr<uint64_t> lsn = spool.AppendAndWait(Payload(i, 200));
    if (lsn.ok()) {
      lsns.push_back(*lsn);
    } else {
      refused = lsn.status();
    }
  }
  ASSERT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("max_bytes 4096"), std::string::npos) << refused;
  const SpoolStats full = spool.Stats();
  EXPECT_LE(full.disk_bytes, 4096u);
  EXPECT_EQ(full.refusals, 1u);
  EXPECT_EQ(full.appends, lsns.size());
  // Refused means nothing reached the disk.
  uint64_t on_disk = 0;
  for (const std::string& name : FilesWithSuffix(dir, ".wal")) {
    on_disk += fs::file_size(fs::path(dir) / name);
  }
  EXPECT_EQ(on_disk, full.disk_bytes);

  // A full spool still takes the small records that let it drain (batch intents).
  EXPECT_TRUE(spool.AppendAndWait("intent", /*exempt=*/true).ok());
  EXPECT_EQ(spool.Stats().refusals, 1u);

  // Room comes back as ClickHouse commits.
  ASSERT_TRUE(spool.MarkCommitted(lsns).ok());
  ASSERT_TRUE(spool.Flush().ok());
  EXPECT_TRUE(spool.AppendAndWait(Payload(1000, 200)).ok());
}

TEST(SpoolTest, DeadLetterAndQuarantinedFilesCountAgainstTheBound) {
  const std::string dir = FreshDir("set_aside");
  fs::create_directories(fs::path(dir) / "dead-letter");
  WriteAll((fs::path(dir) / "dead-letter" / "000000000000002a.batch").string(),
           std::string(30000, 'd'));
  WriteAll((fs::path(dir) / "0000000000000001.wal.corrupt").string(), std::string(10000, 'c'));
  SpoolOptions options = SmallOptions();
  options.segment_bytes = 32 << 10;
  options.max_bytes = 64 << 10;
  options.set_aside_scan_interval = absl::Milliseconds(20);
  Spool::Opened opened = OpenOrDie(dir, options);
  Spool& spool = *opened.spool;
  EXPECT_EQ(spool.Stats().set_aside_bytes, 40000u);
  // 40000 set aside + the segment + 30000 would pass 64 KiB.
  const absl::Status refused =
      spool.Append(std::string(30000, 'x'), [](absl::StatusOr<uint64_t>) {});
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("dead-letter and quarantined"));
  // Removed by hand (`chgate spool delete`): the room comes back with the next scan.
  fs::remove(fs::path(dir) / "dead-letter" / "000000000000002a.batch");
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (spool.Stats().set_aside_bytes != 10000 && absl::Now() < deadline) {
    // The scan runs on the writer's schedule; a flush wakes the writer.
    ASSERT_TRUE(spool.Flush().ok());
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(spool.Stats().set_aside_bytes, 10000u);
  EXPECT_TRUE(spool.AppendAndWait(std::string(30000, 'x')).ok());
  spool.AddSetAside(5);
  EXPECT_EQ(spool.Stats().set_aside_bytes, 10005u);
}

TEST(SpoolTest, RefusesAppendsWhenTheFileSystemIsLowOnSpace) {
  const std::string dir = FreshDir("min_free");
  FaultyFileOps ops;
  SpoolOptions options = SmallOptions();
  options.min_free_bytes = 1 << 20;
  options.space_check_interval = absl::ZeroDuration();
  options.file_ops = &ops;
  Spool::Opened opened = OpenOrDie(dir, options);
  ops.SetFreeBytes(1 << 20);  // the limit exactly: one more record does not fit
  absl::StatusOr<uint64_t> refused = opened.spool->AppendAndWait("x");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("min_free_bytes"), std::string::npos);
  ops.SetFreeBytes(10 << 20);
  EXPECT_TRUE(opened.spool->AppendAndWait("x").ok());
}

// docs/spool.md: by default the spool refuses once its file system has less than two segments
// free (min_free_bytes 0 means 2 x segment_bytes).
TEST(SpoolTest, ByDefaultRefusesWithLessThanTwoSegmentsFree) {
  const std::string dir = FreshDir("min_free_default");
  FaultyFileOps ops;
  SpoolOptions options = SmallOptions();
  options.min_free_bytes = 0;
  options.space_check_interval = absl::ZeroDuration();
  options.file_ops = &ops;
  Spool::Opened opened = OpenOrDie(dir, options);
  ops.SetFreeBytes(2 * options.segment_bytes);
  absl::StatusOr<uint64_t> refused = opened.spool->AppendAndWait("x");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  ops.SetFreeBytes(2 * options.segment_bytes + 4096);
  EXPECT_TRUE(opened.spool->AppendAndWait("x").ok());
}

// The size of the only segment holding records; the one written now.
uint64_t ActiveSegmentSize(const std::string& dir) {
  const std::vector<std::string> files = FilesWithSuffix(dir, ".wal");
  return fs::file_size(fs::path(dir) / files.back());
}

TEST(SpoolTest, EnospcMidWriteFailsTheCallersAndLeavesNoPartialRecord) {
  const std::string dir = FreshDir("enospc");
  FaultyFileOps ops;
  SpoolOptions options = SmallOptions();
  options.file_ops = &ops;
  {
    Spool::Opened opened = OpenOrDie(dir, options);
    Spool& spool = *opened.spool;
    ASSERT_TRUE(spool.AppendAndWait("before-1").ok());
    ASSERT_TRUE(spool.AppendAndWait("before-2").ok());
    const uint64_t good_size = ActiveSegmentSize(dir);

    // Ten bytes of the next record reach the file, then the disk is full.
    ops.FailWritesAfter(10, ENOSPC);
    absl::StatusOr<uint64_t> failed = spool.AppendAndWait("lost to ENOSPC");
    EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted) << failed.status();
    EXPECT_EQ(ActiveSegmentSize(dir), good_size);
    EXPECT_EQ(spool.Stats().failed_appends, 1u);
    absl::StatusOr<uint64_t> still = spool.AppendAndWait("still full");
    EXPECT_FALSE(still.ok());

    ops.ClearFaults();
    ASSERT_TRUE(spool.AppendAndWait("after").ok());
  }
  Spool::Opened reopened = OpenOrDie(dir, SmallOptions());
  EXPECT_EQ(Payloads(reopened.replay), (std::vector<std::string>{"before-1", "before-2", "after"}));
  EXPECT_EQ(reopened.report.bytes_cut, 0u);
  EXPECT_TRUE(reopened.report.quarantined.empty());
}

TEST(SpoolTest, FailedSyncFailsTheCallersAndMovesToANewSegment) {
  const std::string dir = FreshDir("eio");
  FaultyFileOps ops;
  SpoolOptions options = SmallOptions();
  options.file_ops = &ops;
  {
    Spool::Opened opened = OpenOrDie(dir, options);
    Spool& spool = *opened.spool;
    ASSERT_TRUE(spool.AppendAndWait("before").ok());
    const size_t segments = FilesWithSuffix(dir, ".wal").size();
    ops.FailSyncs(EIO);
    absl::StatusOr<uint64_t> failed = spool.AppendAndWait("lost to EIO");
    EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable) << failed.status();
    ops.ClearFaults();
    absl::StatusOr<uint64_t> after = spool.AppendAndWait("after");
    ASSERT_TRUE(after.ok()) << after.status();
    // A segment whose fdatasync failed is not trusted with more records.
    EXPECT_EQ(FilesWithSuffix(dir, ".wal").size(), segments + 1);
  }
  Spool::Opened reopened = OpenOrDie(dir, SmallOptions());
  EXPECT_EQ(Payloads(reopened.replay), (std::vector<std::string>{"before", "after"}));
  EXPECT_TRUE(reopened.report.quarantined.empty());
}

TEST(SpoolTest, CommitMarksSurviveAFailedSync) {
  const std::string dir = FreshDir("commit_eio");
  FaultyFileOps ops;
  SpoolOptions options = SmallOptions();
  options.commit_sync_delay = absl::Nanoseconds(1);  // lazily synced, but at once
  options.file_ops = &ops;
  {
    Spool::Opened opened = OpenOrDie(dir, options);
    Spool& spool = *opened.spool;
    absl::StatusOr<uint64_t> a = spool.AppendAndWait("a");
    absl::StatusOr<uint64_t> b = spool.AppendAndWait("b");
    ASSERT_TRUE(a.ok() && b.ok());
    ops.FailSyncs(EIO);
    ASSERT_TRUE(spool.MarkCommitted({*a}).ok());
    EXPECT_FALSE(spool.Flush().ok());
    ops.ClearFaults();
    ASSERT_TRUE(spool.AppendAndWait("c").ok());
  }
  Spool::Opened reopened = OpenOrDie(dir, SmallOptions());
  EXPECT_EQ(Payloads(reopened.replay), (std::vector<std::string>{"b", "c"}));
}

TEST(SpoolTest, ShortWritesAreCompleted) {
  const std::string dir = FreshDir("short");
  FaultyFileOps ops;
  SpoolOptions options = SmallOptions();
  options.file_ops = &ops;
  {
    Spool::Opened opened = OpenOrDie(dir, options);
    ops.ShortenWrites(3);
    ASSERT_TRUE(opened.spool->AppendAndWait(Payload(1, 100)).ok());
    ASSERT_TRUE(opened.spool->AppendAndWait(Payload(2, 100)).ok());
  }
  Spool::Opened reopened = OpenOrDie(dir, SmallOptions());
  EXPECT_EQ(Payloads(reopened.replay),
            (std::vector<std::string>{Payload(1, 100), Payload(2, 100)}));
}

TEST(SpoolTest, RefusesAfterClose) {
  const std::string dir = FreshDir("closed");
  Spool::Opened opened = OpenOrDie(dir, SmallOptions());
  opened.spool->Close();
  opened.spool->Close();
  EXPECT_EQ(opened.spool->Append("x", [](absl::StatusOr<uint64_t>) {}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(opened.spool->Flush().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SpoolTest, ReadsBackPendingRecordsAcrossSegmentsAndAfterALazyReopen) {
  const std::string dir = FreshDir("read_back");
  std::vector<uint64_t> lsns;
  {
    Spool::Opened opened = OpenOrDie(dir, SmallOptions());
    for (int i = 0; i < 40; ++i) {
      absl::StatusOr<uint64_t> lsn = opened.spool->AppendAndWait(Payload(i, 100 + 7 * i));
      ASSERT_TRUE(lsn.ok()) << lsn.status();
      lsns.push_back(*lsn);
    }
    ASSERT_GT(FilesWithSuffix(dir, ".wal").size(), 2u);  // the records span segments
    for (int i = 0; i < 40; ++i) {
      absl::StatusOr<std::string> got = opened.spool->Read(lsns[static_cast<size_t>(i)]);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, Payload(i, 100 + 7 * i));
    }
    ASSERT_TRUE(opened.spool->MarkCommitted({lsns[0], lsns[1]}).ok());
    EXPECT_EQ(opened.spool->Read(lsns[0]).status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(opened.spool->Read(12345).status().code(), absl::StatusCode::kNotFound);
  }
  SpoolOptions lazy = SmallOptions();
  lazy.replay_payloads = false;
  Spool::Opened opened = OpenOrDie(dir, lazy);
  ASSERT_EQ(opened.replay.size(), 38u);
  for (size_t k = 0; k < opened.replay.size(); ++k) {
    const SpoolRecord& r = opened.replay[k];
    const int i = static_cast<int>(k) + 2;
    EXPECT_EQ(r.lsn, lsns[static_cast<size_t>(i)]);
    EXPECT_TRUE(r.payload.empty());
    EXPECT_EQ(r.size, Payload(i, 100 + 7 * i).size());
    absl::StatusOr<std::string> got = opened.spool->Read(r.lsn);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, Payload(i, 100 + 7 * i));
  }
}

TEST(SpoolTest, ReadReportsARecordDamagedOnDiskAfterItWasWritten) {
  const std::string dir = FreshDir("read_damaged");
  Spool::Opened opened = OpenOrDie(dir, SmallOptions());
  absl::StatusOr<uint64_t> lsn = opened.spool->AppendAndWait(Payload(1, 300));
  ASSERT_TRUE(lsn.ok()) << lsn.status();
  const std::vector<std::string> wal = FilesWithSuffix(dir, ".wal");
  ASSERT_EQ(wal.size(), 1u);
  const std::string path = (fs::path(dir) / wal[0]).string();
  std::string bytes = ReadAll(path);
  const size_t at = bytes.find(Payload(1, 300));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 150] ^= 0x20;
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(at + 150));
    f.put(bytes[at + 150]);
  }
  absl::StatusOr<std::string> got = opened.spool->Read(*lsn);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
  EXPECT_NE(got.status().message().find("CRC"), std::string::npos) << got.status();
}

}  // namespace
}  // namespace chgate::spool
