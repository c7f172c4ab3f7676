//===- LibraryForms.cpp - what the runtime's library calls accept ---------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Transforms/Fp4Qat.h"
#include "compiler/Conversion/TcToTcx/Patterns.h"
#include "runtime/src/schema/library_abi.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace tc {

std::optional<GemmForm> gemmForm(MatmulOp op) {
  Type elt = tensorType(op.getResult()).getElementType();
  if (!elt.isF32() && !elt.isBF16() && !elt.isF16())
    return std::nullopt; // cuBLASLt wrapper: f32, bf16, f16 only
  GemmForm g;
  g.lhs = op.getLhs(), g.rhs = op.getRhs();
  g.lhsT = op.getTransposeLhs(), g.rhsT = op.getTransposeRhs();
  // A transpose of the last two dims is a transpose flag.
  auto foldTranspose = [](Value &v, bool &flag) {
    auto t = v.getDefiningOp<TransposeOp>();
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
  foldTranspose(g.lhs, g.lhsT);
  foldTranspose(g.rhs, g.rhsT);
  ArrayRef<int64_t> ls = tensorType(g.lhs).getShape(), rs = tensorType(g.rhs).getShape();
  int64_t lr = ls.size(), rr = rs.size();
  g.m = g.lhsT ? ls[lr - 1] : ls[lr - 2];
  g.k = g.lhsT ? ls[lr - 2] : ls[lr - 1];
  g.n = g.rhsT ? rs[rr - 2] : rs[rr - 1];
  g.lhsBatch.assign(ls.begin(), ls.end() - 2);
  g.rhsBatch.assign(rs.begin(), rs.end() - 2);
  ArrayRef<int64_t> os = tensorType(op.getResult()).getShape();
  g.outBatch.assign(os.begin(), os.end() - 2);
  int64_t lbn = numElements(g.lhsBatch), rbn = numElements(g.rhsBatch),
          obn = numElements(g.outBatch);
  if (rbn == 1 && !g.lhsT) {
    g.m *= lbn; // [b..., M, K] @ [K, N]: one M x K matrix of b*M rows
  } else if (lbn == obn && rbn == obn) {
    g.batch = obn;
  } else if (rbn == 1) {
    g.batch = obn, g.strideRhs = 0;
  } else if (lbn == 1) {
    g.batch = obn, g.strideLhs = 0;
  } else {
    g.broadcast = true;
  }
  return g;
}

/// The residual add reading `x` (the only reader of `v`, or of its one
/// reshape) whose other operand has the add's type and is available before
/// `op`, the call that computes `v`.
static ResidualAdd residualAddOf(Value v, Operation *op) {
  ResidualAdd r;
  Value x = v;
  if ((r.reshape = soleUser<ReshapeOp>(x)))
    x = r.reshape.getResult();
  auto add = soleUser<AddOp>(x);
  if (!add || add.getLhs() == add.getRhs() || add.getResult().getType() != x.getType())
    return {};
  Value other = add.getLhs() == x ? add.getRhs() : add.getLhs();
  if (other.getType() != x.getType())
    return {};
  Operation *def = other.getDefiningOp();
  bool available = def ? def->getBlock() == op->getBlock() && def->isBeforeInBlock(op)
                       : llvm::cast<BlockArgument>(other).getOwner() == op->getBlock();
  if (!available)
    return {};
  r.add = add;
  r.residual = other;
  return r;
}

ResidualAdd normGradResidualAdd(Operation *grad) {
  if (!llvm::isa<LayerNormGradOp, RmsNormGradOp>(grad))
    return {};
  ResidualAdd r = residualAddOf(grad->getResult(0), grad);
  return r.reshape ? ResidualAdd{} : r; // the kernel writes dx's rows as they are
}

SmallVector<Value, 2> normGradDxViews(Operation *grad) {
  ResidualAdd res = normGradResidualAdd(grad);
  return lastAxisViews(res ? Value(res.add.getResult()) : grad->getResult(0));
}

ResidualAdd residualAdd(MatmulOp mm, Value v) {
  std::optional<GemmForm> g = gemmForm(mm);
  if (!g || g->broadcast || mm.getAlpha() || mm->hasAttr(kFoldBatchSumAttr) ||
      mm->hasAttr(kFp4GemmAttr))
    return {};
  Type e = llvm::cast<RankedTensorType>(v.getType()).getElementType();
  if (!e.isF32() && !e.isBF16() && !e.isF16())
    return {};
  return residualAddOf(v, mm);
}

std::string fp8QuantizeForm(QuantizeOp op, Fp8QuantizeForm *out) {
  auto in = tensorType(op.getInput());
  Type elt = tensorType(op.getResult()).getElementType();
  if (!isLibraryFloat(in.getElementType()))
    return llvm::formatv("the FP8 quantize kernel reads f32 or bf16, not {0}",
                         in.getElementType());
  if (!isa<Float8E4M3FNType, Float8E5M2Type>(elt))
    return llvm::formatv("no GPU kernel quantizes into {0} yet (sm_90: f8E4M3FN and f8E5M2 "
                         "with f32 scales)",
                         elt);
  ArrayRef<int64_t> shape = in.getShape(), block = op.getBlock();
  int64_t r = shape.size();
  out->cols = r ? shape[r - 1] : 1;
  out->rows = out->cols ? in.getNumElements() / out->cols : 0;
  Type st = tensorType(op.getScaleInv()).getElementType();
  if (isa<Float8E8M0FNUType>(st)) {
    // mxfp8 ("quantize_mx"): a dim below 32 is one partial block.
    auto mx = [&](int64_t d) { return block[d] == std::min<int64_t>(32, shape[d]); };
    bool alongCols = r == 2 && block[0] == 1 && mx(1);
    bool alongRows = r == 2 && block[1] == 1 && mx(0);
    if (!alongCols && !alongRows)
      return "the GPU's MXFP8 kernel quantizes rank-2 tensors in 1x32 or 32x1 blocks (f8E8M0FNU "
             "scales), not " +
             std::to_string(block.size() == 2 ? block[0] : 0) + "x" +
             std::to_string(block.size() == 2 ? block[1] : 0);
    out->mxBlocks = alongCols ? 0 : 1;
    return "";
  }
  if (!st.isF32())
    return llvm::formatv("no GPU kernel writes {0} scales (f32 scales, or f8E8M0FNU ones in 1x32 "
                         "blocks: mxfp8)",
                         st);
  if (op.getAmax() && op.getPow2Scale())
    return "a given amax is read by the per-tensor quantize kernel, not by block128's";
  if (op.getPow2Scale()) {
    // block128: the whole dim when it is below 128 (one partial block).
    auto full = [&](int64_t d) { return block[d] == std::min<int64_t>(128, shape[d]); };
    if (r != 2 || !(full(0) || block[0] == 1) || !(full(1) || block[1] == 1))
      return "the GPU's block128 kernels quantize rank-2 tensors in 1x128, 128x1 or 128x128 "
             "blocks, not " +
             std::to_string(block.size() == 2 ? block[0] : 0) + "x" +
             std::to_string(block.size() == 2 ? block[1] : 0);
    bool alongCols = block[0] == 1 && full(1), alongRows = block[1] == 1 && full(0);
    out->blocks = alongCols ? 0 : alongRows ? 1 : 2;
    return "";
  }
  bool tensor = true, row = r > 0 && block[r - 1] >= shape[r - 1];
  for (int64_t d = 0; d < r; ++d) {
    tensor = tensor && block[d] >= shape[d];
    if (d < r - 1)
      row = row && block[d] == 1;
  }
  // Per column of a matrix (block [rows, 1]): the operand an outer-vector
  // scaled GEMM reads transposed, whose copy has a scale per row.
  bool column = !tensor && r == 2 && block[0] >= shape[0] && block[1] == 1;
  if (!tensor && !row && !column)
    return "the GPU quantizes per tensor, per row (block [1, ..., 1, " +
           std::to_string(out->cols) + "]) or per column of a matrix (block [" +
           std::to_string(out->rows) + ", 1]); other blocks have no kernel yet";
  out->rowScaling = !tensor && row;
  out->colScaling = column;
  return "";
}

Value throughLayout(Value v) {
  while (true) {
    if (auto r = v.getDefiningOp<ReshapeOp>())
      v = r.getInput();
    else if (auto t = v.getDefiningOp<TransposeOp>())
      v = t.getInput();
    else
      return v;
  }
}

bool takesAmaxOfResult0(Operation *op) { return isa<LayerNormOp, RmsNormOp, AttentionOp>(op); }

Value libraryAmaxResult(Operation *op) {
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case<LayerNormOp, RmsNormOp, AttentionOp, AttentionGradOp>(
          [](auto lib) { return lib.getAmax(); })
      .Default([](Operation *) { return Value(); });
}

namespace {

/// The amax_of masks of dquery, dkey and dvalue (attention_grad's results).
constexpr int64_t kGradAmaxOf[3] = {rt::kAmaxOfDq, rt::kAmaxOfDk, rt::kAmaxOfDv};

/// The gradients an amax_of mask names: "dquery, dvalue".
std::string gradNames(int64_t mask) {
  const char *names[3] = {"dquery", "dkey", "dvalue"};
  std::string s;
  for (int i = 0; i < 3; ++i)
    if (mask & kGradAmaxOf[i])
      s += (s.empty() ? "" : ", ") + std::string(names[i]);
  return s;
}

/// The amax_of mask of `v` as a gradient of `ag`, 0 when it is none.
int64_t gradAmaxOf(AttentionGradOp ag, Value v) {
  auto r = llvm::dyn_cast<OpResult>(v);
  return r && r.getOwner() == ag && r.getResultNumber() < 3 ? kGradAmaxOf[r.getResultNumber()]
                                                            : 0;
}

/// What `fusion`'s result `amax` is the amax of: the value its body yields
/// whose |x| (in f32) the reduction max(select(isnan(|x|), 0, |x|)) reads,
/// or null when the result is not such a reduction.
Value fusionAmaxOf(FusionOp fusion, unsigned amax) {
  Operation *yield = fusion.getBody().front().getTerminator();
  auto max = yield->getOperand(amax).getDefiningOp<ReduceMaxOp>();
  auto sel = max && tensorType(max.getResult()).getRank() == 0
                 ? max.getInput().getDefiningOp<SelectOp>()
                 : SelectOp();
  auto abs = sel ? sel->getOperand(2).getDefiningOp<AbsOp>() : AbsOp();
  if (!abs)
    return {};
  Value x = abs.getInput();
  if (auto c = x.getDefiningOp<CastOp>())
    x = c.getInput();
  return x;
}

} // namespace

std::string fp8AmaxCoverage(QuantizeOp op) {
  Value amax = op.getAmax();
  if (!amax)
    return "";
  Value src = throughLayout(op.getInput());
  auto res = llvm::dyn_cast<OpResult>(amax);
  Operation *def = res ? res.getOwner() : nullptr;
  if (auto fusion = llvm::dyn_cast_or_null<FusionOp>(def)) {
    Value x = fusionAmaxOf(fusion, res.getResultNumber());
    auto in = llvm::dyn_cast<OpResult>(src);
    Operation *yield = fusion.getBody().front().getTerminator();
    if (x && in && in.getOwner() == fusion && yield->getOperand(in.getResultNumber()) == x)
      return "";
    return llvm::formatv("its amax, result {0} of a 'tc.fusion', is not the amax of its input "
                         "(through reshapes and transposes): the fusion reduces {1}",
                         res.getResultNumber(),
                         x ? "another of its results" : "nothing it yields the |x| of");
  }
  if (!def || libraryAmaxResult(def) != amax)
    return "its amax is not one that the kernel producing its input takes (a tc.fusion's, a "
           "norm's or an attention's amax result: tc-fuse-fp8-amax)";
  std::string name = def->getName().getStringRef().str();
  if (takesAmaxOfResult0(def)) {
    if (src == def->getResult(0))
      return "";
    return llvm::formatv("its amax is the amax of result 0 of a '{0}', which its input "
                         "(through reshapes and transposes) is not",
                         name);
  }
  auto ag = llvm::cast<AttentionGradOp>(def);
  int64_t of = static_cast<int64_t>(ag.getAmaxOf().value_or(0));
  int64_t in = gradAmaxOf(ag, src);
  if (auto cat = src.getDefiningOp<ConcatOp>(); !in && cat) {
    for (Value piece : cat.getInputs()) {
      int64_t bit = gradAmaxOf(ag, throughLayout(piece));
      if (!bit) {
        in = 0;
        break;
      }
      in |= bit;
    }
  }
  if (in == of)
    return "";
  std::string input = !in ? std::string("neither one of its gradients nor a concat of them only")
                      : src.getDefiningOp<ConcatOp>() ? "a concat of " + gradNames(in)
                                                      : gradNames(in);
  return llvm::formatv("its amax is that of the gradients amax_of = {1} names ({2}) of a '{0}', "
                       "but its input (through reshapes and transposes) is {3}: the amax must "
                       "be of exactly the elements quantized",
                       name, of, gradNames(of), input);
}

bool fp8PerTensorForm(QuantizeOp op, Fp8QuantizeForm *out) {
  return fp8QuantizeForm(op, out).empty() && !out->rowScaling && !out->colScaling &&
         out->blocks < 0 && out->mxBlocks < 0;
}

bool fp8ColumnSumForm(QuantizeOp op, Fp8QuantizeForm *out) {
  return fp8PerTensorForm(op, out) && tensorType(op.getInput()).getRank() == 2;
}

SmallVector<Value, 2> sameBytes(Value v) {
  SmallVector<Value, 2> sources{v};
  if (auto rs = v.getDefiningOp<ReshapeOp>())
    sources.push_back(rs.getInput());
  return sources;
}

SmallVector<Value, 2> lastAxisViews(Value v) {
  SmallVector<Value, 2> views{v};
  int64_t last = llvm::cast<RankedTensorType>(v.getType()).getShape().back();
  for (Operation *u : v.getUsers())
    if (auto rs = llvm::dyn_cast<ReshapeOp>(u);
        rs && llvm::cast<RankedTensorType>(rs.getType()).getShape().back() == last)
      views.push_back(rs.getResult());
  return views;
}

ReduceSumOp pairedColumnSum(Operation *op, ArrayRef<Value> views) {
  Attribute id = op->getAttr(kColSumAttr);
  if (!id)
    return {};
  for (Value v : views)
    for (Operation *u : v.getUsers())
      if (auto r = llvm::dyn_cast<ReduceSumOp>(u); r && r->getAttr(kColSumAttr) == id)
        return r;
  return {};
}

SmallVector<Value, 2> fp8ColumnSumSources(QuantizeOp op) { return sameBytes(op.getInput()); }

bool geluGradOperand(MulOp mul, Value g, SmallVectorImpl<Operation *> *ops, Value *x) {
  Value d = otherOperand(mul, g);
  if (!d || !mul->hasAttr(kGeluGradAttr) || !d.getDefiningOp())
    return false;
  // x: the value the expression squares (tc-autodiff's x * x).
  Value leaf;
  {
    SmallVector<Operation *> work{d.getDefiningOp()};
    llvm::SmallPtrSet<Operation *, 16> seen;
    while (!work.empty() && !leaf) {
      Operation *op = work.pop_back_val();
      if (!seen.insert(op).second || seen.size() > 32)
        continue;
      if (auto m = llvm::dyn_cast<MulOp>(op); m && m.getLhs() == m.getRhs()) {
        leaf = m.getLhs();
        break;
      }
      for (Value in : op->getOperands())
        if (Operation *def = in.getDefiningOp(); def && isElementwise(def))
          work.push_back(def);
    }
  }
  if (!leaf || leaf.getType() != d.getType())
    return false;
  // The ops from d back to x, constants aside; each read only within them.
  llvm::SmallPtrSet<Operation *, 16> inside;
  SmallVector<Operation *> work{d.getDefiningOp()};
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!inside.insert(op).second)
      continue;
    if (!isElementwise(op) || op->getBlock() != mul->getBlock() || inside.size() > 32)
      return false;
    for (Value in : op->getOperands()) {
      if (in == leaf || llvm::isa_and_nonnull<ConstantOp>(in.getDefiningOp()))
        continue;
      if (!in.getDefiningOp())
        return false; // another block argument: not gelu'(x)
      work.push_back(in.getDefiningOp());
    }
  }
  for (Operation *op : inside)
    for (Operation *u : op->getResult(0).getUsers())
      if (u != mul.getOperation() && !inside.contains(u))
        return false;
  ops->assign(inside.begin(), inside.end());
  *x = leaf;
  return true;
}

