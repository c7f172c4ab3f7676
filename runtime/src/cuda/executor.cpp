//===- executor.cpp - runs an artifact's device program on a GPU ----------===//
//
// See executor.h. Each device function is "prepared" once: every buffer is
// resolved to a device pointer and every op becomes a closure holding its
// arguments, so a step is a loop of launches (or one graph launch).
//
// This file: creating the executor (kernels, the parameter table), the
// prepared functions' argument and constant blocks and the shared arena,
// and entry I/O. executor_ops.cpp builds the ops, executor_run.cpp runs them.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/executor.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runtime/src/base/host_tensor.h"
#include "runtime/src/cuda/cudnn/loader.h"
#include "runtime/src/cuda/executor_impl.h"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {

DeviceExecutor::Impl::~Impl() {
  finishSubmitted();
  reportProfile();
  for (cudaEvent_t e : marks)
    cudaEventDestroy(e);
  for (void *b : deviceOnlyBlocks)
    cudaFree(b);
  for (auto &[name, p] : prepared) {
    if (p.graph)
      cudaGraphExecDestroy(p.graph);
    for (void *t : p.groupTables)
      cudaFree(t);
    cudaFree(p.inputBlock);
    cudaFree(p.constBlock);
    for (int k = 0; k < 2; ++k) {
      cudaFreeHost(p.stage[k]);
      if (p.staged[k])
        cudaEventDestroy(p.staged[k]);
    }
  }
  matmuls.clear();
  for (auto &[sid, ws] : workspaces)
    cudaFree(ws);
  cudaFree(table);
  for (cudaLibrary_t l : libraries)
    cudaLibraryUnload(l);
}

Status DeviceExecutor::Impl::addDeviceOnly(const DeviceFunction &fn) {
  std::vector<std::pair<Parameter, uint64_t>> added; // entry, offset in the block
  uint64_t bytes = 0;
  for (const DeviceBuffer &b : fn.buffers) {
    if (b.space != DeviceBuffer::Space::Param || b.offset != 0 || entries.count(b.name))
      continue;
    bool dup = false;
    for (auto &a : added)
      dup |= a.first.name == b.name;
    if (dup)
      continue;
    Parameter q;
    q.name = b.name;
    q.type = b.type;
    q.hasData = false;
    q.kind = ParamKind::OptimizerState; // not a model entry: never in checkpoints
    q.init = ParamInit::Zeros;
    added.push_back({q, bytes});
    bytes += alignUp(static_cast<uint64_t>(storageBytes(q.type)), kParamAlignment);
  }
  if (added.empty())
    return Status::ok();
  void *block = nullptr;
  TC_RETURN_IF_ERROR(cudaStatus(cudaMalloc(&block, bytes), "cudaMalloc(persistent gradients of @" +
                                                               fn.name + ")"));
  deviceOnlyBlocks.push_back(block);
  deviceOnlyBytes += bytes;
  TC_CUDA_RETURN_IF_ERROR(cudaMemset(block, 0, bytes));
  for (auto &[q, offset] : added) {
    deviceOnly.push_back(q);
    Entry e;
    e.param = &deviceOnly.back();
    e.offset = offset;
    e.bytes = static_cast<uint64_t>(storageBytes(q.type));
    e.block = block;
    e.set = true;
    entries.emplace(q.name, e);
  }
  // The weights' 16-bit copies (kShadowPrefix) start as their weights cast.
  for (auto &[q, offset] : added) {
    std::string source(shadowSourceOf(q.name));
    if (source.empty())
      continue;
    auto it = entries.find(source);
    if (it == entries.end() || it->second.param->type.dtype != DType::F32 ||
        it->second.param->type.numElements() != q.type.numElements())
      return invalidArgument("@" + fn.name + " reads '" + q.name + "', the " +
                             typeToString(q.type) + " copy of an f32 entry '" + source +
                             "' of as many elements, which the artifact does not have");
    shadows[source].push_back(q.name);
    TC_RETURN_IF_ERROR(refreshShadow(q.name, source));
  }
  TC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream(0)));
  return Status::ok();
}

