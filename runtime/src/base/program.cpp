//===- program.cpp - the op-level program an artifact carries -------------===//
#include "runtime/src/base/program.h"

#include <cstdint>

namespace tc::rt {

int64_t TensorType::numElements() const {
  // Saturates instead of overflowing (a corrupt or hostile shape such as
  // [2^31, 2^31, 2^31]); readers compare the count with the bytes they hold.
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      return INT64_MAX;
  return n;
}

const Function *Artifact::findFunction(const std::string &name) const {
  for (const Function &f : functions)
    if (f.name == name)
      return &f;
  return nullptr;
}

const DeviceFunction *Artifact::findDeviceFunction(const std::string &name) const {
  for (const DeviceFunction &f : deviceFunctions)
    if (f.name == name)
      return &f;
  // eval_step is infer (the reference program holds a copy under that name;
  // the device program does not repeat it).
  if (name == "eval_step")
    return findDeviceFunction("infer");
  return nullptr;
}

const char *paramKindName(ParamKind k) {
  switch (k) {
  case ParamKind::Parameter:
    return "parameter";
  case ParamKind::Buffer:
    return "buffer";
  case ParamKind::OptimizerState:
    return "optimizer-state";
  }
  return "?";
}

const char *paramInitName(ParamInit i) {
  switch (i) {
  case ParamInit::Data:
    return "data";
  case ParamInit::Zeros:
    return "zeros";
  case ParamInit::Ones:
    return "ones";
  case ParamInit::Normal:
    return "normal";
  case ParamInit::Uniform:
    return "uniform";
  }
  return "?";
}

const char *deviceSpaceName(DeviceBuffer::Space s) {
  switch (s) {
  case DeviceBuffer::Space::Arena:
    return "arena";
  case DeviceBuffer::Space::Param:
    return "param";
  case DeviceBuffer::Space::Const:
    return "const";
  case DeviceBuffer::Space::Input:
    return "input";
  case DeviceBuffer::Space::Output:
    return "output";
  }
  return "?";
}

const Parameter *Artifact::findParam(const std::string &name) const {
  for (const Parameter &p : params)
    if (p.name == name)
      return &p;
  return nullptr;
}

} // namespace tc::rt
