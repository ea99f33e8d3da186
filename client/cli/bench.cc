#include "client/cli/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "client/cli/flags.h"
#include "client/cli/json.h"
#include "client/sdk/client.h"
#include "client/sdk/internal/strings.h"
#include "client/sdk/producer.h"
#include "text/status_macros.h"
#include "text/value_parse.h"

namespace chgate::cli {

using client::internal::Sv;

absl::StatusOr<BenchRow> ParseBenchRow(const std::string& json,
                                       const std::vector<std::string>& columns) {
  absl::StatusOr<Json> parsed = ParseJson(json);
  if (!parsed.ok())
    return absl::InvalidArgumentError(absl::StrCat("--row: ", parsed.status().message()));
  BenchRow row;
  if (parsed->kind == Json::Kind::kObject) {
    for (const auto& [key, value] : parsed->members) {
      row.columns.push_back(key);
      row.values.push_back(JsonToValue(value));
    }
    if (!columns.empty() && columns != row.columns) {
      return absl::InvalidArgumentError("--columns differs from the keys of the --row object");
    }
  } else if (parsed->kind == Json::Kind::kArray) {
    if (!columns.empty() && columns.size() != parsed->items.size()) {
      return absl::InvalidArgumentError(absl::StrCat("--row has ", parsed->items.size(),
                                                     " values for ", columns.size(), " --columns"));
    }
    row.columns = columns;
    for (const Json& item : parsed->items) row.values.push_back(JsonToValue(item));
  } else {
    return absl::InvalidArgumentError("--row must be a JSON object or array");
  }
  if (row.values.empty()) return absl::InvalidArgumentError("--row has no values");
  return row;
}

absl::StatusOr<std::vector<std::string>> ParseTypeList(std::string_view text) {
  std::vector<std::string> types;
  int depth = 0;
  char quote = 0;
  size_t begin = 0;
  auto take = [&](size_t end) -> absl::Status {
    std::string type(absl::StripAsciiWhitespace(Sv(text.substr(begin, end - begin))));
    if (type.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--types: empty type in '", Sv(text), "'"));
    }
    types.push_back(std::move(type));
    begin = end + 1;
    return absl::OkStatus();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '\'' || c == '"' || c == '`') {
      quote = c;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      if (--depth < 0) break;
    } else if (c == ',' && depth == 0) {
      CHGATE_RETURN_IF_ERROR(take(i));
    }
  }
  if (depth != 0 || quote != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--types: unbalanced parentheses or quotes in '", Sv(text), "'"));
  }
  CHGATE_RETURN_IF_ERROR(take(text.size()));
  return types;
}

const char* BenchModeName(BenchMode mode) {
  switch (mode) {
    case BenchMode::kStream:
      return "stream";
    case BenchMode::kUnary:
      return "unary";
    case BenchMode::kBlock:
      return "block";
    case BenchMode::kProducer:
      return "producer";
    case BenchMode::kProducerBlock:
      return "producer-block";
  }
  return "?";
}

// ---- the schedule ------------------------------------------------------------------------

namespace {

uint64_t ScheduledRequests(absl::Duration duration, double rate) {
  if (rate <= 0) return 0;
  // Requests k = 0, 1, ... with k / rate < duration; the epsilon keeps 10/s x 0.3 s at 3.
  return static_cast<uint64_t>(std::ceil(rate * absl::ToDoubleSeconds(duration) - 1e-9));
}

}  // namespace

SendSchedule::SendSchedule(absl::Time start, absl::Duration duration, double rate)
    : start_(start),
      end_(start + duration),
      rate_(rate),
      scheduled_(ScheduledRequests(duration, rate)) {}

std::optional<absl::Time> SendSchedule::Claim(absl::Time now) {
  if (now >= end_) return std::nullopt;
  // A counter, not a lock: every sender claims once per send.
  if (rate_ <= 0) {
    claimed_.fetch_add(1, std::memory_order_relaxed);
    return now;
  }
  uint64_t k = claimed_.load(std::memory_order_relaxed);
  do {
    if (k >= scheduled_) return std::nullopt;
  } while (!claimed_.compare_exchange_weak(k, k + 1, std::memory_order_relaxed));
  return start_ + absl::Seconds(static_cast<double>(k) / rate_);
}

