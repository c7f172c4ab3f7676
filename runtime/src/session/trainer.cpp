//===- trainer.cpp - the training loop's engine ---------------------------===//
#include "runtime/src/session/trainer.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/src/schema/artifact.h"
#include "runtime/src/base/file_io.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/base/init.h"
#include "runtime/src/base/json.h"
#include "runtime/src/base/safetensors.h"
#include "runtime/src/schema/version.h"
#include "runtime/src/session/backend.h"

namespace tc::rt {

namespace {

constexpr const char *kModelFile = "model.safetensors";
constexpr const char *kOptimizerFile = "optimizer.safetensors";
constexpr const char *kStateFile = "state.json";
// 2: state.json carries state_crc32 (over step, RNG, data position, artifact,
// precision and both files' sizes and CRCs); the step and counters are range-
// checked on load.
// 3: the run's configuration ("run": RunConfig), its id and the tc version
// that wrote it, all under state_crc32.
constexpr int kCheckpointVersion = 3;

/// Which tc versions wrote each older checkpoint format.
std::string checkpointFormatWriter(int version) {
  if (version == 2)
    return "tc 0.2.0";
  return "a tc before 0.2.0";
}

std::string fingerprintJson(const FileFingerprint &f) {
  return "{\"path\": " + jsonQuote(f.path) + ", \"bytes\": " + std::to_string(f.bytes) +
         ", \"hash\": " + jsonQuote(f.hash) + "}";
}

/// RunConfig as one JSON object, deterministic (the CRC covers this text).
std::string runJson(const RunConfig &r) {
  std::string feeds;
  for (const auto &[name, f] : r.feeds)
    feeds += (feeds.empty() ? "" : ", ") + jsonQuote(name) + ": " + fingerprintJson(f);
  return "{\"steps\": " + std::to_string(r.steps) + ", \"lr\": " + shortestDecimal(r.lr) +
         ", \"warmup\": " + std::to_string(r.warmup) + ", \"schedule\": " +
         jsonQuote(r.schedule) + ", \"seed\": \"" + std::to_string(r.seed) +
         "\", \"data\": " + fingerprintJson(r.data) + ", \"data_dtype\": " +
         jsonQuote(r.dataDtype) + ", \"labels\": " + jsonQuote(r.labels) + ", \"feeds\": {" +
         feeds + "}, \"val_data\": " + fingerprintJson(r.valData) + ", \"eval_every\": " +
         std::to_string(r.evalEvery) + ", \"eval_iters\": " + std::to_string(r.evalIters) + "}";
}

bool parseU64(const std::string &t, uint64_t *out) {
  if (t.empty() || t.size() > 20 || t.find_first_not_of("0123456789") != std::string::npos)
    return false;
  errno = 0;
  char *end = nullptr;
  unsigned long long x = std::strtoull(t.c_str(), &end, 10);
  if (errno == ERANGE || *end)
    return false;
  *out = x;
  return true;
}

bool wholeNumber(const JsonValue *v, double lo, int64_t *out) {
  if (!v || !v->isNumber() || !(v->num >= lo) || v->num != std::floor(v->num) || v->num > 9.0e15)
    return false;
  *out = static_cast<int64_t>(v->num);
  return true;
}

bool parseFingerprint(const JsonValue *v, FileFingerprint *f) {
  if (!v || !v->isObject())
    return false;
  const JsonValue *p = v->find("path"), *h = v->find("hash");
  if (!p || !p->isString() || !h || !h->isString() || !wholeNumber(v->find("bytes"), 0, &f->bytes))
    return false;
  f->path = p->str;
  f->hash = h->str;
  return true;
}

/// state.json's "run" object back into a RunConfig; false when a field is
/// missing or out of range.
bool parseRun(const JsonValue *v, RunConfig *r) {
  if (!v || !v->isObject())
    return false;
  const JsonValue *lr = v->find("lr"), *sch = v->find("schedule"), *seed = v->find("seed"),
                  *dt = v->find("data_dtype"), *lab = v->find("labels"), *feeds = v->find("feeds");
  if (!wholeNumber(v->find("steps"), 0, &r->steps) || !lr || !lr->isNumber() ||
      !std::isfinite(lr->num) || lr->num < 0 || !wholeNumber(v->find("warmup"), 0, &r->warmup) ||
      !sch || !sch->isString() || (sch->str != "constant" && sch->str != "cosine") || !seed ||
      !seed->isString() || !parseU64(seed->str, &r->seed) ||
      !parseFingerprint(v->find("data"), &r->data) || !dt || !dt->isString() || !lab ||
      !lab->isString() || !feeds || !feeds->isObject() ||
      !parseFingerprint(v->find("val_data"), &r->valData) ||
      !wholeNumber(v->find("eval_every"), 0, &r->evalEvery) ||
      !wholeNumber(v->find("eval_iters"), 0, &r->evalIters))
    return false;
  r->lr = lr->num;
  r->schedule = sch->str;
  r->dataDtype = dt->str;
  r->labels = lab->str;
  r->feeds.clear();
  for (const auto &[name, f] : feeds->object) {
    FileFingerprint fp;
    if (!parseFingerprint(&f, &fp))
      return false;
    r->feeds.push_back({name, fp});
  }
  return true;
}

std::string errnoText() { return std::strerror(errno); }

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string joinNames(const std::vector<std::string> &names, size_t max = 20) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < max; ++i)
    s += (i ? ", " : "") + names[i];
  if (names.size() > max)
    s += ", ... (" + std::to_string(names.size()) + " in all)";
  return s;
}

/// A float tensor converted to `dtype` (f32 <-> f64; exact or rounding).
HostTensor convertFloat(const HostTensor &t, DType dtype) {
  if (t.type.dtype == dtype)
    return t;
  return makeHostTensor({dtype, t.type.shape}, hostTensorToDoubles(t));
}

