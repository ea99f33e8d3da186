// The spool's on-disk format: segment header, records, commit ranges, and the scan that
// validates a segment's bytes. Pure functions over memory (no I/O), so recovery's decisions can be
// tested and fuzzed without files. All integers are little-endian.
//
//   segment  = header record*
//   header   = "CHGWAL01" | u32 version (1) | u32 header size (32) | u64 first LSN
//              | u32 reserved (0) | u32 CRC-32C of the 28 bytes before it
//   record   = u32 payload length | u32 CRC-32C of (LSN, type, payload) | u64 LSN | u8 type
//              | payload
//   kCommit payload = u32 count | count x (u64 first LSN, u64 last LSN), inclusive ranges
//
// A segment's file is named after its first LSN (16 lowercase hex digits + ".wal"); the LSNs of
// its records are consecutive from there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace chgate::spool {

enum class RecordType : uint8_t {
  kData = 1,    // an opaque payload given to Spool::Append
  kCommit = 2,  // LSN ranges whose kData records ClickHouse has committed
};

inline constexpr std::string_view kSegmentMagic = "CHGWAL01";
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr size_t kSegmentHeaderSize = 32;
inline constexpr size_t kRecordHeaderSize = 17;
// Longer lengths are malformed by definition: a garbage length field must not make recovery
// allocate or skip gigabytes.
inline constexpr uint32_t kMaxPayloadSize = 1u << 30;

// An inclusive range of LSNs.
struct LsnRange {
  uint64_t first = 0;
  uint64_t last = 0;
  friend bool operator==(const LsnRange&, const LsnRange&) = default;
};

std::string EncodeSegmentHeader(uint64_t first_lsn);
// Appends one record to `out`.
void AppendRecord(std::string& out, uint64_t lsn, RecordType type, std::string_view payload);
inline size_t RecordSize(size_t payload_size) { return kRecordHeaderSize + payload_size; }

std::string EncodeCommitPayload(const std::vector<LsnRange>& ranges);
// InvalidArgument when the payload's size disagrees with its count or a range is reversed.
absl::StatusOr<std::vector<LsnRange>> DecodeCommitPayload(std::string_view payload);
// Sorted, merged ranges covering `lsns` (any order, duplicates allowed).
std::vector<LsnRange> RangesOf(std::vector<uint64_t> lsns);

// The payload of the record at the start of `bytes` (its header and payload, as read back from a
// segment), after checking its length, CRC, LSN (`lsn`) and type (kData). DataLoss otherwise.
absl::StatusOr<std::string_view> CheckDataRecord(std::string_view bytes, uint64_t lsn);

// "<16 hex digits>.wal" for `first_lsn`; and back (nullopt for any other name).
std::string SegmentFileName(uint64_t first_lsn);
std::optional<uint64_t> ParseSegmentFileName(std::string_view name);

// One valid record of a scanned segment; `payload` points into the scanned bytes.
struct ScannedRecord {
  uint64_t lsn = 0;
  RecordType type = RecordType::kData;
  std::string_view payload;
  uint64_t offset = 0;  // of the record's first byte in the segment
};

struct SegmentScan {
  bool header_ok = false;
  std::vector<ScannedRecord> records;  // the valid records, in order, up to the first bad byte
  uint64_t good_end = 0;               // offset just past the last valid record (or the header)
  // Why scanning stopped before the end of the bytes; empty when every byte was valid.
  std::string bad_reason;
  // Whether a record that checks out (CRC, type, plausible LSN after the last good one) starts
  // somewhere after good_end. Distinguishes a torn tail (garbage up to the end) from corruption
  // with good data behind it.
  bool valid_record_after_bad = false;
  // The header is intact (magic, CRC) but names a format version this code does not know: not
  // damage, a spool written by another chgate version. Nothing after the header was read.
  bool unknown_version = false;
  uint32_t version = 0;
};

// Validates the segment bytes `data` of the file named for `name_lsn`: the header, then records
// until the first that is short, fails its CRC, has an unknown type, an out-of-sequence LSN or a
// malformed commit payload.
SegmentScan ScanSegment(std::string_view data, uint64_t name_lsn);

// Where the records after a damaged one resume: the record at `bad_offset` of the segment bytes
// `data` (the record LSN `bad_lsn` should have been) is skipped by the length its header gives,
// and a record that checks out, with LSN `bad_lsn` + 1, must start right there. nullopt when none
// does (the length is damaged too, or nothing follows the damaged record). Only a length read
// from a record header is followed, never a search for bytes that look like a record: payload
// bytes are the callers' and could be made to look like one.
std::optional<uint64_t> RecordsResumeAt(std::string_view data, uint64_t bad_offset,
                                        uint64_t bad_lsn);

}  // namespace chgate::spool
