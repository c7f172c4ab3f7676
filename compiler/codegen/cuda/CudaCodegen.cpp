//===- CudaCodegen.cpp - CUDA C++ source for tc kernels --------------------===//
//
// Three kernel shapes:
//   - elementwise fusions: a grid-stride loop over the iteration space, every
//     body value a per-thread scalar evaluated at the thread's index (numpy
//     broadcasting is index projection, so it composes); a 16-byte vector
//     path when every pointer is dense and aligned;
//   - row fusions (a final trailing-axis reduction, or last-axis softmax):
//     a warp (rows of up to 4096 elements) or a block per row, the chain recomputed
//     per pass, warp-shuffle / shared-memory reductions;
//   - standalone shape ops and reductions over any axes: generic strided
//     kernels whose shapes and strides come in `meta`.
// The ABI is documented in CudaCodegen.h.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/CudaCodegen.h"
#include "compiler/codegen/cuda/Prelude.h"
#include "compiler/Target.h"

#include "dialects/tc/IR/TcOps.h"
#include "dialects/tcx/IR/TcxOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

using namespace mlir;

namespace tc::cuda {

namespace {

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

RankedTensorType tensorOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }
Type eltOf(Value v) { return tensorOf(v).getElementType(); }
ArrayRef<int64_t> shapeOf(Value v) { return tensorOf(v).getShape(); }

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// C type of the storage format; empty if unsupported.
std::string storageType(Type e) {
  if (e.isF32())
    return "float";
  if (e.isF64())
    return "double";
  if (e.isF16() || e.isBF16())
    return "unsigned short";
  if (auto it = llvm::dyn_cast<IntegerType>(e)) {
    bool u = it.isUnsigned();
    switch (it.getWidth()) {
    case 1:
      return "unsigned char";
    case 8:
      return u ? "unsigned char" : "signed char";
    case 16:
      return u ? "unsigned short" : "short";
    case 32:
      return u ? "unsigned int" : "int";
    case 64:
      return u ? "unsigned long long" : "long long";
    default:
      return "";
    }
  }
  if (auto ft = llvm::dyn_cast<FloatType>(e))
    if (ft.getWidth() <= 8)
      return "unsigned char"; // fp8 / fp4: raw bytes, copies only
  return "";
}

int64_t storageBytes(Type e) {
  if (auto it = llvm::dyn_cast<IntegerType>(e))
    return it.getWidth() == 1 ? 1 : it.getWidth() / 8;
  return std::max<int64_t>(1, llvm::cast<FloatType>(e).getWidth() / 8);
}

/// Whether elementwise math is generated for this element type.
bool computable(Type e) {
  return e.isF32() || e.isF64() || e.isF16() || e.isBF16() ||
         (llvm::isa<IntegerType>(e) && !storageType(e).empty());
}

bool isFloat(Type e) { return llvm::isa<FloatType>(e); }
bool isBool(Type e) { return e.isInteger(1); }
bool isU64(Type e) { return e.isUnsignedInteger(64); }

/// C type values of this element type are computed in.
std::string computeType(Type e) {
  if (e.isF64())
    return "double";
  if (isFloat(e))
    return "float";
  if (isBool(e))
    return "bool";
  return isU64(e) ? "unsigned long long" : "long long";
}

std::string loadExpr(Type e, const std::string &raw) {
  if (e.isBF16())
    return "tc_bf16_f32(" + raw + ")";
  if (e.isF16())
    return "tc_f16_f32(" + raw + ")";
  if (isBool(e))
    return "(" + raw + " != 0)";
  if (llvm::isa<IntegerType>(e))
    return "(" + computeType(e) + ")" + raw;
  return raw;
}

std::string storeExpr(Type e, const std::string &v) {
  if (e.isBF16())
    return "tc_f32_bf16(" + v + ")";
  if (e.isF16())
    return "tc_f32_f16(" + v + ")";
  if (isBool(e))
    return "(unsigned char)(" + v + " ? 1 : 0)";
  return "(" + storageType(e) + ")(" + v + ")";
}

/// Wraps an integer result to its declared width (the reference does after
/// every op); 16-bit floats are not rounded between fused ops.
std::string wrapInt(Type e, const std::string &v) {
  auto it = llvm::dyn_cast<IntegerType>(e);
  if (!it || it.getWidth() == 1 || it.getWidth() == 64)
    return v;
  return "(long long)(" + storageType(e) + ")(" + v + ")";
}

std::string floatLiteral(double v, bool isDouble) {
  if (std::isnan(v))
    return isDouble ? "__longlong_as_double(0x7ff8000000000000ll)" : "__int_as_float(0x7fc00000)";
  if (std::isinf(v))
    return std::string(v < 0 ? "-" : "") + (isDouble ? "__longlong_as_double(0x7ff0000000000000ll)"
                                                     : "__int_as_float(0x7f800000)");
  char buf[64];
  if (isDouble)
    std::snprintf(buf, sizeof buf, "%a", v);
  else
    std::snprintf(buf, sizeof buf, "%af", (double)(float)v);
  return buf;
}

/// The value of a splat constant as a C literal of its compute type.
std::string splatLiteral(tc::ConstantOp c) {
  auto d = llvm::cast<DenseElementsAttr>(c.getValue());
  Type e = d.getElementType();
  if (isFloat(e)) {
    APFloat f = d.getSplatValue<APFloat>();
    bool lost;
    f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
    return floatLiteral(f.convertToDouble(), e.isF64());
  }
  APInt i = d.getSplatValue<APInt>();
  if (isBool(e))
    return i.isZero() ? "false" : "true";
  if (isU64(e))
    return std::to_string(i.getZExtValue()) + "ull";
  auto it = llvm::cast<IntegerType>(e);
  int64_t v = it.isUnsigned() ? (int64_t)i.getZExtValue() : i.getSExtValue();
  return "(" + std::to_string(v) + "ll)";
}

/// Row-major strides of `shape` as seen from an iteration space `iter`
/// (numpy broadcasting: right-aligned, size-1 dimensions get stride 0).
SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> shape, ArrayRef<int64_t> iter) {
  SmallVector<int64_t> out(iter.size(), 0);
  int64_t stride = 1;
  for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
    int64_t od = d + (int64_t)iter.size() - (int64_t)shape.size();
    out[od] = shape[d] == 1 && iter[od] != 1 ? 0 : stride;
    stride *= shape[d];
  }
  return out;
}

SmallVector<int64_t> denseStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t d = (int64_t)shape.size() - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

int64_t product(ArrayRef<int64_t> s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

std::string hashName(llvm::StringRef kind, const std::string &source) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : source) {
    h ^= c;
    h *= 1099511628211ull;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "tc_" << kind << "_" << llvm::format_hex_no_prefix(h, 16);
  return s;
}

/// Replaces the placeholder NAME with the final, content-derived name.
void finalize(KernelSource &k, llvm::StringRef kind) {
  k.name = hashName(kind, k.source);
  for (size_t p; (p = k.source.find("@KERNEL@")) != std::string::npos;)
    k.source.replace(p, 8, k.name);
}

/// Row reductions split over blocks: at most this many rows, parts per row.
constexpr int64_t kSplitRows = 16, kSplitParts = 256;

int64_t gridFor(int64_t work, int64_t perBlock) {
  int64_t g = (work + perBlock - 1) / perBlock;
  return std::max<int64_t>(1, std::min<int64_t>(g, 8192));
}

/// Kernel parameter list and KernelParam entries for pointers.
struct Signature {
  std::string text;
  std::vector<KernelParam> params;
  void add(const std::string &decl) {
    if (!text.empty())
      text += ",\n    ";
    text += decl;
  }
  void output(unsigned i, Value v) {
    add(storageType(eltOf(v)) + "* __restrict__ out" + std::to_string(i));
    params.push_back({ParamKind::Output, "out" + std::to_string(i), i, typeName(eltOf(v)),
                      std::vector<int64_t>(shapeOf(v).begin(), shapeOf(v).end()), {}});
  }
  void input(unsigned i, Value v) {
    add("const " + storageType(eltOf(v)) + "* __restrict__ in" + std::to_string(i));
    params.push_back({ParamKind::Input, "in" + std::to_string(i), i, typeName(eltOf(v)),
                      std::vector<int64_t>(shapeOf(v).begin(), shapeOf(v).end()), {}});
  }
  void tail(int64_t n, std::vector<int64_t> meta) {
    if (meta.empty())
      meta.push_back(0);
    add("long long n");
    add("const TcMeta<" + std::to_string(meta.size()) + "> meta");
    params.push_back({ParamKind::Int64, "n", -1, "", {}, {n}});
    params.push_back({ParamKind::Int64Array, "meta", -1, "", {}, std::move(meta)});
  }
};

