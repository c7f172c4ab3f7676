//===- Fp4.cpp - sm_120a's block-scaled FP4 GEMMs (--fp4-qat) ----------------===//
//
// A tc.matmul that planFp4Gemms (compiler/Transforms/Fp4Qat.h) marked
// tc.fp4_gemm on an sm_120 target reads two tc.fake_quantize results with
// blocks along its K. Instead of a bf16 GEMM on the fake-quantised values it
// becomes:
//   - one "quantize_fp4" call per operand (shared by every marked product
//     that reads the same tc.fake_quantize), from the fake_quantize's input
//     with its format, blocks and rounding: the E2M1 codes [rows, K / 2]
//     (K contiguous: an operand read along its axis 0 is written
//     transposed, the TN form; a 16x16-blocked weight is packed along
//     whichever axis the product contracts, its blocks and values being the
//     same both ways), the block scales in cuBLASLt's 128x4
//     layout and nvfp4's tensor scale, in allocs of their own (the memory
//     plan counts them) -- the same values as fake_quantize's, bit for bit;
//   - the GEMM: "nvfp4_gemm" (cuBLASLt's VEC16_UE4M3 kernels, alpha the
//     product of the tensor scales, read on the device) or "fp4_mma_gemm"
//     (tc's mma.sync kind::mxf4 kernel, runtime/src/cuda/kernels/
//     fp4_gemm.cu), writing the matmul's bf16 result.
// The tc.fake_quantize ops stay: their bf16 results are what the backward
// (straight-through) and any product on the emulated path read, and
// tcx-eliminate-dead-work drops those nobody reads.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Conversion/TcToTcx/Patterns.h"
#include "compiler/Transforms/Fp4Qat.h"
#include "runtime/src/schema/library_abi.h"

using namespace mlir;

namespace tc {
namespace {

struct Fp4GemmLowering : TcxPattern<MatmulOp> {
  using TcxPattern::TcxPattern;

  /// The quantize_fp4 copy of `fq`'s values with K = `axis` contiguous
  /// (made on first use).
  BufferAssignment::PackedFp4 packed(FakeQuantizeOp fq, int64_t axis,
                                     ConversionPatternRewriter &rewriter) const {
    Value key = fq.getResult();
    auto it = buffers.packedFp4.find({key, axis});
    if (it != buffers.packedFp4.end())
      return it->second;
    auto t = tensorType(fq.getInput());
    int64_t rank = t.getRank(), outer = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d)
      if (d < axis)
        outer *= t.getDimSize(d);
      else if (d > axis)
        inner *= t.getDimSize(d);
    int64_t len = t.getDimSize(axis), rows = outer * inner;
    bool mx = fq.getFormat() == "mxfp4";
    Type i8 = rewriter.getIntegerType(8);
    auto bytes = [&](int64_t n) {
      return buffers.companionBuffer(rewriter, key, tcx::BufferType::get({n}, i8));
    };
    BufferAssignment::PackedFp4 p;
    p.q = bytes(rows * rt::fp4PackedRowBytes(len, mx));
    p.scales = bytes(rt::fp4ScaleLayoutBytes(rows, len, mx));
    SmallVector<Value> outs{p.q, p.scales};
    if (!mx) {
      p.tensorScale = buffers.companionBuffer(
          rewriter, key, tcx::BufferType::get({1}, rewriter.getF32Type()));
      outs.push_back(p.tensorScale);
    }
    SmallVector<Value> ins{buffers.bufferOf(rewriter, fq.getInput())};
    if (fq.getStep())
      ins.push_back(buffers.bufferOf(rewriter, fq.getStep()));
    auto i64 = [&](const char *name, int64_t v) {
      return rewriter.getNamedAttr(name, rewriter.getI64IntegerAttr(v));
    };
    auto flag = [&](const char *name, bool v) {
      return rewriter.getNamedAttr(name, rewriter.getBoolAttr(v));
    };
    buffers.library(rewriter, fq.getLoc(), "quantize_fp4", ins, outs,
                    {i64("outer", outer), i64("len", len), i64("inner", inner), flag("mxfp4", mx),
                     flag("blocks2d", fq.getBlocks2d()), flag("stochastic", fq.getStochastic()),
                     flag("has_tensor_scale", !mx),
                     i64("seed", static_cast<int64_t>(fq.getSeed())),
                     i64("rng_stream", static_cast<int64_t>(fq.getStream()))});
    buffers.packedFp4[{key, axis}] = p;
    return p;
  }

  LogicalResult matchAndRewrite(MatmulOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (!op->hasAttr(kFp4GemmAttr))
      return rewriter.notifyMatchFailure(op, "not a block-scaled FP4 GEMM");
    Fp4GemmForm f;
    if (!fp4GemmForm(op, &f).empty()) // checkFp8Op named it before the conversion
      return rewriter.notifyMatchFailure(op, "no block-scaled FP4 GEMM form");
    auto lhs = llvm::cast<FakeQuantizeOp>(f.lhs), rhs = llvm::cast<FakeQuantizeOp>(f.rhs);
    if (!buffers.bufferOf(rewriter, lhs.getInput()) || !buffers.bufferOf(rewriter, rhs.getInput()))
      return rewriter.notifyMatchFailure(op, "an operand's input has no buffer yet");
    BufferAssignment::PackedFp4 a = packed(lhs, f.lhsAxis, rewriter),
                                b = packed(rhs, f.rhsAxis, rewriter);
    Value d = buffers.outBuffer(rewriter, op.getResult());
    SmallVector<NamedAttribute> sizes{
        rewriter.getNamedAttr("m", rewriter.getI64IntegerAttr(f.m)),
        rewriter.getNamedAttr("n", rewriter.getI64IntegerAttr(f.n)),
        rewriter.getNamedAttr("k", rewriter.getI64IntegerAttr(f.k))};
    if (f.format == "nvfp4")
      buffers.library(rewriter, op.getLoc(), "nvfp4_gemm",
                      {a.q, a.scales, a.tensorScale, b.q, b.scales, b.tensorScale}, {d}, sizes);
    else
      buffers.library(rewriter, op.getLoc(), "fp4_mma_gemm", {a.q, a.scales, b.q, b.scales}, {d},
                      sizes);
    rewriter.replaceOp(op, d);
    return success();
  }
};

} // namespace

void populateTcToTcxFp4Patterns(RewritePatternSet &patterns, BufferAssignment &buffers) {
  patterns.add<Fp4GemmLowering>(patterns.getContext(), buffers);
}

} // namespace tc
