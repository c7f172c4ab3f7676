//===- Fp4Qat.cpp - FP4 quantisation-aware training in tc-precision -------===//
//
// mode=fp4 of tc-precision: the FP8 plan's linear layers become products of
// fake-quantised operands (tc.fake_quantize: NVFP4 or MXFP4 and back, a
// straight-through gradient in tc-autodiff). The matmul itself stays the
// bf16 plan's (bf16 operands, fp32 accumulation); its weight operand is
// quantised in 16x16 blocks (nvfp4, as Transformer Engine's NVFP4 recipe
// does for weights) or 1x32 blocks along K (mxfp4), its activation with
// fp4-acts in 1x16 / 1x32 blocks along K. With fp4-grads (--fp4-qat-grads)
// tc-autodiff quantises the backward products' inputs too
// (quantizeFp4Backward): the incoming gradient with stochastic rounding,
// its draws keyed by a training-state step that @grad_step advances.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Fp4Qat.h"

#include "compiler/PrecisionPlan.h"
#include "compiler/Transforms/Fp8Plan.h"
#include "dialects/tc/IR/TcOps.h"
#include "runtime/src/base/init_rng.h"

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

/// The axis of `mm`'s operand `operand` (0: lhs, 1: rhs) that it contracts.
int64_t contractionAxis(MatmulOp mm, int64_t operand) {
  auto t = llvm::cast<RankedTensorType>(mm->getOperand(operand).getType());
  if (operand == 0)
    return mm.getTransposeLhs() ? t.getRank() - 2 : t.getRank() - 1;
  return mm.getTransposeRhs() ? t.getRank() - 1 : t.getRank() - 2;
}

/// How tc.fake_quantize rounds: nearest even, or stochastically with draws
/// keyed by (kFp4Seed, stream, step).
struct Rounding {
  Value step; // null: nearest even
  uint64_t stream = 0;
};

/// `v` read through tc.fake_quantize with blocks along `axis`, placed right
/// before `user`.
Value fakeQuantized(OpBuilder &b, Operation *user, Value v, llvm::StringRef format,
                    int64_t axis, bool blocks2d, llvm::StringRef what,
                    const Rounding &rounding = {}) {
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(user);
  bool sr = static_cast<bool>(rounding.step);
  auto fq = FakeQuantizeOp::create(
      b, user->getLoc(), v.getType(), v, rounding.step, b.getStringAttr(format),
      b.getI64IntegerAttr(axis), b.getBoolAttr(blocks2d), b.getBoolAttr(sr),
      b.getI64IntegerAttr(sr ? kFp4Seed : 0),
      b.getI64IntegerAttr(static_cast<int64_t>(rounding.stream)));
  std::string blocks = format == "mxfp4" ? "1x32 blocks along K, e8m0 scales"
                       : blocks2d        ? "16x16 blocks, e4m3 scales and an fp32 tensor scale"
                                         : "1x16 blocks along K, e4m3 scales and an fp32 "
                                           "tensor scale";
  annotatePrecision(fq, format,
                    ("fp4 qat: " + what + " quantised to " + format + " (" + blocks +
                     (sr ? ", stochastic rounding" : "") +
                     ") and back, straight-through gradient")
                        .str());
  return fq.getResult();
}

/// The step entry `fn` reads (made at its start on first use).
Value stepEntry(OpBuilder &b, func::FuncOp fn, bool create) {
  for (auto p : fn.getBody().front().getOps<ParameterOp>())
    if (p.getName() == kFp4StepEntry)
      return p.getResult();
  if (!create)
    return {};
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(&fn.getBody().front());
  auto p = ParameterOp::create(b, fn.getLoc(), RankedTensorType::get({}, b.getF32Type()),
                               b.getStringAttr(kFp4StepEntry), UnitAttr());
  p->setAttr("tc.optimizer_state", b.getUnitAttr());
  annotatePrecision(p, "f32", "fp4 qat grads: training state (the step of stochastic rounding)");
  return p.getResult();
}

} // namespace

void applyFp4Qat(func::FuncOp fn, llvm::StringRef format, bool acts, bool grads) {
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
    bool w2d = format == "nvfp4" && rt.getRank() == 2;
    mm.getRhsMutable().set(
        fakeQuantized(b, mm, mm.getRhs(), format, contractionAxis(mm, 1), w2d, "weight"));
    if (acts)
      mm.getLhsMutable().set(fakeQuantized(b, mm, mm.getLhs(), format, contractionAxis(mm, 0),
                                           false, "activation"));
    if (grads)
      mm->setAttr(kFp4GradsAttr, b.getStringAttr(format));
    annotatePrecision(mm, format,
                      ("linear layer: fp4 qat (" + format + " fake-quantised weight" +
                       (acts ? " and activation" : "") +
                       (grads ? ", and in the backward the gradient (stochastic rounding) "
                                "and the wgrad activation"
                              : "") +
                       "), bf16 operands, fp32 accumulation, bf16 output")
                          .str());
  });
}

void quantizeFp4Backward(OpBuilder &b, Operation *fwd, Operation *bwd, llvm::StringRef role,
                         int64_t gradOperand) {
  auto mm = llvm::cast<MatmulOp>(bwd);
  llvm::StringRef format = fwd->getAttrOfType<StringAttr>(kFp4GradsAttr).getValue();
  auto fn = bwd->getParentOfType<func::FuncOp>();
  // The site's stream: the layer, the product and how many sites precede it.
  int64_t sites = 0;
  fn.walk([&](FakeQuantizeOp q) { sites += q.getStochastic() ? 1 : 0; });
  std::string site = onnxNodeOf(fwd->getLoc()) + "/" + role.str() + "/" + std::to_string(sites);
  Rounding sr{stepEntry(b, fn, /*create=*/true), rt::initrng::fnv1a64(site.data(), site.size())};
  Value g = mm->getOperand(gradOperand);
  mm->setOperand(gradOperand, fakeQuantized(b, mm, g, format, contractionAxis(mm, gradOperand),
                                            false, "incoming gradient (" + role.str() + ")", sr));
  // The other operand: the forward's W (dgrad) or X (wgrad), re-quantised
  // along this product's K unless it is a 16x16-blocked weight.
  int64_t other = 1 - gradOperand;
  Value v = mm->getOperand(other);
  auto fq = v.getDefiningOp<FakeQuantizeOp>();
  if (fq && fq.getBlocks2d())
    return;
  Value raw = fq ? fq.getInput() : v;
  mm->setOperand(other, fakeQuantized(b, mm, raw, format, contractionAxis(mm, other), false,
                                      role == "dgrad" ? "weight (dgrad)" : "activation (wgrad)"));
}

void appendFp4StepUpdate(OpBuilder &b, func::FuncOp fn, llvm::SmallVectorImpl<Value> &results,
                         llvm::SmallVectorImpl<Attribute> &names) {
  Value step = stepEntry(b, fn, /*create=*/false);
  if (!step)
    return;
  auto type = llvm::cast<RankedTensorType>(step.getType());
  Value one = ConstantOp::create(b, fn.getLoc(),
                                 DenseElementsAttr::get(type, b.getF32FloatAttr(1.0f)));
  Value next = AddOp::create(b, fn.getLoc(), step, one);
  annotatePrecision(next.getDefiningOp(), "f32", "fp4 qat grads: the next step");
  results.push_back(next);
  names.push_back(b.getDictionaryAttr(
      {b.getNamedAttr("tc.name", b.getStringAttr(("update:" + kFp4StepEntry).str()))}));
}

} // namespace tc
