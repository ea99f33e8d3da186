#include "server/service/call_trace.h"

#include <string_view>

namespace chgate::service {
namespace {

// The single value of `key`, or nullopt when absent or repeated.
std::optional<std::string_view> OneValue(const grpc::ServerContextBase& context,
                                         std::string_view key) {
  const auto& metadata = context.client_metadata();
  const auto [first, last] = metadata.equal_range(grpc::string_ref(key.data(), key.size()));
  if (first == last || std::next(first) != last) return std::nullopt;
  return std::string_view(first->second.data(), first->second.size());
}

}  // namespace

std::optional<text::TraceContext> CallTrace(const grpc::ServerContextBase& context) {
  const std::optional<std::string_view> traceparent = OneValue(context, "traceparent");
  if (!traceparent.has_value()) return std::nullopt;
  return text::ParseTraceparent(*traceparent, OneValue(context, "tracestate").value_or(""));
}

}  // namespace chgate::service
