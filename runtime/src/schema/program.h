//===- program.h - the op-level program an artifact carries -----*- C++ -*-===//
//
// The contract between the compiler and the runtime. The compiler lowers a
// tc-dialect function into a `Function` (one `Op` per tc op, named exactly as
// the MLIR op, "tc.add", with its attributes by their ODS names) and writes it
// into the artifact; the CPU reference executor interprets it. Nothing here
// depends on LLVM or MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_SCHEMA_PROGRAM_H
#define TC_RUNTIME_SCHEMA_PROGRAM_H

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/src/base/dtype.h"
#include "runtime/src/base/status.h"

namespace tc::rt {

/// The device-only entry "shadow:<p>" holds parameter <p> (f32) cast to the
/// entry's bf16 or f16 type, round to nearest even (tc-shadow-parameter-casts,
/// on for GPU targets): the device functions read it
/// where the reference program casts <p>, and those that update <p> update it
/// ("update:shadow:<p>"). The CUDA executor fills it from <p> when it makes it
/// and after every setEntry of <p>, and refuses a setEntry of it, so it
/// always equals <p> cast. Never in the parameter table or a checkpoint.
inline constexpr char kShadowPrefix[] = "shadow:";

/// The entry whose 16-bit copy `name` names ("shadow:<p>" -> "<p>"), or an
/// empty view when `name` does not start with kShadowPrefix. Whether <p> is
/// an f32 entry of as many elements is the caller's check.
inline std::string_view shadowSourceOf(std::string_view name) {
  constexpr std::string_view prefix = kShadowPrefix;
  return name.substr(0, prefix.size()) == prefix ? name.substr(prefix.size()) : std::string_view();
}

/// A statically shaped tensor type. Rank 0 is a scalar.
struct TensorType {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t numElements() const;
  bool operator==(const TensorType &o) const {
    return dtype == o.dtype && shape == o.shape;
  }
  bool operator!=(const TensorType &o) const { return !(*this == o); }
};

/// A tensor on the host in its storage format: `data` holds numElements()
/// elements of `type.dtype`, row-major, little-endian, each of
/// dtypeStorageBytes(dtype) bytes (sub-byte types such as f4E2M1FN use one
/// byte per element, value in the low bits; i1 is one byte, 0 or 1).
struct HostTensor {
  TensorType type;
  std::vector<uint8_t> data;
};

/// "2x16", or "scalar" for rank 0.
std::string shapeToString(const std::vector<int64_t> &shape);
/// "f32 2x16", "i64 scalar".
std::string typeToString(const TensorType &type);

/// Element count of `shape` with checks: every dim >= 0 and the product at
/// most 2^62 (so that byte sizes fit in int64 too). For untrusted shapes.
Status checkedNumElements(const std::vector<int64_t> &shape, int64_t *out);

/// Bytes of a tensor of `type` in storage format (numElements * element size).
/// The shape must have passed checkedNumElements.
int64_t storageBytes(const TensorType &type);

/// Checks that t.data has exactly the bytes its type needs.
Status checkHostTensor(const HostTensor &t, const std::string &what);

/// An op attribute. Integers and bools are Int; enumerations are String.
struct Attr {
  enum class Kind : uint8_t { Int = 0, Float = 1, String = 2, Ints = 3, Floats = 4, Tensor = 5 };
  Kind kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  HostTensor tensor;
};

/// One op. Operands and results index Function::values.
struct Op {
  std::string name; // "tc.add"
  std::vector<int32_t> operands;
  std::vector<int32_t> results;
  std::map<std::string, Attr> attrs;
};

/// A straight-line function in SSA form, ops in execution order.
struct Function {
  std::string name; // "infer", "eval_step", "train_step"
  std::vector<TensorType> values; // type of every SSA value
  std::vector<int32_t> inputs;    // value ids of the arguments
  std::vector<std::string> inputNames;
  std::vector<int32_t> outputs;   // value ids returned
  std::vector<std::string> outputNames;
  std::vector<Op> ops;
};

/// What an entry of the parameter/state table is. The numbers are part of the
/// artifact format.
enum class ParamKind : uint8_t {
  Parameter = 0,      // a model weight (an ONNX initializer), trainable or frozen
  Buffer = 1,         // model state that is not a weight (masks, rotary tables)
  OptimizerState = 2, // created by the optimizer pass: "exp_avg:<param>", ...
};

/// How an entry gets its first value. The numbers are part of the format.
enum class ParamInit : uint8_t {
  Data = 0,    // the bytes in Artifact::weights (absent: hasData is false)
  Zeros = 1,   // all zeros (optimizer state, biases); hasData is false
  Ones = 2,    // all ones (norm scales); hasData is false
  Normal = 3,  // N(initArgs[0] = mean, initArgs[1] = std); hasData is false
  Uniform = 4, // U[initArgs[0] = low, initArgs[1] = high); hasData is false
};

const char *paramInitName(ParamInit i); // "data", "zeros", "ones", "normal", "uniform"

/// One entry of the parameter/state table. Its bytes are
/// Artifact::weights[offset, offset + bytes) in storage format, or absent
/// (hasData == false) for a model compiled without weights or for an entry
/// whose initialiser is not Data.
struct Parameter {
  std::string name;
  TensorType type;
  bool trainable = false;
  bool hasData = true;
  ParamKind kind = ParamKind::Parameter;
  ParamInit init = ParamInit::Data;
  /// The initialiser's arguments: Normal (mean, std), Uniform (low, high);
  /// zero otherwise. The values are drawn by init_rng.h (see init.h).
  double initArgs[2] = {0, 0};
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

/// A GPU kernel the compiler generated: CUDA C++ source, PTX for the
/// target's virtual architecture and the cubin (SASS) for `arch`.
struct KernelBinary {
  std::string name;   // the __global__ symbol, "tc_fusion_<hash>"
  std::string arch;   // "sm_90", "sm_120a"
  std::string source; // CUDA C++ translation unit
  std::string ptx;
  std::vector<uint8_t> cubin;
};

/// A buffer of a device program: where its bytes live. Arena buffers are
/// `bytes` at byte `offset` of the step's arena; Param buffers are the
/// parameter-table entry `name` (offset into it: a view); Const buffers hold
/// `value` (offset into it); Input/Output buffers are argument/result
/// `index` of the function (offset into it). Results live where the ops
/// wrote them (DeviceFunction::outputs); Output is for a caller-provided
/// result buffer.
struct DeviceBuffer {
  enum class Space : uint8_t { Arena = 0, Param = 1, Const = 2, Input = 3, Output = 4 };
  Space space = Space::Arena;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  TensorType type;
  std::string name; // Param: parameter name; Input/Output: the tc.name
  int32_t index = -1; // Input/Output: position; Const: index into DeviceFunction::consts
};

const char *deviceSpaceName(DeviceBuffer::Space s); // "arena", "param", ...

/// One device op in stream order. `kind` is "launch" (`name` a kernel of
/// Artifact::kernels; attrs "symbol" (the tcx.kernel), "kernel_kind",
/// "elements", and "missing_kernel" = 1 when codegen made none), "library"
/// (`name` a runtime launcher), "matmul", "copy", "fill", "record" or "wait"
/// (attrs "stream" and "event", an event number local to the function).
/// `ins`/`outs` index DeviceFunction::buffers.
///
/// A launch of a generated kernel (no "missing_kernel") carries every kernel
/// argument, so a runtime launches it without the compiler: `outs` are the
/// kernel's result pointers in result order and `ins` its operand pointers
/// in operand order (one per operand, a buffer may repeat), and the kernel
/// signature (compiler/codegen/cuda/CudaCodegen.h) takes outs first, then
/// ins, then "n" (Int, `long long n`), then "meta" (Ints, K >= 1 values,
/// passed by value as `struct { long long v[K]; }`). "grid" and "block"
/// (Int) are the 1-D launch configuration (no dynamic shared memory).
struct DeviceOp {
  std::string kind;
  std::string name;
  std::vector<int32_t> ins, outs;
  std::map<std::string, Attr> attrs;
};

/// A planned GPU step: straight-line ops on buffers; transient buffers are
/// views of one arena of `arenaBytes` bytes.
struct DeviceFunction {
  std::string name;
  uint64_t arenaBytes = 0;
  std::vector<DeviceBuffer> buffers;
  std::vector<HostTensor> consts; // the data of Const buffers
  std::vector<DeviceOp> ops;
  std::vector<std::string> inputNames, outputNames;
  /// Per result: the buffer that holds it when the step ends (an arena view,
  /// a parameter updated in place, an input or an Output buffer).
  std::vector<int32_t> outputs;
};

/// Everything one artifact file holds. See artifact.h for the file format.
struct Artifact {
  /// 2: parameter entries carry a kind and an initialiser (training).
  /// 3: initialisers ones/normal/uniform with two f64 arguments per entry.
  static constexpr uint32_t kFormatVersion = 4;
  uint32_t formatVersion = kFormatVersion;
  std::string target;   // "cpu", "sm_90", "sm_120a"
  std::string producer; // "tc-compile <version>"
  std::vector<Function> functions;
  std::vector<Parameter> params;
  std::vector<uint8_t> weights;
  std::map<std::string, std::string> reports; // "memory", "precision", ...
  std::vector<KernelBinary> kernels;           // GPU targets only
  std::vector<DeviceFunction> deviceFunctions; // GPU targets only

  const Function *findFunction(const std::string &name) const;
  /// The device function `name`; "eval_step" is "infer" when the device
  /// program has no function of its own under that name.
  const DeviceFunction *findDeviceFunction(const std::string &name) const;
  const Parameter *findParam(const std::string &name) const;
};

} // namespace tc::rt

#endif // TC_RUNTIME_SCHEMA_PROGRAM_H
