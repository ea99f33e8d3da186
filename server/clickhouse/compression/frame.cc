#include "server/clickhouse/compression/frame.h"

#include <lz4.h>
#include <zstd.h>

#include <climits>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/clickhouse/compression/cityhash.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {
namespace {

constexpr size_t kPrefixSize = kFrameChecksumSize + kFrameHeaderSize;
constexpr size_t kMethodOffset = kFrameChecksumSize;
constexpr size_t kCompressedSizeOffset = kFrameChecksumSize + 1;
constexpr size_t kDecompressedSizeOffset = kFrameChecksumSize + 5;

uint32_t LoadLe32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

uint64_t LoadLe64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

void StoreLe32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(static_cast<uint8_t>(v >> (8 * i)));
}

void StoreLe64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(static_cast<uint8_t>(v >> (8 * i)));
}

// Hex of the 16 bytes as they appear on the wire, which is how captures and tools show them.
std::string ChecksumHex(const Hash128& h) {
  char wire[kFrameChecksumSize];
  StoreLe64(wire, h.low);
  StoreLe64(wire + 8, h.high);
  return absl::BytesToHexString(absl::string_view(wire, sizeof(wire)));
}

bool IsNetworkMethod(uint8_t b) {
  return b == static_cast<uint8_t>(CompressionMethod::kNone) ||
         b == static_cast<uint8_t>(CompressionMethod::kLz4) ||
         b == static_cast<uint8_t>(CompressionMethod::kZstd);
}

// One decompression context per thread: ZSTD_decompress() would allocate and free a context of
// ~100 KiB on every frame.
ZSTD_DCtx* ThreadZstdDCtx() {
  struct Deleter {
    void operator()(ZSTD_DCtx* dctx) const { ZSTD_freeDCtx(dctx); }
  };
  thread_local std::unique_ptr<ZSTD_DCtx, Deleter> dctx;
  if (dctx == nullptr) dctx.reset(ZSTD_createDCtx());
  return dctx.get();
}

absl::Status SizeMismatch(const char* what, size_t got, uint32_t want) {
  return absl::DataLossError(absl::StrCat("compression frame: ", what, " payload decompressed to ",
                                          got, " bytes, header says ", want));
}

}  // namespace

absl::StatusOr<FrameHeader> ParseFrameHeader(const char* p, size_t max_decompressed) {
  const auto method = static_cast<uint8_t>(p[kMethodOffset]);
  const uint32_t compressed_size = LoadLe32(p + kCompressedSizeOffset);
  const uint32_t decompressed_size = LoadLe32(p + kDecompressedSizeOffset);
  if (!IsNetworkMethod(method)) {
    const bool storage_codec = method >= 0x91 && method <= 0x9c;
    return absl::DataLossError(absl::StrCat(
        "compression frame: unknown method byte 0x", absl::Hex(method, absl::kZeroPad2),
        storage_codec ? " (a storage codec, not used on the network)" : ""));
  }
  if (compressed_size < kFrameHeaderSize) {
    return absl::DataLossError(absl::StrCat("compression frame: compressed_size ", compressed_size,
                                            " is smaller than the 9-byte header"));
  }
  if (compressed_size > kMaxFrameCompressedSize) {
    return absl::DataLossError(absl::StrCat("compression frame: compressed_size ", compressed_size,
                                            " exceeds the limit of ", kMaxFrameCompressedSize));
  }
  if (decompressed_size > max_decompressed) {
    return absl::DataLossError(absl::StrCat("compression frame: decompressed_size ",
                                            decompressed_size, " exceeds the limit of ",
                                            max_decompressed));
  }
  const auto m = static_cast<CompressionMethod>(method);
  if (m == CompressionMethod::kNone && compressed_size - kFrameHeaderSize != decompressed_size) {
    return absl::DataLossError(absl::StrCat(
        "compression frame: uncompressed frame carries ", compressed_size - kFrameHeaderSize,
        " payload bytes but decompressed_size is ", decompressed_size));
  }
  return FrameHeader{m, compressed_size, decompressed_size};
}

