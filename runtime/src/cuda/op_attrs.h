//===- op_attrs.h - attribute readers of device ops -------------*- C++ -*-===//
//
// What the CUDA executor and its library binder read device-op attributes
// (program.h DeviceOp::attrs) and buffer dtypes with, naming the op in errors.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_OP_ATTRS_H
#define TC_RUNTIME_CUDA_OP_ATTRS_H

#include <string>
#include <vector>

#include "runtime/src/base/status.h"
#include "runtime/src/schema/program.h"

namespace tc::rt::cuda {

/// Attribute readers with the op named in errors.
struct OpAttrs {
  const DeviceOp &op;
  std::string where;

  const Attr *find(const char *name) const {
    auto it = op.attrs.find(name);
    return it == op.attrs.end() ? nullptr : &it->second;
  }
  Status missing(const char *name) const {
    return invalidArgument(where + ": attribute '" + name + "' is missing");
  }
  Status integer(const char *name, int64_t *out) const {
    const Attr *a = find(name);
    if (!a)
      return missing(name);
    if (a->kind == Attr::Kind::Int) {
      *out = a->i;
      return Status::ok();
    }
    if (a->kind == Attr::Kind::Ints && a->ints.size() == 1) {
      *out = a->ints[0];
      return Status::ok();
    }
    return invalidArgument(where + ": attribute '" + name + "' is not an integer");
  }
  int64_t integerOr(const char *name, int64_t dflt) const {
    int64_t v = dflt;
    return find(name) && integer(name, &v).isOk() ? v : dflt;
  }
  double realOr(const char *name, double dflt) const {
    const Attr *a = find(name);
    if (!a)
      return dflt;
    if (a->kind == Attr::Kind::Float)
      return a->f;
    if (a->kind == Attr::Kind::Int)
      return static_cast<double>(a->i);
    return dflt;
  }
  std::string stringOr(const char *name, const std::string &dflt) const {
    const Attr *a = find(name);
    return a && a->kind == Attr::Kind::String ? a->s : dflt;
  }
  bool ints(const char *name, std::vector<int64_t> *out) const {
    const Attr *a = find(name);
    if (!a)
      return false;
    if (a->kind == Attr::Kind::Ints) {
      *out = a->ints;
      return true;
    }
    if (a->kind == Attr::Kind::Int) {
      *out = {a->i};
      return true;
    }
    return false;
  }
};

/// Ok for the dtypes the library kernels and cuBLASLt take.
inline Status checkGpuDtype(const std::string &where, DType dt) {
  if (dt == DType::F32 || dt == DType::BF16 || dt == DType::F16)
    return Status::ok();
  return unimplemented(where + ": element type " + dtypeName(dt) +
                       " (the CUDA library kernels take f32, bf16 or f16)");
}

} // namespace tc::rt::cuda

#endif // TC_RUNTIME_CUDA_OP_ATTRS_H
