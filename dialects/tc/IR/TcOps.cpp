//===- TcOps.cpp - tc dialect: verifiers, shape inference, folders --------===//
//
// Shape inference and verification share one set of helpers (the
// `inferReturnTypes` of each op), so that what the importer builds and what
// the verifier accepts cannot drift apart.
//
//===----------------------------------------------------------------------===//

#include "dialects/tc/IR/TcOps.h"

#include <cmath>

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace tc;

#include "dialects/tc/IR/TcOpsDialect.cpp.inc"

void TCDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/tc/IR/TcOps.cpp.inc"
      >();
}

Operation *TCDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  auto elements = llvm::dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}

void tc::registerTcDialect(DialectRegistry &registry) {
  registry.insert<TCDialect>();
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {
/// "2x3x4" (or "scalar") for messages.
std::string shapeStr(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  return llvm::join(llvm::map_range(shape,
                                    [](int64_t d) { return std::to_string(d); }),
                    "x");
}

RankedTensorType tensorType(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

LogicalResult emitOptionalError(std::optional<Location> loc, const Twine &msg) {
  if (loc)
    return emitError(*loc, msg);
  return failure();
}

LogicalResult checkStatic(std::optional<Location> loc, StringRef what,
                          RankedTensorType t) {
  if (!t.hasStaticShape())
    return emitOptionalError(loc, Twine(what) + " must have a static shape, got " +
                                      llvm::formatv("{0}", t).str());
  return success();
}

/// Normalises and checks one axis against a rank.
LogicalResult checkAxis(std::optional<Location> loc, int64_t axis, int64_t rank,
                        StringRef what = "axis") {
  if (axis < 0 || axis >= rank)
    return emitOptionalError(loc, Twine(what) + " " + Twine(axis) +
                                      " is out of range for rank " + Twine(rank));
  return success();
}
} // namespace

FailureOr<SmallVector<int64_t>> tc::broadcastShapes(ArrayRef<int64_t> a,
                                                    ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1)
      out[i] = da;
    else if (da == 1)
      out[i] = db;
    else
      return failure();
  }
  return out;
}

namespace {
LogicalResult inferBroadcast(std::optional<Location> loc, StringRef opName,
                             ArrayRef<RankedTensorType> types, Type elementType,
                             SmallVectorImpl<Type> &inferred) {
  SmallVector<int64_t> shape;
  for (auto [i, t] : llvm::enumerate(types)) {
    if (failed(checkStatic(loc, "operand #" + std::to_string(i), t)))
      return failure();
    auto b = broadcastShapes(shape, t.getShape());
    if (failed(b))
      return emitOptionalError(
          loc, Twine("'") + opName + "' operand shapes are not broadcastable: " +
                   llvm::join(llvm::map_range(types,
                                              [](RankedTensorType x) {
                                                return shapeStr(x.getShape());
                                              }),
                              " vs "));
    shape = *b;
  }
  inferred.push_back(RankedTensorType::get(shape, elementType));
  return success();
}

template <typename Adaptor>
LogicalResult inferBinary(std::optional<Location> loc, StringRef opName,
                          Adaptor adaptor, bool boolResult,
                          SmallVectorImpl<Type> &inferred) {
  auto lhs = tensorType(adaptor.getLhs());
  auto rhs = tensorType(adaptor.getRhs());
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(loc, llvm::formatv(
                                      "'{0}' operand element types differ: {1} vs {2}",
                                      opName, lhs.getElementType(),
                                      rhs.getElementType())
                                      .str());
  Type elt = boolResult ? IntegerType::get(lhs.getContext(), 1)
                        : lhs.getElementType();
  return inferBroadcast(loc, opName, {lhs, rhs}, elt, inferred);
}
} // namespace

#define TC_BINARY_INFER(OP, NAME, BOOL)                                        \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc, \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferBinary(loc, NAME, adaptor, BOOL, inferred);                    \
  }
TC_BINARY_INFER(AddOp, "tc.add", false)
TC_BINARY_INFER(SubOp, "tc.sub", false)
TC_BINARY_INFER(MulOp, "tc.mul", false)
TC_BINARY_INFER(DivOp, "tc.div", false)
TC_BINARY_INFER(PowOp, "tc.pow", false)
TC_BINARY_INFER(MaxOp, "tc.max", false)
TC_BINARY_INFER(MinOp, "tc.min", false)
TC_BINARY_INFER(RemOp, "tc.rem", false)
TC_BINARY_INFER(AndOp, "tc.and", false)
TC_BINARY_INFER(OrOp, "tc.or", false)
TC_BINARY_INFER(XorOp, "tc.xor", false)
TC_BINARY_INFER(EqOp, "tc.eq", true)
TC_BINARY_INFER(NeOp, "tc.ne", true)
TC_BINARY_INFER(LtOp, "tc.lt", true)
TC_BINARY_INFER(LeOp, "tc.le", true)
TC_BINARY_INFER(GtOp, "tc.gt", true)
TC_BINARY_INFER(GeOp, "tc.ge", true)
#undef TC_BINARY_INFER

//===----------------------------------------------------------------------===//
// Leaves
//===----------------------------------------------------------------------===//

LogicalResult ParameterOp::verify() {
  if (getName().empty())
    return emitOpError() << "needs a non-empty name";
  if (!getType().hasStaticShape())
    return emitOpError() << "parameter '" << getName()
                         << "' must have a static shape, got " << getType();
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError() << "approximate must be \"none\" or \"tanh\", got \""
                         << getApproximate() << "\"";
  return success();
}

#define TC_PREDICATE_INFER(OP)                                                 \
  LogicalResult OP::inferReturnTypes(MLIRContext *ctx, std::optional<Location>, \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    inferred.push_back(RankedTensorType::get(                                  \
        tensorType(adaptor.getInput()).getShape(), IntegerType::get(ctx, 1))); \
    return success();                                                          \
  }
TC_PREDICATE_INFER(IsNanOp)
TC_PREDICATE_INFER(IsInfOp)
#undef TC_PREDICATE_INFER

