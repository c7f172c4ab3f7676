//===- attention_generic.cu - attention, one warp per row -----------------===//
//
// The generic path of attention.cu (f32 storage, always with fp32 FMA math
// and never TF32, and bf16 or f16 with other head dims or layouts): one warp per
// query row (forward, dQ) or key row (dK/dV), the head dims spread over the
// lanes (d, dv <= 256), keys visited one by one with an online softmax;
// correct, not fast. A key mask skips hidden keys, and a row that attends to
// every key (attention.cuh) takes its averagedScaled scores.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/kernels/attention.cuh"

namespace tc::rt::cuda::attn {
namespace {

using namespace kern;

constexpr int kRowsPerBlock = 4; // one warp per row
constexpr int kLaneElems = kMaxHeadDim / 32;

/// Lane l holds elements l, l + 32, ... of a row of n <= 256 (0 past n).
template <class T>
__device__ __forceinline__ void loadLanes(const T *row, int64_t n, float (&x)[kLaneElems]) {
  int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < kLaneElems; ++r) {
    int64_t c = lane + 32 * r;
    x[r] = c < n ? toF(row[c]) : 0.0f;
  }
}
/// row[c] = x * sc as loadLanes lays it out; returns the lane's max |x * sc|
/// (f32, before rounding) of what it stored, for warpAmax.
template <class T>
__device__ __forceinline__ float storeLanes(T *row, int64_t n, const float (&x)[kLaneElems],
                                            float sc) {
  int lane = threadIdx.x % 32;
  float m = 0.0f;
#pragma unroll
  for (int r = 0; r < kLaneElems; ++r) {
    int64_t c = lane + 32 * r;
    if (c < n) {
      row[c] = fromF<T>(x[r] * sc);
      m = fmaxf(m, fabsf(x[r] * sc));
    }
  }
  return m;
}
/// sum over the row of a[c] * row[c], on every lane (fixed butterfly order).
template <class T>
__device__ __forceinline__ float dotLanes(const float (&a)[kLaneElems], const T *row, int64_t n) {
  int lane = threadIdx.x % 32;
  float s = 0.0f;
#pragma unroll
  for (int r = 0; r < kLaneElems; ++r) {
    int64_t c = lane + 32 * r;
    if (c < n)
      s = fmaf(a[r], toF(row[c]), s);
  }
  return warpSum(s);
}
/// acc[c] += w * row[c].
template <class T>
__device__ __forceinline__ void axpyLanes(float (&acc)[kLaneElems], float w, const T *row,
                                          int64_t n) {
  int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < kLaneElems; ++r) {
    int64_t c = lane + 32 * r;
    if (c < n)
      acc[r] = fmaf(w, toF(row[c]), acc[r]);
  }
}

/// Whether query row i of batch b attends to every key (a finite fill and
/// no visible key among the keys it may see: attention.cuh), the same on
/// every lane.
template <class T>
__device__ __forceinline__ bool averagedRow(const GenericParams<T> &p, int64_t b, int64_t i) {
  if (!p.keys || p.fill == -INFINITY)
    return false;
  const uint8_t *keys = p.keys + b * p.tk;
  int64_t jEnd = p.causal ? min(p.tk, i + 1) : p.tk;
  for (int64_t j0 = 0; j0 < jEnd; j0 += 32) {
    int64_t j = j0 + threadIdx.x % 32;
    if (__any_sync(kFullMask, j < jEnd && keys[j] != 0))
      return false;
  }
  return true;
}

/// Whether key j of batch b is hidden from every query by the key mask.
template <class T>
__device__ __forceinline__ bool hiddenKey(const GenericParams<T> &p, int64_t b, int64_t j) {
  return p.keys && p.keys[b * p.tk + j] == 0;
}

