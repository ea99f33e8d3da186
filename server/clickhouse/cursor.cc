#include "server/clickhouse/cursor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {

Cursor::Cursor(Connection* conn, QueryParams query, CursorOptions options)
    : conn_(conn),
      options_(std::move(options)),
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

absl::StatusOr<bool> Cursor::WaitUnlessInterrupted() {
  while (true) {
    if (options_.interrupted()) return false;
    CHGATE_ASSIGN_OR_RETURN(bool ready, conn_->WaitForInput(options_.poll_interval));
    if (ready) return true;
  }
}

Block* Cursor::Next() {
  if (interrupted()) return nullptr;
  while (!done_) {
    if (options_.interrupted) {
      absl::StatusOr<bool> go_on = WaitUnlessInterrupted();
      if (!go_on.ok()) {
        Finish(go_on.status());  // the socket's own error, not a later "connection is broken"
        return nullptr;
      }
      if (!*go_on) {
        status_ = absl::CancelledError("query interrupted by the caller");
        return nullptr;
      }
    }
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
          if (options_.on_header) options_.on_header(header_);
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
        if (options_.on_progress) options_.on_progress(p.progress);
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

absl::Status Cursor::Cancel(absl::Duration drain_timeout) {
  if (done_) return absl::OkStatus();
  const absl::Status cancelled = absl::CancelledError("query cancelled");
  absl::Status sent = conn_->SendCancel();
  if (!sent.ok()) {
    Finish(cancelled);
    return sent;
  }
  // Drain: the server answers Cancel with EndOfStream (or an Exception) after what it had sent.
  const absl::Time deadline = absl::Now() + drain_timeout;
  absl::Status drained;
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    absl::StatusOr<bool> ready = conn_->WaitForInput(std::max(left, absl::ZeroDuration()));
    if (ready.ok() && !*ready) {
      drained = absl::DeadlineExceededError(
          absl::StrCat("the server did not end the cancelled query within ",
                       absl::FormatDuration(drain_timeout)));
      conn_->Cancel();
      break;
    }
    // Each read of a packet's remaining bytes is bounded by what is left of the drain time.
    conn_->set_read_timeout(std::max(left, absl::Milliseconds(1)));
    absl::StatusOr<Packet*> packet = conn_->ReceivePacket();
    if (!packet.ok()) {
      // A server exception (e.g. QUERY_WAS_CANCELLED) leaves the connection usable.
      if (!conn_->usable()) drained = packet.status();
      break;
    }
    if ((*packet)->type == PacketType::kEndOfStream) break;
  }
  conn_->set_read_timeout(conn_->options().read_timeout);
  Finish(cancelled);
  return drained;
}

}  // namespace chgate::clickhouse
