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
#include "llvm/ADT/bit.h"
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
      b, user->getLoc(), v.getType(), /*tensor_scale=*/Type(), v, rounding.step,
      b.getStringAttr(format), b.getI64IntegerAttr(axis), b.getBoolAttr(blocks2d),
      b.getBoolAttr(sr), b.getI64IntegerAttr(sr ? kFp4Seed : 0),
      b.getI64IntegerAttr(static_cast<int64_t>(rounding.stream)), b.getBoolAttr(false));
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

/// `v` multiplied, in groups of 16 along `axis` (its last or second-last),
/// by Transformer Engine's wgrad RHT matrix R = diag(signs) H16 / 4
/// (transformer_engine/pytorch/tensor/nvfp4_tensor.py: the fixed sign
/// vector, Sylvester's H16): each group g of 16 becomes g R. R R^T = I, so
/// a product contracting the axis over two such operands is unchanged.
/// Null when the axis is not a multiple of 16 long.
Value hadamard16(OpBuilder &b, Operation *user, Value v, int64_t axis) {
  static const int kSigns[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};
  auto t = llvm::cast<RankedTensorType>(v.getType());
  int64_t rank = t.getRank();
  if ((axis != rank - 1 && axis != rank - 2) || t.getDimSize(axis) % 16 != 0)
    return {};
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(user);
  Location loc = user->getLoc();
  Type elt = t.getElementType();
  SmallVector<Attribute> r;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) // Sylvester: H[i][j] = (-1)^popcount(i & j)
      r.push_back(
          b.getFloatAttr(elt, kSigns[i] * (llvm::popcount(unsigned(i & j)) % 2 ? -0.25 : 0.25)));
  Value rm = ConstantOp::create(
      b, loc, DenseElementsAttr::get(RankedTensorType::get({16, 16}, elt), r));
  // [.., T, C] (axis rank-2) -> [.., T/16, 16, C] -> [.., T/16, C, 16]; [.., T] -> [.., T/16, 16].
  SmallVector<int64_t> shape(t.getShape());
  SmallVector<int64_t> grouped(shape.begin(), shape.begin() + axis);
  grouped.append({shape[axis] / 16, 16});
  grouped.append(shape.begin() + axis + 1, shape.end());
  Value x = ReshapeOp::create(b, loc, RankedTensorType::get(grouped, elt), v);
  SmallVector<int64_t> swap;
  for (int64_t d = 0; d < static_cast<int64_t>(grouped.size()); ++d)
    swap.push_back(d);
  bool middle = axis == rank - 2;
  if (middle) {
    std::swap(swap[swap.size() - 1], swap[swap.size() - 2]);
    x = TransposeOp::create(b, loc, x, b.getDenseI64ArrayAttr(swap));
  }
  x = MatmulOp::create(b, loc, x, rm, Value(), b.getBoolAttr(false), b.getBoolAttr(false));
  if (middle)
    x = TransposeOp::create(b, loc, x, b.getDenseI64ArrayAttr(swap));
  return ReshapeOp::create(b, loc, t, x);
}

} // namespace

void applyFp4Qat(func::FuncOp fn, llvm::StringRef format, bool acts, bool grads, bool rht) {
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
    if (grads && rht)
      mm->setAttr(kFp4RhtAttr, b.getUnitAttr());
    annotatePrecision(mm, format,
                      ("linear layer: fp4 qat (" + format + " fake-quantised weight" +
                       (acts ? " and activation" : "") +
                       (grads ? ", and in the backward the gradient (stochastic rounding) "
                                "and the wgrad activation"
                              : "") +
                       (grads && rht ? ", the wgrad inputs after a 16-point random Hadamard "
                                       "transform"
                                     : "") +
                       "), bf16 operands, fp32 accumulation, bf16 output")
                          .str());
  });
}

