//===- runner.cpp - ONNX node conformance over the CPU reference ----------===//
//
// tc-conformance DIR [--filter SUBSTR] [--report FILE] [--min-pass N] [-v]
//
// Every sub-folder of DIR that holds model.onnx and test_data_set_0/ is one
// test: import (inputs' shapes from input_N.pb), compile for the CPU reference,
// run on input_N.pb, compare with output_N.pb (rtol 1e-3, atol 1e-7, and for
// bf16 / f16 results also 2 units in the last place of the expected value,
// since ONNX's reference computes 16-bit ops in f32 and rounds once; NaN ==
// NaN, integers and bools exact, dtype and shape exact).
//
// --by-op prints, per ONNX op (the op of a test's single node; an _expanded
// test counts for the op of its sibling), how many tests passed, were
// refused (SKIP) and were wrong (FAIL).
//
// A test that stops at a clear "unsupported op/attribute/type" error is
// SKIPPED with that reason; any other error, a wrong result, a crash or a
// time-out is a FAILURE. Each test runs in a forked child so that a crash is
// reported as that test's failure rather than ending the run.
//
// The last line is "N passed, N failed, N skipped"; the exit status is 1 if
// anything failed or fewer than --min-pass tests passed.
//
//===----------------------------------------------------------------------===//

#include "runtime/src/schema/version.h"
#include "compiler/Compile.h"
#include "tools/OnnxInput.h"
#include "frontends/onnx/Importer.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/cpu/executor.h"

#include "mlir/IR/MLIRContext.h"

#include "onnx/onnx_pb.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

using tc::rt::HostTensor;

struct Outcome {
  enum Kind { Pass, Fail, Skip } kind = Fail;
  std::string reason;
};

bool readFile(const std::string &path, std::string *out) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

bool isDir(const std::string &p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool loadTensor(const std::string &path, HostTensor *out, std::string *err) {
  std::string bytes;
  if (!readFile(path, &bytes)) {
    *err = "cannot read " + path;
    return false;
  }
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) {
    *err = "malformed TensorProto " + path;
    return false;
  }
  static mlir::MLIRContext ctx;
  auto t = tc::onnx_import::readTensorProto(&ctx, proto, /*modelDir=*/"", err);
  if (mlir::failed(t))
    return false;
  *out = std::move(*t);
  return true;
}

/// Tests whose expected data in Debian's ONNX 1.12 test data contradicts the
/// ONNX specification; they are skipped with the reason (newer ONNX releases
/// regenerated them).
const std::map<std::string, std::string> &knownBadTestData() {
  static const std::map<std::string, std::string> table = {
      {"test_cast_FLOAT_to_BFLOAT16",
       "known-bad test data: ONNX 1.12 truncates to bfloat16, the spec rounds to nearest even"},
      {"test_castlike_FLOAT_to_BFLOAT16",
       "known-bad test data: input 'like' is stored with rank 1, the model declares rank 2"},
      {"test_castlike_FLOAT_to_BFLOAT16_expanded",
       "known-bad test data: input 'like' is stored with rank 1, the model declares rank 2"},
      {"test_castlike_BFLOAT16_to_FLOAT",
       "known-bad test data: input 'like' is stored with rank 1, the model declares rank 2"},
      {"test_castlike_BFLOAT16_to_FLOAT_expanded",
       "known-bad test data: input 'like' is stored with rank 1, the model declares rank 2"},
  };
  return table;
}

/// "sequence" / "optional" / "map" for a non-tensor value type, "" for tensors.
std::string nonTensorKind(const onnx::TypeProto &t) {
  switch (t.value_case()) {
  case onnx::TypeProto::kTensorType:
    return "";
  case onnx::TypeProto::kSequenceType:
    return "sequence";
  case onnx::TypeProto::kOptionalType:
    return "optional";
  case onnx::TypeProto::kMapType:
    return "map";
  case onnx::TypeProto::kSparseTensorType:
    return "sparse tensor";
  default:
    return "untyped";
  }
}

/// Messages the importer/runtime use for features tc does not have.
bool isUnsupported(const std::string &msg) {
  return msg.find("unsupported") != std::string::npos ||
         msg.find("not supported") != std::string::npos;
}

std::string firstLine(const std::string &s) {
  std::string l = s.substr(0, s.find('\n'));
  return l.size() > 300 ? l.substr(0, 300) + "..." : l;
}