bool isDir(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void fsyncPath(const std::string &p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

} // namespace

void removeCheckpointDir(const std::string &dir) {
  if (DIR *d = ::opendir(dir.c_str())) {
    std::vector<std::string> names;
    while (dirent *e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == kModelFile || n == kOptimizerFile || n == kStateFile ||
          n.find(".tmp.") != std::string::npos)
        names.push_back(n);
    }
    ::closedir(d);
    for (const std::string &n : names)
      ::unlink((dir + "/" + n).c_str());
  }
  ::rmdir(dir.c_str());
}

namespace {

std::string parentDir(const std::string &p) {
  size_t s = p.find_last_of('/');
  if (s == std::string::npos)
    return ".";
  return s == 0 ? "/" : p.substr(0, s);
}

} // namespace

Status readTrainConfig(const Artifact &artifact, TrainConfig *out) {
  auto it = artifact.reports.find("training");
  if (it == artifact.reports.end())
    return failedPrecondition("the artifact has no training step (compile it with "
                              "tc-compile --train)");
  JsonValue v;
  TC_RETURN_IF_ERROR(parseJson(it->second, &v, "the artifact's training report"));
  if (!v.isObject())
    return dataLoss("the artifact's training report is not a JSON object");
  if (const JsonValue *x = v.find("loss"); x && x->isString())
    out->loss = x->str;
  if (const JsonValue *x = v.find("optimizer"); x && x->isString())
    out->optimizer = x->str;
  if (const JsonValue *x = v.find("lr"); x && x->isNumber())
    out->lr = x->num;
  if (const JsonValue *x = v.find("grad_accum"); x && x->isNumber())
    out->gradAccum = static_cast<int64_t>(x->num);
  if (const JsonValue *x = v.find("clip_grad_norm"); x && x->isNumber())
    out->clipGradNorm = x->num;
  if (out->gradAccum < 1)
    return dataLoss("the artifact's training report has grad_accum < 1");
  return Status::ok();
}

double learningRate(int64_t step, int64_t total, double base, int64_t warmup,
                    const std::string &schedule) {
  if (warmup > 0 && step <= warmup)
    return base * static_cast<double>(step) / static_cast<double>(warmup);
  if (schedule != "cosine")
    return base;
  int64_t span = total - warmup - 1;
  double progress = span > 0 ? static_cast<double>(step - warmup - 1) / static_cast<double>(span) : 0.0;
  progress = std::min(1.0, std::max(0.0, progress));
  double minLr = 0.1 * base;
  return minLr + 0.5 * (1.0 + std::cos(M_PI * progress)) * (base - minLr);
}

uint64_t Rng::next() {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

TokenData::~TokenData() {
  if (fd_ >= 0)
    ::close(fd_);
}

Status TokenData::openMemory(std::vector<uint32_t> tokens, const std::string &what) {
  path_ = what;
  tokenBytes_ = 4;
  count_ = static_cast<int64_t>(tokens.size());
  memory_ = std::move(tokens);
  return Status::ok();
}

Status TokenData::openCopyOf(const TokenData &other) {
  if (other.fd_ < 0)
    return openMemory(other.memory_, other.path_);
  return open(other.path_, other.tokenBytes_);
}

Status TokenData::fingerprint(FileFingerprint *out) const {
  if (fd_ >= 0)
    return fileFingerprint(path_, "token file", out);
  // FNV-1a 64 over the count and the tokens, as fileFingerprint hashes bytes.
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&](const void *p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      h ^= static_cast<const uint8_t *>(p)[i];
      h *= 0x100000001b3ULL;
    }
  };
  int64_t bytes = count_ * 4;
  mix(&bytes, sizeof bytes);
  mix(memory_.data(), memory_.size() * sizeof(uint32_t));
  out->path = kMemoryTokensPath;
  out->bytes = bytes;
  out->hash = hex64(h);
  return Status::ok();
}

std::vector<uint64_t> evalOffsets(const TokenData &data, int64_t batch, int64_t seq,
                                  int64_t index, int64_t iters) {
  int64_t windows = iters * batch;
  int64_t span = data.numTokens() - seq - 1;
  std::vector<uint64_t> offsets(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    int64_t k = index * batch + b;
    offsets[static_cast<size_t>(b)] =
        windows > 1 ? static_cast<uint64_t>(span * k / (windows - 1)) : 0;
  }
  return offsets;
}

Status TokenData::open(const std::string &path, int tokenBytes) {
  path_ = path;
  tokenBytes_ = tokenBytes;
  TC_RETURN_IF_ERROR(openRegularFile(path, "token file", &fd_));
  struct stat st;
  if (::fstat(fd_, &st) != 0)
    return ioError("cannot stat '" + path + "': " + errnoText());
  if (st.st_size % tokenBytes != 0)
    return invalidArgument("token file '" + path + "' has " + std::to_string(st.st_size) +
                           " bytes, not a multiple of " + std::to_string(tokenBytes) +
                           " (wrong --dtype?)");
  count_ = st.st_size / tokenBytes;
  return Status::ok();
}

