//===- LossScale.h - the names of dynamic loss scaling ----------*- C++ -*-===//
//
// The state entries and attributes of dynamic loss scaling (tc-compile
// --fp16), shared by tc-autodiff (which seeds the backward with the scale),
// tc-optimizer (which unscales, checks for inf/NaN and updates the scale)
// and compile() (which gives the entries their initial values). The
// entries are optimizer state (ParamKind::OptimizerState), so checkpoints
// and --resume carry them like the moments.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_TRANSFORMS_LOSSSCALE_H
#define TC_COMPILER_TRANSFORMS_LOSSSCALE_H

#include "llvm/ADT/StringRef.h"

namespace tc {

/// The loss scale (f32 scalar; GradScaler's _scale).
inline constexpr llvm::StringLiteral kLossScaleEntry = "grad_scaler:scale";
/// Clean steps since the scale last changed (f32 scalar, exact below 2^24;
/// GradScaler's _growth_tracker).
inline constexpr llvm::StringLiteral kGrowthTrackerEntry = "grad_scaler:growth_tracker";
/// Steps skipped so far (f32 scalar): AdamW's step count is the step minus
/// these, as torch's optimizer.step() is not called on a skipped step.
inline constexpr llvm::StringLiteral kSkippedStepsEntry = "grad_scaler:skipped_steps";

/// On a tc.parameter marked tc.optimizer_state: the entry's initial value
/// (an f64 attribute, every element); absent, the entry starts at zero.
inline constexpr llvm::StringLiteral kStateInitAttr = "tc.state_init";

} // namespace tc

#endif // TC_COMPILER_TRANSFORMS_LOSSSCALE_H
