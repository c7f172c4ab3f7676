//===- run_checkpoint.cpp - checkpoints of a training run -----------------===//
//
// Checkpoint folders (a --save folder or its step-N folders with
// --keep-checkpoints), TrainRun's save / load, and loading a checkpoint's
// weights into an artifact (--init of --eval and --generate).
//
//===----------------------------------------------------------------------===//
#include "runtime/src/session/run_internal.h"

#include <algorithm>
#include <dirent.h>
#include <set>
#include <sys/stat.h>

#include "runtime/src/base/safetensors.h"

namespace tc::rt {

bool isDir(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string stripSlashes(std::string p) {
  while (p.size() > 1 && p.back() == '/')
    p.pop_back();
  return p;
}

std::vector<std::pair<int64_t, std::string>> stepFolders(const std::string &dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.size() == 13 && n.compare(0, 5, "step-") == 0 &&
          n.find_first_not_of("0123456789", 5) == std::string::npos)
        out.push_back({std::stoll(n.substr(5)), dir + "/" + n});
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string stepFolderName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

std::string newestCheckpoint(const std::string &dir) {
  struct stat st;
  if (::stat((dir + "/state.json").c_str(), &st) == 0)
    return dir;
  auto steps = stepFolders(dir);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it)
    if (::stat((it->second + "/state.json").c_str(), &st) == 0)
      return it->second;
  return "";
}

Status loadArtifactWeights(Artifact *artifact, const std::string &weights, int64_t *step) {
  *step = -1;
  std::string file = weights;
  if (isDir(weights)) {
    std::string dir = newestCheckpoint(stripSlashes(weights));
    if (dir.empty())
      return notFound("'" + weights + "' holds no checkpoint (no state.json)");
    CheckpointMeta meta;
    TC_RETURN_IF_ERROR(readCheckpointMeta(dir, &meta));
    *step = meta.step;
    file = dir + "/model.safetensors";
  }
  SafetensorsFile f;
  TC_RETURN_IF_ERROR(readSafetensors(file, &f));
  std::set<std::string> wanted;
  TC_RETURN_IF_ERROR(matchEntries(*artifact, f.tensors, false, "'" + file + "'", &wanted,
                                  notInStateDict(*artifact)));
  // New weights: the replaced entries' bytes, the others' as they were.
  std::vector<uint8_t> blob;
  std::vector<Parameter> params = artifact->params;
  for (Parameter &p : params) {
    std::vector<uint8_t> bytes;
    auto it = f.tensors.find(p.name);
    if (p.kind != ParamKind::OptimizerState && it != f.tensors.end()) {
      HostTensor t = it->second;
      if (t.type.dtype != p.type.dtype)
        t = makeHostTensor(p.type, hostTensorToDoubles(t));
      bytes = std::move(t.data);
      p.init = ParamInit::Data;
      p.hasData = true;
    } else if (p.hasData) {
      bytes.assign(artifact->weights.begin() + static_cast<std::ptrdiff_t>(p.offset),
                   artifact->weights.begin() + static_cast<std::ptrdiff_t>(p.offset + p.bytes));
    }
    if (!p.hasData)
      continue;
    blob.resize((blob.size() + 63) / 64 * 64);
    p.offset = blob.size();
    p.bytes = bytes.size();
    blob.insert(blob.end(), bytes.begin(), bytes.end());
  }
  artifact->params = std::move(params);
  artifact->weights = std::move(blob);
  return validateArtifact(*artifact);
}

Status TrainRun::save(int64_t step) {
  State &S = *s_;
  const TrainOptions &o = S.o;
  const std::string &saveDir = S.saveDir;
  CheckpointMeta meta;
  meta.step = step;
  meta.rngState = S.rng.state;
  meta.dataPosition = S.data.position;
  meta.artifactHash = S.hash;
  meta.precision = o.refPrecision;
  meta.runId = S.runId;
  meta.run = run_;
  std::string target = o.keepCheckpoints > 0 ? saveDir + "/" + stepFolderName(step) : saveDir;
  if (o.keepCheckpoints > 0 && !isDir(saveDir) && ::mkdir(saveDir.c_str(), 0755) != 0)
    return ioError("cannot create '" + saveDir + "': " + std::strerror(errno));
  Status st = trainer_.saveCheckpoint(target, meta);
  if (!st.isOk())
    return Status(st.code(), "saving checkpoint '" + target + "': " + st.message());
  S.savedAt = step;
  S.obs->line("saved " + target + " (step " + std::to_string(step) + ")");
  if (o.keepCheckpoints > 0) {
    auto all = stepFolders(saveDir);
    for (size_t i = 0; i + static_cast<size_t>(o.keepCheckpoints) < all.size(); ++i)
      removeCheckpointDir(all[i].second);
  }
  return Status::ok();
}

Status TrainRun::saveTo(const std::string &dir) {
  State &S = *s_;
  if (stripSlashes(dir) == S.saveDir)
    return save(step_);
  CheckpointMeta meta;
  meta.step = step_;
  meta.rngState = S.rng.state;
  meta.dataPosition = S.data.position;
  meta.artifactHash = S.hash;
  meta.precision = S.o.refPrecision;
  meta.runId = S.runId;
  meta.run = run_;
  Status st = trainer_.saveCheckpoint(stripSlashes(dir), meta);
  if (!st.isOk())
    return Status(st.code(), "saving checkpoint '" + dir + "': " + st.message());
  return Status::ok();
}

Status TrainRun::loadCheckpoint(const std::string &dir) {
  State &S = *s_;
  CheckpointMeta meta;
  TC_RETURN_IF_ERROR(trainer_.loadCheckpoint(stripSlashes(dir), S.hash, &meta));
  step_ = meta.step;
  S.first = meta.step + 1;
  S.rng.state = meta.rngState;
  S.data.position = meta.dataPosition;
  S.runId = meta.runId;
  return Status::ok();
}

} // namespace tc::rt
