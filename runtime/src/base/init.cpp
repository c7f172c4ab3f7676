//===- init.cpp - parameter initialisers on the host -----------------------===//
#include "runtime/src/base/init.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "runtime/src/base/name_regex.h"
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

Status parseInitSpec(const std::string &text, InitSpec *out) {
  auto bad = [&](const std::string &why) {
    return invalidArgument("bad initialiser '" + text + "': " + why +
                           " (want normal[:STD], uniform[:A], zeros or ones)");
  };
  size_t colon = text.find(':');
  std::string kind = text.substr(0, colon);
  bool hasArg = colon != std::string::npos;
  std::string arg = hasArg ? text.substr(colon + 1) : "";
  double x = 0.02;
  if (hasArg) {
    char *end = nullptr;
    errno = 0;
    x = std::strtod(arg.c_str(), &end);
    if (arg.empty() || *end != '\0' || errno != 0 || !std::isfinite(x) || x < 0)
      return bad("'" + arg + "' is not a finite number >= 0");
  }
  InitSpec s;
  if (kind == "normal") {
    s.init = ParamInit::Normal;
    s.args[0] = 0;
    s.args[1] = x;
  } else if (kind == "uniform") {
    s.init = ParamInit::Uniform;
    s.args[0] = -x;
    s.args[1] = x;
  } else if (kind == "zeros" || kind == "ones") {
    if (hasArg)
      return bad(kind + " takes no argument");
    s.init = kind == "zeros" ? ParamInit::Zeros : ParamInit::Ones;
  } else {
    return bad("unknown kind '" + kind + "'");
  }
  *out = s;
  return Status::ok();
}

void applyInitSpec(const InitSpec &spec, bool byRole, Parameter *p) {
  InitSpec s = spec;
  bool random = s.init == ParamInit::Normal || s.init == ParamInit::Uniform;
  if (byRole && random && p->type.shape.size() < 2) {
    const std::string &n = p->name;
    bool bias = n.size() >= 4 && n.compare(n.size() - 4, 4, "bias") == 0;
    s = InitSpec{};
    s.init = bias ? ParamInit::Zeros : ParamInit::Ones;
  }
  p->init = s.init;
  p->initArgs[0] = s.args[0];
  p->initArgs[1] = s.args[1];
  if (s.init != ParamInit::Data) {
    p->hasData = false;
    p->offset = 0;
    p->bytes = 0;
  }
}

Status parseInitParamFlag(const std::string &text, std::pair<std::string, InitSpec> *out) {
  size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0)
    return invalidArgument("--init-param wants REGEX=KIND[:ARGS] (KIND normal[:STD], "
                           "uniform[:A], zeros or ones), got '" + text + "'");
  std::string re = text.substr(0, eq);
  NameRegex check;
  TC_RETURN_IF_ERROR(NameRegex::compile(re, "--init-param", &check));
  InitSpec spec;
  TC_RETURN_IF_ERROR(parseInitSpec(text.substr(eq + 1), &spec).withPrefix("--init-param"));
  *out = {re, spec};
  return Status::ok();
}

Status applyInitialisers(const InitSpec &all,
                         const std::vector<std::pair<std::string, InitSpec>> &overrides,
                         Artifact *a) {
  if (all.init == ParamInit::Data && overrides.empty())
    return Status::ok();
  std::vector<NameRegex> regexes(overrides.size());
  for (size_t i = 0; i < overrides.size(); ++i)
    TC_RETURN_IF_ERROR(NameRegex::compile(overrides[i].first, "--init-param", &regexes[i]));
  for (Parameter &p : a->params) {
    if (p.kind != ParamKind::Parameter)
      continue; // buffers keep their data; optimizer state stays zeros
    if (all.init != ParamInit::Data)
      applyInitSpec(all, /*byRole=*/true, &p);
    for (size_t i = overrides.size(); i-- > 0;)
      if (regexes[i].search(p.name)) {
        applyInitSpec(overrides[i].second, /*byRole=*/false, &p);
        break;
      }
  }
  // Keep only the bytes still used.
  std::vector<uint8_t> weights;
  for (Parameter &p : a->params) {
    if (!p.hasData)
      continue;
    if (p.offset > a->weights.size() || p.bytes > a->weights.size() - p.offset)
      return dataLoss("parameter '" + p.name + "' has an inconsistent byte range");
    weights.resize((weights.size() + 63) / 64 * 64);
    uint64_t offset = weights.size();
    weights.insert(weights.end(), a->weights.begin() + p.offset,
                   a->weights.begin() + p.offset + p.bytes);
    p.offset = offset;
  }
  a->weights = std::move(weights);
  return Status::ok();
}

} // namespace tc::rt
