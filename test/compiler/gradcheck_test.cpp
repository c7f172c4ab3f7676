//===- gradcheck_test.cpp - finite-difference checks of tc-autodiff -------===//
//
// For every differentiable tc op: a small @infer whose trainable parameters
// feed the op, loss = sum(op(...) * W) with W a fixed random tensor (so every
// output element matters), random inputs away from kinks and poles. The
// pass adds @grad_step; both functions are lowered to the runtime program and
// run on the CPU reference executor in fp64, and every gradient element is
// compared with the central difference (L(x + h) - L(x - h)) / 2h of @infer.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "dialects/tc/Eval/Program.h"
#include "dialects/tc/IR/TcOps.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/cpu/executor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace mlir;

namespace {

/// A parameter of a test function and how to draw its values: uniform in
/// [lo, hi], or with `signedMag` a magnitude in [lo, hi] with a random sign
/// (to stay away from the kink at 0).
struct Param {
  std::string name;
  std::string type; // "tensor<2x3xf64>"
  double lo = -1, hi = 1;
  bool signedMag = false;
  bool trainable = true;
  /// Fixed values (zeros, ties) instead of random ones, when not empty.
  std::vector<double> values = {};
};

/// A function argument (labels, ids) with its value.
struct Arg {
  std::string decl; // "%ids: tensor<2x3xi64>"
  tc::rt::HostTensor value;
};

struct Case {
  std::vector<Param> params;
  std::string body;  // defines %y from the parameters (%<name>) and args
  std::string yType; // type of %y, an f64 tensor
  std::vector<Arg> args = {};
  /// Parameters whose gradient must be exactly zero (floor, sign, ...).
  std::vector<std::string> zeroGrads = {};
  double eps = 1e-6;
};

int64_t rankOf(const std::string &type) {
  // "tensor<2x3xf64>" -> 2; "tensor<f64>" -> 0.
  std::string inner = type.substr(7, type.size() - 8);
  return std::count(inner.begin(), inner.end(), 'x');
}

std::string elementOf(const std::string &type) {
  std::string inner = type.substr(7, type.size() - 8);
  size_t x = inner.rfind('x');
  return x == std::string::npos ? inner : inner.substr(x + 1);
}

std::string buildModule(const Case &c) {
  std::string s = "func.func @infer(";
  for (size_t i = 0; i < c.args.size(); ++i) {
    const std::string &d = c.args[i].decl;
    std::string name = d.substr(1, d.find(':') - 1);
    s += (i ? ", " : "") + d + " {tc.name = \"" + name + "\"}";
  }
  std::string elt = elementOf(c.yType);
  std::string lossType = "tensor<" + elt + ">";
  s += ") -> (" + c.yType + " {tc.name = \"y\"}, " + lossType +
       " {tc.name = \"loss\"}) {\n";
  for (const Param &p : c.params)
    s += "  %" + p.name + " = tc.parameter \"" + p.name + "\"" +
         (p.trainable ? " {trainable}" : "") + " : " + p.type + "\n";
  s += c.body + "\n";
  std::string axes;
  for (int64_t d = 0, r = rankOf(c.yType); d < r; ++d)
    axes += (d ? ", " : "") + std::to_string(d);
  s += "  %__w = tc.parameter \"__w\" : " + c.yType + "\n";
  s += "  %__m = tc.mul %y, %__w : " + c.yType + ", " + c.yType + " -> " + c.yType + "\n";
  s += "  %__l = tc.reduce_sum %__m {axes = array<i64" + (axes.empty() ? "" : ": " + axes) +
       ">} : " + c.yType + " -> " + lossType + "\n";
  s += "  return %y, %__l : " + c.yType + ", " + lossType + "\n}\n";
  return s;
}

/// Gradient elements compared with a central difference (reported at exit).
int64_t gCheckedElements = 0;
struct ReportCount : ::testing::Environment {
  void TearDown() override {
    std::printf("%lld gradient elements checked against finite differences\n",
                (long long)gCheckedElements);
  }
};
const auto *const gReport = ::testing::AddGlobalTestEnvironment(new ReportCount);

struct Lowered {
  tc::rt::Function infer, grad;
  std::vector<std::string> trainable;                 // grad output order
  std::map<std::string, tc::rt::TensorType> paramTypes;
};

class GradCheck {
public:
  GradCheck() {
    DialectRegistry registry;
    registry.insert<func::FuncDialect>();
    tc::registerTcDialect(registry);
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// Parses `text`, runs tc-autodiff (loss=`lossOption`) and lowers both
  /// functions. Diagnostics go to `diag`.
  bool prepare(const std::string &text, Lowered *out, std::string *diag,
               const std::string &lossOption = "loss") {
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
      *diag += d.str() + "\n";
      return success();
    });
    module = parseSourceString<ModuleOp>(text, &ctx);
    if (!module)
      return false;
    PassManager pm(&ctx);
    tc::TcAutodiffOptions opts;
    opts.loss = lossOption;
    pm.addPass(tc::createTcAutodiff(opts));
    if (failed(pm.run(*module)))
      return false;
    auto infer = module->lookupSymbol<func::FuncOp>("infer");
    auto grad = module->lookupSymbol<func::FuncOp>("grad_step");
    if (!infer || !grad)
      return false;
    std::string err;
    auto fi = tc::lowerToProgram(infer, "infer", &err);
    auto fg = tc::lowerToProgram(grad, "grad_step", &err);
    if (failed(fi) || failed(fg)) {
      *diag += err;
      return false;
    }
    out->infer = std::move(*fi);
    out->grad = std::move(*fg);
    infer.walk([&](tc::ParameterOp p) {
      out->paramTypes[p.getName().str()] = *tc::toTensorType(p.getType());
    });
    for (size_t i = 1; i < out->grad.outputNames.size(); ++i)
      out->trainable.push_back(out->grad.outputNames[i].substr(5));
    return true;
  }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
};

std::vector<tc::rt::HostTensor> argValues(const Case &c) {
  std::vector<tc::rt::HostTensor> v;
  for (const Arg &a : c.args)
    v.push_back(a.value);
  return v;
}

double runLoss(const tc::rt::Function &fn, const std::vector<tc::rt::HostTensor> &args,
               const std::map<std::string, tc::rt::HostTensor> &params) {
  std::vector<tc::rt::HostTensor> outs;
  tc::rt::ExecOptions opts;
  opts.precision = tc::rt::RefPrecision::F64;
  tc::rt::Artifact empty;
  tc::rt::Status st = tc::rt::runFunction(empty, fn, args, &outs, opts, &params);
  EXPECT_TRUE(st.isOk()) << st.toString();
  if (!st.isOk())
    return NAN;
  for (size_t i = 0; i < fn.outputNames.size(); ++i)
    if (fn.outputNames[i] == "loss")
      return tc::rt::hostTensorToDoubles(outs[i])[0];
  ADD_FAILURE() << "no loss output";
  return NAN;
}

