//===- Optimizer.cpp - tc-optimizer ----------------------------------------===//
//
// Builds the parameter update after @grad_step (made by tc-autodiff):
// @apply_step (gradients in, updates out; used with gradient accumulation)
// and @train_step (forward + backward + update in one function). The update
// is written in plain tc elementwise ops so that every backend runs it and
// the reference executor checks it; the formulas follow torch.optim.SGD and
// torch.optim.AdamW (single-tensor implementations) operation by operation.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "runtime/src/schema/name_regex.h"

#include <cstdio>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

namespace tc {
#define GEN_PASS_DEF_TCOPTIMIZER
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;

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
  Value sqrt(Value x) { return tc::SqrtOp::create(b, loc, x.getType(), x); }
  /// Sum of all elements of x*x, as a rank-0 tensor.
  Value sumSquares(Value x) {
    auto type = llvm::cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> axes(type.getRank());
    for (int64_t i = 0; i < type.getRank(); ++i)
      axes[i] = i;
    Value sq = mul(x, x);
    return tc::ReduceSumOp::create(b, loc, RankedTensorType::get({}, type.getElementType()),
                                   sq, b.getDenseI64ArrayAttr(axes), false);
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

  /// Emits the update for every parameter: returns (name, value) pairs of
  /// the results after "grad_norm" (which comes first).
  SmallVector<std::pair<std::string, Value>>
  buildUpdate(UpdateBuilder &u, ArrayRef<ParamInfo> params, ArrayRef<Value> gradsIn,
              Value lrIn, Value stepIn) {
    SmallVector<std::pair<std::string, Value>> results;
    // The global norm, accumulated in f32 at least (f64 params stay f64).
    Type normElt = u.b.getF32Type();
    for (const ParamInfo &p : params)
      if (p.type.getElementType().isF64())
        normElt = p.type.getElementType();
    Value total;
    for (Value g : gradsIn) {
      Value s = u.sumSquares(u.castTo(g, normElt));
      total = total ? u.add(total, s) : s;
    }
    if (!total)
      total = u.scalar(normElt, 0.0);
    Value norm = u.sqrt(total);
    results.push_back({"grad_norm", norm});

    SmallVector<Value> grads(gradsIn.begin(), gradsIn.end());
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
      Value param = u.castTo(tc::ParameterOp::create(u.b, u.loc, p.type, u.b.getStringAttr(p.name),
                                                     u.b.getUnitAttr()),
                             ct);
      auto state = [&](StringRef which) {
        auto op = tc::ParameterOp::create(u.b, u.loc, p.type,
                                          u.b.getStringAttr(which + ":" + p.name), UnitAttr());
        op->setAttr(kStateAttr, u.b.getUnitAttr());
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
    return results;
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

    // The gradients: every result after the loss.
    FunctionType gradType = grad.getFunctionType();
    if (gradType.getNumResults() < 1) {
      grad.emitError() << "@grad_step returns nothing (expected the loss first)";
      return signalPassFailure();
    }
    SmallVector<ParamInfo> params;
    for (unsigned i = 1; i < gradType.getNumResults(); ++i) {
      auto nameAttr = grad.getResultAttrOfType<StringAttr>(i, kName);
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
        auto update = buildUpdate(u, params, ArrayRef<Value>(returned).drop_front(),
                                  entry->getArgument(n - 2), entry->getArgument(n - 1));
        results.append(update.begin(), update.end());
        return results;
      });
    }
  }
};

} // namespace
