//===- capi_train_test.cpp - training through the public C API ------------===//
//
// The gpt2 fixture (test/fixtures) compiled with tc-compile --train and
// trained through tc/runtime.h only: its losses equal tc-run's to the bit,
// a save / resume is bit-exact, a token source trains as its token file
// does, calls from another thread during a run (progress, eval, logits,
// generation) leave its losses as they were, inference in one call gives
// logits and greedy tokens of one snapshot, and bad arguments give statuses
// that name them. Compiled with --fp16, a step that overflows is reported
// skipped with its loss scale and changes no entry but the scale's.
//
//===----------------------------------------------------------------------===//
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tc/runtime.h"

namespace {

/// Runs a shell command; its exit code (-1 when it did not exit).
int sh(const std::string &cmd) {
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// The "loss" of every "kind": "train" line of a metrics file, parsed back
/// exactly (the writer's shortest round-trip decimals).
std::vector<double> lossesOf(const std::string &jsonl) {
  std::vector<double> out;
  std::ifstream f(jsonl);
  std::string line;
  while (std::getline(f, line)) {
    if (line.find("\"kind\": \"train\"") == std::string::npos)
      continue;
    size_t p = line.find("\"loss\": ");
    if (p != std::string::npos)
      out.push_back(std::strtod(line.c_str() + p + 8, nullptr));
  }
  return out;
}

/// Bitwise equality of two loss sequences (printed in full on failure).
void expectSameBits(const std::vector<double> &a, const std::vector<double> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(double)), 0)
        << "step " << i + 1 << ": " << a[i] << " vs " << b[i];
}

/// Byte equality of two tensors of the same size.
void expectSameTensor(const tc_tensor_t *a, const tc_tensor_t *b) {
  ASSERT_EQ(tc_tensor_byte_size(a), tc_tensor_byte_size(b));
  EXPECT_EQ(std::memcmp(tc_tensor_data(a), tc_tensor_data(b), tc_tensor_byte_size(a)), 0);
}

/// The index of the largest of f32 `logits`.
int64_t argmax(const tc_tensor_t *logits) {
  const float *z = static_cast<const float *>(tc_tensor_data(logits));
  size_t n = tc_tensor_element_count(logits), best = 0;
  for (size_t i = 1; i < n; ++i)
    if (z[i] > z[best])
      best = i;
  return static_cast<int64_t>(best);
}

std::string message(tc_status_t *st) {
  std::string m = tc_status_message(st);
  tc_status_release(st);
  return m;
}

#define ASSERT_TC_OK(expr)                                                                        \
  do {                                                                                            \
    tc_status_t *st_ = (expr);                                                                    \
    ASSERT_EQ(st_, nullptr) << #expr << ": " << message(st_);                                     \
  } while (0)

/// The losses an observer hears.
struct Heard {
  std::mutex m;
  std::vector<double> losses;
  std::vector<std::string> lines;
  static void step(void *u, const tc_step_metrics_t *r) {
    Heard *h = static_cast<Heard *>(u);
    std::lock_guard<std::mutex> g(h->m);
    h->losses.push_back(r->loss);
  }
  static void line(void *u, const char *t) {
    Heard *h = static_cast<Heard *>(u);
    std::lock_guard<std::mutex> g(h->m);
    h->lines.push_back(t);
  }
  tc_run_observer_t observer() {
    tc_run_observer_t o;
    std::memset(&o, 0, sizeof o);
    o.step = step;
    o.line = line;
    o.user = this;
    return o;
  }
};

class CApiTrain : public ::testing::Test {
protected:
  void SetUp() override {
    // One folder per test: ctest runs the tests in parallel.
    dir = ::testing::TempDir() + "/capi_train_" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(sh("rm -rf " + dir + " && mkdir -p " + dir), 0);
    model = dir + "/m.tca";
    ASSERT_EQ(sh(std::string(TC_COMPILE_PATH) + " " + TC_FIXTURES + "/gpt2.ts.onnx" +
                 " --input input_ids=2x16 --input labels=2x16 --train --optimizer adamw"
                 " --lr 1e-2 " + extraCompileFlags() + " -o " + model + " > " + dir +
                 "/compile.log 2>&1"),
              0);
    // The token file of test/tools/tc-run-train.test.
    tokens = dir + "/tokens.bin";
    std::vector<uint16_t> t(5000);
    for (int i = 0; i < 5000; ++i)
      t[i] = static_cast<uint16_t>((i * 7 + i / 13) % 256);
    std::ofstream(tokens, std::ios::binary)
        .write(reinterpret_cast<const char *>(t.data()), t.size() * 2);
    ASSERT_TC_OK(tc_artifact_open(model.c_str(), &artifact));
  }
  void TearDown() override { tc_artifact_release(artifact); }
  /// More tc-compile flags for the model (a precision).
  virtual std::string extraCompileFlags() const { return ""; }

  /// tc-run's losses for `flags` (and its exit code).
  std::vector<double> tcRun(const std::string &flags, const std::string &name) {
    std::string metrics = dir + "/" + name + ".jsonl";
    EXPECT_EQ(sh(std::string(TC_RUN_PATH) + " " + model + " " + flags + " --metrics " + metrics +
                 " > " + dir + "/" + name + ".log 2>&1"),
              0);
    return lossesOf(metrics);
  }

  tc_train_options_t options(int64_t steps) const {
    tc_train_options_t o;
    tc_train_options_initialize(&o);
    o.steps = steps;
    o.data = tokens.c_str();
    o.warmup = 2;
    o.schedule = "cosine";
    o.log_every = 0;
    return o;
  }

