// BatchTraces: the traces of a batch's requests. The batch's INSERT joins the first traced
// request's trace; the others are named in the batch's log lines (up to kMaxLinked distinct
// trace ids).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "server/log/log.h"
#include "text/trace_context.h"

namespace chgate::ingest {

struct BatchTraces {
  static constexpr size_t kMaxLinked = 16;
  std::optional<text::TraceContext> first;
  // Trace ids (high, low) of the other traced requests, told apart by value; formatted only when
  // a line is logged.
  std::vector<std::pair<uint64_t, uint64_t>> linked;
  uint64_t linked_dropped = 0;  // beyond kMaxLinked

  void Add(const text::TraceContext& t);
  // Log fields: trace_id (the INSERT's) and linked_trace_ids.
  void AppendFields(std::vector<log::Field>* fields) const;
};

}  // namespace chgate::ingest
