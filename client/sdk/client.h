// The chgate C++ client: a thin, typed layer over the generated chgate.v1.Ingest stub.
//
//   absl::StatusOr<std::unique_ptr<Client>> client = Client::Create("127.0.0.1:50051");
//   v1::InsertRequest request;
//   request.set_table("app.events");
//   request.set_idempotency_key("producer-7-42");   // makes UNAVAILABLE retries safe
//   AddRow(&request, {MakeValue(uint64_t{1}), MakeValue("click")});
//   absl::StatusOr<InsertResult> result = (*client)->Insert(request);
//
// Every call has a deadline (ClientOptions::default_timeout unless the call sets one).
// UNAVAILABLE is retried with exponential backoff and jitter only where that cannot duplicate or
// lose anything: Insert when the request has an idempotency_key, a Query that reads before its
// first response arrived (never a write: it answers only once it has run). Errors are absl::Status
// values with the gRPC code and message, and the server's chgate.v1.Status detail attached
// (client/sdk/status.h: GetStatusDetail, FormatError).
//
// A Client is thread-safe and cheap to share; it holds one gRPC channel.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "chgate/v1/chgate.grpc.pb.h"
#include "client/sdk/builders.h"
#include "client/sdk/insert_stream.h"
#include "client/sdk/options.h"
#include "client/sdk/query_cursor.h"
#include "client/sdk/status.h"

namespace chgate::client {

// The channel Client::Create makes: message size limits, channel arguments, and credentials
// from `options.credentials` or `options.tls`. Errors as Client::Create.
absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(const std::string& target,
                                                             const ClientOptions& options);

// The token in a file of one line (surrounding whitespace is ignored), for
// ClientOptions::bearer_token. NotFound when it cannot be read, InvalidArgument when it is empty
// or holds more than one word.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

class Client {
 public:
  // A client for chgate at `target` ("127.0.0.1:50051", "unix:/run/chgate.sock", any gRPC
  // target). Connecting is lazy: an unreachable server shows up as UNAVAILABLE on the first call.
  // Returns InvalidArgument for an empty target, a negative message size limit or inconsistent
  // TLS options, NotFound for a TLS file that cannot be read.
  static absl::StatusOr<std::unique_ptr<Client>> Create(const std::string& target,
                                                        ClientOptions options = {});

  // A client over an existing channel (for example an in-process one); `options` apply except
  // those that configure the channel.
  Client(std::shared_ptr<grpc::Channel> channel, ClientOptions options);

  // Ingest.Insert: returns when the rows are committed (or accepted, per ack_mode). Retries
  // UNAVAILABLE when `request` has an idempotency_key. Errors: the codes listed on
  // Ingest.Insert in the .proto (INVALID_ARGUMENT with the rejected row, NOT_FOUND,
  // RESOURCE_EXHAUSTED, UNAVAILABLE, DEADLINE_EXCEEDED, ...).
  absl::StatusOr<InsertResult> Insert(const v1::InsertRequest& request,
                                      const CallOptions& options = {});

  // Ingest.Insert without blocking: `done` receives the result on a gRPC callback thread (or on
  // this thread if the call cannot start). One attempt: an UNAVAILABLE is returned, not retried
  // (resend with the same idempotency_key to retry safely). For callers that keep many unary
  // calls in flight from few threads; `done` must not block.
  void InsertAsync(v1::InsertRequest request,
                   std::function<void(absl::StatusOr<InsertResult>)> done,
                   const CallOptions& options = {});

  // Opens an Ingest.InsertStream (see client/sdk/insert_stream.h). Never retried: a broken
  // stream fails its pending requests, which the caller resends with their idempotency keys.
  std::unique_ptr<InsertStream> OpenInsertStream(const InsertStreamOptions& options = {});

  // Ingest.Query: starts `sql` and returns a cursor once the result header arrived. Errors before
  // the header (syntax, unknown table, UNAVAILABLE after retries, DEADLINE_EXCEEDED, ...) come
  // back here; later ones through QueryCursor::status().
  absl::StatusOr<std::unique_ptr<QueryCursor>> Query(const std::string& sql,
                                                     const QueryOptions& options = {});

  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  const ClientOptions& options() const { return options_; }

 private:
  // Adds the bearer token and the trace context, if any, to a call's metadata.
  void Authorize(grpc::ClientContext* context) const;

  std::shared_ptr<grpc::Channel> channel_;
  ClientOptions options_;
  std::unique_ptr<v1::Ingest::Stub> stub_;
};

}  // namespace chgate::client
