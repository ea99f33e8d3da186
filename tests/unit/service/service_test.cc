// The gRPC front end end to end in one process: a real Server on 127.0.0.1:0 (API and health
// listeners) over a real Ingestor whose Inserter is a fake that records blocks and can fail or
// block, driven through the generated client stub. Covers Insert by rows and by block, error
// statuses and the chgate-status-bin trailer, InsertStream acks and backpressure, health, and
// shutdown. Waits are on conditions with deadlines, never fixed sleeps.
#include <gmock/gmock.h>
#include <google/protobuf/wrappers.pb.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "chgate/v1/chgate.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/protocol/error_codes.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/clickhouse/text_form.h"
#include "server/ingest/ingestor.h"
#include "server/log/log.h"
#include "server/service/grpc_log.h"
#include "server/service/read_gate.h"
#include "server/service/server.h"
#include "server/service/status.h"

namespace chgate::service {
namespace {

using ::testing::HasSubstr;

// The table the fake knows: "events" in any database, with one column of each family.
const std::vector<std::pair<std::string, std::string>>& EventsColumns() {
  static const auto* columns = new std::vector<std::pair<std::string, std::string>>{
      {"id", "UInt64"},
      {"name", "Nullable(String)"},
      {"tags", "Array(UInt32)"},
      {"ts", "DateTime('UTC')"},
      {"uid", "UUID"},
      {"amount", "Decimal(18, 4)"},
      {"level", "LowCardinality(String)"},
  };
  return *columns;
}

class FakeInserter final : public ingest::Inserter {
 public:
  absl::StatusOr<ingest::TableSchema> Describe(const ingest::TableId& table,
                                               const std::vector<std::string>& columns,
                                               absl::Time) override {
    if (table.table != "events") {
      return clickhouse::ExceptionToStatus(
          {.code = clickhouse::error_code::kUnknownTable,
           .name = "DB::Exception",
           .message = absl::StrCat("Table ", table.database, ".", table.table, " doesn't exist")});
    }
    ingest::TableSchema schema;
    schema.server_time_zone = "UTC";
    std::vector<std::string> names = columns;
    if (names.empty()) {
      for (const auto& [name, type] : EventsColumns()) names.push_back(name);
    }
    for (const std::string& name : names) {
      auto it = std::find_if(EventsColumns().begin(), EventsColumns().end(),
                             [&](const auto& c) { return c.first == name; });
      if (it == EventsColumns().end()) {
        return absl::InvalidArgumentError(absl::StrCat("No such column ", name));
      }
      schema.names.push_back(name);
      schema.prototypes.push_back(*clickhouse::CreateColumn(it->second));
    }
    return schema;
  }

  absl::Status Insert(const ingest::TableId&, const clickhouse::BlockParts& parts,
                      const ingest::InsertAttempt&, absl::Time) override {
    const clickhouse::Block& block = parts.Gathered();
    absl::MutexLock lock(&mu_);
    ++started_;
    auto released = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !blocked_; };
    mu_.Await(absl::Condition(&released));
    if (!fail_with_.ok()) return fail_with_;
    for (size_t r = 0; r < block.rows(); ++r) {
      std::string text;
      for (size_t c = 0; c < block.column_count(); ++c) {
        if (c > 0) text.push_back('\t');
        AppendTsvValue(*block.column(c).column, r, false, &text);
      }
      rows_.push_back(std::move(text));
    }
    return absl::OkStatus();
  }

  void Block() {
    absl::MutexLock lock(&mu_);
    blocked_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    blocked_ = false;
  }
  void FailWith(absl::Status status) {
    absl::MutexLock lock(&mu_);
    fail_with_ = std::move(status);
  }
  // Waits until `n` inserts have started (they may be blocked); false at the deadline.
  bool WaitForStarted(int n, absl::Duration timeout = absl::Seconds(20)) {
    absl::MutexLock lock(&mu_);
    auto started = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return started_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&started), timeout);
  }
  std::vector<std::string> rows() {
    absl::MutexLock lock(&mu_);
    return rows_;
  }

 private:
  absl::Mutex mu_;
  bool blocked_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status fail_with_ ABSL_GUARDED_BY(mu_);
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> rows_ ABSL_GUARDED_BY(mu_);
};

// Polls `condition` until it holds or `timeout` passes; returns whether it held.
bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

void SetDeadline(grpc::ClientContext* context, absl::Duration timeout = absl::Seconds(20)) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

// The chgate.v1.Status in the call's `chgate-status-bin` trailer, if any.
std::optional<v1::Status> StatusTrailer(const grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find(kStatusTrailerKey);
  if (it == trailers.end()) return std::nullopt;
  v1::Status status;
  if (!status.ParseFromArray(it->second.data(), static_cast<int>(it->second.size()))) {
    return std::nullopt;
  }
  return status;
}

constexpr int kServing = 1;
constexpr int kNotServing = 2;

// grpc.health.v1.Health/Check through the generic stub. HealthCheckRequest (`string service = 1`)
// and HealthCheckResponse (`ServingStatus status = 1`) have the wire form of StringValue and
// Int32Value, so no health stubs are needed. Returns the serving status or the call's error.
absl::StatusOr<int> HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& service) {
  grpc::GenericStub stub(channel);
  google::protobuf::StringValue request;
  request.set_value(service);
  grpc::Slice slice(request.SerializeAsString());
  grpc::ByteBuffer request_bytes(&slice, 1);
  grpc::ByteBuffer response_bytes;
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(10));
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request_bytes,
                 &response_bytes, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  std::vector<grpc::Slice> slices;
  if (!response_bytes.Dump(&slices).ok()) return absl::InternalError("bad response");
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  google::protobuf::Int32Value response;
  if (!response.ParseFromString(bytes)) return absl::InternalError("bad response");
  return response.value();
}

