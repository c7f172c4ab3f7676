//===- init.h - parameter initialisers on the host ---------------*- C++ -*-===//
//
// The first value of a parameter-table entry whose initialiser is not Data
// (zeros, ones, normal, uniform: program.h ParamInit), computed on the host
// from (seed, parameter name) with init_rng.h, and the initialiser specs of
// tc-compile's --init-params / --init-param. The device twin is
// cuda/kernels/init.cu (initParameterDevice); both give the same values (to
// 1 ulp of the storage dtype for normal, exactly otherwise).
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_INIT_H
#define TC_RUNTIME_BASE_INIT_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/src/base/program.h"
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

/// An initialiser as tc-compile's flags spell it: "normal[:STD]" (mean 0,
/// default std 0.02), "uniform[:A]" (U(-A, A), default A 0.02), "zeros",
/// "ones". STD >= 0 and A >= 0, finite.
struct InitSpec {
  ParamInit init = ParamInit::Data;
  double args[2] = {0, 0};
};

/// Parses `text` as above; InvalidArgument naming `text` otherwise.
Status parseInitSpec(const std::string &text, InitSpec *out);

/// Sets `p`'s initialiser (and clears its data: hasData false, no bytes).
/// With `byRole` (--init-params, as a PyTorch GPT-2 initialises): normal and
/// uniform go to tensors of rank >= 2; rank < 2 tensors whose name ends in
/// "bias" get zeros, the other rank < 2 tensors (norm scales) ones. Without
/// it (--init-param REGEX=...) `spec` applies as given.
void applyInitSpec(const InitSpec &spec, bool byRole, Parameter *p);

/// Parses tc-compile's "--init-param REGEX=SPEC" value (split at the last
/// '='; REGEX in tc's one dialect, name_regex.h). InvalidArgument otherwise.
Status parseInitParamFlag(const std::string &text, std::pair<std::string, InitSpec> *out);

/// tc-compile --init-params `all` (applyInitSpec byRole, unless all.init is
/// Data) and --init-param `overrides` (regex search in the name, the last
/// match wins) over the model weights (ParamKind::Parameter) of `artifact`;
/// buffers and optimizer state are left alone. The weights keep only the
/// bytes of entries that still have data (64-byte aligned, in table order).
Status applyInitialisers(const InitSpec &all,
                         const std::vector<std::pair<std::string, InitSpec>> &overrides,
                         Artifact *artifact);

} // namespace tc::rt

#endif // TC_RUNTIME_BASE_INIT_H