LogicalResult CastOp::verify() {
  auto in = tensorType(getInput());
  if (in.getShape() != getType().getShape())
    return emitOpError() << "input shape " << shapeStr(in.getShape())
                         << " != result shape " << shapeStr(getType().getShape());
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// Ternary
//===----------------------------------------------------------------------===//

LogicalResult SelectOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto c = tensorType(adaptor.getCond());
  auto t = tensorType(adaptor.getOnTrue());
  auto f = tensorType(adaptor.getOnFalse());
  if (t.getElementType() != f.getElementType())
    return emitOptionalError(
        loc, llvm::formatv("'tc.select' branch element types differ: {0} vs {1}",
                           t.getElementType(), f.getElementType())
                 .str());
  return inferBroadcast(loc, "tc.select", {c, t, f}, t.getElementType(), inferred);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

namespace {
template <typename Adaptor>
LogicalResult inferReduce(std::optional<Location> loc, StringRef opName,
                          Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  auto in = tensorType(adaptor.getInput());
  ArrayRef<int64_t> axes = adaptor.getAxes();
  int64_t rank = in.getRank();
  for (auto [i, a] : llvm::enumerate(axes)) {
    if (a < 0 || a >= rank)
      return emitOptionalError(loc, Twine("'") + opName + "' axis " + Twine(a) +
                                        " is out of range for input of rank " +
                                        Twine(rank));
    if (i > 0 && axes[i - 1] >= a)
      return emitOptionalError(loc, Twine("'") + opName +
                                        "' axes must be sorted and distinct");
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (llvm::is_contained(axes, d)) {
      if (adaptor.getKeepdims())
        shape.push_back(1);
    } else {
      shape.push_back(in.getDimSize(d));
    }
  }
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

template <typename Adaptor>
LogicalResult inferArgReduce(MLIRContext *ctx, std::optional<Location> loc,
                             StringRef opName, Adaptor adaptor,
                             SmallVectorImpl<Type> &inferred) {
  auto in = tensorType(adaptor.getInput());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, in.getRank(), (Twine(opName) + " axis").str())))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (d == axis) {
      if (adaptor.getKeepdims())
        shape.push_back(1);
    } else {
      shape.push_back(in.getDimSize(d));
    }
  }
  inferred.push_back(RankedTensorType::get(shape, IntegerType::get(ctx, 64)));
  return success();
}
} // namespace

#define TC_REDUCE_INFER(OP, NAME)                                              \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc, \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferReduce(loc, NAME, adaptor, inferred);                          \
  }
TC_REDUCE_INFER(ReduceSumOp, "tc.reduce_sum")
TC_REDUCE_INFER(ReduceMeanOp, "tc.reduce_mean")
TC_REDUCE_INFER(ReduceMaxOp, "tc.reduce_max")
TC_REDUCE_INFER(ReduceMinOp, "tc.reduce_min")
TC_REDUCE_INFER(ReduceProdOp, "tc.reduce_prod")
#undef TC_REDUCE_INFER

LogicalResult ArgMaxOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  return inferArgReduce(ctx, loc, "tc.argmax", adaptor, inferred);
}
LogicalResult ArgMinOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  return inferArgReduce(ctx, loc, "tc.argmin", adaptor, inferred);
}

LogicalResult CumSumOp::verify() {
  return checkAxis(getLoc(), getAxis(), getType().getRank());
}

//===----------------------------------------------------------------------===//
// Softmax, norms, losses
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  return checkAxis(getLoc(), getAxis(), getType().getRank());
}
LogicalResult LogSoftmaxOp::verify() {
  return checkAxis(getLoc(), getAxis(), getType().getRank());
}

namespace {
/// An amax result (tc-fuse-fp8-amax): a tensor<f32> scalar, when present.
LogicalResult verifyAmaxResult(Operation *op, Value amax) {
  if (!amax)
    return success();
  auto at = tensorType(amax);
  if (at.getRank() != 0 || !at.getElementType().isF32())
    return op->emitOpError() << "amax must be tensor<f32>, got " << at;
  return success();
}

LogicalResult verifyNormOperand(Operation *op, RankedTensorType in, int64_t axis,
                                Value v, StringRef what) {
  if (!v)
    return success();
  auto t = tensorType(v);
  ArrayRef<int64_t> expected = in.getShape().drop_front(axis);
  if (t.getShape() != expected)
    return op->emitOpError() << what << " shape " << shapeStr(t.getShape())
                             << " != normalised shape " << shapeStr(expected)
                             << " of input " << shapeStr(in.getShape());
  if (!llvm::isa<FloatType>(t.getElementType()))
    return op->emitOpError() << what << " element type " << t.getElementType()
                             << " is not a float type";
  return success();
}

/// scale and bias (when both present) share an element type; it may be wider
/// than the input's (bf16 rows, f32 parameters).
LogicalResult verifyNormParams(Operation *op, Value scale, Value bias) {
  if (scale && bias && tensorType(scale).getElementType() != tensorType(bias).getElementType())
    return op->emitOpError() << "scale element type " << tensorType(scale).getElementType()
                             << " != bias element type " << tensorType(bias).getElementType();
  return success();
}
} // namespace

LogicalResult LayerNormOp::verify() {
  auto in = tensorType(getInput());
  if (failed(checkAxis(getLoc(), getAxis(), in.getRank())) ||
      failed(verifyAmaxResult(*this, getAmax())))
    return failure();
  if (getResult().getType() != in)
    return emitOpError() << "result type " << getResult().getType() << " != input type " << in;
  if (getEpsilon().convertToDouble() < 0)
    return emitOpError() << "epsilon must be non-negative";
  if (failed(verifyNormOperand(*this, in, getAxis(), getScale(), "scale")) ||
      failed(verifyNormOperand(*this, in, getAxis(), getBias(), "bias")))
    return failure();
  return verifyNormParams(*this, getScale(), getBias());
}