// One call of `method` carrying `bytes` as the request message, through the generic stub (so
// the bytes need not be a valid message). For streaming methods this sends one message and
// half-closes; the status is what the server ended the call with.
grpc::Status RawCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                     const std::string& bytes, std::string* response = nullptr) {
  grpc::GenericStub stub(channel);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request_bytes(&slice, 1);
  grpc::ByteBuffer response_bytes;
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(10));
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request_bytes, &response_bytes,
                 [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (response != nullptr && status.ok()) {
    std::vector<grpc::Slice> slices;
    if (response_bytes.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        response->append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
  }
  return status;
}

// Two rows with one value of each column type, by rows.
v1::InsertRequest RowsRequest() {
  v1::InsertRequest request;
  request.set_table("events");
  v1::Row* row = request.mutable_rows()->add_rows();
  row->add_values()->set_uint64_value(1);
  row->add_values()->set_string_value("alice");
  v1::ValueList* tags = row->add_values()->mutable_array_value();
  for (int64_t t : {1, 2, 3}) tags->add_values()->set_int64_value(t);
  row->add_values()->set_string_value("2024-05-01T12:00:00Z");
  row->add_values()->set_string_value("00112233-4455-6677-8899-aabbccddeeff");
  row->add_values()->set_string_value("12.3456");
  row->add_values()->set_string_value("info");
  row = request.mutable_rows()->add_rows();
  row->add_values()->set_uint64_value(2);
  row->add_values()->set_null_value(google::protobuf::NULL_VALUE);
  row->add_values()->mutable_array_value();
  row->add_values()->set_int64_value(1714564800);
  std::string uuid;
  for (int i = 0; i < 16; ++i) uuid.push_back(static_cast<char>(0xf0 + i));
  row->add_values()->set_bytes_value(uuid);
  row->add_values()->set_int64_value(7);
  row->add_values()->set_string_value("warn");
  return request;
}

template <typename T>
std::string LittleEndian(std::initializer_list<T> values) {
  std::string out;
  for (T v : values) out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return out;
}

// The same two rows as RowsRequest, as a columnar Block.
v1::InsertRequest BlockRequest() {
  v1::InsertRequest request;
  request.set_table("events");
  v1::Block* block = request.mutable_block();
  block->set_rows(2);
  auto column = [&](const char* name, const char* type) {
    v1::Column* c = block->add_columns();
    c->set_name(name);
    c->set_type(type);
    return c;
  };
  column("id", "UInt64")->set_data(LittleEndian<uint64_t>({1, 2}));
  v1::Column* name = column("name", "Nullable(String)");
  name->set_nulls(std::string("\0\1", 2));
  name->set_data("alice");
  name->add_offsets(5);
  name->add_offsets(5);
  v1::Column* tags = column("tags", "Array(UInt32)");
  tags->add_offsets(3);
  tags->add_offsets(3);
  tags->add_children()->set_data(LittleEndian<uint32_t>({1, 2, 3}));
  v1::Column* ts = column("ts", "DateTime('UTC')");
  ts->add_uint64s(1714564800);
  ts->add_uint64s(1714564800);
  std::string uuids;
  for (int i = 0; i < 16; ++i) uuids.push_back(static_cast<char>(i * 0x11));
  for (int i = 0; i < 16; ++i) uuids.push_back(static_cast<char>(0xf0 + i));
  column("uid", "UUID")->set_data(uuids);
  v1::Column* amount = column("amount", "Decimal(18, 4)");
  amount->add_int64s(123456);
  amount->add_int64s(70000);
  v1::Column* level = column("level", "LowCardinality(String)");
  level->add_strings("info");
  level->add_strings("warn");
  return request;
}

// One row (id, name) for the `id` and `name` columns.
v1::InsertRequest SmallRequest(uint64_t id, const std::string& name = "x") {
  v1::InsertRequest request;
  request.set_table("events");
  request.add_columns("id");
  request.add_columns("name");
  request.set_sequence(id);
  v1::Row* row = request.mutable_rows()->add_rows();
  row->add_values()->set_uint64_value(id);
  row->add_values()->set_string_value(name);
  return request;
}

ingest::IngestOptions FastFlushes() {
  ingest::IngestOptions options;
  options.limits.max_delay = absl::Milliseconds(5);
  options.background = true;
  return options;
}

class ServiceTest : public ::testing::Test {
 protected:
  void Start(ingest::IngestOptions options = FastFlushes(), ServerOptions server_options = {}) {
    ingestor_ =
        std::make_unique<ingest::Ingestor>(std::move(options), &inserter_, ingest::RealClock());
    const bool unix_socket = absl::StartsWith(server_options.api_address, "unix:");
    if (!unix_socket) server_options.api_address = "127.0.0.1:0";
    if (server_options.health_listener == nullptr) server_options.health_address = "127.0.0.1:0";
    absl::StatusOr<std::unique_ptr<Server>> server = StartServer(server_options, ingestor_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_NE(server_->api_port(), 0);
    ASSERT_NE(server_->health_port(), 0);
    ASSERT_NE(server_->api_port(), server_->health_port());
    api_channel_ = grpc::CreateChannel(
        unix_socket ? server_options.api_address : absl::StrCat("127.0.0.1:", server_->api_port()),
        grpc::InsecureChannelCredentials());
    health_channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->health_port()),
                                          grpc::InsecureChannelCredentials());
    stub_ = v1::Ingest::NewStub(api_channel_);
  }

  void TearDown() override {
    inserter_.Release();
    if (server_ != nullptr) server_->Shutdown(absl::Now() + absl::Seconds(10));
    server_.reset();
    ingestor_.reset();
  }

  grpc::Status Insert(const v1::InsertRequest& request, v1::InsertResponse* response,
                      grpc::ClientContext* context = nullptr) {
    grpc::ClientContext local;
    if (context == nullptr) {
      context = &local;
      SetDeadline(context);
    }
    return stub_->Insert(context, request, response);
  }
  // Writes `requests` on one InsertStream, half-closes it and returns its acks by sequence; the
  // stream must end OK.
  std::map<uint64_t, v1::InsertAck> StreamAcks(const std::vector<v1::InsertRequest>& requests) {
    grpc::ClientContext context;
    SetDeadline(&context);
    auto stream = stub_->InsertStream(&context);
    for (const v1::InsertRequest& request : requests) EXPECT_TRUE(stream->Write(request));
    stream->WritesDone();
    std::map<uint64_t, v1::InsertAck> acks;
    v1::InsertAck ack;
    while (stream->Read(&ack)) acks[ack.sequence()] = ack;
    EXPECT_TRUE(stream->Finish().ok());
    return acks;
  }

  FakeInserter inserter_;
  std::unique_ptr<ingest::Ingestor> ingestor_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> api_channel_;
  std::shared_ptr<grpc::Channel> health_channel_;
  std::unique_ptr<v1::Ingest::Stub> stub_;
};

TEST_F(ServiceTest, InsertRowsReturnsAfterCommit) {
  Start();
  v1::InsertResponse response;
  grpc::Status status = Insert(RowsRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.rows(), 2u);
  EXPECT_EQ(response.ack_mode(), v1::ACK_MODE_COMMITTED);
  EXPECT_FALSE(response.query_id().empty());
  EXPECT_GT(response.commit_time().seconds(), 0);
  std::vector<std::string> rows = inserter_.rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_THAT(rows[0], HasSubstr("alice\t[1,2,3]\t2024-05-01 12:00:00\t"
                                 "00112233-4455-6677-8899-aabbccddeeff\t12.3456\tinfo"));
  EXPECT_THAT(rows[1], HasSubstr("\\N\t[]\t2024-05-01 12:00:00\tf0f1f2f3-f4f5-f6f7-f8f9-"
                                 "fafbfcfdfeff\t7"));
}

