//===- run_check.cpp - tc-run --check: the GPU against the CPU reference ---===//
//
// One step on the GPU and on the CPU reference from the same weights,
// optimizer state and inputs, and every value both programs hold compared
// as it is written: the first device op whose output is beyond tolerance is
// where the two part (with FP8/FP4 often where a loss starts to diverge).
//
// Which device buffer holds which reference value is the artifact's "check"
// report (compiler/DeviceProgram.h, checkReportJson): {"version": 1,
// "functions": {NAME: [[buffer, value, node], ...]}}. The error of a value
// is its relative L2 distance, ||gpu - cpu|| / ||cpu||, over the finite
// elements; a non-finite element that is not the same on both sides makes
// it infinite. Integers must be equal.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "runtime/src/base/json.h"
#include "runtime/src/cpu/executor.h"
#include "runtime/src/session/run_internal.h"

namespace tc::rt {

double checkTolerance(DType d) {
  switch (d) {
  case DType::F64:
  case DType::F32:
    return 1e-3;
  case DType::F16:
    return 1e-2;
  case DType::BF16:
    return 2e-2;
  case DType::F8E4M3FN:
  case DType::F8E5M2:
  case DType::F8E8M0FNU:
    return 2.5e-1;
  case DType::F4E2M1FN:
    return 3e-1;
  default:
    return 0; // integers and booleans: equal
  }
}

namespace {

/// The relative L2 distance of `got` from `want` (see the file comment).
double relativeError(const HostTensor &got, const HostTensor &want) {
  std::vector<double> g = hostTensorToDoubles(got), w = hostTensorToDoubles(want);
  if (g.size() != w.size())
    return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool fg = std::isfinite(g[i]), fw = std::isfinite(w[i]);
    if (!fg || !fw) {
      bool same = std::isnan(g[i]) ? std::isnan(w[i]) : g[i] == w[i];
      if (!same)
        return INFINITY;
      continue;
    }
    diff += (g[i] - w[i]) * (g[i] - w[i]);
    norm += w[i] * w[i];
  }
  if (diff == 0)
    return 0;
  return norm > 0 ? std::sqrt(diff / norm) : INFINITY;
}

struct Mapped {
  int64_t value = -1;
  std::string node;
};

Status readCheckMap(const Artifact &a, const std::string &fn, std::map<int32_t, Mapped> *out) {
  auto it = a.reports.find("check");
  if (it == a.reports.end())
    return failedPrecondition("the artifact has no check map (it was compiled by an older "
                              "tc-compile, or for the CPU): compile it again for the GPU");
  JsonValue j;
  TC_RETURN_IF_ERROR(parseJson(it->second, &j, "the artifact's check report"));
  const JsonValue *v = j.find("version");
  if (!v || !v->isNumber() || v->num != 1)
    return dataLoss("the artifact's check report has an unknown version");
  const JsonValue *fns = j.find("functions");
  const JsonValue *rows = fns ? fns->find(fn) : nullptr;
  if (!rows || !rows->isArray())
    return notFound("the artifact's check report has no function '" + fn + "'");
  for (const JsonValue &r : rows->array) {
    if (!r.isArray() || r.array.size() != 3 || !r.array[0].isNumber() ||
        !r.array[1].isNumber() || !r.array[2].isString())
      return dataLoss("the artifact's check report has a malformed row for '" + fn + "'");
    (*out)[static_cast<int32_t>(r.array[0].num)] = {static_cast<int64_t>(r.array[1].num),
                                                    r.array[2].str};
  }
  return Status::ok();
}

/// The largest distance in binades, |log2(got / want)|, between two
/// tensors of power-of-two scales (their signs and zeros equal): a
/// power-of-two scale moves by a whole binade when its block's amax crosses
/// a power of two, however little the amax moved, so a relative error says
/// nothing about it.
double binadeError(const HostTensor &got, const HostTensor &want) {
  std::vector<double> g = hostTensorToDoubles(got), w = hostTensorToDoubles(want);
  if (g.size() != w.size())
    return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i])))
      continue;
    if (!(g[i] > 0 && w[i] > 0) || !std::isfinite(g[i]) || !std::isfinite(w[i]))
      return INFINITY;
    worst = std::max(worst, std::fabs(std::log2(g[i] / w[i])));
  }
  return worst;
}

