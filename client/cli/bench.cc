#include "client/cli/bench.h"

#include <algorithm>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "client/cli/json.h"
#include "client/sdk/client.h"

namespace chgate::cli {

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

namespace {

// Shared results of all streams.
struct BenchStats {
  absl::Mutex mu;
  std::vector<absl::Duration> latencies ABSL_GUARDED_BY(mu);
  uint64_t ok ABSL_GUARDED_BY(mu) = 0;
  uint64_t failed ABSL_GUARDED_BY(mu) = 0;
  absl::Status first_error ABSL_GUARDED_BY(mu);
};

void RunStream(client::Client& client, const v1::InsertRequest& request, const BenchArgs& args,
               absl::Duration stream_timeout, absl::Time end, BenchStats* stats) {
  std::unique_ptr<client::InsertStream> stream =
      client.OpenInsertStream({.timeout = stream_timeout});
  absl::Mutex mu;
  uint64_t in_flight = 0;
  while (absl::Now() < end) {
    {
      absl::MutexLock lock(&mu);
      auto has_room = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
        return in_flight < args.max_in_flight;
      };
      mu.Await(absl::Condition(&has_room));
      ++in_flight;
    }
    const absl::Time sent = absl::Now();
    stream->Send(request, [&, sent](absl::StatusOr<client::InsertResult> result) {
      const absl::Duration latency = absl::Now() - sent;
      {
        absl::MutexLock lock(&stats->mu);
        if (result.ok()) {
          ++stats->ok;
          stats->latencies.push_back(latency);
        } else {
          ++stats->failed;
          if (stats->first_error.ok()) stats->first_error = result.status();
        }
      }
      absl::MutexLock lock(&mu);
      --in_flight;
    });
  }
  // Close waits for every ack, so the callbacks above never outlive `mu` and `in_flight`.
  absl::Status status = stream->Close();
  if (!status.ok()) {
    absl::MutexLock lock(&stats->mu);
    if (stats->first_error.ok()) stats->first_error = status;
  }
}

double Percentile(const std::vector<absl::Duration>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t index =
      std::min(sorted.size() - 1, static_cast<size_t>(p * static_cast<double>(sorted.size())));
  return absl::ToDoubleMilliseconds(sorted[index]);
}

}  // namespace

int RunBench(const Command& command, const CliIo& io) {
  const BenchArgs& args = command.bench;
  absl::StatusOr<BenchRow> row = ParseBenchRow(args.row, args.columns);
  if (!row.ok()) {
    *io.err << "chgate-cli: " << row.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<client::ClientOptions> options = ClientOptionsFor(command);
  absl::StatusOr<std::unique_ptr<client::Client>> client =
      options.ok() ? client::Client::Create(command.addr, *std::move(options))
                   : absl::StatusOr<std::unique_ptr<client::Client>>(options.status());
  if (!client.ok()) {
    *io.err << "chgate-cli: " << client::FormatError(client.status()) << "\n";
    return kExitUsage;
  }
  v1::InsertRequest request;
  request.set_table(args.table);
  request.set_ack_mode(args.ack_mode);
  for (const std::string& c : row->columns) request.add_columns(c);
  for (uint64_t i = 0; i < args.rows_per_request; ++i) {
    v1::Row* r = request.mutable_rows()->add_rows();
    for (const v1::Value& v : row->values) *r->add_values() = v;
  }

  BenchStats stats;
  const absl::Time start = absl::Now();
  const absl::Time end = start + args.duration;
  // The stream outlives the sending phase by --timeout, the longest an ack may take.
  const absl::Duration stream_timeout = args.duration + command.timeout;
  std::vector<std::thread> threads;
  for (uint64_t s = 0; s < args.streams; ++s) {
    threads.emplace_back([&] { RunStream(**client, request, args, stream_timeout, end, &stats); });
  }
  for (std::thread& t : threads) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);

  absl::MutexLock lock(&stats.mu);
  std::sort(stats.latencies.begin(), stats.latencies.end());
  const double rows = static_cast<double>(stats.ok * args.rows_per_request);
  *io.out << absl::StrFormat(
      "table %s, %d streams, %d rows/request, %d in flight/stream, %.1fs\n"
      "requests ok       %d\n"
      "requests failed   %d\n"
      "rows/s            %.0f\n"
      "requests/s        %.0f\n"
      "ack latency ms    p50 %.2f  p99 %.2f  max %.2f\n",
      args.table, args.streams, args.rows_per_request, args.max_in_flight, seconds, stats.ok,
      stats.failed, rows / seconds, static_cast<double>(stats.ok) / seconds,
      Percentile(stats.latencies, 0.50), Percentile(stats.latencies, 0.99),
      stats.latencies.empty() ? 0.0 : absl::ToDoubleMilliseconds(stats.latencies.back()));
  if (!stats.first_error.ok()) {
    *io.err << "chgate-cli: first failure: " << client::FormatError(stats.first_error) << "\n";
    return ExitCodeFor(stats.first_error);
  }
  return kExitOk;
}

}  // namespace chgate::cli