/// Runs the whole check for one case.
void check(const Case &c, const std::string &what, uint32_t seed = 1) {
  SCOPED_TRACE(what);
  GradCheck gc;
  Lowered lw;
  std::string text = buildModule(c), diag;
  ASSERT_TRUE(gc.prepare(text, &lw, &diag)) << diag << "\n" << text;

  // Random parameter values (and the loss weights).
  std::mt19937 rng(seed);
  std::map<std::string, tc::rt::HostTensor> params;
  std::map<std::string, const Param *> spec;
  for (const Param &p : c.params)
    spec[p.name] = &p;
  for (auto &[name, type] : lw.paramTypes) {
    const Param *p = spec.count(name) ? spec[name] : nullptr;
    double lo = p ? p->lo : 0.5, hi = p ? p->hi : 1.5;
    bool sgn = p ? p->signedMag : true;
    std::uniform_real_distribution<double> u(lo, hi);
    std::vector<double> v(type.numElements());
    for (double &x : v) {
      x = u(rng);
      if (sgn && (rng() & 1))
        x = -x;
    }
    if (p && !p->values.empty())
      v = p->values;
    params[name] = tc::rt::makeHostTensor(type, v);
  }
  std::vector<tc::rt::HostTensor> args = argValues(c);

  // The gradients.
  std::vector<tc::rt::HostTensor> outs;
  tc::rt::ExecOptions opts;
  opts.precision = tc::rt::RefPrecision::F64;
  tc::rt::Artifact empty;
  tc::rt::Status st = tc::rt::runFunction(empty, lw.grad, args, &outs, opts, &params);
  ASSERT_TRUE(st.isOk()) << st.toString() << "\n" << text;
  double loss = runLoss(lw.infer, args, params);
  EXPECT_NEAR(tc::rt::hostTensorToDoubles(outs[0])[0], loss, 1e-12 * (1 + std::fabs(loss)));

  std::vector<std::string> expectedOrder;
  for (const Param &p : c.params)
    if (p.trainable)
      expectedOrder.push_back(p.name);
  ASSERT_EQ(lw.trainable, expectedOrder);

  for (size_t gi = 0; gi < lw.trainable.size(); ++gi) {
    const std::string &name = lw.trainable[gi];
    const tc::rt::HostTensor &grad = outs[gi + 1];
    ASSERT_EQ(grad.type.dtype, lw.paramTypes[name].dtype) << name;
    ASSERT_EQ(grad.type.shape, lw.paramTypes[name].shape) << name;
    std::vector<double> g = tc::rt::hostTensorToDoubles(grad);
    std::vector<double> x = tc::rt::hostTensorToDoubles(params[name]);
    bool zero = std::count(c.zeroGrads.begin(), c.zeroGrads.end(), name) > 0;
    double maxAbs = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      auto at = [&](double v) {
        std::vector<double> xv = x;
        xv[k] = v;
        auto p2 = params;
        p2[name] = tc::rt::makeHostTensor(params[name].type, xv);
        // The perturbation actually stored (f32 parameters round it).
        double stored = tc::rt::hostTensorToDoubles(p2[name])[k];
        return std::make_pair(runLoss(lw.infer, args, p2), stored);
      };
      auto [lp, xp] = at(x[k] + c.eps);
      auto [lm, xm] = at(x[k] - c.eps);
      double fd = (lp - lm) / (xp - xm);
      maxAbs = std::max(maxAbs, std::fabs(fd));
      if (zero) {
        EXPECT_EQ(g[k], 0.0) << name << "[" << k << "]";
        EXPECT_NEAR(fd, 0.0, 1e-9) << name << "[" << k << "]";
        continue;
      }
      double tol = 1e-6 + 1e-3 * std::max(std::fabs(fd), std::fabs(g[k]));
      ++gCheckedElements;
      EXPECT_NEAR(g[k], fd, tol) << name << "[" << k << "] of " << x.size()
                                 << " (x = " << x[k] << ")";
    }
    if (!zero) {
      EXPECT_GT(maxAbs, 1e-6) << "gradient of " << name << " is all zero: a weak test";
    }
  }
}

Param P(std::string name, std::string type, double lo = -1, double hi = 1,
        bool signedMag = false) {
  return Param{std::move(name), std::move(type), lo, hi, signedMag, true};
}
Param Const(std::string name, std::string type, double lo = -1, double hi = 1) {
  return Param{std::move(name), std::move(type), lo, hi, false, false};
}

const char *T23 = "tensor<2x3xf64>";

/// One unary op on a 2x3 parameter.
Case unary(const std::string &op, double lo, double hi, bool signedMag = false,
           const std::string &attrs = "") {
  return Case{{P("x", T23, lo, hi, signedMag)},
              "  %y = tc." + op + " %x " + attrs + " : tensor<2x3xf64>", T23};
}

//===----------------------------------------------------------------------===//
// Elementwise unary
//===----------------------------------------------------------------------===//

TEST(GradCheck, Unary) {
  struct U {
    const char *op;
    double lo, hi;
    bool signedMag;
  };
  const U ops[] = {
      {"neg", -1, 1, false},      {"abs", 0.1, 1, true},       {"relu", 0.1, 1, true},
      {"exp", -1, 1, false},      {"log", 0.2, 2, false},      {"sqrt", 0.2, 2, false},
      {"rsqrt", 0.2, 2, false},   {"reciprocal", 0.3, 2, true}, {"tanh", -1.5, 1.5, false},
      {"sigmoid", -2, 2, false},  {"erf", -1.5, 1.5, false},   {"silu", -2, 2, false},
      {"sin", -2, 2, false},      {"cos", -2, 2, false},       {"tan", -1, 1, false},
      {"asin", -0.8, 0.8, false}, {"acos", -0.8, 0.8, false},  {"atan", -2, 2, false},
      {"sinh", -1.5, 1.5, false}, {"cosh", -1.5, 1.5, false},  {"asinh", -2, 2, false},
      {"acosh", 1.2, 3, false},   {"atanh", -0.8, 0.8, false},
  };
  for (const U &u : ops)
    check(unary(u.op, u.lo, u.hi, u.signedMag), u.op);
}

TEST(GradCheck, Gelu) {
  check(unary("gelu", -2.5, 2.5), "gelu none");
  check(unary("gelu", -2.5, 2.5, false, "{approximate = \"tanh\"}"), "gelu tanh");
}

TEST(GradCheck, ZeroDerivative) {
  // The gradient through floor/ceil/round/sign is zero; x also reaches the
  // loss directly so that the check is not vacuous for the other path.
  for (const char *op : {"floor", "ceil", "round", "sign"}) {
    Case c{{P("x", T23, 1.1, 1.4, true), P("z", T23)},
           std::string("  %f = tc.") + op + " %x : tensor<2x3xf64>\n"
           "  %y = tc.mul %f, %z : tensor<2x3xf64>, tensor<2x3xf64> -> tensor<2x3xf64>",
           T23};
    c.zeroGrads = {"x"};
    check(c, op);
  }
}

TEST(GradCheck, CastFloatToFloat) {
  check(Case{{P("x", T23)},
             "  %c = tc.cast %x : tensor<2x3xf64> to tensor<2x3xf32>\n"
             "  %e = tc.exp %c : tensor<2x3xf32>\n"
             "  %y = tc.cast %e : tensor<2x3xf32> to tensor<2x3xf64>",
             T23},
        "cast f64->f32->f64");
}