  /// Makes `steps` steps on `t`, saves it as DIR/ck (returned), releases it.
  std::string stepSaveRelease(tc_trainer_t *t, int steps) {
    for (int i = 0; i < steps; ++i)
      EXPECT_EQ(tc_trainer_step(t, nullptr), nullptr);
    std::string ck = dir + "/ck";
    EXPECT_EQ(tc_trainer_save(t, ck.c_str()), nullptr);
    tc_trainer_release(t);
    return ck;
  }

  /// options() resuming `ck` with the run's own data and schedule.
  tc_train_options_t resumeOptions(const std::string &ck) const {
    tc_train_options_t r = options(-1);
    r.resume = ck.c_str();
    r.data = nullptr; // the resumed run's own
    r.warmup = -1;
    r.schedule = nullptr;
    return r;
  }

  std::string dir, model, tokens;
  tc_artifact_t *artifact = nullptr;
};

TEST_F(CApiTrain, LossesEqualTcRunToTheBit) {
  std::vector<double> ref = tcRun("--steps 6 --data " + tokens + " --warmup 2 --lr-schedule cosine",
                                  "tc-run");
  ASSERT_EQ(ref.size(), 6u);

  // The whole run, as tc-run runs it.
  Heard heard;
  tc_run_observer_t obs = heard.observer();
  tc_train_options_t o = options(6);
  std::string metrics = dir + "/capi.jsonl";
  o.metrics = metrics.c_str();
  tc_train_summary_t sum;
  ASSERT_TC_OK(tc_run_train(artifact, &o, &obs, &sum));
  EXPECT_EQ(sum.first_step, 1);
  EXPECT_EQ(sum.last_step, 6);
  expectSameBits(heard.losses, ref);
  expectSameBits(lossesOf(metrics), ref);
  ASSERT_FALSE(heard.lines.empty());
  EXPECT_EQ(heard.lines[0].rfind("device: cpu", 0), 0u) << heard.lines[0];

  // Step by step through a trainer, the metrics as JSON lines.
  o.metrics = nullptr;
  tc_trainer_t *t = nullptr;
  ASSERT_TC_OK(tc_trainer_create(artifact, &o, nullptr, &t));
  std::vector<double> stepped;
  for (int i = 0; i < 6; ++i) {
    tc_step_metrics_t m;
    ASSERT_TC_OK(tc_trainer_step(t, &m));
    EXPECT_EQ(m.step, i + 1);
    EXPECT_EQ(m.tokens, 32);
    EXPECT_TRUE(m.has_grad_norm);
    EXPECT_EQ(m.skipped, 0);
    EXPECT_EQ(m.loss_scale, 0.0); // no loss scaling
    EXPECT_EQ(m.has_fp8_saturated, 0); // no delayed FP8 scaling
    stepped.push_back(m.loss);
    char *json = nullptr;
    ASSERT_TC_OK(tc_metrics_train_json(&m, &json));
    EXPECT_EQ(std::string(json).rfind("{\"schema\": \"tc.metrics/1\", \"kind\": \"train\", "
                                      "\"step\": " + std::to_string(i + 1) + ", \"loss\": ",
                                      0),
              0u)
        << json;
    EXPECT_EQ(std::string(json).find("fp8_saturated"), std::string::npos) << json;
    tc_string_release(json);
    // A step that counts FP8 saturations says how many, as tc-run's lines do.
    m.has_fp8_saturated = 1;
    m.fp8_saturated = 116;
    ASSERT_TC_OK(tc_metrics_train_json(&m, &json));
    EXPECT_NE(std::string(json).find("\"fp8_saturated\": 116"), std::string::npos) << json;
    tc_string_release(json);
  }
  expectSameBits(stepped, ref);
  double lr = 0;
  ASSERT_TC_OK(tc_trainer_learning_rate(t, 1, &lr));
  EXPECT_DOUBLE_EQ(lr, 0.005); // warmup: base 1e-2 / 2
  tc_trainer_release(t);
}

