// QueryRun's steps against a scripted ClickHouse, without gRPC: a fake call records what would go
// to the client and a fake clock decides every time the run reads (coalescing, deadline ->
// max_execution_time, elapsed). The fake server waits on the fake call where the order of events
// matters, so nothing sleeps to synchronise and nothing asserts on real durations.
#include "server/service/query_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/pool.h"
#include "server/clickhouse/protocol/client_reader.h"
#include "server/clickhouse/protocol/error_codes.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/metrics/metrics.h"
#include "tests/unit/clickhouse/fake_server.h"
#include "tests/unit/ingest/fake_clock.h"

namespace chgate::service {
namespace {

namespace ch = clickhouse;
namespace cht = clickhouse::testing;

constexpr uint64_t kRevision = 54460;

// What the fake servers' system.settings holds (name, type), for queries that send settings.
const std::vector<std::pair<std::string, std::string>> kServerCatalog = {
    {"max_execution_time", "Seconds"},
    {"max_threads", "MaxThreads"},
    {"readonly", "UInt64"},
    {"totals_mode", "TotalsMode"},
    {"extremes", "Bool"},
    {"totals_auto_threshold", "Float"},
};
// Bounds every wait of a test on another thread; reached only when a test fails.
constexpr absl::Duration kWaitLimit = absl::Seconds(10);

using ingest::testing::FakeClock;

// Records the responses a run queues for its client.
class FakeCall final : public QueryCall {
 public:
  FakeCall(v1::QueryRequest request, absl::Time deadline)
      : request_(std::move(request)), deadline_(deadline) {}

  const v1::QueryRequest& request() const override { return request_; }
  absl::Time deadline() const override { return deadline_; }
  bool cancelled() const override { return cancelled_.load(); }
  bool shutting_down() const override { return false; }
  bool Send(QueryMessage message, size_t* bytes) override {
    *bytes = message.ByteSize();
    message.Materialize();
    absl::MutexLock lock(&mu_);
    if (sends_left_ == 0) return false;
    --sends_left_;
    responses_.push_back(std::move(message.response));
    return true;
  }
  v1::Block* TakeBlock() override { return new v1::Block(); }

  void Cancel() { cancelled_.store(true); }
  // Sends after the first `n` fail, as when the client went away.
  void FailSendsAfter(size_t n) {
    absl::MutexLock lock(&mu_);
    sends_left_ = n;
  }
  std::vector<v1::QueryResponse> responses() const {
    absl::MutexLock lock(&mu_);
    return responses_;
  }
  // Waits until `done` holds for the responses so far; false when it did not within kWaitLimit.
  bool WaitFor(std::function<bool(const std::vector<v1::QueryResponse>&)> done) const {
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done(responses_); };
    return mu_.AwaitWithTimeout(absl::Condition(&ready), kWaitLimit);
  }

 private:
  const v1::QueryRequest request_;
  const absl::Time deadline_;
  std::atomic<bool> cancelled_{false};
  mutable absl::Mutex mu_;
  std::vector<v1::QueryResponse> responses_ ABSL_GUARDED_BY(mu_);
  size_t sends_left_ ABSL_GUARDED_BY(mu_) = SIZE_MAX;
};

size_t Count(const std::vector<v1::QueryResponse>& responses, v1::QueryResponse::KindCase kind) {
  size_t n = 0;
  for (const v1::QueryResponse& r : responses) n += r.kind_case() == kind ? 1 : 0;
  return n;
}

// Parses one client Query packet at kRevision.
ch::QueryParams ParseQuery(std::string_view bytes) {
  absl::StatusOr<cht::ClientQuery> q = cht::DecodeClientQuery(bytes, kRevision);
  EXPECT_TRUE(q.ok()) << q.status();
  return q.ok() ? q->query : ch::QueryParams{};
}

std::string SettingValue(const ch::QueryParams& query, std::string_view name) {
  for (const auto& s : query.settings) {
    if (s.name == name) return s.value;
  }
  return "<unset>";
}

v1::QueryRequest Request(std::string sql) {
  v1::QueryRequest request;
  request.set_sql(std::move(sql));
  return request;
}

class QueryRunTest : public ::testing::Test {
 protected:
  // Starts `fake` and a one-connection pool to it.
  void Start(cht::FakeServer& fake) {
    fake.Start();
    pool_ = std::make_unique<ch::Pool>(cht::OneConnectionPool(fake.port()));
    pool_->Start();
  }

