// The dead-letter file: what the Ingestor writes and `chgate spool` reads.
#include "server/ingest/dead_letter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/text_form.h"
#include "server/ingest/spool_record.h"

namespace chgate::ingest {
namespace {

using ::testing::HasSubstr;

clickhouse::Block Rows(uint64_t first, size_t n) {
  clickhouse::Block b;
  auto id = *clickhouse::CreateColumn("UInt64");
  auto s = *clickhouse::CreateColumn("String");
  for (size_t i = 0; i < n; ++i) {
    static_cast<clickhouse::ColumnFixed&>(*id).Append<uint64_t>(first + i);
    static_cast<clickhouse::ColumnString&>(*s).Append("v" + std::to_string(first + i));
  }
  b.AddColumn("id", id);
  b.AddColumn("s", s);
  return b;
}

DeadLetter Letter() {
  const TableId table{"db.with.dots", "t"};
  DeadLetter letter{.table = table,
                    .columns = {"id", "s"},
                    .records = 3,
                    .rows = 5,
                    .identity = "0123abcd-42",
                    .unreadable = {7},
                    .error = "Code: 53. Type mismatch\nsecond line"};
  letter.payloads.push_back({5, EncodeRowsRecord(table, {"id", "s"}, "", Rows(0, 2))});
  letter.payloads.push_back({6, EncodeRowsRecord(table, {"id", "s"}, "key", Rows(2, 3))});
  return letter;
}

TEST(DeadLetterTest, RoundTripsEveryFieldWithTheTableAsAStructuredPair) {
  const std::string bytes = EncodeDeadLetter(Letter());
  EXPECT_THAT(bytes, HasSubstr("table: db.with.dots.t\n"));
  EXPECT_THAT(bytes, HasSubstr("error: Code: 53. Type mismatch second line\n\n"));
  absl::StatusOr<DeadLetter> back = DecodeDeadLetter(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->table.database, "db.with.dots");
  EXPECT_EQ(back->table.table, "t");
  EXPECT_EQ(back->columns, (std::vector<std::string>{"id", "s"}));
  EXPECT_EQ(back->records, 3u);
  EXPECT_EQ(back->rows, 5u);
  EXPECT_EQ(back->identity, "0123abcd-42");
  EXPECT_EQ(back->unreadable, std::vector<uint64_t>{7});
  EXPECT_EQ(back->error, "Code: 53. Type mismatch second line");
  ASSERT_EQ(back->payloads.size(), 2u);
  EXPECT_EQ(back->payloads[1].lsn, 6u);
  EXPECT_EQ(back->payloads[1].payload, Letter().payloads[1].payload);

  absl::StatusOr<clickhouse::Block> block = DeadLetterBlock(*back);
  ASSERT_TRUE(block.ok()) << block.status();
  ASSERT_EQ(block->rows(), 5u);
  std::string text;
  AppendTsvValue(*block->column(1).column, 4, false, &text);
  EXPECT_EQ(text, "v4");
}

TEST(DeadLetterTest, ReadsTheHeaderAloneAndFilesOfTheFirstLayout) {
  absl::StatusOr<DeadLetter> head = DecodeDeadLetter(EncodeDeadLetter(Letter()), true);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_TRUE(head->payloads.empty());
  EXPECT_EQ(head->rows, 5u);
  // Written before the structured pair and the identity: "table: db.t" only.
  absl::StatusOr<DeadLetter> old = DecodeDeadLetter(
      "chgate dead letter v1\ntable: default.events\ncolumns: id,s\nrecords: 0\nrows: 0\n"
      "error: INVALID_ARGUMENT: x\n\n");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->table.database, "default");
  EXPECT_EQ(old->table.table, "events");
  EXPECT_TRUE(old->identity.empty());
}

TEST(DeadLetterTest, RefusesWhatIsNotADeadLetterOrIsCutShort) {
  EXPECT_EQ(DecodeDeadLetter("hello").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeDeadLetter("chgate dead letter v1\ntable: a.b\n").status().code(),
            absl::StatusCode::kDataLoss);
  std::string bytes = EncodeDeadLetter(Letter());
  bytes.resize(bytes.size() - 3);
  EXPECT_EQ(DecodeDeadLetter(bytes).status().code(), absl::StatusCode::kDataLoss);
  // A record that is not a rows record.
  DeadLetter letter = Letter();
  letter.payloads[0].payload = "garbage";
  absl::StatusOr<clickhouse::Block> block = DeadLetterBlock(letter);
  EXPECT_EQ(block.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(block.status().message()), HasSubstr("record 5"));
}

TEST(DeadLetterTest, FileNamesAreTheIntentLsnInSixteenHexDigits) {
  EXPECT_EQ(DeadLetterFileName(0x2a), "000000000000002a.batch");
}

}  // namespace
}  // namespace chgate::ingest
