//===- Fp8Plan.cpp - the FP8 marks of tc-precision ------------------------===//
//
// Which matmuls of a bf16-planned function may run in FP8 (mode=fp8), as
// Transformer Engine's and torchao's recipes choose them: the products of
// linear layers (a 2-D weight parameter on the right), except the lm_head
// and a tied embedding's product, the layers the user keeps by regex, and
// the first / last transformer blocks asked for. The marked ones must meet
// cuBLASLt's FP8 alignment (K, N multiples of 16; block128's whole blocks,
// fp8SizeRule): an error, or with allow-fallback a bf16 matmul that says so.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Fp8Plan.h"

#include "compiler/PrecisionPlan.h"
#include "dialects/tc/IR/TcOps.h"
#include "runtime/src/schema/name_regex.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace tc {

std::string checkFp8Scaling(llvm::StringRef scaling) {
  if (scaling == "tensor" || scaling == "delayed" || scaling == "row" || scaling == "mxfp8" ||
      scaling == "block128")
    return "";
  return ("--fp8-scaling: unknown scaling '" + scaling + "' (valid: " + kFp8Scalings + ")").str();
}

std::string fp8SizeRule(llvm::StringRef scaling, int64_t k, int64_t n) {
  int64_t align = scaling == "mxfp8" ? 32 : 16;
  if (k % align || n % align)
    return llvm::formatv("cuBLASLt FP8{0} needs K and N multiples of {1}",
                         scaling == "mxfp8" ? " with 1x32 blocks" : "", align)
        .str();
  auto blocked = [](int64_t d) { return d <= kFp8Block || d % kFp8Block == 0; };
  if (scaling == "block128" && (!blocked(k) || !blocked(n)))
    return "--fp8-scaling block128 needs K and N at most 128 (one block) or multiples of 128 "
           "(whole 128-blocks)";
  return "";
}

int64_t blockIndexOf(llvm::StringRef name) {
  for (llvm::StringRef key : {"h.", "layers.", "blocks."}) {
    for (size_t at = name.find(key); at != llvm::StringRef::npos; at = name.find(key, at + 1)) {
      if (at != 0 && name[at - 1] != '.')
        continue;
      llvm::StringRef rest = name.substr(at + key.size());
      size_t digits = 0;
      while (digits < rest.size() && llvm::isDigit(rest[digits]))
        ++digits;
      int64_t index;
      if (digits && digits < rest.size() && rest[digits] == '.' &&
          !rest.take_front(digits).getAsInteger(10, index))
        return index;
    }
  }
  return -1;
}

void annotatePrecision(Operation *op, llvm::StringRef precision, llvm::StringRef reason) {
  Builder b(op->getContext());
  op->setAttr(kPrecisionAttr, b.getStringAttr(precision));
  op->setAttr(kPrecisionReasonAttr, b.getStringAttr(reason));
}

std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

void markFp8Backward(Operation *fwd, Operation *bwd, llvm::StringRef role, int64_t gradOperand) {
  Builder b(bwd->getContext());
  bwd->setAttr(kFp8Attr, fwd->getAttr(kFp8Attr));
  bwd->setAttr(kFp8RoleAttr, b.getStringAttr(role));
  bwd->setAttr(kFp8GradAttr, b.getI64IntegerAttr(gradOperand));
}

namespace {

/// The tc.parameter `v` reads through casts, transposes and reshapes.
ParameterOp weightOf(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (auto p = llvm::dyn_cast<ParameterOp>(def))
      return p;
    if (!llvm::isa<CastOp, TransposeOp, ReshapeOp>(def))
      return {};
    v = def->getOperand(0);
  }
  return {};
}

/// Whether some reader of `v`, through casts, data movement and elementwise
/// ops (a bias, a soft cap), is a loss or log_softmax, or `v` reaches the
/// function result named "logits": the lm_head's product.
bool feedsTheLoss(Value v) {
  SmallVector<Value> work = {v};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    for (OpOperand &use : x.getUses()) {
      Operation *u = use.getOwner();
      if (llvm::isa<CrossEntropyOp, NllLossOp, LogSoftmaxOp>(u))
        return true;
      if (auto ret = llvm::dyn_cast<func::ReturnOp>(u)) {
        auto fn = llvm::cast<func::FuncOp>(ret->getParentOp());
        if (auto n = fn.getResultAttrOfType<StringAttr>(use.getOperandNumber(), "tc.name"))
          if (n.getValue() == "logits")
            return true;
        continue;
      }
      if (llvm::isa<CastOp>(u) || isDataMovement(u) || isElementwise(u))
        for (Value r : u->getResults())
          work.push_back(r);
    }
  }
  return false;
}