/// Whether value `v` is the power-of-two scale_inv of tc.quantize `op`
/// (pow2_scale, or E8M0 scales).
bool isPow2Scale(const Op *op, int64_t v, const TensorType &type) {
  if (!op || op->name != "tc.quantize" || op->results.size() != 2 || op->results[1] != v)
    return false;
  auto pow2 = op->attrs.find("pow2_scale");
  return type.dtype == DType::F8E8M0FNU || (pow2 != op->attrs.end() && pow2->second.i != 0);
}

/// How narrow a float type is (0: not a float): the step's tolerance is
/// that of its narrowest float buffer.
int narrowness(DType d) {
  switch (d) {
  case DType::F64: return 1;
  case DType::F32: return 2;
  case DType::F16: return 3;
  case DType::BF16: return 4;
  case DType::F8E4M3FN:
  case DType::F8E5M2:
  case DType::F8E8M0FNU: return 5;
  case DType::F4E2M1FN: return 6;
  default: return 0;
  }
}

std::string sci(double v) {
  if (std::isinf(v))
    return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

} // namespace

std::string CheckReport::text() const {
  std::string s = "check of @" + function + ": " + std::to_string(rows.size()) +
                  " values compared, GPU against the CPU reference (relative L2 error; "
                  "power-of-two scales in binades)\n";
  for (const CheckRow &r : rows) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "  #%-5lld ", static_cast<long long>(r.op));
    s += buf;
    s += r.beyond ? "BEYOND " : "ok     ";
    s += sci(r.error) + " (tolerance " + sci(r.tolerance) + ")  " + r.deviceOp + " <- " + r.refOp +
         (r.node.empty() ? "" : " (ONNX node '" + r.node + "')") + "  " + r.type + "\n";
  }
  if (first < 0) {
    s += "check: every value of @" + function + " is within tolerance\n";
  } else {
    const CheckRow &r = rows[static_cast<size_t>(first)];
    s += "check: " + std::to_string(beyond) + " of " + std::to_string(rows.size()) +
         " values beyond tolerance; the first is the output of device op #" +
         std::to_string(r.op) + " " + r.deviceOp + ", the reference's " + r.refOp +
         (r.node.empty() ? "" : " of ONNX node '" + r.node + "'") + " (" + r.type + "), error " +
         sci(r.error) + " > " + sci(r.tolerance) + "\n";
  }
  return s;
}

