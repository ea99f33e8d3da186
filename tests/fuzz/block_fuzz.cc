// libFuzzer target for the block decoder (ReadBlock and every column's LoadPrefix/LoadBody).
// The first input byte selects the mode: bit 0 the revision (54412 / 54460); bit 1 clear feeds
// the rest to ReadBlock as a whole block body, bit 1 set puts a fixed block header in front of
// it (one column of a type from kTypes chosen by the second byte, the row count from the third),
// so that the fuzzer spends its time inside the column bodies of nested types.
//
// Whatever decodes must print, and must survive a round trip: WriteBlock then ReadBlock gives
// the same values, and encoding the result again gives the same bytes. Cut into three parts (at
// rows the last input byte chooses) and written as one block through BlockParts, it must give
// the bytes of the parts gathered by Block::Concat: that holds only if BlockParts writes in place
// only columns whose bodies concatenate. (Not always the input's bytes: a gathered
// LowCardinality column has a dictionary of its own.)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/clickhouse/block.h"
#include "server/clickhouse/block_parts.h"
#include "server/clickhouse/text_form.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/gather.h"

namespace {

using chgate::clickhouse::Block;
using chgate::clickhouse::BlockParts;
using chgate::clickhouse::GatherWriter;
using chgate::clickhouse::MemoryReadBuffer;

constexpr const char* kTypes[] = {
    "Array(LowCardinality(Nullable(String)))",
    "Map(String, Array(UInt64))",
    "Tuple(a Nullable(Decimal(18, 4)), b Array(Tuple(UInt8, String)))",
    "LowCardinality(String)",
    "LowCardinality(Nullable(FixedString(2)))",
    "Array(Array(Nullable(UInt8)))",
    "Nullable(String)",
    "FixedString(3)",
    "DateTime64(3, 'UTC')",
    "DateTime('Europe/Moscow')",
    "Date32",
    "Enum8('a' = 1, 'b' = -2)",
    "Enum16('x' = -1000, 'y' = 1000)",
    "UUID",
    "Decimal(38, 10)",
    "Decimal(76, 20)",
    "Int256",
    "UInt128",
    "Float32",
    "Float64",
    "Bool",
    "IPv4",
    "IPv6",
    "Nullable(Nothing)",
    "Map(LowCardinality(String), Nullable(Float64))",
    "Tuple(LowCardinality(String), Array(LowCardinality(String)))",
    "BFloat16",
    "Time",
    "Time64(3)",
    "Variant(Array(UInt8), String, UInt64)",
    "Array(Variant(Int8, String))",
    "Dynamic",
    "Dynamic(max_types=2)",
    "JSON",
    "JSON(a.b UInt32, SKIP c)",
    "AggregateFunction(count)",
    "AggregateFunction(uniq, UInt64)",
    "AggregateFunction(argMax, String, UInt64)",
    "AggregateFunction(quantiles(0.5, 0.9), Float64)",
    "Array(AggregateFunction(groupArray, String))",
    "MultiPolygon",
    "Nested(a UInt8, b LowCardinality(String))",
    "Tuple()",
    "SimpleAggregateFunction(anyLast, Nullable(String))",
};
constexpr size_t kTypeCount = sizeof(kTypes) / sizeof(kTypes[0]);
constexpr size_t kMaxFormattedRows = 1024;

void AppendVarUInt(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void AppendString(std::string_view s, std::string* out) {
  AppendVarUInt(s.size(), out);
  out->append(s);
}

std::string Tsv(const Block& block) {
  std::string out;
  const size_t rows = block.rows() < kMaxFormattedRows ? block.rows() : kMaxFormattedRows;
  for (size_t row = 0; row < rows; ++row) {
    for (const auto& c : block.columns()) {
      AppendTsvValue(*c.column, row, false, &out);
      out.push_back('\t');
      AppendTsvValue(*c.column, row, true, &out);
      out.push_back('\t');
    }
    out.push_back('\n');
  }
  return out;
}

std::string Encode(const Block& block, uint64_t revision) {
  GatherWriter out;
  chgate::clickhouse::WriteBlock(block, revision, out);
  return out.ToString();
}

// `block` cut at rows `cut1` and `cut2` (cut1 <= cut2 <= rows), each part its own copy.
std::vector<std::unique_ptr<Block>> Cut(const Block& block, size_t cut1, size_t cut2) {
  std::vector<std::unique_ptr<Block>> parts;
  const size_t bounds[] = {0, cut1, cut2, block.rows()};
  for (size_t i = 0; i + 1 < 4; ++i) {
    auto part = std::make_unique<Block>();
    part->info() = block.info();
    for (const auto& c : block.columns()) {
      chgate::clickhouse::ColumnPtr column = c.column->CloneEmpty();
      column->AppendRange(*c.column, bounds[i], bounds[i + 1]);
      part->AddColumn(c.name, std::move(column));
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint8_t mode = data[0];
  const uint64_t revision = (mode & 1) != 0 ? 54460 : 54412;
  std::string input;
  if ((mode & 2) != 0) {
    input = std::string("\x01\x00\x02\xff\xff\xff\xff\x00", 8);  // block info
    AppendVarUInt(1, &input);                                    // columns
    AppendVarUInt(data[2] % 17, &input);                         // rows
    AppendString("c", &input);
    AppendString(kTypes[data[1] % kTypeCount], &input);
    if (revision >= 54454) input.push_back('\0');  // has_custom
    input.append(reinterpret_cast<const char*>(data + 3), size - 3);
  } else {
    input.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  }

  Block block;
  MemoryReadBuffer in(input);
  if (!chgate::clickhouse::ReadBlock(in, revision, &block).ok()) return 0;
  if (!block.Validate().ok()) __builtin_trap();
  const std::string tsv = Tsv(block);

  const std::string encoded = Encode(block, revision);
  Block again;
  MemoryReadBuffer in_again(encoded);
  if (!chgate::clickhouse::ReadBlock(in_again, revision, &again).ok()) __builtin_trap();
  if (in_again.position() != encoded.size()) __builtin_trap();
  if (Tsv(again) != tsv) {
    std::fprintf(stderr, "values changed in a round trip:\n%s---\n%s", tsv.c_str(),
                 Tsv(again).c_str());
    __builtin_trap();
  }
  if (Encode(again, revision) != encoded) __builtin_trap();

  if (block.column_count() > 0) {
    const size_t rows = block.rows();
    const size_t cut1 = data[size - 1] % (rows + 1);
    std::vector<std::unique_ptr<Block>> cut = Cut(block, cut1, cut1 + (rows - cut1) / 2);
    std::vector<const Block*> views;
    for (const auto& part : cut) views.push_back(part.get());
    const std::string gathered = Encode(Block::Concat(views), revision);
    const BlockParts parts(std::move(cut));
    if (parts.rows() != rows) __builtin_trap();
    GatherWriter out;
    chgate::clickhouse::WriteBlock(parts, revision, out);
    if (out.ToString() != gathered) __builtin_trap();
  }
  return 0;
}
