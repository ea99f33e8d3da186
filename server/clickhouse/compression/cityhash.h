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
// CityHash128 exactly as in CityHash v1.0.2, the function ClickHouse uses to checksum network and
// storage compression frames. CityHash v1.0.3 and later (and Abseil's hashes) compute different
// values, so this must never be swapped for a newer CityHash. Pure functions over caller-owned
// memory; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chgate::clickhouse {

// A 128-bit hash value. In a compression frame it is stored as `low` then `high`, each as a
// little-endian 64-bit integer.
struct Hash128 {
  uint64_t low;
  uint64_t high;

  bool operator==(const Hash128&) const = default;
};

// Returns CityHash128 (v1.0.2) of the `len` bytes at `data`. `data` may be null if `len` is 0.
// Reads only `data[0, len)`.
Hash128 CityHash128(const char* data, size_t len);

}  // namespace chgate::clickhouse
