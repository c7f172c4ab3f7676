//===- FuseFp8Amax.cpp - tc-fuse-fp8-amax ---------------------------------===//
//
// Takes the amax of a per-tensor FP8 tc.quantize in the kernel that
// produces its input. Current scaling needs max |x| before the first
// element can be quantized, so the quantize_fp8 call made a pass of its own
// over x for it (a third of the call's bytes: 2 of 6 per bf16 element with
// the transposed copy). When x is a result of a tc.fusion (the gelu of an
// MLP, the gelu backward, the residual stream's gradient adds, a weight's
// bf16 cast), that kernel writes every element of x anyway: the fusion
// gets the reduction max(select(isnan(|x|), 0, |x|)) over every axis as one
// more result (NaN elements ignored, as the call's own amax does; the max is
// exact and independent of order, so the GPU's value is the reference's),
// and the quantize reads it as its `amax` operand. The library kernels do
// the same for their outputs: tc.layer_norm / tc.rms_norm (the inputs of
// the QKV and MLP projections), tc.attention (the output projection's) and
// tc.attention_grad (the QKV projection's gradient: one of dq / dk / dv, or
// the concat of several, `amax_of` saying which) get an `amax` result.
// An amax ignores the layout, so x is followed through reshapes and
// transposes (and, for attention_grad, a concat of its gradients).
//
// Runs in the GPU pipeline after tc-fuse (the reference program never sees
// either) and before tc-fuse-attention-views. A fusion that already reduces
// is left alone (one reduction per kernel), as is one whose results have
// other shapes than x (the reduction spans the kernel's whole iteration
// space). tc-lower-to-tcx checks that every given amax is of exactly what
// its quantize reads (fp8AmaxCoverage).
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Transforms/Passes.h"
#include "runtime/src/schema/library_abi.h"

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

/// Whether `v` is a result of a fusion in `block` that can take its amax:
/// one without a reduction (column sums included), every result of v's
/// shape.
bool fusionCanTakeAmax(Value v, Block &block) {
  auto fusion = v.getDefiningOp<FusionOp>();
  if (!fusion || fusion->getBlock() != &block)
    return false;
  // The bf16 narrowing of a fused classifier's gradient is no kernel: the
  // cross_entropy_fwd_bwd call writes it (tc-fuse-cross-entropy), and would
  // leave the amax result without a writer (--fp8-lm-head crashed there).
  for (Value in : fusion->getOperands())
    if (auto g = in.getDefiningOp<CrossEntropyGradOp>(); g && g->hasAttr(kFusedGradAttr))
      return false;
  for (Operation &op : fusion.getBody().front().without_terminator())
    if (isTrailingReduction(&op) || isLastAxisSoftmax(&op) || isLeadingColumnSum(&op))
      return false;
  ArrayRef<int64_t> shape = tensorTypeOf(v).getShape();
  return llvm::all_of(fusion.getResultTypes(), [&](Type t) {
    return llvm::cast<RankedTensorType>(t).getShape() == shape;
  });
}

/// Rebuilds `fusion` with the amax of its result `index` as one more
/// result (the last), which it returns.
Value addFusionAmax(FusionOp fusion, unsigned index) {
  Location loc = fusion.getLoc();
  Type f32 = Float32Type::get(fusion.getContext());
  auto scalar = RankedTensorType::get({}, f32);
  FusionOp grown = growFusion(fusion, scalar, [&](OpBuilder &bb, ValueRange yielded) -> Value {
    Value x = yielded[index];
    auto t = tensorTypeOf(x);
    auto f32Of = RankedTensorType::get(t.getShape(), f32);
    Value xf =
        t.getElementType().isF32() ? x : CastOp::create(bb, loc, f32Of, x, false).getResult();
    Value mag = AbsOp::create(bb, loc, f32Of, xf);
    Value nan = IsNanOp::create(bb, loc, RankedTensorType::get(t.getShape(), bb.getI1Type()), mag);
    Value zero =
        ConstantOp::create(bb, loc, DenseElementsAttr::get(f32Of, bb.getF32FloatAttr(0.0f)));
    Value kept = SelectOp::create(bb, loc, f32Of, nan, zero, mag);
    SmallVector<int64_t> axes;
    for (int64_t d = 0; d < t.getRank(); ++d)
      axes.push_back(d);
    return ReduceMaxOp::create(bb, loc, scalar, kept, bb.getDenseI64ArrayAttr(axes), false);
  });
  return grown.getResults().back();
}

