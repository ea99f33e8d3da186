// The spool's one rule, checked by crashing at every file operation: nothing is deleted before
// the record that makes deleting it safe is durable. A simulated disk keeps, for every file and
// directory entry, what was synced apart from what was only written; the workload (rows records,
// a batch intent naming them, the batch marked committed, segments rolling) is run once per file
// operation with a snapshot taken just before that operation, both as a power loss (only synced
// bytes and synced directory entries survive) and as a process crash (everything written
// survives). Each snapshot is recovered and must satisfy what exactly-once rests on:
//   - every intent that is replayed comes back whole: each rows record it names, same bytes;
//   - an intent known durable and not replayed took all its rows with it (none replayed alone,
//     which would send them again under a new identity);
//   - no acknowledged record is lost unless it was marked committed before the crash.
#include <fcntl.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "server/spool/file_ops.h"
#include "server/spool/spool.h"

namespace chgate::spool {
namespace {

// An in-memory file system that loses, at a simulated power loss, what was not synced.
class SimulatedDisk final : public FileOps {
 public:
  struct Inode {
    std::string data;     // what a reader sees now
    std::string durable;  // what survives a power loss (the last fdatasync)
  };
  // Files by path; directories are only a set of paths (made durable at once).
  struct State {
    std::map<std::string, std::shared_ptr<Inode>> entries;
    std::map<std::string, std::shared_ptr<Inode>> durable_entries;  // as of each dir's fsync
    std::set<std::string> dirs;
  };
  enum class Crash { kPowerLoss, kProcess };

  SimulatedDisk() { state_.dirs.insert("/"); }  // the root, whose entries the spool syncs too
  // A disk holding what `crash` at `from`'s snapshot left.
  SimulatedDisk(const State& from, Crash crash) {
    const auto& entries = crash == Crash::kPowerLoss ? from.durable_entries : from.entries;
    for (const auto& [path, inode] : entries) {
      auto copy = std::make_shared<Inode>();
      copy->data = crash == Crash::kPowerLoss ? inode->durable : inode->data;
      copy->durable = copy->data;
      state_.entries[path] = copy;
      state_.durable_entries[path] = copy;
    }
    state_.dirs = from.dirs;
  }

  // Takes a snapshot just before operation number `op` (counting from 1).
  void SnapshotBefore(uint64_t op) {
    absl::MutexLock l(&mu_);
    snapshot_at_ = op;
  }
  std::optional<State> snapshot() {
    absl::MutexLock l(&mu_);
    return snapshot_;
  }
  uint64_t ops() {
    absl::MutexLock l(&mu_);
    return ops_;
  }
  State state() {
    absl::MutexLock l(&mu_);
    return state_;
  }
  // Damage on the medium: flips a byte of `path` as written and as synced.
  void Flip(const std::string& path, size_t offset) {
    absl::MutexLock l(&mu_);
    Inode& inode = *state_.entries.at(path);
    inode.data[offset] = static_cast<char>(inode.data[offset] ^ 0x01);
    inode.durable = inode.data;
  }
  uint64_t writes() {
    absl::MutexLock l(&mu_);
    return writes_;
  }
  void AwaitWritesAbove(uint64_t n) {
    absl::MutexLock l(&mu_);
    auto more = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return writes_ > n; };
    mu_.Await(absl::Condition(&more));
  }