TEST_F(CApiTrain, SaveAndResumeAreBitExact) {
  tc_train_options_t o = options(6);
  tc_trainer_t *full = nullptr;
  Heard all;
  tc_run_observer_t obs = all.observer();
  ASSERT_TC_OK(tc_trainer_create(artifact, &o, &obs, &full));
  tc_train_summary_t sum;
  ASSERT_TC_OK(tc_trainer_run(full, &sum));
  ASSERT_EQ(all.losses.size(), 6u);

  // Three steps, saved; a new trainer resumes to six.
  tc_trainer_t *half = nullptr;
  ASSERT_TC_OK(tc_trainer_create(artifact, &o, nullptr, &half));
  std::string ck = stepSaveRelease(half, 3);

  tc_train_options_t r = resumeOptions(ck);
  Heard rest;
  obs = rest.observer();
  tc_trainer_t *resumed = nullptr;
  ASSERT_TC_OK(tc_trainer_create(artifact, &r, &obs, &resumed));
  ASSERT_TC_OK(tc_trainer_run(resumed, &sum));
  EXPECT_EQ(sum.first_step, 4);
  EXPECT_EQ(sum.last_step, 6);
  expectSameBits(rest.losses, std::vector<double>(all.losses.begin() + 3, all.losses.end()));

  // The same parameters, byte for byte; and the checkpoint files agree.
  for (const char *name : {"transformer.wte.weight", "exp_avg:transformer.wte.weight"}) {
    tc_tensor_t *a = nullptr, *b = nullptr;
    ASSERT_TC_OK(tc_trainer_get_parameter(full, name, &a));
    ASSERT_TC_OK(tc_trainer_get_parameter(resumed, name, &b));
    ASSERT_EQ(tc_tensor_byte_size(a), tc_tensor_byte_size(b));
    EXPECT_EQ(std::memcmp(tc_tensor_data(a), tc_tensor_data(b), tc_tensor_byte_size(a)), 0)
        << name;
    tc_tensor_release(a);
    tc_tensor_release(b);
  }
  std::string f1 = dir + "/f1", f2 = dir + "/f2";
  ASSERT_TC_OK(tc_trainer_save(full, f1.c_str()));
  ASSERT_TC_OK(tc_trainer_save(resumed, f2.c_str()));
  EXPECT_EQ(sh("cmp " + f1 + "/model.safetensors " + f2 + "/model.safetensors"), 0);
  EXPECT_EQ(sh("cmp " + f1 + "/optimizer.safetensors " + f2 + "/optimizer.safetensors"), 0);

  // load_checkpoint brings a trainer back to step 3: steps 4..6 again.
  tc_trainer_t *again = nullptr;
  ASSERT_TC_OK(tc_trainer_create(artifact, &o, nullptr, &again));
  ASSERT_TC_OK(tc_trainer_load_checkpoint(again, ck.c_str()));
  for (int i = 3; i < 6; ++i) {
    tc_step_metrics_t m;
    ASSERT_TC_OK(tc_trainer_step(again, &m));
    EXPECT_EQ(m.step, i + 1);
    EXPECT_EQ(std::memcmp(&m.loss, &all.losses[i], sizeof(double)), 0) << "step " << i + 1;
  }
  // load_weights by parameter name: the weights of step 6, the state of 3.
  ASSERT_TC_OK(tc_trainer_load_weights(again, f1.c_str()));
  tc_trainer_release(again);
  tc_trainer_release(resumed);
  tc_trainer_release(full);
}

TEST_F(CApiTrain, CallsDuringARunLeaveItsLossesAlone) {
  tc_train_options_t o = options(12);
  Heard quiet;
  tc_run_observer_t obs = quiet.observer();
  tc_trainer_t *ref = nullptr;
  ASSERT_TC_OK(tc_trainer_create(artifact, &o, &obs, &ref));
  tc_train_summary_t sum;
  ASSERT_TC_OK(tc_trainer_run(ref, &sum));
  tc_trainer_release(ref);

  Heard busy;
  obs = busy.observer();
  tc_trainer_t *t = nullptr;
  ASSERT_TC_OK(tc_trainer_create(artifact, &o, &obs, &t));
  tc_token_source_t *src = nullptr;
  std::vector<int64_t> ids;
  for (int i = 0; i < 40; ++i)
    ids.push_back((i * 5) % 256);
  ASSERT_TC_OK(tc_token_source_from_memory(ids.data(), ids.size(), &src));
  std::atomic<bool> done{false};
  tc_status_t *runStatus = nullptr;
  std::thread job([&] {
    runStatus = tc_trainer_run(t, &sum);
    done = true;
  });
  int calls = 0, refused = 0;
  std::string failure;
  while (!done.load()) {
    tc_trainer_progress_t p;
    tc_status_t *st = tc_trainer_progress(t, &p);
    double loss = 0;
    if (!st)
      st = tc_trainer_eval(t, src, 2, &loss, nullptr);
    tc_tensor_t *logits = nullptr, *gen = nullptr;
    if (!st)
      st = tc_trainer_next_logits(t, ids.data(), 5, &logits);
    tc_generate_options_t g;
    tc_generate_options_initialize(&g);
    g.max_new_tokens = 2;
    if (!st)
      st = tc_trainer_generate(t, &g, ids.data(), 3, &gen);
    if (!st && logits) {
      EXPECT_EQ(tc_tensor_element_count(logits), 256u);
    }
    tc_tensor_release(logits);
    tc_tensor_release(gen);
    // One call: the first greedy token is the argmax of the logits it
    // returns, whichever step the call lands after.
    logits = gen = nullptr;
    if (!st)
      st = tc_trainer_infer_greedy(t, ids.data(), 5, 2, &logits, &gen);
    if (!st) {
      EXPECT_EQ(tc_tensor_element_count(gen), 7u);
      EXPECT_EQ(static_cast<const int64_t *>(tc_tensor_data(gen))[5], argmax(logits));
    }
    tc_tensor_release(logits);
    tc_tensor_release(gen);
    if (st) {
      failure = message(st);
      break;
    }
    ++calls;
    // A call that changes the training state is refused while the run runs
    // (the same schedule: harmless if the run has just ended).
    tc_status_t *change = tc_trainer_set_learning_rate(t, 1e-2, 2, "cosine");
    if (tc_status_code(change) == TC_STATUS_FAILED_PRECONDITION) {
      ++refused;
      tc_status_release(change);
    } else if (change) {
      failure = message(change);
      break;
    }
  }
  job.join();
  ASSERT_EQ(failure, "");
  ASSERT_EQ(runStatus, nullptr) << message(runStatus);
  EXPECT_GT(calls, 0);
  EXPECT_GT(refused, 0);
  expectSameBits(busy.losses, quiet.losses);
  tc_trainer_progress_t p;
  ASSERT_TC_OK(tc_trainer_progress(t, &p));
  EXPECT_EQ(p.step, 12);
  EXPECT_EQ(p.running, 0);
  tc_token_source_release(src);
  tc_trainer_release(t);
}

