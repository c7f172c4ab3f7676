//===- ScalarExpr.cpp - the C expression of each elementwise op -----------===//
//
// Part of CUDA code generation (CudaCodegen.h gives the kernel ABI).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/KernelSupport.h"

namespace tc::cuda::detail {

//===----------------------------------------------------------------------===//
// Elementwise op expressions
//===----------------------------------------------------------------------===//

/// C expression of an elementwise op whose operands are the C expressions
/// `a` (compute type of the operand element type). Empty if unsupported.
std::string opExpr(Operation *op, ArrayRef<std::string> a) {
  Type in = eltOf(op->getOperand(op->getNumOperands() == 3 ? 1 : 0));
  Type out = eltOf(op->getResult(0));
  bool fl = isFloat(in), dbl = in.isF64();
  auto fn = [&](const char *name) { return std::string(name) + (dbl ? "" : "f"); };
  auto call = [&](const char *name) { return fn(name) + "(" + a[0] + ")"; };
  auto lit = [&](double v) { return floatLiteral(v, dbl); };
  std::string x = a.empty() ? "" : a[0];
  std::string y = a.size() > 1 ? a[1] : "";
  std::string e;
  if (llvm::isa<tc::NegOp>(op))
    e = fl ? "(-" + x + ")" : "(" + computeType(in) + ")(0ull - (unsigned long long)" + x + ")";
  else if (llvm::isa<tc::AbsOp>(op))
    e = fl ? call("fabs") : (isU64(in) || in.isUnsignedInteger() ? x : "(" + x + " < 0 ? -" + x + " : " + x + ")");
  else if (llvm::isa<tc::SignOp>(op))
    e = fl ? "(" + x + " != " + x + " ? " + x + " : (" + computeType(in) + ")((" + x + " > 0) - (" + x + " < 0)))"
           : "(" + computeType(in) + ")((" + x + " > 0) - (" + x + " < 0))";
  else if (llvm::isa<tc::ReluOp>(op))
    e = fl ? "(" + x + " > 0 || " + x + " != " + x + " ? " + x + " : " + lit(0) + ")"
           : "(" + x + " > 0 ? " + x + " : 0)";
  else if (llvm::isa<tc::ExpOp>(op)) e = call("exp");
  else if (llvm::isa<tc::LogOp>(op)) e = call("log");
  else if (llvm::isa<tc::SqrtOp>(op)) e = call("sqrt");
  else if (llvm::isa<tc::RsqrtOp>(op)) e = "(" + lit(1) + " / " + call("sqrt") + ")";
  else if (llvm::isa<tc::ReciprocalOp>(op)) e = "(" + lit(1) + " / " + x + ")";
  else if (llvm::isa<tc::TanhOp>(op)) e = call("tanh");
  else if (llvm::isa<tc::SigmoidOp>(op)) e = "(" + lit(1) + " / (" + lit(1) + " + " + fn("exp") + "(-" + x + ")))";
  else if (llvm::isa<tc::ErfOp>(op)) e = call("erf");
  else if (llvm::isa<tc::SiluOp>(op)) e = "(" + x + " / (" + lit(1) + " + " + fn("exp") + "(-" + x + ")))";
  else if (llvm::isa<tc::SinOp>(op)) e = call("sin");
  else if (llvm::isa<tc::CosOp>(op)) e = call("cos");
  else if (llvm::isa<tc::TanOp>(op)) e = call("tan");
  else if (llvm::isa<tc::AsinOp>(op)) e = call("asin");
  else if (llvm::isa<tc::AcosOp>(op)) e = call("acos");
  else if (llvm::isa<tc::AtanOp>(op)) e = call("atan");
  else if (llvm::isa<tc::SinhOp>(op)) e = call("sinh");
  else if (llvm::isa<tc::CoshOp>(op)) e = call("cosh");
  else if (llvm::isa<tc::AsinhOp>(op)) e = call("asinh");
  else if (llvm::isa<tc::AcoshOp>(op)) e = call("acosh");
  else if (llvm::isa<tc::AtanhOp>(op)) e = call("atanh");
  else if (llvm::isa<tc::FloorOp>(op)) e = call("floor");
  else if (llvm::isa<tc::CeilOp>(op)) e = call("ceil");
  else if (llvm::isa<tc::RoundOp>(op)) e = call("rint"); // half to even
  else if (llvm::isa<tc::NotOp>(op)) e = "(!" + x + ")";
  else if (llvm::isa<tc::IsNanOp>(op)) e = "(" + x + " != " + x + ")";
  else if (llvm::isa<tc::IsInfOp>(op)) e = "(" + call("fabs") + " == " + lit(INFINITY) + ")";
  else if (auto g = llvm::dyn_cast<tc::GeluOp>(op)) {
    if (g.getApproximate() == "tanh")
      e = "(" + lit(0.5) + " * " + x + " * (" + lit(1) + " + " + fn("tanh") + "(" +
          lit(0.7978845608028654) + " * (" + x + " + " + lit(0.044715) + " * " + x + " * " + x +
          " * " + x + "))))";
    else
      e = "(" + lit(0.5) + " * " + x + " * (" + lit(1) + " + " + fn("erf") + "(" + x + " * " +
          lit(0.70710678118654752440) + ")))";
  } else if (llvm::isa<tc::CastOp>(op)) {
    if (isBool(out))
      e = "(" + x + " != 0)";
    else if (isFloat(out)) {
      // The kernels compute bf16 / f16 values in f32 and round them where
      // they are stored; a cast to a wider float reads the value its type
      // holds (what a store and a load would give): an FP8 quantize's amax
      // (tc-fuse-fp8-amax) is of the stored tensor.
      std::string held = x;
      if (in.isBF16() && !out.isBF16())
        held = "tc_round_bf16(" + x + ")";
      else if (in.isF16() && !out.isF16())
        held = "tc_round_f16(" + x + ")";
      std::string v = "(" + computeType(out) + ")(" + held + ")";
      if (out.isBF16())
        v = "tc_round_bf16(" + v + ")";
      else if (out.isF16())
        v = "tc_round_f16(" + v + ")";
      else if (isFp8(out)) // saturating: FusionGen::analyse refuses the others
        v = "tc_round_" + fp8Name(out) + "(" + v + ")";
      e = v;
    } else if (fl) {
      // Truncation toward zero; NaN and out-of-range give 0.
      e = "(" + x + " != " + x + " ? (" + computeType(out) + ")0 : (" + computeType(out) + ")" +
          (isU64(out) ? "(unsigned long long)" : "(long long)") + call("trunc") + ")";
    } else {
      e = "(" + computeType(out) + ")(" + x + ")";
    }
  }
  else if (llvm::isa<tc::AddOp>(op)) e = "(" + x + " + " + y + ")";
  else if (llvm::isa<tc::SubOp>(op)) e = "(" + x + " - " + y + ")";
  else if (llvm::isa<tc::MulOp>(op)) e = "(" + x + " * " + y + ")";
  else if (llvm::isa<tc::DivOp>(op)) {
    // By a constant, in f32: times its reciprocal (within an ulp of the
    // quotient; exact for powers of two). GPT-NeoX's erf GELU and its
    // backward divide by sqrt(2) twice per element: IEEE divisions made
    // those kernels compute-bound.
    std::optional<double> c;
    if (auto k = op->getOperand(1).getDefiningOp<tc::ConstantOp>())
      if (auto d = llvm::dyn_cast<DenseElementsAttr>(k.getValue()); d && d.isSplat() && fl && !dbl)
        c = d.getSplatValue<APFloat>().convertToDouble();
    if (c && std::isfinite(*c) && *c != 0.0 && std::isfinite(1.0 / *c))
      e = "(" + x + " * " + lit(1.0 / static_cast<double>(static_cast<float>(*c))) + ")";
    else
      e = fl || isU64(in) ? "(" + x + " / " + y + ")" : "tc_idiv(" + x + ", " + y + ")";
  }
  else if (llvm::isa<tc::PowOp>(op)) {
    // x^2 and x^3 by a constant exponent (HF GPT-2's gelu_new: pow(x, 3.0),
    // its backward pow(x, 2.0)) as products: powf's log/exp path made those
    // GELU kernels compute-bound.
    std::optional<double> k;
    if (auto c = op->getOperand(1).getDefiningOp<tc::ConstantOp>())
      if (auto d = llvm::dyn_cast<DenseElementsAttr>(c.getValue()); d && d.isSplat() && fl)
        k = d.getSplatValue<APFloat>().convertToDouble();
    if (k && *k == 2.0)
      e = "(" + x + " * " + x + ")";
    else if (k && *k == 3.0)
      e = "(" + x + " * " + x + " * " + x + ")";
    else
      e = fl ? fn("pow") + "(" + x + ", " + y + ")" : "tc_ipow(" + x + ", " + y + ")";
  }
  else if (llvm::isa<tc::MaxOp>(op)) e = "tc_max(" + x + ", " + y + ")";
  else if (llvm::isa<tc::MinOp>(op)) e = "tc_min(" + x + ", " + y + ")";
  else if (llvm::isa<tc::AndOp>(op)) e = "(" + x + " && " + y + ")";
  else if (llvm::isa<tc::OrOp>(op)) e = "(" + x + " || " + y + ")";
  else if (llvm::isa<tc::XorOp>(op)) e = "(" + x + " != " + y + ")";
  else if (llvm::isa<tc::EqOp>(op)) e = "(" + x + " == " + y + ")";
  else if (llvm::isa<tc::NeOp>(op)) e = "(" + x + " != " + y + ")";
  else if (llvm::isa<tc::LtOp>(op)) e = "(" + x + " < " + y + ")";
  else if (llvm::isa<tc::LeOp>(op)) e = "(" + x + " <= " + y + ")";
  else if (llvm::isa<tc::GtOp>(op)) e = "(" + x + " > " + y + ")";
  else if (llvm::isa<tc::GeOp>(op)) e = "(" + x + " >= " + y + ")";
  else if (auto r = llvm::dyn_cast<tc::RemOp>(op)) {
    if (fl)
      e = r.getFmod() ? fn("fmod") + "(" + x + ", " + y + ")" : "tc_pymod(" + x + ", " + y + ")";
    else if (isU64(in))
      e = "(" + y + " == 0 ? 0ull : " + x + " % " + y + ")";
    else
      e = (r.getFmod() ? "tc_ifmod(" : "tc_imod(") + x + ", " + y + ")";
  } else if (llvm::isa<tc::SelectOp>(op))
    e = "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")";
  if (e.empty())
    return e;
  return wrapInt(out, e);
}

} // namespace tc::cuda::detail
