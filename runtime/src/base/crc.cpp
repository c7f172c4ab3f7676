//===- crc.cpp - CRC-32 checksums -----------------------------------------===//
#include "runtime/src/base/crc.h"

#include <array>

namespace tc::rt {

namespace {

/// Slicing-by-8 tables of the reflected CRC with `poly` (bit-reversed):
/// t[0] is the byte-at-a-time table, t[k][i] the CRC of byte i followed by
/// k zero bytes, so that eight bytes fold in one step (about 8x the
/// byte-at-a-time speed: artifacts checksum hundreds of MB of weights).
using CrcTable = std::array<std::array<uint32_t, 256>, 8>;

CrcTable makeTable(uint32_t poly) {
  CrcTable t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? poly ^ (c >> 1) : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i)
    for (int k = 1; k < 8; ++k)
      t[k][i] = t[0][t[k - 1][i] & 0xFF] ^ (t[k - 1][i] >> 8);
  return t;
}

uint32_t reflectedCrc(const CrcTable &t, const uint8_t *data, size_t size, uint32_t crc) {
  crc = ~crc;
  for (; size >= 8; data += 8, size -= 8) {
    uint32_t lo = crc ^ (uint32_t(data[0]) | uint32_t(data[1]) << 8 | uint32_t(data[2]) << 16 |
                         uint32_t(data[3]) << 24);
    uint32_t hi = uint32_t(data[4]) | uint32_t(data[5]) << 8 | uint32_t(data[6]) << 16 |
                  uint32_t(data[7]) << 24;
    crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
          t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
  }
  for (; size > 0; ++data, --size)
    crc = t[0][(crc ^ *data) & 0xFF] ^ (crc >> 8);
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
