#include "server/clickhouse/wire/stream.h"

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"

namespace chgate::clickhouse {

SocketReadBuffer::SocketReadBuffer(Socket* socket, size_t capacity, absl::Duration read_timeout)
    : socket_(socket), read_timeout_(read_timeout) {
  buffer_.resize(capacity);
}

absl::Status SocketReadBuffer::Refill() {
  ASSIGN_OR_RETURN(size_t got, socket_->ReadSome(buffer_.data(), buffer_.size(), read_timeout_));
  received_bytes_ += got;
  SetWindow(buffer_.data(), buffer_.data() + got);
  return absl::OkStatus();
}

CompressedReadBuffer::CompressedReadBuffer(ReadBuffer* source, uint32_t max_frame_size)
    : source_(source), max_frame_size_(max_frame_size) {}

absl::Status CompressedReadBuffer::Refill() {
  constexpr size_t kHead = kFrameChecksumSize + kFrameHeaderSize;
  while (true) {
    char head[kHead];
    const char* head_ptr;
    RETURN_IF_ERROR(source_->Ensure());
    if (source_->available() >= kHead) {
      head_ptr = source_->pos();
    } else {
      RETURN_IF_ERROR(source_->Read(head, kHead));
      head_ptr = head;
    }
    ASSIGN_OR_RETURN(FrameHeader header, ParseFrameHeader(head_ptr, max_frame_size_));
    if (header.compressed_size > max_frame_size_) {
      return absl::DataLossError(absl::StrCat("compressed frame of ", header.compressed_size,
                                              " bytes exceeds the limit of ", max_frame_size_));
    }
    const size_t frame_size = kFrameChecksumSize + header.compressed_size;
    const char* frame;
    if (head_ptr == source_->pos() && source_->available() >= frame_size) {
      // The whole frame sits in the receive buffer: decompress it in place.
      frame = source_->pos();
      source_->Advance(frame_size);
    } else {
      staging_.clear();
      if (head_ptr == source_->pos()) {
        // Header in the window but the frame straddles it: copy all of it.
        staging_.resize(frame_size);
        RETURN_IF_ERROR(source_->Read(staging_.data(), frame_size));
      } else {
        staging_.resize(frame_size);
        std::memcpy(staging_.data(), head, kHead);
        RETURN_IF_ERROR(source_->Read(staging_.data() + kHead, frame_size - kHead));
      }
      frame = staging_.data();
    }
    output_.resize(header.decompressed_size);
    RETURN_IF_ERROR(DecompressFrame(frame, frame_size, header, output_.data()));
    decoded_bytes_ += header.decompressed_size;
    ++frames_;
    if (header.decompressed_size == 0) continue;
    SetWindow(output_.data(), output_.data() + output_.size());
    return absl::OkStatus();
  }
}

}  // namespace chgate::clickhouse
