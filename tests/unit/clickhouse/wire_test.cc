// Primitive encodings (VarUInt, String, fixed-width LE), ReadBuffer refills across tiny windows,
// GatherWriter span handling and ByteBuffer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/gather.h"
#include "tests/unit/clickhouse/test_util.h"

namespace chgate::clickhouse {
namespace {

using ::chgate::clickhouse::testing::Hex;
using ::chgate::clickhouse::testing::Unhex;

// Hands out `data` in windows of at most `window` bytes, the way a socket may.
class TinyWindowReadBuffer final : public ReadBuffer {
 public:
  explicit TinyWindowReadBuffer(std::string data, size_t window = 1)
      : data_(std::move(data)), window_(window) {}

  int refills() const { return refills_; }

 protected:
  absl::Status Refill() override {
    ++refills_;
    if (next_ >= data_.size()) return absl::OutOfRangeError("test source exhausted");
    const size_t n = std::min(window_, data_.size() - next_);
    SetWindow(data_.data() + next_, data_.data() + next_ + n);
    next_ += n;
    return absl::OkStatus();
  }

 private:
  std::string data_;
  size_t window_;
  size_t next_ = 0;
  int refills_ = 0;
};

// A source that (wrongly) reports success with nothing to read.
class EmptyWindowReadBuffer final : public ReadBuffer {
 protected:
  absl::Status Refill() override {
    SetWindow(nullptr, nullptr);
    return absl::OkStatus();
  }
};

std::string EncodeVarUIntString(uint64_t v) {
  char buf[10];
  return std::string(buf, EncodeVarUInt(v, buf));
}

struct VarUIntCase {
  uint64_t value;
  const char* hex;
};

constexpr VarUIntCase kVarUIntCases[] = {
    {0, "00"},
    {1, "01"},
    {127, "7f"},
    {128, "8001"},
    {300, "ac02"},
    {16383, "ff7f"},
    {16384, "808001"},
    {54412, "8ca903"},
    {(uint64_t{1} << 63) - 1, "ffffffffffffffff7f"},
    {uint64_t{1} << 63, "80808080808080808001"},
    {std::numeric_limits<uint64_t>::max(), "ffffffffffffffffff01"},
};

TEST(VarUIntTest, EncodesBoundaryValues) {
  for (const VarUIntCase& c : kVarUIntCases) {
    SCOPED_TRACE(c.value);
    EXPECT_EQ(Hex(EncodeVarUIntString(c.value)), c.hex);
    EXPECT_EQ(VarUIntSize(c.value), std::string(c.hex).size() / 2);
  }
}

TEST(VarUIntTest, DecodesBoundaryValuesOnFastAndSlowPaths) {
  for (const VarUIntCase& c : kVarUIntCases) {
    SCOPED_TRACE(c.value);
    const std::string bytes = Unhex(c.hex);
    // Exactly the bytes (fewer than 10 available: the slow path for short values).
    MemoryReadBuffer exact(bytes);
    uint64_t v = 0;
    ASSERT_TRUE(exact.ReadVarUInt(&v).ok());
    EXPECT_EQ(v, c.value);
    EXPECT_EQ(exact.position(), bytes.size());
    EXPECT_TRUE(exact.AtEnd());
    // Followed by padding (the fast path, which decodes inside the window).
    const std::string padded = bytes + std::string(12, '\x55');
    MemoryReadBuffer fast(padded);
    ASSERT_TRUE(fast.ReadVarUInt(&v).ok());
    EXPECT_EQ(v, c.value);
    EXPECT_EQ(fast.position(), bytes.size());
    // One byte at a time.
    TinyWindowReadBuffer tiny(bytes);
    ASSERT_TRUE(tiny.ReadVarUInt(&v).ok());
    EXPECT_EQ(v, c.value);
    EXPECT_EQ(tiny.position(), bytes.size());
  }
}

TEST(VarUIntTest, RejectsElevenByteEncodingOnEveryPath) {
  const std::string bytes = std::string(10, '\xff') + std::string(1, '\x01');
  uint64_t v = 0;
  const std::string padded = bytes + std::string(10, '\0');
  MemoryReadBuffer fast(padded);
  EXPECT_EQ(fast.ReadVarUInt(&v).code(), absl::StatusCode::kDataLoss);
  MemoryReadBuffer exact(bytes);
  EXPECT_EQ(exact.ReadVarUInt(&v).code(), absl::StatusCode::kDataLoss);
  TinyWindowReadBuffer tiny(bytes);
  EXPECT_EQ(tiny.ReadVarUInt(&v).code(), absl::StatusCode::kDataLoss);
}

TEST(VarUIntTest, RejectsTenByteEncodingAbove64Bits) {
  // 2^64 and 2^70 - 1: the tenth byte carries bits that do not fit.
  for (const char* hex : {"ffffffffffffffffff02", "ffffffffffffffffff7f"}) {
    SCOPED_TRACE(hex);
    const std::string bytes = Unhex(hex);
    uint64_t v = 0;
    const std::string padded = bytes + std::string(10, '\0');
    MemoryReadBuffer fast(padded);
    EXPECT_EQ(fast.ReadVarUInt(&v).code(), absl::StatusCode::kDataLoss);
    MemoryReadBuffer exact(bytes);
    EXPECT_EQ(exact.ReadVarUInt(&v).code(), absl::StatusCode::kDataLoss);
    TinyWindowReadBuffer tiny(bytes);
    EXPECT_EQ(tiny.ReadVarUInt(&v).code(), absl::StatusCode::kDataLoss);
  }
}

TEST(VarUIntTest, TruncatedEncodingIsOutOfRange) {
  uint64_t v = 0;
  const std::string truncated = Unhex("8080");
  MemoryReadBuffer in(truncated);
  EXPECT_EQ(in.ReadVarUInt(&v).code(), absl::StatusCode::kOutOfRange);
  MemoryReadBuffer empty("");
  EXPECT_EQ(empty.ReadVarUInt(&v).code(), absl::StatusCode::kOutOfRange);
}

TEST(StringEncodingTest, WritesVarUIntLengthThenBytes) {
  ByteBuffer b;
  b.AppendString("");
  b.AppendString("abc");
  b.AppendString(std::string(200, 'x'));
  EXPECT_EQ(Hex(b.view().substr(0, 7)), "0003616263c801");
  EXPECT_EQ(b.size(), 1 + 4 + 2 + 200);

  MemoryReadBuffer in(b.view());
  std::string s = "stale";
  ASSERT_TRUE(in.ReadString(&s).ok());
  EXPECT_EQ(s, "");
  ASSERT_TRUE(in.ReadString(&s).ok());
  EXPECT_EQ(s, "abc");
  ASSERT_TRUE(in.ReadString(&s).ok());
  EXPECT_EQ(s, std::string(200, 'x'));
  EXPECT_TRUE(in.AtEnd());
}

TEST(StringEncodingTest, LengthAboveLimitIsDataLossBeforeReadingBytes) {
  ByteBuffer b;
  b.AppendString("hello");
  MemoryReadBuffer in(b.view());
  std::string s;
  EXPECT_EQ(in.ReadString(&s, 4).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(in.position(), 1u);

  MemoryReadBuffer in2(b.view());
  ByteBuffer into;
  EXPECT_EQ(in2.ReadStringInto(&into, 4).code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(into.empty());
}

TEST(StringEncodingTest, BogusHugeLengthOnTruncatedDataFailsWithoutAllocatingIt) {
  // Claims exactly the limit (1 GiB) and then ends after a few bytes.
  const std::string bytes = EncodeVarUIntString(kMaxStringSize) + "abcdef";
  {
    MemoryReadBuffer in(bytes);
    std::string s;
    EXPECT_EQ(in.ReadString(&s).code(), absl::StatusCode::kOutOfRange);
    EXPECT_LT(s.capacity(), size_t{1} << 16);
  }
  {
    TinyWindowReadBuffer in(bytes, 2);
    std::string s;
    EXPECT_EQ(in.ReadString(&s).code(), absl::StatusCode::kOutOfRange);
    EXPECT_LT(s.capacity(), size_t{1} << 16);
  }
  {
    TinyWindowReadBuffer in(bytes, 3);
    ByteBuffer into;
    EXPECT_EQ(in.ReadStringInto(&into).code(), absl::StatusCode::kOutOfRange);
    EXPECT_LT(into.capacity(), size_t{1} << 16);
  }
}

TEST(FixedEncodingTest, IsLittleEndian) {
  ByteBuffer b;
  b.AppendFixed<uint32_t>(0x01020304);
  b.AppendFixed<int16_t>(-2);
  b.AppendFixed<int32_t>(-1);
  b.AppendFixed<uint64_t>(0x1122334455667788);
  b.AppendFixed<double>(1.0);
  b.AppendFixed<float>(-0.5f);
  EXPECT_EQ(Hex(b.view()), "04030201feffffffffff8877665544332211000000000000f03f000000bf");

  MemoryReadBuffer in(b.view());
  uint32_t u32 = 0;
  int16_t i16 = 0;
  int32_t i32 = 0;
  uint64_t u64 = 0;
  double d = 0;
  float f = 0;
  ASSERT_TRUE(in.ReadFixed(&u32).ok());
  ASSERT_TRUE(in.ReadFixed(&i16).ok());
  ASSERT_TRUE(in.ReadFixed(&i32).ok());
  ASSERT_TRUE(in.ReadFixed(&u64).ok());
  ASSERT_TRUE(in.ReadFixed(&d).ok());
  ASSERT_TRUE(in.ReadFixed(&f).ok());
  EXPECT_EQ(u32, 0x01020304u);
  EXPECT_EQ(i16, -2);
  EXPECT_EQ(i32, -1);
  EXPECT_EQ(u64, 0x1122334455667788u);
  EXPECT_EQ(d, 1.0);
  EXPECT_EQ(f, -0.5f);
  EXPECT_EQ(in.ReadFixed(&f).code(), absl::StatusCode::kOutOfRange);
}

// A stream exercising every read method, and the reads that take it apart again.
std::string MixedStream() {
  ByteBuffer b;
  b.AppendVarUInt(300);
  b.AppendString("hello, world");
  b.AppendFixed<uint32_t>(0xdeadbeef);
  b.AppendFixed<int64_t>(-42);
  b.Append("raw-bytes", 9);
  b.Append("skipped!!", 9);
  b.AppendString(std::string(1000, 'z'));
  b.AppendVarUInt(std::numeric_limits<uint64_t>::max());
  b.AppendString("");
  b.PushBack('!');
  return std::string(b.view());
}

void ReadMixedStream(ReadBuffer& in, size_t total) {
  uint64_t v = 0;
  ASSERT_TRUE(in.ReadVarUInt(&v).ok());
  EXPECT_EQ(v, 300u);
  EXPECT_EQ(in.position(), 2u);
  std::string s;
  ASSERT_TRUE(in.ReadString(&s).ok());
  EXPECT_EQ(s, "hello, world");
  EXPECT_EQ(in.position(), 15u);
  uint32_t u32 = 0;
  ASSERT_TRUE(in.ReadFixed(&u32).ok());
  EXPECT_EQ(u32, 0xdeadbeefu);
  int64_t i64 = 0;
  ASSERT_TRUE(in.ReadFixed(&i64).ok());
  EXPECT_EQ(i64, -42);
  char raw[9];
  ASSERT_TRUE(in.Read(raw, sizeof(raw)).ok());
  EXPECT_EQ(std::string(raw, sizeof(raw)), "raw-bytes");
  ASSERT_TRUE(in.Skip(9).ok());
  EXPECT_EQ(in.position(), 15u + 4 + 8 + 9 + 9);
  ByteBuffer into;
  into.Append("pre:", 4);
  ASSERT_TRUE(in.ReadStringInto(&into).ok());
  EXPECT_EQ(into.view(), "pre:" + std::string(1000, 'z'));
  ASSERT_TRUE(in.ReadVarUInt(&v).ok());
  EXPECT_EQ(v, std::numeric_limits<uint64_t>::max());
  ASSERT_TRUE(in.ReadString(&s).ok());
  EXPECT_EQ(s, "");
  ASSERT_TRUE(in.Ensure().ok());
  EXPECT_EQ(*in.pos(), '!');
  in.Advance(1);
  EXPECT_EQ(in.position(), total);
  EXPECT_TRUE(in.AtEnd());
  EXPECT_EQ(in.Ensure().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(in.Read(raw, 1).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(in.Skip(1).code(), absl::StatusCode::kOutOfRange);
}

TEST(ReadBufferTest, EveryReadWorksAcrossOneByteWindows) {
  const std::string data = MixedStream();
  TinyWindowReadBuffer in(data, 1);
  ReadMixedStream(in, data.size());
  // One refill per byte, plus the ones that found the end.
  EXPECT_GE(in.refills(), static_cast<int>(data.size()));
}

TEST(ReadBufferTest, EveryReadWorksAcrossOddWindowSizes) {
  const std::string data = MixedStream();
  for (size_t window : {2, 3, 7, 11, 64, 4096}) {
    SCOPED_TRACE(window);
    TinyWindowReadBuffer in(data, window);
    ReadMixedStream(in, data.size());
  }
  MemoryReadBuffer whole(data);
  ReadMixedStream(whole, data.size());
}

TEST(ReadBufferTest, ReadSpanningWindowsFailsWhenDataEnds) {
  TinyWindowReadBuffer in("abc", 1);
  char buf[5];
  EXPECT_EQ(in.Read(buf, sizeof(buf)).code(), absl::StatusCode::kOutOfRange);
  TinyWindowReadBuffer in2("abc", 2);
  EXPECT_EQ(in2.Skip(4).code(), absl::StatusCode::kOutOfRange);
}

TEST(ReadBufferTest, EmptyRefillIsAnInternalError) {
  EmptyWindowReadBuffer in;
  uint8_t b = 0;
  EXPECT_EQ(in.ReadFixed(&b).code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(in.AtEnd());
}

TEST(GatherWriterTest, SmallWritesAreMergedIntoOneSpan) {
  GatherWriter w;
  w.WriteVarUInt(2);
  w.WriteString("");
  w.WriteString("abc");
  w.WriteFixed<int32_t>(-1);
  w.Write("xyz");
  ASSERT_EQ(w.spans().size(), 1u);
  EXPECT_EQ(w.size(), 1u + 1 + 4 + 4 + 3);
  EXPECT_EQ(Hex(w.ToString()), "020003616263ffffffff78797a");
}

TEST(GatherWriterTest, ReferenceAtMinimumSizeIsNotCopied) {
  const std::string big(GatherWriter::kMinReference, 'x');
  GatherWriter w;
  w.Write("ab");
  w.Reference(big.data(), big.size());
  w.Write("cd");
  ASSERT_EQ(w.spans().size(), 3u);
  EXPECT_EQ(w.spans()[1].iov_base, static_cast<const void*>(big.data()));
  EXPECT_EQ(w.spans()[1].iov_len, big.size());
  EXPECT_EQ(w.ToString(), "ab" + big + "cd");
  EXPECT_EQ(w.size(), big.size() + 4);
}

TEST(GatherWriterTest, ReferenceBelowMinimumSizeIsCopied) {
  std::string small(GatherWriter::kMinReference - 1, 'y');
  GatherWriter w;
  w.Write("ab");
  w.Reference(small.data(), small.size());
  w.Write("cd");
  ASSERT_EQ(w.spans().size(), 1u);
  EXPECT_NE(w.spans()[0].iov_base, static_cast<const void*>(small.data()));
  small.assign(small.size(), 'z');  // the writer owns its copy
  EXPECT_EQ(w.ToString(), "ab" + std::string(GatherWriter::kMinReference - 1, 'y') + "cd");
}

TEST(GatherWriterTest, AdjacentReferencesShareOneSpan) {
  const std::string big(3 * GatherWriter::kMinReference, 'q');
  GatherWriter w;
  w.Reference(big.data(), GatherWriter::kMinReference);
  w.Reference(big.data() + GatherWriter::kMinReference, 2 * GatherWriter::kMinReference);
  ASSERT_EQ(w.spans().size(), 1u);
  EXPECT_EQ(w.spans()[0].iov_len, big.size());
}

TEST(GatherWriterTest, WritesCrossTheChunkBoundaryAt64KiB) {
  ASSERT_EQ(GatherWriter::kChunkSize, size_t{64} * 1024);
  const std::string first(GatherWriter::kChunkSize - 10, 'a');
  const std::string second(20, 'b');
  GatherWriter w;
  w.Write(first);
  w.Write(second);
  ASSERT_EQ(w.spans().size(), 2u);
  EXPECT_EQ(w.spans()[0].iov_len, GatherWriter::kChunkSize);
  EXPECT_EQ(w.spans()[1].iov_len, 10u);
  EXPECT_EQ(w.ToString(), first + second);

  // One write larger than several chunks.
  GatherWriter big;
  std::string data(3 * GatherWriter::kChunkSize + 5, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  big.Write(data);
  EXPECT_EQ(big.spans().size(), 4u);
  EXPECT_EQ(big.size(), data.size());
  EXPECT_EQ(big.ToString(), data);
}

TEST(GatherWriterTest, ClearForgetsTheMessageAndReusesChunks) {
  GatherWriter w;
  w.Write(std::string(GatherWriter::kChunkSize + 100, 'a'));
  ASSERT_EQ(w.spans().size(), 2u);
  const void* first_chunk = w.spans()[0].iov_base;
  const void* second_chunk = w.spans()[1].iov_base;
  w.Clear();
  EXPECT_EQ(w.size(), 0u);
  EXPECT_TRUE(w.spans().empty());
  EXPECT_EQ(w.ToString(), "");

  w.Write("hello");
  ASSERT_EQ(w.spans().size(), 1u);
  EXPECT_EQ(w.spans()[0].iov_base, first_chunk);
  EXPECT_EQ(w.ToString(), "hello");
  w.Write(std::string(GatherWriter::kChunkSize, 'c'));
  ASSERT_EQ(w.spans().size(), 2u);
  EXPECT_EQ(w.spans()[1].iov_base, second_chunk);
  EXPECT_EQ(w.ToString(), "hello" + std::string(GatherWriter::kChunkSize, 'c'));
}

TEST(ByteBufferTest, AppendsEveryEncoding) {
  ByteBuffer b;
  EXPECT_TRUE(b.empty());
  b.PushBack('x');
  b.Append("yz", 2);
  b.Append(std::string_view());
  b.AppendVarUInt(128);
  b.AppendFixed<uint16_t>(0x0102);
  b.AppendString("ab");
  EXPECT_EQ(Hex(b.view()), "78797a80010201026162");
  char* p = b.Prepare(3);
  p[0] = 'A';
  p[1] = 'B';
  b.Commit(2);
  EXPECT_EQ(b.view().substr(b.size() - 2), "AB");
}

TEST(ByteBufferTest, GrowthKeepsContentsAndClearKeepsCapacity) {
  ByteBuffer b;
  std::string expected;
  for (int i = 0; i < 10000; ++i) {
    b.AppendVarUInt(static_cast<uint64_t>(i));
    expected += EncodeVarUIntString(static_cast<uint64_t>(i));
  }
  EXPECT_EQ(b.view(), expected);
  const size_t capacity = b.capacity();
  EXPECT_GE(capacity, b.size());
  b.clear();
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.capacity(), capacity);
  b.resize(5);
  EXPECT_EQ(b.size(), 5u);
  b.reserve(capacity * 2);
  EXPECT_GE(b.capacity(), capacity * 2);
}

TEST(ByteBufferTest, CopiesAndMoves) {
  ByteBuffer a;
  a.Append("hello", 5);
  ByteBuffer copy(a);
  EXPECT_EQ(copy.view(), "hello");
  EXPECT_NE(copy.data(), a.data());
  ByteBuffer assigned;
  assigned.Append("old", 3);
  assigned = a;
  EXPECT_EQ(assigned.view(), "hello");
  const char* storage = a.data();
  ByteBuffer moved(std::move(a));
  EXPECT_EQ(moved.data(), storage);
  EXPECT_EQ(moved.view(), "hello");
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_EQ(a.capacity(), 0u);
  ByteBuffer target;
  target = std::move(moved);
  EXPECT_EQ(target.view(), "hello");
}

}  // namespace
}  // namespace chgate::clickhouse
