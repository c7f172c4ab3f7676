//===- artifact_validate.cpp - structural checks of an artifact -----------===//
//
// validateArtifact (artifact.h): what every reader checks before it returns
// an artifact and every writer before it writes one.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/schema/artifact.h"

#include <cmath>
#include <set>

namespace tc::rt {

Status validateFunction(const Function &fn) {
  std::string where = "function '" + fn.name + "'";
  int64_t nvalues = static_cast<int64_t>(fn.values.size());
  for (size_t i = 0; i < fn.values.size(); ++i) {
    const TensorType &t = fn.values[i];
    if (!dtypeIsValid(static_cast<uint8_t>(t.dtype)))
      return invalidArgument(where + ": value %" + std::to_string(i) + " has an invalid dtype");
    int64_t n;
    TC_RETURN_IF_ERROR(checkedNumElements(t.shape, &n)
                           .withPrefix(where + ": value %" + std::to_string(i)));
  }
  if (fn.inputNames.size() != fn.inputs.size() ||
      fn.outputNames.size() != fn.outputs.size())
    return invalidArgument(where + ": needs one name per input and per output");
  std::vector<bool> defined(fn.values.size(), false);
  auto check = [&](int32_t id, const std::string &what) -> Status {
    if (id < 0 || id >= nvalues)
      return invalidArgument(where + ": " + what + " refers to value %" +
                             std::to_string(id) + ", out of range [0, " +
                             std::to_string(nvalues) + ")");
    return Status::ok();
  };
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    TC_RETURN_IF_ERROR(check(fn.inputs[i], "input '" + fn.inputNames[i] + "'"));
    if (defined[fn.inputs[i]])
      return invalidArgument(where + ": value %" + std::to_string(fn.inputs[i]) +
                             " is defined twice");
    defined[fn.inputs[i]] = true;
  }
  for (size_t k = 0; k < fn.ops.size(); ++k) {
    const Op &op = fn.ops[k];
    std::string what = "op #" + std::to_string(k) + " (" + op.name + ")";
    for (int32_t id : op.operands) {
      TC_RETURN_IF_ERROR(check(id, what));
      if (!defined[id])
        return invalidArgument(where + ": " + what + " uses value %" +
                               std::to_string(id) + " before it is defined");
    }
    for (int32_t id : op.results) {
      TC_RETURN_IF_ERROR(check(id, what));
      if (defined[id])
        return invalidArgument(where + ": value %" + std::to_string(id) +
                               " is defined twice (by " + what + ")");
      defined[id] = true;
    }
    for (const auto &[key, attr] : op.attrs)
      if (attr.kind == Attr::Kind::Tensor)
        TC_RETURN_IF_ERROR(checkHostTensor(attr.tensor, where + ": " + what +
                                                            " attribute '" + key + "'"));
  }
  for (size_t i = 0; i < fn.outputs.size(); ++i) {
    TC_RETURN_IF_ERROR(check(fn.outputs[i], "output '" + fn.outputNames[i] + "'"));
    if (!defined[fn.outputs[i]])
      return invalidArgument(where + ": output '" + fn.outputNames[i] +
                             "' is never defined");
  }
  return Status::ok();
}

