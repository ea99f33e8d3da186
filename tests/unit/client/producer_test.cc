// The coalescing Producer against the in-process fake Ingest service: sends gathered into
// requests by rows and by linger time, one bad row failing alone while the others are sent
// again, a broken stream resent under the same idempotency key, backpressure that waits or
// fails fast, Flush and Close waiting for every outcome.
#include "client/sdk/producer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/sdk/builders.h"
#include "client/sdk/client.h"
#include "client/sdk/status.h"
#include "tests/unit/client/fake_ingest.h"

namespace chgate::client {
namespace {

using testing::FakeServer;
using ::testing::HasSubstr;

std::unique_ptr<Client> Connect(FakeServer& server) {
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Create(server.address(), {.default_timeout = absl::Seconds(20)});
  EXPECT_TRUE(client.ok()) << client.status();
  return *std::move(client);
}

std::unique_ptr<Producer> MakeProducer(Client* client, ProducerOptions options) {
  absl::StatusOr<std::unique_ptr<Producer>> producer = Producer::Create(client, options);
  EXPECT_TRUE(producer.ok()) << producer.status();
  return *std::move(producer);
}

v1::Row IdRow(uint64_t id) { return MakeRow({MakeValue(id), MakeValue("x")}); }

// Sends ids 0..n-1 to table "t", one row each; the futures of their outcomes.
std::vector<std::future<absl::StatusOr<InsertResult>>> SendIds(Producer& producer, uint64_t n) {
  std::vector<std::future<absl::StatusOr<InsertResult>>> acks;
  for (uint64_t i = 0; i < n; ++i) acks.push_back(producer.Table("t")->Send(IdRow(i)));
  return acks;
}

// A producer whose batches go out at `rows` rows (never by age) and whose resends wait
// milliseconds.
ProducerOptions QuickResends(size_t rows) {
  return {.batch_rows = rows,
          .linger = absl::Seconds(60),
          .initial_backoff = absl::Milliseconds(1),
          .max_backoff = absl::Milliseconds(5)};
}

// Collects every outcome, by id.
struct Outcomes {
  absl::Mutex mu;
  std::map<uint64_t, absl::StatusOr<InsertResult>> by_id;
  AckCallback For(uint64_t id) {
    return [this, id](absl::StatusOr<InsertResult> r) {
      absl::MutexLock lock(&mu);
      by_id.emplace(id, std::move(r));
    };
  }
};

// The ids the server received in its requests, over all of them.
std::multiset<uint64_t> ReceivedIds(const std::vector<v1::InsertRequest>& requests) {
  std::multiset<uint64_t> ids;
  for (const v1::InsertRequest& r : requests) {
    for (const v1::Row& row : r.rows().rows()) ids.insert(row.values(0).uint64_value());
  }
  return ids;
}

TEST(ProducerTest, GathersSendsIntoRequestsOfBatchRows) {
  FakeServer server;
  std::unique_ptr<Client> client = Connect(server);
  std::unique_ptr<Producer> producer = MakeProducer(
      client.get(), {.batch_rows = 100, .linger = absl::Seconds(30), .key_prefix = "p-"});
  ProducerTable* events = producer->Table("app.events", {"id", "msg"});
  EXPECT_EQ(producer->Table("app.events", {"id", "msg"}), events);
  std::vector<std::future<absl::StatusOr<InsertResult>>> acks;
  for (uint64_t i = 0; i < 1000; ++i) acks.push_back(events->Send(IdRow(i)));
  for (auto& ack : acks) {
    absl::StatusOr<InsertResult> r = ack.get();  // full batches go out without the linger
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->rows, 100u);
  }
  EXPECT_TRUE(producer->Close().ok());
  const std::vector<v1::InsertRequest> requests = server.service().stream_requests();
  ASSERT_EQ(requests.size(), 10u);
  std::set<std::string> keys;
  for (const v1::InsertRequest& r : requests) {
    EXPECT_EQ(r.table(), "app.events");
    EXPECT_THAT(r.columns(), ::testing::ElementsAre("id", "msg"));
    EXPECT_EQ(r.rows().rows_size(), 100);
    keys.insert(r.idempotency_key());
  }
  EXPECT_EQ(keys.size(), 10u);
  EXPECT_EQ(*keys.begin(), "p-1");
  EXPECT_EQ(ReceivedIds(requests).size(), 1000u);
  ProducerStats stats = producer->stats();
  EXPECT_EQ(stats.sends, 1000u);
  EXPECT_EQ(stats.requests, 10u);
  EXPECT_EQ(stats.pending_rows, 0u);
}

TEST(ProducerTest, ALingeringBatchGoesOutAfterTheLingerAndTablesStayApart) {
  FakeServer server;
  std::unique_ptr<Client> client = Connect(server);
  std::unique_ptr<Producer> producer =
      MakeProducer(client.get(), {.batch_rows = 1000, .linger = absl::Milliseconds(30)});
  const absl::Time start = absl::Now();
  auto a = producer->Table("a")->Send(IdRow(1));
  auto b = producer->Table("b")->Send(IdRow(2));
  auto a2 = producer->Table("a")->Send(IdRow(3));
  ASSERT_TRUE(a.get().ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(25));
  ASSERT_TRUE(b.get().ok());
  absl::StatusOr<InsertResult> last = a2.get();
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->rows, 2u);
  const std::vector<v1::InsertRequest> requests = server.service().stream_requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_TRUE(requests[0].columns().empty());
  EXPECT_TRUE(producer->Close().ok());
}

