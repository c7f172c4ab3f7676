//===- Cache.cpp - the content-addressed compile cache --------------------===//
//
// See Cache.h for the entry format and the guarantees.
//
//===----------------------------------------------------------------------===//
#include "compiler/Cache.h"

#include "runtime/src/base/file_io.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace tc::cache {
namespace {

constexpr char kMagic[8] = {'T', 'C', 'C', 'A', 'C', 'H', 'E', '2'};
constexpr size_t kHeader = sizeof(kMagic) + 16 + 8 + 16;

std::array<uint8_t, 16> digest(llvm::ArrayRef<uint8_t> bytes) {
  llvm::XXH128_hash_t h = llvm::xxh3_128bits(bytes);
  std::array<uint8_t, 16> out;
  for (int i = 0; i < 8; ++i) {
    out[i] = uint8_t(h.low64 >> (8 * i));
    out[8 + i] = uint8_t(h.high64 >> (8 * i));
  }
  return out;
}

llvm::ArrayRef<uint8_t> asBytes(llvm::StringRef s) {
  return llvm::ArrayRef(reinterpret_cast<const uint8_t *>(s.data()), s.size());
}

void putU64(std::string *out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out->push_back(char(uint8_t(v >> (8 * i))));
}

uint64_t getU64(const char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= uint64_t(uint8_t(p[i])) << (8 * i);
  return v;
}

/// The entry checksum: xxh3-128 over each field's size and xxh3-128.
std::array<uint8_t, 16> checksum(llvm::ArrayRef<llvm::StringRef> fields) {
  std::string records;
  for (llvm::StringRef f : fields) {
    putU64(&records, f.size());
    auto d = digest(asBytes(f));
    records.append(reinterpret_cast<const char *>(d.data()), 16);
  }
  return digest(asBytes(records));
}

std::mutex globalMutex;
std::optional<Store> globalStore;

} // namespace

std::string Key::hex() const {
  static const char *digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s.push_back(digits[b >> 4]);
    s.push_back(digits[b & 15]);
  }
  return s;
}

KeyBuilder &KeyBuilder::add(llvm::StringRef tag, llvm::ArrayRef<uint8_t> bytes) {
  std::string head = tag.str();
  head.push_back('\0');
  putU64(&head, bytes.size());
  auto h = digest(asBytes(head));
  auto d = digest(bytes);
  digests_.insert(digests_.end(), h.begin(), h.end());
  digests_.insert(digests_.end(), d.begin(), d.end());
  return *this;
}

KeyBuilder &KeyBuilder::add(llvm::StringRef tag, llvm::StringRef bytes) {
  return add(tag, asBytes(bytes));
}

KeyBuilder &KeyBuilder::add(llvm::StringRef tag, int64_t v) {
  std::string s;
  putU64(&s, uint64_t(v));
  return add(tag, llvm::StringRef(s));
}

Key KeyBuilder::finish() const { return Key{digest(digests_)}; }

std::string defaultDir() { return tc::rt::defaultCacheDir(); }

std::string Store::entryPath(llvm::StringRef kind, const Key &key) const {
  std::string hex = key.hex();
  llvm::SmallString<256> p(dir_);
  llvm::sys::path::append(p, kind, hex.substr(0, 2), hex);
  return std::string(p);
}

