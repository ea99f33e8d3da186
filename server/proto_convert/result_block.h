// Native result columns -> chgate.v1.Column, for the Query RPC. Values are copied in bulk where
// the layouts agree (fixed-width data, null maps, array offsets rebased), strings are appended
// into one buffer without a per-value allocation, LowCardinality is materialized into its inner
// type's layout and UUIDs are reordered into RFC 4122 byte order (see chgate.proto, Column).
// Plain functions over caller-owned objects; thread-compatible.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "chgate/v1/chgate.pb.h"
#include "server/clickhouse/block.h"
#include "server/clickhouse/columns/column.h"

namespace chgate::proto_convert {

// OK when every column of `header` can be carried by the API. Unimplemented naming the column
// otherwise (for types the native layer decodes but the API has no layout for).
absl::Status CheckResultColumns(const clickhouse::Block& header);

// Sets `dst`'s name and type and creates the children the type needs (recursively), with no
// rows. Call once per column of a response block before appending.
void InitResultColumn(const clickhouse::Column& src, std::string_view name, v1::Column* dst);

// Appends rows [begin, end) of `src` to `dst`, a column initialized from the same type that
// already holds `dst_rows` rows.
void AppendResultRows(const clickhouse::Column& src, size_t begin, size_t end, size_t dst_rows,
                      v1::Column* dst);

// Bytes rows [begin, end) of `src` will take in a response message, approximately (exact for
// fixed-width data, offsets and null maps; strings count their wire length; LowCardinality
// counts its dictionary's average value size per row).
size_t EstimateResultBytes(const clickhouse::Column& src, size_t begin, size_t end);

// Appends rows [begin, end) of every column of `src` to `dst` (which holds `dst->rows()` rows and
// was initialized with InitResultColumn for `src`'s columns, or is empty: then it is initialized
// here) and adds to `dst->rows()`.
void AppendResultBlock(const clickhouse::Block& src, size_t begin, size_t end, v1::Block* dst);

}  // namespace chgate::proto_convert