TEST(ProducerTest, FlushWritesWhatIsGatheredAndWaitsForItsOutcomes) {
  FakeServer server;
  std::unique_ptr<Client> client = Connect(server);
  std::unique_ptr<Producer> producer =
      MakeProducer(client.get(), {.batch_rows = 1000, .linger = absl::Seconds(60)});
  Outcomes outcomes;
  for (uint64_t i = 0; i < 5; ++i) producer->Table("t")->Send(IdRow(i), outcomes.For(i));
  producer->Flush();
  {
    absl::MutexLock lock(&outcomes.mu);
    EXPECT_EQ(outcomes.by_id.size(), 5u);
  }
  EXPECT_EQ(server.service().stream_requests().size(), 1u);
  EXPECT_TRUE(producer->Close().ok());
  // After Close a send fails at once.
  absl::StatusOr<InsertResult> late = producer->Table("t")->Send(IdRow(9)).get();
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
}

// chgate refuses a whole request for one bad row: only that send fails, with the server's
// error; the other rows are sent again without it and succeed.
TEST(ProducerTest, OneBadRowFailsAloneAndTheOthersAreSentAgain) {
  FakeServer server;
  server.service().set_stream_ack_status(
      [](const v1::InsertRequest& r) -> std::optional<v1::Status> {
        for (int i = 0; i < r.rows().rows_size(); ++i) {
          const uint64_t id = r.rows().rows(i).values(0).uint64_value();
          if (id == 13 || id == 77) {
            v1::Status s;
            s.set_code(3);
            s.set_message(absl::StrCat("row ", i, ": value out of range for column 'id'"));
            s.mutable_value_error()->set_row_index(static_cast<uint64_t>(i));
            s.mutable_value_error()->set_column("id");
            return s;
          }
        }
        return std::nullopt;
      });
  std::unique_ptr<Client> client = Connect(server);
  std::unique_ptr<Producer> producer =
      MakeProducer(client.get(), {.batch_rows = 100, .linger = absl::Seconds(60)});
  Outcomes outcomes;
  for (uint64_t i = 0; i < 100; ++i) producer->Table("t")->Send(IdRow(i), outcomes.For(i));
  absl::Status closed = producer->Close();
  EXPECT_EQ(closed.code(), absl::StatusCode::kInvalidArgument);
  absl::MutexLock lock(&outcomes.mu);
  ASSERT_EQ(outcomes.by_id.size(), 100u);
  for (uint64_t i = 0; i < 100; ++i) {
    const absl::StatusOr<InsertResult>& r = outcomes.by_id.at(i);
    if (i == 13 || i == 77) {
      ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << i;
      EXPECT_THAT(r.status().message(), HasSubstr("out of range"));
      std::optional<v1::Status> detail = GetStatusDetail(r.status());
      ASSERT_TRUE(detail.has_value());
      EXPECT_EQ(detail->value_error().row_index(), 0u);
      EXPECT_EQ(detail->value_error().column(), "id");
    } else {
      EXPECT_TRUE(r.ok()) << i << ": " << r.status();
    }
  }
  // Three requests: all 100, 99 without 13, 98 without 77; the last one was committed.
  const std::vector<v1::InsertRequest> requests = server.service().stream_requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[2].rows().rows_size(), 98);
  std::multiset<uint64_t> committed = ReceivedIds({requests[2]});
  EXPECT_EQ(committed.count(13), 0u);
  EXPECT_EQ(committed.count(77), 0u);
  EXPECT_EQ(producer->stats().isolated_rows, 2u);
  EXPECT_EQ(producer->stats().failed_sends, 2u);
}

