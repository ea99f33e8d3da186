#include "server/spool/format.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/spool/crc32c.h"

namespace chgate::spool {
namespace {

void PutLe32(std::string& out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xFFu);
  out.append(b, 4);
}

void PutLe64(std::string& out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xFFu);
  out.append(b, 8);
}

uint32_t GetLe32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

uint64_t GetLe64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

bool KnownType(uint8_t t) {
  return t == static_cast<uint8_t>(RecordType::kData) ||
         t == static_cast<uint8_t>(RecordType::kCommit);
}

// LSNs further than this past the last good one are taken for garbage when looking for a valid
// record behind a bad one (a real spool does not skip 2^32 LSNs).
constexpr uint64_t kPlausibleLsnGap = uint64_t{1} << 32;

struct RecordAt {
  uint32_t length;
  uint32_t crc;
  uint64_t lsn;
  uint8_t type;
};

RecordAt ReadRecordHeader(const char* p) {
  return RecordAt{GetLe32(p), GetLe32(p + 4), GetLe64(p + 8), static_cast<uint8_t>(p[16])};
}

uint32_t RecordCrc(const char* lsn_start, size_t payload_size) {
  return Crc32cExtend(0, lsn_start, 9 + payload_size);
}

// Whether a record that checks out starts anywhere in data[from..], with an LSN above `min_lsn`.
bool FindValidRecord(std::string_view data, uint64_t from, uint64_t min_lsn) {
  if (data.size() < kRecordHeaderSize) return false;
  for (uint64_t off = from; off + kRecordHeaderSize <= data.size(); ++off) {
    const char* p = data.data() + off;
    const RecordAt r = ReadRecordHeader(p);
    const uint64_t room = data.size() - off - kRecordHeaderSize;
    if (!KnownType(r.type) || r.length > room || r.length > kMaxPayloadSize) continue;
    if (r.lsn < min_lsn || r.lsn - min_lsn > kPlausibleLsnGap) continue;
    if (RecordCrc(p + 8, r.length) == r.crc) return true;
  }
  return false;
}

// Why the record at data[off..] is not the valid record `expected_lsn`; empty when it is.
std::string RecordProblem(std::string_view data, uint64_t off, uint64_t expected_lsn) {
  const uint64_t left = data.size() - off;
  if (left < kRecordHeaderSize) return absl::StrCat("record header cut short at offset ", off);
  const char* p = data.data() + off;
  const RecordAt r = ReadRecordHeader(p);
  if (r.length > kMaxPayloadSize || r.length > left - kRecordHeaderSize) {
    return absl::StrCat("record at offset ", off, " of ", r.length,
                        " payload bytes runs past the end");
  }
  if (RecordCrc(p + 8, r.length) != r.crc) {
    return absl::StrCat("CRC mismatch in the record at offset ", off);
  }
  if (!KnownType(r.type)) return absl::StrCat("unknown record type ", r.type, " at offset ", off);
  if (r.lsn != expected_lsn) {
    return absl::StrCat("LSN ", r.lsn, " at offset ", off, " where ", expected_lsn, " belongs");
  }
  if (r.type == static_cast<uint8_t>(RecordType::kCommit) &&
      !DecodeCommitPayload(std::string_view(p + kRecordHeaderSize, r.length)).ok()) {
    return absl::StrCat("malformed commit record at offset ", off);
  }
  return std::string();
}

}  // namespace

std::optional<uint64_t> RecordsResumeAt(std::string_view data, uint64_t bad_offset,
                                        uint64_t bad_lsn) {
  if (bad_offset > data.size() || data.size() - bad_offset < kRecordHeaderSize) {
    return std::nullopt;
  }
  const uint32_t length = GetLe32(data.data() + bad_offset);
  if (length > kMaxPayloadSize) return std::nullopt;
  const uint64_t next = bad_offset + kRecordHeaderSize + length;
  if (next >= data.size() || !RecordProblem(data, next, bad_lsn + 1).empty()) return std::nullopt;
  return next;
}

std::string EncodeSegmentHeader(uint64_t first_lsn) {
  std::string out;
  out.reserve(kSegmentHeaderSize);
  out.append(kSegmentMagic);
  PutLe32(out, kFormatVersion);
  PutLe32(out, static_cast<uint32_t>(kSegmentHeaderSize));
  PutLe64(out, first_lsn);
  PutLe32(out, 0);
  PutLe32(out, Crc32c(out));
  return out;
}

void AppendRecord(std::string& out, uint64_t lsn, RecordType type, std::string_view payload) {
  const size_t start = out.size();
  PutLe32(out, static_cast<uint32_t>(payload.size()));
  PutLe32(out, 0);  // the CRC, filled in below
  PutLe64(out, lsn);
  out.push_back(static_cast<char>(type));
  out.append(payload);
  const uint32_t crc = RecordCrc(out.data() + start + 8, payload.size());
  for (int i = 0; i < 4; ++i)
    out[start + 4 + static_cast<size_t>(i)] = static_cast<char>((crc >> (8 * i)) & 0xFFu);
}

