//===- PrecisionReport.cpp - `tc-compile --report precision` --------------===//
//
// Reads the `tc.precision` / `tc.precision_reason` attributes of tc-precision
// and turns them into the text `--report precision` prints. Ops without them
// (the backward tc-autodiff builds after the pass ran on @infer) are
// described by their types, so the report covers a whole @train_step.
//
//===----------------------------------------------------------------------===//

#include "compiler/PrecisionReport.h"

#include "dialects/tc/IR/TcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <vector>

using namespace mlir;

namespace {

std::string str(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

Type elementOf(Type t) {
  if (auto r = llvm::dyn_cast<RankedTensorType>(t))
    return r.getElementType();
  return t;
}

/// The element type an op computes in when nothing says otherwise.
std::string derivedPrecision(Operation *op) {
  for (Value r : op->getResults())
    if (llvm::isa<FloatType>(elementOf(r.getType())))
      return str(elementOf(r.getType()));
  for (Value o : op->getOperands())
    if (llvm::isa<FloatType>(elementOf(o.getType())))
      return str(elementOf(o.getType()));
  return op->getNumResults() ? str(elementOf(op->getResult(0).getType())) : "-";
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

} // namespace

std::string tc::precisionReport(ModuleOp module, llvm::StringRef function) {
  std::string out;
  llvm::raw_string_ostream os(out);
  auto fn = module.lookupSymbol<func::FuncOp>(function);
  if (!fn || fn.isExternal()) {
    os << "precision report: no function @" << function << "\n";
    return out;
  }
  struct Row {
    std::string name, type, precision, reason;
  };
  std::vector<Row> rows;
  double flops = 0, bf16Flops = 0;
  fn.walk([&](Operation *op) {
    if (!llvm::isa<tc::TCDialect>(op->getDialect()))
      return;
    Row row;
    row.name = op->getName().getStringRef().str();
    if (op->getNumResults() == 1)
      row.type = str(op->getResult(0).getType());
    else {
      row.type = "(";
      for (auto [i, r] : llvm::enumerate(op->getResults()))
        row.type += (i ? ", " : "") + str(r.getType());
      row.type += ")";
    }
    auto p = op->getAttrOfType<StringAttr>("tc.precision");
    auto why = op->getAttrOfType<StringAttr>("tc.precision_reason");
    row.precision = p ? p.getValue().str() : derivedPrecision(op);
    row.reason = why ? why.getValue().str() : "(derived from types)";
    if (auto mm = llvm::dyn_cast<tc::MatmulOp>(op)) {
      double f = matmulFlops(mm);
      flops += f;
      if (llvm::isa<BFloat16Type>(elementOf(mm.getLhs().getType())))
        bf16Flops += f;
    }
    if (auto at = llvm::dyn_cast<tc::AttentionOp>(op)) {
      // Its two products, counted dense (q k^T and p v), as the unfused
      // matmuls they replace.
      auto q = llvm::cast<RankedTensorType>(at.getQuery().getType());
      auto k = llvm::cast<RankedTensorType>(at.getKey().getType());
      auto v = llvm::cast<RankedTensorType>(at.getValue().getType());
      double f = 2.0 * q.getDimSize(0) * q.getDimSize(1) * q.getDimSize(2) * k.getDimSize(2) *
                 static_cast<double>(q.getDimSize(3) + v.getDimSize(3));
      flops += f;
      if (llvm::isa<BFloat16Type>(q.getElementType()))
        bf16Flops += f;
    }
    rows.push_back(std::move(row));
  });
  size_t wName = 2, wType = 4, wPrec = 9;
  for (const Row &r : rows) {
    wName = std::max(wName, r.name.size());
    wType = std::max(wType, r.type.size());
    wPrec = std::max(wPrec, r.precision.size());
  }
  std::map<std::string, int64_t> perPrecision;
  os << "precision report: @" << function << " (" << rows.size() << " ops)\n";
  os << llvm::left_justify("op", wName) << "  " << llvm::left_justify("type", wType) << "  "
     << llvm::left_justify("precision", wPrec) << "  reason\n";
  for (const Row &r : rows) {
    os << llvm::left_justify(r.name, wName) << "  " << llvm::left_justify(r.type, wType)
       << "  " << llvm::left_justify(r.precision, wPrec) << "  " << r.reason << "\n";
    ++perPrecision[r.precision];
  }
  os << "counts:";
  bool first = true;
  for (auto &[prec, n] : perPrecision) {
    os << (first ? " " : ", ") << prec << " " << n;
    first = false;
  }
  os << "\n";
  os << "matmul FLOPs in bf16: " << llvm::format("%.0f", bf16Flops) << " of "
     << llvm::format("%.0f", flops) << " ("
     << llvm::format("%.1f", flops > 0 ? 100.0 * bf16Flops / flops : 0.0) << "%)\n";
  return out;
}