  void TearDown() override {
    if (pool_ != nullptr) pool_->Shutdown();
  }

  absl::Status Run(FakeCall& call, QueryObserver* observer = nullptr) {
    return QueryRun(&call, pool_.get(), options_, observer, &clock_).Run();
  }

  // Idle connections in the pool: 1 after a run that handed its connection back, 0 after one
  // that closed it.
  uint64_t Idle() const { return pool_->Stats()[0].idle; }

  // Runs `sql` with the call's deadline `timeout` after the fake clock's now and returns the
  // max_execution_time ClickHouse received.
  std::string MaxExecutionTimeFor(absl::Duration timeout, v1::QueryRequest request) {
    cht::FakeServer fake({.revision = kRevision});
    ch::QueryParams seen;
    fake.Handshake();
    cht::ServeSettings(fake, kRevision, kServerCatalog);
    // A new fake may get an old one's port: read its catalog again.
    options_.server_catalog = std::make_shared<ch::ServerCatalogCache>();
    fake.ExpectPacket(cht::ClientPacket::kQuery,
                      [&](std::string_view bytes) { seen = ParseQuery(bytes); });
    fake.ExpectPacket(cht::ClientPacket::kData);
    fake.Send(cht::EndOfStreamPacket());
    Start(fake);
    FakeCall call(std::move(request), clock_.Now() + timeout);
    const absl::Status status = Run(call);
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_TRUE(fake.Wait().ok());
    pool_->Shutdown();
    pool_.reset();
    return SettingValue(seen, "max_execution_time");
  }

  FakeClock clock_;
  QueryServiceOptions options_;
  std::unique_ptr<ch::Pool> pool_;
};

// A builder of messages of about `target` bytes that keeps what it sends in `sent`.
ResponseBuilder CollectingBuilder(size_t target, std::vector<QueryMessage>* sent,
                                  FakeClock* clock) {
  return ResponseBuilder(
      target,
      [sent](QueryMessage m) {
        sent->push_back(std::move(m));
        return true;
      },
      [] { return new v1::Block(); }, clock);
}

bool AddBlock(ResponseBuilder& builder, ch::Block block) { return builder.Add(&block); }

TEST(ResponseBuilderTest, PendingRowsDateFromTheFirstOneAndGoOutTogether) {
  FakeClock clock;
  std::vector<QueryMessage> sent;
  ResponseBuilder builder = CollectingBuilder(1 << 20, &sent, &clock);
  const absl::Time first = clock.Now();
  ASSERT_TRUE(AddBlock(builder, cht::MakeBlock({{"x", cht::UInt64Column({1, 2})}})));
  clock.Advance(absl::Milliseconds(15));
  ASSERT_TRUE(AddBlock(builder, cht::MakeBlock({{"x", cht::UInt64Column({3})}})));
  EXPECT_TRUE(sent.empty());
  EXPECT_EQ(builder.pending_rows(), 3u);
  EXPECT_EQ(builder.pending_since(), first);

  ASSERT_TRUE(builder.Flush());
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].response.block().rows(), 3u);
  EXPECT_EQ(builder.rows(), 3u);
  EXPECT_EQ(builder.blocks(), 1u);
  // The next pending rows date from their own arrival.
  clock.Advance(absl::Milliseconds(15));
  ASSERT_TRUE(AddBlock(builder, cht::MakeBlock({{"x", cht::UInt64Column({4})}})));
  EXPECT_EQ(builder.pending_since(), first + absl::Milliseconds(30));
}

