//===- executor_ops.cpp - device ops as launch closures -------------------===//
//
// A prepared function's ops, resolved once: each DeviceOp (a generated
// kernel launch, a library call, a cuBLASLt matmul, a copy, a fill, an event)
// becomes a closure holding its device pointers and arguments, and runs of
// launches of one kernel become one grouped launch.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/executor_impl.h"

#include <algorithm>
#include <cstring>

#include "runtime/src/base/host_tensor.h"
#include "runtime/src/cuda/kernels/kernels.h"
#include "runtime/src/cuda/library_calls.h"

namespace tc::rt::cuda {

Status readLaunch(const OpAttrs &a, LaunchAttrs *out) {
  TC_RETURN_IF_ERROR(a.integer("n", &out->n));
  std::vector<int64_t> meta;
  if (!a.ints("meta", &meta))
    return a.missing("meta");
  TC_RETURN_IF_ERROR(a.integer("grid", &out->grid));
  TC_RETURN_IF_ERROR(a.integer("block", &out->block));
  if (out->grid < 1 || out->grid > (1ll << 31) - 1 || out->block < 1 || out->block > 1024)
    return invalidArgument(a.where + ": launch of " + std::to_string(out->grid) + " x " +
                           std::to_string(out->block) + " threads");
  out->meta.assign(meta.begin(), meta.end());
  if (out->meta.empty())
    out->meta.push_back(0);
  return Status::ok();
}

Status DeviceExecutor::Impl::pointer(Prepared &p, int32_t index, void **out,
                                     const std::string &where) {
  const DeviceFunction &fn = *p.fn;
  if (index < 0 || static_cast<size_t>(index) >= fn.buffers.size())
    return invalidArgument(where + ": buffer #" + std::to_string(index) + " does not exist");
  const DeviceBuffer &b = fn.buffers[static_cast<size_t>(index)];
  auto bounds = [&](uint64_t size, const std::string &what) -> Status {
    if (b.offset > size || b.bytes > size - b.offset)
      return invalidArgument(where + ": buffer [" + std::to_string(b.offset) + ", +" +
                             std::to_string(b.bytes) + ") leaves " + what + " of " +
                             std::to_string(size) + " bytes");
    return Status::ok();
  };
  switch (b.space) {
  case DeviceBuffer::Space::Arena:
    TC_RETURN_IF_ERROR(bounds(fn.arenaBytes, "the arena"));
    *out = fn.arenaBytes ? arena.at(b.offset) : nullptr;
    return Status::ok();
  case DeviceBuffer::Space::Param: {
    auto it = entries.find(b.name);
    if (it == entries.end())
      return invalidArgument(where + ": parameter '" + b.name + "' is not in the table");
    TC_RETURN_IF_ERROR(bounds(it->second.bytes, "parameter '" + b.name + "'"));
    p.paramsRead.insert(b.name);
    *out = static_cast<char *>(it->second.block) + it->second.offset + b.offset;
    return Status::ok();
  }
  case DeviceBuffer::Space::Const: {
    if (b.index < 0 || static_cast<size_t>(b.index) >= fn.consts.size())
      return invalidArgument(where + ": constant #" + std::to_string(b.index) + " does not exist");
    TC_RETURN_IF_ERROR(bounds(fn.consts[b.index].data.size(), "its constant"));
    *out = static_cast<char *>(p.constBlock) + p.constOffsets[b.index] + b.offset;
    return Status::ok();
  }
  case DeviceBuffer::Space::Input: {
    if (b.index < 0 || static_cast<size_t>(b.index) >= p.inputOffsets.size())
      return invalidArgument(where + ": argument #" + std::to_string(b.index) + " does not exist");
    *out = static_cast<char *>(p.inputBlock) + p.inputOffsets[b.index] + b.offset;
    return Status::ok();
  }
  case DeviceBuffer::Space::Output:
    break;
  }
  return unimplemented(where + ": caller-provided output buffers");
}

namespace {

/// " [shape dtype]" of an op's first output, for the profile.
std::string profileShape(const Prepared &p, const DeviceOp &op) {
  if (op.outs.empty())
    return "";
  return " -> " + typeToString(bufType(p, op.outs[0]));
}
} // namespace

Status DeviceExecutor::Impl::buildLaunch(Prepared &p, const DeviceOp &op, const std::string &where,
                                         const std::vector<void *> &ins,
                                         const std::vector<void *> &outs, cudaStream_t s) {
  OpAttrs a{op, where};
  if (a.integerOr("missing_kernel", 0))
    return unimplemented(where + ": the compiler generated no CUDA kernel for '" + op.name +
                         "' (" + a.stringOr("kernel_kind", "?") + ")");
  auto k = kernels.find(op.name);
  if (k == kernels.end())
    return invalidArgument(where + ": kernel '" + op.name + "' is not in the artifact");
  struct Args {
    std::vector<void *> ptrs;
    long long n = 0;
    std::vector<long long> meta;
    std::vector<void *> args;
    dim3 grid, block;
  };
  LaunchAttrs la;
  TC_RETURN_IF_ERROR(readLaunch(a, &la));
  auto args = std::make_shared<Args>();
  args->ptrs = outs;
  args->ptrs.insert(args->ptrs.end(), ins.begin(), ins.end());
  args->n = la.n;
  args->meta = std::move(la.meta);
  args->grid = dim3(static_cast<unsigned>(la.grid));
  args->block = dim3(static_cast<unsigned>(la.block));
  for (void *&ptr : args->ptrs)
    args->args.push_back(&ptr);
  args->args.push_back(&args->n);
  args->args.push_back(args->meta.data());
  const void *fn = reinterpret_cast<const void *>(k->second);
  std::string name = op.name;
  p.ops.push_back([args, fn, s, name]() -> Status {
    return cudaStatus(cudaLaunchKernel(fn, args->grid, args->block, args->args.data(), 0, s),
                      "cudaLaunchKernel(" + name + ")");
  });
  return Status::ok();
}

Status DeviceExecutor::Impl::buildLibrary(Prepared &p, const DeviceOp &op,
                                          const std::string &where,
                                          const std::vector<void *> &ins,
                                          const std::vector<void *> &outs, cudaStream_t s) {
  if (op.name == "nvfp4_gemm")
    return buildNvfp4Gemm(p, op, where, ins, outs, s);
  std::vector<TensorType> inTypes, outTypes;
  for (int32_t i : op.ins)
    inTypes.push_back(bufType(p, i));
  for (int32_t i : op.outs)
    outTypes.push_back(bufType(p, i));
  std::function<Status()> launch;
  bool capturable = true;
  TC_RETURN_IF_ERROR(
      bindLibraryCall({op, where, ins, outs, inTypes, outTypes}, s, &launch, &capturable));
  p.capturable = p.capturable && capturable;
  p.ops.push_back(std::move(launch));
  return Status::ok();
}

Status DeviceExecutor::Impl::ensureMatmul(int64_t sid, Matmul **out) {
  std::unique_ptr<Matmul> &mm = matmuls[sid];
  if (!mm) {
    void *&ws = workspaces[sid];
    if (!ws)
      TC_RETURN_IF_ERROR(cudaStatus(cudaMalloc(&ws, Matmul::kDefaultWorkspaceBytes),
                                    "cudaMalloc(cuBLASLt workspace)"));
    Status st = Matmul::create(&mm, ws, Matmul::kDefaultWorkspaceBytes);
    if (!st.isOk()) {
      matmuls.erase(sid);
      return st;
    }
    mm->setTuningRecord(tuningRecord);
  }
  *out = mm.get();
  return Status::ok();
}

void DeviceExecutor::Impl::synchronizeAll() {
  for (Stream &s : streams)
    cudaStreamSynchronize(s.get());
}

Status DeviceExecutor::Impl::buildNvfp4Gemm(Prepared &p, const DeviceOp &op,
                                            const std::string &where,
                                            const std::vector<void *> &ins,
                                            const std::vector<void *> &outs, cudaStream_t s) {
  // a, a_scales, a_tensor_scale, b, b_scales, b_tensor_scale -> d, scratch
  // (schema/library_abi.cpp).
  if (ins.size() != 6 || outs.size() != 2)
    return invalidArgument(where + ": \"nvfp4_gemm\" takes a, a_scales, a_tensor_scale, b, "
                                   "b_scales, b_tensor_scale and writes d and its scratch");
  if (bufType(p, op.outs[0]).dtype != DType::BF16)
    return invalidArgument(where + ": \"nvfp4_gemm\" writes bf16 d");
  OpAttrs a{op, where};
  Matmul::Nvfp4Gemm g;
  TC_RETURN_IF_ERROR(a.integer("m", &g.m));
  TC_RETURN_IF_ERROR(a.integer("n", &g.n));
  TC_RETURN_IF_ERROR(a.integer("k", &g.k));
  g.lhs = ins[0];
  g.lhsScales = static_cast<const uint8_t *>(ins[1]);
  g.lhsTensorScale = static_cast<const float *>(ins[2]);
  g.rhs = ins[3];
  g.rhsScales = static_cast<const uint8_t *>(ins[4]);
  g.rhsTensorScale = static_cast<const float *>(ins[5]);
  g.out = outs[0];
  g.scalars = static_cast<float *>(outs[1]);
  Matmul *mm = nullptr;
  TC_RETURN_IF_ERROR(ensureMatmul(buildStream, &mm));
  p.profileNames.back() = "matmul nvfp4 M=" + std::to_string(g.m) + " N=" + std::to_string(g.n) +
                          " K=" + std::to_string(g.k);
  p.ops.push_back([=]() -> Status {
    Status st = mm->runNvfp4(g, s);
    return st.isOk() ? st : Status(st.code(), where + ": " + st.message());
  });
  return Status::ok();
}

Status DeviceExecutor::Impl::buildMatmul(Prepared &p, const DeviceOp &op, const std::string &where,
                                         const std::vector<void *> &ins,
                                         const std::vector<void *> &outs, cudaStream_t s) {
  OpAttrs a{op, where};
  std::string compute = a.stringOr("compute_type", "f32");
  // compute_type "fp8": lhs, rhs and their f32 scale_inv scalars[, bias]
  // (tcx.matmul).
  bool fp8 = compute == "fp8";
  // device_alpha (not fp8): the last input is alpha, f32 [1], read on the device.
  bool devAlpha = a.integerOr("device_alpha", 0) != 0;
  if (devAlpha && (fp8 || ins.size() < 3 || bufType(p, op.ins.back()).dtype != DType::F32 ||
                   bufType(p, op.ins.back()).numElements() != 1))
    return invalidArgument(where + ": device_alpha takes a non-fp8 matmul whose last input is "
                                   "one f32 alpha");
  // addend (not fp8, no device alpha, beta 0): the input after the bias is
  // added to the product (cuBLASLt's C, beta 1): a residual add.
  bool addend = a.integerOr("addend", 0) != 0;
  if (addend && (fp8 || devAlpha || a.realOr("beta", 0.0) != 0.0 || ins.size() < 3 ||
                 a.find("lhs_batch") ||
                 bufType(p, op.ins[ins.size() - 1]).numElements() !=
                     bufType(p, op.outs[0]).numElements() ||
                 bufType(p, op.ins[ins.size() - 1]).dtype != bufType(p, op.outs[0]).dtype))
    return invalidArgument(where + ": an addend takes a non-fp8 matmul without device alpha, "
                                   "beta 0 or broadcast batch, its last input of out's type "
                                   "and size");
  size_t nIn = ins.size() - (devAlpha ? 1 : 0) - (addend ? 1 : 0);
  // bias_grad "lhs" / "rhs" (not fp8): the second output is the sum over k
  // of that operand (a Linear layer's bias gradient, cuBLASLt's BGRAD).
  std::string biasGrad = a.stringOr("bias_grad", "none");
  if (biasGrad != "none" && biasGrad != "lhs" && biasGrad != "rhs")
    return invalidArgument(where + ": bias_grad must be none, lhs or rhs, got '" + biasGrad + "'");
  // epilogue "gelu_aux" / "bias_gelu_aux" (not fp8; "gelu_erf_aux" /
  // "bias_gelu_erf_aux" the exact GELU's): the second output is the GELU's
  // input (cuBLASLt's GELU_AUX(_BIAS)).
  std::string epiName = a.stringOr("epilogue", "none");
  bool geluAux = epiName == "gelu_aux" || epiName == "bias_gelu_aux" || epiName == "gelu_erf_aux" ||
                 epiName == "bias_gelu_erf_aux";
  size_t nOut = biasGrad == "none" && !geluAux ? 1 : 2;
  if ((fp8 ? nIn < 4 || nIn > 5 : nIn < 2 || nIn > 3) || outs.size() != nOut)
    return invalidArgument(where + (fp8 ? ": an fp8 matmul takes lhs, rhs, lhs_scale_inv, "
                                          "rhs_scale_inv[, bias] and one output"
                                        : ": matmul takes lhs, rhs[, bias][, addend][, alpha] "
                                          "and one output (two with bias_grad or a GELU aux)"));
  Matmul *mm = nullptr;
  TC_RETURN_IF_ERROR(ensureMatmul(buildStream, &mm));
  MatmulDesc d;
  d.dtype = bufType(p, op.outs[0]).dtype;
  TC_RETURN_IF_ERROR(checkGpuDtype(where, d.dtype));
  d.tf32 = compute == "tf32";
  d.fp8 = fp8;
  if (fp8) {
    d.lhsType = bufType(p, op.ins[0]).dtype;
    d.rhsType = bufType(p, op.ins[1]).dtype;
    d.fastAccum = a.integerOr("fast_accum", 0) != 0;
  }
  d.transposeLhs = a.integerOr("transpose_lhs", 0) != 0;
  d.transposeRhs = a.integerOr("transpose_rhs", 0) != 0;
  TC_RETURN_IF_ERROR(a.integer("m", &d.m));
  TC_RETURN_IF_ERROR(a.integer("n", &d.n));
  TC_RETURN_IF_ERROR(a.integer("k", &d.k));
  d.batch = a.integerOr("batch", 1);
  d.strideLhs = a.integerOr("stride_lhs", -1);
  d.strideRhs = a.integerOr("stride_rhs", -1);
  d.strideOut = a.integerOr("stride_out", -1);
  d.alpha = static_cast<float>(a.realOr("alpha", 1.0));
  d.beta = static_cast<float>(a.realOr("beta", 0.0));
  d.deviceAlpha = devAlpha;
  d.addend = addend;
  const std::string &epi = epiName;
  if (epi == "none")
    d.epilogue = MatmulEpilogue::None;
  else if (epi == "bias")
    d.epilogue = MatmulEpilogue::Bias;
  else if (epi == "gelu")
    d.epilogue = MatmulEpilogue::Gelu;
  else if (epi == "bias_gelu")
    d.epilogue = MatmulEpilogue::BiasGelu;
  else if (epi == "gelu_aux" && !fp8)
    d.epilogue = MatmulEpilogue::GeluAux;
  else if (epi == "bias_gelu_aux" && !fp8)
    d.epilogue = MatmulEpilogue::BiasGeluAux;
  else if (epi == "dgelu" && !fp8)
    d.epilogue = MatmulEpilogue::DGelu;
  else if (epi == "gelu_erf_aux" && !fp8)
    d.epilogue = MatmulEpilogue::GeluErfAux;
  else if (epi == "bias_gelu_erf_aux" && !fp8)
    d.epilogue = MatmulEpilogue::BiasGeluErfAux;
  else if (epi == "dgelu_erf" && !fp8)
    d.epilogue = MatmulEpilogue::DGeluErf;
  else
    return invalidArgument(where + ": unknown matmul epilogue '" + epi + "'");
  if (biasGrad != "none") {
    if (fp8 || d.epilogue != MatmulEpilogue::None || devAlpha || addend || d.batch != 1 ||
        d.beta != 0.0f || d.alpha != 1.0f || a.find("lhs_batch"))
      return invalidArgument(where + ": bias_grad takes a non-fp8 matmul of batch 1 without "
                                     "epilogue, addend, device alpha, alpha or beta");
    int64_t len = biasGrad == "lhs" ? d.m : d.n;
    if (bufType(p, op.outs[1]).numElements() != len || bufType(p, op.outs[1]).dtype != d.dtype)
      return invalidArgument(where + ": the bias gradient (second output) must hold " +
                             std::to_string(len) + " elements of the product's type");
    d.epilogue = biasGrad == "lhs" ? MatmulEpilogue::BiasGradLhs : MatmulEpilogue::BiasGradRhs;
  }
  if (geluAux && (bufType(p, op.outs[1]).numElements() != bufType(p, op.outs[0]).numElements() ||
                  bufType(p, op.outs[1]).dtype != d.dtype || a.find("lhs_batch") || addend))
    return invalidArgument(where + ": a GELU aux output (the second) must match the first, "
                                   "without broadcast batch or addend");
  bool biasEpi = d.epilogue == MatmulEpilogue::Bias || d.epilogue == MatmulEpilogue::BiasGelu ||
                 d.epilogue == MatmulEpilogue::BiasGeluAux ||
                 d.epilogue == MatmulEpilogue::BiasGeluErfAux;
  // dgelu(_erf): the third input is the GELU's input (the forward's aux), read.
  bool dgelu = d.epilogue == MatmulEpilogue::DGelu || d.epilogue == MatmulEpilogue::DGeluErf;
  size_t biasIndex = fp8 ? 4 : 2;
  if ((biasEpi || dgelu) != (nIn == biasIndex + 1))
    return invalidArgument(where + ": epilogue '" + epi + "' with " + std::to_string(nIn) +
                           " inputs");
  if (dgelu && (bufType(p, op.ins[2]).numElements() != bufType(p, op.outs[0]).numElements() ||
                bufType(p, op.ins[2]).dtype != d.dtype || addend || devAlpha || a.find("lhs_batch")))
    return invalidArgument(where + ": dgelu's third input (the GELU's input) must match the "
                                   "output, without addend, device alpha or broadcast batch");
  auto *alpha = devAlpha ? static_cast<const float *>(ins.back()) : nullptr;
  p.profileNames.back() = "matmul " + d.toString();
  const void *lhs = ins[0], *rhs = ins[1];
  const void *bias = biasEpi ? ins[biasIndex] : nullptr;
  void *out = outs[0];
  if (fp8) {
    // One scale each (per tensor), m and n of them (per row), or block
    // scales (lhs_blocks / rhs_blocks: 1 = 1x128, 2 = 128x128, 3 = 1x32
    // E8M0: MXFP8).
    int64_t nl = bufType(p, op.ins[2]).numElements(), nr = bufType(p, op.ins[3]).numElements();
    int64_t lb = a.integerOr("lhs_blocks", 0), rb = a.integerOr("rhs_blocks", 0);
    if (lb < 0 || lb > 3 || rb < 0 || rb > 3)
      return invalidArgument(where + ": lhs_blocks / rhs_blocks must be 0, 1 (1x128), 2 "
                                     "(128x128) or 3 (1x32 e8m0)");
    d.lhsBlocks = static_cast<Fp8ScaleBlocks>(lb);
    d.rhsBlocks = static_cast<Fp8ScaleBlocks>(rb);
    d.rowScales = !lb && !rb && (nl != 1 || nr != 1);
    if (d.rowScales && (nl != d.m || nr != d.n))
      return invalidArgument(where + ": an fp8 matmul takes one scale per operand or one per row (" +
                             std::to_string(d.m) + " and " + std::to_string(d.n) + "), got " +
                             std::to_string(nl) + " and " + std::to_string(nr));
    p.profileNames.back() = "matmul " + d.toString();
    if (d.lhsBlocks == Fp8ScaleBlocks::Vec32Ue8m0) {
      auto *ls = static_cast<const uint8_t *>(ins[2]), *rs = static_cast<const uint8_t *>(ins[3]);
      p.ops.push_back([=]() { return mm->runMxfp8(d, lhs, ls, rhs, rs, out, s); });
      return Status::ok();
    }
    auto *ls = static_cast<const float *>(ins[2]), *rs = static_cast<const float *>(ins[3]);
    p.ops.push_back([=]() { return mm->runFp8(d, lhs, ls, rhs, rs, out, s, bias); });
    return Status::ok();
  }
  std::vector<int64_t> lb, rb;
  if (a.ints("lhs_batch", &lb) && a.ints("rhs_batch", &rb)) {
    p.ops.push_back(
        [=]() { return mm->runBroadcast(d, lb, rb, lhs, rhs, out, s, bias, alpha); });
    return Status::ok();
  }
  const void *add = addend ? ins.back() : nullptr;
  if (biasGrad != "none")
    bias = outs[1]; // written: the bias gradient
  void *aux = geluAux ? outs[1] : dgelu ? const_cast<void *>(ins[2]) : nullptr;
  p.ops.push_back([=]() { return mm->run(d, lhs, rhs, out, s, bias, aux, alpha, add); });
  return Status::ok();
}

Status DeviceExecutor::Impl::buildOp(Prepared &p, const DeviceOp &op, size_t index) {
  std::string where = "@" + p.fn->name + " op " + std::to_string(index) + " (" + op.kind +
                      (op.name.empty() ? "" : " " + op.name) + ")";
  OpAttrs a{op, where};
  int64_t sid = a.integerOr("stream", 0);
  if (sid < 0 || sid > 15)
    return invalidArgument(where + ": stream " + std::to_string(sid) + " (0..15)");
  TC_RETURN_IF_ERROR(ensureStreams(sid + 1));
  buildStream = sid;
  cudaStream_t s = stream(sid);
  std::vector<void *> ins, outs;
  for (int32_t i : op.ins) {
    void *ptr = nullptr;
    TC_RETURN_IF_ERROR(pointer(p, i, &ptr, where));
    ins.push_back(ptr);
  }
  for (int32_t i : op.outs) {
    void *ptr = nullptr;
    TC_RETURN_IF_ERROR(pointer(p, i, &ptr, where));
    outs.push_back(ptr);
  }
  p.opNames.push_back(where);
  p.profileNames.push_back(op.kind + " " + op.name + profileShape(p, op));
  if (op.kind == "launch")
    return buildLaunch(p, op, where, ins, outs, s);
  if (op.kind == "library")
    return buildLibrary(p, op, where, ins, outs, s);
  if (op.kind == "matmul")
    return buildMatmul(p, op, where, ins, outs, s);
  if (op.kind == "copy") {
    if (ins.size() != 1 || outs.size() != 1)
      return invalidArgument(where + ": copy takes one source and one target");
    uint64_t bytes = p.fn->buffers[op.ins[0]].bytes;
    if (p.fn->buffers[op.outs[0]].bytes != bytes)
      return invalidArgument(where + ": copy of " + std::to_string(bytes) + " bytes into " +
                             std::to_string(p.fn->buffers[op.outs[0]].bytes));
    void *src = ins[0], *dst = outs[0];
    p.ops.push_back([=]() {
      return cudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s),
                        "cudaMemcpyAsync(device to device)");
    });
    return Status::ok();
  }
  if (op.kind == "fill") {
    if (outs.size() != 1)
      return invalidArgument(where + ": fill takes one target");
    const TensorType &t = bufType(p, op.outs[0]);
    HostTensor one = makeHostTensor(TensorType{t.dtype, {}}, {a.realOr("value", 0.0)});
    uint64_t pattern = 0;
    std::memcpy(&pattern, one.data.data(), std::min<size_t>(one.data.size(), 8));
    int eb = dtypeStorageBytes(t.dtype);
    int64_t n = t.numElements();
    void *dst = outs[0];
    if (pattern == 0) {
      uint64_t bytes = p.fn->buffers[op.outs[0]].bytes;
      p.ops.push_back([=]() {
        return cudaStatus(cudaMemsetAsync(dst, 0, bytes, s), "cudaMemsetAsync");
      });
    } else {
      p.ops.push_back([=]() { return fillBuffer(dst, eb, pattern, n, s); });
    }
    return Status::ok();
  }
  if (op.kind == "record" || op.kind == "wait") {
    int64_t ev = 0;
    TC_RETURN_IF_ERROR(a.integer("event", &ev));
    if (ev < 0 || ev > 4096)
      return invalidArgument(where + ": event " + std::to_string(ev));
    TC_RETURN_IF_ERROR(ensureEvents(ev + 1));
    Event *e = &events[static_cast<size_t>(ev)];
    if (op.kind == "record")
      p.ops.push_back([=]() { return e->record(s); });
    else
      p.ops.push_back([=]() { return e->waitOn(s); });
    return Status::ok();
  }
  return unimplemented(where + ": unknown device op kind '" + op.kind + "'");
}

