#include "client/cli/cli.h"

#include <algorithm>
#include <deque>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/bench.h"
#include "client/cli/csv.h"
#include "client/cli/flags.h"
#include "client/cli/json.h"
#include "client/sdk/client.h"
#include "client/sdk/health.h"
#include "client/sdk/internal/call_util.h"
#include "client/sdk/internal/strings.h"
#include "text/trace_context.h"

namespace chgate::cli {

using client::internal::Sv;

namespace {

// ---- help ----------------------------------------------------------------------------------

std::vector<FlagSpec> GlobalFlags() {
  return {
      {"addr", "ADDR", absl::StrCat("chgate API address (health: ", kDefaultHealthAddr, ")"),
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

// ---- output helpers --------------------------------------------------------------------

void PrintError(const CliIo& io, absl::string_view what) {
  *io.err << "chgate-cli: " << what << "\n";
}

// ---- insert ----------------------------------------------------------------------------

// Rows of the input, one at a time, with the input line each started on.
class RowSource {
 public:
  virtual ~RowSource() = default;
  // True with a row, false at the end, or InvalidArgument naming the input line.
  virtual absl::StatusOr<bool> Next(std::vector<v1::Value>* values, uint64_t* line) = 0;
  // Target columns (empty: every insertable column in table order). Known after the first row.
  virtual const std::vector<std::string>& columns() const = 0;
};

class JsonLinesSource : public RowSource {
 public:
  JsonLinesSource(std::istream* in, std::vector<std::string> columns)
      : in_(in), columns_(std::move(columns)), explicit_columns_(!columns_.empty()) {
    Index();
  }

  absl::StatusOr<bool> Next(std::vector<v1::Value>* values, uint64_t* line) override {
    std::string text;
    while (true) {
      if (!std::getline(*in_, text)) return false;
      ++line_;
      if (text.find_first_not_of(" \t\r") != std::string::npos) break;
    }
    *line = line_;
    absl::StatusOr<Json> json = ParseJson(text);
    if (!json.ok()) return LineError(json.status().message());
    values->clear();
    if (json->kind == Json::Kind::kObject) {
      if (mode_ == Mode::kArrays) return LineError("a JSON object after JSON arrays");
      if (mode_ == Mode::kUnknown && !explicit_columns_) {
        for (const auto& [key, value] : json->members) columns_.push_back(key);
        Index();
        if (index_.size() != columns_.size()) return LineError("duplicate keys");
      }
      mode_ = Mode::kObjects;
      std::vector<bool> seen(columns_.size(), false);
      values->resize(columns_.size());
      for (auto& [key, value] : json->members) {
        auto it = index_.find(key);
        if (it == index_.end()) {
          return LineError(absl::StrCat("key '", key, "' is not a target column (",
                                        explicit_columns_ ? "--columns" : "the first row's keys",
                                        ": ", absl::StrJoin(columns_, ","), ")"));
        }
        if (seen[it->second]) return LineError(absl::StrCat("duplicate key '", key, "'"));
        seen[it->second] = true;
        (*values)[it->second] = JsonToValue(value);
      }
      for (size_t i = 0; i < columns_.size(); ++i) {
        if (!seen[i]) return LineError(absl::StrCat("no value for column '", columns_[i], "'"));
      }
      return true;
    }
    if (json->kind == Json::Kind::kArray) {
      if (mode_ == Mode::kObjects) return LineError("a JSON array after JSON objects");
      if (mode_ == Mode::kUnknown)
        width_ = explicit_columns_ ? columns_.size() : json->items.size();
      mode_ = Mode::kArrays;
      if (json->items.size() != width_) {
        return LineError(absl::StrCat(json->items.size(), " values, expected ", width_));
      }
      for (const Json& item : json->items) values->push_back(JsonToValue(item));
      return true;
    }
    return LineError("expected a JSON object or array");
  }

  const std::vector<std::string>& columns() const override { return columns_; }

 private:
  enum class Mode { kUnknown, kObjects, kArrays };

  void Index() {
    index_.clear();
    for (size_t i = 0; i < columns_.size(); ++i) index_.emplace(columns_[i], i);
  }

  absl::Status LineError(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("input line ", line_, ": ", what));
  }

  std::istream* in_;
  std::vector<std::string> columns_;
  const bool explicit_columns_;
  std::map<std::string, size_t> index_;
  Mode mode_ = Mode::kUnknown;
  size_t width_ = 0;
  uint64_t line_ = 0;
};

class CsvSource : public RowSource {
 public:
  CsvSource(std::istream* in, std::vector<std::string> columns)
      : reader_(in), columns_(std::move(columns)), need_header_(columns_.empty()) {}

  absl::StatusOr<bool> Next(std::vector<v1::Value>* values, uint64_t* line) override {
    std::vector<CsvField> fields;
    if (need_header_) {
      need_header_ = false;
      absl::StatusOr<bool> header = reader_.Next(&fields);
      if (!header.ok() || !*header) return header;
      for (CsvField& f : fields) columns_.push_back(std::move(f.text));
    }
    absl::StatusOr<bool> more = reader_.Next(&fields);
    if (!more.ok() || !*more) return more;
    *line = reader_.record_line();
    if (fields.size() != columns_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("input line ", *line, ": ", fields.size(),
                                                     " fields, expected ", columns_.size()));
    }
    values->clear();
    for (const CsvField& f : fields) values->push_back(CsvFieldToValue(f));
    return true;
  }

  const std::vector<std::string>& columns() const override { return columns_; }

 private:
  CsvReader reader_;
  std::vector<std::string> columns_;
  bool need_header_;
};

// The progress line of `insert` on stderr, redrawn at most once a second.
class Progress {
 public:
  Progress(const CliIo& io, bool enabled) : io_(io), enabled_(enabled) {}

  void Update(uint64_t sent, uint64_t acked, bool force = false) {
    if (!enabled_) return;
    const absl::Time now = absl::Now();
    if (!force && now - last_ < absl::Seconds(1)) return;
    last_ = now;
    const double seconds = absl::ToDoubleSeconds(now - start_);
    const std::string line =
        absl::StrFormat("sent %d rows, acked %d rows, %.0f rows/s", sent, acked,
                        seconds > 0 ? static_cast<double>(acked) / seconds : 0.0);
    if (io_.err_is_tty) {
      *io_.err << "\r" << line << "\x1b[K" << std::flush;
      drawn_ = true;
    } else {
      *io_.err << line << "\n";
    }
  }

  // Ends the in-place line before other output.
  void Break() {
    if (drawn_) *io_.err << "\n";
    drawn_ = false;
  }

  absl::Duration elapsed() const { return absl::Now() - start_; }
  bool enabled() const { return enabled_; }

 private:
  const CliIo& io_;
  const bool enabled_;
  const absl::Time start_ = absl::Now();
  absl::Time last_ = absl::InfinitePast();
  bool drawn_ = false;
};

int RunInsert(const Command& command, const CliIo& io) {
  const InsertArgs& args = command.insert;
  absl::StatusOr<client::ClientOptions> options = ClientOptionsFor(command);
  absl::StatusOr<std::unique_ptr<client::Client>> client =
      options.ok() ? client::Client::Create(command.addr, *std::move(options))
                   : absl::StatusOr<std::unique_ptr<client::Client>>(options.status());
  if (!client.ok()) {
    PrintError(io, client::FormatError(client.status()));
    return kExitUsage;
  }
  std::unique_ptr<RowSource> source;
  if (args.format == "csv") {
    source = std::make_unique<CsvSource>(io.in, args.columns);
  } else {
    source = std::make_unique<JsonLinesSource>(io.in, args.columns);
  }
  std::unique_ptr<client::InsertStream> stream =
      (*client)->OpenInsertStream({.timeout = args.stream_timeout});
  // Streams replaced after an UNAVAILABLE; closed at the end.
  std::vector<std::unique_ptr<client::InsertStream>> retired;
  uint64_t generation = 0;  // of `stream`
  // With idempotency keys, a batch that failed with UNAVAILABLE (chgate restarting, ClickHouse
  // unreachable) is sent again, on a new stream, as the SDK does for a unary Insert.
  const bool resend = !args.idempotency_prefix.empty();
  const client::RetryPolicy retry;
  absl::BitGen gen;

  struct Batch {
    uint64_t number = 0;
    uint64_t rows = 0;
    std::vector<uint64_t> lines;  // input line of each row
    std::future<absl::StatusOr<client::InsertResult>> ack;
    v1::InsertRequest request;  // kept for resending (only with idempotency keys)
    int attempts = 1;
    uint64_t generation = 0;  // of the stream it was sent on
  };
  std::deque<Batch> in_flight;
  Progress progress(io, io.err_is_tty || args.progress);
  uint64_t sent_rows = 0;
  uint64_t acked_rows = 0;
  uint64_t batches = 0;
  uint64_t failures = 0;
  absl::Status first_failure;
  bool timed_out = false;

  auto fail = [&](const absl::Status& status, const std::string& what) {
    if (first_failure.ok()) first_failure = status;
    ++failures;
    progress.Break();
    if (failures <= 10) PrintError(io, what);
  };
  auto handle = [&](Batch& batch, absl::StatusOr<client::InsertResult> result) {
    if (result.ok()) {
      acked_rows += batch.rows;
      return;
    }
    if (resend && !timed_out && result.status().code() == absl::StatusCode::kUnavailable &&
        client::internal::WaitBeforeRetry(retry, batch.attempts, absl::InfiniteFuture(), gen)) {
      progress.Break();
      PrintError(io,
                 absl::StrCat("batch ", batch.number, ": ", client::FormatError(result.status()),
                              "; sending it again (attempt ", batch.attempts + 1, ")"));
      if (batch.generation == generation) {
        retired.push_back(std::move(stream));
        stream = (*client)->OpenInsertStream({.timeout = args.stream_timeout});
        ++generation;
      }
      Batch again;
      again.number = batch.number;
      again.rows = batch.rows;
      again.lines = batch.lines;
      again.request = batch.request;
      again.attempts = batch.attempts + 1;
      again.generation = generation;
      again.ack = stream->Send(batch.request);
      in_flight.push_back(std::move(again));
      return;
    }
    std::string what =
        absl::StrCat("batch ", batch.number, " (input lines ", batch.lines.front(), "-",
                     batch.lines.back(), ") failed: ", client::FormatError(result.status()));
    std::optional<v1::Status> detail = client::GetStatusDetail(result.status());
    if (detail.has_value() && detail->has_value_error() && detail->value_error().has_row_index() &&
        detail->value_error().row_index() < batch.lines.size()) {
      absl::StrAppend(&what, " (input line ", batch.lines[detail->value_error().row_index()], ")");
    }
    fail(result.status(), what);
  };
  // Waits for the oldest request's ack, at most --timeout; cancels the stream when it is late.
  auto wait_oldest = [&] {
    Batch& batch = in_flight.front();
    if (!timed_out && batch.ack.wait_for(absl::ToChronoNanoseconds(command.timeout)) !=
                          std::future_status::ready) {
      timed_out = true;
      stream->Cancel();
      fail(absl::DeadlineExceededError("no ack"),
           absl::StrCat("no ack for batch ", batch.number, " within --timeout ",
                        absl::FormatDuration(command.timeout), "; cancelled the stream"));
    }
    handle(batch, batch.ack.get());
    in_flight.pop_front();
  };
  auto reap_ready = [&] {
    while (!in_flight.empty() &&
           in_flight.front().ack.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      handle(in_flight.front(), in_flight.front().ack.get());
      in_flight.pop_front();
    }
  };

  v1::InsertRequest request;
  Batch batch;
  auto send = [&] {
    if (batch.rows == 0) return;
    batch.number = ++batches;
    request.set_table(args.table);
    for (const std::string& c : source->columns()) request.add_columns(c);
    if (!args.idempotency_prefix.empty()) {
      request.set_idempotency_key(absl::StrCat(args.idempotency_prefix, "-", batch.number));
    }
    request.set_ack_mode(args.ack_mode);
    while (in_flight.size() >= args.max_in_flight) wait_oldest();
    if (resend) batch.request = request;
    batch.generation = generation;
    batch.ack = stream->Send(std::move(request));
    sent_rows += batch.rows;
    in_flight.push_back(std::move(batch));
    request = v1::InsertRequest();
    batch = Batch();
    reap_ready();
    progress.Update(sent_rows, acked_rows);
  };

  absl::Status input_error;
  std::vector<v1::Value> values;
  uint64_t line = 0;
  while (first_failure.ok()) {
    absl::StatusOr<bool> more = source->Next(&values, &line);
    if (!more.ok()) {
      input_error = more.status();
      break;
    }
    if (!*more) {
      send();
      break;
    }
    v1::Row* row = request.mutable_rows()->add_rows();
    for (v1::Value& v : values) *row->add_values() = std::move(v);
    batch.lines.push_back(line);
    if (++batch.rows >= args.batch_rows) send();
  }
  while (!in_flight.empty()) wait_oldest();
  const absl::Status stream_status = stream->Close();
  // Their requests were answered (or sent again) one by one above.
  for (const auto& old : retired) (void)old->Close();
  if (!stream_status.ok() && first_failure.ok()) {
    fail(stream_status, absl::StrCat("insert stream failed: ", client::FormatError(stream_status)));
  }
  progress.Update(sent_rows, acked_rows, /*force=*/true);
  progress.Break();
  if (failures > 10) PrintError(io, absl::StrCat(failures - 10, " more failures not shown"));
  if (!input_error.ok()) {
    PrintError(
        io, absl::StrCat(input_error.message(), " (nothing after batch ", batches, " was sent)"));
    return kExitFailure;
  }
  if (progress.enabled()) {
    const double seconds = absl::ToDoubleSeconds(progress.elapsed());
    *io.err << absl::StrFormat("inserted %d rows in %d requests, %.2fs, %.0f rows/s\n", acked_rows,
                               batches, seconds,
                               seconds > 0 ? static_cast<double>(acked_rows) / seconds : 0.0);
  }
  if (!first_failure.ok()) return ExitCodeFor(first_failure);
  return kExitOk;
}

// ---- query -----------------------------------------------------------------------------

void AppendCsvName(std::string_view name, std::string* out) {
  out->push_back('"');
  for (char c : name) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

int RunQuery(const Command& command, const CliIo& io) {
  const QueryArgs& args = command.query;
  absl::StatusOr<client::ClientOptions> client_options = ClientOptionsFor(command);
  absl::StatusOr<std::unique_ptr<client::Client>> client =
      client_options.ok()
          ? client::Client::Create(command.addr, *std::move(client_options))
          : absl::StatusOr<std::unique_ptr<client::Client>>(client_options.status());
  if (!client.ok()) {
    PrintError(io, client::FormatError(client.status()));
    return kExitUsage;
  }
  std::string sql = args.sql;
  if (sql == "-") {
    std::ostringstream text;
    text << io.in->rdbuf();
    sql = text.str();
  }
  client::QueryOptions options{
      .settings = args.settings,
      .parameters = args.parameters,
      .query_id = args.query_id,
      .database = args.database,
  };
  absl::StatusOr<std::unique_ptr<client::QueryCursor>> cursor = (*client)->Query(sql, options);
  if (!cursor.ok()) {
    PrintError(io, absl::StrCat("query failed: ", client::FormatError(cursor.status())));
    return ExitCodeFor(cursor.status());
  }
  client::QueryCursor& q = **cursor;
  const client::TextFormat format = args.format == "csv"     ? client::TextFormat::kCsv
                                    : args.format == "jsonl" ? client::TextFormat::kJson
                                                             : client::TextFormat::kTsv;
  const char separator = format == client::TextFormat::kCsv ? ',' : '\t';
  std::string buffer;
  if (args.names && format != client::TextFormat::kJson) {
    for (size_t c = 0; c < q.column_count(); ++c) {
      if (c > 0) buffer.push_back(separator);
      if (format == client::TextFormat::kCsv) {
        AppendCsvName(q.column_name(c), &buffer);
      } else {
        client::AppendTsvEscaped(q.column_name(c), &buffer);
      }
    }
    buffer.push_back('\n');
  }
  // Object keys for jsonl, rendered once.
  std::vector<std::string> keys;
  for (size_t c = 0; c < q.column_count(); ++c) {
    std::string key;
    client::AppendJsonString(q.column_name(c), &key);
    key.push_back(':');
    keys.push_back(std::move(key));
  }
  while (q.Next()) {
    if (format == client::TextFormat::kJson) {
      buffer.push_back('{');
      for (size_t c = 0; c < q.column_count(); ++c) {
        if (c > 0) buffer.push_back(',');
        buffer += keys[c];
        q.AppendValue(c, format, &buffer);
      }
      buffer.push_back('}');
    } else {
      for (size_t c = 0; c < q.column_count(); ++c) {
        if (c > 0) buffer.push_back(separator);
        q.AppendValue(c, format, &buffer);
      }
    }
    buffer.push_back('\n');
    if (buffer.size() >= (1 << 16)) {
      io.out->write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      buffer.clear();
    }
  }
  io.out->write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
  io.out->flush();
  if (!q.status().ok()) {
    PrintError(io, absl::StrCat("query failed after ", q.rows_read(),
                                " rows: ", client::FormatError(q.status())));
    return ExitCodeFor(q.status());
  }
  if (args.stats) {
    const v1::QuerySummary& s = *q.summary();
    const absl::Duration elapsed =
        absl::Seconds(s.elapsed().seconds()) + absl::Nanoseconds(s.elapsed().nanos());
    *io.err << "query_id: " << s.query_id() << "\n"
            << "rows: " << s.rows() << "\n"
            << "blocks: " << s.blocks() << "\n"
            << "received_bytes: " << s.received_bytes() << "\n"
            << "decoded_bytes: " << s.decoded_bytes() << "\n"
            << "elapsed: " << absl::FormatDuration(elapsed) << "\n"
            << "read_rows: " << s.progress().read_rows() << "\n"
            << "read_bytes: " << s.progress().read_bytes() << "\n"
            << "response_bytes: " << q.response_bytes() << "\n";
  }
  return kExitOk;
}

// ---- health ----------------------------------------------------------------------------

int RunHealth(const Command& command, const CliIo& io) {
  absl::StatusOr<client::ClientOptions> options = ClientOptionsFor(command);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      options.ok() ? client::CreateChannel(command.addr, *options)
                   : absl::StatusOr<std::shared_ptr<grpc::Channel>>(options.status());
  if (!channel.ok()) {
    PrintError(io, client::FormatError(channel.status()));
    return kExitUsage;
  }
  absl::StatusOr<client::ServingStatus> status =
      client::CheckHealth(*channel, command.health.service, command.timeout);
  if (!status.ok()) {
    PrintError(io, absl::StrCat("health check of ", command.addr,
                                " failed: ", client::FormatError(status.status())));
    return ExitCodeFor(status.status());
  }
  *io.out << client::ServingStatusName(*status) << "\n";
  return *status == client::ServingStatus::kServing ? kExitOk : kExitFailure;
}

absl::Status Usage(std::string_view sub, const absl::Status& status) {
  return absl::InvalidArgumentError(
      absl::StrCat(Sv(sub), sub.empty() ? "" : ": ", status.message()));
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
  // Global options come before the command; find where the command starts.
  const std::vector<FlagSpec> global = GlobalFlags();
  size_t i = 0;
  std::vector<std::string> before;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0) break;
    before.push_back(arg);
    const std::string name =
        arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
    auto spec = std::find_if(global.begin(), global.end(),
                             [&](const FlagSpec& s) { return s.name == name; });
    if (spec != global.end() && !spec->value_name.empty() && arg.find('=') == std::string::npos &&
        i + 1 < args.size()) {
      before.push_back(args[++i]);
    }
  }
  absl::StatusOr<ParsedFlags> global_flags = ParseFlags(global, before);
  if (!global_flags.ok()) return Usage("", global_flags.status());
  if (i >= args.size()) {
    if (global_flags->Has("help")) {
      command.help = ToolHelp();
      return command;
    }
    return absl::InvalidArgumentError("no command given (insert, query, bench or health)");
  }
  const std::string name = args[i];
  std::optional<Subcommand> sub = SubcommandNamed(name);
  if (!sub.has_value()) {
    if (name == "help") {
      command.help = ToolHelp();
      return command;
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown command '", name, "'"));
  }
  std::vector<FlagSpec> specs;
  switch (*sub) {
    case Subcommand::kInsert:
      specs = InsertFlags();
      break;
    case Subcommand::kQuery:
      specs = QueryFlags();
      break;
    case Subcommand::kBench:
      specs = BenchFlags();
      break;
    case Subcommand::kHealth:
      specs = HealthFlags();
      break;
    case Subcommand::kHelp:
      break;
  }
  const std::vector<std::string> rest(args.begin() + static_cast<long>(i) + 1, args.end());
  // Global options are accepted after the command as well.
  absl::StatusOr<ParsedFlags> flags = ParseFlags(Concat(specs, global), rest);
  if (!flags.ok()) return Usage(name, flags.status());
  if (global_flags->Has("help") || flags->Has("help")) {
    command.help = SubcommandHelp(*sub);
    return command;
  }
  command.subcommand = *sub;
  command.addr = flags->Get(
      "addr",
      global_flags->Get("addr", *sub == Subcommand::kHealth ? kDefaultHealthAddr : kDefaultAddr));
  auto either = [&](const char* flag) { return flags->Get(flag, global_flags->Get(flag)); };
  command.tls.ca_file = either("tls-ca-file");
  command.tls.cert_file = either("tls-cert-file");
  command.tls.key_file = either("tls-key-file");
  command.tls.server_name = either("tls-server-name");
  command.tls.enabled = flags->Has("tls") || global_flags->Has("tls") ||
                        !command.tls.ca_file.empty() || !command.tls.cert_file.empty() ||
                        !command.tls.key_file.empty() || !command.tls.server_name.empty();
  if (command.tls.cert_file.empty() != command.tls.key_file.empty()) {
    return Usage(name,
                 absl::InvalidArgumentError("--tls-cert-file and --tls-key-file go together"));
  }
  command.token_file = either("token-file");
  command.traceparent = either("traceparent");
  command.tracestate = either("tracestate");
  if (!command.traceparent.empty() && !text::ParseTraceparent(command.traceparent).has_value()) {
    return Usage(name, absl::InvalidArgumentError(absl::StrCat(
                           "--traceparent: '", command.traceparent,
                           "' is not 00-<32 hex>-<16 hex>-<2 hex> (lower case, non-zero ids)")));
  }
  if (!command.tracestate.empty() && command.traceparent.empty()) {
    return Usage(name, absl::InvalidArgumentError("--tracestate needs --traceparent"));
  }
  const std::string timeout = flags->Get("timeout", global_flags->Get("timeout"));
  if (!timeout.empty()) {
    absl::StatusOr<absl::Duration> d = ParseDurationFlag("timeout", timeout);
    if (!d.ok()) return d.status();
    command.timeout = *d;
  }

  // Small helpers that parse an optional flag into a field.
  absl::Status error;
  auto count = [&](const char* flag, uint64_t min, uint64_t* field) {
    if (!error.ok() || !flags->Has(flag)) return;
    absl::StatusOr<uint64_t> v = ParseCountFlag(flag, flags->Get(flag), min);
    if (v.ok()) {
      *field = *v;
    } else {
      error = v.status();
    }
  };
  auto duration = [&](const char* flag, absl::Duration* field) {
    if (!error.ok() || !flags->Has(flag)) return;
    absl::StatusOr<absl::Duration> v = ParseDurationFlag(flag, flags->Get(flag));
    if (v.ok()) {
      *field = *v;
    } else {
      error = v.status();
    }
  };
  auto list = [&](const char* flag, std::vector<std::string>* field) {
    if (!error.ok() || !flags->Has(flag)) return;
    absl::StatusOr<std::vector<std::string>> v = ParseListFlag(flag, flags->Get(flag));
    if (v.ok()) {
      *field = *std::move(v);
    } else {
      error = v.status();
    }
  };
  auto ack_mode = [&](v1::AckMode* field) {
    if (!error.ok() || !flags->Has("ack-mode")) return;
    absl::StatusOr<v1::AckMode> v = ParseAckMode(flags->Get("ack-mode"));
    if (v.ok()) {
      *field = *v;
    } else {
      error = v.status();
    }
  };
  auto key_values = [&](const char* flag, std::map<std::string, std::string>* field) {
    for (const std::string& text : flags->All(flag)) {
      if (!error.ok()) return;
      absl::StatusOr<std::pair<std::string, std::string>> kv = ParseKeyValueFlag(flag, text);
      if (kv.ok()) {
        (*field)[kv->first] = kv->second;
      } else {
        error = kv.status();
      }
    }
  };
  auto no_positional = [&] {
    if (error.ok() && !flags->positional().empty()) {
      error = absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", flags->positional()[0], "'"));
    }
  };

  switch (*sub) {
    case Subcommand::kInsert: {
      InsertArgs& a = command.insert;
      a.table = flags->Get("table");
      if (a.table.empty()) error = absl::InvalidArgumentError("--table is required");
      a.format = flags->Get("format", a.format);
      if (error.ok() && a.format != "jsonl" && a.format != "csv") {
        error = absl::InvalidArgumentError(
            absl::StrCat("--format: '", a.format, "' is neither jsonl nor csv"));
      }
      list("columns", &a.columns);
      count("batch-rows", 1, &a.batch_rows);
      count("max-in-flight", 1, &a.max_in_flight);
      duration("stream-timeout", &a.stream_timeout);
      ack_mode(&a.ack_mode);
      a.idempotency_prefix = flags->Get("idempotency-prefix");
      a.progress = flags->Get("progress") == "true";
      no_positional();
      break;
    }
    case Subcommand::kQuery: {
      QueryArgs& a = command.query;
      if (flags->positional().size() != 1) {
        error = absl::InvalidArgumentError(
            flags->positional().empty()
                ? "the SQL statement is missing (quote it: query 'SELECT 1')"
                : "more than one SQL argument (quote the statement as one argument)");
      } else {
        a.sql = flags->positional()[0];
      }
      a.format = flags->Get("format", a.format);
      if (error.ok() && a.format != "tsv" && a.format != "csv" && a.format != "jsonl") {
        error = absl::InvalidArgumentError(
            absl::StrCat("--format: '", a.format, "' is not tsv, csv or jsonl"));
      }
      key_values("setting", &a.settings);
      key_values("param", &a.parameters);
      a.database = flags->Get("database");
      a.query_id = flags->Get("query-id");
      a.names = flags->Get("names") == "true";
      a.stats = flags->Get("stats") == "true";
      break;
    }
    case Subcommand::kBench: {
      BenchArgs& a = command.bench;
      a.table = flags->Get("table");
      if (a.table.empty()) error = absl::InvalidArgumentError("--table is required");
      count("streams", 1, &a.streams);
      duration("duration", &a.duration);
      count("rows-per-request", 1, &a.rows_per_request);
      count("max-in-flight", 1, &a.max_in_flight);
      a.row = flags->Get("row", a.row);
      list("columns", &a.columns);
      ack_mode(&a.ack_mode);
      a.json = flags->Get("json") == "true";
      if (error.ok()) error = ParseBenchOptions(*flags, &a);
      no_positional();
      break;
    }
    case Subcommand::kHealth:
      command.health.service = flags->Get("service");
      no_positional();
      break;
    case Subcommand::kHelp:
      break;
  }
  if (!error.ok()) return Usage(name, error);
  return command;
}

int RunCommand(const Command& command, const CliIo& io) {
  switch (command.subcommand) {
    case Subcommand::kHelp:
      *io.out << command.help;
      return kExitOk;
    case Subcommand::kInsert:
      return RunInsert(command, io);
    case Subcommand::kQuery:
      return RunQuery(command, io);
    case Subcommand::kBench:
      return RunBench(command, io);
    case Subcommand::kHealth:
      return RunHealth(command, io);
  }
  return kExitUsage;
}

int RunCli(const std::vector<std::string>& args, const CliIo& io) {
  absl::StatusOr<Command> command = ParseCommandLine(args);
  if (!command.ok()) {
    PrintError(io, command.status().message());
    *io.err << "Run 'chgate-cli --help' for usage.\n";
    return kExitUsage;
  }
  return RunCommand(*command, io);
}

}  // namespace chgate::cli
