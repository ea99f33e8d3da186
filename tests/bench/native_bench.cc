// End-to-end benchmark of the native protocol paths. Prints one table: the physical limit (raw
// loopback TCP), inserts to an in-repo null server (in a child process) and to the local
// ClickHouse (ENGINE = Null, server-side block merging on and off), SELECTs from both, and
// clickhouse-client doing the same work in the same run.
//
//   build/tests/chgate_native_bench [--scale=full|smoke] [--clickhouse=host:port]
//                                   [--clickhouse-tls=host:port] [--clickhouse-tls-ca=file]
//                                   [--only=substring] [--client=clickhouse-client]
//
// Rows whose case ends in "tls" run the same work over TLS (a TLS-terminating null server, or
// the local ClickHouse's secure port); their ratio is to the plain row's wall time, and a
// summary after the table gives TLS's client CPU per GB relative to plain.
//
// Columns: wall time (best of the repetitions), MB/s of column data (10^6 bytes), the ratio to
// the raw loopback throughput (null server) or to clickhouse-client's wall time (real server),
// client CPU time (this thread only, or the child for clickhouse-client), peak RSS of the client
// process, and heap bytes / allocations made by the client thread during the operation.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/low_cardinality.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/connection.h"
#include "server/clickhouse/wire/tls.h"
#include "tests/bench/null_server.h"
#include "tests/unit/tls/test_pki.h"

// ---- Allocation counting (client thread only) ----
namespace {
thread_local uint64_t t_alloc_bytes = 0;
thread_local uint64_t t_alloc_count = 0;
}  // namespace

void* operator new(size_t n) {
  t_alloc_bytes += n;
  ++t_alloc_count;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  t_alloc_bytes += n;
  ++t_alloc_count;
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace chgate::clickhouse {
namespace {

struct Options {
  bool smoke = false;
  std::string host = "127.0.0.1";
  uint16_t port = 29000;
  std::string only;
  std::string client = "clickhouse-client";
  // The local ClickHouse's secure port and the CA file its certificate verifies against.
  std::string tls_host = "127.0.0.1";
  uint16_t tls_port = 29440;
  std::string tls_ca;
};

struct Measure {
  double wall = 0;  // seconds
  double cpu = 0;   // seconds
  uint64_t peak_rss = 0;
  uint64_t alloc_bytes = 0;
  uint64_t alloc_count = 0;
  bool ok = true;
  std::string error;
};

double ThreadCpu() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

uint64_t ReadStatusKb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      uint64_t kb = 0;
      std::sscanf(line.c_str() + std::strlen(key), "%lu", &kb);
      return kb * 1024;
    }
  }
  return 0;
}

void ResetPeakRss() { std::ofstream("/proc/self/clear_refs") << "5"; }

Measure Run(const std::function<absl::Status()>& op) {
  Measure m;
  ResetPeakRss();
  uint64_t bytes0 = t_alloc_bytes, count0 = t_alloc_count;
  double cpu0 = ThreadCpu();
  auto t0 = std::chrono::steady_clock::now();
  absl::Status st = op();
  auto t1 = std::chrono::steady_clock::now();
  m.cpu = ThreadCpu() - cpu0;
  m.wall = std::chrono::duration<double>(t1 - t0).count();
  m.alloc_bytes = t_alloc_bytes - bytes0;
  m.alloc_count = t_alloc_count - count0;
  m.peak_rss = ReadStatusKb("VmHWM:");
  if (!st.ok()) {
    m.ok = false;
    m.error = std::string(st.message());
  }
  return m;
}

Measure Best(int reps, const std::function<absl::Status()>& op) {
  Measure best;
  for (int i = 0; i < reps; ++i) {
    Measure m = Run(op);
    if (!m.ok) return m;
    if (i == 0 || m.wall < best.wall) best = m;
  }
  return best;
}

