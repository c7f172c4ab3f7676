//===- LowerToTcx.cpp - tc-lower-to-tcx ------------------------------------===//
//
// Lowers each func.func of tc ops on tensors to tcx ops on buffers, in
// destination-passing style: every value gets a buffer (an alloc, a
// parameter's persistent buffer, a constant, or a view of another buffer)
// and every op becomes the launch, library call or matmul that writes it.
// Generated kernels are outlined into module-level `tcx.kernel`s holding the
// tc ops they compute; tcx-generate-cuda, the next stage, turns each body
// into CUDA C++ and sets how it is launched.
//
// The function stays straight-line and in the original op order, so the
// memory planner's liveness is program order and the runtime can replay it
// (or capture it into one CUDA graph) as is.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/GpuPasses.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"

namespace tc {
#define GEN_PASS_DEF_TCLOWERTOTCX
#include "compiler/Transforms/GpuPasses.h.inc"
} // namespace tc

using namespace mlir;

namespace {

constexpr llvm::StringLiteral kName = "tc.name";

RankedTensorType tensorType(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

int64_t numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

bool isLibraryFloat(Type t) { return t.isF32() || t.isBF16(); }
bool isLibraryIndex(Type t) { return t.isInteger(32) || t.isInteger(64); }

/// A tc.fusion that is one cast of its only input from `from` to `to`
/// element type (what tc-fuse makes of a lone precision cast).
bool isLoneCast(Operation *op, Type from, Type to) {
  if (!op || !llvm::isa<tc::FusionOp>(op) || op->getNumOperands() != 1 ||
      op->getNumResults() != 1 || op->getNumRegions() != 1)
    return false;
  Block &body = op->getRegion(0).front();
  auto cast = llvm::dyn_cast<tc::CastOp>(body.front());
  return cast && std::next(body.begin(), 2) == body.end() &&
         cast.getInput() == body.getArgument(0) &&
         tensorType(op->getOperand(0)).getElementType() == from &&
         tensorType(op->getResult(0)).getElementType() == to;
}

bool isSplatConstant(Value v) {
  auto c = v.getDefiningOp<tc::ConstantOp>();
  if (!c)
    return false;
  auto dense = llvm::dyn_cast<DenseElementsAttr>(c.getValue());
  return dense && dense.isSplat();
}

/// Lowers one function. Builds the tcx ops next to the tc ops, then erases
/// the tc ops.
class FunctionLowering {
public:
  FunctionLowering(func::FuncOp fn, SymbolTable &symbols, bool tf32, bool fuseEpilogues)
      : fn(fn), symbols(symbols), b(fn.getContext()), tf32(tf32),
        fuseEpilogues(fuseEpilogues) {}

  LogicalResult run();

private:
  // Buffers.
  Value bufferOf(Value tensor);
  Value outBuffer(Value result);
  Value paramBuffer(StringRef name, RankedTensorType type, StringRef kind, bool trainable);
  // Op families.
  LogicalResult lower(Operation *op);
  LogicalResult lowerKernel(Operation *op, StringRef kind);
  LogicalResult lowerFusion(Operation *op);
  void launch(Operation *op, tcx::KernelOp kernel, ValueRange ins, ValueRange outs);
  LogicalResult lowerMatmul(tc::MatmulOp op);
  LogicalResult lowerView(Value result, Value source, int64_t byteOffset);
  FailureOr<bool> lowerLibrary(Operation *op);
  FailureOr<bool> lowerAttention(Operation *op);
  void library(Operation *at, StringRef callee, ValueRange ins, ValueRange outs,
               ArrayRef<NamedAttribute> attrs);
  Value scratch(StringRef callee, DictionaryAttr attrs);
  std::pair<Value, Value> normStatsFor(Operation *norm, bool rms, int64_t rows);
  std::optional<int64_t> contiguousSliceOffset(RankedTensorType in, RankedTensorType out,
                                               ArrayRef<int64_t> starts,
                                               ArrayRef<int64_t> strides);
  // Named results ("update:<p>", "grad:<p>").
  void planDestinations();
  void eliminateDeadWork();
  std::string kernelName(StringRef what);

  func::FuncOp fn;
  SymbolTable &symbols;
  OpBuilder b;
  bool tf32, fuseEpilogues;

  DenseMap<Value, Value> buffers;      // tensor -> buffer
  llvm::StringMap<Value> params;       // parameter name -> tcx.param
  DenseMap<Value, Value> destinations; // tensor -> persistent buffer it is written into
  // (result index, tensor, persistent buffer) copied at the end.
  SmallVector<std::tuple<unsigned, Value, Value>> finalCopies;
  // (result index, persistent buffer) written in place.
  SmallVector<std::pair<unsigned, Value>> inPlace;
  DenseSet<Value> backward;            // values depending on a loss gradient
  DenseSet<Value> returned;
  DenseSet<Operation *> done;          // ops lowered together with an earlier one
  // attention result -> (buffer, [batch, head, row] strides) when the
  // forward wrote it straight into its [B, T, H, D] transpose
  DenseMap<Value, std::pair<Value, SmallVector<int64_t>>> stridedAttention;
  // norm gradient op -> (mean or null, rstd) written by its forward's kernel
  DenseMap<Operation *, std::pair<Value, Value>> normStats;
  Operation *entryPoint = nullptr;     // hoisted params/consts go before it
  unsigned kernelCount = 0;
};

std::string FunctionLowering::kernelName(StringRef what) {
  std::string base = (fn.getName() + "_" + what + "_" + Twine(kernelCount++)).str();
  for (char &c : base)
    if (!llvm::isAlnum(c) && c != '_')
      c = '_';
  return base;
}

Value FunctionLowering::paramBuffer(StringRef name, RankedTensorType type, StringRef kind,
                                    bool trainable) {
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

Value FunctionLowering::bufferOf(Value tensor) {
  auto it = buffers.find(tensor);
  if (it != buffers.end())
    return it->second;
  // Constants get a buffer only when something needs one (a launch, a
  // library call or a result).
  if (auto c = tensor.getDefiningOp<tc::ConstantOp>()) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(entryPoint);
    auto k = tcx::ConstOp::create(b, c.getLoc(),
                                  tcx::BufferType::fromTensorType(tensorType(tensor)),
                                  c.getValue());
    buffers[tensor] = k.getResult();
    return k.getResult();
  }
  return nullptr;
}

Value FunctionLowering::outBuffer(Value result) {
  if (Value d = destinations.lookup(result)) {
    buffers[result] = d;
    return d;
  }
  StringRef kind = returned.contains(result) ? "output"
                   : backward.contains(result) ? "backward"
                                               : "activation";
  auto a = tcx::AllocOp::create(b, result.getLoc(),
                                tcx::BufferType::fromTensorType(tensorType(result)),
                                b.getStringAttr(kind));
  buffers[result] = a.getResult();
  return a.getResult();
}

Value FunctionLowering::scratch(StringRef callee, DictionaryAttr attrs) {
  int64_t bytes = tcx::libraryScratchBytes(callee, attrs);
  if (bytes <= 0)
    return nullptr;
  return tcx::AllocOp::create(
      b, fn.getLoc(), tcx::BufferType::get({bytes}, b.getIntegerType(8)),
      b.getStringAttr("scratch"));
}

void FunctionLowering::library(Operation *at, StringRef callee, ValueRange ins, ValueRange outs,
                               ArrayRef<NamedAttribute> attrs) {
  SmallVector<Value> allOuts(outs.begin(), outs.end());
  DictionaryAttr dict = b.getDictionaryAttr(attrs);
  if (Value s = scratch(callee, dict))
    allOuts.push_back(s);
  auto op = tcx::LibraryOp::create(b, at->getLoc(), b.getStringAttr(callee), ins, allOuts);
  for (NamedAttribute a : attrs)
    op->setAttr(a.getName(), a.getValue());
}

/// Values written in place into persistent buffers: "update:<p>" results
/// into parameter/state <p>, "grad:<p>" results into a persistent gradient.
void FunctionLowering::planDestinations() {
  Block &body = fn.getBody().front();
  DenseMap<Operation *, unsigned> index;
  for (auto [i, op] : llvm::enumerate(body))
    index[&op] = i;
  auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());

  // tc.parameter values (and their reshape/slice aliases) per name.
  llvm::StringMap<SmallVector<Value>> reads;
  for (auto p : body.getOps<tc::ParameterOp>()) {
    SmallVector<Value> work{p.getResult()};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      reads[p.getName()].push_back(v);
      for (Operation *u : v.getUsers())
        if (isa<tc::ReshapeOp, tc::SliceOp, tc::SplitOp>(u))
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
      for (auto p : body.getOps<tc::ParameterOp>())
        if (p.getName() == n) {
          state = p->hasAttr("tc.optimizer_state");
          trainable = p.getTrainable();
        }
      target = paramBuffer(n, type, state ? "optimizer_state" : "parameter", trainable);
    } else {
      target = paramBuffer(("grad:" + n).str(), type, "gradient", false);
    }
    // A reshape of a value used only by it: write that value into a view of
    // the persistent buffer instead (bias gradients are reshaped sums).
    Value written = v, dest = target;
    while (auto r = written.getDefiningOp<tc::ReshapeOp>()) {
      if (!r.getInput().hasOneUse() || !r.getInput().getDefiningOp() ||
          isa<tc::ParameterOp, tc::ConstantOp>(r.getInput().getDefiningOp()) ||
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
    bool safe = def && !isa<tc::ParameterOp, tc::ConstantOp, tc::ReshapeOp>(def) &&
                !destinations.count(written) && !claimed.contains(v);
    if (safe && isa<tc::SliceOp, tc::SplitOp>(def))
      safe = false; // may become views
    if (safe && update) {
      // Every read of the old value must come before `def`, or be `def`
      // itself reading it elementwise (same shape as the output).
      bool elementwise = tc::isElementwise(def) || llvm::isa<tc::FusionOp>(def);
      for (Value old : reads.lookup(n))
        for (OpOperand &use : old.getUses()) {
          Operation *u = use.getOwner();
          if (isa<tc::ReshapeOp, tc::SliceOp, tc::SplitOp>(u))
            continue; // covered by the alias values
          if (u == def && elementwise && tensorType(old) == tensorType(written))
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

std::optional<int64_t>
FunctionLowering::contiguousSliceOffset(RankedTensorType in, RankedTensorType out,
                                        ArrayRef<int64_t> starts, ArrayRef<int64_t> strides) {
  unsigned bits = in.getElementType().isIntOrFloat() ? in.getElementType().getIntOrFloatBitWidth() : 0;
  if (bits < 8 || bits % 8 != 0)
    return std::nullopt;
  ArrayRef<int64_t> is = in.getShape(), os = out.getShape();
  int64_t rank = is.size();
  // Find the outermost dim the slice does not take whole.
  int64_t d = 0;
  while (d < rank && os[d] == 1)
    ++d;
  // dims after the first non-unit one must be whole (start 0, stride 1).
  for (int64_t i = d + 1; i < rank; ++i)
    if (os[i] != is[i] || starts[i] != 0 || strides[i] != 1)
      return std::nullopt;
  if (d < rank && os[d] > 1 && strides[d] != 1)
    return std::nullopt;
  int64_t offset = 0, stride = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    offset += starts[i] * stride;
    stride *= is[i];
  }
  return offset * (bits / 8);
}

LogicalResult FunctionLowering::lowerView(Value result, Value source, int64_t byteOffset) {
  Value src = bufferOf(source);
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
  return success();
}

LogicalResult FunctionLowering::lowerKernel(Operation *op, StringRef kind) {
  auto module = fn->getParentOfType<ModuleOp>();
  std::string name = kernelName(op->getName().stripDialect());
  OpBuilder mb(module.getContext());
  mb.setInsertionPoint(fn);
  auto kernel = tcx::KernelOp::create(mb, op->getLoc(), mb.getStringAttr(name),
                                      mb.getStringAttr(kind), FlatSymbolRefAttr());
  symbols.insert(kernel, Block::iterator(fn)); // unique name, placed before fn
  Block *entry = new Block();
  kernel.getBody().push_back(entry);
  // The kernel ABI: one input pointer per operand in operand order, repeated
  // operands and splat constants included, so `ins` is one buffer per
  // operand and the body one block argument per operand.
  SmallVector<Value> ins;
  for (Value operand : op->getOperands()) {
    entry->addArgument(operand.getType(), operand.getLoc());
    Value buf = bufferOf(operand);
    if (!buf)
      return op->emitOpError() << "operand has no buffer (internal error)";
    ins.push_back(buf);
  }
  OpBuilder kb = OpBuilder::atBlockEnd(entry);
  Operation *clone = kb.clone(*op);
  clone->setOperands(entry->getArguments());
  tcx::YieldOp::create(kb, op->getLoc(), clone->getResults());
  SmallVector<Value> outs;
  for (Value r : op->getResults())
    outs.push_back(outBuffer(r));
  launch(op, kernel, ins, outs);
  return success();
}

LogicalResult FunctionLowering::lowerFusion(Operation *op) {
  if (op->getNumRegions() != 1 || op->getRegion(0).getBlocks().size() != 1)
    return op->emitOpError() << "must have one region of one block to lower to a kernel";
  Block &src = op->getRegion(0).front();
  if (src.getNumArguments() != op->getNumOperands())
    return op->emitOpError() << "body takes " << src.getNumArguments() << " arguments for "
                             << op->getNumOperands() << " operands";
  auto module = fn->getParentOfType<ModuleOp>();
  OpBuilder mb(module.getContext());
  mb.setInsertionPoint(fn);
  auto kernel = tcx::KernelOp::create(mb, op->getLoc(), mb.getStringAttr(kernelName("fusion")),
                                      mb.getStringAttr("fusion"), FlatSymbolRefAttr());
  symbols.insert(kernel, Block::iterator(fn));
  IRMapping map;
  op->getRegion(0).cloneInto(&kernel.getBody(), map);
  Block &entry = kernel.getEntry();
  Operation *term = entry.getTerminator();
  OpBuilder kb(term);
  tcx::YieldOp::create(kb, term->getLoc(), term->getOperands());
  term->erase();
  SmallVector<Value> ins, outs;
  for (Value operand : op->getOperands()) {
    Value buf = bufferOf(operand);
    if (!buf)
      return op->emitOpError() << "operand has no buffer (internal error)";
    ins.push_back(buf);
  }
  for (Value r : op->getResults())
    outs.push_back(outBuffer(r));
  if (outs.empty())
    return op->emitOpError() << "has no results to lower";
  launch(op, kernel, ins, outs);
  return success();
}

void FunctionLowering::launch(Operation *op, tcx::KernelOp kernel, ValueRange ins,
                              ValueRange outs) {
  // The grid, block, n and meta come later, from tcx-generate-cuda.
  tcx::LaunchOp::create(b, op->getLoc(), FlatSymbolRefAttr::get(kernel.getSymNameAttr()), ins,
                        outs, b.getI64IntegerAttr(tensorType(op->getResult(0)).getNumElements()),
                        DenseI64ArrayAttr(), DenseI64ArrayAttr(), IntegerAttr(),
                        DenseI64ArrayAttr());
}

LogicalResult FunctionLowering::lowerMatmul(tc::MatmulOp op) {
  Type elt = tensorType(op.getResult()).getElementType();
  if (!elt.isF32() && !elt.isBF16() && !elt.isF16())
    return lowerKernel(op, "matmul"); // cuBLASLt wrapper: f32, bf16, f16 only
  Value lhs = op.getLhs(), rhs = op.getRhs();
  bool lhsT = op.getTransposeLhs(), rhsT = op.getTransposeRhs();
  // A transpose of the last two dims is a transpose flag.
  auto foldTranspose = [](Value &v, bool &flag) {
    auto t = v.getDefiningOp<tc::TransposeOp>();
    if (!t)
      return;
    ArrayRef<int64_t> perm = t.getPermutation();
    int64_t r = perm.size();
    if (r < 2)
      return;
    for (int64_t i = 0; i < r - 2; ++i)
      if (perm[i] != i)
        return;
    if (perm[r - 2] != r - 1 || perm[r - 1] != r - 2)
      return;
    v = t.getInput();
    flag = !flag;
  };
  foldTranspose(lhs, lhsT);
  foldTranspose(rhs, rhsT);
  ArrayRef<int64_t> ls = tensorType(lhs).getShape(), rs = tensorType(rhs).getShape();
  int64_t lr = ls.size(), rr = rs.size();
  int64_t m = lhsT ? ls[lr - 1] : ls[lr - 2], k = lhsT ? ls[lr - 2] : ls[lr - 1];
  int64_t n = rhsT ? rs[rr - 2] : rs[rr - 1];
  ArrayRef<int64_t> lb = ls.drop_back(2), rb = rs.drop_back(2);
  auto outType = tensorType(op.getResult());
  ArrayRef<int64_t> ob = outType.getShape().drop_back(2);
  int64_t lbn = numElements(lb), rbn = numElements(rb), obn = numElements(ob);

  SmallVector<NamedAttribute> attrs;
  int64_t batch = 1, strideLhs = -1, strideRhs = -1;
  bool broadcast = false;
  if (rbn == 1 && !lhsT) {
    m *= lbn; // [b..., M, K] @ [K, N]: one M x K matrix of b*M rows
  } else if (lbn == obn && rbn == obn) {
    batch = obn;
  } else if (rbn == 1) {
    batch = obn, strideRhs = 0;
  } else if (lbn == 1) {
    batch = obn, strideLhs = 0;
  } else {
    broadcast = true;
  }

  // Epilogues: + bias[N] (the product's only use), then gelu-tanh.
  Value result = op.getResult();
  // A weight gradient, sum over b of lhs[b]^T @ rhs[b] (a Linear layer's dW
  // from [b..., T, K] activations and [b..., T, N] output gradients), is one
  // GEMM over the b*T rows of both: K = b*T, no batch, no reduction pass, and
  // one fp32 accumulation instead of b rounded partial products.
  if (lhsT && !rhsT && batch > 1 && strideLhs == -1 && strideRhs == -1 && result.hasOneUse())
    if (auto red = llvm::dyn_cast<tc::ReduceSumOp>(*result.getUsers().begin())) {
      ArrayRef<int64_t> axes = red.getAxes();
      bool batchAxes = (int64_t)axes.size() == (int64_t)ob.size();
      for (size_t i = 0; i < axes.size() && batchAxes; ++i)
        batchAxes = axes[i] == (int64_t)i;
      if (batchAxes && tensorType(red.getResult()).getElementType() == elt) {
        k *= batch;
        batch = 1;
        done.insert(red);
        result = red.getResult();
      }
    }
  Value bias;
  StringRef epilogue = "none";
  if (fuseEpilogues && !broadcast && result.hasOneUse()) {
    if (auto add = llvm::dyn_cast<tc::AddOp>(*result.getUsers().begin())) {
      Value other = add.getLhs() == result ? add.getRhs() : add.getLhs();
      auto ot = tensorType(other);
      if (add.getLhs() != add.getRhs() && ot.getRank() == 1 && ot.getDimSize(0) == n &&
          ot.getElementType() == elt && tensorType(add.getResult()) == outType) {
        bias = other;
        epilogue = "bias";
        done.insert(add);
        result = add.getResult();
      }
    }
    if (result.hasOneUse())
      if (auto gelu = llvm::dyn_cast<tc::GeluOp>(*result.getUsers().begin()))
        if (gelu.getApproximate() == "tanh") {
          epilogue = bias ? "bias_gelu" : "gelu";
          done.insert(gelu);
          result = gelu.getResult();
        }
  }
  SmallVector<Value> ins{bufferOf(lhs), bufferOf(rhs)};
  if (bias)
    ins.push_back(bufferOf(bias));
  Value out = outBuffer(result);
  auto mm = tcx::MatmulOp::create(
      b, op.getLoc(), ins, out, b.getI64IntegerAttr(m), b.getI64IntegerAttr(n),
      b.getI64IntegerAttr(k), b.getI64IntegerAttr(batch), b.getI64IntegerAttr(strideLhs),
      b.getI64IntegerAttr(strideRhs), b.getI64IntegerAttr(-1), b.getBoolAttr(lhsT),
      b.getBoolAttr(rhsT), b.getStringAttr(tf32 && elt.isF32() ? "tf32" : "f32"),
      b.getStringAttr(epilogue), b.getF32FloatAttr(1.0f), b.getF32FloatAttr(0.0f),
      broadcast ? b.getDenseI64ArrayAttr(lb) : DenseI64ArrayAttr(),
      broadcast ? b.getDenseI64ArrayAttr(rb) : DenseI64ArrayAttr());
  (void)mm;
  return success();
}

/// Row statistics buffers ([rows] f32: mean (layer_norm only) and rstd) for
/// the forward normalisation `norm` when a gradient op of the same input,
/// scale, axis and epsilon reads them later; (null, null) otherwise.
std::pair<Value, Value> FunctionLowering::normStatsFor(Operation *norm, bool rms, int64_t rows) {
  Value x = norm->getOperand(0);
  Value scale = rms ? llvm::cast<tc::RmsNormOp>(norm).getScale()
                    : llvm::cast<tc::LayerNormOp>(norm).getScale();
  for (Operation *u : x.getUsers()) {
    bool match = rms ? isa<tc::RmsNormGradOp>(u) : isa<tc::LayerNormGradOp>(u);
    if (!match || u->getOperand(0) != x || normStats.count(u) ||
        u->getAttr("axis") != norm->getAttr("axis") ||
        u->getAttr("epsilon") != norm->getAttr("epsilon"))
      continue;
    Value uScale = u->getNumOperands() > 2 ? u->getOperand(2) : Value();
    if (uScale != scale)
      continue;
    auto stats = [&]() {
      return tcx::AllocOp::create(b, norm->getLoc(),
                                  tcx::BufferType::get({rows}, b.getF32Type()),
                                  b.getStringAttr("activation"))
          .getResult();
    };
    Value mean = rms ? Value() : stats();
    Value rstd = stats();
    normStats[u] = {mean, rstd};
    return {mean, rstd};
  }
  return {};
}

/// Fused attention as the attention_fwd / attention_bwd library calls: q
/// [B, H, Tq, D], k / v [B, Hkv, Tk, D / Dv], f32 lse, and [batch, head, row]
/// element strides per operand ("q_strides", ...). An operand that is the
/// [0, 2, 1, 3] transpose of a [B, T, H, D] tensor (the head split of a
/// projection) is read in place, and out of a fused [B, T, N] qkv
/// projection's split when it is a piece of one; a result whose reader is
/// the transpose back is written in place, and dq / dk / dv into the concat
/// that forms the qkv gradient: no copies around attention.
FailureOr<bool> FunctionLowering::lowerAttention(Operation *op) {
  using Strides = SmallVector<int64_t>;
  // The GPU kernels have no key mask yet (tc-recognize-attention does not
  // fuse padding masks for GPU targets).
  bool keyMask = isa<tc::AttentionOp>(op) ? bool(cast<tc::AttentionOp>(op).getKeyMask())
                                          : bool(cast<tc::AttentionGradOp>(op).getKeyMask());
  if (keyMask)
    return op->emitOpError() << "with a key_mask has no GPU kernel yet (compile for the CPU "
                                "reference, or without fused attention)";
  auto isHeadTranspose = [](Operation *t) {
    auto tr = llvm::dyn_cast_or_null<tc::TransposeOp>(t);
    return tr && tr.getPermutation() == ArrayRef<int64_t>{0, 2, 1, 3};
  };
  auto dense = [](RankedTensorType t) {
    return Strides{t.getDimSize(1) * t.getDimSize(2) * t.getDimSize(3),
                   t.getDimSize(2) * t.getDimSize(3), t.getDimSize(3)};
  };
  auto headMajor = [](RankedTensorType t) { // [B, H, T, D] read from [B, T, H, D]
    return Strides{t.getDimSize(1) * t.getDimSize(2) * t.getDimSize(3), t.getDimSize(3),
                   t.getDimSize(1) * t.getDimSize(3)};
  };
  // A [B, T, H, D] piece starting at element `start` of the rows of the
  // [B, T, N] buffer `whole`: a view at that byte offset, rows of N.
  auto piece = [&](Value whole, RankedTensorType wholeType, int64_t start,
                   RankedTensorType pieceType, int64_t d) -> std::pair<Value, Strides> {
    int64_t n = wholeType.getDimSize(2);
    int64_t bytes = (wholeType.getElementType().getIntOrFloatBitWidth() + 7) / 8;
    Value v = tcx::ViewOp::create(b, op->getLoc(), tcx::BufferType::fromTensorType(pieceType),
                                  whole, b.getI64IntegerAttr(start * bytes));
    return {v, Strides{wholeType.getDimSize(1) * n, d, n}};
  };
  auto offsetInLastAxis = [](ValueRange pieces, Value p) {
    int64_t start = 0;
    for (Value in : pieces) {
      if (in == p)
        break;
      start += tensorType(in).getDimSize(2);
    }
    return start;
  };
  SmallVector<NamedAttribute> attrs;
  auto strides = [&](StringRef name, const Strides &st) {
    attrs.push_back(b.getNamedAttr(name, b.getDenseI64ArrayAttr(st)));
  };
  auto operand = [&](Value v, StringRef name) -> Value {
    auto t = tensorType(v);
    if (Operation *def = v.getDefiningOp(); isHeadTranspose(def)) {
      Value x = def->getOperand(0);
      // x = reshape(split(qkv)[i]) along the last axis of a [B, T, N] projection.
      if (auto r = x.getDefiningOp<tc::ReshapeOp>())
        if (auto sp = r.getInput().getDefiningOp<tc::SplitOp>()) {
          auto it = tensorType(sp.getInput());
          if (it.getRank() == 3 && sp.getAxis() == 2 && it.getDimSize(0) == t.getDimSize(0) &&
              it.getDimSize(1) == t.getDimSize(2)) {
            auto [view, st] = piece(bufferOf(sp.getInput()), it,
                                    offsetInLastAxis(sp.getResults(), r.getInput()),
                                    tensorType(x), t.getDimSize(3));
            strides(name, st);
            return view;
          }
        }
      strides(name, headMajor(t));
      return bufferOf(x);
    }
    if (auto it = stridedAttention.find(v); it != stridedAttention.end()) {
      strides(name, it->second.second);
      return it->second.first;
    }
    strides(name, dense(t));
    return bufferOf(v);
  };
  // The buffer a result goes to, its strides and whether that is in place:
  // its transpose's when that is its only reader besides `alsoReads` (the
  // backward reading the forward's output).
  struct Out {
    Value buffer;
    Strides strides;
    bool inPlace;
  };
  auto result = [&](Value r, StringRef name, function_ref<bool(Operation *)> alsoReads) {
    auto t = tensorType(r);
    Operation *tr = nullptr;
    bool ok = true;
    for (Operation *u : r.getUsers()) {
      if (isHeadTranspose(u) && !tr)
        tr = u;
      else if (!alsoReads(u))
        ok = false;
    }
    Out out{Value(), dense(t), ok && tr};
    if (out.inPlace) {
      done.insert(tr);
      out = {outBuffer(tr->getResult(0)), headMajor(t), true};
    } else {
      out.buffer = outBuffer(r);
    }
    strides(name, out.strides);
    return out;
  };

  // q, k, v, lse, scale and causal are the same operands/attributes on both ops.
  Value qkv[3] = {op->getOperand(0), op->getOperand(1), op->getOperand(2)};
  Value lse = isa<tc::AttentionOp>(op) ? op->getResult(1) : op->getOperand(4);
  auto qt = tensorType(qkv[0]), kt = tensorType(qkv[1]), vt = tensorType(qkv[2]);
  if (!isLibraryFloat(qt.getElementType()) || !tensorType(lse).getElementType().isF32())
    return false;
  auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  attrs = {b.getNamedAttr("batch", i64(qt.getDimSize(0))),
           b.getNamedAttr("heads", i64(qt.getDimSize(1))),
           b.getNamedAttr("kv_heads", i64(kt.getDimSize(1))),
           b.getNamedAttr("tq", i64(qt.getDimSize(2))),
           b.getNamedAttr("tk", i64(kt.getDimSize(2))),
           b.getNamedAttr("d", i64(qt.getDimSize(3))),
           b.getNamedAttr("dv", i64(vt.getDimSize(3))),
           b.getNamedAttr("scale", op->getAttr("scale")),
           b.getNamedAttr("causal", op->getAttr("causal"))};
  Value q = operand(qkv[0], "q_strides"), k = operand(qkv[1], "k_strides"),
        v = operand(qkv[2], "v_strides");

  if (auto at = llvm::dyn_cast<tc::AttentionOp>(op)) {
    Value res = at.getResult();
    Out o = result(res, "o_strides", [&](Operation *u) {
      auto g = llvm::dyn_cast<tc::AttentionGradOp>(u);
      return g && g.getResult() == res && g.getQuery() != res && g.getKey() != res &&
             g.getValue() != res && g.getGrad() != res;
    });
    if (o.inPlace)
      stridedAttention[res] = {o.buffer, o.strides};
    library(op, "attention_fwd", {q, k, v}, {o.buffer, outBuffer(lse)}, attrs);
    return true;
  }

  auto ag = llvm::cast<tc::AttentionGradOp>(op);
  Value o = operand(ag.getResult(), "o_strides");
  Value dout = operand(ag.getGrad(), "do_strides");
  Value grads[3] = {ag.getDquery(), ag.getDkey(), ag.getDvalue()};
  StringRef names[3] = {"dq_strides", "dk_strides", "dv_strides"};
  Value outs[3];
  // dq, dk, dv -> head transposes -> reshapes -> one concat along the last
  // axis of a [B, T, N] tensor (the gradient of a fused qkv projection).
  tc::ConcatOp cat;
  SmallVector<Operation *> chain; // transpose, reshape per gradient
  bool fused = true;
  for (Value g : grads) {
    Operation *tr = g.hasOneUse() ? *g.getUsers().begin() : nullptr;
    if (!isHeadTranspose(tr) || !tr->getResult(0).hasOneUse()) {
      fused = false;
      break;
    }
    auto rs = llvm::dyn_cast<tc::ReshapeOp>(*tr->getResult(0).getUsers().begin());
    auto c = rs && rs.getResult().hasOneUse()
                 ? llvm::dyn_cast<tc::ConcatOp>(*rs.getResult().getUsers().begin())
                 : tc::ConcatOp();
    if (!c || (cat && c != cat)) {
      fused = false;
      break;
    }
    cat = c;
    chain.append({tr, rs});
  }
  auto ct = cat ? tensorType(cat.getResult()) : RankedTensorType();
  fused = fused && ct.getRank() == 3 && cat.getAxis() == 2 && cat.getInputs().size() == 3 &&
          ct.getDimSize(0) == qt.getDimSize(0) && ct.getDimSize(1) == qt.getDimSize(2);
  if (fused) {
    Value catBuf = outBuffer(cat.getResult());
    for (int j = 0; j < 3; ++j) {
      auto [view, st] =
          piece(catBuf, ct, offsetInLastAxis(cat.getInputs(), chain[2 * j + 1]->getResult(0)),
                tensorType(chain[2 * j]->getResult(0)), tensorType(grads[j]).getDimSize(3));
      outs[j] = view;
      strides(names[j], st);
    }
    done.insert(chain.begin(), chain.end());
    done.insert(cat);
  } else {
    for (int j = 0; j < 3; ++j)
      outs[j] = result(grads[j], names[j], [](Operation *) { return false; }).buffer;
  }
  library(op, "attention_bwd", {q, k, v, o, bufferOf(lse), dout}, {outs[0], outs[1], outs[2]},
          attrs);
  return true;
}

/// Row / parameter storage the norm kernels take: f32/f32, bf16/bf16 or bf16
/// rows with f32 parameters (`param`: the scale or bias, may be null).
bool normTypes(Type rows, Value param) {
  if (!isLibraryFloat(rows))
    return false;
  if (!param)
    return true;
  Type p = tensorType(param).getElementType();
  return p == rows || (rows.isBF16() && p.isF32());
}

/// The runtime's hand-written kernels. Returns false when `op` does not
/// match a launcher's form (the caller falls back to a generated kernel).
FailureOr<bool> FunctionLowering::lowerLibrary(Operation *op) {
  auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  auto named = [&](StringRef n, Attribute a) { return b.getNamedAttr(n, a); };
  auto rowsCols = [&](RankedTensorType t, int64_t axis) {
    int64_t cols = numElements(t.getShape().drop_front(axis));
    int64_t rows = cols ? t.getNumElements() / cols : 0;
    return std::make_pair(rows, cols);
  };

  if (isa<tc::SoftmaxOp, tc::LogSoftmaxOp>(op)) {
    auto t = tensorType(op->getOperand(0));
    int64_t axis = op->getAttrOfType<IntegerAttr>("axis").getInt();
    if (axis != t.getRank() - 1 || !isLibraryFloat(t.getElementType()))
      return false;
    auto [rows, cols] = rowsCols(t, axis);
    library(op, "softmax_fwd", {bufferOf(op->getOperand(0))}, {outBuffer(op->getResult(0))},
            {named("rows", i64(rows)), named("cols", i64(cols)),
             named("log", b.getBoolAttr(isa<tc::LogSoftmaxOp>(op)))});
    return true;
  }
  if (auto ln = llvm::dyn_cast<tc::LayerNormOp>(op)) {
    auto t = tensorType(ln.getInput());
    Type elt = t.getElementType();
    if (!normTypes(elt, ln.getScale() ? ln.getScale() : ln.getBias()))
      return false;
    auto [rows, cols] = rowsCols(t, ln.getAxis());
    SmallVector<Value> ins{bufferOf(ln.getInput())};
    if (ln.getScale())
      ins.push_back(bufferOf(ln.getScale()));
    if (ln.getBias())
      ins.push_back(bufferOf(ln.getBias()));
    SmallVector<Value> outs{outBuffer(ln.getResult())};
    // The backward of this same normalisation reuses its row statistics.
    auto [mean, rstd] = normStatsFor(op, /*rms=*/false, rows);
    if (rstd) {
      outs.push_back(mean);
      outs.push_back(rstd);
    }
    library(op, "layer_norm_fwd", ins, outs,
            {named("rows", i64(rows)), named("cols", i64(cols)),
             named("eps", b.getF64FloatAttr(ln.getEpsilon().convertToDouble())),
             named("has_weight", b.getBoolAttr(bool(ln.getScale()))),
             named("has_bias", b.getBoolAttr(bool(ln.getBias())))});
    return true;
  }
  if (auto rn = llvm::dyn_cast<tc::RmsNormOp>(op)) {
    auto t = tensorType(rn.getInput());
    Type elt = t.getElementType();
    if (!normTypes(elt, rn.getScale()))
      return false;
    auto [rows, cols] = rowsCols(t, rn.getAxis());
    SmallVector<Value> ins{bufferOf(rn.getInput())};
    if (rn.getScale())
      ins.push_back(bufferOf(rn.getScale()));
    SmallVector<Value> outs{outBuffer(rn.getResult())};
    if (Value rstd = normStatsFor(op, /*rms=*/true, rows).second)
      outs.push_back(rstd);
    library(op, "rms_norm_fwd", ins, outs,
            {named("rows", i64(rows)), named("cols", i64(cols)),
             named("eps", b.getF64FloatAttr(rn.getEpsilon().convertToDouble())),
             named("has_weight", b.getBoolAttr(bool(rn.getScale())))});
    return true;
  }
  // Norm gradients: the library backward from the forward's statistics (or,
  // without a forward kernel to take them from, from a forward run here).
  if (isa<tc::LayerNormGradOp, tc::RmsNormGradOp>(op)) {
    bool rms = isa<tc::RmsNormGradOp>(op);
    Value x = op->getOperand(0), dy = op->getOperand(1);
    Value scale = op->getNumOperands() > 2 ? op->getOperand(2) : Value();
    auto t = tensorType(x);
    Type elt = t.getElementType();
    Type pe = tensorType(op->getResult(1)).getElementType();
    if (!normTypes(elt, scale) || (!scale && pe != elt && pe != b.getF32Type()) ||
        (scale && pe != tensorType(scale).getElementType()))
      return false;
    if (!scale && !op->getResult(1).use_empty())
      return op->emitOpError() << "GPU lowering: the scale gradient of a normalisation without "
                                  "a scale is not supported";
    int64_t axis = op->getAttrOfType<IntegerAttr>("axis").getInt();
    double eps = op->getAttrOfType<FloatAttr>("epsilon").getValueAsDouble();
    auto [rows, cols] = rowsCols(t, axis);
    auto [mean, rstd] = normStats.lookup(op);
    if (!rstd) {
      auto stats = [&]() {
        return tcx::AllocOp::create(b, op->getLoc(), tcx::BufferType::get({rows}, b.getF32Type()),
                                    b.getStringAttr("scratch"))
            .getResult();
      };
      Value y = tcx::AllocOp::create(b, op->getLoc(), tcx::BufferType::fromTensorType(t),
                                     b.getStringAttr("scratch"));
      rstd = stats();
      SmallVector<Value> ins{bufferOf(x)}, outs{y};
      if (scale)
        ins.push_back(bufferOf(scale));
      if (!rms) {
        mean = stats();
        outs.push_back(mean);
      }
      outs.push_back(rstd);
      library(op, rms ? "rms_norm_fwd" : "layer_norm_fwd", ins, outs,
              {named("rows", i64(rows)), named("cols", i64(cols)),
               named("eps", b.getF64FloatAttr(eps)),
               named("has_weight", b.getBoolAttr(bool(scale))),
               named("has_bias", b.getBoolAttr(false))});
    }
    SmallVector<Value> ins{bufferOf(dy), bufferOf(x)};
    if (scale)
      ins.push_back(bufferOf(scale));
    if (!rms)
      ins.push_back(mean);
    ins.push_back(rstd);
    SmallVector<Value> outs{outBuffer(op->getResult(0))};
    if (scale)
      outs.push_back(outBuffer(op->getResult(1)));
    if (!rms)
      outs.push_back(outBuffer(op->getResult(2)));
    library(op, rms ? "rms_norm_bwd" : "layer_norm_bwd", ins, outs,
            {named("rows", i64(rows)), named("cols", i64(cols)),
             named("has_weight", b.getBoolAttr(bool(scale))),
             named("has_bias", b.getBoolAttr(!rms))});
    return true;
  }
  // cross_entropy: [N, C] logits, mean over the rows not ignored, no class
  // weight, f32 loss (the launcher writes fp32).
  auto ceForm = [&](Value input, Value labels, Value weight, StringRef reduction) {
    auto t = tensorType(input);
    return t.getRank() == 2 && isLibraryFloat(t.getElementType()) && !weight &&
           reduction == "mean" && isLibraryIndex(tensorType(labels).getElementType());
  };
  // The grad operand as an attribute (splat constant) or an input.
  auto gradScale = [&](Value grad, SmallVector<Value> &ins,
                       SmallVector<NamedAttribute> &attrs) {
    if (std::optional<double> g = tc::splatFloatValue(grad)) {
      attrs.push_back(named("grad_scale", b.getF32FloatAttr(*g)));
      return;
    }
    ins.push_back(bufferOf(grad));
  };
  if (auto ce = llvm::dyn_cast<tc::CrossEntropyOp>(op)) {
    if (!ceForm(ce.getInput(), ce.getLabels(), ce.getWeight(), ce.getReduction()) ||
        !tensorType(ce.getResult()).getElementType().isF32())
      return false;
    auto t = tensorType(ce.getInput());
    SmallVector<NamedAttribute> attrs{named("rows", i64(t.getDimSize(0))),
                                      named("cols", i64(t.getDimSize(1))),
                                      named("ignore_index", i64(ce.getIgnoreIndex()))};
    // The gradient on the same logits, when its scale is known here: one
    // fused pass (llm.c's fused classifier) writes loss and dlogits.
    tc::CrossEntropyGradOp grad;
    for (Operation *u : ce.getInput().getUsers())
      if (auto g = llvm::dyn_cast<tc::CrossEntropyGradOp>(u))
        if (g.getLabels() == ce.getLabels() && !g.getWeight() &&
            g.getIgnoreIndex() == ce.getIgnoreIndex() && g.getReduction() == "mean" &&
            g.getResult().getType() == ce.getInput().getType() &&
            (isSplatConstant(g.getGrad()) || !g.getGrad().getDefiningOp() ||
             g.getGrad().getDefiningOp()->isBeforeInBlock(op)))
          grad = g;
    // bf16 logits widened for the loss only: the launcher reads bf16 with
    // fp32 math (the same numbers), and writes the gradient in bf16 when its
    // only reader narrows it (the same rounding), so neither f32 copy of
    // [N, C] exists.
    Value logits = ce.getInput();
    Operation *widen = logits.getDefiningOp();
    Operation *narrow = grad && grad.getResult().hasOneUse()
                            ? *grad.getResult().getUsers().begin()
                            : nullptr;
    Type bf16 = b.getBF16Type(), f32 = b.getF32Type();
    bool direct = isLoneCast(widen, bf16, f32) &&
                  llvm::all_of(logits.getUsers(), [&](Operation *u) {
                    return u == op || u == grad.getOperation();
                  }) &&
                  (!grad || isLoneCast(narrow, f32, bf16));
    if (direct)
      logits = widen->getOperand(0);
    SmallVector<Value> ins{bufferOf(logits), bufferOf(ce.getLabels())};
    if (!grad) {
      library(op, "cross_entropy_fwd", ins, {outBuffer(ce.getResult())}, attrs);
      return true;
    }
    gradScale(grad.getGrad(), ins, attrs);
    Value loss = outBuffer(ce.getResult());
    Value dlogits = direct ? outBuffer(narrow->getResult(0)) : outBuffer(grad.getResult());
    done.insert(grad);
    if (direct)
      done.insert(narrow);
    library(op, "cross_entropy_fwd_bwd", ins, {loss, dlogits}, attrs);
    return true;
  }
  if (auto g = llvm::dyn_cast<tc::CrossEntropyGradOp>(op)) {
    if (!ceForm(g.getInput(), g.getLabels(), g.getWeight(), g.getReduction()))
      return false;
    auto t = tensorType(g.getInput());
    SmallVector<NamedAttribute> attrs{named("rows", i64(t.getDimSize(0))),
                                      named("cols", i64(t.getDimSize(1))),
                                      named("ignore_index", i64(g.getIgnoreIndex()))};
    SmallVector<Value> ins{bufferOf(g.getInput()), bufferOf(g.getLabels())};
    gradScale(g.getGrad(), ins, attrs);
    library(op, "cross_entropy_bwd", ins, {outBuffer(g.getResult())}, attrs);
    return true;
  }
  if (isa<tc::AttentionOp, tc::AttentionGradOp>(op))
    return lowerAttention(op);
  if (auto ga = llvm::dyn_cast<tc::GatherOp>(op)) {
    auto t = tensorType(ga.getData());
    if (ga.getAxis() != 0 || t.getRank() != 2 || !isLibraryFloat(t.getElementType()) ||
        !isLibraryIndex(tensorType(ga.getIndices()).getElementType()))
      return false;
    library(op, "embedding_fwd", {bufferOf(ga.getData()), bufferOf(ga.getIndices())},
            {outBuffer(ga.getResult())},
            {named("count", i64(tensorType(ga.getIndices()).getNumElements())),
             named("vocab", i64(t.getDimSize(0))), named("dim", i64(t.getDimSize(1)))});
    return true;
  }
  if (auto sa = llvm::dyn_cast<tc::ScatterAddOp>(op)) {
    auto t = tensorType(sa.getResult());
    if (sa.getAxis() != 0 || t.getRank() != 2 || !isLibraryFloat(t.getElementType()) ||
        !isLibraryIndex(tensorType(sa.getIndices()).getElementType()))
      return false;
    library(op, "embedding_bwd", {bufferOf(sa.getUpdates()), bufferOf(sa.getIndices())},
            {outBuffer(sa.getResult())},
            {named("count", i64(tensorType(sa.getIndices()).getNumElements())),
             named("vocab", i64(t.getDimSize(0))), named("dim", i64(t.getDimSize(1))),
             named("accumulate", b.getBoolAttr(false))});
    return true;
  }
  return false;
}

LogicalResult FunctionLowering::lower(Operation *op) {
  if (done.contains(op))
    return success();
  for (Type t : op->getResultTypes())
    if (auto rt = llvm::dyn_cast<RankedTensorType>(t); !rt || !rt.hasStaticShape())
      return op->emitOpError() << "result of type " << t
                               << " cannot be lowered to tcx (static ranked tensors only)";
  if (auto p = llvm::dyn_cast<tc::ParameterOp>(op)) {
    StringRef kind = p->hasAttr("tc.optimizer_state")                       ? "optimizer_state"
                     : llvm::isa<FloatType>(p.getType().getElementType())   ? "parameter"
                                                                            : "buffer";
    buffers[p.getResult()] = paramBuffer(p.getName(), p.getType(), kind, p.getTrainable());
    return success();
  }
  if (isa<tc::ConstantOp>(op))
    return success(); // materialised on demand (bufferOf)
  if (auto r = llvm::dyn_cast<tc::ReshapeOp>(op))
    return lowerView(r.getResult(), r.getInput(), 0);
  if (auto s = llvm::dyn_cast<tc::SliceOp>(op)) {
    if (auto off = contiguousSliceOffset(tensorType(s.getInput()), tensorType(s.getResult()),
                                         s.getStarts(), s.getStrides()))
      return lowerView(s.getResult(), s.getInput(), *off);
    return lowerKernel(op, "slice");
  }
  if (auto s = llvm::dyn_cast<tc::SplitOp>(op)) {
    auto in = tensorType(s.getInput());
    int64_t axis = s.getAxis();
    bool contiguous = llvm::all_of(in.getShape().take_front(axis), [](int64_t d) { return d == 1; });
    unsigned bits = in.getElementType().isIntOrFloat() ? in.getElementType().getIntOrFloatBitWidth() : 0;
    if (contiguous && bits >= 8 && bits % 8 == 0) {
      int64_t inner = numElements(in.getShape().drop_front(axis + 1)), at = 0;
      for (Value r : s.getResults()) {
        if (failed(lowerView(r, s.getInput(), at * inner * (bits / 8))))
          return failure();
        at += tensorType(r).getDimSize(axis);
      }
      return success();
    }
    return lowerKernel(op, "split");
  }
  if (auto mm = llvm::dyn_cast<tc::MatmulOp>(op))
    return lowerMatmul(mm);
  if (llvm::isa<tc::FusionOp>(op))
    return lowerFusion(op);
  if (tc::isElementwise(op))
    return lowerKernel(op, "elementwise");
  FailureOr<bool> lib = lowerLibrary(op);
  if (failed(lib))
    return failure();
  if (*lib)
    return success();
  if (op->getDialect() && op->getDialect()->getNamespace() == "tc" && op->getNumRegions() == 0 &&
      op->getNumResults() > 0)
    return lowerKernel(op, op->getName().stripDialect());
  return op->emitOpError() << "cannot be lowered to tcx";
}

/// Removes work whose outputs nobody reads (e.g. a transpose folded into
/// every matmul that used it) and the allocs it wrote.
void FunctionLowering::eliminateDeadWork() {
  Block &body = fn.getBody().front();
  bool changed = true;
  auto isWriteOnlyUse = [](OpOperand &use) {
    Operation *u = use.getOwner();
    if (auto l = llvm::dyn_cast<tcx::LaunchOp>(u))
      return use.getOperandNumber() >= l.getInputs().size();
    if (auto l = llvm::dyn_cast<tcx::LibraryOp>(u))
      return use.getOperandNumber() >= l.getInputs().size();
    if (auto m = llvm::dyn_cast<tcx::MatmulOp>(u))
      return use.get() == m.getOut();
    if (auto c = llvm::dyn_cast<tcx::CopyOp>(u))
      return use.get() == c.getTarget();
    return isa<tcx::FillOp>(u);
  };
  while (changed) {
    changed = false;
    // Views nobody reads (e.g. of a split whose pieces are now read in
    // place) do not keep their buffer's writer alive.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isa<tcx::ViewOp>(op) && op.use_empty())
        op.erase();
    // Snapshot the work ops (allocs erased below are never in it).
    SmallVector<Operation *> work;
    for (Operation &op : llvm::reverse(body))
      if (isa<tcx::LaunchOp, tcx::LibraryOp, tcx::MatmulOp>(op))
        work.push_back(&op);
    for (Operation *workOp : work) {
      Operation &op = *workOp;
      // Dead when every buffer it writes is an alloc only written.
      bool dead = true;
      for (OpOperand &operand : op.getOpOperands()) {
        if (!isWriteOnlyUse(operand))
          continue;
        auto alloc = operand.get().getDefiningOp<tcx::AllocOp>();
        if (!alloc || !llvm::all_of(alloc->getUses(), isWriteOnlyUse)) {
          dead = false;
          break;
        }
      }
      if (!dead)
        continue;
      SmallVector<Operation *> allocs;
      for (OpOperand &operand : op.getOpOperands())
        if (isWriteOnlyUse(operand))
          allocs.push_back(operand.get().getDefiningOp());
      op.erase();
      for (Operation *a : allocs)
        if (a->use_empty())
          a->erase();
      changed = true;
    }
  }
  for (Operation &op : llvm::make_early_inc_range(body))
    if (isa<tcx::ViewOp, tcx::ConstOp, tcx::ParamOp>(op) && op.use_empty())
      op.erase();
}

LogicalResult FunctionLowering::run() {
  if (!llvm::hasSingleElement(fn.getBody()))
    return fn.emitOpError() << "@" << fn.getName()
                            << " has more than one block; tc-lower-to-tcx needs straight-line code";
  Block &body = fn.getBody().front();
  auto ret = llvm::dyn_cast<func::ReturnOp>(body.getTerminator());
  if (!ret)
    return fn.emitOpError() << "@" << fn.getName() << " must end in func.return";
  for (Operation &op : body.without_terminator())
    if (op.getDialect() == nullptr || op.getDialect()->getNamespace() != "tc")
      return op.emitOpError() << "is not a tc op; tc-lower-to-tcx lowers tc ops only";
  for (BlockArgument a : body.getArguments())
    if (auto t = llvm::dyn_cast<RankedTensorType>(a.getType()); !t || !t.hasStaticShape())
      return fn.emitOpError() << "@" << fn.getName() << " argument #" << a.getArgNumber()
                              << " of type " << a.getType()
                              << " is not a static ranked tensor";

  // Which values depend on a loss gradient (the backward pass).
  for (Operation &op : body.without_terminator()) {
    bool bwd = isa<tc::CrossEntropyGradOp, tc::NllLossGradOp>(op) ||
               llvm::any_of(op.getOperands(), [&](Value v) { return backward.contains(v); });
    if (bwd)
      for (Value r : op.getResults())
        backward.insert(r);
  }
  // Returned values, and what they are reshapes/slices of (same storage).
  for (Value v : ret.getOperands()) {
    while (returned.insert(v).second) {
      Operation *def = v.getDefiningOp();
      if (!isa_and_nonnull<tc::ReshapeOp, tc::SliceOp, tc::SplitOp>(def))
        break;
      v = def->getOperand(0);
    }
  }

  // Arguments become buffers in place.
  b.setInsertionPointToStart(&body);
  auto anchor = tcx::RecordOp::create(b, fn.getLoc(), tcx::EventType::get(fn.getContext()),
                                      b.getI64IntegerAttr(0));
  entryPoint = anchor; // hoisted ops go above this placeholder
  planDestinations();

  SmallVector<Operation *> original;
  for (Operation &op : body.without_terminator())
    if (&op != anchor && !llvm::isa_and_nonnull<tcx::TcxDialect>(op.getDialect()))
      original.push_back(&op);
  // An argument is its own buffer; it keeps its tensor type until every
  // tc op is gone (kernel bodies are built from the tensor types).
  for (BlockArgument a : body.getArguments())
    buffers[a] = a;
  for (Operation *op : original) {
    b.setInsertionPoint(op);
    if (failed(lower(op)))
      return failure();
  }

  // Results: buffers; named results that could not be written in place
  // get a copy after every other op.
  b.setInsertionPoint(ret);
  SmallVector<Value> results;
  for (Value v : ret.getOperands()) {
    Value buf = bufferOf(v);
    if (!buf)
      return ret.emitOpError() << "returned value has no buffer (internal error)";
    results.push_back(buf);
  }
  for (auto [index, target] : inPlace)
    results[index] = target;
  for (auto [index, tensor, target] : finalCopies) {
    tcx::CopyOp::create(b, ret.getLoc(), bufferOf(tensor), target);
    results[index] = target;
  }
  ret->setOperands(results);

  // Erase the tc ops (users first).
  for (Operation *op : llvm::reverse(original)) {
    op->dropAllUses();
    op->erase();
  }
  anchor->erase();
  for (BlockArgument a : body.getArguments())
    a.setType(tcx::BufferType::fromTensorType(llvm::cast<RankedTensorType>(a.getType())));
  SmallVector<Type> argTypes(body.getArgumentTypes());
  SmallVector<Type> resultTypes(ret.getOperandTypes());
  fn.setFunctionType(FunctionType::get(fn.getContext(), argTypes, resultTypes));
  eliminateDeadWork();
  return success();
}

struct TcLowerToTcx : tc::impl::TcLowerToTcxBase<TcLowerToTcx> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> fns(module.getOps<func::FuncOp>());
    for (func::FuncOp fn : fns) {
      if (fn.isExternal())
        continue;
      // Already lowered (a second run) or nothing to do.
      if (llvm::any_of(fn.getArgumentTypes(), [](Type t) { return isa<tcx::BufferType>(t); }) ||
          llvm::any_of(fn.getResultTypes(), [](Type t) { return isa<tcx::BufferType>(t); }))
        continue;
      FunctionLowering lowering(fn, symbols, tf32, fuseEpilogues);
      if (failed(lowering.run()))
        return signalPassFailure();
    }
    // Kernels no launch uses any more (dead work).
    DenseSet<StringRef> used;
    module.walk([&](tcx::LaunchOp l) { used.insert(l.getKernel()); });
    for (auto k : llvm::make_early_inc_range(module.getOps<tcx::KernelOp>()))
      if (!used.contains(k.getSymName()))
        k.erase();
  }
};

} // namespace