/// Whether a tc.gather reads parameter `p` as its data (through casts and
/// data movement): the weight is an embedding too (tied).
bool gatheredToo(ParameterOp p) {
  SmallVector<Value> work = {p.getResult()};
  while (!work.empty()) {
    Value x = work.pop_back_val();
    for (OpOperand &use : x.getUses()) {
      Operation *u = use.getOwner();
      if (llvm::isa<GatherOp>(u) && use.getOperandNumber() == 0)
        return true;
      if (llvm::isa<CastOp, TransposeOp, ReshapeOp>(u))
        work.push_back(u->getResult(0));
    }
  }
  return false;
}

/// The rules that keep a linear layer high precision: the lm_head and a
/// tied embedding (unless lmHead), --keep-high-precision, the first / last
/// transformer blocks. The plan and the export's list of quantised weights
/// both ask them, so an export quantises exactly the layers that trained in
/// FP8 / FP4.
class KeepRules {
public:
  /// Compiles the regexes, finds the tied weights and counts the blocks of
  /// `fn`; the error, or "".
  std::string init(func::FuncOp fn, const Fp8PlanOptions &o) {
    opts = &o;
    for (const std::string &p : o.keepHighPrecision) {
      rt::NameRegex re;
      rt::Status st = rt::NameRegex::compile(p, "--keep-high-precision", &re);
      if (!st.isOk())
        return st.message();
      keep.push_back(std::move(re));
    }
    // Tied weights by name: an exporter may read one parameter through two
    // tc.parameter ops.
    fn.walk([&](ParameterOp p) {
      if (gatheredToo(p))
        tied.insert(p.getName());
      blocks = std::max(blocks, blockIndexOf(p.getName()) + 1);
    });
    if ((o.highPrecisionFirst > 0 || o.highPrecisionLast > 0) && blocks == 0)
      return ("--high-precision-" + Twine(o.highPrecisionFirst > 0 ? "first " : "last ") +
              Twine(o.highPrecisionFirst > 0 ? o.highPrecisionFirst : o.highPrecisionLast) +
              ": no parameter of @" + fn.getName() +
              " has a transformer block index in its name (h.<i>., layers.<i>. or blocks.<i>.)")
          .str();
    if (o.highPrecisionFirst < 0 || o.highPrecisionLast < 0)
      return "--high-precision-first/--high-precision-last must not be negative";
    return "";
  }

  /// Why the linear layer `mm` (weight `w`) stays high precision, or "".
  std::string reason(MatmulOp mm, ParameterOp w) const {
    std::string node = onnxNodeOf(mm.getLoc());
    std::string name = w.getName().str();
    if (!opts->lmHead && tied.contains(name))
      return "fp8 plan: the product of a tied embedding ('" + name +
             "') stays high precision (--fp8-lm-head puts it in FP8)";
    if (!opts->lmHead && feedsTheLoss(mm.getResult()))
      return "fp8 plan: the lm_head stays high precision (--fp8-lm-head puts it in FP8)";
    for (const rt::NameRegex &re : keep)
      if ((!node.empty() && re.search(node)) || re.search(name))
        return "fp8 plan: kept high precision by --keep-high-precision '" + re.pattern() + "'";
    int64_t block = blockIndexOf(name);
    if (block >= 0 && block < opts->highPrecisionFirst)
      return ("fp8 plan: transformer block " + Twine(block) + " of " + Twine(blocks) +
              " is in the first " + Twine(opts->highPrecisionFirst) +
              " kept high precision (--high-precision-first)")
          .str();
    if (block >= 0 && block >= blocks - opts->highPrecisionLast)
      return ("fp8 plan: transformer block " + Twine(block) + " of " + Twine(blocks) +
              " is in the last " + Twine(opts->highPrecisionLast) +
              " kept high precision (--high-precision-last)")
          .str();
    return "";
  }

private:
  const Fp8PlanOptions *opts = nullptr;
  std::vector<rt::NameRegex> keep;
  llvm::StringSet<> tied;
  int64_t blocks = 0; // the largest block index + 1
};

class Marker {
public:
  Marker(func::FuncOp fn, const Fp8PlanOptions &o) : fn(fn), o(o), b(fn.getContext()) {}

  LogicalResult run() {
    if (std::string e = rules.init(fn, o); !e.empty())
      return fn.emitError() << e;
    SmallVector<MatmulOp> mms;
    fn.walk([&](MatmulOp mm) { mms.push_back(mm); });
    for (MatmulOp mm : mms)
      if (failed(plan(mm)))
        return failure();
    if (!fallbacks.empty())
      fn.emitRemark() << "--fp8 --allow-fallback: " << fallbacks.size() << " matmul"
                      << (fallbacks.size() > 1 ? "s" : "") << " of @" << fn.getName()
                      << (fallbacks.size() > 1 ? " stay" : " stays")
                      << " bf16 (misaligned for cuBLASLt FP8): " << llvm::join(fallbacks, ", ");
    if (linear == 0)
      fn.emitRemark() << "--fp8: @" << fn.getName()
                      << " has no linear-layer matmul (a 2-D weight parameter on the right): "
                         "nothing runs in FP8, the plan is bf16";
    else if (marked == 0)
      fn.emitRemark() << "--fp8: none of the " << linear << " linear-layer matmuls of @"
                      << fn.getName()
                      << " runs in FP8 (all kept high precision, see the precision report): "
                         "the plan is bf16";
    return success();
  }

private:
  void keepBf16(MatmulOp mm, const Twine &why) {
    mm->setAttr(kPrecisionReasonAttr,
                b.getStringAttr(("matmul: bf16 operands, fp32 accumulation; " + why).str()));
  }

