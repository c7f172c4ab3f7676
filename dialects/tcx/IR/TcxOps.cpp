//===- TcxOps.cpp - tcx dialect: types and verifiers ----------------------===//
//
// The verifiers are the executable contract with runtime/src/cuda: a tcx
// program that verifies gives every launcher buffers of the sizes it reads
// and writes. Library calls are checked against the runtime's one table of
// them (runtime/src/schema/library_abi.h).
//
//===----------------------------------------------------------------------===//

#include "dialects/tcx/IR/TcxOps.h"
#include "runtime/src/schema/library_abi.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

#include <optional>

using namespace mlir;
using namespace tcx;

#include "dialects/tcx/IR/TcxOpsDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/tcx/IR/TcxTypes.cpp.inc"

void TcxDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/tcx/IR/TcxTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/tcx/IR/TcxOps.cpp.inc"
      >();
}

void tcx::registerTcxDialect(DialectRegistry &registry) {
  registry.insert<TcxDialect>();
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

int64_t tcx::storageBytes(Type elt, int64_t n) {
  unsigned bits = 8;
  if (elt.isIndex())
    bits = 64;
  else if (elt.isIntOrFloat())
    bits = elt.getIntOrFloatBitWidth();
  if (bits == 1) // i1 is stored as one byte per element (as the runtime does)
    bits = 8;
  return (n * bits + 7) / 8;
}

int64_t BufferType::getNumElements() const {
  int64_t n = 1;
  for (int64_t d : getShape())
    n *= d;
  return n;
}

int64_t BufferType::getSizeInBytes() const {
  return storageBytes(getElementType(), getNumElements());
}

RankedTensorType BufferType::toTensorType() const {
  return RankedTensorType::get(getShape(), getElementType());
}

BufferType BufferType::fromTensorType(RankedTensorType t) {
  return BufferType::get(t.getShape(), t.getElementType());
}

LogicalResult BufferType::verify(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayRef<int64_t> shape, Type elementType) {
  for (auto [i, d] : llvm::enumerate(shape))
    if (d < 0)
      return emitError() << "buffer dimension " << i << " is " << d
                         << "; buffers have static, non-negative sizes";
  if (!elementType.isIntOrIndexOrFloat())
    return emitError() << "buffer element type must be an integer or float type, got "
                       << elementType;
  return success();
}

Type BufferType::parse(AsmParser &parser) {
  SmallVector<int64_t> shape;
  Type elt;
  if (parser.parseLess() ||
      parser.parseDimensionList(shape, /*allowDynamic=*/false, /*withTrailingX=*/true) ||
      parser.parseType(elt) || parser.parseGreater())
    return {};
  return parser.getChecked<BufferType>(parser.getContext(), shape, elt);
}

void BufferType::print(AsmPrinter &printer) const {
  printer << "<";
  for (int64_t d : getShape())
    printer << d << "x";
  printer << getElementType() << ">";
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {
BufferType bufferType(Value v) { return llvm::cast<BufferType>(v.getType()); }

bool isOneOf(StringRef s, ArrayRef<StringRef> options) {
  return llvm::is_contained(options, s);
}

std::string joined(ArrayRef<StringRef> options) {
  std::string s;
  for (StringRef o : options)
    s += (s.empty() ? "\"" : ", \"") + o.str() + "\"";
  return s;
}
} // namespace

//===----------------------------------------------------------------------===//
// Storage ops
//===----------------------------------------------------------------------===//

static constexpr StringRef kParamKinds[] = {"parameter", "buffer", "optimizer_state", "gradient",
                                            "shadow"};
static constexpr StringRef kAllocKinds[] = {"activation", "backward", "scratch", "output"};

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError() << "needs a non-empty parameter name";
  if (!isOneOf(getKind(), kParamKinds))
    return emitOpError() << "kind \"" << getKind() << "\" of '" << getName()
                         << "' is not one of " << joined(kParamKinds);
  return success();
}

LogicalResult ConstOp::verify() {
  auto t = llvm::dyn_cast<ShapedType>(getValue().getType());
  BufferType b = bufferType(getResult());
  if (!t || t.getShape() != b.getShape() || t.getElementType() != b.getElementType())
    return emitOpError() << "value of type " << getValue().getType()
                         << " does not match the buffer " << b;
  return success();
}

LogicalResult AllocOp::verify() {
  if (!isOneOf(getKind(), kAllocKinds))
    return emitOpError() << "kind \"" << getKind() << "\" is not one of " << joined(kAllocKinds);
  return success();
}

LogicalResult ArenaOp::verify() {
  BufferType b = bufferType(getResult());
  if (b.getShape().size() != 1 || !b.getElementType().isInteger(8))
    return emitOpError() << "the arena is a 1-D buffer of i8, got " << b;
  return success();
}

LogicalResult ViewOp::verify() {
  BufferType src = bufferType(getSource()), res = bufferType(getResult());
  int64_t off = getOffset();
  if (off < 0)
    return emitOpError() << "offset " << off << " is negative";
  int64_t eltBytes = storageBytes(res.getElementType(), 1);
  if (eltBytes > 0 && off % eltBytes != 0)
    return emitOpError() << "offset " << off << " is not a multiple of the result element size ("
                         << eltBytes << " bytes of " << res.getElementType() << ")";
  if (off + res.getSizeInBytes() > src.getSizeInBytes())
    return emitOpError() << "view of " << res.getSizeInBytes() << " bytes at offset " << off
                         << " does not fit in the source's " << src.getSizeInBytes() << " bytes";
  return success();
}

//===----------------------------------------------------------------------===//
// Kernels and launches
//===----------------------------------------------------------------------===//

SmallVector<Type> KernelOp::getResultTypes() {
  SmallVector<Type> types;
  if (getBody().empty() || getEntry().empty())
    return types;
  if (auto y = llvm::dyn_cast<YieldOp>(getEntry().back()))
    llvm::append_range(types, y.getValues().getTypes());
  return types;
}

LogicalResult KernelOp::verify() {
  if (getKind().empty())
    return emitOpError() << "@" << getSymName() << " needs a non-empty kind";
  Block &entry = getEntry();
  for (BlockArgument a : entry.getArguments())
    if (!llvm::isa<RankedTensorType>(a.getType()))
      return emitOpError() << "@" << getSymName() << " argument #" << a.getArgNumber()
                           << " must be a ranked tensor, got " << a.getType();
  auto yield = llvm::dyn_cast<YieldOp>(entry.back());
  if (!yield)
    return emitOpError() << "@" << getSymName() << " body must end in tcx.yield";
  if (yield.getValues().empty())
    return emitOpError() << "@" << getSymName() << " yields nothing";
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (!llvm::isa<RankedTensorType>(v.getType()))
      return emitOpError() << "@" << getSymName() << " output #" << i
                           << " must be a ranked tensor, got " << v.getType();
  return success();
}

LogicalResult LaunchOp::verify() {
  if (getOutputs().empty())
    return emitOpError() << "@" << getKernel() << " needs at least one output buffer";
  if (static_cast<int64_t>(getElements()) < 0)
    return emitOpError() << "elements " << static_cast<int64_t>(getElements()) << " is negative";
  if (getGrid().has_value() != getBlock().has_value())
    return emitOpError() << "grid and block are given together or not at all";
  if (getN().has_value() != getMeta().has_value())
    return emitOpError() << "n and meta are given together or not at all";
  if (getGrid()) {
    for (ArrayRef<int64_t> dims : {*getGrid(), *getBlock()})
      if (dims.empty() || dims.size() > 3 || llvm::any_of(dims, [](int64_t d) { return d < 1; }))
        return emitOpError() << "grid and block have 1 to 3 positive dimensions";
  }
  return success();
}

LogicalResult LaunchOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto kernel = symbols.lookupNearestSymbolFrom<KernelOp>(*this, getKernelAttr());
  if (!kernel)
    return emitOpError() << "kernel @" << getKernel() << " is not a tcx.kernel in this module";
  Block &entry = kernel.getEntry();
  SmallVector<Type> results = kernel.getResultTypes();
  if (entry.getNumArguments() != getInputs().size())
    return emitOpError() << "@" << getKernel() << " takes " << entry.getNumArguments()
                         << " inputs, the launch gives " << getInputs().size();
  if (results.size() != getOutputs().size())
    return emitOpError() << "@" << getKernel() << " has " << results.size()
                         << " outputs, the launch gives " << getOutputs().size();
  auto check = [&](StringRef what, unsigned i, Value buffer, Type expected) -> LogicalResult {
    BufferType b = bufferType(buffer);
    auto t = llvm::cast<RankedTensorType>(expected);
    if (b.getShape() != t.getShape() || b.getElementType() != t.getElementType())
      return emitOpError() << what << " #" << i << " is " << b << " but @" << getKernel()
                           << " expects " << t;
    return success();
  };
  for (auto [i, v] : llvm::enumerate(getInputs()))
    if (failed(check("input", i, v, entry.getArgument(i).getType())))
      return failure();
  for (auto [i, v] : llvm::enumerate(getOutputs()))
    if (failed(check("output", i, v, results[i])))
      return failure();
  // A generated kernel is launched with every argument codegen chose.
  if (kernel.getCudaKernel()) {
    auto oneD = [](std::optional<ArrayRef<int64_t>> d) { return d && d->size() == 1; };
    if (!getN() || !getMeta() || getMeta()->empty() || !oneD(getGrid()) || !oneD(getBlock()))
      return emitOpError() << "launches generated kernel @" << *kernel.getCudaKernel()
                           << " without n, a non-empty meta and a 1-D grid and block";
  } else if (getN() || getMeta()) {
    return emitOpError() << "gives n/meta but @" << getKernel()
                         << " has no generated kernel (cuda_kernel)";
  }
  return success();
}

