//===- GemmPaths.cpp - which kernel runs each product on the GPU ----------===//
//
// See GemmPaths.h. Every tcx.matmul is one cuBLASLt call
// (runtime/src/cuda/cublaslt.h): the words here follow the attributes the
// runtime reads (tcx.matmul's description in dialects/tcx/IR/TcxOps.td), so
// a new scale mode or epilogue there is a new case here.
//
//===----------------------------------------------------------------------===//

#include "compiler/GemmPaths.h"

#include "compiler/PrecisionPlan.h"
#include "compiler/Transforms/Fp8Plan.h"
#include "dialects/tcx/IR/TcxOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;

namespace tc {
namespace {

Type elementOf(Value v) { return llvm::cast<tcx::BufferType>(v.getType()).getElementType(); }

int64_t elementsOf(Value v) {
  int64_t n = 1;
  for (int64_t d : llvm::cast<tcx::BufferType>(v.getType()).getShape())
    n *= d;
  return n;
}

/// The root buffer `v` views and its byte range there.
struct Bytes {
  Value root;
  int64_t begin = 0, end = 0;
};

Bytes bytesOf(Value v) {
  auto t = llvm::cast<tcx::BufferType>(v.getType());
  Bytes b{v, 0, tcx::storageBytes(t.getElementType(), elementsOf(v))};
  while (auto view = b.root.getDefiningOp<tcx::ViewOp>()) {
    int64_t off = static_cast<int64_t>(view.getOffset());
    b.begin += off;
    b.end += off;
    b.root = view.getSource();
  }
  return b;
}

/// The buffers whose bytes hold a tcx.library "fake_quantize" result at the
/// current point of a walk in program order, with their FP4 format. After
/// planning, buffers of different values share arena bytes, so the last
/// write of the bytes decides: any other write that overlaps one ends it.
class Fp4Operands {
public:
  /// Records the writes of `op`, the next op of the walk.
  void after(Operation *op) {
    auto effects = llvm::dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects)
      return;
    SmallVector<MemoryEffects::EffectInstance> list;
    effects.getEffects(list);
    for (const auto &e : list) {
      Value w = e.getValue();
      if (!w || !llvm::isa<MemoryEffects::Write>(e.getEffect()) ||
          !llvm::isa<tcx::BufferType>(w.getType()))
        continue;
      Bytes got = bytesOf(w);
      llvm::erase_if(live, [&](const auto &l) {
        return l.first.root == got.root && got.begin < l.first.end && l.first.begin < got.end;
      });
    }
    auto call = llvm::dyn_cast<tcx::LibraryOp>(op);
    if (!call || call.getCallee() != "fake_quantize" || call.getOutputs().empty())
      return;
    auto mx = call->getAttrOfType<BoolAttr>("mxfp4");
    live.emplace_back(bytesOf(call.getOutputs()[0]), mx && mx.getValue() ? "mxfp4" : "nvfp4");
  }