/// One warp per query row (b, h, i) of batch * heads * tq.
template <class T>
__global__ void __launch_bounds__(kRowsPerBlock * 32) attnFwdGenericKernel(GenericParams<T> p) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= p.batch * p.heads * p.tq)
    return;
  int64_t i = row % p.tq, bh = row / p.tq, h = bh % p.heads, b = bh / p.heads,
          kvh = h / p.group;
  const T *k = p.k + b * p.ks.batch + kvh * p.ks.head;
  const T *v = p.v + b * p.vs.batch + kvh * p.vs.head;
  float q[kLaneElems], o[kLaneElems] = {};
  loadLanes(p.q + b * p.qs.batch + h * p.qs.head + i * p.qs.row, p.d, q);
  float m = -INFINITY, l = 0.0f;
  const bool averaged = averagedRow(p, b, i);
  int64_t jEnd = p.causal && !averaged ? min(p.tk, i + 1) : p.tk;
  for (int64_t j = 0; j < jEnd; ++j) {
    if (!averaged && hiddenKey(p, b, j))
      continue;
    float dot = dotLanes(q, k + j * p.ks.row, p.d);
    float s = averaged ? averagedScaled(dot, p.scale, p.fill) : dot * p.scale;
    float w;
    if (s > m) {
      float corr = expf(m - s); // 0 for the first key
      l *= corr;
#pragma unroll
      for (int r = 0; r < kLaneElems; ++r)
        o[r] *= corr;
      m = s;
      w = 1.0f;
    } else {
      w = expf(s - m);
    }
    l += w;
    axpyLanes(o, w, v + j * p.vs.row, p.dv_);
  }
  float mo = storeLanes(p.out + b * p.os.batch + h * p.os.head + i * p.os.row, p.dv_, o,
                        l > 0.0f ? 1.0f / l : 0.0f);
  warpAmax<T>(p.amax, mo);
  if (p.lse && threadIdx.x % 32 == 0)
    p.lse[row] = l > 0.0f ? m + logf(l) : -INFINITY;
}

/// dd[b, h, i] = sum_c dout[b, h, i, c] * out[b, h, i, c] (fp32), one warp per
/// row (the fast path computes it in its dQ kernel).
template <class T>
__global__ void __launch_bounds__(kRowsPerBlock * 32) attnBwdDotKernel(GenericParams<T> p) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= p.batch * p.heads * p.tq)
    return;
  int64_t i = row % p.tq, bh = row / p.tq, h = bh % p.heads, b = bh / p.heads;
  float dO[kLaneElems];
  loadLanes(p.dout + b * p.dos.batch + h * p.dos.head + i * p.dos.row, p.dv_, dO);
  float s = dotLanes(dO, p.o + b * p.os.batch + h * p.os.head + i * p.os.row, p.dv_);
  if (threadIdx.x % 32 == 0)
    p.dd[row] = s;
}

/// One warp per query row: dq = scale * sum_j p (dp - D) k_j.
template <class T>
__global__ void __launch_bounds__(kRowsPerBlock * 32) attnBwdDqGenericKernel(GenericParams<T> p) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= p.batch * p.heads * p.tq)
    return;
  int64_t i = row % p.tq, bh = row / p.tq, h = bh % p.heads, b = bh / p.heads,
          kvh = h / p.group;
  const T *k = p.k + b * p.ks.batch + kvh * p.ks.head;
  const T *v = p.v + b * p.vs.batch + kvh * p.vs.head;
  float q[kLaneElems], dO[kLaneElems], dq[kLaneElems] = {};
  loadLanes(p.q + b * p.qs.batch + h * p.qs.head + i * p.qs.row, p.d, q);
  loadLanes(p.dout + b * p.dos.batch + h * p.dos.head + i * p.dos.row, p.dv_, dO);
  const bool averaged = averagedRow(p, b, i);
  int64_t jEnd = p.causal && !averaged ? min(p.tk, i + 1) : p.tk;
  float lse = jEnd > 0 ? p.lseIn[row] : 0.0f, dd = jEnd > 0 ? p.dd[row] : 0.0f;
  for (int64_t j = 0; j < jEnd; ++j) {
    if (!averaged && hiddenKey(p, b, j))
      continue;
    float dot = dotLanes(q, k + j * p.ks.row, p.d);
    float pr =
        expf((averaged ? averagedScaled(dot, p.scale, p.fill) : dot * p.scale) - lse);
    float dp = dotLanes(dO, v + j * p.vs.row, p.dv_);
    axpyLanes(dq, pr * (dp - dd), k + j * p.ks.row, p.d);
  }
  float mq = storeLanes(p.dq + b * p.dqs.batch + h * p.dqs.head + i * p.dqs.row, p.d, dq, p.scale);
  warpAmax<T>(gradAmax(p, kAmaxOfDq), mq);
}

