// RUN: tc-opt %s --split-input-file --verify-diagnostics

// Tests that non-broadcastable operands name both shapes.
func.func @add_shapes(%x: tensor<2x3xf32>, %y: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{operand shapes are not broadcastable: 2x3 vs 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.add %x, %y : tensor<2x3xf32>, tensor<4xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Tests that mixed element types are rejected.
func.func @add_types(%x: tensor<2xf32>, %y: tensor<2xf16>) -> tensor<2xf32> {
  // expected-error @+2 {{operand element types differ: f32 vs f16}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.add %x, %y : tensor<2xf32>, tensor<2xf16> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that a declared result type must match the inferred one.
func.func @add_result(%x: tensor<2x3xf32>, %y: tensor<3xf32>) -> tensor<3x3xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.add %x, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

// Tests that math ops reject integer tensors.
func.func @exp_int(%x: tensor<2xi32>) -> tensor<2xi32> {
  // expected-error @+1 {{must be ranked tensor of floating-point values}}
  %0 = tc.exp %x : tensor<2xi32>
  return %0 : tensor<2xi32>
}

// -----

func.func @gelu_mode(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "fast"}}
  %0 = tc.gelu %x {approximate = "fast"} : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @cast_shape(%x: tensor<2x3xf32>) -> tensor<6xbf16> {
  // expected-error @+1 {{input shape 2x3 != result shape 6}}
  %0 = tc.cast %x : tensor<2x3xf32> to tensor<6xbf16>
  return %0 : tensor<6xbf16>
}

// -----

func.func @reduce_axis(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{axis 2 is out of range for input of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.reduce_sum %x {axes = array<i64: 2>} : tensor<2x3xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @reduce_unsorted(%x: tensor<2x3xf32>) -> tensor<f32> {
  // expected-error @+2 {{axes must be sorted and distinct}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.reduce_max %x {axes = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @argmax_axis(%x: tensor<2x3xf32>) -> tensor<2xi64> {
  // expected-error @+2 {{tc.argmax axis -1 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.argmax %x {axis = -1 : i64} : tensor<2x3xf32> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

func.func @softmax_axis(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = tc.softmax %x {axis = 2 : i64} : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @cumsum_axis(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{axis 5 is out of range for rank 2}}
  %0 = tc.cumsum %x {axis = 5 : i64} : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Tests that layer_norm names the scale shape it wanted.
func.func @layer_norm_scale(%x: tensor<2x4x8xf32>, %g: tensor<4xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{scale shape 4 != normalised shape 8 of input 2x4x8}}
  %0 = tc.layer_norm %x, scale %g {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x4x8xf32>, tensor<4xf32>) -> tensor<2x4x8xf32>
  return %0 : tensor<2x4x8xf32>
}

// -----

func.func @layer_norm_eps(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{epsilon must be non-negative}}
  %0 = tc.layer_norm %x {axis = 1 : i64, epsilon = -1.0 : f64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @rms_norm_scale(%x: tensor<2x8xf32>, %g: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{scale shape 2x8 != normalised shape 8 of input 2x8}}
  %0 = tc.rms_norm %x, scale %g {axis = 1 : i64, epsilon = 1.0e-6 : f64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @ce_rank(%x: tensor<2x4x8xf32>, %y: tensor<2x4xi64>) -> tensor<f32> {
  // expected-error @+2 {{'tc.cross_entropy' input must be [N, C], got 2x4x8}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.cross_entropy %x, %y : (tensor<2x4x8xf32>, tensor<2x4xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @ce_labels(%x: tensor<8x5xf32>, %y: tensor<7xi64>) -> tensor<f32> {
  // expected-error @+2 {{labels shape 7 does not match input rows 8x5 (want [N])}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.cross_entropy %x, %y : (tensor<8x5xf32>, tensor<7xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @nll_weight(%x: tensor<8x5xf32>, %y: tensor<8xi64>, %w: tensor<4xf32>) -> tensor<f32> {
  // expected-error @+2 {{weight shape 4 does not match class count 5}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.nll_loss %x, %y, weight %w : (tensor<8x5xf32>, tensor<8xi64>, tensor<4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @ce_reduction(%x: tensor<8x5xf32>, %y: tensor<8xi64>) -> tensor<f32> {
  // expected-error @+2 {{reduction must be mean, sum or none, got avg}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.cross_entropy %x, %y {reduction = "avg"} : (tensor<8x5xf32>, tensor<8xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that matmul names both shapes when K differs.
func.func @matmul_k(%a: tensor<4x8xf32>, %b: tensor<7x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+2 {{'tc.matmul' lhs K 8 != rhs K 7 (lhs 4x8, rhs 7x3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.matmul %a, %b : tensor<4x8xf32>, tensor<7x3xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @matmul_rank(%a: tensor<8xf32>, %b: tensor<8x3xf32>) -> tensor<3xf32> {
  // expected-error @+2 {{'tc.matmul' operands need rank >= 2, got 8 and 8x3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.matmul %a, %b : tensor<8xf32>, tensor<8x3xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @matmul_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x3xf32>) -> tensor<2x4x3xf32> {
  // expected-error @+2 {{batch dimensions do not broadcast: 2x4x8 vs 3x8x3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.matmul %a, %b : tensor<2x4x8xf32>, tensor<3x8x3xf32> -> tensor<2x4x3xf32>
  return %0 : tensor<2x4x3xf32>
}

// -----

func.func @gather_axis(%d: tensor<4x8xf32>, %i: tensor<3xi64>) -> tensor<3x8xf32> {
  // expected-error @+2 {{'tc.gather' axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.gather %d, %i {axis = 2 : i64} : tensor<4x8xf32>, tensor<3xi64> -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) -> tensor<7xf32> {
  // expected-error @+1 {{input 2x3 has 6 elements but result 7 has 7}}
  %0 = tc.reshape %x : tensor<2x3xf32> to tensor<7xf32>
  return %0 : tensor<7xf32>
}

// -----

func.func @transpose_perm(%x: tensor<2x3xf32>) -> tensor<3x3xf32> {
  // expected-error @+2 {{permutation is not a permutation of [0, rank)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.transpose %x {permutation = array<i64: 1, 1>} : tensor<2x3xf32> -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

func.func @broadcast_bad(%x: tensor<2x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{cannot broadcast 2x3 to 4x3}}
  %0 = tc.broadcast %x : tensor<2x3xf32> to tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @slice_bounds(%x: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{dimension 0: start 6, stride 1, size 4 leave the input extent 8}}
  %0 = tc.slice %x {starts = array<i64: 6>, strides = array<i64: 1>} : tensor<8xf32> to tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @slice_stride(%x: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{stride of dimension 0 is 0}}
  %0 = tc.slice %x {starts = array<i64: 0>, strides = array<i64: 0>} : tensor<8xf32> to tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @concat_shape(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) -> tensor<2x6xf32> {
  // expected-error @+2 {{'tc.concat' input #1 shape 3x3 differs from 2x3 outside axis 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.concat %a, %b {axis = 1 : i64} : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @split_sizes(%x: tensor<2x6xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{result sizes along axis 1 add up to 5, input has 6}}
  %0:2 = tc.split %x {axis = 1 : i64} : tensor<2x6xf32> -> tensor<2x2xf32>, tensor<2x3xf32>
  return %0#0 : tensor<2x2xf32>
}

// -----

func.func @pad_mode(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{'tc.pad' mode must be constant, reflect or edge, got wrap}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.pad %x {low = array<i64: 0, 0>, high = array<i64: 0, 0>, mode = "wrap"} : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @select_types(%c: tensor<2xi1>, %a: tensor<2xf32>, %b: tensor<2xi32>) -> tensor<2xf32> {
  // expected-error @+2 {{'tc.select' branch element types differ: f32 vs i32}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = tc.select %c, %a, %b : tensor<2xi1>, tensor<2xf32>, tensor<2xi32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @parameter_name() -> tensor<2xf32> {
  // expected-error @+1 {{needs a non-empty name}}
  %0 = tc.parameter "" : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that scatter_add checks the updates against the result and indices.
func.func @scatter_add_shape(%u: tensor<2x3x8xf32>, %i: tensor<2x4xi64>) -> tensor<16x8xf32> {
  // expected-error @+1 {{updates shape 2x3x8 != 2x4x8 (result shape before axis 0, indices shape, result shape after it)}}
  %0 = tc.scatter_add %u, %i {axis = 0 : i64} : tensor<2x3x8xf32>, tensor<2x4xi64> -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----

// Tests that scatter_add checks its axis.
func.func @scatter_add_axis(%u: tensor<4xf32>, %i: tensor<4xi64>) -> tensor<16xf32> {
  // expected-error @+1 {{axis 1 is out of range for rank 1}}
  %0 = tc.scatter_add %u, %i {axis = 1 : i64} : tensor<4xf32>, tensor<4xi64> -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// Tests that scatter_add keeps the element type.
func.func @scatter_add_type(%u: tensor<4xf32>, %i: tensor<4xi64>) -> tensor<16xf16> {
  // expected-error @+1 {{updates element type 'f32' != result element type 'f16'}}
  %0 = tc.scatter_add %u, %i {axis = 0 : i64} : tensor<4xf32>, tensor<4xi64> -> tensor<16xf16>
  return %0 : tensor<16xf16>
}

// -----

// Tests that insert_slice writes inside the result only.
func.func @insert_slice_extent(%x: tensor<4x6xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{dimension 1: start 0, stride 4, size 6 leave the result extent 16}}
  %0 = tc.insert_slice %x {starts = array<i64: 7, 0>, strides = array<i64: -2, 4>} : tensor<4x6xf32> to tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that insert_slice needs one start and one non-zero stride per dimension.
func.func @insert_slice_stride(%x: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{stride of dimension 0 is 0}}
  %0 = tc.insert_slice %x {starts = array<i64: 0>, strides = array<i64: 0>} : tensor<4xf32> to tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @insert_slice_rank(%x: tensor<4xf32>) -> tensor<8x2xf32> {
  // expected-error @+1 {{source rank 1, result rank 2, 1 starts and 1 strides must all agree}}
  %0 = tc.insert_slice %x {starts = array<i64: 0>, strides = array<i64: 1>} : tensor<4xf32> to tensor<8x2xf32>
  return %0 : tensor<8x2xf32>
}

// -----

// Tests that the upstream gradient of a loss gradient has the loss's type.
func.func @cross_entropy_grad_grad(%l: tensor<8x5xf32>, %y: tensor<8xi64>, %g: tensor<8xf32>) -> tensor<8x5xf32> {
  // expected-error @+1 {{grad type 'tensor<8xf32>' != the type of the tc.cross_entropy result 'tensor<f32>' (reduction "mean")}}
  %0 = tc.cross_entropy_grad %l, %y, grad %g : (tensor<8x5xf32>, tensor<8xi64>, tensor<8xf32>) -> tensor<8x5xf32>
  return %0 : tensor<8x5xf32>
}

// -----

// Tests that the loss gradients check labels like their forward op.
func.func @nll_loss_grad_labels(%l: tensor<8x5xf32>, %y: tensor<7xi64>, %g: tensor<f32>) -> tensor<8x5xf32> {
  // expected-error @+1 {{'tc.nll_loss' labels shape 7 does not match input rows 8x5 (want [N])}}
  %0 = tc.nll_loss_grad %l, %y, grad %g : (tensor<8x5xf32>, tensor<7xi64>, tensor<f32>) -> tensor<8x5xf32>
  return %0 : tensor<8x5xf32>
}

// -----

func.func @cross_entropy_grad_result(%l: tensor<8x5xf32>, %y: tensor<8xi64>, %g: tensor<f32>) -> tensor<8x5xf64> {
  // expected-error @+1 {{result type 'tensor<8x5xf64>' != input type 'tensor<8x5xf32>'}}
  %0 = tc.cross_entropy_grad %l, %y, grad %g : (tensor<8x5xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x5xf64>
  return %0 : tensor<8x5xf64>
}

// -----

// Tests that a tc.fusion yields values of its result types.
func.func @fusion_yield_type(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{yielded value #0 has type 'tensor<4xf32>', result #0 has type 'tensor<4xf16>'}}
  %r = tc.fusion (%x) : (tensor<4xf32>) -> tensor<4xf16> {
  ^bb0(%a: tensor<4xf32>):
    %0 = tc.exp %a : tensor<4xf32>
    tc.yield %0 : tensor<4xf32>
  }
  return %r : tensor<4xf16>
}

// -----

// Tests that the body's arguments mirror the inputs.
func.func @fusion_args(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{body argument #0 has type 'tensor<4xf16>', input #0 has type 'tensor<4xf32>'}}
  %r = tc.fusion (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf16>):
    %0 = tc.cast %a : tensor<4xf16> to tensor<4xf32>
    tc.yield %0 : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that a matmul cannot be put in a tc.fusion.
func.func @fusion_matmul(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = tc.fusion (%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xf32>):
    // expected-error @+1 {{cannot be fused}}
    %0 = tc.matmul %a, %a : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    tc.yield %0 : tensor<4x4xf32>
  }
  return %r : tensor<4x4xf32>
}

// -----

// Tests that a fusion's reduction may only be yielded (it ends the kernel).
func.func @fusion_reduction_use(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %r = tc.fusion (%x) : (tensor<4x8xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    // expected-error @+1 {{result of the fusion's reduction may only be yielded}}
    %0 = tc.reduce_sum %a {axes = array<i64: 1>} : tensor<4x8xf32> -> tensor<4xf32>
    %1 = tc.exp %0 : tensor<4xf32>
    tc.yield %1 : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Tests that a max over a leading axis is not fusible (of the reductions over
// leading axes only column sums are).
func.func @fusion_leading_axis(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  %r = tc.fusion (%x) : (tensor<4x8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    // expected-error @+1 {{cannot be fused}}
    %0 = tc.reduce_max %a {axes = array<i64: 0>} : tensor<4x8xf32> -> tensor<8xf32>
    tc.yield %0 : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// -----

// Tests that a sum over a middle axis is not fusible (not every axis but the
// last: no column sum).
func.func @fusion_middle_axis(%x: tensor<2x4x8xf32>) -> tensor<2x8xf32> {
  %r = tc.fusion (%x) : (tensor<2x4x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x4x8xf32>):
    // expected-error @+1 {{cannot be fused}}
    %0 = tc.reduce_sum %a {axes = array<i64: 1>} : tensor<2x4x8xf32> -> tensor<2x8xf32>
    tc.yield %0 : tensor<2x8xf32>
  }
  return %r : tensor<2x8xf32>
}

// -----

// Tests that a fusion holds one reduction: a column sum beside a row sum is a
// second one.
func.func @fusion_column_and_row_sums(%x: tensor<4x8xf32>) -> (tensor<8xf32>, tensor<4xf32>) {
  %r:2 = tc.fusion (%x) : (tensor<4x8xf32>) -> (tensor<8xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %0 = tc.reduce_sum %a {axes = array<i64: 0>} : tensor<4x8xf32> -> tensor<8xf32>
    // expected-error @+1 {{is a second reduction in one tc.fusion}}
    %1 = tc.reduce_sum %a {axes = array<i64: 1>} : tensor<4x8xf32> -> tensor<4xf32>
    tc.yield %0, %1 : tensor<8xf32>, tensor<4xf32>
  }
  return %r#0, %r#1 : tensor<8xf32>, tensor<4xf32>
}

// -----

// Tests that only splat constants live in a fusion body.
func.func @fusion_constant(%x: tensor<2xf32>) -> tensor<2xf32> {
  %r = tc.fusion (%x) : (tensor<2xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2xf32>):
    // expected-error @+1 {{in a tc.fusion body must be a splat constant}}
    %c = tc.constant dense<[1.0, 2.0]> : tensor<2xf32>
    %0 = tc.add %a, %c : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
    tc.yield %0 : tensor<2xf32>
  }
  return %r : tensor<2xf32>
}

// -----

// Tests that attention needs the query heads to be a multiple of the key/value heads.
func.func @attention_heads(%q: tensor<1x3x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{query heads (3) must be a multiple of the key/value heads (2)}}
  %o, %l = tc.attention %q, %k, %v {scale = 1.0 : f64}
      : (tensor<1x3x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x3x4x8xf32>, tensor<1x3x4xf32>)
  return
}

// -----

// Tests that attention's lse is f32 (not the operands' bf16).
func.func @attention_lse(%q: tensor<1x2x4x8xbf16>) {
  // expected-error @+1 {{lse must be 'tensor<1x2x4xf32>', got 'tensor<1x2x4xbf16>'}}
  %o, %l = tc.attention %q, %q, %q {scale = 1.0 : f64}
      : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x4xbf16>)
  return
}

// -----

// Tests that rotary's tables are [batch, seq, rotary_dim / 2].
func.func @rotary_tables(%x: tensor<1x2x3x4xf32>, %c: tensor<1x2x2xf32>) {
  // expected-error @+1 {{cos/sin must be [batch, seq, rotary_dim / 2] = [1, 3, R/2], got 1x2x2}}
  %y = tc.rotary %x, %c, %c : (tensor<1x2x3x4xf32>, tensor<1x2x2xf32>, tensor<1x2x2xf32>) -> tensor<1x2x3x4xf32>
  return
}

// -----

// Tests that a key mask is [batch, keys].
func.func @attention_key_mask(%q: tensor<2x2x4x8xf32>, %m: tensor<2x3xi1>) {
  // expected-error @+1 {{key_mask must be [batch, keys] = 2x4, got 2x3}}
  %o, %l = tc.attention %q, %q, %q key_mask %m {scale = 1.0 : f64}
      : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x3xi1>) -> (tensor<2x2x4x8xf32>, tensor<2x2x4xf32>)
  return
}

// -----

// Tests that the fill of hidden scores is negative.
func.func @attention_mask_fill(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{mask_fill must be negative (-inf or a very negative finite value), got 1}}
  %o, %l = tc.attention %q, %q, %q {scale = 1.0 : f64, mask_fill = 1.0 : f64}
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// Tests that query and key share the head dimension and the scale is positive.
func.func @attention_dims(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x6xf32>) {
  // expected-error @+1 {{query dim 8 != key dim 6}}
  %o, %l = tc.attention %q, %k, %k {scale = 1.0 : f64}
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x6xf32>, tensor<1x2x4x6xf32>) -> (tensor<1x2x4x6xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_scale(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{scale must be positive and finite, got -1}}
  %o, %l = tc.attention %q, %q, %q {scale = -1.0 : f64}
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// Tests that attention_grad's gradients have their operands' shapes.
func.func @attention_grad_shapes(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %l: tensor<1x4x4xf32>) {
  // expected-error @+1 {{dkey must be 'tensor<1x2x4x8xf32>', got 'tensor<1x4x4x8xf32>'}}
  %dq, %dk, %dv = tc.attention_grad %q, %k, %k, %q, %l, %q {scale = 1.0 : f64}
      : (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4xf32>, tensor<1x4x4x8xf32>)
        -> (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>)
  return
}

// -----

// Tests that reshape keeps the element type (ODS AllElementTypesMatch).
func.func @reshape_type(%x: tensor<2x3xf32>) -> tensor<6xf16> {
  // expected-error @+1 {{'tc.reshape' op failed to verify that all of {input, result} have same element type}}
  %0 = tc.reshape %x : tensor<2x3xf32> to tensor<6xf16>
  return %0 : tensor<6xf16>
}

// -----

// Tests that broadcast keeps the element type.
func.func @broadcast_type(%x: tensor<1x3xf32>) -> tensor<2x3xbf16> {
  // expected-error @+1 {{'tc.broadcast' op failed to verify that all of {input, result} have same element type}}
  %0 = tc.broadcast %x : tensor<1x3xf32> to tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}

// -----

// Tests that slice keeps the element type.
func.func @slice_type(%x: tensor<4xf32>) -> tensor<2xi32> {
  // expected-error @+1 {{'tc.slice' op failed to verify that all of {input, result} have same element type}}
  %0 = tc.slice %x {starts = array<i64: 0>, strides = array<i64: 1>} : tensor<4xf32> to tensor<2xi32>
  return %0 : tensor<2xi32>
}

// -----

// Tests that insert_slice keeps the element type.
func.func @insert_slice_type(%x: tensor<2xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'tc.insert_slice' op failed to verify that all of {source, result} have same element type}}
  %0 = tc.insert_slice %x {starts = array<i64: 0>, strides = array<i64: 1>} : tensor<2xf32> to tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

// Tests that quantize names the scale shape its blocks need.
func.func @quantize_grid(%x: tensor<4x8xf32>) -> tensor<4x8xf8E4M3FN> {
  // expected-error @+1 {{'tc.quantize' op scale_inv shape 1x1 != 4x2 (input 4x8 in blocks of 1x4)}}
  %q, %s = tc.quantize %x {block = array<i64: 1, 4>} : tensor<4x8xf32> -> (tensor<4x8xf8E4M3FN>, tensor<1x1xf32>)
  return %q : tensor<4x8xf8E4M3FN>
}

// -----

// Tests that quantize writes only the scaled narrow formats.
func.func @quantize_format(%x: tensor<4xf32>) -> tensor<4xbf16> {
  // expected-error @+1 {{'tc.quantize' op result must be f8E4M3FN, f8E5M2 or f4E2M1FN, got 'bf16'}}
  %q, %s = tc.quantize %x {block = array<i64: 4>} : tensor<4xf32> -> (tensor<4xbf16>, tensor<1xf32>)
  return %q : tensor<4xbf16>
}

// -----

// Tests that a quantize's amax operand is one f32 value.
func.func @quantize_amax_type(%x: tensor<4x4xf32>, %m: tensor<1xf32>) -> tensor<4x4xf8E5M2> {
  // expected-error @+1 {{'tc.quantize' op amax must be tensor<f32>, got 'tensor<1xf32>'}}
  %q, %s = tc.quantize %x amax %m : tensor<1xf32> {block = array<i64: 4, 4>} : tensor<4x4xf32> -> (tensor<4x4xf8E5M2>, tensor<1x1xf32>)
  return %q : tensor<4x4xf8E5M2>
}

// -----

// Tests that a norm's amax result (tc-fuse-fp8-amax) is one f32 value.
func.func @layer_norm_amax_type(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  // expected-error @+1 {{'tc.layer_norm' op amax must be tensor<f32>, got 'tensor<1xbf16>'}}
  %y, %m = tc.layer_norm %x {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<1xbf16>)
  return %y : tensor<4x8xbf16>
}

// -----

// Tests that attention_grad's amax names the gradients it covers.
func.func @attention_grad_amax_of(%q: tensor<1x2x8x16xbf16>, %lse: tensor<1x2x8xf32>) -> tensor<f32> {
  // expected-error @+1 {{'tc.attention_grad' op amax and amax_of go together}}
  %d:4 = tc.attention_grad %q, %q, %q, %q, %lse, %q {scale = 0.25 : f64}
      : (tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>,
         tensor<1x2x8xf32>, tensor<1x2x8x16xbf16>)
        -> (tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<f32>)
  return %d#3 : tensor<f32>
}

// -----

func.func @attention_grad_amax_mask(%q: tensor<1x2x8x16xbf16>, %lse: tensor<1x2x8xf32>) -> tensor<f32> {
  // expected-error @+1 {{'tc.attention_grad' op amax_of is a mask of the gradients (1 dquery, 2 dkey, 4 dvalue), got 8}}
  %d:4 = tc.attention_grad %q, %q, %q, %q, %lse, %q {scale = 0.25 : f64, amax_of = 8 : i64}
      : (tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>,
         tensor<1x2x8xf32>, tensor<1x2x8x16xbf16>)
        -> (tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<f32>)
  return %d#3 : tensor<f32>
}

// -----

// Tests that an amax operand needs per-tensor scaling.
func.func @quantize_amax_rows(%x: tensor<4x4xf32>, %m: tensor<f32>) -> tensor<4x4xf8E5M2> {
  // expected-error @+1 {{'tc.quantize' op an amax operand is the tensor's: it needs per-tensor scaling (block = the input's shape) with f32 scale_inv, got scale_inv 'tensor<4x1xf32>'}}
  %q, %s = tc.quantize %x amax %m : tensor<f32> {block = array<i64: 1, 4>} : tensor<4x4xf32> -> (tensor<4x4xf8E5M2>, tensor<4x1xf32>)
  return %q : tensor<4x4xf8E5M2>
}

// -----

// Tests that quantize's block has one entry per dimension.
func.func @quantize_block_rank(%x: tensor<4x4xf32>) -> tensor<4x4xf8E5M2> {
  // expected-error @+1 {{'tc.quantize' op block has 1 entries for a rank-2 input}}
  %q, %s = tc.quantize %x {block = array<i64: 4>} : tensor<4x4xf32> -> (tensor<4x4xf8E5M2>, tensor<1x1xf32>)
  return %q : tensor<4x4xf8E5M2>
}

// -----

// Tests that fake_quantize names the FP4 formats it knows.
func.func @fake_quantize_format(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'tc.fake_quantize' op format must be nvfp4 or mxfp4, got 'fp4'}}
  %y = tc.fake_quantize %x {format = "fp4"} : tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Tests that fake_quantize's blocked axis is one of the input's.
func.func @fake_quantize_axis(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'tc.fake_quantize' op axis 2 out of range for rank 2}}
  %y = tc.fake_quantize %x {format = "nvfp4", axis = 2 : i64} : tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Tests that 16x16 blocks are NVFP4's, of a rank-2 input.
func.func @fake_quantize_blocks2d(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'tc.fake_quantize' op blocks2d (16x16 blocks) needs format nvfp4 and a rank-2 input}}
  %y = tc.fake_quantize %x {format = "mxfp4", blocks2d = true} : tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Tests that stochastic rounding reads its step.
func.func @fake_quantize_no_step(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'tc.fake_quantize' op stochastic rounding needs the step operand}}
  %y = tc.fake_quantize %x {format = "nvfp4", stochastic = true} : tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Tests that the step is one f32 value.
func.func @fake_quantize_step_type(%x: tensor<4x16xf32>, %s: tensor<2xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'tc.fake_quantize' op step must be one f32 value}}
  %y = tc.fake_quantize %x step %s : tensor<2xf32> {format = "nvfp4", stochastic = true} : tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Tests that only nvfp4 has a tensor scale to take apart.
func.func @fake_quantize_unscaled_mx(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{'tc.fake_quantize' op unscaled (the values times their block scales, the tensor scale apart) needs format nvfp4}}
  %y, %t = tc.fake_quantize %x {format = "mxfp4", unscaled = true} : tensor<4x32xf32> -> tensor<f32>
  return %y : tensor<4x32xf32>
}

// -----

// Tests that the unscaled form and its tensor_scale result come together.
func.func @fake_quantize_unscaled_result(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'tc.fake_quantize' op unscaled needs the tensor_scale result}}
  %y = tc.fake_quantize %x {format = "nvfp4", unscaled = true} : tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Tests that the tensor scale is one f32 value.
func.func @fake_quantize_tensor_scale_type(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'tc.fake_quantize' op tensor_scale must be tensor<f32>, got 'tensor<1xf32>'}}
  %y, %t = tc.fake_quantize %x {format = "nvfp4", unscaled = true} : tensor<4x16xf32> -> tensor<1xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Tests that a matmul's alpha is one f32 value.
func.func @matmul_alpha(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %s: tensor<2xf32>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{'tc.matmul' op alpha must be one f32 value, got 'tensor<2xf32>'}}
  %y = tc.matmul %a, %b alpha %s : tensor<2xf32> : tensor<4x8xbf16>, tensor<8x4xbf16> -> tensor<4x4xbf16>
  return %y : tensor<4x4xbf16>
}

// -----

// Tests that scaled_matmul checks the contraction size.
func.func @scaled_matmul_k(%a: tensor<4x8xf8E4M3FN>, %b: tensor<4x16xf8E4M3FN>, %s: tensor<1x1xf32>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{'tc.scaled_matmul' op contraction sizes differ: 8 vs 16 (lhs 4x8, rhs 4x16)}}
  %y = tc.scaled_matmul %a, %s, %b, %s {transpose_rhs = true} : (tensor<4x8xf8E4M3FN>, tensor<1x1xf32>, tensor<4x16xf8E4M3FN>, tensor<1x1xf32>) -> tensor<4x4xbf16>
  return %y : tensor<4x4xbf16>
}

// -----

// Tests that scaled_matmul's scales are grids of their operand's blocks.
func.func @scaled_matmul_scale(%a: tensor<4x8xf8E4M3FN>, %s: tensor<8x1xf32>, %t: tensor<1x1xf32>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{'tc.scaled_matmul' op lhs scale 8x1 is not a grid of blocks of 4x8}}
  %y = tc.scaled_matmul %a, %s, %a, %t {transpose_rhs = true} : (tensor<4x8xf8E4M3FN>, tensor<8x1xf32>, tensor<4x8xf8E4M3FN>, tensor<1x1xf32>) -> tensor<4x4xbf16>
  return %y : tensor<4x4xbf16>
}