TEST(ResponseBuilderTest, SplitsABlockLargerThanTheTarget) {
  FakeClock clock;
  std::vector<QueryMessage> sent;
  // 8 bytes a row: four rows fill a 32-byte message.
  ResponseBuilder builder = CollectingBuilder(32, &sent, &clock);
  ASSERT_TRUE(
      AddBlock(builder, cht::MakeBlock({{"x", cht::UInt64Column({1, 2, 3, 4, 5, 6, 7, 8})}})));
  ASSERT_TRUE(builder.Flush());
  uint64_t rows = 0;
  for (const QueryMessage& m : sent) {
    EXPECT_LE(m.response.block().rows() * 8, 32u);
    rows += m.response.block().rows();
  }
  EXPECT_GT(sent.size(), 1u);
  EXPECT_EQ(rows, 8u);
  EXPECT_EQ(builder.blocks(), sent.size());
}

// A block of `rows` rows: n UInt64 (first + i), s String ("v<i>"), u UUID.
ch::Block NumbersBlock(uint64_t first, size_t rows) {
  ch::ColumnPtr n = cht::MakeColumn("UInt64");
  ch::ColumnPtr str = cht::MakeColumn("String");
  ch::ColumnPtr u = cht::MakeColumn("UUID");
  for (uint64_t i = first; i < first + rows; ++i) {
    static_cast<ch::ColumnFixed&>(*n).Append(i);
    static_cast<ch::ColumnString&>(*str).Append("v" + std::to_string(i));
    const uint64_t halves[2] = {i, ~i};
    static_cast<ch::ColumnFixed&>(*u).AppendRaw(halves);
  }
  return cht::MakeBlock({{"n", n}, {"s", str}, {"u", u}});
}

TEST(ResponseBuilderTest, LargeFixedColumnsGoOutFromTheBlocksOwnMemory) {
  FakeClock clock;
  std::vector<QueryMessage> sent;
  // 16,000 rows of about 39 bytes in the response: two full messages of 256 KiB and a rest that
  // waits for more.
  ResponseBuilder builder = CollectingBuilder(256 << 10, &sent, &clock);
  ch::Block large = NumbersBlock(0, 16000);
  const char* const values = static_cast<const ch::ColumnFixed&>(*large.column(0).column).data();
  ASSERT_TRUE(builder.Add(&large));
  // The numbers' buffer moved into the messages; the column is ready for the next block.
  EXPECT_EQ(large.column(0).column->Size(), 0u);
  EXPECT_EQ(large.column(1).column->Size(), 16000u) << "only whole-value fixed columns move";
  // A small block after it is copied, in order, into the same pending message.
  ch::Block small = NumbersBlock(16000, 10);
  ASSERT_TRUE(builder.Add(&small));
  EXPECT_EQ(small.column(0).column->Size(), 10u);
  ASSERT_TRUE(builder.Flush());
  ASSERT_EQ(sent.size(), 3u);

  uint64_t next = 0;
  size_t referenced = 0;
  for (QueryMessage& m : sent) {
    ASSERT_EQ(m.held.size(), 1u) << "only the UInt64 column is held";
    EXPECT_EQ(m.held[0].column, 0);
    for (const HeldBytes& range : m.held[0].ranges) {
      if (range.data >= values && range.data < values + 16000 * 8) ++referenced;
    }
    const size_t size = m.ByteSize();
    m.Materialize();
    EXPECT_EQ(size, m.response.ByteSizeLong());
    const v1::Block& block = m.response.block();
    ASSERT_EQ(block.columns_size(), 3);
    ASSERT_EQ(block.columns(0).data().size(), block.rows() * 8);
    ASSERT_EQ(block.columns(2).data().size(), block.rows() * 16);
    ASSERT_EQ(static_cast<uint64_t>(block.columns(1).offsets_size()), block.rows());
    for (uint64_t r = 0; r < block.rows(); ++r, ++next) {
      uint64_t v;
      std::memcpy(&v, block.columns(0).data().data() + r * 8, 8);
      ASSERT_EQ(v, next);
      const uint64_t begin = r == 0 ? 0 : block.columns(1).offsets(static_cast<int>(r) - 1);
      ASSERT_EQ(block.columns(1).data().substr(
                    begin, block.columns(1).offsets(static_cast<int>(r)) - begin),
                "v" + std::to_string(next));
    }
  }
  EXPECT_EQ(next, 16010u);
  EXPECT_EQ(referenced, sent.size()) << "each message references the block's own values";
}

