//===- NodeContext.cpp - the binder every ONNX op handler uses ------------===//
//
// NodeContext (declared in Importer.h): a node's inputs, constant inputs and
// typed attributes, each failing with an error that names the node; the
// builders that check an op's types before creating it and fold it to a
// constant when all its operands are constants; and the outputs it binds in
// the importer's scope.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/ImporterDriver.h"

#include "dialects/tc/Eval/Types.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;

namespace tc::onnx_import {

/// What folding op would cost (see kMaxFoldWork): its results' elements,
/// times the inner dimension for a matmul; attention is never folded.
static int64_t foldWork(Operation *op) {
  if (isa<tc::AttentionOp, tc::AttentionGradOp>(op))
    return std::numeric_limits<int64_t>::max();
  int64_t elems = 0;
  for (Type t : op->getResultTypes())
    elems += llvm::cast<RankedTensorType>(t).getNumElements();
  int64_t inner = 1;
  if (auto mm = dyn_cast<tc::MatmulOp>(op)) {
    auto lhs = llvm::cast<RankedTensorType>(mm.getLhs().getType());
    inner = lhs.getDimSize(lhs.getRank() - (mm.getTransposeLhs() ? 2 : 1));
  } else if (auto sm = dyn_cast<tc::ScaledMatmulOp>(op)) {
    auto lhs = llvm::cast<RankedTensorType>(sm.getLhs().getType());
    inner = lhs.getDimSize(sm.getTransposeLhs() ? 0 : 1);
  }
  int64_t work = 0;
  if (__builtin_mul_overflow(elems, std::max<int64_t>(inner, 1), &work))
    return std::numeric_limits<int64_t>::max();
  return work;
}

NodeContext::NodeContext(Importer &importer, const onnx::NodeProto &node, int64_t opset,
                         Location loc, std::vector<const OnnxValue *> inputs)
    : importer_(importer), node_(node), opset_(opset), loc_(loc),
      inputs_(std::move(inputs)) {}

OpBuilder &NodeContext::builder() { return importer_.builder(); }
MLIRContext *NodeContext::context() { return &importer_.context(); }

std::string NodeContext::describe() const {
  return "node '" + node_.name() + "' (" + node_.op_type() + ")";
}

Failure NodeContext::fail(const Twine &msg) {
  return importer_.fail(describe() + ": " + msg);
}

Failure NodeContext::failAttr(StringRef name, const Twine &msg) {
  return importer_.fail(describe() + ": unsupported attribute " + name + ": " + msg);
}

Value NodeContext::input(size_t i) const {
  const OnnxValue *e = inputEntry(i);
  return e && !e->isSequence ? e->value : Value();
}

FailureOr<Value> NodeContext::requiredInput(size_t i) {
  const OnnxValue *e = inputEntry(i);
  if (!e)
    return fail("input #" + Twine(i) + " is required"), failure();
  if (e->isSequence)
    return fail("input #" + Twine(i) + " is a sequence, a tensor is needed"), failure();
  return e->value;
}

RankedTensorType NodeContext::inputType(size_t i) const {
  Value v = input(i);
  return v ? llvm::cast<RankedTensorType>(v.getType()) : RankedTensorType();
}

FailureOr<DenseElementsAttr> NodeContext::constantInput(size_t i) {
  auto v = requiredInput(i);
  if (failed(v))
    return failure();
  if (auto c = v->getDefiningOp<tc::ConstantOp>())
    if (auto dense = dyn_cast<DenseElementsAttr>(c.getValue()))
      return dense;
  std::string what = "input '" + node_.input(i) + "' of " + describe();
  std::vector<std::string> from = importer_.graphInputsOf(*v);
  if (!from.empty())
    return importer_.fail(std::string(kNeedsConstantInputPrefix) + from.front() + ": " +
                          what + " must be a constant (it depends on graph input '" +
                          from.front() + "')"),
           failure();
  return importer_.fail(what + " must be a constant, but it could not be computed at "
                               "import time"),
         failure();
}

FailureOr<SmallVector<int64_t>> NodeContext::constantInts(size_t i) {
  auto c = constantInput(i);
  if (failed(c))
    return failure();
  if (!isa<IntegerType>(c->getElementType()))
    return fail("input #" + Twine(i) + " must be an integer tensor"), failure();
  return denseToInts(*c);
}

FailureOr<SmallVector<double>> NodeContext::constantDoubles(size_t i) {
  auto c = constantInput(i);
  if (failed(c))
    return failure();
  return denseToDoubles(*c);
}

const onnx::AttributeProto *NodeContext::attr(StringRef name) const {
  for (const auto &a : node_.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

const onnx::AttributeProto *NodeContext::typedAttr(StringRef name,
                                                   onnx::AttributeProto::AttributeType type) const {
  const auto *a = attr(name);
  if (!a || a->type() == type || a->type() == onnx::AttributeProto::UNDEFINED)
    return a;
  if (attrError_.empty())
    attrError_ = "attribute '" + name.str() + "' must be " +
                 onnx::AttributeProto::AttributeType_Name(type) + ", but the model stores it as " +
                 onnx::AttributeProto::AttributeType_Name(a->type());
  return nullptr;
}

int64_t NodeContext::attrInt(StringRef name, int64_t dflt) const {
  const auto *a = typedAttr(name, onnx::AttributeProto::INT);
  return a ? a->i() : dflt;
}
float NodeContext::attrFloat(StringRef name, float dflt) const {
  const auto *a = typedAttr(name, onnx::AttributeProto::FLOAT);
  return a ? a->f() : dflt;
}
std::string NodeContext::attrString(StringRef name, StringRef dflt) const {
  const auto *a = typedAttr(name, onnx::AttributeProto::STRING);
  return a ? a->s() : dflt.str();
}
std::optional<SmallVector<int64_t>> NodeContext::attrInts(StringRef name) const {
  const auto *a = typedAttr(name, onnx::AttributeProto::INTS);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}
std::optional<SmallVector<float>> NodeContext::attrFloats(StringRef name) const {
  const auto *a = typedAttr(name, onnx::AttributeProto::FLOATS);
  if (!a)
    return std::nullopt;
  return SmallVector<float>(a->floats().begin(), a->floats().end());
}

FailureOr<DenseElementsAttr> NodeContext::attrTensor(StringRef name) {
  const auto *a = typedAttr(name, onnx::AttributeProto::TENSOR);
  if (!attrError_.empty())
    return fail(attrError_), failure();
  if (!a || !a->has_t())
    return fail("attribute " + name + " must be a tensor"), failure();
  std::string err;
  auto host = readTensorProto(context(), a->t(), importer_.modelDir(), &err);
  if (failed(host))
    return fail("attribute " + name + ": " + err), failure();
  auto type = tensorProtoType(context(), a->t(), &err);
  return tc::fromHostTensor(*type, *host);
}

LogicalResult NodeContext::setOutput(size_t i, Value v) {
  if (!outputUsed(i))
    return success();
  importer_.bind(node_.output(i), OnnxValue{v});
  return success();
}

LogicalResult NodeContext::setOutputSequence(size_t i, ArrayRef<Value> elems, Type elt) {
  if (!outputUsed(i))
    return success();
  OnnxValue v;
  v.isSequence = true;
  v.elements.assign(elems.begin(), elems.end());
  v.sequenceElementType = elt;
  importer_.bind(node_.output(i), std::move(v));
  return success();
}

FailureOr<SmallVector<Value>> NodeContext::finishOp(Operation *op) {
  for (auto [i, t] : llvm::enumerate(op->getResultTypes())) {
    auto shape = llvm::cast<RankedTensorType>(t).getShape();
    if (boundedNumElements(shape) < 0) {
      op->erase();
      return fail("result #" + Twine(i) + ": " + tooLarge(shape)), failure();
    }
  }
  {
    DiagnosticCapture diag(context());
    if (failed(mlir::verify(op))) {
      std::string msg = diag.messages();
      op->erase();
      return fail(msg.empty() ? "invalid op" : msg), failure();
    }
  }
  bool allConstant = op->getNumOperands() > 0 &&
                     llvm::all_of(op->getOperands(), [](Value v) {
                       return v.getDefiningOp<tc::ConstantOp>() != nullptr;
                     });
  bool small = llvm::all_of(op->getResultTypes(), [](Type t) {
    return llvm::cast<RankedTensorType>(t).getNumElements() <= kMaxFoldElements;
  }) && foldWork(op) <= kMaxFoldWork;
  if (allConstant && small && !isa<tc::ConstantOp, tc::ParameterOp>(op)) {
    // Exporters repeat constant sub-graphs (HF GPT-2's dynamo export builds
    // its [B, 1, T, T] mask bias once per layer): equal ops on equal
    // constants (attributes and types are uniqued: pointers compare values)
    // are evaluated once.
    std::vector<const void *> key{op->getName().getAsOpaquePointer(),
                                  op->getAttrDictionary().getAsOpaquePointer()};
    for (Value v : op->getOperands())
      key.push_back(v.getDefiningOp<tc::ConstantOp>().getValue().getAsOpaquePointer());
    for (Type t : op->getResultTypes())
      key.push_back(t.getAsOpaquePointer());
    auto &memo = importer_.foldMemo();
    auto hit = memo.find(key);
    FailureOr<SmallVector<DenseElementsAttr>> folded =
        hit != memo.end() ? hit->second : evaluateConstantOp(op);
    if (hit == memo.end())
      memo.emplace(std::move(key), folded);
    if (succeeded(folded) && folded->size() == op->getNumResults()) {
      SmallVector<Value> values;
      for (auto [r, attr] : llvm::zip(op->getResults(), *folded)) {
        if (!attr || attr.getType() != r.getType())
          return SmallVector<Value>(op->getResults());
      }
      for (DenseElementsAttr attr : *folded)
        values.push_back(tc::ConstantOp::create(builder(), loc_, attr));
      op->erase();
      return values;
    }
  }
  return SmallVector<Value>(op->getResults());
}

Value NodeContext::constant(DenseElementsAttr value) {
  return tc::ConstantOp::create(builder(), loc_, value);
}

namespace {
/// `v` as an element of the integer type `t`: rounded toward zero and
/// saturated at the type's range (a model's alpha of -inf on int8 inputs
/// is int8's minimum, never an undefined conversion); NaN is 0. The bits of
/// an unsigned 64-bit maximum are -1 as int64_t, as denseFromInts stores them.
int64_t saturatingInt(double v, IntegerType t) {
  if (std::isnan(v))
    return 0;
  unsigned w = t.getWidth();
  if (t.isUnsigned() || w == 1) {
    if (v <= 0)
      return 0;
    if (w >= 64)
      return v >= 0x1p64 ? -1 : static_cast<int64_t>(static_cast<uint64_t>(v));
    double hi = std::ldexp(1.0, static_cast<int>(w)) - 1;
    return static_cast<int64_t>(std::min(v, hi));
  }
  if (w >= 64) {
    if (v >= 0x1p63)
      return std::numeric_limits<int64_t>::max();
    if (v <= -0x1p63)
      return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(v);
  }
  double lim = std::ldexp(1.0, static_cast<int>(w) - 1);
  return static_cast<int64_t>(std::clamp(v, -lim, lim - 1));
}
} // namespace

Value NodeContext::splat(double v, Type elementType, ArrayRef<int64_t> shape) {
  // One element, resized: a splat attribute never holds more than one value
  // (shapes up to kMaxTensorElements must not allocate at import time).
  auto scalar = RankedTensorType::get({}, elementType);
  auto it = dyn_cast<IntegerType>(elementType);
  DenseElementsAttr one = it ? denseFromInts(scalar, {saturatingInt(v, it)})
                             : denseFromDoubles(scalar, {v});
  return constant(one.resizeSplat(RankedTensorType::get(shape, elementType)));
}

Value NodeContext::constI64(ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({(int64_t)values.size()}, builder().getI64Type());
  return constant(denseFromInts(type, values));
}

FailureOr<Value> NodeContext::cast(Value v, Type elementType) {
  auto t = llvm::cast<RankedTensorType>(v.getType());
  if (t.getElementType() == elementType)
    return v;
  return make<tc::CastOp>({v}, {}, RankedTensorType::get(t.getShape(), elementType));
}

FailureOr<Value> NodeContext::reshape(Value v, ArrayRef<int64_t> shape) {
  auto t = llvm::cast<RankedTensorType>(v.getType());
  if (t.getShape() == shape)
    return v;
  for (int64_t d : shape)
    if (d < 0)
      return fail("cannot reshape to a shape with negative dimension " + joinShape(shape)),
             failure();
  if (boundedNumElements(shape) != t.getNumElements())
    return fail("cannot reshape " + joinShape(t.getShape()) + " (" +
                Twine(t.getNumElements()) + " elements) to " + joinShape(shape)),
           failure();
  return make<tc::ReshapeOp>({v}, {}, RankedTensorType::get(shape, t.getElementType()));
}

FailureOr<Value> NodeContext::broadcastTo(Value v, ArrayRef<int64_t> shape) {
  auto t = llvm::cast<RankedTensorType>(v.getType());
  if (t.getShape() == shape)
    return v;
  auto b = tc::broadcastShapes(t.getShape(), shape);
  if (failed(b) || ArrayRef<int64_t>(*b) != shape)
    return fail("cannot broadcast " + joinShape(t.getShape()) + " to " + joinShape(shape)),
           failure();
  return make<tc::BroadcastOp>({v}, {}, RankedTensorType::get(shape, t.getElementType()));
}

FailureOr<Value> NodeContext::transpose(Value v, ArrayRef<int64_t> perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity &= perm[i] == (int64_t)i;
  if (identity && (int64_t)perm.size() == llvm::cast<RankedTensorType>(v.getType()).getRank())
    return v;
  return make<tc::TransposeOp>({v}, {namedI64Array("permutation", perm)});
}

FailureOr<Value> NodeContext::slice(Value v, ArrayRef<int64_t> starts,
                                    ArrayRef<int64_t> strides, ArrayRef<int64_t> sizes) {
  auto t = llvm::cast<RankedTensorType>(v.getType());
  bool identity = t.getShape() == sizes;
  for (size_t d = 0; identity && d < starts.size(); ++d)
    identity = starts[d] == 0 && strides[d] == 1;
  if (identity)
    return v;
  return make<tc::SliceOp>({v}, {namedI64Array("starts", starts), namedI64Array("strides", strides)},
                           RankedTensorType::get(sizes, t.getElementType()));
}

FailureOr<Value> NodeContext::sliceAxis(Value v, int64_t axis, int64_t start, int64_t size) {
  auto t = llvm::cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> starts(t.getRank(), 0), strides(t.getRank(), 1);
  SmallVector<int64_t> sizes(t.getShape());
  starts[axis] = start;
  sizes[axis] = size;
  return slice(v, starts, strides, sizes);
}

FailureOr<Value> NodeContext::reduce(StringRef kind, Value v, ArrayRef<int64_t> axes,
                                     bool keepdims) {
  SmallVector<NamedAttribute> attrs{namedI64Array("axes", axes), namedBool("keepdims", keepdims)};
  if (kind == "reduce_sum") return make<tc::ReduceSumOp>({v}, attrs);
  if (kind == "reduce_mean") return make<tc::ReduceMeanOp>({v}, attrs);
  if (kind == "reduce_max") return make<tc::ReduceMaxOp>({v}, attrs);
  if (kind == "reduce_min") return make<tc::ReduceMinOp>({v}, attrs);
  if (kind == "reduce_prod") return make<tc::ReduceProdOp>({v}, attrs);
  return fail("internal: unknown reduction " + kind), failure();
}

FailureOr<int64_t> NodeContext::normalizeAxis(int64_t axis, int64_t rank, StringRef what,
                                              bool inclusive) {
  int64_t hi = inclusive ? rank + 1 : rank;
  if (axis < -hi || axis >= hi)
    return fail(what + " " + Twine(axis) + " is out of range for rank " + Twine(rank)),
           failure();
  return axis < 0 ? axis + hi : axis;
}

NamedAttribute NodeContext::namedI64(StringRef name, int64_t v) {
  return builder().getNamedAttr(name, builder().getI64IntegerAttr(v));
}
NamedAttribute NodeContext::namedBool(StringRef name, bool v) {
  return builder().getNamedAttr(name, builder().getBoolAttr(v));
}
NamedAttribute NodeContext::namedF64(StringRef name, double v) {
  return builder().getNamedAttr(name, builder().getF64FloatAttr(v));
}
NamedAttribute NodeContext::namedStr(StringRef name, StringRef v) {
  return builder().getNamedAttr(name, builder().getStringAttr(v));
}
NamedAttribute NodeContext::namedI64Array(StringRef name, ArrayRef<int64_t> v) {
  return builder().getNamedAttr(name, builder().getDenseI64ArrayAttr(v));
}

} // namespace tc::onnx_import
