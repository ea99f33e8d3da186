// The Ingestor's parts on their own, on the fake clock: the task runner and the liveness check it
// answers, the retry loop, the adaptive flush delay, the idempotency keys, the header cache and
// admission.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/protocol/error_codes.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/ingest/admission.h"
#include "server/ingest/batcher.h"
#include "server/ingest/flush_delay.h"
#include "server/ingest/idempotency_keys.h"
#include "server/ingest/retry.h"
#include "server/ingest/schema_cache.h"
#include "server/ingest/task_runner.h"
#include "tests/unit/ingest/fake_clock.h"
#include "tests/unit/ingest/quiet_observer.h"

namespace chgate::ingest {
namespace {

using testing::FakeClock;
using ::testing::HasSubstr;

constexpr absl::Duration kStall = absl::Seconds(30);

// Runs `task` on the runner's queue and waits until it has started.
void StartBlocking(TaskRunner& runner, TaskRunner::Queue queue, absl::Notification* release) {
  absl::Notification started;
  runner.Post(queue, [&started, release] {
    started.Notify();
    release->WaitForNotification();
  });
  started.WaitForNotification();
}

// Waits until every task posted to `queue` before this call has ended (one thread per queue).
void AwaitQueue(TaskRunner& runner, TaskRunner::Queue queue) {
  absl::Notification ran;
  runner.Post(queue, [&ran] { ran.Notify(); });
  ran.WaitForNotification();
}

TEST(TaskRunnerTest, AFlushThatDoesNotEndFailsTheProgressCheckUntilItEnds) {
  FakeClock clock;
  TaskRunner runner(&clock, 1, 1, /*threads=*/true);
  EXPECT_TRUE(runner.CheckProgress(kStall).ok()) << "idle threads are not stalled";
  absl::Notification release;
  StartBlocking(runner, TaskRunner::Queue::kFlush, &release);
  clock.Advance(kStall);
  EXPECT_TRUE(runner.CheckProgress(kStall).ok()) << "exactly the limit is not past it";
  clock.Advance(absl::Seconds(1));
  const absl::Status stuck = runner.CheckProgress(kStall);
  EXPECT_EQ(stuck.code(), absl::StatusCode::kDeadlineExceeded) << stuck;
  EXPECT_THAT(std::string(stuck.message()), HasSubstr("a flush thread"));
  EXPECT_THAT(std::string(stuck.message()), HasSubstr("31s"));
  EXPECT_TRUE(runner.CheckProgress(absl::Minutes(1)).ok()) << "a longer limit is not reached";
  release.Notify();
  AwaitQueue(runner, TaskRunner::Queue::kFlush);
  EXPECT_TRUE(runner.CheckProgress(kStall).ok());
}

TEST(TaskRunnerTest, AConversionThatDoesNotReturnIsNamedAsOne) {
  FakeClock clock;
  TaskRunner runner(&clock, 1, 1, /*threads=*/true);
  absl::Notification release;
  StartBlocking(runner, TaskRunner::Queue::kConvert, &release);
  clock.Advance(kStall + absl::Seconds(1));
  const absl::Status stuck = runner.CheckProgress(kStall);
  EXPECT_THAT(std::string(stuck.message()), HasSubstr("a conversion thread"));
  release.Notify();
  AwaitQueue(runner, TaskRunner::Queue::kConvert);
  EXPECT_TRUE(runner.CheckProgress(kStall).ok());
}

TEST(TaskRunnerTest, ATaskThatMarksProgressIsNotAStallHoweverLongItRuns) {
  FakeClock clock;
  TaskRunner runner(&clock, 1, 1, /*threads=*/true);
  absl::Mutex mu;
  int step = 0, done_step = 0;
  bool stop = false;
  // The task marks progress at every step the test asks for, as a retry loop does per attempt.
  runner.Post(TaskRunner::Queue::kFlush, [&] {
    while (true) {
      absl::MutexLock lock(&mu);
      auto asked = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop || step > done_step; };
      mu.Await(absl::Condition(&asked));
      if (stop) return;
      TaskRunner::MarkProgress(&clock);
      done_step = step;
    }
  });
  for (int i = 1; i <= 10; ++i) {
    clock.Advance(kStall - absl::Seconds(1));  // ten times the limit in all
    {
      absl::MutexLock lock(&mu);
      step = i;
      auto done = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return done_step == i; };
      mu.Await(absl::Condition(&done));
    }
    const absl::Status progress = runner.CheckProgress(kStall);
    EXPECT_TRUE(progress.ok()) << "step " << i << ": " << progress;
  }
  clock.Advance(kStall + absl::Seconds(1));
  EXPECT_FALSE(runner.CheckProgress(kStall).ok()) << "no progress since the last step";
  {
    absl::MutexLock lock(&mu);
    stop = true;
  }
}

TEST(TaskRunnerTest, MarkProgressOutsideARunnerThreadDoesNothing) {
  FakeClock clock;
  TaskRunner::MarkProgress(&clock);  // not a runner thread: no entry to touch
  TaskRunner runner(&clock, 1, 1, /*threads=*/true);
  EXPECT_TRUE(runner.CheckProgress(kStall).ok());
}

TEST(TaskRunnerTest, WithoutThreadsRunPendingRunsConversionsFirstInOrder) {
  FakeClock clock;
  TaskRunner runner(&clock, 2, 8, /*threads=*/false);
  std::vector<std::string> ran;
  runner.Post(TaskRunner::Queue::kFlush, [&] { ran.push_back("flush1"); });
  runner.Post(TaskRunner::Queue::kConvert, [&] { ran.push_back("convert1"); });
  runner.Post(TaskRunner::Queue::kConvert, [&] {
    ran.push_back("convert2");
    runner.Post(TaskRunner::Queue::kFlush, [&] { ran.push_back("flush2"); });
  });
  EXPECT_TRUE(runner.RunPending());
  EXPECT_THAT(ran, ::testing::ElementsAre("convert1", "convert2", "flush1", "flush2"));
  EXPECT_FALSE(runner.RunPending()) << "nothing left";
  EXPECT_TRUE(runner.AwaitStarted(TaskRunner::Queue::kConvert, absl::InfinitePast()));
}