TEST(ResponseBuilderTest, AHeldBufferComesBackForALaterBlockWhenItsMessagesAreGone) {
  FakeClock clock;
  std::vector<QueryMessage> sent;
  ResponseBuilder builder = CollectingBuilder(1 << 20, &sent, &clock);
  auto values_of = [](const ch::Block& block) {
    return static_cast<const ch::ColumnFixed&>(*block.column(0).column).values().data();
  };
  ch::Block first = NumbersBlock(0, 10000);
  ASSERT_TRUE(builder.Add(&first));
  ASSERT_TRUE(builder.Flush());
  ch::Block second = NumbersBlock(0, 10000);
  ASSERT_TRUE(builder.Add(&second));
  ASSERT_TRUE(builder.Flush());
  // While messages hold both buffers, nothing comes back: the column gets an empty one.
  ch::Block third = NumbersBlock(0, 10000);
  const char* const third_values = values_of(third);
  ASSERT_TRUE(builder.Add(&third));
  EXPECT_EQ(static_cast<const ch::ColumnFixed&>(*third.column(0).column).values().capacity(), 0u);
  ASSERT_TRUE(builder.Flush());
  sent.clear();  // written and released: the three buffers go back, `third`'s last
  ch::Block fourth = NumbersBlock(0, 10000);
  ASSERT_TRUE(builder.Add(&fourth));
  const ch::ByteBuffer& given =
      static_cast<const ch::ColumnFixed&>(*fourth.column(0).column).values();
  EXPECT_EQ(given.size(), 0u);
  EXPECT_GE(given.capacity(), 10000u * 8);
  EXPECT_EQ(values_of(fourth), third_values) << "the most recently returned buffer is reused";
}

TEST(ColumnBufferPoolTest, ABufferComesBackWhenItsLastReferenceGoesAndAtMostTheLimitIsKept) {
  auto pool = std::make_shared<ColumnBufferPool>(1);
  ch::ByteBuffer buffer;
  buffer.resize(1000);
  const char* const memory = buffer.data();
  std::shared_ptr<const ch::ByteBuffer> held = pool->Hold(std::move(buffer));
  std::shared_ptr<const ch::ByteBuffer> also = held;
  held.reset();
  EXPECT_EQ(pool->Take().capacity(), 0u) << "still referenced";
  also.reset();
  ch::ByteBuffer back = pool->Take();
  EXPECT_EQ(back.size(), 0u);
  EXPECT_GE(back.capacity(), 1000u);
  EXPECT_EQ(back.data(), memory);

  ch::ByteBuffer x, y;
  x.resize(10);
  y.resize(10);
  pool->Hold(std::move(x)).reset();
  pool->Hold(std::move(y)).reset();  // freed: one is kept
  EXPECT_GT(pool->Take().capacity(), 0u);
  EXPECT_EQ(pool->Take().capacity(), 0u);
}

