//===- KernelSupport.h - what CUDA codegen's generators share ---*- C++ -*-===//
//
// Internal to compiler/codegen/cuda: the MLIR type -> C storage/compute type
// mapping, literals, strides, kernel naming (kind + FNV-1a hash of the
// source), the kernel signature builder, and the generators of each source
// file (ScalarExpr, FusionKernels, ShapeKernels, ReduceKernels) that
// CudaCodegen.cpp dispatches to.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_CODEGEN_CUDA_KERNELSUPPORT_H
#define TC_COMPILER_CODEGEN_CUDA_KERNELSUPPORT_H

#include "compiler/codegen/cuda/CudaCodegen.h"
#include "compiler/codegen/cuda/Prelude.h"

#include "dialects/tc/IR/TcOps.h"
#include "dialects/tcx/IR/TcxOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace tc::cuda::detail {
using namespace mlir;

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

inline RankedTensorType tensorOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }
inline Type eltOf(Value v) { return tensorOf(v).getElementType(); }
inline ArrayRef<int64_t> shapeOf(Value v) { return tensorOf(v).getShape(); }

inline std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// C type of the storage format; empty if unsupported.
inline std::string storageType(Type e) {
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

inline int64_t storageBytes(Type e) {
  if (auto it = llvm::dyn_cast<IntegerType>(e))
    return it.getWidth() == 1 ? 1 : it.getWidth() / 8;
  return std::max<int64_t>(1, llvm::cast<FloatType>(e).getWidth() / 8);
}

/// The FP8 formats generated kernels convert (kFp8Prelude): values are
/// computed in float, stored as bytes.
inline bool isFp8(Type e) { return llvm::isa<Float8E4M3FNType, Float8E5M2Type>(e); }

/// Whether elementwise math is generated for this element type.
inline bool computable(Type e) {
  return e.isF32() || e.isF64() || e.isF16() || e.isBF16() || isFp8(e) ||
         (llvm::isa<IntegerType>(e) && !storageType(e).empty());
}

/// The suffix of the kFp8Prelude conversions of an FP8 type ("e4m3", "e5m2").
inline std::string fp8Name(Type e) { return llvm::isa<Float8E5M2Type>(e) ? "e5m2" : "e4m3"; }

inline bool isFloat(Type e) { return llvm::isa<FloatType>(e); }
inline bool isBool(Type e) { return e.isInteger(1); }
inline bool isU64(Type e) { return e.isUnsignedInteger(64); }

/// C type values of this element type are computed in.
inline std::string computeType(Type e) {
  if (e.isF64())
    return "double";
  if (isFloat(e))
    return "float";
  if (isBool(e))
    return "bool";
  return isU64(e) ? "unsigned long long" : "long long";
}

inline std::string loadExpr(Type e, const std::string &raw) {
  if (e.isBF16())
    return "tc_bf16_f32(" + raw + ")";
  if (e.isF16())
    return "tc_f16_f32(" + raw + ")";
  if (isFp8(e))
    return "tc_" + fp8Name(e) + "_f32(" + raw + ")";
  if (isBool(e))
    return "(" + raw + " != 0)";
  if (llvm::isa<IntegerType>(e))
    return "(" + computeType(e) + ")" + raw;
  return raw;
}

inline std::string storeExpr(Type e, const std::string &v) {
  if (e.isBF16())
    return "tc_f32_bf16(" + v + ")";
  if (e.isF16())
    return "tc_f32_f16(" + v + ")";
  if (isFp8(e))
    return "tc_f32_" + fp8Name(e) + "(" + v + ")";
  if (isBool(e))
    return "(unsigned char)(" + v + " ? 1 : 0)";
  return "(" + storageType(e) + ")(" + v + ")";
}

/// Wraps an integer result to its declared width (the reference does after
/// every op); 16-bit floats are not rounded between fused ops.
inline std::string wrapInt(Type e, const std::string &v) {
  auto it = llvm::dyn_cast<IntegerType>(e);
  if (!it || it.getWidth() == 1 || it.getWidth() == 64)
    return v;
  return "(long long)(" + storageType(e) + ")(" + v + ")";
}

inline std::string floatLiteral(double v, bool isDouble) {
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
inline std::string splatLiteral(tc::ConstantOp c) {
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
inline SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> shape, ArrayRef<int64_t> iter) {
  SmallVector<int64_t> out(iter.size(), 0);
  int64_t stride = 1;
  for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
    int64_t od = d + (int64_t)iter.size() - (int64_t)shape.size();
    out[od] = shape[d] == 1 && iter[od] != 1 ? 0 : stride;
    stride *= shape[d];
  }
  return out;
}

inline SmallVector<int64_t> denseStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t d = (int64_t)shape.size() - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

inline int64_t product(ArrayRef<int64_t> s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

inline std::string hashName(llvm::StringRef kind, const std::string &source) {
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
inline void finalize(KernelSource &k, llvm::StringRef kind) {
  k.name = hashName(kind, k.source);
  for (size_t p; (p = k.source.find("@KERNEL@")) != std::string::npos;)
    k.source.replace(p, 8, k.name);
}

/// Row reductions split over blocks: at most this many rows, parts per row.
inline constexpr int64_t kSplitRows = 16, kSplitParts = 1024;

inline int64_t gridFor(int64_t work, int64_t perBlock) {
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
inline KernelSource makeKernel(Operation *op, std::string source, Signature &sig, int64_t grid,
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

/// Decomposes flat `i` into o0..o{rank-1} (dims at meta[dimsAt..]); in 32
/// bits when the space has fewer than 2^31 elements (`total`).
inline std::string outIdx(int64_t rank, int64_t dimsAt, int64_t total = INT64_MAX) {
  const std::string it = total < (int64_t(1) << 31) ? "unsigned" : "long long";
  std::string s = "    " + it + " rem_ = (" + it + ")i;\n";
  for (int64_t d = rank - 1; d >= 0; --d) {
    std::string dim = "(" + it + ")meta.v[" + std::to_string(dimsAt + d) + "]";
    s += "    const long long o" + std::to_string(d) + " = (long long)(rem_ % " + dim + "); rem_ /= " +
         dim + ";\n";
  }
  return s;
}

/// Column reductions over tiles of 32 * W columns and R row parts (a block
/// each: tile_ = its index % tiles, rpart_ = / tiles; 8 warps, lane `lane`
/// holding W sums `accs`[0..W) of the columns from `first` when `valid`):
/// the block combines its warps in order (`comb`(a, x): C code of a
/// combined with x) into __shared__ part_, warp 0 stores the part's
/// partials into tc_cpart_[rpart_ * cols + column], and every block but the
/// last of its tile (counter tc_cdone_[tile_], R arrivals; __shared__ bool
/// last_) returns. Then the caller's code runs in the tile's last block
/// (tileColumnTotals: the tile's columns, each the R partials in order).
inline std::string
tileColumnPartials(const std::string &accs, const std::string &first, const std::string &valid,
                   int64_t W, const std::string &cols, int64_t R,
                   const std::function<std::string(std::string, std::string)> &comb) {
  const std::string Ws = std::to_string(W);
  std::string s = "#pragma unroll\n  for (int j_ = 0; j_ < " + Ws + "; ++j_) part_[threadIdx.x * " +
                  Ws + " + j_] = " + accs + "[j_];\n";
  s += "  __syncthreads();\n";
  s += "  if (grp == 0 && " + valid +
       ") {\n    for (int g_ = 1; g_ < 8; ++g_)\n#pragma unroll\n"
       "      for (int j_ = 0; j_ < " +
       Ws + "; ++j_) " + accs +
       "[j_] = " + comb(accs + "[j_]", "part_[(g_ * 32 + lane) * " + Ws + " + j_]") + ";\n";
  s += "#pragma unroll\n    for (int j_ = 0; j_ < " + Ws + "; ++j_) tc_cpart_[rpart_ * " + cols +
       " + " + first + " + j_] = " + accs + "[j_];\n  }\n";
  s += "  __threadfence();\n  __syncthreads();\n";
  s += "  if (threadIdx.x == 0) last_ = atomicAdd(&tc_cdone_[tile_], 1u) == " + std::to_string(R) +
       " - 1;\n";
  s += "  __syncthreads();\n  if (!last_) return;\n  __threadfence();\n";
  return s;
}

/// In the last block of a tile (after tileColumnPartials): opens a loop
/// over the tile's columns col_ < `cols`, one a thread, each with a_ (type
/// `acc`, from `init`) the combination of its R partials in part order
/// (__ldcg: from L2, where the other blocks wrote them, and free to be
/// issued ahead, unlike volatile loads). The caller stores a_ and closes it.
inline std::string
tileColumnTotals(const std::string &acc, const std::string &init, int64_t W,
                 const std::string &cols, int64_t R,
                 const std::function<std::string(std::string, std::string)> &comb) {
  const std::string Ws = std::to_string(W);
  std::string s = "  for (long long c_ = threadIdx.x; c_ < 32 * " + Ws + "; c_ += 256) {\n";
  s += "    const long long col_ = tile_ * 32 * " + Ws + " + c_;\n    if (col_ >= " + cols +
       ") break;\n";
  s += "    " + acc + " a_ = " + init + ";\n";
  s += "#pragma unroll 16\n    for (int p_ = 0; p_ < " + std::to_string(R) +
       "; ++p_)\n      a_ = " + comb("a_", "__ldcg(&tc_cpart_[p_ * " + cols + " + col_])") + ";\n";
  return s;
}

//===----------------------------------------------------------------------===//
// The generators
//===----------------------------------------------------------------------===//

/// C expression of an elementwise op whose operands are the C expressions
/// `a` (compute type of the operand element type). Empty if unsupported.
std::string opExpr(Operation *op, ArrayRef<std::string> a);

/// The kernel of a tc.fusion, or of a tcx.kernel of kind "fusion" (its body).
FailureOr<KernelSource> fusionKernel(tc::FusionOp fusion, const CodegenOptions &options);
FailureOr<KernelSource> fusionKernel(tcx::KernelOp kernel, const CodegenOptions &options);

/// out = in[base + sum o_d * st_d] (dense out): transpose, slice, broadcast, reshape.
FailureOr<KernelSource> gatherKernel(Operation *op, SmallVector<int64_t> stridesOut, int64_t base,
                                     SmallVector<int64_t> iter);
FailureOr<KernelSource> indexGatherKernel(tc::GatherOp op);
FailureOr<KernelSource> padKernel(tc::PadOp op);
FailureOr<KernelSource> insertSliceKernel(tc::InsertSliceOp op);
FailureOr<KernelSource> rotaryKernel(tc::RotaryOp op);
FailureOr<KernelSource> concatKernel(tc::ConcatOp op);
FailureOr<KernelSource> splitKernel(tc::SplitOp op);
/// Any reduction over any axes: one thread per result element.
FailureOr<KernelSource> reduceKernel(Operation *op);

} // namespace tc::cuda::detail

#endif // TC_COMPILER_CODEGEN_CUDA_KERNELSUPPORT_H