LogicalResult KernelOp::verifySymbolUses(SymbolTableCollection &symbols) {
  if (auto ref = getCudaKernelAttr())
    if (!symbols.lookupNearestSymbolFrom<CudaSourceOp>(*this, ref))
      return emitOpError() << "@" << getSymName() << " names cuda_kernel " << ref
                           << ", which is not a tcx.cuda_source in this module";
  return success();
}

//===----------------------------------------------------------------------===//
// Library calls
//===----------------------------------------------------------------------===//

namespace {
/// The Int and Bool attributes of `attrs` (what layouts and scratch sizes read).
tc::rt::LibraryInts libraryInts(DictionaryAttr attrs) {
  tc::rt::LibraryInts ints;
  for (NamedAttribute na : attrs)
    if (auto b = llvm::dyn_cast<BoolAttr>(na.getValue()))
      ints[na.getName().str()] = b.getValue();
    else if (auto i = llvm::dyn_cast<IntegerAttr>(na.getValue()))
      ints[na.getName().str()] = i.getValue().getSExtValue();
  return ints;
}

/// The library-ABI kind of an attribute, or nullopt for one it has no kind for.
std::optional<tc::rt::LibraryAttrKind> libraryAttrKind(Attribute a) {
  using K = tc::rt::LibraryAttrKind;
  if (llvm::isa<BoolAttr>(a))
    return K::Bool;
  if (llvm::isa<IntegerAttr>(a))
    return K::Int;
  if (llvm::isa<FloatAttr>(a))
    return K::Float;
  if (llvm::isa<DenseI64ArrayAttr, DenseI32ArrayAttr>(a))
    return K::Ints;
  return std::nullopt;
}
} // namespace