  absl::StatusOr<int> Open(const std::string& path, int flags, int) override {
    absl::MutexLock l(&mu_);
    Tick();
    if ((flags & O_DIRECTORY) != 0 || state_.dirs.count(path) > 0) {
      if (state_.dirs.count(path) == 0) return ErrnoStatus(ENOENT, "open", path);
      return NewFd(Fd{path, nullptr, true, false, 0});
    }
    auto it = state_.entries.find(path);
    if (it == state_.entries.end()) {
      if ((flags & O_CREAT) == 0) return ErrnoStatus(ENOENT, "open", path);
      if (state_.dirs.count(Parent(path)) == 0) return ErrnoStatus(ENOENT, "open", path);
      it = state_.entries.emplace(path, std::make_shared<Inode>()).first;
    } else if ((flags & O_CREAT) != 0 && (flags & O_EXCL) != 0) {
      return ErrnoStatus(EEXIST, "open", path);
    }
    if ((flags & O_TRUNC) != 0) it->second->data.clear();
    return NewFd(Fd{path, it->second, false, (flags & O_APPEND) != 0, 0});
  }
  absl::Status Close(int fd) override {
    absl::MutexLock l(&mu_);
    Tick();
    fds_.erase(fd);
    return absl::OkStatus();
  }
  absl::StatusOr<size_t> Write(int fd, const void* data, size_t size) override {
    absl::MutexLock l(&mu_);
    Tick();
    ++writes_;
    Fd& f = fds_.at(fd);
    std::string& d = f.inode->data;
    const uint64_t at = f.append ? d.size() : f.pos;
    if (d.size() < at + size) d.resize(at + size, '\0');
    d.replace(at, size, static_cast<const char*>(data), size);
    f.pos = at + size;
    return size;
  }
  absl::StatusOr<size_t> ReadAt(int fd, void* data, size_t size, uint64_t offset) override {
    absl::MutexLock l(&mu_);
    Tick();
    const std::string& d = fds_.at(fd).inode->data;
    if (offset >= d.size()) return size_t{0};
    const size_t n = std::min<size_t>(size, d.size() - offset);
    std::copy_n(d.data() + offset, n, static_cast<char*>(data));
    return n;
  }
  absl::Status DataSync(int fd) override {
    absl::MutexLock l(&mu_);
    Tick();
    Fd& f = fds_.at(fd);
    if (f.inode != nullptr) f.inode->durable = f.inode->data;
    return absl::OkStatus();
  }
  absl::Status Sync(int fd) override {
    absl::MutexLock l(&mu_);
    Tick();
    Fd& f = fds_.at(fd);
    if (!f.dir) {
      f.inode->durable = f.inode->data;
      return absl::OkStatus();
    }
    // The directory's entries as they are now become the ones a power loss leaves.
    for (auto it = state_.durable_entries.begin(); it != state_.durable_entries.end();) {
      it = Parent(it->first) == f.path ? state_.durable_entries.erase(it) : std::next(it);
    }
    for (const auto& [path, inode] : state_.entries) {
      if (Parent(path) == f.path) state_.durable_entries[path] = inode;
    }
    return absl::OkStatus();
  }
  absl::Status Truncate(int fd, uint64_t size) override {
    absl::MutexLock l(&mu_);
    Tick();
    fds_.at(fd).inode->data.resize(size, '\0');
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> FileSize(int fd) override {
    absl::MutexLock l(&mu_);
    Tick();
    return fds_.at(fd).inode->data.size();
  }
  absl::StatusOr<uint64_t> FreeBytes(const std::string&) override { return uint64_t{1} << 40; }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    absl::MutexLock l(&mu_);
    Tick();
    std::vector<std::string> names;
    for (const auto& [path, inode] : state_.entries) {
      if (Parent(path) == dir) names.push_back(path.substr(dir.size() + 1));
    }
    return names;
  }
  absl::Status Rename(const std::string& from, const std::string& to) override {
    absl::MutexLock l(&mu_);
    Tick();
    auto it = state_.entries.find(from);
    if (it == state_.entries.end()) return ErrnoStatus(ENOENT, "rename", from);
    state_.entries[to] = it->second;
    state_.entries.erase(from);
    return absl::OkStatus();
  }
  absl::Status Unlink(const std::string& path) override {
    absl::MutexLock l(&mu_);
    Tick();
    if (state_.entries.erase(path) == 0) return ErrnoStatus(ENOENT, "unlink", path);
    return absl::OkStatus();
  }
  absl::Status MakeDir(const std::string& path) override {
    absl::MutexLock l(&mu_);
    Tick();
    state_.dirs.insert(path);
    return absl::OkStatus();
  }
  absl::Status LockExclusive(int) override { return absl::OkStatus(); }

