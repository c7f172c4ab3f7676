// bench/cudnn_gemm.cpp - cuDNN's runtime-fused GEMMs (the graph API's matmul
// followed by pointwise ops, through cudnn_frontend) with the epilogues a GELU
// MLP's training step needs: whether cuDNN's generated Hopper kernels run
// them closer to the plain product than cuBLASLt's epilogues do. cuBLASLt on
// an H100 at c_fc's 16384 x 3072 x 768 (stops 36-41): plain ~101 us,
// GELU_AUX_BIAS ~152, DGELU ~143; tc runs Pythia's exact (erf) GELU as
// separate generated kernels, which cuBLASLt has no epilogue for.
//
// The forms (bf16 in and out, f32 accumulation and epilogue math):
//   plain      out = X W^T                          X [M, K], W [N, K] (nn.Linear)
//   gelu       aux = X W^T + b, out = gelu(aux)     the MLP's up-projection forward
//   gelu-only  out = gelu(X W^T + b)                (no aux: what a recomputing step needs)
//   dgelu      out = (dY W2) * gelu'(aux)           dY [M, K], W2 [K, N]: its backward
//   dgelu+dbias  and dbias [N] = the column sums of out (f32): the up-projection's
//              bias gradient, which tc now takes from c_fc's weight-gradient GEMM (BGRAD)
// each with the tanh GELU and the exact (erf) one. Each form is checked on a
// small shape against a double-precision CPU reference, then timed.
//
//   scripts/fetch-cudnn-frontend.sh
//   g++ -O2 -std=c++17 -I. -Ibuild/cudnn-frontend/include -I/usr/local/cuda/include \
//     bench/cudnn_gemm.cpp -L/usr/local/cuda/lib64 -L/usr/local/cuda/lib64/stubs -lcudnn \
//     -lnvrtc -lcudart_static -lcuda -ldl -lpthread -lrt -o cudnn_gemm
//   (. scripts/cudnn-env.sh; ./cudnn_gemm [M N K]...)
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn_frontend.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda_check.h"

namespace fe = cudnn_frontend;

