//===- Fuse.cpp - tc-fuse -----------------------------------------------===//
//
// Greedy producer-consumer fusion of elementwise chains into tc.fusion ops,
// one per generated CUDA kernel (compiler/codegen/cuda). Runs in the GPU
// pipeline only; the reference program never sees tc.fusion.
//
// Groups are rooted at the last op of a chain (walking backwards) and pull
// producers in while that neither duplicates work nor creates a cycle:
// a producer may join when its result has the group's iteration shape and
// every user outside the group comes after the root (the fusion op takes the
// root's place, so those users still see its results). A matmul's bias add
// and GELU-tanh are left out when tc-lower-to-tcx will make them cuBLASLt
// epilogues (isMatmulEpilogue).
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace tc {
#define GEN_PASS_DEF_TCFUSE
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;

namespace {

/// Element types the CUDA codegen computes with: f8E4M3FN and f8E5M2 too
/// (delayed scaling's saturating casts, its transposed copies; see
/// writesFp8Exactly); the other narrow formats stay unfused.
bool codegenType(Type t) {
  auto rt = llvm::dyn_cast<RankedTensorType>(t);
  if (!rt || !rt.hasStaticShape())
    return false;
  Type e = rt.getElementType();
  return e.isF32() || e.isF16() || e.isBF16() || e.isF64() || llvm::isa<IntegerType>(e) ||
         llvm::isa<Float8E4M3FNType, Float8E5M2Type>(e);
}

/// Whether every FP8 result of `op` is a saturating tc.cast, the one FP8
/// rounding the generated kernels share with the CPU reference (other ops
/// with FP8 results stay unfused).
bool writesFp8Exactly(Operation *op) {
  auto fp8 = [](Type t) {
    return llvm::isa<Float8E4M3FNType, Float8E5M2Type>(
        llvm::cast<RankedTensorType>(t).getElementType());
  };
  auto cast = llvm::dyn_cast<tc::CastOp>(op);
  return (cast && cast.getSaturate()) || llvm::none_of(op->getResultTypes(), fp8);
}

bool allCodegenTypes(Operation *op) {
  return llvm::all_of(op->getOperandTypes(), codegenType) &&
         llvm::all_of(op->getResultTypes(), codegenType);
}

/// The product of a matmul tc-lower-to-tcx turns into one cuBLASLt call
/// (f32/bf16/f16, batch dims it can stride or fold): its epilogues are taken
/// from there, not fused here.
bool cublasGemm(Value v) {
  auto mm = v.getDefiningOp<tc::MatmulOp>();
  if (!mm)
    return false;
  auto out = llvm::cast<RankedTensorType>(mm.getResult().getType());
  Type e = out.getElementType();
  if (!e.isF32() && !e.isBF16() && !e.isF16())
    return false;
  auto batch = [](Value x) {
    ArrayRef<int64_t> s = llvm::cast<RankedTensorType>(x.getType()).getShape();
    int64_t n = 1;
    for (int64_t d : s.drop_back(2))
      n *= d;
    return n;
  };
  int64_t lb = batch(mm.getLhs()), rb = batch(mm.getRhs()), ob = batch(mm.getResult());
  return rb == 1 || lb == 1 || (lb == ob && rb == ob);
}
bool cublasMatmul(Value v) { return v.hasOneUse() && cublasGemm(v); }
/// A cuBLASLt GEMM without a device alpha (FP4 QAT's scales): the GELU_AUX
/// and DGELU epilogues' GEMMs (tc-fuse marks nothing else for them, so
/// tc-fuse-matmul-epilogue and the lowering see only these).
bool geluEpilogueGemm(Value v) {
  auto mm = v.getDefiningOp<tc::MatmulOp>();
  return mm && !mm.getAlpha() && cublasGemm(v);
}

/// The bf16 product of an FP8 GEMM (tc.scaled_matmul with a cuBLASLt form)
/// whose only use is an add: cuBLASLt adds a bias, nothing more, in FP8.
bool fp8MatmulWithBias(Value v) {
  auto mm = v.getDefiningOp<tc::ScaledMatmulOp>();
  return mm && v.hasOneUse() && tc::fp8BiasEpilogueForm(mm);
}

/// Whether `add` adds a bias [N] to the product of a matmul that becomes
/// one cuBLASLt call (with `fp8`: or of an FP8 GEMM).
bool isBiasAdd(tc::AddOp add, bool fp8) {
  if (add.getLhs() == add.getRhs())
    return false;
  for (auto [prod, bias] : {std::pair(add.getLhs(), add.getRhs()), std::pair(add.getRhs(), add.getLhs())}) {
    if (!cublasMatmul(prod) && !(fp8 && fp8MatmulWithBias(prod)))
      continue;
    auto pt = llvm::cast<RankedTensorType>(prod.getType());
    auto bt = llvm::cast<RankedTensorType>(bias.getType());
    if (bt.getRank() == 1 && bt.getDimSize(0) == pt.getShape().back() &&
        bt.getElementType() == pt.getElementType() && add.getResult().getType() == pt)
      return true;
  }
  return false;
}

/// Whether `add` is the residual add after a cuBLASLt GEMM (its product or
/// product plus bias, maybe through one reshape: tc::residualAdd), which the
/// GEMM adds as its C input (without a GELU epilogue between).
bool isResidualAdd(tc::AddOp add) {
  for (Value x : {add.getLhs(), add.getRhs()}) {
    Value y = x;
    if (auto r = x.getDefiningOp<tc::ReshapeOp>(); r && x.hasOneUse())
      y = r.getInput();
    Value prod = y;
    if (auto b = y.getDefiningOp<tc::AddOp>(); b && y.hasOneUse() && isBiasAdd(b, false))
      prod = cublasMatmul(b.getLhs()) ? b.getLhs() : b.getRhs();
    auto mm = prod.getDefiningOp<tc::MatmulOp>();
    if (mm && cublasMatmul(prod) && tc::residualAdd(mm, y).add == add)
      return true;
  }
  return false;
}

/// Bias add (+ bias[N] on a matmul's only use), GELU-tanh after it (or
/// directly after the matmul) when that is the only use, and the residual
/// add after either but GELU: cuBLASLt epilogues, so left out of fusions
/// (tc-lower-to-tcx's lowerMatmul folds them, under the same conditions;
/// tc-fuse-matmul-epilogue marks them). FP8 GEMMs take the bias only. Also
/// the residual gradient a norm backward adds as it writes dx (its library
/// call's "dresidual").
bool isMatmulEpilogue(Operation *op) {
  if (op->hasAttr(tc::kGeluAuxAttr) || op->hasAttr(tc::kDGeluAttr))
    return true;
  if (auto add = llvm::dyn_cast<tc::AddOp>(op)) {
    for (Value x : {add.getLhs(), add.getRhs()})
      if (Operation *g = x.getDefiningOp(); g && tc::normGradResidualAdd(g).add == add)
        return true;
    return isBiasAdd(add, /*fp8=*/true) || isResidualAdd(add);
  }
  if (auto gelu = llvm::dyn_cast<tc::GeluOp>(op)) {
    if (gelu.getApproximate() != "tanh")
      return false;
    Value in = gelu.getInput();
    if (cublasMatmul(in))
      return true;
    auto add = in.getDefiningOp<tc::AddOp>();
    return add && in.hasOneUse() && isBiasAdd(add, /*fp8=*/false);
  }
  return false;
}

/// Whether tanh `gelu` reads (maybe through one reshape) the product of a
/// cuBLASLt GEMM or its bias add while other ops read that too: the
/// GELU_AUX(_BIAS) epilogue's case (tc-fuse's gelu-aux marks it
/// tc.gelu_aux).
bool geluAuxForm(tc::GeluOp gelu, bool erf) {
  if (gelu.getApproximate() != "tanh" && !(erf && gelu.getApproximate() == "none"))
    return false;
  Value in = gelu.getInput(), y = in;
  if (auto r = y.getDefiningOp<tc::ReshapeOp>(); r && r.getInput().hasOneUse())
    y = r.getInput();
  // Read by more than the GELU (else the plain GELU epilogue has it).
  if (in.hasOneUse() && (y == in || y.hasOneUse()))
    return false;
  if (auto add = y.getDefiningOp<tc::AddOp>(); add && isBiasAdd(add, /*fp8=*/false))
    return geluEpilogueGemm(add.getLhs()) || geluEpilogueGemm(add.getRhs());
  return geluEpilogueGemm(y);
}

bool isRoot(Operation *op) {
  return (tc::isElementwise(op) || tc::isTrailingReduction(op) ||
          tc::isLastAxisSoftmax(op)) &&
         allCodegenTypes(op) && writesFp8Exactly(op) && !isMatmulEpilogue(op);
}

/// Ops cloned into every body that uses them: free in a kernel.
bool isCloned(Operation *op) {
  if (auto c = llvm::dyn_cast<tc::ConstantOp>(op)) {
    auto d = llvm::dyn_cast<DenseElementsAttr>(c.getValue());
    return d && d.isSplat() && codegenType(c.getType());
  }
  return llvm::isa<tc::BroadcastOp>(op) && allCodegenTypes(op);
}

ArrayRef<int64_t> shapeOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getShape();
}

struct Group {
  Operation *root;
  llvm::SmallPtrSet<Operation *, 16> members; // moved into the body
  llvm::SmallPtrSet<Operation *, 8> cloned;   // copied into the body
};

struct FusePass : tc::impl::TcFuseBase<FusePass> {
  using TcFuseBase::TcFuseBase;
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (!fn.getBody().hasOneBlock())
      return;
    Block &block = fn.getBody().front();
    if (geluAux) {
      for (auto gelu : block.getOps<tc::GeluOp>())
        if (geluAuxForm(gelu, geluErf))
          gelu->setAttr(tc::kGeluAuxAttr, UnitAttr::get(&getContext()));
      // The backward's g * gelu'(x) after the GEMM that makes g: its DGELU
      // epilogue (the mul and gelu'(x)'s ops stay out of fusions).
      for (auto mul : block.getOps<tc::MulOp>()) {
        auto form = mul->getAttrOfType<StringAttr>(tc::kGeluGradAttr);
        if (!form || !(form.getValue() == "tanh" || (geluErf && form.getValue() == "none")))
          continue;
        for (Value g : {mul.getLhs(), mul.getRhs()}) {
          SmallVector<Operation *> ops;
          Value x, product = g;
          if (auto rs = g.getDefiningOp<tc::ReshapeOp>(); rs && g.hasOneUse())
            product = rs.getInput();
          if (!product.hasOneUse() || !geluEpilogueGemm(product) ||
              !tc::geluGradOperand(mul, g, &ops, &x))
            continue;
          mul->setAttr(tc::kDGeluAttr, UnitAttr::get(&getContext()));
          for (Operation *o : ops)
            o->setAttr(tc::kDGeluAttr, UnitAttr::get(&getContext()));
          break;
        }
      }
    }
    llvm::DenseMap<Operation *, unsigned> position;
    unsigned pos = 0;
    for (Operation &op : block)
      position[&op] = pos++;

    llvm::DenseSet<Operation *> grouped;
    SmallVector<Group> groups;
    SmallVector<Operation *> ops;
    for (Operation &op : block)
      ops.push_back(&op);
    for (Operation *root : llvm::reverse(ops)) {
      if (grouped.contains(root) || !isRoot(root))
        continue;
      Group g;
      g.root = root;
      g.members.insert(root);
      bool reduces = tc::isTrailingReduction(root) || tc::isLastAxisSoftmax(root);
      SmallVector<int64_t> iter(reduces ? shapeOf(root->getOperand(0))
                                        : shapeOf(root->getResult(0)));
      unsigned rootPos = position[root];
      SmallVector<Operation *> worklist{root};
      while (!worklist.empty()) {
        Operation *user = worklist.pop_back_val();
        for (Value v : user->getOperands()) {
          Operation *def = v.getDefiningOp();
          if (!def || def->getBlock() != &block || g.members.contains(def) ||
              g.cloned.contains(def))
            continue;
          if (isCloned(def)) {
            g.cloned.insert(def);
            worklist.push_back(def);
            continue;
          }
          if (grouped.contains(def) || !tc::isElementwise(def) ||
              !allCodegenTypes(def) || isMatmulEpilogue(def) ||
              shapeOf(def->getResult(0)) != ArrayRef(iter))
            continue;
          // Users outside the group must come after the root; users inside
          // are either members already or will be (the chain is walked from
          // the root, so a user before the root and outside the group means
          // the value is needed before the fusion runs).
          bool ok = llvm::all_of(def->getUsers(), [&](Operation *u) {
            if (g.members.contains(u))
              return true;
            // A cloned op (broadcast) reading the value is inside the body;
            // it must not also stay outside, or its copy there would read
            // the fusion's result before the fusion runs.
            if (g.cloned.contains(u))
              return llvm::all_of(u->getUsers(), [&](Operation *w) {
                return g.members.contains(w);
              });
            return u->getBlock() == &block && position[u] > rootPos;
          });
          if (!ok)
            continue;
          g.members.insert(def);
          worklist.push_back(def);
        }
      }
      rematerialize(g, block, iter, position);
      // A cloned broadcast whose operand is not available is impossible: its
      // operand is defined before it, hence before the root.
      for (Operation *m : g.members)
        grouped.insert(m);
      groups.push_back(std::move(g));
    }
    for (Group &g : groups)
      buildFusion(g, block);
    mergeSiblings(block);
  }

  /// Sibling fusion: a fusion B that reads a value a fusion A shortly
  /// before it reads too, at the same iteration shape, all of B's inputs
  /// available before A and neither a reduction, becomes part of A's kernel
  /// (A's results, then B's). The shared inputs are read once: SwiGLU's
  /// backward, whose up- and gate-gradients both read dp and the gate, on
  /// either side of a matmul. B's results are then stored before the (at
  /// most kSiblingWindow, views not counted) ops between them run, and live
  /// that much longer.
  static constexpr int kSiblingWindow = 4;
  static bool elementwiseFusion(tc::FusionOp f, ArrayRef<int64_t> &shape) {
    for (Operation &op : f.getBody().front().without_terminator())
      if (tc::isTrailingReduction(&op) || tc::isLastAxisSoftmax(&op))
        return false;
    for (Value r : f.getResults()) {
      if (shape.empty())
        shape = shapeOf(r);
      else if (shapeOf(r) != shape)
        return false;
    }
    return !shape.empty();
  }

  void mergeSiblings(Block &block) {
    SmallVector<tc::FusionOp> fusions;
    for (Operation &op : block)
      if (auto f = llvm::dyn_cast<tc::FusionOp>(op))
        fusions.push_back(f);
    llvm::DenseSet<Operation *> erased;
    for (tc::FusionOp b : fusions) {
      if (erased.contains(b))
        continue;
      ArrayRef<int64_t> bShape;
      if (!elementwiseFusion(b, bShape))
        continue;
      // Walk back over at most kSiblingWindow ops that are not views.
      int seen = 0;
      for (Operation *op = b->getPrevNode(); op && seen <= kSiblingWindow;
           op = op->getPrevNode()) {
        auto a = llvm::dyn_cast<tc::FusionOp>(op);
        if (!a) {
          if (!llvm::isa<tc::ReshapeOp>(op))
            ++seen;
          continue;
        }
        ++seen;
        ArrayRef<int64_t> aShape;
        if (!elementwiseFusion(a, aShape) || aShape != bShape)
          continue;
        bool shares = llvm::any_of(b.getInputs(), [&](Value v) {
          return llvm::is_contained(a.getInputs(), v);
        });
        bool available = llvm::all_of(b.getInputs(), [&](Value v) {
          Operation *d = v.getDefiningOp();
          return !d || d->getBlock() != &block || d->isBeforeInBlock(a);
        });
        if (!shares || !available)
          continue;
        erased.insert(a);
        erased.insert(b);
        merge(a, b);
        break;
      }
    }
  }

  static void merge(tc::FusionOp a, tc::FusionOp b) {
    llvm::SetVector<Value> inputs(a.getInputs().begin(), a.getInputs().end());
    inputs.insert(b.getInputs().begin(), b.getInputs().end());
    SmallVector<Type> types(a.getResultTypes());
    llvm::append_range(types, b.getResultTypes());
    OpBuilder builder(a);
    auto f = tc::FusionOp::create(builder, a.getLoc(), types, inputs.getArrayRef());
    Block *entry = new Block();
    f.getBody().push_back(entry);
    for (Value v : inputs)
      entry->addArgument(v.getType(), v.getLoc());
    OpBuilder bb = OpBuilder::atBlockBegin(entry);
    SmallVector<Value> yielded;
    for (tc::FusionOp part : {a, b}) {
      IRMapping map;
      Block &body = part.getBody().front();
      for (auto [arg, in] : llvm::zip(body.getArguments(), part.getInputs()))
        map.map(arg, entry->getArgument(llvm::find(inputs, in) - inputs.begin()));
      for (Operation &op : body.without_terminator()) {
        Operation *c = bb.clone(op, map);
        // An op the other part computes already (the sigmoid both SwiGLU
        // gradients take of the gate) is computed once.
        for (Operation &prev : *entry) {
          if (&prev == c)
            break;
          if (OperationEquivalence::isEquivalentTo(&prev, c, OperationEquivalence::exactValueMatch,
                                                   nullptr,
                                                   OperationEquivalence::IgnoreLocations)) {
            map.map(op.getResults(), prev.getResults());
            c->erase();
            break;
          }
        }
      }
      for (Value v : body.getTerminator()->getOperands())
        yielded.push_back(map.lookup(v));
    }
    tc::YieldOp::create(bb, a.getLoc(), yielded);
    unsigned na = a.getNumResults();
    for (auto [i, r] : llvm::enumerate(a.getResults()))
      r.replaceAllUsesWith(f.getResult(i));
    for (auto [i, r] : llvm::enumerate(b.getResults()))
      r.replaceAllUsesWith(f.getResult(na + i));
    b->erase();
    a->erase();
  }

  /// The values the body of `g` reads from outside it.
  static llvm::SetVector<Value> inputsOf(const Group &g,
                                         const llvm::DenseMap<Operation *, unsigned> &position) {
    llvm::SetVector<Value> inputs;
    auto inBody = [&](Operation *op) {
      return op && (g.members.contains(op) || g.cloned.contains(op));
    };
    auto add = [&](Operation *op) {
      for (Value v : op->getOperands())
        if (!inBody(v.getDefiningOp()))
          inputs.insert(v);
    };
    // In program order, so that the result does not depend on pointers.
    SmallVector<Operation *> body(g.members.begin(), g.members.end());
    body.append(g.cloned.begin(), g.cloned.end());
    llvm::sort(body, [&](Operation *a, Operation *b) {
      return position.lookup(a) < position.lookup(b);
    });
    llvm::for_each(body, add);
    return inputs;
  }

  /// Rematerialization: an input of `g` at the iteration shape that a chain
  /// of elementwise ops computes from what the body reads anyway (and from
  /// scalars, splat constants and broadcasts) is recomputed in the body
  /// instead of read: the chain is cloned in (as broadcasts are), and the
  /// kernel that made the value need not store it when nothing else reads
  /// it (the forward GELU's x^2, tanh and 1 + tanh, which its backward read
  /// back: three stores and three loads of [tokens, 4d] per layer). The
  /// clones compute what the originals do, op for op, in the kernel's f32
  /// arithmetic (without the rounding to the value's type that its store
  /// and load added). At most kMaxChain ops per input.
  ///
  /// A chain may also read one value the body does not read yet, in place
  /// of `v` (so no more bytes than before), when that value is stored anyway
  /// and read after the root (liveAfterRoot): SwiGLU's backward recomputes
  /// silu(gate) from gate, which the gate's gradient reads next, so the
  /// forward stores silu(gate) * up alone ([tokens, ffn] bf16 per layer less
  /// at the memory peak). Or, when nothing after the root reads `v`, a value
  /// stored anyway that is no larger (it then lives to the root instead of
  /// `v`): GPT-NeoX's two output biases have one gradient (both add into the
  /// same residual sum), whose clipped f32 copy the first bias's update
  /// stored for the second's; the second recomputes it from the bf16
  /// gradient, so the two updates no longer depend on each other and run in
  /// one grouped launch with the others.
  static constexpr size_t kMaxChain = 16;
  void rematerialize(Group &g, Block &block, ArrayRef<int64_t> iter,
                     const llvm::DenseMap<Operation *, unsigned> &position) {
    for (bool changed = true; changed;) {
      changed = false;
      llvm::SetVector<Value> inputs = inputsOf(g, position);
      for (Value v : inputs) {
        llvm::SetVector<Operation *> chain;
        Value extra;
        Extra allow{&extra, byteSize(v), position, position.lookup(g.root),
                    diesAtRoot(v, g, position)};
        if (!recomputable(v, g, block, iter, inputs, chain, &allow) &&
            !widened(v, g, block, iter, chain))
          continue;
        for (Operation *op : chain)
          g.cloned.insert(op);
        changed = true;
        break;
      }
    }
  }

  static int64_t byteSize(Value v) {
    auto t = llvm::cast<RankedTensorType>(v.getType());
    return t.getNumElements() * ((t.getElementTypeBitWidth() + 7) / 8);
  }

  /// The one value a chain may read that the body does not read yet.
  struct Extra {
    Value *taken;        // the value chosen, null until one is
    int64_t maxBytes;    // at most the bytes of the input it replaces
    const llvm::DenseMap<Operation *, unsigned> &position;
    unsigned rootPos;
    bool replacedDies;   // nothing after the root reads the input it replaces
  };

  /// Whether every reader of `v` outside g comes before g's root.
  static bool diesAtRoot(Value v, const Group &g,
                         const llvm::DenseMap<Operation *, unsigned> &position) {
    unsigned rootPos = position.lookup(g.root);
    return llvm::all_of(v.getUsers(), [&](Operation *u) {
      if (g.members.contains(u) || g.cloned.contains(u))
        return true;
      auto it = position.find(u);
      return it != position.end() && it->second < rootPos;
    });
  }

  /// Whether `w` is stored whatever this group does (a function argument or
  /// the result of an op no fusion recomputes: a matmul, a library call, a
  /// view) and either read after the root anyway or no larger than the
  /// input it replaces, which then dies sooner.
  static bool liveAfterRoot(Value w, const Extra &x) {
    Operation *wd = w.getDefiningOp();
    if (wd && (tc::isElementwise(wd) || isCloned(wd)))
      return false;
    return x.replacedDies || llvm::any_of(w.getUsers(), [&](Operation *u) {
             auto it = x.position.find(u);
             return it != x.position.end() && it->second > x.rootPos;
           });
  }

  /// Whether `v` (an input of g, or a value a chain op reads) can be
  /// computed in g's body from `inputs` (and, with `extra`, one more value
  /// live after the root anyway): the ops to clone go into `chain`.
  bool recomputable(Value v, const Group &g, Block &block, ArrayRef<int64_t> iter,
                    const llvm::SetVector<Value> &inputs, llvm::SetVector<Operation *> &chain,
                    Extra *extra = nullptr) {
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != &block || g.members.contains(def) || g.cloned.contains(def) ||
        chain.contains(def) || shapeOf(v) != iter || def->getNumResults() != 1)
      return false;
    if (!tc::isElementwise(def) || !allCodegenTypes(def) || !writesFp8Exactly(def) ||
        isMatmulEpilogue(def) || chain.size() >= kMaxChain)
      return false;
    chain.insert(def);
    for (Value w : def->getOperands()) {
      Operation *wd = w.getDefiningOp();
      // Read anyway, computed in the body already, or one value.
      if (inputs.contains(w) || chain.contains(wd) ||
          (wd && (g.members.contains(wd) || g.cloned.contains(wd))) ||
          llvm::cast<RankedTensorType>(w.getType()).getNumElements() == 1)
        continue;
      if (wd && isCloned(wd) && wd->getBlock() == &block) {
        chain.insert(wd);
        continue;
      }
      if (extra && (*extra->taken == w ||
                    (!*extra->taken && shapeOf(w) == iter && byteSize(w) <= extra->maxBytes &&
                     liveAfterRoot(w, *extra)))) {
        *extra->taken = w;
        continue;
      }
      if (!recomputable(w, g, block, iter, inputs, chain, extra))
        return false;
    }
    return true;
  }

  /// Whether input `v` of g is an exact widening cast (bf16 or f16 to f32)
  /// at the iteration shape: the body reads the narrow operand and widens it
  /// itself, half the bytes, and the kernel that made `v` need not store it
  /// when nothing else reads it (a bf16 weight gradient's f32 copy, which
  /// the grad-norm clip's sum of squares stored and the optimizer read back:
  /// 6 bytes moved per parameter instead of 2). The cast goes into `chain`.
  bool widened(Value v, const Group &g, Block &block, ArrayRef<int64_t> iter,
               llvm::SetVector<Operation *> &chain) {
    auto cast = v.getDefiningOp<tc::CastOp>();
    if (!cast || cast->getBlock() != &block || g.members.contains(cast) ||
        g.cloned.contains(cast) || shapeOf(v) != iter || !allCodegenTypes(cast))
      return false;
    Type from = llvm::cast<RankedTensorType>(cast.getInput().getType()).getElementType();
    Type to = llvm::cast<RankedTensorType>(v.getType()).getElementType();
    if (!(from.isBF16() || from.isF16()) || !to.isF32())
      return false;
    chain.clear();
    chain.insert(cast);
    return true;
  }

  void buildFusion(Group &g, Block &block) {
    // Body ops in program order.
    SmallVector<Operation *> body;
    for (Operation &op : block)
      if (g.members.contains(&op) || g.cloned.contains(&op))
        body.push_back(&op);
    auto inBody = [&](Operation *op) {
      return op && (g.members.contains(op) || g.cloned.contains(op));
    };
    llvm::SetVector<Value> inputs;
    for (Operation *op : body)
      for (Value v : op->getOperands())
        if (!inBody(v.getDefiningOp()))
          inputs.insert(v);
    SmallVector<Value> outputs;
    for (Operation *op : body) {
      if (!g.members.contains(op))
        continue;
      for (Value r : op->getResults())
        if (op == g.root || llvm::any_of(r.getUsers(), [&](Operation *u) {
              return !inBody(u);
            }))
          outputs.push_back(r);
    }
    if (outputs.empty()) {
      // Nothing outside reads the group (its root, a widening cast, went
      // into the kernels that read the narrow value and widen it
      // themselves): no kernel; what nothing reads goes.
      for (Operation *op : llvm::reverse(body))
        if (op->use_empty())
          op->erase();
      return;
    }
    OpBuilder b(g.root);
    SmallVector<Type> resultTypes;
    for (Value v : outputs)
      resultTypes.push_back(v.getType());
    auto fusion = tc::FusionOp::create(b, g.root->getLoc(), resultTypes,
                                       inputs.getArrayRef());
    Block *entry = new Block();
    fusion.getBody().push_back(entry);
    IRMapping map;
    for (Value v : inputs)
      map.map(v, entry->addArgument(v.getType(), v.getLoc()));
    OpBuilder bb = OpBuilder::atBlockBegin(entry);
    for (Operation *op : body)
      bb.clone(*op, map);
    SmallVector<Value> yielded;
    for (Value v : outputs)
      yielded.push_back(map.lookup(v));
    tc::YieldOp::create(bb, g.root->getLoc(), yielded);
    for (auto [v, r] : llvm::zip(outputs, fusion.getResults()))
      v.replaceUsesWithIf(r, [&](OpOperand &use) {
        return !inBody(use.getOwner());
      });
    // Erase members (users first), then clones nothing else uses.
    for (Operation *op : llvm::reverse(body)) {
      if (g.members.contains(op) || op->use_empty())
        op->erase();
    }
  }
};

} // namespace
