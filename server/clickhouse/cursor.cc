#include "server/clickhouse/cursor.h"

namespace chgate::clickhouse {

Cursor::Cursor(Connection* conn, QueryParams query)
    : conn_(conn),
      received_at_start_(conn->received_bytes()),
      decoded_at_start_(conn->decoded_bytes()) {
  absl::Status sent = conn_->SendQuery(std::move(query));
  if (!sent.ok()) Finish(std::move(sent));
}

Cursor::~Cursor() {
  if (!done_) (void)Cancel();
}

void Cursor::Finish(absl::Status status) {
  done_ = true;
  status_ = std::move(status);
}

const Block* Cursor::Next() {
  while (!done_) {
    absl::StatusOr<Packet*> packet = conn_->ReceivePacket();
    if (!packet.ok()) {
      Finish(packet.status());
      return nullptr;
    }
    Packet& p = **packet;
    switch (p.type) {
      case PacketType::kData:
        if (!header_seen_) {
          // The first block describes the result's columns.
          header_seen_ = true;
          header_.Clear();
          for (const NamedColumn& c : p.block.columns()) {
            header_.AddColumn(c.name, c.column->CloneEmpty());
          }
          if (p.block.rows() == 0) break;
        }
        if (p.block.rows() == 0) break;
        rows_ += p.block.rows();
        ++blocks_;
        return &p.block;
      case PacketType::kTotals:
        totals_ = p.block.Clone();
        break;
      case PacketType::kExtremes:
        extremes_ = p.block.Clone();
        break;
      case PacketType::kProgress:
        progress_.Add(p.progress);
        break;
      case PacketType::kProfileInfo:
        profile_ = p.profile;
        break;
      case PacketType::kEndOfStream:
        Finish(absl::OkStatus());
        return nullptr;
      default:
        break;
    }
  }
  return nullptr;
}

absl::Status Cursor::Cancel() {
  if (done_) return absl::OkStatus();
  absl::Status sent = conn_->SendCancel();
  if (!sent.ok()) {
    Finish(absl::CancelledError("query cancelled"));
    return sent;
  }
  // Drain: the server answers Cancel with EndOfStream (or an Exception) after what it had sent.
  while (true) {
    absl::StatusOr<Packet*> packet = conn_->ReceivePacket();
    if (!packet.ok()) {
      // A server exception (e.g. QUERY_WAS_CANCELLED) leaves the connection usable.
      Finish(absl::CancelledError("query cancelled"));
      return conn_->usable() ? absl::OkStatus() : packet.status();
    }
    if ((*packet)->type == PacketType::kEndOfStream) {
      Finish(absl::CancelledError("query cancelled"));
      return absl::OkStatus();
    }
  }
}

}  // namespace chgate::clickhouse
