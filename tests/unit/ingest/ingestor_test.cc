// The batcher with a fake inserter and a fake clock: every flush trigger, deadlines, the memory
// budget, the retry schedule, permanent vs transient errors and shutdown.
#include "server/ingest/ingestor.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/low_cardinality.h"
#include "server/clickhouse/columns/nullable.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/protocol/error_codes.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/clickhouse/text_form.h"
#include "server/log/log.h"
#include "server/spool/file_ops.h"
#include "tests/unit/ingest/fake_clock.h"
#include "tests/unit/ingest/quiet_observer.h"

namespace chgate::ingest {
namespace {

using ::testing::HasSubstr;

using testing::FakeClock;

struct InsertCall {
  TableId table;
  std::string rows_text;  // every row as text, to compare retries
  InsertAttempt attempt;
  absl::Time deadline;
  size_t parts = 0;  // blocks the INSERT's one block is written from
};

class FakeInserter final : public Inserter {
 public:
  absl::StatusOr<TableSchema> Describe(const TableId& table,
                                       const std::vector<std::string>& columns,
                                       absl::Time deadline) override {
    ++describes;
    last_describe_deadline = deadline;
    if (!describe_error.ok()) return describe_error;
    if (table.table != "events" && !other_tables.contains(table.table)) {
      return absl::NotFoundError("Table doesn't exist");
    }
    TableSchema s;
    s.server_time_zone = "UTC";
    std::vector<std::string> names =
        columns.empty() ? std::vector<std::string>{"id", "s"} : columns;
    for (const std::string& n : names) {
      if (n != "id" && n != "s") return absl::InvalidArgumentError("No such column " + n);
      s.names.push_back(n);
      s.prototypes.push_back(*clickhouse::CreateColumn(n == "id" ? id_type : "String"));
    }
    return s;
  }
  absl::Status Insert(const TableId& table, const clickhouse::BlockParts& parts,
                      const InsertAttempt& attempt, absl::Time deadline) override {
    const clickhouse::Block& block = parts.Gathered();
    std::string text;
    for (size_t r = 0; r < block.rows(); ++r) {
      for (size_t c = 0; c < block.column_count(); ++c) {
        AppendTsvValue(*block.column(c).column, r, false, &text);
        text.push_back(c + 1 == block.column_count() ? '\n' : '\t');
      }
    }
    calls.push_back({table, text, attempt, deadline, parts.parts().size()});
    if (clock != nullptr) clock->Advance(takes);
    if (check_types && block.column(0).column->type_name() != id_type) {
      // What chgate's own comparison with the server's INSERT header answers.
      return absl::InvalidArgumentError(absl::StrCat("column 'id' has type ",
                                                     block.column(0).column->type_name(),
                                                     ", the table has ", id_type));
    }
    if (script.empty()) return absl::OkStatus();
    absl::Status st = script.front();
    script.pop_front();
    return st;
  }
  absl::StatusOr<DedupWindow> DedupWindowOf(const TableId&, absl::Time) override {
    ++dedup_queries;
    if (!dedup.has_value()) return absl::UnimplementedError("fake");
    return *dedup;
  }
  std::optional<DedupWindow> dedup;  // what DedupWindowOf answers (none: Unimplemented)
  bool check_types = false;          // Insert refuses an `id` column not of id_type
  int dedup_queries = 0;
  int describes = 0;
  std::set<std::string> other_tables;  // tables besides `events` that exist (same columns)
  absl::Status describe_error;  // what Describe answers, when not OK (ClickHouse unreachable)
  absl::Time last_describe_deadline;
  std::string id_type = "UInt64";  // what Describe reports for `id` (ALTER ... MODIFY COLUMN)
  std::vector<InsertCall> calls;
  std::deque<absl::Status> script;  // results of the next inserts (then OK)
  FakeClock* clock = nullptr;       // when set, each insert advances it by `takes`
  absl::Duration takes = absl::ZeroDuration();
};

// A copy of `block` with columns of its own: the Ingestor takes a request's columns and may
// append to them, so a test block that is submitted again must not share them.
clickhouse::Block Own(const clickhouse::Block& block) {
  clickhouse::Block copy;
  for (size_t i = 0; i < block.column_count(); ++i) {
    clickhouse::ColumnPtr column = block.column(i).column->CloneEmpty();
    column->AppendRange(*block.column(i).column, 0, block.rows());
    copy.AddColumn(block.column(i).name, std::move(column));
  }
  return copy;
}

clickhouse::Block Rows(uint64_t first, size_t n, size_t string_size = 3) {
  clickhouse::Block b;
  auto id = *clickhouse::CreateColumn("UInt64");
  auto s = *clickhouse::CreateColumn("String");
  for (size_t i = 0; i < n; ++i) {
    static_cast<clickhouse::ColumnFixed&>(*id).Append<uint64_t>(first + i);
    static_cast<clickhouse::ColumnString&>(*s).Append(std::string(string_size, 'x'));
  }
  b.AddColumn("id", id);
  b.AddColumn("s", s);
  return b;
}

// One row (id, "x") with `id` of type `type` (UInt16 or UInt32).
clickhouse::Block IdRow(const std::string& type, uint32_t id) {
  clickhouse::Block b;
  auto col = *clickhouse::CreateColumn(type);
  auto& fixed = static_cast<clickhouse::ColumnFixed&>(*col);
  if (type == "UInt16") {
    fixed.Append<uint16_t>(static_cast<uint16_t>(id));
  } else {
    fixed.Append<uint32_t>(id);
  }
  auto s = *clickhouse::CreateColumn("String");
  static_cast<clickhouse::ColumnString&>(*s).Append("x");
  b.AddColumn("id", col);
  b.AddColumn("s", s);
  return b;
}

absl::Status ClickHouseError(int32_t code, const std::string& text) {
  return clickhouse::ExceptionToStatus({.code = code, .name = "DB::Exception", .message = text});
}

struct Outcome {
  bool admitted = false;
  bool done = false;
  Result result;
  clickhouse::Block block;  // the request's own copy: the Ingestor takes its columns
  bool released = false;    // release_input ran
};

class IngestorTest : public ::testing::Test {
 protected:
  IngestOptions Options() {
    IngestOptions o;
    o.background = false;
    o.limits = {.max_rows = 1000, .max_bytes = 1 << 20, .max_delay = absl::Milliseconds(200)};
    o.retry = {.initial_backoff = absl::Milliseconds(100),
               .max_backoff = absl::Seconds(1),
               .max_elapsed = absl::Seconds(10)};
    return o;
  }
  void Make(IngestOptions o) {
    ingestor_ = std::make_unique<Ingestor>(std::move(o), &inserter_, &clock_, observer_);
  }

  Outcome* Submit(const clickhouse::Block& block, absl::Duration timeout = absl::Seconds(30),
                  std::string table = "events", std::optional<AckMode> ack = std::nullopt,
                  std::string idempotency_key = "") {
    outcomes_.push_back(std::make_unique<Outcome>());
    Outcome* o = outcomes_.back().get();
    o->block = Own(block);
    Request r{.table = std::move(table),
              .block = &o->block,
              .deadline = clock_.Now() + timeout,
              .ack = ack,
              .idempotency_key = std::move(idempotency_key),
              .release_input = [o] { o->released = true; }};
    ingestor_->Submit(
        std::move(r), [o] { o->admitted = true; },
        [o](Result res) {
          EXPECT_FALSE(o->done) << "on_done called twice";
          o->done = true;
          o->result = std::move(res);
        });
    ingestor_->RunPending();
    return o;
  }

