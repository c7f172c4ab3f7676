//===- model.h - the service's model: one artifact, one training job -*- C++ -*-===//
//
// Everything tc-service does with the tc runtime, through its public C API
// (tc/runtime.h) only: open an artifact, run a training job in a background
// thread (tc_trainer_run), evaluate and run inference on the live weights.
//
// Live weights and bit-identical jobs come from the trainer's contract
// (runtime.h, "trainers"): tc_trainer_run holds the trainer for each step and
// lets waiting calls in between two steps; tc_trainer_eval and
// tc_trainer_infer_greedy read the weights and change nothing a later step
// depends on. So a request made during a job waits for at most the step in
// flight, and the job's losses are those of a job nobody asked anything;
// /infer's logits and generated tokens come from one call, so from the
// weights of one step.
//
// Between jobs the requests use the last job's trainer (its trained
// weights); before the first job, a trainer on the artifact's weights that
// never steps. An artifact compiled without --train serves /infer from a
// session and refuses /eval and /train/start.
//
//===----------------------------------------------------------------------===//
#ifndef TC_EXAMPLES_SERVICE_MODEL_H
#define TC_EXAMPLES_SERVICE_MODEL_H

#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tc/runtime.h"

namespace tc_service {

/// What a request got wrong (http 4xx) or what failed inside (5xx), with the
/// message the client reads.
struct Failure {
  int http = 400;
  std::string message;
};

/// POST /train/start, validated (http_api.cpp).
struct JobConfig {
  int64_t steps = 100;
  double lr = -1; ///< < 0: the artifact's (tc-compile --lr)
  int64_t warmup = 0;
  std::string schedule = "constant"; ///< or "cosine"
  std::string data;                  ///< a token file; "" = synthetic tokens
  std::string dataDtype = "uint16";  ///< of the token file: "uint16" or "uint32"
  int64_t seed = 1337;
};

/// GET /train/status.
struct JobStatus {
  std::string state = "idle"; ///< idle, running, stopped, finished, failed
  int64_t step = 0, steps = 0;
  double loss = NAN;      ///< of the last step (NaN before the first)
  double tokensPerS = 0;  ///< the last step's
  double elapsedS = 0;    ///< since the job started
  std::string error;      ///< why a failed job failed
  std::string data;       ///< "synthetic" or the token file
};

class Model {
public:
  /// Opens the artifact at `path` for `device` ("cpu" or "cuda"). nullptr
  /// and `*error` when it cannot.
  static std::unique_ptr<Model> load(const std::string &path, const std::string &device,
                                     std::string *error);
  ~Model();
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;

  int64_t batch() const { return batch_; }
  int64_t context() const { return context_; }
  int64_t vocab() const { return vocab_; }
  bool canTrain() const { return canTrain_; }
  const std::string &device() const { return device_; }
  const std::string &artifact() const { return path_; }

  /// The next-token logits after `tokens` (its last context() tokens) and,
  /// when `newTokens` > 0, that many tokens of greedy generation after them,
  /// both from the same weights.
  /// Token ids must be in [0, vocab()).
  bool infer(const std::vector<int64_t> &tokens, int64_t newTokens, std::vector<float> *logits,
             std::vector<int64_t> *generated, Failure *failure);

  /// The mean loss over `tokens` (at least context() + 1): the runtime's
  /// evaluation, batch() evenly spaced windows of context() tokens, each
  /// predicting the token after it. `*evaluated` is the tokens it covered.
  bool eval(const std::vector<int64_t> &tokens, double *loss, int64_t *evaluated,
            Failure *failure);

  /// Starts a training job from the artifact's initial weights (409 while
  /// one runs; 400 for what the runtime refuses in the config).
  bool startJob(const JobConfig &config, Failure *failure);
  /// Asks the running job to stop after its current step and waits for it;
  /// `*after` is its status then. 409 when none runs.
  bool stopJob(JobStatus *after, Failure *failure);
  JobStatus status() const;
  /// The loss of every step of the current (or last) job, in order.
  std::vector<double> losses() const;

private:
  struct Run; // a job's trainer (released with its last user)
  Model() = default;
  std::shared_ptr<Run> current() const;
  void runJob(std::shared_ptr<Run> run);
  static void onStep(void *user, const tc_step_metrics_t *metrics);

  std::string path_, device_;
  int64_t batch_ = 0, context_ = 0, vocab_ = 0;
  bool canTrain_ = false;
  tc_artifact_t *artifact_ = nullptr;
  tc_session_t *session_ = nullptr; ///< an artifact without training only

  mutable std::mutex mutex_; ///< guards what follows
  std::shared_ptr<Run> run_; ///< what requests use: the job's trainer, or the idle one
  JobStatus status_;
  std::vector<double> losses_;
  double jobStart_ = 0;
  std::thread job_;
  std::mutex jobMutex_; ///< serialises start and stop
};

} // namespace tc_service

#endif // TC_EXAMPLES_SERVICE_MODEL_H
