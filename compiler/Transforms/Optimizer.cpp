//===- Optimizer.cpp - tc-optimizer ----------------------------------------===//
//
// Builds the parameter update after @grad_step (made by tc-autodiff):
// @apply_step (gradients in, updates out; used with gradient accumulation)
// and @train_step (forward + backward + update in one function). The update
// is written in plain tc elementwise ops so that every backend runs it and
// the reference executor checks it; the formulas follow torch.optim.SGD and
// torch.optim.AdamW (single-tensor implementations) operation by operation.
// With loss-scaling (tc-compile --fp16) the step also does what
// torch.amp.GradScaler's unscale_/step/update do around optimizer.step().
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/LossScale.h"
#include "compiler/Transforms/Passes.h"
#include "runtime/src/schema/name_regex.h"

#include <cmath>
#include <cstdio>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

namespace tc {
#define GEN_PASS_DEF_TCOPTIMIZER
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;
using tc::kGrowthTrackerEntry;
using tc::kLossScaleEntry;
using tc::kSkippedStepsEntry;
using tc::kStateInitAttr;

namespace {

constexpr llvm::StringLiteral kName = "tc.name";
constexpr llvm::StringLiteral kStateAttr = "tc.optimizer_state";

/// Emits tc ops for the update. All scalars are rank-0 tensors of the
/// update's compute type (the parameter's, or f32 for narrower floats);
/// binary ops broadcast them.
class UpdateBuilder {
public:
  UpdateBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  Value scalar(Type elt, double v) {
    auto type = RankedTensorType::get({}, elt);
    Attribute a;
    if (auto ft = llvm::dyn_cast<FloatType>(elt))
      a = FloatAttr::get(ft, v);
    return tc::ConstantOp::create(b, loc, DenseElementsAttr::get(type, a));
  }
  Value add(Value x, Value y) { return tc::AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return tc::SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return tc::MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return tc::DivOp::create(b, loc, x, y); }
  Value pow(Value x, Value y) { return tc::PowOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return tc::MinOp::create(b, loc, x, y); }
  Value max(Value x, Value y) { return tc::MaxOp::create(b, loc, x, y); }
  Value sqrt(Value x) { return tc::SqrtOp::create(b, loc, x.getType(), x); }
  Value select(Value c, Value t, Value f) { return tc::SelectOp::create(b, loc, c, t, f); }
  Value eq(Value x, Value y) { return tc::EqOp::create(b, loc, x, y); }
  Value gt(Value x, Value y) { return tc::GtOp::create(b, loc, x, y); }
  Value land(Value x, Value y) { return tc::AndOp::create(b, loc, x, y); }
  Value lor(Value x, Value y) { return tc::OrOp::create(b, loc, x, y); }
  Value lnot(Value x) { return tc::NotOp::create(b, loc, x.getType(), x); }
  Value isInf(Value x) { return tc::IsInfOp::create(b, loc, boolLike(x), x); }
  Value isNan(Value x) { return tc::IsNanOp::create(b, loc, boolLike(x), x); }
  /// Sum of all elements of x*x, as a rank-0 tensor.
  Value sumSquares(Value x) {
    Value sq = mul(x, x);
    return tc::ReduceSumOp::create(b, loc, scalarOf(x), sq, allAxes(x), false);
  }
  /// inf or NaN, elementwise.
  Value nonFinite(Value x) {
    Value inf = isInf(x); // (one op per statement: C++ leaves the order of
    Value nan = isNan(x); // argument evaluation open)
    return lor(inf, nan);
  }
  /// 1 when some element of x is inf or NaN, else 0 (f32 rank-0): a flag per
  /// element and their maximum, one reduction per tensor.
  Value anyNonFinite(Value x) {
    Value flag = castTo(nonFinite(x), b.getF32Type());
    return tc::ReduceMaxOp::create(b, loc, scalarOf(flag), flag, allAxes(flag), false);
  }
  /// x converted to element type `elt` (a no-op when it already is).
  Value castTo(Value x, Type elt) {
    auto type = llvm::cast<RankedTensorType>(x.getType());
    if (type.getElementType() == elt)
      return x;
    return tc::CastOp::create(b, loc, type.clone(elt), x, true);
  }

