#include "server/clickhouse/protocol/packet_reader.h"

#include "absl/strings/str_cat.h"
#include "server/clickhouse/protocol/revision.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {

ServerPacketReader::ServerPacketReader(ReadBuffer* in, uint64_t revision)
    : in_(in), compressed_in_(in), revision_(revision) {}

absl::Status ServerPacketReader::ReadBlockBody(Block* block, bool compressed) {
  std::string table_name;
  if (revision_ >= revision::kTemporaryTables) {
    CHGATE_RETURN_IF_ERROR(in_->ReadString(&table_name, 1 << 16));
  }
  if (!compressed) return ReadBlock(*in_, revision_, block);
  // The previous block's columns (which may view the arena) are cleared by ReadBlock before
  // anything is read into them, so the arena can be reused now.
  compressed_in_.ResetArena();
  CHGATE_RETURN_IF_ERROR(ReadBlock(compressed_in_, revision_, block));
  if (compressed_in_.available() != 0) {
    return absl::DataLossError(absl::StrCat("block ended ", compressed_in_.available(),
                                            " bytes before the end of its compression frame"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Packet*> ServerPacketReader::Next() {
  uint64_t code = 0;
  CHGATE_RETURN_IF_ERROR(in_->ReadVarUInt(&code));
  Packet& p = packet_;
  switch (static_cast<ServerCode>(code)) {
    case ServerCode::kData:
      p.type = PacketType::kData;
      CHGATE_RETURN_IF_ERROR(ReadBlockBody(&p.block, compressed_));
      break;
    case ServerCode::kTotals:
      p.type = PacketType::kTotals;
      CHGATE_RETURN_IF_ERROR(ReadBlockBody(&p.block, compressed_));
      break;
    case ServerCode::kExtremes:
      p.type = PacketType::kExtremes;
      CHGATE_RETURN_IF_ERROR(ReadBlockBody(&p.block, compressed_));
      break;
    case ServerCode::kLog:
      // Log and ProfileEvents stay uncompressed below revision 54481, above what we advertise.
      p.type = PacketType::kLog;
      CHGATE_RETURN_IF_ERROR(ReadBlockBody(&p.block, false));
      break;
    case ServerCode::kProfileEvents:
      p.type = PacketType::kProfileEvents;
      CHGATE_RETURN_IF_ERROR(ReadBlockBody(&p.block, false));
      break;
    case ServerCode::kProgress:
      p.type = PacketType::kProgress;
      CHGATE_RETURN_IF_ERROR(ReadProgress(*in_, revision_, &p.progress));
      break;
    case ServerCode::kProfileInfo:
      p.type = PacketType::kProfileInfo;
      CHGATE_RETURN_IF_ERROR(ReadProfileInfo(*in_, revision_, &p.profile));
      break;
    case ServerCode::kTableColumns: {
      p.type = PacketType::kTableColumns;
      std::string external_table;
      CHGATE_RETURN_IF_ERROR(in_->ReadString(&external_table, 1 << 16));
      CHGATE_RETURN_IF_ERROR(in_->ReadString(&p.text, 1 << 24));
      break;
    }
    case ServerCode::kEndOfStream:
      p.type = PacketType::kEndOfStream;
      break;
    case ServerCode::kPong:
      p.type = PacketType::kPong;
      break;
    case ServerCode::kException:
      p.type = PacketType::kException;
      p.exception = {};
      CHGATE_RETURN_IF_ERROR(ReadException(*in_, &p.exception));
      break;
    default:
      return absl::DataLossError(absl::StrCat("unknown server packet code ", code));
  }
  return &p;
}

}  // namespace chgate::clickhouse
