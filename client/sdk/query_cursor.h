// QueryCursor: the rows of one Ingest.Query call, one at a time, fetching the next Block from
// the stream when the current one is used up. Created by Client::Query once the header arrived.
//
//   absl::StatusOr<std::unique_ptr<QueryCursor>> q = client->Query("SELECT id, name FROM t");
//   if (!q.ok()) return q.status();
//   while ((*q)->Next()) {
//     uint64_t id = (*q)->GetUInt64(0).value();
//     std::string_view name = (*q)->GetString(1).value();
//   }
//   if (!(*q)->status().ok()) return (*q)->status();   // error mid-stream, cancel, deadline
//
// The cursor owns the call: destroying it before the end cancels the query (chgate then cancels
// it in ClickHouse). Not thread-safe, except Cancel(), which any thread may call.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chgate/v1/chgate.grpc.pb.h"
#include "client/sdk/column_reader.h"
#include "client/sdk/types.h"

namespace chgate::client {

class QueryCursor {
 public:
  QueryCursor(const QueryCursor&) = delete;
  QueryCursor& operator=(const QueryCursor&) = delete;
  ~QueryCursor();

  // Advances to the next row; returns false at the end of the result or on failure (then
  // status() says which). Reads as many stream messages as needed (progress, empty blocks,
  // totals, extremes and the summary are absorbed on the way).
  bool Next();

  // OK while rows are coming and after a complete result; otherwise the call's status: the
  // server's error (code, message and the chgate-status-bin detail, see client/sdk/status.h),
  // CANCELLED after Cancel(), DEADLINE_EXCEEDED, or INTERNAL for a malformed response.
  const absl::Status& status() const { return status_; }

  // True once the stream ended (successfully or not).
  bool done() const { return done_; }

  // Cancels the query; Next() then returns false and status() is CANCELLED. Thread-safe.
  void Cancel();

  // ---- shape of the result ----
  const v1::QueryHeader& header() const { return header_; }
  size_t column_count() const { return types_.size(); }
  const std::string& column_name(size_t col) const {
    return header_.columns(static_cast<int>(col)).name();
  }
  const ColumnType& column_type(size_t col) const { return types_[col]; }
  // Index of the first column named `name`, or NotFound.
  absl::StatusOr<size_t> ColumnIndex(std::string_view name) const;

  // ---- the current row (after Next() returned true) ----
  // The typed readers return FailedPrecondition when there is no current row, `col` is out of
  // range, the value is NULL or the type cannot be read that way, and OutOfRange when the value
  // does not fit; see client/sdk/column_reader.h for which types each accepts.
  bool IsNull(size_t col) const;
  absl::StatusOr<uint64_t> GetUInt64(size_t col) const;
  absl::StatusOr<int64_t> GetInt64(size_t col) const;
  absl::StatusOr<double> GetFloat64(size_t col) const;
  absl::StatusOr<bool> GetBool(size_t col) const;
  // A view into the current block: valid until the next call to Next().
  absl::StatusOr<std::string_view> GetString(size_t col) const;
  // DateTime, DateTime64, Date, Date32.
  absl::StatusOr<absl::Time> GetDateTime(size_t col) const;
  // The value as text (TabSeparated style by default: what clickhouse-client prints); empty
  // when there is no current row or `col` is out of range.
  std::string FormatValue(size_t col, TextFormat format = TextFormat::kTsv) const;
  void AppendValue(size_t col, TextFormat format, std::string* out) const;
  // The raw column of the current block and the row's index in it, for nested values (with
  // ReadArrayBounds and the other readers of column_reader.h). Requires a current row.
  const v1::Column& column(size_t col) const { return block_.columns(static_cast<int>(col)); }
  uint64_t row_in_block() const { return row_; }

  // ---- whole blocks (the columnar path) ----
  // Advances to the next block with rows, skipping what is left of the current one; false at
  // the end or on failure, as Next(). block() is then that block, every column validated against
  // the header: read whole columns with ViewFixed and ViewStrings (column_reader.h), without a
  // call per value. The block counts as read (rows_read() includes it): a following Next() moves
  // on to the next block.
  bool NextBlock();
  // The current block; valid until the next call to Next() or NextBlock().
  const v1::Block& block() const { return block_; }

  // ---- statistics ----
  // Rows returned by Next() so far.
  uint64_t rows_read() const { return rows_read_; }
  // The final summary; nullptr until the stream ended successfully.
  const v1::QuerySummary* summary() const { return summary_ ? &*summary_ : nullptr; }
  // Sum of the streamed progress increments (QueryOptions::send_progress).
  const v1::Progress& progress() const { return progress_; }
  // The WITH TOTALS row and the extremes, once they arrived; nullptr otherwise.
  const v1::Block* totals() const { return totals_ ? &*totals_ : nullptr; }
  const v1::Block* extremes() const { return extremes_ ? &*extremes_ : nullptr; }
  // Bytes chgate read from ClickHouse for this query (as on the wire) and after decompression,
  // as reported in the summary: 0 until the stream ended successfully.
  uint64_t received_bytes() const { return summary_ ? summary_->received_bytes() : 0; }
  uint64_t decoded_bytes() const { return summary_ ? summary_->decoded_bytes() : 0; }
  // Serialized size of the response messages this client received so far.
  uint64_t response_bytes() const { return response_bytes_; }

 private:
  friend class Client;
  using Reader = grpc::ClientReader<v1::QueryResponse>;

  // Takes over a call whose first message (the header) was read.
  QueryCursor(std::unique_ptr<grpc::ClientContext> context, std::unique_ptr<Reader> reader,
              v1::QueryResponse first);

  // Reads messages until a block with rows arrived (true) or the stream ended (false).
  bool FetchBlock();
  // Ends the call: reads what is left, collects the status (or keeps `status` if not OK).
  void Finish(absl::Status status);
  bool HasValue(size_t col) const { return has_row_ && col < types_.size(); }
  absl::Status NoValue(size_t col) const;

  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<Reader> reader_;
  std::atomic<bool> cancelled_{false};

  v1::QueryHeader header_;
  std::vector<ColumnType> types_;
  v1::Block block_;
  uint64_t row_ = 0;
  bool has_row_ = false;
  bool done_ = false;
  absl::Status status_;

  uint64_t rows_read_ = 0;
  uint64_t response_bytes_ = 0;
  v1::Progress progress_;
  std::optional<v1::QuerySummary> summary_;
  std::optional<v1::Block> totals_;
  std::optional<v1::Block> extremes_;
};

}  // namespace chgate::client
