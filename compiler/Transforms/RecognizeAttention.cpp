//===- RecognizeAttention.cpp - tc-recognize-attention ---------------------===//
//
// Exported attention is `matmul(softmax(mask(scale * matmul(q, k^T))), v)`
// spread over many small ops. This pass matches the chain backwards from the
// second matmul and, when every piece is one it understands (scalar scales, a
// causal or empty constant mask, k^T as a transpose or torch's 3-D
// reshape-transpose-reshape, repeat_kv for grouped-query attention), builds
// one tc.attention. Nothing is changed unless the whole chain matches; the
// ops it bypasses are left for the canonicalizer to delete.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <optional>

namespace tc {
#define GEN_PASS_DEF_TCRECOGNIZEATTENTION
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;
using namespace tc;

namespace {

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

/// A scalar factor applied by `op` to `x`: x * c, c * x or x / c with c a
/// one-element constant (`value`), or x * s / s * x with s a one-element
/// tensor computed at run time (`dynamic`; e.g. an initializer the exporter
/// folded, which stays a parameter).
struct Factor {
  double value = 1.0;
  Value dynamic;
};

std::optional<Factor> factorOf(Operation *op, Value *x) {
  auto scalar = [](Value v) { return typeOf(v).getNumElements() == 1; };
  auto other = [&](Value a, Value b, bool divide) -> std::optional<Factor> {
    if (!scalar(b) || op->getResult(0).getType() != a.getType())
      return std::nullopt;
    std::optional<double> c = splatFloatValue(b);
    if (!c && (divide || typeOf(b).getElementType() != typeOf(a).getElementType()))
      return std::nullopt;
    if (c && divide && *c == 0)
      return std::nullopt;
    *x = a;
    if (!c)
      return Factor{1.0, b};
    return Factor{divide ? 1.0 / *c : *c, {}};
  };
  if (auto m = llvm::dyn_cast<MulOp>(op)) {
    if (auto f = other(m.getLhs(), m.getRhs(), false))
      return f;
    return other(m.getRhs(), m.getLhs(), false);
  }
  if (auto d = llvm::dyn_cast<DivOp>(op))
    return other(d.getLhs(), d.getRhs(), true);
  return std::nullopt;
}

/// The result type equals `v`'s (a scale or mask must not broadcast `v`).
bool sameType(Operation *op, Value v) { return op->getResult(0).getType() == v.getType(); }

/// Which entries [Tq, Tk] of a mask constant hide their key, or none when the
/// constant is not a mask (values other than 0 / very negative, or slices
/// that differ across the leading dimensions).
constexpr double kMaskedBelow = -1e4;

std::optional<std::vector<bool>> maskPattern(DenseElementsAttr dense, bool boolMask,
                                             bool maskedWhenTrue, int64_t tq, int64_t tk) {
  auto t = llvm::cast<RankedTensorType>(dense.getType());
  if (t.getRank() < 2 || t.getDimSize(t.getRank() - 2) != tq ||
      t.getDimSize(t.getRank() - 1) != tk)
    return std::nullopt;
  std::vector<bool> masked(static_cast<size_t>(tq * tk));
  int64_t n = t.getNumElements(), slice = tq * tk;
  int64_t k = 0;
  auto set = [&](bool m) -> bool {
    size_t at = static_cast<size_t>(k % slice);
    if (k >= slice && masked[at] != m)
      return false;
    masked[at] = m;
    ++k;
    return true;
  };
  if (boolMask) {
    for (bool b : dense.getValues<bool>())
      if (!set(b == maskedWhenTrue))
        return std::nullopt;
  } else {
    if (!llvm::isa<FloatType>(dense.getElementType()))
      return std::nullopt;
    for (APFloat a : dense.getValues<APFloat>()) {
      double x = a.convertToDouble();
      if (x != 0 && !(x <= kMaskedBelow))
        return std::nullopt;
      if (!set(x != 0))
        return std::nullopt;
    }
  }
  if (k != n)
    return std::nullopt;
  return masked;
}

/// True for a causal (top-left) pattern, false for no mask, none otherwise.
std::optional<bool> classifyMask(const std::vector<bool> &masked, int64_t tq, int64_t tk) {
  bool any = false, causal = true;
  for (int64_t i = 0; i < tq; ++i)
    for (int64_t j = 0; j < tk; ++j) {
      bool m = masked[static_cast<size_t>(i * tk + j)];
      any |= m;
      causal &= m == (j > i);
    }
  if (!any)
    return false;
  if (causal)
    return true;
  return std::nullopt;
}

class Matcher {
public:
  explicit Matcher(OpBuilder &b) : b(b) {}

