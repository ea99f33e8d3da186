// `chgate-cli insert`: rows from JSON lines or CSV on stdin, batched over one InsertStream, with
// acks waited for in order, resends of UNAVAILABLE batches under idempotency keys, and a
// progress line.
#include <deque>
#include <future>
#include <istream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/csv.h"
#include "client/cli/json.h"
#include "client/cli/subcommands.h"
#include "client/sdk/client.h"
#include "client/sdk/internal/call_util.h"

namespace chgate::cli {
namespace {

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

// One `insert` run: reads rows, sends them in batches on an InsertStream (a new stream after an
// UNAVAILABLE when batches carry idempotency keys), and reports acks and failures.
class InsertRun {
 public:
  InsertRun(const Command& command, const CliIo& io, client::Client& client)
      : command_(command),
        args_(command.insert),
        io_(io),
        client_(client),
        stream_(client.OpenInsertStream({.timeout = args_.stream_timeout})),
        resend_(!args_.idempotency_prefix.empty()),
        progress_(io, io.err_is_tty || args_.progress) {
    if (args_.format == "csv") {
      source_ = std::make_unique<CsvSource>(io.in, args_.columns);
    } else {
      source_ = std::make_unique<JsonLinesSource>(io.in, args_.columns);
    }
  }

  // Reads and sends everything, waits for every ack; returns the exit code.
  int Run() {
    absl::Status input_error;
    std::vector<v1::Value> values;
    uint64_t line = 0;
    while (first_failure_.ok()) {
      absl::StatusOr<bool> more = source_->Next(&values, &line);
      if (!more.ok()) {
        input_error = more.status();
        break;
      }
      if (!*more) {
        Send();
        break;
      }
      v1::Row* row = request_.mutable_rows()->add_rows();
      for (v1::Value& v : values) *row->add_values() = std::move(v);
      batch_.lines.push_back(line);
      if (++batch_.rows >= args_.batch_rows) Send();
    }
    while (!in_flight_.empty()) WaitOldest();
    return Finish(input_error);
  }

 private:
  struct Batch {
    uint64_t number = 0;
    uint64_t rows = 0;
    std::vector<uint64_t> lines;  // input line of each row
    std::future<absl::StatusOr<client::InsertResult>> ack;
    v1::InsertRequest request;  // kept for resending (only with idempotency keys)
    int attempts = 1;
    uint64_t generation = 0;  // of the stream it was sent on
  };

  void Fail(const absl::Status& status, const std::string& what) {
    if (first_failure_.ok()) first_failure_ = status;
    ++failures_;
    progress_.Break();
    if (failures_ <= 10) PrintError(io_, what);
  }

  // Sends the rows gathered in request_ as the next batch.
  void Send() {
    if (batch_.rows == 0) return;
    batch_.number = ++batches_;
    request_.set_table(args_.table);
    for (const std::string& c : source_->columns()) request_.add_columns(c);
    if (resend_) {
      request_.set_idempotency_key(absl::StrCat(args_.idempotency_prefix, "-", batch_.number));
    }
    request_.set_ack_mode(args_.ack_mode);
    while (in_flight_.size() >= args_.max_in_flight) WaitOldest();
    if (resend_) batch_.request = request_;
    batch_.generation = generation_;
    batch_.ack = stream_->Send(std::move(request_));
    sent_rows_ += batch_.rows;
    in_flight_.push_back(std::move(batch_));
    request_ = v1::InsertRequest();
    batch_ = Batch();
    ReapReady();
    progress_.Update(sent_rows_, acked_rows_);
  }

  // With idempotency keys, a batch that failed with UNAVAILABLE (chgate restarting, ClickHouse
  // unreachable) is sent again, on a new stream, as the SDK does for a unary Insert. Returns
  // whether it was.
  bool Resend(const Batch& batch, const absl::Status& status) {
    if (!resend_ || timed_out_ || status.code() != absl::StatusCode::kUnavailable ||
        !client::internal::WaitBeforeRetry(retry_, batch.attempts, absl::InfiniteFuture(), gen_)) {
      return false;
    }
    progress_.Break();
    PrintError(io_, absl::StrCat("batch ", batch.number, ": ", client::FormatError(status),
                                 "; sending it again (attempt ", batch.attempts + 1, ")"));
    if (batch.generation == generation_) {
      retired_.push_back(std::move(stream_));
      stream_ = client_.OpenInsertStream({.timeout = args_.stream_timeout});
      ++generation_;
    }
    Batch again;
    again.number = batch.number;
    again.rows = batch.rows;
    again.lines = batch.lines;
    again.request = batch.request;
    again.attempts = batch.attempts + 1;
    again.generation = generation_;
    again.ack = stream_->Send(batch.request);
    in_flight_.push_back(std::move(again));
    return true;
  }

