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

namespace tc {

/// Lowers a planned tcx function. Fails (message in `error`) on an op that
/// is not a planned tcx op or a buffer whose storage cannot be resolved.
mlir::FailureOr<rt::DeviceFunction> lowerToDeviceProgram(mlir::func::FuncOp planned,
                                                         std::string *error);

/// One line per device op: kind, name, then the buffers as
/// `space[name|#index]@offset:bytes`, for tc-compile --emit=device.
std::string formatDeviceFunction(const rt::DeviceFunction &fn);

} // namespace tc

#endif // TC_COMPILER_DEVICEPROGRAM_H