namespace {
/// What state_crc32 covers, in one canonical text.
std::string stateCanonical(const CheckpointMeta &m, size_t modelBytes, uint32_t modelCrc,
                           size_t optBytes, uint32_t optCrc) {
  return "tc-checkpoint|" + std::to_string(m.step) + "|" + std::to_string(m.rngState) + "|" +
         std::to_string(m.dataPosition) + "|" + m.artifactHash + "|" + m.precision + "|" +
         m.runId + "|" + m.tcVersion + "|" + runJson(m.run) + "|" + std::to_string(modelBytes) +
         "|" + std::to_string(modelCrc) + "|" + std::to_string(optBytes) + "|" +
         std::to_string(optCrc);
}

/// The two tensor files as state.json describes them.
struct FileRecord {
  double bytes = 0, crc = 0;
};

/// Parses and checks DIR/state.json: format, fields, ranges, state_crc32.
Status parseState(const std::string &dir, CheckpointMeta *meta, FileRecord *model,
                  FileRecord *opt) {
  std::string where = "checkpoint '" + dir + "'";
  if (!isDir(dir))
    return notFound(where + " does not exist or is not a folder");
  std::vector<uint8_t> bytes;
  std::string statePath = dir + "/" + kStateFile;
  struct stat sst;
  if (::stat(statePath.c_str(), &sst) != 0)
    return notFound(where + " holds no checkpoint (no " + kStateFile + ")");
  Status st = readFileBytes(statePath, &bytes);
  if (!st.isOk())
    return dataLoss(where + " is incomplete: " + st.message());
  JsonValue v;
  TC_RETURN_IF_ERROR(parseJson(std::string(bytes.begin(), bytes.end()), &v,
                               where + " " + kStateFile));
  const JsonValue *fmt = v.find("format"), *ver = v.find("version");
  if (!v.isObject() || !fmt || fmt->str != "tc-checkpoint" || !ver || !ver->isNumber())
    return dataLoss(where + ": " + kStateFile + " is not a tc checkpoint state");
  if (ver->num != kCheckpointVersion) {
    bool older = ver->num < kCheckpointVersion;
    const JsonValue *by = v.find("tc_version");
    std::string writer = by && by->isString() ? "tc " + by->str
                         : older ? checkpointFormatWriter(static_cast<int>(ver->num))
                                 : "a newer tc";
    return unimplemented(
        where + " has checkpoint format " + ver->str + " (written by " + writer + "); this tc (" +
        kTcVersion + ") reads format " + std::to_string(kCheckpointVersion) +
        (older ? ": re-save it: start a run from its weights with --init " + dir + "/" +
                     kModelFile + " and --save (its optimizer state and data position are not "
                     "carried over), or resume it with the tc that wrote it"
               : ": use that tc"));
  }
  const JsonValue *stp = v.find("step"), *rng = v.find("rng_state"),
                  *pos = v.find("data_position"), *art = v.find("artifact"),
                  *prec = v.find("precision"), *files = v.find("files"), *rid = v.find("run_id"),
                  *tv = v.find("tc_version");
  if (!stp || !stp->isNumber() || !rng || !rng->isString() || !pos || !pos->isString() || !art ||
      !art->isString() || !prec || !prec->isString() || !files || !files->isObject() || !rid ||
      !rid->isString() || !tv || !tv->isString())
    return dataLoss(where + ": " + kStateFile + " is not a tc checkpoint state");
  // Range checks: a whole step >= 0, the RNG state and data position as the
  // unsigned decimals they were written as.
  if (!wholeNumber(stp, 0, &meta->step))
    return dataLoss(where + ": " + kStateFile + " has step " + stp->str +
                    ", not a whole number >= 0");
  if (!parseU64(rng->str, &meta->rngState) || !parseU64(pos->str, &meta->dataPosition))
    return dataLoss(where + ": " + kStateFile + " has an rng_state or data_position that is not "
                    "an unsigned 64-bit decimal");
  if (!parseRun(v.find("run"), &meta->run))
    return dataLoss(where + ": " + kStateFile + " has no valid run configuration (\"run\")");
  meta->artifactHash = art->str;
  meta->precision = prec->str;
  meta->runId = rid->str;
  meta->tcVersion = tv->str;
  FileRecord *recs[2] = {model, opt};
  const char *names[2] = {kModelFile, kOptimizerFile};
  for (int i = 0; i < 2; ++i) {
    const JsonValue *info = files->find(names[i]);
    const JsonValue *nb = info ? info->find("bytes") : nullptr;
    const JsonValue *crc = info ? info->find("crc32") : nullptr;
    if (!nb || !crc || !nb->isNumber() || !crc->isNumber() || nb->num < 0 || crc->num < 0 ||
        crc->num > 4294967295.0)
      return dataLoss(where + ": " + kStateFile + " does not describe " + names[i]);
    recs[i]->bytes = nb->num;
    recs[i]->crc = crc->num;
  }
  // The state's own checksum, over everything it says.
  std::string canonical = stateCanonical(*meta, static_cast<size_t>(model->bytes),
                                         static_cast<uint32_t>(model->crc),
                                         static_cast<size_t>(opt->bytes),
                                         static_cast<uint32_t>(opt->crc));
  const JsonValue *sc = v.find("state_crc32");
  if (!sc || !sc->isNumber() ||
      sc->num != static_cast<double>(crc32(reinterpret_cast<const uint8_t *>(canonical.data()),
                                           canonical.size())))
    return dataLoss(where + ": " + kStateFile + " fails its state_crc32 check (edited or "
                    "corrupted)");
  return Status::ok();
}
} // namespace

Status checkInputRanges(const Artifact &artifact, const std::vector<std::string> &names,
                        const std::vector<HostTensor> &values) {
  auto it = artifact.reports.find("input_ranges");
  if (it == artifact.reports.end())
    return Status::ok();
  JsonValue v;
  TC_RETURN_IF_ERROR(parseJson(it->second, &v, "the artifact's input_ranges report"));
  if (!v.isObject())
    return dataLoss("the artifact's input_ranges report is not a JSON object");
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    const JsonValue *r = v.find(names[i]);
    if (!r || !r->isObject() || !dtypeIsInteger(values[i].type.dtype))
      continue;
    const JsonValue *lo = r->find("min"), *hi = r->find("max"), *ig = r->find("ignore_index"),
                    *what = r->find("what");
    if (!lo || !hi || !lo->isNumber() || !hi->isNumber())
      return dataLoss("the artifact's input_ranges report for '" + names[i] + "' has no min/max");
    int64_t mn = static_cast<int64_t>(lo->num), mx = static_cast<int64_t>(hi->num);
    bool hasIgnore = ig && ig->isNumber();
    int64_t ignore = hasIgnore ? static_cast<int64_t>(ig->num) : 0;
    std::vector<int64_t> xs = hostTensorToInts(values[i]);
    for (size_t k = 0; k < xs.size(); ++k) {
      int64_t x = xs[k];
      if ((x >= mn && x <= mx) || (hasIgnore && x == ignore))
        continue;
      return invalidArgument(
          "input '" + names[i] + "' element " + std::to_string(k) + " is " + std::to_string(x) +
          ": " + (what && what->isString() ? what->str : std::string("its values")) +
          " must be in [" + std::to_string(mn) + ", " + std::to_string(mx) + "]" +
          (hasIgnore ? " or " + std::to_string(ignore) + " (ignore_index)" : ""));
    }
  }
  return Status::ok();
}