  OpBuilder &b;
  Location loc;

private:
  static RankedTensorType scalarOf(Value x) {
    return RankedTensorType::get({}, llvm::cast<RankedTensorType>(x.getType()).getElementType());
  }
  static Type boolLike(Value x) {
    auto t = llvm::cast<RankedTensorType>(x.getType());
    return t.clone(IntegerType::get(t.getContext(), 1));
  }
  DenseI64ArrayAttr allAxes(Value x) {
    int64_t rank = llvm::cast<RankedTensorType>(x.getType()).getRank();
    SmallVector<int64_t> axes(rank);
    for (int64_t i = 0; i < rank; ++i)
      axes[i] = i;
    return b.getDenseI64ArrayAttr(axes);
  }
};

struct ParamInfo {
  std::string name;      // parameter name (without "grad:")
  RankedTensorType type; // the parameter's (and its gradient's) type
  bool decay = true;
};

struct OptimizerPass : tc::impl::TcOptimizerBase<OptimizerPass> {
  using TcOptimizerBase::TcOptimizerBase;

  /// Names of the state entries the optimizer keeps per parameter.
  SmallVector<std::string> stateNames() const {
    if (optimizer == "adamw")
      return {"exp_avg", "exp_avg_sq"};
    if (optimizer == "sgd" && momentum != 0.0)
      return {"momentum_buffer"};
    return {};
  }

  double decay() const {
    if (weightDecay >= 0)
      return weightDecay;
    return optimizer == "adamw" ? 0.01 : 0.0;
  }

  /// A read of the f32 scalar state entry `name` (kStateInitAttr `init`
  /// when it does not start at zero).
  Value scalarState(UpdateBuilder &u, StringRef name, double init = 0.0) {
    auto op = tc::ParameterOp::create(u.b, u.loc, RankedTensorType::get({}, u.b.getF32Type()),
                                      u.b.getStringAttr(name), UnitAttr());
    op->setAttr(kStateAttr, u.b.getUnitAttr());
    if (init != 0.0)
      op->setAttr(kStateInitAttr, u.b.getF64FloatAttr(init));
    return op.getResult();
  }

