//===- executor_run.cpp - one run of a device function --------------------===//
//
// DeviceExecutor::run: the arguments copied in, the closures launched one
// by one (checked after each with checkEachOp, timed with profile) or, from
// the second run of a capturable function, captured once into a CUDA graph
// and replayed; then the results copied out. The profile's report too.
// submit / collect: a replayed graph enqueued behind the previous one, its
// arguments staged in pinned memory and its results copied back behind it.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/executor_impl.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace tc::rt::cuda {

void DeviceExecutor::Impl::reportProfile() {
  if (!profile || opTimes.empty())
    return;
  std::vector<std::pair<double, std::string>> order;
  for (auto &[n, t] : opTimes)
    order.push_back({t.ms, n});
  std::sort(order.rbegin(), order.rend());
  std::fprintf(stderr, "tc profile: %.1f ms of GPU time in ops; by op (ms, share, calls):\n",
               profiledMs);
  for (size_t i = 0; i < order.size() && i < 120; ++i) {
    const OpTime &t = opTimes[order[i].second];
    std::fprintf(stderr, "  %10.2f  %5.1f%%  %6lld  %s\n", t.ms,
                 100.0 * t.ms / std::max(profiledMs, 1e-9), (long long)t.calls,
                 order[i].second.c_str());
  }
}

Status DeviceExecutor::runTraced(const std::string &name, const std::vector<HostTensor> &inputs,
                                 std::vector<HostTensor> *outputs, const std::set<int32_t> &keys,
                                 const TraceSink &sink) {
  Impl &im = *impl_;
  im.traceKeys = &keys;
  im.trace = &sink;
  Status st = run(name, inputs, outputs);
  im.traceKeys = nullptr;
  im.trace = nullptr;
  return st;
}

