//===- Fp4Qat.cpp - FP4 quantisation-aware training in tc-precision -------===//
//
// mode=fp4 of tc-precision: the FP8 plan's linear layers become products of
// fake-quantised operands (tc.fake_quantize: NVFP4 or MXFP4 and back, a
// straight-through gradient in tc-autodiff). The matmul itself stays the
// bf16 plan's (bf16 operands, fp32 accumulation); its weight operand is
// quantised in 16x16 blocks (nvfp4, as Transformer Engine's NVFP4 recipe
// does for weights) or 1x32 blocks along K (mxfp4), its activation with
// fp4-acts in 1x16 / 1x32 blocks along K.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Fp4Qat.h"

#include "compiler/Transforms/Fp8Plan.h"
#include "dialects/tc/IR/TcOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace tc {

std::string checkFp4Format(llvm::StringRef format) {
  if (format == "nvfp4" || format == "mxfp4")
    return "";
  return ("--fp4-qat: unknown format '" + format + "' (valid: " + kFp4Formats + ")").str();
}

namespace {

/// `v` read through tc.fake_quantize with blocks along `axis`, placed right
/// before `user`.
Value fakeQuantized(OpBuilder &b, Operation *user, Value v, llvm::StringRef format,
                    int64_t axis, bool blocks2d, llvm::StringRef what) {
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(user);
  auto fq = FakeQuantizeOp::create(b, user->getLoc(), v.getType(), v, b.getStringAttr(format),
                                   b.getI64IntegerAttr(axis), b.getBoolAttr(blocks2d));
  std::string blocks = format == "mxfp4" ? "1x32 blocks along K, e8m0 scales"
                       : blocks2d        ? "16x16 blocks, e4m3 scales and an fp32 tensor scale"
                                         : "1x16 blocks along K, e4m3 scales and an fp32 "
                                           "tensor scale";
  annotatePrecision(fq, format,
                    ("fp4 qat: " + what + " quantised to " + format + " (" + blocks +
                     ") and back, straight-through gradient")
                        .str());
  return fq.getResult();
}

} // namespace

void applyFp4Qat(func::FuncOp fn, llvm::StringRef format, bool acts) {
  OpBuilder b(fn.getContext());
  fn.walk([&](Operation *op) {
    if (auto reason = op->getAttrOfType<StringAttr>(kPrecisionReasonAttr)) {
      std::string r = reason.getValue().str();
      size_t at = r.find("fp8 plan");
      if (at != std::string::npos) {
        r.replace(at, 8, "fp4-qat plan");
        op->setAttr(kPrecisionReasonAttr, b.getStringAttr(r));
      }
    }
    auto mm = llvm::dyn_cast<MatmulOp>(op);
    if (!mm || !mm->hasAttr(kFp8Attr))
      return;
    for (llvm::StringRef a : {kFp8Attr, kFp8RoleAttr, kFp8GradAttr})
      mm->removeAttr(a);
    auto rt = llvm::cast<RankedTensorType>(mm.getRhs().getType());
    auto lt = llvm::cast<RankedTensorType>(mm.getLhs().getType());
    int64_t rk = mm.getTransposeRhs() ? rt.getRank() - 1 : rt.getRank() - 2;
    bool w2d = format == "nvfp4" && rt.getRank() == 2;
    mm.getRhsMutable().set(fakeQuantized(b, mm, mm.getRhs(), format, rk, w2d, "weight"));
    if (acts) {
      int64_t lk = mm.getTransposeLhs() ? lt.getRank() - 2 : lt.getRank() - 1;
      mm.getLhsMutable().set(
          fakeQuantized(b, mm, mm.getLhs(), format, lk, false, "activation"));
    }
    annotatePrecision(mm, format,
                      ("linear layer: fp4 qat (" + format + " fake-quantised weight" +
                       (acts ? " and activation" : "") +
                       "), bf16 operands, fp32 accumulation, bf16 output")
                          .str());
  });
}

} // namespace tc