  /// The format whose fake_quantize result `v` is now ("" when none).
  std::string formatOf(Value v) const {
    Bytes want = bytesOf(v);
    for (const auto &[b, format] : live)
      if (b.root == want.root && b.begin == want.begin && b.end == want.end)
        return format;
    return "";
  }

private:
  std::vector<std::pair<Bytes, std::string>> live;
};

GemmPath describe(tcx::MatmulOp mm, const Fp4Operands &fp4Operands) {
  GemmPath g;
  g.node = onnxNodeOf(mm.getLoc());
  ValueRange in = mm.getInputs();
  g.lhs = typeString(elementOf(in[0]));
  g.rhs = typeString(elementOf(in[1]));
  g.out = typeString(elementOf(mm.getOut()));
  g.m = static_cast<int64_t>(mm.getM());
  g.n = static_cast<int64_t>(mm.getN());
  g.k = static_cast<int64_t>(mm.getK());
  g.batch = static_cast<int64_t>(mm.getBatch());
  std::string ct = mm.getComputeType().str();
  bool fp8 = ct == "fp8";
  std::string p = "cuBLASLt ";
  if (fp8) {
    p += "FP8 GEMM (TN) " + g.lhs + " x " + g.rhs + " -> " + g.out + ", fp32 accumulation, ";
    int64_t lb = static_cast<int64_t>(mm.getLhsBlocks()),
            rb = static_cast<int64_t>(mm.getRhsBlocks());
    auto blockName = [](int64_t b) {
      return b == 2 ? std::string("128x128") : std::string("1x128");
    };
    if (lb == 3 && rb == 3) { // --fp8-scaling mxfp8 (sm_100 / sm_120)
      g.scales = "1x32 x 1x32";
      p += "block scales 1x32 x 1x32 (e8m0, VEC32_UE8M0 mode, the block-scaled tensor cores)";
    } else if (lb || rb) {
      g.scales = blockName(lb) + " x " + blockName(rb);
      p += "block scales " + g.scales + " (fp32, VEC128 / BLK128x128 modes)";
    } else if (elementsOf(in[2]) == 1 && elementsOf(in[3]) == 1) {
      g.scales = "tensor";
      p += "per-tensor scales";
    } else {
      g.scales = "row";
      p += "a scale per row of each operand (outer-vector mode)";
    }
    p += mm.getFastAccum() ? ", fast accumulation" : ", no fast accumulation";
  } else {
    std::string mx = fp4Operands.formatOf(in[0]), wx = fp4Operands.formatOf(in[1]);
    std::string fp4 = !mx.empty() ? mx : wx;
    g.scales = fp4.empty() ? "-" : fp4 + " emulated";
    p += "GEMM " + g.lhs + " x " + g.rhs + " -> " + g.out + ", " +
         (ct == "tf32" ? "tf32 products, " : "") + "fp32 accumulation";
    if (!fp4.empty())
      p += ", on " + fp4 + "-quantised " +
           (!mx.empty() && !wx.empty() ? "operands" : !mx.empty() ? "lhs" : "rhs") +
           " held in " + g.lhs +
           (mm.getDeviceAlpha() ? " as code x block scale, the fp32 tensor scales as alpha "
                                  "(read on the device)"
                                : "") +
           " (the FP4 emulation: exact products, fp32 sums in cuBLASLt's order, not a "
           "block-scaled MMA's)";
    else if (mm.getDeviceAlpha())
      p += ", alpha read on the device";
  }
  if (StringRef e = mm.getEpilogue(); e != "none")
    p += ", " + e.str() + " epilogue";
  if (mm.getBeta().convertToFloat() != 0.0f)
    p += ", accumulates into its output";
  if (mm.getLhsBatch())
    p += ", broadcast batch";
  else if (g.batch > 1)
    p += ", batched x" + std::to_string(g.batch);
  g.path = p;
  g.fallback = "none: tc-run picks cuBLASLt's algorithm when the function first runs, and a "
               "card without one stops with an error naming this GEMM";
  return g;
}

/// The sm_120a FP4 GEMMs, library calls rather than tcx.matmul: cuBLASLt's
/// NVFP4 kernels ("nvfp4_gemm") and tc's own block-scaled mma.sync kernel
/// ("fp4_mma_gemm"), both on quantize_fp4's packed operands.
GemmPath describe(tcx::LibraryOp call) {
  GemmPath g;
  g.node = onnxNodeOf(call.getLoc());
  auto integer = [&](StringRef name) {
    auto a = call->getAttrOfType<IntegerAttr>(name);
    return a ? a.getInt() : int64_t(0);
  };
  auto flag = [&](StringRef name) {
    auto a = call->getAttrOfType<BoolAttr>(name);
    return a && a.getValue();
  };
  g.m = integer("m");
  g.n = integer("n");
  g.k = integer("k");
  g.out = typeString(elementOf(call.getOutputs()[0]));
  bool cublas = call.getCallee() == "nvfp4_gemm";
  bool nv = cublas || flag("nvfp4");
  g.lhs = g.rhs = "f4E2M1FN";
  g.scales = nv ? "1x16 x 1x16" : "1x32 x 1x32";
  std::string scales = nv ? "e4m3 1x16 block scales and fp32 tensor scales as alpha"
                          : "e8m0 1x32 block scales";
  g.path = (cublas ? std::string("cuBLASLt NVFP4 GEMM (TN, VEC16_UE4M3 mode)")
                   : std::string("tc's block-scaled mma.sync GEMM (kind::") +
                         (nv ? "mxf4nvf4" : "mxf4") + ", sm_120a)") +
           " f4E2M1FN x f4E2M1FN -> " + g.out + ", fp32 accumulation, " + scales;
  g.fallback = cublas ? "none: tc-run picks cuBLASLt's algorithm when the function first runs, "
                        "and a card without one stops with an error naming this GEMM"
                      : "none: tc's mma.sync kernel runs on sm_120a only; elsewhere tc-run "
                        "stops with an error naming it";
  return g;
}

} // namespace