bool compareTensors(const HostTensor &got, HostTensor want, std::string *why) {
  // ONNX 1.12's test data stores bfloat16 tensors as UINT16 bit patterns.
  if (got.type.dtype == tc::rt::DType::BF16 && want.type.dtype == tc::rt::DType::U16)
    want.type.dtype = tc::rt::DType::BF16;
  if (got.type.dtype != want.type.dtype) {
    *why = std::string("dtype ") + tc::rt::dtypeName(got.type.dtype) + " != expected " +
           tc::rt::dtypeName(want.type.dtype);
    return false;
  }
  if (got.type.shape != want.type.shape) {
    *why = "shape " + tc::rt::shapeToString(got.type.shape) + " != expected " +
           tc::rt::shapeToString(want.type.shape);
    return false;
  }
  int64_t n = want.type.numElements();
  tc::rt::DType dt = want.type.dtype;
  for (int64_t i = 0; i < n; ++i) {
    if (tc::rt::dtypeIsFloat(dt)) {
      double g = tc::rt::loadAsDouble(got.data.data(), dt, i);
      double w = tc::rt::loadAsDouble(want.data.data(), dt, i);
      if (std::isnan(w) && std::isnan(g))
        continue;
      if (std::isinf(w) && g == w)
        continue;
      double tol = 1e-7 + 1e-3 * std::fabs(w);
      if ((dt == tc::rt::DType::BF16 || dt == tc::rt::DType::F16) && w != 0 && std::isfinite(w)) {
        int e = 0;
        std::frexp(std::fabs(w), &e); // |w| in [2^(e-1), 2^e)
        tol = std::max(tol, 2 * std::ldexp(1.0, e - 1 - (dt == tc::rt::DType::BF16 ? 7 : 10)));
      }
      if (!(std::fabs(g - w) <= tol)) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "element %lld: got %.9g, expected %.9g",
                      (long long)i, g, w);
        *why = buf;
        return false;
      }
    } else {
      int64_t g = tc::rt::loadAsInt(got.data.data(), dt, i);
      int64_t w = tc::rt::loadAsInt(want.data.data(), dt, i);
      if (g != w) {
        *why = "element " + std::to_string(i) + ": got " + std::to_string(g) +
               ", expected " + std::to_string(w);
        return false;
      }
    }
  }
  return true;
}