absl::Status DecompressFrame(const char* frame, size_t frame_len, const FrameHeader& h, char* out) {
  if (h.compressed_size < kFrameHeaderSize ||
      frame_len != kFrameChecksumSize + size_t{h.compressed_size}) {
    return absl::InvalidArgumentError(absl::StrCat("compression frame: frame_len ", frame_len,
                                                   " does not match compressed_size ",
                                                   h.compressed_size, " + 16"));
  }
  if (static_cast<uint8_t>(frame[kMethodOffset]) != static_cast<uint8_t>(h.method) ||
      LoadLe32(frame + kCompressedSizeOffset) != h.compressed_size ||
      LoadLe32(frame + kDecompressedSizeOffset) != h.decompressed_size) {
    return absl::InvalidArgumentError("compression frame: header does not match the frame bytes");
  }
  const Hash128 expected{LoadLe64(frame), LoadLe64(frame + 8)};
  const Hash128 actual = CityHash128(frame + kFrameChecksumSize, h.compressed_size);
  if (expected != actual) {
    return absl::DataLossError(absl::StrCat("compression frame: checksum mismatch (expected ",
                                            ChecksumHex(expected), ", actual ", ChecksumHex(actual),
                                            ")"));
  }

  const char* payload = frame + kPrefixSize;
  const size_t payload_size = h.compressed_size - kFrameHeaderSize;
  const size_t n = h.decompressed_size;
  char empty_out;
  if (out == nullptr) {
    if (n != 0) return absl::InvalidArgumentError("compression frame: null output buffer");
    out = &empty_out;  // The libraries want a valid pointer even for 0 bytes.
  }
  switch (h.method) {
    case CompressionMethod::kNone:
      if (payload_size != n) return SizeMismatch("raw", payload_size, h.decompressed_size);
      if (n != 0) std::memcpy(out, payload, n);
      return absl::OkStatus();
    case CompressionMethod::kLz4: {
      // payload_size < 1 GiB by the frame-size cap; only decompressed_size can be too large.
      if (n > static_cast<size_t>(INT_MAX)) {
        return absl::DataLossError("compression frame: LZ4 decompressed_size exceeds 2 GiB");
      }
      const int got =
          LZ4_decompress_safe(payload, out, static_cast<int>(payload_size), static_cast<int>(n));
      if (got < 0) return absl::DataLossError("compression frame: corrupt LZ4 payload");
      if (static_cast<size_t>(got) != n) {
        return SizeMismatch("LZ4", static_cast<size_t>(got), h.decompressed_size);
      }
      return absl::OkStatus();
    }
    case CompressionMethod::kZstd: {
      ZSTD_DCtx* dctx = ThreadZstdDCtx();
      if (dctx == nullptr) {
        return absl::ResourceExhaustedError("compression frame: cannot allocate a ZSTD context");
      }
      const size_t got = ZSTD_decompressDCtx(dctx, out, n, payload, payload_size);
      if (ZSTD_isError(got)) {
        return absl::DataLossError(
            absl::StrCat("compression frame: corrupt ZSTD payload: ", ZSTD_getErrorName(got)));
      }
      if (got != n) return SizeMismatch("ZSTD", got, h.decompressed_size);
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("compression frame: unknown method ",
                                                 static_cast<int>(static_cast<uint8_t>(h.method))));
}

void FrameCompressor::ZstdCCtxDeleter::operator()(ZSTD_CCtx_s* cctx) const { ZSTD_freeCCtx(cctx); }

FrameCompressor::FrameCompressor(CompressionMethod method, int zstd_level) : method_(method) {
  if (method_ == CompressionMethod::kZstd) {
    zstd_.reset(ZSTD_createCCtx());
    CHGATE_CHECK(zstd_ != nullptr);
    CHGATE_CHECK(
        !ZSTD_isError(ZSTD_CCtx_setParameter(zstd_.get(), ZSTD_c_compressionLevel, zstd_level)));
  } else if (method_ == CompressionMethod::kLz4) {
    const auto words = (static_cast<size_t>(LZ4_sizeofState()) + 7) / 8;
    lz4_state_ = std::make_unique<uint64_t[]>(words);
  }
}

FrameCompressor::~FrameCompressor() = default;
FrameCompressor::FrameCompressor(FrameCompressor&&) noexcept = default;
FrameCompressor& FrameCompressor::operator=(FrameCompressor&&) noexcept = default;

absl::Status FrameCompressor::Compress(std::span<const std::span<const char>> pieces,
                                       ByteBuffer* out) {
  size_t total = 0;
  for (const std::span<const char> piece : pieces) {
    if (piece.size() > kMaxFrameInput - total) {
      return absl::InvalidArgumentError(
          absl::StrCat("compression frame: input exceeds ", kMaxFrameInput, " bytes"));
    }
    total += piece.size();
  }

  size_t bound = 0;
  switch (method_) {
    case CompressionMethod::kNone:
      bound = total;
      break;
    case CompressionMethod::kLz4:
      bound = static_cast<size_t>(LZ4_compressBound(static_cast<int>(total)));
      break;
    case CompressionMethod::kZstd:
      bound = ZSTD_compressBound(total);
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "compression frame: unknown method ", static_cast<int>(static_cast<uint8_t>(method_))));
  }

  // Room for the worst case, not initialised; the capacity is kept from earlier frames, so this
  // does not allocate in steady state.
  char* const frame = out->Prepare(kPrefixSize + bound);
  char* const payload = frame + kPrefixSize;

  absl::StatusOr<size_t> payload_size = total;
  switch (method_) {
    case CompressionMethod::kNone: {
      char* dst = payload;
      for (const std::span<const char> piece : pieces) {
        if (piece.empty()) continue;
        std::memcpy(dst, piece.data(), piece.size());
        dst += piece.size();
      }
      break;
    }
    case CompressionMethod::kLz4:
      payload_size = CompressLz4(pieces, total, payload, bound);
      break;
    case CompressionMethod::kZstd:
      payload_size = CompressZstd(pieces, total, payload, bound);
      break;
  }
  if (!payload_size.ok()) return payload_size.status();

  const size_t compressed_size = kFrameHeaderSize + *payload_size;
  frame[kMethodOffset] = static_cast<char>(static_cast<uint8_t>(method_));
  StoreLe32(frame + kCompressedSizeOffset, static_cast<uint32_t>(compressed_size));
  StoreLe32(frame + kDecompressedSizeOffset, static_cast<uint32_t>(total));
  const Hash128 checksum = CityHash128(frame + kFrameChecksumSize, compressed_size);
  StoreLe64(frame, checksum.low);
  StoreLe64(frame + 8, checksum.high);
  out->Commit(kFrameChecksumSize + compressed_size);
  return absl::OkStatus();
}

