//===- BufferAssignment.cpp - buffers of one function's tensors -----------===//
//
// Destination planning for named results, and the buffer helpers every
// tc -> tcx conversion pattern uses.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/BufferAssignment.h"
#include "compiler/Conversion/TcToTcx/Patterns.h"
#include "dialects/tc/Eval/Program.h"
#include "runtime/src/schema/program.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace tc {

namespace {
constexpr llvm::StringLiteral kName = "tc.name";
} // namespace

void BufferAssignment::plan(OpBuilder &b, Operation *entry) {
  entryPoint = entry;
  Block &body = fn.getBody().front();
  auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());

  // Which values depend on a loss gradient (the backward pass).
  for (Operation &op : body.without_terminator()) {
    bool bwd = isa<CrossEntropyGradOp, NllLossGradOp>(op) ||
               llvm::any_of(op.getOperands(), [&](Value v) { return backward.contains(v); });
    if (bwd)
      for (Value r : op.getResults())
        backward.insert(r);
  }
  // Returned values, and what they are reshapes/slices of (same storage).
  for (Value v : ret.getOperands()) {
    while (returned.insert(v).second) {
      Operation *def = v.getDefiningOp();
      if (!isa_and_nonnull<ReshapeOp, SliceOp, SplitOp>(def))
        break;
      v = def->getOperand(0);
    }
  }
  for (BlockArgument a : body.getArguments())
    buffers[a] = a;

  // Values written in place into persistent buffers: "update:<p>" results
  // into parameter/state <p>, "grad:<p>" results into a persistent gradient.
  DenseMap<Operation *, unsigned> index;
  for (auto [i, op] : llvm::enumerate(body))
    index[&op] = i;
  // tc.parameter values (and their reshape/slice aliases) per name.
  llvm::StringMap<SmallVector<Value>> reads;
  for (auto p : body.getOps<ParameterOp>()) {
    SmallVector<Value> work{p.getResult()};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      reads[p.getName()].push_back(v);
      for (Operation *u : v.getUsers())
        if (isa<ReshapeOp, SliceOp, SplitOp>(u))
          llvm::append_range(work, u->getResults());
    }
  }
  DenseSet<Value> claimed;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    auto name = fn.getResultAttrOfType<StringAttr>(i, kName);
    if (!name)
      continue;
    StringRef n = name.getValue();
    bool update = n.consume_front("update:");
    bool grad = !update && n.consume_front("grad:");
    if (!update && !grad)
      continue;
    auto type = tensorType(v);
    Value target;
    if (update) {
      // The parameter (or optimizer state) read in this function, else a
      // fresh handle with the kind the name implies.
      bool state = n.starts_with("exp_avg:") || n.starts_with("exp_avg_sq:") ||
                   n.starts_with("momentum_buffer:");
      bool trainable = false;
      for (auto p : body.getOps<ParameterOp>())
        if (p.getName() == n) {
          state = p->hasAttr("tc.optimizer_state");
          trainable = p.getTrainable();
        }
      target = paramBuffer(b, n, type,
                           n.starts_with(rt::kShadowPrefix) ? "shadow"
                           : state                          ? "optimizer_state"
                                                            : "parameter",
                           trainable);
    } else {
      target = paramBuffer(b, ("grad:" + n).str(), type, "gradient", false);
    }
    // A reshape of a value used only by it: write that value into a view of
    // the persistent buffer instead (bias gradients are reshaped sums).
    Value written = v, dest = target;
    while (auto r = written.getDefiningOp<ReshapeOp>()) {
      if (!r.getInput().hasOneUse() || !r.getInput().getDefiningOp() ||
          isa<ParameterOp, ConstantOp>(r.getInput().getDefiningOp()) ||
          destinations.count(r.getInput()))
        break;
      written = r.getInput();
    }
    if (written != v) {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPoint(entryPoint);
      dest = tcx::ViewOp::create(b, fn.getLoc(),
                                 tcx::BufferType::fromTensorType(tensorType(written)), target,
                                 b.getI64IntegerAttr(0));
    }
    Operation *def = written.getDefiningOp();
    bool safe = def && !isa<ParameterOp, ConstantOp, ReshapeOp>(def) &&
                !destinations.count(written) && !claimed.contains(v);
    if (safe && isa<SliceOp, SplitOp>(def))
      safe = false; // may become views
    if (safe && update) {
      // Every read of the old value must come before `def`, or be `def`
      // itself reading it elementwise (same shape as the output), or be a
      // tc.fp8_scale_update, whose kernel reads its scale and history
      // before it writes over them.
      bool elementwise = isElementwise(def) || llvm::isa<FusionOp>(def);
      bool readsFirst = llvm::isa<Fp8ScaleUpdateOp>(def);
      for (Value old : reads.lookup(n))
        for (OpOperand &use : old.getUses()) {
          Operation *u = use.getOwner();
          if (isa<ReshapeOp, SliceOp, SplitOp>(u))
            continue; // covered by the alias values
          if (u == def && elementwise && tensorType(old) == tensorType(written))
            continue;
          if (u == def && readsFirst)
            continue;
          if (u->getBlock() != &body || index[u] >= index[def])
            safe = false;
        }
    }
    if (safe) {
      destinations[written] = dest;
      claimed.insert(v);
      inPlace.push_back({static_cast<unsigned>(i), target});
    } else {
      finalCopies.push_back({static_cast<unsigned>(i), v, target});
    }
  }
}

