//===- tc-compile.cpp - model -> artifact ---------------------------------===//
//
// Thin: parses flags, calls tc::compile, writes the artifact or what --emit
// asks for. Exit codes: 0 ok, 2 bad input (model, flags, files), 1 internal.
//
//===----------------------------------------------------------------------===//
#include "compiler/Compile.h"
#include "runtime/src/base/artifact.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

constexpr const char *kUsage = R"(usage: tc-compile MODEL.onnx [options]

  MODEL                  an ONNX model (.onnx, external data beside it) or ONNX
                         textual syntax (.onnxtxt)
  -o FILE                write the artifact (.tca) to FILE
  --input NAME=DIMS      fix the shape of input NAME, e.g. --input input_ids=2x16
                         (repeatable; every dynamic dimension must be fixed)
  --target T             cpu (default); GPU targets come with the CUDA backend
  --emit=KIND            print instead of writing: mlir (the imported module),
                         tc (after the compiler pipeline), program (the
                         reference program summary)
  -h, --help             this text
)";

[[noreturn]] void fail(int code, const std::string &msg) {
  std::fprintf(stderr, "tc-compile: error: %s\n", msg.c_str());
  std::exit(code);
}

bool parseDims(const std::string &s, std::vector<int64_t> *dims) {
  dims->clear();
  if (s.empty() || s == "scalar")
    return true;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t x = s.find('x', pos);
    std::string part = s.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos ||
        part.size() > 12)
      return false;
    dims->push_back(std::stoll(part));
    if (x == std::string::npos)
      break;
    pos = x + 1;
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  tc::CompileOptions opts;
  std::string outPath, emit;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const std::string &flag) -> std::string {
      if (a.size() > flag.size() && a.compare(0, flag.size() + 1, flag + "=") == 0)
        return a.substr(flag.size() + 1);
      if (i + 1 >= argc)
        fail(2, "option " + flag + " needs a value");
      return argv[++i];
    };
    auto is = [&](const std::string &flag) {
      return a == flag || a.compare(0, flag.size() + 1, flag + "=") == 0;
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (is("-o")) {
      outPath = value("-o");
    } else if (is("--input")) {
      std::string v = value("--input");
      size_t eq = v.find('=');
      std::vector<int64_t> dims;
      if (eq == std::string::npos || eq == 0 || !parseDims(v.substr(eq + 1), &dims))
        fail(2, "--input wants NAME=DIMS like input_ids=2x16, got '" + v + "'");
      opts.import.inputShapes[v.substr(0, eq)] = dims;
    } else if (is("--target")) {
      opts.target = value("--target");
    } else if (is("--emit")) {
      emit = value("--emit");
      if (emit != "mlir" && emit != "tc" && emit != "program")
        fail(2, "--emit must be mlir, tc or program, got '" + emit + "'");
    } else if (!a.empty() && a[0] == '-') {
      fail(2, "unknown option '" + a + "' (see --help)");
    } else if (opts.modelPath.empty()) {
      opts.modelPath = a;
    } else {
      fail(2, "more than one model given: '" + opts.modelPath + "' and '" + a + "'");
    }
  }
  if (opts.modelPath.empty())
    fail(2, "no model given (see --help)");
  if (emit.empty() && outPath.empty())
    fail(2, "no output: give -o FILE.tca or --emit=KIND");

  mlir::MLIRContext ctx;
  tc::loadCompilerDialects(ctx);
  tc::CompileResult result;
  tc::CompileError error;
  if (emit == "mlir") {
    if (!tc::importModel(ctx, opts, &result, &error))
      fail(error.kind == tc::CompileErrorKind::BadInput ? 2 : 1, error.message);
    result.imported->print(llvm::outs());
    llvm::outs() << "\n";
    return 0;
  }
  if (!tc::compile(ctx, opts, &result, &error))
    fail(error.kind == tc::CompileErrorKind::BadInput ? 2 : 1, error.message);
  if (emit == "tc") {
    result.module->print(llvm::outs());
    llvm::outs() << "\n";
    return 0;
  }
  if (emit == "program") {
    for (const tc::rt::Function &fn : result.artifact.functions) {
      llvm::outs() << "function " << fn.name << ": " << fn.inputs.size()
                   << " inputs, " << fn.outputs.size() << " outputs, "
                   << fn.ops.size() << " ops\n";
      for (const tc::rt::Op &op : fn.ops)
        llvm::outs() << "  " << op.name << "\n";
    }
    return 0;
  }
  tc::rt::Status st = tc::rt::writeArtifact(result.artifact, outPath);
  if (!st.isOk())
    fail(2, "writing '" + outPath + "': " + st.message());
  size_t params = result.artifact.params.size();
  int64_t elements = 0;
  for (const auto &p : result.artifact.params)
    elements += p.type.numElements();
  std::fprintf(stderr, "tc-compile: wrote %s (%zu parameters, %lld elements)\n",
               outPath.c_str(), params, (long long)elements);
  return 0;
}
