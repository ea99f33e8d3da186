// The text forms the server and the SDK share: JSON strings (escapes, well-formed UTF-8 kept,
// everything else replaced), UTF-8 sequences, ClickHouse's backslash escapes.
#include <gtest/gtest.h>

#include <string>

#include "text/escape.h"
#include "text/json.h"
#include "text/utf8.h"

namespace chgate::text {
namespace {

std::string Json(std::string_view bytes) {
  std::string out;
  AppendJsonString(bytes, &out);
  return out;
}

TEST(JsonStringTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(Json(""), R"("")");
  EXPECT_EQ(Json("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(Json("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(Json(std::string("\x00\x01\x1f\x7f", 4)), "\"\\u0000\\u0001\\u001f\x7f\"");
}

TEST(JsonStringTest, KeepsWellFormedUtf8AndReplacesEveryBadByte) {
  EXPECT_EQ(Json("é€😀"), "\"é€😀\"");
  // A lone continuation byte, an overlong '/', a surrogate, a code point past U+10FFFF, and a
  // sequence cut short: each bad byte becomes one \ufffd.
  EXPECT_EQ(Json("\x80"), R"("\ufffd")");
  EXPECT_EQ(Json("\xc0\xaf"), R"("\ufffd\ufffd")");
  EXPECT_EQ(Json("\xed\xa0\x80"), R"("\ufffd\ufffd\ufffd")");
  EXPECT_EQ(Json("\xf4\x90\x80\x80"), R"("\ufffd\ufffd\ufffd\ufffd")");
  EXPECT_EQ(Json("a\xe2\x82"), R"("a\ufffd\ufffd")");
}

TEST(Utf8Test, SequenceLengths) {
  EXPECT_EQ(Utf8SequenceLength("a", 0), 1u);
  EXPECT_EQ(Utf8SequenceLength("é", 0), 2u);
  EXPECT_EQ(Utf8SequenceLength("€", 0), 3u);
  EXPECT_EQ(Utf8SequenceLength("😀", 0), 4u);
  EXPECT_EQ(Utf8SequenceLength("\xe0\x80\x80", 0), 0u);  // overlong
  EXPECT_EQ(Utf8SequenceLength("\xf0\x9f\x98", 0), 0u);  // cut short
}

TEST(EscapeTest, ClickHouseBackslashEscapesRoundTrip) {
  const std::string raw("a'b\\c\n\t\r\b\f\0d", 12);
  std::string escaped;
  AppendEscaped(raw, &escaped);
  EXPECT_EQ(escaped, R"(a\'b\\c\n\t\r\b\f\0d)");
  std::string quoted;
  AppendQuoted("it's", &quoted);
  EXPECT_EQ(quoted, R"('it\'s')");
  // Reading the escapes back gives the bytes again; unknown escapes stand for themselves.
  std::string back;
  for (size_t i = 0; i < escaped.size(); ++i) {
    back.push_back(escaped[i] == '\\' ? UnescapeChar(escaped[++i]) : escaped[i]);
  }
  EXPECT_EQ(back, raw);
  EXPECT_EQ(UnescapeChar('q'), 'q');
  EXPECT_EQ(UnescapeChar('a'), '\a');
  EXPECT_EQ(UnescapeChar('v'), '\v');
}

TEST(JsonObjectTest, OnlyOneStrictObjectDocumentPasses) {
  EXPECT_TRUE(
      ValidateJsonObject(R"({"a": [1, 2.5e3, -0, true, null], "b": {"c": "\u00e9"}})").ok());
  EXPECT_TRUE(ValidateJsonObject("  {}  ").ok());
  for (const char* bad : {"[1]", "{\"a\": 1,}", "{'a': 1}", "{\"a\": 01}", "{} {}", "{\"a\"}",
                          "{\"a\": 1} // c", "{\"a\": \"\x01\"}"}) {
    const absl::Status status = ValidateJsonObject(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(status.message().find("at offset"), absl::string_view::npos) << bad;
  }
  std::string deep(1001, '[');
  deep = "{\"a\":" + deep;
  EXPECT_NE(ValidateJsonObject(deep).message().find("nested too deeply"), absl::string_view::npos);
}

TEST(JsonObjectTest, DottedPathsBecomeNestedObjects) {
  std::string out;
  AppendNestedJsonObject({{"a.b", "1"}, {"a.c.d", "\"x\""}, {"e", "[2]"}, {"f/g", "null"}}, &out);
  EXPECT_EQ(out, R"({"a":{"b":1,"c":{"d":"x"}},"e":[2],"f\/g":null})");
  out.clear();
  AppendNestedJsonObject({}, &out);
  EXPECT_EQ(out, "{}");
  EXPECT_TRUE(ValidateJsonObject(R"({"a":{"b":1,"c":{"d":"x"}},"e":[2],"f\/g":null})").ok());
}

}  // namespace
}  // namespace chgate::text