MulOp dgeluUser(Value product, ReshapeOp *reshape) {
  *reshape = ReshapeOp();
  Value g = product;
  if (auto rs = soleUser<ReshapeOp>(product)) {
    *reshape = rs;
    g = rs.getResult();
  }
  auto mul = soleUser<MulOp>(g);
  return mul && mul->hasAttr(kDGeluAttr) ? mul : MulOp();
}

GeluOp geluAuxUser(Value v) {
  for (Operation *u : v.getUsers()) {
    if (auto g = llvm::dyn_cast<GeluOp>(u); g && g->hasAttr(kGeluAuxAttr))
      return g;
    if (auto r = llvm::dyn_cast<ReshapeOp>(u))
      for (Operation *ru : r.getResult().getUsers())
        if (auto g = llvm::dyn_cast<GeluOp>(ru); g && g->hasAttr(kGeluAuxAttr))
          return g;
  }
  return {};
}

BiasGradSum pairedBiasGradSum(MatmulOp mm) {
  Attribute id = mm->getAttr(kBiasGradAttr);
  std::optional<GemmForm> g = gemmForm(mm);
  if (!id || !g)
    return {};
  for (auto [operand, side, columns] :
       {std::make_tuple(g->lhs, StringRef("lhs"), g->lhsT), std::make_tuple(g->rhs, StringRef("rhs"), !g->rhsT)}) {
    if (!columns)
      continue;
    for (Value v : sameBytes(operand))
      for (Operation *u : v.getUsers())
        if (auto r = llvm::dyn_cast<ReduceSumOp>(u); r && r->getAttr(kBiasGradAttr) == id)
          return {r, side};
  }
  return {};
}