std::vector<GemmPath> gemmPaths(ModuleOp gpu, llvm::StringRef function) {
  std::vector<GemmPath> paths;
  auto fn = gpu ? gpu.lookupSymbol<func::FuncOp>(function) : func::FuncOp();
  if (!fn || fn.isExternal())
    return paths;
  Fp4Operands fp4Operands;
  fn.walk([&](Operation *op) {
    if (auto mm = llvm::dyn_cast<tcx::MatmulOp>(op))
      paths.push_back(describe(mm, fp4Operands));
    else if (auto call = llvm::dyn_cast<tcx::LibraryOp>(op);
             call && (call.getCallee() == "nvfp4_gemm" || call.getCallee() == "fp4_mma_gemm"))
      paths.push_back(describe(call));
    fp4Operands.after(op);
  });
  return paths;
}

std::string gemmPathsReport(ModuleOp gpu, llvm::StringRef function, llvm::StringRef target) {
  std::vector<GemmPath> paths = gemmPaths(gpu, function);
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "GPU products of @" << function << " on " << target << " (" << paths.size()
     << " matrix products, as the artifact runs them):\n";
  // Grouped by path, in order of first appearance.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const GemmPath *>> groups;
  for (const GemmPath &g : paths) {
    auto &list = groups[g.path];
    if (list.empty())
      order.push_back(g.path);
    list.push_back(&g);
  }
  for (const std::string &path : order) {
    const auto &list = groups[path];
    std::string nodes;
    std::map<std::string, int> seen;
    for (const GemmPath *g : list)
      if (!g->node.empty() && seen[g->node]++ == 0)
        nodes += (nodes.empty() ? "" : ", ") + g->node;
    os << "  " << llvm::right_justify(std::to_string(list.size()), 5) << "  " << path;
    if (!nodes.empty())
      os << ": " << nodes;
    os << "\n";
  }
  std::vector<std::string> fallbacks;
  for (const GemmPath &g : paths)
    if (llvm::find(fallbacks, g.fallback) == fallbacks.end())
      fallbacks.push_back(g.fallback);
  for (const std::string &f : fallbacks)
    os << "  run-time fallback: " << f << "\n";
  return out;
}

llvm::json::Array gemmPathsJson(ModuleOp gpu, llvm::StringRef function) {
  llvm::json::Array list;
  for (const GemmPath &g : gemmPaths(gpu, function))
    list.push_back(llvm::json::Object{{"node", g.node},
                                      {"lhs", g.lhs},
                                      {"rhs", g.rhs},
                                      {"out", g.out},
                                      {"m", g.m},
                                      {"n", g.n},
                                      {"k", g.k},
                                      {"batch", g.batch},
                                      {"scales", g.scales},
                                      {"path", g.path},
                                      {"fallback", g.fallback}});
  return list;
}

} // namespace tc