  /// Tries to replace the matmul `pv` (probabilities x value).
  bool run(MatmulOp pv) {
    if (pv.getTransposeLhs() || pv.getTransposeRhs())
      return false;
    Value probs = pv.getLhs();
    Operation *nanGuard = nullptr, *nanTest = nullptr;
    if (auto sel = probs.getDefiningOp<SelectOp>()) {
      // where(isnan(p), 0, p): the guard torch's decomposed SDPA puts on
      // rows whose every key is masked, which a causal or empty mask never
      // has (and the fused kernel gives such rows zeros as well).
      auto isnan = sel.getCond().getDefiningOp<IsNanOp>();
      std::optional<double> zero = splatFloatValue(sel.getOnTrue());
      if (!isnan || isnan.getInput() != sel.getOnFalse() || !zero || *zero != 0 ||
          typeOf(sel.getOnTrue()).getNumElements() != 1 || !probs.hasOneUse() ||
          !isnan->hasOneUse() || sel.getType() != sel.getOnFalse().getType())
        return false;
      nanGuard = sel;
      nanTest = isnan;
      probs = sel.getOnFalse();
    }
    auto softmax = probs.getDefiningOp<SoftmaxOp>();
    if (!softmax || !llvm::all_of(softmax->getUsers(), [&](Operation *u) {
          return nanGuard ? (u == nanGuard || u == nanTest) : u == pv.getOperation();
        }))
      return false;
    auto st = typeOf(softmax.getResult());
    int64_t axis = static_cast<int64_t>(softmax.getAxis());
    if (st.getRank() != 4 || (axis != 3 && axis != -1))
      return false;
    int64_t tq = st.getDimSize(2), tk = st.getDimSize(3);
    auto vt = typeOf(pv.getRhs());
    if (vt.getRank() != 4 || pv.getType() != RankedTensorType::get(
                                                  {st.getDimSize(0), st.getDimSize(1), tq,
                                                   vt.getDimSize(3)},
                                                  st.getElementType()))
      return false;

    // Between the scores matmul and the softmax: scales and one mask.
    double scale = 1.0;
    std::optional<bool> causal;
    Value x = softmax.getInput();
    MatmulOp qk;
    while (true) {
      Operation *def = x.getDefiningOp();
      if (!def || !x.hasOneUse())
        return false;
      if (auto mm = llvm::dyn_cast<MatmulOp>(def)) {
        qk = mm;
        break;
      }
      Value inner;
      if (takeFactor(def, &inner, &scale)) {
        x = inner;
        continue;
      }
      if (causal)
        return false; // a second mask
      if (!matchMask(def, tq, tk, &inner, &causal))
        return false;
      x = inner;
    }
    if (qk.getTransposeLhs() || qk.getType() != st)
      return false;

    // The query side: scalar scales, then q [B, H, Tq, D].
    Value q = peelScales(qk.getLhs(), &scale);
    // The key side: k^T [B, H, D, Tk] (or k itself with transpose_rhs).
    Value k = qk.getTransposeRhs() ? peelScales(qk.getRhs(), &scale)
                                   : keyFromTransposed(peelScales(qk.getRhs(), &scale));
    if (!q || !k || !(scale > 0) || !std::isfinite(scale))
      return cleanup(false);
    Value v = pv.getRhs();
    auto qt = typeOf(q), kt = typeOf(k);
    auto bh = [&](RankedTensorType t) {
      return t.getRank() == 4 && t.getDimSize(0) == st.getDimSize(0) &&
             t.getDimSize(1) == st.getDimSize(1);
    };
    if (!bh(qt) || !bh(kt) || !bh(vt) || qt.getDimSize(2) != tq || kt.getDimSize(2) != tk ||
        vt.getDimSize(2) != tk || kt.getDimSize(3) != qt.getDimSize(3) ||
        qt.getElementType() != vt.getElementType() || kt.getElementType() != vt.getElementType())
      return cleanup(false);
    // Grouped-query attention: key and value repeated per query head.
    Value kg = ungroup(k), vg = ungroup(v);
    if (kg && vg && typeOf(kg).getDimSize(1) == typeOf(vg).getDimSize(1)) {
      k = kg;
      v = vg;
    }

    b.setInsertionPoint(pv);
    // Run-time scale factors (of q, of k^T or of the scores) multiply q.
    for (Value f : dynamic)
      q = MulOp::create(b, pv.getLoc(), q.getType(), q, f);
    Type lseElt = qt.getElementType().isF64() ? qt.getElementType() : b.getF32Type();
    auto lseType = RankedTensorType::get({qt.getDimSize(0), qt.getDimSize(1), tq}, lseElt);
    auto att = AttentionOp::create(b, pv.getLoc(), TypeRange{pv.getType(), lseType}, q, k, v,
                                   b.getF64FloatAttr(scale), b.getBoolAttr(causal.value_or(false)));
    pv.getResult().replaceAllUsesWith(att.getResult());
    pv.erase();
    created.clear();
    // The bypassed chain (softmax, mask, scales, the scores matmul and what
    // fed only them) goes now, so the pass leaves no dead ops behind.
    llvm::SetVector<Operation *> dead;
    if (nanGuard) {
      nanGuard->erase();
      nanTest->erase();
    }
    dead.insert(softmax);
    for (size_t i = 0; i < dead.size(); ++i) {
      Operation *op = dead[i];
      if (!op->use_empty())
        continue;
      SmallVector<Value> operands(op->getOperands());
      op->erase();
      for (Value o : operands)
        if (Operation *def = o.getDefiningOp();
            def && def->use_empty() && !llvm::isa<ParameterOp>(def) && isPure(def))
          dead.insert(def);
    }
    return true;
  }

private:
  /// mask(x): select(cond, fill, x) / select(cond, x, fill) with a constant
  /// boolean cond, or x + mask / mask + x with a constant float mask.
  bool matchMask(Operation *def, int64_t tq, int64_t tk, Value *inner,
                 std::optional<bool> *causal) {
    std::optional<std::vector<bool>> pattern;
    if (auto sel = llvm::dyn_cast<SelectOp>(def)) {
      auto cond = sel.getCond().getDefiningOp<ConstantOp>();
      if (!cond)
        return false;
      auto dense = llvm::dyn_cast<DenseElementsAttr>(cond.getValue());
      if (!dense)
        return false;
      std::optional<double> fillTrue = splatFloatValue(sel.getOnTrue());
      std::optional<double> fillFalse = splatFloatValue(sel.getOnFalse());
      bool maskedWhenTrue;
      if (fillTrue && *fillTrue <= kMaskedBelow && typeOf(sel.getOnTrue()).getNumElements() == 1) {
        maskedWhenTrue = true;
        *inner = sel.getOnFalse();
      } else if (fillFalse && *fillFalse <= kMaskedBelow &&
                 typeOf(sel.getOnFalse()).getNumElements() == 1) {
        maskedWhenTrue = false;
        *inner = sel.getOnTrue();
      } else {
        return false;
      }
      if (!sameType(def, *inner))
        return false;
      pattern = maskPattern(dense, true, maskedWhenTrue, tq, tk);
    } else if (auto add = llvm::dyn_cast<AddOp>(def)) {
      Value m;
      if (add.getRhs().getDefiningOp<ConstantOp>()) {
        m = add.getRhs();
        *inner = add.getLhs();
      } else if (add.getLhs().getDefiningOp<ConstantOp>()) {
        m = add.getLhs();
        *inner = add.getRhs();
      } else {
        return false;
      }
      if (!sameType(def, *inner))
        return false;
      auto dense = llvm::dyn_cast<DenseElementsAttr>(m.getDefiningOp<ConstantOp>().getValue());
      if (!dense)
        return false;
      pattern = maskPattern(dense, false, true, tq, tk);
    } else {
      return false;
    }
    if (!pattern)
      return false;
    *causal = classifyMask(*pattern, tq, tk);
    return causal->has_value();
  }