  /// Emits the update for every parameter: returns (name, value) pairs of
  /// the results after "grad_norm" (which comes first; with loss scaling
  /// "skipped" and "loss_scale" follow it).
  SmallVector<std::pair<std::string, Value>>
  buildUpdate(UpdateBuilder &u, ArrayRef<ParamInfo> params, ArrayRef<Value> gradsIn,
              Value lrIn, Value stepIn) {
    SmallVector<std::pair<std::string, Value>> results;
    SmallVector<Value> grads(gradsIn.begin(), gradsIn.end());
    Type f32 = u.b.getF32Type();
    // Loss scaling (GradScaler.unscale_): found_inf over the scaled
    // gradients, then each gradient times 1/scale in f32 (in its own type
    // when wider), so the norm and the clipping see the true gradients.
    Value scale, found, skip, skippedSteps;
    if (lossScaling) {
      scale = scalarState(u, kLossScaleEntry, lossScaleInit);
      for (Value g : grads) {
        Value f = u.anyNonFinite(g);
        found = found ? u.max(found, f) : f;
      }
      if (!found)
        found = u.scalar(f32, 0.0);
      skip = u.gt(found, u.scalar(f32, 0.0));
      Value inv = u.div(u.scalar(f32, 1.0), scale);
      for (Value &g : grads) {
        Type elt = llvm::cast<RankedTensorType>(g.getType()).getElementType();
        Type ut = elt.isF64() ? elt : f32;
        Value wide = u.castTo(g, ut);
        Value unscaled = u.mul(wide, u.castTo(inv, ut));
        g = u.castTo(unscaled, elt);
      }
      skippedSteps = scalarState(u, kSkippedStepsEntry);
    }
    // The global norm, accumulated in f32 at least (f64 params stay f64).
    Type normElt = f32;
    for (const ParamInfo &p : params)
      if (p.type.getElementType().isF64())
        normElt = p.type.getElementType();
    Value total;
    for (Value g : grads) {
      Value s = u.sumSquares(u.castTo(g, normElt));
      total = total ? u.add(total, s) : s;
    }
    if (!total)
      total = u.scalar(normElt, 0.0);
    Value norm = u.sqrt(total);
    results.push_back({"grad_norm", norm});
    if (lossScaling) {
      results.push_back({"skipped", found});
      results.push_back({"loss_scale", scale});
      // AdamW's step count: optimizer.step() calls, the skipped steps not
      // counted.
      stepIn = u.sub(u.castTo(stepIn, f32), skippedSteps);
    }
    // The values the entries hold before the step (what a skipped step
    // keeps), by entry name.
    llvm::StringMap<Value> stored;

    if (clipGradNorm > 0) {
      // torch: clip_coef = max_norm / (total_norm + 1e-6), clamped to 1.
      Value maxNorm = u.scalar(normElt, clipGradNorm), tiny = u.scalar(normElt, 1e-6);
      Value coef = u.div(maxNorm, u.add(norm, tiny));
      Value one = u.scalar(normElt, 1.0);
      coef = u.min(coef, one);
      for (size_t i = 0; i < grads.size(); ++i)
        grads[i] = u.mul(grads[i], u.castTo(coef, params[i].type.getElementType()));
    }

    double wd = decay();
    for (auto [i, p] : llvm::enumerate(params)) {
      Type elt = p.type.getElementType();
      // The update is computed in `ct` and rounded to the parameter's type at
      // the end, as torch's CPU kernels compute f16/bf16 tensors in float
      // ("opmath"): in bf16 itself beta2 = 0.999 would round to 1.0 (bias
      // correction 0, division by zero) and in f16 eps = 1e-8 to 0.
      Type ct = elt.isF32() || elt.isF64() ? elt : Type(u.b.getF32Type());
      Value lr = u.castTo(lrIn, ct), step = u.castTo(stepIn, ct);
      Value storedParam = tc::ParameterOp::create(u.b, u.loc, p.type, u.b.getStringAttr(p.name),
                                                  u.b.getUnitAttr());
      stored[p.name] = storedParam;
      Value param = u.castTo(storedParam, ct);
      auto state = [&](StringRef which) {
        std::string name = (which + ":" + p.name).str();
        auto op = tc::ParameterOp::create(u.b, u.loc, p.type, u.b.getStringAttr(name), UnitAttr());
        op->setAttr(kStateAttr, u.b.getUnitAttr());
        stored[name] = op.getResult();
        return u.castTo(op.getResult(), ct);
      };
      auto back = [&](Value x) { return u.castTo(x, elt); };
      Value g = u.castTo(grads[i], ct);
      bool useDecay = wd != 0.0 && p.decay;
      if (optimizer == "sgd") {
        if (useDecay) { // d_p = d_p.add(param, alpha=weight_decay)
          Value wdc = u.scalar(ct, wd);
          g = u.add(g, u.mul(param, wdc));
        }
        Value buf;
        if (momentum != 0.0) {
          // buf = buf * momentum + d_p (first step: buf = d_p, exact since
          // the buffer starts at zero and dampening is 0).
          Value prev = state("momentum_buffer");
          Value mu = u.scalar(ct, momentum);
          buf = u.add(u.mul(prev, mu), g);
          g = buf;
        }
        Value updated = u.sub(param, u.mul(lr, g));
        results.push_back({"update:" + p.name, back(updated)});
        if (buf)
          results.push_back({"update:momentum_buffer:" + p.name, back(buf)});
        continue;
      }
      // AdamW.
      // (Every op in its own statement: C++ leaves the order of argument
      // evaluation open, and the IR order should not depend on the compiler.)
      if (useDecay) { // param.mul_(1 - lr * weight_decay)
        Value one = u.scalar(ct, 1.0), wdc = u.scalar(ct, wd);
        Value lrwd = u.mul(lr, wdc);
        param = u.mul(param, u.sub(one, lrwd));
      }
      // exp_avg.lerp_(grad, 1 - beta1) == m + (1 - beta1) * (g - m)
      Value m = state("exp_avg");
      Value c1 = u.scalar(ct, 1.0 - beta1);
      Value diff = u.sub(g, m);
      m = u.add(m, u.mul(diff, c1));
      // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
      Value v = state("exp_avg_sq");
      Value b2 = u.scalar(ct, beta2), c2 = u.scalar(ct, 1.0 - beta2);
      Value vb = u.mul(v, b2);
      Value gg = u.mul(g, g);
      v = u.add(vb, u.mul(gg, c2));
      // bias_correction1/2 = 1 - beta^step; step_size = lr / bc1;
      // denom = sqrt(v) / sqrt(bc2) + eps; p -= step_size * m / denom
      Value one = u.scalar(ct, 1.0), b1c = u.scalar(ct, beta1), b2c = u.scalar(ct, beta2);
      Value bc1 = u.sub(one, u.pow(b1c, step));
      Value bc2 = u.sub(one, u.pow(b2c, step));
      Value stepSize = u.div(lr, bc1);
      Value sqrtV = u.sqrt(v);
      Value sqrtBc2 = u.sqrt(bc2);
      Value epsc = u.scalar(ct, eps);
      Value denom = u.add(u.div(sqrtV, sqrtBc2), epsc);
      Value ratio = u.div(m, denom);
      Value updated = u.sub(param, u.mul(stepSize, ratio));
      results.push_back({"update:" + p.name, back(updated)});
      results.push_back({"update:exp_avg:" + p.name, back(m)});
      results.push_back({"update:exp_avg_sq:" + p.name, back(v)});
    }
    if (lossScaling)
      finishLossScaling(u, stored, skip, found, scale, skippedSteps, results);
    return results;
  }

