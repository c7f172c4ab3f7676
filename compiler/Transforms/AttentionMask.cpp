//===- AttentionMask.cpp - what an attention mask hides, from its construction ===//
//
// See AttentionMask.h.
//
//===----------------------------------------------------------------------===//
#include "compiler/Transforms/AttentionMask.h"

#include "dialects/tc/Eval/Program.h"
#include "dialects/tc/IR/TcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace mlir;

namespace tc {

namespace {

constexpr double kMaskedBelow = -1e4;

/// A mask sub-expression, as a function of the entry (i, j) of the last two
/// axes (the same for every leading index).
struct Sym {
  enum Kind { Bool, Scalar, Index, FloatMask } kind = Scalar;
  EntrySet set;        ///< Bool: where true; FloatMask: where 0 (visible; the rest hidden)
  double value = 0;    ///< Scalar
  bool query = false;  ///< Index: along the query axis (i) or the key axis (j)
  double a = 0, s = 1; ///< Index: a + s * position
  /// Bool / FloatMask: a padding mask [B, Tk]; Bool is then true (FloatMask
  /// 0) only where `set` holds and keys[b, j] is non-zero.
  Value keys;
  /// Bool: true where keys[b, j] is zero instead (attention_mask == 0),
  /// which only a tc.not may turn back.
  bool zeroKeys = false;
  double fill = std::numeric_limits<double>::quiet_NaN(); ///< FloatMask: its hidden value
};

EntrySet complement(EntrySet e) {
  switch (e.kind) {
  case EntrySet::All: return {EntrySet::None, 0};
  case EntrySet::None: return {EntrySet::All, 0};
  case EntrySet::After: return {EntrySet::NotAfter, e.t};
  case EntrySet::NotAfter: return {EntrySet::After, e.t};
  }
  return e;
}

/// The extents of the last two axes ([.., a, b]; rank 1 is [1, b]).
std::pair<int64_t, int64_t> lastTwo(RankedTensorType t) {
  int64_t r = t.getRank();
  if (r == 0)
    return {1, 1};
  if (r == 1)
    return {1, t.getDimSize(0)};
  return {t.getDimSize(r - 2), t.getDimSize(r - 1)};
}

class Evaluator {
public:
  Evaluator(int64_t batch, int64_t tq, int64_t tk) : batch(batch), tq(tq), tk(tk) {}

  std::optional<Sym> eval(Value v, int depth = 0) {
    auto it = memo.find(v);
    if (it != memo.end())
      return it->second;
    std::optional<Sym> r = depth > 64 ? fail("the mask's construction is too deep") : compute(v, depth);
    memo[v] = r;
    return r;
  }

  /// Normalises a set against the extents: j - i lies in [-(tq-1), tk-1].
  EntrySet normalize(EntrySet e) const {
    if (e.kind == EntrySet::After || e.kind == EntrySet::NotAfter) {
      bool none = e.t >= tk - 1, all = e.t < -(tq - 1);
      if (none || all) {
        bool empty = (e.kind == EntrySet::After) == none;
        return {empty ? EntrySet::None : EntrySet::All, 0};
      }
    }
    return e;
  }

  std::string why;

private:
  std::optional<Sym> fail(const std::string &w) {
    if (why.empty())
      why = w;
    return std::nullopt;
  }

  static Sym boolSym(EntrySet e) {
    Sym s;
    s.kind = Sym::Bool;
    s.set = e;
    return s;
  }
  static Sym scalarSym(double v) {
    Sym s;
    s.kind = Sym::Scalar;
    s.value = v;
    return s;
  }

  bool shapeFits(Value v) {
    auto [a, b] = lastTwo(cast<RankedTensorType>(v.getType()));
    return (a == 1 || a == tq) && (b == 1 || b == tk);
  }

  std::string describe(Operation *op) {
    std::string loc;
    if (auto n = dyn_cast<NameLoc>(op->getLoc()))
      loc = " (node '" + n.getName().str() + "')";
    return op->getName().getStringRef().str() + loc;
  }

