// chgate-cli's command line: the options of each subcommand, the help texts, and
// ParseCommandLine (cli.h), which turns arguments into a Command (command.h).
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cli/bench.h"
#include "client/cli/cli.h"
#include "client/cli/flags.h"
#include "client/sdk/internal/strings.h"
#include "text/trace_context.h"

namespace chgate::cli {

using client::internal::Sv;

namespace {

std::vector<FlagSpec> GlobalFlags() {
  return {
      {"addr", "ADDR",
       absl::StrCat("chgate API address, host:port or unix:PATH (health: ", kDefaultHealthAddr,
                    ")"),
       kDefaultAddr},
      {"timeout", "DURATION", "deadline of each call; for insert, the longest wait for one ack",
       absl::FormatDuration(Command{}.timeout)},
      {"tls", "", "connect with TLS (implied by the --tls-* options)"},
      {"tls-ca-file", "FILE", "PEM CA bundle that signed chgate's certificate", "the system's"},
      {"tls-cert-file", "FILE", "PEM client certificate for mutual TLS"},
      {"tls-key-file", "FILE", "PEM key of --tls-cert-file"},
      {"tls-server-name", "NAME", "name to verify chgate's certificate against", "the host"},
      {"token-file", "FILE", "file holding a bearer token sent with every call"},
      {"traceparent", "TP",
       "W3C trace context sent with every call (00-<32 hex trace id>-<16 hex span id>-<2 hex "
       "flags>): ClickHouse records the query's or INSERT's spans under that trace"},
      {"tracestate", "TS", "W3C tracestate sent with --traceparent"},
      {"help", "", "show help"},
  };
}

std::vector<FlagSpec> InsertFlags() {
  return {
      {"table", "TABLE", "target table, db.table or table (required)"},
      {"format", "FORMAT", "input format: jsonl or csv", InsertArgs{}.format},
      {"columns", "A,B,...",
       "target columns; jsonl: the object keys to take (default: the first object's keys); csv: "
       "the input has no header line and these are its columns"},
      {"batch-rows", "N", "rows per request", absl::StrCat(InsertArgs{}.batch_rows)},
      {"idempotency-prefix", "P",
       "give batch n the idempotency key P-n: a batch that fails with UNAVAILABLE is sent again "
       "(up to 3 times, on a new stream), and a rerun after a failure does not insert committed "
       "batches twice"},
      {"ack-mode", "MODE", "committed, accepted or persisted", "chgate's --ack-mode"},
      {"max-in-flight", "N", "requests sent but not yet acknowledged",
       absl::StrCat(InsertArgs{}.max_in_flight)},
      {"stream-timeout", "DURATION", "deadline of the whole insert stream",
       absl::FormatDuration(InsertArgs{}.stream_timeout)},
      {"progress", "", "show the progress line even when stderr is not a terminal"},
  };
}

std::vector<FlagSpec> QueryFlags() {
  return {
      {"format", "FORMAT", "output format: tsv, csv or jsonl", QueryArgs{}.format},
      {"setting", "K=V", "ClickHouse setting for this query", "", true},
      {"param", "K=V", "value of the query parameter {K:Type}", "", true},
      {"database", "DB", "default database for unqualified table names"},
      {"query-id", "ID", "ClickHouse query id"},
      {"names", "", "print a first line with the column names (tsv, csv)"},
      {"stats", "", "print rows, bytes and elapsed time on stderr at the end"},
  };
}

std::vector<FlagSpec> HealthFlags() {
  return {
      {"service", "NAME",
       "health service name: \"\" (the whole server), liveness, readiness or buffer", "\"\""},
  };
}

std::vector<FlagSpec> Concat(std::vector<FlagSpec> a, const std::vector<FlagSpec>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

constexpr char kExitCodesHelp[] =
    "Exit codes:\n"
    "  0   success (health: the service is SERVING)\n"
    "  1   failure: the server rejected a batch or the query, NOT_SERVING, bad input data,\n"
    "      a deadline\n"
    "  2   usage error (unknown option, missing or malformed value)\n"
    "  3   chgate unreachable or unavailable (gRPC UNAVAILABLE)\n";

std::string SubcommandHelp(Subcommand sub) {
  std::string out;
  switch (sub) {
    case Subcommand::kInsert:
      out =
          "Usage: chgate-cli [--addr ADDR] [--timeout D] insert --table TABLE [options] < input\n\n"
          "Reads rows from stdin and inserts them over one InsertStream, --batch-rows rows per\n"
          "request. jsonl: one JSON object per line keyed by column name, or one JSON array of\n"
          "values per line. JSON null, booleans, numbers, strings, arrays and objects become\n"
          "NULL, Bool, integers/floats, text, Array and Map values; chgate converts them to the\n"
          "column types (dates, UUIDs, decimals and big integers as strings). csv: a header line\n"
          "with the column names, then records; every field is sent as text, unquoted \\N is\n"
          "NULL (use jsonl for Bool, Array and Map columns). A rejected batch is reported with\n"
          "its input line numbers; reading stops at the first failure.\n\nOptions:\n";
      out += FormatFlagsHelp(InsertFlags());
      break;
    case Subcommand::kQuery:
      out =
          "Usage: chgate-cli [--addr ADDR] [--timeout D] query 'SQL' [options]\n\n"
          "Runs one SELECT through chgate and prints its rows on stdout (SQL '-' reads the\n"
          "statement from stdin). tsv is ClickHouse's TabSeparated text; DateTime values are\n"
          "shown in the column's time zone, or the server's. --timeout bounds the whole query.\n\n"
          "Options:\n";
      out += FormatFlagsHelp(QueryFlags());
      break;
    case Subcommand::kBench:
      out =
          "Usage: chgate-cli [--addr ADDR] bench --table TABLE [options]\n\n"
          "Load generator: --streams InsertStreams send the same row, --rows-per-request times\n"
          "per request, for --duration, then print requests and rows per second, the ack\n"
          "latency (p50, p90, p99, max) and this process's CPU time per request.\n"
          "--mode unary sends unary Insert calls instead (each of the --streams senders keeps\n"
          "up to --max-in-flight outstanding). --mode block sends the\n"
          "row as a columnar Block, which needs the column types (--types, or read from the\n"
          "table). Without --rate each stream sends as soon as its window has room (closed\n"
          "loop); with --rate requests are due at fixed intervals whether or not earlier ones\n"
          "were answered, latency counts from the due time, and sends more than 1ms late are\n"
          "reported as behind schedule. For the default row:\n"
          "  CREATE TABLE t (id UInt64, msg String) ENGINE = Null\n\n"
          "Examples:\n"
          "  chgate-cli bench --table t --streams 4 --rows-per-request 1 --max-in-flight 1024\n"
          "  chgate-cli bench --table t --mode unary --rows-per-request 1 --max-in-flight 4096\n"
          "  chgate-cli bench --table t --mode block --types UInt64,String\n"
          "  chgate-cli bench --table t --rate 5000 --rows-per-request 1 --json\n\n"
          "Options:\n";
      out += FormatFlagsHelp(BenchFlags());
      break;
    case Subcommand::kHealth:
      out =
          "Usage: chgate-cli [--addr ADDR] [--timeout D] health [--service NAME]\n\n"
          "Calls grpc.health.v1.Health/Check (default address 127.0.0.1:50052, chgate's health\n"
          "listener) and prints SERVING, NOT_SERVING, UNKNOWN or SERVICE_UNKNOWN. Exits 0 only\n"
          "for SERVING.\n\nOptions:\n";
      out += FormatFlagsHelp(HealthFlags());
      break;
    case Subcommand::kHelp:
      return ToolHelp();
  }
  out += "\nGlobal options:\n" + FormatFlagsHelp(GlobalFlags()) + "\n" + kExitCodesHelp;
  return out;
}

std::optional<Subcommand> SubcommandNamed(std::string_view name) {
  if (name == "insert") return Subcommand::kInsert;
  if (name == "query") return Subcommand::kQuery;
  if (name == "bench") return Subcommand::kBench;
  if (name == "health") return Subcommand::kHealth;
  return std::nullopt;
}

absl::StatusOr<v1::AckMode> ParseAckMode(const std::string& text) {
  if (text == "committed") return v1::ACK_MODE_COMMITTED;
  if (text == "accepted") return v1::ACK_MODE_ACCEPTED;
  if (text == "persisted") return v1::ACK_MODE_PERSISTED;
  return absl::InvalidArgumentError(
      absl::StrCat("--ack-mode: '", text, "' is not committed, accepted or persisted"));
}

absl::Status Usage(std::string_view sub, const absl::Status& status) {
  return absl::InvalidArgumentError(
      absl::StrCat(Sv(sub), sub.empty() ? "" : ": ", status.message()));
}

// Reads optional flags into fields; the first malformed value is kept in error() and later reads
// do nothing.
class FlagReader {
 public:
  explicit FlagReader(const ParsedFlags& flags) : flags_(flags) {}

  const absl::Status& error() const { return error_; }
  void Fail(absl::Status status) {
    if (error_.ok()) error_ = std::move(status);
  }

  void Count(const char* flag, uint64_t min, uint64_t* field) {
    if (error_.ok() && flags_.Has(flag)) Take(ParseCountFlag(flag, flags_.Get(flag), min), field);
  }
  void Duration(const char* flag, absl::Duration* field) {
    if (error_.ok() && flags_.Has(flag)) Take(ParseDurationFlag(flag, flags_.Get(flag)), field);
  }
  void List(const char* flag, std::vector<std::string>* field) {
    if (error_.ok() && flags_.Has(flag)) Take(ParseListFlag(flag, flags_.Get(flag)), field);
  }
  void Ack(v1::AckMode* field) {
    if (error_.ok() && flags_.Has("ack-mode")) Take(ParseAckMode(flags_.Get("ack-mode")), field);
  }
  void KeyValues(const char* flag, std::map<std::string, std::string>* field) {
    for (const std::string& text : flags_.All(flag)) {
      if (!error_.ok()) return;
      absl::StatusOr<std::pair<std::string, std::string>> kv = ParseKeyValueFlag(flag, text);
      if (kv.ok()) {
        (*field)[kv->first] = kv->second;
      } else {
        error_ = kv.status();
      }
    }
  }
  void NoPositional() {
    if (error_.ok() && !flags_.positional().empty()) {
      error_ = absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", flags_.positional()[0], "'"));
    }
  }

 private:
  template <typename T>
  void Take(absl::StatusOr<T> value, T* field) {
    if (value.ok()) {
      *field = *std::move(value);
    } else {
      error_ = value.status();
    }
  }

  const ParsedFlags& flags_;
  absl::Status error_;
};

// The global options before the command: args[0, *command_index) with their values.
absl::StatusOr<ParsedFlags> ParseGlobalFlags(const std::vector<std::string>& args,
                                             size_t* command_index) {
  const std::vector<FlagSpec> global = GlobalFlags();
  size_t i = 0;
  std::vector<std::string> before;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0) break;
    before.push_back(arg);
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    auto spec = std::find_if(global.begin(), global.end(),
                             [&](const FlagSpec& s) { return s.name == name; });
    if (spec != global.end() && !spec->value_name.empty() && eq == std::string::npos &&
        i + 1 < args.size()) {
      before.push_back(args[++i]);
    }
  }
  *command_index = i;
  return ParseFlags(global, before);
}

std::vector<FlagSpec> SubcommandFlags(Subcommand sub) {
  switch (sub) {
    case Subcommand::kInsert:
      return InsertFlags();
    case Subcommand::kQuery:
      return QueryFlags();
    case Subcommand::kBench:
      return BenchFlags();
    case Subcommand::kHealth:
      return HealthFlags();
    case Subcommand::kHelp:
      break;
  }
  return {};
}

// The options every subcommand takes (given before or after it): address, TLS, token, trace
// context and timeout.
absl::Status ParseCommonOptions(const ParsedFlags& flags, const ParsedFlags& global,
                                Command* command) {
  const bool health = command->subcommand == Subcommand::kHealth;
  command->addr = flags.Get("addr", global.Get("addr", health ? kDefaultHealthAddr : kDefaultAddr));
  auto either = [&](const char* flag) { return flags.Get(flag, global.Get(flag)); };
  client::TlsOptions& tls = command->tls;
  tls.ca_file = either("tls-ca-file");
  tls.cert_file = either("tls-cert-file");
  tls.key_file = either("tls-key-file");
  tls.server_name = either("tls-server-name");
  const bool tls_files = !tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty() ||
                         !tls.server_name.empty();
  if (either("tls") == "false" && tls_files) {
    return absl::InvalidArgumentError(
        "--tls=false with --tls-ca-file, --tls-cert-file, --tls-key-file or --tls-server-name");
  }
  tls.enabled = either("tls") == "true" || tls_files;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert-file and --tls-key-file go together");
  }
  command->token_file = either("token-file");
  command->traceparent = either("traceparent");
  command->tracestate = either("tracestate");
  if (!command->traceparent.empty() && !text::ParseTraceparent(command->traceparent).has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--traceparent: '", command->traceparent,
                     "' is not 00-<32 hex>-<16 hex>-<2 hex> (lower case, non-zero ids)"));
  }
  if (!command->tracestate.empty() && command->traceparent.empty()) {
    return absl::InvalidArgumentError("--tracestate needs --traceparent");
  }
  const std::string timeout = either("timeout");
  if (!timeout.empty()) {
    absl::StatusOr<absl::Duration> d = ParseDurationFlag("timeout", timeout);
    if (!d.ok()) return d.status();
    command->timeout = *d;
  }
  return absl::OkStatus();
}

