//===- safetensors.h - read and write .safetensors files --------*- C++ -*-===//
//
// The format of huggingface/safetensors, written here without the library:
//   u64 little-endian N, then N bytes of JSON header, then the data.
//   Header: {"__metadata__": {str: str}, NAME: {"dtype": "F32", "shape": [..],
//   "data_offsets": [begin, end]}, ...}, offsets relative to the data start.
// The writer pads the header with spaces to a multiple of 8 bytes, lists the
// names sorted, and lays the data out contiguously (no holes, as the reference
// reader demands) ordered by element size (largest first) then name, so every
// tensor is aligned to its element size. safetensors.torch.load_file reads it.
// The reader checks everything (sizes, offsets, coverage, dtypes) and never
// trusts the file: a truncated or corrupted file is a DataLoss status.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_SAFETENSORS_H
#define TC_RUNTIME_BASE_SAFETENSORS_H

#include <map>
#include <string>
#include <vector>

#include "runtime/src/schema/program.h"
#include "runtime/src/base/status.h"

namespace tc::rt {

struct SafetensorsFile {
  std::map<std::string, HostTensor> tensors;
  std::map<std::string, std::string> metadata;
};

/// "F32", "BF16", "BOOL", ... or nullptr for dtypes safetensors lacks.
const char *safetensorsDType(DType t);

Status serializeSafetensors(const SafetensorsFile &file, std::vector<uint8_t> *out);
/// Atomic: temporary file, fsync, rename.
Status writeSafetensors(const std::string &path, const SafetensorsFile &file);

Status parseSafetensors(const uint8_t *data, size_t size, SafetensorsFile *out,
                        const std::string &name);
Status readSafetensors(const std::string &path, SafetensorsFile *out);

} // namespace tc::rt

#endif // TC_RUNTIME_BASE_SAFETENSORS_H