// Runs a command with `stdin_path` as input; measures wall and CPU of the child.
Measure RunCommand(const std::vector<std::string>& argv, const std::string& stdin_path) {
  Measure m;
  rusage before{};
  getrusage(RUSAGE_CHILDREN, &before);
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    int in = ::open(stdin_path.empty() ? "/dev/null" : stdin_path.c_str(), O_RDONLY);
    int out = ::open("/dev/null", O_WRONLY);
    ::dup2(in, 0);
    ::dup2(out, 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::_Exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  auto t1 = std::chrono::steady_clock::now();
  rusage after{};
  getrusage(RUSAGE_CHILDREN, &after);
  m.wall = std::chrono::duration<double>(t1 - t0).count();
  auto secs = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  m.cpu =
      secs(after.ru_utime) + secs(after.ru_stime) - secs(before.ru_utime) - secs(before.ru_stime);
  m.peak_rss = static_cast<uint64_t>(after.ru_maxrss) * 1024;  // max over children so far
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    m.ok = false;
    m.error = absl::StrCat(argv[0], " exited with status ", status);
  }
  return m;
}

Measure BestCommand(int reps, const std::vector<std::string>& argv, const std::string& stdin_path) {
  Measure best;
  for (int i = 0; i < reps; ++i) {
    Measure m = RunCommand(argv, stdin_path);
    if (!m.ok) return m;
    if (i == 0 || m.wall < best.wall) best = m;
  }
  return best;
}

// ---- Data ----

std::string Hex16(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i) {
    s[static_cast<size_t>(i)] = digits[v & 15];
    v >>= 4;
  }
  return s;
}

enum class Shape { kUInt64, kSmallStr, kBigStr, kMixed };

const char* ShapeName(Shape s) {
  switch (s) {
    case Shape::kUInt64:
      return "UInt64";
    case Shape::kSmallStr:
      return "SmallColStr";
    case Shape::kBigStr:
      return "BigColStr";
    case Shape::kMixed:
      return "Mixed";
  }
  return "?";
}

const char* ShapeSchema(Shape s) {
  switch (s) {
    case Shape::kUInt64:
      return "(v UInt64)";
    case Shape::kSmallStr:
    case Shape::kBigStr:
      return "(s String)";
    case Shape::kMixed:
      return "(ts DateTime, id UInt64, kind LowCardinality(String), msg String, value Float64, "
             "tags Array(String))";
  }
  return "";
}

// Blocks of at most `block_rows` rows holding `rows` rows of `shape` (the caller's column data).
std::vector<Block> MakeBlocks(Shape shape, uint64_t rows, uint64_t block_rows) {
  std::vector<Block> blocks;
  static const char* kinds[] = {"click", "view", "purchase", "signup", "logout"};
  std::string big(4096, 'x');
  for (uint64_t done = 0; done < rows;) {
    uint64_t n = std::min(block_rows, rows - done);
    Block b;
    switch (shape) {
      case Shape::kUInt64: {
        ColumnPtr c = *CreateColumn("UInt64");
        auto& f = static_cast<ColumnFixed&>(*c);
        f.values().reserve(n * 8);
        for (uint64_t i = 0; i < n; ++i) f.Append<uint64_t>(done + i);
        b.AddColumn("v", c);
        break;
      }
      case Shape::kSmallStr:
      case Shape::kBigStr: {
        ColumnPtr c = *CreateColumn("String");
        auto& s = static_cast<ColumnString&>(*c);
        for (uint64_t i = 0; i < n; ++i) {
          if (shape == Shape::kSmallStr) {
            s.Append(Hex16((done + i) * 0x9E3779B97F4A7C15ull));
          } else {
            s.Append(big);
          }
        }
        b.AddColumn("s", c);
        break;
      }
      case Shape::kMixed: {
        ColumnPtr ts = *CreateColumn("DateTime"), id = *CreateColumn("UInt64"),
                  kind = *CreateColumn("LowCardinality(String)"), msg = *CreateColumn("String"),
                  value = *CreateColumn("Float64"), tags = *CreateColumn("Array(String)");
        auto& tags_col = static_cast<ColumnArray&>(*tags);
        auto& tag_values = static_cast<ColumnString&>(*tags_col.nested());
        for (uint64_t i = 0; i < n; ++i) {
          uint64_t r = done + i;
          static_cast<ColumnFixed&>(*ts).Append<uint32_t>(
              static_cast<uint32_t>(1700000000 + r / 1000));
          static_cast<ColumnFixed&>(*id).Append<uint64_t>(r * 7919);
          (void)static_cast<ColumnLowCardinality&>(*kind).AppendString(kinds[r % 5]);
          static_cast<ColumnString&>(*msg).Append(
              absl::StrCat("user ", r % 100000, " did something at step ", r, " of the funnel"));
          static_cast<ColumnFixed&>(*value).Append<double>(static_cast<double>(r) * 0.25);
          for (uint64_t k = 0; k < r % 3; ++k) tag_values.Append(kinds[(r + k) % 5]);
          tags_col.FinishRow();
        }
        b.AddColumn("ts", ts);
        b.AddColumn("id", id);
        b.AddColumn("kind", kind);
        b.AddColumn("msg", msg);
        b.AddColumn("value", value);
        b.AddColumn("tags", tags);
        break;
      }
    }
    blocks.push_back(std::move(b));
    done += n;
  }
  return blocks;
}

