// An in-process chgate.v1.Ingest server for the client tests (sync gRPC API, 127.0.0.1, port 0,
// plus the default grpc.health.v1 service). Query calls play scripted responses; Insert and
// InsertStream record their requests and answer as configured. Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "chgate/v1/chgate.grpc.pb.h"

namespace chgate::client::testing {

// What one Query call does.
struct QueryScript {
  std::vector<v1::QueryResponse> responses;
  // After the responses: block until the client cancels (or the deadline passes) instead of
  // ending the call.
  bool wait_for_cancel = false;
  grpc::Status status = grpc::Status::OK;
  // Sent as the chgate-status-bin trailer when set.
  std::optional<v1::Status> detail;
};

class FakeIngest final : public v1::Ingest::Service {
 public:
  // ---- configuration (set before the calls) ----
  // Query scripts are used in order; the last one repeats.
  void AddQueryScript(QueryScript script);
  // Insert: the first `unavailable_inserts` calls fail with UNAVAILABLE; later ones succeed
  // with rows = the request's row count, unless `insert_status` is set.
  void set_unavailable_inserts(int n);
  void set_insert_status(grpc::Status status, std::optional<v1::Status> detail = std::nullopt);
  // InsertStream: acks are held until this many requests arrived, then sent in reverse order
  // (later ones at once); `stream_ack_status` gives a request's ack status (OK when it returns
  // nullopt); after `stream_end_after` requests the stream ends with `stream_end_status` without
  // acking the unacked ones (only the first `streams` streams do).
  void set_stream_hold_until(int n);
  // While true, InsertStream handlers stop reading after the first request (flow control then
  // holds the client back).
  void set_stream_stall_reads(bool stall);
  void set_stream_ack_status(std::function<std::optional<v1::Status>(const v1::InsertRequest&)> f);
  void set_stream_end_after(int n, grpc::Status status, int streams = 1 << 30);

  // ---- observations ----
  std::vector<v1::InsertRequest> inserts() const;          // unary
  std::vector<v1::InsertRequest> stream_requests() const;  // all streams
  std::vector<v1::QueryRequest> queries() const;
  int insert_calls() const;
  int query_calls() const;
  // Waits (up to `timeout`) until a Query call saw its client cancel; true if one did.
  bool WaitForQueryCancelled(absl::Duration timeout) const;
  // Waits (up to `timeout`) until `n` stream requests arrived.
  bool WaitForStreamRequests(size_t n, absl::Duration timeout) const;

  // ---- the service ----
  grpc::Status Insert(grpc::ServerContext* context, const v1::InsertRequest* request,
                      v1::InsertResponse* response) override;
  grpc::Status InsertStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::InsertAck, v1::InsertRequest>* stream) override;
  grpc::Status Query(grpc::ServerContext* context, const v1::QueryRequest* request,
                     grpc::ServerWriter<v1::QueryResponse>* writer) override;

 private:
  mutable absl::Mutex mu_;
  std::deque<QueryScript> scripts_ ABSL_GUARDED_BY(mu_);
  int unavailable_inserts_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<std::pair<grpc::Status, std::optional<v1::Status>>> insert_status_
      ABSL_GUARDED_BY(mu_);
  int stream_hold_until_ ABSL_GUARDED_BY(mu_) = 0;
  bool stream_stall_reads_ ABSL_GUARDED_BY(mu_) = false;
  std::function<std::optional<v1::Status>(const v1::InsertRequest&)> stream_ack_status_
      ABSL_GUARDED_BY(mu_);
  int stream_end_after_ ABSL_GUARDED_BY(mu_) = -1;
  grpc::Status stream_end_status_ ABSL_GUARDED_BY(mu_);
  int stream_end_streams_ ABSL_GUARDED_BY(mu_) = 0;

  std::vector<v1::InsertRequest> inserts_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::InsertRequest> stream_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::QueryRequest> queries_ ABSL_GUARDED_BY(mu_);
  int insert_calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool query_cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// FakeIngest served on 127.0.0.1:<free port>, stopped on destruction.
class FakeServer {
 public:
  FakeServer();
  ~FakeServer();
  FakeIngest& service() { return service_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // The default health service of this server (set statuses with SetServingStatus).
  grpc::HealthCheckServiceInterface* health() { return server_->GetHealthCheckService(); }

 private:
  FakeIngest service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// An address where nothing listens: a port that was just free.
std::string UnusedAddress();

}  // namespace chgate::client::testing
