//===- Flops.cpp - what MFU and HFU are measured against ------------------===//
#include "compiler/Flops.h"

#include "compiler/Target.h"
#include "dialects/tc/IR/TcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdio>

using namespace mlir;

namespace tc {

namespace {

int64_t numel(Type t) {
  auto r = llvm::dyn_cast<RankedTensorType>(t);
  return r && r.hasStaticShape() ? r.getNumElements() : 0;
}

/// Whether every use of `v` (through casts) is the table of a tc.gather.
bool onlyGathered(Value v) {
  bool any = false;
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (auto cast = llvm::dyn_cast<CastOp>(user)) {
      if (!onlyGathered(cast.getResult()))
        return false;
      any = true;
      continue;
    }
    if (llvm::isa<GatherOp>(user) && use.getOperandNumber() == 0) {
      any = true;
      continue;
    }
    return false;
  }
  return any;
}

/// B H Tq Tk D of an attention op's operands, halved when causal.
double attentionUnits(Value q, Value k, bool causal) {
  auto qt = llvm::dyn_cast<RankedTensorType>(q.getType());
  auto kt = llvm::dyn_cast<RankedTensorType>(k.getType());
  if (!qt || !kt || qt.getRank() != 4 || kt.getRank() != 4 || !qt.hasStaticShape() ||
      !kt.hasStaticShape())
    return 0;
  double u = static_cast<double>(qt.getDimSize(0)) * qt.getDimSize(1) * qt.getDimSize(2) *
             kt.getDimSize(2) * qt.getDimSize(3);
  return causal ? u / 2 : u;
}

double functionFlops(func::FuncOp fn) {
  double flops = 0;
  fn.walk([&](Operation *op) {
    if (auto mm = llvm::dyn_cast<MatmulOp>(op)) {
      auto lt = llvm::dyn_cast<RankedTensorType>(mm.getLhs().getType());
      if (!lt || !lt.hasStaticShape() || lt.getRank() < 1)
        return;
      int64_t k = mm.getTransposeLhs() && lt.getRank() >= 2 ? lt.getDimSize(lt.getRank() - 2)
                                                            : lt.getDimSize(lt.getRank() - 1);
      flops += 2.0 * static_cast<double>(numel(mm.getResult().getType())) * k;
    } else if (auto smm = llvm::dyn_cast<ScaledMatmulOp>(op)) {
      // --fp8's rank-2 products (tc-quantize-fp8).
      auto lt = llvm::cast<RankedTensorType>(smm.getLhs().getType());
      int64_t k = smm.getTransposeLhs() ? lt.getDimSize(0) : lt.getDimSize(1);
      flops += 2.0 * static_cast<double>(numel(smm.getResult().getType())) * k;
    } else if (auto at = llvm::dyn_cast<AttentionOp>(op)) {
      flops += 4.0 * attentionUnits(at.getQuery(), at.getKey(), at.getCausal());
    } else if (auto ag = llvm::dyn_cast<AttentionGradOp>(op)) {
      flops += 10.0 * attentionUnits(ag.getQuery(), ag.getKey(), ag.getCausal());
    }
  });
  return flops;
}

} // namespace

FlopCount countFlops(ModuleOp module, int64_t gradAccum) {
  FlopCount c;
  if (auto infer = module.lookupSymbol<func::FuncOp>("infer")) {
    infer.walk([&](ParameterOp p) {
      auto t = llvm::dyn_cast<RankedTensorType>(p.getType());
      if (!t || !llvm::isa<FloatType>(t.getElementType()) || onlyGathered(p.getResult()))
        return;
      c.nonEmbeddingParams += numel(t);
    });
    infer.walk([&](AttentionOp a) {
      auto qt = llvm::dyn_cast<RankedTensorType>(a.getQuery().getType());
      if (!qt || qt.getRank() != 4)
        return;
      ++c.layers;
      c.seq = qt.getDimSize(2);
      c.width = qt.getDimSize(1) * qt.getDimSize(3);
    });
  }
  c.modelFlopsPerToken = 6.0 * static_cast<double>(c.nonEmbeddingParams) +
                         12.0 * static_cast<double>(c.layers) * c.seq * c.width;
  if (auto train = module.lookupSymbol<func::FuncOp>("train_step"); train && gradAccum == 1) {
    c.hardwareFlopsPerStep = functionFlops(train);
  } else {
    auto grad = module.lookupSymbol<func::FuncOp>("grad_step");
    auto apply = module.lookupSymbol<func::FuncOp>("apply_step");
    if (grad)
      c.hardwareFlopsPerStep = static_cast<double>(gradAccum) * functionFlops(grad);
    if (apply)
      c.hardwareFlopsPerStep += functionFlops(apply);
  }
  return c;
}

std::string flopsReportJson(const FlopCount &c, const std::string &target,
                            const std::string &dtype) {
  auto num = [](double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  std::string peaks;
  for (const TargetDevice *d : devicesOf(target)) {
    double p = densePeak(*d, dtype);
    if (p <= 0)
      continue;
    peaks += std::string(peaks.empty() ? "" : ", ") + "{\"name\": \"" + d->name +
             "\", \"match\": \"" + d->match + "\", \"dense_flops\": " + num(p) + "}";
  }
  return "{\"schema\": \"tc.metrics/1\", \"kind\": \"flops_report\", \"non_embedding_params\": " +
         std::to_string(c.nonEmbeddingParams) +
         ", \"layers\": " + std::to_string(c.layers) + ", \"seq\": " + std::to_string(c.seq) +
         ", \"width\": " + std::to_string(c.width) + ", \"model_flops_per_token\": " +
         num(c.modelFlopsPerToken) + ", \"hardware_flops_per_step\": " +
         num(c.hardwareFlopsPerStep) + ", \"dtype\": \"" + dtype + "\", \"peaks\": [" + peaks +
         "]}";
}

} // namespace tc
