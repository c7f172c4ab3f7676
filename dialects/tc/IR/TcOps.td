//===- TcOps.td - tc op definitions ------------------------*- tablegen -*-===//
//
// Every op of the tensor-level dialect. This file is also the contract with
// the runtime: the reference executor (runtime/src/cpu) dispatches on these op
// names ("tc.add") and reads the attributes by the names used here.
//
//===----------------------------------------------------------------------===//
#ifndef TC_OPS_TD
#define TC_OPS_TD

include "dialects/tc/IR/TcDialect.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Op classes: what passes ask of an op instead of listing op names
//===----------------------------------------------------------------------===//

// One result element from the operand elements at the same (numpy-
// broadcast) index: unary math, gelu, isnan/isinf, cast, binary arithmetic,
// logic and comparisons, rem, select. tc-fuse groups them, CUDA codegen emits
// them inside one kernel, tc-lower-to-tcx gives a lone one a kernel.
def TC_Elementwise : NativeOpTrait<"Elementwise"> { let cppNamespace = "::tc::traits"; }
// A reduction over `axes` (with `keepdims`): reduce_sum/mean/max/min/prod.
def TC_Reduction : NativeOpTrait<"Reduction"> { let cppNamespace = "::tc::traits"; }
// Moves or selects elements without arithmetic (values are exact in any
// precision): reshape, transpose, broadcast, slice, concat, split, pad,
// gather, insert_slice.
def TC_DataMovement : NativeOpTrait<"DataMovement"> { let cppNamespace = "::tc::traits"; }

class TC_Op<string mnemonic, list<Trait> traits = []>
    : Op<TC_Dialect, mnemonic, traits>;

def TC_Tensor : RankedTensorOf<[AnyType]>;
def TC_FloatTensor : RankedTensorOf<[AnyFloat]>;
def TC_NumericTensor : RankedTensorOf<[AnyFloat, AnyInteger]>;
def TC_BoolTensor : RankedTensorOf<[I1]>;
def TC_IndexTensor : RankedTensorOf<[AnySignlessInteger, AnyUnsignedInteger]>;

//===----------------------------------------------------------------------===//
// Leaves
//===----------------------------------------------------------------------===//