namespace {
/// The tc.quantize that made `v` (its result 0) of a matrix with one scale
/// for the tensor or one per column (the forms that write a transposed
/// copy), or null.
QuantizeOp copyingQuantize(Value v) {
  auto q = v.getDefiningOp<QuantizeOp>();
  Fp8QuantizeForm f;
  if (!q || q.getResult() != v || !fp8QuantizeForm(q, &f).empty() || f.rowScaling || f.blocks >= 0 ||
      f.mxBlocks >= 0 || tensorType(q.getInput()).getRank() != 2)
    return QuantizeOp();
  return q;
}
} // namespace

namespace {
/// The block128 tc.quantize that made `v` (its result 0) and its form, or
/// null.
QuantizeOp blockQuantize(Value v, Fp8QuantizeForm *f) {
  auto q = v.getDefiningOp<QuantizeOp>();
  if (!q || q.getResult() != v || !q.getPow2Scale() || !fp8QuantizeForm(q, f).empty())
    return QuantizeOp();
  return q;
}

/// fp8GemmForm of block-scaled operands (--fp8-scaling block128): each read
/// K-contiguous, from its transposed copy when the product reads it
/// transposed, with scales along that K.
std::string fp8BlockGemmForm(ScaledMatmulOp op, Fp8GemmForm *out) {
  Fp8QuantizeForm lf, rf;
  if (!blockQuantize(op.getLhs(), &lf) || !blockQuantize(op.getRhs(), &rf))
    return "block128 operands (tc.quantize with pow2_scale) must both come straight from "
           "their rank-2 tc.quantize";
  out->lhsFromCopy = op.getTransposeLhs();
  out->rhsFromCopy = !op.getTransposeRhs();
  // Blocks along the K of the read: the columns of a direct read, the rows
  // of one through the copy; 128x128 blocks either way.
  auto gemmBlocks = [](const Fp8QuantizeForm &f, bool fromCopy) -> int64_t {
    if (f.blocks == 2)
      return 2;
    return f.blocks == (fromCopy ? 1 : 0) ? 1 : 0;
  };
  out->lhsBlocks = gemmBlocks(lf, out->lhsFromCopy);
  out->rhsBlocks = gemmBlocks(rf, out->rhsFromCopy);
  if (!out->lhsBlocks || !out->rhsBlocks)
    return "a block128 operand's 1x128 blocks do not run along the product's K (quantize it "
           "along the axis the product contracts)";
  if (out->lhsBlocks == 2 && out->rhsBlocks == 2)
    return "cuBLASLt has no 128x128 x 128x128 block-scaled FP8 GEMM (one operand in 1x128 blocks)";
  if (tensorType(op.getResult()).getElementType().isF32())
    return "cuBLASLt's block-scaled FP8 GEMMs write bf16 or f16, not f32";
  return "";
}

/// fp8GemmForm of MXFP8 operands (f8E8M0FNU scales, cuBLASLt's
/// VEC32_UE8M0 on sm_100 / sm_120): each read K-contiguous, from its
/// transposed copy when the product reads it transposed, its 1x32 blocks
/// along that K.
std::string fp8MxGemmForm(ScaledMatmulOp op, Fp8GemmForm *out) {
  auto mxQuantize = [](Value v, Fp8QuantizeForm *f) {
    auto q = v.getDefiningOp<QuantizeOp>();
    return q && q.getResult() == v && fp8QuantizeForm(q, f).empty() && f->mxBlocks >= 0;
  };
  Fp8QuantizeForm lf, rf;
  if (!mxQuantize(op.getLhs(), &lf) || !mxQuantize(op.getRhs(), &rf))
    return "mxfp8 operands (f8E8M0FNU scales) must both come straight from their rank-2 "
           "tc.quantize";
  out->lhsFromCopy = op.getTransposeLhs();
  out->rhsFromCopy = !op.getTransposeRhs();
  // A direct read has K along the columns; a read through the copy along
  // the rows of the quantized value.
  if (lf.mxBlocks != (out->lhsFromCopy ? 1 : 0) || rf.mxBlocks != (out->rhsFromCopy ? 1 : 0))
    return "an mxfp8 operand's 1x32 blocks do not run along the product's K (quantize it along "
           "the axis the product contracts)";
  out->lhsBlocks = out->rhsBlocks = 3;
  if (out->k % 32 != 0)
    return "K = " + std::to_string(out->k) +
           " is not a multiple of 32 (MXFP8's whole 1x32 blocks): the precision plan should have "
           "kept this matmul in bf16";
  if (tensorType(op.getResult()).getElementType().isF32())
    return "cuBLASLt's block-scaled FP8 GEMMs write bf16 or f16, not f32";
  return "";
}

/// fp8GemmForm's checks of per-tensor / per-row scales.
std::string fp8ScaleForm(ScaledMatmulOp op, RankedTensorType lst, RankedTensorType rst,
                         Fp8GemmForm &g) {
  bool tl = op.getTransposeLhs(), tr = op.getTransposeRhs();
  bool perTensor = lst.getNumElements() == 1 && rst.getNumElements() == 1;
  // Outer-vector scaling: one scale per row of lhs [M, K] and of rhs [N, K]
  // as cuBLASLt reads them, so grids [M, 1] / [N, 1] of operands stored that
  // way and [1, M] / [1, N] (per column) of operands read transposed.
  auto grid = [](RankedTensorType t, int64_t n, bool perColumn) {
    return t.getRank() == 2 && t.getDimSize(perColumn ? 1 : 0) == n &&
           t.getDimSize(perColumn ? 0 : 1) == 1;
  };
  bool perRow = !perTensor && grid(lst, g.m, tl) && grid(rst, g.n, !tr);
  if (!perTensor && !perRow)
    return llvm::formatv("the GPU's FP8 GEMM takes one scale per operand, or one per row of "
                         "lhs [M, K] and rhs [N, K] as it reads them (outer-vector scaling), "
                         "not {0} and {1} scales",
                         lst, rst);
  // cuBLASLt 13.1 on the H200 runs outer-vector scales (into bf16 and f32)
  // without fast accumulation, and needs the scale pointers before its
  // heuristic query (test/cuda/fp8_test.cpp, 2026-12-02).
  g.rowScales = perRow;
  return "";
}
} // namespace

