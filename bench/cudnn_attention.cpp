// bench/cudnn_attention.cpp - cuDNN's fused flash attention (the graph API's
// SDPA forward and backward through cudnn_frontend) at the benchmark models'
// shapes, laid out as tc's attention receives them (q, k, v strided views of
// the fused qkv projection [B, T, H + 2 KV, D]; out, dout, dqkv [B, T, ., D]):
// the measurement that says whether tc's runtime should run its attention
// through cuDNN where cuDNN is installed. tc's flash kernels on an H100 (stop
// 34-41): 116-128 us forward and 329-350 us backward at GPT-2's 16x12x1024 d64;
// PyTorch's cuDNN SDPA there: 85 / 296 us (bench/attention_backends_torch.py,
// non-deterministic backward). Here the backward runs both ways: cuDNN's
// default and its deterministic algorithm (tc's backward gives the same bits
// run to run), and each is checked for that.
//
// Correctness first: a small case against a double-precision CPU reference
// (out, the softmax statistics as the natural-log logsumexp tc's flash kernels
// store, dq, dk, dv); then each shape is timed.
//
//   scripts/fetch-cudnn-frontend.sh   (the frontend's headers into build/cudnn-frontend)
//   g++ -O2 -std=c++17 -I. -Ibuild/cudnn-frontend/include -I/usr/local/cuda/include \
//     bench/cudnn_attention.cpp -L/usr/local/cuda/lib64 -L/usr/local/cuda/lib64/stubs -lcudnn \
//     -lnvrtc -lcudart_static -lcuda -ldl -lpthread -lrt -o cudnn_attention
//   (. scripts/cudnn-env.sh; ./cudnn_attention [B H KV T D]...)
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn_frontend.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "bench/cuda_check.h"

namespace fe = cudnn_frontend;

namespace {

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

struct Shape {
  int64_t b, h, kv, t, d;
};

// [B, T, heads, D] rows of `width` heads (the fused projection's), head
// `first`.
std::vector<int64_t> strides(const Shape &s, int64_t width) {
  return {s.t * width * s.d, s.d, width * s.d, 1}; // b, h, t, d
}

void check(fe::error_object e, const char *what) {
  if (!e.is_good()) {
    std::fprintf(stderr, "cudnn_attention: %s: %s\n", what, e.get_message().c_str());
    std::exit(1);
  }
}

fe::graph::Tensor_attributes io(const char *name, int64_t uid, const Shape &s, int64_t heads,
                                int64_t width) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim({s.b, heads, s.t, s.d})
      .set_stride(strides(s, width));
}

