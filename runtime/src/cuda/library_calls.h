//===- library_calls.h - device "library" ops bound to launchers -*- C++ -*-==//
//
// The CUDA executor's binder for device ops of kind "library": the call is
// checked against the library-call ABI (runtime/src/schema/library_abi.h),
// laid out by it (which pointer is which operand), and bound to the launcher
// of kernels/kernels.h by the one thunk of its callee.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_LIBRARY_CALLS_H
#define TC_RUNTIME_CUDA_LIBRARY_CALLS_H

#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "runtime/src/base/status.h"
#include "runtime/src/schema/program.h"

namespace tc::rt::cuda {

/// One library op with its buffers resolved: device pointers and types of
/// its inputs and outputs, in call order; `where` names the op in errors.
struct LibraryCallArgs {
  const DeviceOp &op;
  const std::string &where;
  const std::vector<void *> &ins, &outs;
  const std::vector<TensorType> &inTypes, &outTypes;
};

/// Binds `call` to its launcher on stream `s`: *out enqueues it. Sets
/// *capturable to false when the launch reads a device value on the host
/// (the step cannot be a CUDA graph then). InvalidArgument for a call the
/// ABI refuses, Unimplemented for a callee this runtime has no launcher for.
Status bindLibraryCall(const LibraryCallArgs &call, cudaStream_t s, std::function<Status()> *out,
                       bool *capturable);

} // namespace tc::rt::cuda

#endif // TC_RUNTIME_CUDA_LIBRARY_CALLS_H
