//===- program.cpp - the op-level program an artifact carries -------------===//
#include "runtime/src/schema/program.h"

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

std::string shapeToString(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

std::string typeToString(const TensorType &type) {
  return std::string(dtypeName(type.dtype)) + " " + shapeToString(type.shape);
}

Status checkedNumElements(const std::vector<int64_t> &shape, int64_t *out) {
  constexpr int64_t kLimit = int64_t{1} << 62;
  int64_t n = 1;
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0)
      return invalidArgument("negative dimension in shape " + shapeToString(shape));
    if (d == 0)
      zero = true;
    else if (!zero && n > kLimit / d)
      return invalidArgument("shape " + shapeToString(shape) + " has too many elements");
    if (!zero)
      n *= d;
  }
  *out = zero ? 0 : n;
  return Status::ok();
}

int64_t storageBytes(const TensorType &type) {
  return type.numElements() * dtypeStorageBytes(type.dtype);
}

Status checkHostTensor(const HostTensor &t, const std::string &what) {
  if (dtypeStorageBytes(t.type.dtype) == 0)
    return invalidArgument(what + ": invalid dtype " +
                           std::to_string(static_cast<int>(t.type.dtype)));
  int64_t n = 0;
  TC_RETURN_IF_ERROR(checkedNumElements(t.type.shape, &n).withPrefix(what));
  uint64_t want = static_cast<uint64_t>(n) * dtypeStorageBytes(t.type.dtype);
  if (t.data.size() != want)
    return invalidArgument(what + ": " + typeToString(t.type) + " needs " +
                           std::to_string(want) + " bytes, has " +
                           std::to_string(t.data.size()));
  return Status::ok();
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
