//===- executor.cpp - the CPU reference executor --------------------------===//
#include "runtime/src/cpu/executor.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <mutex>
#include <new>
#include <unistd.h>

#include "runtime/src/schema/artifact.h"
#include "runtime/src/base/float_format.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/base/init.h"
#include "runtime/src/cpu/kernel.h"

namespace tc::rt {

using cpu::Buffer;
using cpu::KernelContext;
using cpu::KernelError;
using cpu::KernelTable;

namespace {

/// Bytes of RAM of this machine (0 when unknown). A value that needs more
/// cannot be computed here: failing early beats the OOM killer.
uint64_t physicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(size) : 0;
}

const KernelTable &kernelTable() {
  static const KernelTable table = [] {
    KernelTable t;
    cpu::registerLeafKernels(t);
    cpu::registerElementwiseKernels(t);
    cpu::registerReduceKernels(t);
    cpu::registerNormKernels(t);
    cpu::registerAttentionKernels(t);
    cpu::registerRotaryKernels(t);
    cpu::registerQuantizeKernels(t);
    cpu::registerLossKernels(t);
    cpu::registerMatmulKernels(t);
    cpu::registerShapeKernels(t);
    cpu::registerGradKernels(t);
    return t;
  }();
  return table;
}

/// Rounds a freshly computed result to its declared type.
void roundToDeclared(Buffer &b, RefPrecision precision) {
  DType t = b.type.dtype;
  if (b.isFloat) {
    if (t == DType::F64 || (t == DType::F32 && precision == RefPrecision::F64))
      return;
    if (t == DType::F32) {
      for (double &v : b.f)
        v = static_cast<double>(static_cast<float>(v));
      return;
    }
    for (double &v : b.f)
      v = roundToFloatDType(v, t);
    return;
  }
  if (t == DType::I64 || t == DType::U64)
    return;
  for (int64_t &v : b.i)
    v = cpu::wrapInt(v, t);
}

std::string opWhere(const Function &fn, size_t k, const Op &op) {
  std::string s = "op '" + op.name + "' #" + std::to_string(k) + " in function '" +
                  fn.name + "'";
  if (!op.results.empty()) {
    s += " (result";
    for (int32_t r : op.results)
      s += " %" + std::to_string(r);
    s += ")";
  }
  return s;
}

} // namespace

bool isSupportedOp(const std::string &name) { return kernelTable().count(name) != 0; }

std::vector<std::string> supportedOps() {
  std::vector<std::string> names;
  for (const auto &kv : kernelTable())
    names.push_back(kv.first);
  std::sort(names.begin(), names.end());
  return names;
}

