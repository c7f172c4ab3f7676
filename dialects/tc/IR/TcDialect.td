//===- TcDialect.td - the tc tensor-level dialect ----------*- tablegen -*-===//
//
// The tensor-level graph every frontend produces and every training pass
// (autodiff, precision, remat, distribution) transforms. Static shapes only.
//
//===----------------------------------------------------------------------===//
#ifndef TC_DIALECT_TD
#define TC_DIALECT_TD

include "mlir/IR/OpBase.td"

def TC_Dialect : Dialect {
  let name = "tc";
  let summary = "Tensor-level graph of a training step";
  let description = [{
    Ops on statically shaped, ranked tensors. Element types are the builtin
    ones, including bf16, f16, f8E4M3FN, f8E5M2, f4E2M1FN and f8E8M0FNU.
    Parameters (`tc.parameter`) are first-class values named as in the model
    they came from; their data lives outside the IR (in the artifact).
    Elementwise binary ops broadcast like numpy.
  }];
  let cppNamespace = "::tc";
  let hasConstantMaterializer = 1;
}

#endif // TC_DIALECT_TD