uint64_t DataBytes(const std::vector<Block>& blocks) {
  uint64_t n = 0;
  for (const Block& b : blocks) {
    GatherWriter w;
    WriteBlock(b, 0, w);
    n += w.size();
  }
  return n;
}

Block HeaderOf(const Block& b) {
  Block h;
  for (const NamedColumn& c : b.columns()) h.AddColumn(c.name, c.column->CloneEmpty());
  return h;
}

// ---- The table ----

struct Row {
  std::string group, name, peer;
  uint64_t rows = 0, bytes = 0;
  Measure m;
  double ratio = 0;
  std::string ratio_of;
};

std::vector<Row> g_rows;

void Print() {
  std::printf("\n%-12s %-40s %12s %10s %9s %10s %9s %10s %9s %12s %8s\n", "group", "case", "rows",
              "data MB", "wall s", "MB/s", "ratio", "of", "cpu s", "heap B/op", "allocs");
  for (const Row& r : g_rows) {
    if (!r.m.ok) {
      std::printf("%-12s %-40s FAILED: %s\n", r.group.c_str(), r.name.c_str(), r.m.error.c_str());
      continue;
    }
    double mb = static_cast<double>(r.bytes) / 1e6;
    std::printf(
        "%-12s %-40s %12lu %10.1f %9.4f %10.0f %9.2f %10s %9.4f %12lu %8lu   peakRSS %.0f MiB\n",
        r.group.c_str(), r.name.c_str(), r.rows, mb, r.m.wall, mb / r.m.wall, r.ratio,
        r.ratio_of.c_str(), r.m.cpu, r.m.alloc_bytes, r.m.alloc_count,
        static_cast<double>(r.m.peak_rss) / (1 << 20));
  }
  std::fflush(stdout);
}

// ---- Raw loopback ----

double RawLoopback(uint64_t total) {
  int listen_fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::listen(listen_fd, 1);
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::thread reader([&] {
    int fd = ::accept(listen_fd, nullptr, nullptr);
    std::vector<char> buf(1 << 20);
    uint64_t got = 0;
    while (got < total) {
      ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
      if (n <= 0) break;
      got += static_cast<uint64_t>(n);
    }
    ::close(fd);
  });
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  std::vector<char> buf(1 << 20, 'x');
  Measure m = Run([&] {
    uint64_t sent = 0;
    while (sent < total) {
      ssize_t n = ::send(fd, buf.data(), std::min<uint64_t>(buf.size(), total - sent), 0);
      if (n <= 0) return absl::UnavailableError("send failed");
      sent += static_cast<uint64_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
    return absl::OkStatus();
  });
  reader.join();
  ::close(fd);
  ::close(listen_fd);
  g_rows.push_back(
      {"physical", "raw loopback TCP, 1 MiB send()s", "", total / 8, total, m, 1.0, "itself"});
  return static_cast<double>(total) / m.wall;
}

// ---- Null server in a child process ----

struct Child {
  pid_t pid = -1;
  uint16_t port = 0;
};

Child StartNullServer(NullServerOptions options) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    ::close(pipe_fds[0]);
    NullServer server(std::move(options));
    if (!server.Start().ok()) std::_Exit(1);
    uint16_t port = server.port();
    if (::write(pipe_fds[1], &port, sizeof(port)) != sizeof(port)) std::_Exit(1);
    ::close(pipe_fds[1]);
    while (true) ::pause();
  }
  ::close(pipe_fds[1]);
  Child c{pid, 0};
  if (::read(pipe_fds[0], &c.port, sizeof(c.port)) != sizeof(c.port)) c.port = 0;
  ::close(pipe_fds[0]);
  return c;
}