std::optional<Store::Entry> Store::get(llvm::StringRef kind, const Key &key, size_t fields,
                                       std::vector<std::string> *notes) const {
  if (!enabled())
    return std::nullopt;
  std::string path = entryPath(kind, key);
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return std::nullopt; // absent (or unreadable: a miss either way)
  llvm::StringRef data = (*buf)->getBuffer();
  Entry e;
  std::string why;
  if (data.size() < kHeader || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) {
    why = "not a tc cache entry of this version (or cut short)";
  } else if (std::memcmp(data.data() + 8, key.bytes.data(), 16) != 0) {
    why = "it holds another key";
  } else if (getU64(data.data() + 24) != fields) {
    why = "it has " + std::to_string(getU64(data.data() + 24)) + " fields, not " +
          std::to_string(fields);
  } else {
    llvm::StringRef rest = data.drop_front(kHeader);
    for (size_t i = 0; i < fields && why.empty(); ++i) {
      if (rest.size() < 8 || getU64(rest.data()) > rest.size() - 8) {
        why = "field " + std::to_string(i) + " is cut short";
        break;
      }
      uint64_t n = getU64(rest.data());
      e.fields.push_back(rest.substr(8, n));
      rest = rest.drop_front(8 + n);
    }
    if (why.empty() && !rest.empty())
      why = std::to_string(rest.size()) + " bytes follow its last field";
    if (why.empty() && checksum(e.fields) !=
                           *reinterpret_cast<const std::array<uint8_t, 16> *>(data.data() + 32))
      why = "its fields do not match its checksum";
    if (why.empty()) {
      e.file = std::move(*buf);
      return e;
    }
  }
  if (notes)
    notes->push_back("the cache entry " + path + " is corrupted (" + why +
                     "): removed, and rebuilt");
  llvm::sys::fs::remove(path);
  return std::nullopt;
}

void Store::put(llvm::StringRef kind, const Key &key, llvm::ArrayRef<llvm::StringRef> fields,
                std::vector<std::string> *notes) const {
  if (!enabled())
    return;
  std::string path = entryPath(kind, key);
  auto warn = [&](const std::string &what) {
    if (notes)
      notes->push_back("the compile cache " + dir_ + " was not written (" + what +
                       "): the result is the same, the next compile is cold");
  };
  if (std::error_code ec = llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path)))
    return warn("cannot create " + std::string(llvm::sys::path::parent_path(path)) + ": " +
                ec.message());
  int fd = -1;
  llvm::SmallString<256> tmp;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%%%", fd, tmp))
    return warn("cannot create a file beside " + path + ": " + ec.message());
  std::string head(kMagic, sizeof kMagic);
  head.append(reinterpret_cast<const char *>(key.bytes.data()), 16);
  putU64(&head, fields.size());
  auto sum = checksum(fields);
  head.append(reinterpret_cast<const char *>(sum.data()), 16);
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << head;
    for (llvm::StringRef f : fields) {
      std::string size;
      putU64(&size, f.size());
      os << size << f;
    }
    os.close();
    if (os.has_error()) {
      std::string msg = os.error().message();
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      return warn("writing " + std::string(tmp) + ": " + msg);
    }
  }
  // rename(2) replaces atomically: a reader sees the old entry or this one.
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path)) {
    llvm::sys::fs::remove(tmp);
    return warn("renaming into " + path + ": " + ec.message());
  }
}

const Store &global() {
  std::lock_guard<std::mutex> lock(globalMutex);
  if (!globalStore)
    globalStore = Store(defaultDir());
  return *globalStore;
}

void setGlobal(Store s) {
  std::lock_guard<std::mutex> lock(globalMutex);
  globalStore = std::move(s);
}

const Key &buildId() {
  static const Key id = [] {
    KeyBuilder b("tc-build");
    Dl_info info;
    std::string path;
    if (dladdr(reinterpret_cast<void *>(&buildId), &info) && info.dli_fname)
      path = info.dli_fname;
    // The main executable's dli_fname is argv[0], which may be relative.
    std::unique_ptr<llvm::MemoryBuffer> file;
    for (const std::string &p : {path, std::string("/proc/self/exe")})
      if (!file && !p.empty())
        if (auto buf = llvm::MemoryBuffer::getFile(p, false, false))
          file = std::move(*buf);
    if (file)
      b.add("binary", file->getBuffer());
    else // no file to hash: a key no other process shares, so nothing is reused
      b.add("unhashed", int64_t(reinterpret_cast<intptr_t>(&path)));
    return b.finish();
  }();
  return id;
}

} // namespace tc::cache
