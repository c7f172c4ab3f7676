//===- executor.cpp - the default (synchronous) submit and collect --------===//
#include "runtime/src/base/executor.h"

namespace tc::rt {

Status Executor::submit(const std::string &name, const std::vector<HostTensor> &inputs,
                        const std::vector<bool> *want, uint64_t *ticket) {
  if (finished_.size() >= kMaxSubmitted)
    return failedPrecondition("submit of @" + name + ": " + std::to_string(kMaxSubmitted) +
                              " runs are submitted and not collected");
  Finished f;
  f.ticket = ++tickets_;
  f.status = run(name, inputs, &f.outputs, want);
  *ticket = f.ticket;
  finished_.push_back(std::move(f));
  return Status::ok();
}

Status Executor::collect(uint64_t ticket, std::vector<HostTensor> *outputs) {
  if (finished_.empty() || finished_.front().ticket != ticket)
    return failedPrecondition("collect of run " + std::to_string(ticket) +
                              ": runs are collected in the order submitted" +
                              (finished_.empty() ? std::string(" (none is submitted)")
                                                 : ", the oldest is " +
                                                       std::to_string(finished_.front().ticket)));
  Finished f = std::move(finished_.front());
  finished_.pop_front();
  *outputs = std::move(f.outputs);
  return f.status;
}

} // namespace tc::rt
