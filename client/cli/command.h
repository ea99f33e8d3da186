// chgate-cli's command model: what ParseCommandLine produces and every subcommand runs from (the
// arguments of each subcommand, the global options, the streams), the exit codes, and the two
// helpers every subcommand shares. Internal to chgate-cli; depends on no other part of it.
//
// Exit codes (kExit*): 0 success; 1 failure reported by the server or bad input data; 2 usage
// error; 3 chgate unreachable (UNAVAILABLE).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "chgate/v1/chgate.pb.h"
#include "client/sdk/options.h"

namespace chgate::client {
class Client;
}  // namespace chgate::client

namespace chgate::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnavailable = 3;

inline constexpr char kDefaultAddr[] = "127.0.0.1:50051";
inline constexpr char kDefaultHealthAddr[] = "127.0.0.1:50052";

// The process's streams, or test doubles.
struct CliIo {
  std::istream* in = nullptr;
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  // Whether `err` is a terminal: the insert progress line is shown only then (or with
  // --progress), redrawn in place.
  bool err_is_tty = false;
};

enum class Subcommand { kHelp, kInsert, kQuery, kBench, kHealth };

struct InsertArgs {
  std::string table;
  std::string format = "jsonl";  // jsonl | csv
  std::vector<std::string> columns;
  uint64_t batch_rows = 1000;
  std::string idempotency_prefix;
  v1::AckMode ack_mode = v1::ACK_MODE_UNSPECIFIED;
  uint64_t max_in_flight = 16;
  absl::Duration stream_timeout = absl::Hours(24);
  bool progress = false;
};

struct QueryArgs {
  std::string sql;
  std::string format = "tsv";  // tsv | csv | jsonl
  std::map<std::string, std::string> settings;
  std::map<std::string, std::string> parameters;
  std::string database;
  std::string query_id;
  bool names = false;  // first line with the column names (tsv, csv)
  bool stats = false;
};

// How `bench` sends: row requests over InsertStreams, the same through the unary Insert call,
// columnar Blocks over InsertStreams, or one row per send through the SDK's coalescing Producer.
enum class BenchMode { kStream, kUnary, kBlock, kProducer, kProducerBlock };

struct BenchArgs {
  std::string table;
  BenchMode mode = BenchMode::kStream;
  uint64_t streams = 4;  // kUnary: sender threads, one call outstanding each
  absl::Duration duration = absl::Seconds(10);
  uint64_t rows_per_request = 100;
  uint64_t max_in_flight = 8;  // per stream
  std::string row = R"({"id":1,"msg":"chgate-cli bench"})";
  std::vector<std::string> columns;
  // kBlock, kProducerBlock: the ClickHouse type of each --row value; empty: read from the table
  // through Query.
  std::vector<std::string> types;
  v1::AckMode ack_mode = v1::ACK_MODE_UNSPECIFIED;
  // Requests per second over all streams, sent open-loop at fixed intervals; 0: closed loop.
  double rate = 0;
  bool json = false;  // the result as one JSON object instead of the table
};

struct HealthArgs {
  std::string service;
};

struct Command {
  Subcommand subcommand = Subcommand::kHelp;
  // For kHelp: the text to print (the tool's or a subcommand's help).
  std::string help;
  std::string addr;  // already defaulted per subcommand
  absl::Duration timeout = absl::Seconds(30);
  client::TlsOptions tls;   // --tls, --tls-ca-file, --tls-cert-file, --tls-key-file, ...
  std::string token_file;   // --token-file
  std::string traceparent;  // --traceparent
  std::string tracestate;   // --tracestate
  InsertArgs insert;
  QueryArgs query;
  BenchArgs bench;
  HealthArgs health;
};

// The SDK options for `command`: its timeout, TLS settings and the token read from
// --token-file. Errors: those of client::ReadTokenFile.
absl::StatusOr<client::ClientOptions> ClientOptionsFor(const Command& command);

// A client for `command`'s address and options. Errors: those of ClientOptionsFor and
// client::Client::Create.
absl::StatusOr<std::unique_ptr<client::Client>> ClientFor(const Command& command);

// Prints "chgate-cli: <what>" on io.err.
void PrintError(const CliIo& io, absl::string_view what);

// The exit code for a failed call: kExitUnavailable for UNAVAILABLE, else kExitFailure (kExitOk
// for OK).
int ExitCodeFor(const absl::Status& status);

}  // namespace chgate::cli
