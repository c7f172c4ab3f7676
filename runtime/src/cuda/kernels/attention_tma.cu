//===- attention_tma.cu - attention forward on TMA and wgmma (sm_90a) ----===//
//
// The forward of bench/attn_sm90.cu's FlashAttention-3 form, for the
// runtime: a block owns 128 queries of one (batch, head); a producer
// warpgroup loads Q once and the K/V tiles of 128 keys by TMA (4-D tensor
// maps over [batch, heads, t, 64] with any 16-byte strides, 128-byte
// swizzle, rows past t zero-filled); two consumer warpgroups of 64 queries
// compute S = Q K^T by m64n128k16 wgmmas from shared memory, the online
// softmax (log2 domain, one ex2.approx a score, the tiles past tk or right
// of the diagonal masked) and O += P V by m64n64k16 wgmmas with P's bf16 A
// fragments in registers and V as the transposed B. Two forms: in turn
// (each product waited for) and overlapped (tile j's scores issued with
// tile j-1's PV, its softmax under that product: FlashAttention-3's
// intra-warpgroup pipelining, three K/V stages).
//
// bf16, d == dv == 64, no key mask, scale > 0 (attention.cu's checks); out,
// lse (natural log, -inf for a row with no key) and out's amax as the flash
// forward writes them.
//
// The backward (tmaBackward), deterministic as the flash one: tmaDqKernel
// (128 queries a block over the key tiles; D = rowsum(dO out) first, into
// the scratch) then tmaDkDvKernel (128 keys of a kv head a block over the
// query tiles of 64 of each head of its group; their lse and D rows by 1-D
// tensor maps), the gradients' amax and the column sums in their epilogues.
//
// Taken only with TC_ATTN_TMA=1 (every product waited for: the forward and
// the backward in turn) or 2 (the forward overlapped, the backward's
// products chained): a measurement knob until measured
// (bench/RESULTS.md, stops 39-40).
//
//===----------------------------------------------------------------------===//
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/src/cuda/kernels/attention.cuh"
#include "runtime/src/cuda/kernels/attention_tma.cuh"