std::string fp8GemmForm(ScaledMatmulOp op, Fp8GemmForm *out) {
  Type lt = tensorType(op.getLhs()).getElementType();
  Type rt = tensorType(op.getRhs()).getElementType();
  Type ot = tensorType(op.getResult()).getElementType();
  auto isFp8 = [](Type t) { return isa<Float8E4M3FNType, Float8E5M2Type>(t); };
  if (!isFp8(lt) || !isFp8(rt))
    return llvm::formatv("the GPU's scaled GEMM takes f8E4M3FN and f8E5M2 operands, not {0} x {1}",
                         lt, rt);
  if (isa<Float8E5M2Type>(lt) && isa<Float8E5M2Type>(rt))
    return "cuBLASLt has no f8E5M2 x f8E5M2 GEMM";
  if (!ot.isF32() && !ot.isBF16() && !ot.isF16())
    return llvm::formatv("the FP8 GEMM writes f32, bf16 or f16, not {0}", ot);
  ArrayRef<int64_t> ls = tensorType(op.getLhs()).getShape();
  ArrayRef<int64_t> rs = tensorType(op.getRhs()).getShape();
  bool tl = op.getTransposeLhs(), tr = op.getTransposeRhs();
  out->m = tl ? ls[1] : ls[0];
  out->k = tl ? ls[0] : ls[1];
  out->n = tr ? rs[0] : rs[1];
  auto lst = tensorType(op.getLhsScaleInv()), rst = tensorType(op.getRhsScaleInv());
  bool mx = isa<Float8E8M0FNUType>(lst.getElementType()) &&
            isa<Float8E8M0FNUType>(rst.getElementType());
  if (!mx && (!lst.getElementType().isF32() || !rst.getElementType().isF32()))
    return llvm::formatv("the GPU's FP8 GEMM takes f32 scales (or f8E8M0FNU ones on both "
                         "operands: mxfp8), not {0} and {1}",
                         lst, rst);
  auto lq = op.getLhs().getDefiningOp<QuantizeOp>();
  bool blocks = mx || (lq && lq.getPow2Scale());
  if (mx) {
    if (std::string e = fp8MxGemmForm(op, out); !e.empty())
      return e;
  } else if (blocks) {
    if (std::string e = fp8BlockGemmForm(op, out); !e.empty())
      return e;
  } else if (std::string e = fp8ScaleForm(op, lst, rst, *out); !e.empty()) {
    return e;
  }
  for (auto [what, v] : {std::pair<const char *, int64_t>{"K", out->k}, {"N", out->n}})
    if (v % 16 != 0)
      return std::string(what) + " = " + std::to_string(v) +
             " is not a multiple of 16 (cuBLASLt's FP8 GEMMs need 16-byte leading "
             "dimensions): the precision plan should have kept this matmul in bf16";
  if (blocks)
    return "";
  out->lhsFromCopy = tl;
  out->rhsFromCopy = !tr;
  for (auto [what, fromCopy, v] :
       {std::tuple<const char *, bool, Value>{"lhs", out->lhsFromCopy, op.getLhs()},
        {"rhs", out->rhsFromCopy, op.getRhs()}})
    if (fromCopy && !copyingQuantize(v))
      return std::string(what) +
             " is read transposed (cuBLASLt's FP8 GEMMs are TN only), and only a rank-2 "
             "per-tensor or per-column tc.quantize writes the transposed copy";
  return "";
}