void ParseInsertArgs(const ParsedFlags& flags, FlagReader& read, InsertArgs* a) {
  a->table = flags.Get("table");
  if (a->table.empty()) read.Fail(absl::InvalidArgumentError("--table is required"));
  a->format = flags.Get("format", a->format);
  if (a->format != "jsonl" && a->format != "csv") {
    read.Fail(absl::InvalidArgumentError(
        absl::StrCat("--format: '", a->format, "' is neither jsonl nor csv")));
  }
  read.List("columns", &a->columns);
  read.Count("batch-rows", 1, &a->batch_rows);
  read.Count("max-in-flight", 1, &a->max_in_flight);
  read.Duration("stream-timeout", &a->stream_timeout);
  read.Ack(&a->ack_mode);
  a->idempotency_prefix = flags.Get("idempotency-prefix");
  a->progress = flags.Get("progress") == "true";
  read.NoPositional();
}

void ParseQueryArgs(const ParsedFlags& flags, FlagReader& read, QueryArgs* a) {
  if (flags.positional().size() != 1) {
    read.Fail(absl::InvalidArgumentError(
        flags.positional().empty()
            ? "the SQL statement is missing (quote it: query 'SELECT 1')"
            : "more than one SQL argument (quote the statement as one argument)"));
  } else {
    a->sql = flags.positional()[0];
  }
  a->format = flags.Get("format", a->format);
  if (a->format != "tsv" && a->format != "csv" && a->format != "jsonl") {
    read.Fail(absl::InvalidArgumentError(
        absl::StrCat("--format: '", a->format, "' is not tsv, csv or jsonl")));
  }
  read.KeyValues("setting", &a->settings);
  read.KeyValues("param", &a->parameters);
  a->database = flags.Get("database");
  a->query_id = flags.Get("query-id");
  a->names = flags.Get("names") == "true";
  a->stats = flags.Get("stats") == "true";
}

