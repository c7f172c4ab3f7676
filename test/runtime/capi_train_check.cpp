//===- capi_train_check.cpp - training through the C API, as a program ----===//
//
//   capi_train_check MODEL.tca OUT_DIR (cpu|cuda) STEPS K --feed NAME=FILE.npy ...
//
// Trains MODEL through tc/runtime.h only (no other header): STEPS steps on
// the feeds (metrics: OUT_DIR/capi-full.jsonl), then K steps saved with
// tc_trainer_save and resumed by a new trainer to STEPS
// (OUT_DIR/capi-resumed.jsonl). Prints "PASS: ..." when the resumed steps'
// losses equal the full run's to the bit, "FAIL: ..." otherwise (exit 1);
// "SKIP: ..." (exit 0) for cuda without a usable GPU. cuBLASLt's heuristic
// choice is used (matmul_tune 0, as TC_MATMUL_TUNE=0 for tc-run), so
// scripts/gpu-check.sh can compare capi-full.jsonl with tc-run's losses.
//
//===----------------------------------------------------------------------===//
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/include/tc/runtime.h"

namespace {

int fail(const std::string &what, tc_status_t *st) {
  std::printf("FAIL: %s: %s\n", what.c_str(), tc_status_message(st));
  tc_status_release(st);
  return 1;
}

struct Losses {
  std::vector<double> v;
  static void step(void *u, const tc_step_metrics_t *m) {
    static_cast<Losses *>(u)->v.push_back(m->loss);
  }
};

} // namespace

int main(int argc, char **argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: capi_train_check MODEL.tca OUT_DIR (cpu|cuda) STEPS K "
                         "--feed NAME=FILE.npy ...\n");
    return 2;
  }
  std::string model = argv[1], out = argv[2], device = argv[3];
  int64_t steps = std::atoll(argv[4]), half = std::atoll(argv[5]);
  std::vector<std::string> names, paths;
  for (int i = 6; i + 1 < argc; i += 2) {
    std::string f = argv[i + 1];
    size_t eq = f.find('=');
    if (std::strcmp(argv[i], "--feed") != 0 || eq == std::string::npos) {
      std::fprintf(stderr, "capi_train_check: expected --feed NAME=FILE.npy, got %s\n", argv[i]);
      return 2;
    }
    names.push_back(f.substr(0, eq));
    paths.push_back(f.substr(eq + 1));
  }
  std::vector<tc_feed_t> feeds;
  for (size_t i = 0; i < names.size(); ++i)
    feeds.push_back({names[i].c_str(), paths[i].c_str()});
  if (device == "cuda") {
    if (tc_status_t *st = tc_cuda_check()) {
      std::printf("SKIP: %s\n", tc_status_message(st));
      tc_status_release(st);
      return 0;
    }
  }
  tc_artifact_t *artifact = nullptr;
  if (tc_status_t *st = tc_artifact_open(model.c_str(), &artifact))
    return fail("tc_artifact_open", st);

  tc_train_options_t o;
  tc_train_options_initialize(&o);
  o.steps = steps;
  o.feeds = feeds.data();
  o.num_feeds = feeds.size();
  o.log_every = 0;
  o.device = device == "cuda" ? TC_DEVICE_CUDA : TC_DEVICE_CPU;
  o.cuda.matmul_tune = 0;
  std::string fullMetrics = out + "/capi-full.jsonl", resumedMetrics = out + "/capi-resumed.jsonl";
  std::string ck = out + "/capi-ck";
  std::remove(fullMetrics.c_str());
  std::remove(resumedMetrics.c_str());

  Losses full, resumed;
  tc_run_observer_t obs;
  std::memset(&obs, 0, sizeof obs);
  obs.step = Losses::step;
  obs.user = &full;
  o.metrics = fullMetrics.c_str();
  tc_trainer_t *t = nullptr;
  if (tc_status_t *st = tc_trainer_create(artifact, &o, &obs, &t))
    return fail("tc_trainer_create", st);
  tc_train_summary_t sum;
  if (tc_status_t *st = tc_trainer_run(t, &sum))
    return fail("tc_trainer_run", st);
  tc_trainer_release(t);

  o.metrics = nullptr;
  if (tc_status_t *st = tc_trainer_create(artifact, &o, nullptr, &t))
    return fail("tc_trainer_create", st);
  for (int64_t i = 0; i < half; ++i)
    if (tc_status_t *st = tc_trainer_step(t, nullptr))
      return fail("tc_trainer_step", st);
  if (tc_status_t *st = tc_trainer_save(t, ck.c_str()))
    return fail("tc_trainer_save", st);
  tc_trainer_release(t);

  o.resume = ck.c_str();
  o.metrics = resumedMetrics.c_str();
  obs.user = &resumed;
  if (tc_status_t *st = tc_trainer_create(artifact, &o, &obs, &t))
    return fail("tc_trainer_create (resume)", st);
  if (tc_status_t *st = tc_trainer_run(t, &sum))
    return fail("tc_trainer_run (resume)", st);
  tc_trainer_release(t);
  tc_artifact_release(artifact);

  bool same = full.v.size() == static_cast<size_t>(steps) &&
              resumed.v.size() == static_cast<size_t>(steps - half);
  for (size_t i = 0; same && i < resumed.v.size(); ++i)
    same = std::memcmp(&resumed.v[i], &full.v[half + static_cast<int64_t>(i)], sizeof(double)) == 0;
  std::printf("%s: %s, %lld steps, resumed at %lld:", same ? "PASS" : "FAIL", device.c_str(),
              static_cast<long long>(steps), static_cast<long long>(half));
  for (size_t i = 0; i < resumed.v.size(); ++i)
    std::printf(" %.9g/%.9g", resumed.v[i],
                half + i < full.v.size() ? full.v[half + i] : 0.0);
  std::printf("\n");
  return same ? 0 : 1;
}
