//===- npy.h - numpy .npy files ---------------------------------*- C++ -*-===//
//
// Reads .npy versions 1.0, 2.0 and 3.0 and writes 1.0 (2.0 when the header
// needs it). Supported dtypes: <f4 <f8 <f2 |b1 |i1 <i2 <i4 <i8 |u1 <u2 <u4
// <u8 (one-byte types may be spelled with '<', '|' or '='). Fortran order,
// big-endian data and every other dtype are errors that name the file.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_NPY_H
#define TC_RUNTIME_BASE_NPY_H

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/src/schema/program.h"
#include "runtime/src/base/status.h"

namespace tc::rt {

/// Reads the .npy file at `path` into `out`.
Status readNpy(const std::string &path, HostTensor *out);
/// Parses .npy bytes; `name` is used in error messages (e.g. the path).
Status parseNpy(const uint8_t *data, size_t size, const std::string &name,
                HostTensor *out);

/// Writes `t` as a .npy file (atomically). bf16, fp8 and fp4 tensors have no
/// numpy dtype: they are an error (convert to f32 first, losslessly).
Status writeNpy(const std::string &path, const HostTensor &t);
/// Encodes `t` as .npy bytes.
Status serializeNpy(const HostTensor &t, std::vector<uint8_t> *out);

/// The numpy descr for `t` ("<f4"), or nullptr when there is none.
const char *npyDescr(DType t);

} // namespace tc::rt

#endif // TC_RUNTIME_BASE_NPY_H
