//===- executor.cpp - runs an artifact's device program on a GPU ----------===//
//
// See executor.h. Each device function is "prepared" once: every buffer is
// resolved to a device pointer and every op becomes a closure holding its
// arguments, so a step is a loop of launches (or one graph launch).
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/executor.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <set>

#include "runtime/src/base/host_tensor.h"
#include "runtime/src/cuda/cublaslt.h"
#include "runtime/src/cuda/kernels/kernels.h"
#include "runtime/src/cuda/library_calls.h"
#include "runtime/src/cuda/op_attrs.h"

namespace tc::rt::cuda {
namespace {

constexpr uint64_t kParamAlignment = 16;

uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/// A generated kernel's launch arguments, as DeviceProgram writes them.
struct LaunchAttrs {
  int64_t n = 0, grid = 0, block = 0;
  std::vector<long long> meta;
};

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

} // namespace

/// One parameter/state entry on the device.
struct Entry {
  const Parameter *param = nullptr;
  uint64_t offset = 0; // into `block`
  void *block = nullptr; // the table allocation, or a device-only block
  uint64_t bytes = 0;  // storage bytes of its type (Parameter::bytes is 0 without data)
  bool set = false;
};

/// A prepared device function.
struct Prepared {
  const DeviceFunction *fn = nullptr;
  void *inputBlock = nullptr;
  std::vector<uint64_t> inputOffsets;
  std::vector<uint64_t> argBytes; // per argument: its bytes (0: nothing reads it)
  void *constBlock = nullptr;
  std::vector<uint64_t> constOffsets;
  uint64_t inputBytes = 0, constBytes = 0; // the two blocks' sizes
  std::vector<std::function<Status()>> ops;
  std::vector<std::string> opNames; // for errors
  std::vector<std::string> profileNames;
  std::set<std::string> paramsRead;
  bool capturable = true;
  void *arenaBase = nullptr; // the arena the closures point into
  uint64_t runs = 0;
  cudaGraphExec_t graph = nullptr;
  std::vector<void *> groupTables; // device item tables of grouped launches
  uint64_t groupBytes = 0;
};

struct DeviceExecutor::Impl {
  const Artifact *artifact = nullptr;
  ExecutorOptions opts;
  std::vector<cudaLibrary_t> libraries;
  std::map<std::string, cudaKernel_t> kernels;
  std::map<std::string, cudaKernel_t> groupKernels; // NAME -> NAME_group
  void *table = nullptr;
  uint64_t tableBytes = 0;
  std::map<std::string, Entry> entries;
  // Persistent buffers the device program names but the parameter table does
  // not hold: grad_step's "grad:<p>" gradients (kept for apply_step), in one
  // zeroed block allocated when the first function that names them is prepared.
  std::deque<Parameter> deviceOnly;
  std::vector<void *> deviceOnlyBlocks;
  uint64_t deviceOnlyBytes = 0;
  Status addDeviceOnly(const DeviceFunction &fn);
  DeviceArena arena;
  std::unique_ptr<Matmul> matmul;
  void *workspace = nullptr;
  std::deque<Stream> streams;
  std::map<std::string, Prepared> prepared;
  uint64_t epoch = 0; // bumped when a function is prepared or the arena grows
  std::deque<Event> events; // deque: closures hold pointers to them
  // ExecutorOptions::profile (tc-run: TC_CUDA_PROFILE=1): per-op GPU time
  // (events around every op, no graphs), summed by op name over every run but
  // the first and printed to stderr at the end.
  bool profile = false;
  std::vector<cudaEvent_t> marks;
  struct OpTime {
    double ms = 0;
    int64_t calls = 0;
  };
  std::map<std::string, OpTime> opTimes;
  double profiledMs = 0;