void StopChild(const Child& c) {
  if (c.pid > 0) {
    ::kill(c.pid, SIGKILL);
    ::waitpid(c.pid, nullptr, 0);
  }
}

const char* MethodName(CompressionMethod m) {
  switch (m) {
    case CompressionMethod::kNone:
      return "none";
    case CompressionMethod::kLz4:
      return "lz4";
    case CompressionMethod::kZstd:
      return "zstd";
  }
  return "?";
}

// Certificates for the TLS rows, made once: the null server's (a CA of the run's own) and the
// client contexts for it and for the local ClickHouse.
struct TlsSetup {
  chgate::testing::TestPki pki;
  std::shared_ptr<asio::ssl::context> server;
  std::shared_ptr<TlsClientContext> null_client;
  std::shared_ptr<TlsClientContext> live_client;
};

TlsSetup& Tls(const Options& o) {
  static TlsSetup* setup = [&o] {
    auto* t = new TlsSetup;
    if (t->pki.MakeCa("bench") && t->pki.Issue("server", "bench", chgate::testing::LeafSpec{})) {
      auto server = chgate::testing::ServerContext(t->pki, "server");
      auto client = TlsClientContext::Create({.ca_file = t->pki.Path("bench.crt")});
      if (server.ok()) t->server = *server;
      if (client.ok()) t->null_client = *client;
    }
    auto live = TlsClientContext::Create({.ca_file = o.tls_ca});
    if (live.ok()) t->live_client = *live;
    return t;
  }();
  return *setup;
}

std::string TlsSuffix(bool tls) { return tls ? " tls" : ""; }

bool Selected(const Options& o, const std::string& name) {
  return o.only.empty() || name.find(o.only) != std::string::npos;
}

void InsertToNullServer(const Options& o, Shape shape, uint64_t rows, CompressionMethod method,
                        double raw_bps, bool tls = false) {
  std::string name =
      absl::StrCat("insert ", ShapeName(shape), " ", rows, " ", MethodName(method), TlsSuffix(tls));
  if (!Selected(o, name)) return;
  // One block holding every row, as a caller with its columns in memory would send.
  std::vector<Block> blocks = MakeBlocks(shape, rows, rows);
  NullServerOptions so;
  so.insert_header = HeaderOf(blocks[0]);
  if (tls) so.tls = Tls(o).server;
  Child child = StartNullServer(std::move(so));
  auto conn = Connection::Connect({.host = "127.0.0.1",
                                   .port = child.port,
                                   .compression = method,
                                   .tls = tls ? Tls(o).null_client : nullptr});
  Row row{"null-server", name, "", rows, DataBytes(blocks)};
  if (!conn.ok()) {
    row.m.ok = false;
    row.m.error = std::string(conn.status().message());
  } else {
    std::vector<const Block*> ptrs;
    for (const Block& b : blocks) ptrs.push_back(&b);
    int reps = rows >= 10000000 ? 1 : 3;
    // One untimed insert first: the null server decodes into reused columns, and growing them
    // the first time costs page faults (very expensive on a paravirtualised VM) that a server
    // in steady state does not pay.
    absl::Status warm = (*conn)->Insert({.query = "INSERT INTO t VALUES"}, ptrs);
    row.m =
        warm.ok()
            ? Best(reps, [&] { return (*conn)->Insert({.query = "INSERT INTO t VALUES"}, ptrs); })
            : Measure{.ok = false, .error = std::string(warm.message())};
    row.ratio = (static_cast<double>(row.bytes) / row.m.wall) / raw_bps;
    row.ratio_of = "loopback";
  }
  StopChild(child);
  g_rows.push_back(std::move(row));
}