LogicalResult quantizeFp4Backward(OpBuilder &b, Operation *fwd, Operation *bwd,
                                  llvm::StringRef role, int64_t gradOperand) {
  auto mm = llvm::cast<MatmulOp>(bwd);
  llvm::StringRef format = fwd->getAttrOfType<StringAttr>(kFp4GradsAttr).getValue();
  auto fn = bwd->getParentOfType<func::FuncOp>();
  // The site's stream: the layer, the product and how many sites precede it.
  int64_t sites = 0;
  fn.walk([&](FakeQuantizeOp q) { sites += q.getStochastic() ? 1 : 0; });
  std::string site = onnxNodeOf(fwd->getLoc()) + "/" + role.str() + "/" + std::to_string(sites);
  Rounding sr{stepEntry(b, fn, /*create=*/true), rt::initrng::fnv1a64(site.data(), site.size())};
  int64_t other = 1 - gradOperand;
  Value g = mm->getOperand(gradOperand), v = mm->getOperand(other);
  // The other operand: the forward's W (dgrad) or X (wgrad), re-quantised
  // along this product's K unless it is a 16x16-blocked weight.
  auto fq = v.getDefiningOp<FakeQuantizeOp>();
  bool keep = fq && fq.getBlocks2d();
  Value raw = fq ? fq.getInput() : v;
  bool rht = role == "wgrad" && fwd->hasAttr(kFp4RhtAttr);
  if (rht) {
    g = hadamard16(b, mm, g, contractionAxis(mm, gradOperand));
    raw = hadamard16(b, mm, raw, contractionAxis(mm, other));
    if (!g || !raw)
      return fwd->emitError() << "--fp4-rht: the wgrad of matmul '" << onnxNodeOf(fwd->getLoc())
                              << "' contracts "
                              << llvm::cast<RankedTensorType>(v.getType())
                                     .getDimSize(contractionAxis(mm, other))
                              << " tokens, not a multiple of 16 (the Hadamard transform's "
                                 "groups): give tokens in multiples of 16";
  }
  std::string after = rht ? ", after the random Hadamard transform" : "";
  mm->setOperand(gradOperand,
                 fakeQuantized(b, mm, g, format, contractionAxis(mm, gradOperand), false,
                               "incoming gradient (" + role.str() + after + ")", sr));
  if (!keep)
    mm->setOperand(other, fakeQuantized(b, mm, raw, format, contractionAxis(mm, other), false,
                                        (role == "dgrad" ? "weight (dgrad)"
                                                         : "activation (wgrad" + after + ")")));
  return success();
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

std::string fp4GemmForm(Operation *op, Fp4GemmForm *out) {
  auto mm = llvm::dyn_cast<MatmulOp>(op);
  if (!mm)
    return "not a tc.matmul";
  auto lt = llvm::cast<RankedTensorType>(mm.getLhs().getType());
  auto rt = llvm::cast<RankedTensorType>(mm.getRhs().getType());
  auto ot = llvm::cast<RankedTensorType>(mm.getResult().getType());
  if (!ot.getElementType().isBF16())
    return "its result is not bf16";
  if (rt.getRank() != 2 || lt.getRank() < 2 || (lt.getRank() > 2 && mm.getTransposeLhs()))
    return "it is a batched product (the block-scaled GEMM takes [M, K] x [K, N], a batched lhs "
           "only untransposed)";
  auto fl = mm.getLhs().getDefiningOp<FakeQuantizeOp>();
  auto fr = mm.getRhs().getDefiningOp<FakeQuantizeOp>();
  if (!fl || !fr)
    return std::string("its ") + (fl ? "rhs" : "lhs") + " is not fake-quantised (bf16)";
  if (fl.getFormat() != fr.getFormat())
    return "its operands are in different formats";
  auto axisOf = [](FakeQuantizeOp q) {
    int64_t rank = llvm::cast<RankedTensorType>(q.getInput().getType()).getRank();
    auto axis = static_cast<int64_t>(q.getAxis());
    return axis < 0 ? axis + rank : axis;
  };
  auto alongK = [&](FakeQuantizeOp q, int64_t operand) {
    return axisOf(q) == contractionAxis(mm, operand) || q.getBlocks2d();
  };
  if (!alongK(fl, 0) || !alongK(fr, 1))
    return "an operand's blocks are not along the product's K";
  int64_t k = lt.getDimSize(contractionAxis(mm, 0));
  int64_t n = rt.getDimSize(mm.getTransposeRhs() ? 0 : 1);
  int64_t m = lt.getNumElements() / k;
  if (k % 32 != 0)
    return "K " + std::to_string(k) + " is not a multiple of 32 (16-byte rows of packed E2M1)";
  if (fl.getFormat() == "nvfp4" && n % 16 != 0)
    return "N " + std::to_string(n) + " is not a multiple of 16 (cuBLASLt's NVFP4 GEMM)";
  out->lhs = fl;
  out->rhs = fr;
  out->lhsAxis = contractionAxis(mm, 0);
  out->rhsAxis = contractionAxis(mm, 1);
  out->format = fl.getFormat().str();
  out->m = m;
  out->n = n;
  out->k = k;
  return "";
}

int64_t planFp4Gemms(ModuleOp module, llvm::StringRef target) {
  bool sm120 = target.starts_with("sm_120");
  Builder b(module.getContext());
  int64_t marked = 0;
  module.walk([&](MatmulOp mm) {
    bool fq = mm.getLhs().getDefiningOp<FakeQuantizeOp>() ||
              mm.getRhs().getDefiningOp<FakeQuantizeOp>();
    if (!fq)
      return;
    Fp4GemmForm f;
    std::string why = fp4GemmForm(mm, &f);
    std::string path;
    if (sm120 && why.empty()) {
      mm->setAttr(kFp4GemmAttr, b.getStringAttr(f.format));
      ++marked;
      path = f.format == "nvfp4"
                 ? "on sm_120a: block-scaled NVFP4 GEMM (quantize_fp4 packs both operands; "
                   "cuBLASLt VEC16_UE4M3, the tensor scales as alpha, fp32 accumulation)"
                 : "on sm_120a: block-scaled MXFP4 GEMM (quantize_fp4 packs both operands; tc's "
                   "mma.sync kind::mxf4 kernel, fp32 accumulation)";
    } else {
      path = std::string("on ") + (target.empty() ? "cpu" : target.str()) +
             ": emulated through a bf16 GEMM on the fake-quantised operands (exact products, "
             "fp32 sums in another order than sm_120a's block-scaled hardware)";
      if (sm120)
        path += "; not block-scaled because " + why;
    }
    std::string r;
    if (auto reason = mm->getAttrOfType<StringAttr>(kPrecisionReasonAttr))
      r = reason.getValue().str() + "; ";
    mm->setAttr(kPrecisionReasonAttr, b.getStringAttr(r + path));
  });
  return marked;
}

} // namespace tc
