#include "server/service/status.h"

#include <optional>
#include <string>

#include "server/clickhouse/protocol/packets.h"
#include "server/ingest/value_error.h"

namespace chgate::service {

std::string StatusMessageText(const absl::Status& status) {
  const std::string_view message(status.message().data(), status.message().size());
  return ingest::TruncateText(message, kMaxStatusMessageBytes);
}

void ToProtoStatus(const absl::Status& status, v1::Status* out) {
  out->Clear();
  out->set_code(static_cast<int32_t>(status.code()));
  if (status.ok()) return;
  // Every text field is cut: names and values come from callers and from ClickHouse messages
  // that repeat them, and the whole detail must fit a client's trailing-metadata limit.
  out->set_message(StatusMessageText(status));
  if (std::optional<int32_t> code = clickhouse::ClickHouseCode(status)) {
    out->set_clickhouse_code(*code);
    out->set_clickhouse_exception_name(ingest::TruncateText(
        clickhouse::ClickHouseExceptionName(status), ingest::kMaxNameTextBytes));
  }
  if (std::optional<ingest::ValueError> error = ingest::GetValueError(status)) {
    v1::ValueError* v = out->mutable_value_error();
    if (error->row.has_value()) v->set_row_index(*error->row);
    v->set_column(ingest::TruncateText(error->column, ingest::kMaxNameTextBytes));
    v->set_type(ingest::TruncateText(error->type, 2 * ingest::kMaxNameTextBytes));
    v->set_value(ingest::TruncateText(error->value, ingest::kMaxValueTextBytes));
  }
}

grpc::Status ToGrpcStatus(const absl::Status& status, grpc::ServerContextBase* context) {
  if (status.ok()) return grpc::Status::OK;
  if (context != nullptr) {
    v1::Status detail;
    ToProtoStatus(status, &detail);
    context->AddTrailingMetadata(kStatusTrailerKey, detail.SerializeAsString());
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), StatusMessageText(status));
}

}  // namespace chgate::service