TEST_F(ServiceTest, InsertBlockStoresTheSameRowsAsInsertRows) {
  Start();
  v1::InsertResponse by_rows, by_block;
  ASSERT_TRUE(Insert(RowsRequest(), &by_rows).ok());
  grpc::Status status = Insert(BlockRequest(), &by_block);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(by_block.rows(), 2u);
  EXPECT_EQ(by_block.ack_mode(), v1::ACK_MODE_COMMITTED);
  EXPECT_FALSE(by_block.query_id().empty());
  std::vector<std::string> rows = inserter_.rows();
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[2], rows[0]);
  EXPECT_EQ(rows[3], rows[1]);
}

TEST_F(ServiceTest, AcceptedAckAndEmptyRequest) {
  Start();
  v1::InsertRequest accepted = SmallRequest(1);
  accepted.set_ack_mode(v1::ACK_MODE_ACCEPTED);
  v1::InsertResponse response;
  ASSERT_TRUE(Insert(accepted, &response).ok());
  EXPECT_EQ(response.ack_mode(), v1::ACK_MODE_ACCEPTED);
  EXPECT_EQ(response.rows(), 1u);
  EXPECT_FALSE(response.has_commit_time());

  // No rows: the table is resolved and the call answers at once.
  v1::InsertRequest empty;
  empty.set_table("events");
  ASSERT_TRUE(Insert(empty, &response).ok());
  EXPECT_EQ(response.rows(), 0u);
  EXPECT_EQ(response.ack_mode(), v1::ACK_MODE_COMMITTED);
  empty.set_table("nope");
  EXPECT_EQ(Insert(empty, &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServiceTest, BadValueIsInvalidArgumentWithValueErrorTrailer) {
  Start();
  v1::InsertRequest request = RowsRequest();
  request.mutable_rows()->mutable_rows(1)->mutable_values(3)->set_string_value("yesterday");
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::InsertResponse response;
  grpc::Status status = Insert(request, &response, &context);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("row 1"));
  EXPECT_THAT(status.error_message(), HasSubstr("'ts'"));
  EXPECT_THAT(status.error_message(), HasSubstr("yesterday"));
  EXPECT_THAT(status.error_message(), HasSubstr("DateTime('UTC')"));
  std::optional<v1::Status> detail = StatusTrailer(context);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->code(), 3);
  EXPECT_EQ(detail->message(), status.error_message());
  ASSERT_TRUE(detail->has_value_error());
  EXPECT_EQ(detail->value_error().row_index(), 1u);
  EXPECT_TRUE(detail->value_error().has_row_index());
  EXPECT_EQ(detail->value_error().column(), "ts");
  EXPECT_EQ(detail->value_error().type(), "DateTime('UTC')");
  EXPECT_EQ(detail->value_error().value(), "yesterday");
  EXPECT_TRUE(inserter_.rows().empty());
}

