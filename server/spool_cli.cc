#include "server/spool_cli.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "server/clickhouse/pool.h"
#include "server/clickhouse/text_form.h"
#include "server/config/config.h"
#include "server/ingest/dead_letter.h"
#include "server/ingest/ingestor.h"
#include "server/ingest/inserter.h"
#include "server/wiring.h"
#include "text/json.h"
#include "text/status_macros.h"

namespace chgate {
namespace {

constexpr char kUsage[] =
    "Usage: chgate spool COMMAND [FILE] [options]\n"
    "The spool's dead letters: batches ClickHouse refused for good, in <spool-dir>/dead-letter/.\n"
    "  list                      each dead letter: file, time, table, records, rows, error\n"
    "  show FILE                 its rows (--format=tsv, the default, with a header line; or\n"
    "                            --format=jsonl, one object per row, values as their TSV text)\n"
    "  reinsert FILE             send its rows as one INSERT into its table (or --into=DB.TABLE)\n"
    "                            under the batch's own identity, then delete the file (unless\n"
    "                            --keep); uses chgate's ClickHouse options (--endpoints, --user,\n"
    "                            --password-file, --database, --clickhouse-tls...)\n"
    "  delete FILE               remove it\n"
    "  wait-drained              wait until the chgate serving this spool has sent everything\n"
    "                            (asks its /metrics on 127.0.0.1 at --metrics-listen's port);\n"
    "                            --timeout=30s; exits 1 with the count if records are left (for a\n"
    "                            preStop hook: the kubelet reports it as an event); --at-least=D\n"
    "                            waits D first (a sidecar that must outlast its application)\n"
    "FILE: a path, or a file name in <spool-dir>/dead-letter/. --spool-dir (or CHGATE_SPOOL_DIR)\n"
    "names the spool.\n";

struct Args {
  std::string command;
  std::string file;
  std::string format = "tsv";
  std::string into;
  bool keep = false;
  absl::Duration timeout = absl::Seconds(30);
  absl::Duration at_least = absl::ZeroDuration();
  std::vector<const char*> rest;  // for config::Parse, argv[0] first
};

absl::StatusOr<Args> ParseArgs(int argc, const char* const* argv) {
  Args args;
  args.rest.push_back(argv[0]);
  for (int i = 2; i < argc; ++i) {
    const absl::string_view a = argv[i];
    if (absl::StartsWith(a, "--format=")) {
      args.format = std::string(a.substr(9));
    } else if (absl::StartsWith(a, "--into=")) {
      args.into = std::string(a.substr(7));
    } else if (a == "--keep") {
      args.keep = true;
    } else if (absl::StartsWith(a, "--at-least=")) {
      if (!absl::ParseDuration(a.substr(11), &args.at_least) ||
          args.at_least < absl::ZeroDuration()) {
        return absl::InvalidArgumentError(absl::StrCat("--at-least: not a duration: '", a, "'"));
      }
    } else if (absl::StartsWith(a, "--timeout=")) {
      if (!absl::ParseDuration(a.substr(10), &args.timeout) ||
          args.timeout < absl::ZeroDuration()) {
        return absl::InvalidArgumentError(absl::StrCat("--timeout: not a duration: '", a, "'"));
      }
    } else if (absl::StartsWith(a, "-")) {
      args.rest.push_back(argv[i]);
    } else if (args.command.empty()) {
      args.command = std::string(a);
    } else if (args.file.empty()) {
      args.file = std::string(a);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", a, "'"));
    }
  }
  if (args.command.empty()) return absl::InvalidArgumentError("no command");
  const bool needs_file = args.command != "list" && args.command != "wait-drained";
  if (args.command != "list" && args.command != "show" && args.command != "reinsert" &&
      args.command != "delete" && args.command != "wait-drained") {
    return absl::InvalidArgumentError(absl::StrCat("unknown command '", args.command, "'"));
  }
  if (needs_file && args.file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("'", args.command, "' needs a FILE"));
  }
  if (!needs_file && !args.file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("'", args.command, "' takes no FILE"));
  }
  if (args.format != "tsv" && args.format != "jsonl") {
    return absl::InvalidArgumentError(
        absl::StrCat("--format must be tsv or jsonl, not '", args.format, "'"));
  }
  return args;
}

std::string DeadLetterDir(const config::Config& c) { return c.spool_dir + "/dead-letter"; }

absl::StatusOr<std::string> ResolveFile(const config::Config& c, const std::string& file) {
  if (file.find('/') != std::string::npos) return file;
  if (c.spool_dir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", file, "' is a file name: give --spool-dir, or a path"));
  }
  return DeadLetterDir(c) + "/" + file;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string FileTime(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "-";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromTimeT(st.st_mtime), absl::UTCTimeZone());
}