void ParseBenchArgs(const ParsedFlags& flags, FlagReader& read, BenchArgs* a) {
  a->table = flags.Get("table");
  if (a->table.empty()) read.Fail(absl::InvalidArgumentError("--table is required"));
  read.Count("streams", 1, &a->streams);
  read.Duration("duration", &a->duration);
  read.Count("rows-per-request", 1, &a->rows_per_request);
  read.Count("max-in-flight", 1, &a->max_in_flight);
  a->row = flags.Get("row", a->row);
  read.List("columns", &a->columns);
  read.Ack(&a->ack_mode);
  a->json = flags.Get("json") == "true";
  if (read.error().ok()) read.Fail(ParseBenchOptions(flags, a));
  read.NoPositional();
}

}  // namespace

std::string ToolHelp() {
  return absl::StrCat(
      "chgate-cli: command-line client of chgate, the gRPC sidecar for ClickHouse.\n\n"
      "Usage: chgate-cli [global options] <command> [options]\n\n"
      "Commands:\n"
      "  insert   insert JSON lines or CSV from stdin into a table, batched over InsertStream\n"
      "  query    run a SELECT and print its rows as TSV, CSV or JSON lines\n"
      "  bench    load generator: InsertStreams, unary Inserts or Blocks; rows/s, latency, CPU\n"
      "  health   grpc.health.v1 check; exit 0 only when SERVING\n\n"
      "`chgate-cli <command> --help` describes a command.\n\n"
      "Global options:\n",
      FormatFlagsHelp(GlobalFlags()), "\n", kExitCodesHelp,
      "\nExamples:\n"
      "  echo '{\"id\":1,\"msg\":\"hi\"}' | chgate-cli insert --table app.events\n"
      "  chgate-cli query 'SELECT * FROM app.events LIMIT 10' --format jsonl\n"
      "  chgate-cli health --service readiness\n");
}

