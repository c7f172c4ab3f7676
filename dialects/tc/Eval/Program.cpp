//===- Program.cpp - tc functions and ops on the reference executor -------===//
//
// The serializer is generic: every tc op becomes one rt::Op named like the MLIR
// op, carrying all its attributes (defaults filled in), so adding an op to the
// dialect needs no change here, only a kernel in the reference executor.
//
//===----------------------------------------------------------------------===//

#include "dialects/tc/Eval/Program.h"

#include "dialects/tc/IR/TcOps.h"
#include "tc/reference.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <cstring>

using namespace mlir;

namespace tc {

namespace {

/// Optional-operand layout of ops without AttrSizedOperandSegments: the
/// number of leading required operands and the number of optional ones.
struct OptionalLayout {
  unsigned required;
  unsigned optional;
};
const llvm::StringMap<OptionalLayout> &optionalLayouts() {
  static const llvm::StringMap<OptionalLayout> table = {
      {"tc.rms_norm", {1, 1}},
      {"tc.layer_norm_grad", {2, 1}},
      {"tc.rms_norm_grad", {2, 1}},
      {"tc.cross_entropy", {2, 1}},
      {"tc.nll_loss", {2, 1}},
  };
  return table;
}

} // namespace

namespace {

/// Fills `out` (name, attributes, operand presence) for `op`; operands and
/// results are left to the caller.
LogicalResult convertOpHeader(Operation *op, rt::Op *out, std::string *error) {
  out->name = op->getName().getStringRef().str();
  NamedAttrList attrs(op->getAttrDictionary());
  op->getName().populateDefaultAttrs(attrs);
  for (NamedAttribute na : attrs) {
    StringRef name = na.getName().getValue();
    if (name == "operandSegmentSizes") {
      rt::Attr present;
      present.kind = rt::Attr::Kind::Ints;
      for (int32_t s : llvm::cast<DenseI32ArrayAttr>(na.getValue()).asArrayRef())
        present.ints.push_back(s);
      out->attrs["operand_present"] = std::move(present);
      continue;
    }
    rt::Attr a;
    if (failed(convertAttr(na.getValue(), &a, error, name))) {
      *error = "op '" + out->name + "': " + *error;
      return failure();
    }
    out->attrs[name.str()] = std::move(a);
  }
  auto it = optionalLayouts().find(out->name);
  if (it != optionalLayouts().end()) {
    rt::Attr present;
    present.kind = rt::Attr::Kind::Ints;
    unsigned n = op->getNumOperands();
    for (unsigned i = 0; i < it->second.required + it->second.optional; ++i)
      present.ints.push_back(i < n ? 1 : 0);
    out->attrs["operand_present"] = std::move(present);
  }
  return success();
}

std::string valueName(ArrayAttr attrs, unsigned i, StringRef fallback) {
  if (attrs && i < attrs.size())
    if (auto d = llvm::dyn_cast<DictionaryAttr>(attrs[i]))
      if (auto s = d.getAs<StringAttr>("tc.name"))
        return s.getValue().str();
  return (fallback + Twine(i)).str();
}

} // namespace

FailureOr<rt::Function> lowerToProgram(func::FuncOp fn, StringRef name,
                                       std::string *error) {
  rt::Function out;
  out.name = name.str();
  llvm::DenseMap<Value, int32_t> ids;
  auto addValue = [&](Value v) -> FailureOr<int32_t> {
    auto t = toTensorType(v.getType());
    if (!t) {
      std::string s;
      llvm::raw_string_ostream os(s);
      os << "value of type " << v.getType()
         << " is not a static tensor of a supported element type";
      *error = s;
      return failure();
    }
    int32_t id = (int32_t)out.values.size();
    out.values.push_back(*t);
    ids[v] = id;
    return id;
  };
  if (!fn.getBody().hasOneBlock()) {
    *error = "function '" + fn.getName().str() + "' must have exactly one block";
    return failure();
  }
  Block &body = fn.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    auto id = addValue(arg);
    if (failed(id))
      return failure();
    out.inputs.push_back(*id);
    out.inputNames.push_back(
        valueName(fn.getArgAttrsAttr(), arg.getArgNumber(), "arg"));
  }
  for (Operation &op : body) {
    if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        out.outputs.push_back(ids.lookup(v));
        out.outputNames.push_back(valueName(fn.getResAttrsAttr(), i, "out"));
      }
      continue;
    }
    if (!llvm::isa<TCDialect>(op.getDialect())) {
      *error = "op '" + op.getName().getStringRef().str() +
               "' is not a tc op and cannot be lowered to the reference program";
      return failure();
    }
    rt::Op rop;
    if (failed(convertOpHeader(&op, &rop, error)))
      return failure();
    for (Value v : op.getOperands()) {
      auto it = ids.find(v);
      if (it == ids.end()) {
        *error = "operand of '" + rop.name + "' is defined outside the function";
        return failure();
      }
      rop.operands.push_back(it->second);
    }
    for (Value r : op.getResults()) {
      auto id = addValue(r);
      if (failed(id))
        return failure();
      rop.results.push_back(*id);
    }
    out.ops.push_back(std::move(rop));
  }
  return out;
}

