#include "text/trace_context.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace chgate::text {
namespace {

// The W3C specification's example traceparent.
constexpr char kTraceparent[] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

TEST(TraceContextTest, ParsesAndFormatsTheW3cTraceparent) {
  std::optional<TraceContext> t = ParseTraceparent(kTraceparent, "congo=t61rcWkgMzE");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->trace_id_high, 0x0af7651916cd43ddu);
  EXPECT_EQ(t->trace_id_low, 0x8448eb211c80319cu);
  EXPECT_EQ(t->span_id, 0xb7ad6b7169203331u);
  EXPECT_EQ(t->trace_flags, 1);
  EXPECT_EQ(t->tracestate, "congo=t61rcWkgMzE");
  EXPECT_EQ(t->Traceparent(), kTraceparent);
  EXPECT_EQ(t->TraceIdHex(), "0af7651916cd43dd8448eb211c80319c");
  // A later version may append fields; its first 55 characters are read.
  EXPECT_TRUE(
      ParseTraceparent("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what").has_value());
  for (const char* bad : {
           "",
           "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",  // 00 has no more fields
           "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",    // upper case
           "00-00000000000000000000000000000000-b7ad6b7169203331-01",    // zero trace id
           "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",    // zero span id
           "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",    // forbidden version
           "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
           "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333g-01",
       }) {
    EXPECT_FALSE(ParseTraceparent(bad).has_value()) << bad;
  }
  EXPECT_EQ(ParseTraceparent(kTraceparent, std::string(600, 'x'))->tracestate.size(), 512u);
}

}  // namespace
}  // namespace chgate::text