namespace {
/// tc.layer_norm_grad / tc.rms_norm_grad: grad has the input's type, the
/// parameter gradients the normalised shape.
LogicalResult verifyNormGrad(Operation *op, Value input, Value grad, Value scale, int64_t axis,
                             double eps, ValueRange paramGrads) {
  auto in = tensorType(input);
  if (failed(checkAxis(op->getLoc(), axis, in.getRank())))
    return failure();
  if (eps < 0)
    return op->emitOpError() << "epsilon must be non-negative";
  if (grad.getType() != in)
    return op->emitOpError() << "grad type " << grad.getType() << " != input type " << in;
  if (op->getResult(0).getType() != in)
    return op->emitOpError() << "dinput type " << op->getResult(0).getType()
                             << " != input type " << in;
  if (failed(verifyNormOperand(op, in, axis, scale, "scale")))
    return failure();
  // Parameter gradients: the normalised shape, in the scale's element type
  // (any one float type without a scale: the bias's, which this op does not see).
  Type pe = scale ? tensorType(scale).getElementType()
                  : tensorType(paramGrads.front()).getElementType();
  auto want = RankedTensorType::get(in.getShape().drop_front(axis), pe);
  for (Value g : paramGrads)
    if (g.getType() != want || !llvm::isa<FloatType>(pe))
      return op->emitOpError() << "parameter gradient type " << g.getType() << " != " << want;
  return success();
}
} // namespace

LogicalResult LayerNormGradOp::verify() {
  return verifyNormGrad(*this, getInput(), getGrad(), getScale(), getAxis(),
                        getEpsilon().convertToDouble(), {getDscale(), getDbias()});
}

LogicalResult RmsNormGradOp::verify() {
  return verifyNormGrad(*this, getInput(), getGrad(), getScale(), getAxis(),
                        getEpsilon().convertToDouble(), {getDscale()});
}

LogicalResult RmsNormOp::verify() {
  auto in = tensorType(getInput());
  if (failed(checkAxis(getLoc(), getAxis(), in.getRank())) ||
      failed(verifyAmaxResult(*this, getAmax())))
    return failure();
  if (getResult().getType() != in)
    return emitOpError() << "result type " << getResult().getType() << " != input type " << in;
  if (getEpsilon().convertToDouble() < 0)
    return emitOpError() << "epsilon must be non-negative";
  return verifyNormOperand(*this, in, getAxis(), getScale(), "scale");
}

namespace {
template <typename Adaptor>
LogicalResult inferLoss(std::optional<Location> loc, StringRef opName,
                        Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  auto in = tensorType(adaptor.getInput());
  auto labels = tensorType(adaptor.getLabels());
  if (in.getRank() != 2)
    return emitOptionalError(loc, Twine("'") + opName +
                                      "' input must be [N, C], got " +
                                      shapeStr(in.getShape()));
  if (labels.getRank() != 1 || labels.getDimSize(0) != in.getDimSize(0))
    return emitOptionalError(loc, Twine("'") + opName + "' labels shape " +
                                      shapeStr(labels.getShape()) +
                                      " does not match input rows " +
                                      shapeStr(in.getShape()) + " (want [N])");
  if (Value w = adaptor.getWeight()) {
    auto wt = tensorType(w);
    if (wt.getRank() != 1 || wt.getDimSize(0) != in.getDimSize(1))
      return emitOptionalError(loc, Twine("'") + opName + "' weight shape " +
                                        shapeStr(wt.getShape()) +
                                        " does not match class count " +
                                        Twine(in.getDimSize(1)));
  }
  StringRef red = adaptor.getReduction();
  if (red == "none")
    inferred.push_back(
        RankedTensorType::get({in.getDimSize(0)}, in.getElementType()));
  else if (red == "mean" || red == "sum")
    inferred.push_back(RankedTensorType::get({}, in.getElementType()));
  else
    return emitOptionalError(loc, Twine("'") + opName +
                                      "' reduction must be mean, sum or none, got " +
                                      red);
  return success();
}
} // namespace

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &inferred) {
  return inferLoss(loc, "tc.cross_entropy", adaptor, inferred);
}
LogicalResult NllLossOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  return inferLoss(loc, "tc.nll_loss", adaptor, inferred);
}

