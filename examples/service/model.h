//===- model.h - the service's model: one artifact, one training job -*- C++ -*-===//
//
// Everything tc-service does with the tc runtime, through its public C API
// (tc/runtime.h) only: load an artifact, run a training job in a background
// thread, evaluate and run inference on the live weights.
//
// Live weights and bit-identical jobs: the job holds the weights lock for
// each step and lets go of it between steps; eval and infer take the same
// lock, so they see the weights of a whole number of steps and never change
// what the next step computes (they do not touch the trainer's optimizer
// state, data position or RNG). The lock is FIFO (FairLock), so a request
// waits for at most the step in flight and the requests queued before it,
// never for a job that keeps taking the lock back.
//
//===----------------------------------------------------------------------===//
#ifndef TC_EXAMPLES_SERVICE_MODEL_H
#define TC_EXAMPLES_SERVICE_MODEL_H

#include <condition_variable>
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

/// A FIFO mutex: lock() is served in the order it was called (a ticket
/// lock), so the training thread, which locks again right after unlocking,
/// cannot starve the requests waiting for the weights.
class FairLock {
public:
  void lock();
  void unlock();

private:
  std::mutex mutex_;
  std::condition_variable turn_;
  uint64_t next_ = 0, serving_ = 0;
};

/// POST /train/start, validated (http_api.cpp).
struct JobConfig {
  int64_t steps = 100;
  double lr = 0; ///< 0: the artifact's (tc-compile --lr)
  int64_t warmup = 0;
  std::string schedule = "constant"; ///< or "cosine"
  std::string data;                  ///< a token file; "" = synthetic tokens
  std::string dataDtype = "uint16";  ///< of the token file: "uint16" or "uint32"
  uint64_t seed = 1337;
};

/// GET /train/status.
struct JobStatus {
  std::string state = "idle"; ///< idle, running, stopping, stopped, finished, failed
  int64_t step = 0, steps = 0;
  double loss = 0;        ///< of the last step (NaN before the first)
  double tokensPerS = 0;  ///< training tokens over the job's wall time
  double elapsedS = 0;
  std::string error;      ///< why a failed job failed
  std::string data;       ///< "synthetic" or the token file
};

class Model {
public:
  /// Loads the artifact at `path` on `device` ("cpu" or "cuda"). nullptr and
  /// `*error` when it cannot.
  static std::unique_ptr<Model> load(const std::string &path, const std::string &device,
                                     std::string *error);
  ~Model();
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;

  int64_t batch() const { return batch_; }
  int64_t context() const { return context_; }
  int64_t vocab() const { return vocab_; }
  const std::string &device() const { return device_; }
  const std::string &artifact() const { return path_; }

  /// The next-token logits after `tokens` (its last context() tokens), and
  /// `newTokens` tokens of greedy generation after them. Token ids must be
  /// in [0, vocab()).
  bool infer(const std::vector<int64_t> &tokens, int64_t newTokens, std::vector<float> *logits,
             std::vector<int64_t> *generated, int64_t *weightsStep, Failure *failure);

  /// The mean next-token loss over `tokens` (at least 2, at most
  /// batch() * context() + 1): windows of context() tokens predict the token
  /// after each. `*positions` is how many predictions the mean is over.
  bool eval(const std::vector<int64_t> &tokens, double *loss, int64_t *positions,
            int64_t *weightsStep, Failure *failure);

  /// Starts a training job from the artifact's initial weights (409 while
  /// one runs).
  bool startJob(const JobConfig &config, Failure *failure);
  /// Asks the running job to stop after its current step and waits for it
  /// (409 when none runs).
  bool stopJob(JobStatus *after, Failure *failure);
  JobStatus status() const;
  /// The loss of every step of the current (or last) job, in order.
  std::vector<double> losses() const;

private:
  Model() = default;
  void runJob(JobConfig config);
  void joinJob();

  std::string path_, device_;
  int64_t batch_ = 0, context_ = 0, vocab_ = 0;
  tc_session_t *session_ = nullptr;

  FairLock weights_; ///< held by a step, an eval, an inference
  mutable std::mutex statusMutex_;
  JobStatus status_;
  std::vector<double> losses_;
  bool stopRequested_ = false;
  std::thread job_;
  std::mutex jobMutex_; ///< serialises start/stop
};

} // namespace tc_service

#endif // TC_EXAMPLES_SERVICE_MODEL_H
