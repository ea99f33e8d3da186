// Dead letters: spooled batches chgate set aside because ClickHouse refused their rows for good
// (or because some of their records were damaged on disk), one file each in
// <spool-dir>/dead-letter/<intent LSN, 16 hex>.batch. The Ingestor writes them; `chgate spool`
// lists, prints, re-inserts and deletes them. A file is a text header, a blank line, then each
// record:
//
//   chgate dead letter v1
//   table: <database>.<table>
//   columns: <column list as the requests gave it, comma-separated; empty: all>
//   records: <N>
//   rows: <rows in the readable records>
//   identity: <the INSERT's query id and deduplication token>   (optional)
//   unreadable: <LSN,LSN,...>                                    (only when records were damaged)
//   error: <ClickHouse's or chgate's error, on one line>
//
//   N' x (u64 LSN | u32 size | payload)    little-endian; payload: a rows record (spool_record.h)
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/clickhouse/block.h"
#include "server/ingest/inserter.h"

namespace chgate::ingest {

struct DeadLetter {
  TableId table;
  std::vector<std::string> columns;
  uint64_t records = 0;  // in the batch, readable or not
  uint64_t rows = 0;     // in the readable records
  std::string identity;  // empty when the file has none (written before it was recorded)
  std::vector<uint64_t> unreadable;
  std::string error;
  struct Record {
    uint64_t lsn = 0;
    std::string payload;
  };
  std::vector<Record> payloads;  // the readable records, in block order
};

// The file's bytes.
std::string EncodeDeadLetter(const DeadLetter& letter);

// Parses a file. `header_only`: stops after the header (payloads stay empty). DataLoss for bytes
// that are not a dead-letter file of a known version.
absl::StatusOr<DeadLetter> DecodeDeadLetter(std::string_view bytes, bool header_only = false);

// The file name of the batch whose intent has `intent_lsn`.
std::string DeadLetterFileName(uint64_t intent_lsn);

// The rows of every readable record as one block, in order. DataLoss when a record does not
// decode or its columns differ from the first record's.
absl::StatusOr<clickhouse::Block> DeadLetterBlock(const DeadLetter& letter);

}  // namespace chgate::ingest
