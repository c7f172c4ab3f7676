//===- tc-compile.cpp - model -> artifact ---------------------------------===//
//
// Thin: parses flags, calls tc::compile, writes the artifact or what --emit
// asks for. Exit codes: 0 ok, 2 bad input (model, flags, files), 1 internal.
//
//===----------------------------------------------------------------------===//
#include "compiler/Cache.h"
#include "compiler/Compile.h"
#include "compiler/DeviceProgram.h"
#include "compiler/Flops.h"
#include "compiler/MemoryPlan.h"
#include "compiler/PrecisionPlan.h"
#include "compiler/Target.h"
#include "compiler/Transforms/Fp4Qat.h"
#include "compiler/Transforms/Fp8Plan.h"
#include "compiler/codegen/cuda/CudaCodegen.h"
#include "runtime/src/schema/artifact.h"
#include "tools/OnnxInput.h"
#include "tools/cli.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr const char *kUsage = R"(usage: tc-compile MODEL.onnx [options]

  MODEL                  an ONNX model (.onnx, external data beside it) or ONNX
                         textual syntax (.onnxtxt)
  -o FILE                write the artifact (.tca) to FILE (default: MODEL with
                         its .onnx / .onnxtxt extension replaced by .tca)
  --dim NAME=N           bind every dynamic input axis the exporter named NAME,
                         e.g. --dim batch=8 --dim seq=1024 (repeatable;
                         torch.onnx.export's dynamic_shapes / dynamic_axes names)
  --input NAME=DIMS      fix the whole shape of input NAME, e.g. --input
                         input_ids=2x16 (repeatable; wins over --dim, must agree)
                         Every dynamic dimension must be fixed by one of the two.
  --target T             cpu (default), sm_90 (H100/H200) or sm_120 (RTX 5090,
                         kernels built for sm_120a)
  --fp32                 precision: everything in fp32 (default)
  --tf32                 fp32 with TF32 tensor cores for matmuls (GPU targets)
  --bf16                 precision: bf16 matmuls and elementwise math; norms,
                         softmax and the loss in fp32; fp32 master weights and
                         optimizer state (the CPU reference emulates bf16 exactly)
  --fp16                 precision: the --bf16 plan in fp16 (attention and norms
                         stay fp32: the GPU has no f16 kernels for them); with
                         --train, dynamic loss scaling as torch.amp.GradScaler
                         (a step with an inf/NaN gradient is skipped, tc-run
                         says so). Not with --bf16, --tf32 or --fp8
  --fp8                  precision: the bf16 plan with the linear layers' matmuls
                         in FP8 (E4M3 operands, E5M2 gradients, fp32
                         accumulation, bf16 outputs; Transformer Engine's
                         recipe: the lm_head, a tied embedding, norms, softmax
                         and the loss stay high precision). --target cpu
                         emulates it; sm_90 runs tensor scaling (cuBLASLt)
  --fp8-scaling S        tensor (one scale per tensor by its current amax, the
                         default), delayed (Transformer Engine's amax
                         history: the scale from earlier steps' amaxes), row
                         (per row / column along K), mxfp8 (1x32 blocks,
                         E8M0 scales) or block128 (1x128 activation and
                         gradient blocks, 128x128 weight blocks, power-of-two
                         f32 scales; sm_90)
  --fp8-amax-history N   delayed: the steps of the amax history (1024)
  --fp8-amax-compute A   delayed: max (of the history, the default) or
                         most_recent
  --fp4-qat F            FP4 quantisation-aware training (needs --train), F =
                         nvfp4 (1x16 E4M3 blocks + an FP32 tensor scale, 16x16
                         blocks for weights) or mxfp4 (1x32 E8M0 blocks): the
                         --fp8 plan's linear layers read their weights through
                         quantize-and-back (straight-through gradient), the rest
                         is the --bf16 plan (--bf16 may be given). The CPU
                         reference and sm_90 / sm_120 (fake quantisation
                         kernels, the products BF16 GEMMs) run it
  --fp4-qat-acts         with --fp4-qat: the activations of those layers too
  --fp4-qat-grads        with --fp4-qat: the backward's inputs too, the
                         incoming gradient with stochastic rounding (draws
                         keyed by the site and a step in the training state)
  --fp4-rht              with --fp4-qat-grads: the wgrad inputs after
                         Transformer Engine's 16-point random Hadamard transform
                         along the tokens (in multiples of 16)
  --keep-high-precision REGEX
                         keep matmuls in bf16 whose ONNX node or weight name
                         matches REGEX (repeatable; POSIX ERE, as --trainable)
  --high-precision-first N, --high-precision-last N
                         keep the first / last N transformer blocks in bf16
                         (block index from names like h.3., layers.3., blocks.3.)
  --fp8-lm-head          the lm_head (and a tied embedding's product) in FP8 too
  --allow-fallback       a matmul that cannot run in FP8 (K or N not a multiple
                         of 16) stays bf16, reported, instead of an error
  --pad-vocab N          pad a classifier's class axis (the vocabulary of an LM
                         head feeding the cross-entropy) to a multiple of N
                         inside the step (GPU targets: 64 by default, GPT-2's
                         50257 -> 50304; the CPU: not unless given), with -inf
                         logits on the padding: the loss and gradients are the
                         same numbers, the three GEMMs aligned; parameters and
                         checkpoints keep their shapes. 0 turns it off
  --no-fused-attention   keep exported attention as matmul / softmax / matmul
                         (default: tc-recognize-attention makes each causal or
                         unmasked attention one tc.attention op)
  --report precision     print the precision plan: its summary (matmul FLOPs in
                         bf16 and fp8, ops per precision), the ops by kind,
                         then each op with its precision, the reason, its ONNX
                         node, format, scaling, scale source and rounding
  --report memory        GPU targets: print the memory plan (parameters,
                         gradients, optimizer state, activations, workspace,
                         arena peak; bytes, and GiB = 2^30 B), and per card of
                         the target its capacity (cudaMemGetInfo's total, GB
                         and GiB), whether the step fits with the CUDA context,
                         and the largest batch that fits (found by re-planning
                         at other batch sizes: --dim batch=B or --input)
  --report flops         training: what MFU and HFU are measured against (N
                         without embeddings, L, T, d; 6N + 12LTd per token;
                         the compiler's FLOP count of a step; the target's
                         dense peaks)
  --no-batch-search      --report memory without the largest batch (each
                         re-plan costs a compile up to its memory plan)
  --json                 print the --report as JSON (every op, every card)
  --emit=KIND            print instead of writing: mlir (the imported module),
                         tc (after the compiler pipeline), program (the
                         reference program summary); GPU targets also: tcx
                         (the planned execution-level module), cuda (the
                         generated kernels' CUDA C++), kernels (one line per
                         kernel: name, cubin architecture and size, PTX size),
                         device (the device program: one line per op, kind,
                         name, buffers as space@offset:bytes)
  --dump-kernels DIR     GPU targets: write NAME.cu, NAME.ptx, NAME.cubin
  --experimental=LIST    GPU targets: turn on levers written but not (yet)
                         faster on a GPU (comma-separated; bench/RESULTS.md
                         has their numbers): wgmma-attention (attention on
                         sm_90a's warpgroup MMA on an H100/H200), gelu-erf
                         (the exact GELU and its backward as GEMM epilogues),
                         side-stream (weight-gradient GEMMs on a second
                         CUDA stream beside the backward)
  --no-cache             compile cold: neither read nor write the compile cache
                         ($TC_CACHE_DIR, default ~/.cache/tc: kernels and
                         artifacts keyed by the model's bytes (weights
                         excluded under --no-weights), every flag, tc's build
                         and NVRTC's version; a hit writes the same bytes)
  --quiet                print no notes (what the importer restored, which
                         attention chains stay unfused and why, ...)
  -h, --help             this text
  --version              print tc's version

Weights and initialisers (tc-run --seed N picks the random draws):
  --no-weights           read no weight data (external data files may be
                         absent): the artifact carries shapes only; give
                         --init-params or tc-run --init FILE
  --init-params KIND[:ARG]
                         initialise every model weight at run time instead of
                         carrying its data: normal[:STD] (default 0.02; GPT-2
                         style: rank >= 2 ~ N(0, STD), rank < 2 named *bias
                         zeros, other rank < 2 (norm scales) ones),
                         uniform[:A] (the same with U(-A, A)), zeros, ones
  --init-param REGEX=KIND[:ARG]
                         the initialiser of the weights whose name matches
                         REGEX (repeatable, the last match wins):
                         normal[:STD], uniform[:A], zeros, ones

Training (the artifact gets eval_step, grad_step, apply_step, train_step):
  --train                build the training step
  --loss NAME            the loss output (default: the only scalar output)
  --optimizer sgd|adamw  torch.optim.SGD / torch.optim.AdamW (default adamw)
  --lr X                 default learning rate (tc-run --lr overrides; 1e-3)
  --momentum X           SGD momentum (0)
  --beta1 X --beta2 X    AdamW betas (0.9, 0.999)
  --eps X                AdamW eps (1e-8)
  --weight-decay X       sgd: added to the gradient; adamw: decoupled
                         (default: torch's, 0 for sgd, 0.01 for adamw)
  --no-decay REGEX       no weight decay for matching parameters (repeatable)
  --grad-accum N         micro-batches per step, gradients averaged (1)
  --clip-grad-norm X     clip the global gradient L2 norm to X (0: off)
  --loss-scale-init X    --fp16: the initial loss scale (65536 = 2^16)
  --loss-scale-growth-interval N
                         --fp16: clean steps after which the scale doubles (2000)
  --trainable REGEX      train only matching parameters (repeatable; default:
                         every floating-point initializer)
  --freeze REGEX         never train matching parameters (repeatable)
  --keep-merged          train parameters that the exporter merged because
                         their values were equal (a fresh model's zero biases
                         and unit norm scales: TorchScript's Identity aliases,
                         the dynamo optimizer's deduplicated initializers) as
                         one shared tensor (default: each is restored as a
                         parameter of its own, named as in torch)
  --no-tie               keep an initializer that holds the exact transpose of
                         another (a tied weight split by the exporter) as a
                         parameter of its own (default: both use the first)
Every REGEX (--trainable, --freeze, --no-decay, --init-param) is a POSIX
extended regular expression (as grep -E: no \d, write [0-9]), searched in the
parameter names (the model's own names, as in the checkpoint): anchor with ^ $.
)";

/// What a compile printed, kept with its artifact in the cache: stderr before
/// the reports, the reports (stdout), stderr after writing the artifact.
/// Each piece is printed as it is added.
struct Captured {
  std::string before, out, afterText;
  void err(const std::string &s) {
    std::fputs(s.c_str(), stderr);
    before += s;
  }
  void after(const std::string &s) {
    std::fputs(s.c_str(), stderr);
    afterText += s;
  }
};

void cacheNotes(const std::vector<std::string> &notes, bool quiet) {
  if (!quiet)
    for (const std::string &n : notes)
      std::fprintf(stderr, "tc-compile: note: %s\n", n.c_str());
}

/// A cached artifact for `key`: written to `outPath` with what its compile
/// printed. False on a miss (or when `outPath` cannot be written: the
/// compile then reports that itself).
bool replayCached(const tc::cache::Store &store, const tc::cache::Key &key,
                  const std::string &outPath, bool quiet) {
  std::vector<std::string> notes;
  std::optional<tc::cache::Store::Entry> hit = store.get("artifacts", key, 4, &notes);
  cacheNotes(notes, quiet);
  if (!hit)
    return false;
  llvm::StringRef before = hit->fields[0], out = hit->fields[1], after = hit->fields[2],
                  artifact = hit->fields[3];
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(outPath, ec);
    if (ec)
      return false;
    os << artifact;
    os.close();
    if (os.has_error()) {
      os.clear_error();
      return false;
    }
  }
  llvm::errs() << before;
  llvm::errs().flush();
  llvm::outs() << out;
  llvm::outs().flush();
  llvm::errs() << after;
  return true;
}

/// Stores the artifact just written to `outPath` with what was printed.
void storeCached(const tc::cache::Store &store, const tc::cache::Key &key,
                 const std::string &outPath, const Captured &c, bool quiet) {
  auto bytes = llvm::MemoryBuffer::getFile(outPath, false, false);
  if (!bytes)
    return;
  std::vector<std::string> notes;
  store.put("artifacts", key, {c.before, c.out, c.afterText, (*bytes)->getBuffer()}, &notes);
  cacheNotes(notes, quiet);
}

[[noreturn]] void fail(int code, const std::string &msg) {
  std::fprintf(stderr, "tc-compile: error: %s\n", msg.c_str());
  std::exit(code);
}

double parseNumber(const std::string &flag, const std::string &v) {
  char *end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(d))
    fail(2, flag + " wants a number, got '" + v + "'");
  return d;
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
  std::string modelPath;
  tc::onnx_import::ImportOptions importOpts;
  std::string outPath, emit, dumpDir;
  bool reportMemory = false, reportPrecision = false, reportFlops = false, quiet = false,
       json = false, batchSearch = true, noCache = false;
  std::vector<std::string> trainOnly; // flags that only mean something with --train
  std::vector<std::string> fp8Only;   // flags that only mean something with --fp8
  std::vector<std::string> fp16Only;  // flags that only mean something with --fp16
  std::vector<std::string> fp4Only;   // flags that only mean something with --fp4-qat
  bool fp4Qat = false;
  std::vector<std::string> precisionFlags; // --fp32 / --bf16 / --fp16 / --tf32 / --fp8, in order
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
    } else if (a == "--version") {
      std::printf("tc-compile (tc) %s\n", tc::cli::kVersion);
      return 0;
    } else if (is("-o")) {
      outPath = value("-o");
    } else if (is("--input")) {
      std::string v = value("--input");
      size_t eq = v.find('=');
      std::vector<int64_t> dims;
      if (eq == std::string::npos || eq == 0 || !parseDims(v.substr(eq + 1), &dims))
        fail(2, "--input wants NAME=DIMS like input_ids=2x16, got '" + v + "'");
      for (size_t d = 0; d < dims.size(); ++d)
        if (dims[d] == 0)
          fail(2, "--input " + v + ": axis " + std::to_string(d) + " is 0 (an empty " +
                      (d == 0 ? "batch" : "dimension") + "); every dimension must be at least 1");
      if (!importOpts.inputShapes.emplace(v.substr(0, eq), dims).second)
        fail(2, "--input " + v.substr(0, eq) + " is given twice");
    } else if (is("--dim")) {
      std::string v = value("--dim");
      size_t eq = v.find('=');
      std::string n = eq == std::string::npos ? "" : v.substr(eq + 1);
      if (eq == std::string::npos || eq == 0 || n.empty() || n.size() > 12 ||
          n.find_first_not_of("0123456789") != std::string::npos || std::stoll(n) < 1)
        fail(2, "--dim wants NAME=N with N >= 1, like batch=8, got '" + v + "'");
      if (!importOpts.dimParams.emplace(v.substr(0, eq), std::stoll(n)).second)
        fail(2, "--dim " + v.substr(0, eq) + " is given twice");
    } else if (a == "--train") {
      opts.train.enabled = true;
    } else if (is("--loss")) {
      trainOnly.push_back("--loss");
      opts.train.loss = value("--loss");
    } else if (is("--optimizer")) {
      trainOnly.push_back("--optimizer");
      opts.train.optimizer = value("--optimizer");
      if (opts.train.optimizer != "sgd" && opts.train.optimizer != "adamw")
        fail(2, "--optimizer must be sgd or adamw, got '" + opts.train.optimizer + "'");
    } else if (is("--lr")) {
      trainOnly.push_back("--lr");
      opts.train.lr = parseNumber("--lr", value("--lr"));
    } else if (is("--momentum")) {
      trainOnly.push_back("--momentum");
      opts.train.momentum = parseNumber("--momentum", value("--momentum"));
    } else if (is("--beta1")) {
      trainOnly.push_back("--beta1");
      opts.train.beta1 = parseNumber("--beta1", value("--beta1"));
    } else if (is("--beta2")) {
      trainOnly.push_back("--beta2");
      opts.train.beta2 = parseNumber("--beta2", value("--beta2"));
    } else if (is("--eps")) {
      trainOnly.push_back("--eps");
      opts.train.eps = parseNumber("--eps", value("--eps"));
    } else if (is("--weight-decay")) {
      trainOnly.push_back("--weight-decay");
      opts.train.weightDecay = parseNumber("--weight-decay", value("--weight-decay"));
      if (opts.train.weightDecay < 0)
        fail(2, "--weight-decay must be >= 0");
    } else if (is("--no-decay")) {
      trainOnly.push_back("--no-decay");
      opts.train.noDecay.push_back(value("--no-decay"));
    } else if (is("--grad-accum")) {
      trainOnly.push_back("--grad-accum");
      std::string v = value("--grad-accum");
      double n = parseNumber("--grad-accum", v);
      if (n < 1 || n != static_cast<double>(static_cast<int64_t>(n)) || n > 1e6)
        fail(2, "--grad-accum wants a whole number >= 1, got '" + v + "'");
      opts.train.gradAccum = static_cast<int64_t>(n);
    } else if (is("--clip-grad-norm")) {
      trainOnly.push_back("--clip-grad-norm");
      opts.train.clipGradNorm = parseNumber("--clip-grad-norm", value("--clip-grad-norm"));
      if (opts.train.clipGradNorm < 0)
        fail(2, "--clip-grad-norm must be >= 0");
    } else if (is("--loss-scale-init")) {
      trainOnly.push_back("--loss-scale-init");
      fp16Only.push_back("--loss-scale-init");
      opts.train.lossScaleInit = parseNumber("--loss-scale-init", value("--loss-scale-init"));
      if (!(opts.train.lossScaleInit > 0))
        fail(2, "--loss-scale-init must be > 0");
    } else if (is("--loss-scale-growth-interval")) {
      trainOnly.push_back("--loss-scale-growth-interval");
      fp16Only.push_back("--loss-scale-growth-interval");
      std::string v = value("--loss-scale-growth-interval");
      double n = parseNumber("--loss-scale-growth-interval", v);
      // The growth tracker is an f32 counter: exact up to 2^24.
      if (n < 1 || n != static_cast<double>(static_cast<int64_t>(n)) || n > 16777216)
        fail(2, "--loss-scale-growth-interval wants a whole number in [1, 2^24], got '" + v +
                    "'");
      opts.train.lossScaleGrowthInterval = static_cast<int64_t>(n);
    } else if (is("--trainable")) {
      opts.trainable.push_back(value("--trainable"));
    } else if (a == "--no-fused-attention") {
      opts.fuseAttention = false;
    } else if (a == "--no-weights") {
      importOpts.loadWeights = false;
    } else if (is("--init-params")) {
      tc::rt::Status st = tc::rt::parseInitSpec(value("--init-params"), &opts.initAll);
      if (!st.isOk())
        fail(2, "--init-params: " + st.message());
    } else if (is("--init-param")) {
      std::pair<std::string, tc::rt::InitSpec> o;
      tc::rt::Status st = tc::rt::parseInitParamFlag(value("--init-param"), &o);
      if (!st.isOk())
        fail(2, st.message());
      opts.initOverrides.push_back(std::move(o));
    } else if (a == "--quiet") {
      quiet = true;
    } else if (a == "--no-cache") {
      noCache = true;
    } else if (a == "--keep-merged") {
      importOpts.restoreMerged = false;
    } else if (a == "--no-tie") {
      importOpts.tieTransposedCopies = false;
    } else if (is("--freeze")) {
      opts.freeze.push_back(value("--freeze"));
    } else if (is("--target")) {
      opts.target = value("--target");
    } else if (is("--experimental")) {
      std::string list = value("--experimental");
      for (size_t at = 0; at <= list.size();) {
        size_t end = std::min(list.find(',', at), list.size());
        opts.experimental.push_back(list.substr(at, end - at));
        at = end + 1;
      }
      if (std::string e = tc::checkExperimentalLevers(opts.experimental); !e.empty())
        fail(2, e);
    } else if (a == "--fp32" || a == "--bf16" || a == "--fp16") {
      precisionFlags.push_back(a);
      opts.precision = a.substr(2);
    } else if (a == "--tf32") {
      precisionFlags.push_back(a);
      opts.precision = "tf32";
      opts.tf32 = true;
    } else if (a == "--fp8") {
      precisionFlags.push_back(a);
      opts.precision = "fp8";
    } else if (is("--fp4-qat")) {
      fp4Qat = true;
      opts.fp4.format = value("--fp4-qat");
      if (std::string err = tc::checkFp4Format(opts.fp4.format); !err.empty())
        fail(2, err);
    } else if (a == "--fp4-qat-acts") {
      fp4Only.push_back(a);
      opts.fp4.acts = true;
    } else if (a == "--fp4-qat-grads") {
      fp4Only.push_back(a);
      opts.fp4.grads = true;
    } else if (a == "--fp4-rht") {
      fp4Only.push_back(a);
      opts.fp4.rht = true;
    } else if (is("--fp8-scaling")) {
      fp8Only.push_back("--fp8-scaling");
      opts.fp8.scaling = value("--fp8-scaling");
      if (std::string err = tc::checkFp8Scaling(opts.fp8.scaling); !err.empty())
        fail(2, err);
    } else if (is("--fp8-amax-history")) {
      fp8Only.push_back("--fp8-amax-history");
      double n = parseNumber("--fp8-amax-history", value("--fp8-amax-history"));
      if (!(n >= 1 && n <= (1 << 20) && n == static_cast<int64_t>(n)))
        fail(2, "--fp8-amax-history: expected a whole number of steps in [1, 2^20]");
      opts.fp8.amaxHistory = static_cast<int64_t>(n);
    } else if (is("--fp8-amax-compute")) {
      fp8Only.push_back("--fp8-amax-compute");
      opts.fp8.amaxCompute = value("--fp8-amax-compute");
      if (opts.fp8.amaxCompute != "max" && opts.fp8.amaxCompute != "most_recent")
        fail(2, "--fp8-amax-compute: unknown algorithm '" + opts.fp8.amaxCompute +
                    "' (valid: max or most_recent)");
    } else if (is("--keep-high-precision")) {
      fp8Only.push_back("--keep-high-precision");
      opts.fp8.keepHighPrecision.push_back(value("--keep-high-precision"));
    } else if (is("--high-precision-first") || is("--high-precision-last")) {
      std::string flag = a.compare(0, 21, "--high-precision-last") == 0 ? "--high-precision-last"
                                                                        : "--high-precision-first";
      fp8Only.push_back(flag);
      std::string v = value(flag);
      if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos)
        fail(2, flag + " wants a number of transformer blocks >= 0, got '" + v + "'");
      (flag == "--high-precision-last" ? opts.fp8.highPrecisionLast
                                       : opts.fp8.highPrecisionFirst) = std::stoll(v);
    } else if (is("--pad-vocab")) {
      std::string v = value("--pad-vocab");
      if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos)
        fail(2, "--pad-vocab wants a multiple >= 0 (0: no padding), got '" + v + "'");
      opts.padVocab = std::stoll(v);
    } else if (a == "--fp8-lm-head") {
      fp8Only.push_back(a);
      opts.fp8.lmHead = true;
    } else if (a == "--allow-fallback") {
      fp8Only.push_back(a);
      opts.fp8.allowFallback = true;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--no-batch-search") {
      batchSearch = false;
    } else if (is("--report")) {
      std::string r = value("--report");
      if (r == "memory")
        reportMemory = true;
      else if (r == "precision")
        reportPrecision = true;
      else if (r == "flops")
        reportFlops = true;
      else
        fail(2, "--report must be memory, precision or flops, got '" + r + "'");
    } else if (is("--dump-kernels")) {
      dumpDir = value("--dump-kernels");
    } else if (is("--emit")) {
      emit = value("--emit");
      if (emit != "mlir" && emit != "tc" && emit != "program" && emit != "tcx" &&
          emit != "cuda" && emit != "kernels" && emit != "device")
        fail(2, "--emit must be mlir, tc, program, tcx, cuda, kernels or device, got '" + emit +
                    "'");
    } else if (!a.empty() && a[0] == '-') {
      fail(2, tc::cli::unknownOption(a, kUsage));
    } else if (modelPath.empty()) {
      modelPath = a;
    } else {
      fail(2, "more than one model given: '" + modelPath + "' and '" + a + "'");
    }
  }
  if (modelPath.empty())
    fail(2, "no model given (see --help)");
  if (!opts.train.enabled && !trainOnly.empty())
    fail(2, trainOnly.front() + " has no effect without --train (it sets up the training step)");
  // --fp16 is its own precision (and adds loss scaling): refuse a mix rather
  // than let the last flag win silently.
  if (std::find(argv + 1, argv + argc, std::string("--fp16")) != argv + argc)
    for (const char *f : {"--bf16", "--tf32", "--fp8"})
      if (std::find(argv + 1, argv + argc, std::string(f)) != argv + argc)
        fail(2, std::string("--fp16 and ") + f + " are two precisions: give one of them");
  if (opts.precision != "fp16" && !fp16Only.empty())
    fail(2, fp16Only.front() + " sets up the loss scaling of --fp16: give --fp16");
  if (!fp4Qat && !fp4Only.empty())
    fail(2, fp4Only.front() + " has no effect without --fp4-qat (it shapes the FP4 plan)");
  if (opts.fp4.rht && !opts.fp4.grads)
    fail(2, "--fp4-rht transforms the wgrad inputs that --fp4-qat-grads quantises: give "
            "--fp4-qat-grads too");
  if (fp4Qat) {
    // FP4 QAT is the bf16 plan plus fake quantisation: --bf16 is implied and
    // may be given; any other precision is a second one.
    for (const std::string &other : precisionFlags)
      if (other != "--bf16")
        fail(2, "--fp4-qat and " + other + " are two precisions: give one (--fp4-qat already "
                "runs everything that is not FP4 in bf16)");
    if (std::find(argv + 1, argv + argc, std::string("--fp8-scaling")) != argv + argc)
      fail(2, "--fp8-scaling has no effect with --fp4-qat (its formats have their own blocks)");
    if (!opts.train.enabled)
      fail(2, "--fp4-qat is quantisation-aware training: give --train (for an FP4 model to "
              "run, export one with tc-run --export-onnx --export-precision nvfp4|mxfp4)");
    opts.precision = "fp4";
  }
  if (opts.precision != "fp8" && opts.precision != "fp4" && !fp8Only.empty())
    fail(2, fp8Only.front() + " has no effect without --fp8 (it shapes the FP8 plan)");
  for (const char *f : {"--fp8-amax-history", "--fp8-amax-compute"})
    if (llvm::is_contained(fp8Only, f) && opts.fp8.scaling != "delayed")
      fail(2, std::string(f) + " shapes delayed scaling: give --fp8-scaling delayed");
  for (const std::string &other : precisionFlags)
    if (other != "--fp8" && llvm::is_contained(precisionFlags, "--fp8"))
      fail(2, "--fp8 and " + other + " are two precisions: give one (--fp8 already runs "
              "everything that is not FP8 in bf16)");
  // The ranges torch.optim accepts (it raises ValueError outside them).
  {
    const tc::TrainOptions &t = opts.train;
    auto need = [](bool ok, const std::string &msg) {
      if (!ok)
        fail(2, msg);
    };
    auto num = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", v);
      return std::string(buf);
    };
    need(t.lr >= 0, "--lr must be >= 0 (torch: invalid learning rate), got " + num(t.lr));
    need(t.eps >= 0, "--eps must be >= 0 (torch: invalid epsilon value), got " + num(t.eps));
    need(t.beta1 >= 0 && t.beta1 < 1, "--beta1 must be in [0, 1) (torch: invalid beta parameter), got " +
                                          num(t.beta1));
    need(t.beta2 >= 0 && t.beta2 < 1, "--beta2 must be in [0, 1) (torch: invalid beta parameter), got " +
                                          num(t.beta2));
    need(t.momentum >= 0, "--momentum must be >= 0 (torch: invalid momentum value), got " +
                              num(t.momentum));
  }
  int reports = reportMemory + reportPrecision + reportFlops;
  if (json && reports != 1)
    fail(2, reports ? "--json prints one report: give one --report"
                    : "--json goes with --report memory, precision or flops");
  if (!batchSearch && !reportMemory)
    fail(2, "--no-batch-search goes with --report memory");
  if (reportFlops && !opts.train.enabled)
    fail(2, "--report flops describes a training step: give --train");
  if (emit.empty() && outPath.empty() && !reportMemory && !reportPrecision && !reportFlops &&
      dumpDir.empty()) {
    // model.onnx -> model.tca, beside the model.
    std::string base = modelPath;
    for (const char *ext : {".onnxtxt", ".onnx"}) {
      size_t n = std::strlen(ext);
      if (base.size() > n && base.compare(base.size() - n, n, ext) == 0) {
        base.resize(base.size() - n);
        break;
      }
    }
    outPath = base + ".tca";
  }
  bool gpu = tc::isGpuTarget(opts.target);
  if (!gpu && (reportMemory || !dumpDir.empty() || emit == "tcx" || emit == "cuda" ||
               emit == "kernels" || emit == "device"))
    fail(2, "--report memory, --dump-kernels and --emit=tcx/cuda/kernels/device need a GPU target "
            "(--target sm_90 or sm_120)");
  if (!gpu && !opts.experimental.empty())
    fail(2, "--experimental needs a GPU target (--target sm_90 or sm_120): its levers are the "
            "GPU step's");
  // Printing sources or the tcx plan needs no cubins; artifacts and dumps do.
  opts.compileKernels = !dumpDir.empty() || emit == "kernels" || !outPath.empty();

  // The compile cache: NVRTC's kernels always, the whole artifact when one
  // is written (what was printed is kept with it and printed again on a hit).
  tc::cache::setGlobal(noCache ? tc::cache::Store() : tc::cache::Store(tc::cache::defaultDir()));
  const tc::cache::Store &cacheStore = tc::cache::global();
  Captured captured;
  std::optional<tc::cache::Key> artifactKey;
  if (cacheStore.enabled() && emit.empty() && dumpDir.empty() && !outPath.empty()) {
    std::vector<std::string> args(argv + 1, argv + argc);
    artifactKey = tc::artifactCacheKey(args, modelPath, importOpts);
    if (artifactKey && replayCached(cacheStore, *artifactKey, outPath, quiet))
      return 0;
  }

  mlir::MLIRContext ctx;
  tc::loadCompilerDialects(ctx);
  tc::CompileResult result;
  tc::CompileError error;
  auto printNotes = [&] {
    if (quiet)
      return;
    for (const std::string &n : result.notes)
      captured.err(std::string("tc-compile: note: ") + n + "\n");
  };
  tc::CompileInput input;
  if (!tc::importOnnx(ctx, modelPath, importOpts, &input, &error.message)) {
    result.notes = std::move(input.notes);
    printNotes();
    fail(2, error.message);
  }
  if (emit == "mlir") {
    result.notes = std::move(input.notes);
    printNotes();
    input.module->print(llvm::outs());
    llvm::outs() << "\n";
    return 0;
  }
  bool ok = tc::compile(ctx, std::move(input), opts, &result, &error);
  printNotes(); // also on failure: a note may be what explains the error
  if (!ok)
    fail(error.kind == tc::CompileErrorKind::BadInput ? 2 : 1, error.message);
  {
    size_t missing = 0;
    for (const auto &p : result.artifact.params)
      if (p.init == tc::rt::ParamInit::Data && !p.hasData && p.type.numElements() > 0)
        ++missing;
    if (missing > 0)
      captured.err("tc-compile: warning: " + std::to_string(missing) + " parameter" +
                   (missing == 1 ? " has" : "s have") +
                   " no data (--no-weights): the model must be initialised at run time "
                   "(tc-run --init FILE), or give --init-params\n");
  }
  std::string outText;
  llvm::raw_string_ostream out(outText);
  if (reportPrecision) {
    llvm::StringRef fn = opts.train.enabled ? "train_step" : "infer";
    // The text is the artifact's report (compile() wrote it); the JSON is made here.
    mlir::ModuleOp gpu = result.gpuModule ? *result.gpuModule : mlir::ModuleOp();
    out << (json ? tc::precisionReportJson(*result.module, fn, gpu, opts.target)
                          : result.artifact.reports["precision"]);
  }
  if (reportFlops) {
    const std::string &f = result.artifact.reports["flops"];
    if (json) {
      out << f << "\n";
    } else {
      tc::FlopCount c = tc::countFlops(*result.module, opts.train.gradAccum);
      out << llvm::format(
          "flops of @train_step: N = %lld parameters without embeddings, L = %lld attention "
          "layers, T = %lld, d = %lld\n  model FLOPs per token 6N + 12LTd = %.6g (MFU)\n  "
          "hardware FLOPs per step (the compiler's count, recomputation included) = %.6g (HFU)\n",
          (long long)c.nonEmbeddingParams, (long long)c.layers, (long long)c.seq,
          (long long)c.width, c.modelFlopsPerToken, c.hardwareFlopsPerStep);
      std::string dtype = opts.precision;
      bool any = false;
      for (const tc::TargetDevice *d : tc::devicesOf(opts.target))
        if (double p = tc::densePeak(*d, dtype); p > 0) {
          out << llvm::format("  %s: dense %s peak %.1f TFLOP/s (%s)\n", d->name,
                                       dtype.c_str(), p / 1e12, d->peakSource);
          any = true;
        }
      if (!any)
        out << "  no dense " << dtype << " peak for target " << opts.target
                     << ": MFU is not reported there\n";
    }
  }
  if (reportMemory) {
    if (!result.memoryPlan)
      fail(1, "internal error: the GPU pipeline left no memory plan");
    std::vector<tc::BatchFit> fits;
    std::string why;
    int64_t batch = batchSearch ? tc::batchOf(importOpts, &why) : -1;
    auto importAt = [&](mlir::MLIRContext &c, int64_t b, tc::CompileInput *in,
                        std::string *err) {
      return tc::importOnnx(c, modelPath, tc::atBatch(importOpts, b), in, err);
    };
    if (!batchSearch)
      why = "--no-batch-search";
    std::map<int64_t, int64_t> planned;
    for (const tc::TargetDevice *card : tc::devicesOf(opts.target))
      fits.push_back(batch > 0 ? tc::largestFittingBatch(opts, batch, result.memoryPlan->total(),
                                                         *card, &planned, importAt)
                               : tc::BatchFit{-1, why});
    out << (json ? tc::memoryReportJson(*result.memoryPlan, opts.target, fits)
                          : tc::memoryReport(*result.memoryPlan, opts.target, fits));
  }
  llvm::outs() << outText;
  llvm::outs().flush();
  captured.out += outText;
  if (!dumpDir.empty()) {
    std::error_code ec = llvm::sys::fs::create_directories(dumpDir);
    if (ec)
      fail(2, "cannot create '" + dumpDir + "': " + ec.message());
    for (const auto &k : result.kernels) {
      auto write = [&](const std::string &ext, llvm::StringRef bytes) {
        std::string path = dumpDir + "/" + k.name + ext;
        std::error_code wec;
        llvm::raw_fd_ostream os(path, wec);
        if (wec)
          fail(2, "cannot write '" + path + "': " + wec.message());
        os << bytes;
      };
      write(".cu", k.source);
      write(".ptx", k.ptx);
      write(".cubin", llvm::StringRef(reinterpret_cast<const char *>(k.cubin.data()),
                                      k.cubin.size()));
    }
  }
  if (emit == "tcx") {
    result.gpuModule->print(llvm::outs());
    llvm::outs() << "\n";
    return 0;
  }
  if (emit == "device") {
    for (const tc::rt::DeviceFunction &fn : result.artifact.deviceFunctions)
      llvm::outs() << tc::formatDeviceFunction(fn);
    return 0;
  }
  if (emit == "cuda") {
    for (const auto &k : result.kernels)
      llvm::outs() << "// ===== kernel " << k.name << "\n" << k.source << "\n";
    return 0;
  }
  if (emit == "kernels") {
    for (const auto &k : result.kernels) {
      auto arch = tc::cuda::cubinArch(k.cubin);
      llvm::outs() << k.name << ": cubin " << (arch ? *arch : std::string("?")) << " "
                   << k.cubin.size() << " bytes, PTX " << k.ptx.size() << " bytes\n";
    }
    return 0;
  }
  if (emit.empty() && outPath.empty())
    return 0;
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
  if (gpu)
    captured.after(llvm::formatv(
        "tc-compile: note: the artifact holds {0} {1} kernels (CUDA source, PTX, cubin), the "
        "device program and the op-level reference program; tc-run runs it on the GPU when one "
        "is present, --device cpu on the reference\n",
        result.artifact.kernels.size(), opts.target).str());
  tc::rt::Status st = tc::rt::writeArtifact(result.artifact, outPath);
  if (!st.isOk())
    fail(2, "writing '" + outPath + "': " + st.message());
  size_t params = 0, trainable = 0;
  int64_t elements = 0, trainElements = 0, trainBytes = 0, stateBytes = 0;
  for (const auto &p : result.artifact.params) {
    int64_t n = p.type.numElements();
    int64_t bytes = n * tc::rt::dtypeStorageBytes(p.type.dtype);
    if (p.kind == tc::rt::ParamKind::OptimizerState) {
      stateBytes += bytes;
      continue;
    }
    ++params;
    elements += n;
    if (p.trainable) {
      ++trainable;
      trainElements += n;
      trainBytes += bytes;
    }
  }
  captured.after(llvm::formatv("tc-compile: wrote {0} ({1} parameters, {2} elements)\n",
                               outPath, params, elements).str());
  captured.after(llvm::formatv("tc-compile: trainable: {0} tensors, {1} elements, {2} bytes; "
                               "optimizer state: {3} bytes\n",
                               trainable, trainElements, trainBytes, stateBytes).str());
  if (artifactKey)
    storeCached(cacheStore, *artifactKey, outPath, captured, quiet);
  return 0;
}
