// absl::Status -> gRPC status, plus the structured `chgate.v1.Status` detail of the API: the
// ClickHouse exception code and name and, for a rejected value, its row, column, type and value.
// Failed calls carry that detail serialized as the binary trailing-metadata entry
// `chgate-status-bin`; InsertStream carries it in each InsertAck. Plain functions, thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "chgate/v1/chgate.pb.h"

namespace chgate::service {

// Key of the binary trailing-metadata entry that holds a serialized chgate.v1.Status.
inline constexpr char kStatusTrailerKey[] = "chgate-status-bin";

// Longest status message sent to a caller, in bytes (cut at a UTF-8 boundary, ending in "...").
// With the capped fields of the detail, grpc-message plus chgate-status-bin stay under about
// 6 KiB even when every byte needs escaping, inside gRPC's default 8 KiB metadata limit.
inline constexpr size_t kMaxStatusMessageBytes = 1024;

// `status`'s message as sent to callers: cut to kMaxStatusMessageBytes.
std::string StatusMessageText(const absl::Status& status);

// Fills `out` from `status`: code (the absl and gRPC codes have the same numbers), message,
// `clickhouse_code` (from clickhouse::ClickHouseCode), `clickhouse_exception_name` (from
// clickhouse::ClickHouseExceptionName) and
// `value_error` (from ingest::GetValueError). An OK status gives code 0 and nothing else.
void ToProtoStatus(const absl::Status& status, v1::Status* out);

// The gRPC status for `status`, same code number and message (StatusMessageText). When `context` is
// given and the status is not OK, the chgate.v1.Status detail is also added to the call's trailing
// metadata under kStatusTrailerKey; call it before Finish.
grpc::Status ToGrpcStatus(const absl::Status& status, grpc::ServerContextBase* context = nullptr);

}  // namespace chgate::service