TEST_F(CApiTrain, TokenSourceTrainsAsItsTokenFile) {
  std::vector<double> ref =
      tcRun("--steps 6 --data " + tokens + " --warmup 2 --lr-schedule cosine", "tc-run");
  ASSERT_EQ(ref.size(), 6u);
  // The file's tokens, in memory and as a file source: the same windows.
  std::vector<int64_t> ids(5000);
  for (int i = 0; i < 5000; ++i)
    ids[i] = (i * 7 + i / 13) % 256;
  tc_token_source_t *memory = nullptr, *file = nullptr;
  ASSERT_TC_OK(tc_token_source_from_memory(ids.data(), ids.size(), &memory));
  ASSERT_TC_OK(tc_token_source_open(tokens.c_str(), TC_DTYPE_U16, &file));
  for (tc_token_source_t *src : {memory, file}) {
    tc_train_options_t o = options(6);
    o.data = nullptr;
    o.data_source = src;
    Heard heard;
    tc_run_observer_t obs = heard.observer();
    tc_train_summary_t sum;
    ASSERT_TC_OK(tc_run_train(artifact, &o, &obs, &sum));
    expectSameBits(heard.losses, ref);
  }

  // The trainer reads its own copy: the source may go right after create.
  tc_train_options_t o = options(6);
  o.data = nullptr;
  o.data_source = memory;
  tc_trainer_t *half = nullptr;
  ASSERT_TC_OK(tc_trainer_create(artifact, &o, nullptr, &half));
  tc_token_source_release(memory);
  std::string ck = stepSaveRelease(half, 3);

  // Resuming needs the same tokens again: the file's are the same bytes
  // only as a source in memory (the checkpoint hashes the tokens).
  tc_train_options_t r = resumeOptions(ck);
  tc_trainer_t *t = nullptr;
  tc_status_t *st = tc_trainer_create(artifact, &r, nullptr, &t);
  EXPECT_NE(std::string(tc_status_message(st)).find("trained on tokens given in memory"),
            std::string::npos)
      << tc_status_message(st);
  EXPECT_EQ(tc_status_is_input_error(st), 1);
  tc_status_release(st);
  r.data_source = file;
  st = tc_trainer_create(artifact, &r, nullptr, &t);
  EXPECT_NE(std::string(tc_status_message(st)).find("is not the data the run"),
            std::string::npos)
      << tc_status_message(st);
  tc_status_release(st);
  ASSERT_TC_OK(tc_token_source_from_memory(ids.data(), ids.size(), &memory));
  r.data_source = memory;
  Heard rest;
  tc_run_observer_t obs = rest.observer();
  ASSERT_TC_OK(tc_trainer_create(artifact, &r, &obs, &t));
  tc_train_summary_t sum;
  ASSERT_TC_OK(tc_trainer_run(t, &sum));
  EXPECT_EQ(sum.first_step, 4);
  expectSameBits(rest.losses, std::vector<double>(ref.begin() + 3, ref.end()));
  tc_trainer_release(t);

  // A token source and a token file (or feeds) are two data sets.
  o = options(3);
  o.data_source = memory;
  st = tc_trainer_create(artifact, &o, nullptr, &t);
  EXPECT_STREQ(tc_status_message(st), "give either a token source (data_source) or --data, "
                                      "not both");
  tc_status_release(st);
  tc_token_source_release(memory);
  tc_token_source_release(file);
}

TEST_F(CApiTrain, InferGreedyIsNextLogitsAndGenerate) {
  tc_train_options_t o = options(3);
  tc_trainer_t *t = nullptr;
  ASSERT_TC_OK(tc_trainer_create(artifact, &o, nullptr, &t));
  ASSERT_TC_OK(tc_trainer_step(t, nullptr));
  tc_session_t *s = nullptr;
  ASSERT_TC_OK(tc_session_create_from_artifact(artifact, nullptr, &s));
  int64_t prompt[3] = {5, 6, 7};
  tc_generate_options_t g;
  tc_generate_options_initialize(&g);
  g.temperature = 0;
  g.max_new_tokens = 4;
  for (bool trainer : {true, false}) {
    SCOPED_TRACE(trainer ? "trainer" : "session");
    tc_tensor_t *logits = nullptr, *tokens = nullptr, *wantLogits = nullptr,
                *wantTokens = nullptr;
    ASSERT_TC_OK(trainer ? tc_trainer_infer_greedy(t, prompt, 3, 4, &logits, &tokens)
                         : tc_session_infer_greedy(s, prompt, 3, 4, &logits, &tokens));
    ASSERT_TC_OK(trainer ? tc_trainer_next_logits(t, prompt, 3, &wantLogits)
                         : tc_session_next_logits(s, prompt, 3, &wantLogits));
    ASSERT_TC_OK(trainer ? tc_trainer_generate(t, &g, prompt, 3, &wantTokens)
                         : tc_session_generate(s, &g, prompt, 3, &wantTokens));
    EXPECT_STREQ(tc_tensor_name(logits), "logits");
    EXPECT_STREQ(tc_tensor_name(tokens), "tokens");
    expectSameTensor(logits, wantLogits);
    expectSameTensor(tokens, wantTokens);
    EXPECT_EQ(static_cast<const int64_t *>(tc_tensor_data(tokens))[3], argmax(logits));
    tc_tensor_release(logits);
    tc_tensor_release(tokens);
    tc_tensor_release(wantTokens);
    // No new tokens: the logits still, and the prompt alone.
    ASSERT_TC_OK(trainer ? tc_trainer_infer_greedy(t, prompt, 3, 0, &logits, &tokens)
                         : tc_session_infer_greedy(s, prompt, 3, 0, &logits, &tokens));
    expectSameTensor(logits, wantLogits);
    ASSERT_EQ(tc_tensor_element_count(tokens), 3u);
    EXPECT_EQ(std::memcmp(tc_tensor_data(tokens), prompt, sizeof prompt), 0);
    tc_tensor_release(logits);
    tc_tensor_release(tokens);
    tc_tensor_release(wantLogits);
  }
  // Bad arguments name themselves; the outputs are NULL after a failure.
  auto expectInvalid = [](tc_status_t *st, const std::string &names) {
    EXPECT_EQ(tc_status_code(st), TC_STATUS_INVALID_ARGUMENT) << tc_status_message(st);
    EXPECT_NE(std::string(tc_status_message(st)).find(names), std::string::npos)
        << tc_status_message(st);
    tc_status_release(st);
  };
  tc_tensor_t *logits = nullptr, *tokens = nullptr;
  expectInvalid(tc_trainer_infer_greedy(t, prompt, 3, 1, nullptr, &tokens), "out_logits");
  expectInvalid(tc_trainer_infer_greedy(t, prompt, 3, 1, &logits, nullptr), "out_tokens");
  expectInvalid(tc_trainer_infer_greedy(nullptr, prompt, 3, 1, &logits, &tokens), "trainer");
  expectInvalid(tc_session_infer_greedy(nullptr, prompt, 3, 1, &logits, &tokens), "session");
  expectInvalid(tc_trainer_infer_greedy(t, nullptr, 3, 1, &logits, &tokens), "prompt");
  expectInvalid(tc_trainer_infer_greedy(t, prompt, 0, 1, &logits, &tokens), "at least one");
  expectInvalid(tc_session_infer_greedy(s, prompt, 3, -1, &logits, &tokens), "max_new_tokens");
  int64_t outside = 999;
  expectInvalid(tc_trainer_infer_greedy(t, &outside, 1, 1, &logits, &tokens), "999");
  EXPECT_EQ(logits, nullptr);
  EXPECT_EQ(tokens, nullptr);
  tc_session_release(s);
  tc_trainer_release(t);
}