 private:
  struct Fd {
    std::string path;
    std::shared_ptr<Inode> inode;  // null for a directory
    bool dir = false;
    bool append = false;
    uint64_t pos = 0;
  };
  static std::string Parent(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash);
  }
  int NewFd(Fd fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    fds_[next_fd_] = std::move(fd);
    return next_fd_++;
  }
  // Counts the operation; the snapshot is of the state before the one numbered snapshot_at_.
  void Tick() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++ops_;
    if (ops_ == snapshot_at_) {
      snapshot_ = state_;
      // The inodes too: later writes must not reach the snapshot.
      std::map<Inode*, std::shared_ptr<Inode>> copies;
      auto copy = [&](std::shared_ptr<Inode>& p) {
        auto& c = copies[p.get()];
        if (c == nullptr) c = std::make_shared<Inode>(*p);
        p = c;
      };
      for (auto& [path, inode] : snapshot_->entries) copy(inode);
      for (auto& [path, inode] : snapshot_->durable_entries) copy(inode);
    }
  }

  absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_);
  std::map<int, Fd> fds_ ABSL_GUARDED_BY(mu_);
  int next_fd_ ABSL_GUARDED_BY(mu_) = 3;
  uint64_t ops_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t writes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t snapshot_at_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<State> snapshot_ ABSL_GUARDED_BY(mu_);
};

constexpr char kDir[] = "/spool";

SpoolOptions CrashOptions(SimulatedDisk* disk) {
  return SpoolOptions{
      .segment_bytes = 700, .max_bytes = 1 << 20, .min_free_bytes = 1, .file_ops = disk};
}

// What the workload did, with the operation count at which each thing was seen.
struct Journal {
  std::map<uint64_t, std::string> payloads;           // every durable record by LSN
  std::map<uint64_t, uint64_t> acked_at;              // LSN -> ops() when its append returned
  std::map<uint64_t, uint64_t> committed_at;          // LSN -> ops() just before MarkCommitted
  std::map<uint64_t, std::vector<uint64_t>> intents;  // intent LSN -> its rows records
};

std::string IntentPayload(const std::vector<uint64_t>& lsns) {
  std::string p = "intent";
  for (uint64_t lsn : lsns) absl::StrAppend(&p, " ", lsn);
  return p;
}

// Batches of three rows records, each batch's intent written before its INSERT and the whole
// batch marked committed after it, the way chgate's persisted path does; some commit marks are
// left to be written on their own (the writer then has nothing else to sync them with). The last
// two batches stay pending: one sent (intent written), one not.
void RunWorkload(SimulatedDisk& disk, Journal& journal) {
  absl::StatusOr<Spool::Opened> opened = Spool::Open(kDir, CrashOptions(&disk));
  ASSERT_TRUE(opened.ok()) << opened.status();
  Spool& spool = *opened->spool;
  auto append = [&](const std::string& payload, bool exempt) -> uint64_t {
    absl::StatusOr<uint64_t> lsn = spool.AppendAndWait(payload, exempt);
    EXPECT_TRUE(lsn.ok()) << lsn.status();
    if (!lsn.ok()) return 0;
    journal.acked_at[*lsn] = disk.ops();
    journal.payloads[*lsn] = payload;
    return *lsn;
  };
  constexpr int kBatches = 12;
  for (int b = 0; b < kBatches; ++b) {
    std::vector<uint64_t> rows;
    for (int r = 0; r < 3; ++r) {
      rows.push_back(append(absl::StrCat("rows b", b, " r", r, " ", std::string(40, 'x')), false));
    }
    if (b == kBatches - 1) break;  // queued for a batch, never sent
    const uint64_t intent = append(IntentPayload(rows), true);
    journal.intents[intent] = rows;
    if (b == kBatches - 2) break;  // sent, no answer before the crash
    std::vector<uint64_t> done = rows;
    done.push_back(intent);
    for (uint64_t lsn : done) journal.committed_at[lsn] = disk.ops();
    const uint64_t writes = disk.writes();
    ASSERT_TRUE(spool.MarkCommitted(done).ok());
    // Every other batch: let the writer write the commit mark alone before anything else comes.
    if (b % 2 == 0) disk.AwaitWritesAbove(writes);
  }
  spool.Close();
}