bool fp8BiasEpilogueForm(ScaledMatmulOp op) {
  Fp8GemmForm g;
  return fp8GemmForm(op, &g).empty() && !g.lhsBlocks && !g.rowScales &&
         tensorType(op.getResult()).getElementType().isBF16() &&
         tensorType(op.getLhsScaleInv()).getNumElements() == 1 &&
         tensorType(op.getRhsScaleInv()).getNumElements() == 1;
}

bool readsTransposedCopy(Value q) {
  for (Operation *u : q.getUsers()) {
    auto mm = dyn_cast<ScaledMatmulOp>(u);
    if (!mm)
      continue;
    if ((mm.getLhs() == q && mm.getTransposeLhs()) || (mm.getRhs() == q && !mm.getTransposeRhs()))
      return true;
  }
  return false;
}

bool normTypes(Type rows, Value param) {
  if (!isLibraryFloat(rows))
    return false;
  if (!param)
    return true;
  Type p = tensorType(param).getElementType();
  return p == rows || (rows.isBF16() && p.isF32());
}

bool crossEntropyForm(Value input, Value labels, Value weight, StringRef reduction) {
  auto t = tensorType(input);
  return t.getRank() == 2 && isLibraryFloat(t.getElementType()) && !weight &&
         reduction == "mean" && isLibraryIndex(tensorType(labels).getElementType());
}

