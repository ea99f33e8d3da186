// Errors of the chgate client: gRPC statuses turned into absl::Status, with the structured
// `chgate.v1.Status` detail that chgate sends (ClickHouse exception code and name, the rejected
// row/column/value/type) kept as a payload, and one function that renders all of it for people.
// Plain functions, thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "chgate/v1/chgate.pb.h"

namespace chgate::client {

// Binary trailing-metadata key under which chgate sends a serialized chgate.v1.Status.
inline constexpr char kStatusTrailerKey[] = "chgate-status-bin";

// Payload type URL under which the detail is attached to an absl::Status.
inline constexpr char kStatusDetailTypeUrl[] = "type.googleapis.com/chgate.v1.Status";

// The absl::Status for a finished call: same code number and message. When the call's trailing
// metadata holds a parseable `chgate-status-bin`, it is attached as the kStatusDetailTypeUrl
// payload. OK stays OK. Call only after the call finished (the trailers are read from `context`).
absl::Status FromGrpcStatus(const grpc::Status& status, const grpc::ClientContext& context);

// The absl::Status for a chgate.v1.Status (as found in an InsertAck), detail attached.
// Code 0 gives OK.
absl::Status FromProtoStatus(const v1::Status& status);

// The chgate.v1.Status detail attached to `status`, or nullopt.
std::optional<v1::Status> GetStatusDetail(const absl::Status& status);

// One line for people: "INVALID_ARGUMENT: <message>" followed, when the detail adds something
// the message does not already say, by "[ClickHouse 60 DB::Exception]" and
// "[row 3, column 'x', type 'UInt8', value '300']".
std::string FormatError(const absl::Status& status);

}  // namespace chgate::client