/// One warp per key row (b, kvh, j): dk = scale * sum over the group's heads
/// and the queries of p (dp - D) q_i, dv = sum p dout_i.
template <class T>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    attnBwdDkDvGenericKernel(GenericParams<T> p) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= p.batch * p.kvHeads * p.tk)
    return;
  int64_t j = row % p.tk, bkv = row / p.tk, kvh = bkv % p.kvHeads, b = bkv / p.kvHeads;
  float k[kLaneElems], v[kLaneElems], dk[kLaneElems] = {}, dv[kLaneElems] = {};
  loadLanes(p.k + b * p.ks.batch + kvh * p.ks.head + j * p.ks.row, p.d, k);
  loadLanes(p.v + b * p.vs.batch + kvh * p.vs.head + j * p.vs.row, p.dv_, v);
  // The queries [0, avg) attend to every key (attention.cuh); the others
  // see this key unless it is hidden or right of them.
  int64_t avg = 0;
  if (p.keys && p.fill != -INFINITY) {
    const uint8_t *keys = p.keys + b * p.tk;
    int64_t first = p.tk;
    for (int64_t j0 = 0; j0 < p.tk && first == p.tk; j0 += 32) {
      unsigned any = __ballot_sync(kFullMask, j0 + threadIdx.x % 32 < p.tk &&
                                                  keys[j0 + threadIdx.x % 32] != 0);
      if (any)
        first = j0 + __ffs(any) - 1;
    }
    avg = averagedRows(static_cast<int>(first), static_cast<int>(p.tq), static_cast<int>(p.tk),
                       p.causal, p.fill);
  }
  const bool hidden = hiddenKey(p, b, j);
  for (int64_t hh = 0; hh < p.group; ++hh) {
    int64_t h = kvh * p.group + hh, bh = b * p.heads + h;
    const T *q = p.q + b * p.qs.batch + h * p.qs.head;
    const T *dO = p.dout + b * p.dos.batch + h * p.dos.head;
    for (int64_t i = p.causal && avg == 0 ? j : 0; i < p.tq; ++i) {
      const bool averaged = i < avg;
      if (!averaged && (hidden || (p.causal && j > i)))
        continue;
      float dot = dotLanes(k, q + i * p.qs.row, p.d);
      float pr = expf((averaged ? averagedScaled(dot, p.scale, p.fill) : dot * p.scale) -
                      p.lseIn[bh * p.tq + i]);
      float dp = dotLanes(v, dO + i * p.dos.row, p.dv_);
      axpyLanes(dv, pr, dO + i * p.dos.row, p.dv_);
      axpyLanes(dk, pr * (dp - p.dd[bh * p.tq + i]), q + i * p.qs.row, p.d);
    }
  }
  float mk = storeLanes(p.dk + b * p.dks.batch + kvh * p.dks.head + j * p.dks.row, p.d, dk,
                        p.scale);
  float mv = storeLanes(p.dv + b * p.dvs.batch + kvh * p.dvs.head + j * p.dvs.row, p.dv_, dv, 1.0f);
  // One reduction and atomic for both gradients: rounding is monotonic, so
  // the rounded max of their maxes is the max of their rounded maxes.
  float m = fmaxf(p.amaxOf & kAmaxOfDk ? mk : 0.0f, p.amaxOf & kAmaxOfDv ? mv : 0.0f);
  warpAmax<T>(gradAmax(p, kAmaxOfDk | kAmaxOfDv), m);
}

unsigned rowBlocks(int64_t rows) { return static_cast<unsigned>(ceilDiv(rows, kRowsPerBlock)); }

} // namespace

template <class T> Status genericForward(const GenericParams<T> &p, cudaStream_t stream) {
  attnFwdGenericKernel<T>
      <<<rowBlocks(p.batch * p.heads * p.tq), kRowsPerBlock * 32, 0, stream>>>(p);
  return checkLaunch("attention_forward_generic");
}

template <class T> Status genericBackward(const GenericParams<T> &g, cudaStream_t stream) {
  bool rowsQ = g.tq > 0, rowsK = g.tk > 0;
  if (rowsQ && rowsK) {
    attnBwdDotKernel<T>
        <<<rowBlocks(g.batch * g.heads * g.tq), kRowsPerBlock * 32, 0, stream>>>(g);
    TC_RETURN_IF_ERROR(checkLaunch("attention_backward_dot"));
  }
  // tq == 0: dk, dv = 0; tk == 0: dq = 0 (the loops run zero times).
  if (rowsK) {
    attnBwdDkDvGenericKernel<T>
        <<<rowBlocks(g.batch * g.kvHeads * g.tk), kRowsPerBlock * 32, 0, stream>>>(g);
    TC_RETURN_IF_ERROR(checkLaunch("attention_backward_dkdv_generic"));
  }
  if (rowsQ) {
    attnBwdDqGenericKernel<T>
        <<<rowBlocks(g.batch * g.heads * g.tq), kRowsPerBlock * 32, 0, stream>>>(g);
    TC_RETURN_IF_ERROR(checkLaunch("attention_backward_dq_generic"));
  }
  return Status::ok();
}

template Status genericForward(const GenericParams<float> &, cudaStream_t);
template Status genericForward(const GenericParams<bf16> &, cudaStream_t);
template Status genericForward(const GenericParams<f16> &, cudaStream_t);
template Status genericBackward(const GenericParams<float> &, cudaStream_t);
template Status genericBackward(const GenericParams<bf16> &, cudaStream_t);
template Status genericBackward(const GenericParams<f16> &, cudaStream_t);

} // namespace tc::rt::cuda::attn
