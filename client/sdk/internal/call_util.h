// Internal helpers of the SDK: deadlines on client contexts, retry delays, proto time
// conversions. Not part of the public API.
#pragma once

#include <grpcpp/grpcpp.h>

#include <future>
#include <memory>
#include <string_view>
#include <utility>

#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chgate/v1/chgate.pb.h"
#include "client/sdk/options.h"

namespace chgate::client::internal {

// The absolute deadline for a call starting now: now + `timeout`, or now + `fallback` when
// `timeout` is zero; an infinite duration gives absl::InfiniteFuture().
absl::Time DeadlineFor(absl::Duration timeout, absl::Duration fallback);

// Sets `deadline` on `context` unless it is infinite.
void SetDeadline(absl::Time deadline, grpc::ClientContext* context);

// Waits before retry number `retry` (1 for the first retry) under `policy`, if another attempt
// is allowed and the jittered delay ends before `deadline`; returns false (without waiting)
// otherwise.
bool WaitBeforeRetry(const RetryPolicy& policy, int retry, absl::Time deadline, absl::BitGen& gen);

// Whether a Query of `sql` may be sent again after it failed before its first response: only one
// statement that reads (its first word, after spaces, comments and opening parentheses, is
// SELECT, WITH, SHOW, DESCRIBE, DESC, EXPLAIN or EXISTS, and no `;` but a trailing one), read so
// by servers that nest /* */ comments and take # comments and by those that do not. A write
// (INSERT ... SELECT, DDL where chgate allows them) answers only once it has run, so no response
// does not mean it did not run. Conservative: a `;` inside a literal also rules a retry out.
bool IsRereadableQuery(std::string_view sql);

// google.protobuf.Timestamp -> absl::Time.
absl::Time FromProtoTime(const google::protobuf::Timestamp& t);

// The InsertResult an InsertResponse or an (OK) InsertAck stands for.
InsertResult ToInsertResult(const v1::InsertResponse& response);
InsertResult ToInsertResult(const v1::InsertAck& ack);

// The future of a callback-style send: calls `send` with a callback that resolves it.
template <typename Send>
std::future<absl::StatusOr<InsertResult>> FutureOf(Send send) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<InsertResult>>>();
  std::future<absl::StatusOr<InsertResult>> future = promise->get_future();
  send([promise](absl::StatusOr<InsertResult> result) { promise->set_value(std::move(result)); });
  return future;
}

}  // namespace chgate::client::internal
