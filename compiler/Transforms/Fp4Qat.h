//===- Fp4Qat.h - FP4 quantisation-aware training in tc-precision -*- C++ -*-===//
//
// tc-precision's mode=fp4 (--fp4-qat): the linear layers the FP8 plan picks
// (Fp8Plan.h) read their weights, and with fp4-acts their activations,
// through tc.fake_quantize; everything else is the bf16 plan.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_TRANSFORMS_FP4QAT_H
#define TC_COMPILER_TRANSFORMS_FP4QAT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace tc {

/// The FP4 formats --fp4-qat takes, for error messages.
constexpr llvm::StringLiteral kFp4Formats = "nvfp4 or mxfp4";

/// Checks a --fp4-qat format: empty when valid, else the error listing the
/// valid ones.
std::string checkFp4Format(llvm::StringRef format);

/// Replaces the FP8 marks markFp8Matmuls put on `fn`'s matmuls by
/// tc.fake_quantize of their weight (16x16 blocks for nvfp4, 1x32 along K
/// for mxfp4) and, with `acts`, of their activation (1x16 / 1x32 along K),
/// and says so in the precision plan; the kept matmuls' reasons name the
/// fp4-qat plan.
void applyFp4Qat(mlir::func::FuncOp fn, llvm::StringRef format, bool acts);

} // namespace tc

#endif // TC_COMPILER_TRANSFORMS_FP4QAT_H