int64_t tcx::libraryScratchBytes(StringRef callee, DictionaryAttr attrs) {
  const tc::rt::LibraryCallee *c = tc::rt::findLibraryCallee(callee.str());
  if (!c || !c->scratchBytes)
    return 0;
  return static_cast<int64_t>(c->scratchBytes(libraryInts(attrs)));
}

LogicalResult LibraryOp::verify() {
  const tc::rt::LibraryCallee *c = tc::rt::findLibraryCallee(getCallee().str());
  if (!c)
    return emitOpError() << "unknown library kernel \"" << getCallee()
                         << "\" (known: " << tc::rt::libraryCalleeNames() << ")";
  auto fail = [&](const std::string &why) {
    return emitOpError() << "\"" << getCallee() << "\" " << why;
  };
  // The call's attributes (callee is the op's own).
  DictionaryAttr dict = (*this)->getDiscardableAttrDictionary();
  std::vector<tc::rt::LibraryAttrValue> given;
  for (NamedAttribute na : dict) {
    std::string name = na.getName().str();
    // Discardable attributes of other dialects ("tc.precision") are no
    // part of the call.
    if (name.find('.') != std::string::npos)
      continue;
    std::optional<tc::rt::LibraryAttrKind> kind = libraryAttrKind(na.getValue());
    if (!kind)
      return fail("attribute '" + name + "' has a kind no library kernel takes");
    auto i = llvm::dyn_cast<IntegerAttr>(na.getValue());
    given.push_back({name, *kind, i && *kind == tc::rt::LibraryAttrKind::Int ? i.getInt() : 0});
  }
  if (std::string e = tc::rt::checkLibraryAttrs(*c, given, /*rejectUnknown=*/true); !e.empty())
    return fail(e);
  tc::rt::LibraryInts ints = libraryInts(dict);
  tc::rt::LibraryLayout layout;
  if (std::string e = tc::rt::layoutLibraryCall(*c, ints, getInputs().size(), getOutputs().size(),
                                                &layout);
      !e.empty())
    return fail(e);
  if (c->findAttr("rows")) {
    // The main input is [rows, cols] (flattened leading dimensions).
    int64_t rows = ints["rows"], cols = ints["cols"];
    BufferType x = bufferType(getInputs()[0]);
    if (x.getNumElements() != rows * cols)
      return emitOpError() << "\"" << getCallee() << "\" input " << x << " has "
                           << x.getNumElements() << " elements, rows x cols is " << rows << " x "
                           << cols;
  }
  int64_t scratch = libraryScratchBytes(getCallee(), dict);
  if (scratch > 0) {
    BufferType s = bufferType(getOutputs().back());
    if (s.getSizeInBytes() < scratch)
      return emitOpError() << "\"" << getCallee() << "\" scratch " << s << " holds "
                           << s.getSizeInBytes() << " bytes, the launcher needs " << scratch;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

void MatmulOp::build(OpBuilder &b, OperationState &state, ValueRange inputs, Value out,
                     const MatmulParams &p) {
  auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  auto batchShape = [&](ArrayRef<int64_t> s) {
    return p.broadcast ? b.getDenseI64ArrayAttr(s) : DenseI64ArrayAttr();
  };
  build(b, state, inputs, out, p.biasGradOut, p.auxOut, i64(p.m), i64(p.n), i64(p.k), i64(p.batch),
        i64(p.strideLhs), i64(p.strideRhs), i64(p.strideOut), b.getBoolAttr(p.transposeLhs),
        b.getBoolAttr(p.transposeRhs), b.getStringAttr(p.computeType), b.getStringAttr(p.epilogue),
        b.getF32FloatAttr(p.alpha), b.getF32FloatAttr(p.beta), batchShape(p.lhsBatch),
        batchShape(p.rhsBatch), b.getBoolAttr(p.fastAccum), i64(p.lhsBlocks), i64(p.rhsBlocks),
        b.getBoolAttr(p.deviceAlpha), b.getBoolAttr(p.addend), b.getStringAttr(p.biasGrad));
}

/// verifyFp8BlockScales of MXFP8 (lhs_blocks = rhs_blocks = 3): E8M0 bytes
/// in cuBLASLt's VEC32_UE8M0 layout of lhs [m, k] and rhs [n, k]
/// (tc::rt::mxfp8GemmScaleBytes), k a multiple of 32.
static LogicalResult verifyMxfp8Scales(MatmulOp op, BufferType ls, BufferType rs) {
  int64_t k = static_cast<int64_t>(op.getK());
  if (op.getLhsBlocks() != 3 || op.getRhsBlocks() != 3 || k % 32 != 0)
    return op.emitOpError() << "1x32 e8m0 block scales (3) take both operands and k a multiple of "
                               "32, got lhs_blocks "
                            << op.getLhsBlocks() << ", rhs_blocks " << op.getRhsBlocks() << ", k "
                            << k;
  if (op.getFastAccum() || op.getBatch() != 1 || bufferType(op.getOut()).getElementType().isF32())
    return op.emitOpError() << "block-scaled fp8 takes no fast_accum, batch 1 and a bf16 or f16 "
                               "out";
  int64_t wantL = tc::rt::mxfp8GemmScaleBytes(static_cast<int64_t>(op.getM()), k, false);
  int64_t wantR = tc::rt::mxfp8GemmScaleBytes(static_cast<int64_t>(op.getN()), k, false);
  auto e8m0 = [](BufferType t) { return llvm::isa<Float8E8M0FNUType>(t.getElementType()); };
  if (!e8m0(ls) || !e8m0(rs) || ls.getNumElements() != wantL || rs.getNumElements() != wantR)
    return op.emitOpError() << "1x32 block scales must be f8E8M0FNU of " << wantL << " and "
                            << wantR << " elements (cuBLASLt's VEC32_UE8M0 layout), got "
                               "lhs_scale_inv "
                            << ls << " and rhs_scale_inv " << rs;
  return success();
}

/// verifyFp8Matmul's scale checks with block scales: f32 buffers of the
/// sizes of cuBLASLt's layouts (tc::rt::fp8BlockGemmScaleFloats; rows m or n).
static LogicalResult verifyFp8BlockScales(MatmulOp op, BufferType ls, BufferType rs) {
  int64_t lb = op.getLhsBlocks(), rb = op.getRhsBlocks();
  if (lb == 3 || rb == 3)
    return verifyMxfp8Scales(op, ls, rs);
  if (lb < 1 || lb > 2 || rb < 1 || rb > 2 || (lb == 2 && rb == 2))
    return op.emitOpError() << "lhs_blocks / rhs_blocks must both be 1 (1x128) or 2 (128x128), "
                               "not both 2, got "
                            << lb << " and " << rb;
  if (op.getFastAccum() || op.getBatch() != 1 || bufferType(op.getOut()).getElementType().isF32())
    return op.emitOpError() << "block-scaled fp8 takes no fast_accum, batch 1 and a bf16 or f16 "
                               "out";
  // An operand [rows, k] in 1x128 blocks along k (quantize_fp8_block's
  // blocks 0) or in 128x128 blocks (2).
  auto floats = [&](int64_t blocks, int64_t rows) {
    int64_t k = static_cast<int64_t>(op.getK());
    return tc::rt::fp8BlockGemmScaleFloats(rows, k, blocks == 1 ? 0 : 2, false);
  };
  int64_t wantL = floats(lb, op.getM()), wantR = floats(rb, op.getN());
  if (!ls.getElementType().isF32() || !rs.getElementType().isF32() ||
      ls.getNumElements() != wantL || rs.getNumElements() != wantR)
    return op.emitOpError() << "block scales must be f32 of " << wantL << " and " << wantR
                            << " elements (cuBLASLt's layouts), got lhs_scale_inv " << ls
                            << " and rhs_scale_inv " << rs;
  return success();
}

/// The checks of a compute_type "fp8" matmul (cuBLASLt's FP8 form: see
/// runtime/src/cuda/cublaslt.h).
static LogicalResult verifyFp8Matmul(MatmulOp op) {
  unsigned nIn = op.getInputs().size();
  bool wantsBias = op.getEpilogue() == "bias";
  if (nIn != (wantsBias ? 5u : 4u))
    return op.emitOpError() << "compute_type \"fp8\" takes lhs, rhs, lhs_scale_inv"
                            << (wantsBias ? ", rhs_scale_inv and the bias"
                                          : " and rhs_scale_inv")
                            << ", got " << nIn << " inputs";
  auto isFp8 = [](Type t) { return llvm::isa<Float8E4M3FNType, Float8E5M2Type>(t); };
  Type lt = bufferType(op.getLhs()).getElementType();
  Type rt = bufferType(op.getRhs()).getElementType();
  Type ot = bufferType(op.getOut()).getElementType();
  if (!isFp8(lt) || !isFp8(rt))
    return op.emitOpError() << "compute_type \"fp8\" needs f8E4M3FN or f8E5M2 lhs and rhs, got "
                            << lt << " and " << rt;
  if (llvm::isa<Float8E5M2Type>(lt) && llvm::isa<Float8E5M2Type>(rt))
    return op.emitOpError() << "has no E5M2 x E5M2 form (cuBLASLt)";
  if (!ot.isF32() && !ot.isBF16() && !ot.isF16())
    return op.emitOpError() << "compute_type \"fp8\" writes f32, bf16 or f16, got " << ot;
  BufferType ls = bufferType(op.getLhsScaleInv()), rs = bufferType(op.getRhsScaleInv());
  bool perTensor = ls.getNumElements() == 1 && rs.getNumElements() == 1;
  bool perRow = ls.getNumElements() == static_cast<int64_t>(op.getM()) &&
                rs.getNumElements() == static_cast<int64_t>(op.getN()) && op.getBatch() == 1;
  if (op.getLhsBlocks() || op.getRhsBlocks()) {
    if (failed(verifyFp8BlockScales(op, ls, rs)))
      return failure();
  } else if (!ls.getElementType().isF32() || !rs.getElementType().isF32() ||
             (!perTensor && !perRow)) {
    return op.emitOpError() << "takes f32 scales, one per operand (per tensor) or m and n of them "
                               "(per row, batch 1), got lhs_scale_inv "
                            << ls << " and rhs_scale_inv " << rs;
  }
  if (!op.getTransposeRhs() || op.getTransposeLhs())
    return op.emitOpError() << "compute_type \"fp8\" is TN only: lhs [m, k] and rhs [n, k] "
                               "(transpose_rhs, not transpose_lhs)";
  if (op.getK() % 16 != 0 || op.getN() % 16 != 0)
    return op.emitOpError() << "compute_type \"fp8\" needs k and n multiples of 16, got k "
                            << op.getK() << ", n " << op.getN();
  if (op.getEpilogue() != "none" && op.getEpilogue() != "bias")
    return op.emitOpError() << "compute_type \"fp8\" takes no epilogue but \"bias\", got \""
                            << op.getEpilogue() << "\"";
  if (wantsBias && !perTensor)
    return op.emitOpError() << "compute_type \"fp8\" with per-row scales takes no bias";
  if (wantsBias && bufferType(op.getBias()).getElementType() != ot)
    return op.emitOpError() << "bias element type " << bufferType(op.getBias()).getElementType()
                            << " differs from out's " << ot;
  if (op.getLhsBatch())
    return op.emitOpError() << "compute_type \"fp8\" takes no broadcast batch";
  return success();
}

LogicalResult MatmulOp::verify() {
  if (getStream() < 0 || getStream() > 15)
    return emitOpError() << "stream " << getStream() << " is not 0..15 (the runtime's streams)";
  if (isFp8()) {
    if (failed(verifyFp8Matmul(*this)))
      return failure();
  } else if (getFastAccum()) {
    return emitOpError() << "fast_accum applies to compute_type \"fp8\" only";
  } else if (getLhsBlocks() || getRhsBlocks()) {
    return emitOpError() << "lhs_blocks / rhs_blocks apply to compute_type \"fp8\" only";
  }
  unsigned nIn = getInputs().size();
  if (getDeviceAlpha()) {
    if (isFp8())
      return emitOpError() << "device_alpha applies to non-fp8 products only";
    if (nIn < 3)
      return emitOpError() << "device_alpha needs the alpha input after lhs and rhs";
    BufferType at = bufferType(getInputs().back());
    if (!at.getElementType().isF32() || at.getNumElements() != 1)
      return emitOpError() << "device alpha must be one f32 element, got " << at;
    float beta = getBeta().convertToFloat();
    if (beta != 0.0f && beta != 1.0f)
      return emitOpError() << "device_alpha takes beta 0 or 1, got " << beta;
    --nIn; // the checks below are of the rest
  }
  if (getAddend()) {
    if (isFp8() || getDeviceAlpha() || getLhsBatch() || getBeta().convertToFloat() != 0.0f)
      return emitOpError() << "an addend takes a non-fp8 product without device_alpha, beta or "
                              "broadcast batch";
    if (nIn < 3 || bufferType(getInputs()[nIn - 1]) != bufferType(getOut()))
      return emitOpError() << "the addend (the last input) must have out's type "
                           << bufferType(getOut());
    --nIn; // the checks below are of the rest
  }
  if (!isFp8() && nIn != 2 && nIn != 3)
    return emitOpError() << "takes lhs, rhs and an optional bias, got " << nIn << " inputs";
  Type elt = bufferType(getOut()).getElementType();
  if (!isFp8())
    for (auto [i, v] : llvm::enumerate(getInputs().take_front(nIn)))
      if (bufferType(v).getElementType() != elt)
        return emitOpError() << (i == 0 ? "lhs" : i == 1 ? "rhs" : "bias") << " element type "
                             << bufferType(v).getElementType() << " differs from out's " << elt;
  static constexpr StringRef computeTypes[] = {"f32", "tf32", "fp8"};
  static constexpr StringRef epilogues[] = {
      "none",          "bias",  "gelu",         "bias_gelu",         "gelu_aux",
      "bias_gelu_aux", "dgelu", "gelu_erf_aux", "bias_gelu_erf_aux", "dgelu_erf"};
  if (!isOneOf(getComputeType(), computeTypes))
    return emitOpError() << "compute_type \"" << getComputeType() << "\" is not one of "
                         << joined(computeTypes);
  if (!isOneOf(getEpilogue(), epilogues))
    return emitOpError() << "epilogue \"" << getEpilogue() << "\" is not one of "
                         << joined(epilogues);
  if (getComputeType() == "tf32" && !elt.isF32())
    return emitOpError() << "compute_type \"tf32\" needs f32 buffers, got " << elt;
  bool wantsBias = getEpilogue().starts_with("bias");
  bool dgelu = getEpilogue().starts_with("dgelu");
  if (!isFp8() && !dgelu && wantsBias != (nIn == 3))
    return emitOpError() << "epilogue \"" << getEpilogue() << "\" "
                         << (wantsBias ? "needs" : "takes no") << " bias operand";
  if (dgelu) {
    if (isFp8() || nIn != 3 || getAddend() || getDeviceAlpha() ||
        getBeta().convertToFloat() != 0.0f)
      return emitOpError() << "epilogue \"" << getEpilogue()
                           << "\" takes lhs, rhs and the GELU's input, beta 0, no addend or "
                              "device_alpha";
    BufferType x = bufferType(getInputs()[2]);
    if (x.getNumElements() != bufferType(getOut()).getNumElements())
      return emitOpError() << "dgelu's GELU input " << x << " must hold out's elements ("
                           << bufferType(getOut()) << ")";
  }
  int64_t m = getM(), n = getN(), k = getK(), batch = getBatch();
  if (m < 0 || n < 0 || k < 1 || batch < 1)
    return emitOpError() << "needs m, n >= 0, k >= 1 and batch >= 1, got m " << m << ", n " << n
                         << ", k " << k << ", batch " << batch;
  if (Value bias = getBias())
    if (bufferType(bias).getNumElements() != n)
      return emitOpError() << "bias " << bufferType(bias) << " must have n = " << n
                           << " elements";
  bool aux = getEpilogue().ends_with("_aux");
  if (aux != static_cast<bool>(getAuxOut()))
    return emitOpError() << (aux ? "epilogue \"" + getEpilogue().str() + "\" needs its aux_out"
                                 : std::string("an aux_out needs epilogue gelu_aux or bias_gelu_aux"));
  if (Value a = getAuxOut()) {
    if (isFp8() || getLhsBatch())
      return emitOpError() << "a GELU aux output takes a non-fp8 product without broadcast";
    if (bufferType(a).getNumElements() != bufferType(getOut()).getNumElements() ||
        bufferType(a).getElementType() != bufferType(getOut()).getElementType())
      return emitOpError() << "aux_out " << bufferType(a) << " must hold out's elements ("
                           << bufferType(getOut()) << ")";
  }
  StringRef biasGrad = getBiasGrad();
  if (biasGrad != "none" && biasGrad != "lhs" && biasGrad != "rhs")
    return emitOpError() << "bias_grad \"" << biasGrad << "\" is not one of none, lhs, rhs";
  if ((biasGrad == "none") != !getBiasGradOut())
    return emitOpError() << (getBiasGradOut() ? "a bias_grad_out needs bias_grad lhs or rhs"
                                              : "bias_grad \"" + biasGrad.str() +
                                                    "\" needs its bias_grad_out");
  if (Value g = getBiasGradOut()) {
    if (isFp8() || getEpilogue() != "none" || getAddend() || getDeviceAlpha() || getLhsBatch() ||
        batch != 1 || getAlpha().convertToFloat() != 1.0f || getBeta().convertToFloat() != 0.0f)
      return emitOpError() << "bias_grad takes a non-fp8 product of batch 1 without epilogue, "
                              "addend, device_alpha, broadcast, alpha or beta";
    int64_t len = biasGrad == "lhs" ? m : n;
    if (bufferType(g).getNumElements() != len || bufferType(g).getElementType() != elt)
      return emitOpError() << "bias_grad_out " << bufferType(g) << " must hold " << len
                           << " elements of " << elt << " (the sum over k of " << biasGrad
                           << ")";
  }
  auto product = [](ArrayRef<int64_t> dims) {
    int64_t p = 1;
    for (int64_t d : dims)
      p *= d;
    return p;
  };
  int64_t lhsN = bufferType(getLhs()).getNumElements();
  int64_t rhsN = bufferType(getRhs()).getNumElements();
  int64_t outN = bufferType(getOut()).getNumElements();
  if (getLhsBatch().has_value() != getRhsBatch().has_value())
    return emitOpError() << "lhs_batch and rhs_batch are given together or not at all";
  if (getLhsBatch()) {
    ArrayRef<int64_t> lb = *getLhsBatch(), rb = *getRhsBatch();
    SmallVector<int64_t> ob;
    size_t rank = std::max(lb.size(), rb.size());
    for (size_t i = 0; i < rank; ++i) {
      int64_t a = i < rank - lb.size() ? 1 : lb[i - (rank - lb.size())];
      int64_t b = i < rank - rb.size() ? 1 : rb[i - (rank - rb.size())];
      if (a != b && a != 1 && b != 1)
        return emitOpError() << "lhs_batch and rhs_batch do not broadcast at batch dim " << i
                             << ": " << a << " vs " << b;
      ob.push_back(std::max(a, b));
    }
    if (lhsN != product(lb) * m * k || rhsN != product(rb) * k * n || outN != product(ob) * m * n)
      return emitOpError() << "broadcast matmul buffers hold " << lhsN << ", " << rhsN << ", "
                           << outN << " elements; the batch shapes and m " << m << ", n " << n
                           << ", k " << k << " need " << product(lb) * m * k << ", "
                           << product(rb) * k * n << ", " << product(ob) * m * n;
    return success();
  }
  auto needed = [&](int64_t matrix, int64_t stride) {
    if (stride == 0)
      return matrix;
    return (batch - 1) * (stride < 0 ? matrix : stride) + matrix;
  };
  struct Side {
    const char *name;
    int64_t have, matrix, stride;
  } sides[] = {{"lhs", lhsN, m * k, static_cast<int64_t>(getStrideLhs())}, // I64Attr reads as uint64_t
               {"rhs", rhsN, k * n, static_cast<int64_t>(getStrideRhs())},
               {"out", outN, m * n, static_cast<int64_t>(getStrideOut())}};
  for (const Side &s : sides) {
    if (s.stride < -1)
      return emitOpError() << "stride_" << s.name << " " << s.stride << " is invalid";
    if (s.have < needed(s.matrix, s.stride))
      return emitOpError() << s.name << " holds " << s.have << " elements, the call reads "
                           << needed(s.matrix, s.stride) << " (batch " << batch << ", m " << m
                           << ", n " << n << ", k " << k << ", stride " << s.stride << ")";
  }
  if (getStrideOut() == 0)
    return emitOpError() << "stride_out cannot be 0";
  return success();
}

//===----------------------------------------------------------------------===//
// Copies and streams
//===----------------------------------------------------------------------===//

LogicalResult CopyOp::verify() {
  BufferType s = bufferType(getSource()), t = bufferType(getTarget());
  if (s.getSizeInBytes() != t.getSizeInBytes())
    return emitOpError() << "source " << s << " (" << s.getSizeInBytes() << " bytes) and target "
                         << t << " (" << t.getSizeInBytes() << " bytes) differ in size";
  return success();
}

// I64Attr getters return uint64_t: compare as signed.
LogicalResult RecordOp::verify() {
  if (static_cast<int64_t>(getStream()) < 0)
    return emitOpError() << "stream " << static_cast<int64_t>(getStream()) << " is negative";
  return success();
}

LogicalResult WaitOp::verify() {
  if (static_cast<int64_t>(getStream()) < 0)
    return emitOpError() << "stream " << static_cast<int64_t>(getStream()) << " is negative";
  return success();
}

#define GET_OP_CLASSES
#include "dialects/tcx/IR/TcxOps.cpp.inc"
