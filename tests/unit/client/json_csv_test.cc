// The CLI's input readers: the JSON parser (every value kind, escapes, surrogate pairs, errors
// with columns), JSON -> row Value mapping (integers by range, exact text beyond 64 bits), and
// the CSV reader (quotes, doubled quotes, fields spanning lines, CRLF, errors with lines).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "client/cli/csv.h"
#include "client/cli/json.h"

namespace chgate::cli {
namespace {

using ::testing::HasSubstr;

TEST(JsonTest, ParsesEveryKind) {
  absl::StatusOr<Json> j =
      ParseJson(R"( {"a": null, "b": [true, false], "c": -1.5e3, "d": "x\"y", "e": {}, "f": []} )");
  ASSERT_TRUE(j.ok()) << j.status();
  ASSERT_EQ(j->kind, Json::Kind::kObject);
  ASSERT_EQ(j->members.size(), 6u);
  EXPECT_EQ(j->members[0].first, "a");
  EXPECT_EQ(j->members[0].second.kind, Json::Kind::kNull);
  EXPECT_TRUE(j->members[1].second.items[0].boolean);
  EXPECT_FALSE(j->members[1].second.items[1].boolean);
  EXPECT_EQ(j->members[2].second.text, "-1.5e3");
  EXPECT_EQ(j->members[3].second.text, "x\"y");
  EXPECT_EQ(j->members[4].second.kind, Json::Kind::kObject);
  EXPECT_EQ(j->members[5].second.kind, Json::Kind::kArray);
}

TEST(JsonTest, DecodesEscapesAndSurrogatePairs) {
  absl::StatusOr<Json> j = ParseJson(R"("\\ \/ \b\f\n\r\t \u00e9 \u20ac \ud83d\ude00")");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->text, "\\ / \b\f\n\r\t \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
}

TEST(JsonTest, RejectsMalformedInputWithAColumn) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"", "unexpected end"},
      {"{\"a\":1,}", "expected a member name"},
      {"[1,]", "unexpected character"},
      {"[1 2]", "expected ',' or ']'"},
      {"{\"a\" 1}", "expected ':'"},
      {"01", "unexpected text after"},
      {"1.", "digits after '.'"},
      {"1e", "exponent digits"},
      {"-", "expected digits"},
      {"\"abc", "unterminated string"},
      {"\"a\nb\"", "control character"},
      {"\"\\x\"", "unknown escape"},
      {"\"\\ud83d\"", "high surrogate"},
      {"\"\\ude00\"", "low surrogate without"},
      {"\"\\u12zz\"", "bad hex digit"},
      {"tru", "unknown literal"},
      {"{} {}", "unexpected text after"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Json> j = ParseJson(c.text);
    ASSERT_FALSE(j.ok()) << c.text;
    EXPECT_THAT(j.status().message(), HasSubstr(c.error)) << c.text;
    EXPECT_THAT(j.status().message(), HasSubstr("column")) << c.text;
  }
  EXPECT_THAT(ParseJson("[1, @]").status().message(), HasSubstr("column 5"));
  std::string deep(300, '[');
  EXPECT_THAT(ParseJson(deep).status().message(), HasSubstr("nested too deeply"));
}

TEST(JsonTest, MapsToRowValues) {
  auto value = [](const char* text) { return JsonToValue(ParseJson(text).value()); };
  EXPECT_TRUE(value("null").has_null_value());
  EXPECT_TRUE(value("true").bool_value());
  EXPECT_EQ(value("-9223372036854775808").int64_value(), INT64_MIN);
  EXPECT_EQ(value("9223372036854775807").int64_value(), INT64_MAX);
  EXPECT_EQ(value("18446744073709551615").uint64_value(), UINT64_MAX);
  EXPECT_EQ(value("18446744073709551616").string_value(), "18446744073709551616");
  EXPECT_EQ(value("-9223372036854775809").string_value(), "-9223372036854775809");
  EXPECT_EQ(value("0.25").double_value(), 0.25);
  EXPECT_EQ(value("1e2").double_value(), 100.0);
  EXPECT_EQ(value("\"2024-05-01\"").string_value(), "2024-05-01");
  v1::Value array = value("[1, \"a\", null]");
  ASSERT_EQ(array.array_value().values_size(), 3);
  EXPECT_EQ(array.array_value().values(1).string_value(), "a");
  v1::Value map = value(R"({"k": [2], "l": {}})");
  ASSERT_EQ(map.map_value().entries_size(), 2);
  EXPECT_EQ(map.map_value().entries(0).key().string_value(), "k");
  EXPECT_EQ(map.map_value().entries(0).value().array_value().values(0).int64_value(), 2);
  EXPECT_TRUE(map.map_value().entries(1).value().has_map_value());
}

std::vector<std::vector<std::string>> ReadAll(const std::string& text, std::vector<uint64_t>* lines,
                                              absl::Status* error) {
  std::istringstream in(text);
  CsvReader reader(&in);
  std::vector<std::vector<std::string>> out;
  std::vector<CsvField> fields;
  while (true) {
    absl::StatusOr<bool> more = reader.Next(&fields);
    if (!more.ok()) {
      *error = more.status();
      break;
    }
    if (!*more) break;
    std::vector<std::string> texts;
    for (const CsvField& f : fields) texts.push_back(f.text);
    out.push_back(texts);
    lines->push_back(reader.record_line());
  }
  return out;
}

TEST(CsvTest, ReadsQuotedFieldsAcrossLines) {
  std::vector<uint64_t> lines;
  absl::Status error;
  auto records = ReadAll("a,b,c\r\n1,\"x,y\",\"say \"\"hi\"\"\"\n\n2,\"multi\nline\",\n3,,\\N\n",
                         &lines, &error);
  EXPECT_TRUE(error.ok()) << error;
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0], (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(records[1], (std::vector<std::string>{"1", "x,y", "say \"hi\""}));
  EXPECT_EQ(records[2], (std::vector<std::string>{"2", "multi\nline", ""}));
  EXPECT_EQ(records[3], (std::vector<std::string>{"3", "", "\\N"}));
  EXPECT_EQ(lines, (std::vector<uint64_t>{1, 2, 4, 6}));
}

TEST(CsvTest, ReportsErrorsWithTheLine) {
  std::vector<uint64_t> lines;
  absl::Status error;
  ReadAll("a\n\"open\nstill open\n", &lines, &error);
  EXPECT_THAT(error.message(), HasSubstr("CSV line 2: quoted field not terminated"));
  error = absl::OkStatus();
  ReadAll("a\nb\n\"x\"y\n", &lines, &error);
  EXPECT_THAT(error.message(), HasSubstr("CSV line 3: text after a closing quote"));
}

TEST(CsvTest, FieldsBecomeTextOrNull) {
  EXPECT_TRUE(CsvFieldToValue({.text = "\\N"}).has_null_value());
  EXPECT_EQ(CsvFieldToValue({.text = "\\N", .quoted = true}).string_value(), "\\N");
  EXPECT_EQ(CsvFieldToValue({.text = "12"}).string_value(), "12");
}

}  // namespace
}  // namespace chgate::cli