  ~Impl() {
    if (profile && !opTimes.empty()) {
      std::vector<std::pair<double, std::string>> order;
      for (auto &[n, t] : opTimes)
        order.push_back({t.ms, n});
      std::sort(order.rbegin(), order.rend());
      std::fprintf(stderr, "tc profile: %.1f ms of GPU time in ops; by op (ms, share, calls):\n",
                   profiledMs);
      for (size_t i = 0; i < order.size() && i < 40; ++i) {
        const OpTime &t = opTimes[order[i].second];
        std::fprintf(stderr, "  %10.2f  %5.1f%%  %6lld  %s\n", t.ms,
                     100.0 * t.ms / std::max(profiledMs, 1e-9), (long long)t.calls,
                     order[i].second.c_str());
      }
    }
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
    }
    matmul.reset();
    cudaFree(workspace);
    cudaFree(table);
    for (cudaLibrary_t l : libraries)
      cudaLibraryUnload(l);
  }

  cudaStream_t stream(int64_t id) { return streams.at(static_cast<size_t>(id)).get(); }

  /// Grows `pool` (streams or events) to `count` created handles.
  template <class Handle> static Status growTo(std::deque<Handle> &pool, int64_t count) {
    while (static_cast<int64_t>(pool.size()) < count) {
      Handle h;
      TC_RETURN_IF_ERROR(Handle::create(&h));
      pool.push_back(std::move(h));
    }
    return Status::ok();
  }
  Status ensureStreams(int64_t count) { return growTo(streams, count); }
  Status ensureEvents(int64_t count) { return growTo(events, count); }

