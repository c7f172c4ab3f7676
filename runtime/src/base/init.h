//===- init.h - parameter initialisers on the host ---------------*- C++ -*-===//
//
// The first value of a parameter-table entry whose initialiser is not Data
// (zeros, ones, normal, uniform: program.h ParamInit), computed on the host
// from (seed, parameter name) with init_rng.h. (The initialiser specs of
// tc-compile's --init-params / --init-param, which put ParamInit into an
// artifact, are schema/init_spec.h.) The device twin is
// cuda/kernels/init.cu (initParameterDevice); both give the same values (to
// 1 ulp of the storage dtype for normal, exactly otherwise).
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_INIT_H
#define TC_RUNTIME_BASE_INIT_H

#include <cstdint>
#include <string>

#include "runtime/src/schema/program.h"
#include "runtime/src/base/status.h"

namespace tc::rt {

/// The RNG stream of a parameter: FNV-1a 64 of its name.
uint64_t paramStream(const std::string &name);

/// Computes the initial value of `p` in its storage dtype (every float dtype
/// of dtype.h; each element rounded once from double, saturating float8)
/// for `seed`. Zeros also works for integer dtypes. Init Data has no
/// generator: FailedPrecondition (missingDataMessage when !p.hasData; use
/// parameterValue to read the artifact's bytes). Thread-safe.
Status initParameter(const Parameter &p, uint64_t seed, HostTensor *out);

/// The first value of `p`, an entry of `artifact`: its bytes for Data (the
/// error below when the artifact has none), initParameter otherwise.
Status parameterValue(const Artifact &artifact, const Parameter &p, uint64_t seed,
                      HostTensor *out);

/// "parameter 'X' has no data (compiled with --no-weights): give
/// --init-params at compile time or --init FILE at run time".
std::string missingDataMessage(const std::string &name);

} // namespace tc::rt

#endif // TC_RUNTIME_BASE_INIT_H
