// `chgate-cli bench`: a load generator over the SDK. Internal to chgate-cli.
//
// One request is built up front (rows, or a columnar Block) and sent again and again: over
// --streams InsertStreams with up to --max-in-flight unacknowledged each, or as unary calls
// (the SDK's InsertAsync) from --streams threads with up to --max-in-flight outstanding each;
// in the producer modes, one row (or one-row Block) per send through the SDK's Producer.
// Closed loop by default; with --rate the requests are due at fixed intervals and latency counts
// from the due time, so a stalled server shows up in the latency instead of in fewer samples.
// The pieces below are exposed for the tests; RunBench is the command.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chgate/v1/chgate.pb.h"
#include "client/cli/command.h"
#include "client/cli/flags.h"

namespace chgate::cli {

// The row the benchmark sends: target columns (empty: table order) and one value per column.
struct BenchRow {
  std::vector<std::string> columns;
  std::vector<v1::Value> values;
};

// Reads --row: a JSON object (its keys are the columns; --columns must then be empty or equal)
// or a JSON array (with --columns of the same length, or none for the table's column order).
// Returns InvalidArgument when it is neither or the lengths differ.
absl::StatusOr<BenchRow> ParseBenchRow(const std::string& json,
                                       const std::vector<std::string>& columns);

// Reads --types: ClickHouse type names separated by commas outside parentheses and quotes
// ("UInt64,Decimal(9, 2),Map(String, UInt8)"), each trimmed. InvalidArgument for an empty name
// or unbalanced parentheses or quotes.
absl::StatusOr<std::vector<std::string>> ParseTypeList(std::string_view text);

// "stream", "unary", "block", "producer" or "producer-block".
const char* BenchModeName(BenchMode mode);

// A Block of `rows` copies of `row`, column i named row.columns[i] (if any) with type types[i].
// Strings go to Date and DateTime columns as "YYYY-MM-DD" or RFC 3339 text; JSON arrays to Array
// and Tuple columns, objects to Map columns. InvalidArgument when the counts differ, a type does
// not parse, or a value does not fit its column (naming the column).
absl::StatusOr<v1::Block> BuildBenchBlock(const BenchRow& row,
                                          const std::vector<std::string>& types, uint64_t rows);

// When each request of a run is due. Closed loop (rate 0): a request is due when it is claimed,
// until the end. Open loop: request k is due at start + k / rate, for every k due before the end
// (rate x duration of them, rounded up); claims hand them out in order whether or not they are
// late, and stop at the end, so a generator that falls behind leaves some unclaimed. Time comes
// in as arguments: no clock inside. Thread-safe.
class SendSchedule {
 public:
  // A send this much later than its due time counts as behind schedule (sleeping is not exact).
  static constexpr absl::Duration kSlack = absl::Milliseconds(1);

  SendSchedule(absl::Time start, absl::Duration duration, double rate);

  // The due time of the next request, or nullopt when the run is over: `now` is at or past the
  // end, or (open loop) every scheduled request was claimed.
  std::optional<absl::Time> Claim(absl::Time now);

  // Whether a request due at `due` and sent at `sent` is behind schedule.
  static bool Behind(absl::Time due, absl::Time sent) { return sent - due > kSlack; }

  absl::Time end() const { return end_; }
  bool open_loop() const { return rate_ > 0; }
  // Open loop: the requests the run schedules; 0 for a closed loop.
  uint64_t scheduled() const { return scheduled_; }
  uint64_t claimed() const;

 private:
  const absl::Time start_;
  const absl::Time end_;
  const double rate_;
  const uint64_t scheduled_;
  std::atomic<uint64_t> claimed_{0};
};

// What a run measured; the numbers of the table and of --json.
struct BenchResult {
  std::string table;
  BenchMode mode = BenchMode::kStream;
  uint64_t streams = 0;
  uint64_t rows_per_request = 0;  // kProducer: 1 (a request is one send)
  uint64_t batch_rows = 0;        // kProducer: the rows the Producer gathers per request at most
  uint64_t max_in_flight = 0;     // per stream, or per sender for kUnary
  double duration_s = 0;          // from the first send to the last answer
  uint64_t requests_sent = 0;
  uint64_t requests_ok = 0;
  uint64_t requests_failed = 0;
  double requests_per_s = 0;  // ok requests per duration_s
  double rows_per_s = 0;
  double latency_p50_ms = 0;  // of the ok requests; from the due time with --rate
  double latency_p90_ms = 0;
  double latency_p99_ms = 0;
  double latency_max_ms = 0;
  // This process's CPU time over the run per answered (ok or failed) request; nullopt when none
  // was answered. chgate's own CPU is measured beside it by the bench scripts
  // (tests/bench/small_bench.py), or read from its process_cpu_seconds_total.
  std::optional<double> client_cpu_us_per_request;
  // --rate only (target_rate 0 otherwise).
  double target_rate = 0;
  double achieved_rate = 0;  // requests sent per second of --duration
  uint64_t scheduled = 0;
  uint64_t behind_schedule = 0;  // sent more than SendSchedule::kSlack after their due time
  uint64_t unsent = 0;           // scheduled but not sent before the end
};

// The result as one JSON object (a single line with a newline), every field of BenchResult;
// unmeasured values and the --rate fields of a closed-loop run are null.
std::string FormatBenchJson(const BenchResult& result);

// The result as the human-readable table.
std::string FormatBenchTable(const BenchResult& result);

// Runs the benchmark of `command.bench`; prints the result on io.out (the table, or JSON with
// --json). Returns kExitOk when every request succeeded, else the exit code of the first
// failure; kExitUsage for a --row that does not fit --types or the table's types.
int RunBench(const Command& command, const CliIo& io);

// bench's options, for the help text and the parser.
std::vector<FlagSpec> BenchFlags();

// bench's --mode, --rate and --types, and the combinations that make no sense.
// The row is validated here too, so that a bad one is a usage error.
absl::Status ParseBenchOptions(const ParsedFlags& flags, BenchArgs* a);

}  // namespace chgate::cli
