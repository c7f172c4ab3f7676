//===- elementwise.cpp - unary, binary and ternary elementwise ops --------===//
//
// Unary math, gelu, predicates, cast; binary arithmetic, comparisons and
// logic with numpy broadcasting; select. Floats compute in double (the
// executor rounds results to their declared type); integers in int64 with
// two's complement wrap-around (ui64 as its bit pattern, with unsigned
// division, remainder, comparison, min and max).
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <limits>

#include "runtime/src/base/float_format.h"
#include "runtime/src/cpu/kernel.h"

namespace tc::rt::cpu {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

[[noreturn]] void divisionByZero(const char *what) {
  throw KernelError{StatusCode::InvalidArgument,
                    std::string("integer ") + what + " by zero"};
}

/// Order-preserving map of ui64 bit patterns onto int64.
inline int64_t flipSign(int64_t v) { return static_cast<int64_t>(static_cast<uint64_t>(v) ^ (uint64_t{1} << 63)); }

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

void checkUnary(KernelContext &c) {
  c.expectOperands(1);
  c.expectResults(1);
  c.expectSameDType(*c.in[0], *c.out[0], "result");
  c.expectShape(*c.out[0], c.in[0]->shape(), "result");
}

template <typename F> void unaryFloat(KernelContext &c, F f) {
  checkUnary(c);
  const Buffer &x = *c.in[0];
  Buffer &y = *c.out[0];
  c.expectFloat(x, "input");
  for (int64_t k = 0, n = x.size(); k < n; ++k)
    y.f[k] = f(x.f[k]);
}

template <typename FF, typename FI> void unaryNumeric(KernelContext &c, FF ff, FI fi) {
  checkUnary(c);
  const Buffer &x = *c.in[0];
  Buffer &y = *c.out[0];
  if (x.isFloat) {
    for (int64_t k = 0, n = x.size(); k < n; ++k)
      y.f[k] = ff(x.f[k]);
  } else {
    bool isUnsigned = dtypeIsUnsigned(x.dtype()) || x.dtype() == DType::I1;
    for (int64_t k = 0, n = x.size(); k < n; ++k)
      y.i[k] = fi(x.i[k], isUnsigned);
  }
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

#define TC_UNARY_FLOAT(NAME, EXPR)                                             \
  t["tc." NAME] = [](KernelContext &c) {                                       \
    unaryFloat(c, [](double x) { return EXPR; });                              \
  }

void registerUnary(KernelTable &t) {
  t["tc.neg"] = [](KernelContext &c) {
    unaryNumeric(c, [](double x) { return -x; },
                 [](int64_t x, bool) { return static_cast<int64_t>(0 - static_cast<uint64_t>(x)); });
  };
  t["tc.abs"] = [](KernelContext &c) {
    unaryNumeric(c, [](double x) { return std::fabs(x); },
                 [](int64_t x, bool u) {
                   return (u || x >= 0) ? x : static_cast<int64_t>(0 - static_cast<uint64_t>(x));
                 });
  };
  t["tc.sign"] = [](KernelContext &c) {
    unaryNumeric(c,
                 [](double x) { return std::isnan(x) ? x : (x > 0) - (x < 0) + 0.0; },
                 [](int64_t x, bool u) -> int64_t { return u ? (x != 0) : (x > 0) - (x < 0); });
  };
  t["tc.relu"] = [](KernelContext &c) {
    unaryNumeric(c, [](double x) { return std::isnan(x) ? x : (x > 0 ? x : 0.0); },
                 [](int64_t x, bool u) { return (u || x > 0) ? x : 0; });
  };
  TC_UNARY_FLOAT("exp", std::exp(x));
  TC_UNARY_FLOAT("log", std::log(x));
  TC_UNARY_FLOAT("sqrt", std::sqrt(x));
  TC_UNARY_FLOAT("rsqrt", 1.0 / std::sqrt(x));
  TC_UNARY_FLOAT("reciprocal", 1.0 / x);
  TC_UNARY_FLOAT("tanh", std::tanh(x));
  TC_UNARY_FLOAT("sigmoid", sigmoid(x));
  TC_UNARY_FLOAT("erf", std::erf(x));
  TC_UNARY_FLOAT("silu", x * sigmoid(x));
  TC_UNARY_FLOAT("sin", std::sin(x));
  TC_UNARY_FLOAT("cos", std::cos(x));
  TC_UNARY_FLOAT("tan", std::tan(x));
  TC_UNARY_FLOAT("asin", std::asin(x));
  TC_UNARY_FLOAT("acos", std::acos(x));
  TC_UNARY_FLOAT("atan", std::atan(x));
  TC_UNARY_FLOAT("sinh", std::sinh(x));
  TC_UNARY_FLOAT("cosh", std::cosh(x));
  TC_UNARY_FLOAT("asinh", std::asinh(x));
  TC_UNARY_FLOAT("acosh", std::acosh(x));
  TC_UNARY_FLOAT("atanh", std::atanh(x));
  TC_UNARY_FLOAT("floor", std::floor(x));
  TC_UNARY_FLOAT("ceil", std::ceil(x));
  // nearbyint in the default rounding mode: half to even.
  TC_UNARY_FLOAT("round", std::nearbyint(x));

  t["tc.not"] = [](KernelContext &c) {
    checkUnary(c);
    if (c.in[0]->dtype() != DType::I1)
      c.fail("input must be i1, got " + typeToString(c.in[0]->type));
    for (int64_t k = 0, n = c.in[0]->size(); k < n; ++k)
      c.out[0]->i[k] = c.in[0]->i[k] ? 0 : 1;
  };

  t["tc.gelu"] = [](KernelContext &c) {
    std::string mode = c.strAttr("approximate", "none");
    if (mode == "none") {
      unaryFloat(c, [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); });
    } else if (mode == "tanh") {
      unaryFloat(c, [](double x) {
        const double k = std::sqrt(2.0 / M_PI);
        return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
      });
    } else {
      c.fail("approximate must be \"none\" or \"tanh\", got \"" + mode + "\"");
    }
  };
}

//===----------------------------------------------------------------------===//
// Predicates and cast
//===----------------------------------------------------------------------===//

template <typename F> void floatPredicate(KernelContext &c, F f) {
  c.expectOperands(1);
  c.expectResults(1);
  const Buffer &x = *c.in[0];
  Buffer &y = *c.out[0];
  c.expectFloat(x, "input");
  if (y.dtype() != DType::I1)
    c.fail("result must be i1, got " + typeToString(y.type));
  c.expectShape(y, x.shape(), "result");
  for (int64_t k = 0, n = x.size(); k < n; ++k)
    y.i[k] = f(x.f[k]) ? 1 : 0;
}

void castKernel(KernelContext &c) {
  c.expectOperands(1);
  c.expectResults(1);
  const Buffer &x = *c.in[0];
  Buffer &y = *c.out[0];
  c.expectShape(y, x.shape(), "result");
  bool saturate = c.boolAttr("saturate", true);
  DType to = y.dtype();
  int64_t n = x.size();
  if (y.isFloat) {
    // f32/f64 results are rounded by the executor (per RefPrecision); the
    // narrow formats here, where saturation matters.
    bool narrow = to != DType::F32 && to != DType::F64;
    for (int64_t k = 0; k < n; ++k) {
      double v = x.asDouble(k);
      y.f[k] = narrow ? roundToFloatDType(v, to, saturate) : v;
    }
  } else if (to == DType::I1) {
    for (int64_t k = 0; k < n; ++k)
      y.i[k] = x.isFloat ? (x.f[k] != 0) : (x.i[k] != 0);
  } else if (x.isFloat) {
    for (int64_t k = 0; k < n; ++k)
      y.i[k] = floatToIntOf(x.f[k], to);
  } else {
    for (int64_t k = 0; k < n; ++k)
      y.i[k] = wrapInt(x.i[k], to);
  }
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

struct BinaryOperands {
  const Buffer &a, &b;
  Buffer &y;
};

BinaryOperands checkBinary(KernelContext &c, bool boolResult) {
  c.expectOperands(2);
  c.expectResults(1);
  const Buffer &a = *c.in[0], &b = *c.in[1];
  Buffer &y = *c.out[0];
  c.expectSameDType(a, b, "operands");
  if (boolResult) {
    if (y.dtype() != DType::I1)
      c.fail("result must be i1, got " + typeToString(y.type));
  } else {
    c.expectSameDType(a, y, "result");
  }
  c.expectShape(y, broadcastShape(c, {a.shape(), b.shape()}), "result");
  return {a, b, y};
}

/// OP provides f(double, double), i(int64, int64) and u(int64, int64) (ui64).
template <typename OP> void binaryArith(KernelContext &c) {
  auto [a, b, y] = checkBinary(c, false);
  std::array<const std::vector<int64_t> *, 2> shapes{&a.shape(), &b.shape()};
  if (a.isFloat) {
    const double *pa = a.f.data(), *pb = b.f.data();
    double *py = y.f.data();
    if (a.shape() == b.shape()) {
      for (int64_t k = 0, n = y.size(); k < n; ++k)
        py[k] = OP::f(pa[k], pb[k]);
      return;
    }
    broadcastLoop<2>(y.shape(), shapes, [&](int64_t o, const std::array<int64_t, 2> &off) {
      py[o] = OP::f(pa[off[0]], pb[off[1]]);
    });
  } else if (a.dtype() == DType::U64) {
    broadcastLoop<2>(y.shape(), shapes, [&](int64_t o, const std::array<int64_t, 2> &off) {
      y.i[o] = OP::u(a.i[off[0]], b.i[off[1]]);
    });
  } else {
    broadcastLoop<2>(y.shape(), shapes, [&](int64_t o, const std::array<int64_t, 2> &off) {
      y.i[o] = OP::i(a.i[off[0]], b.i[off[1]]);
    });
  }
}

/// OP provides f(double, double) -> bool and i(int64, int64) -> bool (signed).
template <typename OP> void binaryCompare(KernelContext &c) {
  auto [a, b, y] = checkBinary(c, true);
  std::array<const std::vector<int64_t> *, 2> shapes{&a.shape(), &b.shape()};
  if (a.isFloat) {
    broadcastLoop<2>(y.shape(), shapes, [&](int64_t o, const std::array<int64_t, 2> &off) {
      y.i[o] = OP::f(a.f[off[0]], b.f[off[1]]);
    });
  } else {
    bool u = a.dtype() == DType::U64;
    broadcastLoop<2>(y.shape(), shapes, [&](int64_t o, const std::array<int64_t, 2> &off) {
      int64_t x = a.i[off[0]], z = b.i[off[1]];
      y.i[o] = u ? OP::i(flipSign(x), flipSign(z)) : OP::i(x, z);
    });
  }
}

inline uint64_t U(int64_t v) { return static_cast<uint64_t>(v); }
inline int64_t S(uint64_t v) { return static_cast<int64_t>(v); }

struct AddOp {
  static double f(double a, double b) { return a + b; }
  static int64_t i(int64_t a, int64_t b) { return S(U(a) + U(b)); }
  static int64_t u(int64_t a, int64_t b) { return i(a, b); }
};
struct SubOp {
  static double f(double a, double b) { return a - b; }
  static int64_t i(int64_t a, int64_t b) { return S(U(a) - U(b)); }
  static int64_t u(int64_t a, int64_t b) { return i(a, b); }
};
struct MulOp {
  static double f(double a, double b) { return a * b; }
  static int64_t i(int64_t a, int64_t b) { return S(U(a) * U(b)); }
  static int64_t u(int64_t a, int64_t b) { return i(a, b); }
};
struct DivOp {
  static double f(double a, double b) { return a / b; }
  static int64_t i(int64_t a, int64_t b) {
    if (b == 0)
      divisionByZero("division");
    if (b == -1)
      return S(0 - U(a)); // INT64_MIN / -1 wraps
    return a / b;       // C truncates toward zero
  }
  static int64_t u(int64_t a, int64_t b) {
    if (b == 0)
      divisionByZero("division");
    return S(U(a) / U(b));
  }
};
struct MaxOp {
  static double f(double a, double b) {
    return (std::isnan(a) || std::isnan(b)) ? kNaN : (a > b ? a : b);
  }
  static int64_t i(int64_t a, int64_t b) { return a > b ? a : b; }
  static int64_t u(int64_t a, int64_t b) { return U(a) > U(b) ? a : b; }
};
struct MinOp {
  static double f(double a, double b) {
    return (std::isnan(a) || std::isnan(b)) ? kNaN : (a < b ? a : b);
  }
  static int64_t i(int64_t a, int64_t b) { return a < b ? a : b; }
  static int64_t u(int64_t a, int64_t b) { return U(a) < U(b) ? a : b; }
};
struct PowOp {
  static double f(double a, double b) { return std::pow(a, b); }
  static int64_t i(int64_t a, int64_t b) {
    if (b < 0) {
      if (a == 1)
        return 1;
      if (a == -1)
        return (b & 1) ? -1 : 1;
      if (a == 0)
        divisionByZero("power (0 to a negative exponent)");
      return 0; // |a| > 1: 1 / a^|b| truncates to 0
    }
    return u(a, b);
  }
  static int64_t u(int64_t a, int64_t b) {
    uint64_t r = 1, x = U(a), e = U(b);
    while (e) {
      if (e & 1)
        r *= x;
      x *= x;
      e >>= 1;
    }
    return S(r);
  }
};
/// fmod = false: the sign of the divisor (Python %).
struct ModOp {
  static double f(double a, double b) {
    double r = std::fmod(a, b);
    if (r == 0)
      return std::copysign(0.0, b);
    if ((r < 0) != (b < 0))
      r += b;
    return r;
  }
  static int64_t i(int64_t a, int64_t b) {
    if (b == 0)
      divisionByZero("remainder");
    if (b == -1)
      return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0)))
      r += b;
    return r;
  }
  static int64_t u(int64_t a, int64_t b) {
    if (b == 0)
      divisionByZero("remainder");
    return S(U(a) % U(b));
  }
};
/// fmod = true: C fmod, the sign of the dividend.
struct FmodOp {
  static double f(double a, double b) { return std::fmod(a, b); }
  static int64_t i(int64_t a, int64_t b) {
    if (b == 0)
      divisionByZero("remainder");
    if (b == -1)
      return 0;
    return a % b;
  }
  static int64_t u(int64_t a, int64_t b) { return ModOp::u(a, b); }
};

