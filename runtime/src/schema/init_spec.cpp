//===- init_spec.cpp - the initialisers tc-compile writes into artifacts --===//
#include "runtime/src/schema/init_spec.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "runtime/src/schema/name_regex.h"

namespace tc::rt {

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