TEST_F(QueryRunTest, StreamsHeaderRowsAndSummaryTimedByTheClock) {
  cht::FakeServer fake({.revision = kRevision});
  fake.Handshake();
  cht::ServeSettings(fake, kRevision, kServerCatalog);
  fake.ExpectPacket(cht::ClientPacket::kQuery);
  fake.ExpectPacket(cht::ClientPacket::kData);
  fake.Send(cht::DataPacket(cht::HeaderBlock({{"x", "UInt64"}}), kRevision));
  fake.Call([&] { clock_.Advance(absl::Milliseconds(1500)); });
  fake.Send(cht::DataPacket(cht::MakeBlock({{"x", cht::UInt64Column({1, 2, 3})}}), kRevision));
  fake.Send(cht::ProfileInfoPacket({.rows = 3, .blocks = 1, .bytes = 24}, kRevision));
  fake.Send(cht::EndOfStreamPacket());
  Start(fake);

  metrics::Metrics metrics;
  v1::QueryRequest request = Request("SELECT x FROM t");
  request.set_query_id("q-run");
  FakeCall call(request, clock_.Now() + absl::Seconds(30));
  const absl::Status status = Run(call, metrics.query_observer());
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(fake.Wait().ok());

  const std::vector<v1::QueryResponse> responses = call.responses();
  ASSERT_EQ(responses.size(), 3u);
  ASSERT_TRUE(responses[0].has_header());
  EXPECT_EQ(responses[0].header().query_id(), "q-run");
  EXPECT_EQ(responses[0].header().timezone(), "UTC");
  EXPECT_EQ(responses[1].block().rows(), 3u);
  ASSERT_TRUE(responses[2].has_summary());
  const v1::QuerySummary& summary = responses[2].summary();
  EXPECT_EQ(summary.rows(), 3u);
  EXPECT_EQ(summary.blocks(), 1u);
  EXPECT_EQ(summary.query_id(), "q-run");
  EXPECT_EQ(summary.profile_info().rows(), 3u);
  // Elapsed time is the fake clock's: the 1.5 s the server "took".
  EXPECT_EQ(summary.elapsed().seconds(), 1);
  EXPECT_EQ(summary.elapsed().nanos(), 500000000);
  // So is the duration metric; the rows streamed are counted.
  const auto duration = metrics.query().duration->Collect().histogram;
  EXPECT_EQ(duration.sample_count, 1u);
  EXPECT_DOUBLE_EQ(duration.sample_sum, 1.5);
  EXPECT_DOUBLE_EQ(metrics.query().rows->Value(), 3.0);
  EXPECT_DOUBLE_EQ(metrics.query().in_flight->Value(), 0.0);
  // A plain SELECT hands its connection back.
  EXPECT_EQ(Idle(), 1u);
}

// Rows wait for more until coalesce_delay after the first of them, by the injected clock: at
// delay - 1 ms two blocks are still one pending message; at the delay it goes out, while the
// server still holds back the rest of the result.
TEST_F(QueryRunTest, CoalescesRowsUntilTheDelayAfterTheFirstOne) {
  options_.coalesce_delay = absl::Milliseconds(20);
  v1::QueryRequest request = Request("SELECT x FROM t");
  request.set_send_progress(true);
  FakeCall call(request, clock_.Now() + absl::Seconds(30));
  auto progress_count = [](size_t n) {
    return [n](const std::vector<v1::QueryResponse>& r) {
      return Count(r, v1::QueryResponse::kProgress) >= n;
    };
  };
  absl::Notification at_second_progress, release;

  cht::FakeServer fake({.revision = kRevision});
  fake.Handshake();
  cht::ServeSettings(fake, kRevision, kServerCatalog);
  fake.ExpectPacket(cht::ClientPacket::kQuery);
  fake.ExpectPacket(cht::ClientPacket::kData);
  fake.Send(cht::DataPacket(cht::HeaderBlock({{"x", "UInt64"}}), kRevision));
  fake.Send(cht::DataPacket(cht::MakeBlock({{"x", cht::UInt64Column({1})}}), kRevision));
  // Progress after a block reaches the call only once the block's rows are pending.
  fake.Send(cht::ProgressPacket({.rows = 1}, kRevision));
  fake.Call([&] {
    ASSERT_TRUE(call.WaitFor(progress_count(1)));
    clock_.Advance(absl::Milliseconds(19));
  });
  fake.Send(cht::DataPacket(cht::MakeBlock({{"x", cht::UInt64Column({2})}}), kRevision));
  fake.Send(cht::ProgressPacket({.rows = 1}, kRevision));
  fake.Call([&] {
    at_second_progress.Notify();
    release.WaitForNotificationWithTimeout(kWaitLimit);
  });
  fake.Send(cht::EndOfStreamPacket());
  Start(fake);

  absl::Status status;
  std::thread runner([&] { status = Run(call); });
  ASSERT_TRUE(at_second_progress.WaitForNotificationWithTimeout(kWaitLimit));
  ASSERT_TRUE(call.WaitFor(progress_count(2)));
  // 19 ms after the first row: nothing went out yet.
  EXPECT_EQ(Count(call.responses(), v1::QueryResponse::kBlock), 0u);
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(call.WaitFor([](const std::vector<v1::QueryResponse>& r) {
    return Count(r, v1::QueryResponse::kBlock) == 1;
  }));
  release.Notify();
  runner.join();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(fake.Wait().ok());

  const std::vector<v1::QueryResponse> responses = call.responses();
  ASSERT_EQ(responses.size(), 5u);
  EXPECT_TRUE(responses[0].has_header());
  EXPECT_TRUE(responses[1].has_progress());
  EXPECT_TRUE(responses[2].has_progress());
  ASSERT_TRUE(responses[3].has_block());
  EXPECT_EQ(responses[3].block().rows(), 2u);  // both blocks, one message
  ASSERT_TRUE(responses[4].has_summary());
  EXPECT_EQ(responses[4].summary().blocks(), 1u);
}

