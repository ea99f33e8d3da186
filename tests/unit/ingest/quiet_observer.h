// An IngestObserver that ignores every call: tests derive from it and record only what they
// look at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "server/ingest/observer.h"

namespace chgate::ingest::testing {

class QuietObserver : public IngestObserver {
 public:
  void Budgets(uint64_t, uint64_t) override {}
  void TableStarted(const std::string&, absl::Duration) override {}
  void RequestDone(const std::string&, const absl::Status&, AckMode, uint64_t) override {}
  void CommitLatency(const std::string&, absl::Duration) override {}
  void MemoryRefused() override {}
  void BatchFlushed(const std::string&, FlushReason, uint64_t, uint64_t, absl::Duration) override {}
  void FlushRetry(const std::string&) override {}
  void FlushFailed(const std::string&, const absl::Status&, std::optional<int32_t>) override {}
  void RowsDropped(const std::string&, DropReason, uint64_t) override {}
  void DelayChanged(const std::string&, absl::Duration) override {}
  void Buffered(uint64_t, uint64_t) override {}
  void WaitingRequests(size_t) override {}
  void RequestBytes(uint64_t) override {}
  void SpoolReplayed(uint64_t) override {}
};

}  // namespace chgate::ingest::testing