Outcome runTest(const std::string &dir) {
  Outcome r;
  std::string modelPath = dir + "/model.onnx";
  std::string bytes;
  if (!readFile(modelPath, &bytes)) {
    r.reason = "cannot read model.onnx";
    return r;
  }
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) {
    r.reason = "model.onnx is not a ModelProto";
    return r;
  }
  std::string base = dir.substr(dir.find_last_of('/') + 1);
  auto bad = knownBadTestData().find(base);
  if (bad != knownBadTestData().end()) {
    r.kind = Outcome::Skip;
    r.reason = bad->second;
    return r;
  }
  // tc functions take and return tensors only: sequence/optional graph inputs
  // and outputs (whose .pb files are SequenceProto/OptionalProto) are skipped.
  for (const auto &io : {model.graph().input(), model.graph().output()})
    for (const auto &v : io) {
      std::string kind = nonTensorKind(v.type());
      if (!kind.empty()) {
        r.kind = Outcome::Skip;
        r.reason = "unsupported " + kind + " graph input/output '" + v.name() + "'";
        return r;
      }
    }
  // Graph inputs that are not initializers, in order: input_N.pb feeds the Nth.
  std::vector<std::string> inputNames;
  std::map<std::string, int> declaredElemType;
  for (const auto &in : model.graph().input())
    if (in.type().has_tensor_type())
      declaredElemType[in.name()] = in.type().tensor_type().elem_type();
  {
    std::vector<std::string> inits;
    for (const auto &t : model.graph().initializer())
      inits.push_back(t.name());
    for (const auto &in : model.graph().input())
      if (std::find(inits.begin(), inits.end(), in.name()) == inits.end())
        inputNames.push_back(in.name());
  }
  std::string data = dir + "/test_data_set_0";
  std::map<std::string, HostTensor> inputs;
  for (size_t i = 0;; ++i) {
    std::string p = data + "/input_" + std::to_string(i) + ".pb";
    if (access(p.c_str(), R_OK) != 0)
      break;
    HostTensor t;
    std::string err;
    if (!loadTensor(p, &t, &err)) {
      r.kind = isUnsupported(err) ? Outcome::Skip : Outcome::Fail;
      r.reason = "input " + std::to_string(i) + ": " + firstLine(err);
      return r;
    }
    if (i >= inputNames.size()) {
      r.reason = "more input files than graph inputs";
      return r;
    }
    // ONNX 1.12's test data stores bfloat16 tensors as UINT16 bit patterns.
    if (t.type.dtype == tc::rt::DType::U16 &&
        declaredElemType[inputNames[i]] == onnx::TensorProto::BFLOAT16)
      t.type.dtype = tc::rt::DType::BF16;
    inputs[inputNames[i]] = std::move(t);
  }
  if (inputs.size() < inputNames.size()) {
    // Optional inputs left out by the test: the model must not need them.
    inputNames.resize(inputs.size());
  }
  std::vector<HostTensor> expected;
  for (size_t i = 0;; ++i) {
    std::string p = data + "/output_" + std::to_string(i) + ".pb";
    if (access(p.c_str(), R_OK) != 0)
      break;
    HostTensor t;
    std::string err;
    if (!loadTensor(p, &t, &err)) {
      r.kind = isUnsupported(err) ? Outcome::Skip : Outcome::Fail;
      r.reason = "output " + std::to_string(i) + ": " + firstLine(err);
      return r;
    }
    expected.push_back(std::move(t));
  }

  tc::CompileOptions opts;
  tc::onnx_import::ImportOptions importOpts;
  for (auto &[name, t] : inputs)
    importOpts.inputShapes[name] = t.type.shape;
  // The context must outlive the modules in `result`.
  mlir::MLIRContext ctx;
  tc::loadCompilerDialects(ctx);
  tc::CompileResult result;
  ctx.printOpOnDiagnostic(false);
  for (int attempt = 0;; ++attempt) {
    tc::CompileError error;
    result = tc::CompileResult();
    tc::CompileInput input;
    if (tc::importOnnx(ctx, modelPath, importOpts, &input, &error.message) &&
        tc::compile(ctx, std::move(input), opts, &result, &error))
      break;
    const std::string tag = "needs-constant-input: ";
    size_t at = error.message.find(tag);
    if (at != std::string::npos && attempt < 16) {
      std::string rest = error.message.substr(at + tag.size());
      std::string name = rest.substr(0, rest.find(':'));
      auto it = inputs.find(name);
      if (it != inputs.end() && !importOpts.constantInputs.count(name)) {
        importOpts.constantInputs[name] = it->second;
        importOpts.inputShapes.erase(name);
        continue;
      }
    }
    r.kind = isUnsupported(error.message) ? Outcome::Skip : Outcome::Fail;
    r.reason = "compile: " + firstLine(error.message);
    return r;
  }
  const tc::rt::Function *fn = result.artifact.findFunction("infer");
  if (!fn) {
    r.reason = "artifact has no 'infer' function";
    return r;
  }
  std::vector<HostTensor> args;
  for (const std::string &name : fn->inputNames) {
    auto it = inputs.find(name);
    if (it == inputs.end()) {
      r.reason = "no test data for input '" + name + "'";
      return r;
    }
    args.push_back(it->second);
  }
  std::vector<HostTensor> outputs;
  tc::rt::Status st = tc::rt::runFunction(result.artifact, *fn, args, &outputs);
  if (!st.isOk()) {
    r.kind = st.code() == tc::rt::StatusCode::Unimplemented ? Outcome::Skip
                                                              : Outcome::Fail;
    r.reason = "run: " + firstLine(st.message());
    return r;
  }
  if (outputs.size() < expected.size()) {
    r.reason = "model produced " + std::to_string(outputs.size()) + " outputs, test expects " +
               std::to_string(expected.size());
    return r;
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    std::string why;
    if (!compareTensors(outputs[i], expected[i], &why)) {
      r.reason = "output " + std::to_string(i) + " ('" + fn->outputNames[i] + "'): " + why;
      return r;
    }
  }
  r.kind = Outcome::Pass;
  return r;
}

/// Runs one test in a child process with a time limit.
Outcome runIsolated(const std::string &dir, int timeoutSec) {
  int fds[2];
  if (pipe(fds) != 0)
    return {Outcome::Fail, "pipe failed"};
  pid_t pid = fork();
  if (pid < 0)
    return {Outcome::Fail, "fork failed"};
  if (pid == 0) {
    close(fds[0]);
    alarm(timeoutSec);
    Outcome o = runTest(dir);
    std::string msg = std::to_string((int)o.kind) + " " + o.reason;
    ssize_t w = write(fds[1], msg.data(), msg.size());
    (void)w;
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0)
    msg.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (msg.empty()) {
    if (WIFSIGNALED(status))
      return {Outcome::Fail, WTERMSIG(status) == SIGALRM
                                 ? "timed out after " + std::to_string(timeoutSec) + " s"
                                 : std::string("crashed with signal ") +
                                       strsignal(WTERMSIG(status))};
    return {Outcome::Fail, "child exited without a result"};
  }
  Outcome o;
  o.kind = (Outcome::Kind)(msg[0] - '0');
  o.reason = msg.size() > 2 ? msg.substr(2) : "";
  return o;
}

/// The ONNX op a test exercises: the op_type of its model's nodes other than
/// Constant (the first, when there are several), or "(unreadable)".
std::string testOp(const std::string &dir) {
  std::string bytes;
  onnx::ModelProto m;
  if (!readFile(dir + "/model.onnx", &bytes) || !m.ParseFromString(bytes))
    return "(unreadable)";
  for (const auto &n : m.graph().node())
    if (n.op_type() != "Constant")
      return (n.domain().empty() || n.domain() == "ai.onnx" ? "" : n.domain() + ".") + n.op_type();
  return m.graph().node_size() ? "Constant" : "(empty)";
}

} // namespace

