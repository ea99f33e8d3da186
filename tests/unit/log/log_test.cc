#include "server/log/log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace chgate::log {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// 2025-03-04T05:06:07.089Z
absl::Time TestStart() {
  return absl::FromCivil(absl::CivilSecond(2025, 3, 4, 5, 6, 7), absl::UTCTimeZone()) +
         absl::Milliseconds(89);
}

// A Logger writing into a string, on a clock the test moves.
class LogTest : public ::testing::Test {
 protected:
  Logger& Make(Format format, Level level = Level::kInfo,
               absl::Duration repeat_interval = absl::Seconds(10)) {
    logger_ = std::make_unique<Logger>(LoggerOptions{.level = level,
                                                     .format = format,
                                                     .repeat_interval = repeat_interval,
                                                     .out = &out_,
                                                     .clock = [this] { return now_; },
                                                     .sweep_interval = absl::ZeroDuration()});
    return *logger_;
  }

  // The lines written so far (and forgets them).
  std::vector<std::string> Lines() {
    std::vector<std::string> lines = absl::StrSplit(out_.str(), '\n', absl::SkipEmpty());
    out_.str("");
    return lines;
  }

  std::ostringstream out_;
  absl::Time now_ = TestStart();
  std::unique_ptr<Logger> logger_;
};

TEST_F(LogTest, TextLineHasUtcMillisecondTimeLevelComponentMessageAndFields) {
  Logger& logger = Make(Format::kText);
  logger.Write(Level::kWarn, "pool", "endpoint down",
               {Field("endpoint", "127.0.0.1:9000"), Field("error", "connect: refused"),
                Field("rows", uint64_t{42}), Field("retry", true)});
  EXPECT_THAT(Lines(), ElementsAre("2025-03-04T05:06:07.089Z WARN [pool] endpoint down "
                                   "endpoint=127.0.0.1:9000 error=\"connect: refused\" rows=42 "
                                   "retry=true"));
}

TEST_F(LogTest, TimeIsUtcWhateverTheLocalZone) {
  // 23:59:59.999 on the last day of the year stays that day in UTC.
  now_ = absl::FromCivil(absl::CivilSecond(2024, 12, 31, 23, 59, 59), absl::UTCTimeZone()) +
         absl::Milliseconds(999);
  Logger& logger = Make(Format::kText);
  logger.Write(Level::kInfo, "main", "x", {});
  EXPECT_THAT(Lines(), ElementsAre("2024-12-31T23:59:59.999Z INFO [main] x"));
}

TEST_F(LogTest, TextEscapesValuesSoAnEventStaysOneLine) {
  Logger& logger = Make(Format::kText);
  logger.Write(Level::kError, "ingest", "bad\nmessage",
               {Field("table", "db.t\nFAKE level=error"), Field("quote", "say \"hi\""),
                Field("empty", ""), Field("eq", "a=b"), Field("back", "a\\b"),
                Field("bytes", std::string("\xff\x01", 2)), Field("utf8", "caf\xc3\xa9")});
  std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "2025-03-04T05:06:07.089Z ERROR [ingest] bad\\nmessage "
            "table=\"db.t\\nFAKE level=error\" quote=\"say \\\"hi\\\"\" empty=\"\" eq=\"a=b\" "
            "back=\"a\\\\b\" bytes=\"\\xff\\x01\" utf8=caf\xc3\xa9");
}

TEST_F(LogTest, JsonLineIsOneObjectWithTypedFields) {
  Logger& logger = Make(Format::kJson);
  logger.Write(Level::kWarn, "ingest", "batch failed",
               {Field("table", "db.t"), Field("rows", 1000), Field("callers", size_t{3}),
                Field("ratio", 0.5), Field("committed", false), Field("after", absl::Seconds(2))});
  EXPECT_THAT(Lines(), ElementsAre(R"({"time":"2025-03-04T05:06:07.089Z","level":"warn",)"
                                   R"("component":"ingest","msg":"batch failed","table":"db.t",)"
                                   R"("rows":1000,"callers":3,"ratio":0.5,"committed":false,)"
                                   R"("after":"2s"})"));
}

