//===- host_tensor.h - element access to HostTensors ------------*- C++ -*-===//
//
// Reading and writing the elements of a HostTensor in its storage format.
// The type helpers (typeToString, storageBytes, checkHostTensor, ...) are
// with the types themselves, in schema/program.h.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_HOST_TENSOR_H
#define TC_RUNTIME_BASE_HOST_TENSOR_H

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/src/schema/program.h"
#include "runtime/src/base/status.h"

namespace tc::rt {

/// Reads element `i` of storage `data` of dtype `t` as a double (integers
/// converted exactly up to 2^53) or as an int64 (floats truncated toward zero,
/// NaN -> 0, out of range saturated; ui64 above 2^63 keeps its bit pattern).
double loadAsDouble(const uint8_t *data, DType t, int64_t i);
int64_t loadAsInt(const uint8_t *data, DType t, int64_t i);
/// Writes element `i`: floats rounded to the format (saturating float8 when
/// asked), integers wrapped to their width (i1: != 0).
void storeDouble(uint8_t *data, DType t, int64_t i, double v, bool saturate = false);
void storeInt(uint8_t *data, DType t, int64_t i, int64_t v);

/// A tensor of `type` holding `values` (converted as storeDouble/storeInt do;
/// values.size() must equal the element count).
HostTensor makeHostTensor(const TensorType &type, const std::vector<double> &values);
HostTensor makeHostTensorInts(const TensorType &type, const std::vector<int64_t> &values);
/// Every element as double / int64.
std::vector<double> hostTensorToDoubles(const HostTensor &t);
std::vector<int64_t> hostTensorToInts(const HostTensor &t);

} // namespace tc::rt

#endif // TC_RUNTIME_BASE_HOST_TENSOR_H
