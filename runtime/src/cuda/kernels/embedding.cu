//===- embedding.cu - embedding gather and its deterministic backward -----===//
//
// Forward: one block per token copies its table row.
//
// Backward (scatter-add of dout rows into dtable rows) without float
// atomics, so that the result is the same bits on every run. A stable
// counting sort groups the token indices by id:
//   1. hist:   a block per chunk of kEmbeddingChunk tokens, a thread per
//              token, adds 1 to counts[chunk, id] (integer atomics);
//   2. column: counts[chunk, id] becomes the exclusive prefix over chunks,
//              total[id] the sum;
//   3. vocab:  base[id] = exclusive prefix of total over ids (one block,
//              coalesced tiles through shared memory);
//   4. place:  a block per chunk again; a token's slot is base[id] +
//              counts[chunk, id] + the tokens of its id before it in its
//              chunk, so sorted[] lists every id's tokens in increasing token
//              order;
//   5. sum:    one block (per tile of columns) owns each vocabulary row and
//              adds its tokens' dout rows in that order.
// Memory: (chunks * vocab + 2 vocab + count) int32 of scratch, chunks =
// ceil(count / kEmbeddingChunk) (GPT-2: 16 Ki tokens, vocabulary 50304: 6.9 MB).
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/kernels/common.cuh"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace kern;

constexpr int kCopyThreads = 128;
constexpr int kScanThreads = 1024;
constexpr int kColumnThreads = 256;

/// id in [0, vocab), or -1 for an id outside [-vocab, vocab).
template <class I> __device__ __forceinline__ int normaliseId(I raw, int64_t vocab) {
  int64_t v = static_cast<int64_t>(raw);
  if (v < 0)
    v += vocab;
  return v < 0 || v >= vocab ? -1 : static_cast<int>(v);
}

template <class T, class I, bool Vec>
__global__ void __launch_bounds__(kCopyThreads)
    embeddingForwardKernel(const T *__restrict__ table, const I *__restrict__ ids,
                           T *__restrict__ out, int64_t vocab, int64_t dim) {
  int64_t n = blockIdx.x;
  int id = normaliseId(ids[n], vocab);
  const T *src = table + static_cast<int64_t>(id < 0 ? 0 : id) * dim;
  T *dst = out + n * dim;
  for (int64_t i = threadIdx.x * kVec; i < dim; i += kCopyThreads * kVec) {
    float v[8];
    loadRow8<T, Vec>(src, i, dim, v, 0.0f);
    if (id < 0) {
#pragma unroll
      for (int j = 0; j < 8; ++j)
        v[j] = NAN;
    }
    storeRow8<T, Vec>(dst, i, dim, v);
  }
}

/// Step 1: a block per chunk, a thread per token: counts[chunk, id] += 1
/// (integer atomics: the same counts in any order).
template <class I>
__global__ void __launch_bounds__(kEmbeddingChunk)
    histKernel(const I *__restrict__ ids, int64_t count, int64_t vocab, int *__restrict__ counts) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kEmbeddingChunk + threadIdx.x;
  if (n >= count)
    return;
  const int id = normaliseId(ids[n], vocab);
  if (id >= 0)
    atomicAdd(counts + static_cast<int64_t>(blockIdx.x) * vocab + id, 1);
}

/// Step 4: a block per chunk, a thread per token: its slot is base[id] plus
/// the tokens of id in the chunks before (counts[chunk, id] after step 2)
/// plus those before it in its chunk (counted from the chunk's ids in
/// shared memory), so sorted[] lists every id's tokens in increasing order.
template <class I>
__global__ void __launch_bounds__(kEmbeddingChunk)
    placeKernel(const I *__restrict__ ids, int64_t count, int64_t vocab,
                const int *__restrict__ counts, const int *__restrict__ base,
                int *__restrict__ sorted) {
  __shared__ int chunkIds[kEmbeddingChunk];
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kEmbeddingChunk + threadIdx.x;
  const int id = n < count ? normaliseId(ids[n], vocab) : -1;
  chunkIds[threadIdx.x] = id;
  __syncthreads();
  if (id < 0)
    return;
  int rank = 0;
  for (int j = 0; j < static_cast<int>(threadIdx.x); ++j)
    rank += chunkIds[j] == id;
  sorted[base[id] + counts[static_cast<int64_t>(blockIdx.x) * vocab + id] + rank] =
      static_cast<int>(n);
}

