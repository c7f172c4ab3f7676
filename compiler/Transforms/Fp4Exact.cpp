//===- Fp4Exact.cpp - tc-fp4-exact ------------------------------------------===//
//
// The exact NVFP4 product where no block-scaled FP4 GEMM runs it (the CPU
// reference, sm_90, and on sm_120a the products planFp4Gemms left emulated).
// tc.fake_quantize's nvfp4 result is code x block scale x tensor scale
// rounded once to bf16: the code x block scale part has at most 6
// significant bits and is exact in BF16, the f32 tensor scale is not, so a
// bf16 GEMM on that result reads each operand element up to half a bf16 ulp
// (2^-9) away from its NVFP4 value. This pass gives such a product the
// unscaled operands instead (tc.fake_quantize {unscaled}: the exact code x
// block scale, and the tensor scale as a second result) and the tensor
// scales' product (in f32) as its alpha, which scales the fp32 sums before
// the one rounding of the result, as sm_120a's NVFP4 GEMM does (cuBLASLt
// takes the same product as its alpha there). What stays different from the
// hardware is the order of the fp32 sums.
//
// It runs after tc-autodiff (neither op has a gradient rule; the backward's
// products, with --fp4-qat-grads too, are rewritten like the forward's) and
// after planFp4Gemms, whose tc.fp4_gemm products it leaves alone.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Fp4Qat.h"
#include "compiler/Transforms/Fp8Plan.h"
#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace tc {
#define GEN_PASS_DEF_TCFP4EXACT
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;

namespace tc {
namespace {

struct TcFp4Exact : impl::TcFp4ExactBase<TcFp4Exact> {
  void runOnOperation() override {
    OpBuilder b(&getContext());
    llvm::DenseMap<Operation *, FakeQuantizeOp> twins;
    // The unscaled twin of an nvfp4 `fq` (made once, right after it).
    auto twin = [&](FakeQuantizeOp fq) {
      auto it = twins.find(fq);
      if (it != twins.end())
        return it->second;
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointAfter(fq);
      auto u = FakeQuantizeOp::create(
          b, fq.getLoc(), fq.getResult().getType(), RankedTensorType::get({}, b.getF32Type()),
          fq.getInput(), fq.getStep(), fq.getFormatAttr(), fq.getAxisAttr(), fq.getBlocks2dAttr(),
          fq.getStochasticAttr(), fq.getSeedAttr(), fq.getStreamAttr(), b.getBoolAttr(true));
      std::string reason;
      if (auto r = fq->getAttrOfType<StringAttr>(kPrecisionReasonAttr))
        reason = r.getValue().str() + "; ";
      annotatePrecision(u, "nvfp4",
                        reason + "unscaled for the exact product: code x block scale (exact in "
                                 "bf16), the fp32 tensor scale the product's alpha");
      twins[fq] = u;
      return u;
    };
    SmallVector<MatmulOp> products;
    getOperation().walk([&](MatmulOp mm) {
      if (!mm->hasAttr(kFp4GemmAttr) && !mm.getAlpha())
        products.push_back(mm);
    });
    for (MatmulOp mm : products) {
      SmallVector<Value, 2> scales;
      for (OpOperand *operand : {&mm.getLhsMutable(), &mm.getRhsMutable()}) {
        auto fq = operand->get().getDefiningOp<FakeQuantizeOp>();
        if (!fq || fq.getFormat() != "nvfp4" || fq.getUnscaled())
          continue;
        FakeQuantizeOp u = twin(fq);
        operand->set(u.getResult());
        scales.push_back(u.getTensorScale());
      }
      if (scales.empty())
        continue;
      b.setInsertionPoint(mm);
      Value alpha = scales[0];
      if (scales.size() == 2) {
        alpha = MulOp::create(b, mm.getLoc(), scales[0], scales[1]);
        annotatePrecision(alpha.getDefiningOp(), "f32",
                          "exact nvfp4: the product of the operands' tensor scales (the alpha)");
      }
      mm.getAlphaMutable().assign(alpha);
      std::string reason;
      if (auto r = mm->getAttrOfType<StringAttr>(kPrecisionReasonAttr))
        reason = r.getValue().str() + "; ";
      mm->setAttr(kPrecisionReasonAttr,
                  b.getStringAttr(reason + "exact nvfp4: bf16 operands code x block scale, the "
                                           "fp32 tensor scales as the GEMM's alpha"));
    }
    // The scaled results nothing reads any more.
    for (auto &[op, u] : twins)
      if (op->use_empty())
        op->erase();
  }
};

} // namespace
} // namespace tc