def TC_ParameterOp : TC_Op<"parameter", [Pure]> {
  let summary = "A named model parameter or buffer";
  let description = [{
    Reads the parameter `name` (the ONNX initializer name) from the artifact's
    parameter table. `trainable` marks it for the autodiff pass.

    ```mlir
    %w = tc.parameter "transformer.wte.weight" {trainable} : tensor<256x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, UnitAttr:$trainable);
  let results = (outs TC_Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def TC_ConstantOp : TC_Op<"constant", [ConstantLike, Pure,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "A constant tensor";
  let description = [{
    ```mlir
    %c = tc.constant dense<[1.0, 2.0]> : tensor<2xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs TC_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
  let builders = [OpBuilder<(ins "::mlir::ElementsAttr":$value), [{
    build($_builder, $_state, value.getType(), value);
  }]>];
}

//===----------------------------------------------------------------------===//
// Elementwise unary
//===----------------------------------------------------------------------===//

class TC_UnaryOp<string mnemonic, Type operandType, list<Trait> traits = []>
    : TC_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType, TC_Elementwise])> {
  let summary = "Elementwise " # mnemonic;
  let description = [{
    Applies `}] # mnemonic # [{` to every element; the result has the type of
    the operand.

    ```mlir
    %y = tc.}] # mnemonic # [{ %x : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins operandType:$input);
  let results = (outs operandType:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def TC_NegOp : TC_UnaryOp<"neg", TC_NumericTensor>;
def TC_AbsOp : TC_UnaryOp<"abs", TC_NumericTensor>;
def TC_SignOp : TC_UnaryOp<"sign", TC_NumericTensor>;
def TC_ReluOp : TC_UnaryOp<"relu", TC_NumericTensor>;
def TC_ExpOp : TC_UnaryOp<"exp", TC_FloatTensor>;
def TC_LogOp : TC_UnaryOp<"log", TC_FloatTensor>;
def TC_SqrtOp : TC_UnaryOp<"sqrt", TC_FloatTensor>;
def TC_RsqrtOp : TC_UnaryOp<"rsqrt", TC_FloatTensor>;
def TC_ReciprocalOp : TC_UnaryOp<"reciprocal", TC_FloatTensor>;
def TC_TanhOp : TC_UnaryOp<"tanh", TC_FloatTensor>;
def TC_SigmoidOp : TC_UnaryOp<"sigmoid", TC_FloatTensor>;
def TC_ErfOp : TC_UnaryOp<"erf", TC_FloatTensor>;
def TC_SiluOp : TC_UnaryOp<"silu", TC_FloatTensor>;
def TC_SinOp : TC_UnaryOp<"sin", TC_FloatTensor>;
def TC_CosOp : TC_UnaryOp<"cos", TC_FloatTensor>;
def TC_TanOp : TC_UnaryOp<"tan", TC_FloatTensor>;
def TC_AsinOp : TC_UnaryOp<"asin", TC_FloatTensor>;
def TC_AcosOp : TC_UnaryOp<"acos", TC_FloatTensor>;
def TC_AtanOp : TC_UnaryOp<"atan", TC_FloatTensor>;
def TC_SinhOp : TC_UnaryOp<"sinh", TC_FloatTensor>;
def TC_CoshOp : TC_UnaryOp<"cosh", TC_FloatTensor>;
def TC_AsinhOp : TC_UnaryOp<"asinh", TC_FloatTensor>;
def TC_AcoshOp : TC_UnaryOp<"acosh", TC_FloatTensor>;
def TC_AtanhOp : TC_UnaryOp<"atanh", TC_FloatTensor>;
def TC_FloorOp : TC_UnaryOp<"floor", TC_FloatTensor>;
def TC_CeilOp : TC_UnaryOp<"ceil", TC_FloatTensor>;
// Rounds half to even, like ONNX Round and torch.round.
def TC_RoundOp : TC_UnaryOp<"round", TC_FloatTensor>;
def TC_NotOp : TC_UnaryOp<"not", TC_BoolTensor>;

def TC_GeluOp : TC_Op<"gelu", [Pure, SameOperandsAndResultType, TC_Elementwise]> {
  let summary = "Elementwise GELU";
  let description = [{
    `approximate = "none"` is x * Phi(x) (erf form); `"tanh"` is the tanh
    approximation used by GPT-2.

    ```mlir
    %y = tc.gelu %x {approximate = "tanh"} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins TC_FloatTensor:$input,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs TC_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

class TC_FloatPredicateOp<string mnemonic>
    : TC_Op<mnemonic, [Pure, InferTypeOpAdaptor, TC_Elementwise]> {
  let summary = "Elementwise " # mnemonic # " test";
  let description = [{
    Result is i1 with the operand's shape.

    ```mlir
    %m = tc.}] # mnemonic # [{ %x : tensor<4xf32> -> tensor<4xi1>
    ```
  }];
  let arguments = (ins TC_FloatTensor:$input);
  let results = (outs TC_BoolTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def TC_IsNanOp : TC_FloatPredicateOp<"isnan">;
def TC_IsInfOp : TC_FloatPredicateOp<"isinf">;

def TC_CastOp : TC_Op<"cast", [Pure, TC_Elementwise]> {
  let summary = "Element type conversion";
  let description = [{
    Converts every element to the result's element type with round to nearest
    even; float to integer truncates toward zero; anything to i1 is `!= 0`.
    With `saturate` (the default, as in ONNX), out-of-range values converted
    to a float8 type clamp to its largest finite value.

    ```mlir
    %y = tc.cast %x : tensor<4xf32> to tensor<4xbf16>
    ```
  }];
  let arguments = (ins TC_Tensor:$input,
                   DefaultValuedAttr<BoolAttr, "true">:$saturate);
  let results = (outs TC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise binary and ternary (numpy broadcasting)
//===----------------------------------------------------------------------===//

class TC_BinaryOp<string mnemonic, Type operandType, Type resultType,
                  list<Trait> traits = []>
    : TC_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor, TC_Elementwise])> {
  let summary = "Elementwise " # mnemonic # " with broadcasting";
  let description = [{
    Both operands have one element type; their shapes broadcast like numpy
    (aligned on the right, a dimension of 1 stretches).

    ```mlir
    %z = tc.}] # mnemonic # [{ %x, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs resultType:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
}

def TC_AddOp : TC_BinaryOp<"add", TC_NumericTensor, TC_NumericTensor, [Commutative]>;
def TC_SubOp : TC_BinaryOp<"sub", TC_NumericTensor, TC_NumericTensor>;
def TC_MulOp : TC_BinaryOp<"mul", TC_NumericTensor, TC_NumericTensor, [Commutative]>;
// Integer division truncates toward zero (C semantics, as ONNX Div).
def TC_DivOp : TC_BinaryOp<"div", TC_NumericTensor, TC_NumericTensor>;
def TC_PowOp : TC_BinaryOp<"pow", TC_NumericTensor, TC_NumericTensor>;
def TC_MaxOp : TC_BinaryOp<"max", TC_NumericTensor, TC_NumericTensor, [Commutative]>;
def TC_MinOp : TC_BinaryOp<"min", TC_NumericTensor, TC_NumericTensor, [Commutative]>;
def TC_AndOp : TC_BinaryOp<"and", TC_BoolTensor, TC_BoolTensor, [Commutative]>;
def TC_OrOp : TC_BinaryOp<"or", TC_BoolTensor, TC_BoolTensor, [Commutative]>;
def TC_XorOp : TC_BinaryOp<"xor", TC_BoolTensor, TC_BoolTensor, [Commutative]>;
def TC_EqOp : TC_BinaryOp<"eq", TC_Tensor, TC_BoolTensor, [Commutative]>;
def TC_NeOp : TC_BinaryOp<"ne", TC_Tensor, TC_BoolTensor, [Commutative]>;
def TC_LtOp : TC_BinaryOp<"lt", TC_NumericTensor, TC_BoolTensor>;
def TC_LeOp : TC_BinaryOp<"le", TC_NumericTensor, TC_BoolTensor>;
def TC_GtOp : TC_BinaryOp<"gt", TC_NumericTensor, TC_BoolTensor>;
def TC_GeOp : TC_BinaryOp<"ge", TC_NumericTensor, TC_BoolTensor>;

def TC_RemOp : TC_Op<"rem", [Pure, InferTypeOpAdaptor, TC_Elementwise]> {
  let summary = "Elementwise remainder with broadcasting";
  let description = [{
    `fmod = false`: the result takes the sign of the divisor (Python `%`,
    ONNX Mod fmod=0, integers only); `fmod = true`: C `fmod`, the sign of the
    dividend.

    ```mlir
    %z = tc.rem %x, %y {fmod = true} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
  }];
  let arguments = (ins TC_NumericTensor:$lhs, TC_NumericTensor:$rhs,
                   DefaultValuedAttr<BoolAttr, "false">:$fmod);
  let results = (outs TC_NumericTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
}

def TC_SelectOp : TC_Op<"select", [Pure, InferTypeOpAdaptor, TC_Elementwise]> {
  let summary = "Elementwise choice with broadcasting (ONNX Where)";
  let description = [{
    `result = cond ? on_true : on_false`; the three shapes broadcast.

    ```mlir
    %z = tc.select %m, %x, %y : tensor<4x4xi1>, tensor<4x4xf32>, tensor<f32> -> tensor<4x4xf32>
    ```
  }];
  let arguments = (ins TC_BoolTensor:$cond, TC_Tensor:$on_true,
                   TC_Tensor:$on_false);
  let results = (outs TC_Tensor:$result);
  let assemblyFormat = "$cond `,` $on_true `,` $on_false attr-dict `:` "
                       "type($cond) `,` type($on_true) `,` type($on_false) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Reductions and scans
//===----------------------------------------------------------------------===//

class TC_ReduceOp<string mnemonic, Type operandType>
    : TC_Op<mnemonic, [Pure, InferTypeOpAdaptor, TC_Reduction]> {
  let summary = "Reduction (" # mnemonic # ") over `axes`";
  let description = [{
    `axes` are distinct, sorted and in [0, rank); an empty list reduces
    nothing. `keepdims` keeps reduced axes as size 1. Reducing an empty axis
    gives the identity of the reduction (0, 1, -inf, +inf; mean is NaN).

    ```mlir
    %s = tc.}] # mnemonic # [{ %x {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
    ```
  }];
  let arguments = (ins operandType:$input, DenseI64ArrayAttr:$axes,
                   DefaultValuedAttr<BoolAttr, "false">:$keepdims);
  let results = (outs operandType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def TC_ReduceSumOp : TC_ReduceOp<"reduce_sum", TC_NumericTensor>;
def TC_ReduceMeanOp : TC_ReduceOp<"reduce_mean", TC_NumericTensor>;
def TC_ReduceMaxOp : TC_ReduceOp<"reduce_max", TC_NumericTensor>;
def TC_ReduceMinOp : TC_ReduceOp<"reduce_min", TC_NumericTensor>;
def TC_ReduceProdOp : TC_ReduceOp<"reduce_prod", TC_NumericTensor>;

class TC_ArgReduceOp<string mnemonic>
    : TC_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let summary = "Index of the " # mnemonic # " along `axis` (i64 result)";
  let description = [{
    Ties go to the first index, or the last with `select_last_index`.

    ```mlir
    %i = tc.}] # mnemonic # [{ %x {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4xi64>
    ```
  }];
  let arguments = (ins TC_NumericTensor:$input, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "false">:$keepdims,
                   DefaultValuedAttr<BoolAttr, "false">:$select_last_index);
  let results = (outs RankedTensorOf<[I64]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def TC_ArgMaxOp : TC_ArgReduceOp<"argmax">;
def TC_ArgMinOp : TC_ArgReduceOp<"argmin">;

def TC_CumSumOp : TC_Op<"cumsum", [Pure, SameOperandsAndResultType]> {
  let summary = "Cumulative sum along `axis`";
  let description = [{
    `exclusive` starts from 0 (element i sums 0..i-1); `reverse` sums from
    the end.

    ```mlir
    %c = tc.cumsum %x {axis = 1 : i64} : tensor<2x8xi64>
    ```
  }];
  let arguments = (ins TC_NumericTensor:$input, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "false">:$exclusive,
                   DefaultValuedAttr<BoolAttr, "false">:$reverse);
  let results = (outs TC_NumericTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalisation, softmax, losses (kept in high precision by the planner)
//===----------------------------------------------------------------------===//

class TC_SoftmaxLikeOp<string mnemonic>
    : TC_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = mnemonic # " along `axis`";
  let description = [{
    ```mlir
    %p = tc.}] # mnemonic # [{ %x {axis = 1 : i64} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins TC_FloatTensor:$input, I64Attr:$axis);
  let results = (outs TC_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def TC_SoftmaxOp : TC_SoftmaxLikeOp<"softmax">;
def TC_LogSoftmaxOp : TC_SoftmaxLikeOp<"log_softmax">;

def TC_LayerNormOp : TC_Op<"layer_norm", [Pure, AttrSizedOperandSegments]> {
  let summary = "Layer normalisation over the axes from `axis` to the end";
  let description = [{
    y = (x - mean) / sqrt(var + epsilon) * scale + bias, with the biased
    variance over axes [axis, rank). `scale` and `bias`, when present, have
    the shape of those axes and one float element type, which may differ
    from the input's (bf16 activations with f32 weights); y has the input's
    type and the statistics are computed in at least f32.

    ```mlir
    %y = tc.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64}
        : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
    ```

    `amax` (tensor<f32>, only in the GPU program: tc-fuse-fp8-amax adds it
    for a per-tensor FP8 tc.quantize of `result`): max |result| over every
    element, NaN elements ignored, of the stored (rounded) values.
  }];
  let arguments = (ins TC_FloatTensor:$input, Optional<TC_FloatTensor>:$scale,
                   Optional<TC_FloatTensor>:$bias, I64Attr:$axis,
                   F64Attr:$epsilon);
  let results = (outs TC_FloatTensor:$result, Optional<TC_FloatTensor>:$amax);
  let assemblyFormat = "$input (`,` `scale` $scale^)? (`,` `bias` $bias^)? "
                       "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def TC_RmsNormOp : TC_Op<"rms_norm", [Pure]> {
  let summary = "RMS normalisation over the axes from `axis` to the end";
  let description = [{
    y = x / sqrt(mean(x^2) + epsilon) * scale.

    ```mlir
    %y = tc.rms_norm %x, scale %g {axis = 2 : i64, epsilon = 1.0e-06 : f64}
        : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
    ```

    `amax` (tensor<f32>, only in the GPU program: tc-fuse-fp8-amax adds it
    for a per-tensor FP8 tc.quantize of `result`): max |result| over every
    element, NaN elements ignored, of the stored (rounded) values.
  }];
  let arguments = (ins TC_FloatTensor:$input, Optional<TC_FloatTensor>:$scale,
                   I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs TC_FloatTensor:$result, Optional<TC_FloatTensor>:$amax);
  let assemblyFormat = "$input (`,` `scale` $scale^)? "
                       "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

class TC_NormGradOp<string mnemonic, string forward, dag outs>
    : TC_Op<mnemonic, [Pure]> {
  let summary = "Gradients of tc." # forward # " from its input and the incoming gradient";
  let description = [{
    For `y = tc.}] # forward # [{ %input, scale %scale {axis, epsilon}` and
    `grad` = d loss / d y: `dinput` (the input's type), `dscale` (the
    normalised shape: sum over the rows of grad * xhat, computed even when
    there is no scale) and, for layer_norm, `dbias` (sum over the rows of
    grad). The row statistics are recomputed from `input` (the GPU lowering
    takes them from the forward's kernel instead when it sees it).

    ```mlir
    %dx, %dg, %db = tc.layer_norm_grad %x, %g, scale %w {axis = 2 : i64, epsilon = 1.0e-05 : f64}
        : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<64xf32>)
          -> (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins TC_FloatTensor:$input, TC_FloatTensor:$grad,
                   Optional<TC_FloatTensor>:$scale, I64Attr:$axis, F64Attr:$epsilon);
  let results = outs;
  let assemblyFormat = "$input `,` $grad (`,` `scale` $scale^)? "
                       "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def TC_LayerNormGradOp : TC_NormGradOp<"layer_norm_grad", "layer_norm",
    (outs TC_FloatTensor:$dinput, TC_FloatTensor:$dscale, TC_FloatTensor:$dbias)>;
def TC_RmsNormGradOp : TC_NormGradOp<"rms_norm_grad", "rms_norm",
    (outs TC_FloatTensor:$dinput, TC_FloatTensor:$dscale)>;

class TC_LossOp<string mnemonic, string what>
    : TC_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let summary = what;
  let description = [{
    `input` is [N, C] (class axis last), `labels` [N] integer class indices,
    `weight` (optional) [C]. Rows whose label equals `ignore_index` add
    nothing. `reduction` is "mean" (weighted mean over the rows not ignored),
    "sum" (both scalars) or "none" ([N]).

    ```mlir
    %l = tc.}] # mnemonic # [{ %x, %y {ignore_index = -100 : i64, reduction = "mean"}
        : (tensor<32x256xf32>, tensor<32xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins TC_FloatTensor:$input, TC_IndexTensor:$labels,
                   Optional<TC_FloatTensor>:$weight,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction);
  let results = (outs TC_FloatTensor:$result);
  let assemblyFormat = "$input `,` $labels (`,` `weight` $weight^)? attr-dict "
                       "`:` functional-type(operands, results)";
}

def TC_CrossEntropyOp : TC_LossOp<"cross_entropy",
    "Softmax cross-entropy of logits against class labels">;
def TC_NllLossOp : TC_LossOp<"nll_loss",
    "Negative log-likelihood of log-probabilities against class labels">;

//===----------------------------------------------------------------------===//
// Contractions and gathers
//===----------------------------------------------------------------------===//

def TC_MatmulOp : TC_Op<"matmul", [Pure, InferTypeOpAdaptor]> {
  let summary = "Batched matrix product";
  let description = [{
    lhs is [..., M, K] ([..., K, M] with `transpose_lhs`), rhs is [..., K, N]
    ([..., N, K] with `transpose_rhs`); both have rank >= 2 and the batch
    dimensions broadcast. Accumulation is in at least fp32. With `alpha`
    (one f32 value, float operands): result = alpha * (lhs @ rhs), the
    scaling applied to the fp32 (or wider) sums before the result's one
    rounding, as cuBLASLt's alpha (read on the device) does; tc-fp4-exact
    gives it the NVFP4 tensor scales. No gradient: it is made after
    tc-autodiff.

    ```mlir
    %y = tc.matmul %a, %b {transpose_rhs = true} : tensor<32x64xf32>, tensor<256x64xf32> -> tensor<32x256xf32>
    %z = tc.matmul %a, %b alpha %s : tensor<f32> {transpose_rhs = true}
        : tensor<32x64xbf16>, tensor<256x64xbf16> -> tensor<32x256xbf16>
    ```
  }];
  let arguments = (ins TC_NumericTensor:$lhs, TC_NumericTensor:$rhs,
                   Optional<TC_FloatTensor>:$alpha,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs TC_NumericTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs (`alpha` $alpha^ `:` type($alpha))? attr-dict `:` "
                       "type($lhs) `,` type($rhs) `->` type($result)";
  let hasVerifier = 1;
  let builders = [
    // The product without alpha (every producer before tc-fp4-exact).
    OpBuilder<(ins "::mlir::Value":$lhs, "::mlir::Value":$rhs,
                   CArg<"bool", "false">:$transposeLhs, CArg<"bool", "false">:$transposeRhs), [{
      build($_builder, $_state, lhs, rhs, ::mlir::Value(), transposeLhs, transposeRhs);
    }]>
  ];
}

//===----------------------------------------------------------------------===//
// Scaled narrow formats (FP8, FP4): quantization and scaled products
//===----------------------------------------------------------------------===//

def TC_QuantizeOp : TC_Op<"quantize", [Pure]> {
  let summary = "Scale blocks of a tensor into a narrow float format by their amax";
  let description = [{
    Splits `input` into blocks of shape `block` (one entry per dimension; a
    block equal to the shape is per-tensor scaling, [1, K] per-row, [1, 32]
    MX blocks), takes each block's amax = max |x| and quantizes
    `result = sat(x * s)` into the result's element type (f8E4M3FN, f8E5M2
    or f4E2M1FN; round to nearest even, saturating at the format's largest
    finite value, NaN kept), with `scale_inv = 1 / s` per block: the
    dequantization factor, what cuBLASLt's A/B scale pointers take.

    With f32 `scale_inv` the scale is Transformer Engine's current scaling:
    s = fmax / amax in f32, 1 when amax is 0, inf or NaN, the largest f32
    when the quotient overflows; the product x * s is rounded to f32 before
    the narrow format, as the GPU computes it. With f8E8M0FNU `scale_inv`
    (the OCP MX formats) scale_inv = 2^(floor(log2 amax) - emax), emax the
    element format's largest exponent (8 for E4M3, 15 for E5M2, 2 for
    E2M1), 2^-127 for an all-zero block, and s = 1 / scale_inv.

    With `pow2_scale` (f32 `scale_inv` only) s is rounded down to a power
    of two (its f32 exponent kept, mantissa cleared), as Transformer Engine's
    Float8BlockScaling recipe does by default (force_pow_2_scales): the
    largest f32 becomes 2^127, and scale_inv = 1 / s is exact.

    `scale_inv` has the shape of `input` divided by `block`, rounded up (a
    last block may be partial: its amax is over the elements present). Not differentiable: tc-autodiff refuses it;
    the FP8 plan inserts it after the backward exists.

    `amax` (per-tensor scaling with f32 `scale_inv` only; tensor<f32>): the
    tensor's amax, max |x| with NaN elements ignored, taken by the kernel
    that produced `input` (tc-fuse-fp8-amax); the op uses it instead of a
    pass of its own over `input`.

    ```mlir
    %q, %s = tc.quantize %x {block = array<i64: 32, 64>}
        : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>)
    %q2, %s2 = tc.quantize %x amax %m : tensor<f32> {block = array<i64: 32, 64>}
        : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>)
    ```
  }];
  let arguments = (ins TC_FloatTensor:$input, Optional<TC_FloatTensor>:$amax,
                   DenseI64ArrayAttr:$block, DefaultValuedAttr<BoolAttr, "false">:$pow2_scale);
  let results = (outs TC_FloatTensor:$result, TC_FloatTensor:$scale_inv);
  let assemblyFormat = "$input (`amax` $amax^ `:` type($amax))? attr-dict `:` type($input) `->` "
                       "`(` type($result) `,` type($scale_inv) `)`";
  let hasVerifier = 1;
  let builders = [
    // The quantization that takes its own amax (every producer before
    // tc-fuse-fp8-amax).
    OpBuilder<(ins "::mlir::TypeRange":$resultTypes, "::mlir::Value":$input,
                   "::mlir::DenseI64ArrayAttr":$block, "::mlir::BoolAttr":$pow2Scale), [{
      build($_builder, $_state, resultTypes, input, ::mlir::Value(), block, pow2Scale);
    }]>
  ];
}

def TC_QuantizeDelayedOp : TC_Op<"quantize_delayed", [Pure]> {
  let summary = "Delayed scaling's FP8 copy of a matrix with its amax and saturation count";
  let description = [{
    GPU pipeline only (tc-fuse-fp8-delayed makes it of the ops tc-quantize-fp8
    writes for `--fp8-scaling delayed`; the reference program keeps those
    ops): for `input` x [rows, cols] (f32 or bf16) and `scale` s
    (tensor<f32>, the scale of earlier steps),
      result = cast(f32(x) * s) into f8E4M3FN / f8E5M2, the product rounded
               to f32, saturating at the format's largest finite value;
      amax = max |f32(x)| (tensor<f32>; NaN when x holds one);
      saturated = the number of elements with |f32(x) * s| > that value
               (tensor<f32>);
      result_t (optional) = the transposed copy [cols, rows] of result.
    One pass over x on the GPU (the runtime's "quantize_fp8_delayed").

    ```mlir
    %q, %m, %n, %qt = tc.quantize_delayed %x, %s : tensor<64x32xbf16>, tensor<f32>
        -> (tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<32x64xf8E4M3FN>)
    ```
  }];
  let arguments = (ins TC_FloatTensor:$input, TC_FloatTensor:$scale);
  let results = (outs TC_FloatTensor:$result, TC_FloatTensor:$amax, TC_FloatTensor:$saturated,
                 Optional<TC_FloatTensor>:$result_t);
  let assemblyFormat = "$input `,` $scale attr-dict `:` type($input) `,` type($scale) `->` "
                       "`(` type($result) `,` type($amax) `,` type($saturated) "
                       "(`,` type($result_t)^)? `)`";
  let hasVerifier = 1;
}

def TC_Fp8ScaleUpdateOp : TC_Op<"fp8_scale_update", [Pure]> {
  let summary = "Delayed scaling's bookkeeping of one FP8 tensor: its next scale and amax history";
  let description = [{
    GPU pipeline only (tc-fuse-fp8-delayed makes it of the ops tc-quantize-fp8
    writes after each delayed-scaled quantization; the reference program keeps
    those ops): for this step's `amax` (tensor<f32>), the `scale` the step
    quantized by (tensor<f32>) and the amaxes of earlier steps `history`
    (optional, f32 [N - 1], newest first), with the window w = [amax] ++ history,
      used = amax (most_recent) or max(w) (NaN when w holds one);
      next_scale = fmax / used (f32, the largest f32 when it overflows) when
                   used is positive and finite, else `scale`;
      scale_inv = 1 / scale (f32: what the step's products read);
      next_history = w[0 : N - 1] (present exactly when history is).
    One small kernel on the GPU (the runtime's "fp8_scale_update"), which may
    write next_scale and next_history over scale and history in place.

    ```mlir
    %s2, %inv, %h2 = tc.fp8_scale_update %amax, %s, %h {fmax = 448.0 : f64}
        : tensor<f32>, tensor<f32>, tensor<1023xf32> -> (tensor<f32>, tensor<f32>, tensor<1023xf32>)
    ```
  }];
  let arguments = (ins TC_FloatTensor:$amax, TC_FloatTensor:$scale,
                   Optional<TC_FloatTensor>:$history, F64Attr:$fmax, UnitAttr:$most_recent);
  let results = (outs TC_FloatTensor:$next_scale, TC_FloatTensor:$scale_inv,
                 Optional<TC_FloatTensor>:$next_history);
  let assemblyFormat = "$amax `,` $scale (`,` $history^)? attr-dict `:` type($amax) `,` "
                       "type($scale) (`,` type($history)^)? `->` `(` type($next_scale) `,` "
                       "type($scale_inv) (`,` type($next_history)^)? `)`";
  let hasVerifier = 1;
}

def TC_FakeQuantizeOp : TC_Op<"fake_quantize", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "FP4 quantisation-aware training: quantize to NVFP4 / MXFP4 and back";
  let description = [{
    `result = deq(quant(input))` in the input's type, the blocks running
    along axis `axis` (the contraction axis of the product that reads it;
    the other axes are rows). `format = "nvfp4"`: NVIDIA's NVFP4 as
    Transformer Engine computes it (E2M1 values, E4M3 decode scales per 1x16
    block, or per 16x16 block with `blocks2d` (rank 2 only, weights), and an
    f32 per-tensor decode scale 1 / (448 * 6 / amax)); deq = value *
    block_scale * tensor_scale. `format = "mxfp4"`: OCP MXFP4, tc.quantize's
    f4E2M1FN with f8E8M0FNU scales per 1x32 block; deq = value * scale.
    Round to nearest even, saturating at +-6 (NaN gives +6: E2M1 has none).
    value * block_scale is exact in BF16, so a GPU emulation runs its GEMM on
    that BF16 operand with the tensor scales as alpha; the CPU reference
    forms the exact product in f64 and rounds it once to the result type.
    tc-autodiff passes the gradient straight through (d input = d result).
    `unscaled` (nvfp4 only; tc-fp4-exact): result = value * block_scale,
    exact in BF16, and the second result `tensor_scale` (tensor<f32>) the
    tensor's decode scale, which a product of such operands takes as its
    alpha (tc.matmul's): the exact NVFP4 product on any GPU. No gradient:
    it is made after tc-autodiff.
    `stochastic`: stochastic rounding instead (--fp4-qat-grads), element k
    (its row-major index) drawing init_rng.h's uniform01(seed,
    mix64(stream + step * kGamma), k) with `step` the operand (an f32
    scalar: the training step), so that every backend draws the same.

    ```mlir
    %w4 = tc.fake_quantize %w {format = "nvfp4", axis = 0 : i64, blocks2d = true}
        : tensor<64x128xf32>
    %g4 = tc.fake_quantize %g step %s : tensor<f32> {format = "nvfp4", stochastic = true,
        seed = 0 : i64, stream = 7 : i64} : tensor<64x128xbf16>
    %u, %t = tc.fake_quantize %w {format = "nvfp4", axis = 1 : i64, unscaled = true}
        : tensor<64x128xbf16> -> tensor<f32>
    ```
  }];
  let arguments = (ins TC_FloatTensor:$input, Optional<TC_FloatTensor>:$step, StrAttr:$format,
                   DefaultValuedAttr<I64Attr, "-1">:$axis,
                   DefaultValuedAttr<BoolAttr, "false">:$blocks2d,
                   DefaultValuedAttr<BoolAttr, "false">:$stochastic,
                   DefaultValuedAttr<I64Attr, "0">:$seed,
                   DefaultValuedAttr<I64Attr, "0">:$stream,
                   DefaultValuedAttr<BoolAttr, "false">:$unscaled);
  let results = (outs TC_FloatTensor:$result, Optional<TC_FloatTensor>:$tensor_scale);
  let assemblyFormat = "$input (`step` $step^ `:` type($step))? attr-dict `:` type($input) "
                       "(`->` type($tensor_scale)^)?";
  let hasVerifier = 1;
}

def TC_ScaledMatmulOp : TC_Op<"scaled_matmul", [Pure]> {
  let summary = "Matrix product of two block-scaled narrow-format operands";
  let description = [{
    `result = deq(lhs) @ deq(rhs)` with deq(q)[i, j] = q[i, j] *
    scale_inv[i / bi, j / bj], where (bi, bj) is the operand's block: its
    shape divided by its scale's shape, rounded up (the blocks of the
    tc.quantize that made it). lhs is M x K (K x M with `transpose_lhs`),
    rhs K x N (N x K with `transpose_rhs`), both rank 2. The products are
    exact and the sums accumulate in at least f32; the result (bf16, f16 or
    f32) is rounded once.

    ```mlir
    %y = tc.scaled_matmul %qx, %sx, %qw, %sw {transpose_rhs = true}
        : (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>, tensor<128x64xf8E4M3FN>, tensor<1x1xf32>)
          -> tensor<32x128xbf16>
    ```
  }];
  let arguments = (ins TC_FloatTensor:$lhs, TC_FloatTensor:$lhs_scale_inv,
                   TC_FloatTensor:$rhs, TC_FloatTensor:$rhs_scale_inv,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs TC_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $lhs_scale_inv `,` $rhs `,` $rhs_scale_inv attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def TC_AttentionOp : TC_Op<"attention", [Pure]> {
  let summary = "Scaled dot-product attention (fused: the scores are never stored)";
  let description = [{
    `result = softmax(scale * query key^T + mask) value` per (batch, head),
    with query [B, H, Tq, D], key [B, Hkv, Tk, D], value [B, Hkv, Tk, Dv] and
    result [B, H, Tq, Dv]. H must be a multiple of Hkv (grouped-query
    attention: query head h reads key/value head h / (H / Hkv)). With
    `causal` the mask is -inf where key j > query i (top-left aligned, as
    torch's is_causal and a tril mask), otherwise 0. With `key_mask` [B, Tk]
    (i1, true = visible: a padding mask from attention_mask) key j is also
    hidden from every query of batch b where key_mask[b, j] is false. A
    hidden score is skipped (-inf), or, with a finite `mask_fill` (HF's
    finfo.min), replaced by score + mask_fill, as the exported additive mask
    computes: a row whose every key is hidden then attends to all keys with
    the scores (score + mask_fill) - mask_fill, which averages all values when
    the fill absorbs the scores as finfo.min does (-inf: such a row is 0, the
    guard torch's SDPA applies). `lse` [B, H, Tq] is the
    f32 (f64 for f64 operands) log-sum-exp of each row's masked, scaled scores
    (of the row's scores less mask_fill for such a row), which the backward
    (tc.attention_grad) uses to recompute the probabilities. query, key,
    value and result share one element type; the softmax and the
    accumulation run in at least f32. tc-recognize-attention builds it from
    the matmul / scale / mask / softmax / matmul chains exporters write.
    `amax` (tensor<f32>, only in the GPU program: tc-fuse-fp8-amax adds it
    for a per-tensor FP8 tc.quantize of `result`): max |result|, NaN
    ignored, of the stored (rounded) values.

    ```mlir
    %o, %lse = tc.attention %q, %k, %v {scale = 0.125 : f64, causal = true}
        : (tensor<2x4x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>)
          -> (tensor<2x4x16x64xf32>, tensor<2x4x16xf32>)
    ```
  }];
  let arguments = (ins TC_FloatTensor:$query, TC_FloatTensor:$key, TC_FloatTensor:$value,
                   Optional<TC_BoolTensor>:$key_mask,
                   F64Attr:$scale, DefaultValuedAttr<BoolAttr, "false">:$causal,
                   OptionalAttr<F64Attr>:$mask_fill);
  let results = (outs TC_FloatTensor:$result, TC_FloatTensor:$lse,
                   Optional<TC_FloatTensor>:$amax);
  let assemblyFormat = "$query `,` $key `,` $value (`key_mask` $key_mask^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def TC_AttentionGradOp : TC_Op<"attention_grad", [Pure]> {
  let summary = "Gradients of tc.attention with respect to query, key and value";
  let description = [{
    From the forward's operands and attributes, its `result` and `lse`, and
    `grad` (d loss / d result): with P = exp(scale * q k^T + mask - lse),
    dP = grad value^T and dS = P * (dP - rowsum(grad * result)),
    `dquery = scale * dS key`, `dkey = scale * dS^T query` and
    `dvalue = P^T grad`, where dkey and dvalue sum over the query heads that
    share a key/value head. `key_mask` and `mask_fill` are the forward's.
    `amax` (tensor<f32>, only in the GPU program: tc-fuse-fp8-amax adds it
    for a per-tensor FP8 tc.quantize of the gradients) with `amax_of`, a
    mask of the gradients it covers (1 dquery, 2 dkey, 4 dvalue): their max
    |x|, NaN ignored, over the stored (rounded) values.

    ```mlir
    %dq, %dk, %dv = tc.attention_grad %q, %k, %v, %o, %lse, %g {scale = 0.125 : f64, causal = true}
        : (tensor<2x4x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>,
           tensor<2x4x16x64xf32>, tensor<2x4x16xf32>, tensor<2x4x16x64xf32>)
          -> (tensor<2x4x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>)
    ```
  }];
  let arguments = (ins TC_FloatTensor:$query, TC_FloatTensor:$key, TC_FloatTensor:$value,
                   TC_FloatTensor:$result, TC_FloatTensor:$lse, TC_FloatTensor:$grad,
                   Optional<TC_BoolTensor>:$key_mask,
                   F64Attr:$scale, DefaultValuedAttr<BoolAttr, "false">:$causal,
                   OptionalAttr<F64Attr>:$mask_fill, OptionalAttr<I64Attr>:$amax_of);
  let results = (outs TC_FloatTensor:$dquery, TC_FloatTensor:$dkey, TC_FloatTensor:$dvalue,
                   Optional<TC_FloatTensor>:$amax);
  let assemblyFormat = "$query `,` $key `,` $value `,` $result `,` $lse `,` $grad "
                       "(`key_mask` $key_mask^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def TC_RotaryOp : TC_Op<"rotary", [Pure]> {
  let summary = "Rotary position embedding (ONNX RotaryEmbedding)";
  let description = [{
    Rotates pairs of features of `input` [B, H, S, D] by the angles whose
    cosines and sines are `cos` / `sin` [B, S, R/2] (already gathered at each
    token's position): for k < R/2 the pair (x1, x2) is (x[k], x[k + R/2])
    (the rotate_half layout of HF Llama), or (x[2k], x[2k+1]) with
    `interleaved`, and becomes (cos * x1 - sin * x2, sin * x1 + cos * x2).
    Features from R on (partial rotary) are copied. The gradient with respect
    to `input` is tc.rotary of the gradient with -sin (the inverse rotation).

    ```mlir
    %y = tc.rotary %x, %cos, %sin {interleaved = false}
        : (tensor<2x4x16x8xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>) -> tensor<2x4x16x8xf32>
    ```
  }];
  let arguments = (ins TC_FloatTensor:$input, TC_FloatTensor:$cos, TC_FloatTensor:$sin,
                   DefaultValuedAttr<BoolAttr, "false">:$interleaved);
  let results = (outs TC_FloatTensor:$result);
  let assemblyFormat = "$input `,` $cos `,` $sin attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def TC_GatherOp : TC_Op<"gather", [Pure, InferTypeOpAdaptor, TC_DataMovement]> {
  let summary = "Gather slices along `axis` (ONNX Gather; embedding lookup)";
  let description = [{
    result shape = data.shape[:axis] + indices.shape + data.shape[axis+1:].
    Negative indices count from the end; an index out of range is a run-time
    error.

    ```mlir
    %e = tc.gather %wte, %ids {axis = 0 : i64} : tensor<256x64xf32>, tensor<2x16xi64> -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins TC_Tensor:$data, TC_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs TC_Tensor:$result);
  let assemblyFormat = "$data `,` $indices attr-dict `:` type($data) `,` type($indices) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

def TC_ReshapeOp : TC_Op<"reshape",
                         [Pure, TC_DataMovement, AllElementTypesMatch<["input", "result"]>]> {
  let summary = "Same elements, new shape (row-major)";
  let description = [{
    ```mlir
    %y = tc.reshape %x : tensor<2x16x64xf32> to tensor<32x64xf32>
    ```
  }];
  let arguments = (ins TC_Tensor:$input);
  let results = (outs TC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def TC_TransposeOp : TC_Op<"transpose", [Pure, InferTypeOpAdaptor, TC_DataMovement]> {
  let summary = "Permute dimensions: result dim i is input dim permutation[i]";
  let description = [{
    ```mlir
    %y = tc.transpose %x {permutation = array<i64: 0, 2, 1>} : tensor<2x16x64xf32> -> tensor<2x64x16xf32>
    ```
  }];
  let arguments = (ins TC_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs TC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def TC_BroadcastOp : TC_Op<"broadcast",
                           [Pure, TC_DataMovement, AllElementTypesMatch<["input", "result"]>]> {
  let summary = "Broadcast to the result shape (numpy rules; ONNX Expand)";
  let description = [{
    ```mlir
    %y = tc.broadcast %x : tensor<1x64xf32> to tensor<16x64xf32>
    ```
  }];
  let arguments = (ins TC_Tensor:$input);
  let results = (outs TC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

def TC_SliceOp : TC_Op<"slice",
                       [Pure, TC_DataMovement, AllElementTypesMatch<["input", "result"]>]> {
  let summary = "Strided slice; the result type gives the extent";
  let description = [{
    result[i0, i1, ...] = input[starts[0] + i0 * strides[0], ...]. One start
    and one non-zero stride per dimension; a negative stride walks backwards.
    Every index touched must lie inside the input.

    ```mlir
    %y = tc.slice %x {starts = array<i64: 0, 64>, strides = array<i64: 1, 1>}
        : tensor<16x192xf32> to tensor<16x64xf32>
    ```
  }];
  let arguments = (ins TC_Tensor:$input, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$strides);
  let results = (outs TC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

def TC_ConcatOp : TC_Op<"concat", [Pure, InferTypeOpAdaptor, TC_DataMovement]> {
  let summary = "Concatenate along `axis`";
  let description = [{
    ```mlir
    %y = tc.concat %a, %b {axis = 1 : i64} : tensor<2x3xf32>, tensor<2x5xf32> -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Variadic<TC_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs TC_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($result)";
}

def TC_SplitOp : TC_Op<"split", [Pure, TC_DataMovement]> {
  let summary = "Split along `axis` into consecutive pieces (result types give the sizes)";
  let description = [{
    ```mlir
    %q, %k, %v = tc.split %x {axis = 2 : i64} : tensor<2x16x192xf32>
        -> tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins TC_Tensor:$input, I64Attr:$axis);
  let results = (outs Variadic<TC_Tensor>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($results)";
  let hasVerifier = 1;
}

def TC_PadOp : TC_Op<"pad", [Pure, InferTypeOpAdaptor, TC_DataMovement]> {
  let summary = "Pad each dimension by `low` before and `high` after";
  let description = [{
    `mode` is "constant" (fill with `value`), "reflect" or "edge". Pads are
    non-negative.

    ```mlir
    %y = tc.pad %x {low = array<i64: 0, 1>, high = array<i64: 0, 2>, value = 0.0 : f64} : tensor<2x3xf32> -> tensor<2x6xf32>
    ```
  }];
  let arguments = (ins TC_Tensor:$input, DenseI64ArrayAttr:$low,
                   DenseI64ArrayAttr:$high,
                   DefaultValuedAttr<F64Attr, "0.0">:$value,
                   DefaultValuedStrAttr<StrAttr, "constant">:$mode);
  let results = (outs TC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Gradient support (built by tc-autodiff; each is the transpose or the fused
// derivative of a forward op above)
//===----------------------------------------------------------------------===//

def TC_ScatterAddOp : TC_Op<"scatter_add", [Pure]> {
  let summary = "Add slices into zeros along `axis` (the transpose of tc.gather)";
  let description = [{
    The result (of the type written after `->`) starts as zeros; then, for
    every index position j of `indices`,
    `result[a..., indices[j], b...] += updates[a..., j..., b...]`.
    updates shape = result.shape[:axis] + indices.shape + result.shape[axis+1:].
    Negative indices count from the end; repeated indices accumulate (this is
    the embedding gradient); an index out of range is a run-time error.

    ```mlir
    %dw = tc.scatter_add %de, %ids {axis = 0 : i64} : tensor<2x16x64xf32>, tensor<2x16xi64> -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins TC_NumericTensor:$updates, TC_IndexTensor:$indices,
                   I64Attr:$axis);
  let results = (outs TC_NumericTensor:$result);
  let assemblyFormat = "$updates `,` $indices attr-dict `:` type($updates) `,` "
                       "type($indices) `->` type($result)";
  let hasVerifier = 1;
}

def TC_InsertSliceOp : TC_Op<"insert_slice",
                         [Pure, TC_DataMovement, AllElementTypesMatch<["source", "result"]>]> {
  let summary = "Place a tensor into zeros at a strided window (the transpose of tc.slice)";
  let description = [{
    The result (of the type written after `to`) is zero everywhere except
    `result[starts[0] + i0 * strides[0], ...] = source[i0, i1, ...]`: exactly
    the elements a `tc.slice` with the same `starts` and `strides` would read
    from a tensor of the result's type. Strides are non-zero and may be
    negative; every index written must lie inside the result.

    ```mlir
    %dx = tc.insert_slice %dy {starts = array<i64: 7, 0>, strides = array<i64: -2, 3>}
        : tensor<4x6xf32> to tensor<8x16xf32>
    ```
  }];
  let arguments = (ins TC_Tensor:$source, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$strides);
  let results = (outs TC_Tensor:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `to` type($result)";
  let hasVerifier = 1;
}

class TC_LossGradOp<string mnemonic, string forward>
    : TC_Op<mnemonic, [Pure]> {
  let summary = "Gradient of tc." # forward # " with respect to its input";
  let description = [{
    d(loss)/d(input) of `tc.}] # forward # [{` with the same `input`, `labels`,
    `weight`, `ignore_index` and `reduction`, scaled by `grad`, the gradient
    flowing into the loss (a scalar for "mean" and "sum", [N] for "none").
    The result has the input's type. Rows whose label is `ignore_index` get
    zeros; with "mean" every row is divided by the sum of the weights of the
    rows not ignored. cross_entropy: `coef * (softmax(input[r]) - onehot(label))`;
    nll_loss: `-coef` at the label, zero elsewhere (coef = grad * weight[label],
    divided by the weight sum for "mean").

    ```mlir
    %dx = tc.}] # mnemonic # [{ %x, %y, grad %g {ignore_index = -100 : i64, reduction = "mean"}
        : (tensor<32x256xf32>, tensor<32xi64>, tensor<f32>) -> tensor<32x256xf32>
    ```
  }];
  // The optional operand comes last, so the runtime fills the operand slots
  // in order (no operand_present needed).
  let arguments = (ins TC_FloatTensor:$input, TC_IndexTensor:$labels,
                   TC_FloatTensor:$grad, Optional<TC_FloatTensor>:$weight,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction);
  let results = (outs TC_FloatTensor:$result);
  let assemblyFormat = "$input `,` $labels `,` `grad` $grad (`,` `weight` $weight^)? "
                       "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def TC_CrossEntropyGradOp : TC_LossGradOp<"cross_entropy_grad", "cross_entropy">;
def TC_NllLossGradOp : TC_LossGradOp<"nll_loss_grad", "nll_loss">;

//===----------------------------------------------------------------------===//
// Fusion (built by tc-fuse in the GPU pipeline; one kernel per op)
//===----------------------------------------------------------------------===//

def TC_FusionOp : TC_Op<"fusion", [IsolatedFromAbove, SingleBlock,
    RecursiveMemoryEffects, RecursivelySpeculatable]> {
  let summary = "A group of tc ops that runs as one generated GPU kernel";
  let description = [{
    The body's block arguments mirror `inputs` (same count and types); the
    body ends in `tc.yield`, whose operand types are the result types. Body
    ops are elementwise ops (unary, binary with broadcasting, select, cast,
    comparisons, predicates, gelu), `tc.broadcast`, splat `tc.constant`s, and
    at most one reduction over trailing axes (reduce_sum / reduce_mean /
    reduce_max / reduce_min) or last-axis softmax / log_softmax, or one
    reduce_sum over every axis but the last (column sums: a bias gradient
    that tc-fuse-bias-grad put into the fusion writing its dY), whose result
    may only be yielded. The op exists only in the GPU pipeline (tc-fuse runs
    after the reference program is built), so the CPU reference executor
    never sees it. CUDA codegen (compiler/codegen/cuda) turns each one into
    one kernel.

    ```mlir
    %y = tc.fusion (%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
      %0 = tc.add %a, %c : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
      %1 = tc.tanh %0 : tensor<4x8xf32>
      tc.yield %1 : tensor<4x8xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<TC_Tensor>:$inputs);
  let results = (outs Variadic<TC_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
      "`(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body";
  let hasRegionVerifier = 1;
}

def TC_YieldOp : TC_Op<"yield", [Pure, Terminator,
    HasParent<"FusionOp">]> {
  let summary = "Terminates a tc.fusion body, naming its results";
  let description = [{
    ```mlir
    tc.yield %a, %b : tensor<4x8xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Variadic<TC_Tensor>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

#endif // TC_OPS_TD