// Recovers `disk` and checks the rules at the top; `where` names the crash in failures.
void CheckRecovery(SimulatedDisk& disk, const Journal& journal, uint64_t crash_op,
                   const std::string& where) {
  SpoolOptions options = CrashOptions(&disk);
  absl::StatusOr<Spool::Opened> opened = Spool::Open(kDir, options);
  ASSERT_TRUE(opened.ok()) << where << ": " << opened.status();
  std::map<uint64_t, std::string> replayed;
  for (const SpoolRecord& r : opened->replay) replayed[r.lsn] = r.payload;
  for (const auto& [lsn, payload] : replayed) {
    if (payload.rfind("intent", 0) != 0) continue;
    // A replayed intent names exactly the records the workload gave it, all still here.
    std::vector<uint64_t> named;
    for (absl::string_view part : absl::StrSplit(payload, ' ', absl::SkipEmpty())) {
      uint64_t v;
      if (absl::SimpleAtoi(part, &v)) named.push_back(v);
    }
    ASSERT_EQ(named, journal.intents.at(lsn)) << where;
    for (uint64_t row : named) {
      auto it = replayed.find(row);
      ASSERT_NE(it, replayed.end())
          << where << ": intent " << lsn << " replayed without its record " << row
          << " (a smaller block under the same identity)";
      EXPECT_EQ(it->second, journal.payloads.at(row)) << where;
    }
  }
  for (const auto& [intent, rows] : journal.intents) {
    auto acked = journal.acked_at.find(intent);
    if (acked == journal.acked_at.end() || acked->second >= crash_op) continue;
    if (replayed.count(intent) > 0) continue;
    for (uint64_t row : rows) {
      EXPECT_EQ(replayed.count(row), 0u)
          << where << ": record " << row << " replayed although its intent " << intent
          << " is committed (it would be sent again under a new identity)";
    }
  }
  for (const auto& [lsn, acked] : journal.acked_at) {
    if (acked >= crash_op) continue;  // not known durable at the crash
    auto committed = journal.committed_at.find(lsn);
    if (committed != journal.committed_at.end() && committed->second < crash_op) continue;
    EXPECT_EQ(replayed.count(lsn), 1u) << where << ": acknowledged record " << lsn << " lost";
  }
  opened->spool->Close();
}

TEST(SpoolCrashTest, EveryFileOperationIsACrashPointAndExactlyOnceHolds) {
  // One run without a crash counts the operations; then one run per operation.
  uint64_t total = 0;
  {
    SimulatedDisk disk;
    Journal journal;
    RunWorkload(disk, journal);
    total = disk.ops();
    ASSERT_GT(journal.intents.size(), 5u);
  }
  ASSERT_GT(total, 100u);
  uint64_t checked = 0;
  // The threads' interleaving varies from run to run, so the count may too: go a little past.
  for (uint64_t op = 1; op <= total + total / 10; ++op) {
    SimulatedDisk disk;
    disk.SnapshotBefore(op);
    Journal journal;
    RunWorkload(disk, journal);
    if (::testing::Test::HasFatalFailure()) return;
    std::optional<SimulatedDisk::State> state = disk.snapshot();
    if (!state.has_value()) continue;  // this run had fewer operations
    for (SimulatedDisk::Crash crash :
         {SimulatedDisk::Crash::kPowerLoss, SimulatedDisk::Crash::kProcess}) {
      SimulatedDisk after(*state, crash);
      CheckRecovery(
          after, journal, op,
          absl::StrCat(crash == SimulatedDisk::Crash::kPowerLoss ? "power loss" : "process crash",
                       " before file operation ", op));
      if (::testing::Test::HasFatalFailure()) return;
    }
    ++checked;
  }
  EXPECT_GE(checked, total * 9 / 10);
}

TEST(SpoolCrashTest, ACommitMarkWrittenButNotSyncedKeepsItsSegments) {
  // The sequence that duplicated rows: a batch's commit mark written alone, its older segments
  // then deleted before anything synced the mark.
  SimulatedDisk disk;
  absl::StatusOr<Spool::Opened> opened = Spool::Open(kDir, CrashOptions(&disk));
  ASSERT_TRUE(opened.ok()) << opened.status();
  Spool& spool = *opened->spool;
  std::vector<uint64_t> all;
  for (int i = 0; i < 20; ++i) {  // several segments
    absl::StatusOr<uint64_t> lsn =
        spool.AppendAndWait(std::string(100, static_cast<char>('a' + i)));
    ASSERT_TRUE(lsn.ok()) << lsn.status();
    all.push_back(*lsn);
  }
  const uint64_t segments = spool.Stats().segments;
  ASSERT_GE(segments, 3u);
  const uint64_t writes = disk.writes();
  ASSERT_TRUE(spool.MarkCommitted(std::vector<uint64_t>(all.begin(), all.end() - 1)).ok());
  disk.AwaitWritesAbove(writes);
  // Written, not synced (commit_sync_delay is 1 s): every segment stays.
  EXPECT_EQ(spool.Stats().segments, segments);
  ASSERT_TRUE(spool.Flush().ok());  // synced: now they may go
  EXPECT_EQ(spool.Stats().segments, 1u);
  spool.Close();
}