absl::StatusOr<size_t> FrameCompressor::CompressLz4(std::span<const std::span<const char>> pieces,
                                                    size_t total, char* dst, size_t capacity) {
  // An LZ4 block must be compressed from contiguous input; gather only when there are several
  // non-empty pieces.
  static constexpr char kEmpty = 0;
  const char* src = &kEmpty;
  size_t non_empty = 0;
  for (const std::span<const char> piece : pieces) {
    if (piece.empty()) continue;
    ++non_empty;
    src = piece.data();
  }
  if (non_empty > 1) {
    if (staging_.size() < total) staging_.resize(total);
    char* p = staging_.data();
    for (const std::span<const char> piece : pieces) {
      if (piece.empty()) continue;
      std::memcpy(p, piece.data(), piece.size());
      p += piece.size();
    }
    src = staging_.data();
  }
  // Acceleration 1 gives the same bytes as LZ4_compress_default(), as ClickHouse writes them.
  const int written = LZ4_compress_fast_extState(
      lz4_state_.get(), src, dst, static_cast<int>(total), static_cast<int>(capacity), 1);
  if (written <= 0) return absl::InternalError("compression frame: LZ4 compression failed");
  return static_cast<size_t>(written);
}

absl::StatusOr<size_t> FrameCompressor::CompressZstd(std::span<const std::span<const char>> pieces,
                                                     size_t total, char* dst, size_t capacity) {
  ZSTD_CCtx* const cctx = zstd_.get();
  auto fail = [cctx](const char* reason) {
    ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
    return absl::InternalError(
        absl::StrCat("compression frame: ZSTD compression failed: ", reason));
  };
  // Drops whatever a failed earlier call left behind; the level set at construction stays.
  ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
  // Lets ZSTD size its window to the input and record the content size in the frame header.
  if (const size_t r = ZSTD_CCtx_setPledgedSrcSize(cctx, total); ZSTD_isError(r))
    return fail(ZSTD_getErrorName(r));

  // The last non-empty piece goes in with ZSTD_e_end: when it is the only one, ZSTD compresses it
  // in one pass straight from the caller's memory.
  size_t last = pieces.size();
  for (size_t i = pieces.size(); i > 0; --i) {
    if (!pieces[i - 1].empty()) {
      last = i - 1;
      break;
    }
  }
  ZSTD_outBuffer output{dst, capacity, 0};
  for (size_t i = 0; i < last; ++i) {
    ZSTD_inBuffer input{pieces[i].data(), pieces[i].size(), 0};
    while (input.pos < input.size) {
      const size_t in_before = input.pos;
      const size_t out_before = output.pos;
      const size_t r = ZSTD_compressStream2(cctx, &output, &input, ZSTD_e_continue);
      if (ZSTD_isError(r)) return fail(ZSTD_getErrorName(r));
      if (input.pos == in_before && output.pos == out_before) {
        return fail("no progress within the output bound");
      }
    }
  }
  ZSTD_inBuffer input{nullptr, 0, 0};
  if (last < pieces.size()) input = {pieces[last].data(), pieces[last].size(), 0};
  for (;;) {
    const size_t in_before = input.pos;
    const size_t out_before = output.pos;
    const size_t remaining = ZSTD_compressStream2(cctx, &output, &input, ZSTD_e_end);
    if (ZSTD_isError(remaining)) return fail(ZSTD_getErrorName(remaining));
    if (remaining == 0) break;
    if (input.pos == in_before && output.pos == out_before) {
      return fail("no progress within the output bound");
    }
  }
  return output.pos;
}

}  // namespace chgate::clickhouse
