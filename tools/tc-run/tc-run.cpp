//===- tc-run.cpp - run a compiled tc artifact ----------------------------===//
//
//   tc-run MODEL.tca [--device cpu|cuda] --eval [--function NAME]
//          --feed NAME=FILE.npy ... [--metrics out.jsonl]
//          [--ref-precision f32|f64] [--save-outputs DIR]
//
// Evaluates: runs "eval_step" if the artifact has it, else "infer" (or
// --function), prints every output, appends one JSON object per evaluation
// to --metrics with each scalar output by name, and writes the outputs as
// NAME.npy under --save-outputs. A thin main: the work is in the runtime.
//
// Exit codes: 0 success; 2 usage or input error (bad flag, missing or bad
// artifact, missing/extra/ill-typed feed); 1 run-time failure. Every error
// is one line on stderr starting with "tc-run: error: ".
//
//===----------------------------------------------------------------------===//
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "runtime/src/base/artifact.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/base/npy.h"
#include "runtime/src/cpu/executor.h"

using namespace tc::rt;

namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

int fail(int code, const std::string &msg) {
  std::string line = msg;
  for (char &ch : line)
    if (ch == '\n')
      ch = ' ';
  std::fprintf(stderr, "tc-run: error: %s\n", line.c_str());
  return code;
}

void usage(std::FILE *out) {
  std::fprintf(out,
               "usage: tc-run MODEL.tca [--device cpu|cuda] --eval [--function NAME]\n"
               "              --feed NAME=FILE.npy ... [--metrics OUT.jsonl]\n"
               "              [--ref-precision f32|f64] [--save-outputs DIR]\n");
}

struct Options {
  std::string model;
  std::string device = "cpu";
  std::string function;
  std::vector<std::pair<std::string, std::string>> feeds; // name, file
  std::string metrics;
  std::string refPrecision = "f32";
  std::string saveDir;
  bool help = false;
};

/// Parses argv; returns an error message or "".
std::string parseArgs(int argc, char **argv, Options *o) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0) {
      positional.push_back(arg);
      continue;
    }
    std::string flag = arg, value;
    bool hasValue = false;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      hasValue = true;
    }
    auto takeValue = [&](std::string *dst) -> std::string {
      if (!hasValue) {
        if (i + 1 >= argc)
          return "flag " + flag + " needs a value";
        value = argv[++i];
      }
      *dst = value;
      return "";
    };
    std::string err;
    if (flag == "--help" || flag == "-h") {
      o->help = true;
    } else if (flag == "--eval") {
      if (hasValue)
        return "flag --eval takes no value";
    } else if (flag == "--device") {
      err = takeValue(&o->device);
      if (err.empty() && o->device != "cpu" && o->device != "cuda")
        return "--device must be cpu or cuda, got '" + o->device + "'";
    } else if (flag == "--function") {
      err = takeValue(&o->function);
    } else if (flag == "--feed") {
      std::string feed;
      err = takeValue(&feed);
      if (err.empty()) {
        size_t e = feed.find('=');
        if (e == std::string::npos || e == 0 || e + 1 == feed.size())
          return "--feed expects NAME=FILE.npy, got '" + feed + "'";
        o->feeds.push_back({feed.substr(0, e), feed.substr(e + 1)});
      }
    } else if (flag == "--metrics") {
      err = takeValue(&o->metrics);
    } else if (flag == "--ref-precision") {
      err = takeValue(&o->refPrecision);
      if (err.empty() && o->refPrecision != "f32" && o->refPrecision != "f64")
        return "--ref-precision must be f32 or f64, got '" + o->refPrecision + "'";
    } else if (flag == "--save-outputs") {
      err = takeValue(&o->saveDir);
    } else {
      return "unknown flag '" + flag + "' (see tc-run --help)";
    }
    if (!err.empty())
      return err;
  }
  if (o->help)
    return "";
  if (positional.empty())
    return "no artifact given (usage: tc-run MODEL.tca --eval --feed NAME=FILE.npy ...)";
  if (positional.size() > 1)
    return "unexpected argument '" + positional[1] + "' (only one artifact is allowed)";
  o->model = positional[0];
  return "";
}

std::string formatValue(const HostTensor &t, double v) {
  char buf[64];
  if (dtypeIsFloat(t.type.dtype))
    std::snprintf(buf, sizeof buf, "%.6g", v);
  else
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  return buf;
}

void printOutput(const std::string &name, const HostTensor &t) {
  std::vector<double> v = hostTensorToDoubles(t);
  std::string line = name + ": " + typeToString(t.type);
  if (t.type.shape.empty() && v.size() == 1) {
    line += " = " + formatValue(t, v[0]);
  } else {
    line += " [";
    size_t shown = std::min<size_t>(v.size(), 6);
    for (size_t i = 0; i < shown; ++i)
      line += (i ? ", " : "") + formatValue(t, v[i]);
    if (v.size() > shown)
      line += ", ...";
    line += "]";
    if (!v.empty()) {
      double sum = 0, lo = v[0], hi = v[0];
      for (double x : v) {
        sum += x;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
      char buf[128];
      std::snprintf(buf, sizeof buf, " mean=%.6g min=%.6g max=%.6g",
                    sum / static_cast<double>(v.size()), lo, hi);
      line += buf;
    }
  }
  std::printf("%s\n", line.c_str());
}

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "\"";
}

