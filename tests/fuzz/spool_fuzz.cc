// libFuzzer target for the spool's recovery decisions: arbitrary bytes are scanned as a segment
// file, as given and behind a valid header (so the record parser sees inputs the header check
// would otherwise stop). Whatever the scan accepts must be self-consistent: records in order,
// consecutive LSNs from the file's, inside the bytes, commit payloads that decode, and the good
// prefix scanning to exactly the same records again; and where recovery would resume past a bad
// record, a valid record with the next LSN.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/spool/format.h"

namespace {

using chgate::spool::RecordType;

void Check(std::string_view data, uint64_t name_lsn) {
  const chgate::spool::SegmentScan scan = chgate::spool::ScanSegment(data, name_lsn);
  if (scan.good_end > data.size()) std::abort();
  uint64_t expected_lsn = name_lsn;
  uint64_t previous_end = 0;
  for (const chgate::spool::ScannedRecord& r : scan.records) {
    if (r.lsn != expected_lsn++) std::abort();
    if (r.offset < previous_end ||
        r.offset + chgate::spool::RecordSize(r.payload.size()) > scan.good_end) {
      std::abort();
    }
    previous_end = r.offset + chgate::spool::RecordSize(r.payload.size());
    if (r.type == RecordType::kCommit && !chgate::spool::DecodeCommitPayload(r.payload).ok()) {
      std::abort();
    }
  }
  // The good prefix is a valid segment on its own: it scans to the same records, cleanly.
  if (scan.header_ok) {
    const chgate::spool::SegmentScan again =
        chgate::spool::ScanSegment(data.substr(0, scan.good_end), name_lsn);
    if (again.records.size() != scan.records.size() || !again.bad_reason.empty()) std::abort();
    // Past a bad record, recovery resumes only where the record with the next LSN starts,
    // beyond the bad one's header: as a segment of its own, those bytes scan to that record.
    if (!scan.bad_reason.empty()) {
      const uint64_t bad_lsn = name_lsn + scan.records.size();
      if (const auto resume = chgate::spool::RecordsResumeAt(data, scan.good_end, bad_lsn)) {
        if (*resume < scan.good_end + chgate::spool::kRecordHeaderSize || *resume >= data.size()) {
          std::abort();
        }
        std::string rest = chgate::spool::EncodeSegmentHeader(bad_lsn + 1);
        rest.append(data.substr(*resume));
        const chgate::spool::SegmentScan after = chgate::spool::ScanSegment(rest, bad_lsn + 1);
        if (after.records.empty() || after.records[0].lsn != bad_lsn + 1) std::abort();
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const uint64_t lsn = size > 0 ? data[0] : 1;
  Check(bytes, lsn);
  std::string segment = chgate::spool::EncodeSegmentHeader(lsn);
  segment.append(bytes);
  Check(segment, lsn);
  return 0;
}
