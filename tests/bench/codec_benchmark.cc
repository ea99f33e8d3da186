// Micro-benchmarks of the native encoders and decoders: column encode (into a GatherWriter) and
// decode (from memory), frame compression and decompression, CityHash128; and the conversion of
// callers' values into typed columns (server/ingest/convert.h), the per-row cost of the rows path.
// Run: build/tests/chgate_codec_benchmark [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "server/clickhouse/block.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/low_cardinality.h"
#include "server/clickhouse/columns/nullable.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/compression/cityhash.h"
#include "server/clickhouse/compression/frame.h"
#include "server/clickhouse/protocol/revision.h"
#include "server/ingest/convert.h"
#include "server/proto_convert/values.h"
#include "tests/unit/ingest/test_values.h"

namespace chgate::clickhouse {
namespace {

ColumnPtr MakeUInt64(size_t rows) {
  ColumnPtr col = *CreateColumn("UInt64");
  auto& c = static_cast<ColumnFixed&>(*col);
  for (size_t i = 0; i < rows; ++i) c.Append<uint64_t>(i * 2654435761u);
  return col;
}

std::string Hex16(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i) {
    s[static_cast<size_t>(i)] = digits[v & 15];
    v >>= 4;
  }
  return s;
}

ColumnPtr MakeStrings(size_t rows, size_t size) {
  ColumnPtr col = *CreateColumn("String");
  auto& c = static_cast<ColumnString&>(*col);
  std::string big(size, 'x');
  for (size_t i = 0; i < rows; ++i) {
    if (size == 16) {
      c.Append(Hex16(i * 0x9E3779B97F4A7C15ull));
    } else {
      c.Append(big);
    }
  }
  return col;
}

// Bytes one encode of `block` produces (for SetBytesProcessed).
size_t EncodedSize(const Block& block) {
  GatherWriter w;
  WriteBlock(block, revision::kClient, w);
  return w.size();
}

void EncodeBlock(benchmark::State& state, const Block& block) {
  GatherWriter w;
  size_t bytes = EncodedSize(block);
  for (auto _ : state) {
    w.Clear();
    WriteBlock(block, revision::kClient, w);
    benchmark::DoNotOptimize(w.spans().data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
}

void DecodeBlock(benchmark::State& state, const Block& block) {
  GatherWriter w;
  WriteBlock(block, revision::kClient, w);
  std::string encoded = w.ToString();
  Block out;
  for (auto _ : state) {
    MemoryReadBuffer in(encoded);
    absl::Status st = ReadBlock(in, revision::kClient, &out);
    if (!st.ok()) state.SkipWithError(std::string(st.message()).c_str());
    benchmark::DoNotOptimize(out.rows());
  }
  state.SetBytesProcessed(static_cast<int64_t>(encoded.size() * state.iterations()));
}

void BM_EncodeUInt64(benchmark::State& state) {
  Block b;
  b.AddColumn("v", MakeUInt64(static_cast<size_t>(state.range(0))));
  EncodeBlock(state, b);
}
BENCHMARK(BM_EncodeUInt64)->Arg(10000)->Arg(1000000);

void BM_DecodeUInt64(benchmark::State& state) {
  Block b;
  b.AddColumn("v", MakeUInt64(static_cast<size_t>(state.range(0))));
  DecodeBlock(state, b);
}
BENCHMARK(BM_DecodeUInt64)->Arg(10000)->Arg(1000000);

// Appending small strings is where encoding happens for String (the column keeps wire layout).
void BM_AppendSmallStrings(benchmark::State& state) {
  const size_t rows = static_cast<size_t>(state.range(0));
  std::vector<std::string> values;
  for (size_t i = 0; i < rows; ++i) values.push_back(Hex16(i * 0x9E3779B97F4A7C15ull));
  ColumnString col;
  for (auto _ : state) {
    col.Clear();
    for (const std::string& v : values) col.Append(v);
    benchmark::DoNotOptimize(col.wire().data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(rows * 17 * state.iterations()));
}
BENCHMARK(BM_AppendSmallStrings)->Arg(10000)->Arg(1000000);

void BM_EncodeSmallStrings(benchmark::State& state) {
  Block b;
  b.AddColumn("s", MakeStrings(static_cast<size_t>(state.range(0)), 16));
  EncodeBlock(state, b);
}
BENCHMARK(BM_EncodeSmallStrings)->Arg(10000)->Arg(1000000);

void BM_DecodeSmallStrings(benchmark::State& state) {
  Block b;
  b.AddColumn("s", MakeStrings(static_cast<size_t>(state.range(0)), 16));
  DecodeBlock(state, b);
}
BENCHMARK(BM_DecodeSmallStrings)->Arg(10000)->Arg(1000000);

void BM_DecodeBigStrings(benchmark::State& state) {
  Block b;
  b.AddColumn("s", MakeStrings(static_cast<size_t>(state.range(0)), 4096));
  DecodeBlock(state, b);
}
BENCHMARK(BM_DecodeBigStrings)->Arg(10000);

void BM_DecodeNullableArrayLowCardinality(benchmark::State& state) {
  const size_t rows = static_cast<size_t>(state.range(0));
  Block b;
  ColumnPtr lc = *CreateColumn("LowCardinality(String)");
  ColumnPtr ns = *CreateColumn("Nullable(UInt32)");
  ColumnPtr arr = *CreateColumn("Array(String)");
  for (size_t i = 0; i < rows; ++i) {
    (void)static_cast<ColumnLowCardinality&>(*lc).AppendString(i % 7 == 0 ? "seven" : "other");
    auto& n = static_cast<ColumnNullable&>(*ns);
    if (i % 3 == 0) {
      n.AppendNull();
    } else {
      n.AppendNotNull();
      static_cast<ColumnFixed&>(*n.nested()).Append<uint32_t>(static_cast<uint32_t>(i));
    }
    auto& a = static_cast<ColumnArray&>(*arr);
    for (size_t k = 0; k < i % 4; ++k) static_cast<ColumnString&>(*a.nested()).Append("tag");
    a.FinishRow();
  }
  b.AddColumn("lc", lc);
  b.AddColumn("ns", ns);
  b.AddColumn("arr", arr);
  DecodeBlock(state, b);
}
BENCHMARK(BM_DecodeNullableArrayLowCardinality)->Arg(100000);

std::string CompressibleBytes(size_t n) {
  std::string s(n, '\0');
  std::mt19937_64 rng(42);
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v = i / 8 + (rng() & 0xff);
    std::memcpy(&s[i], &v, 8);
  }
  return s;
}

void BM_CompressFrame(benchmark::State& state) {
  const auto method = static_cast<CompressionMethod>(state.range(0));
  std::string input = CompressibleBytes(kMaxFrameInput);
  FrameCompressor compressor(method);
  ByteBuffer out;
  std::span<const char> piece(input.data(), input.size());
  for (auto _ : state) {
    out.clear();
    absl::Status st = compressor.Compress(std::span<const std::span<const char>>(&piece, 1), &out);
    if (!st.ok()) state.SkipWithError("compress failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(input.size() * state.iterations()));
}
BENCHMARK(BM_CompressFrame)
    ->Arg(static_cast<int>(CompressionMethod::kLz4))
    ->Arg(static_cast<int>(CompressionMethod::kZstd))
    ->Arg(static_cast<int>(CompressionMethod::kNone));

void BM_DecompressFrame(benchmark::State& state) {
  const auto method = static_cast<CompressionMethod>(state.range(0));
  std::string input = CompressibleBytes(kMaxFrameInput);
  FrameCompressor compressor(method);
  ByteBuffer frame;
  std::span<const char> piece(input.data(), input.size());
  (void)compressor.Compress(std::span<const std::span<const char>>(&piece, 1), &frame);
  auto header = ParseFrameHeader(frame.data());
  std::vector<char> out(input.size());
  for (auto _ : state) {
    absl::Status st = DecompressFrame(frame.data(), frame.size(), *header, out.data());
    if (!st.ok()) state.SkipWithError("decompress failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(input.size() * state.iterations()));
}
BENCHMARK(BM_DecompressFrame)
    ->Arg(static_cast<int>(CompressionMethod::kLz4))
    ->Arg(static_cast<int>(CompressionMethod::kZstd))
    ->Arg(static_cast<int>(CompressionMethod::kNone));

void BM_CityHash128(benchmark::State& state) {
  std::string input = CompressibleBytes(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(CityHash128(input.data(), input.size()));
  state.SetBytesProcessed(static_cast<int64_t>(input.size() * state.iterations()));
}
BENCHMARK(BM_CityHash128)->Arg(64)->Arg(1 << 20);

// AppendRows over rows of the types a typical event table has: integers, a float, strings, a
// DateTime from a timestamp, a DateTime64 from text, a Nullable, an Array, a LowCardinality.
void BM_ConvertRows(benchmark::State& state) {
  namespace iv = ingest::testing;
  const std::vector<std::string> types = {
      "UInt64",           "Int32",         "Float64",
      "String",           "DateTime",      "DateTime64(3)",
      "Nullable(String)", "Array(UInt32)", "LowCardinality(String)"};
  const std::vector<std::string> names = {"id", "n", "x", "s", "t", "t64", "maybe", "list", "kind"};
  iv::TestRows rows;
  const size_t count = static_cast<size_t>(state.range(0));
  for (size_t i = 0; i < count; ++i) {
    rows.Add({iv::UInt(i * 2654435761u), iv::Int(static_cast<int64_t>(i % 1000) - 500),
              iv::Double(static_cast<double>(i) * 0.25), iv::Str(Hex16(i * 0x9E3779B97F4A7C15ull)),
              iv::Ts(1700000000 + static_cast<int64_t>(i)), iv::Str("2024-05-01 12:34:56.789"),
              i % 3 == 0 ? iv::Null() : iv::Str("maybe"),
              iv::Array({iv::UInt(1), iv::UInt(2), iv::UInt(3)}),
              iv::Str(i % 2 == 0 ? "click" : "view")});
  }
  std::vector<ColumnPtr> owned;
  std::vector<Column*> columns;
  for (const std::string& type : types) {
    owned.push_back(*CreateColumn(type));
    columns.push_back(owned.back().get());
  }
  const ingest::ConvertOptions options;
  for (auto _ : state) {
    for (Column* column : columns) column->Truncate(0);
    absl::Status status = ingest::AppendRows(rows, names, columns, options);
    if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
  }
  state.SetItemsProcessed(static_cast<int64_t>(count * state.iterations()));
}
BENCHMARK(BM_ConvertRows)->Arg(1000);

// Fills `ids` (UInt64, data) and `msgs` (String, data + offsets) with `count` rows of a columnar
// request.
void FillRequestColumns(size_t count, v1::Column* ids, v1::Column* msgs) {
  ids->set_type("UInt64");
  msgs->set_type("String");
  for (size_t i = 0; i < count; ++i) {
    const uint64_t id = i * 2654435761u;
    ids->mutable_data()->append(reinterpret_cast<const char*>(&id), sizeof(id));
    msgs->mutable_data()->append(Hex16(i * 0x9E3779B97F4A7C15ull));
    msgs->add_offsets(msgs->data().size());
  }
}

// A columnar request's String (data + offsets) and UInt64 (data) columns into native columns:
// chgate's per-row work for columnar Blocks.
void BM_ConvertProtoBlock(benchmark::State& state) {
  const size_t count = static_cast<size_t>(state.range(0));
  v1::Column ids, msgs;
  FillRequestColumns(count, &ids, &msgs);
  ColumnPtr id_column = *CreateColumn("UInt64");
  ColumnPtr msg_column = *CreateColumn("String");
  for (auto _ : state) {
    id_column->Truncate(0);
    msg_column->Truncate(0);
    absl::Status status = proto_convert::AppendProtoColumn(ids, count, "id", id_column.get());
    if (status.ok())
      status = proto_convert::AppendProtoColumn(msgs, count, "msg", msg_column.get());
    if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
  }
  state.SetItemsProcessed(static_cast<int64_t>(count * state.iterations()));
}
BENCHMARK(BM_ConvertProtoBlock)->Arg(1000);

// The same columns as one request's Block through ConvertBlock, as the service converts it: new
// native columns of the named types for every request.
void BM_ConvertRequestBlock(benchmark::State& state) {
  const size_t count = static_cast<size_t>(state.range(0));
  v1::Block block;
  block.set_rows(count);
  v1::Column* ids = block.add_columns();
  FillRequestColumns(count, ids, block.add_columns());
  const std::vector<std::string> names = {"id", "msg"};
  for (auto _ : state) {
    Block out;
    absl::Status status = proto_convert::ConvertBlock(block, names, &out);
    if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
    benchmark::DoNotOptimize(out.rows());
  }
  state.SetItemsProcessed(static_cast<int64_t>(count * state.iterations()));
}
BENCHMARK(BM_ConvertRequestBlock)->Arg(1000);

}  // namespace
}  // namespace chgate::clickhouse

BENCHMARK_MAIN();