TEST(ProducerTest, AnErrorNamingNoRowFailsEverySendOfTheRequest) {
  FakeServer server;
  server.service().set_stream_ack_status([](const v1::InsertRequest&) -> std::optional<v1::Status> {
    v1::Status s;
    s.set_code(5);
    s.set_message("table t does not exist");
    return s;
  });
  std::unique_ptr<Client> client = Connect(server);
  std::unique_ptr<Producer> producer =
      MakeProducer(client.get(), {.batch_rows = 10, .linger = absl::Seconds(60)});
  std::vector<std::future<absl::StatusOr<InsertResult>>> acks = SendIds(*producer, 10);
  for (auto& ack : acks) EXPECT_EQ(ack.get().status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(producer->Close().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(server.service().stream_requests().size(), 1u);
}

// The stream breaks before the ack: the outcome is unknown, so the request goes again on a new
// stream under the same idempotency key (chgate inserts a key once).
TEST(ProducerTest, ABrokenStreamIsResentUnderTheSameKey) {
  FakeServer server;
  server.service().set_stream_end_after(
      1, grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset"), /*streams=*/2);
  std::unique_ptr<Client> client = Connect(server);
  std::unique_ptr<Producer> producer = MakeProducer(client.get(), QuickResends(5));
  for (auto& ack : SendIds(*producer, 5)) {
    absl::StatusOr<InsertResult> r = ack.get();
    ASSERT_TRUE(r.ok()) << r.status();
  }
  EXPECT_TRUE(producer->Close().ok());
  const std::vector<v1::InsertRequest> requests = server.service().stream_requests();
  ASSERT_EQ(requests.size(), 3u);  // two broken streams, then the ack
  EXPECT_EQ(requests[0].idempotency_key(), requests[1].idempotency_key());
  EXPECT_EQ(requests[1].idempotency_key(), requests[2].idempotency_key());
  EXPECT_EQ(producer->stats().resent_requests, 2u);
}

TEST(ProducerTest, RetriesEndAtTheRetryTimeoutWithTheLastError) {
  FakeServer server;
  server.service().set_stream_ack_status([](const v1::InsertRequest&) -> std::optional<v1::Status> {
    v1::Status s;
    s.set_code(14);
    s.set_message("ClickHouse is unreachable");
    return s;
  });
  std::unique_ptr<Client> client = Connect(server);
  std::unique_ptr<Producer> producer =
      MakeProducer(client.get(), {.batch_rows = 1,
                                  .retry_timeout = absl::Milliseconds(100),
                                  .initial_backoff = absl::Milliseconds(5),
                                  .max_backoff = absl::Milliseconds(20)});
  absl::StatusOr<InsertResult> r = producer->Table("t")->Send(IdRow(1)).get();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("unreachable"));
  const size_t attempts = server.service().stream_requests().size();
  EXPECT_GE(attempts, 3u);
  EXPECT_LE(attempts, 40u);
  std::set<std::string> keys;
  for (const v1::InsertRequest& req : server.service().stream_requests()) {
    keys.insert(req.idempotency_key());
  }
  EXPECT_EQ(keys.size(), 1u);
  EXPECT_EQ(producer->Close().code(), absl::StatusCode::kUnavailable);
}

// client/README.md: a request whose outcome is temporary (RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED,
// UNAVAILABLE) is sent again under the same key; one answered for good (here NOT_FOUND) is not.
TEST(ProducerTest, EachTemporaryAckIsResentUnderTheSameKey) {
  for (const int code : {8, 4, 14}) {
    FakeServer server;
    std::atomic<int> answered{0};
    server.service().set_stream_ack_status(
        [&answered, code](const v1::InsertRequest&) -> std::optional<v1::Status> {
          if (answered.fetch_add(1) > 0) return std::nullopt;  // OK from the second on
          v1::Status s;
          s.set_code(code);
          s.set_message("for a moment");
          return s;
        });
    std::unique_ptr<Client> client = Connect(server);
    std::unique_ptr<Producer> producer = MakeProducer(client.get(), QuickResends(3));
    for (auto& ack : SendIds(*producer, 3)) {
      absl::StatusOr<InsertResult> r = ack.get();
      EXPECT_TRUE(r.ok()) << "code " << code << ": " << r.status();
    }
    EXPECT_TRUE(producer->Close().ok()) << code;
    const std::vector<v1::InsertRequest> requests = server.service().stream_requests();
    ASSERT_EQ(requests.size(), 2u) << code;
    EXPECT_EQ(requests[0].idempotency_key(), requests[1].idempotency_key()) << code;
    EXPECT_EQ(ReceivedIds({requests[1]}), (std::multiset<uint64_t>{0, 1, 2})) << code;
  }
}

// batch_bytes bounds a request by the rows' encoded size as well as batch_rows by their count.
TEST(ProducerTest, BatchBytesSplitsRequestsBySize) {
  FakeServer server;
  std::unique_ptr<Client> client = Connect(server);
  const size_t row_bytes = IdRow(0).ByteSizeLong();
  std::unique_ptr<Producer> producer = MakeProducer(
      client.get(),
      {.batch_rows = 1000, .batch_bytes = 4 * row_bytes + 1, .linger = absl::Seconds(60)});
  std::vector<std::future<absl::StatusOr<InsertResult>>> acks = SendIds(*producer, 20);
  producer->Flush();
  for (auto& ack : acks) EXPECT_TRUE(ack.get().ok());
  EXPECT_TRUE(producer->Close().ok());
  const std::vector<v1::InsertRequest> requests = server.service().stream_requests();
  ASSERT_GE(requests.size(), 4u) << "20 rows of which about 4 fit a request's bytes";
  for (const v1::InsertRequest& r : requests) {
    EXPECT_LE(r.rows().rows_size(), 5) << "a request far past batch_bytes";
  }
  EXPECT_EQ(ReceivedIds(requests).size(), 20u);
}

TEST(ProducerTest, AtThePendingBoundSendFailsFastOrWaits) {
  FakeServer server;
  server.service().set_stream_hold_until(3);  // a stream's acks wait for its third request
  std::unique_ptr<Client> client = Connect(server);
  // Two requests of two rows and one gathered row: five pending, the bound.
  std::unique_ptr<Producer> fast = MakeProducer(client.get(), {.batch_rows = 2,
                                                               .linger = absl::Seconds(60),
                                                               .max_pending_rows = 5,
                                                               .block_when_full = false});
  std::vector<std::future<absl::StatusOr<InsertResult>>> acks;
  for (uint64_t i = 0; i < 5; ++i) acks.push_back(fast->Table("t")->Send(IdRow(i)));
  absl::StatusOr<InsertResult> refused = fast->Table("t")->Send(IdRow(5)).get();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("max_pending_rows"));
  EXPECT_EQ(fast->Close().code(), absl::StatusCode::kResourceExhausted);  // the third request
  for (auto& ack : acks) EXPECT_TRUE(ack.get().ok());

  // A blocking producer waits at the bound, and goes on once acks free room.
  std::unique_ptr<Producer> waits = MakeProducer(
      client.get(), {.batch_rows = 2, .linger = absl::Seconds(60), .max_pending_rows = 5});
  std::atomic<int> sent{0};
  std::vector<std::future<absl::StatusOr<InsertResult>>> waited;
  std::thread sender([&] {
    for (uint64_t i = 10; i < 16; ++i) {
      waited.push_back(waits->Table("t")->Send(IdRow(i)));
      ++sent;
    }
  });
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(sent.load(), 5);  // the sixth send waits for room
  waits->Flush();             // the fifth row becomes the third request: the acks come
  sender.join();
  EXPECT_EQ(sent.load(), 6);
  EXPECT_TRUE(waits->Close().ok());
  for (auto& ack : waited) EXPECT_TRUE(ack.get().ok());
}

TEST(ProducerTest, ManyThreadsManyTablesEveryRowOnce) {
  FakeServer server;
  std::unique_ptr<Client> client = Connect(server);
  std::unique_ptr<Producer> producer = MakeProducer(
      client.get(), {.batch_rows = 64, .linger = absl::Milliseconds(2), .max_pending_rows = 512});
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      ProducerTable* table = producer->Table(absl::StrCat("t", t % 2));
      for (uint64_t i = 0; i < 2000; ++i) {
        table->Send(IdRow(static_cast<uint64_t>(t) * 10000 + i),
                    [&ok](absl::StatusOr<InsertResult> r) {
                      if (r.ok()) ++ok;
                    });
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_TRUE(producer->Close().ok());
  EXPECT_EQ(ok.load(), 8000);
  std::multiset<uint64_t> ids = ReceivedIds(server.service().stream_requests());
  EXPECT_EQ(ids.size(), 8000u);
  EXPECT_EQ(std::set<uint64_t>(ids.begin(), ids.end()).size(), 8000u);
}

// A block of rows [first, first + n): id UInt64, tags Array(String) (one tag per id), note
// Nullable(String) (NULL for odd ids).
v1::Block IdBlock(uint64_t first, uint64_t n) {
  BlockBuilder b;
  ColumnBuilder& id = b.AddColumn("id", "UInt64");
  ColumnBuilder& tags = b.AddColumn("tags", "Array(String)");
  ColumnBuilder& note = b.AddColumn("note", "Nullable(String)");
  for (uint64_t i = first; i < first + n; ++i) {
    id.AppendUInt64(i);
    tags.element(0).AppendString(absl::StrCat("t", i));
    tags.EndRow();
    if (i % 2 == 1) {
      note.AppendNull();
    } else {
      note.AppendString(absl::StrCat("n", i));
    }
  }
  absl::StatusOr<v1::Block> block = b.Build();
  EXPECT_TRUE(block.ok()) << block.status();
  return *std::move(block);
}

// The ids of a request's block, in row order.
std::vector<uint64_t> BlockIds(const v1::InsertRequest& r) {
  std::vector<uint64_t> ids(r.block().rows());
  if (!ids.empty()) std::memcpy(ids.data(), r.block().columns(0).data().data(), ids.size() * 8);
  return ids;
}

TEST(ProducerBlockTest, BlocksAreGatheredIntoOneColumnarRequestLaidOutAsIfBuiltTogether) {
  FakeServer server;
  std::unique_ptr<Client> client = Connect(server);
  std::unique_ptr<Producer> producer =
      MakeProducer(client.get(), {.batch_rows = 100, .linger = absl::Seconds(60)});
  ProducerTable* events = producer->Table("app.events", {"id", "tags", "note"});
  std::vector<std::future<absl::StatusOr<InsertResult>>> acks;
  for (uint64_t first = 0; first < 120; first += 30)
    acks.push_back(events->SendBlock(IdBlock(first, 30)));
  producer->Flush();
  for (auto& ack : acks) {
    absl::StatusOr<InsertResult> r = ack.get();
    ASSERT_TRUE(r.ok()) << r.status();
  }
  const std::vector<v1::InsertRequest> requests = server.service().stream_requests();
  ASSERT_EQ(requests.size(), 1u);  // the fourth block takes the batch past 100 rows: it goes
  EXPECT_EQ(requests[0].block().rows(), 120u);
  EXPECT_EQ(requests[0].rows().rows_size(), 0);
  EXPECT_THAT(requests[0].columns(), ::testing::ElementsAre("id", "tags", "note"));
  // The gathered block is what one builder would have made of all 120 rows.
  const v1::Block whole = IdBlock(0, 120);
  ASSERT_EQ(requests[0].block().columns_size(), 3);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(requests[0].block().columns(c).SerializeAsString(),
              whole.columns(c).SerializeAsString())
        << "column " << c;
  }
  EXPECT_EQ(producer->stats().sends, 4u);
  EXPECT_EQ(producer->stats().pending_rows, 0u);
  EXPECT_TRUE(producer->Close().ok());
}

TEST(ProducerBlockTest, AMalformedBlockFailsAtOnceAndNeverReachesARequest) {
  FakeServer server;
  std::unique_ptr<Client> client = Connect(server);
  std::unique_ptr<Producer> producer =
      MakeProducer(client.get(), {.batch_rows = 1000, .linger = absl::Seconds(60)});
  ProducerTable* events = producer->Table("app.events", {"id", "tags", "note"});
  auto good = events->SendBlock(IdBlock(0, 5));
  v1::Block short_ids = IdBlock(5, 5);
  short_ids.mutable_columns(0)->mutable_data()->resize(32);  // 4 ids for 5 rows
  absl::StatusOr<InsertResult> bad = events->SendBlock(std::move(short_ids)).get();
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("`data` has 32 bytes, expected 5 rows x 8 bytes"));
  v1::Block renamed = IdBlock(10, 1);
  renamed.mutable_columns(1)->set_name("labels");
  EXPECT_THAT(events->SendBlock(std::move(renamed)).get().status().message(),
              HasSubstr("'labels'"));
  EXPECT_EQ(events->SendBlock(v1::Block()).get().status().code(),
            absl::StatusCode::kInvalidArgument);
  producer->Flush();
  ASSERT_TRUE(good.get().ok());
  const std::vector<v1::InsertRequest> requests = server.service().stream_requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_THAT(BlockIds(requests[0]), ::testing::ElementsAre(0, 1, 2, 3, 4));
  EXPECT_EQ(producer->stats().failed_sends, 3u);
  (void)producer->Close();
}