TEST(GradCheck, NonDifferentiablePaths) {
  // Integer casts, comparisons and argmax carry no gradient; the mask and
  // the index only select.
  check(Case{{P("x", T23, 0.2, 2, true)},
             "  %i = tc.cast %x : tensor<2x3xf64> to tensor<2x3xi64>\n"
             "  %fi = tc.cast %i : tensor<2x3xi64> to tensor<2x3xf64>\n"
             "  %zero = tc.constant dense<0.0> : tensor<f64>\n"
             "  %m = tc.gt %x, %zero : tensor<2x3xf64>, tensor<f64> -> tensor<2x3xi1>\n"
             "  %s = tc.select %m, %x, %fi : tensor<2x3xi1>, tensor<2x3xf64>, tensor<2x3xf64> -> tensor<2x3xf64>\n"
             "  %a = tc.argmax %x {axis = 1 : i64, keepdims = true} : tensor<2x3xf64> -> tensor<2x1xi64>\n"
             "  %af = tc.cast %a : tensor<2x1xi64> to tensor<2x1xf64>\n"
             "  %one = tc.constant dense<1.0> : tensor<f64>\n"
             "  %af1 = tc.add %af, %one : tensor<2x1xf64>, tensor<f64> -> tensor<2x1xf64>\n"
             "  %y = tc.mul %s, %af1 : tensor<2x3xf64>, tensor<2x1xf64> -> tensor<2x3xf64>",
             T23},
        "non-differentiable");
}

//===----------------------------------------------------------------------===//
// Elementwise binary with broadcasting, select
//===----------------------------------------------------------------------===//

Case binary(const std::string &op, const std::string &ta, const std::string &tb,
            const std::string &ty, double alo = -1, double ahi = 1, double blo = -1,
            double bhi = 1, bool aSigned = false, bool bSigned = false,
            const std::string &attrs = "") {
  return Case{{P("a", ta, alo, ahi, aSigned), P("b", tb, blo, bhi, bSigned)},
              "  %y = tc." + op + " %a, %b " + attrs + " : " + ta + ", " + tb + " -> " + ty,
              ty};
}

TEST(GradCheck, BinaryBroadcast) {
  struct Shapes {
    const char *a, *b, *y;
  };
  const Shapes shapes[] = {
      {"tensor<2x3xf64>", "tensor<2x3xf64>", "tensor<2x3xf64>"},
      {"tensor<2x3xf64>", "tensor<3xf64>", "tensor<2x3xf64>"},
      {"tensor<2x1xf64>", "tensor<1x3xf64>", "tensor<2x3xf64>"},
      {"tensor<f64>", "tensor<2x3xf64>", "tensor<2x3xf64>"},
      {"tensor<2x1x3xf64>", "tensor<4x1xf64>", "tensor<2x4x3xf64>"},
  };
  for (const Shapes &s : shapes) {
    std::string sh = std::string(s.a) + " , " + s.b;
    check(binary("add", s.a, s.b, s.y), "add " + sh);
    check(binary("sub", s.a, s.b, s.y), "sub " + sh);
    check(binary("mul", s.a, s.b, s.y), "mul " + sh);
    check(binary("div", s.a, s.b, s.y, -1, 1, 0.5, 2, false, true), "div " + sh);
    check(binary("pow", s.a, s.b, s.y, 0.5, 2, -1.5, 1.5), "pow " + sh);
    check(binary("max", s.a, s.b, s.y), "max " + sh);
    check(binary("min", s.a, s.b, s.y), "min " + sh);
    check(binary("rem", s.a, s.b, s.y, 0.1, 3, 0.7, 1.3, true, true, "{fmod = true}"),
          "rem fmod " + sh);
    check(binary("rem", s.a, s.b, s.y, 0.1, 3, 0.7, 1.3, true, true, "{fmod = false}"),
          "rem python " + sh);
  }
}

TEST(GradCheck, SameValueTwice) {
  // x * x: one value used by both operands of one op.
  check(Case{{P("x", T23)},
             "  %y = tc.mul %x, %x : tensor<2x3xf64>, tensor<2x3xf64> -> tensor<2x3xf64>",
             T23},
        "x*x");
}

TEST(GradCheck, Select) {
  check(Case{{P("a", T23), P("b", "tensor<3xf64>")},
             "  %c = tc.constant dense<[[true, false, true], [false, false, true]]> : tensor<2x3xi1>\n"
             "  %y = tc.select %c, %a, %b : tensor<2x3xi1>, tensor<2x3xf64>, tensor<3xf64> -> tensor<2x3xf64>",
             T23},
        "select");
  check(Case{{P("a", "tensor<f64>"), P("b", "tensor<2x1xf64>")},
             "  %c = tc.constant dense<[[true, false, true], [false, true, true]]> : tensor<2x3xi1>\n"
             "  %y = tc.select %c, %a, %b : tensor<2x3xi1>, tensor<f64>, tensor<2x1xf64> -> tensor<2x3xf64>",
             T23},
        "select broadcast branches");
}

//===----------------------------------------------------------------------===//
// Reductions, scans, softmax, norms, losses
//===----------------------------------------------------------------------===//

TEST(GradCheck, Reductions) {
  const char *T234 = "tensor<2x3x4xf64>";
  struct R {
    const char *axes;
    bool keep;
    const char *ty;
  };
  const R forms[] = {
      {"1", false, "tensor<2x4xf64>"},
      {"0, 2", true, "tensor<1x3x1xf64>"},
      {"0, 1, 2", false, "tensor<f64>"},
      {"2", true, "tensor<2x3x1xf64>"},
  };
  for (const char *op : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                         "reduce_prod"})
    for (const R &r : forms) {
      Case c{{P("x", T234, 0.5, 1.5, true)},
             std::string("  %y = tc.") + op + " %x {axes = array<i64: " + r.axes +
                 ">, keepdims = " + (r.keep ? "true" : "false") + "} : " + T234 + " -> " +
                 r.ty,
             r.ty};
      check(c, std::string(op) + " axes " + r.axes + (r.keep ? " keepdims" : ""));
    }
}

TEST(GradCheck, ReduceProdWithZeros) {
  // Rows with no zero, one zero and two zeros: the gradient is the product
  // of the others (a polynomial, so the central difference is exact enough).
  Param x = P("x", "tensor<3x4xf64>");
  x.values = {0.5, -1.5, 2, 0.75, 0.5, 0, 2, -1.25, 0, 1.5, 0, 3};
  for (const char *keep : {"false", "true"}) {
    std::string ty = std::string(keep) == "true" ? "tensor<3x1xf64>" : "tensor<3xf64>";
    check(Case{{x},
               std::string("  %y = tc.reduce_prod %x {axes = array<i64: 1>, keepdims = ") +
                   keep + "} : tensor<3x4xf64> -> " + ty,
               ty},
          std::string("reduce_prod with zeros keepdims ") + keep);
  }
  Param all = P("x", "tensor<2x3xf64>");
  all.values = {0, 1, 2, 3, 0.5, -1};
  check(Case{{all}, "  %y = tc.reduce_prod %x {axes = array<i64: 0, 1>} : tensor<2x3xf64> -> tensor<f64>",
             "tensor<f64>"},
        "reduce_prod over everything with one zero");
}

TEST(GradCheck, TiesSplitTheGradient) {
  // At a tie of two, max/min give each side half, which is what the
  // central difference sees.
  Param a = P("a", T23), b = P("b", T23);
  a.values = {0.5, -1, 2, 0.25, 3, -2};
  b.values = {0.5, 1, 2, -0.25, 3, -2.5};
  check(Case{{a, b}, "  %y = tc.max %a, %b : tensor<2x3xf64>, tensor<2x3xf64> -> tensor<2x3xf64>", T23},
        "max with ties");
  check(Case{{a, b}, "  %y = tc.min %a, %b : tensor<2x3xf64>, tensor<2x3xf64> -> tensor<2x3xf64>", T23},
        "min with ties");
  Param r = P("x", T23);
  r.values = {1, 3, 3, -2, 0.5, -2};
  check(Case{{r}, "  %y = tc.reduce_max %x {axes = array<i64: 1>} : tensor<2x3xf64> -> tensor<2xf64>",
             "tensor<2xf64>"},
        "reduce_max with a tie of two");
  check(Case{{r}, "  %y = tc.reduce_min %x {axes = array<i64: 1>} : tensor<2x3xf64> -> tensor<2xf64>",
             "tensor<2xf64>"},
        "reduce_min with a tie of two");
}

