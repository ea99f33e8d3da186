// The native connection against the local ClickHouse (18.16.1, revision 54412).
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/nullable.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/protocol/revision.h"
#include "server/clickhouse/text_form.h"
#include "tests/integration/clickhouse/live.h"

namespace chgate::clickhouse::testing {
namespace {

constexpr char kDatabase[] = "chgate_chtest";

class ConnectionLiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    conn_ = ConnectOrSkip();
    if (conn_ == nullptr) return;
    Exec(*conn_, absl::StrCat("CREATE DATABASE IF NOT EXISTS ", kDatabase));
  }
  std::unique_ptr<Connection> conn_;
};

TEST_F(ConnectionLiveTest, HandshakeReportsServerVersionAndNegotiatedRevision) {
  if (conn_ == nullptr) return;
  const ServerInfo& info = conn_->server_info();
  EXPECT_EQ(info.name, "ClickHouse");
  EXPECT_GT(info.revision, 54000u);
  EXPECT_EQ(conn_->revision(), std::min<uint64_t>(info.revision, revision::kClient));
  auto version = SelectTsv(*conn_, "SELECT version()");
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, absl::StrCat(info.version_major, ".", info.version_minor, ".",
                                   info.version_patch, "\n"));
  EXPECT_TRUE(conn_->Ping().ok());
  EXPECT_TRUE(conn_->usable());
}

TEST_F(ConnectionLiveTest, SelectOne) {
  if (conn_ == nullptr) return;
  auto result = SelectTsv(*conn_, "SELECT 1");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, "1\n");
}

TEST_F(ConnectionLiveTest, UnknownTableIsNotFoundWithCode60AndConnectionStaysUsable) {
  if (conn_ == nullptr) return;
  absl::Status st = conn_->Select({.query = "SELECT * FROM chgate_chtest.does_not_exist"},
                                  [](const Block&) { return absl::OkStatus(); });
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  EXPECT_EQ(ClickHouseCode(st), 60);
  EXPECT_NE(std::string(st.message()).find("doesn't exist"), std::string::npos) << st;
  EXPECT_NE(std::string(st.message()).find("UNKNOWN_TABLE"), std::string::npos) << st;
  EXPECT_TRUE(conn_->usable());
  auto again = SelectTsv(*conn_, "SELECT 2");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, "2\n");
}

TEST_F(ConnectionLiveTest, BinarySettingsReachTheServer) {
  if (conn_ == nullptr) return;
  // Below revision 54429 settings travel typed: a UInt64, a bool, a float and a string.
  std::string out;
  absl::Status st =
      conn_->Select({.query = "SELECT getSetting('max_block_size'), getSetting('extremes'), "
                              "getSetting('totals_auto_threshold'), getSetting('load_balancing')",
                     .settings = {{.name = "max_block_size", .value = "1234"},
                                  {.name = "extremes", .value = "0"},
                                  {.name = "totals_auto_threshold", .value = "0.25"},
                                  {.name = "load_balancing", .value = "in_order"}}},
                    [&](const Block& b) {
                      for (size_t c = 0; c < b.column_count(); ++c) {
                        if (c) out += "\t";
                        AppendTsvValue(*b.column(c).column, 0, false, &out);
                      }
                      return absl::OkStatus();
                    });
  if (st.code() == absl::StatusCode::kInvalidArgument &&
      std::string(st.message()).find("getSetting") != std::string::npos) {
    // 18.16 has no getSetting(): check through system.settings instead.
    auto rows = SelectTsv(*conn_, "SELECT 1");
    ASSERT_TRUE(rows.ok());
    out.clear();
    st = conn_->Select(
        {.query = "SELECT name, value FROM system.settings WHERE name IN ('max_block_size', "
                  "'totals_auto_threshold', 'load_balancing') ORDER BY name",
         .settings = {{.name = "max_block_size", .value = "1234"},
                      {.name = "totals_auto_threshold", .value = "0.25"},
                      {.name = "load_balancing", .value = "in_order"}}},
        [&](const Block& b) {
          for (size_t r = 0; r < b.rows(); ++r) {
            AppendTsvValue(*b.column(0).column, r, false, &out);
            out += "=";
            AppendTsvValue(*b.column(1).column, r, false, &out);
            out += "\n";
          }
          return absl::OkStatus();
        });
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(out, "load_balancing=in_order\nmax_block_size=1234\ntotals_auto_threshold=0.25\n");
    return;
  }
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(out, "1234\t0\t0.25\tin_order");
}