namespace {

enum Form { kPlain, kGelu, kGeluOnly, kDgelu, kDgeluBgrad };
const char *kFormNames[] = {"plain", "gelu+aux", "gelu", "dgelu", "dgelu+dbias"};
enum Uid : int64_t { kA = 1, kB, kBias, kAux, kOut, kDbias };

struct Gemm {
  int64_t m, n, k;
};

fe::graph::Tensor_attributes matrix(const char *name, int64_t uid, int64_t rows, int64_t cols,
                                    bool transposed) {
  // [1, rows, cols]; transposed: stored [cols, rows] row-major
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim({1, rows, cols})
      .set_stride(transposed ? std::vector<int64_t>{rows * cols, 1, rows}
                             : std::vector<int64_t>{rows * cols, cols, 1})
      .set_data_type(fe::DataType_t::BFLOAT16);
}

/// The graph of one form, or null with the reason in `why`.
std::shared_ptr<fe::graph::Graph> build(cudnnHandle_t h, Form f, bool erf, const Gemm &g,
                                        std::string &why) {
  auto gr = std::make_shared<fe::graph::Graph>();
  gr->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  // forward: A = X [M, K], B = W^T (W [N, K]); dgelu: A = dY [M, K], B = W2 [K, N]
  auto a = gr->tensor(matrix("a", kA, g.m, g.k, false));
  const bool dgelu = f == kDgelu || f == kDgeluBgrad;
  auto b = gr->tensor(matrix("b", kB, g.k, g.n, !dgelu));
  auto c = gr->matmul(
      a, b,
      fe::graph::Matmul_attributes().set_name("mm").set_compute_data_type(fe::DataType_t::FLOAT));
  c->set_data_type(fe::DataType_t::FLOAT);
  auto pw = [](fe::PointwiseMode_t mode) {
    return fe::graph::Pointwise_attributes().set_mode(mode).set_compute_data_type(
        fe::DataType_t::FLOAT);
  };
  auto out = c;
  if (f == kGelu || f == kGeluOnly) {
    auto bias = gr->tensor(fe::graph::Tensor_attributes()
                               .set_name("bias")
                               .set_uid(kBias)
                               .set_dim({1, 1, g.n})
                               .set_stride({g.n, g.n, 1})
                               .set_data_type(fe::DataType_t::BFLOAT16));
    auto pre = gr->pointwise(c, bias, pw(fe::PointwiseMode_t::ADD));
    if (f == kGelu)
      pre->set_output(true).set_uid(kAux).set_data_type(fe::DataType_t::BFLOAT16);
    else
      pre->set_data_type(fe::DataType_t::FLOAT);
    out = gr->pointwise(
        pre, pw(erf ? fe::PointwiseMode_t::GELU_FWD : fe::PointwiseMode_t::GELU_APPROX_TANH_FWD));
  } else if (dgelu) {
    auto aux = gr->tensor(matrix("aux", kAux, g.m, g.n, false));
    out = gr->pointwise(
        c, aux,
        pw(erf ? fe::PointwiseMode_t::GELU_BWD : fe::PointwiseMode_t::GELU_APPROX_TANH_BWD));
  }
  out->set_output(true).set_uid(kOut).set_data_type(fe::DataType_t::BFLOAT16);
  if (f == kDgeluBgrad) {
    auto db = gr->reduction(out, fe::graph::Reduction_attributes()
                                     .set_mode(fe::ReductionMode_t::ADD)
                                     .set_compute_data_type(fe::DataType_t::FLOAT));
    db->set_output(true).set_uid(kDbias).set_dim({1, 1, g.n}).set_stride({g.n, g.n, 1});
    db->set_data_type(fe::DataType_t::FLOAT);
  }
  fe::error_object e = gr->validate();
  if (e.is_good())
    e = gr->build_operation_graph(h);
  if (e.is_good())
    e = gr->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
  if (e.is_good())
    e = gr->check_support(h);
  if (e.is_good())
    e = gr->build_plans(h, fe::BuildPlanPolicy_t::ALL);
  if (!e.is_good()) {
    why = e.get_message();
    return nullptr;
  }
  return gr;
}

struct Buffers {
  __nv_bfloat16 *a = nullptr, *b = nullptr, *bias = nullptr, *aux = nullptr, *out = nullptr;
  float *dbias = nullptr;
  void *ws = nullptr;
  std::vector<float> ha, hb, hbias, haux;
  Buffers(const Gemm &g, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto up = [&](__nv_bfloat16 **d, std::vector<float> &h, int64_t n, float sd) {
      std::vector<__nv_bfloat16> t(n);
      h.resize(n);
      for (int64_t i = 0; i < n; ++i) {
        t[i] = __float2bfloat16(sd * nd(rng));
        h[i] = __bfloat162float(t[i]);
      }
      CK(cudaMalloc(d, n * 2));
      CK(cudaMemcpy(*d, t.data(), n * 2, cudaMemcpyHostToDevice));
    };
    up(&a, ha, g.m * g.k, 1.0f);
    up(&b, hb, g.k * g.n, 1.0f / std::sqrt(static_cast<float>(g.k)));
    up(&bias, hbias, g.n, 0.5f);
    up(&aux, haux, g.m * g.n, 1.0f);
    CK(cudaMalloc(&out, g.m * g.n * 2));
    CK(cudaMalloc(&dbias, g.n * 4));
  }
  ~Buffers() {
    cudaFree(a), cudaFree(b), cudaFree(bias), cudaFree(aux), cudaFree(out), cudaFree(ws);
    cudaFree(dbias);
  }
};

void run(cudnnHandle_t h, fe::graph::Graph &gr, Buffers &bf, Form f) {
  std::unordered_map<int64_t, void *> pack = {{kA, bf.a}, {kB, bf.b}, {kOut, bf.out}};
  if (f == kGelu || f == kGeluOnly)
    pack[kBias] = bf.bias;
  if (f == kGelu || f == kDgelu || f == kDgeluBgrad)
    pack[kAux] = bf.aux; // gelu writes it, dgelu reads it
  if (f == kDgeluBgrad)
    pack[kDbias] = bf.dbias;
  fe::error_object e = gr.execute(h, pack, bf.ws);
  if (!e.is_good()) {
    std::fprintf(stderr, "execute: %s\n", e.get_message().c_str());
    std::exit(1);
  }
}

double geluRef(double x, bool erf) {
  if (erf)
    return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
  double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

double geluGradRef(double x, bool erf) {
  if (erf)
    return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
  double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * std::sqrt(2.0 / M_PI) * (1 + 3 * 0.044715 * x * x);
}

/// Max |got - want| / max |want| of out (and aux for gelu+aux).
double check(const Gemm &g, Buffers &bf, Form f, bool erf) {
  std::vector<__nv_bfloat16> out(g.m * g.n), aux(g.m * g.n);
  CK(cudaMemcpy(out.data(), bf.out, out.size() * 2, cudaMemcpyDeviceToHost));
  if (f == kDgeluBgrad) { // dbias against the column sums of the stored out
    std::vector<float> db(g.n);
    CK(cudaMemcpy(db.data(), bf.dbias, g.n * 4, cudaMemcpyDeviceToHost));
    double e = 0;
    for (int64_t j = 0; j < g.n; ++j) {
      double sum = 0, abs = 0;
      for (int64_t i = 0; i < g.m; ++i) {
        double v = __bfloat162float(out[i * g.n + j]);
        sum += v, abs += std::fabs(v);
      }
      e = std::max(e, std::fabs(db[j] - sum) / (abs + 1e-6));
    }
    if (e > 1e-2)
      return e;
  }
  CK(cudaMemcpy(aux.data(), bf.aux, aux.size() * 2, cudaMemcpyDeviceToHost));
  double err = 0, big = 0;
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double c = 0;
      for (int64_t p = 0; p < g.k; ++p) // dgelu: B = W2 [K, N]; forward: B = W^T, W [N, K]
        c += double(bf.ha[i * g.k + p]) *
             (f == kDgelu || f == kDgeluBgrad ? bf.hb[p * g.n + j] : bf.hb[j * g.k + p]);
      double want = c, wantAux = 0;
      if (f == kGelu || f == kGeluOnly) {
        double pre = c + bf.hbias[j];
        // gelu of the stored (rounded) pre-activation, as the kernel's epilogue may take it
        double preStored = __bfloat162float(__float2bfloat16(static_cast<float>(pre)));
        want = geluRef(f == kGelu ? preStored : pre, erf);
        wantAux = pre;
        if (f == kGelu) {
          double ea = std::fabs(__bfloat162float(aux[i * g.n + j]) - wantAux);
          err = std::max(err, ea / (std::fabs(wantAux) + 1.0));
        }
      } else if (f == kDgelu || f == kDgeluBgrad) {
        want = c * geluGradRef(bf.haux[i * g.n + j], erf);
      }
      double e = std::fabs(__bfloat162float(out[i * g.n + j]) - want);
      err = std::max(err, e / (std::fabs(want) + 1.0));
      big = std::max(big, std::fabs(want));
    }
  return err;
}

} // namespace