TEST_F(QueryRunTest, DeadlineBecomesMaxExecutionTimeInWholeSecondsRoundedUp) {
  EXPECT_EQ(MaxExecutionTimeFor(absl::Milliseconds(2300), Request("SELECT 1")), "3");
  EXPECT_EQ(MaxExecutionTimeFor(absl::Seconds(2), Request("SELECT 1")), "2");
  // At least one second, however close the deadline.
  EXPECT_EQ(MaxExecutionTimeFor(absl::Milliseconds(250), Request("SELECT 1")), "1");
  // The caller's own limit stands when it is the shorter one, and not otherwise.
  v1::QueryRequest shorter = Request("SELECT 1");
  (*shorter.mutable_settings())["max_execution_time"] = "4";
  EXPECT_EQ(MaxExecutionTimeFor(absl::Seconds(60), shorter), "4");
  v1::QueryRequest longer = Request("SELECT 1");
  (*longer.mutable_settings())["max_execution_time"] = "100";
  EXPECT_EQ(MaxExecutionTimeFor(absl::Milliseconds(59500), longer), "60");
}

TEST_F(QueryRunTest, MaxExecutionTimeNotInWholeSecondsIsInvalid) {
  cht::FakeServer fake({.revision = kRevision});
  fake.Handshake();
  cht::ServeSettings(fake, kRevision, kServerCatalog);
  Start(fake);
  v1::QueryRequest request = Request("SELECT 1");
  (*request.mutable_settings())["max_execution_time"] = "1.5";
  FakeCall call(request, clock_.Now() + absl::Seconds(30));
  const absl::Status status = Run(call);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "setting max_execution_time needs an unsigned integer, got '1.5'");
  EXPECT_TRUE(call.responses().empty());
  EXPECT_TRUE(fake.Wait().ok());
  EXPECT_EQ(Idle(), 1u);
}

// A setting the server does not know, a value its type refuses, or a type chgate cannot check on
// this server: INVALID_ARGUMENT, and the connection never sees the query (the fake's script ends
// after the settings read, and would fail on any other packet); it goes back to the pool in step.
TEST_F(QueryRunTest, SettingsTheServerWouldMisreadAreNeverSent) {
  struct Case {
    std::string name, value, message;
  };
  const Case cases[] = {
      {"join_strict_ness", "-", "setting join_strict_ness is not known to this ClickHouse server"},
      {"totals_mode", "auto", "setting totals_mode needs one of 'before_having'"},
      {"max_threads", "-1", "setting max_threads needs an unsigned integer, got '-1'"},
      {"extremes", "yes", "setting extremes needs 0, 1, true or false, got 'yes'"},
      {"totals_auto_threshold", "nan", "setting totals_auto_threshold needs a finite decimal"},
      // The server types it otherwise than chgate's catalog does.
      {"max_block_size", "10", "setting max_block_size has type String on this ClickHouse"},
      // Outside the catalog, of a type chgate cannot check.
      {"mystery", "1", "setting mystery cannot be checked for this ClickHouse server"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    cht::FakeServer fake({.revision = kRevision});
    fake.Handshake();
    std::vector<std::pair<std::string, std::string>> server = kServerCatalog;
    server.emplace_back("max_block_size", "String");
    server.emplace_back("mystery", "Map");
    cht::ServeSettings(fake, kRevision, server);
    // A new fake may get an old one's port: read its catalog again.
    options_.server_catalog = std::make_shared<ch::ServerCatalogCache>();
    Start(fake);
    v1::QueryRequest request = Request("SELECT 1");
    (*request.mutable_settings())[c.name] = c.value;
    FakeCall call(request, clock_.Now() + absl::Seconds(30));
    const absl::Status status = Run(call);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_TRUE(absl::StartsWith(status.message(), c.message)) << status.message();
    EXPECT_TRUE(call.responses().empty());
    EXPECT_TRUE(fake.Wait().ok());
    EXPECT_EQ(Idle(), 1u);
    pool_->Shutdown();
    pool_.reset();
  }
}

// Below revision 54429 (ClickHouse 18.16 and older) a setting travels in its type's binary form:
// one outside chgate's catalog is never sent, even when the server knows the name.
TEST_F(QueryRunTest, BelowStringSettingsOnlyCatalogSettingsAreSent) {
  constexpr uint64_t kOld = 54412;
  cht::FakeServer fake({.revision = kOld});
  fake.Handshake();
  cht::ServeSettings(fake, kOld, {{"max_threads", ""}, {"poll_interval", ""}}, /*typed=*/false);
  Start(fake);
  v1::QueryRequest request = Request("SELECT 1");
  (*request.mutable_settings())["poll_interval"] = "10";
  FakeCall call(request, clock_.Now() + absl::Seconds(30));
  const absl::Status status = Run(call);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "chgate does not know how the server reads"))
      << status.message();
  EXPECT_TRUE(fake.Wait().ok());
  EXPECT_EQ(Idle(), 1u);
}