absl::StatusOr<std::string_view> CheckDataRecord(std::string_view bytes, uint64_t lsn) {
  if (bytes.size() < kRecordHeaderSize) {
    return absl::DataLossError(absl::StrCat("record ", lsn, ": ", bytes.size(), " bytes read"));
  }
  const RecordAt r = ReadRecordHeader(bytes.data());
  if (r.length != bytes.size() - kRecordHeaderSize) {
    return absl::DataLossError(absl::StrCat("record ", lsn, ": length ", r.length, ", expected ",
                                            bytes.size() - kRecordHeaderSize));
  }
  if (r.lsn != lsn || r.type != static_cast<uint8_t>(RecordType::kData)) {
    return absl::DataLossError(
        absl::StrCat("record ", lsn, ": holds LSN ", r.lsn, " of type ", static_cast<int>(r.type)));
  }
  if (RecordCrc(bytes.data() + 8, r.length) != r.crc) {
    return absl::DataLossError(absl::StrCat("record ", lsn, ": CRC mismatch"));
  }
  return bytes.substr(kRecordHeaderSize);
}

std::string EncodeCommitPayload(const std::vector<LsnRange>& ranges) {
  std::string out;
  out.reserve(4 + 16 * ranges.size());
  PutLe32(out, static_cast<uint32_t>(ranges.size()));
  for (const LsnRange& r : ranges) {
    PutLe64(out, r.first);
    PutLe64(out, r.last);
  }
  return out;
}

absl::StatusOr<std::vector<LsnRange>> DecodeCommitPayload(std::string_view payload) {
  if (payload.size() < 4) return absl::InvalidArgumentError("commit payload shorter than 4 bytes");
  const uint32_t count = GetLe32(payload.data());
  if (payload.size() != 4 + uint64_t{count} * 16) {
    return absl::InvalidArgumentError(absl::StrCat("commit payload of ", payload.size(),
                                                   " bytes does not hold ", count, " ranges"));
  }
  std::vector<LsnRange> ranges;
  ranges.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const char* p = payload.data() + 4 + 16 * static_cast<size_t>(i);
    LsnRange r{GetLe64(p), GetLe64(p + 8)};
    if (r.first > r.last) {
      return absl::InvalidArgumentError(absl::StrCat("reversed range ", r.first, "..", r.last));
    }
    ranges.push_back(r);
  }
  return ranges;
}

std::vector<LsnRange> RangesOf(std::vector<uint64_t> lsns) {
  std::sort(lsns.begin(), lsns.end());
  std::vector<LsnRange> ranges;
  for (uint64_t lsn : lsns) {
    if (!ranges.empty() && lsn <= ranges.back().last + 1) {
      ranges.back().last = std::max(ranges.back().last, lsn);
    } else {
      ranges.push_back(LsnRange{lsn, lsn});
    }
  }
  return ranges;
}

std::string SegmentFileName(uint64_t first_lsn) { return absl::StrFormat("%016x.wal", first_lsn); }

std::optional<uint64_t> ParseSegmentFileName(std::string_view name) {
  if (name.size() != 20 || name.substr(16) != ".wal") return std::nullopt;
  uint64_t v = 0;
  for (char c : name.substr(0, 16)) {
    uint64_t digit;
    if (c >= '0' && c <= '9') {
      digit = static_cast<uint64_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<uint64_t>(c - 'a' + 10);
    } else {
      return std::nullopt;
    }
    v = (v << 4) | digit;
  }
  return v;
}

SegmentScan ScanSegment(std::string_view data, uint64_t name_lsn) {
  SegmentScan scan;
  if (data.size() < kSegmentHeaderSize) {
    scan.bad_reason = absl::StrCat("segment header cut short at ", data.size(), " bytes");
  } else if (data.substr(0, kSegmentMagic.size()) != kSegmentMagic) {
    scan.bad_reason = "bad segment magic";
  } else if (Crc32c(data.substr(0, kSegmentHeaderSize - 4)) !=
             GetLe32(data.data() + kSegmentHeaderSize - 4)) {
    scan.bad_reason = "segment header CRC mismatch";
  } else if (GetLe32(data.data() + 8) != kFormatVersion) {
    scan.version = GetLe32(data.data() + 8);
    scan.unknown_version = true;
    scan.bad_reason = absl::StrCat("unknown format version ", scan.version);
    return scan;
  } else if (GetLe64(data.data() + 16) != name_lsn) {
    scan.bad_reason = absl::StrCat("header's first LSN ", GetLe64(data.data() + 16),
                                   " disagrees with the file name");
  } else {
    scan.header_ok = true;
    scan.good_end = kSegmentHeaderSize;
  }
  if (!scan.header_ok) {
    scan.valid_record_after_bad = FindValidRecord(data, 0, name_lsn);
    return scan;
  }

  uint64_t expected_lsn = name_lsn;
  uint64_t off = kSegmentHeaderSize;
  while (off < data.size()) {
    scan.bad_reason = RecordProblem(data, off, expected_lsn);
    if (!scan.bad_reason.empty()) break;
    const RecordAt r = ReadRecordHeader(data.data() + off);
    const std::string_view payload(data.data() + off + kRecordHeaderSize, r.length);
    scan.records.push_back(ScannedRecord{r.lsn, static_cast<RecordType>(r.type), payload, off});
    ++expected_lsn;
    off += kRecordHeaderSize + r.length;
    scan.good_end = off;
  }
  if (!scan.bad_reason.empty()) {
    scan.valid_record_after_bad = FindValidRecord(data, scan.good_end + 1, expected_lsn);
  }
  return scan;
}

}  // namespace chgate::spool
