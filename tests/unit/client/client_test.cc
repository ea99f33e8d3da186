// The SDK against an in-process fake Ingest service: the Query cursor over several blocks of
// many types, typed accessors, summary and progress, errors mid-stream with the status trailer,
// cancel and deadline, retries of UNAVAILABLE only before the first message, unary Insert with
// idempotent retries, InsertStream acks as futures and callbacks, stream failures, health.
#include "client/sdk/client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>

#include "client/sdk/health.h"
#include "client/sdk/internal/call_util.h"
#include "tests/unit/client/fake_ingest.h"
#include "tests/unit/client/test_columns.h"

namespace chgate::client {
namespace {

using testing::Col;
using ::testing::ElementsAre;
using testing::FakeServer;
using ::testing::HasSubstr;
using testing::Le;
using testing::QueryScript;
using testing::StringCol;

ClientOptions FastRetries() {
  return ClientOptions{
      .default_timeout = absl::Seconds(20),
      .retry = {.max_attempts = 4,
                .initial_backoff = absl::Microseconds(100),
                .max_backoff = absl::Milliseconds(1)},
  };
}

std::unique_ptr<Client> Connect(FakeServer& server, ClientOptions options = FastRetries()) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(server.address(), options);
  EXPECT_TRUE(client.ok()) << client.status();
  return *std::move(client);
}

v1::QueryResponse Header(std::vector<std::pair<std::string, std::string>> columns,
                         std::string timezone = "UTC") {
  v1::QueryResponse r;
  for (auto& [name, type] : columns) {
    v1::ColumnSchema* c = r.mutable_header()->add_columns();
    c->set_name(name);
    c->set_type(type);
  }
  r.mutable_header()->set_query_id("q-1");
  r.mutable_header()->set_timezone(std::move(timezone));
  return r;
}

v1::QueryResponse BlockOf(uint64_t rows, std::vector<v1::Column> columns) {
  v1::QueryResponse r;
  r.mutable_block()->set_rows(rows);
  for (v1::Column& c : columns) *r.mutable_block()->add_columns() = std::move(c);
  return r;
}

v1::QueryResponse Summary(uint64_t rows, uint64_t blocks) {
  v1::QueryResponse r;
  v1::QuerySummary* s = r.mutable_summary();
  s->set_rows(rows);
  s->set_blocks(blocks);
  s->set_received_bytes(1000);
  s->set_decoded_bytes(4000);
  s->mutable_elapsed()->set_nanos(5000000);
  s->set_query_id("q-1");
  s->mutable_progress()->set_read_rows(rows);
  return r;
}

v1::QueryResponse ProgressOf(uint64_t rows) {
  v1::QueryResponse r;
  r.mutable_progress()->set_read_rows(rows);
  r.mutable_progress()->set_read_bytes(rows * 8);
  return r;
}

// id UInt64, name Nullable(String), at DateTime (server zone), tags Array(String).
QueryScript ThreeBlocks() {
  QueryScript s;
  s.responses.push_back(Header({{"id", "UInt64"},
                                {"name", "Nullable(String)"},
                                {"at", "DateTime"},
                                {"tags", "Array(String)"}},
                               "Asia/Tokyo"));
  auto block = [](uint64_t first, uint64_t rows) {
    std::vector<uint64_t> ids;
    std::vector<std::string> names;
    std::string nulls;
    std::string at;
    v1::Column tags = Col("Array(String)");
    std::vector<std::string> elements;
    for (uint64_t i = 0; i < rows; ++i) {
      ids.push_back(first + i);
      names.push_back(absl::StrCat("n", first + i));
      nulls.push_back((first + i) % 3 == 0 ? '\1' : '\0');
      at += Le<uint32_t>({static_cast<uint32_t>(1640995200 + first + i)});
      for (uint64_t k = 0; k < (first + i) % 3; ++k) elements.push_back(absl::StrCat("t", k));
      tags.add_offsets(elements.size());
    }
    *tags.add_children() = StringCol("String", elements);
    std::string id_bytes;
    for (uint64_t id : ids) id_bytes += Le<uint64_t>({id});
    return BlockOf(rows, {Col("UInt64", id_bytes), StringCol("Nullable(String)", names, nulls),
                          Col("DateTime", at), tags});
  };
  s.responses.push_back(ProgressOf(2));
  s.responses.push_back(block(1, 2));
  s.responses.push_back(BlockOf(0, {Col("UInt64"), StringCol("Nullable(String)", {}),
                                    Col("DateTime"), Col("Array(String)")}));
  s.responses.back().mutable_block()->mutable_columns(3)->add_children()->set_type("String");
  s.responses.push_back(block(3, 3));
  s.responses.push_back(ProgressOf(3));
  s.responses.push_back(block(6, 1));
  s.responses.push_back(Summary(6, 3));
  return s;
}

// The cursor of `SELECT 1` on `client` (the fake answers with its script).
std::unique_ptr<QueryCursor> QueryOrDie(Client& client) {
  absl::StatusOr<std::unique_ptr<QueryCursor>> q = client.Query("SELECT 1");
  EXPECT_TRUE(q.ok()) << q.status();
  return q.ok() ? *std::move(q) : nullptr;
}

TEST(QueryCursorTest, NextBlockReadsWholeColumnsThroughViews) {
  FakeServer server;
  server.service().AddQueryScript(ThreeBlocks());
  std::unique_ptr<Client> client = Connect(server);
  std::unique_ptr<QueryCursor> q = QueryOrDie(*client);
  ASSERT_NE(q, nullptr);
  QueryCursor& cursor = *q;
  std::vector<uint64_t> ids;
  std::vector<std::string> names;
  std::vector<uint32_t> times;
  while (cursor.NextBlock()) {
    const v1::Block& block = cursor.block();
    absl::StatusOr<FixedColumnView<uint64_t>> id =
        ViewFixed<uint64_t>(block.columns(0), cursor.column_type(0));
    ASSERT_TRUE(id.ok()) << id.status();
    ASSERT_EQ(id->size(), block.rows());
    for (size_t i = 0; i < id->size(); ++i) ids.push_back((*id)[i]);
    absl::StatusOr<StringColumnView> name = ViewStrings(block.columns(1), cursor.column_type(1));
    ASSERT_TRUE(name.ok()) << name.status();
    for (size_t i = 0; i < name->size(); ++i) {
      // Slots under NULL are empty strings.
      names.push_back(
          IsNullAt(block.columns(1), cursor.column_type(1), i) ? "NULL" : std::string((*name)[i]));
    }
    absl::StatusOr<FixedColumnView<uint32_t>> at =
        ViewFixed<uint32_t>(block.columns(2), cursor.column_type(2));
    ASSERT_TRUE(at.ok()) << at.status();
    for (size_t i = 0; i < at->size(); ++i) times.push_back((*at)[i]);
    // A view of another width or of a composite column is refused.
    EXPECT_EQ(ViewFixed<uint32_t>(block.columns(0), cursor.column_type(0)).status().code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(ViewFixed<int64_t>(block.columns(0), cursor.column_type(0)).status().code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(ViewStrings(block.columns(3), cursor.column_type(3)).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  ASSERT_TRUE(cursor.status().ok()) << cursor.status();
  EXPECT_THAT(ids, ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(names, ElementsAre("n1", "n2", "NULL", "n4", "n5", "NULL"));
  EXPECT_THAT(times,
              ElementsAre(1640995201, 1640995202, 1640995203, 1640995204, 1640995205, 1640995206));
  EXPECT_EQ(cursor.rows_read(), 6u);
  EXPECT_FALSE(cursor.Next());
}

TEST(QueryCursorTest, NextBlockAndNextMix) {
  FakeServer server;
  server.service().AddQueryScript(ThreeBlocks());
  std::unique_ptr<Client> client = Connect(server);
  std::unique_ptr<QueryCursor> q = QueryOrDie(*client);
  ASSERT_NE(q, nullptr);
  QueryCursor& cursor = *q;
  ASSERT_TRUE(cursor.Next());  // row 1 of the first block (ids 1, 2)
  EXPECT_EQ(cursor.GetUInt64(0).value(), 1u);
  ASSERT_TRUE(cursor.NextBlock());  // skips id 2: the block of ids 3..5
  EXPECT_EQ(cursor.block().rows(), 3u);
  ASSERT_TRUE(cursor.Next());  // the block counts as read: on to id 6
  EXPECT_EQ(cursor.GetUInt64(0).value(), 6u);
  EXPECT_FALSE(cursor.NextBlock());
  EXPECT_TRUE(cursor.status().ok()) << cursor.status();
}

TEST(QueryCursorTest, IteratesRowsAcrossBlocksWithTypedAccessors) {
  FakeServer server;
  server.service().AddQueryScript(ThreeBlocks());
  std::unique_ptr<Client> client = Connect(server);
  QueryOptions options{.settings = {{"max_threads", "2"}},
                       .parameters = {{"p", "1"}},
                       .query_id = "mine",
                       .database = "db",
                       .max_response_bytes = 1024,
                       .send_progress = true};
  absl::StatusOr<std::unique_ptr<QueryCursor>> q = client->Query("SELECT 1", options);
  ASSERT_TRUE(q.ok()) << q.status();
  QueryCursor& cursor = **q;
  EXPECT_EQ(cursor.header().query_id(), "q-1");
  ASSERT_EQ(cursor.column_count(), 4u);
  EXPECT_EQ(cursor.column_name(1), "name");
  EXPECT_EQ(cursor.ColumnIndex("tags").value(), 3u);
  EXPECT_EQ(cursor.ColumnIndex("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(cursor.column_type(1).nullable);
  EXPECT_EQ(cursor.GetUInt64(0).status().code(), absl::StatusCode::kFailedPrecondition);

  std::vector<std::string> lines;
  std::vector<uint64_t> ids;
  while (cursor.Next()) {
    ids.push_back(cursor.GetUInt64(0).value());
    const uint64_t id = ids.back();
    EXPECT_EQ(cursor.IsNull(1), id % 3 == 0);
    if (!cursor.IsNull(1)) {
      EXPECT_EQ(cursor.GetString(1).value(), absl::StrCat("n", id));
    }
    EXPECT_EQ(cursor.GetDateTime(2).value(), absl::FromUnixSeconds(1640995200 + id));
    EXPECT_EQ(cursor.GetInt64(0).value(), static_cast<int64_t>(id));
    EXPECT_EQ(cursor.GetString(0).status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(cursor.GetUInt64(9).status().code(), absl::StatusCode::kFailedPrecondition);
    std::string line;
    for (size_t c = 0; c < cursor.column_count(); ++c) {
      if (c > 0) line += "\t";
      line += cursor.FormatValue(c);
    }
    lines.push_back(line);
  }
  EXPECT_TRUE(cursor.status().ok()) << cursor.status();
  EXPECT_TRUE(cursor.done());
  EXPECT_THAT(ids, ElementsAre(1, 2, 3, 4, 5, 6));
  // DateTime without a zone in the type is shown in the header's zone (Asia/Tokyo, +9).
  EXPECT_EQ(lines[0], "1\tn1\t2022-01-01 09:00:01\t['t0']");
  EXPECT_EQ(lines[2], "3\t\\N\t2022-01-01 09:00:03\t[]");
  EXPECT_EQ(lines[4], "5\tn5\t2022-01-01 09:00:05\t['t0','t1']");
  EXPECT_EQ(cursor.rows_read(), 6u);
  ASSERT_NE(cursor.summary(), nullptr);
  EXPECT_EQ(cursor.summary()->blocks(), 3u);
  EXPECT_EQ(cursor.received_bytes(), 1000u);
  EXPECT_EQ(cursor.decoded_bytes(), 4000u);
  EXPECT_EQ(cursor.progress().read_rows(), 5u);
  EXPECT_GT(cursor.response_bytes(), 0u);
  EXPECT_FALSE(cursor.Next());
  EXPECT_EQ(cursor.FormatValue(0), "");

  ASSERT_EQ(server.service().queries().size(), 1u);
  const v1::QueryRequest sent = server.service().queries()[0];
  EXPECT_EQ(sent.sql(), "SELECT 1");
  EXPECT_EQ(sent.settings().at("max_threads"), "2");
  EXPECT_EQ(sent.parameters().at("p"), "1");
  EXPECT_EQ(sent.query_id(), "mine");
  EXPECT_EQ(sent.database(), "db");
  EXPECT_EQ(sent.max_response_bytes(), 1024u);
  EXPECT_TRUE(sent.send_progress());
}

TEST(QueryCursorTest, KeepsTotalsAndExtremes) {
  FakeServer server;
  QueryScript s;
  s.responses.push_back(Header({{"n", "UInt8"}}));
  s.responses.push_back(BlockOf(2, {Col("UInt8", "\x01\x02")}));
  v1::QueryResponse totals;
  totals.mutable_totals()->set_rows(1);
  *totals.mutable_totals()->add_columns() = Col("UInt8", "\x03");
  s.responses.push_back(totals);
  v1::QueryResponse extremes;
  extremes.mutable_extremes()->set_rows(2);
  *extremes.mutable_extremes()->add_columns() = Col("UInt8", "\x01\x02");
  s.responses.push_back(extremes);
  s.responses.push_back(Summary(2, 1));
  server.service().AddQueryScript(s);
  std::unique_ptr<QueryCursor> q = Connect(server)->Query("SELECT n").value();
  int rows = 0;
  while (q->Next()) ++rows;
  EXPECT_EQ(rows, 2);
  ASSERT_TRUE(q->status().ok()) << q->status();
  ASSERT_NE(q->totals(), nullptr);
  EXPECT_EQ(q->totals()->columns(0).data(), "\x03");
  ASSERT_NE(q->extremes(), nullptr);
  EXPECT_EQ(q->extremes()->rows(), 2u);
}

TEST(QueryCursorTest, ErrorMidStreamEndsWithTheServerStatusAndDetail) {
  FakeServer server;
  QueryScript s;
  s.responses.push_back(Header({{"n", "UInt8"}}));
  s.responses.push_back(BlockOf(2, {Col("UInt8", "\x01\x02")}));
  s.status = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "ClickHouse error 241 (MEMORY_LIMIT_EXCEEDED, DB::Exception): too much");
  v1::Status detail;
  detail.set_code(8);
  detail.set_message("too much");
  detail.set_clickhouse_code(241);
  detail.set_clickhouse_exception_name("DB::Exception");
  s.detail = detail;
  server.service().AddQueryScript(s);
  std::unique_ptr<QueryCursor> q = Connect(server)->Query("SELECT n").value();
  EXPECT_TRUE(q->Next());
  EXPECT_TRUE(q->Next());
  EXPECT_FALSE(q->Next());
  EXPECT_EQ(q->status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(q->status().message(), HasSubstr("MEMORY_LIMIT_EXCEEDED"));
  std::optional<v1::Status> got = GetStatusDetail(q->status());
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->clickhouse_code(), 241);
  EXPECT_EQ(q->summary(), nullptr);
  EXPECT_EQ(q->received_bytes(), 0u);
  // The message already names the code, so FormatError does not repeat it.
  EXPECT_EQ(FormatError(q->status()),
            "RESOURCE_EXHAUSTED: ClickHouse error 241 (MEMORY_LIMIT_EXCEEDED, DB::Exception): too "
            "much");
}

TEST(QueryCursorTest, ErrorBeforeTheHeaderComesBackFromQuery) {
  FakeServer server;
  QueryScript s;
  s.status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "Syntax error");
  v1::Status detail;
  detail.set_code(3);
  detail.set_clickhouse_code(62);
  detail.set_clickhouse_exception_name("DB::Exception");
  s.detail = detail;
  server.service().AddQueryScript(s);
  absl::StatusOr<std::unique_ptr<QueryCursor>> q = Connect(server)->Query("SELEC");
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FormatError(q.status()),
            "INVALID_ARGUMENT: Syntax error [ClickHouse 62 DB::Exception]");
  EXPECT_EQ(server.service().query_calls(), 1);  // not retried
}

TEST(QueryCursorTest, MalformedResponsesFailTheCursor) {
  FakeServer server;
  QueryScript wrong_size;
  wrong_size.responses.push_back(Header({{"n", "UInt32"}}));
  wrong_size.responses.push_back(BlockOf(2, {Col("UInt32", "abc")}));
  wrong_size.responses.push_back(Summary(2, 1));
  server.service().AddQueryScript(wrong_size);
  QueryScript no_header;
  no_header.responses.push_back(BlockOf(1, {Col("UInt8", "a")}));
  server.service().AddQueryScript(no_header);
  QueryScript bad_type;
  bad_type.responses.push_back(Header({{"x", "Object('json')"}}));
  server.service().AddQueryScript(bad_type);
  QueryScript no_summary;
  no_summary.responses.push_back(Header({{"x", "UInt8"}}));
  server.service().AddQueryScript(no_summary);

  std::unique_ptr<Client> client = Connect(server);
  std::unique_ptr<QueryCursor> q = client->Query("1").value();
  EXPECT_FALSE(q->Next());
  EXPECT_EQ(q->status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(q->status().message(), HasSubstr("column n: malformed UInt32 column"));
  EXPECT_THAT(client->Query("2").status().message(), HasSubstr("first message is not the header"));
  EXPECT_EQ(client->Query("3").status().code(), absl::StatusCode::kUnimplemented);
  q = client->Query("4").value();
  EXPECT_FALSE(q->Next());
  EXPECT_THAT(q->status().message(), HasSubstr("without a summary"));
}

TEST(QueryCursorTest, CancelStopsTheCallAndTheServerSeesIt) {
  FakeServer server;
  QueryScript s;
  s.responses.push_back(Header({{"n", "UInt8"}}));
  s.responses.push_back(BlockOf(1, {Col("UInt8", "\x07")}));
  s.wait_for_cancel = true;
  server.service().AddQueryScript(s);
  std::unique_ptr<QueryCursor> q = Connect(server)->Query("SELECT n").value();
  ASSERT_TRUE(q->Next());
  EXPECT_EQ(q->GetUInt64(0).value(), 7u);
  q->Cancel();
  EXPECT_FALSE(q->Next());
  EXPECT_EQ(q->status().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(server.service().WaitForQueryCancelled(absl::Seconds(20)));
}

TEST(QueryCursorTest, DestroyingTheCursorCancelsTheQuery) {
  FakeServer server;
  QueryScript s;
  s.responses.push_back(Header({{"n", "UInt8"}}));
  s.wait_for_cancel = true;
  server.service().AddQueryScript(s);
  std::unique_ptr<Client> client = Connect(server);
  {
    std::unique_ptr<QueryCursor> q = client->Query("SELECT n").value();
    EXPECT_FALSE(q->done());
  }
  EXPECT_TRUE(server.service().WaitForQueryCancelled(absl::Seconds(20)));
}

TEST(QueryCursorTest, DeadlineEndsAStalledQuery) {
  FakeServer server;
  QueryScript s;
  s.responses.push_back(Header({{"n", "UInt8"}}));
  s.wait_for_cancel = true;
  server.service().AddQueryScript(s);
  std::unique_ptr<QueryCursor> q =
      Connect(server)->Query("SELECT n", {.timeout = absl::Milliseconds(300)}).value();
  EXPECT_FALSE(q->Next());
  EXPECT_EQ(q->status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(QueryRetryTest, RetriesUnavailableBeforeTheFirstMessage) {
  FakeServer server;
  QueryScript unavailable;
  unavailable.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
  server.service().AddQueryScript(unavailable);
  server.service().AddQueryScript(unavailable);
  QueryScript ok;
  ok.responses = {Header({{"n", "UInt8"}}), BlockOf(1, {Col("UInt8", "\x01")}), Summary(1, 1)};
  server.service().AddQueryScript(ok);
  std::unique_ptr<QueryCursor> q = Connect(server)->Query("SELECT n").value();
  EXPECT_TRUE(q->Next());
  EXPECT_FALSE(q->Next());
  EXPECT_TRUE(q->status().ok());
  EXPECT_EQ(server.service().query_calls(), 3);
}

TEST(QueryRetryTest, GivesUpAfterMaxAttempts) {
  FakeServer server;
  QueryScript unavailable;
  unavailable.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
  server.service().AddQueryScript(unavailable);
  absl::StatusOr<std::unique_ptr<QueryCursor>> q = Connect(server)->Query("SELECT n");
  EXPECT_EQ(q.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(server.service().query_calls(), 4);
}

// A write answers only once it has run: failing before any response does not mean it did not
// run (a shutdown midway through an INSERT ... SELECT), so it is never sent again.
TEST(QueryRetryTest, NeverRetriesAWrite) {
  for (const char* sql :
       {"INSERT INTO t SELECT number FROM numbers(10)", "CREATE TABLE t (x UInt8)",
        "SELECT 1; INSERT INTO t VALUES (1)", "  /* a */ insert into t select 1"}) {
    FakeServer server;
    QueryScript unavailable;
    unavailable.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
    server.service().AddQueryScript(unavailable);
    absl::StatusOr<std::unique_ptr<QueryCursor>> q = Connect(server)->Query(sql);
    EXPECT_EQ(q.status().code(), absl::StatusCode::kUnavailable) << sql;
    EXPECT_EQ(server.service().query_calls(), 1) << sql;
  }
}

TEST(QueryRetryTest, ReadsAreKnownThroughCommentsAndParentheses) {
  using internal::IsRereadableQuery;
  for (const char* sql :
       {"SELECT 1", "select 1;", " \n-- c\n/* a */ /* b */ (SELECT 1)", "WITH 1 AS x SELECT x",
        "SHOW TABLES", "DESCRIBE t", "DESC t", "EXPLAIN SELECT 1", "EXISTS t", "SELECT 1 ;  \n"}) {
    EXPECT_TRUE(IsRereadableQuery(sql)) << sql;
  }
  for (const char* sql : {"INSERT INTO t SELECT 1", "", "/* unclosed SELECT", "ALTER TABLE t",
                          "SELECT 1; SELECT 2", "SELECT ';'", "OPTIMIZE TABLE t", "SELECTX",
                          // A server that does not nest comments reads INSERT first, one that
                          // does reads SELECT: a read for only one of them is not retried.
                          "/* /* */ INSERT INTO t SELECT 1 */ SELECT 1",
                          // # starts a comment only on newer servers.
                          "# c\nSELECT 1"}) {
    EXPECT_FALSE(IsRereadableQuery(sql)) << sql;
  }
}

TEST(QueryRetryTest, NeverRetriesAfterTheFirstMessage) {
  FakeServer server;
  QueryScript s;
  s.responses = {Header({{"n", "UInt8"}})};
  s.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "lost ClickHouse");
  server.service().AddQueryScript(s);
  std::unique_ptr<QueryCursor> q = Connect(server)->Query("SELECT n").value();
  EXPECT_FALSE(q->Next());
  EXPECT_EQ(q->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(server.service().query_calls(), 1);
}

TEST(QueryRetryTest, UnreachableServerIsUnavailable) {
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Create(testing::UnusedAddress(), FastRetries());
  ASSERT_TRUE(client.ok());
  absl::StatusOr<std::unique_ptr<QueryCursor>> q = (*client)->Query("SELECT 1");
  EXPECT_EQ(q.status().code(), absl::StatusCode::kUnavailable);
}

v1::InsertRequest TwoRows(std::string key = "") {
  v1::InsertRequest request;
  request.set_table("db.t");
  request.add_columns("id");
  AddRow(&request, {MakeValue(1)});
  AddRow(&request, {MakeValue(2)});
  request.set_idempotency_key(std::move(key));
  return request;
}

TEST(InsertTest, ReturnsTheResult) {
  FakeServer server;
  absl::StatusOr<InsertResult> r = Connect(server)->Insert(TwoRows());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows, 2u);
  EXPECT_EQ(r->ack_mode, v1::ACK_MODE_COMMITTED);
  EXPECT_EQ(r->query_id, "insert-q");
  EXPECT_EQ(r->commit_time, absl::FromUnixSeconds(1700000000));
  ASSERT_EQ(server.service().inserts().size(), 1u);
  EXPECT_EQ(server.service().inserts()[0].table(), "db.t");
}

TEST(InsertTest, RetriesUnavailableOnlyWithAnIdempotencyKey) {
  FakeServer server;
  server.service().set_unavailable_inserts(2);
  std::unique_ptr<Client> client = Connect(server);
  absl::StatusOr<InsertResult> r = client->Insert(TwoRows("k-1"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(server.service().insert_calls(), 3);
  for (const v1::InsertRequest& sent : server.service().inserts()) {
    EXPECT_EQ(sent.idempotency_key(), "k-1");
  }

  FakeServer other;
  other.service().set_unavailable_inserts(1);
  r = Connect(other)->Insert(TwoRows());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(other.service().insert_calls(), 1);
}

TEST(InsertTest, InsertAsyncDeliversEachResultToItsCallbackWithoutRetrying) {
  FakeServer server;
  std::unique_ptr<Client> client = Connect(server);
  constexpr int kCalls = 64;
  absl::Mutex mu;
  std::vector<uint64_t> rows;
  for (int i = 0; i < kCalls; ++i) {
    v1::InsertRequest request = TwoRows();
    for (int r = 0; r < i % 3; ++r) AddRow(&request, {MakeValue(r)});
    client->InsertAsync(std::move(request), [&](absl::StatusOr<InsertResult> result) {
      absl::MutexLock lock(&mu);
      rows.push_back(result.ok() ? result->rows : 0);
    });
  }
  {
    absl::MutexLock lock(&mu);
    auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return rows.size() == kCalls; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(20)));
    std::sort(rows.begin(), rows.end());
    EXPECT_EQ(rows.front(), 2u);
    EXPECT_EQ(rows.back(), 4u);
  }
  EXPECT_EQ(server.service().insert_calls(), kCalls);

  // One attempt: UNAVAILABLE comes back even with an idempotency key.
  FakeServer flaky;
  flaky.service().set_unavailable_inserts(1);
  std::promise<absl::StatusOr<InsertResult>> answered;
  std::unique_ptr<Client> flaky_client = Connect(flaky);
  flaky_client->InsertAsync(TwoRows("k-1"), [&](absl::StatusOr<InsertResult> result) {
    answered.set_value(std::move(result));
  });
  EXPECT_EQ(answered.get_future().get().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(flaky.service().insert_calls(), 1);
}

TEST(InsertTest, RetriesAreBounded) {
  FakeServer server;
  server.service().set_unavailable_inserts(100);
  ClientOptions options = FastRetries();
  options.retry.max_attempts = 3;
  absl::StatusOr<InsertResult> r = Connect(server, options)->Insert(TwoRows("k"));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(server.service().insert_calls(), 3);
}

// client/README.md: retries never run past the deadline. With backoffs of at least 2 s and a
// 300 ms deadline, the call ends with its last error at once instead of sleeping into them.
TEST(InsertTest, RetriesNeverWaitPastTheDeadline) {
  FakeServer server;
  server.service().set_unavailable_inserts(100);
  ClientOptions options;
  options.default_timeout = absl::Milliseconds(300);
  options.retry = {
      .max_attempts = 4, .initial_backoff = absl::Seconds(4), .max_backoff = absl::Seconds(8)};
  std::unique_ptr<Client> client = Connect(server, options);
  const absl::Time start = absl::Now();
  absl::StatusOr<InsertResult> r = client->Insert(TwoRows("k"));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_LT(took, absl::Seconds(2)) << "a backoff ran past the call's deadline";
  EXPECT_GE(server.service().insert_calls(), 1);
}

TEST(InsertTest, OtherErrorsAreNotRetriedAndCarryTheDetail) {
  FakeServer server;
  v1::Status detail;
  detail.set_code(3);
  detail.set_message("bad value");
  detail.mutable_value_error()->set_row_index(1);
  detail.mutable_value_error()->set_column("id");
  detail.mutable_value_error()->set_type("UInt8");
  detail.mutable_value_error()->set_value("300");
  server.service().set_insert_status(
      grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "value out of range"), detail);
  absl::StatusOr<InsertResult> r = Connect(server)->Insert(TwoRows("k"));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(server.service().insert_calls(), 1);
  std::optional<v1::Status> got = GetStatusDetail(r.status());
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->value_error().row_index(), 1u);
  EXPECT_EQ(FormatError(r.status()),
            "INVALID_ARGUMENT: value out of range [row 1, column 'id', type 'UInt8', value "
            "'300']");
  // A message that names the row and column already is not repeated.
  EXPECT_EQ(FormatError(FromProtoStatus([&] {
              v1::Status s = detail;
              s.set_message("row 1, column 'id' (UInt8): 300 out of range");
              return s;
            }())),
            "INVALID_ARGUMENT: row 1, column 'id' (UInt8): 300 out of range");
}

TEST(InsertStreamTest, FuturesResolveByMatchingSequenceEvenOutOfOrder) {
  FakeServer server;
  server.service().set_stream_hold_until(3);  // the first three acks come back reversed
  std::unique_ptr<InsertStream> stream = Connect(server)->OpenInsertStream();
  std::vector<std::future<absl::StatusOr<InsertResult>>> acks;
  for (int i = 0; i < 4; ++i) {
    v1::InsertRequest request = TwoRows();
    request.set_sequence(999);  // overwritten by the stream
    for (int r = 0; r < i; ++r) AddRow(&request, {MakeValue(r)});
    acks.push_back(stream->Send(std::move(request)));
  }
  EXPECT_TRUE(stream->Close().ok());
  EXPECT_EQ(stream->pending(), 0u);
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<InsertResult> r = acks[static_cast<size_t>(i)].get();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->rows, static_cast<uint64_t>(2 + i));
    EXPECT_EQ(r->query_id, "stream-q");
  }
  std::vector<uint64_t> sequences;
  for (const v1::InsertRequest& r : server.service().stream_requests()) {
    sequences.push_back(r.sequence());
  }
  EXPECT_THAT(sequences, ElementsAre(1, 2, 3, 4));
}

// A request the caller keeps (the Producer's, for a resend) is written where it is: its sequence
// set by the stream, its rows as they were, and it can go again after its ack.
TEST(InsertStreamTest, ASharedRequestIsWrittenWithoutACopyAndCanGoAgain) {
  FakeServer server;
  std::unique_ptr<InsertStream> stream = Connect(server)->OpenInsertStream();
  auto request = std::make_shared<v1::InsertRequest>(TwoRows());
  request->set_idempotency_key("k-1");
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::promise<absl::StatusOr<InsertResult>> ack;
    stream->Send(request, [&](absl::StatusOr<InsertResult> r) { ack.set_value(std::move(r)); });
    absl::StatusOr<InsertResult> r = ack.get_future().get();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->rows, 2u);
    EXPECT_EQ(request->sequence(), static_cast<uint64_t>(attempt + 1));
  }
  EXPECT_TRUE(stream->Close().ok());
  const std::vector<v1::InsertRequest> received = server.service().stream_requests();
  ASSERT_EQ(received.size(), 2u);
  for (size_t i = 0; i < received.size(); ++i) {
    EXPECT_EQ(received[i].sequence(), i + 1);
    EXPECT_EQ(received[i].idempotency_key(), "k-1");
    EXPECT_EQ(received[i].rows().SerializeAsString(), request->rows().SerializeAsString());
  }
}

TEST(InsertStreamTest, PerRequestFailuresKeepTheStreamGoing) {
  FakeServer server;
  server.service().set_stream_ack_status(
      [](const v1::InsertRequest& r) -> std::optional<v1::Status> {
        if (r.table() != "bad") return std::nullopt;
        v1::Status s;
        s.set_code(5);
        s.set_message("table bad does not exist");
        s.set_clickhouse_code(60);
        return s;
      });
  std::unique_ptr<InsertStream> stream = Connect(server)->OpenInsertStream();
  v1::InsertRequest bad = TwoRows();
  bad.set_table("bad");
  absl::Mutex mu;
  std::vector<absl::StatusOr<InsertResult>> results;
  auto record = [&](absl::StatusOr<InsertResult> r) {
    absl::MutexLock lock(&mu);
    results.push_back(std::move(r));
  };
  stream->Send(TwoRows(), record);
  stream->Send(bad, record);
  stream->Send(TwoRows(), record);
  EXPECT_TRUE(stream->Close().ok());
  absl::MutexLock lock(&mu);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(results[1].status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(GetStatusDetail(results[1].status())->clickhouse_code(), 60);
  EXPECT_TRUE(results[2].ok());
}

TEST(InsertStreamTest, StreamFailureFailsEveryPendingRequest) {
  FakeServer server;
  server.service().set_stream_hold_until(100);  // never ack
  server.service().set_stream_end_after(
      3, grpc::Status(grpc::StatusCode::UNAVAILABLE, "chgate is shutting down"));
  std::unique_ptr<InsertStream> stream = Connect(server)->OpenInsertStream();
  std::vector<std::future<absl::StatusOr<InsertResult>>> acks;
  for (int i = 0; i < 3; ++i) acks.push_back(stream->Send(TwoRows()));
  for (auto& ack : acks) {
    absl::StatusOr<InsertResult> r = ack.get();
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(r.status().message(), HasSubstr("ended before the ack for sequence"));
    EXPECT_THAT(r.status().message(), HasSubstr("shutting down"));
  }
  absl::Status closed = stream->Close();
  EXPECT_EQ(closed.code(), absl::StatusCode::kUnavailable);
  // Sending after the end fails at once with the stream's code.
  EXPECT_EQ(stream->Send(TwoRows()).get().status().code(), absl::StatusCode::kUnavailable);
}

TEST(InsertStreamTest, SendBlocksWhileTheServerDoesNotReadAndResumesAfter) {
  FakeServer server;
  server.service().set_stream_stall_reads(true);
  std::unique_ptr<InsertStream> stream = Connect(server)->OpenInsertStream();
  // 64 MiB in 64 KiB requests: more than the SDK's unsent queue (16 MiB) and gRPC's windows.
  v1::InsertRequest big = TwoRows();
  AddRow(&big, {MakeValue(std::string(64 << 10, 'x'))});
  constexpr int kRequests = 1024;
  std::atomic<int> sent{0};
  std::atomic<int> acked{0};
  std::thread producer([&] {
    for (int i = 0; i < kRequests; ++i) {
      stream->Send(big, [&](absl::StatusOr<InsertResult> r) {
        if (r.ok()) acked.fetch_add(1);
      });
      sent.fetch_add(1);
    }
  });
  // The producer stops well short of the end: Send waits for room in the queue.
  absl::SleepFor(absl::Seconds(1));
  const int stalled_at = sent.load();
  EXPECT_LT(stalled_at, kRequests / 2);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(sent.load(), stalled_at) << "Send kept returning while nothing was read";
  server.service().set_stream_stall_reads(false);
  producer.join();
  EXPECT_TRUE(stream->Close().ok());
  EXPECT_EQ(acked.load(), kRequests);
  EXPECT_EQ(server.service().stream_requests().size(), static_cast<size_t>(kRequests));
}

TEST(InsertStreamTest, SendAfterCloseIsRefused) {
  FakeServer server;
  std::unique_ptr<InsertStream> stream = Connect(server)->OpenInsertStream();
  EXPECT_TRUE(stream->Send(TwoRows()).get().ok());
  EXPECT_TRUE(stream->Close().ok());
  EXPECT_TRUE(stream->Close().ok());  // idempotent
  EXPECT_EQ(stream->Send(TwoRows()).get().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(InsertStreamTest, CancelFailsPendingRequestsWithCancelled) {
  FakeServer server;
  server.service().set_stream_hold_until(100);
  std::unique_ptr<InsertStream> stream = Connect(server)->OpenInsertStream();
  std::future<absl::StatusOr<InsertResult>> ack = stream->Send(TwoRows());
  ASSERT_TRUE(server.service().WaitForStreamRequests(1, absl::Seconds(20)));
  stream->Cancel();
  EXPECT_EQ(ack.get().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(stream->Close().code(), absl::StatusCode::kCancelled);
}

TEST(InsertStreamTest, DestroyingAnOpenStreamFailsPendingRequests) {
  FakeServer server;
  server.service().set_stream_hold_until(100);
  std::future<absl::StatusOr<InsertResult>> ack;
  {
    std::unique_ptr<InsertStream> stream = Connect(server)->OpenInsertStream();
    ack = stream->Send(TwoRows());
  }
  EXPECT_EQ(ack.get().status().code(), absl::StatusCode::kCancelled);
}

TEST(InsertStreamTest, UnreachableServerFailsRequestsWithUnavailable) {
  std::unique_ptr<Client> client = Client::Create(testing::UnusedAddress(), FastRetries()).value();
  std::unique_ptr<InsertStream> stream = client->OpenInsertStream();
  EXPECT_EQ(stream->Send(TwoRows()).get().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(stream->Close().code(), absl::StatusCode::kUnavailable);
}

TEST(HealthTest, ReportsServingStatusPerService) {
  FakeServer server;
  server.health()->SetServingStatus("readiness", false);
  server.health()->SetServingStatus("liveness", true);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  EXPECT_EQ(CheckHealth(channel, "liveness", absl::Seconds(20)).value(), ServingStatus::kServing);
  EXPECT_EQ(CheckHealth(channel, "readiness", absl::Seconds(20)).value(),
            ServingStatus::kNotServing);
  EXPECT_EQ(CheckHealth(channel, "", absl::Seconds(20)).value(), ServingStatus::kServing);
  EXPECT_EQ(CheckHealth(channel, "nope", absl::Seconds(20)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ServingStatusName(ServingStatus::kNotServing), "NOT_SERVING");
}

TEST(ClientTest, RejectsBadOptions) {
  EXPECT_EQ(Client::Create("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Client::Create("x:1", {.max_receive_message_bytes = -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace chgate::client