void tagReferenceValues(func::FuncOp fn) {
  if (!fn.getBody().hasOneBlock())
    return;
  Block &body = fn.getBody().front();
  // lowerToProgram's numbering: the arguments, then every op's results.
  int64_t next = body.getNumArguments();
  Builder b(fn.getContext());
  for (Operation &op : body) {
    if (op.getNumResults() == 0)
      continue;
    int64_t n = op.getNumResults();
    op.setAttr(kReferenceValueAttr, b.getDenseI64ArrayAttr({next, n}));
    next += n;
  }
}

std::optional<int64_t> referenceValueId(Operation *op, unsigned index) {
  auto tag = op->getAttrOfType<DenseI64ArrayAttr>(kReferenceValueAttr);
  if (tag && tag.size() >= 1 && tag[0] == -1) { // the list form
    if (size_t(index) + 1 >= tag.size() || tag[index + 1] < 0)
      return std::nullopt;
    return tag[index + 1];
  }
  if (!tag || tag.size() != 2 || int64_t(index) >= tag[1])
    return std::nullopt;
  return tag[0] + index;
}

void setReferenceValueIds(Operation *op, ArrayRef<std::optional<int64_t>> ids) {
  SmallVector<int64_t> list{-1};
  for (const std::optional<int64_t> &id : ids)
    list.push_back(id ? *id : -1);
  op->setAttr(kReferenceValueAttr, Builder(op->getContext()).getDenseI64ArrayAttr(list));
}

/// Whether the raw bytes of `attr` can be cut into `count` equal blocks of
/// whole elements (i1 is packed 8 to a byte: a block must be whole bytes).
static bool byteBlocks(DenseElementsAttr attr, int64_t count) {
  Type elt = attr.getElementType();
  if (!elt.isIntOrFloat() || count < 1 || attr.getNumElements() % count)
    return false;
  int64_t bits = elt.getIntOrFloatBitWidth(), block = attr.getNumElements() / count;
  if (bits == 1)
    return block % 8 == 0 && attr.getRawData().size() * 8 == size_t(attr.getNumElements());
  return bits % 8 == 0 && attr.getRawData().size() == size_t(attr.getNumElements() * bits / 8);
}

bool repeatsBlocks(DenseElementsAttr attr, int64_t count) {
  if (attr.isSplat() || count == 1)
    return true;
  if (!byteBlocks(attr, count))
    return false;
  ArrayRef<char> raw = attr.getRawData();
  size_t block = raw.size() / size_t(count);
  for (size_t k = block; k < raw.size(); k += block)
    if (std::memcmp(raw.data() + k, raw.data(), block) != 0)
      return false;
  return true;
}

