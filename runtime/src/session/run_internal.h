//===- run_internal.h - what the run loop's files share ---------*- C++ -*-===//
//
// The run loop (run.h) is six files: run_setup.cpp (a TrainRun's
// configuration, data and feeds), run_loop.cpp (steps and their records),
// run_eval.cpp (validation and evaluation), run_checkpoint.cpp (checkpoint
// folders, save, load), run_metrics.cpp (the metrics lines, FLOPs) and
// run_generate.cpp (the sampler). This header holds what more than one of
// them uses: TrainRun's state and the helpers it is made of. Nothing else
// includes it.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_SESSION_RUN_INTERNAL_H
#define TC_RUNTIME_SESSION_RUN_INTERNAL_H

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "runtime/src/base/host_tensor.h"
#include "runtime/src/base/tensorboard.h"
#include "runtime/src/session/run.h"

namespace tc::rt {

/// Whether `p` is a folder.
bool isDir(const std::string &p);
/// `p` without trailing slashes ("/" stays).
std::string stripSlashes(std::string p);
/// The step-NNNNNNNN checkpoint folders in `dir`, by step.
std::vector<std::pair<int64_t, std::string>> stepFolders(const std::string &dir);
/// "step-NNNNNNNN", the folder of `step` under --keep-checkpoints.
std::string stepFolderName(int64_t step);
/// Where the newest checkpoint of `dir` is: `dir` itself, or (a folder of
/// --keep-checkpoints) its highest step-N folder. "" when there is none.
std::string newestCheckpoint(const std::string &dir);
/// `v` as "%.6g" (a learning rate in a message).
std::string num(double v);
/// Seconds since the epoch (TensorBoard's wall time).
double wall();

/// reports["flops"] (compiler/Flops.h): what MFU and HFU need.
struct FlopsReport {
  double modelFlopsPerToken = 0;  // 6N + 12 L T d
  double hardwareFlopsPerStep = 0; // the compiler's count of the step
  std::string dtype;
  std::vector<std::pair<std::string, double>> peaks; // device name part -> dense peak
};

/// Reads the artifact's "flops" report; false when it has none (no MFU).
bool readFlops(const Artifact &a, FlopsReport *out);
/// The dense peak of the device named `device` ("NVIDIA H200 (sm_90, ...)"),
/// 0 when the table does not know it.
double peakFor(const FlopsReport &f, const std::string &device);

/// Appends lines to the metrics file, one JSON object each, flushed.
class MetricsFile {
public:
  ~MetricsFile() {
    if (f_)
      std::fclose(f_);
  }
  Status open(const std::string &path, bool append) {
    path_ = path;
    f_ = std::fopen(path.c_str(), append ? "a" : "w");
    if (!f_)
      return ioError("cannot open metrics file '" + path + "': " + std::strerror(errno));
    return Status::ok();
  }
  Status write(const std::string &json) {
    if (!f_)
      return Status::ok();
    if (std::fputs(json.c_str(), f_) < 0 || std::fputc('\n', f_) == EOF || std::fflush(f_) != 0)
      return ioError("cannot write metrics file '" + path_ + "': " + std::strerror(errno));
    return Status::ok();
  }

private:
  std::FILE *f_ = nullptr;
  std::string path_;
};

/// The data inputs of a token-file model: input_ids and labels, [B, T], and
/// optionally attention_mask (fed all ones: token windows have no padding).
struct TokenInputs {
  int ids = -1, labels = -1, mask = -1;
  size_t count = 0;
  /// The batch of a window set: input_ids and labels from `data`, ones for
  /// the mask.
  Status fill(const TokenData &data, const std::vector<uint64_t> *offsets, TokenData *random,
              Rng *rng, const std::vector<TensorType> &types, LabelShift shift,
              std::vector<HostTensor> *batch) const {
    batch->assign(count, HostTensor());
    const TensorType &t = types[static_cast<size_t>(ids)];
    HostTensor *i = &(*batch)[static_cast<size_t>(ids)], *l = &(*batch)[static_cast<size_t>(labels)];
    if (offsets)
      TC_RETURN_IF_ERROR(data.batchAt(*offsets, t.shape[1], t.dtype, i, l, shift));
    else
      TC_RETURN_IF_ERROR(random->nextBatch(t.shape[0], t.shape[1], t.dtype, rng, i, l, shift));
    if (mask >= 0) {
      const TensorType &m = types[static_cast<size_t>(mask)];
      (*batch)[static_cast<size_t>(mask)] =
          makeHostTensorInts(m, std::vector<int64_t>(static_cast<size_t>(m.numElements()), 1));
    }
    return Status::ok();
  }
};

/// The token inputs of a model with data inputs `names` of `types` (--data
/// needs input_ids, labels and optionally attention_mask).
Status tokenInputs(const std::vector<std::string> &names, const std::vector<TensorType> &types,
                   TokenInputs *out);

/// What a TrainRun keeps between its calls.
struct TrainRun::State {
  TrainOptions o;
  RunObserver quiet;
  RunObserver *obs = &quiet;
  std::string hash, resumeDir, runId, saveDir;
  CheckpointMeta resumed;
  bool resuming = false;
  bool noSource = false; ///< neither data nor feeds: stepWith only
  std::vector<HostTensor> fixed;
  TokenData data, val;
  Rng rng;
  TokenInputs tok;
  LabelShift labelShift = LabelShift::Next;
  int64_t tokensPerStep = 0;
  MetricsFile metrics;
  EventWriter tb;
  bool tbOpen = false;
  FlopsReport flops;
  double peak = 0;
  int64_t first = 1;    ///< the first step this run makes
  int64_t savedAt = -1; ///< the step last saved
  double smooth = 0, smoothWeight = 0;
  bool started = false; ///< t0 is set
  std::chrono::steady_clock::time_point t0;
};

} // namespace tc::rt

#endif // TC_RUNTIME_SESSION_RUN_INTERNAL_H
