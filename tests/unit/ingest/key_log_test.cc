// KeyLog: committed persisted requests' idempotency keys kept in a spool of their own, handed
// back at a start while within the window, let go past the window or the key bound.
#include "server/ingest/key_log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/unit/ingest/fake_clock.h"

namespace chgate::ingest {
namespace {

using testing::FakeClock;

class KeyLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        (std::filesystem::path(::testing::TempDir()) /
         absl::StrCat("key_log_", ::testing::UnitTest::GetInstance()->current_test_info()->name()))
            .string();
    std::filesystem::remove_all(dir_);
  }
  // Opens the spool and a KeyLog on it; returns the keys it recovered.
  std::vector<KeyLog::RecoveredKey> Open(size_t max_keys = 100) {
    log_.reset();
    if (spool_ != nullptr) spool_->Close();
    spool_.reset();
    // Tiny segments: a record or two each, so records let go take their segments with them.
    absl::StatusOr<spool::Spool::Opened> opened =
        spool::Spool::Open(dir_, {.segment_bytes = 256, .min_free_bytes = 1});
    EXPECT_TRUE(opened.ok()) << opened.status();
    spool_ = std::move(opened->spool);
    log_ = std::make_unique<KeyLog>(spool_.get(), &clock_, absl::Minutes(10), max_keys);
    return log_->Recover(opened->replay);
  }
  static std::vector<std::string> Names(const std::vector<KeyLog::RecoveredKey>& keys) {
    std::vector<std::string> out;
    for (const auto& k : keys) out.push_back(absl::StrCat(k.key.key, "=", k.key.rows));
    return out;
  }

  std::string dir_;
  FakeClock clock_;
  std::unique_ptr<spool::Spool> spool_;
  std::unique_ptr<KeyLog> log_;
};

TEST_F(KeyLogTest, KeysComeBackAfterARestartWithTheirRowsAndCommitTime) {
  EXPECT_TRUE(Open().empty());
  const absl::Time first = clock_.Now();
  ASSERT_TRUE(log_->Record({{"a", 3}, {"b", 1}}).ok());
  clock_.Advance(absl::Minutes(1));
  ASSERT_TRUE(log_->Record({{"c", 7}}).ok());
  ASSERT_TRUE(log_->Record({}).ok());  // nothing to keep: no record
  const std::vector<KeyLog::RecoveredKey> keys = Open();
  EXPECT_THAT(Names(keys), ::testing::ElementsAre("a=3", "b=1", "c=7"));
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0].committed, first);
  EXPECT_EQ(keys[2].committed, first + absl::Minutes(1));
}

TEST_F(KeyLogTest, KeysPastTheWindowAreNotHandedBackAndTheirSegmentsGo) {
  Open();
  ASSERT_TRUE(log_->Record({{"old", 1}}).ok());
  clock_.Advance(absl::Minutes(6));
  ASSERT_TRUE(log_->Record({{"new", 2}}).ok());
  clock_.Advance(absl::Minutes(5));  // "old" is 11 minutes old, "new" 5
  EXPECT_THAT(Names(Open()), ::testing::ElementsAre("new=2"));
  // Let go at once at that start: its record is committed, no later start sees it either.
  EXPECT_THAT(Names(Open()), ::testing::ElementsAre("new=2"));
  clock_.Advance(absl::Minutes(6));
  ASSERT_TRUE(log_->Record({{"newest", 3}}).ok());  // a write lets what expired go too
  ASSERT_TRUE(spool_->Flush().ok());
  EXPECT_EQ(spool_->Stats().pending_records, 1u);
  EXPECT_THAT(Names(Open()), ::testing::ElementsAre("newest=3"));
}

TEST_F(KeyLogTest, AtMostMaxKeysAreKept) {
  Open(/*max_keys=*/4);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(
        log_->Record({{absl::StrCat("k", 2 * i), 1}, {absl::StrCat("k", 2 * i + 1), 1}}).ok());
  }
  // The two newest records hold the 4 newest keys; the older ones were let go.
  EXPECT_THAT(Names(Open(4)), ::testing::ElementsAre("k6=1", "k7=1", "k8=1", "k9=1"));
  EXPECT_THAT(Names(Open(3)), ::testing::ElementsAre("k7=1", "k8=1", "k9=1"));
}

TEST_F(KeyLogTest, RecordsRoundTripAndMalformedOnesAreRefused) {
  const absl::Time t = absl::FromUnixMicros(1'700'000'000'123'456);
  const std::string payload = KeyLog::Encode(t, {{"caller/db.t/k1", 5}, {"", 0}});
  auto decoded = KeyLog::Decode(payload);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->first, t);
  ASSERT_EQ(decoded->second.size(), 2u);
  EXPECT_EQ(decoded->second[0].key, "caller/db.t/k1");
  EXPECT_EQ(decoded->second[0].rows, 5u);
  for (size_t cut = 0; cut < payload.size(); ++cut) {
    EXPECT_FALSE(KeyLog::Decode(payload.substr(0, cut)).ok()) << cut;
  }
  EXPECT_FALSE(KeyLog::Decode(payload + "x").ok());
  std::string other_version = payload;
  other_version[0] = 2;
  EXPECT_FALSE(KeyLog::Decode(other_version).ok());
}

TEST_F(KeyLogTest, AnUnreadableRecordIsDroppedAndTheOthersKept) {
  Open();
  ASSERT_TRUE(log_->Record({{"good", 1}}).ok());
  ASSERT_TRUE(spool_->AppendAndWait("not a key record", /*exempt=*/true).ok());
  EXPECT_THAT(Names(Open()), ::testing::ElementsAre("good=1"));
  EXPECT_THAT(Names(Open()), ::testing::ElementsAre("good=1"));
}

}  // namespace
}  // namespace chgate::ingest
