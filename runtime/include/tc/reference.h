//===- tc/reference.h - the CPU reference evaluation, for compilers -*- C++ -*-===//
//
// The C++ entry to the runtime's CPU reference executor for code that folds
// constants at compile time (the ONNX importer's shape sub-graphs, the
// tc-fold-constants pass). Folding through the same executor that the tests
// use as their oracle keeps one definition of what every tc op computes.
//
// Numerics are the reference executor's: plain loops in double, every value
// rounded to its declared type at op boundaries (f32 to float, bf16/f16/fp8/
// fp4 to their formats, integers wrapped to their width), reductions
// accumulated in double. There are no parameters: a function that reads a
// tc.parameter fails, since folding never sees weights.
//
// Errors (an unknown op, inputs that do not match the declared types, an
// out-of-range index) come back as false with a message naming the op and the
// value; nothing throws or aborts. Every function here only reads its
// arguments, so any number of threads may call them concurrently.
//
// The types are the runtime's program contract (program.h): a Function of
// Ops over typed values, and HostTensors in storage format.
//
//===----------------------------------------------------------------------===//
#ifndef TC_REFERENCE_H
#define TC_REFERENCE_H

#include "runtime/src/schema/program.h"

#include <string>
#include <vector>

namespace tc::reference {

/// Runs `fn` on `inputs` (in the order of fn.inputs, each of the type
/// fn.values declares) and returns its results in `*outputs`, in the order of
/// fn.outputs. On failure returns false and, if `error` is non-null, the
/// reason in `*error`.
bool runFunction(const rt::Function &fn, const std::vector<rt::HostTensor> &inputs,
                 std::vector<rt::HostTensor> *outputs, std::string *error);

/// Runs the single op `op` (its name and attributes; its operand and result
/// ids are ignored) on `operands`, with results of `resultTypes`, and returns
/// one host tensor per result in `*results`. Fails as runFunction does.
bool runOp(const rt::Op &op, const std::vector<rt::HostTensor> &operands,
           const std::vector<rt::TensorType> &resultTypes,
           std::vector<rt::HostTensor> *results, std::string *error);

/// Whether the reference executor implements the op `name` ("tc.add").
bool isSupportedOp(const std::string &name);

} // namespace tc::reference

#endif // TC_REFERENCE_H