/// The window of launches [first, *end) that grouped launches can replace:
/// launches of generated kernels (the first with a NAME_group entry point),
/// none reading or writing what another one of the window writes (so any
/// order of them computes the same), split into `classes`: of the same
/// kernel with a NAME_group entry, meta and block size, or one launch of a
/// kernel without (op indices, in program order; classes in order of their
/// first op): the AdamW/SGD update of every parameter, one launch per kernel
/// instead of one per parameter, also where the updates of bf16 and f32
/// gradients (two kernels) alternate.
Status DeviceExecutor::Impl::findGroup(Prepared &p, size_t first, size_t *end,
                                       std::vector<std::vector<size_t>> *classes) {
  *end = first + 1;
  classes->assign(1, {first});
  const std::vector<DeviceOp> &ops = p.fn->ops;
  auto groupable = [&](const DeviceOp &op) {
    return op.kind == "launch" && !op.attrs.count("missing_kernel") && groupKernels.count(op.name) &&
           !op.attrs.count("stream");
  };
  if (!groupable(ops[first]))
    return Status::ok();
  auto attr = [](const DeviceOp &op, const char *n) -> const Attr * {
    auto it = op.attrs.find(n);
    return it == op.attrs.end() ? nullptr : &it->second;
  };
  // A launch's blocks (its grid's product; 1 without one).
  auto gridOf = [&](const DeviceOp &op) {
    const Attr *g = attr(op, "grid");
    int64_t blocks = 1;
    if (g)
      for (int64_t d : g->ints)
        blocks *= d;
    return blocks;
  };
  auto same = [&](const DeviceOp &a, const DeviceOp &b, const char *n) {
    const Attr *x = attr(a, n), *y = attr(b, n);
    return (!x && !y) || (x && y && x->kind == y->kind && x->i == y->i && x->ints == y->ints);
  };
  struct Range {
    uintptr_t lo, hi;
  };
  std::vector<Range> reads, writes;
  auto ranges = [&](const std::vector<int32_t> &ids, std::vector<Range> *out) -> Status {
    for (int32_t id : ids) {
      void *ptr = nullptr;
      TC_RETURN_IF_ERROR(pointer(p, id, &ptr, "grouping"));
      uintptr_t lo = reinterpret_cast<uintptr_t>(ptr);
      out->push_back({lo, lo + p.fn->buffers[id].bytes});
    }
    return Status::ok();
  };
  auto overlaps = [](const std::vector<Range> &a, const std::vector<Range> &b) {
    for (const Range &x : a)
      for (const Range &y : b)
        if (x.lo < y.hi && y.lo < x.hi)
          return true;
    return false;
  };
  TC_RETURN_IF_ERROR(ranges(ops[first].ins, &reads));
  TC_RETURN_IF_ERROR(ranges(ops[first].outs, &writes));
  // Other launches of generated kernels may sit in the window too, each a
  // class of its own, when they are as independent (Pythia's bias updates of
  // another kernel split its AdamW launches into runs of three).
  auto plainLaunch = [&](const DeviceOp &op) {
    return op.kind == "launch" && !op.attrs.count("missing_kernel") && !op.attrs.count("stream");
  };
  size_t j = first + 1;
  for (; j < ops.size(); ++j) {
    const DeviceOp &op = ops[j];
    if (!plainLaunch(op))
      break;
    std::vector<Range> r, w;
    TC_RETURN_IF_ERROR(ranges(op.ins, &r));
    TC_RETURN_IF_ERROR(ranges(op.outs, &w));
    if (overlaps(r, writes) || overlaps(w, writes) || overlaps(w, reads))
      break;
    reads.insert(reads.end(), r.begin(), r.end());
    writes.insert(writes.end(), w.begin(), w.end());
    if (!groupable(op)) {
      classes->push_back({j});
      continue;
    }
    // Kernels whose grouped items keep state in module memory span at most
    // groupMaxBlocks blocks a launch (their slots).
    auto fits = [&](const std::vector<size_t> &k) {
      auto m = groupMaxBlocks.find(op.name);
      if (m == groupMaxBlocks.end())
        return true;
      int64_t blocks = gridOf(op);
      for (size_t i : k)
        blocks += gridOf(ops[i]);
      return blocks <= m->second;
    };
    auto c = std::find_if(classes->begin(), classes->end(), [&](const std::vector<size_t> &k) {
      const DeviceOp &h = ops[k.front()];
      return groupable(h) && h.name == op.name && same(h, op, "meta") && same(h, op, "block") &&
             fits(k);
    });
    if (c == classes->end())
      classes->push_back({j});
    else
      c->push_back(j);
  }
  *end = j;
  return Status::ok();
}

