//===- attention_sums.cu - column sums and amaxes of attention's gradients ===//
//
// AttentionGradSums (kernels.h): the bias gradient of a fused qkv
// projection is the column sum over (batch, t) of the gradient dq, dk and
// dv form. The flash backward kernels write the f32 column sums of the rows
// each block stores (attention_tiles.cuh's blockColumnSums) as they store
// them; the other paths (generic, wgmma) sum the stored gradients here in
// chunks of kAttentionColumnSumRows rows after them. Either way each
// column's partials are then added in a fixed order (column_sum.cu's
// sumColumnPartials): the same bits every run. storedAmax takes the amax of a
// stored operand for the paths that compute none (cuDNN's forward and
// backward); rotateStored rotates a stored gradient in place for the paths
// that do not rotate it as they store it (AttentionGradRotary).
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/kernels/attention.cuh"

#include <algorithm>

namespace tc::rt::cuda::attn {

using namespace kern;

namespace {

constexpr int kChunk = static_cast<int>(kAttentionColumnSumRows);

/// Grid (batch * chunks, heads), block min(d, 256) threads: thread c sums
/// column c (and c + blockDim.x, ...) of the chunk's rows as stored.
template <class T>
__global__ void gradChunkSumsKernel(const T *x, AttentionStrides st, int t, int d, int chunks,
                                    float *part, int64_t row, int64_t head) {
  const int bc = blockIdx.x, h = blockIdx.y, b = bc / chunks, ch = bc % chunks;
  const int r0 = ch * kChunk, r1 = min(t, r0 + kChunk);
  const T *base = x + b * st.batch + h * st.head;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    float s = 0.0f;
    for (int r = r0; r < r1; ++r)
      s += toF(base[static_cast<int64_t>(r) * st.row + c]);
    part[bc * row + h * head + c] = s;
  }
}

constexpr int kAmaxRows = 32; // rows of one (batch, head) per block of storedAmaxKernel

/// Grid (ceil(t / 32), heads, batch), 256 threads: the max |x| over the
/// block's rows as stored, 8 elements a load (x and its strides 16-byte
/// aligned, d % 8 == 0), folded into *amax by atomicMax on the bits.
template <class T>
__global__ void __launch_bounds__(256)
    storedAmaxKernel(const T *x, AttentionStrides st, int t, int d, unsigned *amax) {
  const int vecs = d / kVec, r0 = blockIdx.x * kAmaxRows;
  const T *base = x + blockIdx.z * st.batch + blockIdx.y * st.head;
  unsigned m = 0;
  for (int i = threadIdx.x; i < kAmaxRows * vecs; i += blockDim.x) {
    const int r = r0 + i / vecs;
    if (r >= t)
      break;
    float v[kVec];
    load8(base + static_cast<int64_t>(r) * st.row + (i % vecs) * kVec, v);
#pragma unroll
    for (int j = 0; j < kVec; ++j)
      m = max(m, absBits(v[j]));
  }
  blockAtomicMaxBits(amax, m);
}

/// One thread a rotated pair (b, h, row, k): x[k] and x[k + half] of the
/// row as stored, rotated in f32 by cos / sin[b, row, k] and rounded back.
template <class T>
__global__ void __launch_bounds__(256)
    rotateStoredKernel(T *x, AttentionStrides st, int64_t heads, int64_t t, const T *cos,
                       const T *sin, int64_t half, int64_t pairs) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < pairs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = i % half, row = (i / half) % t, h = (i / half / t) % heads,
                  b = i / half / t / heads;
    T *r = x + b * st.batch + h * st.head + row * st.row;
    const int64_t at = (b * t + row) * half + k;
    const float c = toF(cos[at]), sn = toF(sin[at]), x1 = toF(r[k]), x2 = toF(r[k + half]);
    r[k] = fromF<T>(c * x1 - sn * x2);
    r[k + half] = fromF<T>(sn * x1 + c * x2);
  }
}

} // namespace

template <class T>
Status rotateStored(T *x, AttentionStrides st, int64_t batch, int64_t heads, int64_t t,
                    const T *cos, const T *sin, int64_t half, cudaStream_t stream) {
  const int64_t pairs = batch * heads * t * half;
  if (pairs == 0)
    return Status::ok();
  const int64_t blocks = std::min<int64_t>((pairs + 255) / 256, int64_t(1) << 20);
  rotateStoredKernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(x, st, heads, t, cos,
                                                                          sin, half, pairs);
  return checkLaunch("attention_backward_rotary");
}

template <class T>
Status storedAmax(const T *x, AttentionStrides st, int64_t batch, int64_t heads, int64_t t,
                  int64_t d, float *amax, cudaStream_t stream) {
  if (batch == 0 || heads == 0 || t == 0 || d == 0)
    return Status::ok();
  if (d % kVec != 0 || !aligned16(x) || st.batch % kVec != 0 || st.head % kVec != 0 ||
      st.row % kVec != 0)
    return invalidArgument("attention: the amax after cuDNN needs 16-byte aligned rows");
  if (batch > 65535 || heads > 65535 || (t + kAmaxRows - 1) / kAmaxRows > INT32_MAX)
    return invalidArgument("attention: too many rows or heads for the amax after cuDNN");
  dim3 grid(static_cast<unsigned>((t + kAmaxRows - 1) / kAmaxRows), static_cast<unsigned>(heads),
            static_cast<unsigned>(batch));
  storedAmaxKernel<T><<<grid, 256, 0, stream>>>(x, st, static_cast<int>(t), static_cast<int>(d),
                                                reinterpret_cast<unsigned *>(amax));
  return checkLaunch("attention_stored_amax");
}

