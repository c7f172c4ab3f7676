//===- Passes.td - tc compiler passes ----------------------*- tablegen -*-===//
//
// Passes over the tc dialect that need more than the dialect itself (here: the
// runtime's reference executor to evaluate constants).
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

#endif // TC_COMPILER_TRANSFORMS_PASSES_TD
