//===- file_io.cpp - whole-file reads and atomic writes -------------------===//
#include "runtime/src/base/file_io.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tc::rt {

namespace {
std::string errnoText() { return std::strerror(errno); }

/// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
};

Status writeAll(int fd, const uint8_t *data, size_t size, const std::string &path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return ioError("cannot write '" + path + "': " + errnoText());
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::ok();
}
} // namespace

Status openRegularFile(const std::string &path, const std::string &what, int *fd) {
  // O_NONBLOCK: opening a FIFO without a writer would block.
  int d = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  std::string label = what.empty() ? "'" + path + "'" : what + " '" + path + "'";
  if (d < 0) {
    if (errno == ENOENT)
      return notFound("cannot open " + label + ": no such file");
    return ioError("cannot open " + label + ": " + errnoText());
  }
  struct stat st;
  if (::fstat(d, &st) != 0) {
    ::close(d);
    return ioError("cannot stat " + label + ": " + errnoText());
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(d);
    const char *kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                     : "not a regular file";
    return invalidArgument(label + " is " + kind + ", not a regular file");
  }
  int flags = ::fcntl(d, F_GETFL);
  if (flags >= 0)
    ::fcntl(d, F_SETFL, flags & ~O_NONBLOCK);
  *fd = d;
  return Status::ok();
}

Status readFileBytes(const std::string &path, std::vector<uint8_t> *out) {
  Fd f;
  TC_RETURN_IF_ERROR(openRegularFile(path, "", &f.fd));
  struct stat st;
  if (::fstat(f.fd, &st) != 0)
    return ioError("cannot stat '" + path + "': " + errnoText());
  out->clear();
  try {
    out->resize(static_cast<size_t>(st.st_size));
  } catch (const std::bad_alloc &) {
    return Status(StatusCode::ResourceExhausted,
                  "cannot allocate " + std::to_string(st.st_size) + " bytes for '" +
                      path + "'");
  }
  size_t got = 0;
  while (got < out->size()) {
    ssize_t n = ::read(f.fd, out->data() + got, out->size() - got);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return ioError("cannot read '" + path + "': " + errnoText());
    }
    if (n == 0)
      break; // the file shrank meanwhile
    got += static_cast<size_t>(n);
  }
  out->resize(got);
  return Status::ok();
}

Status writeFileAtomic(const std::string &path, const uint8_t *data, size_t size) {
  return writeFileAtomic(path, {{data, size}});
}

Status writeFileAtomic(const std::string &path,
                       const std::vector<std::pair<const uint8_t *, size_t>> &chunks) {
  std::string dir = ".";
  size_t slash = path.find_last_of('/');
  if (slash != std::string::npos)
    dir = slash == 0 ? "/" : path.substr(0, slash);
  std::string tmpl = path + ".tmp.XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0)
    return ioError("cannot create a temporary file next to '" + path +
                   "': " + errnoText());
  std::string tmp(name.data());
  Status st;
  for (const auto &c : chunks) {
    st = writeAll(fd, c.first, c.second, tmp);
    if (!st.isOk())
      break;
  }
  if (st.isOk() && ::fchmod(fd, 0644) != 0)
    st = ioError("cannot chmod '" + tmp + "': " + errnoText());
  if (st.isOk() && ::fsync(fd) != 0)
    st = ioError("cannot fsync '" + tmp + "': " + errnoText());
  if (::close(fd) != 0 && st.isOk())
    st = ioError("cannot close '" + tmp + "': " + errnoText());
  if (st.isOk() && ::rename(tmp.c_str(), path.c_str()) != 0)
    st = ioError("cannot rename '" + tmp + "' to '" + path + "': " + errnoText());
  if (!st.isOk()) {
    ::unlink(tmp.c_str());
    return st;
  }
  // Make the rename itself durable. Failure here is not fatal: the data is
  // complete and in place.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

Status makeDirectories(const std::string &dir) {
  if (dir.empty())
    return invalidArgument("cannot create a directory with an empty name");
  // Each prefix that ends before a '/', then `dir` itself.
  for (size_t end = dir.find('/', 1);; end = dir.find('/', end + 1)) {
    std::string part = dir.substr(0, end);
    if (!part.empty() && part.back() != '/' && ::mkdir(part.c_str(), 0755) != 0) {
      int err = errno;
      struct stat st;
      if (err != EEXIST)
        return ioError("cannot create directory '" + part + "': " + std::strerror(err));
      if (::stat(part.c_str(), &st) != 0)
        return ioError("cannot stat '" + part + "': " + errnoText());
      if (!S_ISDIR(st.st_mode))
        return invalidArgument("cannot create directory '" + dir + "': '" + part +
                               "' exists and is not a directory");
    }
    if (end == std::string::npos)
      return Status::ok();
  }
}

std::string defaultCacheDir() {
  if (const char *d = std::getenv("TC_CACHE_DIR"); d && *d)
    return d;
  if (const char *h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/tc";
  return "";
}

} // namespace tc::rt