void SelectFromNullServer(const Options& o, uint64_t block_rows, uint64_t repeats,
                          CompressionMethod method, double raw_bps, bool tls = false) {
  std::string name =
      absl::StrCat("select UInt64 ", block_rows * repeats, " ", MethodName(method), TlsSuffix(tls));
  if (!Selected(o, name)) return;
  NullServerOptions so;
  so.select_block = std::move(MakeBlocks(Shape::kUInt64, block_rows, block_rows)[0]);
  so.select_repeats = repeats;
  if (tls) so.tls = Tls(o).server;
  Child child = StartNullServer(std::move(so));
  auto conn = Connection::Connect({.host = "127.0.0.1",
                                   .port = child.port,
                                   .compression = method,
                                   .tls = tls ? Tls(o).null_client : nullptr});
  Row row{"null-server", name, "", block_rows * repeats, block_rows * repeats * 8};
  if (!conn.ok()) {
    row.m.ok = false;
    row.m.error = std::string(conn.status().message());
  } else {
    uint64_t seen = 0;
    row.m = Best(3, [&] {
      seen = 0;
      return (*conn)->Select({.query = "SELECT v FROM t"}, [&](const Block& b) {
        seen += b.rows();
        return absl::OkStatus();
      });
    });
    if (row.m.ok && seen != row.rows) {
      row.m.ok = false;
      row.m.error = absl::StrCat("saw ", seen, " rows");
    }
    row.ratio = (static_cast<double>(row.bytes) / row.m.wall) / raw_bps;
    row.ratio_of = "loopback";
  }
  StopChild(child);
  g_rows.push_back(std::move(row));
}

// ---- Real server ----

absl::Status Exec(Connection& conn, const std::string& sql) {
  return conn.Select({.query = sql}, [](const Block&) { return absl::OkStatus(); });
}

// A connection to the local ClickHouse: its plain port, or its secure port with `tls`.
absl::StatusOr<std::unique_ptr<Connection>> ConnectLive(const Options& o, CompressionMethod method,
                                                        bool tls) {
  if (!tls) return Connection::Connect({.host = o.host, .port = o.port, .compression = method});
  if (Tls(o).live_client == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CA file for the secure port (--clickhouse-tls-ca): '", o.tls_ca, "'"));
  }
  return Connection::Connect(
      {.host = o.tls_host, .port = o.tls_port, .compression = method, .tls = Tls(o).live_client});
}