bool attentionForm(Value query, Value lse) {
  // The attention kernels also take f16 (the fp16 plan's attention), which
  // the other library kernels do not.
  Type t = tensorType(query).getElementType();
  return (isLibraryFloat(t) || t.isF16()) && tensorType(lse).getElementType().isF32();
}

bool isHeadTranspose(Operation *op) {
  auto tr = llvm::dyn_cast_or_null<TransposeOp>(op);
  return tr && tr.getPermutation() == ArrayRef<int64_t>{0, 2, 1, 3};
}

Operation *headTransposeReader(Value r, function_ref<bool(Operation *)> alsoReads) {
  Operation *tr = nullptr;
  bool ok = true;
  for (Operation *u : r.getUsers()) {
    if (isHeadTranspose(u) && !tr)
      tr = u;
    else if (!alsoReads(u))
      ok = false;
  }
  return ok ? tr : nullptr;
}

bool readsOnlyAsResult(Operation *u, Value o) {
  auto g = llvm::dyn_cast<AttentionGradOp>(u);
  return g && g.getResult() == o && g.getQuery() != o && g.getKey() != o && g.getValue() != o &&
         g.getGrad() != o;
}

std::optional<HeadSplitSource> headSplitSource(Value v) {
  auto t = tensorType(v);
  if (t.getRank() != 4)
    return std::nullopt;
  int64_t B = t.getDimSize(0), H = t.getDimSize(1), T = t.getDimSize(2), D = t.getDimSize(3);
  auto unitSlice = [](SliceOp sl) {
    return !sl->hasAttr(kCopySliceAttr) &&
           llvm::all_of(sl.getStrides(), [](int64_t s) { return s == 1; }) &&
           llvm::all_of(sl.getStarts().drop_back(), [](int64_t s) { return s == 0; });
  };
  Operation *def = v.getDefiningOp();
  if (isHeadTranspose(def)) {
    Value x = def->getOperand(0);
    // A piece of a fused [B, T, N] projection, split or sliced along N.
    if (auto r = x.getDefiningOp<ReshapeOp>()) {
      Value piece = r.getInput(), whole;
      int64_t start = 0;
      if (auto sp = piece.getDefiningOp<SplitOp>(); sp && sp.getAxis() == 2) {
        whole = sp.getInput();
        for (Value p : sp.getResults()) {
          if (p == piece)
            break;
          start += tensorType(p).getDimSize(2);
        }
      } else if (auto sl = piece.getDefiningOp<SliceOp>(); sl && unitSlice(sl)) {
        whole = sl.getInput();
        start = sl.getStarts().back();
      }
      if (whole) {
        auto wt = tensorType(whole), pt = tensorType(piece);
        if (wt.getRank() == 3 && pt.getRank() == 3 && wt.getDimSize(0) == B &&
            wt.getDimSize(1) == T && pt.getDimSize(0) == B && pt.getDimSize(1) == T) {
          int64_t n = wt.getDimSize(2);
          return HeadSplitSource{whole, start, {T * n, D, n}};
        }
      }
    }
    return HeadSplitSource{x, 0, transposedHeadStrides(t)};
  }
  // A slice or a split piece of the last axis of the head transpose of
  // [B, T, H, M] (exporters write GPT-NeoX's q, k, v either way).
  Value sliced;
  int64_t start = 0;
  if (auto sl = llvm::dyn_cast_or_null<SliceOp>(def); sl && unitSlice(sl)) {
    sliced = sl.getInput();
    start = sl.getStarts().back();
  } else if (auto sp = llvm::dyn_cast_or_null<SplitOp>(def); sp && sp.getAxis() == 3) {
    sliced = sp.getInput();
    start = offsetInLastAxis(sp.getResults(), v);
  }
  if (Operation *tr = sliced ? sliced.getDefiningOp() : nullptr; isHeadTranspose(tr)) {
    int64_t m = tensorType(tr->getOperand(0)).getDimSize(3);
    return HeadSplitSource{tr->getOperand(0), start, {T * H * m, m, H * m}};
  }
  return std::nullopt;
}

