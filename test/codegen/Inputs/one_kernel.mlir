// One elementwise op: one kernel (the cuobjdump test reads its only cubin).
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = tc.exp %x : tensor<8xf32>
  return %e : tensor<8xf32>
}