uint64_t SendSchedule::claimed() const { return claimed_.load(std::memory_order_relaxed); }

// ---- the report --------------------------------------------------------------------------

namespace {

// A JSON number (null for NaN and infinities, which JSON lacks).
std::string JsonNumber(double v, int decimals) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.*f", decimals, v);
}

std::string JsonNumber(const std::optional<double>& v, int decimals) {
  return v.has_value() ? JsonNumber(*v, decimals) : "null";
}

}  // namespace

std::string FormatBenchJson(const BenchResult& r) {
  const bool open_loop = r.target_rate > 0;
  auto rate_field = [&](auto value, int decimals) -> std::string {
    if (!open_loop) return "null";
    return JsonNumber(static_cast<double>(value), decimals);
  };
  std::string table;
  client::AppendJsonString(r.table, &table);
  return absl::StrCat("{\"mode\":\"", BenchModeName(r.mode), "\",\"table\":", table,
                      ",\"streams\":", r.streams, ",\"rows_per_request\":", r.rows_per_request,
                      ",\"batch_rows\":", r.batch_rows, ",\"max_in_flight\":", r.max_in_flight,
                      ",\"duration_s\":", JsonNumber(r.duration_s, 3),
                      ",\"requests_sent\":", r.requests_sent, ",\"requests_ok\":", r.requests_ok,
                      ",\"requests_failed\":", r.requests_failed,
                      ",\"requests_per_s\":", JsonNumber(r.requests_per_s, 1),
                      ",\"rows_per_s\":", JsonNumber(r.rows_per_s, 1),
                      ",\"latency_p50_ms\":", JsonNumber(r.latency_p50_ms, 3),
                      ",\"latency_p90_ms\":", JsonNumber(r.latency_p90_ms, 3),
                      ",\"latency_p99_ms\":", JsonNumber(r.latency_p99_ms, 3),
                      ",\"latency_max_ms\":", JsonNumber(r.latency_max_ms, 3),
                      ",\"client_cpu_us_per_request\":", JsonNumber(r.client_cpu_us_per_request, 2),
                      ",\"target_rate\":", rate_field(r.target_rate, 3),
                      ",\"achieved_rate\":", rate_field(r.achieved_rate, 1),
                      ",\"scheduled\":", rate_field(r.scheduled, 0),
                      ",\"behind_schedule\":", rate_field(r.behind_schedule, 0),
                      ",\"unsent\":", rate_field(r.unsent, 0), "}\n");
}

std::string FormatBenchTable(const BenchResult& r) {
  std::string out = absl::StrFormat("table %s, mode %s, ", r.table, BenchModeName(r.mode));
  if (r.mode == BenchMode::kUnary) {
    absl::StrAppendFormat(&out, "%d senders, %d rows/request, %d calls in flight/sender, %.1fs\n",
                          r.streams, r.rows_per_request, r.max_in_flight, r.duration_s);
  } else if (r.mode == BenchMode::kProducer || r.mode == BenchMode::kProducerBlock) {
    absl::StrAppendFormat(&out,
                          "%d sender threads, one row per send%s, batches of up to %d rows, %d "
                          "sends in flight/sender, %.1fs (a request below is one send)\n",
                          r.streams,
                          r.mode == BenchMode::kProducerBlock ? " (a one-row Block)" : "",
                          r.batch_rows, r.max_in_flight, r.duration_s);
  } else {
    absl::StrAppendFormat(&out, "%d streams, %d rows/request, %d in flight/stream, %.1fs\n",
                          r.streams, r.rows_per_request, r.max_in_flight, r.duration_s);
  }
  absl::StrAppendFormat(&out,
                        "requests ok       %d\n"
                        "requests failed   %d\n"
                        "rows/s            %.0f\n"
                        "requests/s        %.0f\n"
                        "ack latency ms    p50 %.2f  p90 %.2f  p99 %.2f  max %.2f\n",
                        r.requests_ok, r.requests_failed, r.rows_per_s, r.requests_per_s,
                        r.latency_p50_ms, r.latency_p90_ms, r.latency_p99_ms, r.latency_max_ms);
  if (r.target_rate > 0) {
    absl::StrAppendFormat(&out,
                          "rate /s           target %.1f  achieved %.1f\n"
                          "behind schedule   %d sent late, %d not sent, of %d scheduled\n",
                          r.target_rate, r.achieved_rate, r.behind_schedule, r.unsent, r.scheduled);
  }
  if (r.client_cpu_us_per_request.has_value()) {
    absl::StrAppendFormat(&out, "client CPU        %.1f us/request\n",
                          *r.client_cpu_us_per_request);
  }
  return out;
}