TEST_F(ServiceTest, BadBlocksAreInvalidArgument) {
  Start();
  v1::InsertResponse response;

  v1::InsertRequest drift = BlockRequest();
  drift.mutable_block()->mutable_columns(0)->set_type("UInt32");
  drift.mutable_block()->mutable_columns(0)->set_data(LittleEndian<uint32_t>({1, 2}));
  grpc::Status status = Insert(drift, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("UInt64"));

  v1::InsertRequest no_type = BlockRequest();
  no_type.mutable_block()->mutable_columns(2)->clear_type();
  grpc::ClientContext context;
  SetDeadline(&context);
  status = Insert(no_type, &response, &context);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("tags"));
  ASSERT_TRUE(StatusTrailer(context).has_value());
  EXPECT_EQ(StatusTrailer(context)->value_error().column(), "tags");

  v1::InsertRequest out_of_range = BlockRequest();
  out_of_range.mutable_block()->mutable_columns(3)->set_uint64s(1, uint64_t{1} << 40);
  status = Insert(out_of_range, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("row 1"));

  v1::InsertRequest misnamed = BlockRequest();
  misnamed.add_columns("id");
  status = Insert(misnamed, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::InsertRequest unknown_column = SmallRequest(1);
  unknown_column.set_columns(1, "nope");
  EXPECT_EQ(Insert(unknown_column, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::InsertRequest twice = SmallRequest(1);
  twice.set_columns(1, "id");
  EXPECT_EQ(Insert(twice, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::InsertRequest no_table = SmallRequest(1);
  no_table.clear_table();
  EXPECT_EQ(Insert(no_table, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(inserter_.rows().empty());
}

TEST_F(ServiceTest, UnparseableRequestsAreInvalidArgumentWithAMessage) {
  Start();
  // A length-delimited field that promises 100 bytes and carries 3; a lone group start; a tag
  // with field number 0.
  for (const std::string& bytes : {std::string("\x0a\x64"
                                               "abc"),
                                   std::string("\x0b"), std::string("\x00\x01", 2)}) {
    for (const char* method : {"/chgate.v1.Ingest/Insert", "/chgate.v1.Ingest/InsertStream"}) {
      grpc::Status status = RawCall(api_channel_, method, bytes);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << method << ": " << status.error_message();
      EXPECT_THAT(status.error_message(), HasSubstr("chgate.v1.InsertRequest")) << method;
    }
  }
  EXPECT_TRUE(inserter_.rows().empty());
  // The service still works for well-formed calls.
  v1::InsertResponse response;
  EXPECT_TRUE(Insert(RowsRequest(), &response).ok());
}

// Sum of the sizes gRPC counts against a client's metadata limit (name + value + 32 per entry),
// for the trailers and the status message the server sent.
size_t TrailerBytes(const grpc::ClientContext& context, const grpc::Status& status) {
  size_t total = status.error_message().size() * 3 + 32;  // grpc-message, percent-encoded at worst
  for (const auto& [key, value] : context.GetServerTrailingMetadata()) {
    total += key.size() + (value.size() * 4 + 2) / 3 + 32;  // binary values travel as base64
  }
  return total;
}

TEST_F(ServiceTest, TenKilobyteNamesKeepStatusAndTrailersSmall) {
  Start();
  const std::string huge(10 << 10, 'n');
  struct Case {
    std::string what;
    v1::InsertRequest request;
    grpc::StatusCode code;
  };
  std::vector<Case> cases;
  {
    // The fake echoes the table name in its UNKNOWN_TABLE message, as ClickHouse does.
    v1::InsertRequest r = RowsRequest();
    r.set_table(absl::StrCat("`", huge, "`"));
    cases.push_back({"table", r, grpc::StatusCode::NOT_FOUND});
  }
  {
    v1::InsertRequest r = RowsRequest();
    r.set_table(huge + " x");  // not a name at all: the parse error echoes it
    cases.push_back({"unparseable table", r, grpc::StatusCode::INVALID_ARGUMENT});
  }
  {
    v1::InsertRequest r = RowsRequest();
    r.add_columns(huge);  // the fake echoes unknown columns
    cases.push_back({"column", r, grpc::StatusCode::INVALID_ARGUMENT});
  }
  {
    v1::InsertRequest r = BlockRequest();
    r.mutable_block()->mutable_columns(0)->set_name(huge);
    r.mutable_block()->mutable_columns(0)->clear_type();
    cases.push_back({"block column", r, grpc::StatusCode::INVALID_ARGUMENT});
  }
  {
    v1::InsertRequest r = RowsRequest();
    r.add_columns(huge);
    r.add_columns(huge);  // listed twice: echoes the name with a value error
    cases.push_back({"listed twice", r, grpc::StatusCode::INVALID_ARGUMENT});
  }
  for (const Case& c : cases) {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::InsertResponse response;
    grpc::Status status = Insert(c.request, &response, &context);
    // Before names were cut, the client saw RESOURCE_EXHAUSTED: its trailers were over 8 KiB.
    EXPECT_EQ(status.error_code(), c.code)
        << c.what << ": " << status.error_message().substr(0, 200);
    EXPECT_LE(status.error_message().size(), kMaxStatusMessageBytes) << c.what;
    std::optional<v1::Status> detail = StatusTrailer(context);
    ASSERT_TRUE(detail.has_value()) << c.what;
    EXPECT_EQ(detail->code(), static_cast<int>(c.code)) << c.what;
    EXPECT_LE(detail->value_error().column().size(), 128u) << c.what;
    EXPECT_LT(TrailerBytes(context, status), 6u << 10) << c.what;
  }
}

TEST_F(ServiceTest, ClickHouseCodesMapToTheirMeaning) {
  struct Case {
    int32_t code;
    grpc::StatusCode expected;
    const char* symbol;
  };
  for (const Case& c : {
           Case{clickhouse::error_code::kIllegalColumn, grpc::StatusCode::INVALID_ARGUMENT,
                "ILLEGAL_COLUMN"},
           Case{clickhouse::error_code::kQueryWithSameIdIsAlreadyRunning,
                grpc::StatusCode::ALREADY_EXISTS, "QUERY_WITH_SAME_ID_IS_ALREADY_RUNNING"},
           Case{clickhouse::error_code::kThereIsNoColumn, grpc::StatusCode::INVALID_ARGUMENT,
                "THERE_IS_NO_COLUMN"},
           Case{clickhouse::error_code::kThereIsNoQuery, grpc::StatusCode::NOT_FOUND,
                "THERE_IS_NO_QUERY"},
           Case{clickhouse::error_code::kQuotaExpired, grpc::StatusCode::RESOURCE_EXHAUSTED,
                "QUOTA_EXPIRED"},
           Case{clickhouse::error_code::kReadonlySetting, grpc::StatusCode::PERMISSION_DENIED,
                "READONLY_SETTING"},
           Case{clickhouse::error_code::kUnknownTable, grpc::StatusCode::NOT_FOUND,
                "UNKNOWN_TABLE"},
           Case{99999, grpc::StatusCode::UNKNOWN, ""},
       }) {
    grpc::Status status = ToGrpcStatus(
        clickhouse::ExceptionToStatus({.code = c.code, .name = "DB::Exception", .message = "m"}));
    EXPECT_EQ(status.error_code(), c.expected) << c.code;
    if (*c.symbol != '\0') {
      EXPECT_THAT(status.error_message(), HasSubstr(c.symbol)) << c.code;
    }
  }
}

TEST_F(ServiceTest, UnknownTableIsNotFoundWithClickHouseCode) {
  Start();
  v1::InsertRequest request = RowsRequest();
  request.set_table("analytics.nope");
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::InsertResponse response;
  grpc::Status status = Insert(request, &response, &context);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("analytics.nope"));
  std::optional<v1::Status> detail = StatusTrailer(context);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->code(), 5);
  EXPECT_EQ(detail->clickhouse_code(), clickhouse::error_code::kUnknownTable);
  EXPECT_EQ(detail->clickhouse_exception_name(), "DB::Exception");
  EXPECT_FALSE(detail->has_value_error());
}

TEST_F(ServiceTest, FailedFlushReachesTheCaller) {
  Start();
  inserter_.FailWith(clickhouse::ExceptionToStatus({.code = clickhouse::error_code::kReadonly,
                                                    .name = "DB::Exception",
                                                    .message = "Cannot insert: readonly mode"}));
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::InsertResponse response;
  grpc::Status status = Insert(SmallRequest(1), &response, &context);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(StatusTrailer(context).has_value());
  EXPECT_EQ(StatusTrailer(context)->clickhouse_code(), clickhouse::error_code::kReadonly);
}

TEST_F(ServiceTest, OversizedRequestIsRejectedByGrpc) {
  Start(FastFlushes(), {.max_message_bytes = 64 << 10});
  v1::InsertResponse response;
  grpc::Status status = Insert(SmallRequest(1, std::string(128 << 10, 'x')), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Insert(SmallRequest(2), &response).ok());
}

TEST_F(ServiceTest, QueryIsUnimplemented) {
  Start();
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::QueryRequest request;
  request.set_sql("SELECT 1");
  auto reader = stub_->Query(&context, request);
  v1::QueryResponse response;
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(ServiceTest, InsertStreamAcksEveryRequestOnce) {
  Start();
  constexpr int kRequests = 100;
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(60));
  auto stream = stub_->InsertStream(&context);
  std::thread writer([&] {
    for (int i = 0; i < kRequests; ++i) {
      if (!stream->Write(SmallRequest(1000 + static_cast<uint64_t>(i)))) break;
    }
    stream->WritesDone();
  });
  std::multiset<uint64_t> sequences;
  v1::InsertAck ack;
  while (stream->Read(&ack)) {
    sequences.insert(ack.sequence());
    EXPECT_EQ(ack.status().code(), 0) << ack.status().message();
    EXPECT_EQ(ack.rows(), 1u);
    EXPECT_EQ(ack.ack_mode(), v1::ACK_MODE_COMMITTED);
    EXPECT_FALSE(ack.query_id().empty());
  }
  writer.join();
  grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(sequences.size(), static_cast<size_t>(kRequests));
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_EQ(sequences.count(1000 + static_cast<uint64_t>(i)), 1u) << i;
  }
  EXPECT_EQ(inserter_.rows().size(), static_cast<size_t>(kRequests));
}

// Acks queued behind one another leave together (gRPC's buffer hint on all but the last of a
// run): every ack of a burst must still arrive while the stream stays open, none held back for
// a write that never comes.
TEST_F(ServiceTest, InsertStreamAcksABurstWhileTheStreamStaysOpen) {
  Start();
  constexpr int kRequests = 200;
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(60));
  auto stream = stub_->InsertStream(&context);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < kRequests; ++i) {
      ASSERT_TRUE(stream->Write(SmallRequest(static_cast<uint64_t>(round * kRequests + i + 1))));
    }
    std::set<uint64_t> sequences;
    v1::InsertAck ack;
    while (sequences.size() < static_cast<size_t>(kRequests) && stream->Read(&ack)) {
      EXPECT_EQ(ack.status().code(), 0) << ack.status().message();
      sequences.insert(ack.sequence());
    }
    ASSERT_EQ(sequences.size(), static_cast<size_t>(kRequests)) << "round " << round;
    EXPECT_EQ(*sequences.begin(), static_cast<uint64_t>(round * kRequests + 1));
  }
  stream->WritesDone();
  v1::InsertAck extra;
  EXPECT_FALSE(stream->Read(&extra));
  grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(ServiceTest, InsertStreamRejectsOneRequestAndGoesOn) {
  Start();
  v1::InsertRequest bad = SmallRequest(2);
  bad.set_table("nope");
  v1::InsertRequest invalid = SmallRequest(3);
  invalid.mutable_rows()->mutable_rows(0)->mutable_values(0)->set_string_value("three");
  std::map<uint64_t, v1::InsertAck> acks =
      StreamAcks({SmallRequest(1), bad, invalid, SmallRequest(4)});
  ASSERT_EQ(acks.size(), 4u);
  EXPECT_EQ(acks[1].status().code(), 0);
  EXPECT_EQ(acks[2].status().code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(acks[2].status().clickhouse_code(), clickhouse::error_code::kUnknownTable);
  EXPECT_EQ(acks[2].rows(), 0u);
  EXPECT_EQ(acks[3].status().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(acks[3].status().value_error().column(), "id");
  EXPECT_EQ(acks[3].status().value_error().value(), "three");
  EXPECT_EQ(acks[4].status().code(), 0);
  EXPECT_EQ(acks[4].rows(), 1u);
}

// A string value that is not UTF-8 makes protobuf refuse the whole message; chgate names the
// field, fails that request alone and reads on (the message's framing is sound).
TEST_F(ServiceTest, AStringThatIsNotUtf8FailsItsRequestAloneNamingTheField) {
  Start();
  v1::InsertRequest not_utf8 = SmallRequest(2);
  not_utf8.mutable_rows()->mutable_rows(0)->mutable_values(1)->set_string_value("caf\xe9");
  std::map<uint64_t, v1::InsertAck> acks = StreamAcks({SmallRequest(1), not_utf8, SmallRequest(3)});
  ASSERT_EQ(acks.size(), 3u);
  EXPECT_EQ(acks[1].status().code(), 0);
  EXPECT_EQ(acks[2].status().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_THAT(acks[2].status().message(),
              HasSubstr("rows.rows[0].values[1].string_value is not valid UTF-8"));
  EXPECT_EQ(acks[3].status().code(), 0);
  EXPECT_EQ(acks[3].rows(), 1u);
  v1::InsertResponse response;
  grpc::Status unary = Insert(not_utf8, &response);
  EXPECT_EQ(unary.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(unary.error_message(), HasSubstr("string_value is not valid UTF-8"));
}

// protobuf's own line about such a request goes through chgate's logger, at debug level (the
// caller has its answer), never raw to stderr.
TEST(ProtobufLogTest, ProtobufsLinesGoThroughTheLoggerAndACallersBadStringIsDebug) {
  std::ostringstream out;
  log::Logger logger({.level = log::Level::kDebug,
                      .format = log::Format::kJson,
                      .out = &out,
                      .sweep_interval = absl::ZeroDuration()});
  log::SetLogger(&logger);
  RouteGrpcLogs();
  v1::InsertRequest request = SmallRequest(1);
  request.mutable_rows()->mutable_rows(0)->mutable_values(1)->set_string_value("caf\xe9");
  v1::InsertRequest parsed;
  EXPECT_FALSE(parsed.ParseFromString(request.SerializeAsString()));
  log::SetLogger(nullptr);
  const std::string lines = out.str();
  EXPECT_THAT(lines, HasSubstr("\"component\":\"protobuf\""));
  EXPECT_THAT(lines, HasSubstr("when parsing a protocol buffer"));
  // The parse's line is the caller's mistake: debug. (Serializing it was this test's own doing.)
  for (const absl::string_view line : absl::StrSplit(lines, '\n')) {
    if (absl::StrContains(line, "when parsing")) {
      EXPECT_THAT(std::string(line), HasSubstr("\"level\":\"debug\""));
    }
  }
}

TEST_F(ServiceTest, FullBufferStopsReadingTheStreamUntilRoomReturns) {
  // Rows are buffered up to 3/4 of the budget; the rest is room for the request that waits.
  constexpr uint64_t kBudget = 4 << 20;
  constexpr uint64_t kBufferLimit = kBudget / 4 * 3;
  constexpr int kRequests = 32;
  const std::string payload(512 << 10, 'p');
  ingest::IngestOptions options = FastFlushes();
  options.limits.max_rows = 1;  // every request starts a flush; the first one blocks
  options.memory_budget_bytes = kBudget;
  Start(options);
  inserter_.Block();

  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(120));
  auto stream = stub_->InsertStream(&context);
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 0; i < kRequests; ++i) {
      if (!stream->Write(SmallRequest(static_cast<uint64_t>(i), payload))) break;
      written.fetch_add(1);
    }
    stream->WritesDone();
  });

  // The server reads a request only after the previous one was admitted: once the buffer is
  // full exactly one request waits for room, and nothing admitted exceeds the budget.
  uint64_t max_buffered = 0;
  ASSERT_TRUE(WaitFor([&] {
    const ingest::IngestStats stats = ingestor_->Stats();
    max_buffered = std::max(max_buffered, stats.buffered_bytes);
    return stats.waiting_requests == 1;
  }));
  EXPECT_TRUE(inserter_.WaitForStarted(1));
  const ingest::IngestStats stalled = ingestor_->Stats();
  EXPECT_LE(max_buffered, kBufferLimit);
  EXPECT_LE(stalled.buffered_bytes, kBufferLimit);
  EXPECT_GE(stalled.buffered_rows, 2u);
  EXPECT_LT(stalled.buffered_rows, static_cast<uint64_t>(kRequests));
  // gRPC flow control holds the writer back: the stream is not drained into server memory.
  EXPECT_LT(written.load(), kRequests);
  // What requests hold beside the buffer: the one waiting, counted once converted.
  EXPECT_LE(stalled.buffered_bytes + stalled.request_bytes, kBudget);
  EXPECT_GT(stalled.request_bytes, 0u);

  inserter_.Release();
  std::set<uint64_t> acked;
  v1::InsertAck ack;
  while (stream->Read(&ack)) {
    EXPECT_EQ(ack.status().code(), 0) << ack.status().message();
    EXPECT_TRUE(acked.insert(ack.sequence()).second) << "duplicate ack " << ack.sequence();
    EXPECT_LE(ingestor_->Stats().buffered_bytes, kBufferLimit);
  }
  writer.join();
  EXPECT_EQ(written.load(), kRequests);
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(acked.size(), static_cast<size_t>(kRequests));
  EXPECT_EQ(inserter_.rows().size(), static_cast<size_t>(kRequests));
}

TEST_F(ServiceTest, InsertMessagesAreReadThroughTheGateOneAtATime) {
  ServerOptions server_options;
  server_options.read_slots = 1;
  Start(FastFlushes(), server_options);
  // Calls whose deadline passes while they wait for the slot end without holding up the rest;
  // the others are all read in turn and committed.
  constexpr int kCalls = 40;
  const std::string payload(256 << 10, 'g');
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<v1::InsertRequest> requests;
  for (int i = 0; i < kCalls; ++i) requests.push_back(SmallRequest(i, payload));
  std::vector<v1::InsertResponse> responses(kCalls);
  std::vector<grpc::Status> statuses(kCalls);
  std::atomic<int> finished{0};
  for (int i = 0; i < kCalls; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    // Every fourth call gives up almost at once, most likely while it waits for the slot.
    SetDeadline(contexts.back().get(), i % 4 == 3 ? absl::Milliseconds(1) : absl::Seconds(30));
    stub_->async()->Insert(contexts.back().get(), &requests[i], &responses[i],
                           [&, i](grpc::Status status) {
                             statuses[i] = std::move(status);
                             finished.fetch_add(1);
                           });
  }
  ASSERT_TRUE(WaitFor([&] { return finished.load() == kCalls; }));
  int committed = 0;
  for (int i = 0; i < kCalls; ++i) {
    if (i % 4 != 3) {
      EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i].error_message();
    }
    if (statuses[i].ok()) ++committed;
  }
  EXPECT_GE(committed, kCalls / 4 * 3);
  // A call that timed out after it was read may still have been committed.
  EXPECT_GE(inserter_.rows().size(), static_cast<size_t>(committed));
  // The slot came back: a call after the burst is read at once.
  v1::InsertResponse response;
  EXPECT_TRUE(Insert(SmallRequest(100), &response).ok());
}

