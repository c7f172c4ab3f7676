//===- version.h - tc's version ----------------------------------*- C++ -*-===//
//
// The one version string: every tool's --version, the checkpoints' and
// artifacts' "written by", and the refusals of older formats.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_SCHEMA_VERSION_H
#define TC_RUNTIME_SCHEMA_VERSION_H

namespace tc::rt {

inline constexpr const char kTcVersion[] = "0.3.0";

} // namespace tc::rt

#endif // TC_RUNTIME_SCHEMA_VERSION_H
