// Spool benchmark: what durability costs on this machine's disk. Prints the latency of a bare
// write + fdatasync of 4 KiB (the floor), of Spool::AppendAndWait of 4 KiB from one thread (one
// group commit per append), and the appends/s of 8 threads appending 1 KiB records at
// group_commit_delay 0, with the records per fdatasync that group commit achieved.
//
//   build/tests/chgate_spool_bench --dir=<directory on the disk to measure> [--smoke]
//
// The directory must not be on tmpfs (fdatasync is free there). It is emptied and removed.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "server/spool/spool.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string dir;
  bool smoke = false;
};

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

void PrintLatency(const char* what, std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  auto at = [&us](double q) {
    return us[std::min(us.size() - 1, static_cast<size_t>(q * static_cast<double>(us.size())))];
  };
  std::printf("%-44s n=%-6zu p50 %8.0f us  p90 %8.0f us  p99 %8.0f us  max %8.0f us\n", what,
              us.size(), at(0.5), at(0.9), at(0.99), us.back());
}

int RawSyncs(const std::string& dir, int n) {
  const std::string path = dir + "/raw.dat";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror("open");
    return 1;
  }
  const std::string block(4096, 'r');
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    const auto start = Clock::now();
    if (::write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size()) ||
        ::fdatasync(fd) != 0) {
      std::perror("write/fdatasync");
      return 1;
    }
    us.push_back(Micros(Clock::now() - start));
  }
  ::close(fd);
  ::unlink(path.c_str());
  PrintLatency("write(4 KiB) + fdatasync", us);
  return 0;
}

int SingleAppends(const std::string& dir, int n) {
  auto opened = chgate::spool::Spool::Open(dir + "/single", {});
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
    return 1;
  }
  const std::string payload(4096 - chgate::spool::kRecordHeaderSize, 's');
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    const auto start = Clock::now();
    if (auto lsn = opened->spool->AppendAndWait(payload); !lsn.ok()) {
      std::fprintf(stderr, "%s\n", lsn.status().ToString().c_str());
      return 1;
    }
    us.push_back(Micros(Clock::now() - start));
  }
  const chgate::spool::SpoolStats stats = opened->spool->Stats();
  PrintLatency("Spool::AppendAndWait(4 KiB), 1 thread", us);
  std::printf("%-44s mean fdatasync %.0f us over %llu syncs\n", "",
              Micros(absl::ToChronoNanoseconds(stats.fsync_total)) /
                  static_cast<double>(std::max<uint64_t>(stats.fsyncs, 1)),
              static_cast<unsigned long long>(stats.fsyncs));
  return 0;
}

int Concurrent(const std::string& dir, int threads, std::chrono::milliseconds duration) {
  auto opened = chgate::spool::Spool::Open(dir + "/concurrent", {});
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
    return 1;
  }
  chgate::spool::Spool& spool = *opened->spool;
  const std::string payload(1024, 'c');
  std::atomic<bool> failed{false};
  std::vector<std::vector<double>> latencies(static_cast<size_t>(threads));
  const auto start = Clock::now();
  const auto end = start + duration;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      while (Clock::now() < end) {
        const auto a = Clock::now();
        if (!spool.AppendAndWait(payload).ok()) {
          failed = true;
          return;
        }
        latencies[static_cast<size_t>(t)].push_back(Micros(Clock::now() - a));
      }
    });
  }
  for (std::thread& w : workers) w.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (failed) {
    std::fprintf(stderr, "an append failed\n");
    return 1;
  }
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  const chgate::spool::SpoolStats stats = spool.Stats();
  char what[64];
  std::snprintf(what, sizeof what, "AppendAndWait(1 KiB), %d threads", threads);
  PrintLatency(what, all);
  const double syncs = static_cast<double>(std::max<uint64_t>(stats.fsyncs, 1));
  std::printf(
      "%-44s %.0f appends/s, %.1f MB/s, %.1f appends per fdatasync, mean fdatasync %.0f us\n", "",
      static_cast<double>(all.size()) / seconds,
      static_cast<double>(stats.bytes_appended) / seconds / 1e6,
      static_cast<double>(stats.appends) / syncs,
      Micros(absl::ToChronoNanoseconds(stats.fsync_total)) / syncs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--dir=", 0) == 0) {
      args.dir = a.substr(6);
    } else if (a == "--smoke") {
      args.smoke = true;
    } else {
      std::fprintf(stderr, "usage: %s --dir=<directory> [--smoke]\n", argv[0]);
      return 2;
    }
  }
  if (args.dir.empty()) {
    std::fprintf(stderr, "--dir is required (not on tmpfs)\n");
    return 2;
  }
  const std::string dir = args.dir + "/chgate-spool-bench";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const int syncs = args.smoke ? 20 : 1000;
  const auto duration = std::chrono::milliseconds(args.smoke ? 200 : 5000);
  int rc = RawSyncs(dir, syncs);
  if (rc == 0) rc = SingleAppends(dir, syncs);
  if (rc == 0) rc = Concurrent(dir, 8, duration);
  std::filesystem::remove_all(dir);
  return rc;
}