namespace {

/// The first 1/count of `attr` (which repeats) as `type`.
DenseElementsAttr firstBlock(DenseElementsAttr attr, RankedTensorType type) {
  if (attr.isSplat())
    return attr.resizeSplat(type);
  ArrayRef<char> raw = attr.getRawData();
  size_t bytes = raw.size() / size_t(attr.getNumElements() / type.getNumElements());
  return DenseElementsAttr::getFromRawBuffer(type, raw.take_front(bytes));
}

/// `block` repeated to fill `type`.
DenseElementsAttr repeatBlock(DenseElementsAttr block, RankedTensorType type) {
  if (block.isSplat())
    return block.resizeSplat(type);
  ArrayRef<char> raw = block.getRawData();
  int64_t count = type.getNumElements() / block.getNumElements();
  std::vector<char> data;
  data.reserve(raw.size() * size_t(count));
  for (int64_t k = 0; k < count; ++k)
    data.insert(data.end(), raw.begin(), raw.end());
  return DenseElementsAttr::getFromRawBuffer(type, data);
}

RankedTensorType withLeadingOnes(RankedTensorType t, int64_t axes) {
  SmallVector<int64_t> shape(t.getShape());
  for (int64_t i = 0; i < axes && i < int64_t(shape.size()); ++i)
    shape[i] = 1;
  return RankedTensorType::get(shape, t.getElementType());
}

/// An elementwise op whose operands all repeat along the leading axes of its
/// result (a mask built from aranges and broadcast over batch and heads:
/// [16, 1, 1024, 1024] for HF GPT-2) computes the same on one block of them:
/// the most leading axes k for which that holds (0: none), its operands cut
/// to one block (leading axes 1) in `blocks`.
int64_t repeatingAxes(Operation *op, ArrayRef<DenseElementsAttr> operands,
                      SmallVectorImpl<DenseElementsAttr> &blocks) {
  if (!op->hasTrait<traits::Elementwise>() || op->getNumResults() != 1)
    return 0;
  auto res = llvm::dyn_cast<RankedTensorType>(op->getResult(0).getType());
  // (A result with no elements has no blocks: nothing to cut, and a block of
  // zero elements would divide by zero below.)
  if (!res || !res.hasStaticShape() || res.getRank() < 2 ||
      !res.getElementType().isIntOrFloat() || res.getNumElements() == 0)
    return 0;
  int64_t r = res.getRank();
  int64_t best = 0;
  for (int64_t k = 1; k < r; ++k) {
    int64_t outer = 1;
    for (int64_t i = 0; i < k; ++i)
      outer *= res.getDimSize(i);
    if (outer <= 1)
      continue;
    bool ok = true;
    for (DenseElementsAttr a : operands) {
      auto t = llvm::cast<RankedTensorType>(a.getType());
      int64_t lead = k - (r - t.getRank()); // of a's axes, those among the leading k
      int64_t count = 1;
      for (int64_t i = 0; i < lead; ++i)
        count *= t.getDimSize(i);
      if (!repeatsBlocks(a, count)) {
        ok = false;
        break;
      }
    }
    if (!ok)
      break; // repeating along k + 1 axes implies along k
    best = k;
  }
  if (best == 0)
    return 0;
  for (DenseElementsAttr a : operands) {
    auto t = llvm::cast<RankedTensorType>(a.getType());
    int64_t lead = best - (r - t.getRank());
    blocks.push_back(lead > 0 ? firstBlock(a, withLeadingOnes(t, lead)) : a);
  }
  return best;
}

} // namespace

FailureOr<SmallVector<DenseElementsAttr>>
evaluateOp(Operation *op, ArrayRef<ElementsAttr> operandValues, std::string *error) {
  if (!llvm::isa<TCDialect>(op->getDialect()) || llvm::isa<ParameterOp>(op)) {
    *error = "cannot evaluate '" + op->getName().getStringRef().str() + "' at compile time";
    return failure();
  }
  rt::Op rop;
  if (failed(convertOpHeader(op, &rop, error)))
    return failure();
  SmallVector<ElementsAttr> values;
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    ElementsAttr value;
    if (i < operandValues.size() && operandValues[i])
      value = operandValues[i];
    else if (auto c = v.getDefiningOp<ConstantOp>())
      value = c.getValue();
    if (!value) {
      *error = "operand #" + std::to_string(i) + " is not a constant";
      return failure();
    }
    values.push_back(value);
  }
  // One block of a repeating elementwise op, then the block repeated.
  SmallVector<DenseElementsAttr> dense, blocks;
  for (ElementsAttr v : values)
    if (auto d = llvm::dyn_cast<DenseElementsAttr>(v))
      dense.push_back(d);
  int64_t lead = dense.size() == values.size() ? repeatingAxes(op, dense, blocks) : 0;
  if (lead > 0)
    for (auto [i, b] : llvm::enumerate(blocks))
      values[i] = b;
  std::vector<rt::HostTensor> inputs;
  for (auto [i, value] : llvm::enumerate(values)) {
    std::string why;
    auto t = toHostTensor(value, &why);
    if (failed(t)) {
      *error = "operand #" + std::to_string(i) + " holds " +
               (why.empty() ? std::string("an unsupported constant") : why);
      return failure();
    }
    inputs.push_back(std::move(*t));
  }
  SmallVector<RankedTensorType> resultTypes;
  std::vector<rt::TensorType> runtimeTypes;
  for (Value r : op->getResults()) {
    auto type = llvm::dyn_cast<RankedTensorType>(r.getType());
    auto t = type ? toTensorType(lead > 0 ? withLeadingOnes(type, lead) : type) : std::nullopt;
    if (!t) {
      *error = "result type is not a static tensor of a supported element type";
      return failure();
    }
    resultTypes.push_back(type);
    runtimeTypes.push_back(*t);
  }
  // Constants fold in the precision their types declare.
  std::vector<rt::HostTensor> outputs;
  if (!reference::runOp(rop, inputs, runtimeTypes, &outputs, error))
    return failure();
  SmallVector<DenseElementsAttr> results;
  for (auto [t, h] : llvm::zip(resultTypes, outputs))
    results.push_back(lead > 0 ? repeatBlock(fromHostTensor(withLeadingOnes(t, lead), h), t)
                               : fromHostTensor(t, h));
  return results;
}

} // namespace tc