namespace tc::rt::cuda::attn {
namespace {

using namespace tma;

/// A 4-D tensor map over an operand [batch, heads, t, 64] with the given
/// element strides, read in boxes of `rows` rows of one (batch, head).
Status tensorMap4d(CUtensorMap *map, const void *ptr, const AttentionStrides &st, int64_t batch,
                   int64_t heads, int64_t t, const char *what, int rows = kBQ) {
  cuuint64_t dims[4] = {cuuint64_t(kD), cuuint64_t(t), cuuint64_t(heads), cuuint64_t(batch)};
  cuuint64_t strides[3] = {cuuint64_t(st.row) * 2, cuuint64_t(st.head) * 2,
                           cuuint64_t(st.batch) * 2};
  cuuint32_t box[4] = {kD, cuuint32_t(rows), 1, 1}, elem[4] = {1, 1, 1, 1};
  CUresult r = g90::encodeTiled()(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void *>(ptr),
                                  dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return internalError(std::string("attention (TMA): cuTensorMapEncodeTiled of ") + what +
                         " failed (" + std::to_string(int(r)) + ")");
  return Status::ok();
}

/// A 1-D tensor map over n f32 values (lse or D of [batch, heads, tq]), read
/// in boxes of DkDvLayout::kRows (zero past n).
Status tensorMap1d(CUtensorMap *map, const float *ptr, int64_t n, const char *what) {
  cuuint64_t dims[1] = {cuuint64_t(n)}, strides[1] = {0};
  cuuint32_t box[1] = {DkDvLayout::kRows}, elem[1] = {1};
  CUresult r = g90::encodeTiled()(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1, const_cast<float *>(ptr),
                                  dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return internalError(std::string("attention (TMA): cuTensorMapEncodeTiled of ") + what +
                         " failed (" + std::to_string(int(r)) + ")");
  return Status::ok();
}

template <class K, class... Args>
Status launch(K kernel, int smem, int64_t blocks, cudaStream_t stream, const Args &...args) {
  TC_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kernel<<<static_cast<unsigned>(blocks), 384, smem, stream>>>(args...);
  TC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::ok();
}

template <bool Overlap>
Status launchTma(const FastParams<bf16> &p, const CUtensorMap &mq, const CUtensorMap &mk,
                 const CUtensorMap &mv, cudaStream_t stream) {
  constexpr int smem = TmaLayout < Overlap ? 3 : 2 > ::bytes;
  const int64_t blocks = int64_t((p.tq + kBQ - 1) / kBQ) * p.batch * p.heads;
  return launch(tmaFwdKernel<Overlap>, smem, blocks, stream, mq, mk, mv, p);
}

} // namespace

int tmaAttentionForm() {
  const char *v = std::getenv("TC_ATTN_TMA");
  if (!v)
    return 0;
  return std::strcmp(v, "1") == 0 ? 1 : std::strcmp(v, "2") == 0 ? 2 : 0;
}

Status tmaForward(const FastParams<bf16> &p, int form, cudaStream_t stream) {
  if (!g90::encodeTiled())
    return internalError("attention (TMA): the driver has no cuTensorMapEncodeTiled");
  CUtensorMap mq, mk, mv;
  TC_RETURN_IF_ERROR(tensorMap4d(&mq, p.q, p.qs, p.batch, p.heads, p.tq, "q"));
  TC_RETURN_IF_ERROR(tensorMap4d(&mk, p.k, p.ks, p.batch, p.kvHeads, p.tk, "k"));
  TC_RETURN_IF_ERROR(tensorMap4d(&mv, p.v, p.vs, p.batch, p.kvHeads, p.tk, "v"));
  return form == 2 ? launchTma<true>(p, mq, mk, mv, stream)
                   : launchTma<false>(p, mq, mk, mv, stream);
}


Status tmaBackward(const FastParams<bf16> &p0, int form, cudaStream_t stream,
                   const AttentionGradSums &sums) {
  if (!g90::encodeTiled())
    return internalError("attention (TMA): the driver has no cuTensorMapEncodeTiled");
  FastParams<bf16> p = p0;
  const AttentionShape s{p.batch, p.heads, p.kvHeads, p.tq, p.tk, kD, kD};
  const int64_t nQ = (p.tq + kBQ - 1) / kBQ, nK = (p.tk + kBN - 1) / kBN;
  // The column sums' partials: a chunk is a block's 128 rows.
  const GradSumParts parts = gradSumParts(s, p.csQ, nQ, nK, sums);
  if (sums.out) {
    p.csK = parts.k, p.csV = parts.v;
    p.csRowQ = static_cast<int>(parts.rowQ), p.csRowKV = static_cast<int>(parts.rowK);
  } else {
    p.csQ = p.csK = p.csV = nullptr;
  }
  CUtensorMap mq, mdo, mk, mv, mq64, mdo64, ml, md;
  TC_RETURN_IF_ERROR(tensorMap4d(&mq, p.q, p.qs, p.batch, p.heads, p.tq, "q"));
  TC_RETURN_IF_ERROR(tensorMap4d(&mdo, p.dout, p.dos, p.batch, p.heads, p.tq, "dout"));
  TC_RETURN_IF_ERROR(tensorMap4d(&mk, p.k, p.ks, p.batch, p.kvHeads, p.tk, "k"));
  TC_RETURN_IF_ERROR(tensorMap4d(&mv, p.v, p.vs, p.batch, p.kvHeads, p.tk, "v"));
  TC_RETURN_IF_ERROR(
      tensorMap4d(&mq64, p.q, p.qs, p.batch, p.heads, p.tq, "q", DkDvLayout::kRows));
  TC_RETURN_IF_ERROR(
      tensorMap4d(&mdo64, p.dout, p.dos, p.batch, p.heads, p.tq, "dout", DkDvLayout::kRows));
  const int64_t rows = int64_t(p.batch) * p.heads * p.tq;
  TC_RETURN_IF_ERROR(tensorMap1d(&ml, p.lseIn, rows, "lse"));
  TC_RETURN_IF_ERROR(tensorMap1d(&md, p.dd, rows, "D"));
  // dQ and D first: the dK/dV kernel reads D.
  const int64_t dqBlocks = nQ * p.batch * p.heads, kvBlocks = nK * p.batch * p.kvHeads;
  if (form == 2) {
    TC_RETURN_IF_ERROR(launch(tmaDqKernel<true>, DqLayout::bytes, dqBlocks, stream, mq, mk, mv,
                              mdo, p));
    TC_RETURN_IF_ERROR(launch(tmaDkDvKernel<true>, DkDvLayout::bytes, kvBlocks, stream, mq64, mk,
                              mv, mdo64, ml, md, p));
  } else {
    TC_RETURN_IF_ERROR(launch(tmaDqKernel<false>, DqLayout::bytes, dqBlocks, stream, mq, mk, mv,
                              mdo, p));
    TC_RETURN_IF_ERROR(launch(tmaDkDvKernel<false>, DkDvLayout::bytes, kvBlocks, stream, mq64,
                              mk, mv, mdo64, ml, md, p));
  }
  if (!sums.out)
    return Status::ok();
  return finishGradSums<bf16>(s, parts, sums, stream);
}

} // namespace tc::rt::cuda::attn
