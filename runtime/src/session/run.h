//===- run.h - the run loop: train, evaluate, generate ----------*- C++ -*-===//
//
// What tc-run does, as library calls (the C API, tc/runtime.h, drives them):
//
//   TrainRun    a training run: data (token windows or fixed feeds), the
//               learning-rate schedule, validation, metrics (JSONL schema
//               "tc.metrics/1", docs/metrics.md) and TensorBoard scalars,
//               checkpoints with the run's configuration, resume, stopping.
//   train()     a TrainRun from start to end (tc-run's training).
//   evaluate()  the loss of a model over a token file (--eval --data), with
//               the artifact's weights or a checkpoint's.
//   generate()  sampling from a causal LM (--generate), as nanoGPT's
//               sample.py does it.
//
// Nothing here prints: every line goes to a RunObserver, which the tool
// formats. Errors are Statuses; *userError tells input errors (exit 2:
// flags, files, a checkpoint that does not fit) from run-time failures.
// The implementation is the run_*.cpp files (run_internal.h lists them).
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_SESSION_RUN_H
#define TC_RUNTIME_SESSION_RUN_H

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/src/base/executor.h"
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
  /// Tokens to cut windows from instead of a `data` file (a caller's token
  /// source). Borrowed by prepare() only: the run reads a copy.
  const TokenData *dataSource = nullptr;
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
  DeviceOptions device; ///< gpu -1: the CPU reference
  /// Polled after every step of train() / TrainRun::run: non-zero (the
  /// tool's signal number) stops the loop there, saving when --save is given.
  std::function<int()> stop;
};

/// One optimizer step, as the metrics line and the progress bar show it.
struct StepRecord {
  int64_t step = 0, first = 0, total = 0; ///< this step, the run's first, its last
  double loss = 0, lossSmooth = 0, lr = 0, gradNorm = 0;
  int64_t tokens = 0, tokensTotal = 0; ///< this step's, the run's so far (from step 1)
  double tokensPerS = 0, stepTimeS = 0, elapsedS = 0, etaS = 0;
  double mfu = -1, hfu = -1; ///< fractions of the device's dense peak; < 0: unknown
  bool periodic = false;     ///< a --log-every step (a line to keep in the scrollback)
  bool skipped = false;      ///< loss scaling found an inf/NaN gradient: no update
  double lossScale = 0;      ///< the loss scale the step used; 0: no loss scaling
  double fp8Saturated = -1;  ///< FP8 delayed scaling's saturated elements; < 0: none
};

/// The "kind": "train" / "val" lines of the metrics file.
std::string trainMetricsJson(const StepRecord &r);

struct ValRecord {
  int64_t step = 0;
  double valLoss = 0;
  int64_t valTokens = 0;
};
std::string valMetricsJson(const ValRecord &v);
/// The "kind": "eval" line of --eval --data (step < 0: null).
std::string evalLossMetricsJson(int64_t step, double loss, int64_t tokens);

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

/// What --check compares and with what tolerance.
struct CheckOptions {
  std::string function; ///< "" : train_step (grad_step with gradient accumulation)
  double tolerance = 0; ///< > 0: for every value; 0: checkTolerance of its type
};

/// One value --check compared: the device op that wrote it, the reference op
/// that made it, and the error.
struct CheckRow {
  int64_t op = -1;       ///< the device op's position in its function
  std::string deviceOp;  ///< "launch tc_fusion_...", "matmul", "library layer_norm_fwd"
  std::string refOp;     ///< "tc.matmul"
  std::string node;      ///< the ONNX node ("" when unknown)
  std::string type;      ///< "bf16 2x16x32"
  double error = 0, tolerance = 0;
  bool beyond = false;
};

struct CheckReport {
  std::string function;
  std::vector<CheckRow> rows; ///< in device program order
  int64_t beyond = 0;
  int64_t first = -1; ///< index into rows of the first value beyond tolerance
  /// A line per value, then the verdict naming the first one beyond.
  std::string text() const;
};

/// The default tolerance of --check for a value of `d`: 1e-3 for f32/f64,
/// 1e-2 f16, 2e-2 bf16, 2.5e-1 fp8, 3e-1 fp4, 0 (equal) for integers. A value
/// gets at least the tolerance of its step's narrowest float type.
double checkTolerance(DType d);

/// A training run. prepare() does everything before the first step: the
/// configuration (flags against a resumed checkpoint), the Trainer on its
/// device, the data, --init / --resume, the --save checks, the metrics and
/// TensorBoard files. step() and stepWith() make one step with its records
/// (the observer, metrics, TensorBoard, validation, --save-every); run()
/// loops to the planned total. *inputError tells failures of the user's
/// inputs (tc-run exits 2) from the run's (1). Not thread-safe: the C API
/// serialises the calls.
class TrainRun {
public:
  TrainRun();
  ~TrainRun();
  TrainRun(const TrainRun &) = delete;
  TrainRun &operator=(const TrainRun &) = delete;

  /// `artifact` (read from `artifactPath`) and `obs` must outlive the run.
  /// With `needSource`, data or feeds are required (tc-run); without, steps
  /// without either take their inputs from stepWith().
  Status prepare(const Artifact *artifact, const std::string &artifactPath, const TrainOptions &o,
                 RunObserver *obs, bool needSource, bool *inputError);
  /// The next step from the run's data (windows or feeds).
  Status step(StepRecord *rec, bool *inputError);
  /// The next step on given micro-batches (config().gradAccum of them).
  Status stepWith(const std::vector<std::vector<HostTensor>> &micro, StepRecord *rec,
                  bool *inputError);
  /// Steps to the planned total; stops after a step when o.stop or `stop`
  /// says so (saving with --save); `between` runs after every step.
  Status run(TrainSummary *summary, bool *inputError, const std::function<int()> &stop,
             const std::function<void()> &between);