Value BufferAssignment::paramBuffer(OpBuilder &b, StringRef name, RankedTensorType type,
                                    StringRef kind, bool trainable) {
  auto it = params.find(name);
  if (it != params.end()) {
    if (trainable)
      it->second.getDefiningOp()->setAttr("trainable", b.getUnitAttr());
    return it->second;
  }
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(entryPoint);
  auto p = tcx::ParamOp::create(b, fn.getLoc(), tcx::BufferType::fromTensorType(type),
                                b.getStringAttr(name), b.getStringAttr(kind),
                                trainable ? b.getUnitAttr() : UnitAttr());
  params[name] = p.getResult();
  return p.getResult();
}

Value BufferAssignment::bufferOf(OpBuilder &b, Value v) {
  if (isa<tcx::BufferType>(v.getType()))
    return v;
  auto it = buffers.find(v);
  if (it != buffers.end())
    return it->second;
  // Constants get a buffer only when something needs one (a launch, a
  // library call or a result).
  if (auto c = v.getDefiningOp<ConstantOp>()) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(entryPoint);
    auto k = tcx::ConstOp::create(b, c.getLoc(), tcx::BufferType::fromTensorType(tensorType(v)),
                                  c.getValue());
    buffers[v] = k.getResult();
    return k.getResult();
  }
  return nullptr;
}

Value BufferAssignment::outBuffer(OpBuilder &b, Value result) {
  if (Value d = destinations.lookup(result)) {
    buffers[result] = d;
    return d;
  }
  StringRef kind = returned.contains(result)   ? "output"
                   : backward.contains(result) ? "backward"
                                               : "activation";
  auto a = tcx::AllocOp::create(b, result.getLoc(),
                                tcx::BufferType::fromTensorType(tensorType(result)),
                                b.getStringAttr(kind));
  if (auto it = referenceIds.find(result); it != referenceIds.end())
    a->setAttr("ref", b.getI64IntegerAttr(it->second));
  buffers[result] = a.getResult();
  return a.getResult();
}

void BufferAssignment::takeReferenceValues() {
  // Only the results an op had when tagged have ids (not an amax
  // tc-fuse-fp8-amax added since, say).
  for (Operation &op : fn.getBody().front()) {
    if (auto fusion = llvm::dyn_cast<FusionOp>(op)) {
      // A fusion is not in the reference program: its results are the
      // values its body yields.
      Operation *yield = fusion.getRegion().front().getTerminator();
      for (auto [i, v] : llvm::enumerate(yield->getOperands()))
        if (auto r = llvm::dyn_cast<OpResult>(v))
          if (std::optional<int64_t> id = referenceValueId(r.getOwner(), r.getResultNumber()))
            referenceIds[fusion->getResult(i)] = *id;
    } else {
      for (OpResult r : op.getResults())
        if (std::optional<int64_t> id = referenceValueId(&op, r.getResultNumber()))
          referenceIds[r] = *id;
    }
  }
  fn.walk([](Operation *op) { op->removeAttr(kReferenceValueAttr); });
}

