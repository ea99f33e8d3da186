// Options and result types of the chgate client (client/sdk/client.h): channel settings,
// deadlines, the retry policy, per-call options and the outcome of an insert. Plain structs,
// built with designated initializers: `ClientOptions{.default_timeout = absl::Seconds(5)}`.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "chgate/v1/chgate.pb.h"

namespace chgate::client {

// Retries of UNAVAILABLE, only where they are safe: a unary Insert that carries an
// idempotency_key, and a Query that reads (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, EXISTS) before
// its first response arrived. Delays grow exponentially from
// `initial_backoff` up to `max_backoff`, each drawn uniformly from [0, cap] ("full jitter"), and
// never run past the call's deadline.
struct RetryPolicy {
  // Attempts in all, the first included; 1 turns retries off.
  int max_attempts = 4;
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
  double multiplier = 2.0;
};

// TLS to chgate's API (see docs/security.md). The files are read when the client
// is created; a rotated client certificate takes effect in clients created afterwards.
struct TlsOptions {
  bool enabled = false;
  // PEM CA bundle that signed chgate's certificate; empty: the system's roots.
  std::string ca_file;
  // PEM client certificate (chain) and its key, for mutual TLS; both or neither.
  std::string cert_file;
  std::string key_file;
  // Name to verify chgate's certificate against (and to send as SNI) instead of the target's
  // host, e.g. when dialing an IP address.
  std::string server_name;
};

struct ClientOptions {
  // Deadline of Insert and Query calls that set none. Every call gets a deadline.
  absl::Duration default_timeout = absl::Seconds(30);

  // Deadline of an InsertStream (the whole stream) that sets none.
  absl::Duration stream_timeout = absl::Hours(1);

  RetryPolicy retry;

  // Largest message received / sent. chgate's query responses stay below 4 MiB by default;
  // large insert requests need the sender's limit and the server's to allow them.
  int max_receive_message_bytes = 64 << 20;
  int max_send_message_bytes = 64 << 20;

  // Further gRPC channel arguments (keepalive, load balancing, ...). The two limits above are
  // set on top of these.
  grpc::ChannelArguments channel_args;

  // Channel credentials; null means `tls` decides (plaintext unless enabled: chgate listens on
  // loopback in its pod). Setting both is an error.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  TlsOptions tls;

  // Sent as "authorization: Bearer <token>" with every call; empty: none. See ReadTokenFile.
  std::string bearer_token;
  // W3C trace context sent with every call (`traceparent` and, if set, `tracestate` metadata):
  // chgate passes it to ClickHouse with the query or the INSERT holding the call's rows, so the
  // server's spans join the caller's trace. "00-<32 hex>-<16 hex>-<2 hex>"; empty: none.
  // Client::Create refuses a malformed one (InvalidArgument).
  std::string traceparent;
  std::string tracestate;
};

// Per-call options of Insert.
struct CallOptions {
  // Deadline of the call, retries included. Zero means ClientOptions::default_timeout;
  // absl::InfiniteDuration() means none.
  absl::Duration timeout = absl::ZeroDuration();
};

struct InsertStreamOptions {
  // Deadline of the whole stream. Zero means ClientOptions::stream_timeout;
  // absl::InfiniteDuration() means none.
  absl::Duration timeout = absl::ZeroDuration();
};

// A SELECT and how to run it (see chgate.v1.QueryRequest).
struct QueryOptions {
  // ClickHouse settings ("max_threads" -> "4").
  std::map<std::string, std::string> settings;
  // Values of `{name:Type}` parameters, in ClickHouse text form, without SQL quoting.
  std::map<std::string, std::string> parameters;
  // ClickHouse query id; empty lets chgate generate one.
  std::string query_id;
  // Default database for unqualified names; empty means chgate's default.
  std::string database;
  // Upper bound for one response message (a hint to the server); 0 means the server default.
  uint32_t max_response_bytes = 0;
  // Ask for streamed progress increments (QueryCursor::progress()).
  bool send_progress = false;
  // Deadline of the whole query, reading included. Zero means ClientOptions::default_timeout;
  // absl::InfiniteDuration() means none.
  absl::Duration timeout = absl::ZeroDuration();
};

// The outcome of a successful insert (InsertResponse, or an OK InsertAck).
struct InsertResult {
  // Rows committed (or accepted): always all rows of the request.
  uint64_t rows = 0;
  // COMMITTED or ACCEPTED.
  v1::AckMode ack_mode = v1::ACK_MODE_UNSPECIFIED;
  // ClickHouse query id of the INSERT that carried the rows.
  std::string query_id;
  // When ClickHouse confirmed the INSERT (chgate's clock); unset for ACCEPTED.
  std::optional<absl::Time> commit_time;
  // The idempotency key matched an earlier request: nothing new was inserted.
  bool deduplicated = false;
};

}  // namespace chgate::client
