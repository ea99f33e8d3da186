#include "client/sdk/health.h"

#include <grpcpp/generic/generic_stub.h>

#include <future>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/sdk/internal/call_util.h"
#include "client/sdk/status.h"

namespace chgate::client {
namespace {

constexpr char kCheckMethod[] = "/grpc.health.v1.Health/Check";

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

bool ReadVarint(std::string_view* in, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && !in->empty(); shift += 7) {
    const unsigned char b = static_cast<unsigned char>(in->front());
    in->remove_prefix(1);
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// HealthCheckResponse { ServingStatus status = 1; }: finds field 1, skipping any others.
bool ParseResponse(std::string_view in, ServingStatus* status) {
  *status = ServingStatus::kUnknown;
  while (!in.empty()) {
    uint64_t key = 0;
    if (!ReadVarint(&in, &key)) return false;
    const uint64_t field = key >> 3;
    switch (key & 7) {
      case 0: {
        uint64_t v = 0;
        if (!ReadVarint(&in, &v)) return false;
        if (field == 1) *status = v <= 3 ? static_cast<ServingStatus>(v) : ServingStatus::kUnknown;
        break;
      }
      case 1:
        if (in.size() < 8) return false;
        in.remove_prefix(8);
        break;
      case 2: {
        uint64_t length = 0;
        if (!ReadVarint(&in, &length) || length > in.size()) return false;
        in.remove_prefix(length);
        break;
      }
      case 5:
        if (in.size() < 4) return false;
        in.remove_prefix(4);
        break;
      default:
        return false;
    }
  }
  return true;
}

}  // namespace

std::string_view ServingStatusName(ServingStatus status) {
  switch (status) {
    case ServingStatus::kServing:
      return "SERVING";
    case ServingStatus::kNotServing:
      return "NOT_SERVING";
    case ServingStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
    case ServingStatus::kUnknown:
      break;
  }
  return "UNKNOWN";
}

absl::StatusOr<ServingStatus> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                          std::string_view service, absl::Duration timeout) {
  // HealthCheckRequest { string service = 1; }
  std::string request_bytes;
  if (!service.empty()) {
    request_bytes.push_back('\x0a');
    AppendVarint(service.size(), &request_bytes);
    request_bytes.append(service);
  }
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;

  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  internal::SetDeadline(internal::DeadlineFor(timeout, absl::Seconds(5)), &context);
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, kCheckMethod, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) return FromGrpcStatus(status, context);

  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::InternalError("unreadable health response");
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  ServingStatus serving;
  if (!ParseResponse(bytes, &serving)) {
    return absl::InternalError(
        absl::StrCat("malformed health response (", bytes.size(), " bytes)"));
  }
  return serving;
}

}  // namespace chgate::client
