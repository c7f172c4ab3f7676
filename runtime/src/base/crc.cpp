//===- crc.cpp - CRC-32 checksums -----------------------------------------===//
#include "runtime/src/base/crc.h"

#include <array>

namespace tc::rt {

namespace {

using CrcTable = std::array<uint32_t, 256>;

/// The byte-at-a-time table of the reflected CRC with `poly` (bit-reversed).
CrcTable makeTable(uint32_t poly) {
  CrcTable t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? poly ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}

uint32_t reflectedCrc(const CrcTable &table, const uint8_t *data, size_t size,
                      uint32_t crc) {
  crc = ~crc;
  for (size_t i = 0; i < size; ++i)
    crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

} // namespace

uint32_t crc32(const uint8_t *data, size_t size, uint32_t crc) {
  static const CrcTable table = makeTable(0xEDB88320u);
  return reflectedCrc(table, data, size, crc);
}

uint32_t crc32c(const uint8_t *data, size_t size, uint32_t crc) {
  static const CrcTable table = makeTable(0x82F63B78u);
  return reflectedCrc(table, data, size, crc);
}

} // namespace tc::rt
