//===- TcxOps.td - the tcx execution-level dialect ---------*- tablegen -*-===//
//
// tcx is what the CUDA runtime executes: device buffers, kernel launches,
// hand-written library kernels, cuBLASLt matmuls, copies, fills and stream
// events, in the order they run. It is the contract between the compiler's
// memory planner / code generator and runtime/src/cuda.
//
//===----------------------------------------------------------------------===//
#ifndef TCX_OPS_TD
#define TCX_OPS_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Tcx_Dialect : Dialect {
  let name = "tcx";
  let summary = "Execution level of a training step: buffers, launches, library calls";
  let description = [{
    Every value of type `!tcx.buffer<shape x elt>` is a dense, row-major
    device buffer of static shape. Ops take their inputs and their outputs
    as buffer operands (destination-passing style) and run in program order
    on one stream unless `tcx.record` / `tcx.wait` say otherwise. Before
    memory planning transient buffers come from `tcx.alloc`; after it, from
    `tcx.view` of the function's one `tcx.arena`.
  }];
  let cppNamespace = "::tcx";
  let useDefaultTypePrinterParser = 1;
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

class Tcx_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Tcx_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Tcx_BufferType : Tcx_Type<"Buffer", "buffer"> {
  let summary = "A dense row-major device buffer of static shape";
  let description = [{
    `!tcx.buffer<2x16x64xbf16>`; `!tcx.buffer<f32>` is a scalar. The byte
    size is the element count times the element width (sub-byte types are
    packed, rounded up to whole bytes). A buffer says nothing about where it
    lives: that is the defining op's business (arena view, parameter, ...).
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$shape,
                        "::mlir::Type":$elementType);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    TypeBuilderWithInferredContext<(ins "::llvm::ArrayRef<int64_t>":$shape,
                                        "::mlir::Type":$elementType), [{
      return $_get(elementType.getContext(), shape, elementType);
    }]>
  ];
  let extraClassDeclaration = [{
    /// Number of elements (1 for a scalar).
    int64_t getNumElements() const;
    /// Storage size in bytes.
    int64_t getSizeInBytes() const;
    /// The tensor type with the same shape and element type.
    ::mlir::RankedTensorType toTensorType() const;
    static BufferType fromTensorType(::mlir::RankedTensorType t);
  }];
}

def Tcx_EventType : Tcx_Type<"Event", "event"> {
  let summary = "A point in a stream's work (a CUDA event)";
}

def Tcx_Buffer : Type<CPred<"::llvm::isa<::tcx::BufferType>($_self)">,
                      "tcx buffer", "::tcx::BufferType">;

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

class Tcx_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tcx_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Storage
//===----------------------------------------------------------------------===//

