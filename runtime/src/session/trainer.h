//===- trainer.h - the training loop's engine --------------------*- C++ -*-===//
//
// What tc-run --steps and the C API's trainers drive: the parameter/state
// table of an artifact compiled with `tc-compile --train`, held by an
// Executor (the CPU reference or a GPU, session/backend.h), one optimizer
// step at a time, checkpoints, token data and the learning-rate schedule.
//
// A step with grad_accum == 1 runs "train_step" (loss, grad_norm,
// update:<entry>...); with grad_accum N > 1 it runs "grad_step" once per
// micro-batch, averages the gradients (and the losses) and runs "apply_step".
// After a call every "update:<name>" output becomes the new value of entry
// <name>. An artifact compiled with --fp16 also returns "skipped" and
// "loss_scale" (tc-optimizer loss-scaling): the step decides in the graph
// whether it updates, so the host only reports it. With --ref-precision f64 (ExecOptions F64 + wideF32) the f32 entries
// are held in f64 between steps, so a float64 run never rounds to f32.
//
// Not thread-safe: one Trainer per thread.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_SESSION_TRAINER_H
#define TC_RUNTIME_SESSION_TRAINER_H

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <functional>
#include <memory>

#include "runtime/src/base/executor.h"
#include "runtime/src/schema/program.h"
#include "runtime/src/base/status.h"
#include "runtime/src/cpu/executor.h"

