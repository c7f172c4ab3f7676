//===- version.cpp - tc_version() and tc_cache_dir() of the C API ---------===//
//
// In tc_runtime_base, so that every tool (all link it) prints its version
// through the public header (tools/cli.h) and finds tc's cache folder.
//
//===----------------------------------------------------------------------===//
#include "runtime/include/tc/runtime.h"

#include <string>

#include "runtime/src/base/file_io.h"
#include "runtime/src/schema/version.h"

extern "C" const char *tc_version(void) { return tc::rt::kTcVersion; }

extern "C" const char *tc_cache_dir(void) {
  static const std::string dir = tc::rt::defaultCacheDir();
  return dir.c_str();
}
