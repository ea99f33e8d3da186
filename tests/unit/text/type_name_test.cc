// Type names as the server prints them: parsing into a TypeAst, canonical printing, and errors.
#include "text/type_name.h"

#include <gtest/gtest.h>

#include <string>

#include "text/escape.h"

namespace chgate::text {
namespace {

using Kind = TypeAst::Kind;

TypeAst ParseOrDie(std::string_view text) {
  absl::StatusOr<TypeAst> t = ParseTypeName(text);
  EXPECT_TRUE(t.ok()) << text << ": " << t.status();
  return t.ok() ? *std::move(t) : TypeAst{};
}

// Every spelling the 18.16 server printed in the captures, plus newer forms.
TEST(TypeAstTest, CanonicalNamesRoundTripUnchanged) {
  for (const char* name : {
           "UInt64",
           "String",
           "Nullable(String)",
           "Array(UInt32)",
           "Array(Array(String))",
           "Array(Nullable(UInt8))",
           "DateTime",
           "DateTime('Europe/Moscow')",
           "DateTime64(3, 'UTC')",
           "Date",
           "UUID",
           "Decimal(9, 2)",
           "Decimal(18, 4)",
           "Decimal(38, 10)",
           "FixedString(4)",
           "Enum8('a' = 1, 'b' = 2)",
           "Enum16('x' = -1000, 'y' = 1000)",
           "Enum16('x' = -1000)",
           "Tuple(UInt8, String)",
           "Tuple(a Nullable(Decimal(18, 4)), b Array(Tuple(UInt8, String)))",
           "Map(String, Array(UInt64))",
           "LowCardinality(String)",
           "LowCardinality(Nullable(String))",
           "Array(LowCardinality(Nullable(String)))",
           "Nullable(Nothing)",
           "SimpleAggregateFunction(sum, UInt64)",
       }) {
    SCOPED_TRACE(name);
    EXPECT_EQ(FormatTypeName(ParseOrDie(name)), name);
  }
}

TEST(TypeAstTest, ParsesPlainName) {
  TypeAst t = ParseOrDie("UInt64");
  EXPECT_EQ(t.kind, Kind::kType);
  EXPECT_EQ(t.name, "UInt64");
  EXPECT_TRUE(t.args.empty());
  EXPECT_TRUE(t.element_name.empty());
}

TEST(TypeAstTest, ParsesNestedTypes) {
  TypeAst t = ParseOrDie("Array(Array(String))");
  ASSERT_EQ(t.args.size(), 1u);
  ASSERT_EQ(t.args[0].name, "Array");
  ASSERT_EQ(t.args[0].args.size(), 1u);
  EXPECT_EQ(t.args[0].args[0].name, "String");
  EXPECT_EQ(t.args[0].args[0].kind, Kind::kType);
}

TEST(TypeAstTest, ParsesStringAndNumberArguments) {
  TypeAst tz = ParseOrDie("DateTime('Europe/Moscow')");
  ASSERT_EQ(tz.args.size(), 1u);
  EXPECT_EQ(tz.args[0].kind, Kind::kString);
  EXPECT_EQ(tz.args[0].name, "Europe/Moscow");

  TypeAst dt64 = ParseOrDie("DateTime64(3, 'UTC')");
  ASSERT_EQ(dt64.args.size(), 2u);
  EXPECT_EQ(dt64.args[0].kind, Kind::kNumber);
  EXPECT_EQ(dt64.args[0].number, 3);
  EXPECT_EQ(dt64.args[1].kind, Kind::kString);
  EXPECT_EQ(dt64.args[1].name, "UTC");

  TypeAst dec = ParseOrDie("Decimal(9, 2)");
  ASSERT_EQ(dec.args.size(), 2u);
  EXPECT_EQ(dec.args[0].number, 9);
  EXPECT_EQ(dec.args[1].number, 2);
}

TEST(TypeAstTest, ParsesEnumEntries) {
  TypeAst t = ParseOrDie("Enum8('a' = 1, 'b' = 2)");
  ASSERT_EQ(t.args.size(), 2u);
  EXPECT_EQ(t.args[0].kind, Kind::kEnumEntry);
  EXPECT_EQ(t.args[0].name, "a");
  EXPECT_EQ(t.args[0].number, 1);
  EXPECT_EQ(t.args[1].name, "b");
  EXPECT_EQ(t.args[1].number, 2);

  TypeAst neg = ParseOrDie("Enum16('x' = -1000)");
  ASSERT_EQ(neg.args.size(), 1u);
  EXPECT_EQ(neg.args[0].number, -1000);
}

TEST(TypeAstTest, EnumNamesKeepEscapedQuotesBackslashesCommasAndParens) {
  // As the server prints them: quote and backslash escaped, everything else literal.
  const std::string text =
      R"(Enum8('it\'s' = -128, 'a\\b' = 0, 'x, y' = 1, 'f(x)' = 2, ')' = 127))";
  TypeAst t = ParseOrDie(text);
  ASSERT_EQ(t.args.size(), 5u);
  EXPECT_EQ(t.args[0].name, "it's");
  EXPECT_EQ(t.args[0].number, -128);
  EXPECT_EQ(t.args[1].name, "a\\b");
  EXPECT_EQ(t.args[1].number, 0);
  EXPECT_EQ(t.args[2].name, "x, y");
  EXPECT_EQ(t.args[3].name, "f(x)");
  EXPECT_EQ(t.args[4].name, ")");
  EXPECT_EQ(t.args[4].number, 127);
  EXPECT_EQ(FormatTypeName(t), text);
}

TEST(TypeAstTest, EnumNamesWithControlEscapesAreUnescapedAndReescaped) {
  TypeAst t = ParseOrDie(R"(Enum8('tab\there' = 1, 'nl\n' = 2))");
  ASSERT_EQ(t.args.size(), 2u);
  EXPECT_EQ(t.args[0].name, "tab\there");
  EXPECT_EQ(t.args[1].name, "nl\n");
  EXPECT_EQ(FormatTypeName(t), R"(Enum8('tab\there' = 1, 'nl\n' = 2))");
}

TEST(TypeAstTest, ParsesUnnamedAndNamedTuples) {
  TypeAst plain = ParseOrDie("Tuple(UInt8, String)");
  ASSERT_EQ(plain.args.size(), 2u);
  EXPECT_TRUE(plain.args[0].element_name.empty());
  EXPECT_EQ(plain.args[0].name, "UInt8");

  TypeAst named = ParseOrDie("Tuple(a Nullable(Decimal(18, 4)), b Array(Tuple(UInt8, String)))");
  ASSERT_EQ(named.args.size(), 2u);
  EXPECT_EQ(named.args[0].element_name, "a");
  EXPECT_EQ(named.args[0].name, "Nullable");
  ASSERT_EQ(named.args[0].args.size(), 1u);
  EXPECT_EQ(named.args[0].args[0].name, "Decimal");
  EXPECT_EQ(named.args[1].element_name, "b");
  EXPECT_EQ(named.args[1].name, "Array");
  ASSERT_EQ(named.args[1].args.size(), 1u);
  EXPECT_EQ(named.args[1].args[0].args.size(), 2u);
}

TEST(TypeAstTest, ParsesMapAndLowCardinality) {
  TypeAst map = ParseOrDie("Map(String, Array(UInt64))");
  ASSERT_EQ(map.args.size(), 2u);
  EXPECT_EQ(map.args[0].name, "String");
  EXPECT_EQ(map.args[1].name, "Array");

  TypeAst lc = ParseOrDie("Array(LowCardinality(Nullable(String)))");
  ASSERT_EQ(lc.args.size(), 1u);
  EXPECT_EQ(lc.args[0].name, "LowCardinality");
  EXPECT_EQ(lc.args[0].args[0].name, "Nullable");
  EXPECT_EQ(lc.args[0].args[0].args[0].name, "String");
}

TEST(TypeAstTest, OddSpacingParsesToTheCanonicalName) {
  struct Case {
    const char* input;
    const char* canonical;
  };
  for (const Case& c : {
           Case{"  UInt64  ", "UInt64"},
           Case{"Nullable( String )", "Nullable(String)"},
           Case{"Nullable (String)", "Nullable(String)"},
           Case{"Decimal(9,2)", "Decimal(9, 2)"},
           Case{"DateTime64( 3 ,'UTC' )", "DateTime64(3, 'UTC')"},
           Case{"Enum8('a'=1,'b'   =   -2)", "Enum8('a' = 1, 'b' = -2)"},
           Case{"Tuple(\ta\tUInt8,\n b  String)", "Tuple(a UInt8, b String)"},
           Case{"Map(String,Array( UInt64 ))", "Map(String, Array(UInt64))"},
           Case{"Enum8('a' = +1)", "Enum8('a' = 1)"},
       }) {
    SCOPED_TRACE(c.input);
    EXPECT_EQ(FormatTypeName(ParseOrDie(c.input)), c.canonical);
  }
}

TEST(TypeAstTest, MalformedNamesAreInvalidArgument) {
  for (const char* bad : {
           "",
           "   ",
           "Array(UInt8",                        // unbalanced
           "Array(UInt8))",                      // trailing ')'
           "Array((UInt8)",                      // stray '('
           "UInt64 junk",                        // trailing junk
           "Nullable(String) x",                 // trailing junk after a complete type
           "Enum8('a = 1)",                      // unterminated string
           "Enum8('a' = )",                      // missing number
           "Enum8('a' = 99999999999999999999)",  // number overflows
           "DateTime('UTC",                      // unterminated string at the end
           "Decimal(9, 2,)",                     // empty argument
           "Tuple(,UInt8)",
           "(UInt8)",
           "1UInt8",
       }) {
    SCOPED_TRACE(bad);
    absl::StatusOr<TypeAst> t = ParseTypeName(bad);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

std::string NestedArrays(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "Array(";
  s += "UInt8";
  s += std::string(static_cast<size_t>(depth), ')');
  return s;
}

TEST(TypeAstTest, NestingDeeperThan64IsRejected) {
  EXPECT_TRUE(ParseTypeName(NestedArrays(64)).ok());
  absl::StatusOr<TypeAst> deep = ParseTypeName(NestedArrays(65));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(deep.status().message().find("nested too deeply"), std::string_view::npos);
  // Far deeper input fails the same way instead of exhausting the stack.
  EXPECT_EQ(ParseTypeName(NestedArrays(100000)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TypeAstTest, ErrorsNameTheOffset) {
  absl::StatusOr<TypeAst> t = ParseTypeName("Array(UInt8");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("offset 11"), std::string_view::npos) << t.status();
}

TEST(TypeAstTest, AppendQuotedEscapesQuotesBackslashesAndControls) {
  std::string out;
  AppendQuoted(std::string("a'b\\c\n\t\0d", 9), &out);
  EXPECT_EQ(out, R"('a\'b\\c\n\t\0d')");
}

TEST(TypeAstTest, DynamicAndJsonParametersRoundTrip) {
  for (const char* text :
       {"Dynamic", "Dynamic(max_types=8)", "Variant(String, UInt64)", "JSON",
        "JSON(max_dynamic_types=8, max_dynamic_paths=10)",
        "JSON(`a.b` UInt32, `c d` Array(String), SKIP `x.y`, SKIP z, SKIP REGEXP 'p\\\\..*')",
        "Array(JSON(max_dynamic_paths=4, max_dynamic_types=2))"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<TypeAst> t = ParseTypeName(text);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(FormatTypeName(*t), text);
  }
  absl::StatusOr<TypeAst> t =
      ParseTypeName("JSON(max_dynamic_paths = 3, a.b UInt8, skip `c`, SKIP regexp 'r')");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->args.size(), 4u);
  EXPECT_EQ(t->args[0].kind, TypeAst::Kind::kSetting);
  EXPECT_EQ(t->args[0].name, "max_dynamic_paths");
  EXPECT_EQ(t->args[0].number, 3);
  EXPECT_EQ(t->args[1].element_name, "a.b");
  EXPECT_EQ(t->args[1].name, "UInt8");
  EXPECT_EQ(t->args[2].kind, TypeAst::Kind::kSkip);
  EXPECT_EQ(t->args[2].name, "c");
  EXPECT_EQ(t->args[3].kind, TypeAst::Kind::kSkipRegexp);
  EXPECT_EQ(t->args[3].name, "r");
  EXPECT_EQ(FormatTypeName(*t), "JSON(max_dynamic_paths=3, `a.b` UInt8, SKIP c, SKIP REGEXP 'r')");
  // A quoted `SKIP` is a typed path; SKIP is a keyword only inside JSON.
  t = ParseTypeName("JSON(`SKIP` UInt8)");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->args[0].kind, TypeAst::Kind::kType);
  EXPECT_EQ(t->args[0].element_name, "SKIP");
  t = ParseTypeName("Tuple(SKIP UInt8)");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->args[0].element_name, "SKIP");
  for (const char* bad : {"Dynamic(max_types=)", "Dynamic(max_types=x)", "JSON(SKIP REGEXP x)",
                          "JSON(SKIP )", "JSON(`a`=3)"}) {
    EXPECT_FALSE(ParseTypeName(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace chgate::text
