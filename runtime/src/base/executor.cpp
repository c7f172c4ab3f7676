//===- executor.cpp - the default submit and collect ----------------------===//
//
// The default submit() keeps the run and runs it when it is collected (or
// before any other call on the executor, runSubmitted): the same order and
// results as run() at once, the run loop's pipelining exercised on every
// backend.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/base/executor.h"

namespace tc::rt {

Status Executor::submit(const std::string &name, const std::vector<HostTensor> &inputs,
                        const std::vector<bool> *want, uint64_t *ticket) {
  if (pending_.size() >= kMaxSubmitted)
    return failedPrecondition("submit of @" + name + ": " + std::to_string(kMaxSubmitted) +
                              " runs are submitted and not collected");
  Pending p;
  p.ticket = ++tickets_;
  p.name = name;
  p.inputs = inputs;
  if (want) {
    p.hasWant = true;
    p.want = *want;
  }
  *ticket = p.ticket;
  pending_.push_back(std::move(p));
  return Status::ok();
}

void Executor::runSubmitted(uint64_t through) {
  // (An executor other threads use: nothing pending, nothing written.)
  if (pending_.empty() || runningSubmitted_)
    return;
  runningSubmitted_ = true;
  for (Pending &p : pending_) {
    if (through != 0 && p.ticket > through)
      break;
    if (p.ran)
      continue;
    p.ran = true;
    p.status = run(p.name, p.inputs, &p.outputs, p.hasWant ? &p.want : nullptr);
    p.inputs.clear();
  }
  runningSubmitted_ = false;
}

Status Executor::collect(uint64_t ticket, std::vector<HostTensor> *outputs) {
  if (pending_.empty() || pending_.front().ticket != ticket)
    return failedPrecondition(
        "collect of run " + std::to_string(ticket) + ": runs are collected in the order submitted" +
        (pending_.empty() ? std::string(" (none is submitted)")
                          : ", the oldest is " + std::to_string(pending_.front().ticket)));
  runSubmitted(ticket);
  Pending p = std::move(pending_.front());
  pending_.pop_front();
  *outputs = std::move(p.outputs);
  return p.status;
}

} // namespace tc::rt
