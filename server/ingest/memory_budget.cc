#include "server/ingest/memory_budget.h"

#include "absl/strings/str_format.h"

namespace chgate::ingest {

std::string MemoryBudget::RefusalMessage(uint64_t bytes) const {
  constexpr double kMiB = 1 << 20;
  return absl::StrFormat(
      "chgate's memory budget is full: %.1f MiB of %.1f MiB in use (%.1f MiB of rows buffered "
      "for ClickHouse, %.1f MiB held by requests being converted or waiting for room), this "
      "request needs %.1f MiB; nothing of it was buffered, so it is safe to retry after a backoff",
      static_cast<double>(used()) / kMiB, static_cast<double>(limit_) / kMiB,
      static_cast<double>(buffered()) / kMiB, static_cast<double>(requests()) / kMiB,
      static_cast<double>(bytes) / kMiB);
}

}  // namespace chgate::ingest