// ---- the run -----------------------------------------------------------------------------

namespace {

// Results of all senders.
class BenchStats {
 public:
  void Sent(bool behind) {
    sent_.fetch_add(1, std::memory_order_relaxed);
    if (behind) behind_.fetch_add(1, std::memory_order_relaxed);
  }

  // The answer to one request, `latency` after it was due.
  void Answered(const absl::StatusOr<client::InsertResult>& result, absl::Duration latency) {
    absl::MutexLock lock(&mu_);
    if (result.ok()) {
      ++ok_;
      // Whole microseconds (the report's resolution), 4 bytes each: a run of millions of sends
      // keeps a quarter of the memory absl::Duration would.
      latencies_.push_back(static_cast<uint32_t>(
          std::clamp<int64_t>(absl::ToInt64Microseconds(latency), 0, UINT32_MAX)));
    } else {
      ++failed_;
      if (first_error_.ok()) first_error_ = result.status();
    }
  }

  // A failure of a whole stream (its requests were answered on their own).
  void StreamFailed(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    if (first_error_.ok()) first_error_ = status;
  }

  // Fills the counts and latency percentiles of `result`.
  void Report(BenchResult* result) {
    absl::MutexLock lock(&mu_);
    std::sort(latencies_.begin(), latencies_.end());
    result->requests_sent = sent_.load();
    result->requests_ok = ok_;
    result->requests_failed = failed_;
    result->behind_schedule = behind_.load();
    result->latency_p50_ms = Percentile(0.50);
    result->latency_p90_ms = Percentile(0.90);
    result->latency_p99_ms = Percentile(0.99);
    result->latency_max_ms = latencies_.empty() ? 0.0 : Milliseconds(latencies_.back());
  }

  absl::Status first_error() const {
    absl::MutexLock lock(&mu_);
    return first_error_;
  }

 private:
  double Percentile(double p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (latencies_.empty()) return 0;
    const size_t index = std::min(latencies_.size() - 1,
                                  static_cast<size_t>(p * static_cast<double>(latencies_.size())));
    return Milliseconds(latencies_[index]);
  }

  static double Milliseconds(uint32_t micros) { return static_cast<double>(micros) / 1000; }

  mutable absl::Mutex mu_;
  std::vector<uint32_t> latencies_ ABSL_GUARDED_BY(mu_);  // microseconds
  std::atomic<uint64_t> sent_{0};
  std::atomic<uint64_t> behind_{0};
  uint64_t ok_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
};

// Claims the schedule's requests and sends them over one InsertStream (or as unary calls, with
// `unary`), with at most `max_in_flight` unacknowledged. Run() returns after the last answer.
class StreamSender {
 public:
  StreamSender(client::Client* client, const v1::InsertRequest* request, uint64_t max_in_flight,
               SendSchedule* schedule, BenchStats* stats, bool unary = false,
               client::ProducerTable* producer = nullptr)
      : client_(client),
        request_(request),
        max_in_flight_(max_in_flight),
        schedule_(schedule),
        stats_(stats),
        unary_(unary),
        producer_(producer) {}

