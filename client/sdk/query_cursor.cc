#include "client/sdk/query_cursor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/sdk/internal/strings.h"
#include "client/sdk/status.h"

namespace chgate::client {
namespace {

void AddProgress(const v1::Progress& delta, v1::Progress* total) {
  total->set_read_rows(total->read_rows() + delta.read_rows());
  total->set_read_bytes(total->read_bytes() + delta.read_bytes());
  total->set_total_rows_to_read(total->total_rows_to_read() + delta.total_rows_to_read());
  total->set_total_bytes_to_read(total->total_bytes_to_read() + delta.total_bytes_to_read());
  total->set_written_rows(total->written_rows() + delta.written_rows());
  total->set_written_bytes(total->written_bytes() + delta.written_bytes());
  total->set_elapsed_ns(total->elapsed_ns() + delta.elapsed_ns());
}

absl::Status Malformed(std::string_view what) {
  return absl::InternalError(absl::StrCat("malformed Query response: ", internal::Sv(what)));
}

}  // namespace

QueryCursor::QueryCursor(std::unique_ptr<grpc::ClientContext> context,
                         std::unique_ptr<Reader> reader, v1::QueryResponse first)
    : context_(std::move(context)), reader_(std::move(reader)) {
  response_bytes_ += first.ByteSizeLong();
  if (first.kind_case() != v1::QueryResponse::kHeader) {
    Finish(Malformed("the first message is not the header"));
    return;
  }
  header_ = std::move(*first.mutable_header());
  const absl::TimeZone server_zone = LoadZoneOrUtc(header_.timezone());
  for (const v1::ColumnSchema& schema : header_.columns()) {
    absl::StatusOr<ColumnType> type = ParseColumnType(schema.type());
    if (!type.ok()) {
      Finish(absl::Status(type.status().code(),
                          absl::StrCat("column ", schema.name(), ": ", type.status().message())));
      return;
    }
    ApplyDefaultTimeZone(server_zone, &*type);
    types_.push_back(*std::move(type));
  }
}

QueryCursor::~QueryCursor() {
  if (!done_) {
    context_->TryCancel();
    Finish(absl::CancelledError("query cursor destroyed before the end"));
  }
}

void QueryCursor::Cancel() {
  cancelled_.store(true);
  context_->TryCancel();
}

absl::StatusOr<size_t> QueryCursor::ColumnIndex(std::string_view name) const {
  for (int i = 0; i < header_.columns_size(); ++i) {
    if (header_.columns(i).name() == name) return static_cast<size_t>(i);
  }
  return absl::NotFoundError(absl::StrCat("no result column named '", internal::Sv(name), "'"));
}

bool QueryCursor::Next() {
  if (done_ && !has_row_) return false;
  if (has_row_ && row_ + 1 < block_.rows()) {
    ++row_;
    ++rows_read_;
    return true;
  }
  has_row_ = false;
  if (done_ || !FetchBlock()) return false;
  row_ = 0;
  has_row_ = true;
  ++rows_read_;
  return true;
}

bool QueryCursor::NextBlock() {
  has_row_ = false;
  if (done_ || !FetchBlock()) return false;
  // The block is consumed whole: stand on its last row, so Next() fetches the following one.
  row_ = block_.rows() - 1;
  has_row_ = true;
  rows_read_ += block_.rows();
  return true;
}

bool QueryCursor::FetchBlock() {
  v1::QueryResponse response;
  while (!done_) {
    if (cancelled_.load()) {
      Finish(absl::CancelledError("query cancelled by the client"));
      return false;
    }
    if (!reader_->Read(&response)) {
      Finish(absl::OkStatus());
      return false;
    }
    response_bytes_ += response.ByteSizeLong();
    switch (response.kind_case()) {
      case v1::QueryResponse::kBlock: {
        if (summary_.has_value() || totals_.has_value() || extremes_.has_value()) {
          Finish(Malformed("a block after the totals, extremes or summary"));
          return false;
        }
        v1::Block& block = *response.mutable_block();
        if (static_cast<size_t>(block.columns_size()) != types_.size()) {
          Finish(Malformed(absl::StrCat("a block with ", block.columns_size(),
                                        " columns for a header of ", types_.size())));
          return false;
        }
        for (size_t i = 0; i < types_.size(); ++i) {
          absl::Status valid =
              ValidateColumn(block.columns(static_cast<int>(i)), types_[i], block.rows());
          if (!valid.ok()) {
            Finish(Malformed(absl::StrCat("column ", column_name(i), ": ", valid.message())));
            return false;
          }
        }
        if (block.rows() == 0) continue;
        block_ = std::move(block);
        return true;
      }
      case v1::QueryResponse::kProgress:
        AddProgress(response.progress(), &progress_);
        break;
      case v1::QueryResponse::kTotals:
      case v1::QueryResponse::kExtremes: {
        const bool totals = response.kind_case() == v1::QueryResponse::kTotals;
        v1::Block& block = totals ? *response.mutable_totals() : *response.mutable_extremes();
        bool valid = static_cast<size_t>(block.columns_size()) == types_.size();
        for (size_t i = 0; valid && i < types_.size(); ++i) {
          valid = ValidateColumn(block.columns(static_cast<int>(i)), types_[i], block.rows()).ok();
        }
        if (!valid) {
          Finish(Malformed(totals ? "totals" : "extremes"));
          return false;
        }
        (totals ? totals_ : extremes_) = std::move(block);
        break;
      }
      case v1::QueryResponse::kSummary:
        summary_ = std::move(*response.mutable_summary());
        break;
      case v1::QueryResponse::kHeader:
        Finish(Malformed("a second header"));
        return false;
      case v1::QueryResponse::KIND_NOT_SET:
        break;  // a kind added in a later API version
    }
  }
  return false;
}

void QueryCursor::Finish(absl::Status status) {
  if (done_) return;
  done_ = true;
  has_row_ = false;
  if (!status.ok()) {
    // Stop the call before collecting its status, so Finish below does not wait for the rest.
    context_->TryCancel();
    v1::QueryResponse ignored;
    while (reader_->Read(&ignored)) {
    }
    (void)reader_->Finish();
    status_ = std::move(status);
    return;
  }
  const grpc::Status grpc_status = reader_->Finish();
  if (cancelled_.load() && !grpc_status.ok()) {
    status_ = absl::CancelledError("query cancelled by the client");
    return;
  }
  status_ = FromGrpcStatus(grpc_status, *context_);
  if (status_.ok() && !summary_.has_value()) {
    status_ = Malformed("the stream ended without a summary");
  }
}

absl::Status QueryCursor::NoValue(size_t col) const {
  if (!has_row_) return absl::FailedPreconditionError("no current row (call Next() first)");
  return absl::FailedPreconditionError(
      absl::StrCat("column ", col, " out of range (", types_.size(), " columns)"));
}

bool QueryCursor::IsNull(size_t col) const {
  return HasValue(col) && IsNullAt(column(col), types_[col], row_);
}

absl::StatusOr<uint64_t> QueryCursor::GetUInt64(size_t col) const {
  if (!HasValue(col)) return NoValue(col);
  return ReadUInt64(column(col), types_[col], row_);
}

absl::StatusOr<int64_t> QueryCursor::GetInt64(size_t col) const {
  if (!HasValue(col)) return NoValue(col);
  return ReadInt64(column(col), types_[col], row_);
}

absl::StatusOr<double> QueryCursor::GetFloat64(size_t col) const {
  if (!HasValue(col)) return NoValue(col);
  return ReadFloat64(column(col), types_[col], row_);
}

absl::StatusOr<bool> QueryCursor::GetBool(size_t col) const {
  if (!HasValue(col)) return NoValue(col);
  return ReadBool(column(col), types_[col], row_);
}

absl::StatusOr<std::string_view> QueryCursor::GetString(size_t col) const {
  if (!HasValue(col)) return NoValue(col);
  return ReadString(column(col), types_[col], row_);
}

absl::StatusOr<absl::Time> QueryCursor::GetDateTime(size_t col) const {
  if (!HasValue(col)) return NoValue(col);
  return ReadTime(column(col), types_[col], row_);
}

std::string QueryCursor::FormatValue(size_t col, TextFormat format) const {
  std::string out;
  AppendValue(col, format, &out);
  return out;
}

void QueryCursor::AppendValue(size_t col, TextFormat format, std::string* out) const {
  if (!HasValue(col)) return;
  AppendValueText(column(col), types_[col], row_, format, out);
}

}  // namespace chgate::client