  /// A skipped step keeps every entry: each "update:<entry>" becomes
  /// select(skip, entry, update). Then the scale's own update, as
  /// torch._amp_update_scale_: on inf/NaN scale * 0.5 and tracker 0; else
  /// tracker + 1, and at the growth interval scale * 2 (unless that is
  /// inf) and tracker 0.
  void finishLossScaling(UpdateBuilder &u, const llvm::StringMap<Value> &stored, Value skip,
                         Value found, Value scale, Value skippedSteps,
                         SmallVector<std::pair<std::string, Value>> &results) {
    for (auto &[name, value] : results)
      if (StringRef(name).starts_with("update:"))
        value = u.select(skip, stored.lookup(StringRef(name).drop_front(7)), value);
    Type f32 = u.b.getF32Type();
    Value tracker = scalarState(u, kGrowthTrackerEntry);
    Value zero = u.scalar(f32, 0.0);
    Value successful = u.add(tracker, u.scalar(f32, 1.0));
    Value reached = u.eq(successful, u.scalar(f32, static_cast<double>(lossScaleGrowthInterval)));
    Value grown = u.mul(scale, u.scalar(f32, 2.0));
    Value grow = u.land(reached, u.lnot(u.nonFinite(grown)));
    Value cleanScale = u.select(grow, grown, scale);
    Value cleanTracker = u.select(reached, zero, successful);
    Value backedOff = u.mul(scale, u.scalar(f32, 0.5));
    results.push_back({("update:" + kLossScaleEntry).str(), u.select(skip, backedOff, cleanScale)});
    results.push_back({("update:" + kGrowthTrackerEntry).str(), u.select(skip, zero, cleanTracker)});
    results.push_back({("update:" + kSkippedStepsEntry).str(), u.add(skippedSteps, found)});
  }