  FakeClock clock_;
  FakeInserter inserter_;
  std::unique_ptr<spool::Spool> spool_;      // outlives the Ingestor
  std::unique_ptr<spool::Spool> key_spool_;  // too
  // Declared before the Ingestor, so they outlive it: its destructor completes what is still
  // pending, through callbacks that write into them.
  std::vector<std::unique_ptr<Outcome>> outcomes_;
  IngestObserver* observer_ = nullptr;  // given to the Ingestor Make builds
  std::unique_ptr<Ingestor> ingestor_;
};

TEST_F(IngestorTest, FlushesOneBlockWhenMaxRowsIsReachedAndAcksAfterCommit) {
  IngestOptions o = Options();
  o.limits.max_rows = 10;
  Make(o);
  auto a = Rows(0, 4), b = Rows(4, 4), c = Rows(8, 4);
  Outcome* oa = Submit(a);
  Outcome* ob = Submit(b);
  EXPECT_TRUE(oa->admitted);
  EXPECT_FALSE(oa->done);  // buffered, not committed
  EXPECT_TRUE(inserter_.calls.empty());
  Outcome* oc = Submit(c);
  ASSERT_EQ(inserter_.calls.size(), 1u);
  EXPECT_EQ(inserter_.calls[0].table, (TableId{"default", "events"}));
  EXPECT_EQ(
      std::count(inserter_.calls[0].rows_text.begin(), inserter_.calls[0].rows_text.end(), '\n'),
      12);
  EXPECT_EQ(inserter_.calls[0].parts, 3u) << "each request's rows sent from where they were";
  for (Outcome* out : {oa, ob, oc}) {
    ASSERT_TRUE(out->done);
    EXPECT_TRUE(out->result.status.ok()) << out->result.status;
    EXPECT_TRUE(out->result.committed);
    EXPECT_EQ(out->result.rows, 4u);
    EXPECT_EQ(out->result.query_id, inserter_.calls[0].attempt.query_id);
  }
  EXPECT_EQ(inserter_.describes, 1);  // the header is cached
  EXPECT_EQ(ingestor_->Stats().buffered_bytes, 0u);
}

TEST_F(IngestorTest, ABatchWithAColumnWhoseBodyIsNotItsRowsIsGatheredIntoOneBlock) {
  inserter_.id_type = "Nullable(UInt64)";
  IngestOptions o = Options();
  o.limits.max_rows = 8;
  Make(o);
  // Blocks of (Nullable(UInt64), String) rows, as a typed caller sends them.
  auto nullable_rows = [](uint64_t first, size_t n) {
    clickhouse::Block b = Rows(first, n);
    auto id = *clickhouse::CreateColumn("Nullable(UInt64)");
    auto& nullable = static_cast<clickhouse::ColumnNullable&>(*id);
    for (size_t i = 0; i < n; ++i) {
      nullable.AppendNotNull();
      static_cast<clickhouse::ColumnFixed&>(*nullable.nested()).Append<uint64_t>(first + i);
    }
    b.column(0).column = id;
    return b;
  };
  Outcome* oa = Submit(nullable_rows(0, 4));
  Outcome* ob = Submit(nullable_rows(4, 4));
  ASSERT_EQ(inserter_.calls.size(), 1u) << oa->result.status;
  EXPECT_EQ(inserter_.calls[0].parts, 1u);
  EXPECT_EQ(
      std::count(inserter_.calls[0].rows_text.begin(), inserter_.calls[0].rows_text.end(), '\n'),
      8);
  for (Outcome* out : {oa, ob}) {
    ASSERT_TRUE(out->done);
    EXPECT_TRUE(out->result.status.ok()) << out->result.status;
  }
}

// A gathered LowCardinality column has one dictionary for the batch, so the INSERT's block
// measures less than its requests did: the buffer and the budget give back what they counted.
TEST_F(IngestorTest, AGatheredBatchReleasesWhatItsRequestsCountedNotWhatItsBlockMeasures) {
  inserter_.id_type = "LowCardinality(String)";
  IngestOptions o = Options();
  o.limits.max_rows = 8;
  Make(o);
  auto same_keys = [](size_t n) {
    clickhouse::Block b = Rows(0, n);
    auto id = *clickhouse::CreateColumn("LowCardinality(String)");
    for (size_t i = 0; i < n; ++i) {
      EXPECT_TRUE(static_cast<clickhouse::ColumnLowCardinality&>(*id)
                      .AppendString("the same rather long key")
                      .ok());
    }
    b.column(0).column = id;
    return b;
  };
  Outcome* oa = Submit(same_keys(4));
  Outcome* ob = Submit(same_keys(4));
  ASSERT_EQ(inserter_.calls.size(), 1u) << oa->result.status;
  EXPECT_EQ(inserter_.calls[0].parts, 1u);
  for (Outcome* out : {oa, ob}) {
    ASSERT_TRUE(out->done);
    EXPECT_TRUE(out->result.status.ok()) << out->result.status;
  }
  const IngestStats stats = ingestor_->Stats();
  EXPECT_EQ(stats.buffered_bytes, 0u);
  EXPECT_EQ(stats.buffered_rows, 0u);
  EXPECT_EQ(stats.request_bytes, 0u);
}

// A batch's INSERT joins the trace of its first traced request; untraced requests do not
// change that, and a batch without traced requests carries none.
TEST_F(IngestorTest, ABatchInsertJoinsItsFirstTracedRequestsTrace) {
  IngestOptions o = Options();
  o.limits.max_rows = 12;
  Make(o);
  auto submit = [&](int first, std::optional<text::TraceContext> trace) {
    outcomes_.push_back(std::make_unique<Outcome>());
    Outcome* out = outcomes_.back().get();
    out->block = Own(Rows(first, 4));
    ingestor_->Submit(
        Request{.table = "events",
                .block = &out->block,
                .deadline = clock_.Now() + absl::Seconds(30),
                .trace = std::move(trace)},
        [out] { out->admitted = true; },
        [out](Result res) {
          out->done = true;
          out->result = std::move(res);
        });
    ingestor_->RunPending();
    return out;
  };
  const auto a = text::ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  const auto b = text::ParseTraceparent("00-11111111111111112222222222222222-3333333333333333-00");
  ASSERT_TRUE(a.has_value() && b.has_value());
  submit(0, std::nullopt);
  submit(4, a);
  Outcome* last = submit(8, b);
  ASSERT_EQ(inserter_.calls.size(), 1u);
  ASSERT_TRUE(last->done);
  EXPECT_TRUE(last->result.status.ok()) << last->result.status;
  EXPECT_EQ(inserter_.calls[0].attempt.trace, a);
  submit(12, std::nullopt);
  submit(16, std::nullopt);
  submit(20, std::nullopt);
  ASSERT_EQ(inserter_.calls.size(), 2u);
  EXPECT_FALSE(inserter_.calls[1].attempt.trace.has_value());
}

TEST_F(IngestorTest, ACachedHeaderConvertsOnTheSubmittingThread) {
  IngestOptions o = Options();
  o.background = true;
  o.limits.max_delay = absl::Hours(1);  // nothing flushes while the test looks
  Make(o);
  auto submit = [&](const clickhouse::Block& block) {
    outcomes_.push_back(std::make_unique<Outcome>());
    Outcome* out = outcomes_.back().get();
    out->block = Own(block);
    ingestor_->Submit(
        Request{.table = "events", .block = &out->block, .deadline = clock_.Now() + absl::Hours(1)},
        [out] { out->admitted = true; }, [out](Result res) { out->result = std::move(res); });
    return out;
  };
  auto a = Rows(0, 2), b = Rows(2, 2);
  // The first request needs the table's header: a worker looks it up and converts.
  Outcome* first = submit(a);
  for (int i = 0; i < 500 && !first->admitted; ++i) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_TRUE(first->admitted);
  // With the header cached, the next one is converted and admitted before Submit returns: no
  // hand-off to a worker.
  Outcome* second = submit(b);
  EXPECT_TRUE(second->admitted);
  EXPECT_EQ(inserter_.describes, 1);
  EXPECT_EQ(ingestor_->Stats().buffered_rows, 4u);
}

TEST_F(IngestorTest, FlushesWhenMaxBytesIsReached) {
  IngestOptions o = Options();
  o.limits.max_bytes = 1000;
  Make(o);
  auto big = Rows(0, 2, 600);
  Outcome* out = Submit(big);
  ASSERT_EQ(inserter_.calls.size(), 1u);
  EXPECT_TRUE(out->done);
}

TEST_F(IngestorTest, FlushesWhenTheOldestRowIsMaxDelayOld) {
  Make(Options());
  auto a = Rows(0, 1);
  Outcome* out = Submit(a);
  clock_.Advance(absl::Milliseconds(150));
  auto b = Rows(1, 1);
  Outcome* out2 = Submit(b);
  ingestor_->Poll();
  ingestor_->RunPending();
  EXPECT_TRUE(inserter_.calls.empty());
  clock_.Advance(absl::Milliseconds(50));  // the first row is now 200 ms old
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_EQ(inserter_.calls.size(), 1u);
  EXPECT_TRUE(out->done && out2->done);
}

TEST_F(IngestorTest, FlushesEarlyForAWaitingCallersDeadline) {
  IngestOptions o = Options();
  o.limits.max_delay = absl::Seconds(10);
  o.deadline_margin = absl::Milliseconds(100);
  Make(o);
  auto a = Rows(0, 1);
  Outcome* out = Submit(a, absl::Seconds(1));
  clock_.Advance(absl::Milliseconds(850));
  ingestor_->Poll();
  ingestor_->RunPending();
  EXPECT_TRUE(inserter_.calls.empty());
  clock_.Advance(absl::Milliseconds(50));  // 100 ms before the deadline
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_EQ(inserter_.calls.size(), 1u);
  EXPECT_TRUE(out->done);
  EXPECT_TRUE(out->result.status.ok());
}

TEST_F(IngestorTest, FullBudgetMakesRequestsWaitThenFailWithResourceExhausted) {
  IngestOptions o = Options();
  Make(o);
  auto first = Rows(0, 10);
  const uint64_t one_request = [&] {
    clickhouse::Block b = Rows(0, 10);
    return b.ByteSize();
  }();
  o.memory_budget_bytes = one_request + one_request / 2;
  Make(o);
  Outcome* a = Submit(first);
  auto second = Rows(10, 10);
  Outcome* b = Submit(second, absl::Seconds(1));
  EXPECT_TRUE(a->admitted);
  EXPECT_FALSE(b->admitted);
  EXPECT_EQ(ingestor_->Stats().waiting_requests, 1u);
  EXPECT_EQ(ingestor_->Stats().buffered_bytes, one_request);
  clock_.Advance(absl::Milliseconds(150));
  ingestor_->Poll();  // flushes the first (age), but the flush has not run yet
  clock_.Advance(absl::Milliseconds(800));
  ingestor_->Poll();  // the second's deadline (minus margin) passed while waiting
  ASSERT_TRUE(b->done);
  EXPECT_EQ(b->result.status.code(), absl::StatusCode::kResourceExhausted);
  ingestor_->RunPending();
  ASSERT_EQ(inserter_.calls.size(), 1u);
  EXPECT_EQ(
      std::count(inserter_.calls[0].rows_text.begin(), inserter_.calls[0].rows_text.end(), '\n'),
      10);
  EXPECT_TRUE(a->done && a->result.status.ok());
}

TEST_F(IngestorTest, WaitingRequestIsAdmittedWhenAFlushFreesTheBudget) {
  IngestOptions o = Options();
  clickhouse::Block probe = Rows(0, 10);
  o.memory_budget_bytes = probe.ByteSize();
  Make(o);
  auto first = Rows(0, 10), second = Rows(10, 10);
  Outcome* a = Submit(first);
  Outcome* b = Submit(second);
  EXPECT_FALSE(b->admitted);
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  EXPECT_TRUE(a->done);
  EXPECT_TRUE(b->admitted);
  EXPECT_FALSE(b->done);
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  EXPECT_TRUE(b->done && b->result.status.ok());
  EXPECT_EQ(inserter_.calls.size(), 2u);
}

TEST_F(IngestorTest, TransientErrorsAreRetriedWithFullJitterBackoffAndTheIdenticalBlock) {
  Make(Options());
  inserter_.script = {absl::UnavailableError("connection refused"),
                      ClickHouseError(252, "Too many parts"),
                      ClickHouseError(241, "Memory limit exceeded")};
  auto a = Rows(0, 5);
  Outcome* out = Submit(a);
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_EQ(inserter_.calls.size(), 4u);
  for (const InsertCall& call : inserter_.calls) {
    EXPECT_EQ(call.rows_text, inserter_.calls[0].rows_text);
    EXPECT_EQ(call.attempt.query_id, inserter_.calls[0].attempt.query_id);
    EXPECT_EQ(call.attempt.deduplication_key, inserter_.calls[0].attempt.deduplication_key);
  }
  EXPECT_EQ(inserter_.calls[3].attempt.attempt, 4);
  std::vector<absl::Duration> sleeps = clock_.sleeps();
  ASSERT_EQ(sleeps.size(), 3u);
  EXPECT_LE(sleeps[0], absl::Milliseconds(100));
  EXPECT_LE(sleeps[1], absl::Milliseconds(200));
  EXPECT_LE(sleeps[2], absl::Milliseconds(400));
  ASSERT_TRUE(out->done);
  EXPECT_TRUE(out->result.status.ok()) << out->result.status;
}

// Submits one row, lets `wait` pass and polls; whether a flush happened.
#define FLUSHED_AFTER(wait)                       \
  [&] {                                           \
    const size_t before = inserter_.calls.size(); \
    Submit(Rows(0, 1));                           \
    clock_.Advance(wait);                         \
    ingestor_->Poll();                            \
    ingestor_->RunPending();                      \
    return inserter_.calls.size() > before;       \
  }()

TEST_F(IngestorTest, TooManyPartsDoublesTheTablesFlushDelayAndCalmFlushesHalveItAgain) {
  IngestOptions o = Options();  // configured delay 200 ms
  o.max_delay_ceiling = absl::Milliseconds(800);
  o.relax_after = 2;
  Make(o);
  inserter_.script = {ClickHouseError(252, "Too many parts"),
                      ClickHouseError(252, "Too many parts")};
  ASSERT_TRUE(FLUSHED_AFTER(absl::Milliseconds(200)));  // refused twice, then committed
  // 400 ms now: 200 ms is no longer enough.
  EXPECT_FALSE(FLUSHED_AFTER(absl::Milliseconds(200)));
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  const size_t after_first_calm = inserter_.calls.size();
  EXPECT_EQ(after_first_calm, 4u);
  // A second calm flush at 400 ms halves it back to 200 ms.
  EXPECT_FALSE(FLUSHED_AFTER(absl::Milliseconds(200)));
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  EXPECT_EQ(inserter_.calls.size(), 5u);
  EXPECT_TRUE(FLUSHED_AFTER(absl::Milliseconds(200)));
}

TEST_F(IngestorTest, SlowInsertsRaiseTheDelayUpToTheCeilingOnly) {
  IngestOptions o = Options();
  o.max_delay_ceiling = absl::Milliseconds(500);
  o.slow_insert = absl::Seconds(1);
  Make(o);
  inserter_.clock = &clock_;
  inserter_.takes = absl::Seconds(2);                   // ClickHouse delaying inserts
  ASSERT_TRUE(FLUSHED_AFTER(absl::Milliseconds(200)));  // -> 400 ms
  EXPECT_FALSE(FLUSHED_AFTER(absl::Milliseconds(399)));
  clock_.Advance(absl::Milliseconds(1));
  ingestor_->Poll();
  ingestor_->RunPending();  // -> 500 ms, the ceiling (not 800)
  EXPECT_FALSE(FLUSHED_AFTER(absl::Milliseconds(499)));
  clock_.Advance(absl::Milliseconds(1));
  ingestor_->Poll();
  ingestor_->RunPending();
  EXPECT_FALSE(FLUSHED_AFTER(absl::Milliseconds(499)));  // still 500 ms
  clock_.Advance(absl::Milliseconds(1));
  ingestor_->Poll();
  ingestor_->RunPending();
  EXPECT_EQ(inserter_.calls.size(), 4u);
}

TEST_F(IngestorTest, ACeilingAtTheConfiguredDelayTurnsAdaptationOff) {
  IngestOptions o = Options();
  o.max_delay_ceiling = o.limits.max_delay;
  Make(o);
  inserter_.script = {ClickHouseError(252, "Too many parts")};
  ASSERT_TRUE(FLUSHED_AFTER(absl::Milliseconds(200)));
  EXPECT_TRUE(FLUSHED_AFTER(absl::Milliseconds(200)));
}
#undef FLUSHED_AFTER

TEST_F(IngestorTest, PermanentErrorFailsEveryRequestOfTheBatchWithTheClickHouseCode) {
  Make(Options());
  inserter_.script = {ClickHouseError(53, "Type mismatch")};
  auto a = Rows(0, 1), b = Rows(1, 1);
  Outcome* oa = Submit(a);
  Outcome* ob = Submit(b);
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  EXPECT_EQ(inserter_.calls.size(), 1u);  // no retry
  for (Outcome* o : {oa, ob}) {
    ASSERT_TRUE(o->done);
    EXPECT_EQ(o->result.status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(clickhouse::ClickHouseCode(o->result.status), 53);
    EXPECT_FALSE(o->result.committed);
  }
  EXPECT_EQ(ingestor_->Stats().buffered_bytes, 0u);
}

TEST_F(IngestorTest, RetriesStopAtTheEarliestCallerDeadline) {
  Make(Options());
  for (int i = 0; i < 100; ++i) inserter_.script.push_back(absl::UnavailableError("down"));
  auto a = Rows(0, 1);
  const absl::Time start = clock_.Now();
  Outcome* out = Submit(a, absl::Seconds(2));
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_TRUE(out->done);
  EXPECT_EQ(out->result.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(out->result.status.message()), HasSubstr("gave up after"));
  EXPECT_LE(clock_.Now() - start, absl::Seconds(2));
  EXPECT_GT(inserter_.calls.size(), 1u);
  for (const InsertCall& call : inserter_.calls) EXPECT_LE(call.deadline, start + absl::Seconds(2));
}

// A caller with a tiny deadline shares the batch with one that waits longer: the flush (and each
// socket wait in it) is bounded by the later deadline, so the expired caller does not make the
// other's rows fail.
TEST_F(IngestorTest, AnExpiredCallerDoesNotCutTheBatchsAttemptsShort) {
  Make(Options());
  auto a = Rows(0, 1), b = Rows(1, 1);
  const absl::Time start = clock_.Now();
  Outcome* short_lived = Submit(a, absl::Milliseconds(150));
  Outcome* patient = Submit(b, absl::Seconds(5));
  clock_.Advance(absl::Milliseconds(100));  // within 100 ms of the first deadline: flush now
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_TRUE(patient->done);
  EXPECT_TRUE(patient->result.status.ok()) << patient->result.status;
  EXPECT_TRUE(short_lived->done);
  ASSERT_EQ(inserter_.calls.size(), 1u);
  EXPECT_EQ(inserter_.calls[0].deadline, start + absl::Seconds(5));
}

TEST_F(IngestorTest, UnknownTableAndBadBlocksFailAtOnceWithoutBuffering) {
  Make(Options());
  auto a = Rows(0, 1);
  Outcome* missing = Submit(a, absl::Seconds(30), "nope");
  ASSERT_TRUE(missing->done);
  EXPECT_EQ(missing->result.status.code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(missing->admitted);
  Outcome* bad_name = Submit(a, absl::Seconds(30), "a.b.c");
  EXPECT_EQ(bad_name->result.status.code(), absl::StatusCode::kInvalidArgument);
  clickhouse::Block wrong;
  wrong.AddColumn("id", *clickhouse::CreateColumn("UInt32"));
  wrong.AddColumn("s", *clickhouse::CreateColumn("String"));
  Outcome* bad_type = Submit(wrong);
  EXPECT_EQ(bad_type->result.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_type->result.status.message()), HasSubstr("UInt32"));
  EXPECT_EQ(ingestor_->Stats().buffered_rows, 0u);
}

TEST_F(IngestorTest, AcceptedAckCompletesBeforeTheCommit) {
  Make(Options());
  auto a = Rows(0, 3);
  Outcome* out = Submit(a, absl::Seconds(30), "events", AckMode::kAccepted);
  ASSERT_TRUE(out->done);
  EXPECT_TRUE(out->result.status.ok());
  EXPECT_FALSE(out->result.committed);
  EXPECT_TRUE(inserter_.calls.empty());
  EXPECT_EQ(ingestor_->Stats().buffered_rows, 3u);
}

TEST_F(IngestorTest, ReadinessFollowsTheHighWaterMark) {
  IngestOptions o = Options();
  clickhouse::Block probe = Rows(0, 10);
  o.memory_budget_bytes = probe.ByteSize() * 2;
  o.ready_high_water = 0.4;
  Make(o);
  EXPECT_TRUE(ingestor_->Ready());
  auto a = Rows(0, 10);
  Submit(a);
  EXPECT_FALSE(ingestor_->Ready());
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  EXPECT_TRUE(ingestor_->Ready());
}

TEST_F(IngestorTest, ShutdownFlushesBufferedRowsAndRefusesNewRequests) {
  Make(Options());
  auto a = Rows(0, 2);
  Outcome* out = Submit(a);
  ingestor_->Shutdown(clock_.Now() + absl::Seconds(5));
  ASSERT_TRUE(out->done);
  EXPECT_TRUE(out->result.status.ok());
  EXPECT_EQ(inserter_.calls.size(), 1u);
  EXPECT_FALSE(ingestor_->Ready());
  Outcome* late = Submit(a);
  ASSERT_TRUE(late->done);
  EXPECT_EQ(late->result.status.code(), absl::StatusCode::kUnavailable);
}

TEST_F(IngestorTest, ShutdownFailsWhatCouldNotBeCommitted) {
  Make(Options());
  inserter_.script = {ClickHouseError(60, "Table doesn't exist")};
  auto a = Rows(0, 2);
  Outcome* out = Submit(a);
  ingestor_->Shutdown(clock_.Now() + absl::Seconds(5));
  ASSERT_TRUE(out->done);
  EXPECT_FALSE(out->result.status.ok());
  EXPECT_FALSE(out->result.committed);
}

TEST_F(IngestorTest, RepeatedIdempotencyKeysInsertOnce) {
  Make(Options());
  auto a = Rows(0, 2);
  auto submit = [&](const std::string& key) {
    return Submit(a, absl::Seconds(30), "events", std::nullopt, key);
  };
  Outcome* first = submit("k1");
  Outcome* while_pending = submit("k1");  // waits for the first one's outcome
  EXPECT_FALSE(while_pending->done);
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_TRUE(first->done && while_pending->done);
  EXPECT_TRUE(first->result.status.ok());
  EXPECT_FALSE(first->result.deduplicated);
  EXPECT_TRUE(while_pending->result.deduplicated);
  EXPECT_EQ(while_pending->result.query_id, first->result.query_id);
  Outcome* after = submit("k1");  // already committed: answered at once
  ASSERT_TRUE(after->done);
  EXPECT_TRUE(after->result.deduplicated);
  EXPECT_EQ(inserter_.calls.size(), 1u);
  ASSERT_EQ(
      std::count(inserter_.calls[0].rows_text.begin(), inserter_.calls[0].rows_text.end(), '\n'),
      2);
  // A failed request's key is forgotten, so a retry inserts.
  inserter_.script = {ClickHouseError(53, "Type mismatch")};
  Outcome* failing = submit("k2");
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_TRUE(failing->done);
  EXPECT_FALSE(failing->result.status.ok());
  Outcome* retry = submit("k2");
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_TRUE(retry->done);
  EXPECT_TRUE(retry->result.status.ok());
  EXPECT_FALSE(retry->result.deduplicated);
}

TEST_F(IngestorTest, ARequestOfNoRowsDoesNotClaimItsIdempotencyKey) {
  Make(Options());
  auto submit = [&](const clickhouse::Block& block) {
    Outcome* o = Submit(block, absl::Seconds(30), "events", std::nullopt, "k0");
    clock_.Advance(absl::Milliseconds(200));
    ingestor_->Poll();
    ingestor_->RunPending();
    return o;
  };
  Outcome* empty = submit(Rows(0, 0));
  ASSERT_TRUE(empty->done);
  EXPECT_TRUE(empty->result.status.ok()) << empty->result.status;
  EXPECT_EQ(empty->result.rows, 0u);
  // The same key with rows is the first to insert them, not a repeat of nothing.
  Outcome* rows = submit(Rows(0, 2));
  ASSERT_TRUE(rows->done);
  EXPECT_TRUE(rows->result.status.ok()) << rows->result.status;
  EXPECT_FALSE(rows->result.deduplicated);
  EXPECT_EQ(rows->result.rows, 2u);
  ASSERT_EQ(inserter_.calls.size(), 1u);
  // And that key now answers its repeats.
  Outcome* repeat = submit(Rows(0, 2));
  ASSERT_TRUE(repeat->done);
  EXPECT_TRUE(repeat->result.deduplicated);
  EXPECT_EQ(inserter_.calls.size(), 1u);
}

// Names with dots, quotes and backslashes inside quotes are structured (database, table) pairs:
// `db`.`b.c` and `db.b`.`c` are two tables with two batches, and an idempotency key is scoped by
// the table and by the caller's identity.
TEST_F(IngestorTest, TablesWhoseNamesShareTheirTextStayApartAndKeysAreScopedByIdentity) {
  Make(Options());
  auto a = Rows(0, 1);
  auto submit = [&](const std::string& table, const std::string& key, const std::string& identity) {
    outcomes_.push_back(std::make_unique<Outcome>());
    Outcome* o = outcomes_.back().get();
    o->block = Own(a);
    Request r{.table = table,
              .block = &o->block,
              .deadline = clock_.Now() + absl::Seconds(30),
              .idempotency_key = key,
              .identity = identity};
    ingestor_->Submit(
        std::move(r), [o] { o->admitted = true; },
        [o](Result res) {
          o->done = true;
          o->result = std::move(res);
        });
    ingestor_->RunPending();
    return o;
  };
  inserter_.other_tables = {"b.c", "c", "x", "\\x", "t", "\"t"};
  const std::vector<Outcome*> outcomes = {
      submit("`db`.`b.c`", "k", "alice"),  submit("`db.b`.`c`", "k", "alice"),
      submit("`db`.`b.c`", "k", "bob"),    submit("`d\\\\`.`x`", "k", "alice"),
      submit("`d`.`\\\\x`", "k", "alice"), submit("`q\"`.`t`", "", ""),
      submit("`q`.`\"t`", "", ""),
  };
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  for (const Outcome* o : outcomes) {
    ASSERT_TRUE(o->done);
    EXPECT_TRUE(o->result.status.ok()) << o->result.status;
    EXPECT_FALSE(o->result.deduplicated);
  }
  std::vector<TableId> tables;
  for (const auto& call : inserter_.calls) tables.push_back(call.table);
  std::sort(tables.begin(), tables.end(), [](const TableId& x, const TableId& y) {
    return std::tie(x.database, x.table) < std::tie(y.database, y.table);
  });
  const std::vector<TableId> expected = {{"d", "\\x"},  {"d\\", "x"}, {"db", "b.c"}, {"db", "b.c"},
                                         {"db.b", "c"}, {"q", "\"t"}, {"q\"", "t"}};
  // Two requests for db.b.c (alice's and bob's keys) may share one batch.
  std::vector<TableId> distinct = expected;
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::vector<TableId> got_distinct = tables;
  got_distinct.erase(std::unique(got_distinct.begin(), got_distinct.end()), got_distinct.end());
  EXPECT_EQ(got_distinct, distinct);
  size_t rows_into_bc = 0;
  for (const auto& call : inserter_.calls) {
    if (call.table == TableId{"db", "b.c"}) {
      rows_into_bc +=
          static_cast<size_t>(std::count(call.rows_text.begin(), call.rows_text.end(), '\n'));
    }
  }
  EXPECT_EQ(rows_into_bc, 2u) << "bob's request was answered by alice's key";
  // The same identity, table and key again: answered by the first.
  Outcome* again = submit("`db`.`b.c`", "k", "alice");
  ASSERT_TRUE(again->done);
  EXPECT_TRUE(again->result.deduplicated);
}

// ALTER TABLE ... MODIFY COLUMN between a request's check and its batch's INSERT: rows valid when
// sent are converted to the new type where that loses nothing, and otherwise the callers get
// ABORTED (the table changed, resend), never INVALID_ARGUMENT for valid rows.
TEST_F(IngestorTest, ValidRowsOfABatchWhoseTableChangedAreConvertedOrAborted) {
  inserter_.id_type = "UInt16";
  inserter_.check_types = true;
  Make(Options());
  auto widened = IdRow("UInt16", 7);
  Outcome* first = Submit(widened);
  ASSERT_TRUE(first->admitted) << first->result.status;
  inserter_.id_type = "UInt32";  // MODIFY COLUMN id UInt32 before the flush
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_TRUE(first->done);
  EXPECT_TRUE(first->result.status.ok()) << first->result.status;
  ASSERT_FALSE(inserter_.calls.empty());
  EXPECT_EQ(inserter_.calls.back().rows_text.substr(0, 2), "7\t");
  auto big = IdRow("UInt32", 70000);
  Outcome* second = Submit(big);
  ASSERT_TRUE(second->admitted) << second->result.status;
  inserter_.id_type = "UInt16";  // MODIFY COLUMN id UInt16: 70000 would not survive
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_TRUE(second->done);
  EXPECT_EQ(second->result.status.code(), absl::StatusCode::kAborted) << second->result.status;
  EXPECT_NE(second->result.status.message().find("the table changed"), std::string_view::npos);
}

TEST_F(IngestorTest, ATypeMismatchWithACachedHeaderAsksTheServerAgainOnce) {
  Make(Options());
  inserter_.id_type = "UInt16";
  auto before = IdRow("UInt16", 1);
  Outcome* first = Submit(before);
  ASSERT_TRUE(first->admitted) << first->result.status;
  EXPECT_EQ(inserter_.describes, 1);
  // ALTER TABLE events MODIFY COLUMN id UInt32: the cached header still says UInt16.
  inserter_.id_type = "UInt32";
  auto after = IdRow("UInt32", 70000);
  Outcome* second = Submit(after);
  EXPECT_TRUE(second->admitted) << second->result.status;
  EXPECT_FALSE(second->done && !second->result.status.ok()) << second->result.status;
  EXPECT_EQ(inserter_.describes, 2);
  // Rows that are wrong for the fresh header are still rejected, after one more look at most.
  auto wrong = IdRow("UInt16", 2);
  Outcome* third = Submit(wrong);
  ASSERT_TRUE(third->done);
  EXPECT_EQ(third->result.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(inserter_.describes, 3);
  EXPECT_THAT(third->result.status.message(), HasSubstr("UInt32"));
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_TRUE(second->done);
  EXPECT_TRUE(second->result.status.ok()) << second->result.status;
  EXPECT_TRUE(first->done);
}

TEST_F(IngestorTest, AColumnErrorFromTheServerDropsTheCachedHeader) {
  Make(Options());
  inserter_.script = {ClickHouseError(clickhouse::error_code::kNoSuchColumnInTable, "No column")};
  auto a = Rows(0, 1);
  Outcome* oa = Submit(a);
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_TRUE(oa->done);
  EXPECT_FALSE(oa->result.status.ok());
  // Looked up once more at the failure, to tell a changed table from refused rows.
  EXPECT_EQ(inserter_.describes, 2);
  auto b = Rows(1, 1);
  Outcome* ob = Submit(b);
  EXPECT_EQ(inserter_.describes, 3);  // looked up again, not judged by the old header
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  EXPECT_TRUE(ob->done);
}

TEST_F(IngestorTest, ATransientErrorKeepsTheCachedHeader) {
  Make(Options());
  inserter_.script = {ClickHouseError(clickhouse::error_code::kTooManyParts, "Too many parts")};
  auto a = Rows(0, 1);
  Submit(a);
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  auto b = Rows(1, 1);
  Outcome* ob = Submit(b);
  EXPECT_EQ(inserter_.describes, 1);
  clock_.Advance(absl::Milliseconds(400));  // TOO_MANY_PARTS doubled the table's delay
  ingestor_->Poll();
  ingestor_->RunPending();
  EXPECT_TRUE(ob->done);
}

TEST_F(IngestorTest, AnOutageLongerThanTheHeaderCacheKeepsBuffering) {
  IngestOptions o = Options();
  o.schema_ttl = absl::Seconds(60);
  Make(o);
  auto a = Rows(0, 1);
  EXPECT_TRUE(Submit(a)->admitted);
  EXPECT_EQ(inserter_.describes, 1);
  // ClickHouse becomes unreachable for longer than the cache keeps a header.
  inserter_.describe_error = absl::UnavailableError("connection refused");
  clock_.Advance(absl::Seconds(61));
  auto b = Rows(1, 1);
  Outcome* ob = Submit(b, absl::Seconds(30));
  EXPECT_TRUE(ob->admitted) << ob->result.status;  // buffered with the last known header
  EXPECT_EQ(inserter_.describes, 2);
  // The refresh was not allowed to use up the request's deadline.
  EXPECT_LE(inserter_.last_describe_deadline, clock_.Now() + absl::Seconds(5));
  // Within the next few seconds requests do not ask again.
  auto c = Rows(2, 1);
  EXPECT_TRUE(Submit(c)->admitted);
  EXPECT_EQ(inserter_.describes, 2);
  // An answer about the table itself is not papered over.
  clock_.Advance(absl::Seconds(6));
  inserter_.describe_error =
      ClickHouseError(clickhouse::error_code::kUnknownTable, "Table default.events doesn't exist");
  auto d = Rows(3, 1);
  Outcome* od = Submit(d);
  ASSERT_TRUE(od->done);
  EXPECT_FALSE(od->result.status.ok());
  // That answer dropped the header: without one at hand, a connection problem is the caller's.
  inserter_.describe_error = absl::UnavailableError("connection refused");
  auto e = Rows(4, 1);
  Outcome* oe = Submit(e);
  ASSERT_TRUE(oe->done);
  EXPECT_EQ(oe->result.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(oe->admitted);
}

TEST(ParseTableNameTest, ReadsNamesAsClickHouseDoes) {
  EXPECT_EQ(*ParseTableName("`a``tick`", "db"), (TableId{"db", "a`tick"}));
  EXPECT_EQ(*ParseTableName("`a\\`tick`", "db"), (TableId{"db", "a`tick"}));
  EXPECT_EQ(*ParseTableName("\"d\"\"q\".`t`", "db"), (TableId{"d\"q", "t"}));
  EXPECT_FALSE(ParseTableName("`a`tick`", "db").ok());
  EXPECT_FALSE(ParseTableName("a.b.c", "db").ok());
}

TEST(ParseTableNameTest, AcceptsQuotedPartsAndDefaultsTheDatabase) {
  EXPECT_EQ(*ParseTableName("t", "db"), (TableId{"db", "t"}));
  EXPECT_EQ(*ParseTableName("a.b", "db"), (TableId{"a", "b"}));
  EXPECT_EQ(*ParseTableName("`my.db`.`t`", "db"), (TableId{"my.db", "t"}));
  EXPECT_FALSE(ParseTableName("", "db").ok());
  EXPECT_FALSE(ParseTableName("a.", "db").ok());
  EXPECT_FALSE(ParseTableName("`a", "db").ok());
}

}  // namespace
}  // namespace chgate::ingest

namespace chgate::ingest {
namespace {

TEST_F(IngestorTest, AcceptedRowsOfAFailedFlushAreCountedAsDropped) {
  Make(Options());
  inserter_.script = {ClickHouseError(53, "Type mismatch")};
  auto accepted = Rows(0, 3), committed = Rows(3, 2);
  Outcome* oa = Submit(accepted, absl::Seconds(30), "events", AckMode::kAccepted);
  Outcome* oc = Submit(committed);
  ASSERT_TRUE(oa->done);
  EXPECT_TRUE(oa->result.status.ok());  // told "accepted" before the flush
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_TRUE(oc->done);
  EXPECT_FALSE(oc->result.status.ok());  // this caller knows
  // Only the accepted rows were lost without their caller knowing.
  EXPECT_EQ(ingestor_->Stats().rows_dropped, 3u);
}

TEST_F(IngestorTest, AnAcceptedAckNamesTheQueryIdItsRowsGoOutUnder) {
  Make(Options());
  inserter_.script = {absl::UnavailableError("down")};  // the retry keeps the id
  auto a = Rows(0, 2), b = Rows(2, 1);
  Outcome* first = Submit(a, absl::Seconds(30), "events", AckMode::kAccepted);
  Outcome* second = Submit(b, absl::Seconds(30), "events", AckMode::kAccepted);
  ASSERT_TRUE(first->done && second->done);
  EXPECT_TRUE(absl::StartsWith(first->result.query_id, "chgate-")) << first->result.query_id;
  EXPECT_EQ(second->result.query_id, first->result.query_id) << "one batch, one INSERT";
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_EQ(inserter_.calls.size(), 2u);
  EXPECT_EQ(inserter_.calls[0].attempt.query_id, first->result.query_id);
  EXPECT_EQ(inserter_.calls[1].attempt.query_id, first->result.query_id);
  // The next batch has an id of its own.
  auto c = Rows(3, 1);
  Outcome* third = Submit(c, absl::Seconds(30), "events", AckMode::kAccepted);
  ASSERT_TRUE(third->done);
  EXPECT_FALSE(third->result.query_id.empty());
  EXPECT_NE(third->result.query_id, first->result.query_id);
}

TEST_F(IngestorTest, ARepeatOfAnAcceptedRequestWhoseRowsWereLostInsertsThem) {
  Make(Options());
  inserter_.script = {ClickHouseError(53, "Type mismatch")};
  auto a = Rows(0, 3);
  Outcome* first = Submit(a, absl::Seconds(30), "events", AckMode::kAccepted, "k");
  ASSERT_TRUE(first->done);
  EXPECT_TRUE(first->result.status.ok());
  Outcome* repeat_before = Submit(a, absl::Seconds(30), "events", AckMode::kAccepted, "k");
  EXPECT_TRUE(repeat_before->result.deduplicated) << "answered while its rows are buffered";
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_EQ(ingestor_->Stats().rows_dropped, 3u);
  // The rows never reached ClickHouse: the key no longer answers for them.
  Outcome* repeat = Submit(a, absl::Seconds(30), "events", AckMode::kAccepted, "k");
  ASSERT_TRUE(repeat->done);
  EXPECT_FALSE(repeat->result.deduplicated);
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_EQ(inserter_.calls.size(), 2u);
  EXPECT_EQ(inserter_.calls[1].rows_text, inserter_.calls[0].rows_text);
  EXPECT_TRUE(Submit(a, absl::Seconds(30), "events", AckMode::kAccepted, "k")->result.deduplicated)
      << "committed now";
}

TEST_F(IngestorTest, AZeroRowRequestIsAcknowledgedInTheModeAsked) {
  Make(Options());
  auto none = Rows(0, 0);
  Outcome* committed = Submit(none, absl::Seconds(30), "events", AckMode::kCommitted);
  Outcome* accepted = Submit(none, absl::Seconds(30), "events", AckMode::kAccepted);
  ASSERT_TRUE(committed->done && accepted->done);
  EXPECT_TRUE(committed->result.committed);
  EXPECT_FALSE(committed->result.persisted);
  EXPECT_FALSE(accepted->result.committed);
  EXPECT_FALSE(accepted->result.persisted);
  EXPECT_TRUE(inserter_.calls.empty());
}

// chgate's log lines, as JSON, while it lives (the process-wide logger is put back after, also
// when an assertion ends the test early).
class CapturedLog {
 public:
  explicit CapturedLog(Clock* clock)
      : logger_({.format = log::Format::kJson, .out = &out_, .clock = [clock] {
                   return clock->Now();
                 }}) {
    log::SetLogger(&logger_);
  }
  ~CapturedLog() { log::SetLogger(nullptr); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  std::string text() const { return out_.str(); }
  void Clear() { out_.str(""); }
  // The last line whose message is `msg` ("" when there is none).
  std::string LineWith(const std::string& msg) const {
    const std::string lines = out_.str();
    const size_t at = lines.rfind(absl::StrCat("\"msg\":\"", msg, "\""));
    if (at == std::string::npos) return "";
    const size_t nl = lines.rfind('\n', at);
    const size_t start = nl == std::string::npos ? 0 : nl + 1;
    return lines.substr(start, lines.find('\n', at) - start);
  }

 private:
  std::ostringstream out_;
  log::Logger logger_;
};

// A batch refused for its data with every caller told is the callers' business (a warning); one
// that loses accepted rows is the operator's (an error).
TEST_F(IngestorTest, ABatchFailureIsAnErrorOnlyWhenRowsAreLostOrTheServerIsAtFault) {
  CapturedLog captured(&clock_);
  Make(Options());
  auto level_of_last_failure = [&](std::optional<AckMode> ack) {
    inserter_.script = {ClickHouseError(53, "Type mismatch")};
    auto rows = Rows(0, 2);
    captured.Clear();
    Submit(rows, absl::Seconds(30), "events", ack);
    clock_.Advance(absl::Minutes(1));  // past the log's repeat interval: nothing is suppressed
    ingestor_->Poll();
    ingestor_->RunPending();
    const std::string line = captured.LineWith("batch failed");
    if (line.empty()) return std::string("none: ") + captured.text();
    return std::string(absl::StrContains(line, "\"level\":\"error\"")  ? "error"
                       : absl::StrContains(line, "\"level\":\"warn\"") ? "warn"
                                                                       : line);
  };
  EXPECT_EQ(level_of_last_failure(AckMode::kCommitted), "warn");
  EXPECT_EQ(level_of_last_failure(AckMode::kAccepted), "error");
}

TEST_F(IngestorTest, TheDrainReportsOnlyWhatItDroppedNotEarlierLosses) {
  // Rows lost before the drain began were reported when they were lost; the drain's line says
  // what the drain itself flushed, failed and dropped (an operator reads it at every rollout).
  CapturedLog captured(&clock_);
  Make(Options());
  inserter_.script = {ClickHouseError(53, "Type mismatch")};
  auto lost = Rows(0, 3);
  Submit(lost, absl::Seconds(30), "events", AckMode::kAccepted);
  clock_.Advance(absl::Seconds(1));  // the batch is due
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_EQ(ingestor_->Stats().rows_dropped, 3u);
  auto kept = Rows(10, 2);
  Submit(kept, absl::Seconds(30), "events", AckMode::kAccepted);
  captured.Clear();
  ingestor_->Shutdown(clock_.Now() + absl::Seconds(5));
  const std::string line = captured.LineWith("drain finished");
  ASSERT_FALSE(line.empty()) << captured.text();
  EXPECT_TRUE(absl::StrContains(line, "\"rows_dropped\":0")) << line;
  EXPECT_TRUE(absl::StrContains(line, "\"rows_flushed\":2")) << line;
  EXPECT_TRUE(absl::StrContains(line, "\"level\":\"info\"")) << line;
  EXPECT_EQ(ingestor_->Stats().rows_dropped, 3u);
}

TEST_F(IngestorTest, AcceptedRowsAreRetriedLikeAnyOthers) {
  // No caller waits for accepted rows: their flush still gets every attempt the retry budget
  // allows (it used to give up at the first transient error, losing the rows).
  Make(Options());
  inserter_.script = {absl::UnavailableError("down"), absl::UnavailableError("down")};
  auto a = Rows(0, 4);
  Outcome* out = Submit(a, absl::Seconds(30), "events", AckMode::kAccepted);
  ASSERT_TRUE(out->done);
  clock_.Advance(absl::Milliseconds(200));
  ingestor_->Poll();
  ingestor_->RunPending();
  EXPECT_EQ(inserter_.calls.size(), 3u);
  EXPECT_EQ(ingestor_->Stats().rows_dropped, 0u);
  EXPECT_EQ(ingestor_->Stats().buffered_rows, 0u);
}

TEST_F(IngestorTest, AcceptedRowsAFlushGivesUpOnAreCountedAsDropped) {
  Make(Options());
  for (int i = 0; i < 1000; ++i) inserter_.script.push_back(absl::UnavailableError("down"));
  auto a = Rows(0, 4);
  Outcome* out = Submit(a, absl::Seconds(30), "events", AckMode::kAccepted);
  ASSERT_TRUE(out->done);
  ingestor_->Shutdown(clock_.Now() + absl::Seconds(1));
  EXPECT_GT(inserter_.calls.size(), 1u);  // retried until --retry-max-elapsed
  EXPECT_EQ(ingestor_->Stats().buffered_rows, 0u);
  EXPECT_EQ(ingestor_->Stats().rows_dropped, 4u);
}

// Records the rows the Ingestor reports dropped (chgate_rows_dropped_total); ignores the rest.
class DropsObserver final : public testing::QuietObserver {
 public:
  void RowsDropped(const std::string& table, DropReason reason, uint64_t rows) override {
    absl::MutexLock lock(&mu);
    drops.emplace_back(table, reason, rows);
  }
  std::vector<std::tuple<std::string, DropReason, uint64_t>> Drops() {
    absl::MutexLock lock(&mu);
    return drops;
  }
  absl::Mutex mu;
  std::vector<std::tuple<std::string, DropReason, uint64_t>> drops ABSL_GUARDED_BY(mu);
};

// docs/api.md: accepted rows whose flush gives up after --retry-max-elapsed are counted as
// dropped with reason accepted_flush_failed, and so are those of a flush the drain started that
// failed; each reaches the metric through the observer, with its table.
TEST_F(IngestorTest, DroppedAcceptedRowsAreReportedWithTheirTableAndReason) {
  DropsObserver observer;
  observer_ = &observer;
  IngestOptions o = Options();
  o.retry.max_elapsed = absl::Seconds(10);
  Make(o);
  for (int i = 0; i < 1000; ++i) inserter_.script.push_back(absl::UnavailableError("down"));
  auto a = Rows(0, 4);
  ASSERT_TRUE(Submit(a, absl::Seconds(30), "events", AckMode::kAccepted)->done);
  clock_.Advance(absl::Milliseconds(250));
  ingestor_->Poll();
  ingestor_->RunPending();  // retried on the fake clock until --retry-max-elapsed
  using Drop = std::tuple<std::string, DropReason, uint64_t>;
  EXPECT_EQ(observer.Drops(),
            std::vector<Drop>({{"default.events", DropReason::kAcceptedFlushFailed, 4}}));
  // Rows buffered when a drain with no time left begins: it flushes them, and that fails.
  auto b = Rows(4, 3);
  ASSERT_TRUE(Submit(b, absl::Seconds(30), "events", AckMode::kAccepted)->done);
  ingestor_->Shutdown(clock_.Now());
  EXPECT_EQ(ingestor_->Stats().rows_dropped, 7u);
  const std::vector<Drop> drops = observer.Drops();
  ASSERT_EQ(drops.size(), 2u);
  EXPECT_EQ(std::get<0>(drops[1]), "default.events");
  EXPECT_EQ(std::get<2>(drops[1]), 3u);
  // The drain flushed them and that flush failed: a failed flush, not rows left buffered.
  EXPECT_EQ(std::get<1>(drops[1]), DropReason::kAcceptedFlushFailed);
  ingestor_.reset();
  observer_ = nullptr;
}

TEST_F(IngestorTest, NothingIsDroppedWhenEveryFlushCommits) {
  Make(Options());
  auto a = Rows(0, 2);
  Submit(a, absl::Seconds(30), "events", AckMode::kAccepted);
  ingestor_->Shutdown(clock_.Now() + absl::Seconds(5));
  EXPECT_EQ(inserter_.calls.size(), 1u);
  EXPECT_EQ(ingestor_->Stats().rows_dropped, 0u);
}

}  // namespace
}  // namespace chgate::ingest

namespace chgate::ingest {
namespace {

TEST_F(IngestorTest, ReadinessReturnsOnlyBelowTheLowWaterMark) {
  IngestOptions o = Options();
  const uint64_t row_bytes = Rows(0, 1).ByteSize();
  o.memory_budget_bytes = row_bytes * 10;
  o.ready_high_water = 0.5;  // unready at 5 rows
  o.ready_low_water = 0.2;   // ready again below 2 rows
  Make(o);
  // Two batches of the same table (two column lists), due 150 ms apart: 2 rows, then 3.
  auto first = Rows(0, 2), second = Rows(2, 3);
  Submit(first);
  EXPECT_TRUE(ingestor_->Ready());
  clock_.Advance(absl::Milliseconds(150));
  bool done = false;
  ingestor_->Submit({.table = "events",
                     .columns = {"id", "s"},
                     .block = &second,
                     .deadline = clock_.Now() + absl::Seconds(30)},
                    nullptr, [&done](Result) { done = true; });
  ingestor_->RunPending();
  EXPECT_FALSE(ingestor_->Ready());  // 5 rows: at the high-water mark
  // The first batch is flushed: 3 rows are left, between the marks: still unready (one
  // threshold would have flipped back already).
  clock_.Advance(absl::Milliseconds(60));
  ingestor_->Poll();
  ingestor_->RunPending();
  EXPECT_EQ(ingestor_->Stats().buffered_rows, 3u);
  EXPECT_FALSE(ingestor_->Ready());
  // The second batch is flushed too: below the low-water mark, ready again.
  clock_.Advance(absl::Milliseconds(150));
  ingestor_->Poll();
  ingestor_->RunPending();
  EXPECT_TRUE(done);
  EXPECT_EQ(ingestor_->Stats().buffered_rows, 0u);
  EXPECT_TRUE(ingestor_->Ready());
}

}  // namespace
}  // namespace chgate::ingest

namespace chgate::ingest {
namespace {

// An inserter whose Insert blocks until Release(): a flush that does not end.
class StuckInserter final : public Inserter {
 public:
  absl::StatusOr<TableSchema> Describe(const TableId& table,
                                       const std::vector<std::string>& columns,
                                       absl::Time deadline) override {
    return schemas_.Describe(table, columns, deadline);
  }
  absl::Status Insert(const TableId&, const clickhouse::BlockParts&, const InsertAttempt&,
                      absl::Time) override {
    started_.Notify();
    release_.WaitForNotification();
    return absl::OkStatus();
  }
  void WaitStarted() { started_.WaitForNotification(); }
  void Release() { release_.Notify(); }

 private:
  FakeInserter schemas_;
  absl::Notification started_;
  absl::Notification release_;
};

// The thread checks and the progress of retries are the TaskRunner's and the InsertRetrier's,
// tested in parts_test.cc; this is the Ingestor's wiring of them, with its threads running.
TEST(IngestorWatchdogTest, AFlushThatDoesNotEndFailsTheProgressCheckUntilItEnds) {
  // On the manual clock: the stall is made by advancing it, not by sleeping. The scheduler keeps
  // running (it waits at most 50 ms of real time between rounds) and stamps the clock's time.
  FakeClock clock;
  StuckInserter inserter;
  IngestOptions o;
  o.limits = {.max_rows = 1, .max_bytes = 1 << 20, .max_delay = absl::Milliseconds(10)};
  Ingestor ingestor(o, &inserter, &clock);
  const absl::Duration stall = absl::Seconds(30);
  EXPECT_TRUE(ingestor.CheckProgress(stall).ok());
  clickhouse::Block block = Rows(0, 1);
  absl::Notification done;
  ingestor.Submit({.table = "events", .block = &block, .deadline = clock.Now() + absl::Hours(1)},
                  nullptr, [&done](Result) { done.Notify(); });
  inserter.WaitStarted();
  clock.Advance(stall + absl::Seconds(1));
  // Real time passes only until the scheduler's next round has stamped the advanced clock; the
  // flush thread, stuck in its INSERT, stamps nothing.
  auto check_until = [&ingestor, stall](auto done_when) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    absl::Status st = ingestor.CheckProgress(stall);
    while (!done_when(st) && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(2));
      st = ingestor.CheckProgress(stall);
    }
    return st;
  };
  const absl::Status stuck = check_until(
      [](const absl::Status& st) { return absl::StrContains(st.message(), "a flush thread"); });
  EXPECT_EQ(stuck.code(), absl::StatusCode::kDeadlineExceeded) << stuck;
  EXPECT_THAT(std::string(stuck.message()), ::testing::HasSubstr("a flush thread"));
  EXPECT_TRUE(ingestor.CheckProgress(absl::Hours(1)).ok()) << "a longer limit is not reached";
  inserter.Release();
  done.WaitForNotification();
  // The flush task ends just after its callers are answered.
  EXPECT_TRUE(check_until([](const absl::Status& st) { return st.ok(); }).ok());
}

// ---------------------------------------------------------------------------------------------
// The persisted ack mode: the spool, its intents and replay after a restart.

class PersistedTest : public IngestorTest {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::path(::testing::TempDir()) /
            absl::StrCat("persisted_",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
  }
  // Opens the spool (recovering it) and an Ingestor on it that replays what it found.
  // `after_open` runs between the spool's recovery and the Ingestor's (to damage a record).
  RecoverySummary Start(IngestOptions o, spool::SpoolOptions so = {},
                        const std::function<void()>& after_open = nullptr) {
    so.replay_payloads = false;
    so.min_free_bytes = 1;
    absl::StatusOr<spool::Spool::Opened> opened = spool::Spool::Open(dir_, so);
    EXPECT_TRUE(opened.ok()) << opened.status();
    if (after_open) after_open();
    spool_ = std::move(opened->spool);
    // The committed requests' keys, as chgate keeps them: a spool of their own beside.
    absl::StatusOr<spool::Spool::Opened> keys =
        spool::Spool::Open(dir_ + "/keys", {.min_free_bytes = 1});
    EXPECT_TRUE(keys.ok()) << keys.status();
    key_spool_ = std::move(keys->spool);
    o.spool = spool_.get();
    o.spool_id = spool_->id();
    o.key_spool = key_spool_.get();
    Make(o);
    return ingestor_->Recover(opened->replay, keys->replay);
  }
  // What a crash leaves: the Ingestor gone without its drain, the spools' files as they are.
  void Crash() {
    ingestor_->Shutdown(clock_.Now());
    ingestor_.reset();
    spool_->Close();
    spool_.reset();
    key_spool_->Close();
    key_spool_.reset();
  }
  Outcome* SubmitPersisted(const clickhouse::Block& block, std::string key = "") {
    outcomes_.push_back(std::make_unique<Outcome>());
    Outcome* o = outcomes_.back().get();
    o->block = Own(block);
    ingestor_->Submit(
        Request{.table = "events",
                .block = &o->block,
                .deadline = clock_.Now() + absl::Seconds(30),
                .ack = AckMode::kPersisted,
                .idempotency_key = std::move(key)},
        [o] { o->admitted = true; },
        [o](Result res) {
          o->done = true;
          o->result = std::move(res);
        });
    ingestor_->RunPending();
    EXPECT_TRUE(spool_->Flush().ok());  // the ack comes once the record is durable
    return o;
  }
  // The text of the one file in the dead-letter directory ("" and a failure otherwise).
  std::string OnlyDeadLetter() {
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(dir_ + "/dead-letter")) {
      files.push_back(e.path().string());
    }
    EXPECT_EQ(files.size(), 1u);
    if (files.size() != 1) return "";
    std::ifstream in(files[0], std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }
  // Lets the batch delay pass and runs the flushes.
  void FlushDue() {
    clock_.Advance(absl::Milliseconds(250));
    ingestor_->Poll();
    ingestor_->RunPending();
  }
  // A resend answered with the first request's result, not spooled again.
  static void ExpectAnsweredAsBefore(const Outcome* again, uint64_t rows) {
    ASSERT_TRUE(again->done);
    EXPECT_TRUE(again->result.status.ok()) << again->result.status;
    EXPECT_TRUE(again->result.deduplicated);
    EXPECT_TRUE(again->result.persisted);
    EXPECT_EQ(again->result.rows, rows);
  }
  std::string dir_;
};

TEST_F(PersistedTest, AZeroRowRequestIsAcknowledgedPersistedAndWritesNothing) {
  Start(Options());
  Outcome* none = SubmitPersisted(Rows(0, 0));
  ASSERT_TRUE(none->done);
  EXPECT_TRUE(none->result.status.ok()) << none->result.status;
  EXPECT_TRUE(none->result.persisted);
  EXPECT_FALSE(none->result.committed);
  EXPECT_EQ(none->result.rows, 0u);
  EXPECT_EQ(spool_->Stats().pending_records, 0u);
  FlushDue();
  EXPECT_TRUE(inserter_.calls.empty());
}

TEST_F(PersistedTest, AcksOnceDurableThenSendsTheRowsFromTheSpool) {
  IngestOptions options = Options();
  options.async_insert = true;  // never for spooled batches
  Start(options);
  Outcome* a = SubmitPersisted(Rows(0, 3));
  Outcome* b = SubmitPersisted(Rows(3, 2));
  for (Outcome* o : {a, b}) {
    ASSERT_TRUE(o->done);
    EXPECT_TRUE(o->result.status.ok()) << o->result.status;
    EXPECT_TRUE(o->result.persisted);
    EXPECT_FALSE(o->result.committed);
  }
  EXPECT_TRUE(inserter_.calls.empty());
  EXPECT_EQ(spool_->Stats().pending_records, 2u);
  EXPECT_EQ(ingestor_->Stats().spooled_rows, 5u);
  EXPECT_EQ(ingestor_->Stats().buffered_bytes, 0u);  // on disk, not in memory
  FlushDue();
  ASSERT_EQ(inserter_.calls.size(), 1u);
  EXPECT_EQ(inserter_.calls[0].rows_text, "0\txxx\n1\txxx\n2\txxx\n3\txxx\n4\txxx\n");
  EXPECT_EQ(inserter_.calls[0].parts, 2u) << "each record's block as it was kept since its sync";
  // The block's identity is the spool's: its id and the LSN of the batch's intent. The query id
  // is unguessable, like every batch's.
  EXPECT_EQ(inserter_.calls[0].attempt.deduplication_key.rfind(spool_->id() + "-", 0), 0u);
  EXPECT_THAT(inserter_.calls[0].attempt.query_id, ::testing::MatchesRegex("chgate-[0-9a-f]{32}"));
  EXPECT_FALSE(inserter_.calls[0].attempt.async);
  EXPECT_EQ(spool_->Stats().pending_records, 0u);  // rows and intent committed
  // A committed request of the same table goes through the server's asynchronous insert.
  Submit(Rows(10, 1));
  FlushDue();
  ASSERT_EQ(inserter_.calls.size(), 2u);
  EXPECT_TRUE(inserter_.calls[1].attempt.async);
  EXPECT_EQ(ingestor_->Stats().spooled_rows, 0u);
}

TEST_F(PersistedTest, ABatchSentBeforeACrashIsSentAgainAsTheSameBlockWithTheSameIdentity) {
  Start(Options());
  SubmitPersisted(Rows(0, 3));
  SubmitPersisted(Rows(3, 3));
  // ClickHouse may have committed it, but chgate never heard (the connection broke).
  for (int i = 0; i < 100; ++i) inserter_.script.push_back(absl::UnavailableError("reset"));
  clock_.Advance(absl::Milliseconds(250));
  ingestor_->Poll();
  ingestor_->Shutdown(clock_.Now() + absl::Seconds(2));  // retries until the drain ends
  ASSERT_GE(inserter_.calls.size(), 2u);
  const InsertCall first = inserter_.calls[0];
  Crash();
  inserter_.calls.clear();
  inserter_.script.clear();
  // A new batch arriving after the restart must not join the re-sent one.
  const RecoverySummary summary = Start(Options());
  EXPECT_EQ(summary.records, 2u);
  EXPECT_EQ(summary.rows, 6u);
  EXPECT_EQ(summary.intents, 1u);
  SubmitPersisted(Rows(6, 1));
  ingestor_->RunPending();
  ASSERT_GE(inserter_.calls.size(), 1u);
  EXPECT_EQ(inserter_.calls[0].rows_text, first.rows_text);
  EXPECT_EQ(inserter_.calls[0].attempt.deduplication_key, first.attempt.deduplication_key);
  FlushDue();
  ASSERT_EQ(inserter_.calls.size(), 2u);
  EXPECT_EQ(inserter_.calls[1].rows_text, "6\txxx\n");
  EXPECT_NE(inserter_.calls[1].attempt.deduplication_key, first.attempt.deduplication_key);
  EXPECT_EQ(spool_->Stats().pending_records, 0u);
}

TEST_F(PersistedTest, RecordsNotYetSentAreSentAfterARestartInTheirOrder) {
  Start(Options());
  SubmitPersisted(Rows(0, 2));
  SubmitPersisted(Rows(2, 2));
  Crash();  // before the batch delay: nothing was sent
  EXPECT_TRUE(inserter_.calls.empty());
  const RecoverySummary summary = Start(Options());
  EXPECT_EQ(summary.records, 2u);
  EXPECT_EQ(summary.intents, 0u);
  SubmitPersisted(Rows(4, 1));  // after the replayed ones, in the same batch
  FlushDue();
  ASSERT_EQ(inserter_.calls.size(), 1u);
  EXPECT_EQ(inserter_.calls[0].rows_text, "0\txxx\n1\txxx\n2\txxx\n3\txxx\n4\txxx\n");
  // Two records read back from the spool and one kept since its sync, sent as one block.
  EXPECT_EQ(inserter_.calls[0].parts, 3u);
  EXPECT_EQ(spool_->Stats().pending_records, 0u);
}

// docs/spool.md: a backlog drains oldest first, in batches of --batch-max-rows (whole records:
// a record is never split, a batch never passes the limit but for a record larger than it).
TEST_F(PersistedTest, ABacklogDrainsOldestFirstInBatchesOfTheRowLimit) {
  Start(Options());  // a large limit: nothing is sent before the crash
  for (uint64_t i = 0; i < 5; ++i) SubmitPersisted(Rows(i * 4, 4));
  IngestOptions o = Options();
  o.limits.max_rows = 10;
  Crash();  // before the batch delay: the five records are the backlog
  EXPECT_TRUE(inserter_.calls.empty());
  EXPECT_EQ(Start(o).records, 5u);
  for (int i = 0; i < 5 && spool_->Stats().pending_records > 0; ++i) FlushDue();
  ASSERT_EQ(inserter_.calls.size(), 3u);
  std::string all;
  for (const InsertCall& call : inserter_.calls) {
    const auto rows = std::count(call.rows_text.begin(), call.rows_text.end(), '\n');
    EXPECT_LE(rows, 10) << call.rows_text;
    all += call.rows_text;
  }
  EXPECT_EQ(
      std::count(inserter_.calls[0].rows_text.begin(), inserter_.calls[0].rows_text.end(), '\n'),
      8);
  std::string expected;
  for (int r = 0; r < 20; ++r) absl::StrAppend(&expected, r, "\txxx\n");
  EXPECT_EQ(all, expected) << "not in the order the records were written";
  EXPECT_EQ(spool_->Stats().pending_records, 0u);
}

TEST_F(PersistedTest, ARepeatedIdempotencyKeyAfterARestartIsNotSpooledTwice) {
  Start(Options());
  Outcome* a = SubmitPersisted(Rows(0, 2), "key-1");
  ASSERT_TRUE(a->result.status.ok());
  Crash();
  Start(Options());
  // The caller never saw the ack and sends the request again.
  Outcome* again = SubmitPersisted(Rows(0, 2), "key-1");
  ASSERT_TRUE(again->done);
  EXPECT_TRUE(again->result.status.ok());
  EXPECT_TRUE(again->result.deduplicated);
  FlushDue();
  ASSERT_EQ(inserter_.calls.size(), 1u);
  EXPECT_EQ(inserter_.calls[0].rows_text, "0\txxx\n1\txxx\n");
}

TEST_F(PersistedTest, AResendOfARequestCommittedBeforeACrashIsAnsweredNotInsertedAgain) {
  // The first request's rows are committed and its record marked so: its key is no longer in
  // any pending record. Its caller saw no ack (the connection broke, chgate was killed) and
  // resends it after the restart.
  Start(Options());
  Outcome* first = SubmitPersisted(Rows(0, 3), "key-1");
  ASSERT_TRUE(first->result.status.ok());
  FlushDue();
  ASSERT_EQ(inserter_.calls.size(), 1u);
  ASSERT_TRUE(spool_->Flush().ok());
  ASSERT_EQ(spool_->Stats().pending_records, 0u);
  Crash();
  inserter_.calls.clear();
  Start(Options());
  ExpectAnsweredAsBefore(SubmitPersisted(Rows(0, 3), "key-1"), 3);
  FlushDue();
  EXPECT_TRUE(inserter_.calls.empty()) << "a committed request inserted again";

  // The restart did not restart the key's window: past the window since its commit it is a new
  // request, as without a restart.
  Crash();
  clock_.Advance(Options().idempotency_window - absl::Seconds(1));
  Start(Options());
  clock_.Advance(absl::Seconds(2));
  Outcome* late = SubmitPersisted(Rows(0, 3), "key-1");
  ASSERT_TRUE(late->done);
  EXPECT_FALSE(late->result.deduplicated);
  FlushDue();
  EXPECT_EQ(inserter_.calls.size(), 1u);
}

TEST_F(PersistedTest, AfterARestartWithClickHouseDownKnownTablesAreStillAcked) {
  Start(Options());
  ASSERT_TRUE(SubmitPersisted(Rows(0, 2))->result.status.ok());
  FlushDue();
  Crash();
  inserter_.describe_error = absl::UnavailableError("connection refused");
  Start(Options());
  // The header saved beside the spool converts the rows; ClickHouse was asked first.
  const int describes = inserter_.describes;
  Outcome* after = SubmitPersisted(Rows(2, 2));
  ASSERT_TRUE(after->done);
  EXPECT_TRUE(after->result.status.ok()) << after->result.status;
  EXPECT_TRUE(after->result.persisted);
  EXPECT_GT(inserter_.describes, describes);
  // A table never seen has no header to fall back on.
  Outcome* unknown_table = Submit(Rows(0, 1), absl::Seconds(30), "other", AckMode::kPersisted);
  ASSERT_TRUE(unknown_table->done);
  EXPECT_EQ(unknown_table->result.status.code(), absl::StatusCode::kUnavailable);
  inserter_.describe_error = absl::OkStatus();
  FlushDue();
  ASSERT_EQ(inserter_.calls.size(), 2u);
  EXPECT_EQ(inserter_.calls[1].rows_text, "2\txxx\n3\txxx\n");
}

TEST_F(PersistedTest, ClickHouseDownKeepsTheRowsInTheSpoolNotInMemory) {
  IngestOptions o = Options();
  o.retry.max_elapsed = absl::Seconds(1);  // per attempt, for a spooled batch
  Start(o);
  for (int i = 0; i < 100; ++i) inserter_.script.push_back(absl::UnavailableError("down"));
  for (int i = 0; i < 20; ++i) SubmitPersisted(Rows(static_cast<uint64_t>(i) * 10, 10));
  EXPECT_EQ(ingestor_->Stats().buffered_bytes, 0u);
  clock_.Advance(absl::Milliseconds(250));
  ingestor_->Poll();
  // Attempts go on past --retry-max-elapsed: nobody waits for these rows but the spool.
  ingestor_->RunPending();
  EXPECT_EQ(inserter_.calls.size(), 101u);
  EXPECT_EQ(spool_->Stats().pending_records, 0u);
  EXPECT_EQ(inserter_.calls.back().rows_text, inserter_.calls.front().rows_text);
  EXPECT_EQ(std::count(inserter_.calls.back().rows_text.begin(),
                       inserter_.calls.back().rows_text.end(), '\n'),
            200);
}

// docs/spool.md: persisted blocks are kept in memory for their INSERT only up to an eighth of the
// memory budget (by default), and what is kept counts in the budget as buffered rows; beyond it
// a block is read back from the spool. The budget's room, as Reserve sees it, brackets the
// cache: the requests' own reservations are gone once they are spooled.
TEST_F(PersistedTest, KeptBlocksTakeAtMostAnEighthOfTheBudgetAndCountInIt) {
  IngestOptions o = Options();
  o.memory_budget_bytes = 64 << 10;  // a cache of 8 KiB
  o.limits.max_rows = 1 << 20;       // nothing is flushed before the batch delay
  Start(o);
  const uint64_t block_bytes = Rows(0, 20).ByteSize();
  ASSERT_GT(60 * block_bytes, 2 * (o.memory_budget_bytes / 8)) << "the test must fill the cache";
  for (uint64_t i = 0; i < 60; ++i) SubmitPersisted(Rows(i * 20, 20));
  const uint64_t cache = o.memory_budget_bytes / 8;
  // Kept: at most the cache, at least the cache less one block.
  EXPECT_TRUE(ingestor_->Reserve(o.memory_budget_bytes - cache).ok()) << "more than 1/8 kept";
  EXPECT_FALSE(ingestor_->Reserve(o.memory_budget_bytes - cache + block_bytes + 1).ok())
      << "the kept blocks are not counted in the budget";
  // The batch delay: every record goes, the kept blocks and the ones read back alike, and the
  // budget is whole again.
  for (int i = 0; i < 10 && spool_->Stats().pending_records > 0; ++i) FlushDue();
  EXPECT_EQ(spool_->Stats().pending_records, 0u);
  EXPECT_TRUE(ingestor_->Reserve(o.memory_budget_bytes).ok()) << "kept bytes not given back";
}

// docs/spool.md: a spooled batch is retried until ClickHouse commits it, each attempt bounded by
// --retry-max-elapsed: no INSERT may wait past its window, and the windows go on past it.
TEST_F(PersistedTest, EachAttemptOfASpooledBatchIsBoundedByTheRetryElapsedTime) {
  IngestOptions o = Options();
  o.retry.max_elapsed = absl::Seconds(1);
  o.retry.max_backoff = absl::Milliseconds(200);
  Start(o);
  for (int i = 0; i < 30; ++i) inserter_.script.push_back(absl::UnavailableError("down"));
  SubmitPersisted(Rows(0, 2));
  clock_.Advance(absl::Milliseconds(250));
  const absl::Time start = clock_.Now();
  ingestor_->Poll();
  ingestor_->RunPending();
  ASSERT_EQ(inserter_.calls.size(), 31u);
  EXPECT_LE(inserter_.calls.front().deadline, start + o.retry.max_elapsed);
  for (size_t i = 1; i < inserter_.calls.size(); ++i) {
    // Each INSERT's deadline is at most one window after the one before it plus a backoff.
    EXPECT_LE(inserter_.calls[i].deadline,
              inserter_.calls[i - 1].deadline + o.retry.max_elapsed + o.retry.max_backoff)
        << i;
  }
  EXPECT_GT(inserter_.calls.back().deadline, start + o.retry.max_elapsed)
      << "the retries stopped at --retry-max-elapsed";
  EXPECT_EQ(spool_->Stats().pending_records, 0u);
}

TEST_F(PersistedTest, ABatchClickHouseRefusesForGoodGoesToTheDeadLetterDirectory) {
  Start(Options());
  inserter_.script = {ClickHouseError(53, "Type mismatch")};
  SubmitPersisted(Rows(0, 2));
  FlushDue();
  ASSERT_EQ(inserter_.calls.size(), 1u);
  EXPECT_EQ(spool_->Stats().pending_records, 0u);
  const std::string text = OnlyDeadLetter();
  EXPECT_THAT(text, HasSubstr("table: default.events"));
  EXPECT_THAT(text, HasSubstr("Type mismatch"));
  EXPECT_THAT(text, HasSubstr("rows: 2"));
}

TEST_F(PersistedTest, ErrorsAnOperatorCanFixAreRetriedWithoutEndNotDeadLettered) {
  Start(Options());
  // No space, ZooKeeper away, permissions, a table being migrated, a quota, a read-only user:
  // each fixed by someone in time, none a reason to set acknowledged rows aside.
  inserter_.script = {ClickHouseError(243, "Cannot reserve 1.00 MiB, not enough space"),
                      ClickHouseError(225, "Cannot use ZooKeeper"),
                      ClickHouseError(497, "Not enough privileges"),
                      ClickHouseError(60, "Table default.events doesn't exist"),
                      ClickHouseError(81, "Database default doesn't exist"),
                      ClickHouseError(201, "Quota for user exceeded"),
                      ClickHouseError(164, "Cannot execute query in readonly mode"),
                      ClickHouseError(242, "Table is in readonly mode"),
                      absl::DeadlineExceededError("read timed out")};
  SubmitPersisted(Rows(0, 2));
  FlushDue();
  ASSERT_EQ(inserter_.calls.size(), 10u);
  for (const InsertCall& call : inserter_.calls) {
    EXPECT_EQ(call.attempt.query_id, inserter_.calls[0].attempt.query_id);  // the same batch
    EXPECT_EQ(call.rows_text, inserter_.calls[0].rows_text);
  }
  EXPECT_EQ(spool_->Stats().pending_records, 0u);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/dead-letter"));
  EXPECT_EQ(ingestor_->Stats().rows_dropped, 0u);
}

TEST_F(PersistedTest, AReplayedBatchWithAnUnreadableRecordIsSetAsideNotSentSmaller) {
  Start(Options());
  SubmitPersisted(Rows(0, 3));  // LSN 1, the first record of the first segment
  SubmitPersisted(Rows(3, 3));  // LSN 2
  for (int i = 0; i < 100; ++i) inserter_.script.push_back(absl::UnavailableError("reset"));
  clock_.Advance(absl::Milliseconds(250));
  ingestor_->Poll();
  ingestor_->Shutdown(clock_.Now() + absl::Seconds(2));  // the intent (LSN 3) is written
  ASSERT_GE(inserter_.calls.size(), 1u);
  const std::string identity = inserter_.calls[0].attempt.deduplication_key;
  Crash();
  inserter_.calls.clear();
  inserter_.script.clear();
  // Damage on disk after the spool checked it at open: LSN 1 no longer reads back.
  const RecoverySummary summary = Start(Options(), {}, [&] {
    const std::string segment = dir_ + "/0000000000000001.wal";
    std::fstream f(segment, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << segment;
    f.seekp(spool::kSegmentHeaderSize + spool::kRecordHeaderSize + 8);
    f.put('\x7f');
  });
  EXPECT_EQ(summary.damaged_intents, 1u);
  EXPECT_EQ(summary.intents, 0u);
  FlushDue();
  ingestor_->RunPending();
  for (const InsertCall& call : inserter_.calls) {
    EXPECT_NE(call.attempt.deduplication_key, identity) << "a smaller block under the old identity";
  }
  EXPECT_TRUE(inserter_.calls.empty()) << "the readable record went out on its own";
  EXPECT_EQ(spool_->Stats().pending_records, 0u);
  const std::string text = OnlyDeadLetter();
  EXPECT_THAT(text, HasSubstr("unreadable: 1\n"));
  EXPECT_THAT(text, HasSubstr("rows: 3\n"));
}

// Records what the Ingestor reports about deduplication windows; ignores the rest.
class DedupObserver final : public testing::QuietObserver {
 public:
  void DedupWindowCovers(const std::string& table, double seconds) override {
    covers[table] = seconds;
  }
  std::map<std::string, double> covers;
};

TEST_F(PersistedTest, RowsAckedBeforeATableWidenedAColumnAreConvertedNotSetAside) {
  inserter_.id_type = "UInt16";
  inserter_.check_types = true;
  Start(Options());
  SubmitPersisted(IdRow("UInt16", 65535));
  SubmitPersisted(IdRow("UInt16", 7));
  // ALTER TABLE events MODIFY COLUMN id UInt32 before the batch goes out.
  inserter_.id_type = "UInt32";
  FlushDue();
  ASSERT_EQ(inserter_.calls.size(), 2u);
  EXPECT_EQ(inserter_.calls[1].rows_text, "65535\tx\n7\tx\n");
  EXPECT_EQ(inserter_.calls[1].attempt.query_id, inserter_.calls[0].attempt.query_id);
  EXPECT_EQ(spool_->Stats().pending_records, 0u);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/dead-letter"));
}

TEST_F(PersistedTest, RowsATablesChangedColumnCannotHoldAsTheyAreAreSetAside) {
  inserter_.id_type = "UInt32";
  inserter_.check_types = true;
  Start(Options());
  SubmitPersisted(IdRow("UInt32", 70000));
  // ALTER TABLE events MODIFY COLUMN id UInt16: 70000 would not survive.
  inserter_.id_type = "UInt16";
  FlushDue();
  ASSERT_EQ(inserter_.calls.size(), 1u);
  EXPECT_EQ(spool_->Stats().pending_records, 0u);
  ASSERT_TRUE(std::filesystem::exists(dir_ + "/dead-letter"));
  EXPECT_EQ(ingestor_->Stats().rows_dropped, 0u);
}

TEST_F(PersistedTest, TheDedupWindowIsReadAtATablesFirstSpooledFlushThenHourly) {
  DedupObserver observer;
  observer_ = &observer;
  // 100 blocks at 2 INSERTs/s: 50 s, less than a replay after a crash may take.
  inserter_.dedup = DedupWindow{
      .replicated = true, .window_blocks = 100, .window_seconds = 604800, .inserts_per_second = 2};
  Start(Options());
  SubmitPersisted(Rows(0, 2));
  FlushDue();
  ASSERT_EQ(inserter_.calls.size(), 1u);
  EXPECT_EQ(inserter_.dedup_queries, 1);
  EXPECT_DOUBLE_EQ(observer.covers["default.events"], 50);
  SubmitPersisted(Rows(2, 2));
  FlushDue();
  EXPECT_EQ(inserter_.dedup_queries, 1);
  // An hour later it is read again; with no known rate the age limit is what it covers.
  inserter_.dedup->inserts_per_second.reset();
  clock_.Advance(absl::Hours(1));
  SubmitPersisted(Rows(4, 2));
  FlushDue();
  EXPECT_EQ(inserter_.dedup_queries, 2);
  EXPECT_DOUBLE_EQ(observer.covers["default.events"], 604800);
  EXPECT_EQ(inserter_.calls.size(), 3u);
  observer_ = nullptr;
  ingestor_.reset();
}

TEST_F(PersistedTest, PersistedNeedsASpoolAndAFullSpoolRefusesWithResourceExhausted) {
  Make(Options());
  Outcome* none = Submit(Rows(0, 1), absl::Seconds(30), "events", AckMode::kPersisted);
  ASSERT_TRUE(none->done);
  EXPECT_EQ(none->result.status.code(), absl::StatusCode::kFailedPrecondition);
  ingestor_.reset();
  IngestOptions o = Options();
  o.limits.max_rows = 1 << 20;  // nothing is sent until the delay passes
  Start(o, spool::SpoolOptions{.segment_bytes = 64 << 10, .max_bytes = 128 << 10});
  absl::Status refused;
  for (int i = 0; i < 100 && refused.ok(); ++i) {
    Outcome* out = SubmitPersisted(Rows(0, 100, 20));
    ASSERT_TRUE(out->done);
    refused = out->result.status;
  }
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("spool full"));
  EXPECT_LE(spool_->Stats().disk_bytes, (128u << 10) + (64u << 10));
  // Room comes back once ClickHouse has the rows.
  FlushDue();
  ingestor_->RunPending();
  EXPECT_TRUE(SubmitPersisted(Rows(0, 1))->result.status.ok());
}

// The kernel's file calls, with reads that fail on demand, and a journal of the directory
// operations (mkdir, a directory's fsync, rename) in the order they happened.
class FlakyFileOps final : public spool::FileOps {
 public:
  void FailReads(int n) {
    absl::MutexLock l(&mu_);
    failing_reads_ = n;
  }
  std::vector<std::string> journal() {
    absl::MutexLock l(&mu_);
    return journal_;
  }

  absl::StatusOr<int> Open(const std::string& path, int flags, int mode) override {
    absl::StatusOr<int> fd = real_->Open(path, flags, mode);
    if (fd.ok() && (flags & O_DIRECTORY) != 0) {
      absl::MutexLock l(&mu_);
      dirs_[*fd] = path;
    }
    return fd;
  }
  absl::Status Close(int fd) override {
    {
      absl::MutexLock l(&mu_);
      dirs_.erase(fd);
    }
    return real_->Close(fd);
  }
  absl::StatusOr<size_t> Write(int fd, const void* data, size_t size) override {
    return real_->Write(fd, data, size);
  }
  absl::StatusOr<size_t> ReadAt(int fd, void* data, size_t size, uint64_t offset) override {
    {
      absl::MutexLock l(&mu_);
      if (failing_reads_ > 0) {
        --failing_reads_;
        return spool::ErrnoStatus(EMFILE, "pread", "(injected)");
      }
    }
    return real_->ReadAt(fd, data, size, offset);
  }
  absl::Status DataSync(int fd) override { return real_->DataSync(fd); }
  absl::Status Sync(int fd) override {
    {
      absl::MutexLock l(&mu_);
      if (auto it = dirs_.find(fd); it != dirs_.end()) journal_.push_back("sync " + it->second);
    }
    return real_->Sync(fd);
  }
  absl::Status Truncate(int fd, uint64_t size) override { return real_->Truncate(fd, size); }
  absl::StatusOr<uint64_t> FileSize(int fd) override { return real_->FileSize(fd); }
  absl::StatusOr<uint64_t> FreeBytes(const std::string& path) override {
    return real_->FreeBytes(path);
  }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    return real_->ListDir(dir);
  }
  absl::Status Rename(const std::string& from, const std::string& to) override {
    {
      absl::MutexLock l(&mu_);
      journal_.push_back("rename " + to);
    }
    return real_->Rename(from, to);
  }
  absl::Status Unlink(const std::string& path) override { return real_->Unlink(path); }
  absl::Status MakeDir(const std::string& path) override {
    {
      absl::MutexLock l(&mu_);
      journal_.push_back("mkdir " + path);
    }
    return real_->MakeDir(path);
  }
  absl::Status LockExclusive(int fd) override { return real_->LockExclusive(fd); }

 private:
  spool::FileOps* const real_ = spool::DefaultFileOps();
  absl::Mutex mu_;
  int failing_reads_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int, std::string> dirs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> journal_ ABSL_GUARDED_BY(mu_);
};

TEST_F(PersistedTest, AResendOfARequestWhoseBatchWasSentBeforeACrashIsAnsweredNotSpooledAgain) {
  Start(Options());
  Outcome* first = SubmitPersisted(Rows(0, 3), "key-1");
  ASSERT_TRUE(first->result.status.ok());
  // The batch's intent is written and its INSERT sent; whether ClickHouse committed it, chgate
  // never heard before it died.
  for (int i = 0; i < 100; ++i) inserter_.script.push_back(absl::UnavailableError("reset"));
  clock_.Advance(absl::Milliseconds(250));
  ingestor_->Poll();
  ingestor_->Shutdown(clock_.Now() + absl::Seconds(2));
  ASSERT_GE(inserter_.calls.size(), 1u);
  const std::string identity = inserter_.calls[0].attempt.deduplication_key;
  Crash();
  inserter_.calls.clear();
  inserter_.script.clear();
  EXPECT_EQ(Start(Options()).intents, 1u);
  // The caller saw no ack and sends the request again under its key.
  ExpectAnsweredAsBefore(SubmitPersisted(Rows(0, 3), "key-1"), 3);
  FlushDue();
  FlushDue();
  // Only the batch sent before the crash goes out, under its identity: nothing new.
  ASSERT_GE(inserter_.calls.size(), 1u);
  for (const InsertCall& call : inserter_.calls) {
    EXPECT_EQ(call.attempt.deduplication_key, identity);
  }
  EXPECT_EQ(spool_->Stats().pending_records, 0u);
}

TEST_F(PersistedTest, RowsTheDrainLeavesInTheSpoolStayCountedAsSpooled) {
  Start(Options());
  SubmitPersisted(Rows(0, 3));
  SubmitPersisted(Rows(3, 2));
  EXPECT_EQ(ingestor_->Stats().spooled_rows, 5u);
  for (int i = 0; i < 1000; ++i) inserter_.script.push_back(absl::UnavailableError("down"));
  clock_.Advance(absl::Milliseconds(250));
  ingestor_->Poll();
  ingestor_->Shutdown(clock_.Now() + absl::Seconds(2));  // ClickHouse stays down past it
  ASSERT_GE(inserter_.calls.size(), 1u);
  EXPECT_EQ(spool_->Stats().pending_records, 3u);  // two records and the batch's intent
  EXPECT_EQ(ingestor_->Stats().spooled_rows, 5u);
  EXPECT_EQ(ingestor_->Stats().rows_dropped, 0u);
}

TEST_F(PersistedTest, ABatchSetAsideDuringTheDrainMakesItsLogLineAnError) {
  CapturedLog captured(&clock_);
  Start(Options());
  SubmitPersisted(Rows(0, 3));
  inserter_.script = {ClickHouseError(53, "Type mismatch")};
  ingestor_->Shutdown(clock_.Now() + absl::Seconds(5));
  ASSERT_TRUE(std::filesystem::exists(dir_ + "/dead-letter"));
  const std::string line = captured.LineWith("drain finished");
  EXPECT_THAT(line, HasSubstr("\"level\":\"error\""));
  EXPECT_THAT(line, HasSubstr("\"rows_failed\":3"));
  EXPECT_THAT(line, HasSubstr("\"rows_left_in_spool\":0"));
}

TEST_F(PersistedTest, ARecordThatCannotBeReadForAMomentIsReadAgainNotGivenUp) {
  static FlakyFileOps ops;  // outlives the fixture's spool
  IngestOptions o = Options();
  o.spool_cache_bytes = 1;  // no block kept in memory: each is read back from the spool
  Start(o, spool::SpoolOptions{.file_ops = &ops});
  SubmitPersisted(Rows(0, 2));
  SubmitPersisted(Rows(2, 2));
  ops.FailReads(3);  // no file descriptor to spare, say
  FlushDue();
  ASSERT_EQ(inserter_.calls.size(), 1u);
  EXPECT_EQ(inserter_.calls[0].rows_text, "0\txxx\n1\txxx\n2\txxx\n3\txxx\n");
  EXPECT_EQ(ingestor_->Stats().rows_dropped, 0u);
  EXPECT_EQ(spool_->Stats().pending_records, 0u);
  // Still failing when the drain ends: the batch waits in the spool for the next start.
  SubmitPersisted(Rows(4, 2));
  ops.FailReads(1000000);
  ingestor_->Shutdown(clock_.Now() + absl::Seconds(2));
  ops.FailReads(0);
  EXPECT_EQ(inserter_.calls.size(), 1u);
  EXPECT_EQ(ingestor_->Stats().rows_dropped, 0u);
  EXPECT_EQ(ingestor_->Stats().spooled_rows, 2u);
  EXPECT_EQ(spool_->Stats().pending_records, 1u);
  Crash();  // before `ops` goes
}

TEST_F(PersistedTest, ARecordThatCannotBeReadForAMomentAtTheStartIsReadAgainNotDropped) {
  static FlakyFileOps ops;  // outlives the fixture's spool
  Start(Options(), spool::SpoolOptions{.file_ops = &ops});
  SubmitPersisted(Rows(0, 2));
  Crash();
  // The spool's own scan reads the segments; the records' headers are read back after it.
  const RecoverySummary summary =
      Start(Options(), spool::SpoolOptions{.file_ops = &ops}, [] { ops.FailReads(3); });
  EXPECT_EQ(summary.records, 1u);
  EXPECT_EQ(summary.unreadable, 0u);
  FlushDue();
  ASSERT_EQ(inserter_.calls.size(), 1u);
  EXPECT_EQ(inserter_.calls[0].rows_text, "0\txxx\n1\txxx\n");
  EXPECT_EQ(spool_->Stats().pending_records, 0u);
  Crash();  // before `ops` goes
}

TEST_F(PersistedTest, TheDeadLetterDirectoryIsDurableBeforeABatchIsMovedIntoIt) {
  static FlakyFileOps ops;  // outlives the fixture's spool
  Start(Options(), spool::SpoolOptions{.file_ops = &ops});
  SubmitPersisted(Rows(0, 3));
  inserter_.script = {ClickHouseError(53, "Type mismatch")};
  FlushDue();
  ASSERT_TRUE(std::filesystem::exists(dir_ + "/dead-letter"));
  // The new directory's entry is synced in the spool directory before the letter is written in
  // it (and the spool's records of the batch let go only after that).
  const std::vector<std::string> journal = ops.journal();
  const auto mkdir = std::find(journal.begin(), journal.end(), "mkdir " + dir_ + "/dead-letter");
  ASSERT_NE(mkdir, journal.end());
  const auto synced = std::find(mkdir, journal.end(), "sync " + dir_);
  const auto renamed = std::find_if(mkdir, journal.end(), [](const std::string& e) {
    return absl::StartsWith(e, "rename ") && absl::StrContains(e, "/dead-letter/");
  });
  ASSERT_NE(renamed, journal.end());
  EXPECT_LT(synced, renamed) << absl::StrJoin(journal, "\n");
  Crash();  // before `ops` goes
}

TEST_F(PersistedTest, ATableChangeTheDrainHasNoTimeToLookAtLeavesTheBatchInTheSpool) {
  inserter_.id_type = "UInt32";
  inserter_.check_types = true;
  Start(Options());
  SubmitPersisted(IdRow("UInt32", 7));
  // ALTER TABLE events MODIFY COLUMN id UInt64, then ClickHouse stops answering lookups: whether
  // the new column takes the rows is not learnt before the drain ends.
  inserter_.id_type = "UInt64";
  inserter_.describe_error = absl::UnavailableError("connection refused");
  ingestor_->Shutdown(clock_.Now() + absl::Seconds(2));
  ASSERT_GE(inserter_.calls.size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/dead-letter"));
  EXPECT_EQ(spool_->Stats().pending_records, 2u);  // the record and the batch's intent
  EXPECT_EQ(ingestor_->Stats().spooled_rows, 1u);
  // After the restart the table answers, and the rows go in converted.
  Crash();
  inserter_.describe_error = absl::OkStatus();
  inserter_.calls.clear();
  Start(Options());
  FlushDue();
  ASSERT_FALSE(inserter_.calls.empty());
  EXPECT_EQ(inserter_.calls.back().rows_text, "7\tx\n");
  EXPECT_EQ(spool_->Stats().pending_records, 0u);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/dead-letter"));
}

}  // namespace
}  // namespace chgate::ingest
