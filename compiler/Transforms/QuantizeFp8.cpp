//===- QuantizeFp8.cpp - tc-quantize-fp8 ----------------------------------===//
//
// Turns the FP8 marks of tc-precision and tc-autodiff (Fp8Plan.h) into the
// ops that compute them: each marked tc.matmul becomes tc.quantize of its two
// operands (E5M2 for the incoming gradient, E4M3 otherwise) and one rank-2
// tc.scaled_matmul with the matmul's bf16 result type. Runs after
// tc-autodiff, so the forward, dgrad and wgrad products of a layer share
// their quantized operands: one tc.quantize per (value, format, block), the
// forward's FP8 copies of x and W being what the backward reads, as
// Transformer Engine saves them.
//
// Delayed scaling (Transformer Engine's DelayedScaling recipe,
// transformer_engine/common/recipe/__init__.py; the update is
// transformer_engine/common/recipe/delayed_scaling.cu's
// amax_and_scale_update): in @grad_step each quantized tensor reads two
// training-state entries, its scale "fp8_scale:<id>" (f32, starting at 1 as
// TE's) and the amaxes of its last N - 1 steps "fp8_amax_history:<id>" (f32
// [N - 1], newest first, zeros at the start; none for N = 1), quantizes
// with that scale; this step's amax and the stored ones are TE's window of
// N, from which the step returns the next history (its newest N - 1) and
// the next step's scale: fmax / amax (margin 0) with amax the window's
// maximum (max) or this step's (most_recent), the old scale kept when amax
// is 0 or not finite, the largest f32 when the quotient overflows.
// Everything is plain
// tc ops, so every backend runs the same arithmetic; tc-optimizer carries
// the "update:" results into @train_step and the entries are checkpointed
// with the optimizer state. "fp8_saturated" counts the elements whose
// scaled magnitude exceeded the format's largest finite value (they
// saturate): every delayed-scaled quantization of the step together.
// Functions without a step to learn from (@infer, @eval_step) quantize by
// the current amax. A product that reads a delayed-scaled copy transposed
// (dgrad's W, wgrad's dY and x) reads a tc.transpose of it instead, so every
// scaled_matmul of such a copy is in cuBLASLt's TN form (the GPU's FP8 GEMMs
// are TN only; tc.quantize's kernel writes its own transposed copy).
//
//===----------------------------------------------------------------------===//

#include "compiler/PrecisionPlan.h"
#include "compiler/Transforms/Fp8Plan.h"
#include "compiler/Transforms/LossScale.h"
#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <cfloat>

#include <map>
#include <tuple>

namespace tc {
#define GEN_PASS_DEF_TCQUANTIZEFP8
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;
using namespace tc;

namespace {

RankedTensorType tensorTypeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

/// A marked product as rank 2: `lhs` (M x K, K x M with `tl`) times `rhs`
/// (K x N, N x K with `tr`), replacing `target` (the matmul's result, or
/// the batch sum that tc-autodiff's wgrad ends in) through a reshape to its
/// type when `target` has another rank.
struct Product {
  Value lhs, rhs;
  bool tl = false, tr = false;
  Value target;
  RankedTensorType result;           // the rank-2 product's type
  SmallVector<Operation *> replaced; // ops that die with the rewrite, last first
};

/// What delayed scaling asks for (the pass's options).
struct DelayedOptions {
  int64_t history = 1024;
  bool mostRecent = false;
};

class Quantizer {
public:
  Quantizer(func::FuncOp fn, bool allowFallback, DelayedOptions delayed)
      : fn(fn), b(fn.getContext()), allowFallback(allowFallback), delayed(delayed),
        learns(fn.getName() == "grad_step") {}