void InsertToClickHouse(const Options& o, Shape shape, uint64_t rows, CompressionMethod method,
                        bool merging, bool tls = false) {
  std::string name = absl::StrCat("insert ", ShapeName(shape), " ", rows, " ", MethodName(method),
                                  merging ? "" : " nomerge", TlsSuffix(tls));
  if (!Selected(o, name)) return;
  auto conn = ConnectLive(o, method, tls);
  if (!conn.ok()) {
    Row row{"clickhouse", name};
    row.m.ok = false;
    row.m.error = std::string(conn.status().message());
    g_rows.push_back(row);
    return;
  }
  std::string table = absl::StrCat("chgate_bench.null_", ShapeName(shape));
  (void)Exec(**conn, "CREATE DATABASE IF NOT EXISTS chgate_bench");
  (void)Exec(**conn, absl::StrCat("CREATE TABLE IF NOT EXISTS ", table, " ", ShapeSchema(shape),
                                  " ENGINE = Null"));
  // 65,536-row blocks, as a streaming client sends them.
  std::vector<Block> blocks = MakeBlocks(shape, rows, 65536);
  std::vector<const Block*> ptrs;
  for (const Block& b : blocks) ptrs.push_back(&b);
  QueryParams q{.query = absl::StrCat("INSERT INTO ", table, " VALUES")};
  if (!merging) {
    q.settings = {{.name = "min_insert_block_size_rows", .value = "0"},
                  {.name = "min_insert_block_size_bytes", .value = "0"}};
  }
  Row row{"clickhouse", name, "", rows, DataBytes(blocks)};
  int reps = rows >= 10000000 ? 1 : 3;
  // One untimed one-block insert first: a connection allocates its reusable compression buffers
  // (about 1 MiB with LZ4 or ZSTD) on first use; the table shows the steady state.
  const Block* first[] = {ptrs.front()};
  (void)(*conn)->Insert(q, first);
  row.m = Best(reps, [&] { return (*conn)->Insert(q, ptrs); });
  if (tls) {
    // Compared with the plain row of the same case (see Summary()).
    g_rows.push_back(std::move(row));
    return;
  }
  // The peer: clickhouse-client inserting the same rows from a Native file.
  std::string path = absl::StrCat("/tmp/chgate-bench-", getpid(), ".native");
  {
    std::ofstream out(path, std::ios::binary);
    for (const Block& b : blocks) {
      GatherWriter w;
      WriteBlock(b, 0, w);
      std::string bytes = w.ToString();
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
  }
  std::vector<std::string> argv = {o.client,
                                   "--host",
                                   o.host,
                                   "--port",
                                   std::to_string(o.port),
                                   "--compression",
                                   method == CompressionMethod::kNone ? "0" : "1"};
  if (method == CompressionMethod::kZstd) argv.push_back("--network_compression_method=zstd");
  if (!merging) {
    argv.push_back("--min_insert_block_size_rows=0");
    argv.push_back("--min_insert_block_size_bytes=0");
  }
  argv.push_back("--query");
  argv.push_back(absl::StrCat("INSERT INTO ", table, " FORMAT Native"));
  Row peer{"clickhouse", absl::StrCat("  clickhouse-client ", name.substr(7)), "", rows, row.bytes};
  peer.m = BestCommand(reps, argv, path);
  ::unlink(path.c_str());
  if (row.m.ok && peer.m.ok) {
    row.ratio = peer.m.wall / row.m.wall;
    row.ratio_of = "ch-client";
    peer.ratio = 1;
    peer.ratio_of = "itself";
  }
  g_rows.push_back(std::move(row));
  g_rows.push_back(std::move(peer));
}

void SelectFromClickHouse(const Options& o, uint64_t rows, CompressionMethod method,
                          bool tls = false) {
  std::string name = absl::StrCat("select_numbers ", rows, " ", MethodName(method), TlsSuffix(tls));
  if (!Selected(o, name)) return;
  auto conn = ConnectLive(o, method, tls);
  Row row{"clickhouse", name, "", rows, rows * 8};
  if (!conn.ok()) {
    row.m.ok = false;
    row.m.error = std::string(conn.status().message());
    g_rows.push_back(row);
    return;
  }
  std::string sql = absl::StrCat("SELECT number FROM system.numbers LIMIT ", rows);
  uint64_t seen = 0;
  row.m = Best(1, [&] {
    seen = 0;
    return (*conn)->Select({.query = sql}, [&](const Block& b) {
      seen += b.rows();
      return absl::OkStatus();
    });
  });
  if (row.m.ok && seen != rows) {
    row.m.ok = false;
    row.m.error = absl::StrCat("saw ", seen, " rows");
  }
  if (tls) {
    g_rows.push_back(std::move(row));
    return;
  }
  std::vector<std::string> argv = {o.client,
                                   "--host",
                                   o.host,
                                   "--port",
                                   std::to_string(o.port),
                                   "--compression",
                                   method == CompressionMethod::kNone ? "0" : "1",
                                   "--query",
                                   sql + " FORMAT Null"};
  Row peer{"clickhouse", absl::StrCat("  clickhouse-client ", name), "", rows, rows * 8};
  peer.m = BestCommand(1, argv, "");
  if (row.m.ok && peer.m.ok) {
    row.ratio = peer.m.wall / row.m.wall;
    row.ratio_of = "ch-client";
    peer.ratio = 1;
    peer.ratio_of = "itself";
  }
  g_rows.push_back(std::move(row));
  g_rows.push_back(std::move(peer));
}

// Each TLS row's ratio: the plain row of the same case (the latest before it) over it, in wall
// time (1.0 = as fast as plain).
void CompareTls() {
  for (size_t i = 0; i < g_rows.size(); ++i) {
    Row& t = g_rows[i];
    if (t.name.size() < 4 || t.name.compare(t.name.size() - 4, 4, " tls") != 0) continue;
    const std::string plain = t.name.substr(0, t.name.size() - 4);
    for (size_t j = i; j-- > 0;) {
      if (g_rows[j].group == t.group && g_rows[j].name == plain && g_rows[j].m.ok && t.m.ok) {
        t.ratio = g_rows[j].m.wall / t.m.wall;
        t.ratio_of = "plain";
        break;
      }
    }
  }
}

// Client CPU per GB of column data over TLS relative to plain, per case.
void PrintTlsSummary() {
  bool header = false;
  for (size_t i = 0; i < g_rows.size(); ++i) {
    const Row& t = g_rows[i];
    if (t.ratio_of != "plain") continue;
    const std::string plain = t.name.substr(0, t.name.size() - 4);
    for (size_t j = i; j-- > 0;) {
      const Row& p = g_rows[j];
      if (p.group != t.group || p.name != plain) continue;
      if (!header) {
        std::printf(
            "\nTLS cost (client CPU per GB of column data, TLS / plain; wall ratio is "
            "plain / TLS):\n");
        header = true;
      }
      const double gb = static_cast<double>(t.bytes) / 1e9;
      std::printf("%-12s %-40s cpu/GB plain %7.3f s  tls %7.3f s  = %5.2fx   wall %5.2f\n",
                  t.group.c_str(), plain.c_str(), p.m.cpu / gb, t.m.cpu / gb,
                  p.m.cpu > 0 ? t.m.cpu / p.m.cpu : 0.0, t.ratio);
      break;
    }
  }
  std::fflush(stdout);
}

// "host:port" into the two fields (the port only when it parses).
void SplitHostPort(const std::string& text, std::string* host, uint16_t* port) {
  size_t colon = text.rfind(':');
  *host = text.substr(0, colon);
  uint32_t p = 0;
  if (colon != std::string::npos && absl::SimpleAtoi(text.substr(colon + 1), &p)) {
    *port = static_cast<uint16_t>(p);
  }
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  if (const char* env = std::getenv("CHGATE_CLICKHOUSE_SECURE"); env != nullptr && *env != '\0') {
    SplitHostPort(env, &o.tls_host, &o.tls_port);
  }
  if (const char* env = std::getenv("CHGATE_CLICKHOUSE_SECURE_CA"); env != nullptr) {
    o.tls_ca = env;
  } else {
    o.tls_ca = ".local/clickhouse/tls/ca.crt";
  }
  if (const char* env = std::getenv("CHGATE_CLICKHOUSE")) {
    std::string text(env);
    size_t colon = text.rfind(':');
    if (colon != std::string::npos) {
      o.host = text.substr(0, colon);
      uint32_t port = 0;
      if (absl::SimpleAtoi(text.substr(colon + 1), &port)) o.port = static_cast<uint16_t>(port);
    }
  }
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--scale=smoke")
      o.smoke = true;
    else if (a == "--scale=full")
      o.smoke = false;
    else if (a.rfind("--only=", 0) == 0)
      o.only = a.substr(7);
    else if (a.rfind("--client=", 0) == 0)
      o.client = a.substr(9);
    else if (a.rfind("--clickhouse-tls=", 0) == 0)
      SplitHostPort(a.substr(17), &o.tls_host, &o.tls_port);
    else if (a.rfind("--clickhouse-tls-ca=", 0) == 0)
      o.tls_ca = a.substr(20);
    else if (a.rfind("--clickhouse=", 0) == 0) {
      std::string text = a.substr(13);
      size_t colon = text.rfind(':');
      o.host = text.substr(0, colon);
      uint32_t port = 0;
      if (colon != std::string::npos && absl::SimpleAtoi(text.substr(colon + 1), &port)) {
        o.port = static_cast<uint16_t>(port);
      }
    } else {
      std::fprintf(stderr,
                   "usage: chgate_native_bench [--scale=full|smoke] [--clickhouse=host:port] "
                   "[--clickhouse-tls=host:port] [--clickhouse-tls-ca=file] [--only=substring] "
                   "[--client=clickhouse-client]\n");
      std::exit(a == "--help" ? 0 : 2);
    }
  }
  return o;
}

