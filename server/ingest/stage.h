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

// Array columns whose names share a prefix before a '.' (`n.a`, `n.b`: the elements of a Nested
// structure, as ClickHouse names them) must hold arrays of one size in each row: ClickHouse
// refuses a block where they do not (SIZES_OF_ARRAYS_DOESNT_MATCH), and with it every other
// request of the batch. Returns an InvalidArgument naming the row and both columns (a ValueError
// payload for the second), or OK.
absl::Status CheckNestedSizes(const clickhouse::Block& block);

// Rows are converted into new columns (all or nothing; times without a zone are read in the
// server's). A typed block is checked against the header (column count and every type) and its
// columns are taken as they are, not copied: on success `request.block` is left without them, on
// failure it is untouched. A request with neither gives an empty block. Either way the block
// passes CheckNestedSizes.
absl::StatusOr<std::unique_ptr<clickhouse::Block>> Stage(const Request& request,
                                                         const TableSchema& schema,
                                                         const ConvertOptions& options);

}  // namespace chgate::ingest
