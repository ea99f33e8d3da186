// ReadBuffers over the connection: SocketReadBuffer fills a large reused buffer from the socket,
// CompressedReadBuffer turns the compression frames of a block body back into bytes.
//
// Counters, for metrics and the query summary:
//   received_bytes: bytes of the native protocol read from the connection (packet headers and
//                   compressed frames included; over TLS, after decryption);
//   decoded_bytes:  the server's data after decompression: the decompressed size of every
//                   compression frame, plus every byte read while no compression is expected
//                   (SocketReadBuffer::set_plain). Without compression it equals received_bytes;
//                   with compression, only the few uncompressed packet headers around the frames
//                   are left out.
// Both grow as data arrives, not when a query ends. Not thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/clickhouse/compression/frame.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/transport.h"

namespace chgate::clickhouse {

// Process-wide totals the byte counters also add to (shared by every connection that points at
// them; read by the metrics exporter). Same meanings as received_bytes/decoded_bytes above, and
// `sent` counts bytes written to the sockets.
struct IoCounters {
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> decoded{0};
  std::atomic<uint64_t> sent{0};
};

class SocketReadBuffer final : public ReadBuffer {
 public:
  // `transport` must outlive this buffer.
  SocketReadBuffer(Transport* transport, size_t capacity, absl::Duration read_timeout);

  // True when bytes are buffered or arrive within `timeout` (they are then buffered: the
  // window moves on, as a Refill() would); false on timeout. Errors as Refill().
  absl::StatusOr<bool> WaitForData(absl::Duration timeout);
  // Whether bytes are buffered or already arrived, without waiting or reading.
  bool InputPending() const { return available() > 0 || transport_->InputPending(); }

  void set_read_timeout(absl::Duration timeout) { read_timeout_ = timeout; }
  void set_counters(IoCounters* counters) { counters_ = counters; }
  uint64_t received_bytes() const { return received_bytes_; }
  // While `plain` is set (no compression expected), bytes read also count as decoded bytes: they
  // need no decompression. Compressed frames count as decoded in CompressedReadBuffer instead.
  void set_plain(bool plain) { plain_ = plain; }
  uint64_t plain_bytes() const { return plain_bytes_; }

 protected:
  absl::Status Refill() override;

 private:
  void Received(size_t got);

  Transport* transport_;
  ByteBuffer buffer_;
  absl::Duration read_timeout_;
  uint64_t received_bytes_ = 0;
  uint64_t plain_bytes_ = 0;
  bool plain_ = true;
  IoCounters* counters_ = nullptr;
};

class CompressedReadBuffer final : public ReadBuffer {
 public:
  // Reads frames from `source` (which must outlive this buffer). Frames that decompress to more
  // than `max_frame_size` bytes, or claim a larger compressed size, are refused.
  explicit CompressedReadBuffer(ReadBuffer* source,
                                uint32_t max_frame_size = kMaxFrameCompressedSize);

  uint64_t decoded_bytes() const { return decoded_bytes_; }
  uint64_t frames() const { return frames_; }
  // With zero copy on, windows stay valid until ResetArena() (call it before reading the next
  // block, once nothing views the previous one), so decoded columns may view them. Off by
  // default: then one output buffer is reused for every frame.
  void set_zero_copy(bool on) { zero_copy_ = on; }
  bool WindowIsStable() const override { return zero_copy_; }
  void ResetArena() { arena_used_ = 0; }
  void set_counters(IoCounters* counters) { counters_ = counters; }

 protected:
  absl::Status Refill() override;

 private:
  ReadBuffer* source_;
  uint32_t max_frame_size_;
  ByteBuffer staging_;  // only for a frame that straddles the source's window
  // Decompressed frames of the current block: each frame gets its own reused buffer, so every
  // window stays valid until ResetArena() (the next block), and decoded columns can view it.
  std::vector<ByteBuffer> arena_;
  size_t arena_used_ = 0;
  bool zero_copy_ = false;
  uint64_t decoded_bytes_ = 0;
  uint64_t frames_ = 0;
  IoCounters* counters_ = nullptr;
};

}  // namespace chgate::clickhouse
