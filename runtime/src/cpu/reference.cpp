//===- reference.cpp - runtime/include/tc/reference.h on the executor -----===//
//
// The public reference evaluation is a thin layer over the CPU executor
// (executor.h): an empty artifact (folding has no weights), the default
// options (f32 values rounded to float, as the compiled program will), and
// the executor's Status turned into a message.
//
//===----------------------------------------------------------------------===//

#include "tc/reference.h"

#include "runtime/src/cpu/executor.h"

namespace tc::reference {

bool runFunction(const rt::Function &fn, const std::vector<rt::HostTensor> &inputs,
                 std::vector<rt::HostTensor> *outputs, std::string *error) {
  static const rt::Artifact empty;
  rt::Status st = rt::runFunction(empty, fn, inputs, outputs);
  if (st.isOk())
    return true;
  if (error)
    *error = st.message();
  return false;
}

bool runOp(const rt::Op &op, const std::vector<rt::HostTensor> &operands,
           const std::vector<rt::TensorType> &resultTypes,
           std::vector<rt::HostTensor> *results, std::string *error) {
  // A function of one op: values 0..n-1 are the operands, then the results.
  rt::Function fn;
  fn.name = "fold";
  rt::Op one = op;
  one.operands.clear();
  one.results.clear();
  for (size_t i = 0; i < operands.size(); ++i) {
    auto id = (int32_t)fn.values.size();
    fn.values.push_back(operands[i].type);
    fn.inputs.push_back(id);
    fn.inputNames.push_back("in" + std::to_string(i));
    one.operands.push_back(id);
  }
  for (size_t i = 0; i < resultTypes.size(); ++i) {
    auto id = (int32_t)fn.values.size();
    fn.values.push_back(resultTypes[i]);
    fn.outputs.push_back(id);
    fn.outputNames.push_back("out" + std::to_string(i));
    one.results.push_back(id);
  }
  fn.ops.push_back(std::move(one));
  return runFunction(fn, operands, results, error);
}

bool isSupportedOp(const std::string &name) { return rt::isSupportedOp(name); }

} // namespace tc::reference