int main(int argc, char **argv) {
  cudnnHandle_t h;
  if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "cudnn_gemm: cudnnCreate failed (no cuDNN or no GPU)\n");
    return 1;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, cuDNN %zu\n", prop.name, cudnnGetVersion());
  std::vector<Gemm> shapes;
  for (int i = 1; i + 2 < argc; i += 3)
    shapes.push_back({std::atol(argv[i]), std::atol(argv[i + 1]), std::atol(argv[i + 2])});
  if (shapes.empty())
    shapes = {{16384, 3072, 768}, {8192, 4096, 1024}};
  bool ok = true;
  const Gemm small{256, 384, 128};
  for (bool erf : {false, true})
    for (Form f : {kPlain, kGelu, kGeluOnly, kDgelu, kDgeluBgrad}) {
      if (f == kPlain && erf)
        continue;
      std::string name = std::string(kFormNames[f]) + (f == kPlain ? "" : erf ? " erf" : " tanh");
      std::string why;
      auto gr = build(h, f, erf, small, why);
      if (!gr) {
        std::printf("%-16s unsupported: %s\n", name.c_str(), why.substr(0, 160).c_str());
        continue;
      }
      Buffers bf(small, 1);
      int64_t wsBytes = 0;
      (void)gr->get_workspace_size(wsBytes);
      if (wsBytes)
        CK(cudaMalloc(&bf.ws, wsBytes));
      run(h, *gr, bf, f);
      CK(cudaDeviceSynchronize());
      double err = check(small, bf, f, erf);
      bool pass = err < 2e-2;
      ok = ok && pass;
      std::printf("%-16s check %ldx%ldx%ld: %.2e %s\n", name.c_str(), (long)small.m, (long)small.n,
                  (long)small.k, err, pass ? "PASS" : "FAIL");
      for (const Gemm &g : shapes) {
        std::string why2;
        auto gg = build(h, f, erf, g, why2);
        if (!gg) {
          std::printf("  %ldx%ldx%ld unsupported: %s\n", (long)g.m, (long)g.n, (long)g.k,
                      why2.substr(0, 160).c_str());
          continue;
        }
        Buffers big(g, 2);
        // every plan cuDNN built, the fastest kept (as tc's runtime tunes cuBLASLt)
        int64_t plans = gg->get_execution_plan_count(), ws = 0;
        for (int64_t p = 0; p < plans; ++p) {
          int64_t need = 0;
          if (gg->get_workspace_size_plan_at_index(p, need).is_good() && need < (1 << 30))
            ws = std::max(ws, need);
        }
        if (ws)
          CK(cudaMalloc(&big.ws, ws));
        float best = 1e30f;
        int64_t bestIdx = -1;
        for (int64_t p = 0; p < plans; ++p) {
          int64_t need = 0;
          if (!gg->get_workspace_size_plan_at_index(p, need).is_good() || need > ws)
            continue;
          std::unordered_map<int64_t, void *> pack = {{kA, big.a}, {kB, big.b}, {kOut, big.out}};
          if (f == kGelu || f == kGeluOnly)
            pack[kBias] = big.bias;
          if (f == kGelu || f == kDgelu || f == kDgeluBgrad)
            pack[kAux] = big.aux;
          if (f == kDgeluBgrad)
            pack[kDbias] = big.dbias;
          if (!gg->execute_plan_at_index(h, pack, big.ws, p).is_good())
            continue;
          float us = timeUs(0, 20, [&] { (void)gg->execute_plan_at_index(h, pack, big.ws, p); });
          if (us < best)
            best = us, bestIdx = p;
        }
        double tf = 2.0 * g.m * g.n * g.k / best / 1e6;
        std::printf("  %ldx%ldx%ld: %.1f us (%.0f TFLOP/s), best of %ld plans (#%ld)\n", (long)g.m,
                    (long)g.n, (long)g.k, best, tf, (long)plans, (long)bestIdx);
      }
    }
  cudnnDestroy(h);
  return ok ? 0 : 1;
}
