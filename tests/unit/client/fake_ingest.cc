#include "tests/unit/client/fake_ingest.h"

#include <arpa/inet.h>
#include <grpcpp/health_check_service_interface.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace chgate::client::testing {
namespace {

void AddDetail(grpc::ServerContext* context, const std::optional<v1::Status>& detail) {
  if (detail.has_value())
    context->AddTrailingMetadata("chgate-status-bin", detail->SerializeAsString());
}

}  // namespace

void FakeIngest::AddQueryScript(QueryScript script) {
  absl::MutexLock lock(&mu_);
  scripts_.push_back(std::move(script));
}

void FakeIngest::set_unavailable_inserts(int n) {
  absl::MutexLock lock(&mu_);
  unavailable_inserts_ = n;
}

void FakeIngest::set_insert_status(grpc::Status status, std::optional<v1::Status> detail) {
  absl::MutexLock lock(&mu_);
  insert_status_ = std::make_pair(std::move(status), std::move(detail));
}

void FakeIngest::set_stream_stall_reads(bool stall) {
  absl::MutexLock lock(&mu_);
  stream_stall_reads_ = stall;
}

void FakeIngest::set_stream_hold_until(int n) {
  absl::MutexLock lock(&mu_);
  stream_hold_until_ = n;
}

void FakeIngest::set_stream_ack_status(
    std::function<std::optional<v1::Status>(const v1::InsertRequest&)> f) {
  absl::MutexLock lock(&mu_);
  stream_ack_status_ = std::move(f);
}

void FakeIngest::set_stream_end_after(int n, grpc::Status status, int streams) {
  absl::MutexLock lock(&mu_);
  stream_end_after_ = n;
  stream_end_status_ = std::move(status);
  stream_end_streams_ = streams;
}

std::vector<v1::InsertRequest> FakeIngest::inserts() const {
  absl::MutexLock lock(&mu_);
  return inserts_;
}

std::vector<v1::InsertRequest> FakeIngest::stream_requests() const {
  absl::MutexLock lock(&mu_);
  return stream_requests_;
}

std::vector<v1::QueryRequest> FakeIngest::queries() const {
  absl::MutexLock lock(&mu_);
  return queries_;
}

int FakeIngest::insert_calls() const {
  absl::MutexLock lock(&mu_);
  return insert_calls_;
}

int FakeIngest::query_calls() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queries_.size());
}

bool FakeIngest::WaitForQueryCancelled(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&query_cancelled_), timeout);
}

bool FakeIngest::WaitForStreamRequests(size_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stream_requests_.size() >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

grpc::Status FakeIngest::Insert(grpc::ServerContext* context, const v1::InsertRequest* request,
                                v1::InsertResponse* response) {
  absl::MutexLock lock(&mu_);
  ++insert_calls_;
  inserts_.push_back(*request);
  if (unavailable_inserts_ > 0) {
    --unavailable_inserts_;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "chgate is shutting down");
  }
  if (insert_status_.has_value() && !insert_status_->first.ok()) {
    AddDetail(context, insert_status_->second);
    return insert_status_->first;
  }
  response->set_rows(static_cast<uint64_t>(request->rows().rows_size()) + request->block().rows());
  response->set_ack_mode(v1::ACK_MODE_COMMITTED);
  response->set_query_id("insert-q");
  response->mutable_commit_time()->set_seconds(1700000000);
  response->set_deduplicated(!request->idempotency_key().empty() && insert_calls_ > 1);
  return grpc::Status::OK;
}

grpc::Status FakeIngest::InsertStream(
    grpc::ServerContext* /*context*/,
    grpc::ServerReaderWriter<v1::InsertAck, v1::InsertRequest>* stream) {
  std::vector<v1::InsertAck> held;
  int received = 0;
  v1::InsertRequest request;
  while (stream->Read(&request)) {
    ++received;
    {
      absl::MutexLock lock(&mu_);
      auto reading = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !stream_stall_reads_; };
      mu_.Await(absl::Condition(&reading));
    }
    v1::InsertAck ack;
    ack.set_sequence(request.sequence());
    int hold_until = 0;
    int end_after = -1;
    grpc::Status end_status;
    {
      absl::MutexLock lock(&mu_);
      stream_requests_.push_back(request);
      hold_until = stream_hold_until_;
      end_after = stream_end_after_;
      end_status = stream_end_status_;
      std::optional<v1::Status> status =
          stream_ack_status_ ? stream_ack_status_(request) : std::nullopt;
      if (status.has_value()) {
        *ack.mutable_status() = *status;
      } else {
        ack.set_rows(static_cast<uint64_t>(request.rows().rows_size()) + request.block().rows());
        ack.set_ack_mode(v1::ACK_MODE_COMMITTED);
        ack.set_query_id("stream-q");
      }
    }
    if (end_after >= 0 && received >= end_after) {
      absl::MutexLock lock(&mu_);
      if (stream_end_streams_ > 0) {
        --stream_end_streams_;
        return end_status;
      }
      stream_end_after_ = -1;  // the later streams run normally
    }
    if (received < hold_until) {
      held.push_back(std::move(ack));
      continue;
    }
    held.push_back(std::move(ack));
    std::reverse(held.begin(), held.end());
    for (const v1::InsertAck& a : held) stream->Write(a);
    held.clear();
  }
  for (const v1::InsertAck& a : held) stream->Write(a);
  return grpc::Status::OK;
}

grpc::Status FakeIngest::Query(grpc::ServerContext* context, const v1::QueryRequest* request,
                               grpc::ServerWriter<v1::QueryResponse>* writer) {
  QueryScript script;
  {
    absl::MutexLock lock(&mu_);
    queries_.push_back(*request);
    if (!scripts_.empty()) {
      script = scripts_.front();
      if (scripts_.size() > 1) scripts_.pop_front();
    }
  }
  for (const v1::QueryResponse& response : script.responses) {
    if (!writer->Write(response)) break;
  }
  if (script.wait_for_cancel) {
    // The sync API has no cancellation callback: poll the context, bounded by its deadline.
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (!context->IsCancelled() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
    absl::MutexLock lock(&mu_);
    query_cancelled_ = context->IsCancelled();
    return grpc::Status::CANCELLED;
  }
  AddDetail(context, script.detail);
  return script.status;
}

FakeServer::FakeServer() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(&service_);
  server_ = builder.BuildAndStart();
}

FakeServer::~FakeServer() { server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5))); }

std::string UnusedAddress() {
  // Bind a socket to a free port and close it without listening: connections are refused.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    std::abort();
  }
  ::close(fd);
  return "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

}  // namespace chgate::client::testing
