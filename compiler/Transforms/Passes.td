//===- Passes.td - tc compiler passes ----------------------*- tablegen -*-===//
//
// The compiler's passes over tc (import cleanup, training, precision, fusion,
// and the marks that choose what tc-lower-to-tcx's library calls compute) and
// the memory report of planned tcx functions: the passes that need more than
// one dialect (the reference executor, the library forms, the report
// renderers). Passes over tcx alone are in dialects/tcx/Transforms.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_TRANSFORMS_PASSES_TD
#define TC_COMPILER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def TcFoldConstants : Pass<"tc-fold-constants", "mlir::func::FuncOp"> {
  let summary = "Evaluate tc ops whose operands are all constants";
  let description = [{
    Replaces every tc op whose operands are all `tc.constant` by constants of
    its results, computed with the CPU reference executor (so folding and
    execution cannot disagree). Shape sub-graphs of exported models (masks,
    position ids, rotary tables) become constants this way.

    Before:
    ```mlir
    %a = tc.constant dense<[1, 2]> : tensor<2xi64>
    %b = tc.add %a, %a : tensor<2xi64>, tensor<2xi64> -> tensor<2xi64>
    ```
    After:
    ```mlir
    %b = tc.constant dense<[2, 4]> : tensor<2xi64>
    ```
  }];
  let options = [
    Option<"maxElements", "max-elements", "int64_t", /*default=*/"1 << 24",
           "Do not fold ops producing more elements than this">
  ];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcRecognizeAttention : Pass<"tc-recognize-attention", "mlir::func::FuncOp"> {
  let summary = "Replace exported attention chains by tc.attention";
  let description = [{
    Finds `matmul(softmax(mask(scale * matmul(q, k^T))), v)` as exporters
    write it and replaces it by one `tc.attention` (whose GPU kernel never
    stores the [Tq, Tk] scores). Recognised pieces, in any order between the
    two matmuls: scalar multiplications/divisions (also of q and of k^T
    before the first matmul, as torch's scaled_dot_product_attention export
    does), and at most one mask: a boolean select (`masked_fill`) of a fill
    <= -1e4 or -inf, or the addition of a float mask of 0 and values <= -1e4 /
    -inf. The mask is read from a folded constant or, when it was too large to
    fold, from its construction (AttentionMask.h: index-vector comparisons,
    and/or/not, splats, selects), so recognition does not depend on the batch
    size or sequence length. It must hide nothing or exactly the keys after
    each query (top-left causal), possibly and-ed with a padding mask
    attention_mask[b, j] from a graph input, which becomes the `key_mask`
    operand (with `key-masks`; HF's finfo.min fill becomes `mask_fill`).
    Anything else (sliding windows, dropout, a softmax over another axis) is
    left alone with a remark saying why.
    k^T may be a transpose (of any permutation that leaves [B, H, D, Tk]) or
    torch's [B*H, T, D] -> [B*H, D, T] reshape-transpose-reshape; key and
    value repeated per query head (repeat_kv: reshape, broadcast, reshape)
    become grouped-query operands, and the `where(isnan(p), 0, p)` guard of
    torch's decomposed SDPA between the softmax and the value matmul is
    absorbed (a causal or empty mask leaves no row without keys). Every
    intermediate value must have no other reader.

    Before:
    ```mlir
    %kt = tc.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
    %s = tc.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
    %c = tc.constant dense<0.35355339> : tensor<f32>
    %t = tc.mul %s, %c : tensor<1x2x4x4xf32>, tensor<f32> -> tensor<1x2x4x4xf32>
    %p = tc.softmax %t {axis = 3 : i64} : tensor<1x2x4x4xf32>
    %o = tc.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
    ```
    After:
    ```mlir
    %o, %lse = tc.attention %q, %k, %v {scale = 0.35355339 : f64}
        : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
          -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
    ```
  }];
  let options = [
    Option<"keyMasks", "key-masks", "bool", /*default=*/"true",
           "fuse padding masks into tc.attention's key_mask (every target's "
           "kernels take it; off: such chains stay unfused, with a note)">,
  ];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcRecognizeRmsNorm : Pass<"tc-recognize-rms-norm", "mlir::func::FuncOp"> {
  let summary = "Replace written-out RMSNorm chains by tc.rms_norm";
  let description = [{
    ONNX has no RMSNorm before opset 23, so exporters write HuggingFace's
    LlamaRMSNorm out: `w * (x * 1 / sqrt(mean(x^2, last axis) + eps))`. This
    pass matches it from the mean (x^2 as pow(x, 2) or x * x; 1 / sqrt as
    rsqrt, reciprocal(sqrt) or a division; x / sqrt(.) directly; the scale
    w [C] on either side or absent) and replaces it by one `tc.rms_norm`
    when every intermediate value is read only by the next step.

    Before:
    ```mlir
    %s = tc.mul %x, %x : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
    %m = tc.reduce_mean %s {axes = array<i64: 1>, keepdims = true} : tensor<2x8xf32> -> tensor<2x1xf32>
    %e = tc.constant dense<1.0e-06> : tensor<f32>
    %a = tc.add %m, %e : tensor<2x1xf32>, tensor<f32> -> tensor<2x1xf32>
    %r = tc.rsqrt %a : tensor<2x1xf32>
    %n = tc.mul %x, %r : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
    %y = tc.mul %w, %n : tensor<8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
    ```
    After:
    ```mlir
    %y = tc.rms_norm %x, scale %w {axis = 1 : i64, epsilon = 1.0e-06 : f64}
        : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    ```
  }];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcMergeProjections : Pass<"tc-merge-projections", "mlir::func::FuncOp"> {
  let summary = "One GEMM for the query, key and value projections of one input";
  let description = [{
    Groups the projections `x @ transpose(W_i)` (+ b_i, the product's only
    use) of one input x whose results reach a tc.attention or tc.rotary
    through reshapes and transposes (HuggingFace Llama's, Mistral's and
    Qwen2's q_proj, k_proj, v_proj; with grouped-query attention the key and
    value GEMMs are narrow) and replaces them by one: the weights
    concatenated along N (and the biases, when every projection has one),
    one product, and its column slices in place of each result. The
    backward made after it has one weight-gradient and one input-gradient
    GEMM for the three. Run by tc-compile with --experimental=merge-qkv.

    Before:
    ```mlir
    %wq = tc.transpose %q_w {permutation = array<i64: 1, 0>} : tensor<64x32xf32> -> tensor<32x64xf32>
    %q = tc.matmul %x, %wq : tensor<2x8x32xf32>, tensor<32x64xf32> -> tensor<2x8x64xf32>
    %wk = tc.transpose %k_w {permutation = array<i64: 1, 0>} : tensor<16x32xf32> -> tensor<32x16xf32>
    %k = tc.matmul %x, %wk : tensor<2x8x32xf32>, tensor<32x16xf32> -> tensor<2x8x16xf32>
    ```
    After:
    ```mlir
    %w = tc.concat %q_w, %k_w {axis = 0 : i64} : tensor<64x32xf32>, tensor<16x32xf32> -> tensor<80x32xf32>
    %wt = tc.transpose %w {permutation = array<i64: 1, 0>} : tensor<80x32xf32> -> tensor<32x80xf32>
    %y = tc.matmul %x, %wt : tensor<2x8x32xf32>, tensor<32x80xf32> -> tensor<2x8x80xf32>
    %q = tc.slice %y {starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x8x80xf32> to tensor<2x8x64xf32>
    %k = tc.slice %y {starts = array<i64: 0, 0, 64>, strides = array<i64: 1, 1, 1>} : tensor<2x8x80xf32> to tensor<2x8x16xf32>
    ```
  }];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcRecognizeGelu : Pass<"tc-recognize-gelu", "mlir::func::FuncOp"> {
  let summary = "Replace written-out tanh GELU chains by tc.gelu";
  let description = [{
    HuggingFace's gelu_new (GPT-2, Phi) and torch's GELU(approximate="tanh")
    reach ONNX written out before opset 20:
    `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`. This pass
    matches the chain from its tanh (x^3 as pow(x, 3) or x * x * x; the
    constants within 1e-6; the three factors of the last product in any
    order and association; the tanh and 1 + tanh read only by the next step)
    and replaces its result by `tc.gelu {approximate = "tanh"}` of x. Run by
    tc-compile with --experimental=gelu (GPU targets: its GEMM epilogue).

    Before:
    ```mlir
    %h = tc.mul %x, %half : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
    %p = tc.pow %x, %three : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
    %c = tc.mul %p, %kappa : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
    %s = tc.add %x, %c : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %u = tc.mul %s, %beta : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
    %t = tc.tanh %u : tensor<8xf32>
    %a = tc.add %t, %one : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
    %y = tc.mul %h, %a : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    ```
    After:
    ```mlir
    %y = tc.gelu %x {approximate = "tanh"} : tensor<8xf32>
    ```
    With `erf` the exact GELU too, `0.5 * x * (1 + erf(x / sqrt(2)))` (the
    division or a product by 1 / sqrt(2); the last product's three factors
    in any order), as GPT-NeoX / Pythia's "gelu" exports: `tc.gelu` (approximate
    "none") of x (tc-compile --experimental=gelu-erf: its GEMM epilogues).
  }];
  let options = [
    Option<"erf", "erf", "bool", /*default=*/"false",
           "Also the exact GELU written out with erf">,
  ];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcRecognizeRotary : Pass<"tc-recognize-rotary", "mlir::func::FuncOp"> {
  let summary = "Replace written-out rotary embeddings by tc.rotary";
  let description = [{
    Exporters write HuggingFace's apply_rotary_pos_emb out: `x * cos +
    rotate_half(x) * sin`, rotate_half(x) = concat(-x[..., R/2:], x[..., :R/2])
    along the last axis, cos / sin [1 or B, 1, S, R]. This pass matches it
    from the add (either operand order) and replaces it by one `tc.rotary`
    over the tables' first halves when their two halves are provably equal
    (HF's cos(concat(freqs, freqs)), or a constant with equal halves) and
    every intermediate is read only by the next step. GPT-NeoX's partial
    rotary, concat(that of x[..., :R], x[..., R:]), becomes the tc.rotary of
    the whole x (features from R on are copied).

    Before:
    ```mlir
    %x1 = tc.slice %x {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x8xf32> to tensor<2x4x16x4xf32>
    %x2 = tc.slice %x {starts = array<i64: 0, 0, 0, 4>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x8xf32> to tensor<2x4x16x4xf32>
    %n = tc.neg %x2 : tensor<2x4x16x4xf32>
    %r = tc.concat %n, %x1 {axis = 3 : i64} : tensor<2x4x16x4xf32>, tensor<2x4x16x4xf32> -> tensor<2x4x16x8xf32>
    %a = tc.mul %x, %cos : tensor<2x4x16x8xf32>, tensor<1x1x16x8xf32> -> tensor<2x4x16x8xf32>
    %b = tc.mul %r, %sin : tensor<2x4x16x8xf32>, tensor<1x1x16x8xf32> -> tensor<2x4x16x8xf32>
    %y = tc.add %a, %b : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
    ```
    After (the tables' first halves, broadcast over the batch):
    ```mlir
    %y = tc.rotary %x, %c, %s {interleaved = false}
        : (tensor<2x4x16x8xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>) -> tensor<2x4x16x8xf32>
    ```
  }];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcConcatSliceGrads : Pass<"tc-concat-slice-grads", "mlir::func::FuncOp"> {
  let summary = "Sum of disjoint insert_slices (slice gradients) -> one concat";
  let description = [{
    After tc-autodiff. A value cut into pieces along one axis by tc.slice
    (the dynamo exporter's qkv split of GPT-2 and GPT-NeoX) gets as its
    gradient the tc.add of one zero-filled tc.insert_slice per piece. This
    pass replaces such an add tree (every insert_slice placing its source
    along the same axis, unit strides, the windows disjoint, each value read
    only by the tree) by the tc.concat of the sources, zeros where no piece
    is.

    Before:
    ```mlir
    %a = tc.insert_slice %dq {starts = array<i64: 0, 0>, strides = array<i64: 1, 1>} : tensor<4x8xf32> to tensor<4x24xf32>
    %b = tc.insert_slice %dk {starts = array<i64: 0, 8>, strides = array<i64: 1, 1>} : tensor<4x8xf32> to tensor<4x24xf32>
    %c = tc.insert_slice %dv {starts = array<i64: 0, 16>, strides = array<i64: 1, 1>} : tensor<4x8xf32> to tensor<4x24xf32>
    %s = tc.add %a, %b : tensor<4x24xf32>, tensor<4x24xf32> -> tensor<4x24xf32>
    %g = tc.add %s, %c : tensor<4x24xf32>, tensor<4x24xf32> -> tensor<4x24xf32>
    ```
    After:
    ```mlir
    %g = tc.concat %dq, %dk, %dv {axis = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x24xf32>
    ```
  }];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcAutodiff : Pass<"tc-autodiff", "mlir::ModuleOp"> {
  let summary = "Add @grad_step: the loss of @infer and its gradients";
  let description = [{
    Reverse-mode differentiation of `func.func @infer`. Adds
    `func.func @grad_step` with @infer's arguments and, as results, first the
    loss (the result named by `loss`), then one gradient per trainable
    parameter (`tc.parameter ... {trainable}`), in order of first appearance,
    named "grad:<parameter name>" and typed like the parameter. A parameter
    read several times (tied weights) gets one gradient: the sum. Integer and
    boolean values carry no gradient; broadcast operands get gradients
    summed over the broadcast axes. @infer is left unchanged; forward values
    that neither the loss nor the backward needs are not copied.

    Before:
    ```mlir
    func.func @infer() -> (tensor<f32> {tc.name = "loss"}) {
      %w = tc.parameter "w" {trainable} : tensor<4xf32>
      %l = tc.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
      return %l : tensor<f32>
    }
    ```
    After (added):
    ```mlir
    func.func @grad_step() -> (tensor<f32> {tc.name = "loss"},
                               tensor<4xf32> {tc.name = "grad:w"}) {
      %w = tc.parameter "w" {trainable} : tensor<4xf32>
      %l = tc.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
      %one = tc.constant dense<1.0> : tensor<f32>
      %0 = tc.reshape %one : tensor<f32> to tensor<1xf32>
      %dw = tc.broadcast %0 : tensor<1xf32> to tensor<4xf32>
      return %l, %dw : tensor<f32>, tensor<4xf32>
    }
    ```
    Fails, naming the op, when the loss is missing or not a floating scalar,
    or when an op between a trainable parameter and the loss has no gradient
    rule. Not differentiated: the class weight of cross_entropy/nll_loss
    (an error if it depends on a trainable parameter), tc.pad in "reflect"
    and "edge" modes (an error), the loss-gradient ops themselves.
    Conventions: floor/ceil/round/sign have zero gradient; relu and abs at 0
    give 0; max/min (binary and reductions) split ties evenly.
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"\"",
           "tc.name of the loss result of @infer (default: its only scalar "
           "floating result)">,
    Option<"lossScaling", "loss-scaling", "bool", /*default=*/"false",
           "seed the backward with the loss scale (the optimizer state "
           "\"grad_scaler:scale\", compiler/Transforms/LossScale.h) instead of "
           "1: every gradient comes out multiplied by it (tc-optimizer "
           "loss-scaling unscales them)">
  ];
  let dependentDialects = ["::tc::TCDialect", "::mlir::func::FuncDialect"];
}

def TcPadVocab : Pass<"tc-pad-vocab", "mlir::func::FuncOp"> {
  let summary = "Pad a classifier's class axis to a multiple of 64, exactly";
  let description = [{
    GPU targets, before tc-autodiff. For a tc.cross_entropy (no class
    weights) of C classes, C not a multiple of `multiple`, whose logits are
    a tc.matmul's product through casts and reshapes that keep the class
    axis last: the weight is padded with zeros to Cp classes, the product
    gets a bias of 0 on the classes and -inf on the padding, and the loss
    reads [N, Cp]. The loss and every gradient are the same numbers (the
    padding's softmax is exactly 0); the GEMMs of the logits, dgrad and
    wgrad have aligned rows (GPT-2's 50257 -> 50304). Other readers of the
    logits read the first C classes back through a tc.slice.

    Before (`multiple=64`):
    ```mlir
    %l = tc.matmul %x, %w {transpose_rhs = true} : tensor<8x32xbf16>, tensor<100x32xbf16> -> tensor<8x100xbf16>
    %c = tc.cast %l : tensor<8x100xbf16> to tensor<8x100xf32>
    %loss = tc.cross_entropy %c, %y : (tensor<8x100xf32>, tensor<8xi64>) -> tensor<f32>
    ```
    After:
    ```mlir
    %wp = tc.pad %w {high = array<i64: 28, 0>, low = array<i64: 0, 0>} : tensor<100x32xbf16> -> tensor<128x32xbf16>
    %b = tc.constant dense<[0.0, ..., 0xFF80, ...]> : tensor<128xbf16>
    %l = tc.matmul %x, %wp {transpose_rhs = true} : tensor<8x32xbf16>, tensor<128x32xbf16> -> tensor<8x128xbf16>
    %lb = tc.add %l, %b : tensor<8x128xbf16>, tensor<128xbf16> -> tensor<8x128xbf16>
    %c = tc.cast %lb : tensor<8x128xbf16> to tensor<8x128xf32>
    %loss = tc.cross_entropy %c, %y : (tensor<8x128xf32>, tensor<8xi64>) -> tensor<f32>
    ```
  }];
  let options = [
    Option<"multiple", "multiple", "int64_t", /*default=*/"64",
           "pad the class axis to a multiple of this">
  ];
}

def TcMarkTrainable : Pass<"tc-mark-trainable", "mlir::ModuleOp"> {
  let summary = "Choose the trainable parameters by regexes on their names";
  let description = [{
    Sets or clears the `trainable` unit attribute of every `tc.parameter`.
    A parameter is trainable when its element type is floating point, its
    name matches one of `trainable` (every name matches when the list is
    empty) and it matches none of `freeze`. Regexes are POSIX extended
    (llvm::Regex) and search the name (unanchored, like Python's re.search);
    anchor them with ^ and $ to match whole names.

    Before (`freeze=inv_freq`):
    ```mlir
    %f = tc.parameter "model.rotary_emb.inv_freq" {trainable} : tensor<4xf32>
    %w = tc.parameter "lm_head.weight" : tensor<256x32xf32>
    ```
    After:
    ```mlir
    %f = tc.parameter "model.rotary_emb.inv_freq" : tensor<4xf32>
    %w = tc.parameter "lm_head.weight" {trainable} : tensor<256x32xf32>
    ```
    Fails on a regex that does not compile, naming it.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "emit a remark per regex with the number of parameters it matches "
           "(tc-compile prints them as notes)">,
    ListOption<"trainable", "trainable", "std::string",
               "Regexes of the parameters to train (default: all)">,
    ListOption<"freeze", "freeze", "std::string",
               "Regexes of the parameters to keep frozen">
  ];
}

def TcOptimizer : Pass<"tc-optimizer", "mlir::ModuleOp"> {
  let summary = "Add @apply_step and @train_step: the optimizer update after @grad_step";
  let description = [{
    Reads `func.func @grad_step` (results: the loss, then "grad:<name>" per
    trainable parameter, as tc-autodiff makes it) and adds:

    - `@apply_step(grad:<p>..., lr, step)`: clips the gradients by their
      global L2 norm (when `clip-grad-norm` > 0, scale min(1, max/(norm+1e-6))
      like torch.nn.utils.clip_grad_norm_), then applies one step of
      torch.optim.SGD (momentum, no dampening, no nesterov; weight decay
      added to the gradient) or torch.optim.AdamW (decoupled decay
      p *= 1 - lr*wd first, bias correction with `step`, eps after the
      square root). Results: "grad_norm" (before clipping), then per
      parameter "update:<p>" and its state "update:<state>:<p>".
    - `@train_step(<grad_step's arguments>, lr, step)`: @grad_step and
      @apply_step in one function; results "loss", then @apply_step's.

    `lr` and `step` are f32 scalars (`step` counts from 1). Optimizer state
    (SGD "momentum_buffer:<p>", AdamW "exp_avg:<p>" and "exp_avg_sq:<p>") is
    read with `tc.parameter` ops marked `tc.optimizer_state` (zeros
    before the first step; the runtime stores each "update:" result back).

    Before:
    ```mlir
    func.func @grad_step() -> (tensor<f32> {tc.name = "loss"}, tensor<4xf32> {tc.name = "grad:w"})
    ```
    After (added, optimizer=sgd momentum=0.9):
    ```mlir
    func.func @apply_step(%g: tensor<4xf32> {tc.name = "grad:w"}, %lr: tensor<f32> {tc.name = "lr"},
                          %step: tensor<f32> {tc.name = "step"})
        -> (tensor<f32> {tc.name = "grad_norm"}, tensor<4xf32> {tc.name = "update:w"},
            tensor<4xf32> {tc.name = "update:momentum_buffer:w"})
    ```
    With `loss-scaling` (tc-compile --fp16; @grad_step made by tc-autodiff
    loss-scaling, so its gradients are multiplied by the scale), dynamic loss
    scaling as torch.amp.GradScaler does it, in the step itself. State (f32
    scalars, checkpointed like the moments): "grad_scaler:scale" (initially
    `loss-scale-init`), "grad_scaler:growth_tracker" (0) and
    "grad_scaler:skipped_steps" (0). found_inf = any non-finite element of
    any (scaled) gradient, one reduction per gradient; the gradients are
    multiplied by 1/scale in f32 before the norm and clipping; every
    "update:" result becomes select(found_inf, old value, new value), so a
    skipped step changes no parameter and no optimizer state; AdamW's bias
    correction uses step - skipped_steps (torch skips optimizer.step(), so
    its step count does not advance). The scale then follows
    _amp_update_scale_: found_inf: scale * 0.5, tracker 0; else tracker + 1,
    and when that reaches `loss-scale-growth-interval`, scale * 2 (if finite)
    and tracker 0. Extra results: "skipped" (1 or 0) and "loss_scale" (the
    scale this step used) after "grad_norm", and the three state updates.

    Fails when @grad_step is missing, a result is not named "grad:<p>", or
    `optimizer` is unknown; with `loss-scaling`, when @grad_step does not
    read the scale.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "emit remarks with each --no-decay regex's match count and the decay "
           "groups (tc-compile prints them as notes)">,
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "sgd or adamw">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0", "SGD momentum">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW eps">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1.0",
           "Weight decay (negative: torch's default, 0 for sgd, 0.01 for adamw)">,
    ListOption<"noDecay", "no-decay", "std::string",
               "Regexes of parameters without weight decay">,
    Option<"clipGradNorm", "clip-grad-norm", "double", /*default=*/"0.0",
           "Clip the global gradient norm to this (0: off)">,
    Option<"lossScaling", "loss-scaling", "bool", /*default=*/"false",
           "dynamic loss scaling (GradScaler's semantics; see above)">,
    Option<"lossScaleInit", "loss-scale-init", "double", /*default=*/"65536.0",
           "the initial loss scale (GradScaler's init_scale, 2^16)">,
    Option<"lossScaleGrowthInterval", "loss-scale-growth-interval", "int64_t",
           /*default=*/"2000",
           "clean steps after which the scale doubles (GradScaler's growth_interval)">
  ];
  let dependentDialects = ["::tc::TCDialect", "::mlir::func::FuncDialect"];
}

def TcTagReferenceValues : Pass<"tc-tag-reference-values", "mlir::func::FuncOp"> {
  let summary = "Tag every op with the id of its first result in the reference program";
  let description = [{
    GPU pipeline only, its first pass: the module it starts from is the one
    the op-level reference program was made of (lowerToProgram), so every
    op gets `tc.ref = [id, n]`: id the value id of its first result there
    (arguments first, then every op's results in order: tagReferenceValues
    in dialects/tc/Eval/Program.h), n its number of results (result i < n
    is value id + i; a result a later pass adds, such as tc-fuse-fp8-amax's
    amax, has no id). tc-lower-to-tcx takes the tags off and puts the id on
    the buffer of each tensor that has one (`ref` on its alloc, then on the
    planned view), and tc-compile lists them in the artifact's "check"
    report: which device buffer holds which reference value, what tc-run
    --check compares.

    ```mlir
    %0 = tc.add %a, %b {tc.ref = array<i64: 2, 1>} : ...
    ```
  }];
}

def TcFuse : Pass<"tc-fuse", "mlir::func::FuncOp"> {
  let summary = "Group elementwise chains (+ one final reduction) into tc.fusion ops";
  let description = [{
    GPU pipeline only (the CPU reference program is built before it runs).
    A matmul's bias add (+ bias[N] on its only use) and a GELU-tanh on that
    sum (or on the product) as its only use are not grouped: tc-lower-to-tcx
    makes them cuBLASLt epilogues.
    Walking the function backwards, every elementwise op (unary, binary with
    broadcasting, select, cast, comparisons, gelu), trailing-axis
    reduce_sum / reduce_mean / reduce_max / reduce_min and last-axis
    softmax / log_softmax not yet grouped roots a group; the group then pulls
    in producers greedily:
      - an elementwise producer whose result has the group's iteration shape
        (the root's result shape, or the reduction's input shape) and whose
        users outside the group all come after the root (it then also
        becomes a result of the fusion: no work is duplicated);
      - tc.broadcast and splat tc.constant producers are cloned into the
        body (index math / immediates; the originals stay while other users
        remain);
      - rematerialization: an input at the iteration shape that a chain of
        at most 16 elementwise ops computes from values the body reads
        anyway (or from single values, splat constants, broadcasts) is
        cloned in and recomputed rather than read (the forward GELU's
        intermediates that its backward read back), so that its producer
        need not store it.
    With `gelu-aux` (tc-compile --experimental=gelu), a tanh tc.gelu of a
    GEMM's product or bias add that other ops read too (the pre-activation
    a training step's backward reads), maybe through one reshape, is marked
    `tc.gelu_aux` and left out: the GEMM's GELU_AUX(_BIAS) epilogue
    computes it and writes the pre-activation beside it. With `gelu-erf`
    (tc-compile --experimental=gelu-erf) the exact (erf) GELU and its
    backward are treated alike.
    Reductions and softmax only end a group; matmul, gather, norms, losses,
    shape ops and ops on fp8/fp4 values are never fused. Each group becomes
    one `tc.fusion` at the root's position; single elementwise ops become
    fusions of one op, so every elementwise op is a generated kernel.

    Before:
    ```mlir
    %0 = tc.add %x, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %1 = tc.tanh %0 : tensor<4x8xf32>
    ```
    After:
    ```mlir
    %1 = tc.fusion (%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
      %0 = tc.add %a, %c : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
      %2 = tc.tanh %0 : tensor<4x8xf32>
      tc.yield %2 : tensor<4x8xf32>
    }
    ```
  }];
  let options = [
    Option<"geluAux", "gelu-aux", "bool", /*default=*/"false",
           "Leave a tanh GELU of a GEMM's (biased) product read elsewhere too to the "
           "GEMM's GELU_AUX epilogue (tc.gelu_aux)">,
    Option<"geluErf", "gelu-erf", "bool", /*default=*/"false",
           "With gelu-aux, the exact (erf) GELU too: its epilogues are tc's own GEMM's "
           "or the product and a GELU kernel (cuBLASLt has only the tanh form)">,
  ];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcPrecision : Pass<"tc-precision", "mlir::func::FuncOp"> {
  let summary = "Choose each op's precision (fp32 / tf32 / bf16 or fp16 mixed precision / fp8)";
  let description = [{
    Gives every tc op the discardable attributes `tc.precision` (the element
    type it computes in: "bf16", "f32", "tf32", or e.g. "i64" for integer
    ops, which are never touched) and `tc.precision_reason`.

    `mode=fp32` and `mode=tf32` only annotate (tf32 marks f32 matmuls
    "tf32": a hint for the GPU backend; the reference executor is fp32).
    `mode=bf16` rewrites types, and runs on @infer before tc-autodiff so the
    backward inherits the casts (the gradient of `cast f32->bf16` is a cast
    back to f32, so parameter gradients stay f32):
      - matmul: both f32 operands cast to bf16, bf16 result (accumulation is
        fp32 in the executor and in cuBLASLt);
      - elementwise ops and data movement with a bf16 operand: the other f32
        operands are cast to bf16 and f32 results become bf16;
      - layer_norm, rms_norm, softmax, log_softmax, cross_entropy, nll_loss,
        reduce_sum/mean/prod, cumsum, scatter_add, any other op and
        func.return: bf16 operands the pass made are cast up to f32; the
        result keeps its f32 type (consumers cast it down when they need);
      - parameters and constants stay f32 (fp32 master weights), cast to
        bf16 once, right after their definition, when a bf16 op reads them.
    Casts are shared per value; a round trip that is exact (bf16->f32->bf16)
    is removed, f32->bf16->f32 is kept (it rounds); a narrowing cast of a
    reshape/transpose/broadcast/slice read only by it moves before it (a
    weight's transpose runs on the bf16 copy). Every func.func is planned
    (in tc-compile only @infer exists when it runs).

    Before (`mode=bf16`):
    ```mlir
    %w = tc.parameter "w" {trainable} : tensor<8x4xf32>
    %y = tc.matmul %x, %w : tensor<2x8xf32>, tensor<8x4xf32> -> tensor<2x4xf32>
    %s = tc.softmax %y {axis = 1 : i64} : tensor<2x4xf32>
    ```
    After:
    ```mlir
    %w = tc.parameter "w" {trainable, tc.precision = "f32", ...} : tensor<8x4xf32>
    %wb = tc.cast %w : tensor<8x4xf32> to tensor<8x4xbf16>
    %xb = tc.cast %x : tensor<2x8xf32> to tensor<2x8xbf16>
    %y = tc.matmul %xb, %wb {tc.precision = "bf16", ...}
        : tensor<2x8xbf16>, tensor<8x4xbf16> -> tensor<2x4xbf16>
    %yf = tc.cast %y : tensor<2x4xbf16> to tensor<2x4xf32>
    %s = tc.softmax %yf {axis = 1 : i64, tc.precision = "f32", ...} : tensor<2x4xf32>
    ```
    `mode=fp16` is the same plan with f16 for bf16 (torch.autocast(float16)
    splits the ops the same way), except tc.attention, kept in f32 (the
    fused attention kernels take f32 or bf16), and norms, which keep f32
    rows.

    `mode=fp8` is the bf16 plan for every op, plus the FP8 mark on each
    linear-layer matmul that may run in FP8 (Fp8Plan.h; tc-quantize-fp8
    turns the marks into tc.quantize + tc.scaled_matmul after tc-autodiff):
    `tc.fp8 = "<scaling>"`, `tc.fp8_role = "fprop"`. Eligible: one operand
    is (through casts, transposes and reshapes) a 2-D tc.parameter on the
    right, and the matmul is not the lm_head (its result reaches a loss or
    log_softmax, or the function result named "logits"; or its weight is
    also read by a tc.gather: a tied embedding) unless `fp8-lm-head`, not
    matched by a `keep-high-precision` regex (rt::NameRegex on the ONNX node
    name of its location or on the weight's name), and not in the first /
    last N transformer blocks (the block index from the weight's name,
    `(h|layers|blocks).<i>.`). cuBLASLt FP8 needs K and N multiples of 16
    (32 with `fp8-scaling=mxfp8`): a marked matmul that breaks it is an
    error naming it and its sizes, unless `allow-fallback`, which keeps it
    in bf16 with the fallback as its reason. Every kept matmul's reason
    says why; no eligible matmul at all is a remark.

    `mode=fp4` (FP4 quantisation-aware training, Fp4Qat.h) is the fp8 plan's
    choice of linear layers with the bf16 plan for everything: instead of
    the FP8 mark, each eligible matmul reads its weight through
    tc.fake_quantize (`fp4-format`, 16x16 blocks for nvfp4, 1x32 along K
    for mxfp4) and, with `fp4-acts`, its activation too (1x16 / 1x32 along
    K); tc-autodiff passes gradients straight through. With `fp4-grads` the
    matmuls are marked so that tc-autodiff quantises their backward
    products' inputs too (the gradient with stochastic rounding), with
    `fp4-rht` the wgrad inputs after a 16-point random Hadamard transform.

    Fails on an unknown `mode` or `fp8-scaling`, on a bad regex, and on
    `high-precision-first/last` when no parameter name has a block index.
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"fp32\"",
           "fp32, tf32 (an annotation: f32 matmuls may use tf32), bf16, fp16 or "
           "fp8 (bf16, with FP8 marks on the linear-layer matmuls) or fp4 (bf16, "
           "linear layers fake-quantised to FP4)">,
    Option<"fp4Format", "fp4-format", "std::string", /*default=*/"\"nvfp4\"",
           "mode=fp4: nvfp4 or mxfp4">,
    Option<"fp4Acts", "fp4-acts", "bool", /*default=*/"false",
           "mode=fp4: the activations of the linear layers are fake-quantised too">,
    Option<"fp4Grads", "fp4-grads", "bool", /*default=*/"false",
           "mode=fp4: the dgrad/wgrad inputs too (the gradient with stochastic rounding)">,
    Option<"fp4Rht", "fp4-rht", "bool", /*default=*/"false",
           "mode=fp4 with fp4-grads: a 16-point random Hadamard transform of the wgrad inputs">,
    Option<"fp8Scaling", "fp8-scaling", "std::string", /*default=*/"\"tensor\"",
           "mode=fp8: tensor (one f32 scale per tensor), row (per row / column "
           "along K), mxfp8 (1x32 blocks along K, E8M0 scales) or block128 "
           "(1x128 / 128x128 blocks, power-of-two f32 scales)">,
    ListOption<"keepHighPrecision", "keep-high-precision", "std::string",
               "mode=fp8: regexes (ONNX node or weight names) of matmuls kept in bf16">,
    Option<"highPrecisionFirst", "high-precision-first", "int64_t", /*default=*/"0",
           "mode=fp8: the first N transformer blocks stay bf16">,
    Option<"highPrecisionLast", "high-precision-last", "int64_t", /*default=*/"0",
           "mode=fp8: the last N transformer blocks stay bf16">,
    Option<"fp8LmHead", "fp8-lm-head", "bool", /*default=*/"false",
           "mode=fp8: the lm_head (and a tied embedding's product) runs in FP8 too">,
    Option<"allowFallback", "allow-fallback", "bool", /*default=*/"false",
           "mode=fp8: a matmul that cannot run in FP8 stays bf16 (reported) "
           "instead of failing the compile">
  ];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcQuantizeFp8 : Pass<"tc-quantize-fp8", "mlir::ModuleOp"> {
  let summary = "FP8 matmuls: the marked tc.matmul ops become tc.quantize + tc.scaled_matmul";
  let description = [{
    Replaces every tc.matmul that carries tc-precision's (or tc-autodiff's)
    FP8 mark (`tc.fp8 = "tensor" | "row" | "mxfp8" | "block128"`, `tc.fp8_role` fprop /
    dgrad / wgrad, `tc.fp8_grad` the operand that is the incoming gradient)
    by tc.quantize of its operands and a tc.scaled_matmul with the matmul's
    (bf16) result type, in every function. The incoming gradient is
    quantized to f8E5M2, the other operands to f8E4M3FN, as Transformer
    Engine does. Blocks: the whole operand (`tensor`, f32 scale), the
    contraction axis by 1 (`row`, f32 scales), 32 along the contraction
    axis (`mxfp8`, f8E8M0FNU scales), or `block128`: 128 along the
    contraction axis for activations and gradients, 128x128 for the weight
    (min(128, dim) each), f32 scales rounded to powers of two (pow2_scale);
    wgrad's operands are then quantized along the rows again. One quantization per (value, format,
    block) is shared by every product that reads it: the forward's FP8
    copies of x and W are the ones dgrad and wgrad read. A 2-D transpose
    of an operand is folded into the product's transpose flag (tensor
    scaling is layout-invariant; the other blocks follow the contraction
    axis). Batched linear layers become rank 2 through tc.reshape: [..., M,
    K] x [K, N] as [B*M, K] x [K, N] (reshaped back), and tc-autodiff's
    wgrad, a batched product summed over its batch axes, as one product
    over B*T rows.

    Before:
    ```mlir
    %y = tc.matmul %x, %w {tc.fp8 = "tensor", tc.fp8_role = "fprop"}
        : tensor<32x64xbf16>, tensor<64x16xbf16> -> tensor<32x16xbf16>
    ```
    After:
    ```mlir
    %qx, %sx = tc.quantize %x {block = array<i64: 32, 64>}
        : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>)
    %qw, %sw = tc.quantize %w {block = array<i64: 64, 16>}
        : tensor<64x16xbf16> -> (tensor<64x16xf8E4M3FN>, tensor<1x1xf32>)
    %y = tc.scaled_matmul %qx, %sx, %qw, %sw {tc.fp8 = "tensor", tc.fp8_role = "fprop"}
        : (...) -> tensor<32x16xbf16>
    ```
    A marked matmul whose layout does not fold into rank 2 stays a bf16
    tc.matmul, with the reason in `tc.precision_reason` and a remark. The
    rank-2 products must meet cuBLASLt's FP8 alignment (contraction and N
    multiples of 16, 32 for mxfp8): tc-precision checked the forward's, and
    a wgrad contracts over the B*T rows, which are checked here: an error
    naming the op, or with `allow-fallback` a bf16 matmul that says why.
  }];
  let options = [
    Option<"amaxHistory", "amax-history", "int64_t", /*default=*/"1024",
           "delayed scaling: the amaxes of the last N steps each scale comes from "
           "(Transformer Engine's amax_history_len)">,
    Option<"amaxCompute", "amax-compute", "std::string", /*default=*/"\"max\"",
           "delayed scaling: max (of the history) or most_recent">,
    Option<"allowFallback", "allow-fallback", "bool", /*default=*/"false",
           "a product that breaks cuBLASLt's FP8 alignment stays bf16 (reported) "
           "instead of failing the compile">
  ];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcPrecisionReport : Pass<"tc-precision-report", "mlir::ModuleOp"> {
  let summary = "Print the precision report of a function";
  let description = [{
    Prints `tc::precisionReport` (compiler/PrecisionReport.h) of `function`
    to stdout: what `tc-compile --report precision` prints. The module is
    left unchanged.
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"infer\"",
           "Function to report">
  ];
}

//===----------------------------------------------------------------------===//
// The CUDA path: the tc -> tc passes that choose what the library calls of
// tc-lower-to-tcx (compiler/Conversion/Passes.td) compute, and the memory
// report of the planned tcx functions.
//===----------------------------------------------------------------------===//

def TcFuseMatmulEpilogue : Pass<"tc-fuse-matmul-epilogue", "mlir::func::FuncOp"> {
  let summary = "Mark what a matmul's cuBLASLt GEMM computes besides the product";
  let description = [{
    For each top-level tc.matmul of f32/bf16/f16 (the ones tc-lower-to-tcx
    makes a `tcx.matmul`), after folding transposes of the last two dims
    into transpose flags:

    - `tc.fold_batch_sum`: the product is lhs[b]^T @ rhs[b] per batch and
      its only user a `tc.reduce_sum` over the batch axes of the same
      element type (a Linear layer's weight gradient). The GEMM runs over
      the b*T rows of both at once (K = b*T): no reduction pass and one fp32
      accumulation instead of b rounded partial products.
    - `tc.epilogue = "bias" | "gelu" | "bias_gelu"`: the product (or that
      sum) is only read by an add of a [N] vector of its element type, and /
      or then only by a tanh-approximate gelu (not with broadcast batches).
      The GEMM's epilogue computes them.

    tc-lower-to-tcx lowers the marked matmul and the ops the marks name to
    one `tcx.matmul` (K, `epilogue`, the bias as a third input). Nothing else
    changes; unmarked IR lowers op by op.

    Before:
    ```mlir
    %0 = tc.matmul %x, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    %1 = tc.add %0, %b : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    %2 = tc.gelu %1 {approximate = "tanh"} : tensor<8x4xf32>
    ```
    After:
    ```mlir
    %0 = tc.matmul %x, %w {tc.epilogue = "bias_gelu"} : ...
    ```
  }];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcFuseCrossEntropy : Pass<"tc-fuse-cross-entropy", "mlir::func::FuncOp"> {
  let summary = "Pair cross_entropy with its gradient (the fused classifier)";
  let description = [{
    For each top-level tc.cross_entropy of the library's form ([N, C]
    f32/bf16 logits, integer labels, mean, no class weight, f32 loss), finds
    the tc.cross_entropy_grad of the same logits, labels, ignore_index and
    reduction whose scale is known at the forward (a splat constant, an
    argument, or computed before it) and puts `tc.fused_grad` on both:
    tc-lower-to-tcx makes them one "cross_entropy_fwd_bwd" library call
    (llm.c's fused classifier: loss and dlogits in one pass over the
    logits).

    `tc.bf16_logits` on the forward: its logits are a lone bf16 -> f32 cast
    (a tc.fusion of one tc.cast) read only by the pair, and the gradient's
    only reader is a lone f32 -> bf16 cast (or there is no gradient). The
    call reads the bf16 logits with fp32 math (the same numbers) and writes
    the bf16 gradient (the same rounding): neither f32 copy of [N, C]
    exists.

    Before:
    ```mlir
    %l = tc.cross_entropy %x, %y : ...
    %g = tc.cross_entropy_grad %x, %y, %one : ...
    ```
    After:
    ```mlir
    %l = tc.cross_entropy %x, %y {tc.fused_grad} : ...
    %g = tc.cross_entropy_grad %x, %y, %one {tc.fused_grad} : ...
    ```
  }];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcShareNormStats : Pass<"tc-share-norm-stats", "mlir::func::FuncOp"> {
  let summary = "Let a norm's gradient read the row statistics of its forward";
  let description = [{
    For each top-level tc.layer_norm / tc.rms_norm of the library's form
    (f32/f32, bf16/bf16 or bf16 rows with f32 parameters), finds the first
    unpaired gradient (layer_norm_grad / rms_norm_grad) of the same input,
    scale, axis and epsilon and puts the same `tc.norm_stats` integer on
    both. tc-lower-to-tcx then gives the forward's library call the [rows]
    f32 mean (layer_norm only) and rstd as extra outputs, and the gradient
    reads them; an unpaired gradient recomputes them with a forward call of
    its own.

    Before:
    ```mlir
    %y = tc.layer_norm %x, %w, %b {axis = 1 : i64, epsilon = 1.0e-05 : f64} : ...
    %dx, %dw, %db = tc.layer_norm_grad %x, %dy, %w {axis = 1 : i64, epsilon = 1.0e-05 : f64} : ...
    ```
    After:
    ```mlir
    %y = tc.layer_norm %x, %w, %b {axis = 1 : i64, epsilon = 1.0e-05 : f64, tc.norm_stats = 0 : i64} : ...
    %dx, %dw, %db = tc.layer_norm_grad %x, %dy, %w {axis = 1 : i64, epsilon = 1.0e-05 : f64, tc.norm_stats = 0 : i64} : ...
    ```
  }];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcFp4Exact : Pass<"tc-fp4-exact", "mlir::func::FuncOp"> {
  let summary = "Give NVFP4 products their exact form: unscaled operands, tensor scales as alpha";
  let description = [{
    For each tc.matmul (not marked tc.fp4_gemm, no alpha yet) that reads an
    nvfp4 tc.fake_quantize, reads instead its unscaled twin (made once per
    fake_quantize: code x block scale, exact in bf16, and the f32 tensor
    decode scale as a second result) and takes the tensor scales (their
    product in f32 when both operands are nvfp4) as its alpha, which scales
    the fp32 sums before the result's one rounding. The folded form rounds
    code x block scale x tensor scale to bf16 per element (up to 2^-9
    relative off the NVFP4 value); this one computes the NVFP4 products
    exactly, as sm_120a's block-scaled GEMM does, the sums in another order.
    Scaled fake_quantize results nothing reads any more are erased. Runs
    after tc-autodiff (neither op has a gradient rule) and after
    planFp4Gemms.

    Before:
    ```mlir
    %w4 = tc.fake_quantize %w {format = "nvfp4", axis = 1 : i64, blocks2d = true} : tensor<64x32xbf16>
    %y = tc.matmul %x, %w4 {transpose_rhs = true} : tensor<8x32xbf16>, tensor<64x32xbf16> -> tensor<8x64xbf16>
    ```
    After:
    ```mlir
    %u, %t = tc.fake_quantize %w {format = "nvfp4", axis = 1 : i64, blocks2d = true, unscaled = true} : tensor<64x32xbf16> -> tensor<f32>
    %y = tc.matmul %x, %u alpha %t : tensor<f32> {transpose_rhs = true} : ...
    ```
  }];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcFuseBiasGrad : Pass<"tc-fuse-bias-grad", "mlir::func::FuncOp"> {
  let summary = "Let an FP8 quantize of a gradient compute its bias gradient";
  let description = [{
    For each top-level per-tensor FP8 tc.quantize of the library's form
    (`quantize_fp8`: a rank-2 f32/bf16 input [rows, cols], f32 scales, one
    for the tensor), finds the first unpaired top-level tc.reduce_sum after
    it that sums the same bytes over every axis but the last into their own
    element type -- the quantized matrix itself, or the tensor [..., cols]
    it reshapes -- and puts the same `tc.col_sum` integer on both. That is
    a Linear layer's bias gradient beside the E5M2 copy of its incoming
    gradient (cuBLASLt has no FP8 BGRAD epilogue). tc-lower-to-tcx then
    gives the quantize_fp8 call the column sums as an extra output (the
    kernel reads every element anyway) and the reduce_sum goes.

    Before:
    ```mlir
    %m = tc.reshape %dy : tensor<4x8x16xbf16> to tensor<32x16xbf16>
    %q, %s = tc.quantize %m {block = array<i64: 32, 16>} : tensor<32x16xbf16> -> (tensor<32x16xf8E5M2>, tensor<1x1xf32>)
    %db = tc.reduce_sum %dy {axes = array<i64: 0, 1>} : tensor<4x8x16xbf16> -> tensor<16xbf16>
    ```
    After:
    ```mlir
    %q, %s = tc.quantize %m {block = array<i64: 32, 16>, tc.col_sum = 0 : i64} : ...
    %db = tc.reduce_sum %dy {axes = array<i64: 0, 1>, tc.col_sum = 0 : i64} : ...
    ```

    With `gemm-epilogue` (tc-compile --experimental=bias-grad until the
    H200 has checked it), each column sum left unpaired that sums an operand
    of a top-level tc.matmul of cuBLASLt's kinds over all of K -- lhs stored
    [K, M] (transpose_lhs), rhs stored [K, N] (no transpose_rhs), its own
    bytes or the tensor it reshapes, batch 1 or folded over the batch
    (tc.fold_batch_sum), no other epilogue -- gets the same `tc.bias_grad`
    integer as that matmul: a Linear layer's weight gradient dW = x^T dY
    (or dY^T x) and its bias gradient, the column sums of dY. tc-lower-to-tcx
    gives the tcx.matmul the sums as its `bias_grad_out` (cuBLASLt's BGRADA /
    BGRADB) and the reduce_sum goes. A matmul after the sum moves up to it
    when its operands allow (they are defined before the sum).

    With `norm-col-sums` too, a column sum of the dx a tc.layer_norm_grad /
    tc.rms_norm_grad over the last axis writes (its residual add's result
    when the library call computes that add, or a reshape of it keeping the
    last axis) pairs first with that gradient (the same `tc.col_sum`): the
    norm backward call sums dx as it writes it ("col_sum", has_col_sum) and
    the weight-gradient GEMM reading dx stays a plain product.

    With `fusion-col-sums`, a column sum no quantize took of a floating-point
    result of an elementwise tc.fusion (or of a reshape of it keeping the
    last axis) moves into the fusion: its body sums the yielded value over
    every axis but the last and yields the sums as one more result (the
    generated kernel sums what it stores), which replaces the reduce_sum
    (through a tc.reshape when the sum's shape differs); a weight-gradient
    GEMM reading the same bytes stays a plain product.

    With `attention-col-sums` too, a column sum of the [B, T, N] concat an
    attention gradient's dq / dk / dv form (gradConcat: a fused qkv
    projection's gradient, which tc-fuse-attention-views has the call write in
    place), or of a reshape of it keeping the last axis, pairs first with that
    tc.attention_grad: the attention backward sums the gradients as it stores
    them ("col_sum", has_col_sum, each gradient's offset in the concat) and
    the projection's weight-gradient GEMM stays a plain product. With
    `attention-head-col-sums` too, likewise GPT-NeoX's form, heads
    interleaved (gradHeadConcat: dq and dk, each through the backward's
    rotary or not, and dv concatenated per head, head-transposed and
    reshaped to [B, T, H W]; "col_sum_head_stride" W); tc-fuse-attention-rotary
    undoes the pairing where the call does not take those rotaries (the
    sums must be of the rotated gradients).
  }];
  let options = [
    Option<"gemmEpilogue", "gemm-epilogue", "bool", /*default=*/"false",
           "Pair column sums with the weight-gradient GEMMs that contract the same bytes">,
    Option<"normColSums", "norm-col-sums", "bool", /*default=*/"false",
           "With gemm-epilogue: first pair column sums of a norm gradient's dx with that "
           "gradient (GPU targets' default)">,
    Option<"attentionColSums", "attention-col-sums", "bool", /*default=*/"false",
           "With gemm-epilogue: first pair column sums of the concat an attention "
           "gradient's dq / dk / dv form with that gradient (GPU targets' default)">,
    Option<"fusionColSums", "fusion-col-sums", "bool", /*default=*/"false",
           "Move column sums of an elementwise fusion's results into the fusion">,
    Option<"attentionHeadColSums", "attention-head-col-sums", "bool", /*default=*/"false",
           "With attention-col-sums: GPT-NeoX's qkv gradient too, heads interleaved "
           "(needs tc-fuse-attention-rotary after it; GPU targets' default)">,
  ];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcFuseFp8Amax : Pass<"tc-fuse-fp8-amax", "mlir::func::FuncOp"> {
  let summary = "Take an FP8 quantize's amax in the fusion that produces its input";
  let description = [{
    For each top-level per-tensor FP8 tc.quantize of the library's form
    (`quantize_fp8`: f32/bf16 input, f32 scales, one for the tensor) whose
    input is (through reshapes) a result of a top-level tc.fusion without a
    reduction whose results all have that input's shape: rebuilds the
    fusion with one more result, max(select(isnan(|x|), 0, |x|)) of that
    result x over every axis (tensor<f32>: the amax with NaN elements
    ignored, as the quantize's own), and gives it to the quantize as its
    `amax` operand, so that the quantize_fp8 call makes no amax pass over x.
    The library ops do the same: an input that is (through reshapes and
    transposes) the result of a tc.layer_norm, tc.rms_norm or tc.attention,
    or gradients of one tc.attention_grad (one of them, or a concat of
    several, each through reshapes and transposes), rebuilds that op with
    an `amax` result (attention_grad's `amax_of` names the gradients it
    covers); its kernel takes the max of what it stores. Quantizes of the
    same result share the one amax. Runs after tc-fuse.

    Before:
    ```mlir
    %y = tc.fusion (%x) : (tensor<32x16xbf16>) -> tensor<32x16xbf16> {...}
    %q, %s = tc.quantize %y {block = array<i64: 32, 16>} : ...
    ```
    After:
    ```mlir
    %y:2 = tc.fusion (%x) : (tensor<32x16xbf16>) -> (tensor<32x16xbf16>, tensor<f32>) {
      ...
      %m = tc.reduce_max %kept {axes = array<i64: 0, 1>} : tensor<32x16xf32> -> tensor<f32>
      tc.yield %v, %m : tensor<32x16xbf16>, tensor<f32>
    }
    %q, %s = tc.quantize %y#0 amax %y#1 : tensor<f32> {block = array<i64: 32, 16>} : ...
    ```
  }];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcFuseFp8Delayed : Pass<"tc-fuse-fp8-delayed", "mlir::func::FuncOp"> {
  let summary = "Make each delayed-scaling FP8 quantization one tc.quantize_delayed";
  let description = [{
    GPU pipeline, before tc-fuse. The ops tc-quantize-fp8 writes for a
    delayed-scaled product operand x [rows, cols] (f32 or bf16, through its
    f32 cast): amax = reduce_max(|f32(x)|) over both axes, q = the
    saturating FP8 cast of f32(x) * s (s a tensor<f32>), the saturation
    count reduce_sum(cast(|f32(x) * s| > fmax)) over both axes, and the
    [1, 0] transposes of q, become one tc.quantize_delayed (result, amax,
    saturated, and result_t where q was transposed), which tc-lower-to-tcx
    makes the runtime's one-pass "quantize_fp8_delayed" call. Its results
    carry the reference values of the ops they replace (tc-run --check).
    Then each such tensor's bookkeeping (its amax in front of the stored
    history, the next history a slice of that window, the window's max, the
    next scale's select chain, 1 / s) becomes one tc.fp8_scale_update right
    after the quantization (the runtime's one-block "fp8_scale_update",
    which writes the next scale and history over the stored ones).
    Chains of another form stay as they are.

    Before:
    ```mlir
    %xf = tc.cast %x : tensor<64x32xbf16> to tensor<64x32xf32>
    %a = tc.abs %xf : tensor<64x32xf32>
    %m = tc.reduce_max %a {axes = array<i64: 0, 1>} : tensor<64x32xf32> -> tensor<f32>
    %p = tc.mul %xf, %s : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf32>
    %q = tc.cast %p : tensor<64x32xf32> to tensor<64x32xf8E4M3FN>
    %t = tc.transpose %q {permutation = array<i64: 1, 0>} : ...
    %ap = tc.abs %p : tensor<64x32xf32>
    %o = tc.gt %ap, %fmax : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xi1>
    %of = tc.cast %o : tensor<64x32xi1> to tensor<64x32xf32>
    %n = tc.reduce_sum %of {axes = array<i64: 0, 1>} : tensor<64x32xf32> -> tensor<f32>
    ```
    After:
    ```mlir
    %q, %m, %n, %t = tc.quantize_delayed %x, %s : tensor<64x32xbf16>, tensor<f32>
        -> (tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<32x64xf8E4M3FN>)
    ```
  }];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcHoistParameterCasts : Pass<"tc-hoist-parameter-casts", "mlir::func::FuncOp"> {
  let summary = "Move each cast of a parameter right after the parameter";
  let description = [{
    GPU pipeline, before tc-fuse. A tc.cast of a tc.parameter (the precision
    plan's 16-bit copy of an fp32 master weight) moves right after the
    parameter, so that the casts of a step are adjacent launches the runtime
    groups into one.

    Before:
    ```mlir
    %w = tc.parameter "w" : tensor<8x8xf32>
    %y = tc.exp %x : tensor<4x8xbf16>
    %wb = tc.cast %w : tensor<8x8xf32> to tensor<8x8xbf16>
    ```
    After:
    ```mlir
    %w = tc.parameter "w" : tensor<8x8xf32>
    %wb = tc.cast %w : tensor<8x8xf32> to tensor<8x8xbf16>
    %y = tc.exp %x : tensor<4x8xbf16>
    ```
  }];
}

def TcShadowParameterCasts : Pass<"tc-shadow-parameter-casts", "mlir::ModuleOp"> {
  let summary = "Keep the 16-bit copies of the weights across steps: the optimizer writes them";
  let description = [{
    GPU pipeline (GPU targets' default), after tc-hoist-parameter-casts,
    before tc-fuse. A tc.cast of an fp32 tc.parameter `p`
    (not optimizer state) to bf16 or f16 reads tc.parameter "shadow:p"
    instead (rt::kShadowPrefix: a device-only entry of the cast's type), and
    every function with an "update:p" result also returns
    "update:shadow:p", that value cast, which tc-lower-to-tcx writes in place
    (tc-fuse makes the cast a further output of the optimizer's kernel). The
    CUDA executor fills "shadow:p" from `p` when it makes the entry and
    after every write of `p` from outside a step, so it always holds `p`
    cast: each step reads 2 bytes a weight instead of casting (4 read, 2
    written), the optimizer writes 2 more. A parameter cast to two types, a
    "shadow:" name already taken or an update whose function a call reads
    keeps its casts.

    Before:
    ```mlir
    func.func @train_step(...) -> (..., tensor<8x8xf32> {tc.name = "update:w"}) {
      %w = tc.parameter "w" {trainable} : tensor<8x8xf32>
      %wb = tc.cast %w : tensor<8x8xf32> to tensor<8x8xbf16>
      ...
      return ..., %w2
    ```
    After:
    ```mlir
    func.func @train_step(...) -> (..., tensor<8x8xf32> {tc.name = "update:w"},
                                   tensor<8x8xbf16> {tc.name = "update:shadow:w"}) {
      %w = tc.parameter "w" {trainable} : tensor<8x8xf32>
      %wb = tc.parameter "shadow:w" : tensor<8x8xbf16>
      ...
      %c = tc.cast %w2 : tensor<8x8xf32> to tensor<8x8xbf16>
      return ..., %w2, %c
    ```
  }];
  let dependentDialects = ["::tc::TCDialect", "::mlir::func::FuncDialect"];
}

def TcFoldTransposes : Pass<"tc-fold-transposes", "mlir::func::FuncOp"> {
  let summary = "Let the GEMMs read 2-D transposes (weights, their gradients) transposed";
  let description = [{
    GPU pipeline, after tc-tag-reference-values, before tc-fuse. A 2-D
    tc.transpose read only by tc.matmul operands (directly or through a
    constant tc.pad read only by them) goes: the matmuls read its input with
    their transpose flag flipped. A 2-D tc.transpose of a value computed from
    a tc.matmul through single-use tc.slice, tc.reshape (last two dims
    kept), tc.reduce_sum (leading axes) and tc.cast goes too: the chain is
    rebuilt over matmul(rhs, lhs) with the flags swapped, (A^T B)^T = B^T A.

    Before:
    ```mlir
    %t = tc.transpose %w {permutation = array<i64: 1, 0>} : tensor<64x32xbf16> -> tensor<32x64xbf16>
    %y = tc.matmul %x, %t : tensor<8x32xbf16>, tensor<32x64xbf16> -> tensor<8x64xbf16>
    ```
    After:
    ```mlir
    %y = tc.matmul %x, %w {transpose_rhs = true} : tensor<8x32xbf16>, tensor<64x32xbf16> -> tensor<8x64xbf16>
    ```
  }];
}

def TcFuseAttentionViews : Pass<"tc-fuse-attention-views", "mlir::func::FuncOp"> {
  let summary = "Mark where fused attention and rotary write their results in place";
  let description = [{
    For each top-level tc.attention / tc.attention_grad of the library's
    form (f32/bf16 q, k, v; f32 lse):

    - `tc.out_transposed` on the forward: its output's readers are one
      [0, 2, 1, 3] head transpose (back to [B, T, H, D]) and backward ops
      reading it as their `result` only. The call writes the output through
      the transpose (strides [T*H*D, D, H*D]) and the transpose goes.
    - `tc.grads_into_concat` on the backward: dq, dk, dv each go through
      their only reader, a head transpose, then a reshape, into one concat
      along the last axis of a [B, T, N] tensor (the gradient of a fused qkv
      projection). The call writes each into its piece of the concat (a
      view at its offset, rows of N); the transposes, reshapes and the
      concat go.
    - `tc.grads_transposed = array<i1: dq, dk, dv>` on the backward
      otherwise: which gradients are written through the head transpose
      that is their only reader, or into their piece of a last-axis concat
      that one head transpose alone reads (GPT-NeoX's qkv gradient: every
      piece of it must be written in place, by the attention backward or a
      rotary).
    - `tc.out_transposed` on a tc.rotary [B, H, T, D] the same way (Llama's
      rotated dq / dk back to [B, T, H, D], NeoX's into the qkv gradient):
      its generated kernel writes with strides.
    - A last-axis slice of a head transpose that attention ops alone read
      (NeoX's v out of its per-head qkv [B, T, H, 3D]) becomes the head
      transpose of the slice: attention reads v in place out of the slice's
      [B, T, H, D] buffer, and the head transpose of the whole qkv, whose q
      and k pieces the rotary kernels read in place, is not made.
    - With `rotary-in-place`, `tc.rotary_in_place` on a tc.rotary whose
      input is a head-split view of a tensor made in the function (a
      projection), no other op reading the view's elements (every other
      reader of the tensor reads a head-split piece disjoint from it) and
      attention ops alone reading the result: the kernel rotates q / k where
      the projection holds them and attention reads them from there (GPT-NeoX's
      partial rotary touches 16 of 64 features and copies none). The
      projection then stays alive until the attention backward, so its v is
      read in place too: the slice above and the value copy below are not
      made for it. The backward's rotaries of dq and dk (their only reader,
      marked `tc.out_transposed`) get `tc.rotary_in_place` too and the
      attention backward `tc.grads_through_rotary = array<i1: dq, dk, dv>`:
      the call writes the gradient where the rotary writes, and the rotary
      rotates it there.

    Reading q, k, v (and the backward's output and incoming gradient) out of
    head transposes and qkv splits needs no mark: it consumes no op, and
    tc-lower-to-tcx derives the strides from the operands (headSplitSource;
    a rotary's input likewise).

    Before:
    ```mlir
    %o, %lse = tc.attention %q, %k, %v {causal = true, scale = 0.35 : f64} : ...
    %ot = tc.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : ...
    ```
    After:
    ```mlir
    %o, %lse = tc.attention %q, %k, %v {causal = true, scale = 0.35 : f64, tc.out_transposed} : ...
    %ot = tc.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : ...
    ```
  }];
  let options = [
    Option<"rotaryInPlace", "rotary-in-place", "bool", /*default=*/"false",
           "Rotaries rotate q / k in place in their projection (tc-compile "
           "--experimental=rotary-in-place)">
  ];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcFuseAttentionRotary : Pass<"tc-fuse-attention-rotary", "mlir::func::FuncOp"> {
  let summary = "Let the attention backward rotate the dq / dk it stores (the backward's rotaries)";
  let description = [{
    For each top-level tc.attention_grad that tc-fuse-attention-views marked
    `tc.grads_through_rotary` (dq / dk written where the backward's rotary,
    marked `tc.rotary_in_place`, rotates them in place), without an FP8
    amax: the rotaries of the marked gradients (not interleaved, cos / sin
    [B, T, R/2] of the gradient's element type, one pair of tables for both)
    are taken by the call, `tc.attention_rotary = array<i1: dq, dk>`.
    tc-lower-to-tcx then gives the "attention_bwd" call the tables
    (`rot_cos`, `rot_sin`, `has_rotary`, `rotary_of`): it rotates the
    gradients before it stores them, and the rotaries make no kernel (each
    gradient written once, not written, read and written again). An op
    that makes a table after the attention backward (the backward's -sin)
    moves before it when what it reads is there already; otherwise the call
    is left alone.

    Before:
    ```mlir
    %dq, %dk, %dv = tc.attention_grad ... {tc.grads_through_rotary = array<i1: true, true, false>, ...}
    %ns = tc.neg %sin ...
    %dqr = tc.rotary %dq, %cos, %ns {tc.out_transposed, tc.rotary_in_place} : ...
    %dkr = tc.rotary %dk, %cos, %ns {tc.out_transposed, tc.rotary_in_place} : ...
    ```
    After:
    ```mlir
    %ns = tc.neg %sin ...
    %dq, %dk, %dv = tc.attention_grad ... {tc.attention_rotary = array<i1: true, true>, tc.grads_through_rotary = array<i1: true, true, false>, ...}
    %dqr = tc.rotary %dq, %cos, %ns {tc.out_transposed, tc.rotary_in_place} : ...
    %dkr = tc.rotary %dk, %cos, %ns {tc.out_transposed, tc.rotary_in_place} : ...
    ```

    A call whose gradients' column sums tc-fuse-bias-grad paired in
    GPT-NeoX's form (gradHeadConcat) with a rotary on the way that the call
    does not take loses that pairing (tc.col_sum on it and its reduce_sum):
    the sums must be of the rotated gradients.
  }];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcxMemoryReport : Pass<"tcx-memory-report", "mlir::ModuleOp"> {
  let summary = "Print the memory report of planned tcx functions";
  let description = [{
    Prints `tc::memoryReport` (compiler/MemoryPlan.h) of the module for
    `target` to stdout: what `tc-compile --report memory` prints. The module
    is left unchanged. Functions without a plan (no `tcx.arena_size`) are
    skipped.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"sm_90\"",
           "Target whose memory the fit verdict uses (sm_90, sm_120, ...)">,
    Option<"function", "function", "std::string", /*default=*/"\"\"",
           "Step function to report (default: train_step, else every planned one)">
  ];
}

#endif // TC_COMPILER_TRANSFORMS_PASSES_TD
