//===- ShapeKernels.cpp - transpose, slice, pad, concat, split ------------===//
//
// Part of CUDA code generation (CudaCodegen.h gives the kernel ABI).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/KernelSupport.h"

namespace tc::cuda::detail {

//===----------------------------------------------------------------------===//
// Standalone shape ops and reductions
//===----------------------------------------------------------------------===//

std::string header(Signature &sig) {
  return std::string(kPrelude) + "\nextern \"C\" __global__ void __launch_bounds__(256) @KERNEL@(\n    " +
         sig.text + ") {\n";
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

/// Side of transposeTileKernel's square tiles; both sides of a transpose at
/// least this long take it.
constexpr int64_t kTransposeTile = 32;

/// A copy whose innermost (dense) output dim `a` is strided in the input
/// while another dim `b` is the input's contiguous one: a transpose of the
/// [b, a] planes. The strided copy would read one element per 32-byte
/// sector (an fp8 [8192, 8192] transpose took 700 us, its bytes ~40);
/// here a block moves a tile through shared memory, reading rows of b and
/// writing rows of a, both coalesced. The other dims index the planes.
///
/// 1- and 2-byte elements move as 32-bit words (V = 4 or 2 elements) where
/// the sizes, strides and bases allow it and the pointers are 4-byte
/// aligned at run time: a tile of T = 32 V square; a thread loads V rows'
/// words, transposes the V x V elements in registers (__byte_perm) and
/// stores V words of the transposed tile to shared memory (rows of V words
/// and V lanes interleaved: no bank conflicts), then a warp writes an output
/// row's 32 words (one byte a thread took 156 us for an fp8 [8192, 8192],
/// 0.86 TB/s). Otherwise, and for 4-byte elements, 32 x 32 element tiles.
FailureOr<KernelSource> transposeTileKernel(Operation *op, Signature &sig, const CopyPart &p,
                                            size_t b, Type elt) {
  const size_t a = p.dims.size() - 1;
  const int64_t A = p.dims[a], B = p.dims[b], bytes = storageBytes(elt);
  int64_t V = bytes == 1 || bytes == 2 ? 4 / bytes : 1;
  if (V > 1) {
    // Every word starts at a multiple of V elements: the bases, the rows'
    // strides (a's in the input, b's in the output) and the planes'.
    bool words = A % V == 0 && B % V == 0 && p.srcBase % V == 0 && p.dstBase % V == 0 &&
                 p.srcStrides[a] % V == 0;
    for (size_t d = 0; d < a; ++d)
      words = words && p.dstStrides[d] % V == 0 && (d == b || p.srcStrides[d] % V == 0);
    if (!words)
      V = 1;
  }
  const int64_t T = kTransposeTile * V;
  const int64_t tilesA = (A + T - 1) / T, tilesB = (B + T - 1) / T;
  int64_t planes = 1;
  for (size_t d = 0; d < a; ++d)
    if (d != b)
      planes *= p.dims[d];
  const int64_t blocks = tilesA * tilesB * planes;
  sig.tail(blocks, {T});
  // 32-bit index math where every offset (the input's, past a slice's base,
  // too) stays below 2^31.
  int64_t reach = std::max(p.srcBase, p.dstBase);
  for (size_t d = 0; d <= a; ++d)
    reach += (p.dims[d] - 1) * std::max(std::abs(p.srcStrides[d]), std::abs(p.dstStrides[d]));
  const std::string it = reach < (int64_t(1) << 31) ? "unsigned" : "long long";
  auto lit = [&](int64_t x) { return std::to_string(x) + (it == "unsigned" ? "u" : "ll"); };
  const std::string st = storageType(elt), Ts = std::to_string(kTransposeTile);
  const std::string sa = lit(p.srcStrides[a]), sb = lit(p.dstStrides[b]);
  std::string s = header(sig);
  s += "  __shared__ " + st + " tile_[" + Ts + "][" + Ts + " + 1];\n";
  if (V > 1) {
    // The transposed tile: T rows (b) of 32 words (V elements of a each).
    s += "  __shared__ unsigned tileT_[" + std::to_string(T) + "][33];\n";
    s += "  const bool vec_ = ((unsigned long long)in0 % 4 == 0) && "
         "((unsigned long long)out0 % 4 == 0);\n";
  }
  s += "  const int tx_ = threadIdx.x % " + Ts + ", ty_ = threadIdx.x / " + Ts + ";\n";
  s += "  for (long long t_ = blockIdx.x; t_ < n; t_ += gridDim.x) {\n";
  s += "    " + it + " rem_ = (" + it + ")t_;\n";
  s += "    const " + it + " a0_ = rem_ % " + lit(tilesA) + " * " + lit(T) + "; rem_ /= " +
       lit(tilesA) + ";\n";
  s += "    const " + it + " b0_ = rem_ % " + lit(tilesB) + " * " + lit(T) + "; rem_ /= " +
       lit(tilesB) + ";\n";
  std::string dOff = lit(p.dstBase), sOff = lit(p.srcBase);
  for (int64_t d = static_cast<int64_t>(a) - 1; d >= 0; --d) {
    if (static_cast<size_t>(d) == b)
      continue;
    std::string o = "o" + std::to_string(d) + "_";
    s += "    const " + it + " " + o + " = rem_ % " + lit(p.dims[d]) + "; rem_ /= " +
         lit(p.dims[d]) + ";\n";
    dOff += " + " + o + " * " + lit(p.dstStrides[d]);
    sOff += " + " + o + " * " + lit(p.srcStrides[d]);
  }
  s += "    const " + it + " d_ = " + dOff + ", s_ = " + sOff + ";\n";
  std::string scalar;
  // Read: b along the threads (the input's contiguous dim), rows of a.
  scalar += "for (int j_ = ty_; j_ < " + Ts + "; j_ += blockDim.x / " + Ts + ") {\n";
  scalar += "      const " + it + " ai_ = sa_ + j_, bi_ = sb_ + tx_;\n";
  scalar += "      if (ai_ < " + lit(A) + " && bi_ < " + lit(B) +
            ") tile_[j_][tx_] = in0[s_ + ai_ * " + sa + " + bi_];\n    }\n";
  scalar += "    __syncthreads();\n";
  // Write: a along the threads (the output's contiguous dim), rows of b.
  scalar += "    for (int j_ = ty_; j_ < " + Ts + "; j_ += blockDim.x / " + Ts + ") {\n";
  scalar += "      const " + it + " ai_ = sa_ + tx_, bi_ = sb_ + j_;\n";
  scalar += "      if (ai_ < " + lit(A) + " && bi_ < " + lit(B) + ") out0[d_ + bi_ * " + sb +
            " + ai_] = tile_[tx_][j_];\n    }\n";
  scalar += "    __syncthreads();\n";
  if (V == 1) {
    s += "    { const " + it + " sa_ = a0_, sb_ = b0_;\n    " + scalar + "    }\n";
    s += "  }\n}\n";
    return makeKernel(op, std::move(s), sig, gridFor(blocks, 1), "transpose");
  }
  const std::string Vs = std::to_string(V), L = std::to_string(32 / V);
  s += "    if (vec_) {\n";
  // Lane l takes word w_ = l % (32 / V) (+ (32 / V) w-steps) of V rows
  // g_ = l / (32 / V) (+ V g-steps): its V words land in V rows of tileT_
  // at banks V w + g + j, distinct across the warp.
  s += "      const int lane_ = threadIdx.x % 32, warp_ = threadIdx.x / 32;\n";
  s += "      for (int k_ = 0; k_ < 4; ++k_) {\n";
  s += "        const int c_ = warp_ + 8 * k_;\n";
  s += "        const int w_ = lane_ % " + L + " + " + L + " * (c_ % " + Vs + ");\n";
  s += "        const int g_ = lane_ / " + L + " + " + Vs + " * (c_ / " + Vs + ");\n";
  s += "        const " + it + " ai_ = a0_ + g_ * " + Vs + ", bi_ = b0_ + w_ * " + Vs + ";\n";
  s += "        unsigned r_[" + Vs + "];\n";
  s += "        const bool in_ = ai_ < " + lit(A) + " && bi_ < " + lit(B) + ";\n";
  s += "#pragma unroll\n        for (int r = 0; r < " + Vs + "; ++r)\n";
  s += "          r_[r] = in_ ? *reinterpret_cast<const unsigned *>(in0 + s_ + (ai_ + r) * " + sa +
       " + bi_) : 0u;\n";
  if (V == 4) {
    s += "        const unsigned t0_ = __byte_perm(r_[0], r_[1], 0x5140), "
         "t1_ = __byte_perm(r_[0], r_[1], 0x7362);\n";
    s += "        const unsigned t2_ = __byte_perm(r_[2], r_[3], 0x5140), "
         "t3_ = __byte_perm(r_[2], r_[3], 0x7362);\n";
    s += "        tileT_[w_ * 4 + 0][g_] = __byte_perm(t0_, t2_, 0x5410);\n";
    s += "        tileT_[w_ * 4 + 1][g_] = __byte_perm(t0_, t2_, 0x7632);\n";
    s += "        tileT_[w_ * 4 + 2][g_] = __byte_perm(t1_, t3_, 0x5410);\n";
    s += "        tileT_[w_ * 4 + 3][g_] = __byte_perm(t1_, t3_, 0x7632);\n";
  } else {
    s += "        tileT_[w_ * 2 + 0][g_] = __byte_perm(r_[0], r_[1], 0x5410);\n";
    s += "        tileT_[w_ * 2 + 1][g_] = __byte_perm(r_[0], r_[1], 0x7632);\n";
  }
  s += "      }\n";
  s += "      __syncthreads();\n";
  // Write: a warp an output row (b), 32 words of a.
  s += "      for (int j_ = threadIdx.x / 32; j_ < " + std::to_string(T) + "; j_ += 8) {\n";
  s += "        const int lane_ = threadIdx.x % 32;\n";
  s += "        const " + it + " ai_ = a0_ + lane_ * " + Vs + ", bi_ = b0_ + j_;\n";
  s += "        if (ai_ < " + lit(A) + " && bi_ < " + lit(B) +
       ") *reinterpret_cast<unsigned *>(out0 + d_ + bi_ * " + sb + " + ai_) = tileT_[j_][lane_];\n";
  s += "      }\n";
  s += "      __syncthreads();\n";
  s += "    } else {\n";
  // Unaligned pointers: the T x T tile as 32 x 32 element tiles.
  s += "      for (int u_ = 0; u_ < " + std::to_string(V * V) + "; ++u_) {\n";
  s += "        const " + it + " sa_ = a0_ + (u_ % " + Vs + ") * " + Ts + ", sb_ = b0_ + (u_ / " +
       Vs + ") * " + Ts + ";\n        " + scalar + "      }\n";
  s += "    }\n";
  s += "  }\n}\n";
  return makeKernel(op, std::move(s), sig, gridFor(blocks, 1), "transpose");
}

/// out = in[base + sum o_d * st_d] (dense out): transpose, slice, broadcast, reshape.
FailureOr<KernelSource> gatherKernel(Operation *op, SmallVector<int64_t> stridesOut, int64_t base,
                                     SmallVector<int64_t> outDims) {
  Value in = op->getOperand(0), out = op->getResult(0);
  Signature sig;
  sig.output(0, out);
  sig.input(0, in);
  CopyPart p{"out0", "in0", outDims, denseStrides(outDims), stridesOut, 0, base};
  // A transpose of planes at least a tile on each side: through tiles.
  CopyPart q = p;
  simplify(q);
  const size_t a = q.dims.size() - 1;
  if (q.dims.size() >= 2 && q.srcStrides[a] > 1 && q.dims[a] >= kTransposeTile)
    for (size_t b = 0; b < a; ++b)
      if (q.srcStrides[b] == 1 && q.dims[b] >= kTransposeTile)
        return transposeTileKernel(op, sig, q, b, eltOf(out));
  return copyKernel(op, sig, {p}, eltOf(out), "gather");
}

/// tc.gather that is not the embedding library call (any axis, rank and
/// element type): out[o, j, r] = data[o, idx[j], r] over the outer extent
/// o (data's dims before `axis`), the flattened indices j and the inner
/// extent r (after it); a negative index counts from the end. An index
/// outside [-dim, dim) gives NaN for float data (as embedding_fwd, so the
/// loss shows it) and 0 otherwise; the reference executor reports it.
FailureOr<KernelSource> indexGatherKernel(tc::GatherOp op) {
  Value data = op.getData(), idx = op.getIndices(), out = op.getResult();
  ArrayRef<int64_t> ds = shapeOf(data);
  int64_t axis = op.getAxis();
  if (axis < 0 || axis >= static_cast<int64_t>(ds.size()))
    return op.emitOpError() << "CUDA codegen: gather axis " << axis << " out of range";
  int64_t inner = 1;
  for (size_t d = axis + 1; d < ds.size(); ++d)
    inner *= ds[d];
  int64_t count = product(shapeOf(idx)), total = product(shapeOf(out));
  Signature sig;
  sig.output(0, out);
  sig.input(0, data);
  sig.input(1, idx);
  sig.tail(total, {ds[axis], count, inner});
  Type e = eltOf(out);
  std::string bad = e.isF32()                ? "__int_as_float(0x7fc00000)"
                    : e.isF64()              ? "__longlong_as_double(0x7ff8000000000000ll)"
                    : llvm::isa<FloatType>(e) ? rawLiteral(e, std::nan("")) // 16-bit storage bits
                                             : rawLiteral(e, 0.0);
  std::string s = header(sig) + kLoopBegin;
  s += "    const long long dim = meta.v[0], count = meta.v[1], inner = meta.v[2];\n";
  s += "    const long long r = i % inner, j = (i / inner) % count, o = i / (inner * count);\n";
  s += "    long long k = (long long)in1[j];\n";
  s += "    if (k < 0) k += dim;\n";
  s += "    out0[i] = (k >= 0 && k < dim) ? in0[(o * dim + k) * inner + r] : " + bad + ";\n";
  s += "  }\n}\n";
  return makeKernel(op, std::move(s), sig, gridFor(total, 256), "index_gather");
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

/// The in-place form of rotaryKernel: n = B H S R/2 pairs, each read and
/// written through out0 (with the strides of meta[5..7]) by one thread, V
/// pairs a thread on the vector path (rotate_half: x[k .. k+V) and
/// x[k+R/2 .. k+R/2+V)); features past R are not touched. Consecutive
/// threads take the pairs of one row of one head, then (headsInner, where a
/// head's rows are further apart than the heads of a row: q / k viewed in
/// their projection, [B, S, H, D]) the same row of the next heads, else the
/// head's next rows: neighbouring threads touch neighbouring memory (a
/// partial rotary's 32 bytes a head: Pythia's 16 of 64 features).
FailureOr<KernelSource> rotaryInPlaceKernel(tc::RotaryOp op, Signature sig, int64_t n, bool vec,
                                            int64_t V, bool headsInner) {
  Type e = eltOf(op.getInput()), te = eltOf(op.getCos());
  std::string ct = computeType(e);
  auto load = [&](Type t, const std::string &raw) { return loadExpr(t, raw); };
  std::string s = header(sig);
  // Pair index i -> (bb, hh, sq, k); the row of (bb, hh, sq) in out0.
  auto pairIndex = [&](const std::string &ix, const std::string &i) {
    return "      const " + ix + " e_ = (" + ix + ")" + i + ", k = e_ % half, q = e_ / half, " +
           (headsInner ? "hh = q % H, sb = q / H, sq = sb % S, bb = sb / S;\n"
                       : "sq = q % S, hq = q / S, hh = hq % H, bb = hq / H;\n");
  };
  const std::string ix = n < (int64_t(1) << 31) ? "unsigned" : "long long";
  const std::string rows = "const long long orow = (long long)bb * meta.v[8] + (long long)hh * "
                           "meta.v[9] + (long long)sq * meta.v[10];\n";
  const std::string dims = "    const " + ix +
                           " half = meta.v[4], S = meta.v[2], H = meta.v[1];\n";
  const std::string table = "      const long long t = ((long long)bb * S + sq) * half + k;\n";
  const std::string rot1 = "c * x1 - sn * x2", rot2 = "sn * x1 + c * x2";
  if (vec) {
    std::string VS = std::to_string(V), X = "TcVec<" + storageType(e) + ", " + VS + ">",
                T = "TcVec<" + storageType(te) + ", " + VS + ">";
    s += "  if (((0ull | (unsigned long long)in1 | (unsigned long long)in2 | (unsigned long long)"
         "out0) & 15) == 0) {\n";
    s += dims;
    s += "    for (long long b = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * " + VS +
         "; b < n; b += (long long)gridDim.x * blockDim.x * " + VS + ") {\n";
    s += pairIndex(ix, "b");
    s += "      " + rows + table;
    s += "      " + X + "* p1 = reinterpret_cast<" + X + "*>(out0 + orow + k);\n";
    s += "      " + X + "* p2 = reinterpret_cast<" + X + "*>(out0 + orow + k + half);\n";
    s += "      const " + X + " a1 = *p1, a2 = *p2;\n";
    s += "      const " + T + " cv = *reinterpret_cast<const " + T + "*>(in1 + t);\n";
    s += "      const " + T + " sv = *reinterpret_cast<const " + T + "*>(in2 + t);\n";
    s += "      " + X + " o1, o2;\n#pragma unroll\n      for (int j = 0; j < " + VS + "; ++j) {\n";
    s += "        const " + ct + " c = (" + ct + ")" + load(te, "cv.v[j]") + ", sn = (" + ct + ")" +
         load(te, "sv.v[j]") + ";\n";
    s += "        const " + ct + " x1 = " + load(e, "a1.v[j]") + ", x2 = " + load(e, "a2.v[j]") +
         ";\n";
    s += "        o1.v[j] = " + storeExpr(e, rot1) + ";\n";
    s += "        o2.v[j] = " + storeExpr(e, rot2) + ";\n      }\n";
    s += "      *p1 = o1;\n      *p2 = o2;\n    }\n    return;\n  }\n";
  }
  s += "  {\n" + dims;
  s += "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
       "i += (long long)gridDim.x * blockDim.x) {\n";
  s += pairIndex(ix, "i");
  s += "      " + rows + table;
  if (op.getInterleaved())
    s += "      const long long i1 = orow + 2 * k, i2 = i1 + 1;\n";
  else
    s += "      const long long i1 = orow + k, i2 = i1 + half;\n";
  s += "      const " + ct + " c = (" + ct + ")" + load(te, "in1[t]") + ", sn = (" + ct + ")" +
       load(te, "in2[t]") + ";\n";
  s += "      const " + ct + " x1 = " + load(e, "out0[i1]") + ", x2 = " + load(e, "out0[i2]") +
       ";\n";
  s += "      out0[i1] = " + storeExpr(e, rot1) + ";\n";
  s += "      out0[i2] = " + storeExpr(e, rot2) + ";\n    }\n  }\n}\n";
  return makeKernel(op, std::move(s), sig, gridFor(vec ? n / V : n, 256), "rotary");
}

/// tc.rotary: y[b, h, s, d] for input [B, H, S, D], tables [B, S, R/2]
/// (runtime/src/cpu/rotary.cpp's pairs, in f32 (f64 for f64 data) with one
/// rounding to the result); features from R on are copied. One thread per
/// output element: it reads its pair and the pair's cos / sin. The input is
/// read and the result written with [batch, head, row] element strides
/// (tcx::kRotaryInStridesAttr / kRotaryOutStridesAttr, dense without them:
/// tc-lower-to-tcx reads q / k out of their projection and writes the
/// gradients into the transposed qkv gradient), meta [B, H, S, D, R/2,
/// in strides, out strides].
FailureOr<KernelSource> rotaryKernel(tc::RotaryOp op) {
  Value in = op.getInput(), cs = op.getCos(), sn = op.getSin(), out = op.getResult();
  ArrayRef<int64_t> is = shapeOf(in), ts = shapeOf(cs);
  if (is.size() != 4 || ts.size() != 3 || shapeOf(sn) != ts || ts[0] != is[0] ||
      ts[1] != is[2] || 2 * ts[2] > is[3] || shapeOf(out) != is)
    return op.emitOpError() << "CUDA codegen: tc.rotary wants input [B, H, S, D] and cos/sin "
                               "[B, S, R/2] with R <= D";
  std::vector<int64_t> strides[2];
  const llvm::StringLiteral names[2] = {tcx::kRotaryInStridesAttr, tcx::kRotaryOutStridesAttr};
  for (auto [k, name] : llvm::enumerate(names)) {
    strides[k] = {is[1] * is[2] * is[3], is[2] * is[3], is[3]};
    if (auto a = op->getAttrOfType<DenseI64ArrayAttr>(name)) {
      if (a.size() != 3 || llvm::any_of(a.asArrayRef(), [](int64_t x) { return x < 0; }))
        return op.emitOpError() << "CUDA codegen: '" << name
                                << "' needs 3 non-negative [batch, head, row] strides";
      strides[k].assign(a.asArrayRef().begin(), a.asArrayRef().end());
    }
  }
  Signature sig;
  sig.output(0, out);
  sig.input(0, in);
  sig.input(1, cs);
  sig.input(2, sn);
  std::vector<int64_t> meta(is.begin(), is.end());
  meta.push_back(ts[2]);
  for (const std::vector<int64_t> &st : strides)
    meta.insert(meta.end(), st.begin(), st.end());
  // In place (tcx::kRotaryInPlaceKernelAttr): one thread per rotated pair
  // (or vector of pairs), reading and writing through out0 (the input's
  // view), the features past the rotary left as they are.
  const bool inPlace = op->hasAttr(tcx::kRotaryInPlaceKernelAttr);
  if (inPlace && strides[0] != strides[1])
    return op.emitOpError() << "CUDA codegen: an in-place tc.rotary reads and writes with the "
                               "same strides";
  int64_t n = inPlace ? is[0] * is[1] * is[2] * ts[2] : product(is);
  sig.tail(n, meta);
  Type e = eltOf(in), te = eltOf(cs);
  std::string ct = computeType(e);
  auto load = [&](Type t, const std::string &raw) { return loadExpr(t, raw); };
  std::string s = header(sig);
  // The rows' first elements in the input and the result.
  const std::string rows =
      "const long long irow = (long long)bb * meta.v[5] + (long long)hh * meta.v[6] + "
      "(long long)sq * meta.v[7], orow = (long long)bb * meta.v[8] + (long long)hh * meta.v[9] + "
      "(long long)sq * meta.v[10];\n";
  const std::string ix = n < (int64_t(1) << 31) ? "unsigned" : "long long";
  // The vector path: V consecutive features of one half per thread (16-byte
  // loads of x's two halves, the tables and the store), rotate_half layout,
  // when the halves, the row and every stride split into whole vectors.
  int64_t bytes = std::max(storageBytes(e), storageBytes(te));
  int64_t V = 16 / bytes, half = ts[2], D = is[3];
  bool vec = !op.getInterleaved() && V > 1 && half % V == 0 && D % V == 0 &&
             storageBytes(e) * V == 16;
  for (const std::vector<int64_t> &st : strides)
    vec = vec && llvm::all_of(st, [&](int64_t x) { return x % V == 0; });
  if (inPlace)
    return rotaryInPlaceKernel(op, std::move(sig), n, vec, V,
                               /*headsInner=*/strides[1][1] < strides[1][2]);
  if (vec) {
    std::string VS = std::to_string(V), X = "TcVec<" + storageType(e) + ", " + VS + ">",
                T = "TcVec<" + storageType(te) + ", " + VS + ">";
    s += "  if (((0ull | (unsigned long long)in0 | (unsigned long long)in1 | (unsigned long long)in2 |"
         " (unsigned long long)out0) & 15) == 0) {\n";
    // The index arithmetic in 32 bits when the elements allow (five
    // divisions per vector: in 64 bits they, not the bytes, bound the
    // kernel); the offsets in 64.
    s += "    const " + ix + " half = meta.v[4], D = meta.v[3], S = meta.v[2], H = meta.v[1];\n";
    s += "    for (long long b = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * " + VS +
         "; b < n; b += (long long)gridDim.x * blockDim.x * " + VS + ") {\n";
    s += "      const " + ix + " e_ = (" + ix + ")b, d = e_ % D, q = e_ / D, sq = q % S, "
         "hq = q / S, hh = hq % H, bb = hq / H;\n";
    s += "      " + rows;
    s += "      if (d >= 2 * half) { *reinterpret_cast<" + X + "*>(out0 + orow + d) = "
         "*reinterpret_cast<const " + X + "*>(in0 + irow + d); continue; }\n";
    s += "      const bool first = d < half;\n";
    s += "      const long long k = first ? d : d - half, t = ((long long)bb * S + sq) * half + k;\n";
    s += "      const " + X + " a1 = *reinterpret_cast<const " + X + "*>(in0 + irow + k);\n";
    s += "      const " + X + " a2 = *reinterpret_cast<const " + X + "*>(in0 + irow + k + half);\n";
    s += "      const " + T + " cv = *reinterpret_cast<const " + T + "*>(in1 + t);\n";
    s += "      const " + T + " sv = *reinterpret_cast<const " + T + "*>(in2 + t);\n";
    s += "      " + X + " o;\n#pragma unroll\n      for (int j = 0; j < " + VS + "; ++j) {\n";
    s += "        const " + ct + " c = (" + ct + ")" + load(te, "cv.v[j]") + ", sn = (" + ct + ")" +
         load(te, "sv.v[j]") + ";\n";
    s += "        const " + ct + " x1 = " + load(e, "a1.v[j]") + ", x2 = " + load(e, "a2.v[j]") + ";\n";
    s += "        o.v[j] = " + storeExpr(eltOf(out), "(first ? c * x1 - sn * x2 : sn * x1 + c * x2)") +
         ";\n      }\n";
    s += "      *reinterpret_cast<" + X + "*>(out0 + orow + d) = o;\n    }\n    return;\n  }\n";
  }
  s += kLoopBegin + outIdx(4, 0, n);
  s += "    const long long half = meta.v[4], d = o3, bb = o0, hh = o1, sq = o2;\n";
  s += "    " + rows;
  s += "    if (d >= 2 * half) { out0[orow + d] = in0[irow + d]; continue; }\n";
  if (op.getInterleaved()) {
    s += "    const long long k = d / 2, i1 = irow + 2 * k, i2 = i1 + 1;\n";
    s += "    const bool first = d % 2 == 0;\n";
  } else {
    s += "    const long long k = d < half ? d : d - half, i1 = irow + k, i2 = i1 + half;\n";
    s += "    const bool first = d < half;\n";
  }
  s += "    const long long t = (o0 * meta.v[2] + o2) * half + k;\n";
  s += "    const " + ct + " c = (" + ct + ")" + load(te, "in1[t]") + ", sn = (" + ct + ")" +
       load(te, "in2[t]") + ";\n";
  s += "    const " + ct + " x1 = " + load(e, "in0[i1]") + ", x2 = " + load(e, "in0[i2]") + ";\n";
  s += "    out0[orow + d] = " +
       storeExpr(eltOf(out), "(first ? c * x1 - sn * x2 : sn * x1 + c * x2)") + ";\n  }\n}\n";
  // (The scalar loop, for unaligned buffers, strides over the same grid.)
  return makeKernel(op, std::move(s), sig, gridFor(vec ? n / V : n, 256), "rotary");
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

} // namespace tc::cuda::detail