Status DeviceExecutor::run(const std::string &name, const std::vector<HostTensor> &inputs,
                           std::vector<HostTensor> *outputs, const std::vector<bool> *want) {
  Impl &im = *impl_;
  im.finishSubmitted();
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
    im.synchronizeAll();
    cudaGetLastError();
    return Status(st.code(), p->opNames[i] + ": " + st.message());
  };
  if (im.trace) {
    // Op by op: after the last closure of a device op, its traced outputs.
    size_t done = 0; // device ops whose outputs were handed out
    for (size_t i = 0; i < p->ops.size(); ++i) {
      Status st = p->ops[i]();
      if (st.isOk() && (i + 1 == p->ops.size() || p->opEnd[i + 1] != p->opEnd[i]))
        st = cudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      else
        continue;
      for (; st.isOk() && done < p->opEnd[i]; ++done)
        for (int32_t b : fn.ops[done].outs) {
          if (!im.traceKeys->count(b) || !st.isOk())
            continue;
          void *src = nullptr;
          HostTensor h;
          st = im.pointer(*p, b, &src, p->opNames[i]);
          if (st.isOk())
            st = copyToHost(src, fn.buffers[static_cast<size_t>(b)].type, &h, s);
          if (st.isOk())
            st = cudaStatus(cudaStreamSynchronize(s), "cudaStreamSynchronize");
          if (st.isOk())
            st = (*im.trace)(done, b, h);
        }
      if (!st.isOk())
        return fail(i, st);
    }
  } else if (p->graph) {
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
      if (st.isOk() && p->opStream[i] != 0) // its time falls between stream 0's marks
        st = cudaStatus(cudaStreamSynchronize(im.stream(p->opStream[i])), "cudaStreamSynchronize");
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
    // The first run (the matmuls' tuning times their candidates) and
    // checkEachOp run the streams one op at a time: an op on another
    // stream is waited for before the next op is enqueued.
    const bool serial = p->runs == 0 || im.opts.checkEachOp;
    for (size_t i = 0; i < p->ops.size(); ++i) {
      Status st = p->ops[i]();
      const int64_t sid = p->opStream[i];
      if (st.isOk() && ((serial && sid != 0) || im.opts.checkEachOp))
        st = cudaStatus(cudaStreamSynchronize(im.stream(sid)), "cudaStreamSynchronize");
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

void DeviceExecutor::Impl::finishSubmitted() {
  for (Submitted &r : submitted)
    if (r.slot >= 0)
      cudaEventSynchronize(r.p->staged[r.slot]); // its error is collect's
}

Prepared *DeviceExecutor::Impl::deferrable(const std::string &name) {
  // One graph launch on memory that stays put: a function prepared, captured
  // and not re-resolved since (the arena as it was), no tracing, profiling
  // or per-op checks.
  const DeviceFunction *fn = artifact->findDeviceFunction(name);
  auto it = fn ? prepared.find(fn->name) : prepared.end();
  if (!opts.pipeline || it == prepared.end() || profile || opts.checkEachOp)
    return nullptr;
  Prepared &p = it->second;
  return p.graph && p.arenaBase == arena.base() ? &p : nullptr;
}

bool DeviceExecutor::defers(const std::string &name) const {
  return impl_->deferrable(name) != nullptr;
}

Status DeviceExecutor::submit(const std::string &name, const std::vector<HostTensor> &inputs,
                              const std::vector<bool> *want, uint64_t *ticket) {
  Impl &im = *impl_;
  if (im.submitted.size() >= kMaxSubmitted)
    return failedPrecondition("submit of @" + name + ": " + std::to_string(kMaxSubmitted) +
                              " runs are submitted and not collected");
  Submitted r;
  r.ticket = ++tickets_;
  r.name = name;
  Prepared *p = im.deferrable(name);
  const DeviceFunction *fn = p ? p->fn : nullptr;
  bool defer = p && inputs.size() == fn->inputNames.size();
  for (size_t i = 0; defer && i < inputs.size(); ++i)
    defer = p->argBytes[i] == 0 || inputs[i].data.size() == p->argBytes[i];
  for (const std::string &e : defer ? p->paramsRead : std::set<std::string>())
    defer = defer && im.entries.at(e).set;
  if (defer && !p->stage[0]) {
    // The staging: the argument block, then every result (16-byte aligned).
    uint64_t at = (p->inputBytes + 15) / 16 * 16;
    p->resultOffsets.clear();
    for (int32_t b : fn->outputs) {
      p->resultOffsets.push_back(at);
      if (b >= 0 && static_cast<size_t>(b) < fn->buffers.size())
        at += (static_cast<uint64_t>(storageBytes(fn->buffers[b].type)) + 15) / 16 * 16;
    }
    p->stageBytes = std::max<uint64_t>(at, 16);
    for (int k = 0; k < 2; ++k) {
      TC_CUDA_RETURN_IF_ERROR(
          cudaMallocHost(reinterpret_cast<void **>(&p->stage[k]), p->stageBytes));
      std::memset(p->stage[k], 0, p->stageBytes);
      TC_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&p->staged[k], cudaEventDisableTiming));
    }
  }
  if (!defer) {
    r.status = run(name, inputs, &r.outputs, want);
    im.submitted.push_back(std::move(r));
    *ticket = im.submitted.back().ticket;
    return Status::ok();
  }
  r.p = p;
  r.slot = static_cast<int>(p->submits++ % 2);
  if (want) {
    r.hasWant = true;
    r.want = *want;
  }
  char *stage = p->stage[r.slot];
  // The results' device pointers first: nothing is enqueued for a run that
  // cannot hand out what it was asked for.
  struct Back {
    void *src;
    uint64_t offset, bytes;
  };
  std::vector<Back> back;
  for (size_t k = 0; k < fn->outputs.size(); ++k) {
    if (want && (k >= want->size() || !(*want)[k]))
      continue;
    int32_t b = fn->outputs[k];
    if (b < 0 || static_cast<size_t>(b) >= fn->buffers.size())
      return invalidArgument("@" + name + " result #" + std::to_string(k) + " has no buffer");
    Back c{nullptr, p->resultOffsets[k],
           static_cast<uint64_t>(storageBytes(fn->buffers[static_cast<size_t>(b)].type))};
    TC_RETURN_IF_ERROR(im.pointer(*p, b, &c.src, "@" + name + " result #" + std::to_string(k)));
    back.push_back(c);
  }
  // The slot's previous run was collected (at most two are submitted), so
  // its copies are done; wait anyway rather than overwrite them.
  TC_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(p->staged[r.slot]));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (p->argBytes[i] != 0)
      std::memcpy(stage + p->inputOffsets[i], inputs[i].data.data(), p->argBytes[i]);
  cudaStream_t s = im.stream(0);
  if (p->inputBytes != 0)
    TC_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(p->inputBlock, stage, p->inputBytes, cudaMemcpyHostToDevice, s));
  TC_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(p->graph, s));
  ++p->runs;
  for (const Back &c : back)
    if (c.bytes != 0)
      TC_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(stage + c.offset, c.src, c.bytes, cudaMemcpyDeviceToHost, s));
  TC_CUDA_RETURN_IF_ERROR(cudaEventRecord(p->staged[r.slot], s));
  *ticket = r.ticket;
  im.submitted.push_back(std::move(r));
  return Status::ok();
}

Status DeviceExecutor::collect(uint64_t ticket, std::vector<HostTensor> *outputs) {
  Impl &im = *impl_;
  if (im.submitted.empty() || im.submitted.front().ticket != ticket)
    return failedPrecondition(
        "collect of run " + std::to_string(ticket) + ": runs are collected in the order submitted" +
        (im.submitted.empty() ? std::string(" (none is submitted)")
                              : ", the oldest is " + std::to_string(im.submitted.front().ticket)));
  Submitted r = std::move(im.submitted.front());
  im.submitted.pop_front();
  if (r.slot < 0) {
    *outputs = std::move(r.outputs);
    return r.status;
  }
  const Prepared &p = *r.p;
  cudaError_t e = cudaEventSynchronize(p.staged[r.slot]);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return internalError("@" + r.name + " (a submitted run): " + cudaGetErrorString(e));
  }
  const DeviceFunction &fn = *p.fn;
  const char *stage = p.stage[r.slot];
  outputs->assign(fn.outputs.size(), HostTensor());
  for (size_t k = 0; k < fn.outputs.size(); ++k) {
    HostTensor &t = (*outputs)[k];
    t.type = fn.buffers[static_cast<size_t>(fn.outputs[k])].type;
    if (r.hasWant && (k >= r.want.size() || !r.want[k]))
      continue;
    t.data.assign(stage + p.resultOffsets[k],
                  stage + p.resultOffsets[k] + static_cast<size_t>(storageBytes(t.type)));
  }
  return Status::ok();
}

} // namespace tc::rt::cuda