  void Run(absl::Duration stream_timeout) {
    if (unary_) {
      RunUnary(stream_timeout);
      return;
    }
    if (producer_ != nullptr) {
      RunProducer();
      return;
    }
    std::unique_ptr<client::InsertStream> stream =
        client_->OpenInsertStream({.timeout = stream_timeout});
    SendAll([&](client::AckCallback done) { stream->Send(*request_, std::move(done)); });
    // Close waits for every ack, so no callback runs after Run returns.
    absl::Status status = stream->Close();
    if (!status.ok()) stats_->StreamFailed(status);
  }

 private:
  // Unary calls through the SDK's InsertAsync, each with `call_timeout`; returns once every call
  // was answered.
  void RunUnary(absl::Duration call_timeout) {
    SendAll([&](client::AckCallback done) {
      client_->InsertAsync(*request_, std::move(done), {.timeout = call_timeout});
    });
    WaitDrained();
  }

  // One row per send through the Producer (the request's first row, or its one-row Block for
  // producer-block, copied as an application would build it). The Producer's own bound on
  // pending rows is the window (streams x --max-in-flight); Drive's Close waits for the last
  // answers.
  void RunProducer() {
    const bool blocks = request_->has_block();
    while (true) {
      const std::optional<absl::Time> due = NextDue();
      if (!due.has_value()) break;
      auto answered = [this, due = *due](const absl::StatusOr<client::InsertResult>& result) {
        stats_->Answered(result, absl::Now() - due);
      };
      if (blocks) {
        producer_->SendBlock(request_->block(), std::move(answered));
      } else {
        producer_->Send(request_->rows().rows(0), std::move(answered));
      }
    }
  }

  // Claims the next request, sleeps until it is due and counts it as sent; nullopt when the run
  // is over. One clock reading when it is due already (a closed loop: every send).
  std::optional<absl::Time> NextDue() {
    absl::Time now = absl::Now();
    const std::optional<absl::Time> due = schedule_->Claim(now);
    if (!due.has_value()) return due;
    if (*due > now) {
      absl::SleepFor(*due - now);
      now = absl::Now();
    }
    stats_->Sent(SendSchedule::Behind(*due, now));
    return due;
  }

  void WaitDrained() {
    absl::MutexLock lock(&mu_);
    auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; };
    mu_.Await(absl::Condition(&drained));
  }

  // Claims the schedule's requests one window slot at a time and hands each to `send` with the
  // callback that records its answer and frees its slot.
  template <typename Send>
  void SendAll(Send send) {
    while (TakeWindowSlot()) {
      const std::optional<absl::Time> due = NextDue();
      if (!due.has_value()) {
        ReleaseWindowSlot();
        break;
      }
      send([this, due = *due](const absl::StatusOr<client::InsertResult>& result) {
        stats_->Answered(result, absl::Now() - due);
        ReleaseWindowSlot();
      });
    }
  }

  // Waits until fewer than max_in_flight requests are unacknowledged (false when the run ended
  // first) and counts one more.
  bool TakeWindowSlot() {
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithDeadline(absl::Condition(this, &StreamSender::HasRoom), schedule_->end())) {
      return false;
    }
    ++in_flight_;
    return true;
  }

  void ReleaseWindowSlot() {
    absl::MutexLock lock(&mu_);
    --in_flight_;
  }

  bool HasRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ < max_in_flight_; }

  client::Client* const client_;
  const v1::InsertRequest* const request_;
  const uint64_t max_in_flight_;
  SendSchedule* const schedule_;
  BenchStats* const stats_;
  const bool unary_;
  client::ProducerTable* const producer_;  // kProducer: the table's sender
  absl::Mutex mu_;
  uint64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

// User plus system CPU time of this process, all threads.
absl::Duration ProcessCpuTime() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return absl::DurationFromTimeval(usage.ru_utime) + absl::DurationFromTimeval(usage.ru_stime);
}

