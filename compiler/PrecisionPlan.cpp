//===- PrecisionPlan.cpp - `tc-compile --report precision` ----------------===//
//
// Reads the `tc.precision` / `tc.precision_reason` attributes of tc-precision
// and turns them into the text `--report precision` prints. Ops without them
// (the backward tc-autodiff builds after the pass ran on @infer) are
// described by their types, so the report covers a whole @train_step.
//
//===----------------------------------------------------------------------===//

#include "compiler/PrecisionPlan.h"

#include "compiler/GemmPaths.h"

#include "compiler/Transforms/Fp8Plan.h"

#include "dialects/tc/IR/TcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

using namespace mlir;

namespace {

Type elementOf(Type t) {
  if (auto r = llvm::dyn_cast<RankedTensorType>(t))
    return r.getElementType();
  return t;
}

/// The element type an op computes in when nothing says otherwise.
std::string derivedPrecision(Operation *op) {
  for (Value r : op->getResults())
    if (llvm::isa<FloatType>(elementOf(r.getType())))
      return tc::typeString(elementOf(r.getType()));
  for (Value o : op->getOperands())
    if (llvm::isa<FloatType>(elementOf(o.getType())))
      return tc::typeString(elementOf(o.getType()));
  return op->getNumResults() ? tc::typeString(elementOf(op->getResult(0).getType())) : "-";
}

/// 2*M*N*K times the batch of a matmul (0 for non-static shapes).
double matmulFlops(tc::MatmulOp mm) {
  auto lhs = llvm::cast<RankedTensorType>(mm.getLhs().getType());
  auto res = llvm::cast<RankedTensorType>(mm.getType());
  if (!lhs.hasStaticShape() || !res.hasStaticShape())
    return 0;
  int64_t r = lhs.getRank();
  double k = mm.getTransposeLhs() ? lhs.getDimSize(r - 2) : lhs.getDimSize(r - 1);
  return 2.0 * k * (double)res.getNumElements();
}

/// 2*M*N*K of a rank-2 scaled product.
double scaledMatmulFlops(tc::ScaledMatmulOp mm) {
  auto lhs = llvm::cast<RankedTensorType>(mm.getLhs().getType());
  auto res = llvm::cast<RankedTensorType>(mm.getType());
  double k = mm.getTransposeLhs() ? lhs.getDimSize(0) : lhs.getDimSize(1);
  return 2.0 * k * (double)res.getNumElements();
}

struct Row {
  std::string name, type, precision, reason, node;
  /// The plan beyond the element type: the format the op computes in, the
  /// scaling granularity and where its scale comes from ("-" for unscaled
  /// formats), and the rounding.
  std::string format, scaling, scaleFrom, rounding;
};

struct Report {
  bool found = false;
  std::vector<Row> rows;
  double flops = 0, bf16Flops = 0, fp8Flops = 0;
  std::map<std::string, int64_t> perPrecision;
};

/// The scaling granularity of a block-scaled value of shape `shape` in
/// blocks `block` with scales of element type `scale`.
std::string scalingOf(ArrayRef<int64_t> shape, ArrayRef<int64_t> block, Type scale, bool pow2) {
  std::string blocks;
  for (auto [i, b] : llvm::enumerate(block))
    blocks += (i ? "x" : "") + std::to_string(b);
  if (pow2) { // --fp8-scaling block128 (a dim below 128 is one partial block)
    bool square = block.size() == 2 && block[0] > 1 && block[1] > 1;
    std::string nominal = square ? "128x128" : "1x128";
    return "block128 (" + nominal + " blocks" + (blocks == nominal ? "" : ", here " + blocks) +
           ", fp32 power-of-two scales)";
  }
  if (llvm::isa<Float8E8M0FNUType>(scale))
    return "mxfp8 (" + blocks + " blocks, e8m0 scales)";
  if (block == shape)
    return "tensor";
  return "row (" + blocks + " blocks)";
}

/// Format, scaling, scale source and rounding of `op` planned `precision`.
void describePlan(Operation *op, Row *row) {
  row->format = row->precision;
  row->scaling = row->scaleFrom = "-";
  row->rounding = "nearest even";
  if (auto q = llvm::dyn_cast<tc::QuantizeOp>(op)) {
    auto in = llvm::cast<RankedTensorType>(q.getInput().getType());
    auto sc = llvm::cast<RankedTensorType>(q.getScaleInv().getType());
    row->format = tc::typeString(elementOf(q.getResult().getType()));
    row->scaling = scalingOf(in.getShape(), q.getBlock(), sc.getElementType(), q.getPow2Scale());
    Operation *taker = q.getAmax() ? q.getAmax().getDefiningOp() : nullptr;
    row->scaleFrom = q.getPow2Scale() ? "current amax of each block (this step)"
                     : taker          ? "current amax of the input (this step), taken by the " +
                                   taker->getName().getStringRef().str() + " that produces it"
                                      : "current amax of the input (this step)";
    row->rounding = "nearest even, saturating";
    return;
  }
  if (auto fq = llvm::dyn_cast<tc::FakeQuantizeOp>(op)) {
    bool nv = fq.getFormat() == "nvfp4";
    row->format = fq.getFormat().str();
    row->scaling = !nv ? "1x32 (e8m0)" : fq.getBlocks2d() ? "16x16 (e4m3) + tensor (fp32)"
                                                          : "1x16 (e4m3) + tensor (fp32)";
    row->scaleFrom = nv ? "current amax of the input (this step): blocks and tensor"
                        : "current amax of each block (this step)";
    if (fq.getUnscaled()) // tc-fp4-exact
      row->scaleFrom += "; the tensor scale is the product's alpha";
    row->rounding = fq.getStochastic()
                        ? "stochastic (e2m1, counter-based draws keyed by seed, site and step), "
                          "saturating, dequantised; straight-through gradient"
                        : "nearest even, saturating (e2m1), dequantised; straight-through gradient";
    return;
  }
  if (auto mm = llvm::dyn_cast<tc::ScaledMatmulOp>(op)) {
    row->format = tc::typeString(elementOf(mm.getLhs().getType())) + " x " +
                  tc::typeString(elementOf(mm.getRhs().getType()));
    auto recipe = op->getAttrOfType<StringAttr>(tc::kFp8Attr);
    row->scaling = recipe ? recipe.getValue().str() : "-";
    row->scaleFrom = "scale_inv of its tc.quantize operands";
    row->rounding =
        "fp32 accumulation, rounded once to " + tc::typeString(elementOf(mm.getType()));
    return;
  }
  Type t;
  for (Value r : op->getResults())
    t = t ? t : elementOf(r.getType());
  if (t && !llvm::isa<FloatType>(t))
    row->rounding = "exact (integer/bool)";
}

Report collect(ModuleOp module, llvm::StringRef function) {
  Report rep;
  auto fn = module.lookupSymbol<func::FuncOp>(function);
  if (!fn || fn.isExternal())
    return rep;
  rep.found = true;
  fn.walk([&](Operation *op) {
    if (!llvm::isa<tc::TCDialect>(op->getDialect()))
      return;
    Row row;
    row.name = op->getName().getStringRef().str();
    if (op->getNumResults() == 1)
      row.type = tc::typeString(op->getResult(0).getType());
    else {
      row.type = "(";
      for (auto [i, r] : llvm::enumerate(op->getResults()))
        row.type += (i ? ", " : "") + tc::typeString(r.getType());
      row.type += ")";
    }
    auto p = op->getAttrOfType<StringAttr>("tc.precision");
    auto why = op->getAttrOfType<StringAttr>("tc.precision_reason");
    row.precision = p ? p.getValue().str() : derivedPrecision(op);
    row.reason = why ? why.getValue().str() : "(derived from types)";
    row.node = tc::onnxNodeOf(op->getLoc());
    describePlan(op, &row);
    if (auto smm = llvm::dyn_cast<tc::ScaledMatmulOp>(op)) {
      double f = scaledMatmulFlops(smm);
      rep.flops += f;
      rep.fp8Flops += f;
    }
    if (auto mm = llvm::dyn_cast<tc::MatmulOp>(op)) {
      double f = matmulFlops(mm);
      rep.flops += f;
      if (llvm::isa<BFloat16Type>(elementOf(mm.getLhs().getType())))
        rep.bf16Flops += f;
    }
    if (auto at = llvm::dyn_cast<tc::AttentionOp>(op)) {
      // Its two products, counted dense (q k^T and p v), as the unfused
      // matmuls they replace.
      auto q = llvm::cast<RankedTensorType>(at.getQuery().getType());
      auto k = llvm::cast<RankedTensorType>(at.getKey().getType());
      auto v = llvm::cast<RankedTensorType>(at.getValue().getType());
      double f = 2.0 * q.getDimSize(0) * q.getDimSize(1) * q.getDimSize(2) * k.getDimSize(2) *
                 static_cast<double>(q.getDimSize(3) + v.getDimSize(3));
      rep.flops += f;
      if (llvm::isa<BFloat16Type>(q.getElementType()))
        rep.bf16Flops += f;
    }
    ++rep.perPrecision[row.precision];
    rep.rows.push_back(std::move(row));
  });
  return rep;
}

/// The ops of each kind, in order of first appearance.
struct Kind {
  std::string name;
  int64_t count = 0;
  std::map<std::string, int64_t> precisions, reasons;
};

std::vector<Kind> byKind(const Report &rep) {
  std::vector<Kind> kinds;
  std::map<std::string, size_t> index;
  for (const Row &r : rep.rows) {
    auto [it, fresh] = index.emplace(r.name, kinds.size());
    if (fresh)
      kinds.push_back(Kind{r.name});
    Kind &k = kinds[it->second];
    ++k.count;
    ++k.precisions[r.precision];
    ++k.reasons[r.reason];
  }
  return kinds;
}

std::string joinCounts(const std::map<std::string, int64_t> &m) {
  std::string s;
  for (const auto &[k, n] : m)
    s += (s.empty() ? "" : ", ") + k + " " + std::to_string(n);
  return s;
}

std::string quote(llvm::StringRef s) { return llvm::formatv("{0}", llvm::json::Value(s)).str(); }

std::string jsonCounts(const std::map<std::string, int64_t> &m) {
  std::string s;
  for (const auto &[k, n] : m)
    s += (s.empty() ? "" : ", ") + quote(k) + ": " + std::to_string(n);
  return "{" + s + "}";
}

} // namespace

