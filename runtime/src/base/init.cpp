//===- init.cpp - parameter initialisers on the host -----------------------===//
#include "runtime/src/base/init.h"

#include <cmath>

#include "runtime/src/base/host_tensor.h"
#include "runtime/src/base/init_rng.h"

namespace tc::rt {

uint64_t paramStream(const std::string &name) {
  return initrng::fnv1a64(name.data(), name.size());
}

std::string missingDataMessage(const std::string &name) {
  return "parameter '" + name +
         "' has no data (compiled with --no-weights): give --init-params at compile time or "
         "--init FILE at run time";
}

Status initParameter(const Parameter &p, uint64_t seed, HostTensor *out) {
  std::string where = "parameter '" + p.name + "'";
  int64_t n;
  TC_RETURN_IF_ERROR(checkedNumElements(p.type.shape, &n).withPrefix(where));
  if (p.init == ParamInit::Data)
    return failedPrecondition(p.hasData ? where + " is initialised from the artifact's data"
                                        : missingDataMessage(p.name));
  bool isFloat = dtypeIsFloat(p.type.dtype);
  if (!isFloat && p.init != ParamInit::Zeros)
    return invalidArgument(where + " (" + typeToString(p.type) + ") is not floating-point: no " +
                           paramInitName(p.init) + " initialiser");
  out->type = p.type;
  out->data.assign(static_cast<size_t>(storageBytes(p.type)), 0);
  uint8_t *d = out->data.data();
  const double a = p.initArgs[0], b = p.initArgs[1];
  const uint64_t stream = paramStream(p.name);
  switch (p.init) {
  case ParamInit::Zeros:
    if (isFloat) // all-zero bytes are +0 in every float format but e8m0
      for (int64_t i = 0; i < n; ++i)
        storeDouble(d, p.type.dtype, i, 0.0, /*saturate=*/true);
    break;
  case ParamInit::Ones:
    for (int64_t i = 0; i < n; ++i)
      storeDouble(d, p.type.dtype, i, 1.0, /*saturate=*/true);
    break;
  case ParamInit::Normal:
    for (int64_t i = 0; i < n; ++i)
      storeDouble(d, p.type.dtype, i, initrng::normal(seed, stream, static_cast<uint64_t>(i), a, b),
                  /*saturate=*/true);
    break;
  case ParamInit::Uniform:
    for (int64_t i = 0; i < n; ++i)
      storeDouble(d, p.type.dtype, i,
                  initrng::uniform(seed, stream, static_cast<uint64_t>(i), a, b),
                  /*saturate=*/true);
    break;
  case ParamInit::Data:
    break;
  }
  return Status::ok();
}

Status parameterValue(const Artifact &artifact, const Parameter &p, uint64_t seed,
                      HostTensor *out) {
  if (p.init != ParamInit::Data)
    return initParameter(p, seed, out);
  if (!p.hasData)
    return failedPrecondition(missingDataMessage(p.name));
  if (p.offset > artifact.weights.size() || p.bytes > artifact.weights.size() - p.offset)
    return dataLoss("parameter '" + p.name + "' has an inconsistent byte range in the artifact");
  out->type = p.type;
  out->data.assign(artifact.weights.begin() + p.offset,
                   artifact.weights.begin() + p.offset + p.bytes);
  return Status::ok();
}

} // namespace tc::rt
