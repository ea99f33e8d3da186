#include "server/ingest/batch_traces.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace chgate::ingest {

void BatchTraces::Add(const text::TraceContext& t) {
  if (!first.has_value()) {
    first = t;
    return;
  }
  const std::pair<uint64_t, uint64_t> id{t.trace_id_high, t.trace_id_low};
  if (id == std::pair{first->trace_id_high, first->trace_id_low} ||
      std::find(linked.begin(), linked.end(), id) != linked.end()) {
    return;
  }
  if (linked.size() < kMaxLinked) {
    linked.push_back(id);
  } else {
    ++linked_dropped;
  }
}

void BatchTraces::AppendFields(std::vector<log::Field>* fields) const {
  if (!first.has_value()) return;
  fields->emplace_back("trace_id", first->TraceIdHex());
  if (!linked.empty()) {
    std::string ids;
    for (const auto& [high, low] : linked) {
      if (!ids.empty()) ids.push_back(',');
      ids += text::TraceContext{.trace_id_high = high, .trace_id_low = low}.TraceIdHex();
    }
    if (linked_dropped > 0) absl::StrAppend(&ids, ",+", linked_dropped, " more");
    fields->emplace_back("linked_trace_ids", ids);
  }
}

}  // namespace chgate::ingest
