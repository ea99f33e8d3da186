#include "server/ingest/key_log.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/common/little_endian.h"
#include "server/log/log.h"

namespace chgate::ingest {
namespace {

constexpr log::Component kLog("ingest");

constexpr char kVersion = 1;

// Takes a `bytes`-byte little-endian integer off the front of `in`; false when it is shorter.
bool TakeLittleEndian(std::string_view& in, int bytes, uint64_t* v) {
  if (in.size() < static_cast<size_t>(bytes)) return false;
  *v = LoadLittleEndian(in, bytes);
  in.remove_prefix(static_cast<size_t>(bytes));
  return true;
}

}  // namespace

KeyLog::KeyLog(spool::Spool* spool, Clock* clock, absl::Duration window, size_t max_keys)
    : spool_(spool), clock_(clock), window_(window), max_keys_(max_keys) {}

// version (1) | i64 Unix microseconds | u32 count | count x (u32 length | key | u64 rows)
std::string KeyLog::Encode(absl::Time committed, const std::vector<Key>& keys) {
  std::string out;
  out.push_back(kVersion);
  AppendLittleEndian(&out, static_cast<uint64_t>(absl::ToUnixMicros(committed)), 8);
  AppendLittleEndian(&out, keys.size(), 4);
  for (const Key& k : keys) {
    AppendLittleEndian(&out, k.key.size(), 4);
    out.append(k.key);
    AppendLittleEndian(&out, k.rows, 8);
  }
  return out;
}

absl::StatusOr<std::pair<absl::Time, std::vector<KeyLog::Key>>> KeyLog::Decode(
    std::string_view payload) {
  uint64_t version = 0, micros = 0, count = 0;
  if (!TakeLittleEndian(payload, 1, &version) || version != kVersion) {
    return absl::InvalidArgumentError("not a key record of version 1");
  }
  if (!TakeLittleEndian(payload, 8, &micros) || !TakeLittleEndian(payload, 4, &count)) {
    return absl::InvalidArgumentError("key record cut short");
  }
  std::vector<Key> keys;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t length = 0;
    Key k;
    if (!TakeLittleEndian(payload, 4, &length) || payload.size() < length) {
      return absl::InvalidArgumentError("key record cut short");
    }
    k.key.assign(payload.substr(0, length));
    payload.remove_prefix(length);
    if (!TakeLittleEndian(payload, 8, &k.rows))
      return absl::InvalidArgumentError("key record cut short");
    keys.push_back(std::move(k));
  }
  if (!payload.empty()) return absl::InvalidArgumentError("bytes after the last key");
  return std::make_pair(absl::FromUnixMicros(static_cast<int64_t>(micros)), std::move(keys));
}

std::vector<KeyLog::RecoveredKey> KeyLog::Recover(const std::vector<spool::SpoolRecord>& records) {
  std::vector<RecoveredKey> out;
  std::vector<uint64_t> gone;
  {
    absl::MutexLock l(&mu_);
    for (const spool::SpoolRecord& r : records) {
      auto decoded = Decode(r.payload);
      if (!decoded.ok()) {
        kLog.Error("idempotency key record unreadable; it is dropped",
                   {{"lsn", r.lsn}, {"error", decoded.status().message()}});
        gone.push_back(r.lsn);
        continue;
      }
      live_.push_back(Live{r.lsn, decoded->first, decoded->second.size()});
      live_keys_ += decoded->second.size();
      for (Key& k : decoded->second) out.push_back({std::move(k), decoded->first});
    }
  }
  if (!gone.empty()) (void)spool_->MarkCommitted(gone);
  Expire();
  const absl::Time oldest = clock_->Now() - window_;
  out.erase(std::remove_if(out.begin(), out.end(),
                           [oldest](const RecoveredKey& k) { return k.committed <= oldest; }),
            out.end());
  if (out.size() > max_keys_) out.erase(out.begin(), out.end() - static_cast<long>(max_keys_));
  return out;
}

absl::Status KeyLog::Record(const std::vector<Key>& keys) {
  if (keys.empty()) return absl::OkStatus();
  const absl::Time now = clock_->Now();
  absl::StatusOr<uint64_t> lsn = spool_->AppendAndWait(Encode(now, keys), /*exempt=*/true);
  if (!lsn.ok()) return lsn.status();
  {
    absl::MutexLock l(&mu_);
    live_.push_back(Live{*lsn, now, keys.size()});
    live_keys_ += keys.size();
  }
  Expire();
  return absl::OkStatus();
}

void KeyLog::Expire() {
  std::vector<uint64_t> gone;
  {
    absl::MutexLock l(&mu_);
    const absl::Time oldest = clock_->Now() - window_;
    while (!live_.empty() &&
           (live_.front().committed <= oldest || live_keys_ - live_.front().keys >= max_keys_)) {
      gone.push_back(live_.front().lsn);
      live_keys_ -= live_.front().keys;
      live_.pop_front();
    }
  }
  if (gone.empty()) return;
  if (absl::Status st = spool_->MarkCommitted(gone); !st.ok()) {
    kLog.Throttled(log::Level::kWarn, "idempotency key records not released", "",
                   {{"error", st.message()}});
  }
}

}  // namespace chgate::ingest