  std::optional<Sym> compute(Value v, int depth) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      std::string name = "#" + std::to_string(arg.getArgNumber());
      if (auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
        if (auto n = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "tc.name"))
          name = n.getValue().str();
      return fail("it depends on graph input '" + name + "'");
    }
    if (!shapeFits(v))
      return fail("a value of the mask has shape " + shapeText(v) + ", not [..., " +
                  std::to_string(tq) + " or 1, " + std::to_string(tk) + " or 1]");
    Operation *op = v.getDefiningOp();
    if (auto c = dyn_cast<ConstantOp>(op))
      return constant(c);
    if (auto p = padding(op))
      return p;
    auto operand = [&](unsigned k) { return eval(op->getOperand(k), depth + 1); };
    if (isa<NotOp>(op)) {
      auto x = operand(0);
      if (!x || x->kind != Sym::Bool)
        return x ? fail("tc.not of a non-boolean") : std::nullopt;
      if (x->keys && x->zeroKeys && x->set.kind == EntrySet::All) {
        x->zeroKeys = false; // not(attention_mask == 0)
        return x;
      }
      if (x->keys)
        return fail("a negated padding mask");
      return boolSym(normalize(complement(x->set)));
    }
    if (isa<AndOp, OrOp, XorOp>(op))
      return logical(op, operand(0), operand(1));
    if (isa<LeOp, LtOp, GeOp, GtOp, EqOp, NeOp>(op))
      return compare(op, operand(0), operand(1));
    if (isa<AddOp, SubOp, MulOp>(op))
      return arith(op, operand(0), operand(1));
    if (isa<NegOp>(op)) {
      auto x = operand(0);
      if (!x)
        return std::nullopt;
      if (x->kind == Sym::Scalar)
        return scalarSym(-x->value);
      if (x->kind == Sym::Index) {
        x->a = -x->a;
        x->s = -x->s;
        return x;
      }
      return fail("tc.neg of a mask");
    }
    if (auto c = dyn_cast<CastOp>(op)) {
      auto x = operand(0);
      if (!x)
        return std::nullopt;
      bool toBool = cast<RankedTensorType>(c.getType()).getElementType().isInteger(1);
      bool fromBool = cast<RankedTensorType>(c.getInput().getType()).getElementType().isInteger(1);
      if (toBool != fromBool)
        return fail("a cast between booleans and numbers");
      return x; // exact for the small integers of index vectors
    }
    if (auto s = dyn_cast<SelectOp>(op))
      return select(operand(0), operand(1), operand(2));
    if (isa<BroadcastOp>(op))
      return operand(0); // keeps (i, j): the fit was checked on both shapes
    if (auto r = dyn_cast<ReshapeOp>(op))
      return reshape(r, operand(0));
    if (auto t = dyn_cast<TransposeOp>(op)) {
      ArrayRef<int64_t> p = t.getPermutation();
      int64_t n = p.size();
      if (n >= 2 && (p[n - 2] != n - 2 || p[n - 1] != n - 1))
        return fail("a transpose of the mask's last two axes");
      return operand(0);
    }
    if (auto s = dyn_cast<SliceOp>(op))
      return slice(s, operand(0));
    return fail("it is computed by " + describe(op));
  }

  static std::string shapeText(Value v) {
    std::string s;
    for (int64_t d : cast<RankedTensorType>(v.getType()).getShape())
      s += (s.empty() ? "" : "x") + std::to_string(d);
    return "[" + s + "]";
  }

