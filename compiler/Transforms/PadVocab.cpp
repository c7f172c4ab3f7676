//===- PadVocab.cpp - tc-pad-vocab ----------------------------------------===//
//
// Pads the class axis of a classifier to a multiple of `multiple` (64), the
// way nanoGPT pads GPT-2's 50257 to 50304, but inside the compiler and
// exactly: the model, its parameters and its checkpoints keep their shapes.
// A tensor-core GEMM whose N or K is 50257 has rows that are not 16-byte
// aligned and a ragged last tile (cuBLASLt runs it at a fraction of its
// speed, three times a step: logits, dgrad, wgrad); padded, all three are
// aligned.
//
// For a tc.cross_entropy (no class weights) of C classes, C not a multiple,
// whose logits are a tc.matmul's product through casts and reshapes that
// keep the class axis last:
//
//   W [C, K] (or [K, C])  -> tc.pad with zeros to [Cp, K]
//   logits = x @ W^T      -> x @ Wp^T + bias, bias[Cp] = 0 for the C
//                            classes, -inf for the padding (the GEMM's
//                            bias epilogue on the GPU)
//   the casts, reshapes and the loss read [..., Cp]
//
// exp(-inf - max) = 0 adds nothing to the softmax's sum and the max is a
// real class's, so the loss is the same number; its gradient is 0 on the
// padding, so dgrad (K = Cp, zero rows of Wp) and the gradient of W (the
// first C rows of Wp's: a view, tc.pad's gradient is a slice) are the same
// sums. Runs before tc-autodiff, which differentiates the pad and the add.
// Any other reader of the logits (a returned logits output) reads the first
// C classes back through a tc.slice.
//
// What changes: a label in [C, Cp) is no longer out of range for the loss
// (its logit is -inf: an infinite loss, not an error); such a label is a
// token id the embedding refuses first when labels are the shifted inputs.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"