  /// Folds a scale factor of `def` into `scale` (constant) or `dynamic`.
  bool takeFactor(Operation *def, Value *inner, double *scale) {
    std::optional<Factor> f = factorOf(def, inner);
    if (!f)
      return false;
    *scale *= f->value;
    if (f->dynamic)
      dynamic.push_back(f->dynamic);
    return true;
  }

  /// Strips scalar multiplications/divisions read only here, multiplying
  /// their factors into `scale` (run-time ones into `dynamic`).
  Value peelScales(Value v, double *scale) {
    while (Operation *def = v.getDefiningOp()) {
      Value inner;
      if (!v.hasOneUse() || !takeFactor(def, &inner, scale))
        break;
      v = inner;
    }
    return v;
  }

  /// k [B, H, Tk, D] from k^T [B, H, D, Tk].
  Value keyFromTransposed(Value kt) {
    auto t = typeOf(kt);
    if (t.getRank() != 4)
      return {};
    SmallVector<int64_t> kShape = {t.getDimSize(0), t.getDimSize(1), t.getDimSize(3),
                                   t.getDimSize(2)};
    auto kType = RankedTensorType::get(kShape, t.getElementType());
    b.setInsertionPointAfterValue(kt);
    if (auto tr = kt.getDefiningOp<TransposeOp>()) {
      // transpose(x, p) with its last two entries swapped reads k from x.
      SmallVector<int64_t> perm(tr.getPermutation());
      std::swap(perm[2], perm[3]);
      bool identity = true;
      for (int64_t i = 0; i < 4; ++i)
        identity &= perm[i] == i;
      if (identity)
        return tr.getInput();
      b.setInsertionPointAfterValue(tr.getInput());
      return track(TransposeOp::create(b, kt.getLoc(), kType, tr.getInput(),
                                       b.getDenseI64ArrayAttr(perm)));
    }
    // torch's 3-D form: reshape([B*H, D, Tk] <- transpose([B*H, Tk, D] <- reshape(y))).
    if (auto outer = kt.getDefiningOp<ReshapeOp>())
      if (auto tr = outer.getInput().getDefiningOp<TransposeOp>())
        if (auto in = tr.getInput().getDefiningOp<ReshapeOp>()) {
          auto t3 = typeOf(tr.getInput());
          ArrayRef<int64_t> p = tr.getPermutation();
          if (t3.getRank() == 3 && p[0] == 0 && p[1] == 2 && p[2] == 1 &&
              t3.getDimSize(0) == kShape[0] * kShape[1] && t3.getDimSize(1) == kShape[2] &&
              t3.getDimSize(2) == kShape[3]) {
            Value y = in.getInput();
            if (y.getType() == kType)
              return y;
            b.setInsertionPointAfterValue(y);
            return track(ReshapeOp::create(b, kt.getLoc(), kType, y));
          }
        }
    return track(TransposeOp::create(b, kt.getLoc(), kType, kt,
                                     b.getDenseI64ArrayAttr({0, 1, 3, 2})));
  }