std::string tc::onnxNodeOf(Location loc) {
  if (auto n = llvm::dyn_cast<NameLoc>(loc))
    return n.getName().str();
  if (auto f = llvm::dyn_cast<FusedLoc>(loc))
    for (Location l : f.getLocations())
      if (std::string s = onnxNodeOf(l); !s.empty())
        return s;
  if (auto c = llvm::dyn_cast<CallSiteLoc>(loc))
    return onnxNodeOf(c.getCallee());
  return "";
}

std::string tc::precisionReport(ModuleOp module, llvm::StringRef function, ModuleOp gpu,
                                llvm::StringRef target) {
  std::string out;
  llvm::raw_string_ostream os(out);
  Report rep = collect(module, function);
  if (!rep.found) {
    os << "precision report: no function @" << function << "\n";
    return out;
  }
  os << "precision report: @" << function << " (" << rep.rows.size() << " ops)\n";
  os << "matmul FLOPs in bf16: " << llvm::format("%.0f", rep.bf16Flops) << " of "
     << llvm::format("%.0f", rep.flops) << " ("
     << llvm::format("%.1f", rep.flops > 0 ? 100.0 * rep.bf16Flops / rep.flops : 0.0) << "%)\n";
  if (rep.fp8Flops > 0)
    os << "matmul FLOPs in fp8: " << llvm::format("%.0f", rep.fp8Flops) << " of "
       << llvm::format("%.0f", rep.flops) << " ("
       << llvm::format("%.1f", 100.0 * rep.fp8Flops / rep.flops) << "%)\n";
  os << "counts: " << joinCounts(rep.perPrecision) << "\n";
  std::vector<Kind> kinds = byKind(rep);
  size_t wKind = 4;
  for (const Kind &k : kinds)
    wKind = std::max(wKind, k.name.size());
  os << "by kind:\n";
  for (const Kind &k : kinds) {
    std::string reasons;
    for (const auto &[r, n] : k.reasons)
      reasons += (reasons.empty() ? "" : "; ") + r + (k.reasons.size() > 1 ? " (" + std::to_string(n) + ")" : "");
    os << "  " << llvm::left_justify(k.name, wKind) << "  " << llvm::right_justify(std::to_string(k.count), 5)
       << "  " << joinCounts(k.precisions) << ": " << reasons << "\n";
  }
  size_t wName = 2, wType = 4, wPrec = 9, wReason = 6, wNode = 9, wFormat = 6, wScaling = 7,
         wScale = 10;
  for (const Row &r : rep.rows) {
    wName = std::max(wName, r.name.size());
    wType = std::max(wType, r.type.size());
    wPrec = std::max(wPrec, r.precision.size());
    wReason = std::max(wReason, r.reason.size());
    wNode = std::max(wNode, r.node.size());
    wFormat = std::max(wFormat, r.format.size());
    wScaling = std::max(wScaling, r.scaling.size());
    wScale = std::max(wScale, r.scaleFrom.size());
  }
  os << "ops:\n";
  os << llvm::left_justify("op", wName) << "  " << llvm::left_justify("type", wType) << "  "
     << llvm::left_justify("precision", wPrec) << "  " << llvm::left_justify("reason", wReason)
     << "  " << llvm::left_justify("onnx node", wNode) << "  "
     << llvm::left_justify("format", wFormat) << "  " << llvm::left_justify("scaling", wScaling) << "  "
     << llvm::left_justify("scale from", wScale) << "  rounding\n";
  for (const Row &r : rep.rows)
    os << llvm::left_justify(r.name, wName) << "  " << llvm::left_justify(r.type, wType) << "  "
       << llvm::left_justify(r.precision, wPrec) << "  " << llvm::left_justify(r.reason, wReason)
       << "  " << llvm::left_justify(r.node.empty() ? "-" : r.node, wNode) << "  "
       << llvm::left_justify(r.format, wFormat) << "  " << llvm::left_justify(r.scaling, wScaling)
       << "  " << llvm::left_justify(r.scaleFrom, wScale) << "  " << r.rounding << "\n";
  if (gpu)
    os << gemmPathsReport(gpu, function, target);
  return out;
}

