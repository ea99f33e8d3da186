// `chgate-cli query`: one SELECT through chgate, its rows printed as TSV, CSV or JSON lines.
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cli/subcommands.h"
#include "client/sdk/client.h"

namespace chgate::cli {
namespace {

void AppendCsvName(std::string_view name, std::string* out) {
  out->push_back('"');
  for (char c : name) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

// Writes the rows of `q` to `out` in `format` (with a first line of names if `names`), in
// 64 KiB writes.
void WriteRows(client::QueryCursor& q, client::TextFormat format, bool names, std::ostream* out) {
  const char separator = format == client::TextFormat::kCsv ? ',' : '\t';
  std::string buffer;
  if (names && format != client::TextFormat::kJson) {
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
      out->write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      buffer.clear();
    }
  }
  out->write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
  out->flush();
}

void PrintStats(const client::QueryCursor& q, std::ostream* err) {
  const v1::QuerySummary& s = *q.summary();
  const absl::Duration elapsed =
      absl::Seconds(s.elapsed().seconds()) + absl::Nanoseconds(s.elapsed().nanos());
  *err << "query_id: " << s.query_id() << "\n"
       << "rows: " << s.rows() << "\n"
       << "blocks: " << s.blocks() << "\n"
       << "received_bytes: " << s.received_bytes() << "\n"
       << "decoded_bytes: " << s.decoded_bytes() << "\n"
       << "elapsed: " << absl::FormatDuration(elapsed) << "\n"
       << "read_rows: " << s.progress().read_rows() << "\n"
       << "read_bytes: " << s.progress().read_bytes() << "\n"
       << "response_bytes: " << q.response_bytes() << "\n";
}

}  // namespace

int RunQuery(const Command& command, const CliIo& io) {
  const QueryArgs& args = command.query;
  absl::StatusOr<std::unique_ptr<client::Client>> client = ClientFor(command);
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
  WriteRows(q, format, args.names, io.out);
  if (!q.status().ok()) {
    PrintError(io, absl::StrCat("query failed after ", q.rows_read(),
                                " rows: ", client::FormatError(q.status())));
    return ExitCodeFor(q.status());
  }
  if (args.stats) PrintStats(q, io.err);
  return kExitOk;
}

}  // namespace chgate::cli