Status TrainRun::check(const CheckOptions &c, CheckReport *out, bool *userError) {
  *out = CheckReport();
  *userError = false;
  if (!trainer_.onDevice()) {
    *userError = true;
    return failedPrecondition("--check compares the GPU with the CPU reference: it runs on a "
                              "GPU (--device cuda, an artifact compiled for one)");
  }
  std::string name = c.function.empty()
                         ? (trainer_.config().gradAccum == 1 ? "train_step" : "grad_step")
                         : c.function;
  const Function *ref = artifact_->findFunction(name);
  const DeviceFunction *dev = artifact_->findDeviceFunction(name);
  if (!ref || !dev) {
    *userError = true;
    return notFound("the artifact has no function '" + name + "' on both the GPU and the CPU");
  }
  std::map<int32_t, Mapped> map;
  TC_RETURN_IF_ERROR(readCheckMap(*artifact_, dev->name, &map));

  // The first step's inputs, as step() makes them.
  std::vector<std::vector<HostTensor>> micro;
  TC_RETURN_IF_ERROR(nextMicroBatches(&micro, userError));
  std::vector<HostTensor> inputs = micro[0];
  if (name == "train_step") {
    double lr = learningRateAt(step_ + 1);
    inputs.push_back(trainer_.scalar(lr));
    inputs.push_back(trainer_.scalar(static_cast<double>(step_ + 1)));
  }
  if (inputs.size() != ref->inputs.size()) {
    *userError = true;
    return invalidArgument("--check runs @" + name + ", which takes " +
                           std::to_string(ref->inputs.size()) + " inputs; the run's data gives " +
                           std::to_string(inputs.size()));
  }

  // The CPU reference from the GPU's entries (weights and optimizer state).
  std::unique_ptr<CpuExecutor> cpu;
  TC_RETURN_IF_ERROR(CpuExecutor::create(artifact_, ExecOptions(), &cpu));
  for (const Parameter &p : artifact_->params) {
    HostTensor h;
    TC_RETURN_IF_ERROR(trainer_.getEntry(p.name, &h));
    TC_RETURN_IF_ERROR(cpu->setEntry(p.name, h));
  }

  // The reference op that makes each value.
  std::vector<const Op *> producer(ref->values.size(), nullptr);
  for (const Op &op : ref->ops)
    for (int32_t r : op.results)
      producer[static_cast<size_t>(r)] = &op;
  std::set<int32_t> values, buffers;
  for (const auto &[b, m] : map) {
    buffers.insert(b);
    values.insert(static_cast<int32_t>(m.value));
  }
  std::map<int32_t, HostTensor> want;
  std::vector<HostTensor> outputs;
  TC_RETURN_IF_ERROR(cpu->runTraced(name, inputs, &outputs, values,
                                    [&](size_t, int32_t id, const HostTensor &t) {
                                      want[id] = t;
                                      return Status::ok();
                                    }));
  // An f32 value computed from bf16 (or FP8) operands is only as close as
  // they are: every value gets at least the tolerance of the step's
  // narrowest float type.
  DType narrowest = DType::F32;
  for (const DeviceBuffer &b : dev->buffers)
    if (narrowness(b.type.dtype) > narrowness(narrowest))
      narrowest = b.type.dtype;
  // --fp4-qat quantises through tc.fake_quantize into bf16 buffers: a value
  // near an E2M1 rounding boundary may round the other way on the GPU, so
  // such a step's values are only as close as FP4 ones.
  for (const Op &op : ref->ops)
    if (op.name == "tc.fake_quantize")
      narrowest = DType::F4E2M1FN;
  double stepTolerance = checkTolerance(narrowest);
  out->function = name;
  TC_RETURN_IF_ERROR(trainer_.executor().runTraced(
      name, inputs, &outputs, buffers, [&](size_t op, int32_t b, const HostTensor &got) {
        const Mapped &m = map.at(b);
        auto w = want.find(static_cast<int32_t>(m.value));
        if (w == want.end())
          return Status::ok(); // the reference never computed it
        CheckRow r;
        r.op = static_cast<int64_t>(op);
        const DeviceOp &d = dev->ops[op];
        r.deviceOp = d.kind == "launch" || d.kind == "library" ? d.kind + " " + d.name : d.kind;
        const Op *made = m.value >= 0 && static_cast<size_t>(m.value) < producer.size()
                             ? producer[static_cast<size_t>(m.value)]
                             : nullptr;
        r.refOp = made ? made->name : "%" + std::to_string(m.value);
        r.node = m.node;
        r.type = typeToString(w->second.type);
        if (isPow2Scale(made, m.value, w->second.type)) {
          // Power-of-two scales: within one binade (an amax near a power of
          // two may fall on either side of it).
          r.error = binadeError(got, w->second);
          r.tolerance = c.tolerance > 0 ? c.tolerance : 1.0;
          r.type += " (binades)";
        } else {
          r.error = relativeError(got, w->second);
          r.tolerance = c.tolerance > 0
                            ? c.tolerance
                            : std::max(checkTolerance(w->second.type.dtype), stepTolerance);
        }
        r.beyond = !(r.error <= r.tolerance);
        if (r.beyond && out->first < 0)
          out->first = static_cast<int64_t>(out->rows.size());
        out->beyond += r.beyond;
        out->rows.push_back(std::move(r));
        want.erase(w);
        return Status::ok();
      }));
  return Status::ok();
}

} // namespace tc::rt
