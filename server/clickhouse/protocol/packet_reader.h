// ServerPacketReader reads server packets from any ReadBuffer (a socket, or captured bytes in
// tests): Data/Totals/Extremes blocks (through the compression frames when the query asked for
// compression), Progress, ProfileInfo, TableColumns, Log, ProfileEvents, Exception, Pong and
// EndOfStream. The packet it returns is owned by the reader and valid until the next Next().
// Not thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "server/clickhouse/block.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/stream.h"

namespace chgate::clickhouse {

enum class PacketType {
  kData,
  kTotals,
  kExtremes,
  kProgress,
  kProfileInfo,
  kLog,
  kProfileEvents,
  kTableColumns,
  kEndOfStream,
  kPong,
  kException,
};

struct Packet {
  PacketType type = PacketType::kEndOfStream;
  Block block;                // kData, kTotals, kExtremes, kLog, kProfileEvents
  Progress progress;          // kProgress
  ProfileInfo profile;        // kProfileInfo
  std::string text;           // kTableColumns: the column description
  ServerException exception;  // kException
};

class ServerPacketReader {
 public:
  // `in` must outlive the reader.
  ServerPacketReader(ReadBuffer* in, uint64_t revision);

  void set_revision(uint64_t revision) { revision_ = revision; }
  // Whether block bodies of Data/Totals/Extremes arrive in compression frames.
  void set_compressed(bool compressed) { compressed_ = compressed; }
  uint64_t decoded_bytes() const { return compressed_in_.decoded_bytes(); }
  void set_counters(IoCounters* counters) { compressed_in_.set_counters(counters); }
  // Lets decoded columns view the decompressed frames instead of copying them; the packet's
  // block is then valid only until the next Next() (off by default).
  void set_zero_copy(bool on) { compressed_in_.set_zero_copy(on); }

  // Reads the next packet. Errors are those of the source (OutOfRange when it ends, Unavailable,
  // DeadlineExceeded), DataLoss for malformed packets or unknown packet codes, and
  // Unimplemented/InvalidArgument for column types this client cannot decode.
  absl::StatusOr<Packet*> Next();

 private:
  absl::Status ReadBlockBody(Block* block, bool compressed);

  ReadBuffer* in_;
  CompressedReadBuffer compressed_in_;
  uint64_t revision_;
  bool compressed_ = false;
  Packet packet_;
};

}  // namespace chgate::clickhouse