TEST(SpoolCrashTest, ACrashWhileRecoveryKeepsTheRecordsAfterADamagedOneLosesNoMore) {
  // A segment with a damaged record in its middle: recovery writes the records after it as a
  // segment of their own, then truncates the damaged one. Crashed before each file operation of
  // that recovery, the next recovery must still lose exactly the damaged record.
  std::map<uint64_t, std::string> written;
  SimulatedDisk::State damaged;
  uint64_t damaged_lsn = 0;
  {
    SimulatedDisk disk;
    absl::StatusOr<Spool::Opened> opened = Spool::Open(kDir, CrashOptions(&disk));
    ASSERT_TRUE(opened.ok()) << opened.status();
    for (int i = 0; i < 24; ++i) {  // several segments of several records each
      const std::string payload = absl::StrCat("record ", i, " ", std::string(40, 'x'));
      absl::StatusOr<uint64_t> lsn = opened->spool->AppendAndWait(payload);
      ASSERT_TRUE(lsn.ok()) << lsn.status();
      written[*lsn] = payload;
    }
    opened->spool->Close();
    // A payload byte of the third record (in the first segment, with records after it).
    damaged_lsn = std::next(written.begin(), 2)->first;
    bool flipped = false;
    const SimulatedDisk::State before = disk.state();
    for (const auto& [path, inode] : before.entries) {
      const size_t at = inode->data.find(written[damaged_lsn]);
      if (at == std::string::npos) continue;
      ASSERT_GT(inode->data.size(), at + 2 * written[damaged_lsn].size()) << "no record after it";
      disk.Flip(path, at + 3);
      flipped = true;
    }
    ASSERT_TRUE(flipped);
    damaged = disk.state();
  }
  std::map<uint64_t, std::string> expected = written;
  expected.erase(damaged_lsn);
  auto recover = [&](SimulatedDisk& disk, const std::string& where) {
    absl::StatusOr<Spool::Opened> opened = Spool::Open(kDir, CrashOptions(&disk));
    ASSERT_TRUE(opened.ok()) << where << ": " << opened.status();
    std::map<uint64_t, std::string> replayed;
    for (const SpoolRecord& r : opened->replay) replayed[r.lsn] = r.payload;
    EXPECT_EQ(replayed, expected) << where;
    opened->spool->Close();
    for (const auto& [path, inode] : disk.state().entries) {
      EXPECT_FALSE(absl::EndsWith(path, ".wal.tmp")) << where << ": " << path << " left";
    }
  };
  uint64_t total = 0;
  {
    SimulatedDisk disk(damaged, SimulatedDisk::Crash::kProcess);
    recover(disk, "no crash");
    total = disk.ops();
  }
  for (uint64_t op = 1; op <= total; ++op) {
    SimulatedDisk disk(damaged, SimulatedDisk::Crash::kProcess);
    disk.SnapshotBefore(op);
    {
      absl::StatusOr<Spool::Opened> opened = Spool::Open(kDir, CrashOptions(&disk));
      ASSERT_TRUE(opened.ok()) << opened.status();
      opened->spool->Close();
    }
    std::optional<SimulatedDisk::State> state = disk.snapshot();
    ASSERT_TRUE(state.has_value()) << "operation " << op;
    for (SimulatedDisk::Crash crash :
         {SimulatedDisk::Crash::kPowerLoss, SimulatedDisk::Crash::kProcess}) {
      const std::string where =
          absl::StrCat(crash == SimulatedDisk::Crash::kPowerLoss ? "power loss" : "process crash",
                       " before recovery's file operation ", op);
      SimulatedDisk after(*state, crash);
      recover(after, where);
      if (::testing::Test::HasFatalFailure()) return;
      recover(after, where + ", then a clean restart");
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace chgate::spool
