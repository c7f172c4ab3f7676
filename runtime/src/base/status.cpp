//===- status.cpp - error reporting for the runtime -----------------------===//
#include "runtime/src/base/status.h"

namespace tc::rt {

const char *statusCodeName(StatusCode code) {
  switch (code) {
  case StatusCode::Ok: return "OK";
  case StatusCode::InvalidArgument: return "INVALID_ARGUMENT";
  case StatusCode::NotFound: return "NOT_FOUND";
  case StatusCode::OutOfRange: return "OUT_OF_RANGE";
  case StatusCode::Unimplemented: return "UNIMPLEMENTED";
  case StatusCode::DataLoss: return "DATA_LOSS";
  case StatusCode::IoError: return "IO_ERROR";
  case StatusCode::FailedPrecondition: return "FAILED_PRECONDITION";
  case StatusCode::Internal: return "INTERNAL";
  case StatusCode::ResourceExhausted: return "RESOURCE_EXHAUSTED";
  }
  return "UNKNOWN";
}

Status::Status(StatusCode code, std::string message) {
  if (code == StatusCode::Ok)
    return; // an OK status never carries state
  state_ = std::make_shared<const State>(State{code, std::move(message)});
}

const std::string &Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::toString() const {
  if (isOk())
    return "OK";
  return std::string(statusCodeName(code())) + ": " + message();
}

Status Status::withPrefix(const std::string &prefix) const {
  if (isOk())
    return *this;
  return Status(code(), prefix + ": " + message());
}

} // namespace tc::rt