  /// x [B, Hkv, T, D] when `v` [B, Hkv*n, T, D] is repeat_kv(x):
  /// reshape(broadcast(reshape(x) : [B, Hkv, 1, T, D]) : [B, Hkv, n, T, D]).
  /// A reshape this pass created around the broadcast counts too.
  Value ungroup(Value v) {
    auto vt = typeOf(v);
    auto r = v.getDefiningOp<ReshapeOp>();
    if (!r)
      return {};
    auto bc = r.getInput().getDefiningOp<BroadcastOp>();
    if (!bc)
      return {};
    auto in = bc.getInput().getDefiningOp<ReshapeOp>();
    if (!in)
      return {};
    Value x = in.getInput();
    auto xt = typeOf(x), it = typeOf(in.getResult()), bt = typeOf(bc.getResult());
    if (xt.getRank() != 4 || it.getRank() != 5 || bt.getRank() != 5)
      return {};
    int64_t bsz = xt.getDimSize(0), hkv = xt.getDimSize(1), t = xt.getDimSize(2),
            d = xt.getDimSize(3), n = bt.getDimSize(2);
    if (it.getShape() != ArrayRef<int64_t>{bsz, hkv, 1, t, d} ||
        bt.getShape() != ArrayRef<int64_t>{bsz, hkv, n, t, d} ||
        vt.getShape() != ArrayRef<int64_t>{bsz, hkv * n, t, d})
      return {};
    return x;
  }

  Value track(Operation *op) {
    created.push_back(op);
    return op->getResult(0);
  }

  /// Erases what a failed match created.
  bool cleanup(bool result) {
    for (Operation *op : llvm::reverse(created))
      if (op->use_empty())
        op->erase();
    created.clear();
    return result;
  }

  OpBuilder &b;
  SmallVector<Operation *> created;
  SmallVector<Value> dynamic;
};

struct RecognizeAttentionPass
    : tc::impl::TcRecognizeAttentionBase<RecognizeAttentionPass> {
  void runOnOperation() override {
    SmallVector<MatmulOp> candidates;
    getOperation().walk([&](MatmulOp m) { candidates.push_back(m); });
    OpBuilder b(&getContext());
    for (MatmulOp m : candidates) {
      Matcher matcher(b);
      matcher.run(m);
    }
  }
};

} // namespace
