//===- status.h - error reporting for the runtime ---------------*- C++ -*-===//
//
// A Status is OK (no allocation, one null pointer) or carries a code and a
// message. Functions of the runtime never throw across their API and never
// abort: they return a Status.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_STATUS_H
#define TC_RUNTIME_BASE_STATUS_H

#include <memory>
#include <string>

namespace tc::rt {

/// Error categories. The numbers are mirrored by tc_status_code_t in the C
/// API (runtime/include/tc/runtime.h): never renumber.
enum class StatusCode : int {
  Ok = 0,
  InvalidArgument = 1,   // bad input from the caller (shape, dtype, flag)
  NotFound = 2,          // missing file, function, parameter
  OutOfRange = 3,        // an index outside its tensor at run time
  Unimplemented = 4,     // unsupported op or feature
  DataLoss = 5,          // truncated or corrupted file
  IoError = 6,           // the OS refused a read or write
  FailedPrecondition = 7,// e.g. a parameter without data
  Internal = 8,          // a bug in tc
  ResourceExhausted = 9, // out of memory
};

const char *statusCodeName(StatusCode code);

class Status {
public:
  /// OK.
  Status() = default;
  Status(StatusCode code, std::string message);

  static Status ok() { return Status(); }
  bool isOk() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::Ok; }
  /// Empty for OK.
  const std::string &message() const;
  /// "OK" or "<code name>: <message>".
  std::string toString() const;
  /// The same error with "prefix: " in front of the message (OK stays OK).
  Status withPrefix(const std::string &prefix) const;

private:
  struct State {
    StatusCode code;
    std::string message;
  };
  // Shared and immutable: copying a Status is cheap, OK costs nothing.
  std::shared_ptr<const State> state_;
};

inline Status invalidArgument(std::string msg) {
  return Status(StatusCode::InvalidArgument, std::move(msg));
}
inline Status notFound(std::string msg) {
  return Status(StatusCode::NotFound, std::move(msg));
}
inline Status unimplemented(std::string msg) {
  return Status(StatusCode::Unimplemented, std::move(msg));
}
inline Status dataLoss(std::string msg) {
  return Status(StatusCode::DataLoss, std::move(msg));
}
inline Status ioError(std::string msg) {
  return Status(StatusCode::IoError, std::move(msg));
}
inline Status failedPrecondition(std::string msg) {
  return Status(StatusCode::FailedPrecondition, std::move(msg));
}
inline Status internalError(std::string msg) {
  return Status(StatusCode::Internal, std::move(msg));
}

} // namespace tc::rt

/// Returns from the enclosing function when `expr` is not OK.
#define TC_RETURN_IF_ERROR(expr)                                               \
  do {                                                                         \
    ::tc::rt::Status tc_status_ = (expr);                                      \
    if (!tc_status_.isOk())                                                    \
      return tc_status_;                                                       \
  } while (0)

#endif // TC_RUNTIME_BASE_STATUS_H
