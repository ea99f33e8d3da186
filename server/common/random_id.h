// Identifiers no one can predict: 128 bits from the kernel's CSPRNG (getrandom), as 32 lower-case
// hex digits. For ClickHouse query ids, which another caller must not guess and take first.
#pragma once

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace chgate {

inline std::string RandomHex128() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::abort();  // getrandom cannot fail on Linux 3.17+ with a valid buffer
    }
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(32, '0');
  for (size_t i = 0; i < sizeof(bytes); ++i) {
    out[2 * i] = kHex[bytes[i] >> 4];
    out[2 * i + 1] = kHex[bytes[i] & 0xf];
  }
  return out;
}

}  // namespace chgate