TEST(GradCheck, CumSum) {
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true})
      for (int axis : {0, 1}) {
        std::string attrs = "{axis = " + std::to_string(axis) + " : i64, exclusive = " +
                            (exclusive ? "true" : "false") +
                            ", reverse = " + (reverse ? "true" : "false") + "}";
        check(Case{{P("x", "tensor<3x4xf64>")},
                   "  %y = tc.cumsum %x " + attrs + " : tensor<3x4xf64>", "tensor<3x4xf64>"},
              "cumsum " + attrs);
      }
}

TEST(GradCheck, Softmax) {
  for (int axis : {0, 1, 2}) {
    std::string a = "{axis = " + std::to_string(axis) + " : i64}";
    check(Case{{P("x", "tensor<2x3x4xf64>", -2, 2)},
               "  %y = tc.softmax %x " + a + " : tensor<2x3x4xf64>", "tensor<2x3x4xf64>"},
          "softmax " + a);
    check(Case{{P("x", "tensor<2x3x4xf64>", -2, 2)},
               "  %y = tc.log_softmax %x " + a + " : tensor<2x3x4xf64>", "tensor<2x3x4xf64>"},
          "log_softmax " + a);
  }
}

TEST(GradCheck, LayerNorm) {
  const char *T = "tensor<2x3x4xf64>";
  check(Case{{P("x", T, -2, 2), P("g", "tensor<4xf64>", 0.5, 1.5), P("b", "tensor<4xf64>")},
             "  %y = tc.layer_norm %x, scale %g, bias %b {axis = 2 : i64, epsilon = 1.0e-05 : f64}"
             " : (tensor<2x3x4xf64>, tensor<4xf64>, tensor<4xf64>) -> tensor<2x3x4xf64>",
             T},
        "layer_norm axis 2, scale and bias");
  check(Case{{P("x", T, -2, 2), P("g", "tensor<3x4xf64>", 0.5, 1.5)},
             "  %y = tc.layer_norm %x, scale %g {axis = 1 : i64, epsilon = 1.0e-03 : f64}"
             " : (tensor<2x3x4xf64>, tensor<3x4xf64>) -> tensor<2x3x4xf64>",
             T},
        "layer_norm axis 1, scale only");
  check(Case{{P("x", T, -2, 2), P("g", T, 0.5, 1.5), P("b", T)},
             "  %y = tc.layer_norm %x, scale %g, bias %b {axis = 0 : i64, epsilon = 1.0e-05 : f64}"
             " : (tensor<2x3x4xf64>, tensor<2x3x4xf64>, tensor<2x3x4xf64>) -> tensor<2x3x4xf64>",
             T},
        "layer_norm axis 0");
  check(Case{{P("x", T, -2, 2)},
             "  %y = tc.layer_norm %x {axis = 2 : i64, epsilon = 1.0e-05 : f64}"
             " : (tensor<2x3x4xf64>) -> tensor<2x3x4xf64>",
             T},
        "layer_norm plain");
}

TEST(GradCheck, RmsNorm) {
  const char *T = "tensor<2x3x4xf64>";
  check(Case{{P("x", T, -2, 2), P("g", "tensor<4xf64>", 0.5, 1.5)},
             "  %y = tc.rms_norm %x, scale %g {axis = 2 : i64, epsilon = 1.0e-06 : f64}"
             " : (tensor<2x3x4xf64>, tensor<4xf64>) -> tensor<2x3x4xf64>",
             T},
        "rms_norm axis 2");
  check(Case{{P("x", T, -2, 2), P("g", "tensor<3x4xf64>", 0.5, 1.5)},
             "  %y = tc.rms_norm %x, scale %g {axis = 1 : i64, epsilon = 1.0e-06 : f64}"
             " : (tensor<2x3x4xf64>, tensor<3x4xf64>) -> tensor<2x3x4xf64>",
             T},
        "rms_norm axis 1");
  check(Case{{P("x", T, -2, 2)},
             "  %y = tc.rms_norm %x {axis = 0 : i64, epsilon = 1.0e-06 : f64}"
             " : (tensor<2x3x4xf64>) -> tensor<2x3x4xf64>",
             T},
        "rms_norm axis 0, no scale");
}

TEST(GradCheck, Losses) {
  // Row 2 is ignored (-100 by default, 3 with ignore_index = 3).
  for (const char *op : {"cross_entropy", "nll_loss"})
    for (const char *red : {"mean", "sum", "none"})
      for (bool weighted : {false, true})
        for (int64_t ignore : {-100, 3}) {
          std::string ty = std::string(red) == "none" ? "tensor<5xf64>" : "tensor<f64>";
          std::string labels = ignore == 3 ? "[0, 4, 3, 1, 1]" : "[0, 4, -100, 1, 1]";
          std::string body = "  %lab = tc.constant dense<" + labels + "> : tensor<5xi64>\n";
          std::string attrs = "{ignore_index = " + std::to_string(ignore) +
                              " : i64, reduction = \"" + red + "\"}";
          std::vector<Param> params{P("x", "tensor<5x6xf64>", -2, 2)};
          if (weighted) {
            params.push_back(Const("cw", "tensor<6xf64>", 0.5, 2));
            body += "  %y = tc." + std::string(op) + " %x, %lab, weight %cw " + attrs +
                    " : (tensor<5x6xf64>, tensor<5xi64>, tensor<6xf64>) -> " + ty;
          } else {
            body += "  %y = tc." + std::string(op) + " %x, %lab " + attrs +
                    " : (tensor<5x6xf64>, tensor<5xi64>) -> " + ty;
          }
          check(Case{params, body, ty}, std::string(op) + " " + red +
                                             (weighted ? " weighted" : "") + " ignore " +
                                             std::to_string(ignore));
        }
}

//===----------------------------------------------------------------------===//
// Contractions, gathers, shape ops
//===----------------------------------------------------------------------===//

TEST(GradCheck, Matmul) {
  struct M {
    const char *a, *b, *y;
    bool tl, tr;
  };
  const M forms[] = {
      {"tensor<2x3xf64>", "tensor<3x4xf64>", "tensor<2x4xf64>", false, false},
      {"tensor<3x2xf64>", "tensor<3x4xf64>", "tensor<2x4xf64>", true, false},
      {"tensor<2x3xf64>", "tensor<4x3xf64>", "tensor<2x4xf64>", false, true},
      {"tensor<3x2xf64>", "tensor<4x3xf64>", "tensor<2x4xf64>", true, true},
      // batched, rhs broadcast over the batch
      {"tensor<2x2x3xf64>", "tensor<3x4xf64>", "tensor<2x2x4xf64>", false, false},
      // batch dims broadcast both ways
      {"tensor<1x3x2x3xf64>", "tensor<2x1x4x3xf64>", "tensor<2x3x2x4xf64>", false, true},
      {"tensor<2x1x3x2xf64>", "tensor<3x3x4xf64>", "tensor<2x3x2x4xf64>", true, false},
      {"tensor<3x2xf64>", "tensor<2x4x3xf64>", "tensor<2x2x4xf64>", true, true},
  };
  for (const M &m : forms) {
    std::string attrs = std::string("{transpose_lhs = ") + (m.tl ? "true" : "false") +
                        ", transpose_rhs = " + (m.tr ? "true" : "false") + "}";
    check(Case{{P("a", m.a), P("b", m.b)},
               std::string("  %y = tc.matmul %a, %b ") + attrs + " : " + m.a + ", " + m.b +
                   " -> " + m.y,
               m.y},
          std::string("matmul ") + m.a + " " + m.b + " " + attrs);
  }
}