/// Step 2: thread per id. The chunks' counts are read kBatch at a time
/// before any is written (the writes would otherwise order every load after
/// the previous store: one memory latency per chunk).
__global__ void __launch_bounds__(kColumnThreads)
    columnScanKernel(int *__restrict__ counts, int *__restrict__ total, int64_t chunks,
                     int64_t vocab) {
  constexpr int kBatch = 8;
  int64_t v = static_cast<int64_t>(blockIdx.x) * kColumnThreads + threadIdx.x;
  if (v >= vocab)
    return;
  int run = 0;
  for (int64_t c0 = 0; c0 < chunks; c0 += kBatch) {
    int x[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j)
      x[j] = c0 + j < chunks ? counts[(c0 + j) * vocab + v] : 0;
#pragma unroll
    for (int j = 0; j < kBatch; ++j)
      if (c0 + j < chunks) {
        counts[(c0 + j) * vocab + v] = run;
        run += x[j];
      }
  }
  total[v] = run;
}

/// Step 3: one block, over tiles of kScanThreads * kScanPer ids: a tile is
/// read into shared memory coalesced, each thread scans its kScanPer
/// consecutive ids there after a block-wide exclusive scan of the threads'
/// sums, and the tile goes back coalesced; the running total carries from
/// tile to tile.
constexpr int kScanPer = 8;
__global__ void __launch_bounds__(kScanThreads)
    vocabScanKernel(const int *__restrict__ total, int *__restrict__ base, int64_t vocab) {
  constexpr int kTile = kScanThreads * kScanPer;
  __shared__ int tile[kTile];
  __shared__ int warpTotals[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int carry = 0;
  for (int64_t t0 = 0; t0 < vocab; t0 += kTile) {
    for (int j = threadIdx.x; j < kTile; j += kScanThreads)
      tile[j] = t0 + j < vocab ? total[t0 + j] : 0;
    __syncthreads();
    int *mine = tile + threadIdx.x * kScanPer;
    int sum = 0;
#pragma unroll
    for (int j = 0; j < kScanPer; ++j)
      sum += mine[j];
    int incl = sum;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      int y = __shfl_up_sync(kFullMask, incl, o);
      if (lane >= o)
        incl += y;
    }
    if (lane == 31)
      warpTotals[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      int t = warpTotals[lane];
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(kFullMask, t, o);
        if (lane >= o)
          t += y;
      }
      warpTotals[lane] = t; // inclusive over warps
    }
    __syncthreads();
    int run = carry + incl - sum + (warp > 0 ? warpTotals[warp - 1] : 0);
#pragma unroll
    for (int j = 0; j < kScanPer; ++j) {
      int x = mine[j];
      mine[j] = run;
      run += x;
    }
    carry += warpTotals[31];
    __syncthreads();
    for (int j = threadIdx.x; j < kTile; j += kScanThreads)
      if (t0 + j < vocab)
        base[t0 + j] = tile[j];
    __syncthreads(); // the tile and warpTotals are refilled next
  }
}

/// Step 5: block (v, column tile); each thread owns 8 columns of row v.
template <class T, bool Vec>
__global__ void __launch_bounds__(kCopyThreads)
    sumRowsKernel(const T *__restrict__ dout, const int *__restrict__ sorted,
                  const int *__restrict__ base, const int *__restrict__ total,
                  T *__restrict__ dtable, int64_t dim, bool accumulate) {
  int64_t v = blockIdx.x;
  int cnt = total[v];
  if (cnt == 0 && accumulate)
    return;
  int64_t i = (static_cast<int64_t>(blockIdx.y) * kCopyThreads + threadIdx.x) * kVec;
  if (i >= dim)
    return;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int *mine = sorted + base[v];
  for (int k = 0; k < cnt; ++k) {
    float x[8];
    loadRow8<T, Vec>(dout + static_cast<int64_t>(mine[k]) * dim, i, dim, x, 0.0f);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      acc[j] += x[j];
  }
  T *dst = dtable + v * dim;
  if (accumulate) {
    float old[8];
    loadRow8<T, Vec>(dst, i, dim, old, 0.0f);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      acc[j] += old[j];
  }
  storeRow8<T, Vec>(dst, i, dim, acc);
}

int64_t align64(int64_t n) { return (n + 63) / 64 * 64; }

} // namespace