Status DeviceExecutor::Impl::refreshShadow(const std::string &shadow, const std::string &source) {
  const Entry &s = entries.at(shadow), &p = entries.at(source);
  return castBuffer(DType::F32, static_cast<const char *>(p.block) + p.offset, s.param->type.dtype,
                    static_cast<char *>(s.block) + s.offset, s.param->type.numElements(),
                    stream(0));
}

Status DeviceExecutor::Impl::prepare(const std::string &name, Prepared **out) {
  const DeviceFunction *fn = artifact->findDeviceFunction(name);
  if (!fn)
    return notFound("the artifact has no device function '" + name + "'");
  auto it = prepared.find(fn->name); // keyed by the function, not the alias asked for
  if (it != prepared.end()) {
    if (it->second.arenaBase != arena.base())
      TC_RETURN_IF_ERROR(resolve(it->second));
    *out = &it->second;
    return Status::ok();
  }
  std::vector<std::string> missing;
  for (const DeviceOp &op : fn->ops)
    if (op.kind == "launch" && op.attrs.count("missing_kernel"))
      missing.push_back(op.name);
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 5; ++i)
      list += (i ? ", " : "") + missing[i];
    return unimplemented("@" + name + " cannot run on the GPU: the compiler generated no CUDA "
                         "kernel for " + std::to_string(missing.size()) + " op(s) (" + list + ")");
  }
  TC_RETURN_IF_ERROR(addDeviceOnly(*fn));
  Prepared p;
  p.fn = fn;
  // Argument block: each argument (its largest view's extent) at 16-byte
  // alignment.
  std::vector<uint64_t> argBytes(fn->inputNames.size(), 0);
  for (const DeviceBuffer &b : fn->buffers)
    if (b.space == DeviceBuffer::Space::Input) {
      if (b.index < 0 || static_cast<size_t>(b.index) >= argBytes.size())
        return invalidArgument("@" + name + ": a buffer names argument #" +
                               std::to_string(b.index) + " of " +
                               std::to_string(argBytes.size()));
      argBytes[b.index] = std::max<uint64_t>(argBytes[b.index], b.offset + b.bytes);
    }
  uint64_t inputBytes = 0;
  for (uint64_t size : argBytes) {
    p.inputOffsets.push_back(inputBytes);
    inputBytes += alignUp(size, kParamAlignment);
  }
  p.argBytes = argBytes;
  p.inputBytes = inputBytes;
  if (inputBytes)
    TC_RETURN_IF_ERROR(cudaStatus(cudaMalloc(&p.inputBlock, inputBytes),
                                  "cudaMalloc(arguments of @" + name + ")"));
  uint64_t constBytes = 0;
  for (const HostTensor &c : fn->consts) {
    p.constOffsets.push_back(constBytes);
    constBytes += alignArena(c.data.size());
  }
  p.constBytes = constBytes;
  if (constBytes) {
    TC_RETURN_IF_ERROR(cudaStatus(cudaMalloc(&p.constBlock, constBytes),
                                  "cudaMalloc(constants of @" + name + ")"));
    for (size_t i = 0; i < fn->consts.size(); ++i)
      if (!fn->consts[i].data.empty())
        TC_CUDA_RETURN_IF_ERROR(cudaMemcpy(static_cast<char *>(p.constBlock) + p.constOffsets[i],
                                           fn->consts[i].data.data(), fn->consts[i].data.size(),
                                           cudaMemcpyHostToDevice));
  }
  if (arena.size() < fn->arenaBytes) {
    // One arena for every function: grow it (the old one is freed first).
    arena.reset();
    TC_RETURN_IF_ERROR(DeviceArena::create(fn->arenaBytes, &arena));
    for (auto &[n, other] : prepared)
      other.arenaBase = nullptr; // re-resolve on next use
  }
  ++epoch;
  auto [slot, inserted] = prepared.emplace(fn->name, std::move(p));
  Prepared &q = slot->second;
  Status st = resolve(q);
  if (!st.isOk()) {
    cudaFree(q.inputBlock);
    cudaFree(q.constBlock);
    prepared.erase(slot);
    return st;
  }
  *out = &q;
  return Status::ok();
}