Status chooseLabels(const Artifact &artifact, const std::string &flag, LabelShift *out,
                    std::string *message, std::string *note) {
  if (!flag.empty() && flag != "next" && flag != "same")
    return invalidArgument("--labels must be next or same, got '" + flag + "'");
  std::string recorded, reason;
  auto it = artifact.reports.find("labels");
  if (it != artifact.reports.end()) {
    JsonValue v;
    TC_RETURN_IF_ERROR(parseJson(it->second, &v, "the artifact's labels report"));
    const JsonValue *c = v.isObject() ? v.find("convention") : nullptr;
    if (!c || !c->isString() || (c->str != "next" && c->str != "same"))
      return dataLoss("the artifact's labels report has no convention next or same");
    recorded = c->str;
    if (const JsonValue *r = v.find("reason"); r && r->isString())
      reason = r->str;
  }
  std::string use = !flag.empty() ? flag : !recorded.empty() ? recorded : "next";
  *out = use == "same" ? LabelShift::Same : LabelShift::Next;
  std::string what = use == "same" ? "labels = input_ids" : "labels = input_ids shifted by one";
  if (!flag.empty())
    *message = "labels: " + use + " (" + what + ", --labels)";
  else if (!recorded.empty())
    *message = "labels: " + use + " (" + what + "; " + reason + ")";
  else
    *message = "labels: next (" + what + "; the default: the compiler found no loss over a "
               "[batch, seq] labels input to tell; --labels same for a model that shifts them)";
  note->clear();
  if (!flag.empty() && !recorded.empty() && flag != recorded)
    *note = "--labels " + flag + " overrides the artifact's '" + recorded + "': " + reason;
  return Status::ok();
}

Status TokenData::nextBatch(int64_t batch, int64_t seq, DType dtype, Rng *rng,
                            HostTensor *inputIds, HostTensor *labels, LabelShift shift) {
  if (count_ < seq + 1)
    return invalidArgument("token file '" + path_ + "' has " + std::to_string(count_) +
                           " tokens, fewer than --seq + 1 = " + std::to_string(seq + 1));
  uint64_t windows = static_cast<uint64_t>(count_ - seq);
  std::vector<uint64_t> offsets(static_cast<size_t>(batch));
  for (uint64_t &o : offsets) {
    o = rng->next() % windows;
    ++position;
  }
  return batchAt(offsets, seq, dtype, inputIds, labels, shift);
}

Status TokenData::batchAt(const std::vector<uint64_t> &offsets, int64_t seq, DType dtype,
                          HostTensor *inputIds, HostTensor *labels, LabelShift shift) const {
  int64_t batch = static_cast<int64_t>(offsets.size());
  std::vector<int64_t> ids(batch * seq), lab(batch * seq);
  std::vector<uint8_t> buf((seq + 1) * tokenBytes_);
  for (int64_t b = 0; b < batch; ++b) {
    uint64_t o = offsets[static_cast<size_t>(b)];
    if (count_ < seq + 1 || o > static_cast<uint64_t>(count_ - seq - 1))
      return invalidArgument("token file '" + path_ + "': a window at token " +
                             std::to_string(o) + " does not fit its " + std::to_string(count_) +
                             " tokens");
    if (fd_ >= 0) {
      ssize_t got = ::pread(fd_, buf.data(), buf.size(), static_cast<off_t>(o * tokenBytes_));
      if (got != static_cast<ssize_t>(buf.size()))
        return ioError("cannot read token file '" + path_ + "' at token " + std::to_string(o));
    }
    for (int64_t t = 0; t <= seq; ++t) {
      const uint8_t *p = buf.data() + t * tokenBytes_;
      int64_t tok = fd_ < 0 ? static_cast<int64_t>(memory_[o + static_cast<uint64_t>(t)])
                    : tokenBytes_ == 2
                        ? (p[0] | (p[1] << 8))
                        : static_cast<int64_t>(p[0] | (p[1] << 8) | (p[2] << 16) |
                                               (static_cast<uint32_t>(p[3]) << 24));
      if (t < seq)
        ids[b * seq + t] = tok;
      if (shift == LabelShift::Same && t < seq)
        lab[b * seq + t] = tok;
      else if (shift == LabelShift::Next && t > 0)
        lab[b * seq + t - 1] = tok;
    }
  }
  *inputIds = makeHostTensorInts({dtype, {batch, seq}}, ids);
  *labels = makeHostTensorInts({dtype, {batch, seq}}, lab);
  return Status::ok();
}

Status artifactHash(const std::string &artifactPath, std::string *out) {
  std::vector<uint8_t> bytes;
  TC_RETURN_IF_ERROR(readFileBytes(artifactPath, &bytes));
  uint64_t h = 0xcbf29ce484222325ULL;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ULL;
  }
  *out = hex64(h);
  return Status::ok();
}

Trainer::Trainer() = default;
Trainer::~Trainer() = default;