// The deadline passes (by the fake clock) while ClickHouse runs the query: Cancel goes out, the
// server ends the query, and the drained connection goes back to the pool.
TEST_F(QueryRunTest, DeadlineCancelsTheQueryAndKeepsTheDrainedConnection) {
  cht::FakeServer fake({.revision = kRevision});
  fake.Handshake();
  cht::ServeSettings(fake, kRevision, kServerCatalog);
  fake.ExpectPacket(cht::ClientPacket::kQuery);
  fake.ExpectPacket(cht::ClientPacket::kData);
  fake.Send(cht::DataPacket(cht::HeaderBlock({{"x", "UInt64"}}), kRevision));
  fake.Call([&] { clock_.Advance(absl::Seconds(5)); });
  fake.ExpectPacket(cht::ClientPacket::kCancel);
  fake.Send(cht::EndOfStreamPacket());
  Start(fake);

  FakeCall call(Request("SELECT sleep(10)"), clock_.Now() + absl::Seconds(5));
  const absl::Status status = Run(call);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(status.message(), "the call's deadline passed; the query was cancelled in ClickHouse");
  EXPECT_TRUE(fake.Wait().ok());
  EXPECT_EQ(Count(call.responses(), v1::QueryResponse::kSummary), 0u);
  EXPECT_EQ(Idle(), 1u);
}

// A client that goes away mid-result (its sends fail) stops the query the same way.
TEST_F(QueryRunTest, FailedSendCancelsTheQuery) {
  cht::FakeServer fake({.revision = kRevision});
  fake.Handshake();
  cht::ServeSettings(fake, kRevision, kServerCatalog);
  fake.ExpectPacket(cht::ClientPacket::kQuery);
  fake.ExpectPacket(cht::ClientPacket::kData);
  fake.Send(cht::DataPacket(cht::HeaderBlock({{"x", "UInt64"}}), kRevision));
  fake.ExpectPacket(cht::ClientPacket::kCancel);
  fake.Send(cht::EndOfStreamPacket());
  Start(fake);

  FakeCall call(Request("SELECT x FROM t"), clock_.Now() + absl::Seconds(30));
  call.FailSendsAfter(0);
  const absl::Status status = Run(call);
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(status.message(), "the caller cancelled; the query was cancelled in ClickHouse");
  EXPECT_TRUE(fake.Wait().ok());
  EXPECT_EQ(Idle(), 1u);
}