namespace tc::rt {

/// reports["training"] of an artifact (written by tc-compile --train).
struct TrainConfig {
  std::string loss = "loss";
  std::string optimizer;
  double lr = 1e-3;
  int64_t gradAccum = 1;
  double clipGradNorm = 0;
};
Status readTrainConfig(const Artifact &artifact, TrainConfig *out);

/// The learning rate of `step` (1-based) of `total`: linear warmup from
/// base/warmup to base over steps 1..warmup, then "constant" (base) or
/// "cosine" from base at step warmup+1 down to 0.1*base at step `total`
/// (nanoGPT's schedule with min_lr = lr/10).
double learningRate(int64_t step, int64_t total, double base, int64_t warmup,
                    const std::string &schedule);

/// splitmix64: a tiny, well-mixed, fully reproducible generator.
struct Rng {
  uint64_t state = 0x853c49e6748fea9bULL;
  uint64_t next();
};

/// What a token stream feeds as labels (compiler/Labels.h): the next tokens,
/// tokens[o+1, o+T+1) (nanoGPT, llm.c), or the same tokens as input_ids,
/// tokens[o, o+T), for a model that shifts them itself (HF *ForCausalLM).
enum class LabelShift { Next, Same };

/// The labels tc-run --data feeds: `flag` ("next", "same" or "" for the
/// default) against what the compiler recorded (reports["labels"]). The
/// artifact's convention is the default (next when it recorded none); an
/// explicit flag wins. `*message` is the line to print ("labels: same (...)"),
/// `*note` a note when the flag overrides the artifact (else "").
Status chooseLabels(const Artifact &artifact, const std::string &flag, LabelShift *out,
                    std::string *message, std::string *note);

/// Refuses integer inputs outside the ranges the compiler recorded
/// (reports["input_ranges"], compiler/Labels.h): a token id outside its
/// embedding (a negative one would wrap, as ONNX's Gather does), a label
/// outside the classes other than the loss's ignore_index. InvalidArgument
/// naming the input, the element, its value and the range; ok when the
/// artifact recorded none.
Status checkInputRanges(const Artifact &artifact, const std::vector<std::string> &names,
                        const std::vector<HostTensor> &values);

/// A flat token file (nanoGPT / llm.c .bin: raw little-endian uint16 or
/// uint32 tokens, no header) or tokens in memory. Batches are random
/// windows: input_ids = tokens[o, o+T), labels = tokens[o+1, o+T+1)
/// (LabelShift::Next) or tokens[o, o+T) (Same), o drawn by the Rng.
struct FileFingerprint;

/// The path a checkpoint records for tokens given in memory.
inline constexpr const char kMemoryTokensPath[] = "(tokens in memory)";

class TokenData {
public:
  TokenData() = default;
  TokenData(const TokenData &) = delete;
  TokenData &operator=(const TokenData &) = delete;
  ~TokenData();
  Status open(const std::string &path, int tokenBytes);
  /// Tokens held in memory (each < 2^32), named `what` in messages.
  Status openMemory(std::vector<uint32_t> tokens, const std::string &what);
  int64_t numTokens() const { return count_; }
  /// Reads the tokens `other` reads, from position 0: a token file opened
  /// again, tokens in memory copied (a run keeps its own reader of a
  /// caller's token source).
  Status openCopyOf(const TokenData &other);
  /// What a checkpoint records of the tokens: fileFingerprint of a token
  /// file; for tokens in memory, kMemoryTokensPath, their bytes and a hash
  /// of them (a resumed run is given the same tokens again).
  Status fingerprint(FileFingerprint *out) const;
  /// Tokens given in memory (openMemory), not a token file.
  bool inMemory() const { return fd_ < 0; }
  /// "uint16" or "uint32": how a token file stores its tokens.
  const char *dtypeName() const { return tokenBytes_ == 4 ? "uint32" : "uint16"; }
  /// Fills a [batch, seq] input_ids and labels of `dtype` (an integer type).
  Status nextBatch(int64_t batch, int64_t seq, DType dtype, Rng *rng, HostTensor *inputIds,
                   HostTensor *labels, LabelShift shift = LabelShift::Next);
  /// The same for the windows starting at the given token offsets (one per
  /// row; each must leave seq + 1 tokens). `position` is not advanced.
  Status batchAt(const std::vector<uint64_t> &offsets, int64_t seq, DType dtype,
                 HostTensor *inputIds, HostTensor *labels, LabelShift shift) const;
  /// Windows drawn so far (saved in checkpoints).
  uint64_t position = 0;

private:
  int fd_ = -1;
  int tokenBytes_ = 2;
  int64_t count_ = 0;
  std::string path_;
  std::vector<uint32_t> memory_; ///< openMemory's tokens (fd_ < 0)
};

/// The token offsets of batch `index` of `iters` batches of `batch` evenly
/// spaced windows of `seq` tokens of `data` (the same ones every time,
/// covering it): what evaluation and validation feed.
std::vector<uint64_t> evalOffsets(const TokenData &data, int64_t batch, int64_t seq,
                                  int64_t index, int64_t iters);

struct StepResult {
  double loss = 0;
  double gradNorm = 0;
  /// Dynamic loss scaling (tc-compile --fp16): the step found an inf/NaN
  /// gradient and changed nothing but the scale.
  bool skipped = false;
  /// The loss scale the step used; 0 without loss scaling.
  double lossScale = 0;
  /// FP8 delayed scaling: the elements the step's quantizations saturated;
  /// -1 without delayed scaling.
  double fp8Saturated = -1;
};

/// A file a run reads, as the checkpoint identifies it: its path, its size
/// and a hash of its bytes (fileFingerprint). Empty path: none.
struct FileFingerprint {
  std::string path;
  int64_t bytes = 0;
  std::string hash;
  bool operator==(const FileFingerprint &o) const {
    return bytes == o.bytes && hash == o.hash; // the same data, wherever it lies now
  }
  bool operator!=(const FileFingerprint &o) const { return !(*this == o); }
};

/// FNV-1a 64 over the file's size and bytes: all of them up to 64 MiB, else
/// 64 evenly spaced 1 MiB blocks plus the last MiB (a token file of tens of
/// GB is identified in milliseconds; an edit between the blocks is not seen).
Status fileFingerprint(const std::string &path, const std::string &what, FileFingerprint *out);

/// How a training run was configured: the tc-run flags that shape its
/// trajectory. The checkpoint keeps it so that --resume continues the same
/// run (runtime/src/session/run.h checks flags against it).
struct RunConfig {
  int64_t steps = 0; ///< the planned total
  double lr = 0;     ///< the base learning rate
  int64_t warmup = 0;
  std::string schedule = "constant";
  uint64_t seed = 1337;
  FileFingerprint data; ///< --data (empty with --feed)
  std::string dataDtype;
  std::string labels; ///< "next" / "same" (with --data)
  std::vector<std::pair<std::string, FileFingerprint>> feeds; ///< --feed NAME=FILE, by name
  FileFingerprint valData; ///< --val-data
  int64_t evalEvery = 0, evalIters = 0;
};

/// What a checkpoint holds besides tensors.
struct CheckpointMeta {
  int64_t step = 0;
  uint64_t rngState = 0;
  uint64_t dataPosition = 0;
  std::string artifactHash;
  std::string precision = "f32";
  /// The run's identity: drawn when a run starts fresh, kept by --resume.
  /// --save refuses to replace another run's checkpoint (run.h).
  std::string runId;
  std::string tcVersion; ///< the tc that wrote it (version.h)
  RunConfig run;
};

/// Checks that `tensors` hold exactly the model entries (parameters and
/// buffers; with `optimizerState` the optimizer state) of `artifact`, by
/// name, shape and dtype (float widths may differ): InvalidArgument "WHAT
/// does not match the model; missing: ...; unexpected: ...; shape/dtype
/// mismatch: ..." otherwise. `*wanted` gets the entry names.
/// Entries in `mayBeMissing` (notInStateDict) may be absent: they keep the
/// artifact's values.
Status matchEntries(const Artifact &artifact, const std::map<std::string, HostTensor> &tensors,
                    bool optimizerState, const std::string &what, std::set<std::string> *wanted,
                    const std::set<std::string> &mayBeMissing = {});

/// reports["not_in_state_dict"]: frozen tensors torch's state_dict does not
/// hold (buffers registered with persistent=False, constants the exporter
/// folded). Checkpoints leave them out; loading does not require them.
std::set<std::string> notInStateDict(const Artifact &artifact);

/// Removes a checkpoint folder tc made: its own files and leftover
/// temporaries, then the folder (left in place if anything else is inside).
void removeCheckpointDir(const std::string &dir);

/// The checkpoint in `dir`'s state.json only (no tensors), checked as
/// loadCheckpoint checks it: its format, fields and state_crc32. NotFound
/// when `dir` holds no checkpoint.
Status readCheckpointMeta(const std::string &dir, CheckpointMeta *meta);

/// FNV-1a 64 of the artifact file's bytes, as 16 hex digits: the identity a
/// checkpoint is tied to.
Status artifactHash(const std::string &artifactPath, std::string *out);

class Trainer {
public:
  Trainer();
  ~Trainer();
  Trainer(const Trainer &) = delete;
  Trainer &operator=(const Trainer &) = delete;