  void Handle(const Batch& batch, const absl::StatusOr<client::InsertResult>& result) {
    if (result.ok()) {
      acked_rows_ += batch.rows;
      return;
    }
    if (Resend(batch, result.status())) return;
    std::string what =
        absl::StrCat("batch ", batch.number, " (input lines ", batch.lines.front(), "-",
                     batch.lines.back(), ") failed: ", client::FormatError(result.status()));
    std::optional<v1::Status> detail = client::GetStatusDetail(result.status());
    if (detail.has_value() && detail->has_value_error() && detail->value_error().has_row_index() &&
        detail->value_error().row_index() < batch.lines.size()) {
      absl::StrAppend(&what, " (input line ", batch.lines[detail->value_error().row_index()], ")");
    }
    Fail(result.status(), what);
  }

  // Waits for the oldest request's ack, at most --timeout; cancels the stream when it is late.
  void WaitOldest() {
    Batch& batch = in_flight_.front();
    if (!timed_out_ && batch.ack.wait_for(absl::ToChronoNanoseconds(command_.timeout)) !=
                           std::future_status::ready) {
      timed_out_ = true;
      stream_->Cancel();
      Fail(absl::DeadlineExceededError("no ack"),
           absl::StrCat("no ack for batch ", batch.number, " within --timeout ",
                        absl::FormatDuration(command_.timeout), "; cancelled the stream"));
    }
    Batch done = std::move(batch);
    in_flight_.pop_front();
    Handle(done, done.ack.get());
  }

  void ReapReady() {
    while (!in_flight_.empty() &&
           in_flight_.front().ack.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      Batch done = std::move(in_flight_.front());
      in_flight_.pop_front();
      Handle(done, done.ack.get());
    }
  }

  // Closes the streams and prints the summary; returns the exit code.
  int Finish(const absl::Status& input_error) {
    const absl::Status stream_status = stream_->Close();
    // Their requests were answered (or sent again) one by one before.
    for (const auto& old : retired_) (void)old->Close();
    if (!stream_status.ok() && first_failure_.ok()) {
      Fail(stream_status,
           absl::StrCat("insert stream failed: ", client::FormatError(stream_status)));
    }
    progress_.Update(sent_rows_, acked_rows_, /*force=*/true);
    progress_.Break();
    if (failures_ > 10) PrintError(io_, absl::StrCat(failures_ - 10, " more failures not shown"));
    if (!input_error.ok()) {
      PrintError(io_, absl::StrCat(input_error.message(), " (nothing after batch ", batches_,
                                   " was sent)"));
      return kExitFailure;
    }
    if (progress_.enabled()) {
      const double seconds = absl::ToDoubleSeconds(progress_.elapsed());
      *io_.err << absl::StrFormat("inserted %d rows in %d requests, %.2fs, %.0f rows/s\n",
                                  acked_rows_, batches_, seconds,
                                  seconds > 0 ? static_cast<double>(acked_rows_) / seconds : 0.0);
    }
    if (!first_failure_.ok()) return ExitCodeFor(first_failure_);
    return kExitOk;
  }

  const Command& command_;
  const InsertArgs& args_;
  const CliIo& io_;
  client::Client& client_;
  std::unique_ptr<RowSource> source_;
  std::unique_ptr<client::InsertStream> stream_;
  // Streams replaced after an UNAVAILABLE; closed at the end.
  std::vector<std::unique_ptr<client::InsertStream>> retired_;
  uint64_t generation_ = 0;  // of stream_
  const bool resend_;
  const client::RetryPolicy retry_;
  absl::BitGen gen_;
  std::deque<Batch> in_flight_;
  Progress progress_;
  uint64_t sent_rows_ = 0;
  uint64_t acked_rows_ = 0;
  uint64_t batches_ = 0;
  uint64_t failures_ = 0;
  absl::Status first_failure_;
  bool timed_out_ = false;
  v1::InsertRequest request_;  // the batch being gathered
  Batch batch_;
};

}  // namespace

int RunInsert(const Command& command, const CliIo& io) {
  absl::StatusOr<std::unique_ptr<client::Client>> client = ClientFor(command);
  if (!client.ok()) {
    PrintError(io, client::FormatError(client.status()));
    return kExitUsage;
  }
  return InsertRun(command, io, **client).Run();
}

}  // namespace chgate::cli
