//===- run_generate.cpp - text generation ---------------------------------===//
//
// The sampler of causal LMs (--generate, the C API's generation and
// inference): one infer call per token at the compiled [B, T], greedy or
// with temperature and top-k, as nanoGPT's sample.py does it.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/session/run.h"

#include <algorithm>
#include <cmath>

#include "runtime/src/base/host_tensor.h"
#include "runtime/src/session/backend.h"

namespace tc::rt {

namespace {

/// What the sampler feeds the infer function and where it reads the logits.
struct InferFeed {
  const Function *fn = nullptr;
  int logits = -1, ids = -1;
  std::vector<TensorType> types;
  int64_t B = 0, T = 0, V = 0;
};

Status inferFeed(const Artifact &a, InferFeed *f) {
  const Function *fn = f->fn = a.findFunction("infer");
  if (!fn)
    return invalidArgument("the artifact has no infer function");
  // The logits: an output named logits, else the only float [B, T, V] one.
  int logits = -1, floats3 = 0;
  std::string outs;
  for (size_t i = 0; i < fn->outputNames.size(); ++i) {
    const TensorType &t = fn->values[static_cast<size_t>(fn->outputs[i])];
    outs += (outs.empty() ? "" : ", ") + fn->outputNames[i] + " " + typeToString(t);
    if (fn->outputNames[i] == "logits")
      logits = static_cast<int>(i);
    if (t.shape.size() == 3 && dtypeIsFloat(t.dtype))
      ++floats3;
  }
  if (logits < 0 && floats3 == 1)
    for (size_t i = 0; i < fn->outputNames.size(); ++i) {
      const TensorType &t = fn->values[static_cast<size_t>(fn->outputs[i])];
      if (t.shape.size() == 3 && dtypeIsFloat(t.dtype))
        logits = static_cast<int>(i);
    }
  if (logits < 0)
    return invalidArgument("--generate needs a causal LM with a logits output [batch, seq, "
                           "vocab]; the model's outputs are: " + outs +
                           " (export the logits too, as the README's recipe does)");
  f->logits = logits;
  const TensorType &lt = fn->values[static_cast<size_t>(fn->outputs[static_cast<size_t>(logits)])];
  for (size_t i = 0; i < fn->inputs.size(); ++i) {
    f->types.push_back(fn->values[static_cast<size_t>(fn->inputs[i])]);
    if (fn->inputNames[i] == "input_ids")
      f->ids = static_cast<int>(i);
  }
  if (f->ids < 0 && f->types.size() == 1)
    f->ids = 0;
  if (f->ids < 0)
    return invalidArgument("--generate needs a model input named input_ids");
  const TensorType &it = f->types[static_cast<size_t>(f->ids)];
  if (it.shape.size() != 2 || !dtypeIsInteger(it.dtype))
    return invalidArgument("--generate needs input_ids of shape [batch, seq] (the model has " +
                           typeToString(it) + ")");
  f->T = it.shape[1];
  f->B = it.shape[0];
  f->V = lt.shape[2];
  return Status::ok();
}

/// The logits of the last context position after `seqTokens` (cropped to
/// the last T): one infer call. Other inputs: labels (ignored by the logits;
/// any in range) and attention_mask (ones over the context, zeros after).
Status lastLogits(const Artifact &a, Executor &ex, const InferFeed &f,
                  const std::vector<int64_t> &seqTokens, std::vector<double> *z,
                  bool *userError) {
  const Function *fn = f.fn;
  int64_t B = f.B, T = f.T, V = f.V;
  int64_t ctx = std::min<int64_t>(static_cast<int64_t>(seqTokens.size()), T);
  std::vector<int64_t> row(static_cast<size_t>(B * T), 0);
  for (int64_t t = 0; t < ctx; ++t)
    row[static_cast<size_t>(t)] = seqTokens[seqTokens.size() - static_cast<size_t>(ctx) +
                                            static_cast<size_t>(t)];
  std::vector<HostTensor> inputs(f.types.size());
  for (size_t i = 0; i < f.types.size(); ++i) {
    const std::string &name = fn->inputNames[i];
    const TensorType &type = f.types[i];
    if (static_cast<int>(i) == f.ids) {
      inputs[i] = makeHostTensorInts(type, row);
    } else if (name == "attention_mask") {
      std::vector<int64_t> m(static_cast<size_t>(type.numElements()), 0);
      for (int64_t t = 0; t < ctx && t < static_cast<int64_t>(m.size()); ++t)
        m[static_cast<size_t>(t)] = 1;
      for (int64_t b = 1; b < B; ++b)
        for (int64_t t = 0; t < T; ++t)
          m[static_cast<size_t>(b * T + t)] = 1;
      inputs[i] = makeHostTensorInts(type, m);
    } else if (name == "labels" && dtypeIsInteger(type.dtype)) {
      // Any label in range: the logits do not depend on the labels.
      inputs[i] = makeHostTensorInts(type, row);
    } else {
      *userError = true;
      return invalidArgument("--generate does not know what to feed the model's input '" +
                             name + "' (" + typeToString(type) +
                             "): it feeds input_ids, attention_mask and labels");
    }
  }
  Status st = checkInputRanges(a, fn->inputNames, inputs);
  if (!st.isOk()) {
    *userError = true;
    return invalidArgument("--prompt: " + st.message());
  }
  *userError = false;
  if (!ex.hasFunction(fn->name))
    return failedPrecondition("the " + std::string(ex.onDevice() ? "GPU program" : "artifact") +
                              " has no function '" + fn->name + "'");
  std::vector<HostTensor> outputs;
  std::vector<bool> want(fn->outputs.size(), false);
  want[static_cast<size_t>(f.logits)] = true;
  TC_RETURN_IF_ERROR(ex.run(fn->name, inputs, &outputs, &want));
  std::vector<double> all = hostTensorToDoubles(outputs[static_cast<size_t>(f.logits)]);
  z->assign(all.begin() + (ctx - 1) * V, all.begin() + ctx * V);
  return Status::ok();
}

Status checkGenerateOptions(const GenerateOptions &o) {
  if (o.prompt.empty())
    return invalidArgument("--generate needs a prompt of at least one token (--prompt 1,2,3)");
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    return invalidArgument("--temperature wants a number >= 0");
  if (o.topK < 0)
    return invalidArgument("--top-k wants a whole number >= 0");
  return Status::ok();
}

/// The sampler's loop on the feed `f` of `a`. `first` (may be null) gets
/// the logits the first new token is drawn from, computed also when no
/// token is to be drawn.
Status sample(const Artifact &a, Executor &ex, const InferFeed &f, const GenerateOptions &o,
              std::vector<double> *first, std::vector<int64_t> *tokens, bool *userError) {
  int64_t V = f.V;
  Rng rng;
  rng.state = o.seed * 0x9e3779b97f4a7c15ULL + 7;
  *userError = false;
  std::vector<int64_t> seqTokens = o.prompt;
  for (int64_t n = 0; n < o.maxNewTokens || (n == 0 && first); ++n) {
    std::vector<double> z;
    TC_RETURN_IF_ERROR(lastLogits(a, ex, f, seqTokens, &z, userError));
    if (n == 0 && first) {
      *first = z;
      if (o.maxNewTokens == 0)
        break;
    }
    int64_t next = 0;
    if (o.temperature == 0) {
      next = std::max_element(z.begin(), z.end()) - z.begin();
    } else {
      for (double &x : z)
        x /= o.temperature;
      if (o.topK > 0 && o.topK < V) {
        std::vector<double> sorted = z;
        std::nth_element(sorted.begin(), sorted.begin() + (o.topK - 1), sorted.end(),
                         std::greater<double>());
        double kth = sorted[static_cast<size_t>(o.topK - 1)];
        for (double &x : z)
          if (x < kth)
            x = -INFINITY;
      }
      double mx = *std::max_element(z.begin(), z.end()), sum = 0;
      for (double &x : z) {
        x = std::exp(x - mx);
        sum += x;
      }
      double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53 * sum, acc = 0;
      next = V - 1;
      for (int64_t v = 0; v < V; ++v) {
        acc += z[static_cast<size_t>(v)];
        if (u < acc) {
          next = v;
          break;
        }
      }
    }
    seqTokens.push_back(next);
  }
  *tokens = std::move(seqTokens);
  return Status::ok();
}

} // namespace

Status generateWith(const Artifact &a, Executor &ex, const GenerateOptions &o,
                    std::vector<int64_t> *tokens, bool *userError) {
  *userError = true;
  TC_RETURN_IF_ERROR(checkGenerateOptions(o));
  InferFeed f;
  TC_RETURN_IF_ERROR(inferFeed(a, &f));
  return sample(a, ex, f, o, nullptr, tokens, userError);
}

Status inferGreedy(const Artifact &a, Executor &ex, const std::vector<int64_t> &context,
                   int64_t maxNewTokens, HostTensor *logits, std::vector<int64_t> *tokens,
                   bool *userError) {
  *userError = true;
  if (context.empty())
    return invalidArgument("the context needs at least one token");
  if (maxNewTokens < 0)
    return invalidArgument("max_new_tokens is " + std::to_string(maxNewTokens) +
                           ": it must be >= 0");
  InferFeed f;
  TC_RETURN_IF_ERROR(inferFeed(a, &f));
  GenerateOptions g;
  g.prompt = context;
  g.maxNewTokens = maxNewTokens;
  g.temperature = 0;
  std::vector<double> z;
  TC_RETURN_IF_ERROR(sample(a, ex, f, g, &z, tokens, userError));
  *logits = makeHostTensor({DType::F32, {f.V}}, z);
  return Status::ok();
}

Status nextLogits(const Artifact &a, Executor &ex, const std::vector<int64_t> &context,
                  HostTensor *logits, bool *userError) {
  *userError = true;
  if (context.empty())
    return invalidArgument("the context needs at least one token");
  InferFeed f;
  TC_RETURN_IF_ERROR(inferFeed(a, &f));
  std::vector<double> z;
  TC_RETURN_IF_ERROR(lastLogits(a, ex, f, context, &z, userError));
  *logits = makeHostTensor({DType::F32, {f.V}}, z);
  return Status::ok();
}

Status generate(const Artifact &artifact, const GenerateOptions &o, std::vector<int64_t> *tokens,
                bool *userError) {
  *userError = true;
  TC_RETURN_IF_ERROR(checkGenerateOptions(o));
  Artifact a = artifact;
  int64_t step = -1;
  if (!o.init.empty())
    TC_RETURN_IF_ERROR(loadArtifactWeights(&a, o.init, &step));
  InferFeed f;
  TC_RETURN_IF_ERROR(inferFeed(a, &f));
  ExecOptions exec;
  exec.precision = o.refPrecision == "f64" ? RefPrecision::F64 : RefPrecision::F32;
  exec.initSeed = o.seed;
  std::unique_ptr<Executor> ex;
  TC_RETURN_IF_ERROR(createExecutor(&a, exec, DeviceOptions(), &ex));
  return generateWith(a, *ex, o, tokens, userError);
}

} // namespace tc::rt