absl::StatusOr<Command> ParseCommandLine(const std::vector<std::string>& args) {
  Command command;
  size_t i = 0;
  absl::StatusOr<ParsedFlags> global = ParseGlobalFlags(args, &i);
  if (!global.ok()) return Usage("", global.status());
  if (i >= args.size() || args[i] == "help") {
    if (i < args.size() || global->On("help")) {
      command.help = ToolHelp();
      return command;
    }
    return absl::InvalidArgumentError("no command given (insert, query, bench or health)");
  }
  const std::string name = args[i];
  std::optional<Subcommand> sub = SubcommandNamed(name);
  if (!sub.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown command '", name, "'"));
  }
  const std::vector<std::string> rest(args.begin() + static_cast<long>(i) + 1, args.end());
  // Global options are accepted after the command as well.
  absl::StatusOr<ParsedFlags> flags =
      ParseFlags(Concat(SubcommandFlags(*sub), GlobalFlags()), rest);
  if (!flags.ok()) return Usage(name, flags.status());
  if (global->On("help") || flags->On("help")) {
    command.help = SubcommandHelp(*sub);
    return command;
  }
  command.subcommand = *sub;
  if (absl::Status st = ParseCommonOptions(*flags, *global, &command); !st.ok()) {
    return Usage(name, st);
  }
  FlagReader read(*flags);
  switch (*sub) {
    case Subcommand::kInsert:
      ParseInsertArgs(*flags, read, &command.insert);
      break;
    case Subcommand::kQuery:
      ParseQueryArgs(*flags, read, &command.query);
      break;
    case Subcommand::kBench:
      ParseBenchArgs(*flags, read, &command.bench);
      break;
    case Subcommand::kHealth:
      command.health.service = flags->Get("service");
      read.NoPositional();
      break;
    case Subcommand::kHelp:
      break;
  }
  if (!read.error().ok()) return Usage(name, read.error());
  return command;
}

}  // namespace chgate::cli