/// A library op that can write the amax of `src` as a result: a norm's or
/// attention's result, or gradients of one attention_grad (one of them, or
/// a concat of several; `mask` the amax_of bits). Null op when none.
struct LibrarySource {
  Operation *op = nullptr;
  int64_t mask = 0;
};
LibrarySource librarySource(Value src, Block &block) {
  Operation *def = src.getDefiningOp();
  if (!def || def->getBlock() != &block)
    return {};
  if (takesAmaxOfResult0(def))
    return libraryAmaxResult(def) || llvm::cast<OpResult>(src).getResultNumber() != 0
               ? LibrarySource{}
               : LibrarySource{def, 0};
  auto gradBits = [&](Value v, AttentionGradOp *of) -> int64_t {
    auto ag = v.getDefiningOp<AttentionGradOp>();
    if (!ag || ag.getAmax() || (*of && ag != *of) || ag->getBlock() != &block)
      return 0;
    constexpr int64_t bits[3] = {rt::kAmaxOfDq, rt::kAmaxOfDk, rt::kAmaxOfDv};
    unsigned i = llvm::cast<OpResult>(v).getResultNumber();
    *of = ag;
    return i < 3 ? bits[i] : 0;
  };
  AttentionGradOp ag;
  if (int64_t bit = gradBits(src, &ag))
    return {ag, bit};
  auto cat = llvm::dyn_cast<ConcatOp>(def);
  if (!cat)
    return {};
  int64_t mask = 0;
  for (Value in : cat.getInputs()) {
    int64_t bit = gradBits(throughLayout(in), &ag);
    if (!bit)
      return {};
    mask |= bit;
  }
  return {ag, mask};
}

/// Rebuilds the library op of `s` with an amax result (the last), which it
/// returns: the same op with the same operands, inherent attributes
/// (amax_of set on an attention_grad) and discardable ones (tc.ref,
/// tc-share-norm-stats' pairing). In the GPU pipeline tc-fuse-attention-
/// views runs after this pass and marks the grown attention ops (its marks
/// are about the results written in place, which the amax leaves as they
/// were); marks already there would be kept like any other attribute.
Value addLibraryAmax(LibrarySource s) {
  Operation *op = s.op;
  OpBuilder b(op);
  OperationState state(op->getLoc(), op->getName());
  state.addOperands(op->getOperands());
  state.addTypes(op->getResultTypes());
  state.addTypes(RankedTensorType::get({}, b.getF32Type()));
  state.propertiesAttr = op->getPropertiesAsAttribute();
  state.addAttributes(op->getDiscardableAttrDictionary().getValue());
  Operation *grown = b.create(state);
  if (auto ag = llvm::dyn_cast<AttentionGradOp>(grown))
    ag.setAmaxOfAttr(b.getI64IntegerAttr(s.mask));
  for (auto [from, to] : llvm::zip(op->getResults(), grown->getResults()))
    from.replaceAllUsesWith(to);
  op->erase();
  return grown->getResults().back();
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
        Value src = throughLayout(q.getInput());
        Value amax = taken.lookup(src);
        if (!amax) {
          if (fusionCanTakeAmax(src, block)) {
            auto res = llvm::cast<OpResult>(src);
            unsigned index = res.getResultNumber();
            amax = addFusionAmax(llvm::cast<FusionOp>(res.getOwner()), index);
            src = amax.getDefiningOp()->getResult(index); // the old fusion is gone
          } else if (LibrarySource lib = librarySource(src, block); lib.op) {
            // A concat source stays (its inputs are what changed); a
            // result is the grown op's.
            bool result = src.getDefiningOp() == lib.op;
            unsigned index = result ? llvm::cast<OpResult>(src).getResultNumber() : 0;
            amax = addLibraryAmax(lib);
            if (result)
              src = amax.getDefiningOp()->getResult(index);
          } else {
            continue;
          }
          taken[src] = amax;
        }
        q.getAmaxMutable().assign(amax);
      }
    }
  }
};

} // namespace
} // namespace tc