Status Trainer::init(const Artifact *artifact, const ExecOptions &opts, const DeviceOptions &device,
                     bool *deviceFailed) {
  if (deviceFailed)
    *deviceFailed = false;
  artifact_ = artifact;
  opts_ = opts;
  wide_ = opts.precision == RefPrecision::F64;
  opts_.wideF32 = wide_;
  TC_RETURN_IF_ERROR(readTrainConfig(*artifact, &config_));
  leftOut_ = notInStateDict(*artifact);
  const Function *train = artifact->findFunction("train_step");
  const Function *grad = artifact->findFunction("grad_step");
  const Function *apply = artifact->findFunction("apply_step");
  if (!grad || !apply || (config_.gradAccum == 1 && !train))
    return failedPrecondition("the artifact lacks grad_step/apply_step/train_step (compile "
                              "it with tc-compile --train)");
  dataNames_ = grad->inputNames;
  dataTypes_.clear();
  for (int32_t id : grad->inputs)
    dataTypes_.push_back(grad->values[id]);
  if (grad->outputs.empty())
    return dataLoss("grad_step has no outputs");
  if (apply->inputs.size() < 2 || apply->inputNames[apply->inputs.size() - 2] != "lr" ||
      apply->inputNames.back() != "step")
    return dataLoss("apply_step does not end with the inputs lr, step");
  if (deviceFailed)
    *deviceFailed = true;
  if (device.gpu >= 0 && wide_)
    return invalidArgument("--ref-precision f64 is a CPU reference mode; the GPU computes in "
                           "the artifact's precision");
  TC_RETURN_IF_ERROR(createExecutor(artifact, opts_, device, &exec_));
  // Allocate the step's buffers now, so the memory report is the step's.
  TC_RETURN_IF_ERROR(exec_->prepare(config_.gradAccum == 1 ? "train_step" : "grad_step"));
  if (config_.gradAccum > 1)
    TC_RETURN_IF_ERROR(exec_->prepare("apply_step"));
  if (deviceFailed)
    *deviceFailed = false;
  return Status::ok();
}

DeviceMemoryReport Trainer::deviceMemory() const {
  return exec_ ? exec_->memory() : DeviceMemoryReport();
}

HostTensor Trainer::scalar(double v) const {
  return makeHostTensor({wide_ ? DType::F64 : DType::F32, {}}, {v});
}

Status Trainer::scalarResult(const std::string &fn, const std::string &name, int fallback,
                             const std::vector<HostTensor> &outputs, double *v) const {
  const std::vector<std::string> *names = exec_->outputNames(fn);
  int index = -1;
  if (names)
    for (size_t i = 0; i < names->size(); ++i)
      if ((*names)[i] == name)
        index = static_cast<int>(i);
  if (index < 0 && names && fallback >= 0 && static_cast<size_t>(fallback) < names->size() &&
      !exec_->onDevice())
    index = fallback; // the CPU program's results by position
  if (index < 0 || static_cast<size_t>(index) >= outputs.size())
    return dataLoss("@" + fn + " has no result '" + name + "'");
  *v = hostTensorToDoubles(outputs[static_cast<size_t>(index)])[0];
  return Status::ok();
}

namespace {
/// Only the results called `names` of `fn` are wanted back.
std::vector<bool> wantOnly(const std::vector<std::string> *outputs,
                           std::initializer_list<std::string> names) {
  std::vector<bool> want(outputs ? outputs->size() : 0, false);
  for (size_t i = 0; i < want.size(); ++i)
    for (const std::string &n : names)
      want[i] = want[i] || (*outputs)[i] == n;
  return want;
}
} // namespace

Status Trainer::step(int64_t step, double lr, const std::vector<std::vector<HostTensor>> &micro,
                     StepResult *out) {
  if (static_cast<int64_t>(micro.size()) != config_.gradAccum)
    return invalidArgument("a step takes " + std::to_string(config_.gradAccum) +
                           " micro-batches, got " + std::to_string(micro.size()));
  std::vector<HostTensor> outputs;
  if (config_.gradAccum == 1) {
    if (!exec_->hasFunction("train_step"))
      return failedPrecondition("the artifact has no " + std::string(onDevice() ? "GPU " : "") +
                                "train_step");
    std::vector<bool> want = trainStepWant();
    TC_RETURN_IF_ERROR(
        exec_->run("train_step", trainStepInputs(step, lr, micro[0]), &outputs, &want));
    return trainStepResults(outputs, out);
  }
  // Gradient accumulation through the host: grad_step per micro-batch, the
  // gradients averaged in double, then apply_step. With loss scaling the
  // average is non-finite exactly when some micro-batch's gradient is: a
  // double sum of finite f32 values cannot overflow and their mean is within
  // the f32 range, while inf or NaN in any term makes the sum inf or NaN; so
  // apply_step's inf/NaN check covers every micro-batch. (torch sums the
  // .grad of the micro-batches in f32, which can overflow where this does
  // not: then torch skips a step that tc takes.)
  if (!exec_->hasFunction("grad_step") || !exec_->hasFunction("apply_step"))
    return failedPrecondition("the artifact has no " + std::string(onDevice() ? "GPU " : "") +
                              "grad_step/apply_step");
  std::vector<HostTensor> inputs;
  TC_RETURN_IF_ERROR(accumulate(step, lr, micro, &inputs, &out->loss));
  std::vector<bool> want =
      wantOnly(exec_->outputNames("apply_step"), {"grad_norm", "skipped", "loss_scale"});
  TC_RETURN_IF_ERROR(exec_->run("apply_step", inputs, &outputs, &want));
  TC_RETURN_IF_ERROR(scalarResult("apply_step", "grad_norm", 0, outputs, &out->gradNorm));
  return lossScaleResults("apply_step", outputs, out);
}

std::vector<HostTensor> Trainer::trainStepInputs(int64_t step, double lr,
                                                 const std::vector<HostTensor> &batch) const {
  std::vector<HostTensor> inputs = batch;
  inputs.push_back(scalar(lr));
  inputs.push_back(scalar(static_cast<double>(step)));
  return inputs;
}

std::vector<bool> Trainer::trainStepWant() const {
  return wantOnly(exec_->outputNames("train_step"),
                  {config_.loss, "grad_norm", "skipped", "loss_scale", "fp8_saturated"});
}

Status Trainer::trainStepResults(const std::vector<HostTensor> &outputs, StepResult *out) const {
  TC_RETURN_IF_ERROR(scalarResult("train_step", config_.loss, 0, outputs, &out->loss));
  TC_RETURN_IF_ERROR(scalarResult("train_step", "grad_norm", 1, outputs, &out->gradNorm));
  TC_RETURN_IF_ERROR(fp8SaturatedResult("train_step", outputs, &out->fp8Saturated));
  return lossScaleResults("train_step", outputs, out);
}