TEST_F(ServiceTest, AnUnknownMethodIsUnimplementedAndNamed) {
  Start();
  grpc::GenericStub generic(api_channel_);
  grpc::ClientContext context;
  SetDeadline(&context);
  grpc::ByteBuffer request, response;
  v1::InsertRequest message = SmallRequest(1);
  bool own = false;
  ASSERT_TRUE(
      grpc::SerializationTraits<v1::InsertRequest>::Serialize(message, &request, &own).ok());
  absl::Notification done;
  grpc::Status status;
  generic.UnaryCall(&context, "/chgate.v1.Ingest/Nope", grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      status = std::move(s);
                      done.Notify();
                    });
  done.WaitForNotification();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(status.error_message(), testing::HasSubstr("/chgate.v1.Ingest/Nope"));
}

TEST_F(ServiceTest, CancelledCallsStaySafeWhenTheOutcomeArrivesLater) {
  Start();
  inserter_.Block();
  // A unary call whose deadline passes while its batch is stuck in the inserter.
  grpc::ClientContext unary;
  SetDeadline(&unary, absl::Milliseconds(300));
  v1::InsertResponse response;
  EXPECT_EQ(stub_->Insert(&unary, SmallRequest(1), &response).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  ASSERT_TRUE(inserter_.WaitForStarted(1));

  // A stream cancelled by its client with a request pending.
  grpc::ClientContext streaming;
  SetDeadline(&streaming);
  auto stream = stub_->InsertStream(&streaming);
  ASSERT_TRUE(stream->Write(SmallRequest(2)));
  ASSERT_TRUE(WaitFor([&] { return ingestor_->Stats().buffered_rows == 2; }));
  streaming.TryCancel();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);

  inserter_.Release();
  ASSERT_TRUE(WaitFor([&] { return ingestor_->Stats().buffered_rows == 0; }));
  EXPECT_TRUE(Insert(SmallRequest(3), &response).ok());
}

