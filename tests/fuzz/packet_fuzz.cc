// libFuzzer target for the server packet reader: arbitrary bytes go through ServerPacketReader
// over a MemoryReadBuffer at revisions 54412 and 54460, with and without compression, reading
// packets until the first error. Decoded blocks are printed value by value and exceptions turned
// into statuses, so the formatting code sees hostile values too.
//
// The first input byte selects the mode: bit 0 the revision (54412 / 54460), bit 1 compression,
// bit 2 (with compression) "wrap": the rest is taken as a block body and sent as one Data packet
// in valid frames (LZ4 or raw by bit 3, split in two frames at a point chosen by the high
// nibble), so that the block decoder is reached behind the checksums.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/clickhouse/compression/frame.h"
#include "server/clickhouse/protocol/packet_reader.h"
#include "server/clickhouse/text_form.h"
#include "server/clickhouse/wire/buffer.h"

namespace {

using chgate::clickhouse::Block;
using chgate::clickhouse::CompressionMethod;
using chgate::clickhouse::FrameCompressor;
using chgate::clickhouse::MemoryReadBuffer;
using chgate::clickhouse::Packet;
using chgate::clickhouse::PacketType;
using chgate::clickhouse::ServerPacketReader;

constexpr int kMaxPackets = 64;
constexpr size_t kMaxFormattedRows = 256;

void Format(const Block& block) {
  std::string out;
  const size_t rows = block.rows() < kMaxFormattedRows ? block.rows() : kMaxFormattedRows;
  for (const auto& c : block.columns()) {
    if (c.column->Size() != block.rows()) __builtin_trap();  // every column holds every row
    for (size_t row = 0; row < rows; ++row) {
      AppendTsvValue(*c.column, row, false, &out);
      AppendTsvValue(*c.column, row, true, &out);
      out.clear();
    }
  }
}

void AppendFrame(FrameCompressor& compressor, std::string_view body, std::vector<char>* out) {
  const std::span<const char> piece(body.data(), body.size());
  chgate::clickhouse::ByteBuffer frame;
  if (!compressor.Compress(std::span<const std::span<const char>>(&piece, 1), &frame).ok()) {
    __builtin_trap();
  }
  out->insert(out->end(), frame.data(), frame.data() + frame.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const uint64_t revision = (mode & 1) != 0 ? 54460 : 54412;
  const bool compressed = (mode & 2) != 0;

  std::vector<char> stream;
  if (compressed && (mode & 4) != 0) {
    if (rest.size() > chgate::clickhouse::kMaxFrameInput) return 0;
    stream = {'\x01', '\x00'};  // Data, table ""
    FrameCompressor compressor((mode & 8) != 0 ? CompressionMethod::kLz4
                                               : CompressionMethod::kNone);
    const size_t split = rest.size() * (mode >> 4) / 16;
    AppendFrame(compressor, rest.substr(0, split), &stream);
    AppendFrame(compressor, rest.substr(split), &stream);
  } else {
    stream.assign(rest.begin(), rest.end());  // a heap copy of exactly the input
  }

  MemoryReadBuffer in(std::string_view(stream.data(), stream.size()));
  ServerPacketReader reader(&in, revision);
  reader.set_compressed(compressed);
  for (int i = 0; i < kMaxPackets; ++i) {
    auto packet = reader.Next();
    if (!packet.ok()) break;
    const Packet& p = **packet;
    switch (p.type) {
      case PacketType::kData:
      case PacketType::kTotals:
      case PacketType::kExtremes:
      case PacketType::kLog:
      case PacketType::kProfileEvents:
        Format(p.block);
        break;
      case PacketType::kException: {
        const auto status = chgate::clickhouse::ExceptionToStatus(p.exception);
        if (status.ok() || chgate::clickhouse::ClickHouseCode(status) != p.exception.code) {
          __builtin_trap();
        }
        break;
      }
      default:
        break;
    }
  }
  return 0;
}
