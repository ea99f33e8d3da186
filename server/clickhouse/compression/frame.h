// ClickHouse network compression frames (PROTOCOL.md §6), as pure functions over memory:
//   [CityHash128 v1.0.2 of the rest: 16][method: 1][compressed_size: 4 LE][decompressed_size: 4 LE]
//   [payload: compressed_size - 9 bytes]
// compressed_size counts the 9-byte header but not the checksum. Readers call ParseFrameHeader on
// the first 25 bytes, read the rest of the frame, then call DecompressFrame into a buffer of
// decompressed_size bytes that they own. Writers append whole frames with a FrameCompressor.
// The free functions are thread-safe; a FrameCompressor is not (keep one per connection).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/clickhouse/wire/buffer.h"

struct ZSTD_CCtx_s;

namespace chgate::clickhouse {

// The method byte of a frame. Other values (0x91..0x9c) are storage codecs, never sent over the
// network, and are rejected.
enum class CompressionMethod : uint8_t {
  kNone = 0x02,
  kLz4 = 0x82,   // LZ4 raw block; LZ4HC writes the same byte.
  kZstd = 0x90,  // One ZSTD frame.
};

inline constexpr size_t kFrameChecksumSize = 16;
// Method byte + compressed_size + decompressed_size.
inline constexpr size_t kFrameHeaderSize = 9;
// Largest compressed_size a reader accepts (the limit ClickHouse itself enforces).
inline constexpr size_t kMaxFrameCompressedSize = size_t{1} << 30;
// Most input bytes a writer puts into one frame (ClickHouse's max_compress_block_size default).
inline constexpr size_t kMaxFrameInput = size_t{1} << 20;

struct FrameHeader {
  CompressionMethod method;
  uint32_t compressed_size;  // Includes the 9-byte header, excludes the checksum.
  uint32_t decompressed_size;
};

// Parses and validates the header of a frame from `p`, which must point at the frame's first
// kFrameChecksumSize + kFrameHeaderSize (25) readable bytes. Does not verify the checksum and
// never allocates. Returns DataLossError if the method byte is not one of CompressionMethod,
// compressed_size is below 9 or above kMaxFrameCompressedSize, decompressed_size is above
// `max_decompressed`, or a kNone frame's two sizes disagree.
[[nodiscard]] absl::StatusOr<FrameHeader> ParseFrameHeader(const char* p,
                                                           size_t max_decompressed = size_t{1}
                                                                                     << 30);

// Verifies the checksum of the whole frame at `frame` (checksum, header and payload;
// `frame_len` must be kFrameChecksumSize + h.compressed_size) and decompresses its payload into
// `out`, which must have room for exactly h.decompressed_size bytes. `h` is what
// ParseFrameHeader returned for the same bytes. Returns DataLossError on a checksum mismatch, a
// corrupt payload, or a payload that does not decompress to exactly h.decompressed_size bytes
// (`out` may then hold garbage); InvalidArgumentError if `frame_len` or `h` do not match the
// frame bytes; ResourceExhaustedError if a ZSTD context cannot be allocated. ZSTD frames are
// decoded with one context per thread, created on the thread's first ZSTD frame.
[[nodiscard]] absl::Status DecompressFrame(const char* frame, size_t frame_len,
                                           const FrameHeader& h, char* out);

// Writes frames of one method. Holds the reusable compression state (a ZSTD context, or for LZ4
// a staging buffer of up to kMaxFrameInput bytes), so that steady-state calls do not allocate
// once the caller's output buffer has grown. Not thread-safe. Movable, not copyable; a
// moved-from compressor must not be used.
class FrameCompressor {
 public:
  // `zstd_level` is used only by kZstd; out-of-range levels are clamped by ZSTD.
  explicit FrameCompressor(CompressionMethod method, int zstd_level = 1);
  ~FrameCompressor();
  FrameCompressor(FrameCompressor&&) noexcept;
  FrameCompressor& operator=(FrameCompressor&&) noexcept;
  FrameCompressor(const FrameCompressor&) = delete;
  FrameCompressor& operator=(const FrameCompressor&) = delete;

  // Compresses the concatenation of `pieces` (any may be empty; the pieces need not be
  // contiguous) into one frame and appends it, checksum first, to `*out` (whose bytes past its
  // size are never initialised: room for the worst case costs nothing). Returns
  // InvalidArgumentError if the pieces total more than kMaxFrameInput bytes, InternalError if
  // the compression library fails; on error `*out` is left as it was.
  [[nodiscard]] absl::Status Compress(std::span<const std::span<const char>> pieces,
                                      ByteBuffer* out);

  CompressionMethod method() const { return method_; }

 private:
  struct ZstdCCtxDeleter {
    void operator()(ZSTD_CCtx_s* cctx) const;
  };

  // Each writes the payload for `total` input bytes to `dst` (room for `capacity` bytes) and
  // returns its size.
  absl::StatusOr<size_t> CompressLz4(std::span<const std::span<const char>> pieces, size_t total,
                                     char* dst, size_t capacity);
  absl::StatusOr<size_t> CompressZstd(std::span<const std::span<const char>> pieces, size_t total,
                                      char* dst, size_t capacity);

  CompressionMethod method_;
  std::unique_ptr<ZSTD_CCtx_s, ZstdCCtxDeleter> zstd_;  // Only for kZstd.
  std::unique_ptr<uint64_t[]> lz4_state_;               // Only for kLz4; 8-byte aligned.
  std::vector<char> staging_;  // LZ4 input gathered from several pieces; grows, never shrinks.
};

}  // namespace chgate::clickhouse