TEST(GradCheck, Attention) {
  struct A {
    const char *q, *k, *v, *y, *lse;
    bool causal;
  };
  const A forms[] = {
      {"tensor<2x2x5x3xf64>", "tensor<2x2x5x3xf64>", "tensor<2x2x5x4xf64>",
       "tensor<2x2x5x4xf64>", "tensor<2x2x5xf64>", true},
      {"tensor<2x2x5x3xf64>", "tensor<2x2x5x3xf64>", "tensor<2x2x5x4xf64>",
       "tensor<2x2x5x4xf64>", "tensor<2x2x5xf64>", false},
      // grouped-query: 4 query heads share 2 key/value heads
      {"tensor<1x4x4x3xf64>", "tensor<1x2x4x3xf64>", "tensor<1x2x4x3xf64>",
       "tensor<1x4x4x3xf64>", "tensor<1x4x4xf64>", true},
      // fewer queries than keys (causal: top-left aligned), one shared head
      {"tensor<1x3x2x3xf64>", "tensor<1x1x6x3xf64>", "tensor<1x1x6x2xf64>",
       "tensor<1x3x2x2xf64>", "tensor<1x3x2xf64>", true},
      {"tensor<1x2x3x2xf64>", "tensor<1x2x6x2xf64>", "tensor<1x2x6x2xf64>",
       "tensor<1x2x3x2xf64>", "tensor<1x2x3xf64>", false},
  };
  for (const A &a : forms) {
    std::string attrs =
        std::string("{scale = 0.7 : f64, causal = ") + (a.causal ? "true" : "false") + "}";
    check(Case{{P("q", a.q, -1.5, 1.5), P("k", a.k, -1.5, 1.5), P("v", a.v)},
               std::string("  %y, %lse = tc.attention %q, %k, %v ") + attrs + " : (" + a.q +
                   ", " + a.k + ", " + a.v + ") -> (" + a.y + ", " + a.lse + ")",
               a.y},
          std::string("attention ") + a.q + " " + a.k + " " + a.v + " " + attrs);
  }
}

TEST(GradCheck, AttentionKeyMask) {
  // A padding mask: batch 0 left-padded (keys 0, 1 hidden: with causal its
  // queries 0 and 1 see no key at all), batch 1 right-padded (key 4 hidden).
  // A -inf fill skips hidden scores (fully hidden rows give 0); a finite one
  // adds to them as an exported additive mask does (those rows average).
  const char *q = "tensor<2x2x5x3xf64>", *k = "tensor<2x1x5x3xf64>", *v = "tensor<2x1x5x4xf64>",
             *y = "tensor<2x2x5x4xf64>", *lse = "tensor<2x2x5xf64>";
  // (-1000, not finfo.min: in f64 a huge fill would absorb the finite-difference
  // steps of the fully hidden rows.)
  for (const char *fill : {"", ", mask_fill = -1.000000e+03 : f64"})
    for (const char *causal : {"true", "false"}) {
      std::string attrs = std::string("{scale = 0.7 : f64, causal = ") + causal + fill + "}";
      check(Case{{P("q", q, -1.5, 1.5), P("k", k, -1.5, 1.5), P("v", v)},
                 std::string("  %m = tc.constant dense<[[false, false, true, true, true], "
                             "[true, true, true, true, false]]> : tensor<2x5xi1>\n") +
                     "  %y, %lse = tc.attention %q, %k, %v key_mask %m " + attrs + " : (" + q +
                     ", " + k + ", " + v + ", tensor<2x5xi1>) -> (" + y + ", " + lse + ")",
                 y},
            std::string("attention with a key mask ") + attrs);
    }
}

TEST(GradCheck, Rotary) {
  // x [2, 2, 3, 6], rotary dim 4 (partial: features 4, 5 pass through), the
  // rotate_half and the interleaved layout; cos/sin [2, 3, 2] constants.
  const char *tables =
      "  %c = tc.constant dense<[[[0.9, 0.5], [0.2, -0.7], [1.0, 0.0]], "
      "[[-0.4, 0.3], [0.6, 0.8], [0.1, -1.0]]]> : tensor<2x3x2xf64>\n"
      "  %s = tc.constant dense<[[[0.4, -0.8], [0.97, 0.7], [0.0, 1.0]], "
      "[[0.9, 0.95], [-0.8, 0.6], [1.0, 0.1]]]> : tensor<2x3x2xf64>\n";
  for (const char *inter : {"false", "true"})
    check(Case{{P("x", "tensor<2x2x3x6xf64>")},
               std::string(tables) + "  %y = tc.rotary %x, %c, %s {interleaved = " + inter +
                   "} : (tensor<2x2x3x6xf64>, tensor<2x3x2xf64>, tensor<2x3x2xf64>) -> "
                   "tensor<2x2x3x6xf64>",
               "tensor<2x2x3x6xf64>"},
          std::string("rotary interleaved = ") + inter);
  // Trained tables (a TorchScript export's inv_freq is an initializer):
  // the gradients of cos and sin too, both layouts.
  for (const char *inter : {"false", "true"})
    check(Case{{P("x", "tensor<2x2x3x6xf64>"), P("c", "tensor<2x3x2xf64>", -1.0, 1.0),
                P("s", "tensor<2x3x2xf64>", -1.0, 1.0)},
               std::string("  %y = tc.rotary %x, %c, %s {interleaved = ") + inter +
                   "} : (tensor<2x2x3x6xf64>, tensor<2x3x2xf64>, tensor<2x3x2xf64>) -> "
                   "tensor<2x2x3x6xf64>",
               "tensor<2x2x3x6xf64>"},
          std::string("rotary with trained tables, interleaved = ") + inter);
}

TEST(GradCheck, Gather) {
  check(Case{{P("w", "tensor<5x3xf64>")},
             "  %ids = tc.constant dense<[[1, 4, 1, 0], [-1, 2, 1, 3]]> : tensor<2x4xi64>\n"
             "  %y = tc.gather %w, %ids {axis = 0 : i64} : tensor<5x3xf64>, tensor<2x4xi64> -> tensor<2x4x3xf64>",
             "tensor<2x4x3xf64>"},
        "gather axis 0 with repeats and a negative index");
  check(Case{{P("w", "tensor<2x5x3xf64>")},
             "  %ids = tc.constant dense<[4, 0, 4]> : tensor<3xi32>\n"
             "  %y = tc.gather %w, %ids {axis = 1 : i64} : tensor<2x5x3xf64>, tensor<3xi32> -> tensor<2x3x3xf64>",
             "tensor<2x3x3xf64>"},
        "gather axis 1");
  Case c{{P("w", "tensor<5x3xf64>")},
         "  %y = tc.gather %w, %ids {axis = 0 : i64} : tensor<5x3xf64>, tensor<4xi64> -> tensor<4x3xf64>",
         "tensor<4x3xf64>"};
  c.args = {Arg{"%ids: tensor<4xi64>",
                tc::rt::makeHostTensorInts({tc::rt::DType::I64, {4}}, {3, 3, 0, 2})}};
  check(c, "gather with ids as an argument");
}

