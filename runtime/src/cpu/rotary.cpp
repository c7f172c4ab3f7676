//===- rotary.cpp - tc.rotary ------------------------------------------------===//
//
// The reference for rotary position embedding: per (batch, head, token) the
// pairs (x[k], x[k + R/2]) (or (x[2k], x[2k+1]) interleaved) for k < R/2 are
// rotated by the angle of cos/sin[b, s, k], in double; features from R on are
// copied.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cpu/kernel.h"

namespace tc::rt::cpu {

namespace {

void rotaryKernel(KernelContext &c) {
  c.expectOperands(3);
  c.expectResults(1);
  const Buffer &x = *c.in[0], &cs = *c.in[1], &sn = *c.in[2];
  Buffer &y = *c.out[0];
  c.expectFloat(x, "input");
  if (x.rank() != 4 || cs.rank() != 3 || sn.shape() != cs.shape())
    c.fail("tc.rotary wants input [B, H, S, D] and cos/sin [B, S, R/2]");
  int64_t b = x.shape()[0], h = x.shape()[1], s = x.shape()[2], d = x.shape()[3];
  int64_t half = cs.shape()[2];
  if (cs.shape()[0] != b || cs.shape()[1] != s || 2 * half > d)
    c.fail("tc.rotary: cos/sin shape does not match the input");
  c.expectShape(y, x.shape(), "result");
  bool interleaved = c.boolAttr("interleaved", false);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t si = 0; si < s; ++si) {
        const double *xr = x.f.data() + ((bi * h + hi) * s + si) * d;
        double *yr = y.f.data() + ((bi * h + hi) * s + si) * d;
        const double *cr = cs.f.data() + (bi * s + si) * half;
        const double *sr = sn.f.data() + (bi * s + si) * half;
        for (int64_t k = 2 * half; k < d; ++k)
          yr[k] = xr[k];
        for (int64_t k = 0; k < half; ++k) {
          int64_t i1 = interleaved ? 2 * k : k, i2 = interleaved ? 2 * k + 1 : k + half;
          double x1 = xr[i1], x2 = xr[i2];
          yr[i1] = cr[k] * x1 - sr[k] * x2;
          yr[i2] = sr[k] * x1 + cr[k] * x2;
        }
      }
}

} // namespace

void registerRotaryKernels(KernelTable &t) { t["tc.rotary"] = rotaryKernel; }

} // namespace tc::rt::cpu
