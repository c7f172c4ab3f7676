//===- crc.h - CRC-32 checksums ---------------------------------*- C++ -*-===//
//
// The two reflected CRC-32 variants tc's file formats use: the zlib one
// (artifact sections, checkpoint state) and Castagnoli's CRC-32C (TFRecord
// framing of TensorBoard event files). One table-driven implementation serves
// both; they differ only in the polynomial.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_CRC_H
#define TC_RUNTIME_BASE_CRC_H

#include <cstddef>
#include <cstdint>

namespace tc::rt {

/// CRC-32 (IEEE 802.3 / zlib polynomial) of `size` bytes, continuing `crc`.
/// crc32("123456789") == 0xCBF43926.
uint32_t crc32(const uint8_t *data, size_t size, uint32_t crc = 0);

/// CRC-32C (Castagnoli polynomial, as iSCSI and TFRecord use it) of `size`
/// bytes, continuing `crc`. crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const uint8_t *data, size_t size, uint32_t crc = 0);

} // namespace tc::rt

#endif // TC_RUNTIME_BASE_CRC_H
