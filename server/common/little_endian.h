// Fixed-width little-endian integers in byte strings, for chgate's own file formats (the
// dead-letter files, the key log's records).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace chgate {

// Appends the low `bytes` bytes of `v` (1..8), least significant first.
inline void AppendLittleEndian(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

// The `bytes`-byte (1..8) little-endian integer at the start of `in`, which holds at least that.
inline uint64_t LoadLittleEndian(std::string_view in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= uint64_t{static_cast<unsigned char>(in[static_cast<size_t>(i)])} << (8 * i);
  }
  return v;
}

}  // namespace chgate