namespace {

Status validateDeviceFunction(const DeviceFunction &f, const Artifact &a) {
  std::string where = "device function '" + f.name + "'";
  for (size_t i = 0; i < f.consts.size(); ++i)
    TC_RETURN_IF_ERROR(
        checkHostTensor(f.consts[i], where + ": constant #" + std::to_string(i)));
  for (size_t i = 0; i < f.buffers.size(); ++i) {
    const DeviceBuffer &b = f.buffers[i];
    std::string what = where + ": buffer #" + std::to_string(i) + " (" +
                       deviceSpaceName(b.space) + ")";
    if (!dtypeIsValid(static_cast<uint8_t>(b.type.dtype)))
      return invalidArgument(what + " has an invalid dtype");
    int64_t n;
    TC_RETURN_IF_ERROR(checkedNumElements(b.type.shape, &n).withPrefix(what));
    auto inside = [&](uint64_t size, const std::string &of) -> Status {
      if (b.offset > size || b.bytes > size - b.offset)
        return invalidArgument(what + " bytes [" + std::to_string(b.offset) + ", +" +
                               std::to_string(b.bytes) + ") lie outside the " +
                               std::to_string(size) + " bytes of " + of);
      return Status::ok();
    };
    switch (b.space) {
    case DeviceBuffer::Space::Arena:
      TC_RETURN_IF_ERROR(inside(f.arenaBytes, "the arena"));
      break;
    case DeviceBuffer::Space::Param: {
      // A parameter-table entry, the persistent gradient "grad:<entry>"
      // (allocated by the runtime like the entry) or the 16-bit copy
      // "shadow:<entry>" of an f32 entry (kShadowPrefix).
      const Parameter *p = a.findParam(b.name);
      std::string_view source = shadowSourceOf(b.name);
      bool shadow = !p && !source.empty();
      if (!p && b.name.rfind("grad:", 0) == 0)
        p = a.findParam(b.name.substr(5));
      if (shadow)
        p = a.findParam(std::string(source));
      if (!p)
        return invalidArgument(what + " names unknown parameter '" + b.name + "'");
      if (shadow && (p->type.dtype != DType::F32 ||
                     (b.type.dtype != DType::BF16 && b.type.dtype != DType::F16)))
        return invalidArgument(what + " '" + b.name + "' is the 16-bit copy of " +
                               typeToString(p->type) + " '" + p->name + "' as " +
                               typeToString(b.type) + ": a copy is bf16 or f16 of an f32 entry");
      int64_t pn;
      TC_RETURN_IF_ERROR(checkedNumElements(p->type.shape, &pn).withPrefix(what));
      TC_RETURN_IF_ERROR(inside(static_cast<uint64_t>(pn) *
                                    dtypeStorageBytes(shadow ? b.type.dtype : p->type.dtype),
                                "parameter '" + b.name + "'"));
      break;
    }
    case DeviceBuffer::Space::Const:
      if (b.index < 0 || static_cast<size_t>(b.index) >= f.consts.size())
        return invalidArgument(what + " refers to constant #" + std::to_string(b.index) +
                               ", out of range [0, " + std::to_string(f.consts.size()) + ")");
      TC_RETURN_IF_ERROR(inside(f.consts[b.index].data.size(), "its constant"));
      break;
    case DeviceBuffer::Space::Input:
    case DeviceBuffer::Space::Output: {
      size_t count = b.space == DeviceBuffer::Space::Input ? f.inputNames.size()
                                                           : f.outputNames.size();
      if (b.index < 0 || static_cast<size_t>(b.index) >= count)
        return invalidArgument(what + " refers to position " + std::to_string(b.index) +
                               ", out of range [0, " + std::to_string(count) + ")");
      break;
    }
    }
  }
  if (f.outputs.size() != f.outputNames.size())
    return invalidArgument(where + ": needs one buffer per output name");
  for (size_t i = 0; i < f.outputs.size(); ++i)
    if (f.outputs[i] < 0 || static_cast<size_t>(f.outputs[i]) >= f.buffers.size())
      return invalidArgument(where + ": output '" + f.outputNames[i] + "' refers to buffer #" +
                             std::to_string(f.outputs[i]) + ", out of range [0, " +
                             std::to_string(f.buffers.size()) + ")");
  std::set<std::string> kernelNames;
  for (const KernelBinary &k : a.kernels)
    kernelNames.insert(k.name);
  int32_t nbuf = static_cast<int32_t>(f.buffers.size());
  for (size_t k = 0; k < f.ops.size(); ++k) {
    const DeviceOp &op = f.ops[k];
    std::string what = where + ": op #" + std::to_string(k) + " (" + op.kind + ")";
    static const std::set<std::string> kinds = {"launch", "library", "matmul", "copy",
                                                "fill",   "record",  "wait"};
    if (!kinds.count(op.kind))
      return invalidArgument(what + " has an unknown kind");
    for (const std::vector<int32_t> *ids : {&op.ins, &op.outs})
      for (int32_t id : *ids)
        if (id < 0 || id >= nbuf)
          return invalidArgument(what + " refers to buffer #" + std::to_string(id) +
                                 ", out of range [0, " + std::to_string(nbuf) + ")");
    // Artifacts compiled without cubins carry no kernels to check against;
    // a launch marked missing_kernel has none (the runtime refuses it).
    if (op.kind == "launch" && !a.kernels.empty() && !op.attrs.count("missing_kernel") &&
        !kernelNames.count(op.name))
      return invalidArgument(what + " launches unknown kernel '" + op.name + "'");
    for (const auto &[key, attr] : op.attrs)
      if (attr.kind == Attr::Kind::Tensor)
        TC_RETURN_IF_ERROR(checkHostTensor(attr.tensor, what + " attribute '" + key + "'"));
  }
  return Status::ok();
}

} // namespace

