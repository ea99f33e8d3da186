#include "server/ingest/retry.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/clickhouse/protocol/error_codes.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/ingest/lossless.h"
#include "server/ingest/task_runner.h"

namespace chgate::ingest {
namespace {
constexpr log::Component kLog("ingest");
}  // namespace

bool IsRetryable(const absl::Status& status) {
  if (auto code = clickhouse::ClickHouseCode(status)) {
    namespace ec = clickhouse::error_code;
    switch (*code) {
      case ec::kTimeoutExceeded:
      case ec::kTooManySimultaneousQueries:
      case ec::kSocketTimeout:
      case ec::kNetworkError:
      case ec::kMemoryLimitExceeded:
      case ec::kTableIsReadOnly:
      case ec::kTooManyParts:
      case ec::kTooFewLiveReplicas:
      case ec::kUnknownStatusOfInsert:
      case ec::kSystemError:
      // The same batch's earlier attempt (before a reconnect, or before chgate restarted) is
      // still running in the server.
      case ec::kQueryWithSameIdIsAlreadyRunning:
      // A Replicated table whose ZooKeeper is away for a moment.
      case ec::kKeeperException:
        return true;
      default:
        return false;
    }
  }
  // Not from ClickHouse: connection errors and timeouts.
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded ||
         status.code() == absl::StatusCode::kCancelled ||
         status.code() == absl::StatusCode::kDataLoss;
}

bool IsTableChangeError(const absl::Status& status) {
  namespace ec = clickhouse::error_code;
  if (std::optional<int32_t> code = clickhouse::ClickHouseCode(status)) {
    switch (*code) {
      case ec::kUnknownTable:
      case ec::kUnknownDatabase:
      case ec::kTableIsDropped:
      case ec::kNoSuchColumnInTable:
      case ec::kThereIsNoColumn:
      case ec::kNotFoundColumnInBlock:
      case ec::kTypeMismatch:
      case ec::kIllegalColumn:
      case ec::kIncorrectNumberOfColumns:
      case ec::kNumberOfColumnsDoesntMatch:
      case ec::kCannotConvertType:
      case ec::kUnknownIdentifier:
        return true;
      default:
        return false;
    }
  }
  // chgate's own comparison of the block with the header the server sent for the INSERT.
  return status.code() == absl::StatusCode::kInvalidArgument ||
         status.code() == absl::StatusCode::kNotFound;
}

bool IsDataError(const absl::Status& status) {
  namespace ec = clickhouse::error_code;
  if (std::optional<int32_t> code = clickhouse::ClickHouseCode(status)) {
    switch (*code) {
      case ec::kCannotParseText:
      case ec::kCannotParseEscapeSequence:
      case ec::kCannotParseQuotedString:
      case ec::kCannotParseInputAssertionFailed:
      case ec::kCannotParseDate:
      case ec::kCannotParseDatetime:
      case ec::kCannotParseNumber:
      case ec::kCannotReadArrayFromText:
      case ec::kIncorrectData:
      case ec::kSizeOfFixedStringDoesntMatch:
      case ec::kSizesOfArraysDoesntMatch:
      case ec::kArgumentOutOfBound:
      case ec::kValueIsOutOfRangeOfDataType:
      case ec::kDecimalOverflow:
      case ec::kCannotInsertNullInOrdinaryColumn:
      case ec::kViolatedConstraint:
      // The table's columns are no longer the block's.
      case ec::kIncorrectNumberOfColumns:
      case ec::kThereIsNoColumn:
      case ec::kNotFoundColumnInBlock:
      case ec::kDuplicateColumn:
      case ec::kNoSuchColumnInTable:
      case ec::kNumberOfColumnsDoesntMatch:
      case ec::kTypeMismatch:
      case ec::kIllegalColumn:
      case ec::kCannotConvertType:
        return true;
      default:
        return false;
    }
  }
  // chgate's comparison of the block with the header the server sent for the INSERT.
  return status.code() == absl::StatusCode::kInvalidArgument;
}

std::string ErrorCodeLabel(const absl::Status& status) {
  if (auto code = clickhouse::ClickHouseCode(status)) return absl::StrCat(*code);
  return absl::AsciiStrToUpper(absl::StatusCodeToString(status.code()));
}

absl::Duration BackoffCap(const RetryPolicy& policy, int attempt) {
  return std::min(policy.max_backoff,
                  policy.initial_backoff * std::pow(2.0, std::clamp(attempt - 1, 0, 30)));
}

InsertRetrier::InsertRetrier(RetryPolicy policy, Inserter* inserter, Clock* clock,
                             IngestObserver* observer)
    : policy_(policy),
      inserter_(inserter),
      clock_(clock),
      observer_(observer),
      rng_(std::random_device{}()) {}

absl::Duration InsertRetrier::Jittered(int attempt) {
  double jitter;
  {
    absl::MutexLock lock(&mu_);
    jitter = std::uniform_real_distribution<double>(0, 1)(rng_);
  }
  return BackoffCap(policy_, attempt) * jitter;
}

absl::Status InsertRetrier::Insert(const InsertTarget& target, const clickhouse::BlockParts& block,
                                   InsertAttempt& attempt,
                                   const std::function<absl::Time()>& stop_at,
                                   const std::function<void(std::vector<log::Field>*)>& fields,
                                   bool* too_many_parts) {
  // A spooled batch has no caller waiting: each attempt gets --retry-max-elapsed, and attempts go
  // on until the drain ends.
  const absl::Duration attempt_timeout =
      target.spooled ? policy_.max_elapsed : absl::InfiniteDuration();
  while (true) {
    const absl::Time stop = stop_at();
    // An attempt starting or ending is progress: retrying on schedule is not a stall.
    TaskRunner::MarkProgress(clock_);
    const absl::Status status = inserter_->Insert(target.table, block, attempt,
                                                  std::min(stop, clock_->Now() + attempt_timeout));
    TaskRunner::MarkProgress(clock_);
    if (!*too_many_parts &&
        clickhouse::ClickHouseCode(status) == clickhouse::error_code::kTooManyParts) {
      // Raised at once, not when the retries end: the table's next batches wait longer while
      // this one is still being retried.
      *too_many_parts = true;
      if (target.delay != nullptr) {
        target.delay->Adapt(/*too_many_parts=*/true, absl::ZeroDuration(), attempt.attempt);
      }
    }
    // A spooled batch has acknowledged rows and no caller waiting: only rows the table can
    // never take end its retries (see IsDataError); the drain's end stops them too.
    if (status.ok() || (target.spooled ? IsDataError(status) : !IsRetryable(status))) {
      return status;
    }
    const absl::Duration backoff = Jittered(attempt.attempt);
    const absl::Time resume = clock_->Now() + backoff;
    if (resume >= stop_at()) return status;
    if (observer_ != nullptr) observer_->FlushRetry(target.label);
    std::vector<log::Field> line{{"table", target.label},
                                 {"batch_id", attempt.query_id},
                                 {"attempt", attempt.attempt},
                                 {"rows", block.rows()},
                                 {"backoff", absl::Trunc(backoff, absl::Milliseconds(1))},
                                 {"code", ErrorCodeLabel(status)},
                                 {"error", status.message()}};
    fields(&line);
    kLog.Throttled(log::Level::kWarn, "batch retry", target.label, line);
    clock_->SleepUntil(resume);
    ++attempt.attempt;
  }
}

absl::Status InsertRetrier::InsertConverting(
    const InsertTarget& target, const clickhouse::BlockParts& block, InsertAttempt& attempt,
    const std::function<absl::Time()>& stop_at,
    const std::function<void(std::vector<log::Field>*)>& fields, bool* too_many_parts,
    SchemaCache* schemas, const OnTableChange& on_change) {
  absl::Status status = Insert(target, block, attempt, stop_at, fields, too_many_parts);
  if (status.ok() || !IsDataError(status) || !IsTableChangeError(status)) return status;
  schemas->Forget(target.table);
  bool same_header = false, undecided = false;
  std::optional<clickhouse::Block> converted;
  {
    // Several parts are gathered for the conversion only, and freed before the converted block
    // is sent (BlockParts::Gathered would keep the copy as long as the parts).
    std::optional<clickhouse::Block> gathered;
    if (block.parts().size() > 1) gathered = clickhouse::Block::Concat(block.parts());
    converted = ConvertToChangedTable(inserter_, clock_, policy_, target.table,
                                      gathered ? *gathered : block.Gathered(), stop_at,
                                      &same_header, &undecided);
  }
  // The table is as the rows were checked against: the refusal is about the rows.
  if (same_header) return status;
  if (converted.has_value()) {
    std::vector<log::Field> line{
        {"table", target.label}, {"rows", block.rows()}, {"error", status.message()}};
    fields(&line);
    kLog.Info(on_change.converted_line, line);
    return Insert(
        target, clickhouse::BlockParts(std::make_unique<clickhouse::Block>(*std::move(converted))),
        attempt, stop_at, fields, too_many_parts);
  }
  if (undecided) {
    // Whether the new columns take the rows is not known: not a verdict on the rows.
    return absl::UnavailableError(absl::StrCat(
        "the table changed after these rows were checked against it, and ClickHouse did not "
        "describe it before the deadline (",
        status.message(), ")"));
  }
  if (!on_change.abort_unconvertible) return status;
  return absl::AbortedError(absl::StrCat(
      "the table changed after these rows were checked against it, and its new columns cannot "
      "take them unchanged; resend them (",
      status.message(), ")"));
}

}  // namespace chgate::ingest
