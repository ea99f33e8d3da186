#include "server/clickhouse/wire/stream.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {
namespace {

// A frame that straddles the source's window is staged in steps of this size (or of what the
// source already holds), so memory follows the bytes that actually arrive.
constexpr size_t kStagingStep = size_t{1} << 20;

// The most bytes a payload of `h` can decompress to. LZ4 expands at most 255:1 (each extra
// match-length byte adds 255 bytes); ZSTD at most 32768:1 (an RLE block: 3 header bytes and one
// byte for up to 128 KiB). Checked before the output buffer is allocated, so that a small frame
// cannot make the reader allocate what its header claims.
uint64_t MaxDecompressedSize(const FrameHeader& h) {
  const uint64_t payload = h.compressed_size - kFrameHeaderSize;
  switch (h.method) {
    case CompressionMethod::kNone:
      return payload;
    case CompressionMethod::kLz4:
      return payload * 256 + 1024;
    case CompressionMethod::kZstd:
      return payload * 32768 + (uint64_t{128} << 10);
  }
  return 0;
}

}  // namespace

SocketReadBuffer::SocketReadBuffer(Transport* transport, size_t capacity,
                                   absl::Duration read_timeout)
    : transport_(transport), read_timeout_(read_timeout) {
  buffer_.resize(capacity);
}

absl::Status SocketReadBuffer::Refill() {
  CHGATE_ASSIGN_OR_RETURN(size_t got,
                          transport_->ReadSome(buffer_.data(), buffer_.size(), read_timeout_));
  Received(got);
  return absl::OkStatus();
}

absl::StatusOr<bool> SocketReadBuffer::WaitForData(absl::Duration timeout) {
  if (available() > 0) return true;
  CHGATE_ASSIGN_OR_RETURN(size_t got,
                          transport_->TryReadSome(buffer_.data(), buffer_.size(), timeout));
  if (got == 0) return false;
  Received(got);
  return true;
}

void SocketReadBuffer::Received(size_t got) {
  received_bytes_ += got;
  if (plain_) plain_bytes_ += got;
  if (counters_ != nullptr) {
    counters_->received.fetch_add(got, std::memory_order_relaxed);
    if (plain_) counters_->decoded.fetch_add(got, std::memory_order_relaxed);
  }
  SetWindow(buffer_.data(), buffer_.data() + got);
}

CompressedReadBuffer::CompressedReadBuffer(ReadBuffer* source, uint32_t max_frame_size)
    : source_(source), max_frame_size_(max_frame_size) {}

absl::Status CompressedReadBuffer::Refill() {
  constexpr size_t kHead = kFrameChecksumSize + kFrameHeaderSize;
  while (true) {
    char head[kHead];
    const char* head_ptr;
    CHGATE_RETURN_IF_ERROR(source_->Ensure());
    if (source_->available() >= kHead) {
      head_ptr = source_->pos();
    } else {
      CHGATE_RETURN_IF_ERROR(source_->Read(head, kHead));
      head_ptr = head;
    }
    CHGATE_ASSIGN_OR_RETURN(FrameHeader header, ParseFrameHeader(head_ptr, max_frame_size_));
    if (header.compressed_size > max_frame_size_) {
      return absl::DataLossError(absl::StrCat("compressed frame of ", header.compressed_size,
                                              " bytes exceeds the limit of ", max_frame_size_));
    }
    if (header.decompressed_size > MaxDecompressedSize(header)) {
      return absl::DataLossError(
          absl::StrCat("compression frame: decompressed_size ", header.decompressed_size,
                       " is more than a payload of ", header.compressed_size - kFrameHeaderSize,
                       " bytes can hold"));
    }
    const size_t frame_size = kFrameChecksumSize + header.compressed_size;
    const char* frame;
    if (head_ptr == source_->pos() && source_->available() >= frame_size) {
      // The whole frame sits in the receive buffer: decompress it in place.
      frame = source_->pos();
      source_->Advance(frame_size);
    } else {
      // The frame straddles the window: copy it (with the header, wherever that is) into
      // staging_, growing it only as the bytes arrive.
      staging_.clear();
      if (head_ptr != source_->pos()) staging_.Append(head, kHead);
      while (staging_.size() < frame_size) {
        CHGATE_RETURN_IF_ERROR(source_->Ensure());
        const size_t step =
            std::min(frame_size - staging_.size(), std::max(source_->available(), kStagingStep));
        CHGATE_RETURN_IF_ERROR(source_->Read(staging_.Prepare(step), step));
        staging_.Commit(step);
      }
      frame = staging_.data();
    }
    if (!zero_copy_) arena_used_ = 0;
    if (arena_used_ == arena_.size()) arena_.emplace_back();
    ByteBuffer& output = arena_[arena_used_++];
    output.resize(header.decompressed_size);
    CHGATE_RETURN_IF_ERROR(DecompressFrame(frame, frame_size, header, output.data()));
    decoded_bytes_ += header.decompressed_size;
    if (counters_ != nullptr) {
      counters_->decoded.fetch_add(header.decompressed_size, std::memory_order_relaxed);
    }
    ++frames_;
    if (header.decompressed_size == 0) continue;
    SetWindow(output.data(), output.data() + output.size());
    return absl::OkStatus();
  }
}

}  // namespace chgate::clickhouse