// The API on a Unix socket: calls work as over TCP, the socket has the mode asked for, a second
// server on the same path is refused (the first keeps serving), and a stop removes the file.
TEST_F(ServiceTest, ServesOnAUnixSocketAndRemovesItAtStop) {
  std::string dir = ::testing::TempDir() + "chgate-svc-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string path = dir + "/api.sock";
  ServerOptions options;
  options.api_address = "unix:" + path;
  options.api_socket_mode = 0620;
  Start(FastFlushes(), options);
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0620u);

  v1::InsertResponse response;
  grpc::Status status = Insert(RowsRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.rows(), 2u);
  EXPECT_EQ(inserter_.rows().size(), 2u);

  ingest::Ingestor other(FastFlushes(), &inserter_, ingest::RealClock());
  ServerOptions second;
  second.api_address = options.api_address;
  second.health_address = "";
  absl::StatusOr<std::unique_ptr<Server>> refused = StartServer(second, &other);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(), HasSubstr("another server accepts connections"));
  other.Shutdown(absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(Insert(SmallRequest(7), &response).ok());

  server_->Shutdown(absl::Now() + absl::Seconds(10));
  EXPECT_NE(::lstat(path.c_str(), &st), 0) << "the socket file outlived the server";
  server_.reset();
  ::rmdir(dir.c_str());
}

