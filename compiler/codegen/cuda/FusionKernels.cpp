//===- FusionKernels.cpp - one kernel per fused elementwise chain ---------===//
//
// Part of CUDA code generation (CudaCodegen.h gives the kernel ABI).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/KernelSupport.h"

#include <functional>

namespace tc::cuda::detail {

namespace {
//===----------------------------------------------------------------------===//
// Fusion kernels
//===----------------------------------------------------------------------===//

enum class ArgMode { Full, Scalar, Strided };

/// A TcVec of 2 to 16 bytes loaded through the read-only data path (ld.global.nc).
constexpr const char *kLdgVec = R"(template <typename V> __device__ __forceinline__ V tc_ldg_vec(const V *p) {
  V v;
  if constexpr (sizeof(V) == 16) {
    const uint4 u = __ldg(reinterpret_cast<const uint4 *>(p));
    v = *reinterpret_cast<const V *>(&u);
  } else if constexpr (sizeof(V) == 8) {
    const uint2 u = __ldg(reinterpret_cast<const uint2 *>(p));
    v = *reinterpret_cast<const V *>(&u);
  } else if constexpr (sizeof(V) == 4) {
    const unsigned u = __ldg(reinterpret_cast<const unsigned *>(p));
    v = *reinterpret_cast<const V *>(&u);
  } else {
    static_assert(sizeof(V) == 2, "tc_ldg_vec: 2 to 16 bytes");
    const unsigned short u = __ldg(reinterpret_cast<const unsigned short *>(p));
    v = *reinterpret_cast<const V *>(&u);
  }
  return v;
}
)";

/// A TcVec of 2 to 16 bytes stored with one instruction (inline PTX). NVVM
/// splits the plain struct store into 2- or 4-byte stores in the kernels that
/// also reduce the values they store (Pythia's erf-GELU backward with its
/// column sums: eight st.global.u16 a vector, 217 us against the plain
/// kernel's 98 on an H100), a uint4 store of the same bytes too.
constexpr const char *kStVec =
    R"(template <typename V> __device__ __forceinline__ void tc_st_vec(V *p, const V &v) {
  const unsigned *w = reinterpret_cast<const unsigned *>(&v);
  if constexpr (sizeof(V) == 16) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]),
                 "r"(w[3]) : "memory");
  } else if constexpr (sizeof(V) == 8) {
    asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(w[0]), "r"(w[1]) : "memory");
  } else if constexpr (sizeof(V) == 4) {
    asm volatile("st.global.b32 [%0], %1;" ::"l"(p), "r"(w[0]) : "memory");
  } else {
    static_assert(sizeof(V) == 2, "tc_st_vec: 2 to 16 bytes");
    *p = v;
  }
}
)";

struct FusionGen {
  Operation *anchor; // the tc.fusion or tcx.kernel (diagnostics, KernelSource::op)
  Block &body;       // its body: one argument per input
  ValueRange yielded; // the body's results, one per output
  Operation *red = nullptr; // final reduction / softmax
  Operation *colRed = nullptr; // or final column sums (tc::isLeadingColumnSum)
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

  CodegenOptions options;

  FusionGen(tc::FusionOp f, const CodegenOptions &options)
      : anchor(f), body(f.getBody().front()),
        yielded(f.getBody().front().getTerminator()->getOperands()), options(options) {}
  FusionGen(tcx::KernelOp k, const CodegenOptions &options)
      : anchor(k), body(k.getEntry()), yielded(k.getEntry().getTerminator()->getOperands()),
        options(options) {}

