//===- run.h - the run loop: train, evaluate, generate ----------*- C++ -*-===//
//
// What tc-run does, as library calls (the C API will drive the same ones):
//
//   train()     the training loop: data (token windows or fixed feeds), the
//               learning-rate schedule, validation, metrics (JSONL schema
//               "tc.metrics/1", docs/metrics.md) and TensorBoard scalars,
//               checkpoints with the run's configuration, resume, signals.
//   evaluate()  the loss of a model over a token file (--eval --data), with
//               the artifact's weights or a checkpoint's.
//   generate()  sampling from a causal LM (--generate), as nanoGPT's
//               sample.py does it.
//
// Nothing here prints: every line goes to a RunObserver, which the tool
// formats. Errors are Statuses; *userError tells input errors (exit 2:
// flags, files, a checkpoint that does not fit) from run-time failures.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_SESSION_RUN_H
#define TC_RUNTIME_SESSION_RUN_H

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/src/schema/artifact.h"
#include "runtime/src/base/status.h"
#include "runtime/src/session/trainer.h"

namespace tc::rt {

/// The metrics schema's name and major version (docs/metrics.md): readers
/// refuse another major version and ignore fields they do not know.
inline constexpr const char kMetricsSchema[] = "tc.metrics/1";

/// tc-run's training flags. "Not given" values (-1, "") take the checkpoint's
/// value on --resume and the default otherwise; a given one that differs
/// from the resumed run's is an error (--steps may be raised).
struct TrainOptions {
  int64_t steps = -1;
  double lr = -1;
  int64_t warmup = -1;
  std::string schedule;
  int64_t seed = -1;
  std::string data, dataDtype, labels;
  std::vector<std::pair<std::string, std::string>> feeds; ///< NAME, FILE.npy
  int64_t batch = -1, seq = -1;                           ///< must match the artifact
  std::string save;
  int64_t saveEvery = 0;
  bool overwrite = false;
  int64_t keepCheckpoints = 0; ///< > 0: DIR/step-NNNNNNNN folders, the newest N kept
  std::string resume, init;
  std::string valData;
  int64_t evalEvery = -1, evalIters = -1;
  std::string metrics, tensorboard;
  int64_t logEvery = 10;
  std::string refPrecision = "f32";
  int gpu = -1; ///< the CUDA ordinal, -1 for the CPU reference
  /// Set (to the signal number) by the tool's SIGINT/SIGTERM handler: the
  /// loop stops after the current step and saves when --save is given.
  const std::atomic<int> *stop = nullptr;
};

/// One optimizer step, as the metrics line and the progress bar show it.
struct StepRecord {
  int64_t step = 0, first = 0, total = 0; ///< this step, the run's first, its last
  double loss = 0, lossSmooth = 0, lr = 0, gradNorm = 0;
  int64_t tokens = 0, tokensTotal = 0; ///< this step's, the run's so far (from step 1)
  double tokensPerS = 0, stepTimeS = 0, elapsedS = 0, etaS = 0;
  double mfu = -1, hfu = -1; ///< fractions of the device's dense peak; < 0: unknown
  bool periodic = false;     ///< a --log-every step (a line to keep in the scrollback)
};

struct ValRecord {
  int64_t step = 0;
  double valLoss = 0;
  int64_t valTokens = 0;
};

/// Receives what a run has to say. Every method has a default that drops it.
class RunObserver {
public:
  virtual ~RunObserver() = default;
  /// A line for the user's output ("device: ...", "labels: ...", "saved DIR
  /// (step N)", the summary).
  virtual void line(const std::string &) {}
  /// A note (the tool prefixes "note: ").
  virtual void note(const std::string &) {}
  virtual void step(const StepRecord &) {}
  virtual void val(const ValRecord &) {}
};

struct TrainSummary {
  int64_t first = 0, last = 0; ///< steps run: first..last (last < first: none)
  double firstLoss = 0, lastLoss = 0, seconds = 0;
  int interrupted = 0; ///< the signal that stopped the run, 0 when it ran to the end
};

/// Runs training on `artifact` (read from `artifactPath`). See TrainOptions.
Status train(const Artifact &artifact, const std::string &artifactPath, const TrainOptions &o,
             RunObserver *obs, TrainSummary *summary, bool *userError);

/// --eval --data FILE: the mean loss over `iters` batches of evenly spaced
/// windows of a token file (the same windows every time), with the
/// artifact's weights or those of `init` (a checkpoint folder or a
/// .safetensors file).
struct EvalDataOptions {
  std::string data, dataDtype = "uint16", labels, init;
  int64_t iters = 20;
  std::string refPrecision = "f32";
  int gpu = -1;
  int64_t seed = 1337;
};
struct EvalDataResult {
  double loss = 0;
  int64_t tokens = 0, batches = 0;
  int64_t step = -1; ///< the checkpoint's step, -1 for the artifact's weights
};
Status evaluateData(const Artifact &artifact, const EvalDataOptions &o, RunObserver *obs,
                    EvalDataResult *out, bool *userError);

/// Replaces the model entries (parameters and buffers) of `artifact` by those
/// of `weights` (a checkpoint folder, DIR/model.safetensors, or a
/// .safetensors file): names and shapes must match exactly, as
/// Trainer::loadWeights checks. `*step` is the checkpoint's step (-1 for a
/// plain file).
Status loadArtifactWeights(Artifact *artifact, const std::string &weights, int64_t *step);

/// --generate: continues `prompt` by `maxNewTokens` tokens, one infer call
/// per token at the compiled [B, T] (the context cropped to its last T
/// tokens, as nanoGPT crops to block_size; the prompt fills row 0 and the
/// logits of its last position are sampled). temperature 0 is greedy;
/// topK 0 keeps every token. The model must have an output named "logits"
/// (or exactly one float output of rank 3 [B, T, V]).
struct GenerateOptions {
  std::vector<int64_t> prompt;
  int64_t maxNewTokens = 32;
  double temperature = 1.0;
  int64_t topK = 0;
  uint64_t seed = 1337;
  std::string init; ///< checkpoint or .safetensors ("" = the artifact's weights)
  std::string refPrecision = "f32";
  int gpu = -1;
};
Status generate(const Artifact &artifact, const GenerateOptions &o, std::vector<int64_t> *tokens,
                bool *userError);

} // namespace tc::rt

#endif // TC_RUNTIME_SESSION_RUN_H