TEST(GradCheck, ShapeOps) {
  check(Case{{P("x", "tensor<2x3x4xf64>")},
             "  %y = tc.reshape %x : tensor<2x3x4xf64> to tensor<6x4xf64>", "tensor<6x4xf64>"},
        "reshape");
  check(Case{{P("x", "tensor<2x3x4xf64>")},
             "  %y = tc.transpose %x {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xf64> -> tensor<4x2x3xf64>",
             "tensor<4x2x3xf64>"},
        "transpose");
  check(Case{{P("x", "tensor<3xf64>")},
             "  %y = tc.broadcast %x : tensor<3xf64> to tensor<2x3xf64>", T23},
        "broadcast 3 -> 2x3");
  check(Case{{P("x", "tensor<2x1xf64>")},
             "  %y = tc.broadcast %x : tensor<2x1xf64> to tensor<3x2x4xf64>",
             "tensor<3x2x4xf64>"},
        "broadcast 2x1 -> 3x2x4");
  check(Case{{P("x", "tensor<6x5xf64>")},
             "  %y = tc.slice %x {starts = array<i64: 1, 0>, strides = array<i64: 2, 1>} : tensor<6x5xf64> to tensor<3x4xf64>",
             "tensor<3x4xf64>"},
        "slice positive strides");
  check(Case{{P("x", "tensor<8x7xf64>")},
             "  %y = tc.slice %x {starts = array<i64: 7, 6>, strides = array<i64: -2, -3>} : tensor<8x7xf64> to tensor<4x3xf64>",
             "tensor<4x3xf64>"},
        "slice negative strides");
  check(Case{{P("a", "tensor<2x3xf64>"), Const("c", "tensor<2x1xf64>"), P("b", "tensor<2x2xf64>")},
             "  %y = tc.concat %a, %c, %b, %a {axis = 1 : i64} : tensor<2x3xf64>, tensor<2x1xf64>, tensor<2x2xf64>, tensor<2x3xf64> -> tensor<2x9xf64>",
             "tensor<2x9xf64>"},
        "concat (one input twice, one constant)");
  check(Case{{P("x", "tensor<2x6xf64>")},
             "  %s:3 = tc.split %x {axis = 1 : i64} : tensor<2x6xf64> -> tensor<2x1xf64>, tensor<2x3xf64>, tensor<2x2xf64>\n"
             "  %y = tc.mul %s#1, %s#0 : tensor<2x3xf64>, tensor<2x1xf64> -> tensor<2x3xf64>",
             T23},
        "split (one result unused)");
  check(Case{{P("x", T23)},
             "  %y = tc.pad %x {low = array<i64: 1, 0>, high = array<i64: 2, 3>, value = 0.5 : f64} : tensor<2x3xf64> -> tensor<5x6xf64>",
             "tensor<5x6xf64>"},
        "pad constant");
}

TEST(GradCheck, GradientOpsAsForwardOps) {
  check(Case{{P("u", "tensor<2x4x3xf64>")},
             "  %ids = tc.constant dense<[[1, 4, 1, 0], [-1, 2, 1, 3]]> : tensor<2x4xi64>\n"
             "  %y = tc.scatter_add %u, %ids {axis = 0 : i64} : tensor<2x4x3xf64>, tensor<2x4xi64> -> tensor<5x3xf64>",
             "tensor<5x3xf64>"},
        "scatter_add");
  check(Case{{P("x", "tensor<4x3xf64>")},
             "  %y = tc.insert_slice %x {starts = array<i64: 7, 0>, strides = array<i64: -2, 3>} : tensor<4x3xf64> to tensor<8x7xf64>",
             "tensor<8x7xf64>"},
        "insert_slice");
}

TEST(GradCheck, ConstantsAndNonTrainableParameters) {
  check(Case{{Const("c", T23), P("x", T23)},
             "  %k = tc.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf64>\n"
             "  %a = tc.mul %x, %k : tensor<2x3xf64>, tensor<2x3xf64> -> tensor<2x3xf64>\n"
             "  %y = tc.add %a, %c : tensor<2x3xf64>, tensor<2x3xf64> -> tensor<2x3xf64>",
             T23},
        "constants");
}

//===----------------------------------------------------------------------===//
// End to end: a tiny language model with a tied embedding
//===----------------------------------------------------------------------===//

/// ids [2x3] -> wte gather -> layer_norm -> MLP (gelu) + residual ->
/// rms_norm -> lm_head = wte^T (tied) -> cross_entropy (one ignored label).
std::string tinyLm(const std::string &elt, bool tied) {
  auto t = [&](const std::string &shape) {
    return "tensor<" + (shape.empty() ? "" : shape + "x") + elt + ">";
  };
  std::string head = tied ? "wte" : "head";
  std::string s;
  s += "func.func @infer(%ids: tensor<2x3xi64> {tc.name = \"ids\"}, %labels: tensor<6xi64> "
       "{tc.name = \"labels\"}) -> (" + t("6x7") + " {tc.name = \"logits\"}, " + t("") +
       " {tc.name = \"loss\"}) {\n";
  s += "  %wte = tc.parameter \"wte\" {trainable} : " + t("7x4") + "\n";
  s += "  %e = tc.gather %wte, %ids {axis = 0 : i64} : " + t("7x4") + ", tensor<2x3xi64> -> " + t("2x3x4") + "\n";
  s += "  %g = tc.parameter \"ln.g\" {trainable} : " + t("4") + "\n";
  s += "  %b = tc.parameter \"ln.b\" {trainable} : " + t("4") + "\n";
  s += "  %n = tc.layer_norm %e, scale %g, bias %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (" +
       t("2x3x4") + ", " + t("4") + ", " + t("4") + ") -> " + t("2x3x4") + "\n";
  s += "  %w1 = tc.parameter \"fc1.w\" {trainable} : " + t("4x8") + "\n";
  s += "  %b1 = tc.parameter \"fc1.b\" {trainable} : " + t("8") + "\n";
  s += "  %h = tc.matmul %n, %w1 : " + t("2x3x4") + ", " + t("4x8") + " -> " + t("2x3x8") + "\n";
  s += "  %hb = tc.add %h, %b1 : " + t("2x3x8") + ", " + t("8") + " -> " + t("2x3x8") + "\n";
  s += "  %a = tc.gelu %hb : " + t("2x3x8") + "\n";
  s += "  %w2 = tc.parameter \"fc2.w\" {trainable} : " + t("8x4") + "\n";
  s += "  %o = tc.matmul %a, %w2 : " + t("2x3x8") + ", " + t("8x4") + " -> " + t("2x3x4") + "\n";
  s += "  %r = tc.add %o, %e : " + t("2x3x4") + ", " + t("2x3x4") + " -> " + t("2x3x4") + "\n";
  s += "  %q = tc.rms_norm %r {axis = 2 : i64, epsilon = 1.0e-06 : f64} : (" + t("2x3x4") + ") -> " + t("2x3x4") + "\n";
  s += "  %f = tc.reshape %q : " + t("2x3x4") + " to " + t("6x4") + "\n";
  s += "  %head = tc.parameter \"" + head + "\" {trainable} : " + t("7x4") + "\n";
  s += "  %logits = tc.matmul %f, %head {transpose_rhs = true} : " + t("6x4") + ", " + t("7x4") + " -> " + t("6x7") + "\n";
  s += "  %l = tc.cross_entropy %logits, %labels : (" + t("6x7") + ", tensor<6xi64>) -> " + t("") + "\n";
  s += "  return %logits, %l : " + t("6x7") + ", " + t("") + "\n}\n";
  return s;
}

