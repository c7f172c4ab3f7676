//===- MergeProjections.cpp - tc-merge-projections --------------------------===//
//
// HuggingFace's Llama, Mistral and Qwen2 project the attention input into
// queries, keys and values with three Linear layers; with grouped-query
// attention the key and value GEMMs are narrow (N = 256 beside a 768-wide
// query at Llama ~125M) and run far below the tensor cores' rate. This pass
// makes them one GEMM, as GPT-2 and GPT-NeoX export it: the weights
// concatenated along N (a copy of the weights per step, small beside the
// activations), one product, its column slices for q, k and v (and, with
// biases on every projection, the biases concatenated the same way). The
// backward, made after it, has one weight-gradient and one input-gradient
// GEMM, and the slices' gradient is the concat the attention kernels write
// their pieces of (tc-fuse-attention-views). Only projections whose results
// reach a tc.attention or tc.rotary (through reshapes and transposes) merge:
// the MLP's gate and up projections are wide already and feed SwiGLU.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace tc {
#define GEN_PASS_DEF_TCMERGEPROJECTIONS
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;
using namespace tc;

namespace {

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

/// Whether `v` reaches a tc.attention or tc.rotary through reshapes and
/// transposes only.
bool feedsAttention(Value v, int depth = 0) {
  if (depth > 4)
    return false;
  for (Operation *u : v.getUsers()) {
    if (llvm::isa<AttentionOp, RotaryOp>(u))
      return true;
    if (llvm::isa<ReshapeOp, TransposeOp>(u) && feedsAttention(u->getResult(0), depth + 1))
      return true;
  }
  return false;
}

/// A projection x @ W^T (+ b): the weight W [N, K] behind a transpose (the
/// dynamo exporter's form, `transposed`), or x @ W with W [K, N] (the
/// TorchScript exporter's pre-transposed initializers); the bias add that is
/// the product's only use, if any.
struct Projection {
  MatmulOp mm;
  Value weight; // [N, K] when transposed, else [K, N]
  bool transposed = false;
  AddOp biasAdd;
  Value bias; // [N]
  int64_t n = 0;
};

std::optional<Projection> projection(MatmulOp mm) {
  if (mm.getAlpha() || mm.getTransposeLhs() || mm.getTransposeRhs() ||
      typeOf(mm.getRhs()).getRank() != 2)
    return std::nullopt;
  Projection p;
  p.mm = mm;
  p.weight = mm.getRhs();
  if (auto t = mm.getRhs().getDefiningOp<TransposeOp>();
      t && t.getPermutation() == ArrayRef<int64_t>{1, 0}) {
    p.weight = t.getInput();
    p.transposed = true;
  }
  p.n = typeOf(mm.getRhs()).getDimSize(1);
  Value out = mm.getResult();
  if (out.hasOneUse())
    if (auto add = llvm::dyn_cast<AddOp>(*out.getUsers().begin())) {
      Value b = otherOperand(add, out);
      if (b && typeOf(b).getRank() == 1 && typeOf(b).getDimSize(0) == p.n &&
          add.getResult().getType() == out.getType()) {
        p.biasAdd = add;
        p.bias = b;
      }
    }
  Value result = p.biasAdd ? p.biasAdd.getResult() : out;
  if (!feedsAttention(result))
    return std::nullopt;
  return p;
}

/// Whether `v` is available before `at` (a block argument or defined earlier).
bool before(Value v, Operation *at) {
  Operation *d = v.getDefiningOp();
  return !d || (d->getBlock() == at->getBlock() && d->isBeforeInBlock(at));
}

void merge(MutableArrayRef<Projection> group) {
  Operation *first = group.front().mm;
  for (Projection &p : group)
    if (p.mm->isBeforeInBlock(first))
      first = p.mm;
  bool biased = llvm::all_of(group, [](Projection &p) { return p.bias; });
  for (Projection &p : group)
    if (!before(p.weight, first) || (biased && !before(p.bias, first)))
      return;
  OpBuilder b(first);
  Location loc = group.front().mm.getLoc();
  SmallVector<Value> weights, biases;
  for (Projection &p : group) {
    weights.push_back(p.weight);
    if (biased)
      biases.push_back(p.bias);
  }
  bool transposed = group.front().transposed;
  Value w = ConcatOp::create(b, loc, weights, b.getI64IntegerAttr(transposed ? 0 : 1));
  Value wt = transposed ? TransposeOp::create(b, loc, w, b.getDenseI64ArrayAttr({1, 0})).getResult()
                        : w;
  // The bias concat before the product: the GEMM's bias epilogue reads it.
  Value bias = biased ? ConcatOp::create(b, loc, biases, b.getI64IntegerAttr(0)).getResult() : Value();
  Value y = MatmulOp::create(b, loc, group.front().mm.getLhs(), wt).getResult();
  if (biased)
    y = AddOp::create(b, loc, y, bias);
  int64_t rank = typeOf(y).getRank(), offset = 0;
  for (Projection &p : group) {
    SmallVector<int64_t> starts(rank, 0), strides(rank, 1);
    starts.back() = offset;
    Value old = biased ? p.biasAdd.getResult() : p.mm.getResult();
    Value s = SliceOp::create(b, loc, old.getType(), y, b.getDenseI64ArrayAttr(starts),
                              b.getDenseI64ArrayAttr(strides));
    old.replaceAllUsesWith(s);
    offset += p.n;
  }
  for (Projection &p : group) {
    if (p.biasAdd && p.biasAdd.use_empty())
      p.biasAdd.erase();
    if (p.mm.use_empty())
      p.mm.erase();
  }
}

struct TcMergeProjections : tc::impl::TcMergeProjectionsBase<TcMergeProjections> {
  void runOnOperation() override {
    // Projections of one input, by that input, in program order.
    llvm::MapVector<Value, SmallVector<Projection>> byInput;
    getOperation().walk([&](MatmulOp mm) {
      if (std::optional<Projection> p = projection(mm))
        byInput[mm.getLhs()].push_back(*p);
    });
    for (auto &[x, group] : byInput) {
      if (group.size() < 2)
        continue;
      // One element type, K and weight layout for all, the same block.
      Type elt = typeOf(group.front().weight).getElementType();
      int64_t k = typeOf(group.front().mm.getRhs()).getDimSize(0);
      bool same = llvm::all_of(group, [&](Projection &p) {
        return typeOf(p.weight).getElementType() == elt &&
               typeOf(p.mm.getRhs()).getDimSize(0) == k && p.transposed == group.front().transposed &&
               p.mm->getBlock() == group.front().mm->getBlock() &&
               static_cast<bool>(p.bias) == static_cast<bool>(group.front().bias);
      });
      if (same)
        merge(group);
    }
  }
};

} // namespace