Status Trainer::submitStep(int64_t step, double lr,
                           const std::vector<std::vector<HostTensor>> &micro, uint64_t *ticket) {
  if (submitted_.size() >= Executor::kMaxSubmitted)
    return failedPrecondition("step " + std::to_string(step) + " submitted while " +
                              std::to_string(submitted_.size()) + " steps are not collected");
  Submitted sub;
  sub.ticket = ++tickets_;
  if (config_.gradAccum == 1 && static_cast<int64_t>(micro.size()) == 1 && exec_ &&
      exec_->hasFunction("train_step")) {
    std::vector<bool> want = trainStepWant();
    TC_RETURN_IF_ERROR(
        exec_->submit("train_step", trainStepInputs(step, lr, micro[0]), &want, &sub.execTicket));
    sub.exec = true;
  } else {
    sub.status = this->step(step, lr, micro, &sub.result);
  }
  *ticket = sub.ticket;
  submitted_.push_back(std::move(sub));
  return Status::ok();
}

bool Trainer::defersSteps() const {
  return config_.gradAccum == 1 && exec_ && exec_->defers("train_step");
}

Status Trainer::collectStep(uint64_t ticket, StepResult *out) {
  if (submitted_.empty() || submitted_.front().ticket != ticket)
    return failedPrecondition("collect of step ticket " + std::to_string(ticket) +
                              ": steps are collected in the order submitted");
  Submitted sub = std::move(submitted_.front());
  submitted_.pop_front();
  if (!sub.exec) {
    *out = sub.result;
    return sub.status;
  }
  std::vector<HostTensor> outputs;
  TC_RETURN_IF_ERROR(exec_->collect(sub.execTicket, &outputs));
  return trainStepResults(outputs, out);
}

Status Trainer::fp8SaturatedResult(const std::string &fn, const std::vector<HostTensor> &outputs,
                                   double *saturated) const {
  const std::vector<std::string> *names = exec_->outputNames(fn);
  if (!names || std::find(names->begin(), names->end(), "fp8_saturated") == names->end())
    return Status::ok();
  return scalarResult(fn, "fp8_saturated", -1, outputs, saturated);
}

Status Trainer::lossScaleResults(const std::string &fn, const std::vector<HostTensor> &outputs,
                                 StepResult *out) const {
  const std::vector<std::string> *names = exec_->outputNames(fn);
  if (!names || std::find(names->begin(), names->end(), "skipped") == names->end())
    return Status::ok();
  double skipped = 0;
  TC_RETURN_IF_ERROR(scalarResult(fn, "skipped", -1, outputs, &skipped));
  TC_RETURN_IF_ERROR(scalarResult(fn, "loss_scale", -1, outputs, &out->lossScale));
  out->skipped = skipped != 0;
  return Status::ok();
}

Status Trainer::accumulate(int64_t step, double lr,
                           const std::vector<std::vector<HostTensor>> &micro,
                           std::vector<HostTensor> *applyInputs, double *meanLoss) const {
  // grad_step returns the loss, then one gradient per apply_step input: sum
  // them in double over the micro-batches, then average.
  std::vector<std::vector<double>> sums;
  std::vector<TensorType> types;
  std::vector<HostTensor> outputs;
  double lossSum = 0;
  // The results after the gradients (delayed FP8 scaling's "update:"
  // entries, which the executor applies, and "fp8_saturated") are not
  // apply_step's.
  const std::vector<std::string> *names = exec_->outputNames("grad_step");
  for (const std::vector<HostTensor> &mb : micro) {
    TC_RETURN_IF_ERROR(exec_->run("grad_step", mb, &outputs));
    if (outputs.empty())
      return dataLoss("grad_step returned nothing");
    lossSum += hostTensorToDoubles(outputs[0])[0];
    size_t grads = outputs.size() - 1;
    if (names)
      for (size_t g = 1; g < names->size() && g < outputs.size(); ++g)
        if ((*names)[g].compare(0, 5, "grad:") != 0) {
          grads = g - 1;
          break;
        }
    sums.resize(grads);
    types.resize(grads);
    for (size_t g = 0; g < grads; ++g) {
      std::vector<double> v = hostTensorToDoubles(outputs[g + 1]);
      if (sums[g].empty())
        sums[g].assign(v.size(), 0.0);
      for (size_t k = 0; k < v.size(); ++k)
        sums[g][k] += v[k];
      types[g] = outputs[g + 1].type;
    }
  }
  double n = static_cast<double>(micro.size());
  applyInputs->clear();
  for (size_t g = 0; g < sums.size(); ++g) {
    for (double &x : sums[g])
      x /= n;
    applyInputs->push_back(makeHostTensor(types[g], sums[g]));
  }
  applyInputs->push_back(scalar(lr));
  applyInputs->push_back(scalar(static_cast<double>(step)));
  *meanLoss = lossSum / n;
  return Status::ok();
}

std::set<std::string> notInStateDict(const Artifact &artifact) {
  std::set<std::string> out;
  auto it = artifact.reports.find("not_in_state_dict");
  JsonValue v;
  if (it == artifact.reports.end() || !parseJson(it->second, &v, "not_in_state_dict").isOk() ||
      !v.isArray())
    return out;
  for (const JsonValue &n : v.array)
    if (n.isString())
      out.insert(n.str);
  return out;
}

Status matchEntries(const Artifact &artifact, const std::map<std::string, HostTensor> &tensors,
                    bool optimizerState, const std::string &what, std::set<std::string> *wanted,
                    const std::set<std::string> &mayBeMissing) {
  std::vector<std::string> missing, unexpected, mismatched;
  wanted->clear();
  for (const Parameter &p : artifact.params) {
    if ((p.kind == ParamKind::OptimizerState) != optimizerState)
      continue;
    wanted->insert(p.name);
    auto it = tensors.find(p.name);
    if (it == tensors.end()) {
      if (mayBeMissing.count(p.name))
        wanted->erase(p.name); // keeps the artifact's value
      else
        missing.push_back(p.name);
      continue;
    }
    const HostTensor &t = it->second;
    bool floats = dtypeIsFloat(t.type.dtype) && dtypeIsFloat(p.type.dtype);
    if (t.type.shape != p.type.shape || (!floats && t.type.dtype != p.type.dtype))
      mismatched.push_back(p.name + " (file " + typeToString(t.type) + ", model " +
                           typeToString(p.type) + ")");
  }
  for (const auto &kv : tensors)
    if (!wanted->count(kv.first) && !mayBeMissing.count(kv.first))
      unexpected.push_back(kv.first);
  std::string msg;
  if (!missing.empty())
    msg += "; missing: " + joinNames(missing);
  if (!unexpected.empty())
    msg += "; unexpected: " + joinNames(unexpected);
  if (!mismatched.empty())
    msg += "; shape/dtype mismatch: " + joinNames(mismatched);
  if (!msg.empty())
    return invalidArgument(what + " does not match the model" + msg);
  return Status::ok();
}