/// A standalone op's kernel: `source` (with @KERNEL@ placeholders), the
/// signature's parameters, `grid` blocks of `block` threads, the name from
/// `kind` and the source.
KernelSource makeKernel(Operation *op, std::string source, Signature &sig, int64_t grid,
                        llvm::StringRef kind, int64_t block = 256) {
  KernelSource k;
  k.op = op;
  k.source = std::move(source);
  k.params = std::move(sig.params);
  k.launch.grid = grid;
  k.launch.block = block;
  finalize(k, kind);
  return k;
}

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
      std::string v = "(" + computeType(out) + ")(" + x + ")";
      if (out.isBF16())
        v = "tc_round_bf16(" + v + ")";
      else if (out.isF16())
        v = "tc_round_f16(" + v + ")";
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
  else if (llvm::isa<tc::DivOp>(op))
    e = fl || isU64(in) ? "(" + x + " / " + y + ")" : "tc_idiv(" + x + ", " + y + ")";
  else if (llvm::isa<tc::PowOp>(op)) e = fl ? fn("pow") + "(" + x + ", " + y + ")" : "tc_ipow(" + x + ", " + y + ")";
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

//===----------------------------------------------------------------------===//
// Fusion kernels
//===----------------------------------------------------------------------===//

enum class ArgMode { Full, Scalar, Strided };

struct FusionGen {
  Operation *anchor; // the tc.fusion or tcx.kernel (diagnostics, KernelSource::op)
  Block &body;       // its body: one argument per input
  ValueRange yielded; // the body's results, one per output
  Operation *red = nullptr; // final reduction / softmax
  std::string globals;      // module-scope declarations the kernel needs
  SmallVector<int64_t> iter;
  int64_t numel = 0, rows = 1, rowLen = 1;
  int64_t rowDims = 0; // row kernels: the trailing dims a row spans

  /// Index and offset arithmetic in 32 bits when the iteration space has
  /// fewer than 2^31 elements (so has every operand): fewer instructions in
  /// kernels whose time goes to address arithmetic (masked softmax rows).
  bool narrowIdx() const { return numel < (int64_t(1) << 31); }
  std::string ix() const { return narrowIdx() ? "int" : "long long"; }
  std::string mv(int64_t k) const {
    std::string v = "meta.v[" + std::to_string(k) + "]";
    return narrowIdx() ? "(int)" + v : v;
  }
  SmallVector<ArgMode> argModes;
  SmallVector<int64_t> argMeta;     // offset of the strides in meta (Strided)
  SmallVector<int64_t> outMeta;     // offset of the strides (guarded outputs), -1 = dense
  SmallVector<SmallVector<int64_t>> outGuard; // dims that must be 0 to store
  std::vector<int64_t> meta;
  int64_t dimsAt = -1;              // offset of the iteration dims in meta
  bool needIdx = false;

  FusionGen(tc::FusionOp f)
      : anchor(f), body(f.getBody().front()),
        yielded(f.getBody().front().getTerminator()->getOperands()) {}
  FusionGen(tcx::KernelOp k)
      : anchor(k), body(k.getEntry()), yielded(k.getEntry().getTerminator()->getOperands()) {}

  LogicalResult analyse() {
    for (Operation &op : body.without_terminator())
      if (tc::isTrailingReduction(&op) || tc::isLastAxisSoftmax(&op))
        red = &op;
    for (Operation &op : body.without_terminator()) {
      for (Type t : llvm::concat<Type>(op.getOperandTypes(), op.getResultTypes()))
        if (!computable(llvm::cast<RankedTensorType>(t).getElementType()))
          return op.emitOpError() << "CUDA codegen: unsupported element type in " << t;
    }
    for (Value v : body.getArguments())
      if (storageType(eltOf(v)).empty() || !computable(eltOf(v)))
        return anchor->emitOpError() << "CUDA codegen: unsupported input type " << v.getType();
    if (red) {
      iter.assign(shapeOf(red->getOperand(0)).begin(), shapeOf(red->getOperand(0)).end());
      int64_t k = 1;
      if (auto axes = red->getAttrOfType<DenseI64ArrayAttr>("axes"))
        k = axes.size();
      rowLen = product(ArrayRef(iter).take_back(k));
      rowDims = k;
      rows = product(ArrayRef(iter).drop_back(k));
      meta.push_back(rowLen);
    } else {
      // The iteration space: the broadcast of every yielded shape.
      SmallVector<int64_t> s;
      for (Value v : yielded) {
        auto b = tc::broadcastShapes(s, shapeOf(v));
        if (failed(b))
          return anchor->emitOpError() << "CUDA codegen: results do not broadcast";
        s = *b;
      }
      iter = s;
    }
    numel = product(iter);
    for (BlockArgument arg : body.getArguments()) {
      ArrayRef<int64_t> s = shapeOf(arg);
      if (s == ArrayRef(iter))
        argModes.push_back(ArgMode::Full);
      else if (product(s) == 1)
        argModes.push_back(ArgMode::Scalar);
      else {
        argModes.push_back(ArgMode::Strided);
        needIdx = true;
      }
    }
    for (Value v : yielded) {
      outGuard.emplace_back();
      if (v.getDefiningOp() == red && red && !tc::isLastAxisSoftmax(red)) {
        outMeta.push_back(-1);
        continue;
      }
      if (shapeOf(v) == ArrayRef(iter)) {
        outMeta.push_back(-1);
        continue;
      }
      // A value smaller than the iteration space: stored by the threads at
      // index 0 of every broadcast dimension.
      needIdx = true;
      outMeta.push_back(0);
      ArrayRef<int64_t> s = shapeOf(v);
      for (size_t d = 0; d < iter.size(); ++d) {
        int64_t sd = (int64_t)d - ((int64_t)iter.size() - (int64_t)s.size());
        if ((sd < 0 || s[sd] == 1) && iter[d] != 1)
          outGuard.back().push_back(d);
      }
    }
    if (needIdx) {
      dimsAt = meta.size();
      meta.insert(meta.end(), iter.begin(), iter.end());
    }
    for (auto [j, arg] : llvm::enumerate(body.getArguments())) {
      argMeta.push_back(-1);
      if (argModes[j] != ArgMode::Strided)
        continue;
      argMeta.back() = meta.size();
      auto st = broadcastStrides(shapeOf(arg), iter);
      meta.insert(meta.end(), st.begin(), st.end());
    }
    for (auto [k, v] : llvm::enumerate(yielded)) {
      if (outMeta[k] < 0)
        continue;
      outMeta[k] = meta.size();
      auto st = broadcastStrides(shapeOf(v), iter);
      meta.insert(meta.end(), st.begin(), st.end());
    }
    return success();
  }

  /// Row kernels: idx0..idx{r-k-1} of the row, once per row.
  std::string rowIdxCode(const std::string &ind) {
    if (!needIdx || !red)
      return "";
    const std::string it = numel < (int64_t(1) << 31) ? "unsigned" : "long long";
    std::string s = ind + it + " rrem_ = (" + it + ")row;\n" +
                    digitsCode(ind, it, "rrem_", (int64_t)iter.size() - rowDims - 1, 0);
    const int64_t first = (int64_t)iter.size() - rowDims;
    auto rowOffset = [&](int64_t at) {
      if (at < 0 || first == 0)
        return;
      s += ind + "const " + ix() + " roff" + std::to_string(at) + "_ = ";
      for (int64_t d = 0; d < first; ++d)
        s += (d ? " + idx" : "idx") + std::to_string(d) + " * " + mv(at + d);
      s += ";\n";
    };
    for (int64_t at : argMeta)
      rowOffset(at);
    for (int64_t at : outMeta)
      rowOffset(at);
    return s;
  }

  /// Index decomposition of flat `i` into idx0..idx{r-1}.
  std::string idxCode(const std::string &ind) {
    if (!needIdx)
      return "";
    // 64-bit division costs several times 32-bit division on the GPU: an
    // iteration space below 2^31 elements decomposes in 32 bits.
    const bool narrow = numel < (int64_t(1) << 31);
    const std::string it = narrow ? "unsigned" : "long long";
    // Row kernels: the dims before the row come from `row` once per row
    // (rowIdxCode), only the row's own dims from `j` per element.
    const int64_t first = red ? (int64_t)iter.size() - rowDims : 0;
    if (red && rowDims == 1)
      return ind + "const " + ix() + " idx" + std::to_string(iter.size() - 1) + " = j;\n";
    return ind + it + " rem_ = (" + it + ")" + (red ? "j" : "i") + ";\n" +
           digitsCode(ind, it, "rem_", (int64_t)iter.size() - 1, first);
  }