// chgate names a row of a gathered block: only the send whose block held it fails, with the
// row's index in that block; the other blocks go again without it and succeed.
TEST(ProducerBlockTest, TheBlockHoldingARefusedRowFailsAloneWithItsOwnRowIndex) {
  FakeServer server;
  server.service().set_stream_ack_status(
      [](const v1::InsertRequest& r) -> std::optional<v1::Status> {
        const std::vector<uint64_t> ids = BlockIds(r);
        for (size_t i = 0; i < ids.size(); ++i) {
          if (ids[i] == 47) {
            v1::Status s;
            s.set_code(3);
            s.set_message(absl::StrCat("block row ", i, ": value out of range"));
            s.mutable_value_error()->set_row_index(i);
            return s;
          }
        }
        return std::nullopt;
      });
  std::unique_ptr<Client> client = Connect(server);
  std::unique_ptr<Producer> producer =
      MakeProducer(client.get(), {.batch_rows = 1000, .linger = absl::Seconds(60)});
  ProducerTable* events = producer->Table("app.events", {"id", "tags", "note"});
  std::vector<std::future<absl::StatusOr<InsertResult>>> acks;
  for (uint64_t first = 0; first < 100; first += 20)
    acks.push_back(events->SendBlock(IdBlock(first, 20)));
  (void)producer->Close();
  for (size_t i = 0; i < acks.size(); ++i) {
    absl::StatusOr<InsertResult> r = acks[i].get();
    if (i == 2) {  // rows 40..59
      ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      std::optional<v1::Status> detail = GetStatusDetail(r.status());
      ASSERT_TRUE(detail.has_value());
      EXPECT_EQ(detail->value_error().row_index(), 7u);  // id 47 is row 7 of its block
    } else {
      ASSERT_TRUE(r.ok()) << i << ": " << r.status();
      EXPECT_EQ(r->rows, 80u);
    }
  }
  const std::vector<v1::InsertRequest> requests = server.service().stream_requests();
  ASSERT_EQ(requests.size(), 2u);
  std::vector<uint64_t> expected;
  for (uint64_t id = 0; id < 100; ++id) {
    if (id < 40 || id >= 60) expected.push_back(id);
  }
  EXPECT_EQ(BlockIds(requests[1]), expected);
  EXPECT_FALSE(requests[1].idempotency_key().empty()) << "the resent rows go under a key";
  EXPECT_NE(requests[1].idempotency_key(), requests[0].idempotency_key());
  // The resent block is still well formed: the nulls and array offsets were cut at the sends.
  const v1::Block& resent = requests[1].block();
  const v1::Block whole = IdBlock(0, 100);
  EXPECT_EQ(resent.columns(2).nulls().size(), 80u);
  EXPECT_EQ(resent.columns(1).offsets(79), 80u);
  EXPECT_EQ(resent.columns(1).children(0).data().size(),
            whole.columns(1).children(0).data().size() - 20 * 3);
  EXPECT_EQ(producer->stats().isolated_rows, 1u);
}