  LogicalResult run() {
    SmallVector<MatmulOp> marked;
    fn.walk([&](MatmulOp mm) {
      if (mm->hasAttr(kFp8Attr))
        marked.push_back(mm);
    });
    LogicalResult result = success();
    for (MatmulOp mm : marked)
      if (failed(rewrite(mm)))
        result = failure(); // every misaligned product gets its error
    // The transposes and reshapes the products no longer read.
    while (!maybeDead.empty()) {
      Operation *op = maybeDead.pop_back_val();
      if (!op->use_empty())
        continue;
      if (Operation *in = op->getOperand(0).getDefiningOp())
        if (llvm::isa<TransposeOp, ReshapeOp, CastOp>(in))
          maybeDead.insert(in);
      op->erase();
    }
    if (succeeded(result) && !updates.empty())
      returnUpdates();
    return result;
  }

private:
  /// `v` with the shape `shape`, one tc.reshape per (value, shape) right
  /// after v's definition.
  Value reshaped(Value v, ArrayRef<int64_t> shape) {
    auto t = RankedTensorType::get(shape, tensorTypeOf(v).getElementType());
    if (t == v.getType())
      return v;
    auto key = std::make_pair(v, Type(t));
    if (Value cached = reshapes.lookup(key))
      return cached;
    OpBuilder::InsertionGuard g(b);
    setAfterDefinition(v);
    auto r = ReshapeOp::create(b, v.getLoc(), t, v);
    annotatePrecision(r, typeString(t.getElementType()),
                      "data movement: rank 2 for the fp8 product");
    reshapes[key] = r.getResult();
    return r.getResult();
  }