std::string tc::precisionReportJson(ModuleOp module, llvm::StringRef function, ModuleOp gpu,
                                    llvm::StringRef target) {
  Report rep = collect(module, function);
  if (!rep.found)
    return "{\"schema\": \"tc.metrics/1\", \"kind\": \"precision_report\", \"error\": " +
           quote("no function @" + function.str()) + "}\n";
  std::string out = "{\"schema\": \"tc.metrics/1\", \"kind\": \"precision_report\", "
                    "\"function\": " + quote(function.str()) +
                    ", \"ops\": " + std::to_string(rep.rows.size()) +
                    ", \"matmul_flops\": " + llvm::formatv("{0:F0}", rep.flops).str() +
                    ", \"bf16_matmul_flops\": " + llvm::formatv("{0:F0}", rep.bf16Flops).str() +
                    ", \"fp8_matmul_flops\": " + llvm::formatv("{0:F0}", rep.fp8Flops).str() +
                    ", \"counts\": " + jsonCounts(rep.perPrecision) + ", \"by_kind\": [";
  std::vector<Kind> kinds = byKind(rep);
  for (size_t i = 0; i < kinds.size(); ++i)
    out += std::string(i ? ", " : "") + "{\"op\": " + quote(kinds[i].name) +
           ", \"count\": " + std::to_string(kinds[i].count) +
           ", \"precisions\": " + jsonCounts(kinds[i].precisions) +
           ", \"reasons\": " + jsonCounts(kinds[i].reasons) + "}";
  out += "], \"op_list\": [";
  for (size_t i = 0; i < rep.rows.size(); ++i) {
    const Row &r = rep.rows[i];
    out += std::string(i ? ",\n  " : "\n  ") + "{\"op\": " + quote(r.name) +
           ", \"type\": " + quote(r.type) + ", \"precision\": " + quote(r.precision) +
           ", \"reason\": " + quote(r.reason) + ", \"node\": " + quote(r.node) +
           ", \"format\": " + quote(r.format) + ", \"scaling\": " + quote(r.scaling) +
           ", \"scale_from\": " + quote(r.scaleFrom) + ", \"rounding\": " + quote(r.rounding) +
           "}";
  }
  out += "]";
  if (gpu) {
    std::string products;
    llvm::raw_string_ostream ps(products);
    ps << llvm::json::Value(gemmPathsJson(gpu, function));
    out += ", \"target\": " + quote(target) + ", \"gpu_products\": " + products;
  }
  return out + "}\n";
}