def Tcx_ParamOp : Tcx_Op<"param", [Pure]> {
  let summary = "A persistent buffer: parameter, optimizer state, gradient";
  let description = [{
    The buffer of the artifact's parameter-table entry `name`, allocated once
    by the runtime outside the arena and kept across steps. `kind` is one of
    "parameter" (model weights), "buffer" (non-trainable model tensors),
    "optimizer_state", "gradient" (persistent gradients of @grad_step) or
    "shadow" (a weight's 16-bit copy, "shadow:<p>": tc-shadow-parameter-casts).
    Ops may write it in place (the optimizer's "update:<p>" results).

    ```mlir
    %w = tcx.param "wte.weight" {kind = "parameter", trainable} : !tcx.buffer<256x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name,
                   DefaultValuedStrAttr<StrAttr, "parameter">:$kind,
                   UnitAttr:$trainable);
  let results = (outs Tcx_Buffer:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tcx_ConstOp : Tcx_Op<"const", [Pure]> {
  let summary = "A read-only buffer initialised from a constant";
  let description = [{
    Uploaded once when the step is loaded; lives outside the arena.

    ```mlir
    %c = tcx.const dense<[1.0, 2.0]> : tensor<2xf32> -> !tcx.buffer<2xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Tcx_Buffer:$result);
  let assemblyFormat = "$value attr-dict `->` type($result)";
  let hasVerifier = 1;
}

def Tcx_AllocOp : Tcx_Op<"alloc", [MemoryEffects<[MemAlloc]>]> {
  let summary = "A transient buffer (before memory planning)";
  let description = [{
    Lives from its first to its last use in the step; `tcx-plan-memory`
    replaces it by a `tcx.view` of the arena. `kind` is what the memory
    report counts it as: "activation" (forward values), "backward" (values
    that depend on a loss gradient: activation gradients and parameter
    gradients), "scratch" (library workspace), "output" (a step result).

    ```mlir
    %b = tcx.alloc {kind = "activation"} : !tcx.buffer<2x16x64xf32>
    ```
  }];
  let arguments = (ins DefaultValuedStrAttr<StrAttr, "activation">:$kind);
  let results = (outs Res<Tcx_Buffer, "", [MemAlloc]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tcx_ArenaOp : Tcx_Op<"arena", [Pure]> {
  let summary = "The step's one transient arena (after memory planning)";
  let description = [{
    A byte buffer of `tcx.arena_size` bytes (the function attribute),
    allocated once by the runtime, 256-byte aligned. Every transient buffer
    is a `tcx.view` of it.

    ```mlir
    %arena = tcx.arena : !tcx.buffer<4096xi8>
    ```
  }];
  let results = (outs Tcx_Buffer:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tcx_ViewOp : Tcx_Op<"view", [Pure]> {
  let summary = "The bytes of a buffer from `offset` on, seen as another buffer";
  let description = [{
    No copy: the result aliases `source` at byte `offset`. Used for
    reshapes (offset 0, same size), contiguous slices and, after planning,
    for every transient buffer (a view of the arena). The result must fit
    inside the source and the offset must be a multiple of the result's
    element size.

    ```mlir
    %y = tcx.view %x[0] : !tcx.buffer<2x16x64xf32> -> !tcx.buffer<32x64xf32>
    %t = tcx.view %arena[8192] : !tcx.buffer<65536xi8> -> !tcx.buffer<32x64xf32>
    ```
  }];
  let arguments = (ins Tcx_Buffer:$source, I64Attr:$offset);
  let results = (outs Tcx_Buffer:$result);
  let assemblyFormat = "$source `[` $offset `]` attr-dict `:` type($source) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Work
//===----------------------------------------------------------------------===//

def Tcx_KernelOp : Tcx_Op<"kernel", [Symbol, IsolatedFromAbove, SingleBlock,
    HasParent<"::mlir::ModuleOp">, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A generated kernel: tc ops on tensors, one CUDA kernel";
  let description = [{
    The body says what the kernel computes, on tensors: its block arguments
    are the inputs, `tcx.yield` gives the outputs; `tcx.launch` runs it on
    buffers of the same shapes. tcx-generate-cuda turns each body into one
    `__global__` function and sets `cuda_kernel` to the `tcx.cuda_source`
    that holds it (kernels with equal code share one). `kind` tells the
    generator which template applies: "elementwise" (every op elementwise,
    outputs all of one shape; one thread per output element), "fusion" (a
    `tc.fusion` body) or the name of the one tc op it holds ("transpose",
    "reduce_sum", ...).

    ```mlir
    tcx.kernel @add_0 kind("elementwise") {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      %0 = tc.add %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
      tcx.yield %0 : tensor<4xf32>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$kind,
                   OptionalAttr<FlatSymbolRefAttr>:$cuda_kernel);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `kind` `(` $kind `)` attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::Block &getEntry() { return getBody().front(); }
    /// Types of the outputs (the yielded values).
    ::llvm::SmallVector<::mlir::Type> getResultTypes();
  }];
}

def Tcx_YieldOp : Tcx_Op<"yield", [Pure, Terminator, HasParent<"KernelOp">]> {
  let summary = "The outputs of a tcx.kernel body";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

def Tcx_CudaSourceOp : Tcx_Op<"cuda_source", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "The CUDA C++ of one generated kernel";
  let description = [{
    Set by tcx-generate-cuda: a complete translation unit whose
    `extern "C" __global__` function is named like the symbol (the kind and
    a hash of the source, so kernels with equal code share one). NVRTC
    compiles each one after the pipeline; `tcx.kernel`s name theirs in
    `cuda_kernel`.

    ```mlir
    tcx.cuda_source @tc_fusion_0123456789abcdef "extern \"C\" __global__ ..."
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$source);
  let assemblyFormat = "$sym_name $source attr-dict";
}

def Tcx_LaunchOp : Tcx_Op<"launch", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Run a generated kernel (tcx.kernel) on buffers";
  let description = [{
    `ins` bind the kernel's block arguments, `outs` its yielded values, in
    order and with the same shapes and element types. For a generated CUDA
    kernel these are its pointer parameters: one input per operand of the
    op it computes, in operand order (a buffer may repeat; splat constants
    are `tcx.const` buffers), one output per result. `elements` is the
    number of elements of the (first) output: the runtime derives the grid
    from it (one thread per element, 256 per block) unless `grid` and
    `block` are given. An output may be one of the inputs (in place) only
    when the kernel reads each element before writing it (elementwise
    kernels with an input of the output's shape).

    tcx-generate-cuda sets what the generated kernel needs besides its
    pointers, so that the device program launches it without MLIR: the 1-D
    `grid` and `block` (one element each) and the kernel's scalar arguments
    `n` (its grid-stride work count) and `meta` (shapes, strides and offsets;
    see compiler/codegen/cuda/CudaCodegen.h). They are set together, and
    only for a kernel with a `cuda_kernel`.

    ```mlir
    tcx.launch @add_0 ins(%a, %b : !tcx.buffer<4xf32>, !tcx.buffer<4xf32>)
        outs(%c : !tcx.buffer<4xf32>) {elements = 4 : i64}
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$kernel,
                   Arg<Variadic<Tcx_Buffer>, "", [MemRead]>:$inputs,
                   Arg<Variadic<Tcx_Buffer>, "", [MemWrite]>:$outputs,
                   I64Attr:$elements,
                   OptionalAttr<DenseI64ArrayAttr>:$grid,
                   OptionalAttr<DenseI64ArrayAttr>:$block,
                   OptionalAttr<I64Attr>:$n,
                   OptionalAttr<DenseI64ArrayAttr>:$meta);
  let assemblyFormat = "$kernel (`ins` `(` $inputs^ `:` type($inputs) `)`)? "
                       "`outs` `(` $outputs `:` type($outputs) `)` attr-dict";
  let hasVerifier = 1;
}

def Tcx_LibraryOp : Tcx_Op<"library", [AttrSizedOperandSegments]> {
  let summary = "Call a hand-written runtime kernel by name";
  let description = [{
    `callee` names a launcher of runtime/src/cuda/kernels (the table in
    runtime/src/schema/library_abi.h lists each with its operands, results,
    attributes and scratch bytes; the verifier checks against it):
    "softmax_fwd" {rows, cols, log}, "layer_norm_fwd" {rows, cols, eps,
    has_weight, has_bias}, "rms_norm_fwd" {rows, cols, eps, has_weight},
    "layer_norm_bwd", "rms_norm_bwd", "cross_entropy_fwd",
    "cross_entropy_bwd", "cross_entropy_fwd_bwd" {rows, cols, ignore_index,
    grad_scale}, "embedding_fwd" {count, vocab, dim}, "embedding_bwd"
    {count, vocab, dim, accumulate}, "gelu_fwd", "gelu_bwd", "cast",
    "adamw", "sgd", "sum_squares". Optional pointers are given by `has_*`
    attributes; a scratch buffer, when the launcher needs one, is the last
    output (its size comes from `tcx::libraryScratchBytes`).

    ```mlir
    tcx.library "softmax_fwd" ins(%x : !tcx.buffer<8x16xf32>)
        outs(%y : !tcx.buffer<8x16xf32>) {rows = 8 : i64, cols = 16 : i64, log = false}
    ```
  }];
  let arguments = (ins StrAttr:$callee,
                   Arg<Variadic<Tcx_Buffer>, "", [MemRead]>:$inputs,
                   Arg<Variadic<Tcx_Buffer>, "", [MemWrite]>:$outputs);
  let assemblyFormat = "$callee (`ins` `(` $inputs^ `:` type($inputs) `)`)? "
                       "`outs` `(` $outputs `:` type($outputs) `)` attr-dict";
  let hasVerifier = 1;
}

def Tcx_MatmulOp : Tcx_Op<"matmul", [AttrSizedOperandSegments]> {
  let summary = "One cuBLASLt call (runtime/src/cuda/cublaslt.h MatmulDesc)";
  let description = [{
    Row-major: out[b] = alpha * op(lhs[b]) @ op(rhs[b]) + beta * out[b]
    (+ bias[n]) (then GELU-tanh), for b in [0, batch). lhs[b] is m x k
    (k x m with `transpose_lhs`), rhs[b] is k x n (n x k with
    `transpose_rhs`). `stride_lhs`/`stride_rhs`/`stride_out` are elements
    between batch matrices (0: one matrix for every batch). With
    `lhs_batch`/`rhs_batch` (numpy-broadcast batch shapes) the runtime uses
    Matmul::runBroadcast instead and `batch`/strides are ignored.
    `compute_type` is "f32", "tf32" or "bf16"/"f16" inputs with "f32"
    accumulation (always), `epilogue` is "none", "bias", "gelu" or
    "bias_gelu"; the bias ([n], the operand dtype) is the third input.
    "gelu_aux" and "bias_gelu_aux" (not fp8) also write the GELU's input
    (the product, plus the bias) to `aux_out` (out's element type and
    count): the pre-activation a training step's backward reads (cuBLASLt's
    GELU_AUX(_BIAS)). "dgelu" (not fp8, beta 0, no addend or device_alpha)
    multiplies the product by gelu_tanh'(x) of its third input x, that
    pre-activation (cuBLASLt's DGELU): the backward of such a GELU.
    "gelu_erf_aux", "bias_gelu_erf_aux" and "dgelu_erf" are the same with
    the exact (erf) GELU (tc's own GEMM, or the product and a GELU kernel:
    cuBLASLt has only the tanh form).

    `compute_type` "fp8" (Matmul::runFp8): lhs and rhs are f8E4M3FN or
    f8E5M2 (not both E5M2), the third and fourth inputs their f32
    dequantisation scales (tc.quantize's scale_inv): one element each (per
    tensor) or m and n elements (per row, cuBLASLt's outer-vector scaling),
    out is bf16, f16 or f32,
    accumulation fp32; cuBLASLt's FP8 GEMMs are TN only, so `transpose_rhs`
    and not `transpose_lhs` (lhs [m, k], rhs [n, k]), k and n multiples of
    16, no broadcast, no epilogue but "bias" (per-tensor scales; the bias
    [n] of out's type is the fifth input). `fast_accum` (fp8 only) trades
    accuracy for speed: forward GEMMs only. `lhs_blocks` / `rhs_blocks` (fp8
    only, both or neither: --fp8-scaling block128): 1 = scales per 1x128
    block along k, 2 = per 128x128 block, in cuBLASLt's layouts (the
    scale_gemm of the runtime's quantize_fp8_block); not both 2, no
    fast_accum, batch 1, bf16 or f16 out. 3 (both, --fp8-scaling mxfp8,
    sm_100 / sm_120 only): f8E8M0FNU scales per 1x32 block along k in
    cuBLASLt's VEC32_UE8M0 layout (the scale_gemm of quantize_mx), k a
    multiple of 32.

    `device_alpha` (not fp8): alpha is read on the device from the last
    input, an f32 buffer of one element (tc.matmul's alpha: tc-fp4-exact's
    NVFP4 tensor scales), cuBLASLt's CUBLASLT_POINTER_MODE_DEVICE; beta 0 or
    1.

    `addend` (not fp8, no device_alpha, beta 0, no broadcast batch): the
    input after the bias, of out's type and size, is added to the product
    before the bias (cuBLASLt's C with beta 1): the residual add after a
    projection.

    `bias_grad` "lhs" or "rhs" (not fp8; batch 1, alpha 1, beta 0, no
    epilogue, addend, device_alpha or broadcast): the second output,
    `bias_grad_out` of out's element type, gets the sum over k of that
    operand: m elements for "lhs" (its columns with `transpose_lhs`), n for
    "rhs" (its columns without `transpose_rhs`): the bias gradient of a
    Linear layer from its weight-gradient GEMM (cuBLASLt's BGRADB / BGRADA,
    or the product and a separate sum where cuBLASLt has none).

    `stream` (default 0): the stream it runs on; tcx-schedule-streams puts
    weight-gradient matmuls on stream 1 between a `tcx.wait` and a
    `tcx.record` (the runtime gives each stream its own cuBLASLt workspace).

    ```mlir
    tcx.matmul ins(%a, %w : !tcx.buffer<32x64xf32>, !tcx.buffer<256x64xf32>)
        outs(%y : !tcx.buffer<32x256xf32>)
        {m = 32 : i64, n = 256 : i64, k = 64 : i64, batch = 1 : i64,
         transpose_rhs = true}
    ```
  }];
  let arguments = (ins Arg<Variadic<Tcx_Buffer>, "", [MemRead]>:$inputs,
                   Arg<Tcx_Buffer, "", [MemRead, MemWrite]>:$out,
                   Arg<Optional<Tcx_Buffer>, "", [MemWrite]>:$bias_grad_out,
                   Arg<Optional<Tcx_Buffer>, "", [MemWrite]>:$aux_out,
                   I64Attr:$m, I64Attr:$n, I64Attr:$k,
                   DefaultValuedAttr<I64Attr, "1">:$batch,
                   DefaultValuedAttr<I64Attr, "-1">:$stride_lhs,
                   DefaultValuedAttr<I64Attr, "-1">:$stride_rhs,
                   DefaultValuedAttr<I64Attr, "-1">:$stride_out,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs,
                   DefaultValuedStrAttr<StrAttr, "f32">:$compute_type,
                   DefaultValuedStrAttr<StrAttr, "none">:$epilogue,
                   DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                   DefaultValuedAttr<F32Attr, "0.0">:$beta,
                   OptionalAttr<DenseI64ArrayAttr>:$lhs_batch,
                   OptionalAttr<DenseI64ArrayAttr>:$rhs_batch,
                   DefaultValuedAttr<BoolAttr, "false">:$fast_accum,
                   DefaultValuedAttr<I64Attr, "0">:$lhs_blocks,
                   DefaultValuedAttr<I64Attr, "0">:$rhs_blocks,
                   DefaultValuedAttr<BoolAttr, "false">:$device_alpha,
                   DefaultValuedAttr<BoolAttr, "false">:$addend,
                   DefaultValuedStrAttr<StrAttr, "none">:$bias_grad,
                   DefaultValuedAttr<I64Attr, "0">:$stream);
  let assemblyFormat = "`ins` `(` $inputs `:` type($inputs) `)` "
                       "`outs` `(` $out `:` type($out) "
                       "(`bias_grad` $bias_grad_out^ `:` type($bias_grad_out))? "
                       "(`aux` $aux_out^ `:` type($aux_out))? `)` attr-dict";
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::mlir::ValueRange":$inputs, "::mlir::Value":$out,
                   "const ::tcx::MatmulParams &":$params)>
  ];
  let extraClassDeclaration = [{
    bool isFp8() { return getComputeType() == "fp8"; }
    ::mlir::Value getLhs() { return getInputs()[0]; }
    ::mlir::Value getRhs() { return getInputs()[1]; }
    /// compute_type "fp8": the operands' f32 scale_inv scalars.
    ::mlir::Value getLhsScaleInv() { return isFp8() ? getInputs()[2] : nullptr; }
    ::mlir::Value getRhsScaleInv() { return isFp8() ? getInputs()[3] : nullptr; }
    ::mlir::Value getBias() {
      if (getEpilogue().starts_with("dgelu"))
        return nullptr;
      unsigned i = isFp8() ? 4 : 2;
      return getInputs().size() > i + (getDeviceAlpha() ? 1 : 0) + (getAddend() ? 1 : 0)
                 ? getInputs()[i]
                 : nullptr;
    }
    /// addend: the buffer added to the product, the last input.
    ::mlir::Value getAddendInput() { return getAddend() ? getInputs().back() : nullptr; }
    /// device_alpha: the f32 [1] alpha read on the device, the last input.
    ::mlir::Value getAlphaInput() { return getDeviceAlpha() ? getInputs().back() : nullptr; }
  }];
}

def Tcx_CopyOp : Tcx_Op<"copy"> {
  let summary = "Copy the bytes of one buffer into another of the same size";
  let description = [{
    ```mlir
    tcx.copy %src, %dst : !tcx.buffer<4xf32>, !tcx.buffer<4xf32>
    ```
  }];
  let arguments = (ins Arg<Tcx_Buffer, "", [MemRead]>:$source,
                   Arg<Tcx_Buffer, "", [MemWrite]>:$target);
  let assemblyFormat = "$source `,` $target attr-dict `:` type($source) `,` type($target)";
  let hasVerifier = 1;
}

def Tcx_FillOp : Tcx_Op<"fill"> {
  let summary = "Set every element of a buffer to `value`";
  let description = [{
    `value` is converted to the element type (0.0 zero-fills any type).

    ```mlir
    tcx.fill %b {value = 0.0 : f64} : !tcx.buffer<4xf32>
    ```
  }];
  let arguments = (ins Arg<Tcx_Buffer, "", [MemWrite]>:$target,
                   DefaultValuedAttr<F64Attr, "0.0">:$value);
  let assemblyFormat = "$target attr-dict `:` type($target)";
}

def Tcx_RecordOp : Tcx_Op<"record"> {
  let summary = "Record an event on `stream` after the work enqueued so far";
  let description = [{
    ```mlir
    %e = tcx.record {stream = 0 : i64} : !tcx.event
    tcx.wait %e {stream = 1 : i64}
    ```
  }];
  let arguments = (ins DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs Tcx_EventType:$event);
  let assemblyFormat = "attr-dict `:` type($event)";
  let hasVerifier = 1;
}

def Tcx_WaitOp : Tcx_Op<"wait"> {
  let summary = "Make `stream` wait for an event";
  let arguments = (ins Tcx_EventType:$event,
                   DefaultValuedAttr<I64Attr, "0">:$stream);
  let assemblyFormat = "$event attr-dict";
  let hasVerifier = 1;
}

#endif // TCX_OPS_TD
