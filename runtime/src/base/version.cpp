//===- version.cpp - tc_version(), the C API's view of version.h ----------===//
//
// In tc_runtime_base, so that every tool (all link it) prints its version
// through the public header (tools/cli.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/include/tc/runtime.h"

#include "runtime/src/schema/version.h"

extern "C" const char *tc_version(void) { return tc::rt::kTcVersion; }