std::string QuoteIdentifier(const std::string& name) {
  std::string out = "`";
  for (char c : name) {
    if (c == '`' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('`');
  return out;
}

// Fills in the target columns (when `row` names none) and returns their types, from the header of
// `SELECT <columns> FROM <table> LIMIT 0`.
absl::StatusOr<std::vector<std::string>> ReadColumnTypes(client::Client& client,
                                                         const std::string& table,
                                                         absl::Duration timeout, BenchRow* row) {
  std::vector<std::string> quoted;
  for (const std::string& c : row->columns) quoted.push_back(QuoteIdentifier(c));
  const std::string sql = absl::StrCat(
      "SELECT ", quoted.empty() ? "*" : absl::StrJoin(quoted, ", "), " FROM ", table, " LIMIT 0");
  absl::StatusOr<std::unique_ptr<client::QueryCursor>> cursor =
      client.Query(sql, {.timeout = timeout});
  if (!cursor.ok()) return cursor.status();
  while ((*cursor)->Next()) {
  }
  if (!(*cursor)->status().ok()) return (*cursor)->status();
  const v1::QueryHeader& header = (*cursor)->header();
  std::vector<std::string> types;
  std::vector<std::string> names;
  for (const v1::ColumnSchema& column : header.columns()) {
    names.push_back(column.name());
    types.push_back(column.type());
  }
  if (row->columns.empty()) row->columns = names;
  if (types.size() != row->values.size()) {
    return absl::InvalidArgumentError(absl::StrCat("--row has ", row->values.size(),
                                                   " values, the table has ", types.size(),
                                                   " columns (", absl::StrJoin(names, ", "), ")"));
  }
  return types;
}

// The request every send repeats; for kBlock and kProducerBlock, asks the server for the column
// types unless --types gave them.
absl::StatusOr<v1::InsertRequest> BuildRequest(const Command& command, client::Client& client,
                                               BenchRow row, int* error_code) {
  const BenchArgs& args = command.bench;
  v1::InsertRequest request;
  request.set_table(args.table);
  request.set_ack_mode(args.ack_mode);
  const bool columnar = args.mode == BenchMode::kBlock || args.mode == BenchMode::kProducerBlock;
  if (!columnar) {
    for (const std::string& c : row.columns) request.add_columns(c);
    // kProducer: the one row every send repeats; the Producer makes the requests.
    const uint64_t rows = args.mode == BenchMode::kProducer ? 1 : args.rows_per_request;
    for (uint64_t i = 0; i < rows; ++i) {
      v1::Row* r = request.mutable_rows()->add_rows();
      for (const v1::Value& v : row.values) *r->add_values() = v;
    }
    return request;
  }
  std::vector<std::string> types = args.types;
  if (types.empty()) {
    absl::StatusOr<std::vector<std::string>> read =
        ReadColumnTypes(client, args.table, command.timeout, &row);
    if (!read.ok()) {
      *error_code = read.status().code() == absl::StatusCode::kInvalidArgument
                        ? kExitUsage
                        : ExitCodeFor(read.status());
      return absl::Status(read.status().code(),
                          absl::StrCat("--mode ", BenchModeName(args.mode),
                                       " needs the column types; reading them from ", args.table,
                                       " failed: ", client::FormatError(read.status()),
                                       ". Give them with --types"));
    }
    types = *std::move(read);
  }
  // kProducerBlock: the one-row Block every send repeats; the Producer gathers them.
  absl::StatusOr<v1::Block> block = BuildBenchBlock(
      row, types, args.mode == BenchMode::kProducerBlock ? 1 : args.rows_per_request);
  if (!block.ok()) {
    *error_code = kExitUsage;
    return block.status();
  }
  for (const std::string& c : row.columns) request.add_columns(c);
  *request.mutable_block() = *std::move(block);
  return request;
}

// Sends `request` from --streams senders for --duration and returns the result (without
// chgate's CPU), the stats' first error in *first_error.
BenchResult Drive(const Command& command, client::Client* client, const v1::InsertRequest& request,
                  absl::Status* first_error) {
  const BenchArgs& args = command.bench;
  BenchStats stats;
  const absl::Duration cpu_before = ProcessCpuTime();
  const absl::Time start = absl::Now();
  SendSchedule schedule(start, args.duration, args.rate);
  // The stream outlives the sending phase by --timeout, the longest an ack may take.
  const absl::Duration stream_timeout = args.duration + command.timeout;
  const bool producing =
      args.mode == BenchMode::kProducer || args.mode == BenchMode::kProducerBlock;
  std::unique_ptr<client::Producer> producer;
  client::ProducerTable* producer_table = nullptr;
  if (producing) {
    // The Producer's bound on unsettled rows is the window of the senders together.
    absl::StatusOr<std::unique_ptr<client::Producer>> made = client::Producer::Create(
        client,
        {.batch_rows = args.rows_per_request,
         .max_pending_rows = std::max(args.rows_per_request, args.streams * args.max_in_flight),
         .ack_mode = args.ack_mode});
    if (!made.ok()) {
      *first_error = made.status();
      return BenchResult{.table = args.table, .mode = args.mode};
    }
    producer = *std::move(made);
    producer_table =
        producer->Table(args.table, {request.columns().begin(), request.columns().end()});
  }
  std::vector<std::unique_ptr<StreamSender>> senders;
  std::vector<std::thread> threads;
  for (uint64_t s = 0; s < args.streams; ++s) {
    const bool unary = args.mode == BenchMode::kUnary;
    senders.push_back(std::make_unique<StreamSender>(client, &request, args.max_in_flight,
                                                     &schedule, &stats, unary, producer_table));
    threads.emplace_back(&StreamSender::Run, senders.back().get(),
                         unary ? command.timeout : stream_timeout);
  }
  for (std::thread& t : threads) t.join();
  if (producer != nullptr) {
    // Waits for every send's answer; a failure is counted with its send.
    (void)producer->Close();
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const double client_cpu_us = absl::ToDoubleMicroseconds(ProcessCpuTime() - cpu_before);

  BenchResult result{
      .table = args.table,
      .mode = args.mode,
      .streams = args.streams,
      .rows_per_request = producing ? 1 : args.rows_per_request,
      .batch_rows = producing ? args.rows_per_request : 0,
      .max_in_flight = args.max_in_flight,
      .duration_s = seconds,
  };
  stats.Report(&result);
  const uint64_t answered = result.requests_ok + result.requests_failed;
  const double rows = static_cast<double>(result.requests_ok * result.rows_per_request);
  result.requests_per_s = static_cast<double>(result.requests_ok) / seconds;
  result.rows_per_s = rows / seconds;
  if (answered > 0) {
    result.client_cpu_us_per_request = client_cpu_us / static_cast<double>(answered);
  }
  if (schedule.open_loop()) {
    result.target_rate = args.rate;
    result.achieved_rate =
        static_cast<double>(result.requests_sent) / absl::ToDoubleSeconds(args.duration);
    result.scheduled = schedule.scheduled();
    result.unsent = schedule.scheduled() - schedule.claimed();
  }
  *first_error = stats.first_error();
  return result;
}

}  // namespace

int RunBench(const Command& command, const CliIo& io) {
  const BenchArgs& args = command.bench;
  auto fail = [&](int code, absl::string_view message) {
    PrintError(io, message);
    return code;
  };
  absl::StatusOr<BenchRow> row = ParseBenchRow(args.row, args.columns);
  if (!row.ok()) return fail(kExitUsage, row.status().message());
  absl::StatusOr<std::unique_ptr<client::Client>> client = ClientFor(command);
  if (!client.ok()) return fail(kExitUsage, client::FormatError(client.status()));
  int error_code = kExitFailure;
  absl::StatusOr<v1::InsertRequest> request =
      BuildRequest(command, **client, *std::move(row), &error_code);
  if (!request.ok()) return fail(error_code, request.status().message());

  absl::Status first_error;
  const BenchResult result = Drive(command, client->get(), *request, &first_error);
  *io.out << (args.json ? FormatBenchJson(result) : FormatBenchTable(result));
  if (!first_error.ok()) {
    return fail(ExitCodeFor(first_error),
                absl::StrCat("first failure: ", client::FormatError(first_error)));
  }
  return kExitOk;
}

std::vector<FlagSpec> BenchFlags() {
  return {
      {"table", "TABLE", "target table (required)"},
      {"mode", "MODE",
       "stream: row requests over InsertStreams; unary: the same as unary Insert calls "
       "(the SDK's InsertAsync); block: columnar Blocks over InsertStreams; producer: one row "
       "per send through the SDK's Producer, which gathers --rows-per-request rows (or 5 ms of "
       "sends) into each request; producer-block: the same with a one-row columnar Block per "
       "send (Producer::SendBlock), gathered into request Blocks",
       "stream"},
      {"streams", "N",
       "concurrent InsertStreams; for --mode unary, sender threads, each with up to "
       "--max-in-flight calls outstanding",
       absl::StrCat(BenchArgs{}.streams)},
      {"duration", "DURATION", "how long to send", absl::FormatDuration(BenchArgs{}.duration)},
      {"rows-per-request", "N", "rows in each request", absl::StrCat(BenchArgs{}.rows_per_request)},
      {"max-in-flight", "N", "unacknowledged requests per stream or unary sender",
       absl::StrCat(BenchArgs{}.max_in_flight)},
      {"rate", "R",
       "open loop: R requests/s over all streams, due at fixed intervals, latency counted from "
       "the due time",
       "closed loop, as fast as --max-in-flight allows"},
      {"row", "JSON",
       "the row sent again and again: a JSON object keyed by column, or an array with --columns",
       BenchArgs{}.row},
      {"columns", "A,B,...", "target columns for an array --row"},
      {"types", "T1,T2,...",
       "--mode block: the ClickHouse type of each --row value as the server prints it",
       "read from the table with SELECT ... LIMIT 0"},
      {"ack-mode", "MODE", "committed, accepted or persisted", "chgate's --ack-mode"},
      {"json", "", "print the result as one JSON object instead of the table"},
  };
}

namespace {

// The highest --rate: beyond it the schedule's request count would lose precision, and no
// generator gets near it.
constexpr double kMaxBenchRate = 1e7;

}  // namespace

// bench's --mode, --rate and --types, and the combinations that make no sense.
// The row is validated here too, so that a bad one is a usage error.
absl::Status ParseBenchOptions(const ParsedFlags& flags, BenchArgs* a) {
  const std::string mode = flags.Get("mode", "stream");
  if (mode == "stream") {
    a->mode = BenchMode::kStream;
  } else if (mode == "unary") {
    a->mode = BenchMode::kUnary;
  } else if (mode == "block") {
    a->mode = BenchMode::kBlock;
  } else if (mode == "producer") {
    a->mode = BenchMode::kProducer;
  } else if (mode == "producer-block") {
    a->mode = BenchMode::kProducerBlock;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--mode: '", mode, "' is not stream, unary, block, producer or producer-block"));
  }
  if (flags.Has("rate")) {
    const std::string text = flags.Get("rate");
    double rate = 0;
    if (!absl::SimpleAtod(text, &rate) || !(rate > 0) || rate > kMaxBenchRate) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rate: '", text, "' is not a number of requests per second above 0 and at most ",
          static_cast<int64_t>(kMaxBenchRate)));
    }
    a->rate = rate;
  }
  absl::StatusOr<BenchRow> row = ParseBenchRow(a->row, a->columns);
  if (!row.ok()) return row.status();
  if (flags.Has("types")) {
    if (a->mode != BenchMode::kBlock && a->mode != BenchMode::kProducerBlock) {
      return absl::InvalidArgumentError("--types applies to --mode block and producer-block only");
    }
    absl::StatusOr<std::vector<std::string>> types = ParseTypeList(flags.Get("types"));
    if (!types.ok()) return types.status();
    if (types->size() != row->values.size()) {
      return absl::InvalidArgumentError(absl::StrCat("--types names ", types->size(), " types for ",
                                                     row->values.size(), " --row values"));
    }
    if (row->columns.empty()) {
      return absl::InvalidArgumentError(
          "--mode block with --types needs the column names: give --columns or a --row object "
          "(or leave out --types to take names and types from the table)");
    }
    a->types = *std::move(types);
  }
  return absl::OkStatus();
}

}  // namespace chgate::cli