TEST_F(LogTest, JsonEscapesStringsAndReplacesInvalidUtf8) {
  Logger& logger = Make(Format::kJson);
  logger.Write(Level::kInfo, "api", "say \"hi\"\n",
               {Field("v", std::string("a\\b\t\x01\x7f", 6)),
                Field("bad", std::string("x\xc3(\xed\xa0\x80\xf4\x90\x80\x80y")),
                Field("good", "\xe2\x82\xac\xf0\x9f\x98\x80"), Field("nan", std::nan(""))});
  EXPECT_THAT(Lines(),
              ElementsAre(R"({"time":"2025-03-04T05:06:07.089Z","level":"info",)"
                          R"("component":"api","msg":"say \"hi\"\n","v":"a\\b\t\u0001)"
                          "\x7f"
                          R"(","bad":"x\ufffd(\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\ufffdy",)"
                          "\"good\":\"\xe2\x82\xac\xf0\x9f\x98\x80\",\"nan\":\"nan\"}"));
}

TEST_F(LogTest, LevelFiltersEventsBelowIt) {
  Logger& logger = Make(Format::kText, Level::kWarn);
  logger.Write(Level::kDebug, "c", "debug", {});
  logger.Write(Level::kInfo, "c", "info", {});
  logger.Write(Level::kWarn, "c", "warn", {});
  logger.Write(Level::kError, "c", "error", {});
  logger.WriteThrottled(Level::kInfo, "c", "throttled info", "", {});
  EXPECT_THAT(Lines(), ElementsAre(HasSubstr("WARN [c] warn"), HasSubstr("ERROR [c] error")));
  EXPECT_FALSE(logger.Enabled(Level::kInfo));
  EXPECT_TRUE(logger.Enabled(Level::kError));
}

TEST_F(LogTest, DebugLevelWritesEverything) {
  Logger& logger = Make(Format::kJson, Level::kDebug);
  logger.Write(Level::kDebug, "c", "d", {});
  EXPECT_THAT(Lines(), ElementsAre(HasSubstr(R"("level":"debug")")));
}

TEST_F(LogTest, ThrottledWritesFirstThenCountsSuppressedRepeats) {
  Logger& logger = Make(Format::kText);
  logger.WriteThrottled(Level::kWarn, "ingest", "batch retry", "db.t", {Field("attempt", 1)});
  for (int attempt = 2; attempt <= 38; ++attempt) {
    now_ += absl::Milliseconds(100);
    logger.WriteThrottled(Level::kWarn, "ingest", "batch retry", "db.t",
                          {Field("attempt", attempt)});
  }
  EXPECT_THAT(Lines(), ElementsAre(HasSubstr("WARN [ingest] batch retry attempt=1")));
  // The interval ends: the next repeat is written with the count of those in between.
  now_ = TestStart() + absl::Seconds(10);
  logger.WriteThrottled(Level::kWarn, "ingest", "batch retry", "db.t", {Field("attempt", 39)});
  EXPECT_THAT(Lines(), ElementsAre("2025-03-04T05:06:17.089Z WARN [ingest] batch retry "
                                   "attempt=39 (37 similar suppressed in the last 10s)"));
}

TEST_F(LogTest, SweepWritesTheLatestSuppressedEventWithItsCount) {
  Logger& logger = Make(Format::kText);
  logger.WriteThrottled(Level::kWarn, "ingest", "batch retry", "db.t", {Field("attempt", 1)});
  now_ += absl::Seconds(1);
  logger.WriteThrottled(Level::kWarn, "ingest", "batch retry", "db.t", {Field("attempt", 2)});
  now_ += absl::Seconds(1);
  logger.WriteThrottled(Level::kWarn, "ingest", "batch retry", "db.t", {Field("attempt", 3)});
  Lines();
  now_ += absl::Seconds(7);
  logger.Sweep();  // 9 s after the first line: not yet
  EXPECT_THAT(Lines(), ElementsAre());
  now_ += absl::Seconds(3);
  logger.Sweep();
  EXPECT_THAT(Lines(), ElementsAre("2025-03-04T05:06:19.089Z WARN [ingest] batch retry "
                                   "attempt=3 (2 similar suppressed in the last 12s, the last at "
                                   "2025-03-04T05:06:09.089Z)"));
  // Nothing new since the summary: nothing more to say.
  now_ += absl::Seconds(20);
  logger.Sweep();
  EXPECT_THAT(Lines(), ElementsAre());
}

