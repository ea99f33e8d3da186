#include "tests/integration/clickhouse/type_cases.h"

namespace chgate::clickhouse::testing {

std::vector<TypeCase> AllTypeCases() {
  std::string mib(1 << 20, 'm');
  return {
      {"Decimal32", "Decimal(9, 2)", {"0.00", "-0.01", "9999999.99", "-9999999.99", "123.45"}},
      {"Decimal64",
       "Decimal(18, 4)",
       {"-1.0001", "0.0000", "99999999999999.9999", "-99999999999999.9999"}},
      {"Decimal128",
       "Decimal(38, 10)",
       {"9999999999999999999999999999.9999999999", "-9999999999999999999999999999.9999999999",
        "0.0000000001", "12345678901234567890.0123456789"}},
      {"Uuid",
       "UUID",
       {"61f0c404-5cb3-11e7-907b-a6006ad3dba0", "00000000-0000-0000-0000-000000000001",
        "ffffffff-ffff-ffff-ffff-fffffffffffe"}},
      // The server prints enum values in value order.
      {"Enum8",
       "Enum8('c,d' = -128, 'a' = 1, 'b\\'q' = 2, 'e)' = 127)",
       {"a", "b\\'q", "c,d", "e)"}},
      {"Enum16", "Enum16('x' = -1000, 'y' = 1000)", {"x", "y"}},
      {"Tuple",
       "Tuple(UInt8, String, Nullable(Int64))",
       {"(1,'a',NULL)", "(255,'',-9223372036854775808)"}},
      // (18.16 stores an Array(Tuple(...)) column as Nested subcolumns, so that case is covered by
      // the golden tests instead.)
      {"LowCardinalityString", "LowCardinality(String)", {"red", "green", "red", "", "green"}},
      {"LowCardinalityNullable", "LowCardinality(Nullable(String))", {"\\N", "lc", "lc", ""}},
      {"ArrayLowCardinalityNullable",
       "Array(LowCardinality(Nullable(String)))",
       {"[]", "['a',NULL,'a']", "[NULL]", "['']"}},
      {"NullableDecimal", "Nullable(Decimal(18, 4))", {"\\N", "1.2345", "-0.0001"}},
      {"NestedNullableStrings",
       "Array(Array(Nullable(String)))",
       {"[[NULL,'a'],[]]", "[]", "[[]]"}},
      {"DateBoundaries", "Date", {"1970-01-02", "2000-02-29", "2105-12-31"}},
      {"DateTimeBoundaries",
       "DateTime('UTC')",
       {"1970-01-01 00:00:01", "2038-01-19 03:14:08", "2105-12-31 23:59:59"}},
      {"DateTimeZone",
       "DateTime('America/New_York')",
       {"1970-01-01 00:00:00", "2021-03-14 03:30:00"}},
      {"Strings",
       "String",
       {"", "\\0\\t\\n\\\\", "\xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80", mib}},
      {"FixedStringBytes", "FixedString(3)", {"\\0\\0\\0", "\xe2\x82\xac", "ab\\0"}},
      {"Float32", "Float32", {"0", "-1.5", "3.4028235e38", "1e-7", "inf", "-inf", "nan"}},
      {"Float64",
       "Float64",
       {"0.1", "1e100", "-2.2250738585072014e-308", "1.7976931348623157e308"}},
  };
}

}  // namespace chgate::clickhouse::testing
