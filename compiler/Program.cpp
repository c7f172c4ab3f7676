//===- Program.cpp - tc dialect <-> runtime program -----------------------===//
//
// The serializer is generic: every tc op becomes one rt::Op named like the MLIR
// op, carrying all its attributes (defaults filled in), so adding an op to the
// dialect needs no change here, only a kernel in the reference executor.
//
//===----------------------------------------------------------------------===//

#include "compiler/Program.h"

#include "dialects/tc/IR/TcOps.h"
#include "runtime/src/cpu/executor.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <cstring>

using namespace mlir;

namespace tc {

std::optional<rt::DType> toDType(Type t) {
  if (t.isF32())
    return rt::DType::F32;
  if (t.isF64())
    return rt::DType::F64;
  if (t.isF16())
    return rt::DType::F16;
  if (t.isBF16())
    return rt::DType::BF16;
  if (llvm::isa<Float8E4M3FNType>(t))
    return rt::DType::F8E4M3FN;
  if (llvm::isa<Float8E5M2Type>(t))
    return rt::DType::F8E5M2;
  if (llvm::isa<Float4E2M1FNType>(t))
    return rt::DType::F4E2M1FN;
  if (llvm::isa<Float8E8M0FNUType>(t))
    return rt::DType::F8E8M0FNU;
  if (auto it = llvm::dyn_cast<IntegerType>(t)) {
    bool u = it.isUnsigned();
    switch (it.getWidth()) {
    case 1:
      return rt::DType::I1;
    case 8:
      return u ? rt::DType::U8 : rt::DType::I8;
    case 16:
      return u ? rt::DType::U16 : rt::DType::I16;
    case 32:
      return u ? rt::DType::U32 : rt::DType::I32;
    case 64:
      return u ? rt::DType::U64 : rt::DType::I64;
    default:
      return std::nullopt;
    }
  }
  return std::nullopt;
}

Type fromDType(MLIRContext *ctx, rt::DType d) {
  Builder b(ctx);
  switch (d) {
  case rt::DType::F32:
    return b.getF32Type();
  case rt::DType::F64:
    return b.getF64Type();
  case rt::DType::F16:
    return b.getF16Type();
  case rt::DType::BF16:
    return b.getBF16Type();
  case rt::DType::F8E4M3FN:
    return Float8E4M3FNType::get(ctx);
  case rt::DType::F8E5M2:
    return Float8E5M2Type::get(ctx);
  case rt::DType::F4E2M1FN:
    return Float4E2M1FNType::get(ctx);
  case rt::DType::F8E8M0FNU:
    return Float8E8M0FNUType::get(ctx);
  case rt::DType::I1:
    return b.getI1Type();
  case rt::DType::I8:
    return b.getIntegerType(8);
  case rt::DType::I16:
    return b.getIntegerType(16);
  case rt::DType::I32:
    return b.getIntegerType(32);
  case rt::DType::I64:
    return b.getIntegerType(64);
  case rt::DType::U8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case rt::DType::U16:
    return b.getIntegerType(16, false);
  case rt::DType::U32:
    return b.getIntegerType(32, false);
  case rt::DType::U64:
    return b.getIntegerType(64, false);
  }
  return {};
}

std::optional<rt::TensorType> toTensorType(Type type) {
  auto t = llvm::dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return std::nullopt;
  auto d = toDType(t.getElementType());
  if (!d)
    return std::nullopt;
  rt::TensorType out;
  out.dtype = *d;
  out.shape.assign(t.getShape().begin(), t.getShape().end());
  return out;
}

namespace {
/// Element types whose MLIR dense storage is byte-for-byte the runtime's.
bool rawCompatible(Type elt) {
  if (auto it = llvm::dyn_cast<IntegerType>(elt))
    return it.getWidth() % 8 == 0;
  if (auto ft = llvm::dyn_cast<FloatType>(elt))
    return ft.getWidth() % 8 == 0;
  return false;
}
} // namespace

FailureOr<rt::HostTensor> toHostTensor(ElementsAttr attr, std::string *error) {
  auto tt = toTensorType(attr.getType());
  if (!tt)
    return failure();
  rt::HostTensor out;
  out.type = *tt;
  int64_t n = out.type.numElements(); // saturates at INT64_MAX
  int bytes = rt::dtypeStorageBytes(tt->dtype);
  if (n > kMaxConstantBytes / bytes) {
    if (error)
      *error = "a constant of " + std::to_string(n) + " elements (more than the 4 GiB an "
               "artifact carries per constant)";
    return failure();
  }
  out.data.resize(n * bytes);
  auto dense = llvm::dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    return failure(); // resource blobs are not produced by tc's importers
  Type elt = dense.getElementType();
  if (rawCompatible(elt)) {
    ArrayRef<char> raw = dense.getRawData();
    if (dense.isSplat()) {
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(out.data.data() + i * bytes, raw.data(), bytes);
    } else {
      if ((int64_t)raw.size() != n * bytes)
        return failure();
      if (!raw.empty()) // an empty tensor's data pointer may be null
        std::memcpy(out.data.data(), raw.data(), raw.size());
    }
    return out;
  }
  // i1 and sub-byte floats: one storage byte per element.
  if (llvm::isa<FloatType>(elt)) {
    int64_t i = 0;
    for (APFloat v : dense.getValues<APFloat>())
      out.data[i++] = (uint8_t)v.bitcastToAPInt().getZExtValue();
  } else {
    int64_t i = 0;
    for (APInt v : dense.getValues<APInt>())
      out.data[i++] = (uint8_t)v.getZExtValue();
  }
  return out;
}

DenseElementsAttr fromHostTensor(RankedTensorType type, const rt::HostTensor &t) {
  Type elt = type.getElementType();
  if (type.getNumElements() == 0)
    return DenseElementsAttr::get(type, ArrayRef<Attribute>());
  if (rawCompatible(elt)) {
    ArrayRef<char> raw(reinterpret_cast<const char *>(t.data.data()), t.data.size());
    return DenseElementsAttr::getFromRawBuffer(type, raw);
  }
  if (elt.isInteger(1)) {
    SmallVector<bool> values(t.data.begin(), t.data.end());
    return DenseElementsAttr::get(type, values);
  }
  if (auto ft = llvm::dyn_cast<FloatType>(elt)) {
    SmallVector<APFloat> values;
    values.reserve(t.data.size());
    for (uint8_t b : t.data)
      values.emplace_back(ft.getFloatSemantics(), APInt(ft.getWidth(), b));
    return DenseElementsAttr::get(type, values);
  }
  auto it = llvm::cast<IntegerType>(elt);
  SmallVector<APInt> values;
  for (uint8_t b : t.data)
    values.emplace_back(it.getWidth(), b);
  return DenseElementsAttr::get(type, values);
}

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

LogicalResult convertAttr(Attribute a, rt::Attr *out, std::string *error,
                          StringRef attrName) {
  if (auto b = llvm::dyn_cast<BoolAttr>(a)) {
    out->kind = rt::Attr::Kind::Int;
    out->i = b.getValue();
  } else if (auto i = llvm::dyn_cast<IntegerAttr>(a)) {
    out->kind = rt::Attr::Kind::Int;
    out->i = i.getValue().getSExtValue();
  } else if (auto f = llvm::dyn_cast<FloatAttr>(a)) {
    out->kind = rt::Attr::Kind::Float;
    out->f = f.getValueAsDouble();
  } else if (auto s = llvm::dyn_cast<StringAttr>(a)) {
    out->kind = rt::Attr::Kind::String;
    out->s = s.getValue().str();
  } else if (auto arr = llvm::dyn_cast<DenseI64ArrayAttr>(a)) {
    out->kind = rt::Attr::Kind::Ints;
    out->ints.assign(arr.asArrayRef().begin(), arr.asArrayRef().end());
  } else if (auto arr = llvm::dyn_cast<DenseI32ArrayAttr>(a)) {
    out->kind = rt::Attr::Kind::Ints;
    out->ints.assign(arr.asArrayRef().begin(), arr.asArrayRef().end());
  } else if (auto e = llvm::dyn_cast<ElementsAttr>(a)) {
    std::string why;
    auto t = toHostTensor(e, &why);
    if (failed(t)) {
      *error = ("attribute '" + attrName + "' holds " +
                (why.empty() ? std::string("an unsupported constant") : why)).str();
      return failure();
    }
    out->kind = rt::Attr::Kind::Tensor;
    out->tensor = std::move(*t);
  } else if (llvm::isa<UnitAttr>(a)) {
    out->kind = rt::Attr::Kind::Int;
    out->i = 1;
  } else {
    *error = ("attribute '" + attrName + "' has a kind the runtime cannot carry").str();
    return failure();
  }
  return success();
}

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

FailureOr<SmallVector<DenseElementsAttr>>
evaluateOp(Operation *op, ArrayRef<ElementsAttr> operandValues, std::string *error) {
  if (!llvm::isa<TCDialect>(op->getDialect()) || llvm::isa<ParameterOp>(op)) {
    *error = "cannot evaluate '" + op->getName().getStringRef().str() + "' at compile time";
    return failure();
  }
  rt::Function fn;
  fn.name = "fold";
  rt::Op rop;
  if (failed(convertOpHeader(op, &rop, error)))
    return failure();
  std::vector<rt::HostTensor> inputs;
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
    std::string why;
    auto t = toHostTensor(value, &why);
    if (failed(t)) {
      *error = "operand #" + std::to_string(i) + " holds " +
               (why.empty() ? std::string("an unsupported constant") : why);
      return failure();
    }
    int32_t id = (int32_t)fn.values.size();
    fn.values.push_back(t->type);
    fn.inputs.push_back(id);
    fn.inputNames.push_back("in" + std::to_string(i));
    rop.operands.push_back(id);
    inputs.push_back(std::move(*t));
  }
  SmallVector<RankedTensorType> resultTypes;
  for (Value r : op->getResults()) {
    auto t = toTensorType(r.getType());
    if (!t) {
      *error = "result type is not a static tensor of a supported element type";
      return failure();
    }
    resultTypes.push_back(llvm::cast<RankedTensorType>(r.getType()));
    int32_t id = (int32_t)fn.values.size();
    fn.values.push_back(*t);
    fn.outputs.push_back(id);
    fn.outputNames.push_back("out" + std::to_string(fn.outputs.size() - 1));
    rop.results.push_back(id);
  }
  fn.ops.push_back(std::move(rop));
  rt::Artifact empty;
  std::vector<rt::HostTensor> outputs;
  rt::ExecOptions opts;
  // Constants fold in the precision their types declare.
  rt::Status st = rt::runFunction(empty, fn, inputs, &outputs, opts);
  if (!st.isOk()) {
    *error = st.message();
    return failure();
  }
  SmallVector<DenseElementsAttr> results;
  for (auto [t, h] : llvm::zip(resultTypes, outputs))
    results.push_back(fromHostTensor(t, h));
  return results;
}

} // namespace tc
