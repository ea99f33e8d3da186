// This file is a derivation of Google's CityHash v1.0.2 (city.h and city.cc), under its licence:
//
//   Copyright (c) 2011 Google, Inc.
//
//   Permission is hereby granted, free of charge, to any person obtaining a copy of this software
//   and associated documentation files (the "Software"), to deal in the Software without
//   restriction, including without limitation the rights to use, copy, modify, merge, publish,
//   distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the
//   Software is furnished to do so, subject to the following conditions:
//
//   The above copyright notice and this permission notice shall be included in all copies or
//   substantial portions of the Software.
//
//   THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING
//   BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
//   NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM,
//   DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
//   OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
//
#include "server/clickhouse/compression/cityhash.h"

#include <bit>
#include <cstring>
#include <utility>

namespace chgate::clickhouse {
namespace {

// Constants of CityHash v1.0.x.
constexpr uint64_t k0 = 0xc3a5c85c97cb3127ULL;
constexpr uint64_t k1 = 0xb492b66fbe98f273ULL;
constexpr uint64_t k2 = 0x9ae16a3b2f90404fULL;
constexpr uint64_t k3 = 0xc949d7c7509e6557ULL;
constexpr uint64_t kMul = 0x9ddfea08eb382d69ULL;

// The algorithm is defined over little-endian loads.
uint64_t Fetch64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

uint64_t Fetch32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

// Rotates right; a shift of 0 returns `v` unchanged.
uint64_t Rotate(uint64_t v, int shift) {
  return shift == 0 ? v : ((v >> shift) | (v << (64 - shift)));
}

// Rotates right; `shift` must be in [1, 63].
uint64_t RotateByAtLeast1(uint64_t v, int shift) { return (v >> shift) | (v << (64 - shift)); }

uint64_t ShiftMix(uint64_t v) { return v ^ (v >> 47); }

// Murmur-inspired mix of a 128-bit value (u = low half, v = high half) down to 64 bits.
uint64_t HashLen16(uint64_t u, uint64_t v) {
  uint64_t a = (u ^ v) * kMul;
  a ^= (a >> 47);
  uint64_t b = (v ^ a) * kMul;
  b ^= (b >> 47);
  b *= kMul;
  return b;
}

uint64_t HashLen0to16(const char* s, size_t len) {
  const uint64_t n = len;
  if (len > 8) {
    const uint64_t a = Fetch64(s);
    const uint64_t b = Fetch64(s + len - 8);
    return HashLen16(a, RotateByAtLeast1(b + n, static_cast<int>(len))) ^ b;
  }
  if (len >= 4) {
    const uint64_t a = Fetch32(s);
    return HashLen16(n + (a << 3), Fetch32(s + len - 4));
  }
  if (len > 0) {
    const uint32_t a = static_cast<uint8_t>(s[0]);
    const uint32_t b = static_cast<uint8_t>(s[len >> 1]);
    const uint32_t c = static_cast<uint8_t>(s[len - 1]);
    const uint32_t y = a + (b << 8);
    const uint32_t z = static_cast<uint32_t>(len) + (c << 2);
    return ShiftMix(y * k2 ^ z * k3) * k2;
  }
  return k2;
}

// Used for inputs shorter than 128 bytes.
Hash128 CityMurmur(const char* s, size_t len, Hash128 seed) {
  uint64_t a = seed.low;
  uint64_t b = seed.high;
  uint64_t c = 0;
  uint64_t d = 0;
  if (len <= 16) {
    a = ShiftMix(a * k1) * k1;
    c = b * k1 + HashLen0to16(s, len);
    d = ShiftMix(a + (len >= 8 ? Fetch64(s) : c));
  } else {
    c = HashLen16(Fetch64(s + len - 8) + k1, a);
    d = HashLen16(b + len, c + Fetch64(s + len - 16));
    a += d;
    // Consumes 16-byte blocks while more than 16 bytes remain unconsumed (the last block may
    // overlap the tail already mixed in above).
    size_t remaining = len - 16;
    do {
      a ^= ShiftMix(Fetch64(s) * k1) * k1;
      a *= k1;
      b ^= a;
      c ^= ShiftMix(Fetch64(s + 8) * k1) * k1;
      c *= k1;
      d ^= c;
      s += 16;
      remaining = remaining > 16 ? remaining - 16 : 0;
    } while (remaining > 0);
  }
  a = HashLen16(a, c);
  b = HashLen16(d, b);
  return {a ^ b, HashLen16(b, a)};
}

// Returns a 16-byte hash of 48 bytes: the four words w, x, y, z and the two seeds a, b.
std::pair<uint64_t, uint64_t> WeakHashLen32WithSeeds(uint64_t w, uint64_t x, uint64_t y, uint64_t z,
                                                     uint64_t a, uint64_t b) {
  a += w;
  b = Rotate(b + a + z, 21);
  const uint64_t c = a;
  a += x;
  a += y;
  b += Rotate(a, 44);
  return {a + z, b + c};
}

std::pair<uint64_t, uint64_t> WeakHashLen32WithSeeds(const char* s, uint64_t a, uint64_t b) {
  return WeakHashLen32WithSeeds(Fetch64(s), Fetch64(s + 8), Fetch64(s + 16), Fetch64(s + 24), a, b);
}

Hash128 CityHash128WithSeed(const char* s, size_t len, Hash128 seed) {
  if (len < 128) return CityMurmur(s, len, seed);

  // State: v, w (two words each), x, y, z.
  std::pair<uint64_t, uint64_t> v;
  std::pair<uint64_t, uint64_t> w;
  uint64_t x = seed.low;
  uint64_t y = seed.high;
  uint64_t z = len * k1;
  v.first = Rotate(y ^ k1, 49) * k1 + Fetch64(s);
  v.second = Rotate(v.first, 42) * k1 + Fetch64(s + 8);
  w.first = Rotate(y + z, 35) * k1 + x;
  w.second = Rotate(x + Fetch64(s + 88), 53) * k1;

  // 128 bytes per iteration, as two identical 64-byte rounds.
  do {
    for (int round = 0; round < 2; ++round) {
      x = Rotate(x + y + v.first + Fetch64(s + 16), 37) * k1;
      y = Rotate(y + v.second + Fetch64(s + 48), 42) * k1;
      x ^= w.second;
      y ^= v.first;
      z = Rotate(z ^ w.first, 33);
      v = WeakHashLen32WithSeeds(s, v.second * k1, x + w.first);
      w = WeakHashLen32WithSeeds(s + 32, z + w.second, y);
      std::swap(z, x);
      s += 64;
    }
    len -= 128;
  } while (len >= 128);

  y += Rotate(w.first, 37) * k0 + z;
  x += Rotate(v.first + z, 49) * k0;
  // Up to four 32-byte chunks from the end of the input; the first of them may reach back into
  // bytes the loop above already consumed, which always exist because at least 128 did.
  for (size_t tail_done = 0; tail_done < len;) {
    tail_done += 32;
    y = Rotate(y - x, 42) * k0 + v.second;
    w.first += Fetch64(s + len - tail_done + 16);
    x = Rotate(x, 49) * k0 + w.first;
    w.first += v.first;
    v = WeakHashLen32WithSeeds(s + len - tail_done, v.first, v.second);
  }
  x = HashLen16(x, v.first);
  y = HashLen16(y, w.first);
  return {HashLen16(x + v.second, w.second) + y, HashLen16(x + w.second, y + v.second)};
}

}  // namespace

Hash128 CityHash128(const char* data, size_t len) {
  if (len >= 16) {
    return CityHash128WithSeed(data + 16, len - 16, {Fetch64(data) ^ k3, Fetch64(data + 8)});
  }
  if (len >= 8) {
    // v1.0.x folds all of a short input into the seed and hashes an empty tail.
    return CityHash128WithSeed(data, 0, {Fetch64(data) ^ (len * k0), Fetch64(data + len - 8) ^ k1});
  }
  return CityHash128WithSeed(data, len, {k0, k1});
}

}  // namespace chgate::clickhouse
