//===- RecognizeAttention.cpp - tc-recognize-attention ---------------------===//
//
// Exported attention is `matmul(softmax(mask(scale * matmul(q, k^T))), v)`
// spread over many small ops. This pass matches the chain backwards from the
// second matmul and, when every piece is one it understands (scalar scales, a
// causal or empty mask -- a folded constant or the computation that builds
// it, whatever the batch size and sequence length (AttentionMask.h) --, k^T
// as a transpose or torch's 3-D
// reshape-transpose-reshape, repeat_kv for grouped-query attention), builds
// one tc.attention. Nothing is changed unless the whole chain matches; the
// ops it bypasses are deleted. A softmax-then-matmul chain that is left
// unfused gets a remark saying why (tc-compile prints it as a note).
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/AttentionMask.h"
#include "compiler/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
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

/// Fills below this hide their key (torch writes -inf, finfo.min or -1e9).
constexpr double kMaskedBelow = -1e4;

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
    candidate = softmax;
    auto st = typeOf(softmax.getResult());
    int64_t axis = static_cast<int64_t>(softmax.getAxis());
    if (st.getRank() != 4 || (axis != 3 && axis != -1))
      return no("the softmax is not over the last axis of [batch, heads, queries, keys] scores");
    int64_t tq = st.getDimSize(2), tk = st.getDimSize(3);
    auto vt = typeOf(pv.getRhs());
    if (vt.getRank() != 4 || pv.getType() != RankedTensorType::get(
                                                  {st.getDimSize(0), st.getDimSize(1), tq,
                                                   vt.getDimSize(3)},
                                                  st.getElementType()))
      return no("the values are not [batch, heads, keys, head_dim]");

    // Between the scores matmul and the softmax: scales and one mask.
    double scale = 1.0;
    std::optional<bool> causal;
    Value x = softmax.getInput();
    MatmulOp qk;
    while (true) {
      Operation *def = x.getDefiningOp();
      if (!def)
        return no("the scores are not computed by a matmul");
      if (!x.hasOneUse())
        return no("a value between the scores matmul and the softmax has other users");
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
        return no("a second mask");
      if (!matchMask(def, tq, tk, &inner, &causal))
        return false; // matchMask says why
      x = inner;
    }
    if (qk.getTransposeLhs() || qk.getType() != st)
      return no("the scores matmul is not q x k^T");

    // The query side: scalar scales, then q [B, H, Tq, D].
    Value q = peelScales(qk.getLhs(), &scale);
    // The key side: k^T [B, H, D, Tk] (or k itself with transpose_rhs).
    Value k = qk.getTransposeRhs() ? peelScales(qk.getRhs(), &scale)
                                   : keyFromTransposed(peelScales(qk.getRhs(), &scale));
    if (!q || !k)
      return cleanup(no("the keys are not k^T of a [batch, heads, keys, head_dim] tensor"));
    if (!(scale > 0) || !std::isfinite(scale))
      return cleanup(no("the scale is not positive and finite"));
    Value v = pv.getRhs();
    auto qt = typeOf(q), kt = typeOf(k);
    auto bh = [&](RankedTensorType t) {
      return t.getRank() == 4 && t.getDimSize(0) == st.getDimSize(0) &&
             t.getDimSize(1) == st.getDimSize(1);
    };
    if (!bh(qt) || !bh(kt) || !bh(vt) || qt.getDimSize(2) != tq || kt.getDimSize(2) != tk ||
        vt.getDimSize(2) != tk || kt.getDimSize(3) != qt.getDimSize(3) ||
        qt.getElementType() != vt.getElementType() || kt.getElementType() != vt.getElementType())
      return cleanup(no("queries, keys and values do not have matching shapes and types"));
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
    Value keys = keyMask;
    if (keys && !typeOf(keys).getElementType().isInteger(1))
      keys = CastOp::create(b, pv.getLoc(),
                            RankedTensorType::get(typeOf(keys).getShape(), b.getI1Type()), keys);
    auto att = AttentionOp::create(b, pv.getLoc(), TypeRange{pv.getType(), lseType}, q, k, v, keys,
                                   b.getF64FloatAttr(scale), b.getBoolAttr(causal.value_or(false)),
                                   maskFill ? b.getF64FloatAttr(*maskFill) : FloatAttr());
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
  /// mask(x): select(cond, fill, x) / select(cond, x, fill) with a boolean
  /// cond and a very negative scalar fill, or x + mask / mask + x with an
  /// additive mask; the mask must hide nothing or exactly the keys after each
  /// query (AttentionMask.h reads it from its construction).
  bool matchMask(Operation *def, int64_t tq, int64_t tk, Value *inner,
                 std::optional<bool> *causal) {
    Value mask;
    bool isBool, maskedWhen = true;
    if (auto sel = llvm::dyn_cast<SelectOp>(def)) {
      std::optional<double> fillTrue = splatFloatValue(sel.getOnTrue());
      std::optional<double> fillFalse = splatFloatValue(sel.getOnFalse());
      if (fillTrue && *fillTrue <= kMaskedBelow && typeOf(sel.getOnTrue()).getNumElements() == 1) {
        maskedWhen = true;
        *inner = sel.getOnFalse();
      } else if (fillFalse && *fillFalse <= kMaskedBelow &&
                 typeOf(sel.getOnFalse()).getNumElements() == 1) {
        maskedWhen = false;
        *inner = sel.getOnTrue();
      } else {
        return no("a select between the scores and the softmax whose fill is not a very "
                  "negative scalar");
      }
      mask = sel.getCond();
      isBool = true;
      selectFill = maskedWhen ? *fillTrue : *fillFalse;
    } else if (auto add = llvm::dyn_cast<AddOp>(def)) {
      // The scores come from the matmul side; the other operand is the mask.
      auto fromScores = [](Value v) {
        Operation *d = v.getDefiningOp();
        return d && llvm::isa<MatmulOp, MulOp, DivOp>(d);
      };
      bool lhsScores = fromScores(add.getLhs()) || !fromScores(add.getRhs());
      *inner = lhsScores ? add.getLhs() : add.getRhs();
      mask = lhsScores ? add.getRhs() : add.getLhs();
      isBool = false;
    } else {
      return no("the scores pass through " + def->getName().getStringRef().str() +
                " on their way to the softmax");
    }
    if (!sameType(def, *inner))
      return no("the mask broadcasts the scores");
    std::string why;
    int64_t batch = typeOf(*inner).getDimSize(0);
    std::optional<MaskInfo> info = maskedEntries(mask, isBool, maskedWhen, batch, tq, tk, &why);
    if (!info)
      return no("the mask is not understood: " + why);
    if (info->masked.kind == EntrySet::None)
      *causal = false;
    else if (info->masked.kind == EntrySet::After && info->masked.t == 0)
      *causal = true;
    else
      return no("the mask hides other entries than the keys after each query (a sliding "
                "window or an offset causal mask)");
    if (info->keys) {
      std::string input = graphInputName(info->keys);
      if (!allowKeyMasks)
        return no("a padding mask (from " + input + "): key masks are off (key-masks=false)");
      double fill = isBool ? selectFill : info->fill;
      if (std::isnan(fill))
        return no("a padding mask whose hidden entries do not hold one fill value");
      if (isBool && std::isfinite(fill))
        return no("a padding mask applied by a select with a finite fill (its gradient "
                  "differs from the fused op's additive one in fully hidden rows)");
      keyMask = info->keys;
      if (std::isfinite(fill))
        maskFill = fill;
    }
    return true;
  }

  /// "graph input 'NAME'" when `v` is computed from one graph input.
  static std::string graphInputName(Value v) {
    for (int depth = 0; depth < 8; ++depth) {
      if (auto arg = llvm::dyn_cast<BlockArgument>(v)) {
        if (auto fn = llvm::dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
          if (auto n = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "tc.name"))
            return "graph input '" + n.getValue().str() + "'";
        return "a graph input";
      }
      Operation *d = v.getDefiningOp();
      if (!d || d->getNumOperands() != 1)
        break;
      v = d->getOperand(0);
    }
    return "a computed value";
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

  bool no(const std::string &why) {
    if (reason.empty())
      reason = why;
    return false;
  }

  OpBuilder &b;
  SmallVector<Operation *> created;
  SmallVector<Value> dynamic;
  /// A padding mask (MaskInfo::keys) and the additive fill of hidden scores.
  Value keyMask;
  std::optional<double> maskFill;
  double selectFill = 0;

public:
  /// Whether padding masks may be fused (the CPU reference runs them; the GPU
  /// kernels do not yet).
  bool allowKeyMasks = true;
  /// The softmax of an attention-shaped chain (softmax then matmul) once
  /// found, and why the chain was not fused.
  Operation *candidate = nullptr;
  std::string reason;
};

struct RecognizeAttentionPass
    : tc::impl::TcRecognizeAttentionBase<RecognizeAttentionPass> {
  using TcRecognizeAttentionBase::TcRecognizeAttentionBase;
  void runOnOperation() override {
    SmallVector<MatmulOp> candidates;
    getOperation().walk([&](MatmulOp m) { candidates.push_back(m); });
    OpBuilder b(&getContext());
    for (MatmulOp m : candidates) {
      Matcher matcher(b);
      matcher.allowKeyMasks = keyMasks;
      if (matcher.run(m) || !matcher.candidate)
        continue;
      std::string node;
      if (auto n = llvm::dyn_cast<NameLoc>(matcher.candidate->getLoc()))
        node = " at node '" + n.getName().str() + "'";
      matcher.candidate->emitRemark()
          << "attention" << node << " left unfused (matmul / softmax / matmul): "
          << matcher.reason;
    }
  }
};

} // namespace