  void setAfterDefinition(Value v) {
    if (Operation *def = v.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(v.getParentBlock());
  }

  /// The [cols, rows] copy of the rank-2 FP8 value `q`, one per value,
  /// after q's definition (an exact permutation: the CPU's products are the
  /// same sums in the same order).
  Value transposedCopy(Value q) {
    Value &copy = transposes[q];
    if (copy)
      return copy;
    OpBuilder::InsertionGuard g(b);
    setAfterDefinition(q);
    auto t = tensorTypeOf(q);
    auto tr = TransposeOp::create(
        b, q.getLoc(),
        RankedTensorType::get({t.getDimSize(1), t.getDimSize(0)}, t.getElementType()), q,
        b.getDenseI64ArrayAttr({1, 0}));
    annotatePrecision(tr, typeString(t.getElementType()),
                      "data movement: the transposed FP8 copy cuBLASLt's TN-only GEMMs read");
    copy = tr.getResult();
    return copy;
  }

  /// Folds a 2-D transpose of `v` into the product's flag.
  Value stripTranspose(Value v, bool &transposed) {
    auto t = v.getDefiningOp<TransposeOp>();
    if (!t || t.getPermutation() != ArrayRef<int64_t>{1, 0})
      return v;
    transposed = !transposed;
    maybeDead.insert(t);
    return t.getInput();
  }

  /// The rank-2 form of `mm`, or failure when its layout does not fold.
  FailureOr<Product> rankTwo(MatmulOp mm) {
    Product p;
    p.tl = mm.getTransposeLhs();
    p.tr = mm.getTransposeRhs();
    auto lt = tensorTypeOf(mm.getLhs()), rt = tensorTypeOf(mm.getRhs());
    auto res = tensorTypeOf(mm.getResult());
    if (!lt.hasStaticShape() || !rt.hasStaticShape())
      return failure();
    p.replaced.push_back(mm);
    if (lt.getRank() == 2 && rt.getRank() == 2) {
      p.lhs = mm.getLhs();
      p.rhs = mm.getRhs();
      p.target = mm.getResult();
      p.result = res;
      return p;
    }
    ArrayRef<int64_t> ls = lt.getShape(), rs = rt.getShape();
    if (lt.getRank() > 2 && rt.getRank() == 2 && !p.tl) {
      // [..., M, K] x [K, N]: the batch axes are more rows.
      int64_t rows = product(ls.drop_back());
      p.lhs = reshaped(mm.getLhs(), {rows, ls.back()});
      p.rhs = mm.getRhs();
      p.target = mm.getResult();
      p.result = RankedTensorType::get({rows, res.getShape().back()}, res.getElementType());
      return p;
    }
    // tc-autodiff's wgrad of a batched layer: [..., T, K]^T x [..., T, N]
    // summed over the batch axes (keepdims, then reshaped to [K, N]) is
    // one product over all B*T rows.
    int64_t batch = lt.getRank() - 2;
    if (lt.getRank() != rt.getRank() || batch < 1 || !p.tl || p.tr ||
        ls.drop_back(2) != rs.drop_back(2) || !mm->hasOneUse())
      return failure();
    auto sum = llvm::dyn_cast<ReduceSumOp>(*mm->user_begin());
    SmallVector<int64_t> batchAxes;
    for (int64_t d = 0; d < batch; ++d)
      batchAxes.push_back(d);
    if (!sum || sum.getAxes() != ArrayRef<int64_t>(batchAxes))
      return failure();
    p.replaced.insert(p.replaced.begin(), sum);
    p.target = sum.getResult();
    if (sum.getKeepdims()) {
      auto back = sum->hasOneUse() ? llvm::dyn_cast<ReshapeOp>(*sum->user_begin()) : ReshapeOp();
      if (!back || tensorTypeOf(back.getResult()).getRank() != 2)
        return failure();
      p.replaced.insert(p.replaced.begin(), back);
      p.target = back.getResult();
    }
    int64_t rows = product(ls.drop_back());
    p.lhs = reshaped(mm.getLhs(), {rows, ls.back()});
    p.rhs = reshaped(mm.getRhs(), {rows, rs.back()});
    p.result = tensorTypeOf(p.target);
    return p;
  }

  /// The block of a rank-2 operand `v` whose contraction axis is `k`;
  /// `weight`: the layer's W (block128's 128x128 blocks).
  SmallVector<int64_t> blockOf(Value v, int64_t k, StringRef scaling, bool weight) {
    ArrayRef<int64_t> s = tensorTypeOf(v).getShape();
    if (scaling == "tensor" || scaling == "delayed")
      return SmallVector<int64_t>(s);
    SmallVector<int64_t> block = {1, 1};
    if (scaling == "block128") {
      // A dim below 128 is one partial block (over the elements present,
      // as Transformer Engine's blockwise kernels take it).
      for (int64_t d = 0; d < 2; ++d)
        if (d == k || weight)
          block[d] = std::min(kFp8Block, s[d]);
      return block;
    }
    block[k] = scaling == "mxfp8" ? std::min<int64_t>(32, s[k]) : s[k];
    return block;
  }

  /// The precision report's words for `scaling`.
  static std::string scalingWords(StringRef scaling, ArrayRef<int64_t> block) {
    if (scaling != "block128")
      return scaling.str() + " scaling by its current amax";
    bool square = block[0] > 1 && block[1] > 1;
    return std::string("block128 scaling (") + (square ? "128x128" : "1x128") +
           " blocks, fp32 power-of-two scales) by each block's current amax";
  }

  /// The shared FP8 copy of `v` (data and scale_inv) in `format`.
  std::pair<Value, Value> quantized(Value v, Type format, ArrayRef<int64_t> block,
                                    StringRef scaling, bool isGrad, StringRef id) {
    auto key = std::make_tuple(v.getAsOpaquePointer(), format.getAsOpaquePointer(),
                               std::vector<int64_t>(block.begin(), block.end()));
    auto it = quantizations.find(key);
    if (it != quantizations.end())
      return it->second;
    if (scaling == "delayed" && learns) {
      auto r = quantizedDelayed(v, format, isGrad, id);
      quantizations[key] = r;
      return r;
    }
    if (scaling == "delayed")
      scaling = "tensor";
    auto t = tensorTypeOf(v);
    SmallVector<int64_t> grid;
    for (auto [d, bl] : llvm::zip(t.getShape(), block))
      grid.push_back((d + bl - 1) / bl);
    Type scaleElt = scaling == "mxfp8" ? Type(b.getType<Float8E8M0FNUType>()) : b.getF32Type();
    OpBuilder::InsertionGuard g(b);
    setAfterDefinition(v);
    // block128 is Transformer Engine's Float8BlockScaling, whose scales are
    // powers of two by default (force_pow_2_scales).
    auto q =
        QuantizeOp::create(b, v.getLoc(),
                           TypeRange{RankedTensorType::get(t.getShape(), format),
                                     RankedTensorType::get(grid, scaleElt)},
                           v, b.getDenseI64ArrayAttr(block), b.getBoolAttr(scaling == "block128"));
    annotatePrecision(q, typeString(format),
                      ("fp8: " +
                       std::string(isGrad ? "E5M2 copy of an incoming gradient"
                                          : "E4M3 copy of a product operand") +
                       ", " + scalingWords(scaling, block) +
                       " (saturating, round to nearest even)"));
    auto r = std::make_pair(q.getResult(), q.getScaleInv());
    quantizations[key] = r;
    return r;
  }

  /// Leaves `mm` the bf16 matmul it was, saying why (its reason and a
  /// remark).
  void keepBf16(MatmulOp mm, StringRef role, const std::string &why) {
    for (StringRef a : {kFp8Attr, kFp8RoleAttr, kFp8GradAttr})
      mm->removeAttr(a);
    annotatePrecision(mm, "bf16", "matmul: bf16 operands, fp32 accumulation; " + why);
    std::string node = onnxNodeOf(mm.getLoc());
    mm.emitRemark() << "--fp8: the " << role << " product"
                    << (node.empty() ? "" : " of '" + node + "'") << " in @" << fn.getName()
                    << " stays bf16: " << why;
  }

  LogicalResult rewrite(MatmulOp mm) {
    StringRef scaling = mm->getAttrOfType<StringAttr>(kFp8Attr).getValue();
    auto roleAttr = mm->getAttrOfType<StringAttr>(kFp8RoleAttr);
    StringRef role = roleAttr ? roleAttr.getValue() : StringRef("fprop");
    auto gradAttr = mm->getAttrOfType<IntegerAttr>(kFp8GradAttr);
    int64_t grad = gradAttr ? gradAttr.getInt() : -1;
    FailureOr<Product> p = rankTwo(mm);
    if (failed(p))
      return keepBf16(mm, role,
                      "fp8 plan: this product's layout does not fold into a rank-2 FP8 product, "
                      "kept in bf16"),
             success();
    // tc-precision checked the forward's sizes; a wgrad contracts over the
    // B*T rows.
    auto lt = tensorTypeOf(p->lhs);
    int64_t k = p->tl ? lt.getDimSize(0) : lt.getDimSize(1), n = p->result.getDimSize(1);
    if (std::string rule = fp8SizeRule(scaling, k, n); !rule.empty()) {
      std::string node = onnxNodeOf(mm.getLoc());
      std::string what = role.str() + " of matmul '" + (node.empty() ? "?" : node) + "'";
      std::string sizes = "K=" + std::to_string(k) + ", N=" + std::to_string(n);
      for (Value v : {p->lhs, p->rhs})
        if (auto r = v.getDefiningOp<ReshapeOp>())
          maybeDead.insert(r);
      if (!allowFallback)
        return mm.emitError() << "--fp8: the " << what << " has " << sizes << "; " << rule
                              << (role == "wgrad" ? " (K of a wgrad is batch x sequence)" : "")
                              << ": change the shape, keep the layer high precision "
                                 "(--keep-high-precision), or --allow-fallback to run it in bf16";
      keepBf16(mm, role, "fp8 fallback (--allow-fallback): " + sizes + ", " + rule);
      return success();
    }
    Value lhs = stripTranspose(p->lhs, p->tl), rhs = stripTranspose(p->rhs, p->tr);
    Type e4m3 = b.getType<Float8E4M3FNType>(), e5m2 = b.getType<Float8E5M2Type>();
    Type fl = grad == 0 ? e5m2 : e4m3, fr = grad == 1 ? e5m2 : e4m3;
    std::string node = onnxNodeOf(mm.getLoc());
    std::string site = (node.empty() ? "matmul" : node) + ":" + role.str();
    auto operandId = [&](int64_t i) { return site + (grad == i ? ".dy" : i == 0 ? ".x" : ".w"); };
    // The layer's W is the rhs of fprop and dgrad (wgrad reads dY and x).
    bool rhsIsWeight = role != "wgrad" && grad != 1;
    auto [ql, sl] = quantized(lhs, fl, blockOf(lhs, p->tl ? 0 : 1, scaling, false), scaling,
                              grad == 0, operandId(0));
    auto [qr, sr] = quantized(rhs, fr, blockOf(rhs, p->tr ? 1 : 0, scaling, rhsIsWeight), scaling,
                              grad == 1, operandId(1));
    bool tl = p->tl, tr = p->tr;
    // A product read only transposed (tc-autodiff's dW of a weight stored
    // [N, K], a Linear layer's layout, is (x^T dY)^T) is computed in that
    // layout instead, (A^T B)^T = B^T A: the operands swap, each keeps its
    // blocks along K, and the transpose dies with the product (the same
    // sums: the CPU's result is the same bits).
    TransposeOp readTransposed = transposedUse(p->target);
    bool swapped = readTransposed && tensorTypeOf(p->target) == p->result;
    if (swapped) {
      std::swap(ql, qr);
      std::swap(sl, sr);
      std::swap(fl, fr);
      std::swap(tl, tr);
      tl = !tl;
      tr = !tr;
      p->replaced.insert(p->replaced.begin(), readTransposed);
      p->target = readTransposed.getResult();
      p->result = tensorTypeOf(p->target);
    }
    // The product in cuBLASLt's TN form (lhs [M, K], rhs [N, K]) when a
    // delayed-scaled copy is read the other way: tc.quantize's kernel writes
    // the transposed copy itself, the delayed cast does not.
    if (tl && !ql.getDefiningOp<QuantizeOp>())
      ql = transposedCopy(ql), tl = false;
    if (!tr && !qr.getDefiningOp<QuantizeOp>())
      qr = transposedCopy(qr), tr = true;
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(mm);
    auto smm = ScaledMatmulOp::create(b, mm.getLoc(), p->result, ql, sl, qr, sr,
                                      b.getBoolAttr(tl), b.getBoolAttr(tr));
    for (StringRef a : {kFp8Attr, kFp8RoleAttr, kFp8GradAttr})
      if (Attribute v = mm->getAttr(a))
        smm->setAttr(a, v);
    if (swapped && grad >= 0) // the gradient is the other operand now
      smm->setAttr(kFp8GradAttr, b.getI64IntegerAttr(1 - grad));
    annotatePrecision(smm, "fp8",
                      ("linear layer " + role + ": " + typeString(fl) + " x " + typeString(fr) +
                       ", " + scaling + " scaling, fp32 accumulation, " +
                       typeString(p->result.getElementType()) + " output")
                          .str());
    Value out = smm.getResult();
    auto targetType = tensorTypeOf(p->target);
    if (targetType != p->result) {
      // A bias add of the batched product moves before the reshape, onto
      // the [M, N] product, where the GPU's FP8 GEMM adds it (its epilogue).
      AddOp biasAdd = batchedBiasAdd(p->target);
      if (biasAdd) {
        b.setInsertionPoint(biasAdd); // where the bias is defined
        bool biasFirst = biasAdd.getLhs() != p->target;
        Value bias = biasFirst ? biasAdd.getLhs() : biasAdd.getRhs();
        auto add2d = AddOp::create(b, biasAdd.getLoc(), p->result, biasFirst ? bias : out,
                                   biasFirst ? out : bias);
        add2d->setAttrs(biasAdd->getAttrs());
        out = add2d.getResult();
      }
      auto back = ReshapeOp::create(b, mm.getLoc(), targetType, out);
      annotatePrecision(back, typeString(targetType.getElementType()),
                        "data movement: the fp8 product back to its batch shape");
      out = back.getResult();
      if (biasAdd) {
        biasAdd.getResult().replaceAllUsesWith(out);
        biasAdd->erase();
        for (Operation *op : p->replaced)
          op->erase();
        return success();
      }
    }
    p->target.replaceAllUsesWith(out);
    for (Operation *op : p->replaced)
      op->erase();
    return success();
  }

  /// The 2-D transpose that is `target`'s only use, if there is one.
  static TransposeOp transposedUse(Value target) {
    if (!target.hasOneUse())
      return nullptr;
    auto t = dyn_cast<TransposeOp>(*target.getUsers().begin());
    return t && t.getPermutation() == ArrayRef<int64_t>{1, 0} ? t : nullptr;
  }

  /// The add of a bias [N] (the last dim) that is the batched product
  /// `target`'s only use, if there is one.
  static AddOp batchedBiasAdd(Value target) {
    if (!target.hasOneUse())
      return nullptr;
    auto add = dyn_cast<AddOp>(*target.getUsers().begin());
    if (!add || add.getLhs() == add.getRhs() || add.getResult().getType() != target.getType())
      return nullptr;
    Value other = add.getLhs() == target ? add.getRhs() : add.getLhs();
    auto ot = tensorTypeOf(other), tt = tensorTypeOf(target);
    bool bias = ot.getRank() == 1 && ot.getDimSize(0) == tt.getShape().back() &&
                ot.getElementType() == tt.getElementType();
    return bias ? add : nullptr;
  }

  /// A read of the f32 training-state entry `name` of `shape`, starting at
  /// `init`.
  Value stateEntry(Location loc, const std::string &name, ArrayRef<int64_t> shape, double init) {
    auto p = ParameterOp::create(b, loc, RankedTensorType::get(shape, b.getF32Type()),
                                 b.getStringAttr(name), UnitAttr());
    p->setAttr("tc.optimizer_state", b.getUnitAttr());
    if (init != 0.0)
      p->setAttr(kStateInitAttr, b.getF64FloatAttr(init));
    annotatePrecision(p, "f32", "fp8 delayed scaling: training state");
    return p.getResult();
  }

  Value f32Scalar(Location loc, double v) {
    auto type = RankedTensorType::get({}, b.getF32Type());
    return ConstantOp::create(b, loc,
                              DenseElementsAttr::get(type, b.getF32FloatAttr(static_cast<float>(v))));
  }

  /// Every axis of a tensor of rank `rank`.
  DenseI64ArrayAttr allAxes(int64_t rank) {
    SmallVector<int64_t> axes;
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
    return b.getDenseI64ArrayAttr(axes);
  }

  /// The max (or sum) of every element of `x` as an f32 rank-0 tensor.
  Value reduceAll(Location loc, Value x, bool max) {
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    int64_t rank = tensorTypeOf(x).getRank();
    if (max)
      return ReduceMaxOp::create(b, loc, scalar, x, allAxes(rank), false);
    return ReduceSumOp::create(b, loc, scalar, x, allAxes(rank), false);
  }

  /// Delayed scaling's quantization of `v` (the file comment has the
  /// recipe): the FP8 copy by the stored scale, its [1, 1] scale_inv, and
  /// the history / scale updates and saturation count of the step.
  std::pair<Value, Value> quantizedDelayed(Value v, Type format, bool isGrad, StringRef site) {
    std::string id = site.str();
    for (int n = 2; !ids.insert(id).second; ++n)
      id = site.str() + "#" + std::to_string(n);
    OpBuilder::InsertionGuard g(b);
    setAfterDefinition(v);
    Location loc = v.getLoc();
    auto t = tensorTypeOf(v);
    Type f32 = b.getF32Type();
    auto f32Of = [&](ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, f32); };
    auto i1Of = [&](ArrayRef<int64_t> shape) {
      return RankedTensorType::get(shape, b.getI1Type());
    };
    std::string scaleName = "fp8_scale:" + id, historyName = "fp8_amax_history:" + id;
    Value scale = stateEntry(loc, scaleName, {}, 1.0);
    Value history =
        delayed.history > 1 ? stateEntry(loc, historyName, {delayed.history - 1}, 0.0) : Value();
    Value x = t.getElementType().isF32() ? v : CastOp::create(b, loc, f32Of(t.getShape()), v, true);
    Value absX = AbsOp::create(b, loc, x.getType(), x);
    Value amax = reduceAll(loc, absX, /*max=*/true);
    Value scaled = MulOp::create(b, loc, x, scale);
    auto q = CastOp::create(b, loc, RankedTensorType::get(t.getShape(), format), scaled, true);
    Value one = f32Scalar(loc, 1.0);
    Value inv = DivOp::create(b, loc, one, scale);
    SmallVector<int64_t> unit(t.getRank(), 1);
    auto scaleInv = ReshapeOp::create(b, loc, f32Of(unit), inv);
    std::string how = std::string(isGrad ? "E5M2 copy of an incoming gradient"
                                         : "E4M3 copy of a product operand") +
                      ", delayed scaling: the scale from the amax history of earlier steps "
                      "(saturating, round to nearest even)";
    for (Operation *op : {absX.getDefiningOp(), amax.getDefiningOp(), scaled.getDefiningOp(),
                          inv.getDefiningOp(), scaleInv.getOperation()})
      annotatePrecision(op, "f32", "fp8 delayed scaling: " + how);
    annotatePrecision(q, typeString(format), "fp8: " + how);
    // Saturation: |x * s| beyond the format's largest finite value.
    double fmax = llvm::isa<Float8E5M2Type>(format) ? 57344.0 : 448.0;
    Value fmaxV = f32Scalar(loc, fmax);
    Value absScaled = AbsOp::create(b, loc, scaled.getType(), scaled);
    Value over = GtOp::create(b, loc, absScaled, fmaxV);
    Value overF = CastOp::create(b, loc, f32Of(t.getShape()), over, true);
    Value count = reduceAll(loc, overF, /*max=*/false);
    saturatedCounts.push_back(count);
    // The window: this step's amax in front of the stored ones; the next
    // history is its newest N - 1.
    Value front = ReshapeOp::create(b, loc, f32Of({1}), amax);
    Value window = front, nextHistory;
    if (history) {
      window = ConcatOp::create(b, loc, f32Of({delayed.history}), ValueRange{front, history},
                                b.getI64IntegerAttr(0));
      nextHistory = SliceOp::create(b, loc, f32Of({delayed.history - 1}), window,
                                    b.getDenseI64ArrayAttr({0}), b.getDenseI64ArrayAttr({1}));
    }
    Value used = delayed.mostRecent ? amax : reduceAll(loc, window, /*max=*/true);
    Value zero = f32Scalar(loc, 0.0);
    Value positive = GtOp::create(b, loc, used, zero);
    Value infinite = IsInfOp::create(b, loc, i1Of({}), used);
    Value finite = NotOp::create(b, loc, i1Of({}), infinite);
    Value usable = AndOp::create(b, loc, positive, finite);
    Value quotient = DivOp::create(b, loc, fmaxV, used);
    Value overflow = IsInfOp::create(b, loc, i1Of({}), quotient);
    Value capped = SelectOp::create(b, loc, overflow, f32Scalar(loc, FLT_MAX), quotient);
    Value next = SelectOp::create(b, loc, usable, capped, scale);
    if (nextHistory)
      updates.push_back({"update:" + historyName, nextHistory});
    updates.push_back({"update:" + scaleName, next});
    return {q.getResult(), scaleInv.getResult()};
  }

