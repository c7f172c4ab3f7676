//===- ReduceKernels.cpp - reductions over any axes -----------------------===//
//
// Part of CUDA code generation (CudaCodegen.h gives the kernel ABI).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/KernelSupport.h"

namespace tc::cuda::detail {

/// Any reduction over any axes: one thread per result element.
FailureOr<KernelSource> reduceKernel(Operation *op) {
  Value in = op->getOperand(0), out = op->getResult(0);
  Type e = eltOf(in);
  if (!computable(e) || isBool(e) || isFp8(e)) // FP8 reductions: no kFp8Prelude here
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
    // About eight 256-thread blocks per SM of an H200 (1056), each row
    // group at least 64 rows: two blocks per SM (264) kept a third of the
    // loads in flight that HBM needs ([16384, 768] bf16: 27 us, 0.9 TB/s).
    // At most 128 groups: the last block of a tile reads R partials per
    // column (256 took 20 us for [16384, 768], most of it that tail).
    const int64_t R = std::clamp<int64_t>((1056 + tiles - 1) / tiles, 2, std::max<int64_t>(2, std::min<int64_t>(128, M / 64)));
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
    s += "#pragma unroll 4\n    for (long long r = r0_ + grp; r < r1_; r += 8) {\n" + offsetCode("      ");
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
    auto combine = [&](const std::string &a, const std::string &x) {
      return "TC_COMB(" + a + ", " + x + ")";
    };
    s += tileColumnPartials("acc", "i", "i < n", V, Ns, R, combine);
    s += tileColumnTotals(acc, init, V, Ns, R, combine);
    if (llvm::isa<tc::ReduceMeanOp>(op))
      s += "    a_ = a_ / (" + acc + ")" + m + ";\n";
    s += "    out0[col_] = " + storeExpr(eltOf(out), "a_") + ";\n  }\n";
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

} // namespace tc::cuda::detail
