//===- DeviceProgram.h - planned tcx -> runtime device program --*- C++ -*-===//
//
// Turns a planned tcx function (after tc-lower-to-tcx and tcx-plan-memory:
// straight-line tcx ops on params, consts, arguments and views of the one
// arena) into the artifact's device program (runtime/src/schema/program.h
// DeviceFunction): one DeviceOp per tcx work op, every buffer resolved to
// (space, byte offset, bytes).
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_DEVICEPROGRAM_H
#define TC_COMPILER_DEVICEPROGRAM_H

#include "runtime/src/schema/program.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>
#include <utility>
#include <vector>

namespace tc {

/// A device buffer that holds a value of the function's reference program
/// (a planned view with `ref`, see tagReferenceValues): what tc-run --check
/// compares.
struct ReferenceBuffer {
  int32_t buffer = -1; // DeviceFunction::buffers index
  int64_t value = -1;  // rt::Function::values index of the same-named function
  std::string node;    // the ONNX node it comes from ("" when unknown)
};

/// Lowers a planned tcx function. Fails (message in `error`) on an op that
/// is not a planned tcx op or a buffer whose storage cannot be resolved.
/// With `references`, also lists the buffers that hold reference values.
mlir::FailureOr<rt::DeviceFunction>
lowerToDeviceProgram(mlir::func::FuncOp planned, std::string *error,
                     std::vector<ReferenceBuffer> *references = nullptr);

/// The artifact's "check" report of `references` per device function name:
/// {"version": 1, "functions": {NAME: [[buffer, value, node], ...]}}, the
/// contract runtime/src/session/run_check.cpp reads.
std::string checkReportJson(const std::vector<std::pair<std::string, std::vector<ReferenceBuffer>>> &fns);

/// One line per device op: kind, name, then the buffers as
/// `space[name|#index]@offset:bytes`, for tc-compile --emit=device.
std::string formatDeviceFunction(const rt::DeviceFunction &fn);

} // namespace tc

#endif // TC_COMPILER_DEVICEPROGRAM_H
