// bench/step_overhead.cu - what a training step's host side costs on this
// machine: the time between the GPU finishing a step's CUDA graph and
// starting the next one's, when each step is driven as tc-run drives it.
//
//   nvcc -O2 -std=c++17 -gencode arch=compute_90,code=sm_90 bench/step_overhead.cu -o step_overhead
//   step_overhead [kernels us_per_kernel steps]   (default 600 50 40: a ~30 ms step)
//
// The "step" is a CUDA graph of `kernels` dependent kernels, each holding the
// GPU for `us_per_kernel` microseconds (one block spinning on %globaltimer),
// standing in for a compiled training step. Per step, in microseconds:
//   graph only   the graphs launched back to back, one sync at the end: the
//                GPU's time (the floor)
//   as tc-run    the step as the executor runs it today: the inputs copied
//                from pageable host memory (input_ids and labels [16, 1024]
//                int64, lr and step scalars: four cudaMemcpyAsync), the graph
//                launched, the stream synchronised, then three scalar outputs
//                (loss, grad_norm, one more) each copied back and waited for
//   pipelined    the next step's inputs copied from pinned staging and its
//                graph launched before the previous step's outputs (copied
//                into pinned memory behind its graph, an event after them)
//                are waited for: the host's work overlaps the GPU's
// and the single round trips: an empty kernel launched and waited for, a
// 4-byte device-to-host copy and its wait, the cudaGraphLaunch call alone.
// "as tc-run" minus "graph only" is what the host adds to each step today.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_check.h"

__global__ void spin(long long ns, int *sink) {
  long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  long long t = t0;
  while (t - t0 < ns)
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  if (threadIdx.x == 0 && sink)
    *sink = static_cast<int>(t & 1);
}
__global__ void empty() {}

using Clock = std::chrono::steady_clock;
static double us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

int main(int argc, char **argv) {
  int kernels = argc > 1 ? std::atoi(argv[1]) : 600;
  int usPer = argc > 2 ? std::atoi(argv[2]) : 50;
  int steps = argc > 3 ? std::atoi(argv[3]) : 40;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("step_overhead on %s: a graph of %d kernels x %d us (%.1f ms), %d steps\n", prop.name,
              kernels, usPer, kernels * usPer / 1000.0, steps);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int *sink;
  CK(cudaMalloc(&sink, 4));
  // The step's graph.
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < kernels; ++k)
    spin<<<1, 32, 0, s>>>(usPer * 1000LL, sink);
  CK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));
  // Inputs and outputs as tc's Pythia step has them.
  const size_t tok = 16 * 1024 * sizeof(long long);
  std::vector<char> ids(tok, 1), labels(tok, 1);
  double lr = 6e-4, stepNo = 1;
  char *dIn, *dOut;
  CK(cudaMalloc(&dIn, 2 * tok + 16));
  CK(cudaMalloc(&dOut, 64));
  CK(cudaMemset(dOut, 0, 64));
  char *pinIn[2], *pinOut[2];
  for (int b = 0; b < 2; ++b) {
    CK(cudaMallocHost(&pinIn[b], 2 * tok + 16));
    CK(cudaMallocHost(&pinOut[b], 64));
  }
  cudaEvent_t done[2];
  for (int b = 0; b < 2; ++b)
    CK(cudaEventCreateWithFlags(&done[b], cudaEventDisableTiming));
  CK(cudaGraphLaunch(ge, s)); // warm-up
  CK(cudaStreamSynchronize(s));

  // Graph only.
  auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i)
    CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s));
  double graphOnly = us(t0, Clock::now()) / steps;

  // As tc-run.
  t0 = Clock::now();
  for (int i = 0; i < steps; ++i) {
    CK(cudaMemcpyAsync(dIn, ids.data(), tok, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(dIn + tok, labels.data(), tok, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(dIn + 2 * tok, &lr, 8, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(dIn + 2 * tok + 8, &stepNo, 8, cudaMemcpyHostToDevice, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    for (int o = 0; o < 3; ++o) {
      float v;
      CK(cudaMemcpyAsync(&v, dOut + 4 * o, 4, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
    }
  }
  double asTc = us(t0, Clock::now()) / steps;

  // Pipelined: step i's inputs and graph enqueued before step i-1's outputs
  // are waited for.
  t0 = Clock::now();
  for (int i = 0; i <= steps; ++i) {
    if (i < steps) {
      int b = i % 2;
      std::copy(ids.begin(), ids.end(), pinIn[b]);
      std::copy(labels.begin(), labels.end(), pinIn[b] + tok);
      std::copy(reinterpret_cast<char *>(&lr), reinterpret_cast<char *>(&lr) + 8, pinIn[b] + 2 * tok);
      std::copy(reinterpret_cast<char *>(&stepNo), reinterpret_cast<char *>(&stepNo) + 8,
                pinIn[b] + 2 * tok + 8);
      CK(cudaMemcpyAsync(dIn, pinIn[b], 2 * tok + 16, cudaMemcpyHostToDevice, s));
      CK(cudaGraphLaunch(ge, s));
      CK(cudaMemcpyAsync(pinOut[b], dOut, 12, cudaMemcpyDeviceToHost, s));
      CK(cudaEventRecord(done[b], s));
    }
    if (i > 0) {
      CK(cudaEventSynchronize(done[(i - 1) % 2]));
      volatile float v = *reinterpret_cast<float *>(pinOut[(i - 1) % 2]);
      (void)v;
    }
  }
  double piped = us(t0, Clock::now()) / steps;

  // Single round trips.
  const int reps = 200;
  t0 = Clock::now();
  for (int i = 0; i < reps; ++i) {
    empty<<<1, 32, 0, s>>>();
    CK(cudaStreamSynchronize(s));
  }
  double kernelRt = us(t0, Clock::now()) / reps;
  t0 = Clock::now();
  for (int i = 0; i < reps; ++i) {
    float v;
    CK(cudaMemcpyAsync(&v, dOut, 4, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
  }
  double copyRt = us(t0, Clock::now()) / reps;
  double launchCall = 0;
  for (int i = 0; i < 10; ++i) {
    auto a = Clock::now();
    CK(cudaGraphLaunch(ge, s));
    launchCall += us(a, Clock::now());
    CK(cudaStreamSynchronize(s));
  }
  launchCall /= 10;
  std::printf("us a step: graph only %.1f, as tc-run %.1f (+%.1f), pipelined %.1f (+%.1f)\n",
              graphOnly, asTc, asTc - graphOnly, piped, piped - graphOnly);
  std::printf("round trips (us): empty kernel + sync %.1f, 4-byte copy back + sync %.1f, "
              "cudaGraphLaunch call (%d nodes) %.1f\n",
              kernelRt, copyRt, kernels, launchCall);
  return 0;
}
