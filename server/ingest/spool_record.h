// The ingest records chgate keeps in its spool (server/spool): a persisted request's converted
// rows, and a batch intent, the list of row records one INSERT is made of. The intent is durable
// before its INSERT is sent, so after a crash the same records are sent again as the same block
// with the same deduplication identity, which a Replicated table then drops as a repeat.
//
//   rows   = u8 kind (1) | u8 version (1) | String database | String table
//            | VarUInt n | n x String column (the request's column list; empty: all)
//            | String idempotency key | VarUInt rows | VarUInt revision | block body
//   intent = u8 kind (2) | u8 version (1) | String database | String table
//            | VarUInt n | n x String column | VarUInt count | count x VarUInt LSN
//
// String is a VarUInt length and the bytes; the block body is the Native encoding at `revision`
// (clickhouse::WriteBlock), so a record is read back into exactly the columns it was written from.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/clickhouse/block.h"
#include "server/ingest/inserter.h"

namespace chgate::ingest {

enum class SpoolRecordKind : uint8_t { kRows = 1, kIntent = 2 };

// The part of a record that says where its rows go (every kind has it).
struct SpoolRecordHeader {
  SpoolRecordKind kind = SpoolRecordKind::kRows;
  TableId table;
  std::vector<std::string> columns;
  // kRows only:
  std::string idempotency_key;
  uint64_t rows = 0;
  // kIntent only: the row records of the INSERT, in block order.
  std::vector<uint64_t> lsns;
};

std::string EncodeRowsRecord(const TableId& table, const std::vector<std::string>& columns,
                             std::string_view idempotency_key, const clickhouse::Block& block);
// The same into `payload` (replacing what it held; its capacity is reused).
void EncodeRowsRecord(const TableId& table, const std::vector<std::string>& columns,
                      std::string_view idempotency_key, const clickhouse::Block& block,
                      std::string* payload);
std::string EncodeIntentRecord(const TableId& table, const std::vector<std::string>& columns,
                               const std::vector<uint64_t>& lsns);

// The INSERT headers chgate has seen, kept beside the spool (<spool-dir>/headers) so that after a
// restart with ClickHouse unreachable, persisted requests for those tables are still converted
// and acked (the header is checked again once ClickHouse answers):
//   "CHGHDR01" | VarUInt n | n x (String key | String time zone | VarUInt columns
//                                 | columns x (String name | String type))
struct KnownHeader {
  std::string key;  // the Ingestor's cache key: table and column list
  TableSchema schema;
};
std::string EncodeHeaders(const std::vector<std::pair<std::string, const TableSchema*>>& headers);
// DataLoss for bytes that are not such a file; types chgate cannot make a column of are skipped.
absl::StatusOr<std::vector<KnownHeader>> DecodeHeaders(std::string_view bytes);

// Reads a record's header, and for kRows with `block` its rows into `*block` (replacing it).
// DataLoss for bytes that are not a record of a known kind and version.
absl::StatusOr<SpoolRecordHeader> DecodeSpoolRecord(std::string_view payload,
                                                    clickhouse::Block* block = nullptr);

}  // namespace chgate::ingest
