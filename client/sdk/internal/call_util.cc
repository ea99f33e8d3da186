#include "client/sdk/internal/call_util.h"

#include <algorithm>
#include <cmath>

namespace chgate::client::internal {

absl::Time DeadlineFor(absl::Duration timeout, absl::Duration fallback) {
  const absl::Duration d = timeout == absl::ZeroDuration() ? fallback : timeout;
  if (d == absl::InfiniteDuration()) return absl::InfiniteFuture();
  return absl::Now() + d;
}

void SetDeadline(absl::Time deadline, grpc::ClientContext* context) {
  if (deadline == absl::InfiniteFuture()) return;
  context->set_deadline(absl::ToChronoTime(deadline));
}

bool WaitBeforeRetry(const RetryPolicy& policy, int retry, absl::Time deadline, absl::BitGen& gen) {
  if (retry >= policy.max_attempts) return false;
  const double factor = std::pow(std::max(policy.multiplier, 1.0), retry - 1);
  const absl::Duration cap = std::min(policy.max_backoff, policy.initial_backoff * factor);
  const absl::Duration delay =
      cap <= absl::ZeroDuration()
          ? absl::ZeroDuration()
          : absl::Nanoseconds(absl::Uniform<int64_t>(gen, 0, absl::ToInt64Nanoseconds(cap) + 1));
  if (absl::Now() + delay >= deadline) return false;
  absl::SleepFor(delay);
  return true;
}

absl::Time FromProtoTime(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

namespace {

template <typename Message>
InsertResult Convert(const Message& m) {
  InsertResult result;
  result.rows = m.rows();
  result.ack_mode = m.ack_mode();
  result.query_id = m.query_id();
  if (m.has_commit_time()) result.commit_time = FromProtoTime(m.commit_time());
  result.deduplicated = m.deduplicated();
  return result;
}

}  // namespace

InsertResult ToInsertResult(const v1::InsertResponse& response) { return Convert(response); }
InsertResult ToInsertResult(const v1::InsertAck& ack) { return Convert(ack); }

}  // namespace chgate::client::internal