//===----------------------------------------------------------------------===//
// Matmul, gather
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto a = tensorType(adaptor.getLhs());
  auto b = tensorType(adaptor.getRhs());
  if (a.getRank() < 2 || b.getRank() < 2)
    return emitOptionalError(loc, "'tc.matmul' operands need rank >= 2, got " +
                                      shapeStr(a.getShape()) + " and " +
                                      shapeStr(b.getShape()));
  if (a.getElementType() != b.getElementType())
    return emitOptionalError(
        loc, llvm::formatv("'tc.matmul' operand element types differ: {0} vs {1}",
                           a.getElementType(), b.getElementType())
                 .str());
  int64_t ra = a.getRank(), rb = b.getRank();
  int64_t m = adaptor.getTransposeLhs() ? a.getDimSize(ra - 1) : a.getDimSize(ra - 2);
  int64_t k1 = adaptor.getTransposeLhs() ? a.getDimSize(ra - 2) : a.getDimSize(ra - 1);
  int64_t k2 = adaptor.getTransposeRhs() ? b.getDimSize(rb - 1) : b.getDimSize(rb - 2);
  int64_t n = adaptor.getTransposeRhs() ? b.getDimSize(rb - 2) : b.getDimSize(rb - 1);
  if (k1 != k2)
    return emitOptionalError(loc, "'tc.matmul' lhs K " + Twine(k1) + " != rhs K " +
                                      Twine(k2) + " (lhs " + shapeStr(a.getShape()) +
                                      ", rhs " + shapeStr(b.getShape()) + ")");
  auto batch = broadcastShapes(a.getShape().drop_back(2), b.getShape().drop_back(2));
  if (failed(batch))
    return emitOptionalError(loc, "'tc.matmul' batch dimensions do not broadcast: " +
                                      shapeStr(a.getShape()) + " vs " +
                                      shapeStr(b.getShape()));
  SmallVector<int64_t> shape = *batch;
  shape.push_back(m);
  shape.push_back(n);
  inferred.push_back(RankedTensorType::get(shape, a.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Scaled narrow formats
//===----------------------------------------------------------------------===//

namespace {
/// The element formats tc.quantize writes and tc.scaled_matmul reads.
bool isScaledElement(Type t) { return llvm::isa<Float8E4M3FNType, Float8E5M2Type, Float4E2M1FNType>(t); }
/// The formats of their scales: f32 factors or OCP MX's E8M0 powers of two.
bool isScaleElement(Type t) { return t.isF32() || llvm::isa<Float8E8M0FNUType>(t); }

/// Checks that `scale` fits operand `value` as a grid of blocks: same rank,
/// each dimension at least 1 and at most the operand's.
LogicalResult verifyScaleGrid(Operation *op, const char *what, RankedTensorType value,
                              RankedTensorType scale) {
  if (!isScaleElement(scale.getElementType()))
    return op->emitOpError() << what << " scale must be f32 or f8E8M0FNU, got "
                             << scale.getElementType();
  if (scale.getRank() != value.getRank())
    return op->emitOpError() << what << " scale " << shapeStr(scale.getShape())
                             << " must have the rank of its operand " << shapeStr(value.getShape());
  for (int64_t d = 0; d < value.getRank(); ++d)
    if (scale.getDimSize(d) < 1 || scale.getDimSize(d) > value.getDimSize(d))
      return op->emitOpError() << what << " scale " << shapeStr(scale.getShape())
                               << " is not a grid of blocks of " << shapeStr(value.getShape());
  return success();
}
} // namespace

LogicalResult QuantizeOp::verify() {
  auto in = tensorType(getInput()), q = tensorType(getResult()), sc = tensorType(getScaleInv());
  if (q.getShape() != in.getShape())
    return emitOpError() << "result shape " << shapeStr(q.getShape()) << " != input shape "
                         << shapeStr(in.getShape());
  if (!isScaledElement(q.getElementType()))
    return emitOpError() << "result must be f8E4M3FN, f8E5M2 or f4E2M1FN, got "
                         << q.getElementType();
  ArrayRef<int64_t> block = getBlock();
  if ((int64_t)block.size() != in.getRank())
    return emitOpError() << "block has " << block.size() << " entries for a rank-"
                         << in.getRank() << " input";
  SmallVector<int64_t> grid;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (block[d] < 1 || block[d] > in.getDimSize(d))
      return emitOpError() << "block " << shapeStr(block) << " does not fit input "
                           << shapeStr(in.getShape()) << " (dimension " << d << ")";
    grid.push_back((in.getDimSize(d) + block[d] - 1) / block[d]);
  }
  if (!isScaleElement(sc.getElementType()))
    return emitOpError() << "scale_inv must be f32 or f8E8M0FNU, got " << sc.getElementType();
  if (sc.getShape() != ArrayRef<int64_t>(grid))
    return emitOpError() << "scale_inv shape " << shapeStr(sc.getShape()) << " != "
                         << shapeStr(grid) << " (input " << shapeStr(in.getShape())
                         << " in blocks of " << shapeStr(block) << ")";
  if (getPow2Scale() && !sc.getElementType().isF32())
    return emitOpError() << "pow2_scale rounds f32 scales, not " << sc.getElementType();
  if (Value amax = getAmax()) {
    auto at = tensorType(amax);
    if (at.getRank() != 0 || !at.getElementType().isF32())
      return emitOpError() << "amax must be tensor<f32>, got " << at;
    if (!sc.getElementType().isF32() || sc.getNumElements() != 1)
      return emitOpError() << "an amax operand is the tensor's: it needs per-tensor scaling "
                              "(block = the input's shape) with f32 scale_inv, got scale_inv "
                           << sc;
  }
  return success();
}

LogicalResult QuantizeDelayedOp::verify() {
  auto in = tensorType(getInput()), q = tensorType(getResult());
  if (in.getRank() != 2)
    return emitOpError() << "input must be a matrix, got " << in;
  if (!in.getElementType().isF32() && !in.getElementType().isBF16())
    return emitOpError() << "input must be f32 or bf16, got " << in.getElementType();
  if (q.getShape() != in.getShape())
    return emitOpError() << "result shape " << shapeStr(q.getShape()) << " != input shape "
                         << shapeStr(in.getShape());
  if (!llvm::isa<Float8E4M3FNType, Float8E5M2Type>(q.getElementType()))
    return emitOpError() << "result must be f8E4M3FN or f8E5M2, got " << q.getElementType();
  for (Value v : {getScale(), getAmax(), getSaturated()}) {
    auto t = tensorType(v);
    if (t.getRank() != 0 || !t.getElementType().isF32())
      return emitOpError() << "scale, amax and saturated must be tensor<f32>, got " << t;
  }
  if (Value qt = getResultT()) {
    auto t = tensorType(qt);
    if (t.getElementType() != q.getElementType() || t.getRank() != 2 ||
        t.getDimSize(0) != in.getDimSize(1) || t.getDimSize(1) != in.getDimSize(0))
      return emitOpError() << "result_t must be the transposed " << q << ", got " << t;
  }
  return success();
}

LogicalResult Fp8ScaleUpdateOp::verify() {
  for (Value v : {getAmax(), getScale(), getNextScale(), getScaleInv()}) {
    auto t = tensorType(v);
    if (t.getRank() != 0 || !t.getElementType().isF32())
      return emitOpError() << "amax, scale, next_scale and scale_inv must be tensor<f32>, got "
                           << t;
  }
  double fmax = getFmax().convertToDouble();
  if (!(fmax > 0) || std::isinf(fmax))
    return emitOpError() << "fmax must be a positive finite number, got " << fmax;
  if (static_cast<bool>(getHistory()) != static_cast<bool>(getNextHistory()))
    return emitOpError() << "next_history is present exactly when history is";
  if (Value h = getHistory()) {
    auto t = tensorType(h);
    if (t.getRank() != 1 || !t.getElementType().isF32() || t.getDimSize(0) < 1)
      return emitOpError() << "history must be a non-empty f32 vector, got " << t;
    if (tensorType(getNextHistory()) != t)
      return emitOpError() << "next_history must be of history's type " << t << ", got "
                           << tensorType(getNextHistory());
  }
  return success();
}

LogicalResult FakeQuantizeOp::verify() {
  auto in = tensorType(getInput());
  StringRef f = getFormat();
  if (f != "nvfp4" && f != "mxfp4")
    return emitOpError() << "format must be nvfp4 or mxfp4, got '" << f << "'";
  if (in.getRank() < 1)
    return emitOpError() << "input must have rank >= 1";
  int64_t axis = getAxis();
  if (axis < -in.getRank() || axis >= in.getRank())
    return emitOpError() << "axis " << axis << " out of range for rank " << in.getRank();
  if (getBlocks2d() && (f != "nvfp4" || in.getRank() != 2))
    return emitOpError() << "blocks2d (16x16 blocks) needs format nvfp4 and a rank-2 input";
  if (getStochastic() != static_cast<bool>(getStep()))
    return emitOpError() << (getStochastic() ? "stochastic rounding needs the step operand"
                                             : "a step operand needs stochastic = true");
  if (auto st = getStep() ? tensorType(getStep()) : RankedTensorType();
      st && (st.getNumElements() != 1 || !st.getElementType().isF32()))
    return emitOpError() << "step must be one f32 value";
  if (getUnscaled() && f != "nvfp4")
    return emitOpError() << "unscaled (the values times their block scales, the tensor scale "
                            "apart) needs format nvfp4";
  if (getUnscaled() != static_cast<bool>(getTensorScale()))
    return emitOpError() << (getUnscaled() ? "unscaled needs the tensor_scale result"
                                           : "a tensor_scale result needs unscaled = true");
  if (auto ts = getTensorScale() ? tensorType(getTensorScale()) : RankedTensorType();
      ts && (ts.getRank() != 0 || !ts.getElementType().isF32()))
    return emitOpError() << "tensor_scale must be tensor<f32>, got " << ts;
  return success();
}

LogicalResult MatmulOp::verify() {
  if (!getAlpha())
    return success();
  auto at = tensorType(getAlpha());
  if (at.getNumElements() != 1 || !at.getElementType().isF32())
    return emitOpError() << "alpha must be one f32 value, got " << at;
  if (!isa<FloatType>(tensorType(getLhs()).getElementType()))
    return emitOpError() << "alpha scales float products only";
  return success();
}

LogicalResult ScaledMatmulOp::verify() {
  auto a = tensorType(getLhs()), b = tensorType(getRhs()), r = tensorType(getResult());
  if (a.getRank() != 2 || b.getRank() != 2)
    return emitOpError() << "operands must be rank 2, got " << shapeStr(a.getShape()) << " and "
                         << shapeStr(b.getShape());
  if (!isScaledElement(a.getElementType()) || !isScaledElement(b.getElementType()))
    return emitOpError() << "operands must be f8E4M3FN, f8E5M2 or f4E2M1FN, got "
                         << a.getElementType() << " and " << b.getElementType();
  if (failed(verifyScaleGrid(*this, "lhs", a, tensorType(getLhsScaleInv()))) ||
      failed(verifyScaleGrid(*this, "rhs", b, tensorType(getRhsScaleInv()))))
    return failure();
  int64_t m = getTransposeLhs() ? a.getDimSize(1) : a.getDimSize(0);
  int64_t k1 = getTransposeLhs() ? a.getDimSize(0) : a.getDimSize(1);
  int64_t k2 = getTransposeRhs() ? b.getDimSize(1) : b.getDimSize(0);
  int64_t n = getTransposeRhs() ? b.getDimSize(0) : b.getDimSize(1);
  if (k1 != k2)
    return emitOpError() << "contraction sizes differ: " << k1 << " vs " << k2 << " (lhs "
                         << shapeStr(a.getShape()) << ", rhs " << shapeStr(b.getShape()) << ")";
  if (r.getShape() != ArrayRef<int64_t>{m, n})
    return emitOpError() << "result shape " << shapeStr(r.getShape()) << " != " << m << "x" << n;
  if (!r.getElementType().isBF16() && !r.getElementType().isF16() && !r.getElementType().isF32())
    return emitOpError() << "result must be bf16, f16 or f32, got " << r.getElementType();
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {
/// Checks the operands shared by tc.attention and tc.attention_grad and
/// returns the [B, H, Tq, Dv] result shape and [B, H, Tq] lse shape.
LogicalResult verifyAttentionOperands(Operation *op, Value q, Value k, Value v, double scale,
                                      SmallVectorImpl<int64_t> &resultShape,
                                      SmallVectorImpl<int64_t> &lseShape) {
  auto qt = tensorType(q), kt = tensorType(k), vt = tensorType(v);
  if (qt.getRank() != 4 || kt.getRank() != 4 || vt.getRank() != 4)
    return op->emitOpError() << "query, key and value must be [batch, heads, tokens, dim], got "
                             << shapeStr(qt.getShape()) << ", " << shapeStr(kt.getShape())
                             << ", " << shapeStr(vt.getShape());
  if (kt.getElementType() != qt.getElementType() || vt.getElementType() != qt.getElementType())
    return op->emitOpError() << "query, key and value element types differ: "
                             << qt.getElementType() << ", " << kt.getElementType() << ", "
                             << vt.getElementType();
  ArrayRef<int64_t> qs = qt.getShape(), ks = kt.getShape(), vs = vt.getShape();
  if (ks[0] != qs[0] || vs[0] != qs[0])
    return op->emitOpError() << "batch sizes differ: query " << shapeStr(qs) << ", key "
                             << shapeStr(ks) << ", value " << shapeStr(vs);
  if (vs[1] != ks[1] || vs[2] != ks[2])
    return op->emitOpError() << "key " << shapeStr(ks) << " and value " << shapeStr(vs)
                             << " differ in heads or tokens";
  if (ks[1] == 0 || qs[1] % ks[1] != 0)
    return op->emitOpError() << "query heads (" << qs[1]
                             << ") must be a multiple of the key/value heads (" << ks[1] << ")";
  if (ks[3] != qs[3])
    return op->emitOpError() << "query dim " << qs[3] << " != key dim " << ks[3];
  if (!(scale > 0) || !std::isfinite(scale))
    return op->emitOpError() << "scale must be positive and finite, got " << scale;
  resultShape.assign({qs[0], qs[1], qs[2], vs[3]});
  lseShape.assign({qs[0], qs[1], qs[2]});
  return success();
}

/// lse is f32, or f64 for f64 operands (the fp64 reference and its checks).
Type lseElementType(Type elt) {
  return elt.isF64() ? elt : Float32Type::get(elt.getContext());
}

LogicalResult expectType(Operation *op, Value v, ArrayRef<int64_t> shape, Type elt,
                         StringRef what) {
  auto t = tensorType(v);
  if (t.getShape() != shape || t.getElementType() != elt)
    return op->emitOpError() << what << " must be " << RankedTensorType::get(shape, elt)
                             << ", got " << v.getType();
  return success();
}
} // namespace

/// key_mask [B, Tk] i1 and a mask_fill that is -inf or finite and very
/// negative.
LogicalResult verifyKeyMask(Operation *op, Value q, Value k, Value mask,
                            std::optional<APFloat> fill) {
  if (fill) {
    double f = fill->convertToDouble();
    if (!(f < 0) || std::isnan(f))
      return op->emitOpError() << "mask_fill must be negative (-inf or a very negative finite "
                                  "value), got "
                               << f;
  }
  if (!mask)
    return success();
  auto mt = tensorType(mask);
  int64_t b = tensorType(q).getDimSize(0), tk = tensorType(k).getDimSize(2);
  if (mt.getRank() != 2 || mt.getDimSize(0) != b || mt.getDimSize(1) != tk)
    return op->emitOpError() << "key_mask must be [batch, keys] = " << shapeStr({b, tk})
                             << ", got " << shapeStr(mt.getShape());
  return success();
}

LogicalResult AttentionOp::verify() {
  SmallVector<int64_t> rs, ls;
  if (failed(verifyAttentionOperands(*this, getQuery(), getKey(), getValue(),
                                     getScale().convertToDouble(), rs, ls)) ||
      failed(verifyKeyMask(*this, getQuery(), getKey(), getKeyMask(), getMaskFill())) ||
      failed(verifyAmaxResult(*this, getAmax())))
    return failure();
  Type elt = tensorType(getQuery()).getElementType();
  if (failed(expectType(*this, getResult(), rs, elt, "result")))
    return failure();
  return expectType(*this, getLse(), ls, lseElementType(elt), "lse");
}

LogicalResult AttentionGradOp::verify() {
  SmallVector<int64_t> rs, ls;
  if (failed(verifyAttentionOperands(*this, getQuery(), getKey(), getValue(),
                                     getScale().convertToDouble(), rs, ls)) ||
      failed(verifyKeyMask(*this, getQuery(), getKey(), getKeyMask(), getMaskFill())) ||
      failed(verifyAmaxResult(*this, getAmax())))
    return failure();
  std::optional<uint64_t> of = getAmaxOf();
  if (bool(of) != bool(getAmax()))
    return emitOpError() << "amax and amax_of go together";
  if (of && (*of < 1 || *of > 7))
    return emitOpError() << "amax_of is a mask of the gradients (1 dquery, 2 dkey, 4 dvalue), got "
                         << *of;
  Type elt = tensorType(getQuery()).getElementType();
  if (failed(expectType(*this, getResult(), rs, elt, "result operand")) ||
      failed(expectType(*this, getGrad(), rs, elt, "grad")) ||
      failed(expectType(*this, getLse(), ls, lseElementType(elt), "lse")) ||
      failed(expectType(*this, getDquery(), tensorType(getQuery()).getShape(), elt, "dquery")) ||
      failed(expectType(*this, getDkey(), tensorType(getKey()).getShape(), elt, "dkey")))
    return failure();
  return expectType(*this, getDvalue(), tensorType(getValue()).getShape(), elt, "dvalue");
}

LogicalResult RotaryOp::verify() {
  auto xt = tensorType(getInput()), ct = tensorType(getCos()), st = tensorType(getSin());
  if (xt.getRank() != 4)
    return emitOpError() << "input must be [batch, heads, seq, dim], got " << shapeStr(xt.getShape());
  if (ct != st)
    return emitOpError() << "cos " << ct << " and sin " << st << " differ";
  if (ct.getElementType() != xt.getElementType())
    return emitOpError() << "cos/sin element type " << ct.getElementType() << " != input's "
                         << xt.getElementType();
  ArrayRef<int64_t> x = xt.getShape();
  if (ct.getRank() != 3 || ct.getDimSize(0) != x[0] || ct.getDimSize(1) != x[2])
    return emitOpError() << "cos/sin must be [batch, seq, rotary_dim / 2] = [" << x[0] << ", "
                         << x[2] << ", R/2], got " << shapeStr(ct.getShape());
  if (2 * ct.getDimSize(2) > x[3] || ct.getDimSize(2) == 0)
    return emitOpError() << "rotary dim " << 2 * ct.getDimSize(2) << " must be in [2, " << x[3]
                         << "]";
  if (getResult().getType() != xt)
    return emitOpError() << "result must be " << xt << ", got " << getResult().getType();
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto data = tensorType(adaptor.getData());
  auto idx = tensorType(adaptor.getIndices());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, data.getRank(), "'tc.gather' axis")))
    return failure();
  SmallVector<int64_t> shape(data.getShape().take_front(axis));
  llvm::append_range(shape, idx.getShape());
  llvm::append_range(shape, data.getShape().drop_front(axis + 1));
  inferred.push_back(RankedTensorType::get(shape, data.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = tensorType(getInput());
  if (!in.hasStaticShape() || !getType().hasStaticShape())
    return emitOpError() << "needs static shapes";
  if (in.getNumElements() != getType().getNumElements())
    return emitOpError() << "input " << shapeStr(in.getShape()) << " has "
                         << in.getNumElements() << " elements but result "
                         << shapeStr(getType().getShape()) << " has "
                         << getType().getNumElements();
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  if (auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(getType());
  return {};
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto in = tensorType(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if ((int64_t)perm.size() != in.getRank())
    return emitOptionalError(loc, "'tc.transpose' permutation has " +
                                      Twine(perm.size()) + " entries for rank " +
                                      Twine(in.getRank()));
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.getRank() || seen[p])
      return emitOptionalError(loc, "'tc.transpose' permutation is not a "
                                    "permutation of [0, rank)");
    seen[p] = true;
    shape.push_back(in.getDimSize(p));
  }
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult BroadcastOp::verify() {
  auto in = tensorType(getInput());
  auto b = broadcastShapes(in.getShape(), getType().getShape());
  if (failed(b) || ArrayRef<int64_t>(*b) != getType().getShape())
    return emitOpError() << "cannot broadcast " << shapeStr(in.getShape())
                         << " to " << shapeStr(getType().getShape());
  return success();
}

LogicalResult SliceOp::verify() {
  auto in = tensorType(getInput());
  auto out = getType();
  int64_t rank = in.getRank();
  if (out.getRank() != rank || (int64_t)getStarts().size() != rank ||
      (int64_t)getStrides().size() != rank)
    return emitOpError() << "input rank " << rank << ", result rank "
                         << out.getRank() << ", " << getStarts().size()
                         << " starts and " << getStrides().size()
                         << " strides must all agree";
  for (int64_t d = 0; d < rank; ++d) {
    int64_t s = getStarts()[d], st = getStrides()[d], n = out.getDimSize(d);
    if (st == 0)
      return emitOpError() << "stride of dimension " << d << " is 0";
    if (n == 0)
      continue;
    int64_t last = s + (n - 1) * st;
    if (s < 0 || s >= in.getDimSize(d) || last < 0 || last >= in.getDimSize(d))
      return emitOpError() << "dimension " << d << ": start " << s << ", stride "
                           << st << ", size " << n << " leave the input extent "
                           << in.getDimSize(d);
  }
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(loc, "'tc.concat' needs at least one input");
  auto first = tensorType(adaptor.getInputs().front());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, axis, first.getRank(), "'tc.concat' axis")))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (auto [i, v] : llvm::enumerate(adaptor.getInputs())) {
    auto t = tensorType(v);
    if (t.getRank() != first.getRank() ||
        t.getElementType() != first.getElementType())
      return emitOptionalError(loc, "'tc.concat' input #" + Twine(i) +
                                        " differs in rank or element type");
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != axis && t.getDimSize(d) != first.getDimSize(d))
        return emitOptionalError(loc, "'tc.concat' input #" + Twine(i) + " shape " +
                                          shapeStr(t.getShape()) + " differs from " +
                                          shapeStr(first.getShape()) +
                                          " outside axis " + Twine(axis));
    // Sizes near INT64_MAX come from malformed models (found by fuzzing).
    if (llvm::AddOverflow(shape[axis], t.getDimSize(axis), shape[axis]))
      return emitOptionalError(loc, "'tc.concat' result size along axis " + Twine(axis) +
                                        " overflows 64 bits");
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult SplitOp::verify() {
  auto in = tensorType(getInput());
  int64_t axis = getAxis();
  if (failed(checkAxis(getLoc(), axis, in.getRank())))
    return failure();
  if (getResults().empty())
    return emitOpError() << "needs at least one result";
  int64_t total = 0;
  for (auto [i, r] : llvm::enumerate(getResults())) {
    auto t = tensorType(r);
    if (t.getRank() != in.getRank() || t.getElementType() != in.getElementType())
      return emitOpError() << "result #" << i << " differs in rank or element type";
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != axis && t.getDimSize(d) != in.getDimSize(d))
        return emitOpError() << "result #" << i << " shape " << shapeStr(t.getShape())
                             << " differs from input " << shapeStr(in.getShape())
                             << " outside axis " << axis;
    total += t.getDimSize(axis);
  }
  if (total != in.getDimSize(axis))
    return emitOpError() << "result sizes along axis " << axis << " add up to "
                         << total << ", input has " << in.getDimSize(axis);
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  auto in = tensorType(adaptor.getInput());
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh();
  if ((int64_t)low.size() != in.getRank() || (int64_t)high.size() != in.getRank())
    return emitOptionalError(loc, "'tc.pad' needs one low and one high pad per "
                                  "dimension");
  StringRef mode = adaptor.getMode();
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return emitOptionalError(loc, "'tc.pad' mode must be constant, reflect or edge, got " +
                                      mode);
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (low[d] < 0 || high[d] < 0)
      return emitOptionalError(loc, "'tc.pad' pads must be non-negative");
    if (mode == "reflect" && (low[d] >= in.getDimSize(d) || high[d] >= in.getDimSize(d)))
      return emitOptionalError(loc, "'tc.pad' reflect pad must be smaller than the "
                                    "dimension");
    if (mode == "edge" && in.getDimSize(d) == 0 && (low[d] || high[d]))
      return emitOptionalError(loc, "'tc.pad' edge pad of an empty dimension");
    shape.push_back(in.getDimSize(d) + low[d] + high[d]);
  }
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient support
//===----------------------------------------------------------------------===//

