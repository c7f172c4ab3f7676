//===- leaf.cpp - tc.parameter and tc.constant ----------------------------===//
#include "runtime/src/cpu/kernel.h"

#include "runtime/src/base/init.h"

#include <algorithm>

namespace tc::rt::cpu {

namespace {

void parameterKernel(KernelContext &c) {
  c.expectOperands(0);
  c.expectResults(1);
  const Attr *name = c.findAttr("name");
  if (!name || name->kind != Attr::Kind::String)
    c.fail("needs a string attribute 'name'");
  const std::string &n = name->s;
  Buffer &out = *c.out[0];
  const TensorType want = out.type; // a copy: `out` is replaced below
  if (c.overrides) {
    auto it = c.overrides->find(n);
    if (it != c.overrides->end()) {
      const HostTensor &t = it->second;
      if (t.data.empty() && t.type.numElements() > 0) // a placeholder (trainer.cpp)
        c.fail(missingDataMessage(n), StatusCode::FailedPrecondition);
      bool widened = c.opts.wideF32 && c.opts.precision == RefPrecision::F64 &&
                     want.dtype == DType::F32 && t.type.dtype == DType::F64 &&
                     t.type.shape == want.shape;
      if (t.type != want && !widened)
        c.fail("parameter '" + n + "': expected " + typeToString(want) +
               ", the override is " + typeToString(t.type));
      Status st = checkHostTensor(t, "parameter '" + n + "' override");
      if (!st.isOk())
        c.fail(st.message());
      out = decodeBuffer(t.type, t.data.data());
      out.type = want;
      return;
    }
  }
  const Parameter *p = c.artifact.findParam(n);
  if (!p)
    c.fail("parameter '" + n + "' is not in the artifact's parameter table",
           StatusCode::NotFound);
  if (p->type != want)
    c.fail("parameter '" + n + "': the program expects " + typeToString(want) +
           ", the parameter table says " + typeToString(p->type));
  if (p->init != ParamInit::Data) {
    // zeros/ones/normal/uniform: computed from (seed, name), as on the GPU.
    HostTensor t;
    Status st = initParameter(*p, c.opts.initSeed, &t);
    if (!st.isOk())
      c.fail(st.message(), st.code());
    out = decodeBuffer(want, t.data.data());
    return;
  }
  if (!p->hasData)
    c.fail(missingDataMessage(n), StatusCode::FailedPrecondition);
  uint64_t want_bytes = static_cast<uint64_t>(storageBytes(want));
  if (p->bytes != want_bytes || p->offset > c.artifact.weights.size() ||
      p->bytes > c.artifact.weights.size() - p->offset)
    c.fail("parameter '" + n + "' has an inconsistent byte range in the artifact",
           StatusCode::DataLoss);
  out = decodeBuffer(want, c.artifact.weights.data() + p->offset);
}

void constantKernel(KernelContext &c) {
  c.expectOperands(0);
  c.expectResults(1);
  const Attr *v = c.findAttr("value");
  if (!v || v->kind != Attr::Kind::Tensor)
    c.fail("needs a tensor attribute 'value'");
  const HostTensor &t = v->tensor;
  Buffer &out = *c.out[0];
  // A one-element value of the right dtype is a splat.
  bool splat = t.type.dtype == out.type.dtype && t.type.numElements() == 1;
  if (t.type != out.type && !splat)
    c.fail("value is " + typeToString(t.type) + ", result is " + typeToString(out.type));
  Status st = checkHostTensor(t, "value");
  if (!st.isOk())
    c.fail(st.message());
  Buffer value = decodeBuffer(t.type, t.data.data());
  if (t.type == out.type) {
    out = std::move(value);
    return;
  }
  if (out.isFloat)
    std::fill(out.f.begin(), out.f.end(), value.f[0]);
  else
    std::fill(out.i.begin(), out.i.end(), value.i[0]);
}

} // namespace

void registerLeafKernels(KernelTable &t) {
  t["tc.parameter"] = parameterKernel;
  t["tc.constant"] = constantKernel;
}

} // namespace tc::rt::cpu