  /// Takes the artifact (which must outlive the Trainer) and its training
  /// functions, then creates the executor of `device` (backend.h), which
  /// fills the state table from the weights, zeros and initialisers (seeded
  /// by opts.initSeed) and holds it. `*deviceFailed` (may be null) is set
  /// when the failure is the device's (creating the executor, or f64 on a
  /// GPU) rather than the artifact's.
  Status init(const Artifact *artifact, const ExecOptions &opts, const DeviceOptions &device = {},
              bool *deviceFailed = nullptr);

  const TrainConfig &config() const { return config_; }
  /// The data inputs of one micro-batch, in order (grad_step's inputs).
  const std::vector<std::string> &dataInputNames() const { return dataNames_; }
  const std::vector<TensorType> &dataInputTypes() const { return dataTypes_; }

  /// One optimizer step: `micro` holds config().gradAccum micro-batches.
  Status step(int64_t step, double lr, const std::vector<std::vector<HostTensor>> &micro,
              StepResult *out);
  /// step() in two halves, so that a loop can enqueue the next step before
  /// it reads this one's results: submitStep enqueues the step (one
  /// train_step through Executor::submit: on the GPU a replayed graph runs
  /// behind the previous one; with gradient accumulation, or on the CPU, the
  /// step runs now) and collectStep waits for it and reads its results.
  /// Steps are collected in the order submitted, at most
  /// Executor::kMaxSubmitted uncollected.
  Status submitStep(int64_t step, double lr, const std::vector<std::vector<HostTensor>> &micro,
                    uint64_t *ticket);
  Status collectStep(uint64_t ticket, StepResult *out);
  /// Whether submitStep returns before the step ends (one train_step the
  /// executor defers: Executor::defers).
  bool defersSteps() const;