  /// idx<hi> down to idx<lo>: the digits of `rem` (of type `it`) in the
  /// iteration dims (unit dims are 0), dividing `rem` as it goes.
  std::string digitsCode(const std::string &ind, const std::string &it, const std::string &rem,
                         int64_t hi, int64_t lo) {
    std::string s;
    for (int64_t d = hi; d >= lo; --d) {
      std::string dim = "(" + it + ")meta.v[" + std::to_string(dimsAt + d) + "]";
      if (iter[d] == 1) {
        s += ind + "const " + ix() + " idx" + std::to_string(d) + " = 0;\n";
        continue;
      }
      s += ind + "const " + ix() + " idx" + std::to_string(d) + " = (" + ix() + ")(" + rem + " % " +
           dim + "); " + rem + " /= " + dim + ";\n";
    }
    return s;
  }

  std::string stridedOffset(int64_t at) {
    // Row kernels: the part from the dims before the row is per row
    // (roff<at>_, rowIdxCode); only the row's own dims vary per element.
    const size_t first = red ? iter.size() - rowDims : 0;
    std::string s = red && first > 0 ? "roff" + std::to_string(at) + "_" : "";
    for (size_t d = first; d < iter.size(); ++d)
      s += (s.empty() ? "idx" : " + idx") + std::to_string(d) + " * " + mv(at + d);
    return s.empty() ? "0" : s;
  }

  /// Loads of the block arguments and the body (not the reduction): the
  /// names of the values in `names`. `vecLoad` (vector path): Full inputs
  /// come from a{j}.v[k].
  LogicalResult evalCode(const std::string &ind, bool vecLoad, llvm::DenseMap<Value, std::string> &names,
                         std::string &out) {
    for (auto [j, arg] : llvm::enumerate(body.getArguments())) {
      std::string js = std::to_string(j);
      std::string raw;
      switch (argModes[j]) {
      case ArgMode::Full:
        raw = vecLoad ? "a" + js + ".v[k]" : "in" + js + "[i]";
        break;
      case ArgMode::Scalar:
        raw = "in" + js + "[0]";
        break;
      case ArgMode::Strided:
        raw = "in" + js + "[" + stridedOffset(argMeta[j]) + "]";
        break;
      }
      names[arg] = "x" + js;
      out += ind + "const " + computeType(eltOf(arg)) + " x" + js + " = " + loadExpr(eltOf(arg), raw) + ";\n";
    }
    unsigned n = 0;
    for (Operation &op : body.without_terminator()) {
      if (&op == red)
        continue;
      Value r = op.getResult(0);
      std::string var = "v" + std::to_string(n++);
      std::string e;
      if (auto c = llvm::dyn_cast<tc::ConstantOp>(op)) {
        e = splatLiteral(c);
      } else if (llvm::isa<tc::BroadcastOp>(op)) {
        e = names.lookup(op.getOperand(0)); // broadcasting is index projection
      } else {
        SmallVector<std::string> a;
        for (Value v : op.getOperands())
          a.push_back(names.lookup(v));
        e = opExpr(&op, a);
        if (e.empty())
          return op.emitOpError() << "CUDA codegen: no expression for this op";
      }
      names[r] = var;
      out += ind + "const " + computeType(eltOf(r)) + " " + var + " = " + e + ";\n";
    }
    return success();
  }

  /// Stores of the yielded elementwise values at flat index `i`.
  std::string storeCode(const std::string &ind, llvm::DenseMap<Value, std::string> &names, bool skipRed) {
    std::string s;
    for (auto [k, v] : llvm::enumerate(yielded)) {
      if (skipRed && v.getDefiningOp() == red)
        continue;
      std::string ks = std::to_string(k);
      std::string st = storeExpr(eltOf(v), names.lookup(v));
      if (outMeta[k] < 0) {
        s += ind + "out" + ks + "[i] = " + st + ";\n";
        continue;
      }
      std::string cond;
      for (int64_t d : outGuard[k])
        cond += (cond.empty() ? "" : " && ") + std::string("idx") + std::to_string(d) + " == 0";
      s += ind + (cond.empty() ? "" : "if (" + cond + ") ") + "out" + ks + "[" +
           stridedOffset(outMeta[k]) + "] = " + st + ";\n";
    }
    return s;
  }

  FailureOr<KernelSource> generate() {
    if (failed(analyse()))
      return failure();
    KernelSource k;
    k.op = anchor;
    Signature sig;
    for (auto [i, v] : llvm::enumerate(yielded))
      sig.output(i, v);
    for (auto [i, v] : llvm::enumerate(body.getArguments()))
      sig.input(i, v);
    std::string src = kPrelude;
    std::string bodyText;
    if (!red) {
      sig.tail(numel, meta);
      if (failed(elementwise(bodyText, k)))
        return failure();
    } else {
      sig.tail(rows, meta);
      if (failed(rowKernel(bodyText, k)))
        return failure();
    }
    src += globals;
    if (!red && !needIdx) {
      // Elementwise kernels without index arithmetic also get a grouped entry
      // point, NAME_group: one launch over many same-kernel problems (the
      // per-parameter optimizer updates: one AdamW launch for every
      // parameter). Each item holds its pointers, n and its range of blocks;
      // a block finds its item by binary search and runs the same body.
      std::string body = bodyText;
      for (auto [from, to] : {std::pair<const char *, const char *>{"blockIdx.x", "bid_"},
                              {"gridDim.x", "nb_"}})
        for (size_t p; (p = body.find(from)) != std::string::npos;)
          body.replace(p, std::strlen(from), to);
      std::string args, casts;
      unsigned nptr = 0;
      for (const KernelParam &kp : sig.params) {
        if (kp.kind == ParamKind::Output || kp.kind == ParamKind::Input) {
          Value v = kp.kind == ParamKind::Output ? yielded[kp.index]
                                                 : Value(this->body.getArgument(kp.index));
          std::string ty = (kp.kind == ParamKind::Input ? "const " : "") + storageType(eltOf(v)) + "*";
          casts += (casts.empty() ? "" : ", ") + std::string("(") + ty + ")it_.p[" +
                   std::to_string(nptr++) + "]";
        }
      }
      src += "\n__device__ __forceinline__ void @KERNEL@_body(\n    " + sig.text +
             ", long long bid_, long long nb_) {\n" + body + "}\n";
      src += "\nextern \"C\" __global__ void __launch_bounds__(256) @KERNEL@(\n    " + sig.text +
             ") {\n  @KERNEL@_body(";
      for (const KernelParam &kp : sig.params)
        src += kp.name + ", ";
      src += "blockIdx.x, gridDim.x);\n}\n";
      src += "\nstruct TcGroupItem_" + std::to_string(nptr) + " { void *p[" + std::to_string(nptr) +
             "]; long long n, firstBlock, blocks; };\n";
      src += "extern \"C\" __global__ void __launch_bounds__(256) @KERNEL@_group(\n    const TcGroupItem_" +
             std::to_string(nptr) + "* __restrict__ items, int count, const TcMeta<" +
             std::to_string(std::max<size_t>(1, meta.size())) + "> meta) {\n";
      src += "  int lo_ = 0, hi_ = count - 1;\n";
      src += "  while (lo_ < hi_) {\n    const int mid_ = (lo_ + hi_ + 1) / 2;\n"
             "    if (items[mid_].firstBlock <= (long long)blockIdx.x) lo_ = mid_; else hi_ = mid_ - 1;\n  }\n";
      src += "  const TcGroupItem_" + std::to_string(nptr) + " it_ = items[lo_];\n";
      src += "  @KERNEL@_body(" + casts + ", it_.n, meta, (long long)blockIdx.x - it_.firstBlock, it_.blocks);\n}\n";
    } else {
      src += "\nextern \"C\" __global__ void __launch_bounds__(256) @KERNEL@(\n    " + sig.text +
             ") {\n" + bodyText + "}\n";
    }
    k.source = std::move(src);
    k.params = std::move(sig.params);
    finalize(k, red ? (tc::isLastAxisSoftmax(red) ? "softmax" : "reduce") : "fusion");
    return k;
  }

