// Reader side of the Query benchmark (tests/bench/query_bench.py drives it): runs one query through
// chgate's Query RPC with the C++ SDK, touches every value of every row, and prints one line of
// `key=value` results: rows, received/decoded bytes (from the summary), wall time, this
// process's CPU time and peak RSS.
//
// --mode rows (the default) reads the way a row-at-a-time application does: the cursor's typed
// getters for numbers, views for strings, the text form for other values. --mode columns reads
// whole blocks (QueryCursor::NextBlock) through the columnar views: a loop over each 32- and
// 64-bit number column (dates and decimals as their stored integers) and each String column,
// the text form only for other types (arrays here).
//
//   chgate_query_bench --addr 127.0.0.1:50051 --sql 'SELECT number FROM system.numbers LIMIT 1e8'
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/sdk/client.h"

namespace {

double Seconds(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

int Usage() {
  std::cerr << "usage: chgate_query_bench --addr HOST:PORT --sql SQL [--mode rows|columns]\n";
  return 2;
}

}  // namespace

// The values of an integer column view, summed with wrap-around (a checksum, not arithmetic).
template <typename T>
uint64_t SumAsUInt64(const chgate::client::FixedColumnView<T>& view) {
  uint64_t sum = 0;
  for (size_t i = 0; i < view.size(); ++i) sum += static_cast<uint64_t>(view[i]);
  return sum;
}

int main(int argc, char** argv) {
  // As chgate and chgate-cli do: no lock-order bookkeeping on every absl::Mutex (Debian's abseil
  // is built without NDEBUG). An application reading results fast would do the same.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::string addr = "127.0.0.1:50051";
  std::string sql;
  std::string mode = "rows";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--addr") == 0) {
      addr = argv[i + 1];
    } else if (std::strcmp(argv[i], "--mode") == 0) {
      mode = argv[i + 1];
    } else if (std::strcmp(argv[i], "--sql") == 0) {
      sql = argv[i + 1];
    } else {
      return Usage();
    }
  }
  if (sql.empty() || (mode != "rows" && mode != "columns")) return Usage();

  chgate::client::ClientOptions options;
  options.default_timeout = absl::Minutes(10);
  auto client = chgate::client::Client::Create(addr, options);
  if (!client.ok()) {
    std::cerr << client.status() << "\n";
    return 1;
  }
  const absl::Time start = absl::Now();
  auto cursor = (*client)->Query(sql);
  if (!cursor.ok()) {
    std::cerr << cursor.status() << "\n";
    return 1;
  }
  chgate::client::QueryCursor& c = **cursor;
  // What each column is read as: 0 = UInt64, 1 = Int64, 2 = Float64, 3 = string view, 4 = text.
  std::vector<int> kinds;
  for (size_t col = 0; col < c.column_count(); ++col) {
    const std::string& type = c.header().columns(static_cast<int>(col)).type();
    if (type == "UInt64" || type == "UInt32" || type == "UInt16" || type == "UInt8" ||
        type.rfind("DateTime", 0) == 0 || type == "Date") {
      kinds.push_back(0);
    } else if (type == "Int64" || type == "Int32" || type == "Int16" || type == "Int8") {
      kinds.push_back(1);
    } else if (type == "Float64" || type == "Float32") {
      kinds.push_back(2);
    } else if (type == "String" || type == "LowCardinality(String)") {
      kinds.push_back(3);
    } else {
      kinds.push_back(4);
    }
  }
  uint64_t checksum = 0;
  std::string text;
  if (mode == "columns") {
    namespace sdk = chgate::client;
    while (c.NextBlock()) {
      const chgate::v1::Block& block = c.block();
      for (size_t col = 0; col < c.column_count(); ++col) {
        const chgate::v1::Column& column = block.columns(static_cast<int>(col));
        const sdk::ColumnType& type = c.column_type(col);
        if (auto u64 = sdk::ViewFixed<uint64_t>(column, type); u64.ok()) {
          checksum += SumAsUInt64(*u64);
        } else if (auto i64 = sdk::ViewFixed<int64_t>(column, type); i64.ok()) {
          checksum += SumAsUInt64(*i64);
        } else if (auto u32 = sdk::ViewFixed<uint32_t>(column, type); u32.ok()) {
          checksum += SumAsUInt64(*u32);
        } else if (auto i32 = sdk::ViewFixed<int32_t>(column, type); i32.ok()) {
          checksum += SumAsUInt64(*i32);
        } else if (auto f64 = sdk::ViewFixed<double>(column, type); f64.ok()) {
          double sum = 0;
          for (size_t i = 0; i < f64->size(); ++i) sum += (*f64)[i];
          checksum += static_cast<uint64_t>(sum);
        } else if (auto strings = sdk::ViewStrings(column, type); strings.ok()) {
          for (size_t i = 0; i < strings->size(); ++i) checksum += (*strings)[i].size();
        } else {
          for (uint64_t row = 0; row < block.rows(); ++row) {
            if (sdk::IsNullAt(column, type, row)) continue;
            text.clear();
            sdk::AppendValueText(column, type, row, sdk::TextFormat::kTsv, &text);
            checksum += text.size();
          }
        }
      }
    }
  } else {
    while (c.Next()) {
      for (size_t col = 0; col < kinds.size(); ++col) {
        if (c.IsNull(col)) continue;
        switch (kinds[col]) {
          case 0:
            checksum += *c.GetUInt64(col);
            break;
          case 1:
            checksum += static_cast<uint64_t>(*c.GetInt64(col));
            break;
          case 2:
            checksum += static_cast<uint64_t>(*c.GetFloat64(col));
            break;
          case 3:
            checksum += c.GetString(col)->size();
            break;
          default:
            text.clear();
            c.AppendValue(col, chgate::client::TextFormat::kTsv, &text);
            checksum += text.size();
            break;
        }
      }
    }
  }
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);
  if (!c.status().ok()) {
    std::cerr << c.status() << "\n";
    return 1;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const chgate::v1::QuerySummary* summary = c.summary();
  std::printf(
      "rows=%llu received_bytes=%llu decoded_bytes=%llu wall=%.4f user=%.4f sys=%.4f "
      "maxrss_kib=%ld checksum=%llu\n",
      static_cast<unsigned long long>(c.rows_read()),
      static_cast<unsigned long long>(summary ? summary->received_bytes() : 0),
      static_cast<unsigned long long>(summary ? summary->decoded_bytes() : 0), wall,
      Seconds(usage.ru_utime), Seconds(usage.ru_stime), usage.ru_maxrss,
      static_cast<unsigned long long>(checksum));
  return 0;
}
