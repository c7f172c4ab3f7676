//===- file_io.h - whole-file reads and atomic writes -----------*- C++ -*-===//
#ifndef TC_RUNTIME_BASE_FILE_IO_H
#define TC_RUNTIME_BASE_FILE_IO_H

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/src/base/status.h"

namespace tc::rt {

/// Reads the whole file. NotFound when it does not exist, IoError otherwise.
/// Opens `path` for reading, refusing anything but a regular file (a FIFO
/// would block forever, a device never end) with InvalidArgument naming
/// `what` and the path. On success *fd is the descriptor (blocking reads).
Status openRegularFile(const std::string &path, const std::string &what, int *fd);

Status readFileBytes(const std::string &path, std::vector<uint8_t> *out);

/// Writes `size` bytes to `path` atomically: a temporary file in the same
/// folder, fsync, rename over `path`, fsync of the folder. Readers see either
/// the old file or the complete new one.
Status writeFileAtomic(const std::string &path, const uint8_t *data, size_t size);

/// Gathers `chunks` in order into one atomic write (avoids one big copy).
Status writeFileAtomic(const std::string &path,
                       const std::vector<std::pair<const uint8_t *, size_t>> &chunks);

/// mkdir -p: creates `dir` and its missing parents (mode 0755). OK when `dir`
/// already is a directory; IoError naming the component that could not be
/// made, or InvalidArgument when `dir` (or a parent) exists and is no directory.
Status makeDirectories(const std::string &dir);

/// tc's cache folder (tc-compile's kernels and artifacts, tc-run's matmul
/// tuning record): $TC_CACHE_DIR when set and not empty, else
/// $HOME/.cache/tc, else "" (no cache). For the tools: the runtime's library
/// itself reads no environment variables.
std::string defaultCacheDir();

} // namespace tc::rt

#endif // TC_RUNTIME_BASE_FILE_IO_H
