// RUN: tc-opt %s --tc-mark-trainable="freeze=inv_freq" | FileCheck %s --check-prefix=FREEZE
// RUN: tc-opt %s --tc-mark-trainable="trainable=^lm_head\. freeze=bias$" | FileCheck %s --check-prefix=ONLY
// RUN: not tc-opt %s --tc-mark-trainable="trainable=(" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: tc-opt %s --tc-mark-trainable | FileCheck %s --check-prefix=DEFAULT
// RUN: tc-opt %s --tc-mark-trainable="trainable=." | FileCheck %s --check-prefix=NAMED

// Tests that a regex that does not compile is an error naming it.
// BAD: error: --trainable: bad regex '(':


// Tests that floating parameters are trainable unless frozen, that integer
// and boolean ones never are, and that --trainable narrows the set.
// FREEZE-LABEL: func.func @infer
// FREEZE: tc.parameter "model.rotary_emb.inv_freq" : tensor<4xf32>
// FREEZE: tc.parameter "lm_head.weight" {trainable} : tensor<8x4xf32>
// FREEZE: tc.parameter "lm_head.bias" {trainable} : tensor<8xf32>
// FREEZE: tc.parameter "mask" : tensor<4xi1>
// ONLY-LABEL: func.func @infer
// ONLY: tc.parameter "model.rotary_emb.inv_freq" : tensor<4xf32>
// ONLY: tc.parameter "lm_head.weight" {trainable} : tensor<8x4xf32>
// ONLY: tc.parameter "lm_head.bias" : tensor<8xf32>
// ONLY: tc.parameter "mask" : tensor<4xi1>
// Tests that a parameter the importer marked as a torch buffer (tc.buffer) is
// frozen by default and trainable only when a --trainable regex names it.
// DEFAULT-LABEL: func.func @buffers
// DEFAULT: tc.parameter "rotary.inv_freq" {tc.buffer} : tensor<4xf32>
// DEFAULT: tc.parameter "w" {trainable} : tensor<4xf32>
// NAMED-LABEL: func.func @buffers
// NAMED: tc.parameter "rotary.inv_freq" {tc.buffer, trainable} : tensor<4xf32>
// NAMED: tc.parameter "w" {trainable} : tensor<4xf32>
func.func @buffers() -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = tc.parameter "rotary.inv_freq" {tc.buffer, trainable} : tensor<4xf32>
  %1 = tc.parameter "w" : tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

func.func @infer() -> (tensor<4xf32>, tensor<8x4xf32>, tensor<8xf32>, tensor<4xi1>) {
  %0 = tc.parameter "model.rotary_emb.inv_freq" {trainable} : tensor<4xf32>
  %1 = tc.parameter "lm_head.weight" : tensor<8x4xf32>
  %2 = tc.parameter "lm_head.bias" {trainable} : tensor<8xf32>
  %3 = tc.parameter "mask" {trainable} : tensor<4xi1>
  return %0, %1, %2, %3 : tensor<4xf32>, tensor<8x4xf32>, tensor<8xf32>, tensor<4xi1>
}
