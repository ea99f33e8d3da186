#include "client/sdk/client.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/sdk/internal/call_util.h"
#include "text/trace_context.h"

namespace chgate::client {

namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read the ", what, " '", path, "'"));
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsCredentials(const TlsOptions& tls) {
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError("a TLS client certificate needs its key, and the reverse");
  }
  grpc::SslCredentialsOptions ssl;
  if (!tls.ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadFile(tls.ca_file, "TLS CA file");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
  }
  if (!tls.cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadFile(tls.cert_file, "TLS certificate file");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadFile(tls.key_file, "TLS key file");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(const std::string& target,
                                                             const ClientOptions& options) {
  if (target.empty()) return absl::InvalidArgumentError("empty chgate target address");
  if (options.max_receive_message_bytes < 0 || options.max_send_message_bytes < 0) {
    return absl::InvalidArgumentError("negative message size limit");
  }
  const TlsOptions& tls = options.tls;
  if (!tls.enabled && (!tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty() ||
                       !tls.server_name.empty())) {
    return absl::InvalidArgumentError("TLS files or a server name are set but TLS is not enabled");
  }
  if (tls.enabled && options.credentials != nullptr) {
    return absl::InvalidArgumentError("set either credentials or tls, not both");
  }
  if (!options.traceparent.empty() && !text::ParseTraceparent(options.traceparent).has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "traceparent '", options.traceparent,
        "' is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, lower case, non-zero ids)"));
  }
  if (!options.tracestate.empty() && options.traceparent.empty()) {
    return absl::InvalidArgumentError("tracestate needs a traceparent");
  }
  grpc::ChannelArguments args = options.channel_args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  args.SetMaxSendMessageSize(options.max_send_message_bytes);
  std::shared_ptr<grpc::ChannelCredentials> credentials = options.credentials;
  if (tls.enabled) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> made = TlsCredentials(tls);
    if (!made.ok()) return made.status();
    credentials = *std::move(made);
    if (!tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  }
  if (credentials == nullptr) credentials = grpc::InsecureChannelCredentials();
  return grpc::CreateCustomChannel(target, credentials, args);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path, "token file");
  if (!text.ok()) return text.status();
  const absl::string_view token = absl::StripAsciiWhitespace(*text);
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("'", path, "' is empty"));
  if (token.find_first_of(" \t\r\n") != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' holds more than one word; it should hold only the token"));
  }
  return std::string(token);
}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(const std::string& target,
                                                       ClientOptions options) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = CreateChannel(target, options);
  if (!channel.ok()) return channel.status();
  return std::make_unique<Client>(*std::move(channel), std::move(options));
}

void Client::Authorize(grpc::ClientContext* context) const {
  if (!options_.bearer_token.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", options_.bearer_token));
  }
  if (!options_.traceparent.empty()) {
    context->AddMetadata("traceparent", options_.traceparent);
    if (!options_.tracestate.empty()) context->AddMetadata("tracestate", options_.tracestate);
  }
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
    Authorize(&context);
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

void Client::InsertAsync(v1::InsertRequest request,
                         std::function<void(absl::StatusOr<InsertResult>)> done,
                         const CallOptions& options) {
  // Owns what the call reads and writes until its callback ran.
  struct Call {
    grpc::ClientContext context;
    v1::InsertRequest request;
    v1::InsertResponse response;
    std::function<void(absl::StatusOr<InsertResult>)> done;
  };
  auto* call = new Call{.request = std::move(request), .done = std::move(done)};
  internal::SetDeadline(internal::DeadlineFor(options.timeout, options_.default_timeout),
                        &call->context);
  Authorize(&call->context);
  stub_->async()->Insert(&call->context, &call->request, &call->response,
                         [call](grpc::Status grpc_status) {
                           std::unique_ptr<Call> owned(call);
                           if (grpc_status.ok()) {
                             owned->done(internal::ToInsertResult(owned->response));
                           } else {
                             owned->done(FromGrpcStatus(grpc_status, owned->context));
                           }
                         });
}

std::unique_ptr<InsertStream> Client::OpenInsertStream(const InsertStreamOptions& options) {
  auto context = std::make_unique<grpc::ClientContext>();
  internal::SetDeadline(internal::DeadlineFor(options.timeout, options_.stream_timeout),
                        context.get());
  Authorize(context.get());
  return std::unique_ptr<InsertStream>(new InsertStream(std::move(context), stub_.get()));
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
    Authorize(context.get());
    std::unique_ptr<QueryCursor::Reader> reader = stub_->Query(context.get(), request);
    v1::QueryResponse first;
    if (reader->Read(&first)) {
      std::unique_ptr<QueryCursor> cursor(
          new QueryCursor(std::move(context), std::move(reader), std::move(first)));
      if (cursor->done() && !cursor->status().ok()) return cursor->status();
      return cursor;
    }
    // Nothing arrived: a read did not produce output yet, so running it again is safe; a write
    // answers only once it has run, so it is never sent twice.
    const grpc::Status grpc_status = reader->Finish();
    absl::Status status = FromGrpcStatus(grpc_status, *context);
    if (status.ok()) {
      return absl::InternalError("malformed Query response: the stream ended without a header");
    }
    if (status.code() != absl::StatusCode::kUnavailable || !internal::IsRereadableQuery(sql) ||
        !internal::WaitBeforeRetry(options_.retry, attempt, deadline, gen)) {
      return status;
    }
  }
}

}  // namespace chgate::client