namespace {
/// Whether any device op of the artifact may run on cuDNN (cudnn/loader.h):
/// an attention forward or a GEMM with the tanh GELU + aux epilogue.
bool mayUseCudnn(const Artifact &a) {
  for (const DeviceFunction &f : a.deviceFunctions)
    for (const DeviceOp &op : f.ops) {
      if (op.kind == "library" && op.name == "attention_fwd")
        return true;
      auto epi = op.attrs.find("epilogue");
      if (op.kind == "matmul" && epi != op.attrs.end() && epi->second.kind == Attr::Kind::String &&
          (epi->second.s == "gelu_aux" || epi->second.s == "bias_gelu_aux"))
        return true;
    }
  return false;
}
} // namespace

DeviceExecutor::DeviceExecutor() : impl_(std::make_unique<Impl>()) {}
DeviceExecutor::~DeviceExecutor() = default;

Status DeviceExecutor::create(const Artifact *artifact, const ExecutorOptions &opts,
                              std::unique_ptr<DeviceExecutor> *out) {
  TC_RETURN_IF_ERROR(requireGpu());
  TC_RETURN_IF_ERROR(selectDevice(opts.device));
  std::unique_ptr<DeviceExecutor> ex(new DeviceExecutor());
  // cuDNN's plugin (cudnn/loader.h) opens before the card's memory is read,
  // so that its handle counts with the CUDA context, as cuBLASLt's does.
  if (mayUseCudnn(*artifact))
    ex->cudnnStatus_ = cudnnStatusLine();
  TC_RETURN_IF_ERROR(memInfo(&ex->freeAtCreate_, &ex->cardTotal_));
  Impl &im = *ex->impl_;
  im.artifact = artifact;
  im.opts = opts;
  im.profile = opts.profile;
  setMatmulTuning(opts.matmulTune);
  TC_RETURN_IF_ERROR(queryDevice(opts.device, &ex->info_));
  if (opts.matmulTune && !opts.matmulTuneDir.empty()) {
    std::string identity = Matmul::tuningIdentity(ex->info_);
    im.tuningRecord = std::make_shared<TuningRecord>(
        opts.matmulTuneDir + "/matmul/" + TuningRecord::fileNameOf(identity) + ".tsv", identity);
  }
  if (artifact->deviceFunctions.empty())
    return invalidArgument("the artifact was compiled for '" + artifact->target +
                           "' and has no GPU program: compile it with --target " +
                           ex->info_.smName());
  // The cubins must be for this GPU's architecture (sm_90 runs on H100/H200,
  // sm_120a on RTX 50xx); PTX of another family does not JIT across.
  std::string sm = ex->info_.smName();
  for (const KernelBinary &k : artifact->kernels) {
    std::string arch = k.arch;
    if (!arch.empty() && arch.back() == 'a')
      arch.pop_back();
    if (arch != sm)
      return invalidArgument("the artifact's kernels are compiled for " + k.arch + " but GPU " +
                             std::to_string(opts.device) + " is " + ex->info_.toString() +
                             ": recompile with tc-compile --target " + sm);
  }
  TC_RETURN_IF_ERROR(im.ensureStreams(1));
  for (const KernelBinary &k : artifact->kernels) {
    if (im.kernels.count(k.name))
      continue;
    if (k.cubin.empty())
      return invalidArgument("kernel '" + k.name + "' has no cubin in the artifact");
    cudaLibrary_t lib = nullptr;
    TC_RETURN_IF_ERROR(cudaStatus(
        cudaLibraryLoadData(&lib, k.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
        "cudaLibraryLoadData(" + k.name + ")"));
    im.libraries.push_back(lib);
    cudaKernel_t kern = nullptr;
    TC_RETURN_IF_ERROR(cudaStatus(cudaLibraryGetKernel(&kern, lib, k.name.c_str()),
                                  "cudaLibraryGetKernel(" + k.name + ")"));
    im.kernels[k.name] = kern;
    // The grouped entry point, when the generated source defines one: looked
    // up only then, so that no CUDA call fails on purpose (compute-sanitizer
    // reports every failing API call).
    if (k.source.find(" " + k.name + "_group(") != std::string::npos) {
      cudaKernel_t group = nullptr;
      TC_RETURN_IF_ERROR(cudaStatus(cudaLibraryGetKernel(&group, lib, (k.name + "_group").c_str()),
                                    "cudaLibraryGetKernel(" + k.name + "_group)"));
      im.groupKernels[k.name] = group;
      // A grouped entry whose items keep state in module memory (the split
      // reductions' partial slots) says how many blocks a launch may span.
      std::string::size_type at = k.source.find("// tc:group_max_blocks ");
      if (at != std::string::npos)
        im.groupMaxBlocks[k.name] =
            std::strtoll(k.source.c_str() + at + std::strlen("// tc:group_max_blocks "), nullptr, 10);
    }
  }
  // The parameter/state table.
  uint64_t bytes = 0;
  for (const Parameter &p : artifact->params) {
    Entry e;
    e.param = &p;
    e.offset = bytes;
    e.bytes = static_cast<uint64_t>(storageBytes(p.type));
    if (p.hasData && p.bytes != e.bytes)
      return dataLoss("parameter '" + p.name + "' is " + typeToString(p.type) + " (" +
                      std::to_string(e.bytes) + " bytes) but has " + std::to_string(p.bytes) +
                      " bytes of data");
    bytes += alignUp(e.bytes, kParamAlignment);
    if (!im.entries.emplace(p.name, e).second)
      return invalidArgument("the artifact lists parameter '" + p.name + "' twice");
  }
  if (bytes)
    TC_RETURN_IF_ERROR(
        cudaStatus(cudaMalloc(&im.table, bytes), "cudaMalloc(parameter table, " +
                                                     std::to_string(bytes) + " bytes)"));
  im.tableBytes = bytes;
  ex->mem_.parameters = bytes;
  for (auto &[name, e] : im.entries) {
    const Parameter &p = *e.param;
    e.block = im.table;
    void *dst = static_cast<char *>(im.table) + e.offset;
    if (p.init == ParamInit::Zeros) {
      TC_CUDA_RETURN_IF_ERROR(cudaMemset(dst, 0, e.bytes));
      e.set = true;
    } else if (p.init != ParamInit::Data) {
      TC_RETURN_IF_ERROR(initParameterDevice(p, opts.seed, dst, im.stream(0)));
      e.set = true;
    } else if (p.hasData) {
      if (p.offset > artifact->weights.size() || p.bytes > artifact->weights.size() - p.offset)
        return dataLoss("parameter '" + p.name + "' lies outside the artifact's weights");
      TC_CUDA_RETURN_IF_ERROR(
          cudaMemcpy(dst, artifact->weights.data() + p.offset, p.bytes, cudaMemcpyHostToDevice));
      e.set = true;
    }
  }
  TC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  *out = std::move(ex);
  return Status::ok();
}

ExecutorOptions executorOptions(int device, uint64_t seed, const CudaOptions &cuda) {
  ExecutorOptions o;
  o.device = device;
  o.seed = seed;
  o.graphs = cuda.graphs;
  o.checkEachOp = cuda.checkEachOp;
  o.profile = cuda.profile;
  o.matmulTune = cuda.matmulTune;
  o.matmulTuneDir = cuda.matmulTuneDir;
  o.pipeline = cuda.pipeline;
  return o;
}

bool DeviceExecutor::hasFunction(const std::string &name) const { return function(name); }

const std::vector<std::string> *DeviceExecutor::outputNames(const std::string &name) const {
  const DeviceFunction *fn = function(name);
  return fn ? &fn->outputNames : nullptr;
}

Status DeviceExecutor::entryType(const std::string &name, TensorType *out) const {
  auto it = impl_->entries.find(name);
  if (it == impl_->entries.end())
    return notFound("no parameter or state entry '" + name + "'");
  *out = it->second.param->type;
  return Status::ok();
}

DeviceMemoryReport DeviceExecutor::memory() const {
  DeviceMemoryReport r;
  r.device = deviceName();
  r.parameters = mem_.parameters;
  r.constants = mem_.constants;
  r.inputs = mem_.inputs;
  r.workspace = mem_.workspace;
  r.arena = mem_.arena;
  r.total = mem_.total();
  size_t freeNow = 0, total = 0;
  if (memInfo(&freeNow, &total).isOk())
    r.measured = static_cast<int64_t>(freeAtCreate_) - static_cast<int64_t>(freeNow);
  r.cardTotal = static_cast<int64_t>(cardTotal_);
  r.inUseBefore = static_cast<int64_t>(cardTotal_) - static_cast<int64_t>(freeAtCreate_);
  return r;
}

const DeviceFunction *DeviceExecutor::function(const std::string &name) const {
  return impl_->artifact->findDeviceFunction(name);
}

Status DeviceExecutor::prepare(const std::string &name) {
  impl_->finishSubmitted();
  Prepared *p = nullptr;
  TC_RETURN_IF_ERROR(impl_->prepare(name, &p));
  if (memEpoch_ == impl_->epoch)
    return Status::ok();
  memEpoch_ = impl_->epoch;
  mem_.parameters = impl_->tableBytes + impl_->deviceOnlyBytes;
  mem_.arena = impl_->arena.size();
  mem_.workspace = impl_->matmuls.size() * Matmul::kDefaultWorkspaceBytes;
  uint64_t inputs = 0, consts = 0;
  for (auto &[n, q] : impl_->prepared) {
    inputs += q.inputBytes + q.groupBytes; // arguments and grouped-launch tables
    consts += q.constBytes;
  }
  mem_.inputs = inputs;
  mem_.constants = consts;
  return Status::ok();
}

Status DeviceExecutor::setEntry(const std::string &name, const HostTensor &value) {
  impl_->finishSubmitted();
  auto it = impl_->entries.find(name);
  if (it == impl_->entries.end())
    return notFound("no parameter or state entry '" + name + "'");
  const Parameter &p = *it->second.param;
  std::string_view source = shadowSourceOf(name);
  if (!source.empty() && !impl_->artifact->findParam(name))
    return invalidArgument("entry '" + name + "' is the copy of '" + std::string(source) +
                           "' the executor keeps equal to it cast: set that entry instead");
  if (value.type != p.type)
    return invalidArgument("entry '" + name + "' is " + typeToString(p.type) + ", got " +
                           typeToString(value.type));
  void *dst = static_cast<char *>(it->second.block) + it->second.offset;
  TC_RETURN_IF_ERROR(copyToDevice(value, dst, it->second.bytes, impl_->stream(0)));
  // Its 16-bit copies follow it.
  auto sh = impl_->shadows.find(name);
  if (sh != impl_->shadows.end())
    for (const std::string &s : sh->second)
      TC_RETURN_IF_ERROR(impl_->refreshShadow(s, name));
  TC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl_->stream(0)));
  it->second.set = true;
  return Status::ok();
}

Status DeviceExecutor::getEntry(const std::string &name, HostTensor *out) {
  impl_->finishSubmitted();
  auto it = impl_->entries.find(name);
  if (it == impl_->entries.end())
    return notFound("no parameter or state entry '" + name + "'");
  const void *src = static_cast<char *>(it->second.block) + it->second.offset;
  return copyToHost(src, it->second.param->type, out, impl_->stream(0));
}

std::vector<std::string> DeviceExecutor::unsetEntries() const {
  std::vector<std::string> out;
  for (auto &[name, e] : impl_->entries)
    if (!e.set)
      out.push_back(name);
  return out;
}

} // namespace tc::rt::cuda