struct EqOp {
  static bool f(double a, double b) { return a == b; }
  static bool i(int64_t a, int64_t b) { return a == b; }
};
struct NeOp {
  static bool f(double a, double b) { return a != b; }
  static bool i(int64_t a, int64_t b) { return a != b; }
};
struct LtOp {
  static bool f(double a, double b) { return a < b; }
  static bool i(int64_t a, int64_t b) { return a < b; }
};
struct LeOp {
  static bool f(double a, double b) { return a <= b; }
  static bool i(int64_t a, int64_t b) { return a <= b; }
};
struct GtOp {
  static bool f(double a, double b) { return a > b; }
  static bool i(int64_t a, int64_t b) { return a > b; }
};
struct GeOp {
  static bool f(double a, double b) { return a >= b; }
  static bool i(int64_t a, int64_t b) { return a >= b; }
};

template <typename F> void binaryLogic(KernelContext &c, F f) {
  auto [a, b, y] = checkBinary(c, true);
  if (a.dtype() != DType::I1)
    c.fail("operands must be i1, got " + typeToString(a.type));
  std::array<const std::vector<int64_t> *, 2> shapes{&a.shape(), &b.shape()};
  broadcastLoop<2>(y.shape(), shapes, [&](int64_t o, const std::array<int64_t, 2> &off) {
    y.i[o] = f(a.i[off[0]] != 0, b.i[off[1]] != 0) ? 1 : 0;
  });
}