std::shared_ptr<fe::graph::Graph> newGraph() {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

fe::graph::Tensor_attributes statsAttr(const Shape &s) {
  return fe::graph::Tensor_attributes()
      .set_name("stats")
      .set_uid(kStats)
      .set_dim({s.b, s.h, s.t, 1})
      .set_stride({s.h * s.t, s.t, 1, 1})
      .set_data_type(fe::DataType_t::FLOAT);
}

std::shared_ptr<fe::graph::Graph> forwardGraph(cudnnHandle_t h, const Shape &s, float scale) {
  auto g = newGraph();
  int64_t w = s.h + 2 * s.kv;
  auto q = g->tensor(io("q", kQ, s, s.h, w));
  auto k = g->tensor(io("k", kK, s, s.kv, w));
  auto v = g->tensor(io("v", kV, s, s.kv, w));
  auto opts = fe::graph::SDPA_attributes()
                  .set_name("fwd")
                  .set_generate_stats(true)
                  .set_attn_scale(scale)
                  .set_causal_mask(true);
  auto [o, stats] = g->sdpa(q, k, v, opts);
  o->set_output(true).set_uid(kO).set_dim({s.b, s.h, s.t, s.d}).set_stride(strides(s, s.h));
  stats->set_output(true)
      .set_uid(kStats)
      .set_dim({s.b, s.h, s.t, 1})
      .set_stride({s.h * s.t, s.t, 1, 1})
      .set_data_type(fe::DataType_t::FLOAT);
  check(g->build(h, {fe::HeurMode_t::A}), "build forward");
  return g;
}

std::shared_ptr<fe::graph::Graph> backwardGraph(cudnnHandle_t h, const Shape &s, float scale,
                                                bool deterministic) {
  auto g = newGraph();
  int64_t w = s.h + 2 * s.kv;
  auto q = g->tensor(io("q", kQ, s, s.h, w));
  auto k = g->tensor(io("k", kK, s, s.kv, w));
  auto v = g->tensor(io("v", kV, s, s.kv, w));
  auto o = g->tensor(io("o", kO, s, s.h, s.h));
  auto dO = g->tensor(io("do", kDO, s, s.h, s.h));
  auto stats = g->tensor(statsAttr(s));
  auto opts = fe::graph::SDPA_backward_attributes()
                  .set_name("bwd")
                  .set_attn_scale(scale)
                  .set_causal_mask(true)
                  .set_deterministic_algorithm(deterministic);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dO, stats, opts);
  dq->set_output(true).set_uid(kDQ).set_dim({s.b, s.h, s.t, s.d}).set_stride(strides(s, w));
  dk->set_output(true).set_uid(kDK).set_dim({s.b, s.kv, s.t, s.d}).set_stride(strides(s, w));
  dv->set_output(true).set_uid(kDV).set_dim({s.b, s.kv, s.t, s.d}).set_stride(strides(s, w));
  check(g->build(h, {fe::HeurMode_t::A}),
        deterministic ? "build backward (deterministic)" : "build backward");
  return g;
}

struct Buffers {
  Shape s;
  int64_t nqkv, no, nst;
  __nv_bfloat16 *qkv, *o, *dout, *dqkv;
  float *stats;
  void *ws = nullptr;
  int64_t wsBytes = 0;
  explicit Buffers(const Shape &sh) : s(sh) {
    nqkv = s.b * s.t * (s.h + 2 * s.kv) * s.d;
    no = s.b * s.t * s.h * s.d;
    nst = s.b * s.h * s.t;
    CK(cudaMalloc(&qkv, nqkv * 2));
    CK(cudaMalloc(&dqkv, nqkv * 2));
    CK(cudaMalloc(&o, no * 2));
    CK(cudaMalloc(&dout, no * 2));
    CK(cudaMalloc(&stats, nst * 4));
  }
  ~Buffers() {
    cudaFree(qkv), cudaFree(dqkv), cudaFree(o), cudaFree(dout), cudaFree(stats), cudaFree(ws);
  }
  void workspace(const std::shared_ptr<fe::graph::Graph> &g) {
    int64_t n = 0;
    check(g->get_workspace_size(n), "workspace size");
    if (n > wsBytes) {
      cudaFree(ws);
      CK(cudaMalloc(&ws, n));
      wsBytes = n;
    }
  }
  std::unordered_map<int64_t, void *> pack() const {
    int64_t qOff = 0, kOff = s.h * s.d, vOff = (s.h + s.kv) * s.d;
    return {{kQ, qkv + qOff},  {kK, qkv + kOff}, {kV, qkv + vOff},   {kO, o},
            {kStats, stats},   {kDO, dout},      {kDQ, dqkv + qOff}, {kDK, dqkv + kOff},
            {kDV, dqkv + vOff}};
  }
};

void fill(__nv_bfloat16 *dst, std::vector<float> &host, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  host.resize(n);
  std::vector<__nv_bfloat16> h(n);
  for (int64_t i = 0; i < n; ++i) {
    h[i] = __float2bfloat16(nd(rng));
    host[i] = __bfloat162float(h[i]);
  }
  CK(cudaMemcpy(dst, h.data(), n * 2, cudaMemcpyHostToDevice));
}