int Main(int argc, char** argv) {
  Options o = ParseArgs(argc, argv);
  const bool s = o.smoke;
  double raw = RawLoopback(s ? (64ull << 20) : (4ull << 30));
  using M = CompressionMethod;
  for (uint64_t rows : s ? std::vector<uint64_t>{10000, 100000}
                         : std::vector<uint64_t>{10000, 100000, 1000000, 10000000, 100000000}) {
    InsertToNullServer(o, Shape::kUInt64, rows, M::kNone, raw);
  }
  for (uint64_t rows :
       s ? std::vector<uint64_t>{10000} : std::vector<uint64_t>{10000, 100000, 1000000}) {
    InsertToNullServer(o, Shape::kSmallStr, rows, M::kNone, raw);
  }
  for (uint64_t rows : s ? std::vector<uint64_t>{1000} : std::vector<uint64_t>{10000, 100000}) {
    InsertToNullServer(o, Shape::kBigStr, rows, M::kNone, raw);
  }
  for (M m : {M::kLz4, M::kZstd}) {
    InsertToNullServer(o, Shape::kUInt64, s ? 100000 : 10000000, m, raw);
    InsertToNullServer(o, Shape::kSmallStr, s ? 10000 : 1000000, m, raw);
    InsertToNullServer(o, Shape::kBigStr, s ? 1000 : 10000, m, raw);
  }
  for (M m : {M::kNone, M::kLz4}) InsertToNullServer(o, Shape::kMixed, s ? 10000 : 1000000, m, raw);
  for (M m : {M::kNone, M::kLz4}) {
    SelectFromNullServer(o, s ? 65536 : 1048576, s ? 4 : 200, m, raw);
  }
  for (bool merging : {true, false}) {
    for (M m : {M::kNone, M::kLz4}) {
      InsertToClickHouse(o, Shape::kUInt64, s ? 100000 : 10000000, m, merging);
    }
    InsertToClickHouse(o, Shape::kSmallStr, s ? 10000 : 1000000, M::kNone, merging);
    InsertToClickHouse(o, Shape::kBigStr, s ? 1000 : 10000, M::kNone, merging);
    InsertToClickHouse(o, Shape::kMixed, s ? 10000 : 1000000, M::kLz4, merging);
  }
  for (M m : {M::kNone, M::kLz4}) SelectFromClickHouse(o, s ? 1000000 : 500000000, m);
  // TLS against plain: the same work over both, one after the other.
  for (M m : {M::kNone, M::kLz4}) {
    for (bool tls : {false, true}) {
      InsertToNullServer(o, Shape::kUInt64, s ? 100000 : 10000000, m, raw, tls);
    }
  }
  for (bool tls : {false, true}) {
    SelectFromNullServer(o, s ? 65536 : 1048576, s ? 4 : 200, M::kNone, raw, tls);
  }
  for (M m : {M::kNone, M::kLz4}) {
    for (bool tls : {false, true}) {
      InsertToClickHouse(o, Shape::kUInt64, s ? 100000 : 10000000, m, /*merging=*/true, tls);
    }
  }
  for (bool tls : {false, true}) SelectFromClickHouse(o, s ? 1000000 : 200000000, M::kNone, tls);
  CompareTls();
  Print();
  PrintTlsSummary();
  for (const Row& r : g_rows) {
    if (!r.m.ok) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace chgate::clickhouse

int main(int argc, char** argv) { return chgate::clickhouse::Main(argc, argv); }