TEST(TaskRunnerTest, StopRunsWhatIsQueuedFirst) {
  FakeClock clock;
  std::atomic<int> ran{0};
  {
    TaskRunner runner(&clock, 1, 1, /*threads=*/true);
    absl::Notification release;
    StartBlocking(runner, TaskRunner::Queue::kFlush, &release);
    for (int i = 0; i < 5; ++i) runner.Post(TaskRunner::Queue::kFlush, [&ran] { ++ran; });
    release.Notify();
  }  // the destructor stops the runner
  EXPECT_EQ(ran.load(), 5);
}

// An inserter that answers each Insert from a script (then OK), and calls `on_attempt` inside
// each attempt (on the attempt's thread).
class ScriptedInserter final : public Inserter {
 public:
  absl::StatusOr<TableSchema> Describe(const TableId&, const std::vector<std::string>& columns,
                                       absl::Time) override {
    ++describes;
    if (!describe_errors.empty()) {
      absl::Status st = describe_errors.front();
      describe_errors.pop_front();
      return st;
    }
    TableSchema s;
    for (const std::string& c : columns) {
      s.names.push_back(c);
      s.prototypes.push_back(*clickhouse::CreateColumn(type));
    }
    return s;
  }
  absl::Status Insert(const TableId&, const clickhouse::BlockParts&, const InsertAttempt& attempt,
                      absl::Time) override {
    attempts.push_back(attempt.attempt);
    if (on_attempt) on_attempt();
    if (script.empty()) return absl::OkStatus();
    absl::Status st = script.front();
    script.pop_front();
    return st;
  }
  absl::StatusOr<DedupWindow> DedupWindowOf(const TableId&, absl::Time) override {
    return absl::UnimplementedError("scripted");
  }
  std::deque<absl::Status> script;
  std::deque<absl::Status> describe_errors;
  std::string type = "UInt64";
  std::vector<int> attempts;
  std::function<void()> on_attempt;
  int describes = 0;
};

absl::Status Refused(int32_t code) {
  return clickhouse::ExceptionToStatus(
      {.code = code, .name = "DB::Exception", .message = "refused"});
}