Status validateArtifact(const Artifact &a) {
  std::set<std::string> names;
  for (const Function &f : a.functions) {
    if (!names.insert(f.name).second)
      return invalidArgument("duplicate function '" + f.name + "'");
    TC_RETURN_IF_ERROR(validateFunction(f));
  }
  names.clear();
  for (const Parameter &p : a.params) {
    std::string where = "parameter '" + p.name + "'";
    if (!names.insert(p.name).second)
      return invalidArgument("duplicate " + where);
    if (!dtypeIsValid(static_cast<uint8_t>(p.type.dtype)))
      return invalidArgument(where + " has an invalid dtype");
    int64_t n;
    TC_RETURN_IF_ERROR(checkedNumElements(p.type.shape, &n).withPrefix(where));
    if (p.init != ParamInit::Data && p.hasData)
      return invalidArgument(where + " has data but a " + paramInitName(p.init) +
                             " initialiser");
    if (!std::isfinite(p.initArgs[0]) || !std::isfinite(p.initArgs[1]))
      return invalidArgument(where + " has a non-finite initialiser argument");
    if (p.init == ParamInit::Normal && p.initArgs[1] < 0)
      return invalidArgument(where + ": normal initialiser with std " +
                             std::to_string(p.initArgs[1]) + " < 0");
    if (p.init == ParamInit::Uniform && p.initArgs[0] > p.initArgs[1])
      return invalidArgument(where + ": uniform initialiser with low " +
                             std::to_string(p.initArgs[0]) + " > high " +
                             std::to_string(p.initArgs[1]));
    if (p.init != ParamInit::Data && p.init != ParamInit::Zeros &&
        !dtypeIsFloat(p.type.dtype))
      return invalidArgument(where + " (" + typeToString(p.type) + ") is not floating-point, "
                             "so it cannot have a " + paramInitName(p.init) + " initialiser");
    if (p.kind == ParamKind::OptimizerState && p.trainable)
      return invalidArgument(where + " is optimizer state and cannot be trainable");
    if (!p.hasData)
      continue;
    uint64_t want = static_cast<uint64_t>(n) * dtypeStorageBytes(p.type.dtype);
    if (p.bytes != want)
      return invalidArgument(where + " (" + typeToString(p.type) + ") has " +
                             std::to_string(p.bytes) + " bytes, needs " +
                             std::to_string(want));
    if (p.offset > a.weights.size() || p.bytes > a.weights.size() - p.offset)
      return invalidArgument(where + " bytes [" + std::to_string(p.offset) + ", +" +
                             std::to_string(p.bytes) + ") lie outside the " +
                             std::to_string(a.weights.size()) + " weight bytes");
  }
  // The program against the parameter table: every tc.parameter a function
  // reads is in the table with the type the program computes with, so that
  // an inconsistent (but checksum-valid) artifact fails when it is loaded,
  // not in the middle of a step.
  for (const Function &f : a.functions)
    for (const Op &op : f.ops) {
      if (op.name != "tc.parameter")
        continue;
      auto it = op.attrs.find("name");
      if (it == op.attrs.end() || it->second.kind != Attr::Kind::String || op.results.size() != 1)
        return invalidArgument("function '" + f.name + "': a tc.parameter without a name");
      const std::string &n = it->second.s;
      const Parameter *p = a.findParam(n);
      if (!p)
        return invalidArgument("function '" + f.name + "' reads parameter '" + n +
                               "', which is not in the parameter table");
      const TensorType &want = f.values[static_cast<size_t>(op.results[0])];
      if (p->type != want)
        return invalidArgument("function '" + f.name + "' reads parameter '" + n + "' as " +
                               typeToString(want) + ", the parameter table has " +
                               typeToString(p->type));
    }
  names.clear();
  for (const DeviceFunction &f : a.deviceFunctions) {
    if (!names.insert(f.name).second)
      return invalidArgument("duplicate device function '" + f.name + "'");
    TC_RETURN_IF_ERROR(validateDeviceFunction(f, a));
  }
  return Status::ok();
}

} // namespace tc::rt