TEST_F(ServiceTest, HealthOnBothListeners) {
  Start();
  for (const auto& channel : {health_channel_, api_channel_}) {
    for (const char* name : {"", "liveness", "readiness", "buffer"}) {
      absl::StatusOr<int> serving = HealthCheck(channel, name);
      ASSERT_TRUE(serving.ok()) << name << ": " << serving.status();
      EXPECT_EQ(*serving, kServing) << name;
    }
    EXPECT_EQ(HealthCheck(channel, "chgate.v1.Nope").status().code(), absl::StatusCode::kNotFound);
  }
  server_->RefreshHealth();
  EXPECT_EQ(HealthCheck(health_channel_, "readiness").value_or(-1), kServing);
}

// Names of this process's threads (from /proc/self/task/*/comm).
std::vector<std::string> ThreadNames() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    std::getline(comm, name);
    names.push_back(name);
  }
  return names;
}

bool HasSyncServerThreads() {
  for (const std::string& name : ThreadNames()) {
    if (name.rfind("grpcpp_sync_ser", 0) == 0) return true;
  }
  return false;
}

// Without reflection every service is on the callback API, so gRPC runs no synchronous-server
// polling threads (they would take part in every connection's I/O); reflection brings them, and
// answers.
TEST_F(ServiceTest, OnlyReflectionBringsSynchronousServerThreads) {
  Start();
  // gRPC starts its polling threads right after the server, but not synchronously with it.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(HasSyncServerThreads());
  EXPECT_EQ(
      RawCall(api_channel_, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", "")
          .error_code(),
      grpc::StatusCode::UNIMPLEMENTED);
  server_->Shutdown(absl::Now() + absl::Seconds(5));
  server_.reset();
  EXPECT_FALSE(HasSyncServerThreads());

  Start(FastFlushes(), {.reflection = true});
  EXPECT_TRUE(WaitFor([] { return HasSyncServerThreads(); }));
  // list_services (field 7) with an empty string: the reply names chgate.v1.Ingest.
  const std::string list_services("\x3a\x00", 2);
  for (const auto& channel : {api_channel_, health_channel_}) {
    std::string reply;
    EXPECT_TRUE(RawCall(channel, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                        list_services, &reply)
                    .ok());
    EXPECT_NE(reply.find("grpc.health.v1.Health"), std::string::npos);
  }
}

// A Watch on either listener sees the drain's NOT_SERVING and ends with the shutdown, which
// does not wait for the deadline because of it.
TEST_F(ServiceTest, HealthWatchesSeeTheDrainAndEndWithTheServer) {
  Start();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stub = grpc::health::v1::Health::NewStub(health_channel_);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("readiness");
  auto reader = stub->Watch(&context, request);
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  const absl::Time start = absl::Now();
  server_->Shutdown(absl::Now() + absl::Seconds(20));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "the shutdown waited for the watch";
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_TRUE(reader->Finish().ok());
}

// The health listener main starts before the spool's recovery: live but not ready, then the
// Server takes it over (same port, same watches) and it reports ready; the Server's shutdown
// stops it.
TEST_F(ServiceTest, AHealthListenerStartedEarlyIsLiveButNotReadyUntilTheServerTakesItOver) {
  absl::StatusOr<std::unique_ptr<HealthListener>> listener = StartHealthListener("127.0.0.1:0");
  ASSERT_TRUE(listener.ok()) << listener.status();
  const int port = (*listener)->port();
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  EXPECT_EQ(HealthCheck(channel, "liveness").value_or(-1), kServing);
  for (const char* name : {"", "readiness", "buffer"}) {
    EXPECT_EQ(HealthCheck(channel, name).value_or(-1), kNotServing) << name;
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("readiness");
  auto reader = stub->Watch(&context, request);
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);

  ServerOptions options;
  options.health_listener = listener->get();
  Start(FastFlushes(), options);
  EXPECT_EQ(server_->health_port(), port);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  for (const char* name : {"", "liveness", "readiness", "buffer"}) {
    EXPECT_EQ(HealthCheck(channel, name).value_or(-1), kServing) << name;
  }
  server_->Shutdown(absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_TRUE(reader->Finish().ok());
  server_.reset();
}

// chgate starts its health listener before anything else (before the spool's recovery), so
// reflection, when asked for, must be loaded before that listener is built: a server gets only
// the gRPC plugins loaded before its builder was made. ctest runs this case in a process of its
// own, where nothing has loaded the reflection library before.
TEST_F(ServiceTest, AHealthListenerStartedEarlyServesReflectionWhenAskedFor) {
  absl::StatusOr<std::unique_ptr<HealthListener>> listener =
      StartHealthListener("127.0.0.1:0", /*reflection=*/true);
  ASSERT_TRUE(listener.ok()) << listener.status();
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*listener)->port()),
                                     grpc::InsecureChannelCredentials());
  const std::string list_services("\x3a\x00", 2);  // list_services (field 7), empty
  const std::string method = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  std::string reply;
  const grpc::Status before = RawCall(channel, method, list_services, &reply);
  ASSERT_TRUE(before.ok()) << before.error_message();
  EXPECT_NE(reply.find("grpc.health.v1.Health"), std::string::npos);

  ServerOptions options;
  options.health_listener = listener->get();
  options.reflection = true;
  Start(FastFlushes(), options);
  for (const auto& c : {channel, api_channel_}) {
    reply.clear();
    const grpc::Status after = RawCall(c, method, list_services, &reply);
    ASSERT_TRUE(after.ok()) << after.error_message();
    EXPECT_NE(reply.find("grpc.health.v1.Health"), std::string::npos);
  }
  server_->Shutdown(absl::Now() + absl::Seconds(10));
  server_.reset();
}

// With a maximum connection age the server asks each client connection to go (GOAWAY), so the
// channel leaves READY on its own and reconnects: clients spread over a gateway's replicas.
TEST_F(ServiceTest, AMaximumConnectionAgeMovesClientsToNewConnections) {
  ServerOptions options;
  options.max_connection_age = absl::Seconds(1);
  options.max_connection_age_grace = absl::Seconds(1);
  Start(FastFlushes(), options);
  ASSERT_TRUE(api_channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Seconds(10))));
  ASSERT_EQ(api_channel_->GetState(false), GRPC_CHANNEL_READY);
  EXPECT_TRUE(api_channel_->WaitForStateChange(GRPC_CHANNEL_READY,
                                               absl::ToChronoTime(absl::Now() + absl::Seconds(10))))
      << "the connection outlived its maximum age";
  // The default: a connection stays.
  TearDown();
  Start();
  ASSERT_TRUE(api_channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Seconds(10))));
  EXPECT_FALSE(api_channel_->WaitForStateChange(
      GRPC_CHANNEL_READY, absl::ToChronoTime(absl::Now() + absl::Seconds(3))));
}