Status embeddingForward(DType dt, const void *table, DType idType, const void *ids, void *out,
                        int64_t count, int64_t vocab, int64_t dim, cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("embeddingForward", count, dim));
  if (count == 0 || dim == 0)
    return Status::ok();
  if (vocab <= 0 || vocab > INT32_MAX || count > INT32_MAX)
    return invalidArgument("embeddingForward: vocab must be in [1, 2^31), count below 2^31");
  if (!table || !ids || !out)
    return invalidArgument("embeddingForward: null pointer");
  bool vec = dim % kVec == 0 && aligned16(table) && aligned16(out);
  return dispatchFloat(dt, "embeddingForward", [&](auto tag) {
    using T = decltype(tag);
    return dispatchIndex(idType, "embeddingForward", [&](auto itag) {
      using I = decltype(itag);
      auto *t = static_cast<const T *>(table);
      auto *is = static_cast<const I *>(ids);
      auto *o = static_cast<T *>(out);
      dim3 grid(static_cast<unsigned>(count));
      if (vec)
        embeddingForwardKernel<T, I, true><<<grid, kCopyThreads, 0, stream>>>(t, is, o, vocab, dim);
      else
        embeddingForwardKernel<T, I, false>
            <<<grid, kCopyThreads, 0, stream>>>(t, is, o, vocab, dim);
      return checkLaunch("embedding_forward");
    });
  });
}

Status embeddingBackward(DType dt, const void *dout, DType idType, const void *ids, void *dtable,
                         void *scratch, int64_t count, int64_t vocab, int64_t dim, bool accumulate,
                         cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("embeddingBackward", count, dim));
  if (vocab <= 0 || vocab > INT32_MAX || count > INT32_MAX)
    return invalidArgument("embeddingBackward: vocab must be in [1, 2^31), count below 2^31");
  if (dim == 0)
    return Status::ok();
  if (!dtable)
    return invalidArgument("embeddingBackward: null dtable");
  int64_t elemBytes = dt == DType::F32 ? 4 : 2;
  if (count == 0) {
    if (!accumulate)
      TC_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(dtable, 0, static_cast<size_t>(vocab * dim * elemBytes), stream));
    return Status::ok();
  }
  if (!dout || !ids || !scratch)
    return invalidArgument("embeddingBackward: null dout, ids or scratch");
  int64_t chunks = ceilDiv(count, kEmbeddingChunk);
  int64_t colTiles = ceilDiv(dim, kCopyThreads * kVec);
  if (colTiles > 65535)
    return invalidArgument("embeddingBackward: dim too large");
  int *counts = static_cast<int *>(scratch);
  int *total = counts + align64(chunks * vocab);
  int *base = total + align64(vocab);
  int *sorted = base + align64(vocab);
  bool vec = dim % kVec == 0 && aligned16(dout) && aligned16(dtable);
  return dispatchFloat(dt, "embeddingBackward", [&](auto tag) {
    using T = decltype(tag);
    return dispatchIndex(idType, "embeddingBackward", [&](auto itag) -> Status {
      using I = decltype(itag);
      auto *is = static_cast<const I *>(ids);
      TC_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(counts, 0, static_cast<size_t>(chunks * vocab) * sizeof(int), stream));
      unsigned nChunks = static_cast<unsigned>(chunks);
      histKernel<I><<<nChunks, kEmbeddingChunk, 0, stream>>>(is, count, vocab, counts);
      TC_RETURN_IF_ERROR(checkLaunch("embedding_backward_hist"));
      columnScanKernel<<<static_cast<unsigned>(ceilDiv(vocab, kColumnThreads)), kColumnThreads, 0,
                         stream>>>(counts, total, chunks, vocab);
      TC_RETURN_IF_ERROR(checkLaunch("embedding_backward_column_scan"));
      vocabScanKernel<<<1, kScanThreads, 0, stream>>>(total, base, vocab);
      TC_RETURN_IF_ERROR(checkLaunch("embedding_backward_vocab_scan"));
      placeKernel<I><<<nChunks, kEmbeddingChunk, 0, stream>>>(is, count, vocab, counts, base, sorted);
      TC_RETURN_IF_ERROR(checkLaunch("embedding_backward_place"));
      auto *d = static_cast<const T *>(dout);
      auto *out = static_cast<T *>(dtable);
      dim3 grid(static_cast<unsigned>(vocab), static_cast<unsigned>(colTiles));
      if (vec)
        sumRowsKernel<T, true>
            <<<grid, kCopyThreads, 0, stream>>>(d, sorted, base, total, out, dim, accumulate);
      else
        sumRowsKernel<T, false>
            <<<grid, kCopyThreads, 0, stream>>>(d, sorted, base, total, out, dim, accumulate);
      return checkLaunch("embedding_backward_sum_rows");
    });
  });
}

} // namespace tc::rt::cuda