  Status pointer(Prepared &p, int32_t index, void **out, const std::string &where) {
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

  Status buildOp(Prepared &p, const DeviceOp &op, size_t index);
  Status buildLaunch(Prepared &p, const DeviceOp &op, const std::string &where,
                     const std::vector<void *> &ins, const std::vector<void *> &outs,
                     cudaStream_t s);
  Status buildLibrary(Prepared &p, const DeviceOp &op, const std::string &where,
                      const std::vector<void *> &ins, const std::vector<void *> &outs,
                      cudaStream_t s);
  Status buildMatmul(Prepared &p, const DeviceOp &op, const std::string &where,
                     const std::vector<void *> &ins, const std::vector<void *> &outs,
                     cudaStream_t s);
  Status prepare(const std::string &name, Prepared **out);
  Status resolve(Prepared &p);
  Status findGroup(Prepared &p, size_t first, size_t *end);
  Status buildGroup(Prepared &p, size_t first, size_t end);
};

namespace {
const TensorType &bufType(const Prepared &p, int32_t index) {
  return p.fn->buffers[static_cast<size_t>(index)].type;
}

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

Status DeviceExecutor::Impl::buildMatmul(Prepared &p, const DeviceOp &op, const std::string &where,
                                         const std::vector<void *> &ins,
                                         const std::vector<void *> &outs, cudaStream_t s) {
  OpAttrs a{op, where};
  if (ins.size() < 2 || ins.size() > 3 || outs.size() != 1)
    return invalidArgument(where + ": matmul takes lhs, rhs[, bias] and one output");
  if (!matmul) {
    TC_RETURN_IF_ERROR(cudaStatus(cudaMalloc(&workspace, Matmul::kDefaultWorkspaceBytes),
                                  "cudaMalloc(cuBLASLt workspace)"));
    TC_RETURN_IF_ERROR(Matmul::create(&matmul, workspace, Matmul::kDefaultWorkspaceBytes));
  }
  MatmulDesc d;
  d.dtype = bufType(p, op.outs[0]).dtype;
  TC_RETURN_IF_ERROR(checkGpuDtype(where, d.dtype));
  std::string compute = a.stringOr("compute_type", "f32");
  d.tf32 = compute == "tf32";
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
  std::string epi = a.stringOr("epilogue", "none");
  if (epi == "none")
    d.epilogue = MatmulEpilogue::None;
  else if (epi == "bias")
    d.epilogue = MatmulEpilogue::Bias;
  else if (epi == "gelu")
    d.epilogue = MatmulEpilogue::Gelu;
  else if (epi == "bias_gelu")
    d.epilogue = MatmulEpilogue::BiasGelu;
  else
    return invalidArgument(where + ": unknown matmul epilogue '" + epi + "'");
  bool biasEpi = d.epilogue == MatmulEpilogue::Bias || d.epilogue == MatmulEpilogue::BiasGelu;
  if (biasEpi != (ins.size() == 3))
    return invalidArgument(where + ": epilogue '" + epi + "' with " + std::to_string(ins.size()) +
                           " inputs");
  p.profileNames.back() = "matmul " + d.toString();
  const void *lhs = ins[0], *rhs = ins[1];
  const void *bias = ins.size() == 3 ? ins[2] : nullptr;
  void *out = outs[0];
  Matmul *mm = matmul.get();
  std::vector<int64_t> lb, rb;
  if (a.ints("lhs_batch", &lb) && a.ints("rhs_batch", &rb)) {
    p.ops.push_back([=]() { return mm->runBroadcast(d, lb, rb, lhs, rhs, out, s, bias); });
    return Status::ok();
  }
  p.ops.push_back([=]() { return mm->run(d, lhs, rhs, out, s, bias); });
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
  if (sid != 0)
    p.capturable = false; // graph capture of forked streams is not wired up
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

/// The run of launches [first, *end) that one grouped launch can replace:
/// the same generated kernel with a NAME_group entry point, the same meta
/// and block size, and no op reading or writing what an earlier one writes
/// (or writing what an earlier one reads): the AdamW/SGD update of every
/// parameter, one launch instead of one per parameter.
Status DeviceExecutor::Impl::findGroup(Prepared &p, size_t first, size_t *end) {
  *end = first + 1;
  const std::vector<DeviceOp> &ops = p.fn->ops;
  const DeviceOp &head = ops[first];
  if (head.kind != "launch" || head.attrs.count("missing_kernel") || !groupKernels.count(head.name) ||
      head.attrs.count("stream"))
    return Status::ok();
  auto attr = [](const DeviceOp &op, const char *n) -> const Attr * {
    auto it = op.attrs.find(n);
    return it == op.attrs.end() ? nullptr : &it->second;
  };
  auto same = [&](const DeviceOp &op, const char *n) {
    const Attr *a = attr(head, n), *b = attr(op, n);
    return (!a && !b) || (a && b && a->kind == b->kind && a->i == b->i && a->ints == b->ints);
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
  TC_RETURN_IF_ERROR(ranges(head.ins, &reads));
  TC_RETURN_IF_ERROR(ranges(head.outs, &writes));
  size_t j = first + 1;
  for (; j < ops.size(); ++j) {
    const DeviceOp &op = ops[j];
    if (op.kind != "launch" || op.name != head.name || op.attrs.count("missing_kernel") ||
        !same(op, "meta") || !same(op, "block") || op.attrs.count("stream"))
      break;
    std::vector<Range> r, w;
    TC_RETURN_IF_ERROR(ranges(op.ins, &r));
    TC_RETURN_IF_ERROR(ranges(op.outs, &w));
    if (overlaps(r, writes) || overlaps(w, writes) || overlaps(w, reads))
      break;
    reads.insert(reads.end(), r.begin(), r.end());
    writes.insert(writes.end(), w.begin(), w.end());
  }
  *end = j;
  return Status::ok();
}

Status DeviceExecutor::Impl::buildGroup(Prepared &p, size_t first, size_t end) {
  const std::vector<DeviceOp> &ops = p.fn->ops;
  const DeviceOp &head = ops[first];
  std::string where = "@" + p.fn->name + " ops " + std::to_string(first) + ".." +
                      std::to_string(end - 1) + " (grouped launch " + head.name + ")";
  LaunchAttrs head_;
  TC_RETURN_IF_ERROR(readLaunch(OpAttrs{head, where}, &head_));
  const size_t nptr = head.outs.size() + head.ins.size();
  // Item layout of the generated TcGroupItem_<nptr>: pointers, n, firstBlock, blocks.
  std::vector<int64_t> items;
  int64_t blocks = 0;
  for (size_t i = first; i < end; ++i) {
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
  args->count = static_cast<int>(end - first);
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
  p.profileNames.push_back("launch " + name + " (" + std::to_string(end - first) + " ops)");
  return Status::ok();
}

Status DeviceExecutor::Impl::resolve(Prepared &p) {
  if (p.graph) {
    cudaGraphExecDestroy(p.graph);
    p.graph = nullptr;
  }
  p.ops.clear();
  p.opNames.clear();
  p.profileNames.clear();
  p.paramsRead.clear();
  for (void *t : p.groupTables)
    cudaFree(t);
  p.groupTables.clear();
  p.groupBytes = 0;
  p.capturable = opts.graphs && !opts.checkEachOp && !profile;
  for (size_t i = 0; i < p.fn->ops.size();) {
    size_t end = i + 1;
    TC_RETURN_IF_ERROR(findGroup(p, i, &end));
    if (end - i >= 2)
      TC_RETURN_IF_ERROR(buildGroup(p, i, end));
    else
      TC_RETURN_IF_ERROR(buildOp(p, p.fn->ops[i], i));
    i = end;
  }
  p.arenaBase = arena.base();
  p.runs = 0;
  return Status::ok();
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
  return Status::ok();
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

DeviceExecutor::DeviceExecutor() : impl_(std::make_unique<Impl>()) {}
DeviceExecutor::~DeviceExecutor() = default;

Status DeviceExecutor::create(const Artifact *artifact, const ExecutorOptions &opts,
                              std::unique_ptr<DeviceExecutor> *out) {
  TC_RETURN_IF_ERROR(requireGpu());
  TC_RETURN_IF_ERROR(selectDevice(opts.device));
  std::unique_ptr<DeviceExecutor> ex(new DeviceExecutor());
  TC_RETURN_IF_ERROR(memInfo(&ex->freeAtCreate_, &ex->cardTotal_));
  Impl &im = *ex->impl_;
  im.artifact = artifact;
  im.opts = opts;
  im.profile = opts.profile;
  setMatmulTuning(opts.matmulTune);
  TC_RETURN_IF_ERROR(queryDevice(opts.device, &ex->info_));
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
  r.device = info_.toString();
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
  Prepared *p = nullptr;
  TC_RETURN_IF_ERROR(impl_->prepare(name, &p));
  if (memEpoch_ == impl_->epoch)
    return Status::ok();
  memEpoch_ = impl_->epoch;
  mem_.parameters = impl_->tableBytes + impl_->deviceOnlyBytes;
  mem_.arena = impl_->arena.size();
  mem_.workspace = impl_->matmul ? Matmul::kDefaultWorkspaceBytes : 0;
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
  auto it = impl_->entries.find(name);
  if (it == impl_->entries.end())
    return notFound("no parameter or state entry '" + name + "'");
  const Parameter &p = *it->second.param;
  if (value.type != p.type)
    return invalidArgument("entry '" + name + "' is " + typeToString(p.type) + ", got " +
                           typeToString(value.type));
  void *dst = static_cast<char *>(it->second.block) + it->second.offset;
  TC_RETURN_IF_ERROR(copyToDevice(value, dst, it->second.bytes, impl_->stream(0)));
  TC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl_->stream(0)));
  it->second.set = true;
  return Status::ok();
}

Status DeviceExecutor::getEntry(const std::string &name, HostTensor *out) {
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

Status DeviceExecutor::run(const std::string &name, const std::vector<HostTensor> &inputs,
                           std::vector<HostTensor> *outputs, const std::vector<bool> *want) {
  Impl &im = *impl_;
  TC_RETURN_IF_ERROR(prepare(name));
  Prepared *p = nullptr;
  TC_RETURN_IF_ERROR(im.prepare(name, &p)); // found: no work
  const DeviceFunction &fn = *p->fn;
  for (const std::string &e : p->paramsRead)
    if (!im.entries.at(e).set)
      return failedPrecondition("parameter '" + e +
                                "' has no value on the device (compiled with --no-weights and no "
                                "initialiser): give --init-params at compile time or --init FILE");
  if (inputs.size() != fn.inputNames.size())
    return invalidArgument("@" + name + " takes " + std::to_string(fn.inputNames.size()) +
                           " arguments, got " + std::to_string(inputs.size()));
  cudaStream_t s = im.stream(0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    uint64_t size = p->argBytes[i];
    if (size == 0)
      continue; // an argument nothing reads
    if (static_cast<uint64_t>(inputs[i].data.size()) != size)
      return invalidArgument("argument '" + fn.inputNames[i] + "' of @" + name + " must be " +
                             std::to_string(size) + " bytes, got " +
                             typeToString(inputs[i].type));
    TC_RETURN_IF_ERROR(copyToDevice(inputs[i],
                                    static_cast<char *>(p->inputBlock) + p->inputOffsets[i], size,
                                    s));
  }
  auto fail = [&](size_t i, const Status &st) {
    cudaStreamSynchronize(s);
    cudaGetLastError();
    return Status(st.code(), p->opNames[i] + ": " + st.message());
  };
  if (p->graph) {
    TC_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(p->graph, s));
  } else if (p->capturable && p->runs >= 1) {
    cudaGraph_t graph = nullptr;
    TC_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    Status st = Status::ok();
    size_t failed = 0;
    for (size_t i = 0; i < p->ops.size() && st.isOk(); ++i) {
      st = p->ops[i]();
      failed = i;
    }
    cudaError_t end = cudaStreamEndCapture(s, &graph);
    if (!st.isOk()) {
      if (graph)
        cudaGraphDestroy(graph);
      return fail(failed, st);
    }
    TC_CUDA_RETURN_IF_ERROR(end);
    cudaError_t inst = cudaGraphInstantiate(&p->graph, graph, 0);
    cudaGraphDestroy(graph);
    TC_CUDA_RETURN_IF_ERROR(inst);
    TC_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(p->graph, s));
  } else if (im.profile) {
    while (im.marks.size() < p->ops.size() + 1) {
      cudaEvent_t e = nullptr;
      TC_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
      im.marks.push_back(e);
    }
    TC_CUDA_RETURN_IF_ERROR(cudaEventRecord(im.marks[0], s));
    for (size_t i = 0; i < p->ops.size(); ++i) {
      Status st = p->ops[i]();
      if (!st.isOk())
        return fail(i, st);
      TC_CUDA_RETURN_IF_ERROR(cudaEventRecord(im.marks[i + 1], s));
    }
    TC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    // The first run creates and tunes the matmul plans: not counted.
    for (size_t i = 0; i < p->ops.size() && p->runs > 0; ++i) {
      float ms = 0;
      TC_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, im.marks[i], im.marks[i + 1]));
      Impl::OpTime &t = im.opTimes[p->profileNames[i]];
      t.ms += ms;
      ++t.calls;
      im.profiledMs += ms;
    }
  } else {
    for (size_t i = 0; i < p->ops.size(); ++i) {
      Status st = p->ops[i]();
      if (st.isOk() && im.opts.checkEachOp)
        st = cudaStatus(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      if (!st.isOk())
        return fail(i, st);
    }
  }
  ++p->runs;
  TC_RETURN_IF_ERROR(cudaStatus(cudaStreamSynchronize(s), "running @" + name));
  outputs->assign(fn.outputs.size(), HostTensor());
  for (size_t r = 0; r < fn.outputs.size(); ++r) {
    int32_t b = fn.outputs[r];
    if (b < 0 || static_cast<size_t>(b) >= fn.buffers.size())
      return invalidArgument("@" + name + " result #" + std::to_string(r) + " has no buffer");
    const TensorType &t = fn.buffers[b].type;
    if (want && (r >= want->size() || !(*want)[r])) {
      (*outputs)[r].type = t;
      continue;
    }
    void *src = nullptr;
    TC_RETURN_IF_ERROR(im.pointer(*p, b, &src, "@" + name + " result #" + std::to_string(r)));
    TC_RETURN_IF_ERROR(copyToHost(src, t, &(*outputs)[r], s));
  }
  return Status::ok();
}

} // namespace tc::rt::cuda