int main(int argc, char **argv) {
  std::string root, filter, reportPath;
  int minPass = 0;
  bool verbose = false, byOp = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--filter" && i + 1 < argc)
      filter = argv[++i];
    else if (a == "--report" && i + 1 < argc)
      reportPath = argv[++i];
    else if (a == "--min-pass" && i + 1 < argc)
      minPass = std::atoi(argv[++i]);
    else if (a == "-v")
      verbose = true;
    else if (a == "--by-op")
      byOp = true;
    else if (a == "--version") {
      std::printf("tc-conformance (tc) %s\n", tc::rt::kTcVersion);
      return 0;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: tc-conformance DIR [--filter S] [--report F] [--min-pass N] [--by-op] "
                  "[-v]\n\nRuns every ONNX node test under DIR (model.onnx + test_data_set_*) "
                  "through tc's importer and CPU reference; prints passed / refused / wrong.\n");
      return 0;
    } else if (!a.empty() && a[0] != '-' && root.empty())
      root = a;
    else {
      std::fprintf(stderr, "usage: tc-conformance DIR [--filter S] [--report F] "
                           "[--min-pass N] [--by-op] [-v]\n");
      return 2;
    }
  }
  if (root.empty() || !isDir(root)) {
    std::fprintf(stderr, "tc-conformance: error: test folder '%s' not found\n",
                 root.c_str());
    return 2;
  }
  std::vector<std::string> tests;
  if (DIR *d = opendir(root.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string name = e->d_name;
      if (name[0] == '.' || (!filter.empty() && name.find(filter) == std::string::npos))
        continue;
      if (isDir(root + "/" + name) && access((root + "/" + name + "/model.onnx").c_str(), R_OK) == 0)
        tests.push_back(name);
    }
    closedir(d);
  }
  std::sort(tests.begin(), tests.end());
  int pass = 0, fail = 0, skip = 0;
  std::vector<Outcome::Kind> outcomes;
  std::ostringstream report;
  std::map<std::string, int> skipReasons;
  for (const std::string &t : tests) {
    Outcome o = runIsolated(root + "/" + t, 120);
    outcomes.push_back(o.kind);
    const char *tag = o.kind == Outcome::Pass ? "PASS" : o.kind == Outcome::Skip ? "SKIP" : "FAIL";
    (o.kind == Outcome::Pass ? pass : o.kind == Outcome::Skip ? skip : fail)++;
    report << tag << " " << t << (o.reason.empty() ? "" : ": ") << o.reason << "\n";
    if (o.kind == Outcome::Fail || verbose)
      std::printf("%s %s%s%s\n", tag, t.c_str(), o.reason.empty() ? "" : ": ", o.reason.c_str());
    if (o.kind == Outcome::Skip)
      skipReasons[o.reason.substr(0, 90)]++;
  }
  if (!reportPath.empty()) {
    std::ofstream f(reportPath);
    f << report.str();
  }
  if (byOp) {
    std::map<std::string, std::array<int, 3>> perOp; // passed, refused, wrong
    for (size_t i = 0; i < tests.size(); ++i) {
      std::string name = tests[i], op = testOp(root + "/" + name);
      const std::string suffix = "_expanded";
      if (name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        std::string sibling = name.substr(0, name.size() - suffix.size());
        if (isDir(root + "/" + sibling))
          op = testOp(root + "/" + sibling);
      }
      auto &c = perOp[op];
      ++c[outcomes[i] == Outcome::Pass ? 0 : outcomes[i] == Outcome::Skip ? 1 : 2];
    }
    std::printf("per op: passed / refused / wrong\n");
    for (const auto &[op, c] : perOp)
      std::printf("  %-28s %4d %4d %4d%s\n", op.c_str(), c[0], c[1], c[2],
                  c[2] ? "  WRONG" : (c[0] && c[1] ? "  (partly refused)" : ""));
  }
  if (!skipReasons.empty()) {
    std::vector<std::pair<int, std::string>> top;
    for (auto &[r, n] : skipReasons)
      top.push_back({n, r});
    std::sort(top.rbegin(), top.rend());
    std::printf("most common skip reasons:\n");
    for (size_t i = 0; i < top.size() && i < 15; ++i)
      std::printf("  %4d  %s\n", top[i].first, top[i].second.c_str());
  }
  if (pass < minPass)
    std::printf("only %d passed, fewer than the required %d\n", pass, minPass);
  std::printf("%d passed, %d failed, %d skipped\n", pass, fail, skip);
  return (fail > 0 || pass < minPass) ? 1 : 0;
}