TEST_F(CApiTrain, StepInputsAndStop) {
  // Steps on given inputs: the token windows of the data, fed by hand.
  tc_train_options_t o = options(4);
  o.data = nullptr;
  tc_trainer_t *t = nullptr;
  ASSERT_TC_OK(tc_trainer_create(artifact, &o, nullptr, &t));
  tc_token_source_t *src = nullptr;
  ASSERT_TC_OK(tc_token_source_open(tokens.c_str(), TC_DTYPE_U16, &src));
  EXPECT_EQ(tc_token_source_count(src), 5000);
  uint64_t offsets[2];
  ASSERT_TC_OK(tc_token_source_eval_offsets(src, 2, 16, 0, 1, offsets));
  EXPECT_EQ(offsets[0], 0u);
  tc_tensor_t *ids = nullptr, *labels = nullptr;
  ASSERT_TC_OK(tc_token_source_batch(src, offsets, 2, 16, TC_DTYPE_I64, TC_LABELS_NEXT, &ids,
                                     &labels));
  tc_tensor_view_t v[2];
  tc_tensor_as_view(ids, &v[0]);
  tc_tensor_as_view(labels, &v[1]);
  tc_step_metrics_t m1, m2;
  ASSERT_TC_OK(tc_trainer_step_inputs(t, v, 2, &m1));
  ASSERT_TC_OK(tc_trainer_step_inputs(t, v, 2, &m2));
  EXPECT_EQ(m2.step, 2);
  EXPECT_LT(m2.loss, m1.loss); // the same batch twice: it learns it
  // Without data, tc_trainer_step has nothing to draw from.
  tc_status_t *st = tc_trainer_step(t, nullptr);
  EXPECT_EQ(tc_status_code(st), TC_STATUS_FAILED_PRECONDITION);
  tc_status_release(st);
  // A wrong input name is named.
  v[1].name = "lables";
  st = tc_trainer_step_inputs(t, v, 2, nullptr);
  EXPECT_EQ(tc_status_code(st), TC_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tc_status_message(st)).find("'lables'"), std::string::npos)
      << tc_status_message(st);
  tc_status_release(st);
  tc_tensor_release(ids);
  tc_tensor_release(labels);
  tc_token_source_release(src);
  tc_trainer_release(t);

  // request_stop: the run stops after a step, saving it.
  o = options(50);
  std::string ck = dir + "/stopped";
  o.save = ck.c_str();
  ASSERT_TC_OK(tc_trainer_create(artifact, &o, nullptr, &t));
  tc_trainer_request_stop(t);
  tc_train_summary_t sum;
  ASSERT_TC_OK(tc_trainer_run(t, &sum));
  EXPECT_EQ(sum.interrupted, -1);
  EXPECT_EQ(sum.last_step, 1);
  EXPECT_EQ(sh("test -f " + ck + "/state.json"), 0);
  tc_trainer_release(t);
}