Status checkInputs(const Function &fn, const std::vector<HostTensor> &inputs,
                   bool acceptF64ForF32) {
  if (inputs.size() != fn.inputs.size()) {
    std::string names;
    for (const std::string &n : fn.inputNames)
      names += (names.empty() ? "" : ", ") + n;
    return invalidArgument("function '" + fn.name + "' takes " +
                           std::to_string(fn.inputs.size()) + " inputs (" + names +
                           "), got " + std::to_string(inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    int32_t id = fn.inputs[i];
    std::string name = i < fn.inputNames.size() ? fn.inputNames[i] : std::to_string(i);
    if (id < 0 || static_cast<size_t>(id) >= fn.values.size())
      return invalidArgument("function '" + fn.name + "': input '" + name +
                             "' has no type");
    const TensorType &want = fn.values[id];
    const HostTensor &got = inputs[i];
    bool widened = acceptF64ForF32 && want.dtype == DType::F32 &&
                   got.type.dtype == DType::F64 && got.type.shape == want.shape;
    if (got.type != want && !widened)
      return invalidArgument("input '" + name + "': expected " + typeToString(want) +
                             ", got " + typeToString(got.type));
    TC_RETURN_IF_ERROR(checkHostTensor(got, "input '" + name + "'"));
  }
  return Status::ok();
}

Status runFunction(const Artifact &artifact, const Function &fn,
                   const std::vector<HostTensor> &inputs,
                   std::vector<HostTensor> *outputs, const ExecOptions &opts,
                   const std::map<std::string, HostTensor> *overrides) {
  TC_RETURN_IF_ERROR(validateFunction(fn));
  const bool wide = opts.wideF32 && opts.precision == RefPrecision::F64;
  TC_RETURN_IF_ERROR(checkInputs(fn, inputs, wide));
  const KernelTable &table = kernelTable();
  for (const Op &op : fn.ops)
    if (!table.count(op.name))
      return unimplemented("unsupported op '" + op.name + "' in function '" +
                           fn.name + "'");
  static const uint64_t ram = physicalMemoryBytes();
  for (size_t v = 0; v < fn.values.size(); ++v) {
    // Every value is held as 8-byte doubles or int64s while computing.
    uint64_t bytes = static_cast<uint64_t>(fn.values[v].numElements()) * 8;
    if (ram && bytes > ram)
      return Status(StatusCode::ResourceExhausted,
                    "function '" + fn.name + "': value %" + std::to_string(v) + " (" +
                        typeToString(fn.values[v]) + ") needs " + std::to_string(bytes >> 20) +
                        " MiB, more than this machine's " + std::to_string(ram >> 20) +
                        " MiB of memory");
  }

  // Free every value after its last use (outputs live to the end).
  size_t nvalues = fn.values.size();
  std::vector<size_t> lastUse(nvalues, 0);
  std::vector<bool> keep(nvalues, false);
  for (size_t k = 0; k < fn.ops.size(); ++k)
    for (int32_t id : fn.ops[k].operands)
      lastUse[id] = k;
  for (int32_t id : fn.outputs)
    keep[id] = true;

  std::vector<std::unique_ptr<Buffer>> values(nvalues);
  try {
    for (size_t i = 0; i < inputs.size(); ++i) {
      values[fn.inputs[i]] = std::make_unique<Buffer>(
          cpu::decodeBuffer(inputs[i].type, inputs[i].data.data()));
      values[fn.inputs[i]]->type = fn.values[fn.inputs[i]]; // f64 fed as f32
    }

    for (size_t k = 0; k < fn.ops.size(); ++k) {
      const Op &op = fn.ops[k];
      KernelContext ctx(op, fn, artifact, opts, overrides);
      for (int32_t id : op.operands)
        ctx.in.push_back(values[id].get());
      for (int32_t id : op.results) {
        values[id] = std::make_unique<Buffer>(cpu::makeBuffer(fn.values[id]));
        ctx.out.push_back(values[id].get());
      }
      try {
        table.at(op.name)(ctx);
      } catch (const KernelError &e) {
        return Status(e.code, opWhere(fn, k, op) + ": " + e.message);
      }
      for (Buffer *b : ctx.out)
        roundToDeclared(*b, opts.precision);
      if (opts.trace)
        for (int32_t id : op.results)
          if (opts.traceKeys->count(id))
            TC_RETURN_IF_ERROR((*opts.trace)(k, id, cpu::encodeBuffer(*values[id])));
      for (int32_t id : op.operands)
        if (!keep[id] && lastUse[id] == k)
          values[id].reset();
      for (int32_t id : op.results)
        if (!keep[id] && lastUse[id] <= k)
          values[id].reset(); // never used
    }

    outputs->clear();
    for (int32_t id : fn.outputs) {
      if (wide && values[id]->type.dtype == DType::F32) {
        Buffer b = *values[id];
        b.type.dtype = DType::F64;
        outputs->push_back(cpu::encodeBuffer(b));
      } else {
        outputs->push_back(cpu::encodeBuffer(*values[id]));
      }
    }
  } catch (const std::bad_alloc &) {
    return Status(StatusCode::ResourceExhausted,
                  "out of memory running function '" + fn.name + "'");
  } catch (const std::exception &e) {
    return internalError("function '" + fn.name + "': " + e.what());
  }
  return Status::ok();
}

namespace {
/// "update:NAME" results of `fn`: the entries it updates.
bool updatesEntries(const Function &fn) {
  for (const std::string &n : fn.outputNames)
    if (n.compare(0, 7, "update:") == 0)
      return true;
  return false;
}
} // namespace

Status CpuExecutor::create(const Artifact *artifact, const ExecOptions &opts,
                           std::unique_ptr<CpuExecutor> *out) {
  std::unique_ptr<CpuExecutor> ex(new CpuExecutor());
  ex->artifact_ = artifact;
  ex->opts_ = opts;
  bool wide = opts.precision == RefPrecision::F64 && opts.wideF32;
  for (const Parameter &p : artifact->params) {
    HostTensor t;
    if (p.init == ParamInit::Data && !p.hasData) {
      t.type = p.type; // no value yet: setEntry (tc-run --init) may supply it
      ex->state_[p.name] = std::move(t);
      continue;
    }
    TC_RETURN_IF_ERROR(parameterValue(*artifact, p, opts.initSeed, &t));
    if (wide && t.type.dtype == DType::F32)
      t = makeHostTensor({DType::F64, t.type.shape}, hostTensorToDoubles(t));
    ex->state_[p.name] = std::move(t);
  }
  *out = std::move(ex);
  return Status::ok();
}

bool CpuExecutor::hasFunction(const std::string &name) const {
  return artifact_->findFunction(name) != nullptr;
}

const std::vector<std::string> *CpuExecutor::outputNames(const std::string &name) const {
  const Function *fn = artifact_->findFunction(name);
  return fn ? &fn->outputNames : nullptr;
}

Status CpuExecutor::run(const std::string &name, const std::vector<HostTensor> &inputs,
                        std::vector<HostTensor> *outputs, const std::vector<bool> *) {
  runSubmitted();
  return runWith(name, inputs, outputs, opts_);
}

Status CpuExecutor::runTraced(const std::string &name, const std::vector<HostTensor> &inputs,
                              std::vector<HostTensor> *outputs, const std::set<int32_t> &keys,
                              const TraceSink &sink) {
  runSubmitted();
  ExecOptions o = opts_;
  o.traceKeys = &keys;
  o.trace = &sink;
  return runWith(name, inputs, outputs, o);
}

Status CpuExecutor::runWith(const std::string &name, const std::vector<HostTensor> &inputs,
                            std::vector<HostTensor> *outputs, const ExecOptions &opts) {
  const Function *fn = artifact_->findFunction(name);
  if (!fn)
    return notFound("the artifact has no function '" + name + "'");
  if (!updatesEntries(*fn)) {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    return runFunction(*artifact_, *fn, inputs, outputs, opts, &state_);
  }
  std::unique_lock<std::shared_mutex> lock(mutex_);
  TC_RETURN_IF_ERROR(runFunction(*artifact_, *fn, inputs, outputs, opts, &state_));
  // The updates become the entries' values (and stay results, as they were).
  for (size_t i = 0; i < outputs->size(); ++i) {
    const std::string &n = fn->outputNames[i];
    if (n.compare(0, 7, "update:") != 0)
      continue;
    std::string entry = n.substr(7);
    auto it = state_.find(entry);
    if (it == state_.end())
      return dataLoss("function '" + fn->name + "' updates '" + entry +
                      "', which is not in the parameter/state table");
    if (it->second.type != (*outputs)[i].type)
      return internalError("update of '" + entry + "' is " + typeToString((*outputs)[i].type) +
                           ", the entry is " + typeToString(it->second.type));
    it->second = (*outputs)[i];
  }
  return Status::ok();
}

Status CpuExecutor::entryType(const std::string &name, TensorType *out) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  auto it = state_.find(name);
  if (it == state_.end())
    return notFound("no entry '" + name + "' in the parameter/state table");
  *out = it->second.type;
  return Status::ok();
}

Status CpuExecutor::getEntry(const std::string &name, HostTensor *out) {
  runSubmitted();
  std::shared_lock<std::shared_mutex> lock(mutex_);
  auto it = state_.find(name);
  if (it == state_.end())
    return notFound("no entry '" + name + "' in the parameter/state table");
  *out = it->second;
  return Status::ok();
}

Status CpuExecutor::setEntry(const std::string &name, const HostTensor &value) {
  runSubmitted();
  std::unique_lock<std::shared_mutex> lock(mutex_);
  auto it = state_.find(name);
  if (it == state_.end())
    return notFound("no entry '" + name + "' in the parameter/state table");
  if (it->second.type != value.type)
    return invalidArgument("entry '" + name + "' is " + typeToString(it->second.type) +
                           ", the new value is " + typeToString(value.type));
  it->second = value;
  return Status::ok();
}

} // namespace tc::rt