Status DeviceExecutor::Impl::buildGroup(Prepared &p, const std::vector<size_t> &members) {
  const std::vector<DeviceOp> &ops = p.fn->ops;
  const DeviceOp &head = ops[members.front()];
  std::string where = "@" + p.fn->name + " ops " + std::to_string(members.front()) + ".." +
                      std::to_string(members.back()) + " (grouped launch " + head.name + ")";
  LaunchAttrs head_;
  TC_RETURN_IF_ERROR(readLaunch(OpAttrs{head, where}, &head_));
  const size_t nptr = head.outs.size() + head.ins.size();
  // Item layout of the generated TcGroupItem_<nptr>: pointers, n, firstBlock, blocks.
  std::vector<int64_t> items;
  int64_t blocks = 0;
  for (size_t i : members) {
    const DeviceOp &op = ops[i];
    LaunchAttrs la;
    TC_RETURN_IF_ERROR(readLaunch(OpAttrs{op, where}, &la));
    if (op.outs.size() + op.ins.size() != nptr)
      return invalidArgument(where + ": ops of one kernel with different argument counts");
    for (const std::vector<int32_t> *ids : {&op.outs, &op.ins})
      for (int32_t id : *ids) {
        void *ptr = nullptr;
        TC_RETURN_IF_ERROR(pointer(p, id, &ptr, where));
        items.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(ptr)));
      }
    items.push_back(la.n);
    items.push_back(blocks);
    items.push_back(la.grid);
    blocks += la.grid;
  }
  void *table = nullptr;
  uint64_t bytes = items.size() * sizeof(int64_t);
  TC_RETURN_IF_ERROR(cudaStatus(cudaMalloc(&table, bytes), "cudaMalloc(group table)"));
  p.groupTables.push_back(table);
  p.groupBytes += bytes;
  TC_CUDA_RETURN_IF_ERROR(cudaMemcpy(table, items.data(), bytes, cudaMemcpyHostToDevice));
  struct Args {
    void *table;
    int count;
    std::vector<long long> meta;
    std::vector<void *> args;
  };
  auto args = std::make_shared<Args>();
  args->table = table;
  args->count = static_cast<int>(members.size());
  args->meta = head_.meta;
  args->args = {&args->table, &args->count, args->meta.data()};
  const void *fn = reinterpret_cast<const void *>(groupKernels.at(head.name));
  cudaStream_t s = stream(0);
  dim3 grid(static_cast<unsigned>(blocks)), threads(static_cast<unsigned>(head_.block));
  std::string name = head.name + "_group";
  p.ops.push_back([args, fn, s, grid, threads, name]() -> Status {
    return cudaStatus(cudaLaunchKernel(fn, grid, threads, args->args.data(), 0, s),
                      "cudaLaunchKernel(" + name + ")");
  });
  p.opNames.push_back(where);
  p.profileNames.push_back("launch " + name + " (" + std::to_string(members.size()) + " ops)");
  return Status::ok();
}