TEST_F(CApiTrain, BadArgumentsNameTheArgument) {
  auto expectInvalid = [](tc_status_t *st, const std::string &names) {
    EXPECT_EQ(tc_status_code(st), TC_STATUS_INVALID_ARGUMENT) << tc_status_message(st);
    EXPECT_NE(std::string(tc_status_message(st)).find(names), std::string::npos)
        << tc_status_message(st);
    EXPECT_EQ(tc_status_is_input_error(st), 1);
    tc_status_release(st);
  };
  tc_trainer_t *t = nullptr;
  tc_train_options_t o = options(3);
  expectInvalid(tc_trainer_create(artifact, &o, nullptr, nullptr), "out_trainer");
  expectInvalid(tc_trainer_create(nullptr, &o, nullptr, &t), "artifact");
  o.steps = -3;
  expectInvalid(tc_trainer_create(artifact, &o, nullptr, &t), "options->steps");
  o = options(3);
  o.device = TC_DEVICE_CUDA;
  o.device_ordinal = -1;
  expectInvalid(tc_trainer_create(artifact, &o, nullptr, &t), "options->device_ordinal");
  o = options(3);
  o.num_feeds = 1;
  expectInvalid(tc_trainer_create(artifact, &o, nullptr, &t), "options->feeds");
  // The run's own checks keep tc-run's words, as input errors.
  o = options(3);
  o.save_every = 2;
  tc_status_t *st = tc_trainer_create(artifact, &o, nullptr, &t);
  EXPECT_STREQ(tc_status_message(st), "--save-every needs --save DIR");
  EXPECT_EQ(tc_status_is_input_error(st), 1);
  tc_status_release(st);

  o = options(3);
  ASSERT_TC_OK(tc_trainer_create(artifact, &o, nullptr, &t));
  double loss = 0;
  expectInvalid(tc_trainer_eval(t, nullptr, 1, &loss, nullptr), "source");
  tc_token_source_t *src = nullptr;
  int64_t few[3] = {1, 2, 3};
  ASSERT_TC_OK(tc_token_source_from_memory(few, 3, &src));
  expectInvalid(tc_trainer_eval(t, src, 0, &loss, nullptr), "iters");
  expectInvalid(tc_trainer_eval(t, src, 1, &loss, nullptr), "seq+1");
  tc_token_source_release(src);
  int64_t neg = -1;
  expectInvalid(tc_token_source_from_memory(&neg, 1, &src), "tokens[0]");
  expectInvalid(tc_trainer_set_learning_rate(t, -1, 0, nullptr), "lr");
  expectInvalid(tc_trainer_set_learning_rate(t, 1, 0, "linear"), "schedule");
  tc_tensor_t *x = nullptr;
  st = tc_trainer_get_parameter(t, "nope", &x);
  EXPECT_EQ(tc_status_code(st), TC_STATUS_NOT_FOUND);
  EXPECT_NE(std::string(tc_status_message(st)).find("'nope'"), std::string::npos);
  tc_status_release(st);
  expectInvalid(tc_trainer_next_logits(t, nullptr, 0, &x), "context");
  expectInvalid(tc_trainer_generate(t, nullptr, few, 3, nullptr), "out_tokens");
  expectInvalid(tc_trainer_learning_rate(t, -2, &loss), "step");
  tc_trainer_release(t);
  tc_trainer_release(nullptr); // NULL-safe
  expectInvalid(tc_token_source_open(tokens.c_str(), TC_DTYPE_I32, &src), "token_dtype");
  expectInvalid(tc_npy_read(nullptr, "x", &x), "path");
}

TEST_F(CApiTrain, CpuSessionKeepsItsState) {
  // A CPU session holds the parameters and optimizer state as a CUDA one
  // does: train_step updates them, so the same batch twice loses less.
  tc_session_t *s = nullptr;
  ASSERT_TC_OK(tc_session_create_from_artifact(artifact, nullptr, &s));
  tc_token_source_t *src = nullptr;
  ASSERT_TC_OK(tc_token_source_open(tokens.c_str(), TC_DTYPE_U16, &src));
  uint64_t offsets[2] = {0, 100};
  tc_tensor_t *ids = nullptr, *labels = nullptr;
  ASSERT_TC_OK(tc_token_source_batch(src, offsets, 2, 16, TC_DTYPE_I64, TC_LABELS_NEXT, &ids,
                                     &labels));
  float lr = 1e-2f, step = 1;
  tc_tensor_view_t in[4];
  tc_tensor_as_view(ids, &in[0]);
  tc_tensor_as_view(labels, &in[1]);
  in[2] = {"lr", TC_DTYPE_F32, 0, nullptr, &lr, sizeof lr};
  in[3] = {"step", TC_DTYPE_F32, 0, nullptr, &step, sizeof step};
  size_t n = 0;
  ASSERT_TC_OK(tc_session_output_count(s, "train_step", &n));
  std::vector<tc_tensor_t *> out(n);
  double losses[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_TC_OK(tc_session_run(s, "train_step", in, 4, out.data(), n));
    ASSERT_TC_OK(tc_tensor_to_f64(out[0], &losses[i], 1));
    for (tc_tensor_t *t : out)
      tc_tensor_release(t);
    step = 2;
  }
  EXPECT_LT(losses[1], losses[0]);
  // Generation on the session: greedy is deterministic, the prompt comes first.
  tc_generate_options_t g;
  tc_generate_options_initialize(&g);
  g.temperature = 0;
  g.max_new_tokens = 3;
  int64_t prompt[2] = {5, 6};
  tc_tensor_t *a = nullptr, *b = nullptr;
  ASSERT_TC_OK(tc_session_generate(s, &g, prompt, 2, &a));
  ASSERT_TC_OK(tc_session_generate(s, &g, prompt, 2, &b));
  ASSERT_EQ(tc_tensor_element_count(a), 5u);
  EXPECT_EQ(static_cast<const int64_t *>(tc_tensor_data(a))[1], 6);
  EXPECT_EQ(std::memcmp(tc_tensor_data(a), tc_tensor_data(b), tc_tensor_byte_size(a)), 0);
  tc_tensor_release(a);
  tc_tensor_release(b);
  tc_tensor_release(ids);
  tc_tensor_release(labels);
  tc_token_source_release(src);
  tc_session_release(s);
}