Value BufferAssignment::companionBuffer(OpBuilder &b, Value tensor, tcx::BufferType type) {
  StringRef kind = backward.contains(tensor) ? "backward" : "activation";
  return tcx::AllocOp::create(b, tensor.getLoc(), type, b.getStringAttr(kind)).getResult();
}

Value BufferAssignment::view(OpBuilder &b, Value result, Value source, int64_t byteOffset) {
  Value src = bufferOf(b, source);
  auto v = tcx::ViewOp::create(b, result.getLoc(),
                               tcx::BufferType::fromTensorType(tensorType(result)), src,
                               b.getI64IntegerAttr(byteOffset));
  Value out = v.getResult();
  if (Value d = destinations.lookup(result)) {
    // Cannot alias a persistent buffer: copy into it.
    tcx::CopyOp::create(b, result.getLoc(), out, d);
    out = d;
  }
  buffers[result] = out;
  return out;
}

void BufferAssignment::library(OpBuilder &b, Location loc, StringRef callee, ValueRange ins,
                               ValueRange outs, ArrayRef<NamedAttribute> attrs) {
  SmallVector<Value> allOuts(outs.begin(), outs.end());
  DictionaryAttr dict = b.getDictionaryAttr(attrs);
  if (int64_t bytes = tcx::libraryScratchBytes(callee, dict); bytes > 0)
    allOuts.push_back(tcx::AllocOp::create(b, fn.getLoc(),
                                           tcx::BufferType::get({bytes}, b.getIntegerType(8)),
                                           b.getStringAttr("scratch")));
  auto op = tcx::LibraryOp::create(b, loc, b.getStringAttr(callee), ins, allOuts);
  for (NamedAttribute a : attrs)
    op->setAttr(a.getName(), a.getValue());
}

tcx::KernelOp BufferAssignment::newKernel(OpBuilder &b, Location loc, StringRef what,
                                          StringRef kind) {
  std::string name = (fn.getName() + "_" + what + "_" + Twine(kernelCount++)).str();
  for (char &c : name)
    if (!llvm::isAlnum(c) && c != '_')
      c = '_';
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(fn);
  auto kernel = tcx::KernelOp::create(b, loc, b.getStringAttr(name), b.getStringAttr(kind),
                                      FlatSymbolRefAttr());
  symbols.insert(kernel); // unique name; it stays where it is, before fn
  return kernel;
}

void BufferAssignment::launch(OpBuilder &b, Operation *op, tcx::KernelOp kernel, ValueRange ins,
                              ValueRange outs) {
  // The grid, block, n and meta come later, from tcx-generate-cuda.
  tcx::LaunchOp::create(b, op->getLoc(), FlatSymbolRefAttr::get(kernel.getSymNameAttr()), ins,
                        outs, b.getI64IntegerAttr(tensorType(op->getResult(0)).getNumElements()),
                        DenseI64ArrayAttr(), DenseI64ArrayAttr(), IntegerAttr(),
                        DenseI64ArrayAttr());
}

FailureOr<SmallVector<Value>> BufferAssignment::results(OpBuilder &b, func::ReturnOp ret) {
  SmallVector<Value> out;
  for (Value v : ret.getOperands()) {
    Value buf = bufferOf(b, v);
    if (!buf)
      return ret.emitOpError() << "returned value has no buffer (internal error)";
    out.push_back(buf);
  }
  for (auto [index, target] : inPlace)
    out[index] = target;
  for (auto [index, tensor, target] : finalCopies) {
    tcx::CopyOp::create(b, ret.getLoc(), bufferOf(b, tensor), target);
    out[index] = target;
  }
  return out;
}

} // namespace tc