TEST(ProducerBlockTest, OtherColumnTypesStartANewRequestAndRowsAndBlocksStayApart) {
  FakeServer server;
  std::unique_ptr<Client> client = Connect(server);
  std::unique_ptr<Producer> producer = MakeProducer(
      client.get(), {.batch_rows = 10, .linger = absl::Seconds(60), .max_pending_rows = 50});
  ProducerTable* t = producer->Table("t");
  auto a = t->SendBlock(IdBlock(0, 3));
  v1::Block wider = IdBlock(3, 2);
  wider.mutable_columns(2)->set_type("Nullable(String)");  // same
  auto b = t->SendBlock(std::move(wider));
  BlockBuilder other;
  other.AddColumn("id", "UInt32").AppendUInt64(9);
  auto c = t->SendBlock(*other.Build());
  auto row = t->Send(IdRow(77));
  EXPECT_EQ(t->SendBlock(IdBlock(100, 51)).get().status().code(),
            absl::StatusCode::kInvalidArgument);
  producer->Flush();
  ASSERT_TRUE(a.get().ok());
  ASSERT_TRUE(b.get().ok());
  ASSERT_TRUE(c.get().ok());
  ASSERT_TRUE(row.get().ok());
  const std::vector<v1::InsertRequest> requests = server.service().stream_requests();
  ASSERT_EQ(requests.size(), 3u);
  std::multiset<uint64_t> sizes;
  for (const v1::InsertRequest& r : requests) sizes.insert(r.block().rows() + r.rows().rows_size());
  EXPECT_THAT(sizes, ::testing::ElementsAre(1, 1, 5));
  (void)producer->Close();
}

TEST(ProducerTest, RejectsBadOptions) {
  FakeServer server;
  std::unique_ptr<Client> client = Connect(server);
  EXPECT_FALSE(Producer::Create(nullptr).ok());
  EXPECT_FALSE(Producer::Create(client.get(), {.batch_rows = 0}).ok());
  EXPECT_FALSE(Producer::Create(client.get(), {.batch_rows = 10, .max_pending_rows = 5}).ok());
  EXPECT_FALSE(Producer::Create(client.get(), {.linger = absl::Milliseconds(-1)}).ok());
  EXPECT_FALSE(Producer::Create(client.get(), {.initial_backoff = absl::ZeroDuration()}).ok());
}

}  // namespace
}  // namespace chgate::client