template <class T>
Status gradChunkSums(const T *x, AttentionStrides st, int64_t batch, int64_t heads, int64_t t,
                     int64_t d, float *part, int64_t row, int64_t head, cudaStream_t stream) {
  int64_t chunks = (t + kChunk - 1) / kChunk;
  if (batch * chunks == 0 || heads == 0 || d == 0)
    return Status::ok();
  if (batch * chunks > INT32_MAX || heads > 65535)
    return invalidArgument("attentionBackward: too many rows or heads for the column sums");
  dim3 grid(static_cast<unsigned>(batch * chunks), static_cast<unsigned>(heads));
  int threads = static_cast<int>(std::min<int64_t>(d, 256));
  gradChunkSumsKernel<T><<<grid, threads, 0, stream>>>(x, st, static_cast<int>(t),
                                                       static_cast<int>(d),
                                                       static_cast<int>(chunks), part, row, head);
  return checkLaunch("attention_grad_chunk_sums");
}

GradSumParts gradSumParts(const AttentionShape &s, float *part, int64_t chunksQ, int64_t chunksK,
                          const AttentionGradSums &sums) {
  const int64_t cq = s.heads * s.d, ck = s.kvHeads * s.d, cv = s.kvHeads * s.dv;
  GradSumParts g;
  g.chunksQ = chunksQ, g.chunksK = chunksK;
  if (sums.headStride) { // heads interleaved: checked to tile (attentionBackward)
    g.packed = true;
    g.rowQ = g.rowK = g.rowV = cq + ck + cv;
    g.headQ = g.headK = g.headV = sums.headStride;
    g.base = std::min({sums.offsets[0], sums.offsets[1], sums.offsets[2]});
    g.q = part ? part + (sums.offsets[0] - g.base) : nullptr;
    g.k = part ? part + (sums.offsets[1] - g.base) : nullptr;
    g.v = part ? part + (sums.offsets[2] - g.base) : nullptr;
    return g;
  }
  g.headQ = g.headK = s.d, g.headV = s.dv;
  g.base = sums.offsets[0];
  g.packed = chunksQ == chunksK && sums.offsets[1] == sums.offsets[0] + cq &&
             sums.offsets[2] == sums.offsets[1] + ck;
  g.q = part;
  if (g.packed) {
    g.rowQ = g.rowK = g.rowV = cq + ck + cv;
    g.k = part ? part + cq : nullptr;
    g.v = part ? part + cq + ck : nullptr;
  } else {
    g.rowQ = cq, g.rowK = ck, g.rowV = cv;
    g.k = part ? part + s.batch * chunksQ * cq : nullptr;
    g.v = part ? g.k + s.batch * chunksK * ck : nullptr;
  }
  return g;
}

template <class T>
Status finishGradSums(const AttentionShape &s, const GradSumParts &parts,
                      const AttentionGradSums &sums, cudaStream_t stream) {
  const DType dt = std::is_same_v<T, float>  ? DType::F32
                   : std::is_same_v<T, bf16> ? DType::BF16
                                             : DType::F16;
  T *out = static_cast<T *>(sums.out);
  const int64_t rowsQ = s.batch * parts.chunksQ, rowsK = s.batch * parts.chunksK;
  if (parts.packed) { // dq, dk, dv laid out in the rows as in the output, from column base
    const int64_t cols = parts.rowQ;
    if (rowsQ == 0) { // no rows: the sums are 0
      if (cols > 0)
        TC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out + parts.base, 0, cols * sizeof(T), stream));
      return Status::ok();
    }
    return sumColumnPartials(dt, std::min({parts.q, parts.k, parts.v}), rowsQ, cols,
                             out + parts.base, stream);
  }
  const struct {
    const float *part;
    int64_t rows, cols;
  } segs[3] = {{parts.q, rowsQ, s.heads * s.d},
               {parts.k, rowsK, s.kvHeads * s.d},
               {parts.v, rowsK, s.kvHeads * s.dv}};
  for (int i = 0; i < 3; ++i) {
    T *o = out + sums.offsets[i];
    if (segs[i].rows > 0)
      TC_RETURN_IF_ERROR(sumColumnPartials(dt, segs[i].part, segs[i].rows, segs[i].cols, o, stream));
    else if (segs[i].cols > 0) // no rows: the sums are 0
      TC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(o, 0, segs[i].cols * sizeof(T), stream));
  }
  return Status::ok();
}

#define TC_ATTN_SUMS(T)                                                                            \
  template Status gradChunkSums(const T *, AttentionStrides, int64_t, int64_t, int64_t, int64_t,   \
                                float *, int64_t, int64_t, cudaStream_t);                          \
  template Status finishGradSums<T>(const AttentionShape &, const GradSumParts &,                  \
                                    const AttentionGradSums &, cudaStream_t);                      \
  template Status storedAmax(const T *, AttentionStrides, int64_t, int64_t, int64_t, int64_t,      \
                             float *, cudaStream_t);                                               \
  template Status rotateStored(T *, AttentionStrides, int64_t, int64_t, int64_t, const T *,        \
                               const T *, int64_t, cudaStream_t);
TC_ATTN_SUMS(float)
TC_ATTN_SUMS(bf16)
TC_ATTN_SUMS(f16)
#undef TC_ATTN_SUMS

} // namespace tc::rt::cuda::attn