int List(const config::Config& c, std::ostream& out, std::ostream& err) {
  if (c.spool_dir.empty()) {
    err << "chgate spool list: give --spool-dir (or CHGATE_SPOOL_DIR)\n";
    return 2;
  }
  absl::StatusOr<std::vector<std::string>> names =
      spool::DefaultFileOps()->ListDir(DeadLetterDir(c));
  if (!names.ok() && absl::IsNotFound(names.status())) names = std::vector<std::string>{};
  if (!names.ok()) {
    err << "chgate spool list: " << names.status().message() << "\n";
    return 1;
  }
  std::sort(names->begin(), names->end());
  out << "file\ttime\ttable\trecords\trows\tunreadable\terror\n";
  int failed = 0;
  for (const std::string& name : *names) {
    if (!absl::EndsWith(name, ".batch")) continue;
    const std::string path = DeadLetterDir(c) + "/" + name;
    absl::StatusOr<std::string> bytes = ReadFile(path);
    absl::StatusOr<ingest::DeadLetter> letter =
        bytes.ok() ? ingest::DecodeDeadLetter(*bytes, /*header_only=*/true) : bytes.status();
    if (!letter.ok()) {
      err << name << ": " << letter.status().message() << "\n";
      ++failed;
      continue;
    }
    out << name << "\t" << FileTime(path) << "\t" << letter->table.database << "."
        << letter->table.table << "\t" << letter->records << "\t" << letter->rows << "\t"
        << absl::StrJoin(letter->unreadable, ",") << "\t" << letter->error << "\n";
  }
  return failed == 0 ? 0 : 1;
}

absl::StatusOr<ingest::DeadLetter> Load(const config::Config& c, const std::string& file,
                                        std::string* path) {
  CHGATE_ASSIGN_OR_RETURN(*path, ResolveFile(c, file));
  CHGATE_ASSIGN_OR_RETURN(std::string bytes, ReadFile(*path));
  return ingest::DecodeDeadLetter(bytes);
}

void Show(const clickhouse::Block& block, const std::string& format, std::ostream& out) {
  std::string line;
  if (format == "tsv") {
    for (size_t c = 0; c < block.column_count(); ++c) {
      if (c != 0) line.push_back('\t');
      clickhouse::AppendTsvEscaped(block.column(c).name, &line);
    }
    out << line << "\n";
  }
  std::string value;
  for (size_t row = 0; row < block.rows(); ++row) {
    line.clear();
    if (format == "jsonl") line.push_back('{');
    for (size_t c = 0; c < block.column_count(); ++c) {
      value.clear();
      AppendTsvValue(*block.column(c).column, row, false, &value);
      if (format == "tsv") {
        if (c != 0) line.push_back('\t');
        line += value;
      } else {
        if (c != 0) line.push_back(',');
        text::AppendJsonString(block.column(c).name, &line);
        line.push_back(':');
        text::AppendJsonString(value, &line);
      }
    }
    if (format == "jsonl") line.push_back('}');
    out << line << "\n";
  }
}

int Reinsert(const config::Config& c, const Args& args, const ingest::DeadLetter& letter,
             const clickhouse::Block& block, const std::string& path, std::ostream& out,
             std::ostream& err) {
  ingest::TableId table = letter.table;
  if (!args.into.empty()) {
    absl::StatusOr<ingest::TableId> into = ingest::ParseTableName(args.into, c.database);
    if (!into.ok()) {
      err << "chgate spool reinsert: --into: " << into.status().message() << "\n";
      return 2;
    }
    table = *into;
  }
  auto tls = ClickHouseTlsFrom(c);
  absl::StatusOr<clickhouse::ConnectionOptions> connection =
      tls.ok() ? ClickHouseConnectionFrom(c, *tls) : tls.status();
  if (!connection.ok()) {
    err << "chgate spool reinsert: " << connection.status().message() << "\n";
    return 2;
  }
  clickhouse::PoolOptions pool_options = PoolOptionsFrom(c, *connection);
  pool_options.min_connections = 0;
  clickhouse::Pool pool(pool_options);
  ingest::ClickHouseInserter inserter(&pool);
  ingest::InsertAttempt attempt;
  // Into its own table under its own identity: a second run is a repeat a Replicated table drops.
  // Into another table: a new identity.
  if (args.into.empty() && !letter.identity.empty()) {
    attempt.query_id = letter.identity;
    attempt.deduplication_key = letter.identity;
  }
  const absl::Status st = inserter.Insert(table, clickhouse::BlockParts::View(block), attempt,
                                          absl::Now() + c.retry_max_elapsed + c.read_timeout);
  if (!st.ok()) {
    err << "chgate spool reinsert: " << table.database << "." << table.table << ": " << st.message()
        << "\n(the file stays: " << path << ")\n";
    return 1;
  }
  out << "inserted " << block.rows() << " rows into " << table.database << "." << table.table
      << "\n";
  if (!args.keep) {
    if (absl::Status removed = spool::DefaultFileOps()->Unlink(path); !removed.ok()) {
      err << "chgate spool reinsert: the rows are in; removing the file failed: "
          << removed.message() << "\n";
      return 1;
    }
    out << "deleted " << path << "\n";
  }
  return 0;
}

