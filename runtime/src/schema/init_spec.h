//===- init_spec.h - initialisers tc-compile writes -------------*- C++ -*-===//
//
// The compile-time half of parameter initialisation: tc-compile's
// --init-params / --init-param specs, parsed and applied to an artifact's
// parameter table (program.h ParamInit and Parameter::initArgs). The values
// themselves are drawn at run time (runtime/src/base/init.h).
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_SCHEMA_INIT_SPEC_H
#define TC_RUNTIME_SCHEMA_INIT_SPEC_H

#include <string>
#include <utility>
#include <vector>

#include "runtime/src/base/status.h"
#include "runtime/src/schema/program.h"

namespace tc::rt {

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

#endif // TC_RUNTIME_SCHEMA_INIT_SPEC_H
