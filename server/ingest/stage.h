// Staging: a request's rows or typed block laid out as its table's INSERT header, ready to join
// a batch.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "server/clickhouse/block.h"
#include "server/ingest/convert.h"
#include "server/ingest/inserter.h"
#include "server/ingest/request.h"

namespace chgate::ingest {

// Rows are converted into new columns (all or nothing; times without a zone are read in the
// server's). A typed block is checked against the header (column count and every type) and its
// columns are taken as they are, not copied: on success `request.block` is left without them, on
// failure it is untouched. A request with neither gives an empty block.
absl::StatusOr<std::unique_ptr<clickhouse::Block>> Stage(const Request& request,
                                                         const TableSchema& schema,
                                                         const ConvertOptions& options);

}  // namespace chgate::ingest
