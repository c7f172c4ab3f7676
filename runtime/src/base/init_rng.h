//===- init_rng.h - the counter-based RNG of parameter initialisers -*- C++ -*-===//
//
// One random-number generator for parameter initialisers, shared by the host
// (init.cpp) and the device (cuda/kernels/init.cu), so that a model
// initialised on the GPU holds the same values as one initialised by the CPU
// reference. It is counter-based: element i of a parameter is a pure function
// of (seed, stream, i), where stream = paramStream(name) (FNV-1a 64 of the
// parameter name). There is no sequential state, so every thread computes its
// elements independently, and the values do not depend on the order in which
// parameters are created, on the launch geometry or on the thread count.
//
//   bits(seed, stream, c) = mix64(mix64(seed ^ mix64(stream + G)) + c * G)
//                           (mix64: splitmix64's finaliser, G its gamma)
//   uniform01(seed, stream, i) = top 53 bits of bits(.., i) * 2^-53, in [0, 1)
//   standardNormal(seed, stream, i): Box-Muller on two draws of a second
//       sub-stream (stream ^ K) at counters 2i and 2i+1:
//       sqrt(-2 log(1 - u1)) * cos(2 pi u2)
//   normal / uniform values: fma(std, z, mean), fma(high - low, u, low)
//
// Exactness. The integer part is bit-identical everywhere. The arithmetic is
// in double; sqrt and fma are correctly rounded (IEEE 754) on both sides and
// fma is written out, so that no compiler contracts a multiply-add
// differently on host and device. CUDA's double log (<= 1 ulp) and cos
// (<= 2 ulp) are not guaranteed to equal glibc's, so a normal draw may differ
// by a few ulp of double (relative ~1e-15). After rounding to the storage
// dtype (f32, bf16, f16: one rounding from double, nearest-even) host and
// device values are therefore equal except, rarely (when the double falls
// within a few double ulps of a rounding boundary: about 1 element in 10^8
// for f32), by 1 ulp of the storage dtype. Uniform, zeros and ones are
// bit-identical. test/cuda/init_test.cpp checks max |device - host| <= 1 ulp.
//
// No dependencies (the CUDA compiler includes it as well): only <cmath> and
// <cstdint>.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_INIT_RNG_H
#define TC_RUNTIME_BASE_INIT_RNG_H

#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define TC_INIT_RNG_HD __host__ __device__
#else
#define TC_INIT_RNG_HD
#endif

namespace tc::rt::initrng {

/// splitmix64's increment (the golden ratio in 64 bits).
constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;
/// Separates the normal sub-stream from the uniform one.
constexpr uint64_t kNormalStream = 0x6a09e667f3bcc909ULL;

/// FNV-1a 64 of `n` bytes: the stream of a parameter is that of its name.
TC_INIT_RNG_HD inline uint64_t fnv1a64(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<uint8_t>(s[i]);
    h *= 0x100000001b3ULL;
  }
  return h;
}

/// splitmix64's finaliser (a bijection of 64 bits with full avalanche).
TC_INIT_RNG_HD inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// 64 random bits for counter `c` of (seed, stream).
TC_INIT_RNG_HD inline uint64_t bits(uint64_t seed, uint64_t stream, uint64_t c) {
  uint64_t key = mix64(seed ^ mix64(stream + kGamma));
  return mix64(key + c * kGamma);
}

/// 53 random bits as a double in [0, 1) (exact: k * 2^-53).
TC_INIT_RNG_HD inline double toUnit(uint64_t b) {
  return static_cast<double>(b >> 11) * (1.0 / 9007199254740992.0);
}

/// Element i's uniform draw in [0, 1). Bit-identical on host and device.
TC_INIT_RNG_HD inline double uniform01(uint64_t seed, uint64_t stream, uint64_t i) {
  return toUnit(bits(seed, stream, i));
}

/// Element i's standard normal draw (Box-Muller on counters 2i, 2i+1 of the
/// normal sub-stream). Host and device agree to a few ulp of double (see the
/// file comment). |z| <= sqrt(-2 log 2^-53) ~ 8.57.
TC_INIT_RNG_HD inline double standardNormal(uint64_t seed, uint64_t stream, uint64_t i) {
  uint64_t s = stream ^ kNormalStream;
  double u1 = toUnit(bits(seed, s, 2 * i));
  double u2 = toUnit(bits(seed, s, 2 * i + 1));
  // 1 - u1 is in (0, 1] (exact), so the log is finite.
  double r = sqrt(-2.0 * log(1.0 - u1));
  return r * cos(6.283185307179586 * u2);
}

/// N(mean, std) for element i, in double (round once to the storage dtype).
TC_INIT_RNG_HD inline double normal(uint64_t seed, uint64_t stream, uint64_t i, double mean,
                                    double std) {
  return fma(std, standardNormal(seed, stream, i), mean);
}

/// U[low, high) for element i, in double. Bit-identical on host and device.
TC_INIT_RNG_HD inline double uniform(uint64_t seed, uint64_t stream, uint64_t i, double low,
                                     double high) {
  return fma(high - low, uniform01(seed, stream, i), low);
}

} // namespace tc::rt::initrng

#endif // TC_RUNTIME_BASE_INIT_RNG_H