struct LmRun {
  std::vector<std::string> names;
  std::vector<tc::rt::HostTensor> grads;
  std::map<std::string, tc::rt::HostTensor> params;
  Lowered lw;
};

void runLm(const std::string &elt, bool tied, LmRun *out, bool fdCheck) {
  GradCheck gc;
  std::string diag, text = tinyLm(elt, tied);
  ASSERT_TRUE(gc.prepare(text, &out->lw, &diag)) << diag << "\n" << text;
  // Values exactly representable in f32, so that the f32 and f64 models
  // see the same parameters; "head" (untied) starts equal to "wte".
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  for (auto &[name, type] : out->lw.paramTypes) {
    if (name == "head")
      continue;
    std::vector<double> v(type.numElements());
    for (double &x : v)
      x = static_cast<float>(u(rng));
    out->params[name] = tc::rt::makeHostTensor(type, v);
  }
  if (out->lw.paramTypes.count("head"))
    out->params["head"] = out->params["wte"];
  std::vector<tc::rt::HostTensor> args{
      tc::rt::makeHostTensorInts({tc::rt::DType::I64, {2, 3}}, {1, 6, 1, 0, 3, 5}),
      tc::rt::makeHostTensorInts({tc::rt::DType::I64, {6}}, {6, 1, 0, -100, 5, 2})};
  std::vector<tc::rt::HostTensor> outs;
  tc::rt::ExecOptions opts;
  opts.precision = tc::rt::RefPrecision::F64;
  tc::rt::Artifact empty;
  tc::rt::Status st = tc::rt::runFunction(empty, out->lw.grad, args, &outs, opts, &out->params);
  ASSERT_TRUE(st.isOk()) << st.toString();
  out->names = out->lw.grad.outputNames;
  out->grads = outs;
  if (!fdCheck)
    return;
  double eps = 1e-6;
  for (size_t gi = 1; gi < outs.size(); ++gi) {
    std::string name = out->names[gi].substr(5);
    std::vector<double> g = tc::rt::hostTensorToDoubles(outs[gi]);
    std::vector<double> x = tc::rt::hostTensorToDoubles(out->params[name]);
    for (size_t k = 0; k < x.size(); ++k) {
      auto at = [&](double v) {
        std::vector<double> xv = x;
        xv[k] = v;
        auto p2 = out->params;
        p2[name] = tc::rt::makeHostTensor(out->params[name].type, xv);
        return std::make_pair(runLoss(out->lw.infer, args, p2),
                              tc::rt::hostTensorToDoubles(p2[name])[k]);
      };
      auto [lp, xp] = at(x[k] + eps);
      auto [lm, xm] = at(x[k] - eps);
      double fd = (lp - lm) / (xp - xm);
      double tol = 1e-6 + 1e-3 * std::max(std::fabs(fd), std::fabs(g[k]));
      ++gCheckedElements;
      EXPECT_NEAR(g[k], fd, tol) << elt << " " << name << "[" << k << "]";
    }
  }
}

TEST(GradCheck, TinyLmTiedEmbedding) {
  LmRun run;
  runLm("f64", /*tied=*/true, &run, /*fdCheck=*/true);
  std::vector<std::string> want{"loss", "grad:wte", "grad:ln.g", "grad:ln.b",
                                "grad:fc1.w", "grad:fc1.b", "grad:fc2.w"};
  EXPECT_EQ(run.names, want);
  // The same model in f32: gradients in f32 (outputs rounded to f32, the
  // reference computing in double), equal to the f64 ones up to rounding.
  // (Finite differences need a loss output in f64, hence the comparison.)
  LmRun run32;
  runLm("f32", true, &run32, /*fdCheck=*/false);
  ASSERT_EQ(run32.names, want);
  for (size_t i = 1; i < run32.grads.size(); ++i) {
    EXPECT_EQ(run32.grads[i].type.dtype, tc::rt::DType::F32) << want[i];
    std::vector<double> a = tc::rt::hostTensorToDoubles(run32.grads[i]);
    std::vector<double> b = tc::rt::hostTensorToDoubles(run.grads[i]);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k)
      EXPECT_NEAR(a[k], b[k], 1e-6 + 1e-5 * std::fabs(b[k])) << want[i] << "[" << k << "]";
  }
}

TEST(GradCheck, TiedGradientIsTheSumOfTheUntiedOnes) {
  LmRun tied, untied;
  runLm("f64", true, &tied, false);
  runLm("f64", false, &untied, false);
  ASSERT_EQ(untied.names[1], "grad:wte");
  ASSERT_EQ(untied.names.back(), "grad:head");
  std::vector<double> t = tc::rt::hostTensorToDoubles(tied.grads[1]);
  std::vector<double> a = tc::rt::hostTensorToDoubles(untied.grads[1]);
  std::vector<double> b = tc::rt::hostTensorToDoubles(untied.grads.back());
  ASSERT_EQ(t.size(), a.size());
  for (size_t k = 0; k < t.size(); ++k)
    EXPECT_NEAR(t[k], a[k] + b[k], 1e-12) << k;
}

//===----------------------------------------------------------------------===//
// Pass behaviour
//===----------------------------------------------------------------------===//

TEST(Autodiff, LossOptionAndInferUnchanged) {
  GradCheck gc;
  Lowered lw;
  std::string diag;
  std::string text =
      "func.func @infer() -> (tensor<f64> {tc.name = \"a\"}, tensor<f64> {tc.name = \"b\"}) {\n"
      "  %x = tc.parameter \"x\" {trainable} : tensor<3xf64>\n"
      "  %s = tc.reduce_sum %x {axes = array<i64: 0>} : tensor<3xf64> -> tensor<f64>\n"
      "  %m = tc.mul %s, %s : tensor<f64>, tensor<f64> -> tensor<f64>\n"
      "  return %s, %m : tensor<f64>, tensor<f64>\n}\n";
  EXPECT_FALSE(gc.prepare(text, &lw, &diag, /*lossOption=*/""));
  EXPECT_NE(diag.find("2 floating-point scalar results"), std::string::npos) << diag;
  diag.clear();
  ASSERT_TRUE(gc.prepare(text, &lw, &diag, "b")) << diag;
  EXPECT_EQ(lw.grad.outputNames, (std::vector<std::string>{"b", "grad:x"}));
  EXPECT_EQ(lw.infer.outputNames, (std::vector<std::string>{"a", "b"}));
  std::map<std::string, tc::rt::HostTensor> params{
      {"x", tc::rt::makeHostTensor({tc::rt::DType::F64, {3}}, {1, 2, 3})}};
  std::vector<tc::rt::HostTensor> outs;
  tc::rt::Artifact empty;
  ASSERT_TRUE(tc::rt::runFunction(empty, lw.grad, {}, &outs, {}, &params).isOk());
  // d(s^2)/dx = 2 s = 12 everywhere.
  EXPECT_EQ(tc::rt::hostTensorToDoubles(outs[1]), (std::vector<double>{12, 12, 12}));
}

