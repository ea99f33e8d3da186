#include "client/sdk/client.h"

#include <utility>

#include "absl/random/random.h"
#include "client/sdk/internal/call_util.h"

namespace chgate::client {

absl::StatusOr<std::unique_ptr<Client>> Client::Create(const std::string& target,
                                                       ClientOptions options) {
  if (target.empty()) return absl::InvalidArgumentError("empty chgate target address");
  if (options.max_receive_message_bytes < 0 || options.max_send_message_bytes < 0) {
    return absl::InvalidArgumentError("negative message size limit");
  }
  grpc::ChannelArguments args = options.channel_args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  args.SetMaxSendMessageSize(options.max_send_message_bytes);
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      options.credentials ? options.credentials : grpc::InsecureChannelCredentials();
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(target, credentials, args);
  return std::make_unique<Client>(std::move(channel), std::move(options));
}

Client::Client(std::shared_ptr<grpc::Channel> channel, ClientOptions options)
    : channel_(std::move(channel)),
      options_(std::move(options)),
      stub_(v1::Ingest::NewStub(channel_)) {}

absl::StatusOr<InsertResult> Client::Insert(const v1::InsertRequest& request,
                                            const CallOptions& options) {
  const absl::Time deadline = internal::DeadlineFor(options.timeout, options_.default_timeout);
  const bool retryable = !request.idempotency_key().empty();
  absl::BitGen gen;
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext context;
    internal::SetDeadline(deadline, &context);
    v1::InsertResponse response;
    const grpc::Status grpc_status = stub_->Insert(&context, request, &response);
    if (grpc_status.ok()) return internal::ToInsertResult(response);
    absl::Status status = FromGrpcStatus(grpc_status, context);
    if (!retryable || status.code() != absl::StatusCode::kUnavailable ||
        !internal::WaitBeforeRetry(options_.retry, attempt, deadline, gen)) {
      return status;
    }
  }
}

std::unique_ptr<InsertStream> Client::OpenInsertStream(const InsertStreamOptions& options) {
  auto context = std::make_unique<grpc::ClientContext>();
  internal::SetDeadline(internal::DeadlineFor(options.timeout, options_.stream_timeout),
                        context.get());
  std::unique_ptr<InsertStream::Stream> stream = stub_->InsertStream(context.get());
  return std::unique_ptr<InsertStream>(new InsertStream(std::move(context), std::move(stream)));
}

absl::StatusOr<std::unique_ptr<QueryCursor>> Client::Query(const std::string& sql,
                                                           const QueryOptions& options) {
  v1::QueryRequest request;
  request.set_sql(sql);
  request.mutable_settings()->insert(options.settings.begin(), options.settings.end());
  request.mutable_parameters()->insert(options.parameters.begin(), options.parameters.end());
  request.set_query_id(options.query_id);
  request.set_database(options.database);
  request.set_max_response_bytes(options.max_response_bytes);
  request.set_send_progress(options.send_progress);

  const absl::Time deadline = internal::DeadlineFor(options.timeout, options_.default_timeout);
  absl::BitGen gen;
  for (int attempt = 1;; ++attempt) {
    auto context = std::make_unique<grpc::ClientContext>();
    internal::SetDeadline(deadline, context.get());
    std::unique_ptr<QueryCursor::Reader> reader = stub_->Query(context.get(), request);
    v1::QueryResponse first;
    if (reader->Read(&first)) {
      std::unique_ptr<QueryCursor> cursor(
          new QueryCursor(std::move(context), std::move(reader), std::move(first)));
      if (cursor->done() && !cursor->status().ok()) return cursor->status();
      return cursor;
    }
    // Nothing arrived: the query did not produce output yet, so running it again is safe.
    const grpc::Status grpc_status = reader->Finish();
    absl::Status status = FromGrpcStatus(grpc_status, *context);
    if (status.ok()) {
      return absl::InternalError("malformed Query response: the stream ended without a header");
    }
    if (status.code() != absl::StatusCode::kUnavailable ||
        !internal::WaitBeforeRetry(options_.retry, attempt, deadline, gen)) {
      return status;
    }
  }
}

}  // namespace chgate::client
