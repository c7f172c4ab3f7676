//===- FuseFp8Amax.cpp - tc-fuse-fp8-amax ---------------------------------===//
//
// Takes the amax of a per-tensor FP8 tc.quantize in the generated kernel
// that produces its input. Current scaling needs max |x| before the first
// element can be quantized, so the quantize_fp8 call made a pass of its own
// over x for it (a third of the call's bytes: 2 of 6 per bf16 element with
// the transposed copy). When x is a result of a tc.fusion (the gelu of an
// MLP, the gelu backward, the residual stream's gradient adds, a weight's
// bf16 cast), that kernel writes every element of x anyway: the fusion
// gets the reduction max(select(isnan(|x|), 0, |x|)) over every axis as one
// more result (NaN elements ignored, as the call's own amax does; the max is
// exact and independent of order, so the GPU's value is the reference's),
// and the quantize reads it as its `amax` operand.
//
// Runs in the GPU pipeline after tc-fuse (the reference program never sees
// either). A fusion that already reduces is left alone (one reduction per
// kernel), as is one whose results have other shapes than x (the reduction
// spans the kernel's whole iteration space).
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace tc {
#define GEN_PASS_DEF_TCFUSEFP8AMAX
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;

namespace tc {
namespace {

RankedTensorType tensorTypeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

/// Whether `q` is a quantize_fp8 call with one f32 scale for the tensor
/// that does not read a given amax yet.
bool perTensorWithoutAmax(QuantizeOp q) {
  Fp8QuantizeForm f;
  return !q.getAmax() && fp8PerTensorForm(q, &f) && tensorTypeOf(q.getInput()).getRank() > 0;
}

/// What `v` is through reshapes.
Value throughReshapes(Value v) {
  while (auto r = v.getDefiningOp<ReshapeOp>())
    v = r.getInput();
  return v;
}

/// Whether `v` is a result of a fusion in `block` that can take its amax:
/// one without a reduction, every result of v's shape.
bool fusionCanTakeAmax(Value v, Block &block) {
  auto fusion = v.getDefiningOp<FusionOp>();
  if (!fusion || fusion->getBlock() != &block)
    return false;
  for (Operation &op : fusion.getBody().front().without_terminator())
    if (isTrailingReduction(&op) || isLastAxisSoftmax(&op))
      return false;
  ArrayRef<int64_t> shape = tensorTypeOf(v).getShape();
  return llvm::all_of(fusion.getResultTypes(), [&](Type t) {
    return llvm::cast<RankedTensorType>(t).getShape() == shape;
  });
}

/// Rebuilds `fusion` with the amax of its result `index` as one more
/// result (the last), which it returns.
Value addAmaxResult(FusionOp fusion, unsigned index) {
  OpBuilder b(fusion);
  Location loc = fusion.getLoc();
  Type f32 = b.getF32Type();
  auto scalar = RankedTensorType::get({}, f32);
  SmallVector<Type> types(fusion.getResultTypes());
  types.push_back(scalar);
  auto grown = FusionOp::create(b, loc, types, fusion.getInputs());
  grown.getBody().takeBody(fusion.getBody());
  auto yield = llvm::cast<YieldOp>(grown.getBody().front().getTerminator());
  Value x = yield.getOperand(index);
  auto t = tensorTypeOf(x);
  auto f32Of = RankedTensorType::get(t.getShape(), f32);
  OpBuilder bb(yield);
  Value xf = t.getElementType().isF32() ? x : CastOp::create(bb, loc, f32Of, x, false).getResult();
  Value mag = AbsOp::create(bb, loc, f32Of, xf);
  Value nan = IsNanOp::create(bb, loc, RankedTensorType::get(t.getShape(), bb.getI1Type()), mag);
  Value zero =
      ConstantOp::create(bb, loc, DenseElementsAttr::get(f32Of, bb.getF32FloatAttr(0.0f)));
  Value kept = SelectOp::create(bb, loc, f32Of, nan, zero, mag);
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < t.getRank(); ++d)
    axes.push_back(d);
  Value amax = ReduceMaxOp::create(bb, loc, scalar, kept, bb.getDenseI64ArrayAttr(axes), false);
  SmallVector<Value> yielded(yield.getOperands());
  yielded.push_back(amax);
  YieldOp::create(bb, loc, yielded);
  yield.erase();
  for (auto [from, to] : llvm::zip(fusion.getResults(), grown.getResults()))
    from.replaceAllUsesWith(to);
  fusion.erase();
  return grown.getResults().back();
}

struct TcFuseFp8Amax : impl::TcFuseFp8AmaxBase<TcFuseFp8Amax> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      SmallVector<QuantizeOp> quantizes;
      for (Operation &op : block)
        if (auto q = llvm::dyn_cast<QuantizeOp>(op); q && perTensorWithoutAmax(q))
          quantizes.push_back(q);
      // One amax per fusion result, whichever quantizes read it (a grown
      // fusion reduces, so it takes no second one).
      llvm::DenseMap<Value, Value> taken;
      for (QuantizeOp q : quantizes) {
        Value src = throughReshapes(q.getInput());
        Value amax = taken.lookup(src);
        if (!amax) {
          if (!fusionCanTakeAmax(src, block))
            continue;
          auto res = llvm::cast<OpResult>(src);
          unsigned index = res.getResultNumber();
          amax = addAmaxResult(llvm::cast<FusionOp>(res.getOwner()), index);
          src = amax.getDefiningOp()->getResult(index); // the old fusion is gone
          taken[src] = amax;
        }
        q.getAmaxMutable().assign(amax);
      }
    }
  }
};

} // namespace
} // namespace tc