TEST_F(ServiceTest, TheWatchdogTurnsLivenessAloneNotServingAndBack) {
  Start();
  server_->SetLiveness(false);
  for (const auto& channel : {health_channel_, api_channel_}) {
    EXPECT_EQ(HealthCheck(channel, "liveness").value_or(-1), kNotServing);
    // Readiness is about taking calls; the kubelet's restart is liveness's business.
    EXPECT_EQ(HealthCheck(channel, "readiness").value_or(-1), kServing);
  }
  server_->RefreshHealth();  // the buffer's refresh leaves liveness alone
  EXPECT_EQ(HealthCheck(health_channel_, "liveness").value_or(-1), kNotServing);
  server_->SetLiveness(true);
  EXPECT_EQ(HealthCheck(health_channel_, "liveness").value_or(-1), kServing);
}

TEST_F(ServiceTest, ReadinessIgnoresTheBufferWhichHasItsOwnHealthName) {
  ingest::IngestOptions options = FastFlushes();
  options.memory_budget_bytes = 4096;
  options.ready_high_water = 0.5;
  options.ready_low_water = 0.2;
  Start(options);
  inserter_.Block();
  // Accepted mode returns once the rows are buffered; the flush is stuck in the inserter.
  v1::InsertRequest request = SmallRequest(1, std::string(3000, 'x'));
  request.set_ack_mode(v1::ACK_MODE_ACCEPTED);
  v1::InsertResponse response;
  ASSERT_TRUE(Insert(request, &response).ok());
  ASSERT_TRUE(inserter_.WaitForStarted(1));
  server_->RefreshHealth();
  for (const auto& channel : {health_channel_, api_channel_}) {
    EXPECT_EQ(HealthCheck(channel, "buffer").value_or(-1), kNotServing);
    // The pod's readiness and the overall status do not follow the buffer.
    EXPECT_EQ(HealthCheck(channel, "readiness").value_or(-1), kServing);
    EXPECT_EQ(HealthCheck(channel, "").value_or(-1), kServing);
    EXPECT_EQ(HealthCheck(channel, "liveness").value_or(-1), kServing);
  }
  inserter_.Release();
  ASSERT_TRUE(WaitFor([&] { return ingestor_->Stats().buffered_bytes == 0; }));
  server_->RefreshHealth();
  EXPECT_EQ(HealthCheck(health_channel_, "buffer").value_or(-1), kServing);
}

TEST_F(ServiceTest, ShutdownDrainsAndRefusesNewCalls) {
  Start();
  inserter_.Block();
  // An Insert in flight (its flush is blocked) and a stream holding one request.
  grpc::Status in_flight_status;
  v1::InsertResponse in_flight_response;
  std::thread in_flight([&] { in_flight_status = Insert(SmallRequest(1), &in_flight_response); });
  ASSERT_TRUE(inserter_.WaitForStarted(1));
  grpc::ClientContext stream_context;
  SetDeadline(&stream_context);
  auto stream = stub_->InsertStream(&stream_context);
  ASSERT_TRUE(stream->Write(SmallRequest(7)));
  ASSERT_TRUE(WaitFor([&] { return ingestor_->Stats().buffered_rows == 2; }));

  std::thread shutdown([&] { server_->Shutdown(absl::Now() + absl::Seconds(20)); });
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<int> readiness = HealthCheck(health_channel_, "readiness");
    return readiness.ok() && *readiness == kNotServing;
  }));
  EXPECT_EQ(HealthCheck(health_channel_, "").value_or(-1), kNotServing);
  EXPECT_EQ(HealthCheck(health_channel_, "buffer").value_or(-1), kNotServing);
  EXPECT_EQ(HealthCheck(health_channel_, "liveness").value_or(-1), kServing);

  v1::InsertResponse response;
  grpc::ClientContext refused_context;
  SetDeadline(&refused_context);
  grpc::Status refused = Insert(SmallRequest(8), &response, &refused_context);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(refused.error_message(), HasSubstr("shutting down"));
  ASSERT_TRUE(StatusTrailer(refused_context).has_value());
  EXPECT_EQ(StatusTrailer(refused_context)->code(), 14);
  grpc::ClientContext late_stream_context;
  SetDeadline(&late_stream_context);
  auto late_stream = stub_->InsertStream(&late_stream_context);
  v1::InsertAck ack;
  EXPECT_FALSE(late_stream->Read(&ack));
  EXPECT_EQ(late_stream->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);

  inserter_.Release();
  in_flight.join();
  EXPECT_TRUE(in_flight_status.ok()) << in_flight_status.error_message();
  EXPECT_EQ(in_flight_response.rows(), 1u);
  // The open stream gets the ack it is owed, then ends with UNAVAILABLE.
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.sequence(), 7u);
  EXPECT_EQ(ack.status().code(), 0);
  EXPECT_FALSE(stream->Read(&ack));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  shutdown.join();
  EXPECT_EQ(inserter_.rows().size(), 2u);
}

TEST_F(ServiceTest, BusyAddressIsUnavailable) {
  Start();
  ingest::Ingestor other(FastFlushes(), &inserter_, ingest::RealClock());
  const std::string busy = absl::StrCat("127.0.0.1:", server_->api_port());
  absl::StatusOr<std::unique_ptr<Server>> second =
      StartServer({.api_address = busy, .health_address = ""}, &other);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr(busy));

  absl::StatusOr<std::unique_ptr<Server>> third =
      StartServer({.api_address = "127.0.0.1:0", .health_address = busy}, &other);
  ASSERT_FALSE(third.ok());
  EXPECT_THAT(third.status().message(), HasSubstr(busy));
}

}  // namespace
}  // namespace chgate::service

namespace chgate::service {
namespace {

TEST(ReadGateTest, GivesSlotsFirstComeFirstServedAndPassesOnTheOnesNotKept) {
  ReadGate gate(1);
  std::vector<int> order;
  EXPECT_TRUE(gate.Acquire([] { return true; }));  // the only slot, at once
  EXPECT_FALSE(gate.Acquire([&] {
    order.push_back(1);
    return false;  // its call ended while it waited
  }));
  EXPECT_FALSE(gate.Acquire([&] {
    order.push_back(2);
    return true;
  }));
  EXPECT_EQ(gate.queued(), 2u);
  gate.Release();  // to 1, which passes it on to 2
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(gate.queued(), 0u);
  gate.Release();  // 2 is done: back to the pool
  EXPECT_TRUE(gate.Acquire([] { return true; }));
  EXPECT_FALSE(gate.Acquire([] { return true; }));
}

}  // namespace
}  // namespace chgate::service
