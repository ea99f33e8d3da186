#include "client/sdk/internal/call_util.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <string>

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

namespace {

// The first word of `sql` in upper case, after spaces, comments and opening parentheses, as a
// server reads comments: nested /* */ and # comments (newer servers) or neither (older ones).
// "" when there is none (or a comment does not end). Sets *end past the word.
std::string FirstWord(std::string_view sql, bool newer_comments, size_t* end) {
  size_t i = 0;
  while (i < sql.size()) {
    const char c = sql[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '(') {
      ++i;
    } else if (sql.substr(i, 2) == "--" || (newer_comments && c == '#')) {
      const size_t line_end = sql.find('\n', i);
      i = line_end == std::string_view::npos ? sql.size() : line_end + 1;
    } else if (sql.substr(i, 2) == "/*") {
      int depth = 0;
      while (i < sql.size()) {
        if (sql.substr(i, 2) == "/*") {
          if (depth == 0 || newer_comments) ++depth;
          i += 2;
        } else if (sql.substr(i, 2) == "*/") {
          i += 2;
          if (--depth == 0) break;
        } else {
          ++i;
        }
      }
      if (depth != 0) return "";
    } else {
      break;
    }
  }
  *end = i;
  while (*end < sql.size() && std::isalpha(static_cast<unsigned char>(sql[*end]))) ++*end;
  std::string word(sql.substr(i, *end - i));
  for (char& c : word) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return word;
}

}  // namespace

bool IsRereadableQuery(std::string_view sql) {
  static constexpr std::string_view kReads[] = {"SELECT", "WITH",    "SHOW",  "DESCRIBE",
                                                "DESC",   "EXPLAIN", "EXISTS"};
  // A read however the server reads comments: one that nests them may see another first word.
  for (const bool newer_comments : {true, false}) {
    size_t end = 0;
    const std::string word = FirstWord(sql, newer_comments, &end);
    if (std::find(std::begin(kReads), std::end(kReads), word) == std::end(kReads)) return false;
    // One statement: a `;` may only end the text.
    const size_t semicolon = sql.find(';', end);
    if (semicolon != std::string_view::npos &&
        sql.find_first_not_of(" \t\n\r\f;", semicolon) != std::string_view::npos) {
      return false;
    }
  }
  return true;
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