std::vector<float> down(const __nv_bfloat16 *src, int64_t n) {
  std::vector<__nv_bfloat16> h(n);
  CK(cudaMemcpy(h.data(), src, n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (int64_t i = 0; i < n; ++i)
    f[i] = __bfloat162float(h[i]);
  return f;
}

void run(cudnnHandle_t h, const std::shared_ptr<fe::graph::Graph> &g, Buffers &b) {
  auto p = b.pack();
  check(g->execute(h, p, b.ws), "execute");
}

/// Max |got - want| / max |want| over one tensor.
double relErr(const std::vector<double> &want, const std::vector<float> &got) {
  double e = 0, m = 0;
  for (size_t i = 0; i < want.size(); ++i)
    e = std::max(e, std::fabs(got[i] - want[i])), m = std::max(m, std::fabs(want[i]));
  return m > 0 ? e / m : e;
}

/// The small case against a double reference: causal softmax(scale q k^T) v,
/// its logsumexp, and the three gradients.
bool checkSmall(cudnnHandle_t h) {
  Shape s{2, 4, 2, 192, 64};
  float scale = 1.0f / std::sqrt(64.0f);
  Buffers b(s);
  std::vector<float> qkv, dout;
  fill(b.qkv, qkv, b.nqkv, 1);
  fill(b.dout, dout, b.no, 2);
  auto fg = forwardGraph(h, s, scale);
  auto bg = backwardGraph(h, s, scale, true);
  b.workspace(fg), b.workspace(bg);
  run(h, fg, b);
  run(h, bg, b);
  CK(cudaDeviceSynchronize());
  int64_t w = s.h + 2 * s.kv, T = s.t, D = s.d, group = s.h / s.kv;
  auto at = [&](const std::vector<float> &x, int64_t bi, int64_t t, int64_t head, int64_t d) {
    return static_cast<double>(x[((bi * T + t) * w + head) * D + d]);
  };
  std::vector<double> o(b.no), lse(b.nst), dqkv(b.nqkv, 0.0);
  for (int64_t bi = 0; bi < s.b; ++bi)
    for (int64_t hd = 0; hd < s.h; ++hd) {
      int64_t kh = s.h + hd / group, vh = s.h + s.kv + hd / group;
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> p(i + 1);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += at(qkv, bi, i, hd, d) * at(qkv, bi, j, kh, d);
          p[j] = dot * scale, mx = std::max(mx, p[j]);
        }
        for (auto &x : p)
          x = std::exp(x - mx), sum += x;
        lse[(bi * s.h + hd) * T + i] = mx + std::log(sum);
        std::vector<double> orow(D, 0.0);
        for (int64_t j = 0; j <= i; ++j) {
          p[j] /= sum;
          for (int64_t d = 0; d < D; ++d)
            orow[d] += p[j] * at(qkv, bi, j, vh, d);
        }
        // out's row, rounded as cuDNN stores it (the backward reads the stored
        // one)
        double dsum = 0; // D_i = rowsum(dout * out)
        for (int64_t d = 0; d < D; ++d) {
          o[((bi * T + i) * s.h + hd) * D + d] = orow[d];
          double ob = __bfloat162float(__float2bfloat16(static_cast<float>(orow[d])));
          dsum += ob * dout[((bi * T + i) * s.h + hd) * D + d];
        }
        for (int64_t j = 0; j <= i; ++j) {
          double dp = 0;
          for (int64_t d = 0; d < D; ++d) {
            double g = dout[((bi * T + i) * s.h + hd) * D + d];
            dp += g * at(qkv, bi, j, vh, d);
            dqkv[((bi * T + j) * w + vh) * D + d] += p[j] * g;
          }
          double ds = p[j] * (dp - dsum) * scale;
          for (int64_t d = 0; d < D; ++d) {
            dqkv[((bi * T + i) * w + hd) * D + d] += ds * at(qkv, bi, j, kh, d);
            dqkv[((bi * T + j) * w + kh) * D + d] += ds * at(qkv, bi, i, hd, d);
          }
        }
      }
    }
  std::vector<float> gotLse(b.nst);
  CK(cudaMemcpy(gotLse.data(), b.stats, b.nst * 4, cudaMemcpyDeviceToHost));
  double eo = relErr(o, down(b.o, b.no)), el = relErr(lse, gotLse);
  double eg = relErr(dqkv, down(b.dqkv, b.nqkv));
  bool ok = eo < 2e-2 && el < 1e-3 && eg < 3e-2;
  std::printf("check %ldx%ldx%ld heads (kv %ld) d %ld causal: out %.2e, stats "
              "(natural-log "
              "logsumexp) %.2e, dqkv %.2e -> %s\n",
              (long)s.b, (long)s.h, (long)s.t, (long)s.kv, (long)s.d, eo, el, eg,
              ok ? "PASS" : "FAIL");
  return ok;
}