int64_t offsetInLastAxis(ValueRange pieces, Value p) {
  int64_t start = 0;
  for (Value in : pieces) {
    if (in == p)
      break;
    start += tensorType(in).getShape().back();
  }
  return start;
}

Value headPieceSource(Value p) {
  auto rs = p.getDefiningOp<ReshapeOp>();
  Operation *tr = rs && rs.getResult().hasOneUse() ? rs.getInput().getDefiningOp() : nullptr;
  if (!isHeadTranspose(tr) || !rs.getInput().hasOneUse())
    return {};
  Value r = tr->getOperand(0);
  if (!r.hasOneUse() || !llvm::isa_and_nonnull<RotaryOp, AttentionGradOp>(r.getDefiningOp()))
    return {};
  return r;
}

std::optional<TransposedDestination> transposedDestination(Value r) {
  auto t = tensorType(r);
  if (t.getRank() != 4 || !r.hasOneUse())
    return std::nullopt;
  int64_t H = t.getDimSize(1), T = t.getDimSize(2);
  Operation *u = *r.getUsers().begin();
  if (isHeadTranspose(u)) {
    // Through the reshape into a [B, T, N] concat whose every piece is such
    // a chain (tc-merge-projections' qkv gradient).
    auto rs = soleUser<ReshapeOp>(u->getResult(0));
    auto cat = rs ? soleUser<ConcatOp>(rs.getResult()) : ConcatOp();
    if (cat && tensorType(cat.getResult()).getRank() == 3 && cat.getAxis() == 2 &&
        tensorType(rs.getResult()).getRank() == 3 &&
        llvm::all_of(cat.getInputs(), [](Value p) { return static_cast<bool>(headPieceSource(p)); })) {
      int64_t n = tensorType(cat.getResult()).getDimSize(2), D = t.getDimSize(3);
      return TransposedDestination{u, cat, offsetInLastAxis(cat.getInputs(), rs.getResult()),
                                   {T * n, D, n}, rs};
    }
    return TransposedDestination{u, ConcatOp(), 0, transposedHeadStrides(t)};
  }
  auto cat = llvm::dyn_cast<ConcatOp>(u);
  if (!cat || cat.getAxis() != 3 || !cat.getResult().hasOneUse() ||
      !isHeadTranspose(*cat.getResult().getUsers().begin()))
    return std::nullopt;
  int64_t n = tensorType(cat.getResult()).getDimSize(3);
  return TransposedDestination{*cat.getResult().getUsers().begin(), cat,
                               offsetInLastAxis(cat.getInputs(), r), {T * H * n, n, H * n}};
}

