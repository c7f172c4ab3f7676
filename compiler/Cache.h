//===- Cache.h - the content-addressed compile cache ------------*- C++ -*-===//
//
// tc-compile keeps what it made under $TC_CACHE_DIR (default ~/.cache/tc),
// addressed by a hash of everything the result depends on: NVRTC's kernels
// under kernels/ (key: the CUDA source, the architecture, NVRTC's options
// and version) and whole artifacts under artifacts/ (key: the model's bytes,
// every flag, tc's build id, NVRTC's version). An entry is a list of fields:
//
//   "TCCACHE2" | key (16 B) | field count (u64 LE) | checksum (16 B)
//   | per field: size (u64 LE) | bytes
//
// where the checksum is xxh3-128 over each field's size and xxh3-128 (so a
// writer never copies its fields into one buffer). It is read only when all
// of it checks: a torn, truncated or altered entry
// is reported, removed and rebuilt, never used. Entries are written to a
// temporary file in the same folder and renamed into place, so two compiles
// that run at once each see a whole entry or none. Caching never changes a
// result: a hit returns the bytes a miss would have made.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_CACHE_H
#define TC_COMPILER_CACHE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tc::cache {

/// A 128-bit content key.
struct Key {
  std::array<uint8_t, 16> bytes{};
  std::string hex() const;
  bool operator==(const Key &o) const { return bytes == o.bytes; }
};

/// Builds a key from pieces: each piece is hashed (xxh3-128) with its length
/// and its tag, and the key is the hash of those hashes, so that ("ab", "c")
/// and ("a", "bc") differ.
class KeyBuilder {
public:
  explicit KeyBuilder(llvm::StringRef domain) { add("domain", domain); }
  KeyBuilder &add(llvm::StringRef tag, llvm::StringRef bytes);
  KeyBuilder &add(llvm::StringRef tag, llvm::ArrayRef<uint8_t> bytes);
  KeyBuilder &add(llvm::StringRef tag, int64_t v);
  Key finish() const;

private:
  std::vector<uint8_t> digests_;
};

/// The cache folder: tc::rt::defaultCacheDir() ($TC_CACHE_DIR when set and
/// not empty, else $HOME/.cache/tc; empty when neither is there: no cache).
std::string defaultDir();

/// One cache folder. A Store with an empty folder is off: get misses and put
/// does nothing.
class Store {
public:
  Store() = default;
  explicit Store(std::string dir) : dir_(std::move(dir)) {}
  bool enabled() const { return !dir_.empty(); }
  const std::string &dir() const { return dir_; }

  /// The entry stored under (kind, key) with `fields` fields, or nothing; its
  /// fields are views into the mapped file (not copied). A corrupted entry
  /// (or one of another field count) is removed and a line saying so is
  /// appended to `notes` (when given).
  struct Entry {
    std::unique_ptr<llvm::MemoryBuffer> file;
    std::vector<llvm::StringRef> fields;
  };
  std::optional<Entry> get(llvm::StringRef kind, const Key &key, size_t fields,
                           std::vector<std::string> *notes = nullptr) const;
  /// Stores `fields` under (kind, key). A failure (read-only folder, full
  /// disk) is not an error of the compile: it is appended to `notes`.
  void put(llvm::StringRef kind, const Key &key, llvm::ArrayRef<llvm::StringRef> fields,
           std::vector<std::string> *notes = nullptr) const;
  /// The entry's path (for tests and messages).
  std::string entryPath(llvm::StringRef kind, const Key &key) const;

private:
  std::string dir_;
};

/// The process-wide store compile() and the tools use: defaultDir() unless
/// setGlobal changed it (tc-compile --no-cache sets an empty one).
const Store &global();
void setGlobal(Store s);

/// A hash of the file that holds tc's compiler code (the executable or the
/// shared library this function is linked into): any rebuild of tc changes it.
const Key &buildId();

} // namespace tc::cache

#endif // TC_COMPILER_CACHE_H