TEST(Autodiff, ParameterNotReachingTheLossGetsZeros) {
  GradCheck gc;
  Lowered lw;
  std::string diag;
  std::string text =
      "func.func @infer() -> (tensor<f64> {tc.name = \"loss\"}, tensor<2xf32> {tc.name = \"other\"}) {\n"
      "  %x = tc.parameter \"x\" {trainable} : tensor<3xf64>\n"
      "  %u = tc.parameter \"unused\" {trainable} : tensor<2xf32>\n"
      "  %s = tc.reduce_sum %x {axes = array<i64: 0>} : tensor<3xf64> -> tensor<f64>\n"
      "  %o = tc.exp %u : tensor<2xf32>\n"
      "  return %s, %o : tensor<f64>, tensor<2xf32>\n}\n";
  ASSERT_TRUE(gc.prepare(text, &lw, &diag, /*lossOption=*/"")) << diag;
  EXPECT_EQ(lw.grad.outputNames, (std::vector<std::string>{"loss", "grad:x", "grad:unused"}));
  // The exp of the unused output is not copied into @grad_step.
  for (const tc::rt::Op &op : lw.grad.ops)
    EXPECT_NE(op.name, "tc.exp");
  std::map<std::string, tc::rt::HostTensor> params{
      {"x", tc::rt::makeHostTensor({tc::rt::DType::F64, {3}}, {1, 2, 3})},
      {"unused", tc::rt::makeHostTensor({tc::rt::DType::F32, {2}}, {1, 2})}};
  std::vector<tc::rt::HostTensor> outs;
  tc::rt::Artifact empty;
  ASSERT_TRUE(tc::rt::runFunction(empty, lw.grad, {}, &outs, {}, &params).isOk());
  EXPECT_EQ(outs[2].type.dtype, tc::rt::DType::F32);
  EXPECT_EQ(tc::rt::hostTensorToDoubles(outs[2]), (std::vector<double>{0, 0}));
}

} // namespace

// tc-recognize-rotary: HF's written-out rotary (x * cos + rotate_half(x) *
// sin, the tables cos/sin(concat(f, f))), full and GPT-NeoX's partial (the
// first 4 of 6 features), computes what the one tc.rotary it becomes
// computes: both programs on the CPU reference, in f64, on the same input.
TEST(RecognizeRotary, MatchesTheWrittenOutForm) {
  for (int r : {6, 4}) {
    SCOPED_TRACE("rotary features " + std::to_string(r) + " of 6");
    std::string R = std::to_string(r), H = std::to_string(r / 2);
    std::string xr = r == 6 ? "%x" : "%xr";
    std::string text =
        "func.func @infer(%x: tensor<2x2x3x6xf64> {tc.name = \"x\"}) -> "
        "(tensor<2x2x3x6xf64> {tc.name = \"y\"}) {\n"
        "  %f = tc.constant dense<[[[[0.9, 0.5, 0.3], [0.2, -0.7, 1.1], [1.0, 0.0, -0.4]]]]> : "
        "tensor<1x1x3x3xf64>\n"
        "  %fh = tc.slice %f {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : "
        "tensor<1x1x3x3xf64> to tensor<1x1x3x" + H + "xf64>\n"
        "  %e = tc.concat %fh, %fh {axis = 3 : i64} : tensor<1x1x3x" + H + "xf64>, tensor<1x1x3x" + H +
        "xf64> -> tensor<1x1x3x" + R + "xf64>\n"
        "  %c = tc.cos %e : tensor<1x1x3x" + R + "xf64>\n"
        "  %s = tc.sin %e : tensor<1x1x3x" + R + "xf64>\n" +
        (r == 6 ? std::string()
                : "  %xr = tc.slice %x {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : "
                  "tensor<2x2x3x6xf64> to tensor<2x2x3x4xf64>\n"
                  "  %xp = tc.slice %x {starts = array<i64: 0, 0, 0, 4>, strides = array<i64: 1, 1, 1, 1>} : "
                  "tensor<2x2x3x6xf64> to tensor<2x2x3x2xf64>\n") +
        "  %x1 = tc.slice " + xr + " {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : "
        "tensor<2x2x3x" + R + "xf64> to tensor<2x2x3x" + H + "xf64>\n"
        "  %x2 = tc.slice " + xr + " {starts = array<i64: 0, 0, 0, " + H +
        ">, strides = array<i64: 1, 1, 1, 1>} : tensor<2x2x3x" + R + "xf64> to tensor<2x2x3x" + H + "xf64>\n"
        "  %n = tc.neg %x2 : tensor<2x2x3x" + H + "xf64>\n"
        "  %rot = tc.concat %n, %x1 {axis = 3 : i64} : tensor<2x2x3x" + H + "xf64>, tensor<2x2x3x" + H +
        "xf64> -> tensor<2x2x3x" + R + "xf64>\n"
        "  %a = tc.mul %c, " + xr + " : tensor<1x1x3x" + R + "xf64>, tensor<2x2x3x" + R +
        "xf64> -> tensor<2x2x3x" + R + "xf64>\n"
        "  %b = tc.mul %rot, %s : tensor<2x2x3x" + R + "xf64>, tensor<1x1x3x" + R +
        "xf64> -> tensor<2x2x3x" + R + "xf64>\n"
        "  %y = tc.add %b, %a : tensor<2x2x3x" + R + "xf64>, tensor<2x2x3x" + R + "xf64> -> tensor<2x2x3x" +
        R + "xf64>\n" +
        (r == 6 ? std::string("  return %y : tensor<2x2x3x6xf64>\n}\n")
                : "  %yc = tc.concat %y, %xp {axis = 3 : i64} : tensor<2x2x3x4xf64>, tensor<2x2x3x2xf64> -> "
                  "tensor<2x2x3x6xf64>\n  return %yc : tensor<2x2x3x6xf64>\n}\n");
    MLIRContext ctx;
    ctx.loadDialect<tc::TCDialect, func::FuncDialect>();
    OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(text, &ctx);
    ASSERT_TRUE(m);
    std::vector<double> xs(72);
    for (size_t i = 0; i < xs.size(); ++i)
      xs[i] = std::sin(0.37 * static_cast<double>(i)) + 0.1;
    tc::rt::HostTensor x = tc::rt::makeHostTensor({tc::rt::DType::F64, {2, 2, 3, 6}}, xs);
    auto run = [&](ModuleOp mod) {
      std::string err;
      auto fn = tc::lowerToProgram(mod.lookupSymbol<func::FuncOp>("infer"), "infer", &err);
      EXPECT_TRUE(succeeded(fn)) << err;
      std::vector<tc::rt::HostTensor> outs;
      tc::rt::Artifact empty;
      tc::rt::ExecOptions opts;
      opts.precision = tc::rt::RefPrecision::F64;
      EXPECT_TRUE(tc::rt::runFunction(empty, *fn, {x}, &outs, opts, nullptr).isOk());
      return outs.empty() ? std::vector<double>() : tc::rt::hostTensorToDoubles(outs[0]);
    };
    std::vector<double> want = run(*m);
    PassManager pm(&ctx);
    pm.addNestedPass<func::FuncOp>(tc::createTcRecognizeRotary());
    ASSERT_TRUE(succeeded(pm.run(*m)));
    int rotaries = 0, concats = 0;
    m->walk([&](tc::RotaryOp) { ++rotaries; });
    // Only the table's concat (batch 1) is left: rotate_half's and the
    // partial rotary's (batch 2) are gone.
    m->walk([&](tc::ConcatOp c) {
      concats += llvm::cast<RankedTensorType>(c.getResult().getType()).getDimSize(0) == 2;
    });
    EXPECT_EQ(rotaries, 1);
    EXPECT_EQ(concats, 0);
    std::vector<double> got = run(*m);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-12) << "element " << i;
    if (r == 4) { // the features past R are copied
      EXPECT_EQ(got[4], xs[4]);
      EXPECT_EQ(got[5], xs[5]);
    }
  }
}