void selectKernel(KernelContext &c) {
  c.expectOperands(3);
  c.expectResults(1);
  const Buffer &cond = *c.in[0], &t = *c.in[1], &f = *c.in[2];
  Buffer &y = *c.out[0];
  if (cond.dtype() != DType::I1)
    c.fail("cond must be i1, got " + typeToString(cond.type));
  c.expectSameDType(t, f, "on_true/on_false");
  c.expectSameDType(t, y, "result");
  c.expectShape(y, broadcastShape(c, {cond.shape(), t.shape(), f.shape()}), "result");
  std::array<const std::vector<int64_t> *, 3> shapes{&cond.shape(), &t.shape(), &f.shape()};
  if (y.isFloat)
    broadcastLoop<3>(y.shape(), shapes, [&](int64_t o, const std::array<int64_t, 3> &off) {
      y.f[o] = cond.i[off[0]] ? t.f[off[1]] : f.f[off[2]];
    });
  else
    broadcastLoop<3>(y.shape(), shapes, [&](int64_t o, const std::array<int64_t, 3> &off) {
      y.i[o] = cond.i[off[0]] ? t.i[off[1]] : f.i[off[2]];
    });
}

} // namespace

void registerElementwiseKernels(KernelTable &t) {
  registerUnary(t);
  t["tc.isnan"] = [](KernelContext &c) { floatPredicate(c, [](double x) { return std::isnan(x); }); };
  t["tc.isinf"] = [](KernelContext &c) { floatPredicate(c, [](double x) { return std::isinf(x); }); };
  t["tc.cast"] = castKernel;

  t["tc.add"] = binaryArith<AddOp>;
  t["tc.sub"] = binaryArith<SubOp>;
  t["tc.mul"] = binaryArith<MulOp>;
  t["tc.div"] = binaryArith<DivOp>;
  t["tc.pow"] = binaryArith<PowOp>;
  t["tc.max"] = binaryArith<MaxOp>;
  t["tc.min"] = binaryArith<MinOp>;
  t["tc.rem"] = [](KernelContext &c) {
    if (c.boolAttr("fmod", false))
      binaryArith<FmodOp>(c);
    else
      binaryArith<ModOp>(c);
  };
  t["tc.eq"] = binaryCompare<EqOp>;
  t["tc.ne"] = binaryCompare<NeOp>;
  t["tc.lt"] = binaryCompare<LtOp>;
  t["tc.le"] = binaryCompare<LeOp>;
  t["tc.gt"] = binaryCompare<GtOp>;
  t["tc.ge"] = binaryCompare<GeOp>;
  t["tc.and"] = [](KernelContext &c) { binaryLogic(c, [](bool a, bool b) { return a && b; }); };
  t["tc.or"] = [](KernelContext &c) { binaryLogic(c, [](bool a, bool b) { return a || b; }); };
  t["tc.xor"] = [](KernelContext &c) { binaryLogic(c, [](bool a, bool b) { return a != b; }); };
  t["tc.select"] = selectKernel;
}

} // namespace tc::rt::cpu
