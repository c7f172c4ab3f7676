//===- RecognizeRotary.cpp - tc-recognize-rotary ---------------------------===//
//
// ONNX has no rotary embedding before opset 23, so exporters write
// HuggingFace's apply_rotary_pos_emb out:
//
//   rotate_half(x) = concat(-x[..., R/2:R], x[..., :R/2])
//   y = x * cos + rotate_half(x) * sin          cos, sin: [B|1, 1, S, R]
//
// (Llama, Mistral, Qwen2; GPT-NeoX's partial rotary applies it to x[..., :R]
// and concatenates x[..., R:] back). On the GPU that is two slices, a
// negation, a concat and a fusion per tensor, and the backward adds
// zero-filled insert_slices: about 15% of a Llama step. This pass matches
// the chain from its add and, when the tables' two halves are equal (HF
// builds them as cos(concat(freqs, freqs)), or a constant whose halves are
// the same bits) and every intermediate is read only by the next step,
// replaces it by one tc.rotary (its gradient is tc.rotary with -sin) over
// the first halves of the tables; a partial rotary's concat becomes the
// tc.rotary of the whole x (features from R on are copied).
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cstring>

namespace tc {
#define GEN_PASS_DEF_TCRECOGNIZEROTARY
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;
using namespace tc;

namespace {

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }
int64_t lastDim(Value v) { return typeOf(v).getRank() ? typeOf(v).getShape().back() : 1; }

/// A tc.slice of `x` along its last axis only, unit strides: [lo, hi).
std::optional<std::pair<int64_t, int64_t>> lastAxisSlice(Value v, Value *x) {
  auto s = v.getDefiningOp<SliceOp>();
  if (!s)
    return std::nullopt;
  auto in = typeOf(s.getInput()), out = typeOf(s.getResult());
  int64_t r = in.getRank();
  for (int64_t d = 0; d < r; ++d) {
    if (s.getStrides()[d] != 1)
      return std::nullopt;
    if (d < r - 1 && (s.getStarts()[d] != 0 || in.getDimSize(d) != out.getDimSize(d)))
      return std::nullopt;
  }
  *x = s.getInput();
  return std::make_pair(s.getStarts()[r - 1], s.getStarts()[r - 1] + out.getDimSize(r - 1));
}

/// x when `rot` is rotate_half(x): concat(neg(x[..., h:2h]), x[..., :h])
/// along the last axis, 2h = x's last dim.
Value rotateHalfOf(Value rot) {
  auto cat = rot.getDefiningOp<ConcatOp>();
  if (!cat || cat.getInputs().size() != 2 || cat.getAxis() != typeOf(rot).getRank() - 1)
    return {};
  auto neg = cat.getInputs()[0].getDefiningOp<NegOp>();
  if (!neg)
    return {};
  Value x2, x1;
  auto hi = lastAxisSlice(neg.getInput(), &x2), lo = lastAxisSlice(cat.getInputs()[1], &x1);
  int64_t d = lastDim(rot);
  if (!hi || !lo || x1 != x2 || lastDim(x1) != d || d % 2 ||
      *hi != std::make_pair(d / 2, d) || *lo != std::make_pair(int64_t(0), d / 2))
    return {};
  return x1;
}

/// Whether every row of `t` along its last axis has two equal halves,
/// proven from how it is made: a concat of one value with itself, a
/// constant whose halves are the same bits, or elementwise ops, reshapes,
/// broadcasts and transposes (keeping the last axis) of such values and of
/// values constant along the last axis.
bool equalHalves(Value t, int depth = 0) {
  if (depth > 32)
    return false;
  int64_t d = lastDim(t);
  if (d % 2)
    return false;
  Operation *def = t.getDefiningOp();
  if (!def)
    return false;
  if (auto c = llvm::dyn_cast<ConcatOp>(def))
    return c.getAxis() == typeOf(t).getRank() - 1 && c.getInputs().size() == 2 &&
           c.getInputs()[0] == c.getInputs()[1];
  if (auto c = llvm::dyn_cast<ConstantOp>(def)) {
    auto dense = llvm::dyn_cast<DenseElementsAttr>(c.getValue());
    if (!dense)
      return false;
    if (dense.isSplat())
      return true;
    Type e = dense.getElementType();
    if (!e.isIntOrFloat() || e.getIntOrFloatBitWidth() % 8)
      return false;
    size_t bytes = e.getIntOrFloatBitWidth() / 8, half = size_t(d / 2) * bytes;
    ArrayRef<char> raw = dense.getRawData();
    if (raw.size() != size_t(dense.getNumElements()) * bytes)
      return false;
    for (size_t row = 0; row < raw.size(); row += 2 * half)
      if (std::memcmp(raw.data() + row, raw.data() + row + half, half) != 0)
        return false;
    return true;
  }
  if (llvm::isa<ReshapeOp, BroadcastOp>(def))
    return lastDim(def->getOperand(0)) == d && equalHalves(def->getOperand(0), depth + 1);
  if (auto tr = llvm::dyn_cast<TransposeOp>(def)) {
    ArrayRef<int64_t> p = tr.getPermutation();
    return !p.empty() && p.back() == int64_t(p.size()) - 1 &&
           equalHalves(tr.getInput(), depth + 1);
  }
  if (!isElementwise(def))
    return false;
  bool any = false;
  for (Value o : def->getOperands()) {
    if (lastDim(o) == 1)
      continue; // the same for both halves
    if (lastDim(o) != d || !equalHalves(o, depth + 1))
      return false;
    any = true;
  }
  return any;
}

/// The table [B', 1, S, R] as tc.rotary's [B, S, R/2]: its first half, the
/// head axis dropped, broadcast to `batch`.
Value halfTable(OpBuilder &b, Location loc, Value t, int64_t batch) {
  auto tt = typeOf(t);
  int64_t bt = tt.getDimSize(0), s = tt.getDimSize(2), h = tt.getDimSize(3) / 2;
  Type e = tt.getElementType();
  Value v = SliceOp::create(b, loc, RankedTensorType::get({bt, 1, s, h}, e), t,
                            b.getDenseI64ArrayAttr({0, 0, 0, 0}),
                            b.getDenseI64ArrayAttr({1, 1, 1, 1}));
  v = ReshapeOp::create(b, loc, RankedTensorType::get({bt, s, h}, e), v);
  if (bt != batch)
    v = BroadcastOp::create(b, loc, RankedTensorType::get({batch, s, h}, e), v);
  return v;
}

/// The tables' form tc.rotary takes for input [B, H, S, R]: [1|B, 1, S, R].
bool tableForm(Value t, RankedTensorType x) {
  auto tt = typeOf(t);
  return tt.getRank() == 4 && tt.getElementType() == x.getElementType() &&
         (tt.getDimSize(0) == 1 || tt.getDimSize(0) == x.getDimSize(0)) && tt.getDimSize(1) == 1 &&
         tt.getDimSize(2) == x.getDimSize(2) && tt.getDimSize(3) == x.getDimSize(3);
}

struct Match {
  Value x, cos, sin;
  SmallVector<Operation *> chain; // the ops the tc.rotary replaces, the add last
};

/// y = x * cos + rotate_half(x) * sin, from the add (either operand order,
/// either side of each product).
std::optional<Match> matchRotary(AddOp add) {
  for (auto [a, b] : {std::pair(add.getLhs(), add.getRhs()), std::pair(add.getRhs(), add.getLhs())}) {
    auto m1 = a.getDefiningOp<MulOp>(), m2 = b.getDefiningOp<MulOp>();
    if (!m1 || !m2)
      continue;
    for (auto [rot, sin] : {std::pair(m2.getLhs(), m2.getRhs()), std::pair(m2.getRhs(), m2.getLhs())}) {
      Value x = rotateHalfOf(rot);
      if (!x)
        continue;
      Value cos = m1.getLhs() == x ? m1.getRhs() : m1.getRhs() == x ? m1.getLhs() : Value();
      auto xt = typeOf(x);
      if (!cos || xt.getRank() != 4 || typeOf(add.getResult()) != xt ||
          !tableForm(cos, xt) || !tableForm(sin, xt) || !equalHalves(cos) || !equalHalves(sin))
        continue;
      auto cat = rot.getDefiningOp<ConcatOp>();
      auto neg = cat.getInputs()[0].getDefiningOp<NegOp>();
      Operation *hi = neg.getInput().getDefiningOp(), *lo = cat.getInputs()[1].getDefiningOp();
      Match m{x, cos, sin, {hi, lo, neg, cat, m2, m1, add}};
      // Every intermediate read only by the next step (the slices by the
      // negation and the concat).
      bool single = llvm::all_of(ArrayRef<Operation *>(m.chain).drop_back(), [](Operation *op) {
        return op->getResult(0).hasOneUse();
      });
      if (single)
        return m;
    }
  }
  return std::nullopt;
}

struct RecognizeRotaryPass : tc::impl::TcRecognizeRotaryBase<RecognizeRotaryPass> {
  void runOnOperation() override {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp a) { adds.push_back(a); });
    for (AddOp add : adds) {
      std::optional<Match> m = matchRotary(add);
      if (!m)
        continue;
      auto xt = typeOf(m->x);
      // GPT-NeoX's partial rotary: concat(rotary(x[..., :R]), x[..., R:])
      // along the last axis is the rotary of the whole x.
      Value whole;
      Operation *partialCat = nullptr;
      if (add.getResult().hasOneUse())
        if (auto cat = llvm::dyn_cast<ConcatOp>(*add.getResult().getUsers().begin());
            cat && cat.getInputs().size() == 2 && cat.getInputs()[0] == add.getResult() &&
            cat.getAxis() == xt.getRank() - 1) {
          Value a, p;
          auto r = lastAxisSlice(m->x, &a), pass = lastAxisSlice(cat.getInputs()[1], &p);
          if (r && pass && a == p && r->first == 0 && pass->first == r->second &&
              pass->second == lastDim(a) && typeOf(cat.getResult()) == typeOf(a)) {
            whole = a;
            partialCat = cat;
          }
        }
      OpBuilder b(add);
      Location loc = add.getLoc();
      Value input = whole ? whole : m->x;
      int64_t batch = xt.getDimSize(0);
      Value cos = halfTable(b, loc, m->cos, batch), sin = halfTable(b, loc, m->sin, batch);
      auto rot = RotaryOp::create(b, loc, input.getType(), input, cos, sin, b.getBoolAttr(false));
      if (partialCat) {
        partialCat->getResult(0).replaceAllUsesWith(rot.getResult());
        Operation *passSlice = llvm::cast<ConcatOp>(partialCat).getInputs()[1].getDefiningOp();
        partialCat->erase();
        if (passSlice->use_empty())
          passSlice->erase();
      } else {
        add.getResult().replaceAllUsesWith(rot.getResult());
      }
      Operation *xSlice = whole ? m->x.getDefiningOp() : nullptr;
      for (Operation *op : llvm::reverse(m->chain))
        if (op->use_empty())
          op->erase();
      if (xSlice && xSlice->use_empty())
        xSlice->erase();
    }
  }
};

} // namespace
