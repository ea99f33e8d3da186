// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of the spool's records.
// The SSE 4.2 crc32 instruction where the CPU has it, else software slicing-by-8; pure
// functions, thread-safe. Crc32c("123456789") == 0xE3069283.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace chgate::spool {

// Continues a CRC over `data`: Crc32cExtend(Crc32cExtend(0, a), b) == Crc32c(a + b). Returns the
// finished (inverted) CRC, so it can be stored as is.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

// The same with the software tables only, whatever the CPU (tests compare the two).
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t size);

inline uint32_t Crc32c(std::string_view data) { return Crc32cExtend(0, data.data(), data.size()); }

}  // namespace chgate::spool