  /// Appends the delayed-scaling results to the function's return.
  void returnUpdates() {
    auto ret = llvm::cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    SmallVector<Value> values(ret.getOperands());
    unsigned first = values.size();
    for (auto &[name, v] : updates)
      values.push_back(v);
    // The counts' sum just before the return, where every count is defined.
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(ret);
    Value saturated = saturatedCounts.front();
    for (Value c : ArrayRef<Value>(saturatedCounts).drop_front())
      saturated = AddOp::create(b, ret.getLoc(), saturated, c);
    values.push_back(saturated);
    ret->setOperands(values);
    SmallVector<Type> types;
    for (Value v : values)
      types.push_back(v.getType());
    fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(), types));
    for (auto [i, u] : llvm::enumerate(updates))
      fn.setResultAttr(first + i, "tc.name", b.getStringAttr(u.first));
    fn.setResultAttr(values.size() - 1, "tc.name", b.getStringAttr(kFp8SaturatedResult));
  }

  func::FuncOp fn;
  OpBuilder b;
  bool allowFallback;
  DelayedOptions delayed;
  bool learns; // @grad_step: delayed scaling reads and updates its state here
  llvm::StringSet<> ids;
  SmallVector<std::pair<std::string, Value>> updates;
  SmallVector<Value> saturatedCounts; // one per delayed-scaled quantization
  llvm::DenseMap<std::pair<Value, Type>, Value> reshapes;
  llvm::DenseMap<Value, Value> transposes; // FP8 value -> its transposedCopy
  std::map<std::tuple<void *, const void *, std::vector<int64_t>>, std::pair<Value, Value>>
      quantizations;
  llvm::SetVector<Operation *> maybeDead;
};

struct QuantizeFp8Pass : tc::impl::TcQuantizeFp8Base<QuantizeFp8Pass> {
  using Base::Base;

  void runOnOperation() override {
    if (amaxHistory < 1 || amaxHistory > (1 << 20)) {
      getOperation().emitError() << "tc-quantize-fp8: amax-history must be in [1, 2^20], got "
                                 << amaxHistory;
      return signalPassFailure();
    }
    if (amaxCompute != "max" && amaxCompute != "most_recent") {
      getOperation().emitError() << "tc-quantize-fp8: unknown amax-compute '" << amaxCompute
                                 << "' (valid: max or most_recent)";
      return signalPassFailure();
    }
    DelayedOptions delayed{amaxHistory, amaxCompute == "most_recent"};
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      if (!fn.getBody().hasOneBlock()) {
        fn.emitError() << "tc-quantize-fp8: expected a single-block function";
        return signalPassFailure();
      }
      if (failed(Quantizer(fn, allowFallback, delayed).run()))
        return signalPassFailure();
    }
  }
};

} // namespace
