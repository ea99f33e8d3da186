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