  /// The name that identifies `mm` in messages: its ONNX node, else its weight.
  static std::string label(MatmulOp mm, ParameterOp w) {
    std::string node = onnxNodeOf(mm.getLoc());
    return "matmul '" + (node.empty() ? w.getName().str() : node) + "' (weight '" +
           w.getName().str() + "')";
  }

  LogicalResult plan(MatmulOp mm) {
    ParameterOp w = weightOf(mm.getRhs());
    auto wt = w ? llvm::dyn_cast<RankedTensorType>(w.getType()) : RankedTensorType();
    auto x = llvm::cast<RankedTensorType>(mm.getLhs().getType());
    auto rhs = llvm::cast<RankedTensorType>(mm.getRhs().getType());
    auto res = llvm::cast<RankedTensorType>(mm.getType());
    // A linear layer: a 2-D weight on the right, activations on the left
    // whose batch axes fold into M (tc-quantize-fp8 makes it rank 2).
    if (!w || wt.getRank() != 2 || !llvm::isa<FloatType>(wt.getElementType()) ||
        rhs.getRank() != 2 || weightOf(mm.getLhs()) || (x.getRank() > 2 && mm.getTransposeLhs()) ||
        !res.getElementType().isBF16() || !x.hasStaticShape() || !rhs.hasStaticShape())
      return success();
    ++linear;
    if (std::string why = rules.reason(mm, w); !why.empty())
      return keepBf16(mm, why), success();
    int64_t k = mm.getTransposeRhs() ? rhs.getDimSize(1) : rhs.getDimSize(0);
    int64_t n = mm.getTransposeRhs() ? rhs.getDimSize(0) : rhs.getDimSize(1);
    if (std::string rule = fp8SizeRule(o.scaling, k, n); !rule.empty()) {
      std::string sizes = llvm::formatv("K={0}, N={1}", k, n).str();
      if (!o.allowFallback)
        return mm.emitError() << "--fp8: " << label(mm, w) << " has " << sizes << "; " << rule
                              << ": pad the layer, keep it high precision "
                                 "(--keep-high-precision), or --allow-fallback to run it in bf16";
      fallbacks.push_back(label(mm, w) + " " + sizes);
      return keepBf16(mm, "fp8 fallback (--allow-fallback): " + sizes + ", " + rule), success();
    }
    ++marked;
    mm->setAttr(kFp8Attr, b.getStringAttr(o.scaling));
    mm->setAttr(kFp8RoleAttr, b.getStringAttr("fprop"));
    annotatePrecision(
        mm, "fp8",
        "linear layer: fp8 (" + o.scaling +
            " scaling; E4M3 operands, E5M2 gradients), fp32 accumulation, bf16 output");
    return success();
  }

  func::FuncOp fn;
  const Fp8PlanOptions &o;
  Builder b;
  KeepRules rules;
  int64_t linear = 0, marked = 0;
  std::vector<std::string> fallbacks;
};

} // namespace

LogicalResult markFp8Matmuls(func::FuncOp fn, const Fp8PlanOptions &options) {
  return Marker(fn, options).run();
}

std::map<std::string, int64_t> fp8LinearWeights(func::FuncOp fn, const Fp8PlanOptions &options,
                                                std::string *error) {
  std::map<std::string, int64_t> out;
  KeepRules rules;
  if (std::string e = rules.init(fn, options); !e.empty()) {
    *error = e;
    return out;
  }
  fn.walk([&](MatmulOp mm) {
    ParameterOp w = weightOf(mm.getRhs());
    if (!w || weightOf(mm.getLhs()) || !rules.reason(mm, w).empty())
      return;
    auto wt = llvm::dyn_cast<RankedTensorType>(w.getType());
    auto rhs = llvm::cast<RankedTensorType>(mm.getRhs().getType());
    if (!wt || wt.getRank() != 2 || rhs.getRank() != 2 || !llvm::isa<FloatType>(wt.getElementType()))
      return;
    // The contraction axis of the rhs, carried back through its transposes.
    int64_t axis = mm.getTransposeRhs() ? 1 : 0;
    for (Value v = mm.getRhs(); v != w.getResult(); v = v.getDefiningOp()->getOperand(0))
      if (llvm::isa<TransposeOp>(v.getDefiningOp()))
        axis = 1 - axis;
    out[w.getName().str()] = axis;
  });
  return out;
}

} // namespace tc