Status Trainer::setEntries(const std::map<std::string, HostTensor> &tensors, bool optimizerState,
                           const std::string &what) {
  std::set<std::string> wanted;
  TC_RETURN_IF_ERROR(matchEntries(*artifact_, tensors, optimizerState, what, &wanted,
                                  optimizerState ? std::set<std::string>() : leftOut_));
  for (const std::string &name : wanted)
    TC_RETURN_IF_ERROR(setEntry(name, tensors.at(name)));
  return Status::ok();
}

Status Trainer::getEntry(const std::string &name, HostTensor *out) const {
  return exec_->getEntry(name, out);
}

Status Trainer::setEntry(const std::string &name, const HostTensor &value) {
  TensorType type;
  TC_RETURN_IF_ERROR(exec_->entryType(name, &type));
  if (dtypeIsFloat(value.type.dtype) && dtypeIsFloat(type.dtype) && value.type.dtype != type.dtype)
    return exec_->setEntry(name, convertFloat(value, type.dtype));
  return exec_->setEntry(name, value);
}

Status Trainer::loadWeights(const std::string &path) {
  SafetensorsFile f;
  TC_RETURN_IF_ERROR(readSafetensors(path, &f));
  return setEntries(f.tensors, false, "--init '" + path + "'");
}

Status Trainer::saveCheckpoint(const std::string &dir, const CheckpointMeta &meta) const {
  SafetensorsFile model, opt;
  model.metadata["format"] = "pt";
  opt.metadata["format"] = "pt";
  for (const Parameter &p : artifact_->params)
    if (!leftOut_.count(p.name)) // not in torch's state_dict: not in the checkpoint
      TC_RETURN_IF_ERROR(exec_->getEntry(
          p.name, &(p.kind == ParamKind::OptimizerState ? opt : model).tensors[p.name]));
  std::vector<uint8_t> modelBytes, optBytes;
  TC_RETURN_IF_ERROR(serializeSafetensors(model, &modelBytes));
  TC_RETURN_IF_ERROR(serializeSafetensors(opt, &optBytes));
  uint32_t modelCrc = crc32(modelBytes.data(), modelBytes.size());
  uint32_t optCrc = crc32(optBytes.data(), optBytes.size());
  CheckpointMeta m = meta;
  m.tcVersion = kTcVersion;
  std::string canonical = stateCanonical(m, modelBytes.size(), modelCrc, optBytes.size(), optCrc);
  std::string json =
      "{\n  \"format\": \"tc-checkpoint\",\n  \"version\": " +
      std::to_string(kCheckpointVersion) + ",\n  \"tc_version\": " + jsonQuote(m.tcVersion) +
      ",\n  \"run_id\": " + jsonQuote(m.runId) + ",\n  \"step\": " + std::to_string(m.step) +
      ",\n  \"rng_state\": \"" + std::to_string(m.rngState) + "\",\n  \"data_position\": \"" +
      std::to_string(m.dataPosition) + "\",\n  \"artifact\": " + jsonQuote(m.artifactHash) +
      ",\n  \"precision\": " + jsonQuote(m.precision) + ",\n  \"run\": " + runJson(m.run) +
      ",\n  \"files\": {\n    \"" + kModelFile + "\": {\"bytes\": " +
      std::to_string(modelBytes.size()) + ", \"crc32\": " + std::to_string(modelCrc) +
      "},\n    \"" + kOptimizerFile + "\": {\"bytes\": " + std::to_string(optBytes.size()) +
      ", \"crc32\": " + std::to_string(optCrc) + "}\n  },\n  \"state_crc32\": " +
      std::to_string(crc32(reinterpret_cast<const uint8_t *>(canonical.data()), canonical.size())) +
      "\n}\n";

  // Write a complete new folder next to `dir`, then swap it in.
  std::string target = dir;
  while (target.size() > 1 && target.back() == '/')
    target.pop_back();
  if (isDir(target)) {
    struct stat st;
    std::string probe = target + "/" + kStateFile;
    DIR *d = ::opendir(target.c_str());
    int entries = 0;
    if (d) {
      while (dirent *e = ::readdir(d))
        entries += std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..");
      ::closedir(d);
    }
    if (entries > 0 && ::stat(probe.c_str(), &st) != 0)
      return failedPrecondition("--save '" + dir +
                                "' exists and is not a tc checkpoint folder (no state.json)");
  }
  std::string tmp = target + ".tmp";
  removeCheckpointDir(tmp);
  if (::mkdir(tmp.c_str(), 0755) != 0)
    return ioError("cannot create '" + tmp + "': " + errnoText());
  Status st = writeFileAtomic(tmp + "/" + kModelFile, modelBytes.data(), modelBytes.size());
  if (st.isOk())
    st = writeFileAtomic(tmp + "/" + kOptimizerFile, optBytes.data(), optBytes.size());
  if (st.isOk())
    st = writeFileAtomic(tmp + "/" + kStateFile,
                         reinterpret_cast<const uint8_t *>(json.data()), json.size());
  if (!st.isOk()) {
    removeCheckpointDir(tmp);
    return st;
  }
  fsyncPath(tmp);
  if (isDir(target)) {
#ifdef SYS_renameat2
    // Atomic exchange: readers see the old or the new folder, never neither.
    if (::syscall(SYS_renameat2, AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(),
                  2 /*RENAME_EXCHANGE*/) == 0) {
      removeCheckpointDir(tmp); // now the old checkpoint
      fsyncPath(parentDir(target));
      return Status::ok();
    }
#endif
    // No exchange on this filesystem: move the old one aside first.
    std::string old = target + ".old";
    removeCheckpointDir(old);
    if (::rename(target.c_str(), old.c_str()) != 0)
      return ioError("cannot move '" + target + "' aside: " + errnoText());
    if (::rename(tmp.c_str(), target.c_str()) != 0)
      return ioError("cannot rename '" + tmp + "' to '" + target + "': " + errnoText());
    removeCheckpointDir(old);
  } else if (::rename(tmp.c_str(), target.c_str()) != 0) {
    return ioError("cannot rename '" + tmp + "' to '" + target + "': " + errnoText());
  }
  fsyncPath(parentDir(target));
  return Status::ok();
}