TEST_F(CApiTrain, TensorFilesRoundTrip) {
  int64_t shape[2] = {2, 3};
  float data[6] = {1, 2, 3, 4, 5, 6};
  tc_tensor_view_t v{"w", TC_DTYPE_F32, 2, shape, data, sizeof data};
  std::string npy = dir + "/w.npy", st = dir + "/w.safetensors";
  ASSERT_TC_OK(tc_npy_write(npy.c_str(), &v));
  tc_tensor_t *t = nullptr;
  ASSERT_TC_OK(tc_npy_read(npy.c_str(), "w", &t));
  EXPECT_EQ(tc_tensor_rank(t), 2u);
  EXPECT_EQ(std::memcmp(tc_tensor_data(t), data, sizeof data), 0);
  double d[6];
  ASSERT_TC_OK(tc_tensor_to_f64(t, d, 6));
  EXPECT_EQ(d[5], 6.0);
  tc_tensor_release(t);
  ASSERT_TC_OK(tc_safetensors_write(st.c_str(), &v, 1));
  tc_tensor_list_t *list = nullptr;
  ASSERT_TC_OK(tc_safetensors_read(st.c_str(), &list));
  ASSERT_EQ(tc_tensor_list_count(list), 1u);
  const tc_tensor_t *w = tc_tensor_list_find(list, "w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(std::memcmp(tc_tensor_data(w), data, sizeof data), 0);
  EXPECT_EQ(tc_tensor_list_find(list, "v"), nullptr);
  tc_tensor_list_release(list);
  char *text = nullptr;
  ASSERT_TC_OK(tc_type_to_string(TC_DTYPE_F32, 2, shape, &text));
  EXPECT_STREQ(text, "f32 2x3");
  tc_string_release(text);
  EXPECT_STREQ(tc_version(), "0.3.0");
}

/// The fixture compiled with --fp16 and an initial loss scale of 2^24, which
/// overflows in f16 (GradScaler's first steps often skip, too).
class CApiTrainFp16 : public CApiTrain {
protected:
  std::string extraCompileFlags() const override {
    return "--fp16 --loss-scale-init 16777216 --loss-scale-growth-interval 3";
  }
};

TEST_F(CApiTrainFp16, SkippedStepsChangeOnlyTheScale) {
  tc_train_options_t o = options(12);
  tc_trainer_t *t = nullptr;
  ASSERT_TC_OK(tc_trainer_create(artifact, &o, nullptr, &t));
  auto entry = [&](const char *name) {
    tc_tensor_t *v = nullptr;
    EXPECT_EQ(tc_trainer_get_parameter(t, name, &v), nullptr) << name;
    return v;
  };
  auto scalar = [&](const char *name) {
    tc_tensor_t *v = entry(name);
    double d = -1;
    EXPECT_EQ(tc_tensor_to_f64(v, &d, 1), nullptr);
    tc_tensor_release(v);
    return d;
  };
  EXPECT_EQ(scalar("grad_scaler:scale"), 16777216.0);
  double scale = 16777216.0;
  int skipped = 0, clean = 0;
  for (int i = 0; i < 12; ++i) {
    tc_tensor_t *w0 = entry("transformer.wte.weight"), *m0 = entry("exp_avg:transformer.wte.weight");
    tc_step_metrics_t m;
    ASSERT_TC_OK(tc_trainer_step(t, &m));
    EXPECT_EQ(m.loss_scale, scale) << "step " << m.step;
    tc_tensor_t *w1 = entry("transformer.wte.weight"), *m1 = entry("exp_avg:transformer.wte.weight");
    bool same = std::memcmp(tc_tensor_data(w0), tc_tensor_data(w1), tc_tensor_byte_size(w0)) == 0 &&
                std::memcmp(tc_tensor_data(m0), tc_tensor_data(m1), tc_tensor_byte_size(m0)) == 0;
    EXPECT_EQ(same, m.skipped != 0) << "step " << m.step;
    for (tc_tensor_t *x : {w0, m0, w1, m1})
      tc_tensor_release(x);
    char *json = nullptr;
    ASSERT_TC_OK(tc_metrics_train_json(&m, &json));
    EXPECT_NE(std::string(json).find(m.skipped ? "\"skipped\": true}" : "\"skipped\": false}"),
              std::string::npos)
        << json;
    tc_string_release(json);
    if (m.skipped) {
      ++skipped;
      scale /= 2;
    } else {
      ++clean;
      EXPECT_TRUE(m.has_grad_norm);
    }
    EXPECT_EQ(scalar("grad_scaler:skipped_steps"), skipped);
    if (m.step == 1)
      EXPECT_EQ(m.skipped, 1); // 2^24 overflows f16
    if (!m.skipped && scalar("grad_scaler:scale") != scale) {
      EXPECT_EQ(scalar("grad_scaler:scale"), 2 * scale) << "step " << m.step;
      scale *= 2;
      EXPECT_EQ(scalar("grad_scaler:growth_tracker"), 0.0);
    }
  }
  EXPECT_GT(skipped, 0);
  EXPECT_GT(clean, 0);
  tc_trainer_release(t);
}

// loss = sum(w * x) compiled with --fp16 and two micro-batches: the
// gradient of a micro-batch is x * scale (f32), so an input of 1e35 makes it
// inf while the other micro-batch's stays finite. Either micro-batch's inf
// skips the step (w and the scale's tracker kept, the scale halved); clean
// micro-batches step.
TEST(CApiTrainFp16Accum, AnyMicroBatchOverflowSkipsTheStep) {
  std::string dir = ::testing::TempDir() + "/capi_train_fp16_accum";
  ASSERT_EQ(sh("rm -rf " + dir + " && mkdir -p " + dir), 0);
  std::ofstream(dir + "/dot.onnxtxt") << R"(<ir_version: 8, opset_import: ["" : 17]>
dot (float[4] x) => (float loss) <float[4] w = {1.0, 2.0, 3.0, 4.0}> {
  p = Mul(w, x)
  loss = ReduceSum <keepdims = 0> (p)
}
)";
  std::string model = dir + "/dot.tca";
  ASSERT_EQ(sh(std::string(TC_COMPILE_PATH) + " " + dir + "/dot.onnxtxt --train --fp16"
               " --optimizer sgd --lr 0.5 --grad-accum 2 -o " + model + " > " + dir +
               "/compile.log 2>&1"),
            0);
  tc_artifact_t *artifact = nullptr;
  ASSERT_TC_OK(tc_artifact_open(model.c_str(), &artifact));
  tc_train_options_t o;
  tc_train_options_initialize(&o);
  o.steps = 5;
  o.log_every = 0;
  tc_trainer_t *t = nullptr;
  ASSERT_TC_OK(tc_trainer_create(artifact, &o, nullptr, &t));
  auto values = [&](const char *name) {
    tc_tensor_t *v = nullptr;
    EXPECT_EQ(tc_trainer_get_parameter(t, name, &v), nullptr) << name;
    std::vector<double> d(tc_tensor_element_count(v));
    EXPECT_EQ(tc_tensor_to_f64(v, d.data(), d.size()), nullptr);
    tc_tensor_release(v);
    return d;
  };
  int64_t shape[1] = {4};
  const float one[4] = {1, 1, 1, 1}, huge[4] = {1, 1e35f, 1, 1};
  auto step = [&](const float *a, const float *b, tc_step_metrics_t *m) {
    tc_tensor_view_t v[2] = {{"x", TC_DTYPE_F32, 1, shape, a, sizeof one},
                             {"x", TC_DTYPE_F32, 1, shape, b, sizeof one}};
    return tc_trainer_step_inputs(t, v, 2, m);
  };
  tc_step_metrics_t m;
  // Clean: w -= lr * mean(x) = w - 0.5 (the scale divided out exactly).
  ASSERT_TC_OK(step(one, one, &m));
  EXPECT_EQ(m.skipped, 0);
  EXPECT_EQ(m.loss_scale, 65536.0);
  EXPECT_EQ(values("w"), (std::vector<double>{0.5, 1.5, 2.5, 3.5}));
  EXPECT_EQ(values("grad_scaler:growth_tracker"), std::vector<double>{1});
  // The second micro-batch overflows, then the first: both steps skip.
  for (auto [a, b] : {std::pair<const float *, const float *>{one, huge}, {huge, one}}) {
    double scale = values("grad_scaler:scale")[0];
    ASSERT_TC_OK(step(a, b, &m));
    EXPECT_EQ(m.skipped, 1);
    EXPECT_EQ(m.loss_scale, scale);
    EXPECT_FALSE(m.has_grad_norm);
    EXPECT_EQ(values("w"), (std::vector<double>{0.5, 1.5, 2.5, 3.5}));
    EXPECT_EQ(values("grad_scaler:scale"), std::vector<double>{scale / 2});
    EXPECT_EQ(values("grad_scaler:growth_tracker"), std::vector<double>{0});
  }
  EXPECT_EQ(values("grad_scaler:skipped_steps"), std::vector<double>{2});
  // An inf loss on a skipped step is no error (as torch's GradScaler
  // allows): the metrics say null.
  const float inf[4] = {3e38f, 3e38f, 3e38f, 3e38f};
  ASSERT_TC_OK(step(inf, inf, &m));
  EXPECT_EQ(m.skipped, 1);
  EXPECT_TRUE(std::isinf(m.loss));
  char *json = nullptr;
  ASSERT_TC_OK(tc_metrics_train_json(&m, &json));
  EXPECT_NE(std::string(json).find("\"loss\": null"), std::string::npos) << json;
  tc_string_release(json);
  ASSERT_TC_OK(step(one, one, &m));
  EXPECT_EQ(m.skipped, 0);
  EXPECT_EQ(m.loss_scale, 8192.0);
  EXPECT_EQ(values("w"), (std::vector<double>{0, 1, 2, 3}));
  tc_trainer_release(t);
  tc_artifact_release(artifact);

  // A scale of 2^127 never grows to inf (GradScaler keeps it), though every
  // step reaches the growth interval of 1; the tracker restarts.
  ASSERT_EQ(sh(std::string(TC_COMPILE_PATH) + " " + dir + "/dot.onnxtxt --train --fp16"
               " --optimizer sgd --lr 0.5 --grad-accum 2 --loss-scale-init 1.7014118346046923e38"
               " --loss-scale-growth-interval 1 -o " + model + " > " + dir + "/compile2.log 2>&1"),
            0);
  ASSERT_TC_OK(tc_artifact_open(model.c_str(), &artifact));
  ASSERT_TC_OK(tc_trainer_create(artifact, &o, nullptr, &t));
  const float tiny[4] = {1e-30f, 1e-30f, 1e-30f, 1e-30f};
  for (int i = 0; i < 2; ++i) {
    ASSERT_TC_OK(step(tiny, tiny, &m));
    EXPECT_EQ(m.skipped, 0);
    EXPECT_EQ(values("grad_scaler:scale"), std::vector<double>{0x1p127});
    EXPECT_EQ(values("grad_scaler:growth_tracker"), std::vector<double>{0});
  }
  tc_trainer_release(t);
  tc_artifact_release(artifact);
}

} // namespace