  /// Creates `name` at the end of the module with the given arguments and
  /// results (types and tc.name attributes); `body` fills the entry block
  /// and returns the result values.
  template <typename Body>
  func::FuncOp makeFunction(ModuleOp module, StringRef name, ArrayRef<Type> argTypes,
                            ArrayRef<std::string> argNames, Body body) {
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    Location loc = module.getLoc();
    auto fn = func::FuncOp::create(b, loc, name, b.getFunctionType(argTypes, {}));
    for (auto [i, n] : llvm::enumerate(argNames))
      fn.setArgAttr(i, kName, b.getStringAttr(n));
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    SmallVector<std::pair<std::string, Value>> results = body(b, entry);
    SmallVector<Value> values;
    SmallVector<Type> types;
    for (auto &[n, v] : results) {
      values.push_back(v);
      types.push_back(v.getType());
    }
    func::ReturnOp::create(b, loc, values);
    fn.setType(b.getFunctionType(argTypes, types));
    for (auto [i, r] : llvm::enumerate(results))
      fn.setResultAttr(i, kName, b.getStringAttr(r.first));
    return fn;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (optimizer != "sgd" && optimizer != "adamw") {
      module.emitError() << "unknown optimizer '" << optimizer << "' (sgd or adamw)";
      return signalPassFailure();
    }
    auto grad = module.lookupSymbol<func::FuncOp>("grad_step");
    if (!grad) {
      module.emitError() << "no func.func @grad_step (run tc-autodiff first)";
      return signalPassFailure();
    }
    for (StringRef n : {"apply_step", "train_step"})
      if (module.lookupSymbol(n)) {
        module.emitError() << "the module already has @" << n;
        return signalPassFailure();
      }
    if (lossScaling && !(lossScaleInit > 0 && std::isfinite(lossScaleInit))) {
      module.emitError() << "loss-scale-init must be a finite number > 0, got " << lossScaleInit;
      return signalPassFailure();
    }
    if (lossScaling && (lossScaleGrowthInterval < 1 || lossScaleGrowthInterval > (1 << 24))) {
      // The tracker is an f32 counter: exact up to 2^24.
      module.emitError() << "loss-scale-growth-interval must be in [1, 2^24], got "
                         << lossScaleGrowthInterval;
      return signalPassFailure();
    }
    if (lossScaling) {
      // @grad_step's seed reads the scale (tc-autodiff loss-scaling): it
      // starts where the update's reads say.
      bool seeded = false;
      grad.walk([&](tc::ParameterOp p) {
        if (p.getName() != kLossScaleEntry)
          return;
        p->setAttr(kStateInitAttr, OpBuilder(p).getF64FloatAttr(lossScaleInit));
        seeded = true;
      });
      if (!seeded) {
        grad.emitError() << "loss-scaling: @grad_step does not read \"" << kLossScaleEntry
                         << "\" (run tc-autodiff with loss-scaling=true)";
        return signalPassFailure();
      }
    }
    std::vector<tc::rt::NameRegex> noDecayRe;
    for (const std::string &p : noDecay) {
      tc::rt::NameRegex re;
      tc::rt::Status st = tc::rt::NameRegex::compile(p, "--no-decay", &re);
      if (!st.isOk()) {
        module.emitError() << st.message();
        return signalPassFailure();
      }
      noDecayRe.push_back(std::move(re));
    }

    // The gradients: every result after the loss, up to the entries that
    // @grad_step updates itself (tc-quantize-fp8's delayed scaling), which
    // @train_step returns as they are.
    FunctionType gradType = grad.getFunctionType();
    if (gradType.getNumResults() < 1) {
      grad.emitError() << "@grad_step returns nothing (expected the loss first)";
      return signalPassFailure();
    }
    unsigned numGradResults = gradType.getNumResults();
    for (unsigned i = 1; i < gradType.getNumResults(); ++i) {
      auto nameAttr = grad.getResultAttrOfType<StringAttr>(i, kName);
      if (nameAttr && (nameAttr.getValue().starts_with("update:") ||
                       nameAttr.getValue() == "fp8_saturated")) {
        numGradResults = i;
        break;
      }
    }
    SmallVector<ParamInfo> params;
    for (unsigned i = 1; i < gradType.getNumResults(); ++i) {
      auto nameAttr = grad.getResultAttrOfType<StringAttr>(i, kName);
      if (i >= numGradResults) {
        if (!nameAttr || !(nameAttr.getValue().starts_with("update:") ||
                           nameAttr.getValue() == "fp8_saturated")) {
          grad.emitError() << "result #" << i
                           << " of @grad_step follows its state updates but is none";
          return signalPassFailure();
        }
        continue;
      }
      auto type = llvm::dyn_cast<RankedTensorType>(gradType.getResult(i));
      if (!nameAttr || !nameAttr.getValue().starts_with("grad:") || !type ||
          !llvm::isa<FloatType>(type.getElementType())) {
        grad.emitError() << "result #" << i
                         << " of @grad_step is not a floating gradient named \"grad:<parameter>\"";
        return signalPassFailure();
      }
      ParamInfo p;
      p.name = nameAttr.getValue().drop_front(5).str();
      p.type = type;
      p.decay = !llvm::any_of(noDecayRe, [&](tc::rt::NameRegex &re) { return re.search(p.name); });
      params.push_back(std::move(p));
    }
    // Each --no-decay regex must name a trained parameter; the groups are
    // reported (a tc-compile note), as torch users print param_groups.
    for (size_t r = 0; r < noDecayRe.size(); ++r) {
      int hits = 0;
      for (const ParamInfo &p : params)
        hits += noDecayRe[r].search(p.name);
      if (hits == 0) {
        module.emitError() << "--no-decay '" << noDecay[r]
                           << "' matches no trained parameter";
        return signalPassFailure();
      }
      if (report)
        module.emitRemark() << "--no-decay '" << noDecay[r] << "' matches " << hits
                            << " parameter" << (hits == 1 ? "" : "s");
    }
    if (report && decay() != 0) {
      int decayed = 0;
      for (const ParamInfo &p : params)
        decayed += p.decay;
      char rate[32];
      std::snprintf(rate, sizeof rate, "%g", decay());
      module.emitRemark() << "weight decay " << rate << " on " << decayed << " of "
                          << params.size() << " trained parameters, none on "
                          << params.size() - decayed;
    }
    auto f32Scalar = RankedTensorType::get({}, Float32Type::get(&getContext()));

    // @apply_step(grad:<p>..., lr, step)
    {
      SmallVector<Type> argTypes;
      SmallVector<std::string> argNames;
      for (const ParamInfo &p : params) {
        argTypes.push_back(p.type);
        argNames.push_back("grad:" + p.name);
      }
      argTypes.append({f32Scalar, f32Scalar});
      argNames.append({"lr", "step"});
      makeFunction(module, "apply_step", argTypes, argNames, [&](OpBuilder &b, Block *entry) {
        UpdateBuilder u(b, module.getLoc());
        SmallVector<Value> grads(entry->getArguments().drop_back(2));
        unsigned n = entry->getNumArguments();
        return buildUpdate(u, params, grads, entry->getArgument(n - 2), entry->getArgument(n - 1));
      });
    }

    // @train_step(<grad_step args>..., lr, step): grad_step's body, then the update.
    {
      SmallVector<Type> argTypes(gradType.getInputs());
      SmallVector<std::string> argNames;
      for (unsigned i = 0; i < gradType.getNumInputs(); ++i) {
        auto n = grad.getArgAttrOfType<StringAttr>(i, kName);
        argNames.push_back(n ? n.getValue().str() : "arg" + std::to_string(i));
      }
      argTypes.append({f32Scalar, f32Scalar});
      argNames.append({"lr", "step"});
      auto lossName = grad.getResultAttrOfType<StringAttr>(0, kName);
      makeFunction(module, "train_step", argTypes, argNames, [&](OpBuilder &b, Block *entry) {
        IRMapping map;
        Block &src = grad.getBody().front();
        for (auto [from, to] : llvm::zip(src.getArguments(), entry->getArguments()))
          map.map(from, to);
        SmallVector<Value> returned;
        for (Operation &op : src.without_terminator())
          b.clone(op, map);
        for (Value v : src.getTerminator()->getOperands())
          returned.push_back(map.lookupOrDefault(v));
        UpdateBuilder u(b, module.getLoc());
        unsigned n = entry->getNumArguments();
        SmallVector<std::pair<std::string, Value>> results;
        results.push_back({lossName ? lossName.getValue().str() : "loss", returned[0]});
        auto update = buildUpdate(u, params,
                                  ArrayRef<Value>(returned).slice(1, numGradResults - 1),
                                  entry->getArgument(n - 2), entry->getArgument(n - 1));
        results.append(update.begin(), update.end());
        for (unsigned i = numGradResults; i < returned.size(); ++i)
          results.push_back(
              {grad.getResultAttrOfType<StringAttr>(i, kName).getValue().str(), returned[i]});
        return results;
      });
    }
  }
};

} // namespace