std::string jsonNumber(const HostTensor &t, double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[64];
  if (dtypeIsFloat(t.type.dtype))
    std::snprintf(buf, sizeof buf, "%.9g", v);
  else
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  return buf;
}

/// mkdir -p.
bool makeDirs(const std::string &dir) {
  std::string path;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    path = dir.substr(0, pos);
    if (path.empty())
      continue;
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
      return false;
  }
  struct stat st;
  return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  std::string err = parseArgs(argc, argv, &o);
  if (!err.empty())
    return fail(kExitUsage, err);
  if (o.help) {
    usage(stdout);
    return 0;
  }
  if (o.device == "cuda")
    return fail(kExitUsage, "the CUDA backend is not available in this build yet");

  Artifact artifact;
  Status st = readArtifact(o.model, &artifact);
  if (!st.isOk())
    return fail(kExitUsage, st.message());

  std::string fnName = o.function;
  if (fnName.empty())
    fnName = artifact.findFunction("eval_step") ? "eval_step" : "infer";
  const Function *fn = artifact.findFunction(fnName);
  if (!fn) {
    std::string names;
    for (const Function &f : artifact.functions)
      names += (names.empty() ? "" : ", ") + f.name;
    return fail(kExitUsage, "artifact '" + o.model + "' has no function '" + fnName +
                                "' (it has: " + (names.empty() ? "none" : names) + ")");
  }

  // Feeds, matched to the inputs by name.
  std::map<std::string, std::string> feedFiles;
  for (const auto &[name, file] : o.feeds)
    if (!feedFiles.emplace(name, file).second)
      return fail(kExitUsage, "--feed '" + name + "' is given twice");
  for (const auto &[name, file] : feedFiles) {
    bool known = false;
    for (const std::string &in : fn->inputNames)
      known |= in == name;
    if (!known) {
      std::string names;
      for (const std::string &in : fn->inputNames)
        names += (names.empty() ? "" : ", ") + in;
      return fail(kExitUsage, "--feed '" + name + "': function '" + fn->name +
                                  "' has no input '" + name + "' (inputs: " +
                                  (names.empty() ? "none" : names) + ")");
    }
  }
  std::vector<HostTensor> inputs(fn->inputs.size());
  for (size_t i = 0; i < fn->inputs.size(); ++i) {
    const std::string &name = fn->inputNames[i];
    auto it = feedFiles.find(name);
    if (it == feedFiles.end())
      return fail(kExitUsage, "missing --feed for input '" + name + "' (" +
                                  typeToString(fn->values[fn->inputs[i]]) + ")");
    st = readNpy(it->second, &inputs[i]);
    if (!st.isOk())
      return fail(kExitUsage, "--feed '" + name + "': " + st.message());
  }
  st = checkInputs(*fn, inputs);
  if (!st.isOk())
    return fail(kExitUsage, st.message());

  ExecOptions exec;
  exec.precision = o.refPrecision == "f64" ? RefPrecision::F64 : RefPrecision::F32;
  std::vector<HostTensor> outputs;
  st = runFunction(artifact, *fn, inputs, &outputs, exec);
  if (!st.isOk())
    return fail(kExitRuntime, st.message());

  for (size_t i = 0; i < outputs.size(); ++i)
    printOutput(fn->outputNames[i], outputs[i]);

  if (!o.metrics.empty()) {
    std::string line = "{\"mode\":\"eval\"";
    for (size_t i = 0; i < outputs.size(); ++i) {
      const HostTensor &t = outputs[i];
      if (!t.type.shape.empty())
        continue;
      line += "," + jsonString(fn->outputNames[i]) + ":" +
              jsonNumber(t, hostTensorToDoubles(t)[0]);
    }
    line += "}\n";
    std::FILE *f = std::fopen(o.metrics.c_str(), "a");
    if (!f || std::fputs(line.c_str(), f) < 0 || std::fclose(f) != 0)
      return fail(kExitRuntime, "cannot append to metrics file '" + o.metrics +
                                    "': " + std::strerror(errno));
  }

  if (!o.saveDir.empty()) {
    if (!makeDirs(o.saveDir))
      return fail(kExitRuntime, "cannot create folder '" + o.saveDir + "': " +
                                    std::strerror(errno));
    for (size_t i = 0; i < outputs.size(); ++i) {
      HostTensor t = outputs[i];
      // bf16/fp8/fp4 have no numpy dtype: widen to f32 (exact).
      if (!npyDescr(t.type.dtype))
        t = makeHostTensor({DType::F32, t.type.shape}, hostTensorToDoubles(t));
      std::string file = fn->outputNames[i];
      for (char &ch : file)
        if (ch == '/' || ch == '\\')
          ch = '_'; // output names are not paths
      std::string path = o.saveDir + "/" + file + ".npy";
      st = writeNpy(path, t);
      if (!st.isOk())
        return fail(kExitRuntime, st.message());
    }
  }
  return 0;
}
