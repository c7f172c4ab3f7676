//===- run_metrics.cpp - what a training run records ----------------------===//
//
// The tc.metrics/1 JSON lines (docs/metrics.md), the FLOPs report that MFU
// and HFU come from, and the small formatting helpers of the run's messages.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/session/run_internal.h"

#include "runtime/src/base/json.h"

namespace tc::rt {

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

bool readFlops(const Artifact &a, FlopsReport *out) {
  auto it = a.reports.find("flops");
  if (it == a.reports.end())
    return false;
  JsonValue v;
  if (!parseJson(it->second, &v, "flops").isOk() || !v.isObject())
    return false;
  const JsonValue *m = v.find("model_flops_per_token"), *h = v.find("hardware_flops_per_step"),
                  *dt = v.find("dtype"), *peaks = v.find("peaks");
  if (!m || !m->isNumber() || !h || !h->isNumber() || !peaks || !peaks->isArray())
    return false;
  out->modelFlopsPerToken = m->num;
  out->hardwareFlopsPerStep = h->num;
  out->dtype = dt && dt->isString() ? dt->str : "";
  for (const JsonValue &p : peaks->array) {
    const JsonValue *n = p.find("match"), *f = p.find("dense_flops");
    if (n && n->isString() && f && f->isNumber())
      out->peaks.push_back({n->str, f->num});
  }
  return true;
}

double peakFor(const FlopsReport &f, const std::string &device) {
  for (const auto &[match, flops] : f.peaks)
    if (device.find(match) != std::string::npos)
      return flops;
  return 0;
}

namespace {

std::string jsonOrNull(double v, bool known) { return known ? shortestDecimal(v) : "null"; }

std::string wallJsonPrefix(const char *kind) {
  return std::string("{\"schema\": \"") + kMetricsSchema + "\", \"kind\": \"" + kind + "\"";
}

} // namespace

double wall() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string trainMetricsJson(const StepRecord &r) {
  return wallJsonPrefix("train") + ", \"step\": " + std::to_string(r.step) +
         ", \"loss\": " + shortestDecimal(r.loss) + ", \"loss_smooth\": " +
         shortestDecimal(r.lossSmooth) + ", \"lr\": " + shortestDecimal(r.lr) +
         ", \"grad_norm\": " + shortestDecimal(r.gradNorm) + ", \"tokens\": " +
         std::to_string(r.tokens) + ", \"tokens_total\": " + std::to_string(r.tokensTotal) +
         ", \"tokens_per_s\": " + shortestDecimal(r.tokensPerS) + ", \"step_time_s\": " +
         shortestDecimal(r.stepTimeS) + ", \"elapsed_s\": " + shortestDecimal(r.elapsedS) +
         ", \"mfu\": " + jsonOrNull(r.mfu, r.mfu >= 0) + ", \"hfu\": " +
         jsonOrNull(r.hfu, r.hfu >= 0) +
         (r.lossScale > 0 ? ", \"loss_scale\": " + shortestDecimal(r.lossScale) +
                                 ", \"skipped\": " + (r.skipped ? "true" : "false")
                           : std::string()) +
         (r.fp8Saturated >= 0 ? ", \"fp8_saturated\": " + shortestDecimal(r.fp8Saturated)
                              : std::string()) +
         "}";
}

std::string valMetricsJson(const ValRecord &v) {
  return wallJsonPrefix("val") + ", \"step\": " + std::to_string(v.step) +
         ", \"val_loss\": " + shortestDecimal(v.valLoss) +
         ", \"val_tokens\": " + std::to_string(v.valTokens) + "}";
}

std::string evalLossMetricsJson(int64_t step, double loss, int64_t tokens) {
  return wallJsonPrefix("eval") + ", \"step\": " +
         (step >= 0 ? std::to_string(step) : "null") +
         ", \"function\": \"loss\", \"val_loss\": " + shortestDecimal(loss) +
         ", \"val_tokens\": " + std::to_string(tokens) + "}";
}

} // namespace tc::rt