// GET http://127.0.0.1:<port>/metrics, each socket wait bounded by `timeout`.
absl::StatusOr<std::string> ScrapeLocal(int port, absl::Duration timeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  const timeval tv = absl::ToTimeval(timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(
        absl::StrCat("connect 127.0.0.1:", port, ": ", std::strerror(errno)));
  }
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
  }
  std::string response;
  char buf[16384];
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
    }
    response.append(buf, static_cast<size_t>(n));
  }
  const size_t body = response.find("\r\n\r\n");
  if (!absl::StartsWith(response, "HTTP/1.") || response.find(" 200 ") > 12 ||
      body == std::string::npos) {
    return absl::UnavailableError(absl::StrCat("no metrics page from 127.0.0.1:", port));
  }
  return response.substr(body + 4);
}

// The value of the sample `name` (without labels) in an exposition page.
std::optional<double> SampleValue(absl::string_view page, absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (!absl::StartsWith(line, name) || line.size() <= name.size() || line[name.size()] != ' ') {
      continue;
    }
    double v;
    if (absl::SimpleAtod(line.substr(name.size() + 1), &v)) return v;
  }
  return std::nullopt;
}

int WaitDrained(const config::Config& c, absl::Duration at_least, absl::Duration timeout,
                std::ostream& out, std::ostream& err) {
  const size_t colon = c.metrics_listen.rfind(':');
  int port = 0;
  if (c.metrics_listen.empty() || colon == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(c.metrics_listen).substr(colon + 1), &port)) {
    err << "chgate spool wait-drained: needs chgate's --metrics-listen (host:port)\n";
    return 2;
  }
  const absl::Time deadline = absl::Now() + timeout;
  absl::SleepFor(std::min(at_least, timeout));
  std::string last = "no answer";
  while (true) {
    absl::StatusOr<std::string> page = ScrapeLocal(port, absl::Seconds(2));
    if (page.ok()) {
      std::optional<double> pending = SampleValue(*page, "chgate_spool_pending_records");
      if (!pending.has_value()) {
        err << "chgate spool wait-drained: chgate at 127.0.0.1:" << port
            << " runs without a spool\n";
        return 0;
      }
      if (*pending == 0) {
        out << "spool drained: nothing pending\n";
        return 0;
      }
      last = absl::StrCat(static_cast<uint64_t>(*pending), " records still pending");
    } else {
      last = std::string(page.status().message());
    }
    if (absl::Now() >= deadline) break;
    absl::SleepFor(std::min(absl::Milliseconds(500), deadline - absl::Now()));
  }
  err << "chgate spool wait-drained: after " << absl::FormatDuration(timeout) << ": " << last
      << " (they stay in the spool; on an emptyDir they go with the pod)\n";
  return 1;
}

}  // namespace

int RunSpoolCommand(int argc, const char* const* argv, const char* const* envp, std::ostream& out,
                    std::ostream& err) {
  absl::StatusOr<Args> args = ParseArgs(argc, argv);
  if (!args.ok()) {
    err << "chgate spool: " << args.status().message() << "\n" << kUsage;
    return 2;
  }
  absl::StatusOr<config::Config> config =
      config::Parse(static_cast<int>(args->rest.size()), args->rest.data(), envp);
  if (!config.ok()) {
    err << "chgate spool: " << config.status().message() << "\n";
    return 2;
  }
  if (config->help) {
    out << kUsage;
    return 0;
  }
  if (args->command == "list") return List(*config, out, err);
  if (args->command == "wait-drained")
    return WaitDrained(*config, args->at_least, args->timeout, out, err);
  std::string path;
  absl::StatusOr<ingest::DeadLetter> letter = Load(*config, args->file, &path);
  if (!letter.ok()) {
    err << "chgate spool " << args->command << ": " << letter.status().message() << "\n";
    return 1;
  }
  if (args->command == "delete") {
    if (absl::Status removed = spool::DefaultFileOps()->Unlink(path); !removed.ok()) {
      err << "chgate spool delete: " << removed.message() << "\n";
      return 1;
    }
    out << "deleted " << path << " (" << letter->rows << " rows of " << letter->table.database
        << "." << letter->table.table << ")\n";
    return 0;
  }
  absl::StatusOr<clickhouse::Block> block = ingest::DeadLetterBlock(*letter);
  if (!block.ok()) {
    err << "chgate spool " << args->command << ": " << path << ": " << block.status().message()
        << "\n";
    return 1;
  }
  if (args->command == "show") {
    Show(*block, args->format, out);
    return 0;
  }
  return Reinsert(*config, *args, *letter, *block, path, out, err);
}

}  // namespace chgate