  std::optional<Sym> constant(ConstantOp c) {
    auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!dense)
      return fail("a constant of the mask is not dense");
    auto type = cast<RankedTensorType>(dense.getType());
    Type elt = type.getElementType();
    bool isBool = elt.isInteger(1);
    std::vector<double> vals;
    if (dense.isSplat()) {
      if (isBool)
        return boolSym({dense.getSplatValue<bool>() ? EntrySet::All : EntrySet::None, 0});
      if (isa<FloatType>(elt))
        return scalarSym(dense.getSplatValue<APFloat>().convertToDouble());
      return scalarSym(static_cast<double>(dense.getSplatValue<APInt>().getSExtValue()));
    }
    auto [a, b] = lastTwo(type);
    int64_t slice = a * b, n = type.getNumElements();
    // Exporters broadcast the mask over batch and heads ([16, 1, 1024, 1024]
    // for HF GPT-2): when every [a, b] slice holds the bytes of the first,
    // only the first is converted (element by element is seconds there).
    bool sameBytes = repeatsBlocks(dense, n / slice);
    int64_t count = sameBytes ? slice : n;
    vals.reserve(static_cast<size_t>(count));
    auto take = [&](auto range, auto conv) {
      for (auto x : range) {
        if (static_cast<int64_t>(vals.size()) == count)
          break;
        vals.push_back(conv(x));
      }
    };
    // f32, bf16, f64 and signless 8/32/64-bit integers straight from their
    // bytes (an APFloat per element is ~0.1 s per million, per attention).
    auto fromBytes = [&](auto tag, auto conv) {
      using T = decltype(tag);
      if (dense.getRawData().size() != size_t(n) * sizeof(T))
        return false;
      const char *p = dense.getRawData().data();
      for (int64_t k = 0; k < count; ++k) {
        T x;
        std::memcpy(&x, p + k * sizeof(T), sizeof(T));
        vals.push_back(conv(x));
      }
      return true;
    };
    auto same = [](auto x) { return static_cast<double>(x); };
    bool signless = elt.isSignlessInteger();
    if ((elt.isF32() && fromBytes(float(), same)) || (elt.isF64() && fromBytes(double(), same)) ||
        (elt.isBF16() && fromBytes(uint16_t(), [](uint16_t h) {
           uint32_t bits = uint32_t(h) << 16;
           float f;
           std::memcpy(&f, &bits, sizeof(f));
           return static_cast<double>(f);
         })) ||
        (signless && elt.isInteger(64) && fromBytes(int64_t(), same)) ||
        (signless && elt.isInteger(32) && fromBytes(int32_t(), same)) ||
        (signless && elt.isInteger(8) && fromBytes(int8_t(), same)))
      ;
    else if (isBool)
      take(dense.getValues<bool>(), [](bool x) { return x ? 1.0 : 0.0; });
    else if (isa<FloatType>(elt))
      take(dense.getValues<APFloat>(), [](const APFloat &x) { return x.convertToDouble(); });
    else
      take(dense.getValues<APInt>(),
           [](const APInt &x) { return static_cast<double>(x.getSExtValue()); });
    for (size_t k = static_cast<size_t>(slice); k < vals.size(); ++k)
      if (vals[k] != vals[k % slice])
        return fail("a constant of the mask differs across the batch or head axes");
    vals.resize(static_cast<size_t>(slice));
    bool uniform = std::all_of(vals.begin(), vals.end(), [&](double x) { return x == vals[0]; });
    if (uniform)
      return isBool ? boolSym({vals[0] != 0 ? EntrySet::All : EntrySet::None, 0})
                    : scalarSym(vals[0]);
    if (a > 1 && b > 1) {
      // A full [Tq, Tk] pattern: all / none / causal / its complement.
      auto entry = [&](int64_t i, int64_t j) { return vals[static_cast<size_t>(i * b + j)]; };
      const char *unknown = "a constant mask that is neither causal nor empty";
      if (isBool) {
        auto set = pattern([&](int64_t i, int64_t j) { return entry(i, j) != 0; });
        return set ? std::optional<Sym>(boolSym(*set)) : fail(unknown);
      }
      bool ok = true;
      double fill = std::numeric_limits<double>::quiet_NaN();
      std::optional<EntrySet> visible = pattern([&](int64_t i, int64_t j) {
        double x = entry(i, j);
        ok &= x == 0 || x <= kMaskedBelow;
        if (x != 0)
          fill = std::isnan(fill) || fill == x ? x : -std::numeric_limits<double>::max();
        return x == 0;
      });
      if (!ok)
        return fail("a float constant of the mask holds values other than 0 and very negative");
      if (!visible)
        return fail(unknown);
      Sym s;
      s.kind = Sym::FloatMask;
      s.set = *visible;
      s.fill = fill;
      return s;
    }
    if (isBool)
      return fail("a boolean constant of the mask varies along one axis only");
    // An index vector along one axis: a + s * position.
    Sym s;
    s.kind = Sym::Index;
    s.query = a > 1;
    s.a = vals[0];
    s.s = vals.size() > 1 ? vals[1] - vals[0] : 1;
    for (size_t p = 0; p < vals.size(); ++p)
      if (vals[p] != s.a + s.s * static_cast<double>(p))
        return fail("a constant of the mask is not an evenly spaced index vector");
    return s;
  }

  /// Classifies a full [tq, tk] boolean pattern (unknown patterns fail).
  template <typename F> std::optional<EntrySet> pattern(F at) {
    bool all = true, none = true, after = true, notAfter = true;
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = 0; j < tk; ++j) {
        bool x = at(i, j);
        all &= x;
        none &= !x;
        after &= x == (j > i);
        notAfter &= x == (j <= i);
      }
    if (all)
      return EntrySet{EntrySet::All, 0};
    if (none)
      return EntrySet{EntrySet::None, 0};
    if (after)
      return EntrySet{EntrySet::After, 0};
    if (notAfter)
      return EntrySet{EntrySet::NotAfter, 0};
    return std::nullopt;
  }

  std::optional<Sym> logical(Operation *op, std::optional<Sym> x, std::optional<Sym> y) {
    if (!x || !y)
      return std::nullopt;
    if (x->kind != Sym::Bool || y->kind != Sym::Bool)
      return fail(op->getName().getStringRef().str() + " of non-booleans");
    EntrySet p = x->set, q = y->set;
    if (x->zeroKeys || y->zeroKeys)
      return fail("a padding mask that hides the visible keys");
    Value keys = x->keys ? x->keys : y->keys;
    if (x->keys && y->keys && x->keys != y->keys)
      return fail("two padding masks");
    if (keys && !isa<AndOp>(op))
      return fail(op->getName().getStringRef().str() + " of a padding mask");
    if (isa<XorOp>(op)) {
      if (q.kind == EntrySet::None)
        return boolSym(p);
      if (q.kind == EntrySet::All)
        return boolSym(normalize(complement(p)));
      if (p.kind == EntrySet::None)
        return boolSym(q);
      if (p.kind == EntrySet::All)
        return boolSym(normalize(complement(q)));
      return fail("tc.xor of two masks");
    }
    std::optional<EntrySet> r = combine(p, q, isa<AndOp>(op));
    if (!r)
      return std::nullopt;
    Sym out = boolSym(*r);
    out.keys = keys;
    return out;
  }

  /// and / or of two entry sets (or(p, q) = not(and(not p, not q))).
  std::optional<EntrySet> combine(EntrySet p, EntrySet q, bool isAnd) {
    if (!isAnd) {
      p = normalize(complement(p));
      q = normalize(complement(q));
    }
    std::optional<EntrySet> r;
    if (p.kind == EntrySet::All)
      r = q;
    else if (q.kind == EntrySet::All)
      r = p;
    else if (p.kind == EntrySet::None || q.kind == EntrySet::None)
      r = EntrySet{EntrySet::None, 0};
    else if (p.kind == q.kind)
      r = EntrySet{p.kind, p.kind == EntrySet::After ? std::max(p.t, q.t) : std::min(p.t, q.t)};
    else {
      // After(a) and NotAfter(b): a < j - i <= b, empty when b <= a.
      int64_t lo = p.kind == EntrySet::After ? p.t : q.t;
      int64_t hi = p.kind == EntrySet::After ? q.t : p.t;
      if (hi <= lo)
        r = EntrySet{EntrySet::None, 0};
    }
    if (!r) {
      fail("a band of the mask (a sliding window?)");
      return std::nullopt;
    }
    EntrySet e = normalize(*r);
    return isAnd ? e : normalize(complement(e));
  }

  std::optional<Sym> compare(Operation *op, std::optional<Sym> x, std::optional<Sym> y) {
    if (!x || !y)
      return std::nullopt;
    auto holds = [&](double l, double r) {
      if (isa<LeOp>(op)) return l <= r;
      if (isa<LtOp>(op)) return l < r;
      if (isa<GeOp>(op)) return l >= r;
      if (isa<GtOp>(op)) return l > r;
      if (isa<EqOp>(op)) return l == r;
      return l != r;
    };
    if (x->kind == Sym::Scalar && y->kind == Sym::Scalar)
      return boolSym({holds(x->value, y->value) ? EntrySet::All : EntrySet::None, 0});
    // attention_mask != 0: the padding mask itself (its keys are read as
    // "non-zero = visible"); == 0 its negation.
    if (isa<NeOp, EqOp>(op) &&
        ((x->kind == Sym::Bool && x->keys && x->set.kind == EntrySet::All && !x->zeroKeys &&
          y->kind == Sym::Scalar && y->value == 0) ||
         (y->kind == Sym::Bool && y->keys && y->set.kind == EntrySet::All && !y->zeroKeys &&
          x->kind == Sym::Scalar && x->value == 0))) {
      Sym r = x->kind == Sym::Bool ? *x : *y;
      r.zeroKeys = isa<EqOp>(op);
      return r;
    }
    // An index vector against a scalar: true everywhere or nowhere.
    if ((x->kind == Sym::Index && y->kind == Sym::Scalar) ||
        (x->kind == Sym::Scalar && y->kind == Sym::Index)) {
      const Sym &ix = x->kind == Sym::Index ? *x : *y;
      int64_t n = ix.query ? tq : tk;
      bool any = false, every = true;
      for (int64_t p = 0; p < n; ++p) {
        double u = ix.a + ix.s * static_cast<double>(p);
        bool h = x->kind == Sym::Index ? holds(u, y->value) : holds(x->value, u);
        any |= h;
        every &= h;
      }
      if (every || !any)
        return boolSym({every ? EntrySet::All : EntrySet::None, 0});
      return fail("a comparison of an index vector with a bound inside its range");
    }
    if (x->kind != Sym::Index || y->kind != Sym::Index || x->query == y->query)
      return fail("a comparison that is not between a key and a query index");
    if (isa<EqOp, NeOp>(op))
      return fail("an equality of key and query indices");
    // key = ak + s*j, query = aq + s*i, the same step s > 0, integral offset.
    bool keyFirst = !x->query;
    const Sym &k = keyFirst ? *x : *y, &q = keyFirst ? *y : *x;
    if (k.s != q.s || !(k.s > 0))
      return fail("key and query indices with different steps");
    double d = (q.a - k.a) / k.s; // key <= query  <=>  j - i <= d
    // Normalise to "key OP query".
    bool le = isa<LeOp>(op), lt = isa<LtOp>(op), ge = isa<GeOp>(op), gt = isa<GtOp>(op);
    if (!keyFirst) { // query OP key == key OP' query
      std::swap(le, ge);
      std::swap(lt, gt);
    }
    int64_t t;
    bool notAfter; // the result is true where j - i <= t (else where j - i > t)
    if (le || gt) {
      t = static_cast<int64_t>(std::floor(d));
      notAfter = le;
    } else { // lt: j - i < d  <=>  j - i <= ceil(d) - 1
      t = static_cast<int64_t>(std::ceil(d)) - 1;
      notAfter = lt;
    }
    return boolSym(normalize({notAfter ? EntrySet::NotAfter : EntrySet::After, t}));
  }

  std::optional<Sym> arith(Operation *op, std::optional<Sym> x, std::optional<Sym> y) {
    if (!x || !y)
      return std::nullopt;
    bool add = isa<AddOp>(op), sub = isa<SubOp>(op);
    if (x->kind == Sym::Scalar && y->kind == Sym::Scalar)
      return scalarSym(add ? x->value + y->value
                           : sub ? x->value - y->value : x->value * y->value);
    if (add && x->kind == Sym::FloatMask && y->kind == Sym::FloatMask) {
      // Two additive masks: visible where both are; a hidden entry holds the
      // sum of the fills, so the fill is known only when one mask hides
      // nothing.
      if (x->keys && y->keys)
        return fail("two padding masks");
      std::optional<EntrySet> both = combine(x->set, y->set, /*isAnd=*/true);
      if (!both)
        return std::nullopt;
      Sym s = *x;
      s.set = *both;
      s.keys = x->keys ? x->keys : y->keys;
      bool xHides = x->keys || x->set.kind != EntrySet::All;
      bool yHides = y->keys || y->set.kind != EntrySet::All;
      s.fill = xHides && yHides ? std::numeric_limits<double>::quiet_NaN()
                                : xHides ? x->fill : y->fill;
      return s;
    }
    if ((add || sub) && (x->kind == Sym::FloatMask || y->kind == Sym::FloatMask)) {
      const Sym &other = x->kind == Sym::FloatMask ? *y : *x;
      if (other.kind == Sym::Scalar && other.value == 0)
        return x->kind == Sym::FloatMask ? x : y;
    }
    const Sym *ix = x->kind == Sym::Index ? &*x : y->kind == Sym::Index ? &*y : nullptr;
    const Sym *sc = x->kind == Sym::Scalar ? &*x : y->kind == Sym::Scalar ? &*y : nullptr;
    if (ix && sc) {
      Sym s = *ix;
      if (add) {
        s.a += sc->value;
      } else if (sub) {
        if (x->kind == Sym::Index) {
          s.a -= sc->value;
        } else { // c - (a + s p)
          s.a = sc->value - ix->a;
          s.s = -ix->s;
        }
      } else {
        s.a *= sc->value;
        s.s *= sc->value;
      }
      return s;
    }
    if (ix && !sc && (add || sub) && x->kind == Sym::Index && y->kind == Sym::Index &&
        x->query == y->query) {
      Sym s = *x;
      s.a = add ? x->a + y->a : x->a - y->a;
      s.s = add ? x->s + y->s : x->s - y->s;
      return s;
    }
    return fail(op->getName().getStringRef().str() + " of mask values it cannot follow");
  }

  std::optional<Sym> select(std::optional<Sym> c, std::optional<Sym> x, std::optional<Sym> y) {
    if (!c || !x || !y)
      return std::nullopt;
    if (c->kind != Sym::Bool)
      return fail("a select on a non-boolean condition");
    if (c->zeroKeys)
      return fail("a padding mask that hides the visible keys");
    if (x->kind == Sym::Scalar && y->kind == Sym::Scalar) {
      Sym s;
      s.kind = Sym::FloatMask;
      if (x->value == 0 && y->value <= kMaskedBelow) {
        s.set = c->set; // 0 (visible) where the condition holds
        s.keys = c->keys;
        s.fill = y->value;
      } else if (x->value <= kMaskedBelow && y->value == 0) {
        if (c->keys)
          return fail("a padding mask that hides the keys it marks visible");
        s.set = normalize(complement(c->set));
        s.fill = x->value;
      } else if (x->value == y->value) {
        return scalarSym(x->value);
      } else {
        return fail("a select between values other than 0 and a very negative fill");
      }
      return s;
    }
    return fail("a select of mask values it cannot follow");
  }

  /// attention_mask[b, j] read as a [B, .., 1, Tk] value: a reshape of a
  /// [B, Tk] value, or a gather of its flattened form at b * Tk + j (how the
  /// exporters write attention_mask[batch_idx, kv_idx]).
  std::optional<Sym> padding(Operation *op) {
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    if (type.getRank() < 2 || type.getDimSize(0) != batch || lastTwo(type).first != 1 ||
        lastTwo(type).second != tk || type.getNumElements() != batch * tk)
      return std::nullopt;
    auto isKeys = [&](Value v) {
      auto t = cast<RankedTensorType>(v.getType());
      return t.getRank() == 2 && t.getDimSize(0) == batch && t.getDimSize(1) == tk &&
             isa<IntegerType>(t.getElementType());
    };
    Sym s;
    s.kind = Sym::Bool;
    s.set = {EntrySet::All, 0};
    auto elements = [](Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); };
    // Reshapes (of the whole [B * Tk] elements, in order) down to the source.
    auto peel = [&](Value v) {
      while (auto r = v.getDefiningOp<ReshapeOp>()) {
        if (isKeys(v) || elements(r.getInput()) != batch * tk)
          break;
        v = r.getInput();
      }
      return v;
    };
    Value src = peel(op->getResult(0));
    if (isKeys(src)) {
      s.keys = src;
      return s;
    }
    auto g = src.getDefiningOp<GatherOp>();
    if (!g || g.getAxis() != 0 || elements(g.getData()) != batch * tk)
      return std::nullopt;
    Value data = peel(g.getData());
    auto idx = g.getIndices().getDefiningOp<ConstantOp>();
    if (!isKeys(data) || !idx)
      return std::nullopt;
    auto dense = dyn_cast<DenseElementsAttr>(idx.getValue());
    if (!dense || dense.getNumElements() != batch * tk)
      return std::nullopt;
    int64_t k = 0;
    for (APInt x : dense.getValues<APInt>()) {
      if (x.getSExtValue() != k) // row-major [B, .., Tk]: b * Tk + j
        return std::nullopt;
      ++k;
    }
    s.keys = data;
    return s;
  }

  std::optional<Sym> reshape(ReshapeOp r, std::optional<Sym> x) {
    if (!x)
      return std::nullopt;
    auto in = cast<RankedTensorType>(r.getInput().getType());
    auto out = cast<RankedTensorType>(r.getType());
    auto li = lastTwo(in), lo = lastTwo(out);
    auto lead = [](RankedTensorType t) {
      int64_t n = 1;
      for (int64_t d = 0; d + 2 < t.getRank(); ++d)
        n *= t.getDimSize(d);
      return n;
    };
    if (li == lo && (in.getRank() < 2 || out.getRank() < 2 || lead(in) == lead(out)))
      return x;
    // A vector [n] (or [1, .., n]) becoming [.., n, 1] or [.., 1, n].
    if (x->kind == Sym::Index || x->kind == Sym::Scalar) {
      int64_t n = in.getNumElements();
      if (out.getNumElements() == n && (lo.first == n) != (lo.second == n)) {
        if (x->kind == Sym::Index)
          x->query = lo.first == n;
        return x;
      }
    }
    return fail("a reshape that moves the mask's last two axes");
  }

  std::optional<Sym> slice(SliceOp s, std::optional<Sym> x) {
    if (!x)
      return std::nullopt;
    auto in = cast<RankedTensorType>(s.getInput().getType());
    auto out = cast<RankedTensorType>(s.getType());
    int64_t r = in.getRank();
    ArrayRef<int64_t> starts = s.getStarts(), strides = s.getStrides();
    for (int64_t d = std::max<int64_t>(0, r - 2); d < r; ++d) {
      if (starts[d] == 0 && strides[d] == 1 && in.getDimSize(d) == out.getDimSize(d))
        continue;
      bool axisQ = d == r - 2;
      if (x->kind == Sym::Index && x->query == axisQ && in.getDimSize(d) > 1) {
        x->a += x->s * static_cast<double>(starts[d]);
        x->s *= static_cast<double>(strides[d]);
        continue;
      }
      if (x->kind == Sym::Scalar || in.getDimSize(d) == 1)
        continue;
      return fail("a slice of the mask's last two axes");
    }
    return x;
  }

  int64_t batch, tq, tk;
  llvm::DenseMap<Value, std::optional<Sym>> memo;
};

} // namespace