TEST_F(ConnectionLiveTest, UnknownSettingTypeIsRefusedBeforeSending) {
  if (conn_ == nullptr) return;
  if (conn_->revision() >= revision::kSettingsAsStrings)
    GTEST_SKIP() << "server takes text settings";
  absl::Status st = conn_->Select(
      {.query = "SELECT 1", .settings = {{.name = "no_such_setting_x", .value = "1"}}},
      [](const Block&) { return absl::OkStatus(); });
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(conn_->usable());
  EXPECT_TRUE(conn_->Ping().ok());
}

class MultiBlockSelectTest : public ::testing::TestWithParam<CompressionMethod> {};

TEST_P(MultiBlockSelectTest, ReadsEveryRowOfManyBlocksAndFrames) {
  auto conn = ConnectOrSkip(GetParam());
  if (conn == nullptr) return;
  constexpr uint64_t kRows = 300000;
  uint64_t rows = 0, blocks = 0, sum = 0, string_bytes = 0;
  QueryResult result;
  absl::Status st = conn->Select(
      {.query =
           absl::StrCat("SELECT number, toString(number) AS s FROM system.numbers LIMIT ", kRows),
       .settings = {{.name = "max_block_size", .value = "65536"}}},
      [&](const Block& b) {
        ++blocks;
        rows += b.rows();
        const auto& numbers = static_cast<const ColumnFixed&>(*b.column(0).column);
        const auto& strings = static_cast<const ColumnString&>(*b.column(1).column);
        EXPECT_EQ(b.column(0).name, "number");
        EXPECT_EQ(numbers.type_name(), "UInt64");
        EXPECT_EQ(strings.type_name(), "String");
        for (size_t i = 0; i < b.rows(); ++i) {
          uint64_t v = numbers.Get<uint64_t>(i);
          sum += v;
          string_bytes += strings.At(i).size();
          if (strings.At(i) != std::to_string(v)) {
            ADD_FAILURE() << "row " << v << " has string " << strings.At(i);
            return absl::InternalError("mismatch");
          }
        }
        return absl::OkStatus();
      },
      &result);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(rows, kRows);
  EXPECT_EQ(result.rows, kRows);
  EXPECT_GE(blocks, 4u);
  EXPECT_EQ(sum, kRows * (kRows - 1) / 2);
  if (GetParam() == CompressionMethod::kNone) {
    // Raw blocks: every value byte crossed the socket and counts as decoded as it is.
    EXPECT_GT(conn->received_bytes(), kRows * 8 + string_bytes);
    EXPECT_EQ(conn->decoded_bytes(), conn->received_bytes());
  } else {
    // Frames: the decoded bytes hold every value, and compression made the socket bytes fewer.
    EXPECT_GT(conn->decoded_bytes(), kRows * 8 + string_bytes);
    EXPECT_LT(conn->received_bytes(), conn->decoded_bytes());
  }
  EXPECT_TRUE(conn->usable());
}

TEST_P(MultiBlockSelectTest, ReadsABlockSpanningSeveralFrames) {
  auto conn = ConnectOrSkip(GetParam());
  if (conn == nullptr) return;
  // One 200k-row block of ~2.6 MiB: more than one 1 MiB compression frame.
  uint64_t rows = 0, blocks = 0;
  absl::Status st =
      conn->Select({.query = "SELECT number, toString(number) AS s FROM numbers(200000)",
                    .settings = {{.name = "max_block_size", .value = "200000"}}},
                   [&](const Block& b) {
                     ++blocks;
                     rows += b.rows();
                     return absl::OkStatus();
                   });
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(rows, 200000u);
  EXPECT_EQ(blocks, 1u);
}

INSTANTIATE_TEST_SUITE_P(Compression, MultiBlockSelectTest,
                         ::testing::Values(CompressionMethod::kNone, CompressionMethod::kLz4,
                                           CompressionMethod::kZstd),
                         CompressionParamName());

}  // namespace
}  // namespace chgate::clickhouse::testing