TEST_F(LogTest, JsonSummaryCarriesTheCountAsFields) {
  Logger& logger = Make(Format::kJson, Level::kInfo, absl::Seconds(2));
  logger.WriteThrottled(Level::kWarn, "pool", "endpoint down", "a:1", {Field("endpoint", "a:1")});
  now_ += absl::Milliseconds(500);
  logger.WriteThrottled(Level::kWarn, "pool", "endpoint down", "a:1", {Field("endpoint", "a:1")});
  now_ += absl::Milliseconds(2500);
  logger.Sweep();
  std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], Not(HasSubstr("suppressed")));
  EXPECT_EQ(lines[1], R"({"time":"2025-03-04T05:06:10.089Z","level":"warn","component":"pool",)"
                      R"("msg":"endpoint down","endpoint":"a:1","suppressed":1,)"
                      R"("suppressed_window":"3s","last_at":"2025-03-04T05:06:07.589Z"})");
}

TEST_F(LogTest, ThrottleClassesAreKeyedByComponentMessageAndKey) {
  Logger& logger = Make(Format::kText);
  logger.WriteThrottled(Level::kWarn, "pool", "endpoint down", "a:1", {});
  logger.WriteThrottled(Level::kWarn, "pool", "endpoint down", "b:1", {});
  logger.WriteThrottled(Level::kWarn, "pool", "endpoint up", "a:1", {});
  logger.WriteThrottled(Level::kWarn, "ingest", "endpoint down", "a:1", {});
  logger.WriteThrottled(Level::kWarn, "pool", "endpoint down", "a:1", {});  // a repeat
  EXPECT_EQ(Lines().size(), 4u);
}

TEST_F(LogTest, DestructionWritesPendingSummaries) {
  Logger& logger = Make(Format::kText);
  logger.WriteThrottled(Level::kError, "ingest", "batch failed", "db.t", {Field("rows", 5)});
  now_ += absl::Seconds(1);
  logger.WriteThrottled(Level::kError, "ingest", "batch failed", "db.t", {Field("rows", 7)});
  Lines();
  now_ += absl::Seconds(1);
  logger_.reset();
  EXPECT_THAT(Lines(), ElementsAre("2025-03-04T05:06:09.089Z ERROR [ingest] batch failed rows=7 "
                                   "(1 similar suppressed in the last 2s, the last at "
                                   "2025-03-04T05:06:08.089Z)"));
}

TEST_F(LogTest, ComponentWritesToTheInstalledLogger) {
  Logger& logger = Make(Format::kText, Level::kInfo);
  SetLogger(&logger);
  constexpr Component kLog("query");
  kLog.Info("query cancelled", {{"query_id", "q-1"}});
  kLog.Debug("hidden");
  kLog.Throttled(Level::kWarn, "killed", "", {{"query_id", "q-2"}});
  kLog.Throttled(Level::kWarn, "killed", "", {{"query_id", "q-3"}});
  SetLogger(nullptr);
  EXPECT_THAT(Lines(), ElementsAre(HasSubstr("INFO [query] query cancelled query_id=q-1"),
                                   HasSubstr("WARN [query] killed query_id=q-2")));
  EXPECT_NE(&CurrentLogger(), &logger);
}

TEST(LogParseTest, LevelsAndFormats) {
  EXPECT_EQ(ParseLevel("debug"), Level::kDebug);
  EXPECT_EQ(ParseLevel("info"), Level::kInfo);
  EXPECT_EQ(ParseLevel("warn"), Level::kWarn);
  EXPECT_EQ(ParseLevel("error"), Level::kError);
  EXPECT_EQ(ParseLevel("warning"), std::nullopt);
  EXPECT_EQ(ParseFormat("text"), Format::kText);
  EXPECT_EQ(ParseFormat("json"), Format::kJson);
  EXPECT_EQ(ParseFormat("JSON"), std::nullopt);
}

}  // namespace
}  // namespace chgate::log

namespace chgate::log {
namespace {

TEST_F(LogTest, ComponentTakesAVectorOfFields) {
  Logger& logger = Make(Format::kText, Level::kInfo);
  SetLogger(&logger);
  std::vector<Field> fields = {{"user", "default"}, {"batch-max-rows", "100000"}};
  fields.emplace_back("memory-budget", "256MiB");
  constexpr Component kLog("main");
  kLog.Info("configuration", fields);
  SetLogger(nullptr);
  EXPECT_THAT(Lines(), ElementsAre(HasSubstr("INFO [main] configuration user=default "
                                             "batch-max-rows=100000 memory-budget=256MiB")));
}

}  // namespace
}  // namespace chgate::log