std::optional<GradConcat> gradConcat(AttentionGradOp grad) {
  GradConcat gc;
  for (Value g : {grad.getDquery(), grad.getDkey(), grad.getDvalue()}) {
    Operation *tr = g.hasOneUse() ? *g.getUsers().begin() : nullptr;
    if (!isHeadTranspose(tr))
      return std::nullopt;
    auto rs = soleUser<ReshapeOp>(tr->getResult(0));
    auto c = rs ? soleUser<ConcatOp>(rs.getResult()) : ConcatOp();
    if (!c || (gc.concat && c != gc.concat))
      return std::nullopt;
    gc.concat = c;
    gc.chain.append({tr, rs});
  }
  auto ct = tensorType(gc.concat.getResult());
  auto qt = tensorType(grad.getQuery());
  if (ct.getRank() != 3 || gc.concat.getAxis() != 2 || gc.concat.getInputs().size() != 3 ||
      ct.getDimSize(0) != qt.getDimSize(0) || ct.getDimSize(1) != qt.getDimSize(2))
    return std::nullopt;
  return gc;
}

std::optional<GradHeadConcat> gradHeadConcat(AttentionGradOp grad) {
  GradHeadConcat gc;
  Value pieces[3];
  Value grads[3] = {grad.getDquery(), grad.getDkey(), grad.getDvalue()};
  for (int j = 0; j < 3; ++j) {
    Value g = grads[j];
    if (!g.hasOneUse())
      return std::nullopt;
    Operation *u = *g.getUsers().begin();
    if (auto r = llvm::dyn_cast<RotaryOp>(u); r && j < 2 && r.getInput() == g) {
      gc.rotaries[j] = r;
      g = r.getResult();
      if (!g.hasOneUse())
        return std::nullopt;
      u = *g.getUsers().begin();
    }
    auto c = llvm::dyn_cast<ConcatOp>(u);
    if (!c || (gc.concat && c != gc.concat))
      return std::nullopt;
    gc.concat = c;
    pieces[j] = g;
  }
  ConcatOp c = gc.concat;
  auto ct = tensorType(c.getResult());
  auto qt = tensorType(grad.getDquery());
  if (ct.getRank() != 4 || c.getAxis() != 3 || c.getInputs().size() != 3 ||
      ct.getShape().take_front(3) != qt.getShape().take_front(3) || !c.getResult().hasOneUse())
    return std::nullopt;
  for (int j = 0; j < 3; ++j) {
    if (llvm::count(c.getInputs(), pieces[j]) != 1)
      return std::nullopt;
    gc.offsets[j] = offsetInLastAxis(c.getInputs(), pieces[j]);
  }
  Operation *tr = *c.getResult().getUsers().begin();
  if (!isHeadTranspose(tr))
    return std::nullopt;
  auto rs = soleUser<ReshapeOp>(tr->getResult(0));
  if (!rs)
    return std::nullopt;
  auto wt = tensorType(rs.getResult());
  if (wt.getRank() != 3 || wt.getDimSize(0) != ct.getDimSize(0) ||
      wt.getDimSize(1) != ct.getDimSize(2) ||
      wt.getDimSize(2) != ct.getDimSize(1) * ct.getDimSize(3))
    return std::nullopt;
  gc.whole = rs.getResult();
  gc.headStride = ct.getDimSize(3);
  return gc;
}

bool isLoneCast(Operation *op, Type from, Type to) {
  if (!op || !llvm::isa<FusionOp>(op) || op->getNumOperands() != 1 ||
      op->getNumResults() != 1 || op->getNumRegions() != 1)
    return false;
  Block &body = op->getRegion(0).front();
  auto cast = llvm::dyn_cast<CastOp>(body.front());
  return cast && std::next(body.begin(), 2) == body.end() &&
         cast.getInput() == body.getArgument(0) &&
         tensorType(op->getOperand(0)).getElementType() == from &&
         tensorType(op->getResult(0)).getElementType() == to;
}

} // namespace tc
