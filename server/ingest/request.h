// Request and Result: what a caller hands the Ingestor and what it gets back.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/clickhouse/block.h"
#include "server/ingest/observer.h"
#include "server/ingest/value.h"
#include "text/trace_context.h"

namespace chgate::ingest {

struct Request {
  std::string table;  // "db.table" or "table" (default database)
  std::vector<std::string> columns;
  const RowSource* rows = nullptr;  // either rows ...
  // ... or typed columns matching `columns`. The Ingestor takes the block's columns once they
  // are judged to fit the table (the block is left without them) and may append other rows to
  // them: they must not be shared with anything the caller still reads.
  clickhouse::Block* block = nullptr;
  absl::Time deadline = absl::InfiniteFuture();
  std::optional<AckMode> ack;
  // Optional: a repeat of a recent request with the same (table, key) is not inserted again. A
  // repeat of a pending request waits for its outcome; of a successful one gets its result at
  // once (deduplicated = true); a failed request's key is forgotten.
  std::string idempotency_key;
  // The caller's authenticated identity ("" when the API has no authentication): idempotency keys
  // are scoped by it.
  std::string identity;
  // Called once the request's rows are converted (or it failed, or it follows an earlier request
  // with the same idempotency key): `rows` and `block` are no longer read, so the caller can free
  // the message they came from instead of holding it until the commit.
  std::function<void()> release_input;
  // The caller's trace (its W3C traceparent). A batch's INSERT joins the trace of its first
  // traced request; the batch's log lines name the others (linked_trace_ids).
  std::optional<text::TraceContext> trace;
};

struct Result {
  absl::Status status;
  uint64_t rows = 0;
  bool committed = false;  // false for an `accepted` or `persisted` ack
  bool persisted = false;  // durable in the spool (AckMode::kPersisted)
  std::string query_id;
  absl::Time commit_time;
  bool deduplicated = false;  // an earlier request with the same idempotency key did the work
};

}  // namespace chgate::ingest