  /// Saves a checkpoint of the current step into `dir` (its step-N folder
  /// with --keep-checkpoints when `dir` is the --save folder).
  Status saveTo(const std::string &dir);
  /// Restores a checkpoint of this artifact: state, step, RNG, data position.
  Status loadCheckpoint(const std::string &dir);
  /// The mean loss over `iters` batches of evenly spaced windows of `data`
  /// with the live weights, the run's labels convention; nothing changes.
  Status evaluate(const TokenData &data, int64_t iters, double *loss, int64_t *tokens,
                  bool *inputError);

  /// tc-run --check: the next step's function on the GPU and on the CPU
  /// reference from the GPU's state and the next step's inputs, every value
  /// both hold compared (run_check.cpp). Both sides' state is that step's
  /// afterwards; the run's step count does not move.
  Status check(const CheckOptions &c, CheckReport *out, bool *inputError);

  Trainer &trainer() { return trainer_; }
  const Artifact &artifact() const { return *artifact_; }
  int64_t currentStep() const { return step_; }
  int64_t totalSteps() const { return run_.steps; }
  /// The learning rate of `step` under the run's schedule.
  double learningRateAt(int64_t step) const;
  /// Replaces the schedule (kept in later checkpoints).
  Status setSchedule(double lr, int64_t warmup, const std::string &schedule);
  /// The data inputs of a micro-batch: names, types, and (with token data)
  /// which are input_ids and labels.
  const std::vector<std::string> &dataInputNames() const { return trainer_.dataInputNames(); }
  const std::vector<TensorType> &dataInputTypes() const { return trainer_.dataInputTypes(); }

private:
  struct State;
  std::unique_ptr<State> s_;
  const Artifact *artifact_ = nullptr;
  Trainer trainer_;
  RunConfig run_;
  int64_t step_ = 0;
  Status save(int64_t step);
  Status validate(int64_t step, bool *inputError);
  Status record(int64_t step, double lr, double seconds, const StepResult &r, StepRecord *rec);
  Status finishStep(int64_t step, bool *inputError);
  /// Whether finishStep validates / saves after `step`.
  bool validatesAfter(int64_t step) const;
  bool savesAfter(int64_t step) const;
  using Clock = std::chrono::steady_clock;
  /// A step submitted to the trainer and not yet completed.
  struct InFlight {
    int64_t step = 0;
    double lr = 0;
    uint64_t ticket = 0;
    Clock::time_point submitted;
  };
  /// The step after those in flight, enqueued (Trainer::submitStep).
  Status submitStep(const std::vector<std::vector<HostTensor>> &micro, InFlight *f);
  /// Waits for `f` and makes its records (as stepWith); its time counts
  /// from its submission or `previousDone`, the later.
  Status completeStep(const InFlight &f, Clock::time_point previousDone, StepRecord *rec,
                      bool *inputError);
  int64_t inFlight_ = 0;
  Clock::time_point lastDone_; ///< when the last completeStep's step ended
  /// The next step's micro-batches from the run's data or feeds.
  Status nextMicroBatches(std::vector<std::vector<HostTensor>> *micro, bool *inputError);
};

/// Runs training on `artifact` (read from `artifactPath`): a TrainRun from
/// prepare() to the end of run(). See TrainOptions.
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
  DeviceOptions device;
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

/// The sampler (tc-run --generate, the C API's generation): continues
/// `prompt` by `maxNewTokens` tokens, one infer call per token at the
/// compiled [B, T] (the context cropped to its last T tokens, as nanoGPT
/// crops to block_size; the prompt fills row 0 and the logits of its last
/// position are sampled). temperature 0 is greedy; topK 0 keeps every
/// token. The model must have an output named "logits" (or exactly one
/// float output of rank 3 [B, T, V]).
struct GenerateOptions {
  std::vector<int64_t> prompt;
  int64_t maxNewTokens = 32;
  double temperature = 1.0;
  int64_t topK = 0;
  uint64_t seed = 1337;
  std::string init; ///< checkpoint or .safetensors ("" = the artifact's weights)
  std::string refPrecision = "f32";
};
/// tc-run --generate: `o.init` loaded into a copy of the artifact, the CPU
/// reference.
Status generate(const Artifact &artifact, const GenerateOptions &o, std::vector<int64_t> *tokens,
                bool *userError);
/// The sampler on an executor holding the model's weights (`artifact`'s
/// infer function, run by `ex`: a session's, a trainer's). Only the
/// sampler's own RNG (seeded by o.seed) is drawn from.
Status generateWith(const Artifact &artifact, Executor &ex, const GenerateOptions &o,
                    std::vector<int64_t> *tokens, bool *userError);
/// The next-token logits (f32 [V]) after `context` on `ex`, as the sampler
/// computes them.
Status nextLogits(const Artifact &artifact, Executor &ex, const std::vector<int64_t> &context,
                  HostTensor *logits, bool *userError);
/// nextLogits and greedy generateWith (temperature 0, `maxNewTokens` >= 0)
/// in one pass on `ex`, so both see the same weights: `*logits` are those
/// the first new token is the argmax of (one infer call fewer than the two
/// calls make); `*tokens` is the context followed by the new tokens.
Status inferGreedy(const Artifact &artifact, Executor &ex, const std::vector<int64_t> &context,
                   int64_t maxNewTokens, HostTensor *logits, std::vector<int64_t> *tokens,
                   bool *userError);

} // namespace tc::rt

#endif // TC_RUNTIME_SESSION_RUN_H