  LogicalResult elementwise(std::string &s, KernelSource &k) {
    // Vector path: every pointer dense over the whole space (or a scalar).
    bool vec = llvm::all_of(argModes, [](ArgMode m) { return m != ArgMode::Strided; }) &&
               llvm::all_of(outMeta, [](int64_t m) { return m < 0; });
    int64_t maxBytes = 1;
    for (auto [j, arg] : llvm::enumerate(body.getArguments()))
      if (argModes[j] == ArgMode::Full)
        maxBytes = std::max(maxBytes, storageBytes(eltOf(arg)));
    for (Value v : yielded)
      maxBytes = std::max(maxBytes, storageBytes(eltOf(v)));
    int64_t V = std::min<int64_t>(8, 16 / maxBytes);
    vec = vec && V > 1 && numel % V == 0;
    k.launch.block = 256;
    k.launch.grid = gridFor(vec ? numel / V : numel, 256);
    s += "  const long long stride = (long long)gridDim.x * blockDim.x;\n";
    if (vec) {
      std::string VS = std::to_string(V);
      std::string align;
      for (auto [j, arg] : llvm::enumerate(body.getArguments()))
        if (argModes[j] == ArgMode::Full)
          align += " | (unsigned long long)in" + std::to_string(j);
      for (unsigned i = 0; i < yielded.size(); ++i)
        align += " | (unsigned long long)out" + std::to_string(i);
      s += "  // 16-byte vector path (" + VS + " elements per thread and step).\n";
      s += "  if (((0ull" + align + ") & 15) == 0) {\n";
      s += "    for (long long b = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * " + VS +
           "; b < n; b += stride * " + VS + ") {\n";
      for (auto [j, arg] : llvm::enumerate(body.getArguments()))
        if (argModes[j] == ArgMode::Full) {
          std::string t = "TcVec<" + storageType(eltOf(arg)) + ", " + VS + ">";
          s += "      const " + t + " a" + std::to_string(j) + " = *reinterpret_cast<const " + t +
               "*>(in" + std::to_string(j) + " + b);\n";
        }
      for (auto [i, v] : llvm::enumerate(yielded))
        s += "      TcVec<" + storageType(eltOf(v)) + ", " + VS + "> o" + std::to_string(i) + ";\n";
      s += "#pragma unroll\n      for (int k = 0; k < " + VS + "; ++k) {\n";
      llvm::DenseMap<Value, std::string> names;
      std::string eval;
      if (failed(evalCode("        ", true, names, eval)))
        return failure();
      s += eval;
      for (auto [i, v] : llvm::enumerate(yielded))
        s += "        o" + std::to_string(i) + ".v[k] = " + storeExpr(eltOf(v), names.lookup(v)) + ";\n";
      s += "      }\n";
      for (auto [i, v] : llvm::enumerate(yielded)) {
        std::string t = "TcVec<" + storageType(eltOf(v)) + ", " + VS + ">";
        s += "      *reinterpret_cast<" + t + "*>(out" + std::to_string(i) + " + b) = o" +
             std::to_string(i) + ";\n";
      }
      s += "    }\n    return;\n  }\n";
    }
    s += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {\n";
    s += idxCode("    ");
    llvm::DenseMap<Value, std::string> names;
    std::string eval;
    if (failed(evalCode("    ", false, names, eval)))
      return failure();
    s += eval + storeCode("    ", names, false) + "  }\n";
    return success();
  }

  LogicalResult rowKernel(std::string &s, KernelSource &k) {
    // A warp per row up to 4096 elements: 8 independent rows per block and no
    // __syncthreads (attention softmax rows of 1024: block-per-row kernels
    // were latency-bound, 1.3 ms for [16,12,1024,1024] on the H200).
    int64_t tpr = rowLen > 4096 ? 256 : 32;
    k.launch.block = 256;
    k.launch.grid = gridFor(rows, 256 / tpr);
    // A few very long rows (the sum of squares of a whole gradient for the
    // grad-norm clip): S blocks per row, each reduces a slice; the last block
    // to finish (a counter in module memory) combines the S partials in
    // block order, so the result does not depend on timing.
    const bool split = !tc::isLastAxisSoftmax(red) && rows <= kSplitRows &&
                       rowLen >= (int64_t(1) << 18);
    const int64_t S = split ? std::clamp<int64_t>(rowLen / 32768, 2, kSplitParts) : 1;
    Value x = red->getOperand(0);
    Type xe = eltOf(x);
    std::string acc = computeType(xe);
    std::string T = std::to_string(tpr);
    auto reduce = [&](const std::string &v, const char *op, const std::string &init) {
      return tpr == 32 ? "tc_warp_reduce(" + v + ", " + op + "())"
                       : "tc_block_reduce(" + v + ", " + op + "(), (" + acc + ")" + init + ")";
    };
    std::string end = "rowLen";
    if (split) {
      tpr = 256;
      T = "256";
      k.launch.grid = rows * S;
      std::string Ss = std::to_string(S);
      globals += "__device__ " + acc + " tc_part_[" + std::to_string(kSplitRows * kSplitParts) +
                 "];\n__device__ unsigned int tc_done_[" + std::to_string(kSplitRows) + "];\n";
      s += "  const long long rowLen = meta.v[0];\n";
      s += "  const long long row = blockIdx.x / " + Ss + ", part_ = blockIdx.x % " + Ss + ";\n";
      s += "  const long long chunk_ = (rowLen + " + Ss + " - 1) / " + Ss + ";\n";
      s += "  const long long lane = part_ * chunk_ + threadIdx.x;\n";
      s += "  const long long end_ = rowLen < (part_ + 1) * chunk_ ? rowLen : (part_ + 1) * chunk_;\n";
      s += "  if (row < n) {\n";
      s += rowIdxCode("    ");
      end = "end_";
    } else {
      s += "  const int lane = threadIdx.x % " + T + ";\n";
      s += "  const long long rowsPerBlock = blockDim.x / " + T + ";\n";
      s += "  const long long rowLen = meta.v[0];\n";
      s += "  for (long long row = (long long)blockIdx.x * rowsPerBlock + threadIdx.x / " + T +
           "; row < n; row += (long long)gridDim.x * rowsPerBlock) {\n";
      s += rowIdxCode("    ");
    }
    auto pass = [&](const std::string &before, const std::string &after, bool stores) -> LogicalResult {
      s += "    for (" + ix() + " j = (" + ix() + ")lane; j < (" + ix() + ")" + end + "; j += " + T + ") {\n";
      s += "      const " + ix() + " i = (" + ix() + ")row * (" + ix() + ")rowLen + j;\n";
      s += idxCode("      ");
      llvm::DenseMap<Value, std::string> names;
      std::string eval;
      if (failed(evalCode("      ", false, names, eval)))
        return failure();
      s += eval;
      std::string xv = names.lookup(x);
      std::string a = after;
      for (size_t p; (p = a.find("@X@")) != std::string::npos;)
        a.replace(p, 3, xv);
      s += a;
      if (stores) {
        if (tc::isLastAxisSoftmax(red))
          names[red->getResult(0)] = "y_";
        s += storeCode("      ", names, !tc::isLastAxisSoftmax(red));
      }
      s += "    }\n";
      (void)before;
      return success();
    };
    bool dbl = xe.isF64();
    auto lit = [&](double v) { return floatLiteral(v, dbl); };
    if (auto sm = llvm::dyn_cast<tc::SoftmaxOp>(red); sm || llvm::isa<tc::LogSoftmaxOp>(red)) {
      std::string e = dbl ? "exp" : "expf", l = dbl ? "log" : "logf";
      s += "    " + acc + " m_ = " + lit(-INFINITY) + ";\n";
      if (failed(pass("", "      m_ = tc_max(m_, @X@);\n", false)))
        return failure();
      s += "    m_ = " + reduce("m_", "TcMax", "m_") + ";\n";
      s += "    " + acc + " s_ = 0;\n";
      if (failed(pass("", "      s_ += " + e + "(@X@ - m_);\n", false)))
        return failure();
      s += "    s_ = " + reduce("s_", "TcSum", "0") + ";\n";
      s += "    const " + acc + " ls_ = " + l + "(s_);\n";
      std::string y = sm ? "      const " + acc + " y_ = " + e + "(@X@ - m_) / s_;\n"
                         : "      const " + acc + " y_ = @X@ - m_ - ls_;\n";
      if (failed(pass("", y, true)))
        return failure();
      s += "  }\n";
      return success();
    }
    // Trailing-axis reduction.
    bool fl = isFloat(xe);
    std::string init, op;
    if (llvm::isa<tc::ReduceSumOp>(red) || llvm::isa<tc::ReduceMeanOp>(red)) {
      init = "0";
      op = "TcSum";
    } else if (llvm::isa<tc::ReduceMaxOp>(red)) {
      init = fl ? lit(-INFINITY) : (isU64(xe) ? "0ull" : "(-9223372036854775807ll - 1)");
      op = "TcMax";
    } else {
      init = fl ? lit(INFINITY) : (isU64(xe) ? "~0ull" : "9223372036854775807ll");
      op = "TcMin";
    }
    if (isBool(xe))
      return red->emitOpError() << "CUDA codegen: reductions of i1 are not supported";
    s += "    " + acc + " acc_ = " + init + ";\n";
    if (failed(pass("", "      acc_ = " + op + "()(acc_, @X@);\n", true)))
      return failure();
    s += "    acc_ = " + reduce("acc_", op.c_str(), init) + ";\n";
    if (split) {
      std::string Ss = std::to_string(S);
      s += "    __shared__ bool last_;\n";
      s += "    if (threadIdx.x == 0) {\n      tc_part_[row * " + Ss + " + part_] = acc_;\n"
           "      __threadfence();\n      last_ = atomicAdd(&tc_done_[row], 1u) == " + Ss + " - 1;\n    }\n";
      s += "    __syncthreads();\n    if (!last_) return;\n    __threadfence();\n";
      s += "    acc_ = " + init + ";\n";
      s += "    for (long long p_ = threadIdx.x; p_ < " + Ss + "; p_ += 256)\n";
      s += "      acc_ = " + op + "()(acc_, ((volatile " + acc + " *)tc_part_)[row * " + Ss + " + p_]);\n";
      s += "    acc_ = " + reduce("acc_", op.c_str(), init) + ";\n";
      s += "    if (threadIdx.x == 0) tc_done_[row] = 0;\n";
    }
    if (llvm::isa<tc::ReduceMeanOp>(red))
      s += "    acc_ = acc_ / (" + acc + ")rowLen;\n";
    unsigned k2 = 0;
    for (auto [i, v] : llvm::enumerate(yielded))
      if (v.getDefiningOp() == red) {
        s += std::string("    if (") + (split ? "threadIdx.x == 0" : "lane == 0") + ") out" +
             std::to_string(i) + "[row] = " + storeExpr(eltOf(v), "acc_") + ";\n";
        ++k2;
      }
    s += "  }\n";
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Standalone shape ops and reductions
//===----------------------------------------------------------------------===//

std::string header(Signature &sig) {
  return std::string(kPrelude) + "\nextern \"C\" __global__ void __launch_bounds__(256) @KERNEL@(\n    " +
         sig.text + ") {\n";
}

/// Decomposes flat `i` into o0..o{rank-1} (dims at meta[dimsAt..]); in 32
/// bits when the space has fewer than 2^31 elements (`total`).
std::string outIdx(int64_t rank, int64_t dimsAt, int64_t total = INT64_MAX) {
  const std::string it = total < (int64_t(1) << 31) ? "unsigned" : "long long";
  std::string s = "    " + it + " rem_ = (" + it + ")i;\n";
  for (int64_t d = rank - 1; d >= 0; --d) {
    std::string dim = "(" + it + ")meta.v[" + std::to_string(dimsAt + d) + "]";
    s += "    const long long o" + std::to_string(d) + " = (long long)(rem_ % " + dim + "); rem_ /= " +
         dim + ";\n";
  }
  return s;
}

const char *kLoopBegin =
    "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;"
    " i += (long long)gridDim.x * blockDim.x) {\n";

/// Storage bits of `value` in element type `e` (pad fill).
std::string rawLiteral(Type e, double value) {
  if (auto ft = llvm::dyn_cast<FloatType>(e)) {
    if (e.isF32())
      return floatLiteral(value, false);
    if (e.isF64())
      return floatLiteral(value, true);
    APFloat f(value);
    bool lost;
    f.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    return "(" + storageType(e) + ")" + std::to_string(f.bitcastToAPInt().getZExtValue()) + "u";
  }
  if (isBool(e))
    return value != 0 ? "(unsigned char)1" : "(unsigned char)0";
  return "(" + storageType(e) + ")(" + std::to_string((long long)value) + "ll)";
}

/// One piece of a strided copy: for every index o of `dims`,
/// dst[dstBase + sum o_d * dstStrides_d] = src[srcBase + sum o_d * srcStrides_d],
/// where dst / src name kernel parameters ("out0", "in1").
struct CopyPart {
  std::string dst, src;
  SmallVector<int64_t> dims, dstStrides, srcStrides;
  int64_t dstBase = 0, srcBase = 0;
};

/// Drops unit dims and merges neighbours that are contiguous on both sides
/// (fewer divisions per element; a transpose of [B, T, H, D] to [B, H, T, D]
/// keeps its D-long rows).
void simplify(CopyPart &p) {
  CopyPart q = p;
  q.dims.clear();
  q.dstStrides.clear();
  q.srcStrides.clear();
  for (size_t d = 0; d < p.dims.size(); ++d) {
    if (p.dims[d] == 1)
      continue;
    if (!q.dims.empty() && q.dstStrides.back() == p.dstStrides[d] * p.dims[d] &&
        q.srcStrides.back() == p.srcStrides[d] * p.dims[d]) {
      q.dims.back() *= p.dims[d];
      q.dstStrides.back() = p.dstStrides[d];
      q.srcStrides.back() = p.srcStrides[d];
      continue;
    }
    q.dims.push_back(p.dims[d]);
    q.dstStrides.push_back(p.dstStrides[d]);
    q.srcStrides.push_back(p.srcStrides[d]);
  }
  if (q.dims.empty()) {
    q.dims = {1};
    q.dstStrides = {1};
    q.srcStrides = {1};
  }
  p = std::move(q);
}

/// Elements a part can move per 16-byte access: its innermost dim is
/// contiguous on both sides and every size, stride and base is a multiple.
int64_t vectorWidth(const CopyPart &p, int64_t elemBytes) {
  int64_t v = elemBytes > 0 && elemBytes <= 16 && 16 % elemBytes == 0 ? 16 / elemBytes : 1;
  if (v == 1 || p.dstStrides.back() != 1 || p.srcStrides.back() != 1 || p.dims.back() % v ||
      p.dstBase % v || p.srcBase % v)
    return 1;
  for (size_t d = 0; d + 1 < p.dims.size(); ++d)
    if (p.dstStrides[d] % v || p.srcStrides[d] % v)
      return 1;
  return v;
}

/// A kernel of strided copies (transpose, slice, broadcast, reshape, split,
/// concat). Shapes and strides are constants of the source, so the index
/// divisions are by constants; the index math is 32-bit below 2^31 elements.
/// When every part allows it, each thread moves 16 bytes (pointers that turn
/// out not to be 16-byte aligned at run time take a scalar loop instead).
FailureOr<KernelSource> copyKernel(Operation *op, Signature &sig, std::vector<CopyPart> parts,
                                   Type elt, llvm::StringRef kind) {
  int64_t total = 0;
  for (CopyPart &p : parts) {
    simplify(p);
    total += product(p.dims);
  }
  int64_t v = vectorWidth(parts.front(), storageBytes(elt));
  for (const CopyPart &p : parts)
    v = std::min(v, vectorWidth(p, storageBytes(elt)));
  if (v > 1)
    for (const CopyPart &p : parts)
      if (vectorWidth(p, storageBytes(elt)) % v)
        v = 1;
  int64_t n = total / v;
  sig.tail(n, {v});
  const std::string it = total < (int64_t(1) << 31) ? "unsigned" : "long long";
  auto lit = [&](int64_t x) { return std::to_string(x) + (it == "unsigned" ? "u" : "ll"); };
  std::string s = header(sig);
  if (v > 1) {
    // Every pointer once: 16-byte aligned or the scalar loop.
    std::vector<std::string> ptrs;
    for (const CopyPart &p : parts)
      for (const std::string &ptr : {p.dst, p.src})
        if (!llvm::is_contained(ptrs, ptr))
          ptrs.push_back(ptr);
    s += "  const bool vec_ =";
    for (auto [j, ptr] : llvm::enumerate(ptrs))
      s += std::string(j ? " &&" : "") + " ((unsigned long long)" + ptr + " % 16 == 0)";
    s += ";\n";
  }
  s += "  for (long long t_ = (long long)blockIdx.x * blockDim.x + threadIdx.x; t_ < n;"
       " t_ += (long long)gridDim.x * blockDim.x) {\n";
  s += "    " + it + " i = (" + it + ")t_ * " + lit(v) + ";\n";
  int64_t begin = 0;
  for (auto [j, p] : llvm::enumerate(parts)) {
    int64_t size = product(p.dims);
    bool last = j + 1 == parts.size();
    std::string cond = last ? "" : "if (i < " + lit(begin + size) + ") ";
    s += std::string("    ") + (j ? "else " : "") + cond + "{\n";
    s += "      " + it + " rem_ = i" + (begin ? " - " + lit(begin) : "") + ";\n";
    std::string dOff = lit(p.dstBase), sOff = lit(p.srcBase);
    for (int64_t d = (int64_t)p.dims.size() - 1; d >= 0; --d) {
      std::string o = "o" + std::to_string(d) + "_";
      if (d > 0)
        s += "      const " + it + " " + o + " = rem_ % " + lit(p.dims[d]) + "; rem_ /= " +
             lit(p.dims[d]) + ";\n";
      else
        s += "      const " + it + " " + o + " = rem_;\n";
      dOff += " + " + o + " * " + lit(p.dstStrides[d]);
      sOff += " + " + o + " * " + lit(p.srcStrides[d]);
    }
    s += "      const " + it + " d_ = " + dOff + ", s_ = " + sOff + ";\n";
    if (v > 1) {
      s += "      if (vec_) *reinterpret_cast<uint4 *>(" + p.dst + " + d_) = *reinterpret_cast<const uint4 *>(" +
           p.src + " + s_);\n";
      s += "      else for (int j_ = 0; j_ < " + std::to_string(v) + "; ++j_) " + p.dst + "[d_ + j_] = " +
           p.src + "[s_ + j_];\n";
    } else {
      s += "      " + p.dst + "[d_] = " + p.src + "[s_];\n";
    }
    s += "    }\n";
    begin += size;
  }
  s += "  }\n}\n";
  return makeKernel(op, std::move(s), sig, gridFor(n, 256), kind);
}

/// out = in[base + sum o_d * st_d] (dense out): transpose, slice, broadcast, reshape.
FailureOr<KernelSource> gatherKernel(Operation *op, SmallVector<int64_t> stridesOut, int64_t base,
                                     SmallVector<int64_t> outDims) {
  Value in = op->getOperand(0), out = op->getResult(0);
  Signature sig;
  sig.output(0, out);
  sig.input(0, in);
  CopyPart p{"out0", "in0", outDims, denseStrides(outDims), stridesOut, 0, base};
  return copyKernel(op, sig, {p}, eltOf(out), "gather");
}

FailureOr<KernelSource> padKernel(tc::PadOp op) {
  Value in = op.getInput(), out = op.getResult();
  ArrayRef<int64_t> is = shapeOf(in), os = shapeOf(out);
  int64_t r = os.size();
  Signature sig;
  sig.output(0, out);
  sig.input(0, in);
  std::vector<int64_t> meta(os.begin(), os.end());
  meta.insert(meta.end(), op.getLow().begin(), op.getLow().end());
  meta.insert(meta.end(), is.begin(), is.end());
  auto st = denseStrides(is);
  meta.insert(meta.end(), st.begin(), st.end());
  sig.tail(product(os), meta);
  std::string mode = op.getMode().str();
  std::string s = header(sig) + kLoopBegin + outIdx(r, 0, product(os));
  s += "    bool inside = true;\n    long long off = 0;\n";
  for (int64_t d = 0; d < r; ++d) {
    std::string ds = std::to_string(d);
    std::string low = "meta.v[" + std::to_string(r + d) + "]", dim = "meta.v[" + std::to_string(2 * r + d) + "]";
    s += "    long long q" + ds + " = o" + ds + " - " + low + ";\n";
    if (mode == "reflect")
      s += "    if (q" + ds + " < 0) q" + ds + " = -q" + ds + ";\n    if (q" + ds + " >= " + dim + ") q" + ds +
           " = " + dim + " == 1 ? 0 : 2 * (" + dim + " - 1) - q" + ds + ";\n";
    else if (mode == "edge")
      s += "    q" + ds + " = q" + ds + " < 0 ? 0 : (q" + ds + " >= " + dim + " ? " + dim + " - 1 : q" + ds + ");\n";
    else
      s += "    inside = inside && q" + ds + " >= 0 && q" + ds + " < " + dim + ";\n";
    s += "    off += q" + ds + " * meta.v[" + std::to_string(3 * r + d) + "];\n";
  }
  s += "    out0[i] = inside ? in0[off] : " + rawLiteral(eltOf(out), op.getValue().convertToDouble()) +
       ";\n  }\n}\n";
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return op.emitOpError() << "CUDA codegen: unknown pad mode '" << mode << "'";
  return makeKernel(op, std::move(s), sig, gridFor(product(os), 256), "pad");
}

FailureOr<KernelSource> insertSliceKernel(tc::InsertSliceOp op) {
  Value in = op.getSource(), out = op.getResult();
  ArrayRef<int64_t> is = shapeOf(in), os = shapeOf(out);
  int64_t r = os.size();
  Signature sig;
  sig.output(0, out);
  sig.input(0, in);
  std::vector<int64_t> meta(os.begin(), os.end());
  meta.insert(meta.end(), op.getStarts().begin(), op.getStarts().end());
  meta.insert(meta.end(), op.getStrides().begin(), op.getStrides().end());
  meta.insert(meta.end(), is.begin(), is.end());
  auto st = denseStrides(is);
  meta.insert(meta.end(), st.begin(), st.end());
  sig.tail(product(os), meta);
  std::string s = header(sig) + kLoopBegin + outIdx(r, 0, product(os));
  s += "    bool inside = true;\n    long long off = 0;\n";
  for (int64_t d = 0; d < r; ++d) {
    std::string ds = std::to_string(d);
    auto m = [&](int64_t block) { return "meta.v[" + std::to_string(block * r + d) + "]"; };
    s += "    { const long long t = o" + ds + " - " + m(1) + ", q = t / " + m(2) + ";\n";
    s += "      inside = inside && t % " + m(2) + " == 0 && q >= 0 && q < " + m(3) + ";\n";
    s += "      off += q * " + m(4) + "; }\n";
  }
  s += "    out0[i] = inside ? in0[off] : " + rawLiteral(eltOf(out), 0.0) + ";\n  }\n}\n";
  return makeKernel(op, std::move(s), sig, gridFor(product(os), 256), "insert_slice");
}

/// Each input is a part: dense in the input, at its offset along `axis` in
/// the result.
FailureOr<KernelSource> concatKernel(tc::ConcatOp op) {
  Value out = op.getResult();
  Signature sig;
  sig.output(0, out);
  for (auto [j, v] : llvm::enumerate(op.getInputs()))
    sig.input(j, v);
  auto ost = denseStrides(shapeOf(out));
  int64_t axis = op.getAxis(), at = 0;
  std::vector<CopyPart> parts;
  for (auto [j, v] : llvm::enumerate(op.getInputs())) {
    SmallVector<int64_t> dims(shapeOf(v));
    parts.push_back({"out0", "in" + std::to_string(j), dims, ost, denseStrides(dims),
                     at * ost[axis], 0});
    at += dims[axis];
  }
  return copyKernel(op, sig, std::move(parts), eltOf(out), "concat");
}

/// Each result is a part: dense in the result, read at its offset along
/// `axis` of the input.
FailureOr<KernelSource> splitKernel(tc::SplitOp op) {
  Value in = op.getInput();
  Signature sig;
  for (auto [j, r] : llvm::enumerate(op.getResults()))
    sig.output(j, r);
  sig.input(0, in);
  auto ist = denseStrides(shapeOf(in));
  int64_t axis = op.getAxis(), at = 0;
  std::vector<CopyPart> parts;
  for (auto [j, r] : llvm::enumerate(op.getResults())) {
    SmallVector<int64_t> dims(shapeOf(r));
    parts.push_back({"out" + std::to_string(j), "in0", dims, denseStrides(dims), ist, 0,
                     at * ist[axis]});
    at += dims[axis];
  }
  return copyKernel(op, sig, std::move(parts), eltOf(in), "split");
}

/// Any reduction over any axes: one thread per result element.
FailureOr<KernelSource> reduceKernel(Operation *op) {
  Value in = op->getOperand(0), out = op->getResult(0);
  Type e = eltOf(in);
  if (!computable(e) || isBool(e))
    return op->emitOpError() << "CUDA codegen: unsupported element type " << e;
  ArrayRef<int64_t> is = shapeOf(in);
  auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
  auto st = denseStrides(is);
  SmallVector<int64_t> keptDims, keptSt, redDims, redSt;
  for (int64_t d = 0; d < (int64_t)is.size(); ++d) {
    if (llvm::is_contained(axes, d)) {
      redDims.push_back(is[d]);
      redSt.push_back(st[d]);
    } else {
      keptDims.push_back(is[d]);
      keptSt.push_back(st[d]);
    }
  }
  int64_t kr = keptDims.size(), rr = redDims.size();
  std::vector<int64_t> meta(keptDims.begin(), keptDims.end());
  meta.insert(meta.end(), keptSt.begin(), keptSt.end());
  meta.insert(meta.end(), redDims.begin(), redDims.end());
  meta.insert(meta.end(), redSt.begin(), redSt.end());
  meta.push_back(product(redDims));
  Signature sig;
  sig.output(0, out);
  sig.input(0, in);
  sig.tail(product(keptDims), meta);
  std::string acc = computeType(e);
  bool fl = isFloat(e), dbl = e.isF64();
  std::string init, comb;
  if (llvm::isa<tc::ReduceSumOp>(op) || llvm::isa<tc::ReduceMeanOp>(op)) {
    init = "0";
    comb = "acc + x";
  } else if (llvm::isa<tc::ReduceProdOp>(op)) {
    init = "1";
    comb = "acc * x";
  } else if (llvm::isa<tc::ReduceMaxOp>(op)) {
    init = fl ? floatLiteral(-INFINITY, dbl) : (isU64(e) ? "0ull" : "(-9223372036854775807ll - 1)");
    comb = "tc_max(acc, x)";
  } else {
    init = fl ? floatLiteral(INFINITY, dbl) : (isU64(e) ? "~0ull" : "9223372036854775807ll");
    comb = "tc_min(acc, x)";
  }
  // Work split: G threads share one output (then combine their partials in
  // a fixed order through shared memory: deterministic), OPB outputs per
  // block. Column reductions (the innermost kept dim contiguous: bias and
  // norm-weight gradients, [rows, C] -> [C]) put 8..32 consecutive outputs
  // on the lanes so loads coalesce, the other threads down the rows; reductions over
  // inner dims take a block per output; short ones a thread per output.
  const int64_t M = product(redDims), N = product(keptDims);
  int64_t threads = 256, G = 256, OPB = 1;
  if (M < 64) {
    G = 1;
    OPB = 256;
  } else if (kr > 0 && keptSt.back() == 1 && keptDims.back() >= 8) {
    // 32 outputs per block (128-byte rows of f32), fewer when that leaves
    // SMs idle (768 outputs: 8 per block, 96 blocks of 128 row groups).
    threads = 1024;
    OPB = 32;
    while (OPB > 8 && (N + OPB - 1) / OPB < 264)
      OPB /= 2;
    G = threads / OPB;
  }
  std::string m = "meta.v[" + std::to_string(2 * kr + 2 * rr) + "]";
  // Offset of reduced element r: the outermost reduced dim needs no modulo,
  // the others divide in 32 bits when the reduction is below 2^31.
  auto offsetCode = [&](const std::string &ind) {
    const std::string it = M < (int64_t(1) << 31) ? "unsigned" : "long long";
    std::string c = ind + it + " rr_ = (" + it + ")r;\n" + ind + "long long off = base;\n";
    for (int64_t d = rr - 1; d >= 1; --d) {
      std::string dim = "(" + it + ")meta.v[" + std::to_string(2 * kr + d) + "]";
      c += ind + "off += (long long)(rr_ % " + dim + ") * meta.v[" +
           std::to_string(2 * kr + rr + d) + "]; rr_ /= " + dim + ";\n";
    }
    if (rr > 0)
      c += ind + "off += (long long)rr_ * meta.v[" + std::to_string(2 * kr + rr) + "];\n";
    return c;
  };
  auto baseCode = [&]() {
    std::string c = "    long long base = 0;\n";
    for (int64_t d = 0; d < kr; ++d)
      c += "    base += o" + std::to_string(d) + " * meta.v[" + std::to_string(kr + d) + "];\n";
    return c;
  };
  // Few outputs and long columns (bias / norm gradients of [16384, 768]):
  // the rows are also split over R blocks; each block stores its partial
  // sums in module memory and the last block of a tile (a counter) combines
  // the R partials in order: deterministic, and enough blocks for every SM.
  // Each lane owns V consecutive columns (16 bytes of a row when every
  // stride allows it and the input is 16-byte aligned at run time), so a
  // warp reads 512 contiguous bytes per row.
  int64_t V = 1;
  if (OPB > 1 && G > 1 && kr > 0) {
    int64_t bytes = storageBytes(e);
    V = bytes > 0 && bytes <= 8 && 16 % bytes == 0 ? 16 / bytes : 1;
    auto divisible = [&](int64_t x) { return x % V == 0; };
    if (!divisible(keptDims.back()) || !llvm::all_of(redSt, divisible) ||
        !llvm::all_of(ArrayRef<int64_t>(keptSt).drop_back(), divisible))
      V = 1;
  }
  const int64_t tiles = (N + 32 * V - 1) / (32 * V);
  if (OPB > 1 && G > 1 && tiles < 264 && M >= 4096 && N <= 65536) {
    const int64_t R = std::clamp<int64_t>((264 + tiles - 1) / tiles, 2, std::min<int64_t>(64, M / 256));
    const std::string Rs = std::to_string(R), Ns = std::to_string(N), Ts = std::to_string(tiles),
                      Vs = std::to_string(V);
    std::string s = std::string(kPrelude) + "__device__ " + acc + " tc_cpart_[" +
                    std::to_string(R * N) + "];\n__device__ unsigned int tc_cdone_[" + Ts + "];\n" +
                    "#define TC_COMB(acc, x) (" + comb + ")\n" +
                    "\nextern \"C\" __global__ void __launch_bounds__(256) @KERNEL@(\n    " +
                    sig.text + ") {\n";
    s += "  __shared__ " + acc + " part_[256 * " + Vs + "];\n  __shared__ bool last_;\n";
    s += "  const int lane = threadIdx.x % 32, grp = threadIdx.x / 32;\n";
    s += "  const long long tile_ = blockIdx.x % " + Ts + ", rpart_ = blockIdx.x / " + Ts + ";\n";
    s += "  const long long i = (tile_ * 32 + lane) * " + Vs + ";\n";
    s += "  const long long chunk_ = (" + m + " + " + Rs + " - 1) / " + Rs + ", r0_ = rpart_ * chunk_;\n";
    s += "  const long long r1_ = " + m + " < r0_ + chunk_ ? " + m + " : r0_ + chunk_;\n";
    s += "  " + acc + " acc[" + Vs + "];\n";
    s += "  for (int j_ = 0; j_ < " + Vs + "; ++j_) acc[j_] = " + init + ";\n";
    if (V > 1)
      s += "  const bool vec_ = ((unsigned long long)in0 % 16) == 0;\n";
    s += "  if (i < n) {\n" + outIdx(kr, 0, N) + baseCode();
    s += "    for (long long r = r0_ + grp; r < r1_; r += 8) {\n" + offsetCode("      ");
    std::string st = storageType(e);
    if (V > 1) {
      s += "      if (vec_) {\n        const TcVec<" + st + ", " + Vs + "> v_ = *reinterpret_cast<const TcVec<" +
           st + ", " + Vs + "> *>(in0 + off);\n";
      s += "        for (int j_ = 0; j_ < " + Vs + "; ++j_) acc[j_] = TC_COMB(acc[j_], " +
           loadExpr(e, "v_.v[j_]") + ");\n      } else {\n";
      s += "        for (int j_ = 0; j_ < " + Vs + "; ++j_) acc[j_] = TC_COMB(acc[j_], " +
           loadExpr(e, "in0[off + j_]") + ");\n      }\n";
    } else {
      s += "      acc[0] = TC_COMB(acc[0], " + loadExpr(e, "in0[off]") + ");\n";
    }
    s += "    }\n  }\n";
    s += "  for (int j_ = 0; j_ < " + Vs + "; ++j_) part_[threadIdx.x * " + Vs + " + j_] = acc[j_];\n";
    s += "  __syncthreads();\n";
    s += "  if (grp == 0) {\n    for (int g_ = 1; g_ < 8; ++g_)\n      for (int j_ = 0; j_ < " + Vs +
         "; ++j_) acc[j_] = TC_COMB(acc[j_], part_[(g_ * 32 + lane) * " + Vs + " + j_]);\n";
    s += "    if (i < n)\n      for (int j_ = 0; j_ < " + Vs + "; ++j_) tc_cpart_[rpart_ * " + Ns +
         " + i + j_] = acc[j_];\n  }\n";
    s += "  __threadfence();\n  __syncthreads();\n";
    s += "  if (threadIdx.x == 0) last_ = atomicAdd(&tc_cdone_[tile_], 1u) == " + Rs + " - 1;\n";
    s += "  __syncthreads();\n  if (!last_) return;\n  __threadfence();\n";
    s += "  if (grp == 0 && i < n) {\n    for (int j_ = 0; j_ < " + Vs + "; ++j_) {\n";
    s += "      " + acc + " a_ = " + init + ";\n";
    s += "      for (int p_ = 0; p_ < " + Rs + "; ++p_)\n        a_ = TC_COMB(a_, ((volatile " + acc +
         " *)tc_cpart_)[p_ * " + Ns + " + i + j_]);\n";
    if (llvm::isa<tc::ReduceMeanOp>(op))
      s += "      a_ = a_ / (" + acc + ")" + m + ";\n";
    s += "      out0[i + j_] = " + storeExpr(eltOf(out), "a_") + ";\n    }\n  }\n";
    s += "  if (threadIdx.x == 0) tc_cdone_[tile_] = 0;\n}\n";
    return makeKernel(op, std::move(s), sig, tiles * R, "reduce_cols");
  }
  const std::string Gs = std::to_string(G), Os = std::to_string(OPB);
  std::string s = std::string(kPrelude) + "\nextern \"C\" __global__ void __launch_bounds__(" +
                  std::to_string(threads) + ") @KERNEL@(\n    " + sig.text + ") {\n";
  s += "  __shared__ " + acc + " part_[" + std::to_string(threads) + "];\n";
  s += "  const int lane = threadIdx.x % " + Os + ", grp = threadIdx.x / " + Os + ";\n";
  s += "  for (long long t0_ = (long long)blockIdx.x * " + Os + "; t0_ < n; t0_ += (long long)gridDim.x * " +
       Os + ") {\n";
  s += "    const long long i = t0_ + lane;\n";
  s += "    " + acc + " acc = " + init + ";\n";
  s += "    if (i < n) {\n" + outIdx(kr, 0, N);
  s += "    long long base = 0;\n";
  for (int64_t d = 0; d < kr; ++d)
    s += "    base += o" + std::to_string(d) + " * meta.v[" + std::to_string(kr + d) + "];\n";
  s += "    for (long long r = grp; r < " + m + "; r += " + Gs + ") {\n" + offsetCode("      ");
  s += "      const " + acc + " x = " + loadExpr(e, "in0[off]") + ";\n      acc = " + comb + ";\n    }\n";
  s += "    }\n";
  if (G > 1) {
    s += "    part_[threadIdx.x] = acc;\n    __syncthreads();\n";
    s += "    if (grp == 0 && i < n) {\n";
    s += "      for (int g_ = 1; g_ < " + Gs + "; ++g_) {\n        const " + acc + " x = part_[g_ * " + Os +
         " + lane];\n        acc = " + comb + ";\n      }\n";
  } else {
    s += "    if (i < n) {\n";
  }
  if (llvm::isa<tc::ReduceMeanOp>(op))
    s += "      acc = acc / (" + acc + ")" + m + ";\n";
  s += "      out0[i] = " + storeExpr(eltOf(out), "acc") + ";\n    }\n";
  if (G > 1)
    s += "    __syncthreads();\n";
  s += "  }\n}\n";
  return makeKernel(op, std::move(s), sig, gridFor(N, OPB), "reduce_any", threads);
}

} // namespace

bool isKernelOp(Operation *op) {
  // Gathers are the embedding library call or a generic kernel of their own.
  return llvm::isa<tc::FusionOp>(op) || tc::isReduction(op) ||
         (tc::isDataMovement(op) && !llvm::isa<tc::GatherOp>(op));
}

FailureOr<KernelSource> generateKernel(Operation *op) {
  for (Type t : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes())) {
    auto rt = llvm::dyn_cast<RankedTensorType>(t);
    if (!rt || !rt.hasStaticShape() || storageType(rt.getElementType()).empty())
      return op->emitOpError() << "CUDA codegen: unsupported type " << t;
  }
  if (auto f = llvm::dyn_cast<tc::FusionOp>(op))
    return FusionGen(f).generate();
  Value in = op->getNumOperands() ? op->getOperand(0) : Value();
  if (auto t = llvm::dyn_cast<tc::TransposeOp>(op)) {
    auto st = denseStrides(shapeOf(in));
    SmallVector<int64_t> s;
    for (int64_t p : t.getPermutation())
      s.push_back(st[p]);
    return gatherKernel(op, s, 0, SmallVector<int64_t>(shapeOf(t.getResult())));
  }
  if (auto sl = llvm::dyn_cast<tc::SliceOp>(op)) {
    auto st = denseStrides(shapeOf(in));
    SmallVector<int64_t> s;
    int64_t base = 0;
    for (size_t d = 0; d < st.size(); ++d) {
      s.push_back(st[d] * sl.getStrides()[d]);
      base += sl.getStarts()[d] * st[d];
    }
    return gatherKernel(op, s, base, SmallVector<int64_t>(shapeOf(sl.getResult())));
  }
  if (auto b = llvm::dyn_cast<tc::BroadcastOp>(op)) {
    auto os = shapeOf(b.getResult());
    return gatherKernel(op, broadcastStrides(shapeOf(in), os), 0, SmallVector<int64_t>(os));
  }
  if (llvm::isa<tc::ReshapeOp>(op)) {
    int64_t n = product(shapeOf(in));
    return gatherKernel(op, {1}, 0, {n});
  }
  if (auto c = llvm::dyn_cast<tc::ConcatOp>(op))
    return concatKernel(c);
  if (auto sp = llvm::dyn_cast<tc::SplitOp>(op))
    return splitKernel(sp);
  if (auto p = llvm::dyn_cast<tc::PadOp>(op))
    return padKernel(p);
  if (auto s = llvm::dyn_cast<tc::InsertSliceOp>(op))
    return insertSliceKernel(s);
  if (llvm::isa<tc::ReduceSumOp, tc::ReduceMeanOp, tc::ReduceMaxOp, tc::ReduceMinOp, tc::ReduceProdOp>(op))
    return reduceKernel(op);
  return op->emitOpError() << "CUDA codegen: no kernel for this op";
}

/// The one op a standalone kernel's body holds (then the yield), else null.
static Operation *soleOp(tcx::KernelOp kernel) {
  Block &body = kernel.getEntry();
  if (body.empty() || std::next(body.begin()) == body.end() ||
      std::next(body.begin(), 2) != body.end())
    return nullptr;
  return &body.front();
}

bool hasGeneratedKernel(tcx::KernelOp kernel) {
  if (kernel.getKind() == "fusion")
    return true;
  Operation *op = soleOp(kernel);
  return op && isKernelOp(op) && !llvm::isa<tc::FusionOp>(op);
}

FailureOr<KernelSource> generateKernel(tcx::KernelOp kernel) {
  if (kernel.getKind() == "fusion") {
    for (Type t : llvm::concat<Type>(kernel.getEntry().getArgumentTypes(),
                                     kernel.getEntry().getTerminator()->getOperandTypes())) {
      auto rt = llvm::dyn_cast<RankedTensorType>(t);
      if (!rt || !rt.hasStaticShape() || storageType(rt.getElementType()).empty())
        return kernel.emitOpError() << "CUDA codegen: unsupported type " << t;
    }
    return FusionGen(kernel).generate();
  }
  if (!hasGeneratedKernel(kernel))
    return kernel.emitOpError() << "CUDA codegen: no kernel for kind '" << kernel.getKind()
                                << "'";
  return generateKernel(soleOp(kernel));
}

FailureOr<std::vector<KernelSource>> generateKernels(ModuleOp module) {
  std::vector<KernelSource> out;
  bool ok = true;
  module.walk([&](Operation *op) {
    if (!isKernelOp(op) || llvm::isa<tc::FusionOp>(op->getParentOp()))
      return;
    auto k = generateKernel(op);
    if (failed(k)) {
      ok = false;
      return;
    }
    out.push_back(std::move(*k));
  });
  if (!ok)
    return failure();
  return out;
}

std::string nvrtcArch(llvm::StringRef target) {
  const TargetArch *a = findTargetArch(target.str());
  return a ? a->nvrtc : "";
}

std::optional<std::string> cubinArch(llvm::ArrayRef<uint8_t> c) {
  // ELF64 little-endian with e_machine EM_CUDA (190). With the CUDA 13 ELF
  // ABI (e_ident[EI_ABIVERSION] = 8) the SM number is e_flags bits 8..15
  // (0x5a = 90, 0x78 = 120), the same for sm_120, sm_120a and sm_120f; the
  // variant is recorded in the toolkit-info note ptxas writes
  // (".note.nv.tkinfo": "... -arch sm_120a -m 64"), which is where cuobjdump
  // reads it too. The note must agree with e_flags.
  if (c.size() < 64 || c[0] != 0x7f || c[1] != 'E' || c[2] != 'L' || c[3] != 'F' || c[4] != 2)
    return std::nullopt;
  uint16_t machine = c[18] | (c[19] << 8);
  if (machine != 190)
    return std::nullopt;
  uint32_t flags = c[48] | (c[49] << 8) | (c[50] << 16) | ((uint32_t)c[51] << 24);
  unsigned sm = c[8] >= 8 ? (flags >> 8) & 0xff : flags & 0xff;
  std::string base = "sm_" + std::to_string(sm);
  llvm::StringRef bytes(reinterpret_cast<const char *>(c.data()), c.size());
  size_t p = bytes.find("-arch sm_");
  if (p == llvm::StringRef::npos)
    return base;
  llvm::StringRef arch = bytes.substr(p + 6).take_while([](char ch) { return std::isalnum(ch) || ch == '_'; });
  if (!arch.starts_with(base) || arch.size() > base.size() + 1)
    return base + " (note says " + arch.str() + ")";
  return arch.str();
}

} // namespace tc::cuda