Status readCheckpointMeta(const std::string &dir, CheckpointMeta *meta) {
  FileRecord model, opt;
  return parseState(dir, meta, &model, &opt);
}

Status Trainer::loadCheckpoint(const std::string &dir, const std::string &expectedHash,
                               CheckpointMeta *meta) {
  std::string where = "checkpoint '" + dir + "'";
  FileRecord recs[2];
  TC_RETURN_IF_ERROR(parseState(dir, meta, &recs[0], &recs[1]));
  if (meta->artifactHash != expectedHash)
    return failedPrecondition(where + " was made with another artifact (" + meta->artifactHash +
                              ", this one is " + expectedHash + ")");
  std::string precision = wide_ ? "f64" : "f32";
  if (meta->precision != precision)
    return failedPrecondition(where + " was trained with --ref-precision " + meta->precision +
                              ", this run uses " + precision);
  std::map<std::string, SafetensorsFile> loaded;
  const char *names[2] = {kModelFile, kOptimizerFile};
  std::vector<uint8_t> bytes;
  for (int i = 0; i < 2; ++i) {
    std::string path = dir + "/" + names[i];
    Status st = readFileBytes(path, &bytes);
    if (!st.isOk())
      return dataLoss(where + " is incomplete: " + st.message());
    if (static_cast<double>(bytes.size()) != recs[i].bytes)
      return dataLoss(where + ": " + names[i] + " has " + std::to_string(bytes.size()) +
                      " bytes, the checkpoint says " +
                      std::to_string(static_cast<uint64_t>(recs[i].bytes)) +
                      " (truncated or corrupted)");
    if (static_cast<double>(crc32(bytes.data(), bytes.size())) != recs[i].crc)
      return dataLoss(where + ": " + names[i] + " fails its CRC-32 check (corrupted)");
    TC_RETURN_IF_ERROR(parseSafetensors(bytes.data(), bytes.size(), &loaded[names[i]], path));
  }
  TC_RETURN_IF_ERROR(setEntries(loaded[kModelFile].tensors, false, where + " " + kModelFile));
  return setEntries(loaded[kOptimizerFile].tensors, true, where + " " + kOptimizerFile);
}

Status Trainer::evalLoss(const std::vector<HostTensor> &batch, double *loss) {
  const char *name = exec_->hasFunction("eval_step") ? "eval_step" : "grad_step";
  const std::vector<std::string> *names = exec_->outputNames(name);
  if (!names)
    return failedPrecondition("the artifact has no " + std::string(onDevice() ? "GPU " : "") +
                              "eval_step or grad_step");
  // grad_step's first result is the loss (whatever the model named it).
  int li = -1;
  for (size_t i = 0; i < names->size(); ++i)
    if ((*names)[i] == config_.loss)
      li = static_cast<int>(i);
  if (std::string(name) == "grad_step" && !names->empty())
    li = 0;
  if (li < 0)
    return dataLoss(std::string(name) + " has no output '" + config_.loss + "'");
  std::vector<bool> want(names->size(), false);
  want[static_cast<size_t>(li)] = true;
  std::vector<HostTensor> outputs;
  TC_RETURN_IF_ERROR(exec_->run(name, batch, &outputs, &want));
  *loss = hostTensorToDoubles(outputs[static_cast<size_t>(li)])[0];
  return Status::ok();
}

Status fileFingerprint(const std::string &path, const std::string &what, FileFingerprint *out) {
  int fd = -1;
  TC_RETURN_IF_ERROR(openRegularFile(path, what, &fd));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return ioError("cannot stat '" + path + "': " + errnoText());
  }
  const int64_t kBlock = 1 << 20, kAll = 64 * kBlock;
  int64_t size = st.st_size;
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&](const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      h ^= p[i];
      h *= 0x100000001b3ULL;
    }
  };
  mix(reinterpret_cast<const uint8_t *>(&size), sizeof size);
  std::vector<std::pair<int64_t, int64_t>> ranges; // offset, length
  if (size <= kAll) {
    ranges.push_back({0, size});
  } else {
    for (int64_t i = 0; i < 64; ++i)
      ranges.push_back({(size - kBlock) / 63 * i, kBlock});
    ranges.push_back({size - kBlock, kBlock});
  }
  std::vector<uint8_t> buf(static_cast<size_t>(kBlock));
  for (auto [off, len] : ranges) {
    while (len > 0) {
      ssize_t want = static_cast<ssize_t>(std::min<int64_t>(len, kBlock));
      ssize_t got = ::pread(fd, buf.data(), static_cast<size_t>(want), static_cast<off_t>(off));
      if (got <= 0) {
        ::close(fd);
        return ioError("cannot read '" + path + "': " + (got < 0 ? errnoText() : "short read"));
      }
      mix(buf.data(), static_cast<size_t>(got));
      off += got;
      len -= got;
    }
  }
  ::close(fd);
  // The absolute path: a resumed run may start in another folder.
  char *real = ::realpath(path.c_str(), nullptr);
  out->path = real ? real : path;
  std::free(real);
  out->bytes = size;
  out->hash = hex64(h);
  return Status::ok();
}

} // namespace tc::rt