TEST(InsertRetrierTest, ABatchRetriedOnScheduleThroughAnOutageIsProgressNotAStall) {
  FakeClock clock;
  ScriptedInserter inserter;
  for (int i = 0; i < 40; ++i) inserter.script.push_back(absl::UnavailableError("refused"));
  const RetryPolicy policy{.initial_backoff = absl::Seconds(1),
                           .max_backoff = absl::Seconds(20),
                           .max_elapsed = absl::Hours(1)};
  InsertRetrier retrier(policy, &inserter, &clock, nullptr);
  TaskRunner runner(&clock, 1, 1, /*threads=*/true);
  std::vector<absl::Status> checks;
  inserter.on_attempt = [&] { checks.push_back(runner.CheckProgress(kStall)); };
  const std::string label = "default.events";
  const TableId table{"default", "events"};
  absl::Status result;
  absl::Notification done;
  const absl::Time start = clock.Now();
  runner.Post(TaskRunner::Queue::kFlush, [&] {
    InsertAttempt attempt;
    bool too_many_parts = false;
    result = retrier.Insert(
        {.label = label, .table = table, .spooled = true}, clickhouse::BlockParts(), attempt,
        [] { return absl::InfiniteFuture(); }, [](std::vector<log::Field>*) {}, &too_many_parts);
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_TRUE(result.ok()) << result;
  ASSERT_EQ(inserter.attempts.size(), 41u);
  // The jittered sleeps sum to about 365 s (sd ~35 s): many stall limits, whatever the draws.
  EXPECT_GT(clock.Now() - start, 5 * kStall) << "the outage lasted many stall limits";
  for (size_t i = 0; i < checks.size(); ++i) {
    EXPECT_TRUE(checks[i].ok()) << "attempt " << i + 1 << ": " << checks[i];
  }
  // Backoff with full jitter: each sleep within its cap, and the caps double up to max_backoff.
  const std::vector<absl::Duration> sleeps = clock.sleeps();
  ASSERT_EQ(sleeps.size(), 40u);
  for (size_t i = 0; i < sleeps.size(); ++i) {
    EXPECT_LE(sleeps[i], BackoffCap(policy, static_cast<int>(i) + 1)) << i;
  }
}

// The documented lists (docs/api.md: the retried errors; docs/spool.md: what sets a spooled batch
// aside), by ClickHouse's own numbers (its ErrorCodes.cpp), not by this code's constants: a
// wrong constant or a code moved between the lists fails here.
TEST(InsertRetrierTest, TheRetriedAndTheDataErrorsAreTheDocumentedCodes) {
  const struct {
    int32_t code;
    const char* name;
    bool retried;  // IsRetryable: a committed batch tries again
    bool data;     // IsDataError: a spooled batch is set aside (dead letter)
  } kCodes[] = {
      {159, "TIMEOUT_EXCEEDED", true, false},
      {202, "TOO_MANY_SIMULTANEOUS_QUERIES", true, false},
      {209, "SOCKET_TIMEOUT", true, false},
      {210, "NETWORK_ERROR", true, false},
      {241, "MEMORY_LIMIT_EXCEEDED", true, false},
      {242, "TABLE_IS_READ_ONLY", true, false},
      {252, "TOO_MANY_PARTS", true, false},
      {285, "TOO_FEW_LIVE_REPLICAS", true, false},
      {319, "UNKNOWN_STATUS_OF_INSERT", true, false},
      {425, "SYSTEM_ERROR", true, false},
      {216, "QUERY_WITH_SAME_ID_IS_ALREADY_RUNNING", true, false},
      {999, "KEEPER_EXCEPTION", true, false},
      // Fixable by the operator: a committed caller hears of it, a spooled batch waits.
      {243, "NOT_ENOUGH_SPACE", false, false},
      {225, "NO_ZOOKEEPER", false, false},
      {497, "ACCESS_DENIED", false, false},
      {60, "UNKNOWN_TABLE", false, false},
      {81, "UNKNOWN_DATABASE", false, false},
      {201, "QUOTA_EXPIRED", false, false},
      {164, "READONLY", false, false},
      {62, "SYNTAX_ERROR", false, false},
      // The rows themselves: never inserted as they are.
      {6, "CANNOT_PARSE_TEXT", false, true},
      {25, "CANNOT_PARSE_ESCAPE_SEQUENCE", false, true},
      {26, "CANNOT_PARSE_QUOTED_STRING", false, true},
      {27, "CANNOT_PARSE_INPUT_ASSERTION_FAILED", false, true},
      {38, "CANNOT_PARSE_DATE", false, true},
      {41, "CANNOT_PARSE_DATETIME", false, true},
      {72, "CANNOT_PARSE_NUMBER", false, true},
      {130, "CANNOT_READ_ARRAY_FROM_TEXT", false, true},
      {117, "INCORRECT_DATA", false, true},
      {19, "SIZE_OF_FIXED_STRING_DOESNT_MATCH", false, true},
      {190, "SIZES_OF_ARRAYS_DOESNT_MATCH", false, true},
      {69, "ARGUMENT_OUT_OF_BOUND", false, true},
      {321, "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE", false, true},
      {407, "DECIMAL_OVERFLOW", false, true},
      {349, "CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN", false, true},
      {469, "VIOLATED_CONSTRAINT", false, true},
      // The table's columns are not the block's any more.
      {7, "INCORRECT_NUMBER_OF_COLUMNS", false, true},
      {8, "THERE_IS_NO_COLUMN", false, true},
      {10, "NOT_FOUND_COLUMN_IN_BLOCK", false, true},
      {15, "DUPLICATE_COLUMN", false, true},
      {16, "NO_SUCH_COLUMN_IN_TABLE", false, true},
      {20, "NUMBER_OF_COLUMNS_DOESNT_MATCH", false, true},
      {53, "TYPE_MISMATCH", false, true},
      {44, "ILLEGAL_COLUMN", false, true},
      {70, "CANNOT_CONVERT_TYPE", false, true},
  };
  for (const auto& c : kCodes) {
    const absl::Status status = Refused(c.code);
    EXPECT_EQ(IsRetryable(status), c.retried) << c.code << " " << c.name;
    EXPECT_EQ(IsDataError(status), c.data) << c.code << " " << c.name;
  }
  // Not from ClickHouse: a connection that failed, timed out or was cut is tried again; chgate's
  // own comparison of the block with the INSERT's header is about the rows.
  for (const absl::Status& s : {absl::UnavailableError("connect"),
                                absl::DeadlineExceededError("read"), absl::DataLossError("cut")}) {
    EXPECT_TRUE(IsRetryable(s)) << s;
    EXPECT_FALSE(IsDataError(s)) << s;
  }
  EXPECT_FALSE(IsRetryable(absl::InvalidArgumentError("column 2 is String, the table's UInt8")));
  EXPECT_TRUE(IsDataError(absl::InvalidArgumentError("column 2 is String, the table's UInt8")));
}

TEST(InsertRetrierTest, OnlyDataErrorsEndASpooledBatchsRetriesAndPermanentOnesEndACommittedOne) {
  FakeClock clock;
  ScriptedInserter inserter;
  InsertRetrier retrier({.initial_backoff = absl::Milliseconds(10),
                         .max_backoff = absl::Seconds(1),
                         .max_elapsed = absl::Minutes(1)},
                        &inserter, &clock, nullptr);
  const std::string label = "default.events";
  const TableId table{"default", "events"};
  const auto insert = [&](bool spooled) {
    InsertAttempt attempt;
    bool too_many_parts = false;
    const absl::Time stop = clock.Now() + absl::Hours(1);
    return retrier.Insert(
        {.label = label, .table = table, .spooled = spooled}, clickhouse::BlockParts(), attempt,
        [stop] { return stop; }, [](std::vector<log::Field>*) {}, &too_many_parts);
  };
  namespace ec = clickhouse::error_code;
  // ACCESS_DENIED (497) is the operator's to fix: a spooled batch waits for it ...
  inserter.script = {Refused(497), Refused(497), Refused(ec::kTypeMismatch)};
  EXPECT_EQ(clickhouse::ClickHouseCode(insert(true)), ec::kTypeMismatch);
  EXPECT_EQ(inserter.attempts.size(), 3u) << "retried until the rows themselves were refused";
  // ... while a committed batch's caller hears of it at once.
  inserter.attempts.clear();
  inserter.script = {Refused(497)};
  EXPECT_EQ(clickhouse::ClickHouseCode(insert(false)), 497);
  EXPECT_EQ(inserter.attempts.size(), 1u);
}

TEST(InsertRetrierTest, TheFirstTooManyPartsRaisesTheTablesDelayAtOnce) {
  FakeClock clock;
  ScriptedInserter inserter;
  InsertRetrier retrier({.initial_backoff = absl::Milliseconds(10),
                         .max_backoff = absl::Seconds(1),
                         .max_elapsed = absl::Minutes(1)},
                        &inserter, &clock, nullptr);
  FlushDelay delay("default.events", absl::Milliseconds(200), {.ceiling = absl::Seconds(5)},
                   nullptr);
  const std::string label = "default.events";
  const TableId table{"default", "events"};
  const absl::Status parts = Refused(clickhouse::error_code::kTooManyParts);
  inserter.script = {parts, parts, parts};
  absl::Duration during = absl::ZeroDuration();
  inserter.on_attempt = [&] {
    if (inserter.attempts.size() == 2) during = delay.Current();
  };
  InsertAttempt attempt;
  bool too_many_parts = false;
  const absl::Time stop = clock.Now() + absl::Hours(1);
  EXPECT_TRUE(retrier
                  .Insert(
                      {.label = label, .table = table, .delay = &delay}, clickhouse::BlockParts(),
                      attempt, [stop] { return stop; }, [](std::vector<log::Field>*) {},
                      &too_many_parts)
                  .ok());
  EXPECT_TRUE(too_many_parts);
  EXPECT_EQ(during, absl::Milliseconds(400)) << "raised while the batch was still retried";
  EXPECT_EQ(delay.Current(), absl::Milliseconds(400)) << "once per flush, not per attempt";
}

TEST(FlushDelayTest, DoublesUnderPressureUpToTheCeilingAndRelaxesAfterCalmFlushes) {
  FlushDelay delay("default.events", absl::Milliseconds(200),
                   {.ceiling = absl::Seconds(1), .slow_insert = absl::Seconds(2), .relax_after = 3},
                   nullptr);
  EXPECT_EQ(delay.Current(), absl::Milliseconds(200));
  delay.Adapt(/*too_many_parts=*/true, absl::ZeroDuration(), 1);
  EXPECT_EQ(delay.Current(), absl::Milliseconds(400));
  delay.Adapt(false, absl::Seconds(3), 1);  // one slow attempt
  EXPECT_EQ(delay.Current(), absl::Milliseconds(800));
  delay.Adapt(true, absl::ZeroDuration(), 1);
  EXPECT_EQ(delay.Current(), absl::Seconds(1)) << "capped";
  // Slow, but over two attempts: that is backoff, not the server, so a calm flush.
  delay.Adapt(false, absl::Seconds(3), 2);
  EXPECT_EQ(delay.Current(), absl::Seconds(1));
  delay.Adapt(false, absl::Milliseconds(10), 1);
  EXPECT_EQ(delay.Current(), absl::Seconds(1)) << "two calm flushes of three";
  delay.Adapt(false, absl::Milliseconds(10), 1);
  EXPECT_EQ(delay.Current(), absl::Milliseconds(500));
  for (int i = 0; i < 12; ++i) delay.Adapt(false, absl::Milliseconds(10), 1);
  EXPECT_EQ(delay.Current(), absl::Milliseconds(200)) << "never below the configured delay";
}

TEST(FlushDelayTest, ACeilingAtOrBelowTheConfiguredDelayTurnsItOff) {
  FlushDelay delay("default.events", absl::Seconds(5), {.ceiling = absl::Seconds(5)}, nullptr);
  delay.Adapt(true, absl::ZeroDuration(), 1);
  EXPECT_EQ(delay.Current(), absl::Seconds(5));
}

// A request of `rows` rows and `bytes` bytes, received at `now`, for Batch::Append.
std::shared_ptr<PendingRequest> Rows(uint64_t rows, uint64_t bytes, absl::Time deadline,
                                     AckMode ack = AckMode::kCommitted) {
  auto p = std::make_shared<PendingRequest>();
  p->rows = rows;
  p->bytes = bytes;
  p->deadline = deadline;
  p->ack = ack;
  return p;
}

class StartedTables : public testing::QuietObserver {
 public:
  void TableStarted(const std::string& label, absl::Duration delay) override {
    started.emplace_back(label, delay);
  }
  std::vector<std::pair<std::string, absl::Duration>> started;
};

BatcherSettings TwoLimits() {
  return {
      .limits = {.max_rows = 10, .max_bytes = 1000, .max_delay = absl::Milliseconds(200)},
      .table_limits = {{"db.big",
                        {.max_rows = 100, .max_bytes = 1 << 20, .max_delay = absl::Seconds(1)}}},
      .deadline_margin = absl::Milliseconds(100)};
}

TEST(BatcherTest, ABatchIsFullAtItsTablesRowOrByteLimit) {
  StartedTables observer;
  Batcher batcher(TwoLimits(), &observer);
  const absl::Time now = absl::FromUnixSeconds(1000);
  Batch& t = batcher.Get("k.t", "db.t", {"db", "t"});
  t.Append(Rows(5, 100, absl::InfiniteFuture()), now);
  EXPECT_EQ(batcher.Full(t), std::nullopt);
  t.Append(Rows(5, 100, absl::InfiniteFuture()), now);
  EXPECT_EQ(batcher.Full(t), FlushReason::kRows);

  Batch& wide = batcher.Get("k.wide", "db.wide", {"db", "wide"});
  wide.Append(Rows(1, 1000, absl::InfiniteFuture()), now);
  EXPECT_EQ(batcher.Full(wide), FlushReason::kBytes);

  Batch& big = batcher.Get("k.big", "db.big", {"db", "big"});
  big.Append(Rows(10, 1000, absl::InfiniteFuture()), now);
  EXPECT_EQ(batcher.Full(big), std::nullopt) << "db.big has limits of its own";
  EXPECT_EQ(&batcher.Get("k.t", "db.t", {"db", "t"}), &t) << "made once";
  EXPECT_THAT(observer.started,
              ::testing::ElementsAre(
                  std::pair<std::string, absl::Duration>("db.t", absl::Milliseconds(200)),
                  std::pair<std::string, absl::Duration>("db.wide", absl::Milliseconds(200)),
                  std::pair<std::string, absl::Duration>("db.big", absl::Seconds(1))));
}

TEST(BatcherTest, ABatchIsDueByItsRowsAgeOrAMarginBeforeACallersDeadline) {
  Batcher batcher(TwoLimits(), nullptr);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_EQ(batcher.NextDue(t0 + absl::Seconds(1)), t0 + absl::Seconds(1)) << "no batch";
  Batch& aged = batcher.Get("k.a", "db.a", {"db", "a"});
  aged.Append(Rows(1, 10, t0 + absl::Seconds(5)), t0);
  Batch& waited = batcher.Get("k.w", "db.w", {"db", "w"});
  waited.Append(Rows(1, 10, t0 + absl::Milliseconds(150)), t0);
  // An accepted-mode caller does not wait for the batch: its deadline does not count.
  Batch& accepted = batcher.Get("k.x", "db.x", {"db", "x"});
  accepted.Append(Rows(1, 10, t0 + absl::Milliseconds(110), AckMode::kAccepted), t0);
  batcher.Get("k.empty", "db.empty", {"db", "empty"});

  EXPECT_EQ(batcher.NextDue(t0 + absl::Seconds(1)), t0 + absl::Milliseconds(50));
  EXPECT_EQ(batcher.NextDue(t0 + absl::Milliseconds(20)), t0 + absl::Milliseconds(20));
  EXPECT_TRUE(batcher.Due(t0 + absl::Milliseconds(49)).empty());
  EXPECT_THAT(
      batcher.Due(t0 + absl::Milliseconds(50)),
      ::testing::ElementsAre(std::pair<Batch*, FlushReason>(&waited, FlushReason::kDeadline)));
  auto due = batcher.Due(t0 + absl::Milliseconds(200));
  EXPECT_THAT(due, ::testing::UnorderedElementsAre(
                       std::pair<Batch*, FlushReason>(&waited, FlushReason::kDeadline),
                       std::pair<Batch*, FlushReason>(&aged, FlushReason::kAge),
                       std::pair<Batch*, FlushReason>(&accepted, FlushReason::kAge)));

  // A batch being flushed is neither due nor waited for.
  waited.flushing = true;
  EXPECT_EQ(batcher.NextDue(t0 + absl::Seconds(1)), t0 + absl::Milliseconds(200));
  EXPECT_EQ(batcher.Due(t0 + absl::Milliseconds(200)).size(), 2u);
}

TEST(BatcherTest, AfterAFlushAReplayComesFirstThenTheDrainThenTheLimitsThenTheAge) {
  Batcher batcher(TwoLimits(), nullptr);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  Batch& b = batcher.Get("k.t", "db.t", {"db", "t"});
  EXPECT_EQ(batcher.AfterFlush(b, /*draining=*/false, t0), std::nullopt) << "empty";
  EXPECT_EQ(batcher.AfterFlush(b, /*draining=*/true, t0), FlushReason::kShutdown);
  b.Append(Rows(3, 10, absl::InfiniteFuture()), t0);
  EXPECT_EQ(batcher.AfterFlush(b, false, t0 + absl::Milliseconds(199)), std::nullopt);
  EXPECT_EQ(batcher.AfterFlush(b, false, t0 + absl::Milliseconds(200)), FlushReason::kAge);
  b.Append(Rows(7, 10, absl::InfiniteFuture()), t0);
  EXPECT_EQ(batcher.AfterFlush(b, false, t0), FlushReason::kRows);
  EXPECT_EQ(batcher.AfterFlush(b, true, t0), FlushReason::kShutdown);
  b.AddReplay(SpooledFlush{});
  EXPECT_EQ(batcher.AfterFlush(b, true, t0), FlushReason::kReplay);
}

TEST(BatcherTest, SpooledBatchesAreApartFromTheInMemoryOnesOfTheirTable) {
  Batcher batcher(TwoLimits(), nullptr);
  const TableId table{"db", "t"};
  const std::vector<std::string> columns{"id", "msg"};
  const std::string key = TableColumnsKey(table, columns);
  Batch& memory = batcher.Get(key, "db.t", table);
  Batch& spooled = batcher.Spooled(table, columns);
  EXPECT_NE(&memory, &spooled);
  EXPECT_FALSE(memory.spooled());
  EXPECT_TRUE(spooled.spooled());
  EXPECT_EQ(spooled.label(), "db.t");
  EXPECT_EQ(spooled.columns(), columns);
  EXPECT_EQ(&batcher.Spooled(table, columns, &key), &spooled) << "the key given is the same";
  EXPECT_NE(&batcher.Spooled(table, {"id"}), &spooled) << "another column list";
  EXPECT_EQ(batcher.All().size(), 3u);

  EXPECT_TRUE(batcher.Empty());
  memory.Append(Rows(1, 10, absl::InfiniteFuture()), absl::FromUnixSeconds(1));
  EXPECT_FALSE(batcher.Empty());
  memory.Take();
  EXPECT_TRUE(batcher.Empty());
}

TEST(BatcherTest, SpooledBatchesHeldAfterTheDrainAreNeitherDueNorWaitedFor) {
  Batcher batcher(TwoLimits(), nullptr);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  Batch& memory = batcher.Get("k.t", "db.t", {"db", "t"});
  memory.Append(Rows(1, 10, absl::InfiniteFuture()), t0 + absl::Milliseconds(100));
  Batch& spooled = batcher.Spooled({"db", "s"}, {"id"});
  spooled.Queue(SpoolEntry{.lsn = 7, .rows = 3, .bytes = 30, .appended = t0});

  const absl::Time late = t0 + absl::Seconds(10);
  EXPECT_EQ(batcher.NextDue(late), t0 + absl::Milliseconds(200));
  EXPECT_EQ(batcher.Due(late).size(), 2u);
  // Held: the spooled batch's records stay in the spool; only the in-memory batch counts, so
  // the scheduler sleeps until it is due rather than waking for rows it may not send.
  EXPECT_EQ(batcher.NextDue(late, Batcher::SpooledBatches::kHeld), t0 + absl::Milliseconds(300));
  EXPECT_THAT(batcher.Due(late, Batcher::SpooledBatches::kHeld),
              ::testing::ElementsAre(std::pair<Batch*, FlushReason>(&memory, FlushReason::kAge)));
  memory.Take();
  EXPECT_EQ(batcher.NextDue(late, Batcher::SpooledBatches::kHeld), late)
      << "nothing left to wait for";
  EXPECT_TRUE(batcher.Due(late, Batcher::SpooledBatches::kHeld).empty());
  EXPECT_EQ(spooled.rows(), 3u) << "the records are still there";
}

Result Committed(uint64_t rows) {
  return {.status = absl::OkStatus(), .rows = rows, .committed = true, .query_id = "q"};
}

TEST(IdempotencyKeysTest, ARepeatFollowsTheRequestInFlightAndThenGetsItsResult) {
  FakeClock clock;
  IdempotencyKeys keys(&clock, absl::Minutes(10), 100);
  const std::string key = IdempotencyKeys::Scoped("alice", {"default", "events"}, "k1");
  Result earlier;
  std::function<void(Result)> first = [](Result) {};
  EXPECT_EQ(keys.Take(key, &first, &earlier), IdempotencyKeys::Claim::kOwner);
  EXPECT_TRUE(first) << "the owner keeps its callback";
  bool followed = false;
  std::function<void(Result)> repeat = [&followed](Result r) { followed = r.rows == 7; };
  EXPECT_EQ(keys.Take(key, &repeat, &earlier), IdempotencyKeys::Claim::kFollowing);
  EXPECT_FALSE(repeat) << "taken: it runs with the first request's outcome";
  auto followers = keys.Finish(key, Committed(7));
  ASSERT_EQ(followers.size(), 1u);
  followers[0](Committed(7));
  EXPECT_TRUE(followed);
  std::function<void(Result)> later = [](Result) {};
  EXPECT_EQ(keys.Take(key, &later, &earlier), IdempotencyKeys::Claim::kDone);
  EXPECT_EQ(earlier.rows, 7u);
  EXPECT_EQ(earlier.query_id, "q");
}

TEST(IdempotencyKeysTest, KeysAreScopedByIdentityAndTable) {
  const TableId events{"default", "events"};
  EXPECT_NE(IdempotencyKeys::Scoped("alice", events, "k"),
            IdempotencyKeys::Scoped("bob", events, "k"));
  EXPECT_NE(IdempotencyKeys::Scoped("alice", events, "k"),
            IdempotencyKeys::Scoped("alice", {"default", "other"}, "k"));
  // Length-prefixed parts: moving a character from one part to the next is another key.
  EXPECT_NE(IdempotencyKeys::Scoped("a", {"b", "c"}, "d"),
            IdempotencyKeys::Scoped("ab", {"", "c"}, "d"));
}

// A key store on a fake clock (10-minute window) whose Take gives a callback of its own and
// keeps the earlier result in `earlier`.
struct Keys {
  explicit Keys(size_t max_keys = 100) : keys(&clock, absl::Minutes(10), max_keys) {}
  IdempotencyKeys::Claim Take(const std::string& key) {
    std::function<void(Result)> cb = [](Result) {};
    return keys.Take(key, &cb, &earlier);
  }
  FakeClock clock;
  IdempotencyKeys keys;
  Result earlier;
};

TEST(IdempotencyKeysTest, AFailedRequestsKeyIsForgottenSoItsRetryRuns) {
  Keys k;
  ASSERT_EQ(k.Take("k"), IdempotencyKeys::Claim::kOwner);
  EXPECT_TRUE(k.keys.Finish("k", {.status = absl::UnavailableError("down")}).empty());
  EXPECT_EQ(k.Take("k"), IdempotencyKeys::Claim::kOwner);
}

TEST(IdempotencyKeysTest, SuccessfulKeysExpireAfterTheWindowAndBeyondTheCap) {
  Keys k(3);
  for (const char* key : {"a", "b", "c"}) {
    ASSERT_EQ(k.Take(key), IdempotencyKeys::Claim::kOwner);
    k.keys.Finish(key, Committed(1));
    k.clock.Advance(absl::Minutes(1));
  }
  k.keys.RememberDone("d", Committed(2));  // the fourth: "a", the oldest, goes
  EXPECT_EQ(k.Take("a"), IdempotencyKeys::Claim::kOwner);
  EXPECT_EQ(k.Take("d"), IdempotencyKeys::Claim::kDone);
  EXPECT_EQ(k.earlier.rows, 2u);
  k.clock.Advance(absl::Minutes(8));  // "b" was done 10 minutes ago, "c" 9
  EXPECT_EQ(k.Take("b"), IdempotencyKeys::Claim::kOwner);
  EXPECT_EQ(k.Take("c"), IdempotencyKeys::Claim::kDone);
}

TEST(IdempotencyKeysTest, AForgottenKeyRunsAgainAndItsOldExpiryLeavesTheNewClaimAlone) {
  Keys k;
  ASSERT_EQ(k.Take("k"), IdempotencyKeys::Claim::kOwner);
  k.keys.Finish("k", Committed(1));
  // Its rows were lost after it was answered: a repeat runs again.
  k.keys.Forget("k");
  k.clock.Advance(absl::Minutes(5));
  ASSERT_EQ(k.Take("k"), IdempotencyKeys::Claim::kOwner);
  k.keys.Finish("k", Committed(2));
  // The first success's window ends; the second's has 5 minutes left.
  k.clock.Advance(absl::Minutes(6));
  ASSERT_EQ(k.Take("k"), IdempotencyKeys::Claim::kDone);
  EXPECT_EQ(k.earlier.rows, 2u);
  k.clock.Advance(absl::Minutes(5));
  EXPECT_EQ(k.Take("k"), IdempotencyKeys::Claim::kOwner);
}

// An accepted request's rows can be lost (its batch's INSERT failed on another thread) before
// its own answer is recorded: that answer must not be remembered either.
TEST(IdempotencyKeysTest, AKeyForgottenBeforeItsAnswerIsRecordedIsNotRemembered) {
  Keys k;
  ASSERT_EQ(k.Take("k"), IdempotencyKeys::Claim::kOwner);
  EXPECT_EQ(k.Take("k"), IdempotencyKeys::Claim::kFollowing);
  k.keys.Forget("k");
  EXPECT_EQ(k.keys.Finish("k", Committed(1)).size(), 1u) << "the follower still gets the answer";
  EXPECT_EQ(k.Take("k"), IdempotencyKeys::Claim::kOwner);
}

TEST(SchemaCacheTest, ServesAHeaderForItsTtlThenAsksAgain) {
  FakeClock clock;
  ScriptedInserter inserter;
  SchemaCache cache(&inserter, &clock, absl::Minutes(1), "");
  const TableId table{"default", "events"};
  bool fetched = false;
  ASSERT_TRUE(cache.Get(table, {"id"}, absl::InfiniteFuture(), false, &fetched).ok());
  EXPECT_TRUE(fetched);
  EXPECT_TRUE(cache.IsFresh(table, {"id"}));
  EXPECT_FALSE(cache.IsFresh(table, {"id", "s"})) << "another column list is another header";
  ASSERT_TRUE(cache.Get(table, {"id"}, absl::InfiniteFuture(), false, &fetched).ok());
  EXPECT_FALSE(fetched);
  EXPECT_EQ(inserter.describes, 1);
  clock.Advance(absl::Minutes(1));
  EXPECT_FALSE(cache.IsFresh(table, {"id"}));
  ASSERT_TRUE(cache.Get(table, {"id"}, absl::InfiniteFuture(), false, &fetched).ok());
  EXPECT_TRUE(fetched);
  EXPECT_EQ(inserter.describes, 2);
}

TEST(SchemaCacheTest, WhileClickHouseDoesNotAnswerTheLastHeaderIsServedAndAskedForLess) {
  FakeClock clock;
  ScriptedInserter inserter;
  SchemaCache cache(&inserter, &clock, absl::Minutes(1), "");
  const TableId table{"default", "events"};
  bool fetched = false;
  ASSERT_TRUE(cache.Get(table, {"id"}, absl::InfiniteFuture(), false, &fetched).ok());
  clock.Advance(absl::Minutes(2));
  inserter.describe_errors = {absl::UnavailableError("connection refused")};
  auto last = cache.Get(table, {"id"}, absl::InfiniteFuture(), false, &fetched);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_FALSE(fetched);
  EXPECT_TRUE(cache.IsFresh(table, {"id"})) << "served without asking for a while";
  clock.Advance(SchemaCache::kRefreshTimeout);
  EXPECT_FALSE(cache.IsFresh(table, {"id"}));
  // An answer about the table (it is gone) is not a connection problem: the header goes.
  inserter.describe_errors = {absl::NotFoundError("Table default.events doesn't exist")};
  EXPECT_FALSE(cache.Get(table, {"id"}, absl::InfiniteFuture(), false, &fetched).ok());
  EXPECT_FALSE(cache.IsFresh(table, {"id"}));
}

TEST(SchemaCacheTest, ForgetDropsEveryColumnListOfOneTableOnly) {
  FakeClock clock;
  ScriptedInserter inserter;
  SchemaCache cache(&inserter, &clock, absl::Minutes(1), "");
  bool fetched = false;
  const TableId events{"default", "events"}, other{"default", "events2"};
  for (const auto& cols : {std::vector<std::string>{"id"}, std::vector<std::string>{"id", "s"}}) {
    ASSERT_TRUE(cache.Get(events, cols, absl::InfiniteFuture(), false, &fetched).ok());
  }
  ASSERT_TRUE(cache.Get(other, {"id"}, absl::InfiniteFuture(), false, &fetched).ok());
  cache.Forget(events);
  EXPECT_FALSE(cache.IsFresh(events, {"id"}));
  EXPECT_FALSE(cache.IsFresh(events, {"id", "s"}));
  EXPECT_TRUE(cache.IsFresh(other, {"id"})) << "a table whose name starts the same stays";
}

TEST(SchemaCacheTest, SavedHeadersAreLoadedStaleAndServedOnlyWhileClickHouseIsAway) {
  const std::string dir = ::testing::TempDir() + "/schema_cache_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  FakeClock clock;
  const TableId table{"default", "events"};
  bool fetched = false;
  {
    ScriptedInserter inserter;
    inserter.type = "Int32";
    SchemaCache cache(&inserter, &clock, absl::Minutes(1), dir);
    ASSERT_TRUE(cache.Get(table, {"id"}, absl::InfiniteFuture(), false, &fetched).ok());
  }
  ScriptedInserter inserter;
  inserter.describe_errors = {absl::UnavailableError("connection refused")};
  SchemaCache restarted(&inserter, &clock, absl::Minutes(1), dir);
  restarted.Load();
  EXPECT_FALSE(restarted.IsFresh(table, {"id"})) << "stale from the start";
  auto header = restarted.Get(table, {"id"}, absl::InfiniteFuture(), false, &fetched);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_FALSE(fetched);
  EXPECT_EQ((*header)->prototypes[0]->type_name(), "Int32");
  EXPECT_EQ(inserter.describes, 1) << "ClickHouse was asked first";
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------------------------------------
// Admission: the buffer's counts, the callers waiting for room, readiness.

// Records the buffer and waiting gauges Admission publishes.
class GaugeObserver final : public testing::QuietObserver {
 public:
  void Buffered(uint64_t rows, uint64_t bytes) override {
    buffered_rows = rows;
    buffered_bytes = bytes;
  }
  void WaitingRequests(size_t requests) override { waiting = requests; }

  uint64_t buffered_rows = 0, buffered_bytes = 0;
  size_t waiting = 99;  // nothing published yet
};

std::shared_ptr<PendingRequest> Waiter(uint64_t bytes, uint64_t rows, absl::Time deadline,
                                       MemoryBudget* budget) {
  auto p = std::make_shared<PendingRequest>();
  p->label = "db.t";
  p->bytes = bytes;
  p->rows = rows;
  p->deadline = deadline;
  if (budget != nullptr) p->reservation = *budget->TryReserve(bytes);
  return p;
}

// The first waiting request if it fits beside `table_bytes` (as the Ingestor admits).
std::shared_ptr<PendingRequest> TakeFront(Admission& admission, uint64_t table_bytes) {
  std::shared_ptr<PendingRequest> front = admission.Front();
  return front == nullptr ? nullptr : admission.TakeFrontIfFits(*front, table_bytes);
}

TEST(AdmissionTest, WaitersAreAdmittedInOrderAsTheBufferHasRoom) {
  MemoryBudget budget(1000);
  GaugeObserver gauges;
  Admission admission({.buffer_limit = 100}, &budget, &gauges);
  const absl::Time deadline = absl::FromUnixSeconds(100);
  auto first = Waiter(60, 6, deadline, &budget);
  auto second = Waiter(60, 6, deadline, &budget);
  auto small = Waiter(10, 1, deadline, &budget);
  for (const auto& p : {first, second, small}) admission.Wait(p);
  EXPECT_EQ(budget.requests(), 130u);
  EXPECT_EQ(gauges.waiting, 3u);

  ASSERT_EQ(TakeFront(admission, 0), first);
  admission.Buffer(*first);
  EXPECT_EQ(budget.requests(), 70u) << "the reservation moves into the buffer's count";
  EXPECT_EQ(budget.buffered(), 60u);
  EXPECT_EQ(gauges.buffered_bytes, 60u);
  EXPECT_EQ(gauges.buffered_rows, 6u);
  EXPECT_EQ(gauges.waiting, 2u);
  EXPECT_EQ(admission.TakeFrontIfFits(*small, 0), nullptr) << "only the first may be taken";
  // 60 + 60 > 100: the second waits, and the small one behind it too (first in, first out).
  EXPECT_EQ(TakeFront(admission, 60), nullptr);
  EXPECT_EQ(admission.Front(), second);
  EXPECT_EQ(admission.counts().waiting, 2u);

  admission.Release(6, 60);
  EXPECT_EQ(budget.buffered(), 0u);
  EXPECT_EQ(gauges.buffered_bytes, 0u);
  ASSERT_EQ(TakeFront(admission, 0), second);
  admission.PutBack(second);  // taken, then put back as the next one
  EXPECT_EQ(admission.Front(), second);
  EXPECT_EQ(TakeFront(admission, 0), second);
  admission.Buffer(*second);
  EXPECT_EQ(TakeFront(admission, 60), small);
  admission.Buffer(*small);
  const Admission::Counts counts = admission.counts();
  EXPECT_EQ(counts.buffered_bytes, 70u);
  EXPECT_EQ(counts.buffered_rows, 7u);
  EXPECT_EQ(counts.waiting, 0u);
  EXPECT_EQ(TakeFront(admission, 0), nullptr) << "nobody waits";
}

TEST(AdmissionTest, AnEmptyBufferTakesAnyRequestAndEachBudgetHoldsItsOwn) {
  MemoryBudget budget(1000);
  Admission admission({.buffer_limit = 100, .table_budget_bytes = 50}, &budget, nullptr);
  admission.Wait(Waiter(500, 1, absl::InfiniteFuture(), nullptr));
  std::shared_ptr<PendingRequest> big = TakeFront(admission, 0);
  ASSERT_NE(big, nullptr) << "larger than both budgets, but alone";
  admission.Wait(Waiter(40, 1, absl::InfiniteFuture(), nullptr));
  EXPECT_EQ(TakeFront(admission, 20), nullptr) << "20 + 40 > the table's 50";
  EXPECT_NE(TakeFront(admission, 10), nullptr) << "10 + 40 fits the table's 50";

  admission.Buffer(*big);  // the buffer is now over its 100
  admission.Wait(Waiter(1, 1, absl::InfiniteFuture(), nullptr));
  EXPECT_EQ(TakeFront(admission, 0), nullptr) << "an empty table still waits for the buffer";
  admission.Release(1, 500);
  EXPECT_NE(TakeFront(admission, 0), nullptr);
}

TEST(AdmissionTest, FullTurnsOnAtTheHighWaterMarkAndOffOnlyBelowTheLowOne) {
  MemoryBudget budget(1000);
  Admission admission({.buffer_limit = 100, .ready_high_water = 0.9, .ready_low_water = 0.7},
                      &budget, nullptr);
  auto p = Waiter(89, 1, absl::InfiniteFuture(), nullptr);
  admission.Buffer(*p);
  EXPECT_FALSE(admission.Full());
  auto q = Waiter(1, 1, absl::InfiniteFuture(), nullptr);
  admission.Buffer(*q);
  EXPECT_TRUE(admission.Full()) << "90 of 100";
  admission.Release(1, 20);
  EXPECT_TRUE(admission.Full()) << "70 is not below the low-water mark";
  admission.Release(1, 1);
  EXPECT_FALSE(admission.Full()) << "69";
}

TEST(AdmissionTest, ExpireTakesOutTheCallersWhoseDeadlineLessTheMarginHasCome) {
  MemoryBudget budget(1000);
  GaugeObserver gauges;
  Admission admission({.buffer_limit = 100}, &budget, &gauges);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  auto late = Waiter(1, 1, t0 + absl::Seconds(10), nullptr);
  auto soon = Waiter(1, 1, t0 + absl::Seconds(1), nullptr);
  admission.Wait(late);
  admission.Wait(soon);
  const absl::Duration margin = absl::Milliseconds(100);
  EXPECT_EQ(admission.NextDeadline(margin), t0 + absl::Milliseconds(900));
  EXPECT_TRUE(admission.Expire(t0, margin).empty());
  EXPECT_THAT(admission.Expire(t0 + absl::Milliseconds(900), margin), ::testing::ElementsAre(soon));
  EXPECT_EQ(admission.Front(), late);
  EXPECT_EQ(gauges.waiting, 1u);
  EXPECT_THAT(admission.TakeAll(), ::testing::ElementsAre(late));
  EXPECT_EQ(gauges.waiting, 0u);
  EXPECT_EQ(admission.NextDeadline(margin), absl::InfiniteFuture());
}

}  // namespace
}  // namespace chgate::ingest
