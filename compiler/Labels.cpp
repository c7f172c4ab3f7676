//===- Labels.cpp - which labels a causal LM's loss expects ---------------===//
//
// See Labels.h.
//
//===----------------------------------------------------------------------===//
#include "compiler/Labels.h"

#include "dialects/tc/IR/TcOps.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <optional>

using namespace mlir;

namespace tc {

namespace {

/// `s` as a JSON string.
std::string jsonQuote(llvm::StringRef s) {
  return llvm::formatv("{0}", llvm::json::Value(s)).str();
}

/// Follows `v` back through ops that keep each label's value (reshape, cast)
/// and records a slice along axis 1 that starts at 1 and a pad of the same
/// axis. Returns the block argument it reaches, or null.
BlockArgument traceLabels(Value v, bool *shifted, bool *padded) {
  while (true) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return arg;
    Operation *op = v.getDefiningOp();
    if (!op)
      return {};
    if (isa<tc::ReshapeOp, tc::CastOp>(op)) {
      v = op->getOperand(0);
      continue;
    }
    if (auto s = dyn_cast<tc::SliceOp>(op)) {
      auto in = cast<RankedTensorType>(s.getInput().getType());
      ArrayRef<int64_t> starts = s.getStarts(), strides = s.getStrides();
      if (in.getRank() != 2 || *shifted)
        return {};
      auto out = cast<RankedTensorType>(s.getType());
      // [B, T'] -> [B, T'-1] from position 1, the batch axis whole.
      if (starts[0] != 0 || strides[0] != 1 || out.getDimSize(0) != in.getDimSize(0) ||
          starts[1] != 1 || strides[1] != 1 || out.getDimSize(1) != in.getDimSize(1) - 1)
        return {};
      *shifted = true;
      v = s.getInput();
      continue;
    }
    if (auto p = dyn_cast<tc::PadOp>(op)) {
      ArrayRef<int64_t> low = p.getLow(), high = p.getHigh();
      if (!*shifted || *padded || low.size() != 2 || low[0] != 0 || low[1] != 0 ||
          high[0] != 0 || high[1] != 1)
        return {};
      *padded = true;
      v = p.getInput();
      continue;
    }
    return {};
  }
}

} // namespace

LabelConvention detectLabelConvention(func::FuncOp fn) {
  LabelConvention out;
  fn.walk([&](Operation *op) {
    if (!out.convention.empty() || !isa<tc::CrossEntropyOp, tc::NllLossOp>(op))
      return;
    Value labels = op->getOperand(1);
    auto ignore = op->getAttrOfType<IntegerAttr>("ignore_index");
    bool shifted = false, padded = false;
    BlockArgument arg = traceLabels(labels, &shifted, &padded);
    if (!arg || arg.getOwner()->getParentOp() != fn.getOperation())
      return;
    auto type = cast<RankedTensorType>(arg.getType());
    if (type.getRank() != 2)
      return;
    auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "tc.name");
    out.input = name ? name.getValue().str() : "arg" + std::to_string(arg.getArgNumber());
    out.ignoreIndex = ignore ? ignore.getInt() : -100;
    std::string loss = op->getName().stripDialect().str();
    if (shifted) {
      out.convention = "same";
      out.reason = "the model shifts '" + out.input + "' itself before its " + loss + " (" +
                   (padded ? "pad(labels, (0, 1))[..., 1:]" : "labels[..., 1:]") +
                   ", as HuggingFace *ForCausalLM(labels=...) does)";
    } else {
      out.convention = "next";
      out.reason = "the model's " + loss + " compares position t with '" + out.input +
                   "'[t]";
    }
  });
  return out;
}

std::string labelConventionJson(const LabelConvention &c) {
  return "{\"convention\": " + jsonQuote(c.convention) + ", \"input\": " +
         jsonQuote(c.input) + ", \"ignore_index\": " + std::to_string(c.ignoreIndex) +
         ", \"reason\": " + jsonQuote(c.reason) + "}";
}

std::string inputRangesJson(func::FuncOp fn) {
  struct Range {
    int64_t max = -1;
    std::optional<int64_t> ignore;
    std::string what;
  };
  std::map<unsigned, Range> ranges;
  // The argument `v` comes from through reshapes and casts, or none.
  auto argOf = [&](Value v) -> BlockArgument {
    while (Operation *d = v.getDefiningOp()) {
      if (!isa<tc::ReshapeOp, tc::CastOp>(d))
        return {};
      v = d->getOperand(0);
    }
    auto a = dyn_cast<BlockArgument>(v);
    return a && a.getOwner()->getParentOp() == fn.getOperation() ? a : BlockArgument();
  };
  auto narrow = [&](BlockArgument a, int64_t max, std::optional<int64_t> ignore,
                    const std::string &what) {
    auto it = ranges.find(a.getArgNumber());
    if (it == ranges.end() || max < it->second.max)
      ranges[a.getArgNumber()] = Range{max, ignore, what};
  };
  fn.walk([&](Operation *op) {
    if (auto g = dyn_cast<tc::GatherOp>(op)) {
      auto p = g.getData().getDefiningOp<tc::ParameterOp>();
      BlockArgument a = argOf(g.getIndices());
      if (p && a && g.getAxis() == 0)
        narrow(a, cast<RankedTensorType>(p.getType()).getDimSize(0) - 1, std::nullopt,
               "token ids of the embedding '" + p.getName().str() + "'");
    } else if (isa<tc::CrossEntropyOp, tc::NllLossOp>(op)) {
      BlockArgument a = argOf(op->getOperand(1));
      auto ignore = op->getAttrOfType<IntegerAttr>("ignore_index");
      auto t = cast<RankedTensorType>(op->getOperand(0).getType());
      if (a && t.getRank() >= 1)
        narrow(a, t.getDimSize(t.getRank() - 1) - 1, ignore ? ignore.getInt() : -100,
               "class ids of the " + op->getName().stripDialect().str());
    }
  });
  std::string s = "{";
  bool first = true;
  for (const auto &[arg, r] : ranges) {
    auto name = fn.getArgAttrOfType<StringAttr>(arg, "tc.name");
    if (!name)
      continue;
    s += (first ? "" : ", ") + jsonQuote(name.getValue().str()) + ": {\"min\": 0, \"max\": " +
         std::to_string(r.max) + (r.ignore ? ", \"ignore_index\": " + std::to_string(*r.ignore) : "") +
         ", \"what\": " + jsonQuote(r.what) + "}";
    first = false;
  }
  return s + "}";
}

} // namespace tc
