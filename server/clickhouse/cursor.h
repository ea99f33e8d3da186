// Cursor: pulls a SELECT's blocks one at a time from a Connection, so the caller decides when to
// read more (a slow consumer stops reading the socket, and TCP flow control slows the server).
// The block returned by Next() is owned by the connection and valid until the following Next():
// its columns are reused from block to block, so steady-state reading allocates nothing. The
// caller may take the memory of its columns (ColumnFixed::SwapValues) to keep a block's values
// past that point; the next block is then decoded into what the columns hold instead.
//
//   Cursor cursor(conn, {.query = "SELECT ..."});
//   while (const Block* block = cursor.Next()) { ... }
//   if (!cursor.status().ok()) ...
//
// received_bytes() counts bytes read from the socket, decoded_bytes() bytes produced by
// decompressing frames (0 without compression); both cover this query only and grow while it
// runs. Not thread-safe; Cancel() may be called from another thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/clickhouse/connection.h"

namespace chgate::clickhouse {

struct CursorOptions {
  // Called from Next() with each Progress increment as it arrives (progress() has the sum).
  std::function<void(const Progress&)> on_progress;
  // Called from Next() as soon as the result's columns are known (the server sends them before
  // it starts executing), with the header block.
  std::function<void(const Block&)> on_header;
  // When set, Next() waits for the server in steps of `poll_interval` and asks this between
  // packets and between steps; once it returns true, Next() returns nullptr with status
  // Cancelled while the query still runs in the server: the caller then calls Cancel().
  std::function<bool()> interrupted;
  absl::Duration poll_interval = absl::Milliseconds(50);
};

class Cursor {
 public:
  // Sends the query; errors surface through Next()/status().
  Cursor(Connection* conn, QueryParams query, CursorOptions options = {});
  ~Cursor();
  Cursor(const Cursor&) = delete;
  Cursor& operator=(const Cursor&) = delete;

  // The next non-empty data block, or nullptr at the end of the result or on error.
  Block* Next();
  // OK after the whole result was read; the error otherwise (a server Exception mapped by
  // ExceptionToStatus, or an I/O or protocol error).
  const absl::Status& status() const { return status_; }
  bool done() const { return done_; }

  // The result's columns (the server's first, empty block); empty until the first Next().
  const Block& header() const { return header_; }
  const std::optional<Block>& totals() const { return totals_; }
  const std::optional<Block>& extremes() const { return extremes_; }
  const Progress& progress() const { return progress_; }
  const std::optional<ProfileInfo>& profile() const { return profile_; }
  uint64_t rows() const { return rows_; }
  uint64_t blocks() const { return blocks_; }
  uint64_t received_bytes() const { return conn_->received_bytes() - received_at_start_; }
  uint64_t decoded_bytes() const { return conn_->decoded_bytes() - decoded_at_start_; }

  // Asks the server to stop the query and reads what remains in flight until EndOfStream or an
  // Exception, for at most `drain_timeout`: the connection is then reusable. If draining fails
  // or takes longer, the connection is shut down (usable() is false, the pool discards it).
  // Returns the status of the drain (OK when the connection is reusable). status() becomes
  // Cancelled unless the query had already ended.
  absl::Status Cancel(absl::Duration drain_timeout = absl::Seconds(5));
  // Whether the query still runs in the server (Next() returned nullptr after an interrupt).
  bool interrupted() const { return !done_ && absl::IsCancelled(status_); }

 private:
  void Finish(absl::Status status);

  // Waits until a packet can be read (true) or the caller interrupts (false); errors are the
  // socket's.
  absl::StatusOr<bool> WaitUnlessInterrupted();

  Connection* conn_;
  CursorOptions options_;
  absl::Status status_;
  bool done_ = false;
  bool header_seen_ = false;
  Block header_;
  std::optional<Block> totals_;
  std::optional<Block> extremes_;
  Progress progress_;
  std::optional<ProfileInfo> profile_;
  uint64_t rows_ = 0;
  uint64_t blocks_ = 0;
  uint64_t received_at_start_;
  uint64_t decoded_at_start_;
};

}  // namespace chgate::clickhouse