// A server that does not answer Cancel within cancel_drain_timeout: the connection is closed
// rather than handed to the next query with the old result still in flight.
TEST_F(QueryRunTest, UndrainedCancelClosesTheConnection) {
  options_.cancel_drain_timeout = absl::Milliseconds(50);
  FakeCall call(Request("SELECT x FROM t"), clock_.Now() + absl::Seconds(30));
  cht::FakeServer fake({.revision = kRevision});
  fake.Handshake();
  cht::ServeSettings(fake, kRevision, kServerCatalog);
  fake.ExpectPacket(cht::ClientPacket::kQuery);
  fake.ExpectPacket(cht::ClientPacket::kData);
  fake.Send(cht::DataPacket(cht::HeaderBlock({{"x", "UInt64"}}), kRevision));
  fake.Call([&] { call.Cancel(); });
  fake.Stall();
  Start(fake);

  const absl::Status status = Run(call);
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(status.message(), "the caller cancelled; the query was cancelled in ClickHouse");
  EXPECT_EQ(Idle(), 0u);
  EXPECT_EQ(pool_->Stats()[0].in_use, 0u);
  EXPECT_TRUE(fake.Wait().ok());
}

TEST_F(QueryRunTest, CancelledBeforeStartNeverTakesAConnection) {
  cht::FakeServer fake({.revision = kRevision});
  Start(fake);
  FakeCall call(Request("SELECT 1"), clock_.Now() + absl::Seconds(30));
  call.Cancel();
  const absl::Status status = Run(call);
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(status.message(), "query cancelled before it started");
  EXPECT_EQ(pool_->Stats()[0].connects, 0u);
}

// Naming a database switches the connection with USE, so it is closed afterwards.
TEST_F(QueryRunTest, ConnectionSwitchedToAnotherDatabaseIsDiscarded) {
  cht::FakeServer fake({.revision = kRevision});
  ch::QueryParams use, select;
  fake.Handshake();
  cht::ServeSettings(fake, kRevision, kServerCatalog);
  fake.ExpectPacket(cht::ClientPacket::kQuery, [&](std::string_view b) { use = ParseQuery(b); });
  fake.ExpectPacket(cht::ClientPacket::kData);
  fake.Send(cht::EndOfStreamPacket());
  fake.ExpectPacket(cht::ClientPacket::kQuery, [&](std::string_view b) { select = ParseQuery(b); });
  fake.ExpectPacket(cht::ClientPacket::kData);
  fake.Send(cht::EndOfStreamPacket());
  Start(fake);

  v1::QueryRequest request = Request("SELECT 1");
  request.set_database("other db");
  FakeCall call(request, clock_.Now() + absl::Seconds(30));
  const absl::Status status = Run(call);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(fake.Wait().ok());
  EXPECT_EQ(use.query, "USE `other db`");
  EXPECT_EQ(select.query, "SELECT 1");
  EXPECT_EQ(Idle(), 0u);
}

// ClickHouse's read-only refusal tells the caller how to allow writes.
TEST_F(QueryRunTest, ReadOnlyRefusalNamesTheOption) {
  cht::FakeServer fake({.revision = kRevision});
  fake.Handshake();
  cht::ServeSettings(fake, kRevision, kServerCatalog);
  fake.ExpectPacket(cht::ClientPacket::kQuery);
  fake.ExpectPacket(cht::ClientPacket::kData);
  fake.Send(cht::ExceptionPacket(
      {{.code = ch::error_code::kReadonly, .message = "Cannot execute query in readonly mode"}}));
  // An exception before any data is followed by a Ping that settles the connection.
  fake.ExpectPacket(cht::ClientPacket::kPing);
  fake.Send(cht::PongPacket());
  Start(fake);

  FakeCall call(Request("SELECT 1"), clock_.Now() + absl::Seconds(30));
  const absl::Status status = Run(call);
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(status.message().find("--query-allow-writes"), std::string_view::npos) << status;
  // The added explanation keeps what the server said as data.
  EXPECT_EQ(ch::ClickHouseCode(status), ch::error_code::kReadonly);
  EXPECT_EQ(ch::ClickHouseExceptionName(status), "DB::Exception");
  EXPECT_TRUE(fake.Wait().ok());
  EXPECT_EQ(Idle(), 1u);
}

}  // namespace
}  // namespace chgate::service