  LogicalResult analyse() {
    for (Operation &op : body.without_terminator()) {
      if (tc::isTrailingReduction(&op) || tc::isLastAxisSoftmax(&op))
        red = &op;
      if (tc::isLeadingColumnSum(&op))
        colRed = &op;
    }
    if (red && colRed)
      return colRed->emitOpError() << "CUDA codegen: a fusion with two reductions";
    for (Operation &op : body.without_terminator()) {
      // FP8 values are read exactly; only a saturating cast writes them
      // (PTX's FP8 conversions saturate), or a broadcast passes them on.
      auto cast = llvm::dyn_cast<tc::CastOp>(op);
      bool writesFp8 = (cast && cast.getSaturate()) || llvm::isa<tc::BroadcastOp>(op);
      for (Type t : op.getOperandTypes())
        if (!computable(llvm::cast<RankedTensorType>(t).getElementType()))
          return op.emitOpError() << "CUDA codegen: unsupported element type in " << t;
      for (Type t : op.getResultTypes()) {
        Type e = llvm::cast<RankedTensorType>(t).getElementType();
        if (!computable(e) || (isFp8(e) && !writesFp8))
          return op.emitOpError() << "CUDA codegen: unsupported element type in " << t;
      }
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
    } else if (colRed) {
      // Column sums: the space is the summed value's, [rows, cols] flat.
      iter.assign(shapeOf(colRed->getOperand(0)).begin(), shapeOf(colRed->getOperand(0)).end());
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
      if ((v.getDefiningOp() == red && red && !tc::isLastAxisSoftmax(red)) ||
          (colRed && v.getDefiningOp() == colRed)) {
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
      if (&op == red || &op == colRed)
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
      if ((skipRed && v.getDefiningOp() == red) || (colRed && v.getDefiningOp() == colRed))
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

  bool readsOrWritesFp8() {
    auto fp8 = [](Value v) { return isFp8(eltOf(v)); };
    return llvm::any_of(body.getArguments(), fp8) ||
           llvm::any_of(body.without_terminator(), [&](Operation &op) {
             return llvm::any_of(op.getResults(), fp8);
           });
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
    if (readsOrWritesFp8())
      src += kFp8Prelude;
    std::string bodyText;
    if (colRed) {
      sig.tail(numel, meta);
      if (failed(columnSumKernel(bodyText, k)))
        return failure();
    } else if (!red) {
      sig.tail(numel, meta);
      if (failed(elementwise(bodyText, k)))
        return failure();
    } else if (smallRow() || splitRow()) {
      // One short row (a gradient's sum of squares for the grad-norm clip):
      // its length is the launch's n, not meta, so that rows of any length
      // share the kernel and one grouped launch (below) takes them all.
      meta[0] = 0;
      sig.tail(rowLen, meta);
      if (failed(rowKernel(bodyText, k)))
        return failure();
    } else {
      sig.tail(rows, meta);
      if (failed(fullReduction() ? fullReductionKernel(bodyText, k) : rowKernel(bodyText, k)))
        return failure();
    }
    src += globals;
    if ((!red || smallRow() || splitRow()) && !needIdx && !colRed) {
      // Elementwise kernels without index arithmetic also get a grouped entry
      // point, NAME_group: one launch over many same-kernel problems (the
      // per-parameter optimizer updates: one AdamW launch for every
      // parameter; the grad-norm's sums of squares of the short gradients,
      // a block each). Each item holds its pointers, n and its range of
      // blocks; a block finds its item by binary search and runs the same
      // body.
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
      // Column sums: five blocks an SM at most 51 registers (their grid is
      // one wave of them, kColumnSumBlocks).
      src += std::string("\nextern \"C\" __global__ void __launch_bounds__(") +
             (colRed ? "256, 5" : "256") + ") @KERNEL@(\n    " + sig.text + ") {\n" + bodyText +
             "}\n";
    }
    k.source = std::move(src);
    k.params = std::move(sig.params);
    finalize(k, red ? (tc::isLastAxisSoftmax(red) ? "softmax" : "reduce") : "fusion");
    return k;
  }

  /// Whether yielded `v` is stored element by element (not the result of
  /// the final reduction, red or colRed).
  bool storedPerElement(Value v) const {
    Operation *d = v.getDefiningOp();
    return !d || (d != red && d != colRed);
  }

  /// The elements a thread and step of the 16-byte vector path: 16 bytes of
  /// the widest value it loads or stores (at most 8), when every input is
  /// dense over the space or a scalar, every result but the reduction's is
  /// stored densely and `extent` (what the vectors tile) divides by it; else
  /// 1 (no vector path).
  int64_t vectorWidth(int64_t extent) const {
    bool dense = llvm::all_of(argModes, [](ArgMode m) { return m != ArgMode::Strided; });
    int64_t maxBytes = 1;
    for (auto [j, arg] : llvm::enumerate(body.getArguments()))
      if (argModes[j] == ArgMode::Full)
        maxBytes = std::max(maxBytes, storageBytes(eltOf(arg)));
    for (auto [i, v] : llvm::enumerate(yielded)) {
      if (!storedPerElement(v))
        continue;
      dense = dense && outMeta[i] < 0;
      maxBytes = std::max(maxBytes, storageBytes(eltOf(v)));
    }
    const int64_t V = std::min<int64_t>(8, 16 / maxBytes);
    return dense && V > 1 && extent % V == 0 ? V : 1;
  }

  /// The 16-byte vector path over [0, end): every input dense or a scalar,
  /// every result but the reduction stored densely, V elements per thread
  /// and step; `perElement` (given the names of the element's values) adds
  /// to each element's code. Opens `if (aligned) {` and the loop, and
  /// closes the loop only.
  LogicalResult vectorLoop(std::string &s, int64_t V, const std::string &end,
                           std::function<std::string(llvm::DenseMap<Value, std::string> &)> perElement) {
    std::string VS = std::to_string(V);
    return vectorPath(
        s, V,
        "    for (long long b = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * " + VS +
            "; b < " + end + "; b += stride * " + VS + ") {\n",
        perElement);
  }

  /// The vector path with the loop `loopHead` opens (it defines the first
  /// element's flat index b of each step): `if (aligned) {`, the loop, V
  /// elements a step (each Full input one TcVec load, each stored result one
  /// TcVec store; `perElement` adds to each element's code); closes the
  /// loop only.
  LogicalResult
  vectorPath(std::string &s, int64_t V, const std::string &loopHead,
             std::function<std::string(llvm::DenseMap<Value, std::string> &)> perElement) {
    std::string VS = std::to_string(V), align;
    auto stored = [&](Value v) { return storedPerElement(v); };
    for (auto [j, arg] : llvm::enumerate(body.getArguments()))
      if (argModes[j] == ArgMode::Full)
        align += " | (unsigned long long)in" + std::to_string(j);
    for (auto [i, v] : llvm::enumerate(yielded))
      if (stored(v))
        align += " | (unsigned long long)out" + std::to_string(i);
    s += "  // 16-byte vector path (" + VS + " elements per thread and step).\n";
    s += "  if (((0ull" + align + ") & 15) == 0) {\n";
    s += loopHead;
    // Column-sum kernels load through the read-only path explicitly: with the
    // pointers cast for the alignment test and the partials stored to module
    // memory, the compiler no longer proves the __restrict__ inputs read-only
    // and issued coherent loads (Pythia's erf-GELU backward 231 us in the
    // step against 103 without the sums; each element is read before the one
    // thread that reads it writes it, so in-place buffers stay correct).
    if (colRed)
      globals += kLdgVec;
    // Kernels that reduce what they store (column sums, an amax) store
    // each vector with one instruction (kStVec).
    const bool oneStore = colRed || perElement;
    if (oneStore)
      globals += kStVec;
    for (auto [j, arg] : llvm::enumerate(body.getArguments()))
      if (argModes[j] == ArgMode::Full) {
        std::string t = "TcVec<" + storageType(eltOf(arg)) + ", " + VS + ">";
        std::string at = "reinterpret_cast<const " + t + "*>(in" + std::to_string(j) + " + b)";
        s += "      const " + t + " a" + std::to_string(j) + " = " +
             (colRed ? "tc_ldg_vec(" + at + ")" : "*" + at) + ";\n";
      }
    for (auto [i, v] : llvm::enumerate(yielded))
      if (stored(v))
        s += "      TcVec<" + storageType(eltOf(v)) + ", " + VS + "> o" + std::to_string(i) + ";\n";
    s += "#pragma unroll\n      for (int k = 0; k < " + VS + "; ++k) {\n";
    llvm::DenseMap<Value, std::string> names;
    std::string eval;
    if (failed(evalCode("        ", true, names, eval)))
      return failure();
    s += eval;
    for (auto [i, v] : llvm::enumerate(yielded))
      if (stored(v))
        s += "        o" + std::to_string(i) + ".v[k] = " + storeExpr(eltOf(v), names.lookup(v)) + ";\n";
    if (perElement)
      s += "        " + perElement(names);
    s += "      }\n";
    for (auto [i, v] : llvm::enumerate(yielded)) {
      if (!stored(v))
        continue;
      std::string t = "TcVec<" + storageType(eltOf(v)) + ", " + VS + ">";
      std::string at = "reinterpret_cast<" + t + "*>(out" + std::to_string(i) + " + b)";
      s += oneStore ? "      tc_st_vec(" + at + ", o" + std::to_string(i) + ");\n"
                    : "      *" + at + " = o" + std::to_string(i) + ";\n";
    }
    s += "    }\n";
    return success();
  }

  /// An elementwise fusion that also sums one of its values over every axis
  /// but the last (colRed: a bias gradient, the column sums of the dY the
  /// fusion writes). The space as [rows, cols]: a block's 8 warps go down
  /// a chunk of rows, each lane over W adjacent columns of a 32 * W column
  /// tile (16-byte loads and stores where every value is dense and
  /// aligned), summing the stored values in row order; the warps' sums
  /// combine in the block in warp order, then each block's partial goes to
  /// module memory and the last block of a tile to finish (a counter) adds
  /// the R partials of its columns in order: deterministic, the values read
  /// once, no second kernel.
  LogicalResult columnSumKernel(std::string &s, KernelSource &k) {
    Value x = colRed->getOperand(0), sums = colRed->getResult(0);
    Type xe = eltOf(x);
    if (!isFloat(xe))
      return colRed->emitOpError() << "CUDA codegen: column sums of " << xe << " are not supported";
    const std::string acc = computeType(xe);
    const int64_t cols = iter.back(), rowsN = numel / cols;
    const int64_t W = vectorWidth(cols);
    const bool vec = W > 1;
    const int64_t tiles = (cols + 32 * W - 1) / (32 * W);
    // One wave of blocks on an H100 / H200 (kColumnSumBlocks), each chunk
    // at least 64 rows; at most 128 partials a column (the last block of a
    // tile reads them one by one: reduce_cols' bound) and 16 MB of them.
    const int64_t R = std::max<int64_t>(1, std::min({kColumnSumBlocks / tiles, int64_t(128),
                                                     rowsN / 64, (int64_t(1) << 22) / cols}));
    const std::string Ws = std::to_string(W), Rs = std::to_string(R), Cs = std::to_string(cols),
                      Ts = std::to_string(tiles), RN = std::to_string(rowsN);
    k.launch.block = 256;
    k.launch.grid = tiles * R;
    globals += "__device__ " + acc + " tc_cpart_[" + std::to_string(R * cols) +
               "];\n__device__ unsigned int tc_cdone_[" + Ts + "];\n";
    auto addSum = [&](llvm::DenseMap<Value, std::string> &names, const std::string &k) {
      // The value as stored (rounded to its type), summed in f32 / f64.
      return "cs_[" + k + "] += " + loadExpr(xe, storeExpr(xe, names.lookup(x))) + ";\n";
    };
    s += "  __shared__ " + acc + " part_[256 * " + Ws + "];\n  __shared__ bool last_;\n";
    s += "  const int lane = threadIdx.x % 32, grp = threadIdx.x / 32;\n";
    s += "  const long long tile_ = blockIdx.x % " + Ts + ", rpart_ = blockIdx.x / " + Ts + ";\n";
    s += "  const long long c0_ = (tile_ * 32 + lane) * " + Ws + ";\n";
    s += "  const long long chunk_ = (" + RN + "ll + " + Rs + " - 1) / " + Rs +
         ", r0_ = rpart_ * chunk_;\n";
    s += "  const long long r1_ = " + RN + "ll < r0_ + chunk_ ? " + RN + "ll : r0_ + chunk_;\n";
    s += "  " + acc + " cs_[" + Ws + "];\n";
    s += "#pragma unroll\n  for (int k = 0; k < " + Ws + "; ++k) cs_[k] = 0;\n";
    s += "  if (c0_ < " + Cs + ") {\n";
    if (vec) {
      if (failed(vectorPath(
              s, W,
              "    for (long long r = r0_ + grp; r < r1_; r += 8) {\n"
              "      const long long b = r * " +
                  Cs + "ll + c0_;\n",
              [&](llvm::DenseMap<Value, std::string> &names) { return addSum(names, "k"); })))
        return failure();
      s += "  } else {\n";
    }
    s += "    for (long long r = r0_ + grp; r < r1_; r += 8) {\n";
    s += "      for (int k = 0; k < " + Ws + "; ++k) {\n";
    s += "        const long long i = r * " + Cs + "ll + c0_ + k;\n";
    s += idxCode("        ");
    {
      llvm::DenseMap<Value, std::string> names;
      std::string eval;
      if (failed(evalCode("        ", false, names, eval)))
        return failure();
      s += eval + storeCode("        ", names, false) + "        " + addSum(names, "k");
    }
    s += "      }\n    }\n";
    if (vec)
      s += "  }\n";
    s += "  }\n";
    // The block's warps in order, a partial of its rows, the tile's last
    // block adding them.
    auto add = [](const std::string &a, const std::string &x) { return a + " + " + x; };
    s += tileColumnPartials("cs_", "c0_", "c0_ < " + Cs, W, Cs + "ll", R, add);
    s += tileColumnTotals(acc, "0", W, Cs + "ll", R, add);
    for (auto [i, v] : llvm::enumerate(yielded))
      if (v.getDefiningOp() == colRed)
        s += "    out" + std::to_string(i) + "[col_] = " + storeExpr(eltOf(sums), "a_") + ";\n";
    s += "  }\n";
    s += "  if (threadIdx.x == 0) tc_cdone_[tile_] = 0;\n";
    return success();
  }

  LogicalResult elementwise(std::string &s, KernelSource &k) {
    // Vector path: every pointer dense over the whole space (or a scalar).
    const int64_t V = vectorWidth(numel);
    const bool vec = V > 1;
    k.launch.block = 256;
    k.launch.grid = gridFor(vec ? numel / V : numel, 256);
    s += "  const long long stride = (long long)gridDim.x * blockDim.x;\n";
    if (vec) {
      if (failed(vectorLoop(s, V, "n", nullptr)))
        return failure();
      s += "    return;\n  }\n";
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

  /// A max or min over every element (the amax of an FP8 quantize that
  /// tc-fuse-fp8-amax put into the kernel producing its input): the
  /// elementwise loop, vectorised as elementwise() does, with a running
  /// max beside it; each block's result goes to module memory and the last
  /// block to finish combines them. Max and min are exact, so the result
  /// does not depend on the order. Results other than the reduction must
  /// span the whole space (stored densely) for the vector path.
  static constexpr int64_t kFullReductionBlocks = 1056; // 132 SMs x 8 blocks of 256
  /// The column-sum kernels' blocks: 132 SMs x 5 (their launch bounds; the
  /// 8 sums a lane and the 16-byte vectors take Pythia's erf-GELU backward
  /// to 48 registers, five blocks an SM): one wave, no second wave of a
  /// few blocks (1056 blocks of it ran as 1.6 waves).
  static constexpr int64_t kColumnSumBlocks = 660;
  /// A sum / max / min of one row shorter than the long rows rowKernel
  /// splits (2^15) without index arithmetic: one block, the row's length its
  /// n (groupable).
  bool smallRow() const {
    return red && rows == 1 && !tc::isLastAxisSoftmax(red) && !fullReduction() && !needIdx &&
           rowLen < (int64_t(1) << 15);
  }
  /// One long row without index arithmetic (a weight gradient's sum of
  /// squares), split over blocks: its length is the launch's n and its
  /// blocks' partials go to the slots from the launch's first block, so rows
  /// of any length share the kernel and a grouped launch of at most
  /// kGroupSlots blocks (the source says so, the runtime keeps to it) takes a
  /// window of them.
  static constexpr int64_t kGroupSlots = 65536;
  bool splitRow() const {
    return options.groupSplitRows && red && rows == 1 && !tc::isLastAxisSoftmax(red) && !fullReduction() && !needIdx &&
           rowLen >= (int64_t(1) << 15);
  }
  bool fullReduction() const {
    return red && rows == 1 && llvm::isa<tc::ReduceMaxOp, tc::ReduceMinOp>(red) &&
           !isBool(eltOf(red->getOperand(0)));
  }

  LogicalResult fullReductionKernel(std::string &s, KernelSource &k) {
    Value x = red->getOperand(0);
    Type xe = eltOf(x);
    const bool dbl = xe.isF64(), fl = isFloat(xe), max = llvm::isa<tc::ReduceMaxOp>(red);
    const std::string acc = computeType(xe), op = max ? "TcMax" : "TcMin";
    const std::string init =
        fl ? floatLiteral(max ? -INFINITY : INFINITY, dbl)
           : max ? (isU64(xe) ? "0ull" : "(-9223372036854775807ll - 1)")
                 : (isU64(xe) ? "~0ull" : "9223372036854775807ll");
    const int64_t V = vectorWidth(numel);
    const bool vec = V > 1;
    k.launch.block = 256;
    // At most kFullReductionBlocks blocks (about one wave on an H200): each
    // block's tail (its reduction, a fence and the counter) then runs once
    // per resident block, not once per wave of 8192 (the 1B step's weight
    // casts with this tail ran at 2.1 TB/s with 8192 blocks, 3.3 without it).
    k.launch.grid = std::min(gridFor(vec ? numel / V : numel, 256), kFullReductionBlocks);
    globals += "__device__ " + acc + " tc_part_[" + std::to_string(kFullReductionBlocks) + "];\n__device__ unsigned int tc_done_[1];\n";
    auto update = [&](llvm::DenseMap<Value, std::string> &names) {
      return "acc_ = " + op + "()(acc_, (" + acc + ")" + names.lookup(x) + ");\n";
    };
    s += "  const long long total_ = meta.v[0];\n";
    s += "  const long long stride = (long long)gridDim.x * blockDim.x;\n";
    s += "  " + acc + " acc_ = " + init + ";\n";
    if (vec) {
      if (failed(vectorLoop(s, V, "total_", update)))
        return failure();
      s += "  } else {\n";
    }
    s += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total_; "
         "i += stride) {\n";
    if (needIdx)
      s += "    const long long j = i;\n" + idxCode("    ");
    llvm::DenseMap<Value, std::string> names;
    std::string eval;
    if (failed(evalCode("    ", false, names, eval)))
      return failure();
    s += eval + storeCode("    ", names, true) + "    " + update(names) + "  }\n";
    if (vec)
      s += "  }\n";
    s += "  acc_ = tc_block_reduce(acc_, " + op + "(), (" + acc + ")" + init + ");\n";
    s += "  __shared__ bool last_;\n";
    s += "  if (threadIdx.x == 0) {\n    tc_part_[blockIdx.x] = acc_;\n    __threadfence();\n"
         "    last_ = atomicAdd(&tc_done_[0], 1u) == gridDim.x - 1;\n  }\n";
    s += "  __syncthreads();\n  if (!last_) return;\n  __threadfence();\n";
    s += "  acc_ = " + init + ";\n";
    s += "  for (unsigned p_ = threadIdx.x; p_ < gridDim.x; p_ += blockDim.x)\n";
    s += "    acc_ = " + op + "()(acc_, ((volatile " + acc + " *)tc_part_)[p_]);\n";
    s += "  acc_ = tc_block_reduce(acc_, " + op + "(), (" + acc + ")" + init + ");\n";
    s += "  if (threadIdx.x == 0) {\n";
    for (auto [i, v] : llvm::enumerate(yielded))
      if (v.getDefiningOp() == red)
        s += "    out" + std::to_string(i) + "[0] = " + storeExpr(eltOf(v), "acc_") + ";\n";
    s += "    tc_done_[0] = 0;\n  }\n";
    return success();
  }

  LogicalResult rowKernel(std::string &s, KernelSource &k) {
    // A warp per row up to 4096 elements: 8 independent rows per block and no
    // __syncthreads (attention softmax rows of 1024: block-per-row kernels
    // were latency-bound, 1.3 ms for [16,12,1024,1024] on the H200).
    int64_t tpr = rowLen > 4096 || smallRow() ? 256 : 32;
    k.launch.block = 256;
    k.launch.grid = gridFor(rows, 256 / tpr);
    // A few long rows (the sum of squares of a whole gradient for the
    // grad-norm clip, from 32K elements: a [256, 768] GQA key projection's
    // took 47 us in one block): S blocks per row, each reduces a slice of about 4K
    // elements (16 per thread, the loop unrolled by 4 so that each thread
    // has four loads in flight: 256 blocks of scalar loads moved a third of
    // the H200's bandwidth, and slices of 16K left a [768, 3072] gradient
    // 144 blocks, about one per SM); the last block to finish (a counter in module
    // memory) combines the S partials in block order, so the result does not
    // depend on timing.
    const bool split = !tc::isLastAxisSoftmax(red) && rows <= kSplitRows &&
                       rowLen >= (int64_t(1) << 15);
    const int64_t S = split ? std::clamp<int64_t>(rowLen / 4096, 2, kSplitParts) : 1;
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
      if (splitRow()) {
        // The grouped entry's body sees its item's blocks as blockIdx.x / gridDim.x
        // (bid_ / nb_); tc_block_index() is the launch's, so first_ is the item's
        // first block: its slots.
        globals += "__device__ " + acc + " tc_part_[" + std::to_string(kGroupSlots) +
                   "];\n__device__ unsigned int tc_done_[" + std::to_string(kGroupSlots) +
                   "];\n// tc:group_max_blocks " + std::to_string(kGroupSlots) +
                   "\n__device__ __forceinline__ long long tc_block_index() { return blockIdx.x; }\n";
        s += "  const long long rowLen = n, S_ = gridDim.x;\n";
        s += "  const long long row = 0, part_ = blockIdx.x, first_ = tc_block_index() - part_;\n";
        Ss = "S_";
      } else {
        globals += "__device__ " + acc + " tc_part_[" + std::to_string(kSplitRows * kSplitParts) +
                   "];\n__device__ unsigned int tc_done_[" + std::to_string(kSplitRows) + "];\n";
        s += "  const long long rowLen = meta.v[0];\n";
        s += "  const long long row = blockIdx.x / " + Ss + ", part_ = blockIdx.x % " + Ss + ";\n";
      }
      s += "  const long long chunk_ = (rowLen + " + Ss + " - 1) / " + Ss + ";\n";
      s += "  const long long lane = part_ * chunk_ + threadIdx.x;\n";
      s += "  const long long end_ = rowLen < (part_ + 1) * chunk_ ? rowLen : (part_ + 1) * chunk_;\n";
      s += splitRow() ? "  if (row < 1) {\n" : "  if (row < n) {\n";
      s += rowIdxCode("    ");
      end = "end_";
    } else if (smallRow()) {
      s += "  const int lane = threadIdx.x;\n";
      s += "  const long long rowLen = n;\n";
      s += "  for (long long row = blockIdx.x; row < 1; row += gridDim.x) {\n";
    } else {
      s += "  const int lane = threadIdx.x % " + T + ";\n";
      s += "  const long long rowsPerBlock = blockDim.x / " + T + ";\n";
      s += "  const long long rowLen = meta.v[0];\n";
      s += "  for (long long row = (long long)blockIdx.x * rowsPerBlock + threadIdx.x / " + T +
           "; row < n; row += (long long)gridDim.x * rowsPerBlock) {\n";
      s += rowIdxCode("    ");
    }
    auto pass = [&](const std::string &before, const std::string &after, bool stores) -> LogicalResult {
      if (split)
        s += "#pragma unroll 4\n";
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
      // Slots of this row's partials and its counter.
      std::string Ss = splitRow() ? "S_" : std::to_string(S);
      std::string slot0 = splitRow() ? "first_" : "row * " + Ss, done = splitRow() ? "first_" : "row";
      s += "    __shared__ bool last_;\n";
      s += "    if (threadIdx.x == 0) {\n      tc_part_[" + slot0 + " + part_] = acc_;\n"
           "      __threadfence();\n      last_ = atomicAdd(&tc_done_[" + done + "], 1u) == " + Ss + " - 1;\n    }\n";
      s += "    __syncthreads();\n    if (!last_) return;\n    __threadfence();\n";
      s += "    acc_ = " + init + ";\n";
      s += "    for (long long p_ = threadIdx.x; p_ < " + Ss + "; p_ += 256)\n";
      s += "      acc_ = " + op + "()(acc_, ((volatile " + acc + " *)tc_part_)[" + slot0 + " + p_]);\n";
      s += "    acc_ = " + reduce("acc_", op.c_str(), init) + ";\n";
      s += "    if (threadIdx.x == 0) tc_done_[" + done + "] = 0;\n";
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

} // namespace

FailureOr<KernelSource> fusionKernel(tc::FusionOp fusion, const CodegenOptions &options) {
  return FusionGen(fusion, options).generate();
}
FailureOr<KernelSource> fusionKernel(tcx::KernelOp kernel, const CodegenOptions &options) {
  return FusionGen(kernel, options).generate();
}

} // namespace tc::cuda::detail
