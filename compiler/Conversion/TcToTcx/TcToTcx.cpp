//===- TcToTcx.cpp - tc-lower-to-tcx --------------------------------------===//
//
// Lowers each func.func of tc ops on tensors to tcx ops on buffers, in
// destination-passing style: every value gets a buffer (an alloc, a
// parameter's persistent buffer, a constant, or a view of another buffer)
// and every op becomes the launch, library call or matmul that writes it.
// Generated kernels are outlined into module-level `tcx.kernel`s holding the
// tc ops they compute; tcx-generate-cuda, a later stage, turns each body
// into CUDA C++ and sets how it is launched.
//
// The pass checks what the patterns cannot lower (so every error names the
// op and comes once), plans the buffer assignment, then runs the patterns
// as a partial conversion: tc ops inside kernel and fusion bodies stay, and
// so do constants, which get a buffer only where one is read.
//
// The function stays straight-line and in the original op order, so the
// memory planner's liveness is program order and the runtime can replay it
// (or capture it into one CUDA graph) as is.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/Passes.h"
#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Conversion/TcToTcx/Patterns.h"
#include "runtime/src/schema/library_abi.h"

namespace tc {
#define GEN_PASS_DEF_TCLOWERTOTCX
#include "compiler/Conversion/Passes.h.inc"
} // namespace tc

using namespace mlir;

namespace tc {

void populateTcToTcxPatterns(RewritePatternSet &patterns, BufferAssignment &buffers, bool tf32,
                             bool fuseEpilogues) {
  populateTcToTcxBufferPatterns(patterns, buffers);
  populateTcToTcxKernelPatterns(patterns, buffers);
  populateTcToTcxMatmulPatterns(patterns, buffers, tf32, fuseEpilogues);
  populateTcToTcxNormPatterns(patterns, buffers);
  populateTcToTcxLossPatterns(patterns, buffers);
  populateTcToTcxAttentionPatterns(patterns, buffers);
  populateTcToTcxRotaryPatterns(patterns, buffers);
  populateTcToTcxEmbeddingPatterns(patterns, buffers);
  populateTcToTcxFp8Patterns(patterns, buffers, fuseEpilogues);
  populateTcToTcxFp4Patterns(patterns, buffers);
}

namespace {

/// An error for a tc op of a function's body that no pattern can lower.
LogicalResult checkOp(Operation &op) {
  for (Type t : op.getResultTypes())
    if (auto rt = llvm::dyn_cast<RankedTensorType>(t); !rt || !rt.hasStaticShape())
      return op.emitOpError() << "result of type " << t
                              << " cannot be lowered to tcx (static ranked tensors only)";
  if (llvm::isa<FusionOp>(op)) {
    if (op.getNumRegions() != 1 || op.getRegion(0).getBlocks().size() != 1)
      return op.emitOpError() << "must have one region of one block to lower to a kernel";
    Block &src = op.getRegion(0).front();
    if (src.getNumArguments() != op.getNumOperands())
      return op.emitOpError() << "body takes " << src.getNumArguments() << " arguments for "
                              << op.getNumOperands() << " operands";
    if (op.getNumResults() == 0)
      return op.emitOpError() << "has no results to lower";
    return success();
  }
  // The GPU kernels take a finite mask fill only this low (library_abi.h).
  std::optional<APFloat> fill;
  if (auto a = llvm::dyn_cast<AttentionOp>(op))
    fill = a.getMaskFill();
  if (auto a = llvm::dyn_cast<AttentionGradOp>(op))
    fill = a.getMaskFill();
  if (fill && !rt::validAttentionMaskFill(fill->convertToDouble()))
    return op.emitOpError() << "mask_fill " << fill->convertToDouble()
                            << ": the GPU kernels take -inf or a fill at most "
                            << rt::kAttentionMaxFiniteFill
                            << " (a hidden key beside a visible one must weigh exactly 0)";
  if (failed(checkFp8Op(op)))
    return failure();
  // A norm gradient of the library's form without a scale has no scale
  // gradient to write.
  if (isa<LayerNormGradOp, RmsNormGradOp>(op) && op.getNumOperands() <= 2) {
    Type elt = tensorType(op.getOperand(0)).getElementType();
    Type pe = tensorType(op.getResult(1)).getElementType();
    if (normTypes(elt, Value()) && (pe == elt || pe.isF32()) && !op.getResult(1).use_empty())
      return op.emitOpError() << "GPU lowering: the scale gradient of a normalisation without "
                                 "a scale is not supported";
  }
  if (op.getNumRegions() != 0 || op.getNumResults() == 0)
    return op.emitOpError() << "cannot be lowered to tcx";
  return success();
}

LogicalResult lowerFunction(func::FuncOp fn, SymbolTable &symbols, bool tf32,
                            bool fuseEpilogues) {
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
                              << " of type " << a.getType() << " is not a static ranked tensor";
  for (Operation &op : body.without_terminator())
    if (failed(checkOp(op)))
      return failure();

  // Hoisted params, consts and destination views go above this placeholder.
  MLIRContext *ctx = fn.getContext();
  OpBuilder b = OpBuilder::atBlockBegin(&body);
  auto anchor =
      tcx::RecordOp::create(b, fn.getLoc(), tcx::EventType::get(ctx), b.getI64IntegerAttr(0));
  BufferAssignment buffers(fn, symbols);
  buffers.takeReferenceValues();
  buffers.plan(b, anchor);

  ConversionTarget target(*ctx);
  target.addLegalDialect<tcx::TcxDialect>();
  // Kernel and fusion bodies keep their tc ops (codegen reads them);
  // constants stay until the end, made into tcx.consts where read.
  target.addDynamicallyLegalDialect<TCDialect>([](Operation *op) {
    return isa<ConstantOp>(op) || op->getParentOfType<tcx::KernelOp>() ||
           op->getParentOfType<FusionOp>();
  });
  Operation *oldReturn = ret;
  target.addDynamicallyLegalOp<func::ReturnOp>(
      [oldReturn](func::ReturnOp r) { return r.getOperation() != oldReturn; });
  RewritePatternSet patterns(ctx);
  populateTcToTcxPatterns(patterns, buffers, tf32, fuseEpilogues);
  ConversionConfig config;
  // The IR after tc-fuse is what gets lowered: no folding on the way.
  config.foldingMode = DialectConversionFoldingMode::Never;
  if (failed(applyPartialConversion(fn, target, std::move(patterns), config)))
    return failure();

  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isa<ConstantOp>(op) && op.use_empty())
      op.erase();
  anchor->erase();
  // An argument is its own buffer; it kept its tensor type until every tc
  // op was gone (kernel bodies are built from the tensor types).
  for (BlockArgument a : body.getArguments())
    a.setType(tcx::BufferType::fromTensorType(llvm::cast<RankedTensorType>(a.getType())));
  fn.setFunctionType(FunctionType::get(ctx, body.getArgumentTypes(),
                                       body.getTerminator()->getOperandTypes()));
  return success();
}

struct TcLowerToTcx : impl::TcLowerToTcxBase<TcLowerToTcx> {
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
      if (failed(lowerFunction(fn, symbols, tf32, fuseEpilogues)))
        return signalPassFailure();
      if (wgmmaAttention)
        fn.walk([](tcx::LibraryOp call) {
          if (call.getCallee() == "attention_fwd" || call.getCallee() == "attention_bwd")
            call->setAttr("wgmma", BoolAttr::get(call.getContext(), true));
        });
    }
  }
};

} // namespace
} // namespace tc