void timeShape(cudnnHandle_t h, const Shape &s) {
  float scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  Buffers b(s);
  std::vector<float> host;
  fill(b.qkv, host, b.nqkv, 3);
  fill(b.dout, host, b.no, 4);
  auto fg = forwardGraph(h, s, scale);
  b.workspace(fg);
  double flops = 4.0 * s.b * s.h * s.t * s.t * s.d / 2; // causal: half the tiles
  float fwd = timeUs(0, 20, [&] { run(h, fg, b); });
  std::printf("%ldx%ldx%ld (kv %ld) d %ld: forward %.1f us (%.0f TFLOP/s), "
              "workspace %ld B\n",
              (long)s.b, (long)s.h, (long)s.t, (long)s.kv, (long)s.d, fwd, flops / fwd / 1e6,
              (long)b.wsBytes);
  for (bool det : {false, true}) {
    auto bg = backwardGraph(h, s, scale, det);
    int64_t before = b.wsBytes, need = 0;
    check(bg->get_workspace_size(need), "workspace size");
    b.workspace(bg);
    float bwd = timeUs(0, 20, [&] { run(h, bg, b); });
    std::vector<std::vector<float>> runs;
    for (int r = 0; r < 3; ++r) {
      CK(cudaMemset(b.dqkv, 0, b.nqkv * 2));
      run(h, bg, b);
      runs.push_back(down(b.dqkv, b.nqkv));
    }
    bool same = std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * 4) == 0 &&
                std::memcmp(runs[0].data(), runs[2].data(), runs[0].size() * 4) == 0;
    std::printf("  backward%s %.1f us (%.0f TFLOP/s), workspace %ld B, %s run to run\n",
                det ? " (deterministic)" : "", bwd, 2.5 * flops / bwd / 1e6, (long)need,
                same ? "same bits" : "bits differ");
    (void)before;
  }
}

} // namespace

int main(int argc, char **argv) {
  cudnnHandle_t h;
  if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "cudnn_attention: cudnnCreate failed (no cuDNN or no GPU)\n");
    return 1;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, cuDNN %zu (frontend headers %d)\n", prop.name, cudnnGetVersion(),
              CUDNN_FRONTEND_VERSION);
  bool ok = checkSmall(h);
  std::vector<Shape> shapes;
  for (int i = 1; i + 4 < argc; i += 5)
    shapes.push_back({std::atol(argv[i]), std::atol(argv[i + 1]), std::atol(argv[i + 2]),
                      std::atol(argv[i + 3]), std::atol(argv[i + 4])});
  if (shapes.empty())
    shapes = {{16, 12, 12, 1024, 64},
              {8, 16, 16, 1024, 64},
              {16, 12, 4, 1024, 64},
              {8, 16, 16, 1024, 128}};
  for (const Shape &s : shapes)
    timeShape(h, s);
  cudnnDestroy(h);
  return ok ? 0 : 1;
}