  /// Replaces the model entries (parameters and buffers) by those of a
  /// safetensors file; names and shapes must match exactly (the error lists
  /// every missing, unexpected and mismatched name).
  Status loadWeights(const std::string &path);

  /// DIR/model.safetensors (parameters and buffers by their model names),
  /// DIR/optimizer.safetensors (optimizer state), DIR/state.json. Every file
  /// is written atomically and the folder is replaced atomically.
  Status saveCheckpoint(const std::string &dir, const CheckpointMeta &meta) const;
  Status loadCheckpoint(const std::string &dir, const std::string &expectedHash,
                        CheckpointMeta *meta);

  /// The loss of one batch (the data inputs of a micro-batch) with the
  /// current state, nothing updated: eval_step, or grad_step's loss where
  /// the program has no eval_step (a GPU program has no forward of its own).
  Status evalLoss(const std::vector<HostTensor> &batch, double *loss);

  /// Entry `name` of the state table, as the executor holds it (f64 for the
  /// f32 entries of a --ref-precision f64 run).
  Status getEntry(const std::string &name, HostTensor *out) const;
  /// Replaces entry `name` by `value` (floats converted to the entry's width).
  Status setEntry(const std::string &name, const HostTensor &value);

  /// The executor holding the state (after init).
  Executor &executor() const { return *exec_; }
  bool onDevice() const { return exec_ && exec_->onDevice(); }
  /// The device's memory use (zeros on the CPU).
  DeviceMemoryReport deviceMemory() const;

  /// A step function's scalar input (lr, step) in the type it takes.
  HostTensor scalar(double v) const;

private:
  /// Result `name` of function `fn` as a double (`fallback`: its index
  /// when no result has that name).
  Status scalarResult(const std::string &fn, const std::string &name, int fallback,
                      const std::vector<HostTensor> &outputs, double *v) const;
  /// "fp8_saturated" of `fn` into `saturated`, when it has it.
  Status fp8SaturatedResult(const std::string &fn, const std::vector<HostTensor> &outputs,
                            double *saturated) const;
  /// "skipped" and "loss_scale" of `fn` into `out`, when it has them.
  Status lossScaleResults(const std::string &fn, const std::vector<HostTensor> &outputs,
                          StepResult *out) const;
  /// train_step's inputs: the micro-batch, lr and step; and the results
  /// a step reads.
  std::vector<HostTensor> trainStepInputs(int64_t step, double lr,
                                          const std::vector<HostTensor> &batch) const;
  std::vector<bool> trainStepWant() const;
  /// A train_step's results into `out`.
  Status trainStepResults(const std::vector<HostTensor> &outputs, StepResult *out) const;
  /// Gradient accumulation: runs grad_step on every micro-batch and makes
  /// apply_step's inputs (the averaged gradients, lr, step) and the mean loss.
  Status accumulate(int64_t step, double lr, const std::vector<std::vector<HostTensor>> &micro,
                    std::vector<HostTensor> *applyInputs, double *meanLoss) const;
  Status setEntries(const std::map<std::string, HostTensor> &tensors, bool optimizerState,
                    const std::string &what);

  const Artifact *artifact_ = nullptr;
  ExecOptions opts_;
  bool wide_ = false;
  TrainConfig config_;
  std::vector<std::string> dataNames_;
  std::vector<TensorType> dataTypes_;
  std::set<std::string> leftOut_; ///< notInStateDict(*artifact_)
  std::unique_ptr<Executor> exec_;
  /// submitStep's steps not yet collected: through the executor (`exec`:
  /// its ticket), or run at once (their status and result).
  struct Submitted {
    uint64_t ticket = 0, execTicket = 0;
    bool exec = false;
    Status status;
    StepResult result;
  };
  std::deque<Submitted> submitted_;
  uint64_t tickets_ = 0;
};

} // namespace tc::rt

#endif // TC_RUNTIME_SESSION_TRAINER_H
