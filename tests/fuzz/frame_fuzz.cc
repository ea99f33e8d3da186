// libFuzzer target for the compression frame reader: arbitrary bytes go through ParseFrameHeader
// and DecompressFrame twice, once as given and once with the checksum rewritten to match, so the
// LZ4/ZSTD/raw decoders see inputs that the checksum would otherwise reject. Whatever decodes is
// compressed again and must decode back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "server/clickhouse/compression/cityhash.h"
#include "server/clickhouse/compression/frame.h"

namespace {

using chgate::clickhouse::CompressionMethod;
using chgate::clickhouse::FrameCompressor;
using chgate::clickhouse::FrameHeader;

constexpr size_t kPrefix =
    chgate::clickhouse::kFrameChecksumSize + chgate::clickhouse::kFrameHeaderSize;
// Bounds what one input can make the harness allocate.
constexpr size_t kMaxDecompressed = size_t{16} << 20;

void CheckRoundTrip(CompressionMethod method, const std::string& data) {
  if (data.size() > chgate::clickhouse::kMaxFrameInput) return;
  FrameCompressor compressor(method);
  chgate::clickhouse::ByteBuffer compressed;
  const std::span<const char> piece(data);
  if (!compressor.Compress(std::span<const std::span<const char>>(&piece, 1), &compressed).ok()) {
    std::abort();
  }
  // A heap copy of exactly the frame, so that a read past its end is caught.
  const std::vector<char> frame(compressed.data(), compressed.data() + compressed.size());
  const auto header = chgate::clickhouse::ParseFrameHeader(frame.data(), kMaxDecompressed);
  if (!header.ok() ||
      frame.size() != chgate::clickhouse::kFrameChecksumSize + header->compressed_size) {
    std::abort();
  }
  std::string out(header->decompressed_size, '\0');
  if (!chgate::clickhouse::DecompressFrame(frame.data(), frame.size(), *header, out.data()).ok() ||
      out != data) {
    std::abort();
  }
}

void DecodeOne(const char* frame, size_t size) {
  const auto header = chgate::clickhouse::ParseFrameHeader(frame, kMaxDecompressed);
  if (!header.ok()) return;
  const size_t frame_len = chgate::clickhouse::kFrameChecksumSize + header->compressed_size;
  if (frame_len > size) return;
  // Exactly decompressed_size bytes on the heap, so AddressSanitizer sees any overrun.
  std::string out(header->decompressed_size, '\0');
  if (chgate::clickhouse::DecompressFrame(frame, frame_len, *header, out.data()).ok()) {
    CheckRoundTrip(header->method, out);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kPrefix) return 0;
  // A heap copy of exactly `size` bytes, so reads past the input are caught.
  std::vector<char> frame(data, data + size);
  DecodeOne(frame.data(), frame.size());

  const auto header = chgate::clickhouse::ParseFrameHeader(frame.data(), kMaxDecompressed);
  if (!header.ok()) return 0;
  const size_t covered = header->compressed_size;
  if (chgate::clickhouse::kFrameChecksumSize + covered > size) return 0;
  const chgate::clickhouse::Hash128 h = chgate::clickhouse::CityHash128(
      frame.data() + chgate::clickhouse::kFrameChecksumSize, covered);
  for (int i = 0; i < 8; ++i) {
    frame[static_cast<size_t>(i)] = static_cast<char>(static_cast<uint8_t>(h.low >> (8 * i)));
    frame[static_cast<size_t>(8 + i)] = static_cast<char>(static_cast<uint8_t>(h.high >> (8 * i)));
  }
  DecodeOne(frame.data(), frame.size());
  return 0;
}