Status DeviceExecutor::Impl::resolve(Prepared &p) {
  if (p.graph) {
    cudaGraphExecDestroy(p.graph);
    p.graph = nullptr;
  }
  p.ops.clear();
  p.opStream.clear();
  p.opEnd.clear();
  p.opNames.clear();
  p.profileNames.clear();
  p.paramsRead.clear();
  for (void *t : p.groupTables)
    cudaFree(t);
  p.groupTables.clear();
  p.groupBytes = 0;
  p.capturable = opts.graphs && !opts.checkEachOp && !profile;
  std::vector<std::vector<size_t>> classes;
  for (size_t i = 0; i < p.fn->ops.size();) {
    size_t end = i + 1;
    TC_RETURN_IF_ERROR(findGroup(p, i, &end, &classes));
    for (const std::vector<size_t> &c : classes) {
      int64_t sid = 0;
      if (c.size() >= 2) {
        TC_RETURN_IF_ERROR(buildGroup(p, c));
      } else {
        TC_RETURN_IF_ERROR(buildOp(p, p.fn->ops[c.front()], c.front()));
        sid = buildStream;
      }
      p.opStream.resize(p.ops.size(), sid);
    }
    p.opEnd.resize(p.ops.size(), end);
    i = end;
  }
  p.arenaBase = arena.base();
  p.runs = 0;
  return Status::ok();
}

} // namespace tc::rt::cuda