std::optional<MaskInfo> maskedEntries(Value mask, bool isBool, bool maskedWhen, int64_t batch,
                                      int64_t tq, int64_t tk, std::string *why) {
  Evaluator ev(batch, tq, tk);
  std::optional<Sym> s = ev.eval(mask);
  if (!s) {
    *why = ev.why.empty() ? "the mask is not understood" : ev.why;
    return std::nullopt;
  }
  MaskInfo info;
  info.keys = s->keys;
  info.fill = std::numeric_limits<double>::quiet_NaN();
  if (isBool) {
    if (s->kind != Sym::Bool) {
      *why = "the mask is not boolean";
      return std::nullopt;
    }
    if (s->keys && (maskedWhen || s->zeroKeys)) {
      *why = "a padding mask that hides the keys it marks visible";
      return std::nullopt;
    }
    info.masked = maskedWhen ? s->set : ev.normalize(complement(s->set));
    return info;
  }
  if (s->kind == Sym::FloatMask) {
    info.masked = ev.normalize(complement(s->set));
    info.fill = s->fill;
    return info;
  }
  if (s->kind == Sym::Scalar && s->value == 0) {
    info.masked = EntrySet{EntrySet::None, 0};
    return info;
  }
  *why = "the additive mask holds values other than 0 and a very negative fill";
  return std::nullopt;
}

} // namespace tc
