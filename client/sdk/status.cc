#include "client/sdk/status.h"

#include <string_view>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace chgate::client {

absl::Status FromProtoStatus(const v1::Status& status) {
  if (status.code() == 0) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(status.code()), status.message());
  out.SetPayload(kStatusDetailTypeUrl, absl::Cord(status.SerializeAsString()));
  return out;
}

absl::Status FromGrpcStatus(const grpc::Status& status, const grpc::ClientContext& context) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find(kStatusTrailerKey);
  if (it != trailers.end()) {
    v1::Status detail;
    if (detail.ParseFromArray(it->second.data(), static_cast<int>(it->second.size()))) {
      out.SetPayload(kStatusDetailTypeUrl, absl::Cord(detail.SerializeAsString()));
    }
  }
  return out;
}

std::optional<v1::Status> GetStatusDetail(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kStatusDetailTypeUrl);
  if (!payload.has_value()) return std::nullopt;
  v1::Status detail;
  if (!detail.ParseFromString(std::string(*payload))) return std::nullopt;
  return detail;
}

std::string FormatError(const absl::Status& status) {
  if (status.ok()) return "OK";
  const std::string_view message(status.message().data(), status.message().size());
  std::string out = absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
  std::optional<v1::Status> detail = GetStatusDetail(status);
  if (!detail.has_value()) return out;
  if (detail->clickhouse_code() != 0) {
    const std::string code = absl::StrCat(detail->clickhouse_code());
    if (message.find(absl::StrCat("error ", code)) == std::string_view::npos &&
        message.find(absl::StrCat("Code: ", code)) == std::string_view::npos) {
      absl::StrAppend(&out, " [ClickHouse ", code);
      if (!detail->clickhouse_exception_name().empty()) {
        absl::StrAppend(&out, " ", detail->clickhouse_exception_name());
      }
      out.push_back(']');
    }
  }
  if (detail->has_value_error()) {
    const v1::ValueError& v = detail->value_error();
    // chgate's messages usually name the row and column already; add the fields only if not.
    const bool named = !v.column().empty() && message.find(v.column()) != std::string_view::npos &&
                       (!v.has_row_index() || message.find(absl::StrCat("row ", v.row_index())) !=
                                                  std::string_view::npos);
    if (named) return out;
    std::string parts;
    if (v.has_row_index()) absl::StrAppend(&parts, "row ", v.row_index());
    if (!v.column().empty()) {
      absl::StrAppend(&parts, parts.empty() ? "" : ", ", "column '", v.column(), "'");
    }
    if (!v.type().empty())
      absl::StrAppend(&parts, parts.empty() ? "" : ", ", "type '", v.type(), "'");
    if (!v.value().empty()) {
      absl::StrAppend(&parts, parts.empty() ? "" : ", ", "value '", v.value(), "'");
    }
    if (!parts.empty()) absl::StrAppend(&out, " [", parts, "]");
  }
  return out;
}

}  // namespace chgate::client
