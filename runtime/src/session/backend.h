//===- backend.h - picks the executor: the CPU reference or CUDA -*- C++ -*-===//
//
// The one place that knows which backends this build has: sessions,
// trainers and runs ask it for an Executor (base/executor.h) and never name
// a backend. Without the CUDA backend a GPU gives Unimplemented.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_SESSION_BACKEND_H
#define TC_RUNTIME_SESSION_BACKEND_H

#include <memory>

#include "runtime/src/base/executor.h"
#include "runtime/src/schema/program.h"
#include "runtime/src/base/status.h"
#include "runtime/src/cpu/executor.h"

namespace tc::rt {

/// Whether this build has the CUDA backend.
bool cudaBuilt();

/// Ok when a CUDA GPU can be used; else why not (Unimplemented in a build
/// without the backend).
Status cudaAvailable();

/// The executor of `artifact` (which must outlive it): the CPU reference
/// with `cpu` when device.gpu < 0, else GPU device.gpu with device.cuda
/// (parameters initialised with cpu.initSeed).
Status createExecutor(const Artifact *artifact, const ExecOptions &cpu,
                      const DeviceOptions &device, std::unique_ptr<Executor> *out);

} // namespace tc::rt

#endif // TC_RUNTIME_SESSION_BACKEND_H