LogicalResult ScatterAddOp::verify() {
  auto upd = tensorType(getUpdates());
  auto idx = tensorType(getIndices());
  auto out = getType();
  if (failed(checkStatic(getLoc(), "result", out)))
    return failure();
  int64_t axis = getAxis();
  if (failed(checkAxis(getLoc(), axis, out.getRank())))
    return failure();
  if (upd.getElementType() != out.getElementType())
    return emitOpError() << "updates element type " << upd.getElementType()
                         << " != result element type " << out.getElementType();
  SmallVector<int64_t> expected(out.getShape().take_front(axis));
  llvm::append_range(expected, idx.getShape());
  llvm::append_range(expected, out.getShape().drop_front(axis + 1));
  if (upd.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "updates shape " << shapeStr(upd.getShape())
                         << " != " << shapeStr(expected)
                         << " (result shape before axis " << axis
                         << ", indices shape, result shape after it)";
  return success();
}

LogicalResult InsertSliceOp::verify() {
  auto src = tensorType(getSource());
  auto out = getType();
  int64_t rank = out.getRank();
  if (src.getRank() != rank || (int64_t)getStarts().size() != rank ||
      (int64_t)getStrides().size() != rank)
    return emitOpError() << "source rank " << src.getRank() << ", result rank "
                         << rank << ", " << getStarts().size() << " starts and "
                         << getStrides().size() << " strides must all agree";
  if (failed(checkStatic(getLoc(), "result", out)) ||
      failed(checkStatic(getLoc(), "source", src)))
    return failure();
  for (int64_t d = 0; d < rank; ++d) {
    int64_t s = getStarts()[d], st = getStrides()[d], n = src.getDimSize(d);
    if (st == 0)
      return emitOpError() << "stride of dimension " << d << " is 0";
    if (n == 0)
      continue;
    int64_t last = s + (n - 1) * st;
    if (s < 0 || s >= out.getDimSize(d) || last < 0 || last >= out.getDimSize(d))
      return emitOpError() << "dimension " << d << ": start " << s << ", stride "
                           << st << ", size " << n << " leave the result extent "
                           << out.getDimSize(d);
  }
  return success();
}

namespace {
/// The loss-gradient ops accept exactly what their forward op accepts (the
/// same helper checks both), `grad` has the forward result's type and the
/// result has the input's type.
template <typename OpT>
LogicalResult verifyLossGrad(OpT op, StringRef forwardName) {
  SmallVector<Type> forward;
  if (failed(inferLoss(op.getLoc(), forwardName, op, forward)))
    return failure();
  if (op.getGrad().getType() != forward.front())
    return op.emitOpError() << "grad type " << op.getGrad().getType()
                            << " != the type of the " << forwardName
                            << " result " << forward.front() << " (reduction \""
                            << op.getReduction() << "\")";
  if (op.getType() != op.getInput().getType())
    return op.emitOpError() << "result type " << op.getType()
                            << " != input type " << op.getInput().getType();
  return success();
}
} // namespace

LogicalResult CrossEntropyGradOp::verify() {
  return verifyLossGrad(*this, "tc.cross_entropy");
}
LogicalResult NllLossGradOp::verify() {
  return verifyLossGrad(*this, "tc.nll_loss");
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

bool tc::isTrailingReduction(Operation *op) {
  if (!llvm::isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp>(op))
    return false;
  auto axes = llvm::cast<DenseI64ArrayAttr>(op->getAttr("axes")).asArrayRef();
  int64_t rank = tensorType(op->getOperand(0)).getRank();
  if (axes.empty())
    return false;
  for (auto [i, a] : llvm::enumerate(axes))
    if (a != rank - (int64_t)axes.size() + (int64_t)i)
      return false;
  return true;
}

bool tc::isLeadingColumnSum(Operation *op) {
  if (!llvm::isa<ReduceSumOp>(op))
    return false;
  auto axes = llvm::cast<DenseI64ArrayAttr>(op->getAttr("axes")).asArrayRef();
  int64_t rank = tensorType(op->getOperand(0)).getRank();
  if (rank < 2 || (int64_t)axes.size() != rank - 1)
    return false;
  for (auto [i, a] : llvm::enumerate(axes))
    if (a != (int64_t)i)
      return false;
  return true;
}

FusionOp tc::growFusion(FusionOp fusion, Type type,
                        llvm::function_ref<Value(OpBuilder &, ValueRange)> make) {
  OpBuilder b(fusion);
  SmallVector<Type> types(fusion.getResultTypes());
  types.push_back(type);
  auto grown = FusionOp::create(b, fusion.getLoc(), types, fusion.getInputs());
  grown.getBody().takeBody(fusion.getBody());
  auto yield = llvm::cast<YieldOp>(grown.getBody().front().getTerminator());
  OpBuilder bb(yield);
  SmallVector<Value> yielded(yield.getOperands());
  yielded.push_back(make(bb, yield.getOperands()));
  YieldOp::create(bb, yield.getLoc(), yielded);
  yield.erase();
  for (auto [from, to] : llvm::zip(fusion.getResults(), grown.getResults()))
    from.replaceAllUsesWith(to);
  fusion.erase();
  return grown;
}

Value tc::otherOperand(Operation *op, Value v) {
  if (op->getNumOperands() != 2)
    return {};
  if (op->getOperand(0) == v && op->getOperand(1) != v)
    return op->getOperand(1);
  if (op->getOperand(1) == v && op->getOperand(0) != v)
    return op->getOperand(0);
  return {};
}

std::optional<double> tc::splatFloatValue(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto dense = llvm::dyn_cast<DenseElementsAttr>(c.getValue());
  if (!dense || !llvm::isa<FloatType>(dense.getElementType()) || dense.getNumElements() == 0)
    return std::nullopt;
  if (dense.isSplat())
    return dense.getSplatValue<APFloat>().convertToDouble();
  auto values = dense.getValues<APFloat>();
  double first = (*values.begin()).convertToDouble();
  for (APFloat x : values)
    if (x.convertToDouble() != first)
      return std::nullopt;
  return first;
}

bool tc::isLastAxisSoftmax(Operation *op) {
  if (!llvm::isa<SoftmaxOp, LogSoftmaxOp>(op))
    return false;
  int64_t rank = tensorType(op->getOperand(0)).getRank();
  auto axis = llvm::cast<IntegerAttr>(op->getAttr("axis")).getInt();
  return rank >= 1 && axis == rank - 1;
}

LogicalResult FusionOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "body has " << body.getNumArguments()
                         << " arguments for " << getInputs().size() << " inputs";
  for (auto [i, arg, in] : llvm::enumerate(body.getArguments(), getInputs()))
    if (arg.getType() != in.getType())
      return emitOpError() << "body argument #" << i << " has type "
                           << arg.getType() << ", input #" << i << " has type "
                           << in.getType();
  auto yield = llvm::dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError() << "body must end in tc.yield";
  if (yield.getValues().size() != getNumResults())
    return emitOpError() << "yields " << yield.getValues().size()
                         << " values for " << getNumResults() << " results";
  for (auto [i, v, r] : llvm::enumerate(yield.getValues(), getResults()))
    if (v.getType() != r.getType())
      return emitOpError() << "yielded value #" << i << " has type "
                           << v.getType() << ", result #" << i << " has type "
                           << r.getType();
  Operation *reduction = nullptr;
  for (Operation &op : body.without_terminator()) {
    bool isReduction =
        isTrailingReduction(&op) || isLastAxisSoftmax(&op) || isLeadingColumnSum(&op);
    auto constant = llvm::dyn_cast<ConstantOp>(op);
    if (constant) {
      auto dense = llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
      if (!dense || !dense.isSplat())
        return op.emitOpError() << "in a tc.fusion body must be a splat constant";
      continue;
    }
    if (!isReduction && !tc::isElementwise(&op) && !llvm::isa<BroadcastOp>(op))
      return op.emitOpError()
             << "cannot be fused: a tc.fusion body holds elementwise ops, "
                "broadcasts, splat constants and one final reduction over "
                "trailing axes (or last-axis softmax, or a sum over every axis but the last)";
    if (!isReduction)
      continue;
    if (reduction)
      return op.emitOpError() << "is a second reduction in one tc.fusion";
    reduction = &op;
    for (Operation *user : op.getResult(0).getUsers())
      if (user != yield.getOperation())
        return op.emitOpError()
               << "result of the fusion's reduction may only be yielded";
  }
  return success();
}

#define GET_OP_CLASSES
#include "dialects/tc/IR/TcOps.cpp.inc"