namespace tc {
#define GEN_PASS_DEF_TCPADVOCAB
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;

namespace tc {
namespace {

RankedTensorType withLastDim(Type t, int64_t n) {
  auto r = llvm::cast<RankedTensorType>(t);
  SmallVector<int64_t> shape(r.getShape());
  shape.back() = n;
  return RankedTensorType::get(shape, r.getElementType());
}

int64_t lastDim(Value v) {
  auto t = llvm::cast<RankedTensorType>(v.getType());
  return t.getRank() ? t.getShape().back() : -1;
}

/// The logits chain of `ce`: the matmul and the casts and reshapes from its
/// product to the loss's input, each keeping the class axis last with C
/// classes (chain[0] the op after the matmul). Null when the logits are not
/// such a product.
MatmulOp logitsChain(CrossEntropyOp ce, int64_t classes, SmallVectorImpl<Operation *> &chain) {
  Value v = ce.getInput();
  while (Operation *def = v.getDefiningOp()) {
    if (auto mm = llvm::dyn_cast<MatmulOp>(def)) {
      auto rt = llvm::cast<RankedTensorType>(mm.getRhs().getType());
      int64_t n = rt.getShape()[mm.getTransposeRhs() ? rt.getRank() - 2 : rt.getRank() - 1];
      if (mm.getAlpha() || n != classes || lastDim(mm.getResult()) != classes ||
          !llvm::isa<FloatType>(rt.getElementType()))
        return nullptr;
      std::reverse(chain.begin(), chain.end());
      return mm;
    }
    if (!llvm::isa<CastOp, ReshapeOp>(def) || lastDim(def->getOperand(0)) != classes ||
        lastDim(def->getResult(0)) != classes)
      return nullptr;
    chain.push_back(def);
    v = def->getOperand(0);
  }
  return nullptr;
}

/// The first `classes` of `padded`'s last axis, for the readers of the
/// unpadded value other than the chain.
Value unpad(OpBuilder &b, Location loc, Value padded, Type unpaddedType) {
  auto t = llvm::cast<RankedTensorType>(unpaddedType);
  SmallVector<int64_t> starts(t.getRank(), 0), strides(t.getRank(), 1);
  return SliceOp::create(b, loc, t, padded, b.getDenseI64ArrayAttr(starts),
                         b.getDenseI64ArrayAttr(strides));
}

bool pad(CrossEntropyOp ce, int64_t multiple) {
  auto in = llvm::cast<RankedTensorType>(ce.getInput().getType());
  int64_t classes = in.getRank() == 2 ? in.getShape()[1] : -1;
  if (ce.getWeight() || classes <= 0 || classes % multiple == 0)
    return false;
  SmallVector<Operation *> chain;
  MatmulOp mm = logitsChain(ce, classes, chain);
  if (!mm)
    return false;
  int64_t padded = (classes + multiple - 1) / multiple * multiple;
  // The pad and the bias before the matmul, each new op right after the one
  // it replaces: every reader of an old value comes after the new one.
  OpBuilder b(mm);
  Location loc = mm.getLoc();

  // W padded with zero rows (or columns) along its class axis.
  auto rt = llvm::cast<RankedTensorType>(mm.getRhs().getType());
  int64_t axis = mm.getTransposeRhs() ? rt.getRank() - 2 : rt.getRank() - 1;
  SmallVector<int64_t> low(rt.getRank(), 0), high(rt.getRank(), 0);
  high[axis] = padded - classes;
  Value w = PadOp::create(b, loc, mm.getRhs(), b.getDenseI64ArrayAttr(low),
                          b.getDenseI64ArrayAttr(high), b.getF64FloatAttr(0.0),
                          b.getStringAttr("constant"));
  // + bias: 0 on the classes, -inf on the padding.
  auto et = llvm::cast<FloatType>(llvm::cast<RankedTensorType>(mm.getType()).getElementType());
  SmallVector<APFloat> bias(padded, APFloat::getZero(et.getFloatSemantics()));
  for (int64_t i = classes; i < padded; ++i)
    bias[i] = APFloat::getInf(et.getFloatSemantics(), /*Negative=*/true);
  auto biasType = RankedTensorType::get({padded}, et);
  Value biasValue = ConstantOp::create(b, loc, DenseElementsAttr::get(biasType, bias)).getResult();
  b.setInsertionPointAfter(mm);
  auto product = MatmulOp::create(b, loc, mm.getLhs(), w, Value(), mm.getTransposeLhsAttr(),
                                  mm.getTransposeRhsAttr());
  product->setDiscardableAttrs(mm->getDiscardableAttrDictionary());
  Value cur = AddOp::create(b, loc, product.getResult(), biasValue);

  // The chain again over [..., padded]; the old values' other readers read
  // the first C classes of the new ones.
  Value old = mm.getResult();
  auto replaceOthers = [&](Value oldValue, Value newValue, Operation *next) {
    for (OpOperand &use : llvm::make_early_inc_range(oldValue.getUses())) {
      if (use.getOwner() == next)
        continue;
      OpBuilder ub(use.getOwner());
      use.set(unpad(ub, loc, newValue, oldValue.getType()));
    }
  };
  for (Operation *op : chain) {
    replaceOthers(old, cur, op);
    b.setInsertionPointAfter(op);
    OperationState state(op->getLoc(), op->getName());
    state.addOperands(cur);
    state.addTypes(withLastDim(op->getResult(0).getType(), padded));
    state.propertiesAttr = op->getPropertiesAsAttribute();
    state.addAttributes(op->getDiscardableAttrDictionary().getValue());
    Operation *grown = b.create(state);
    old = op->getResult(0);
    cur = grown->getResult(0);
  }
  replaceOthers(old, cur, ce);
  ce.getInputMutable().assign(cur);
  for (Operation *op : llvm::reverse(chain))
    if (op->use_empty())
      op->erase();
  if (mm->use_empty())
    mm->erase();
  return true;
}

struct TcPadVocab : impl::TcPadVocabBase<TcPadVocab> {
  using TcPadVocabBase::TcPadVocabBase;
  void runOnOperation() override {
    if (multiple < 1) {
      getOperation().emitError() << "tc-pad-vocab: multiple must be at least 1, not " << multiple;
      return signalPassFailure();
    }
    SmallVector<CrossEntropyOp> losses;
    getOperation().walk([&](CrossEntropyOp ce) { losses.push_back(ce); });
    for (CrossEntropyOp ce : losses)
      pad(ce, multiple);
  }
};

} // namespace
} // namespace tc
