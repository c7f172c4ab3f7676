//===- library_calls.cpp - device "library" ops bound to launchers --------===//
//
// See library_calls.h. The ABI table says which pointer is which operand;
// each thunk below reads its operands by name, its sizes from the attributes
// and the dtypes from the buffers, and returns the closure that launches.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/library_calls.h"

#include <cmath>
#include <map>

#include "runtime/src/base/host_tensor.h"
#include "runtime/src/cuda/device.h"
#include "runtime/src/cuda/kernels/kernels.h"
#include "runtime/src/cuda/op_attrs.h"
#include "runtime/src/schema/library_abi.h"

namespace tc::rt::cuda {
namespace {

/// A call laid out by the ABI: its pointers and types by operand name.
struct Call {
  const LibraryCallArgs &args;
  const LibraryCallee &callee;
  LibraryLayout layout;
  OpAttrs a;
  bool capturable = true;

  /// Position of operand `name` among `ptrs`, or -1 when the call does not give it.
  static int position(const std::vector<LibraryOperandSpec> &specs, const std::vector<int> &pos,
                      const char *name) {
    for (size_t i = 0; i < specs.size(); ++i)
      if (std::string(specs[i].name) == name)
        return pos[i];
    return -1;
  }
  int inPos(const char *name) const { return position(callee.inputs, layout.inputs, name); }
  int outPos(const char *name) const { return position(callee.outputs, layout.outputs, name); }
  /// The pointer of input / output `name`; nullptr when not given.
  void *in(const char *name) const {
    int i = inPos(name);
    return i < 0 ? nullptr : args.ins[i];
  }
  void *out(const char *name) const {
    int i = outPos(name);
    return i < 0 ? nullptr : args.outs[i];
  }
  /// The dtype of input / output `name`, which the call gives.
  DType inType(const char *name) const { return args.inTypes[inPos(name)].dtype; }
  DType outType(const char *name) const { return args.outTypes[outPos(name)].dtype; }
  bool has(bool output, const char *name) const {
    return (output ? outPos(name) : inPos(name)) >= 0;
  }
  int64_t integer(const char *name) const { return a.integerOr(name, 0); }
  bool flag(const char *name) const { return a.integerOr(name, 0) != 0; }
  const std::string &name() const { return args.op.name; }
};

using Launch = std::function<Status()>;
using Thunk = Status (*)(Call &c, cudaStream_t s, Launch *out);

Status softmax(Call &c, cudaStream_t s, Launch *out) {
  DType dt = c.inType("x");
  TC_RETURN_IF_ERROR(checkGpuDtype(c.a.where, dt));
  int64_t rows = c.integer("rows"), cols = c.integer("cols");
  bool log = c.flag("log");
  void *x = c.in("x"), *y = c.out("y");
  *out = [=]() { return softmaxForward(dt, x, y, rows, cols, log, s); };
  return Status::ok();
}

/// The "amax" output of a call with has_amax (f32 [1], taken for the
/// quantize_fp8 of what the call writes), or null without it.
Status amaxOutput(Call &c, float **amax) {
  *amax = static_cast<float *>(c.out("amax"));
  if (*amax && c.outType("amax") != DType::F32)
    return invalidArgument(c.a.where + ": \"" + c.name() + "\" writes an f32 amax, got " +
                           dtypeName(c.outType("amax")));
  return Status::ok();
}

/// layer_norm_fwd and rms_norm_fwd.
Status normForward(Call &c, cudaStream_t s, Launch *out) {
  bool ln = c.name() == "layer_norm_fwd";
  DType dt = c.inType("x");
  TC_RETURN_IF_ERROR(checkGpuDtype(c.a.where, dt));
  // The parameters may be stored wider than the rows (bf16 rows, f32 weights).
  DType pt = c.has(false, "weight") ? c.inType("weight")
             : c.has(false, "bias") ? c.inType("bias")
                                    : dt;
  if (c.outType("y") != dt)
    return invalidArgument(c.a.where + ": \"" + c.name() + "\" writes y in the type of x");
  int64_t rows = c.integer("rows"), cols = c.integer("cols");
  float eps = static_cast<float>(c.a.realOr("eps", 1e-5));
  void *x = c.in("x"), *w = c.in("weight"), *bias = c.in("bias"), *y = c.out("y");
  float *rstd = static_cast<float *>(c.out("rstd"));
  float *amax = nullptr;
  TC_RETURN_IF_ERROR(amaxOutput(c, &amax));
  if (ln) {
    float *mean = static_cast<float *>(c.out("mean"));
    *out = [=]() {
      return layerNormForward(dt, pt, x, w, bias, y, mean, rstd, rows, cols, eps, s, amax);
    };
  } else {
    *out = [=]() { return rmsNormForward(dt, pt, x, w, y, rstd, rows, cols, eps, s, amax); };
  }
  return Status::ok();
}

/// layer_norm_bwd and rms_norm_bwd.
Status normBackward(Call &c, cudaStream_t s, Launch *out) {
  bool ln = c.name() == "layer_norm_bwd";
  DType dt = c.inType("x");
  TC_RETURN_IF_ERROR(checkGpuDtype(c.a.where, dt));
  if (c.inType("dy") != dt || c.outType("dx") != dt)
    return invalidArgument(c.a.where + ": \"" + c.name() + "\" needs dy, x and dx of one type");
  // Parameter (gradient) storage: the weight's, else dbias's, else the rows'.
  DType pt = c.has(false, "weight") ? c.inType("weight")
             : c.has(true, "dbias") ? c.outType("dbias")
                                    : dt;
  int64_t rows = c.integer("rows"), cols = c.integer("cols");
  void *dy = c.in("dy"), *x = c.in("x"), *w = c.in("weight");
  const float *mean = static_cast<const float *>(c.in("mean"));
  const float *rstd = static_cast<const float *>(c.in("rstd"));
  void *dx = c.out("dx"), *dw = c.out("dweight"), *db = c.out("dbias");
  void *scratch = c.out("scratch");
  // dresidual (has_dresidual): added to dx, of dx's type; col_sum
  // (has_col_sum): dx's column sums, of dx's type.
  const void *dres = c.has(false, "dresidual") ? c.in("dresidual") : nullptr;
  if (dres && c.inType("dresidual") != dt)
    return invalidArgument(c.a.where + ": \"" + c.name() + "\" needs dresidual of dx's type");
  void *colSum = c.has(true, "col_sum") ? c.out("col_sum") : nullptr;
  if (colSum && c.outType("col_sum") != dt)
    return invalidArgument(c.a.where + ": \"" + c.name() + "\" needs col_sum of dx's type");
  if (ln)
    *out = [=]() {
      return layerNormBackward(dt, pt, dy, x, w, mean, rstd, dx, dw, db, scratch, rows, cols,
                               /*accumulate=*/false, s, dres, colSum);
    };
  else
    *out = [=]() {
      return rmsNormBackward(dt, pt, dy, x, w, rstd, dx, dw, scratch, rows, cols,
                             /*accumulate=*/false, s, dres, colSum);
    };
  return Status::ok();
}

/// cross_entropy_fwd, cross_entropy_bwd and cross_entropy_fwd_bwd.
Status crossEntropy(Call &c, cudaStream_t s, Launch *out) {
  DType dt = c.inType("logits");
  DType lt = c.inType("labels");
  TC_RETURN_IF_ERROR(checkGpuDtype(c.a.where, dt));
  int64_t rows = c.integer("rows"), cols = c.integer("cols");
  void *logits = c.in("logits"), *labels = c.in("labels");
  float *loss = static_cast<float *>(c.out("loss"));
  void *dlogits = c.out("dlogits");
  void *scratch = c.out("scratch");
  int64_t ignore = c.a.integerOr("ignore_index", -100);
  float scale = static_cast<float>(c.a.realOr("grad_scale", 1.0));
  if (int g = c.inPos("grad"); g >= 0) {
    // The incoming gradient is a runtime scalar: read it (a host sync, so
    // this step cannot be a CUDA graph).
    const void *grad = c.args.ins[g];
    TensorType gt = c.args.inTypes[g];
    if (gt.numElements() != 1)
      return unimplemented(c.a.where + ": a non-scalar incoming loss gradient " +
                           typeToString(gt));
    c.capturable = false;
    *out = [=]() -> Status {
      HostTensor h;
      TC_RETURN_IF_ERROR(copyToHost(grad, gt, &h, s));
      float sc = static_cast<float>(loadAsDouble(h.data.data(), gt.dtype, 0));
      return crossEntropyForwardBackward(dt, logits, lt, labels, nullptr, loss, dlogits, scratch,
                                         rows, cols, ignore, sc, s);
    };
    return Status::ok();
  }
  *out = [=]() {
    return crossEntropyForwardBackward(dt, logits, lt, labels, nullptr, loss, dlogits, scratch,
                                       rows, cols, ignore, scale, s);
  };
  return Status::ok();
}

/// attention_fwd and attention_bwd.
Status attention(Call &c, cudaStream_t s, Launch *out) {
  DType dt = c.inType("q");
  TC_RETURN_IF_ERROR(checkGpuDtype(c.a.where, dt));
  AttentionShape sh;
  sh.batch = c.integer("batch");
  sh.heads = c.integer("heads");
  sh.kvHeads = c.integer("kv_heads");
  sh.tq = c.integer("tq");
  sh.tk = c.integer("tk");
  sh.d = c.integer("d");
  sh.dv = c.integer("dv");
  float scale = static_cast<float>(c.a.realOr("scale", 0.0));
  bool causal = c.flag("causal");
  AttentionKernels kernels = c.flag("wgmma") ? AttentionKernels::Wgmma : AttentionKernels::Cudnn;
  // Per operand [batch, head, row] element strides ("q_strides", ...;
  // contiguous when absent): the compiler reads q/k/v out of [B, T, H, D]
  // projections and writes results into their transposes in place.
  // The [q, k, v, out] strides ("q_strides", ...) or, with prefix "d", those
  // of their gradients ("dq_strides", ...; "do_strides" for dout).
  auto strides = [&](const std::string &prefix, AttentionStrides st[4]) -> Status {
    const char *names[4] = {"q", "k", "v", "o"};
    const int64_t dims[4][3] = {{sh.heads, sh.tq, sh.d},
                                {sh.kvHeads, sh.tk, sh.d},
                                {sh.kvHeads, sh.tk, sh.dv},
                                {sh.heads, sh.tq, sh.dv}};
    for (int i = 0; i < 4; ++i) {
      std::string name = prefix + names[i] + "_strides";
      std::vector<int64_t> v;
      st[i] = contiguousAttentionStrides(dims[i][0], dims[i][1], dims[i][2]);
      if (!c.a.ints(name.c_str(), &v))
        continue;
      if (v.size() != 3)
        return invalidArgument(c.a.where + ": attribute '" + name + "' needs 3 strides, got " +
                               std::to_string(v.size()));
      st[i] = AttentionStrides{v[0], v[1], v[2]};
    }
    return Status::ok();
  };
  AttentionStrides st[4];
  TC_RETURN_IF_ERROR(strides("", st));
  AttentionStrides qs = st[0], ks = st[1], vs = st[2], os = st[3];
  void *q = c.in("q"), *k = c.in("k"), *v = c.in("v");
  float *amax = nullptr;
  TC_RETURN_IF_ERROR(amaxOutput(c, &amax));
  AttentionMask mask;
  if (c.has(false, "key_mask")) {
    DType mt = c.inType("key_mask");
    if (mt != DType::I1 && mt != DType::U8 && mt != DType::I8)
      return invalidArgument(c.a.where + ": \"" + c.name() +
                             "\": key_mask must be i1 (one byte per key), got " + dtypeName(mt));
    mask.keys = static_cast<const uint8_t *>(c.in("key_mask"));
  }
  double fill = c.a.realOr("mask_fill", -INFINITY);
  if (!validAttentionMaskFill(fill))
    return invalidArgument(c.a.where + ": \"" + c.name() + "\": mask_fill must be -inf or at most " +
                           std::to_string(kAttentionMaxFiniteFill) + ", got " +
                           std::to_string(fill));
  mask.fill = static_cast<float>(fill);
  if (c.name() == "attention_fwd") {
    void *o = c.out("out");
    float *lse = static_cast<float *>(c.out("lse"));
    *out = [=]() {
      return attentionForward(dt, sh, q, qs, k, ks, v, vs, o, os, lse, scale, causal, s, amax,
                              kernels, mask);
    };
    return Status::ok();
  }
  int amaxOf = static_cast<int>(c.a.integerOr("amax_of", 0));
  if (amax && !rt::validAmaxOf(amaxOf))
    return invalidArgument(c.a.where + ": \"attention_bwd\" with has_amax needs amax_of, a mask "
                           "of the gradients (1 dq, 2 dk, 4 dv), got " +
                           std::to_string(amaxOf));
  AttentionStrides dst[4];
  TC_RETURN_IF_ERROR(strides("d", dst));
  AttentionStrides dqs = dst[0], dks = dst[1], dvs = dst[2], dos = dst[3];
  void *o = c.in("out"), *dout = c.in("dout");
  const float *lse = static_cast<const float *>(c.in("lse"));
  void *dq = c.out("dq"), *dk = c.out("dk"), *dv = c.out("dv"), *scratch = c.out("scratch");
  // col_sum (has_col_sum): the gradients' column sums, of their type, dq's
  // at col_sum_offsets[0] (+ h d + c), dk's at [1], dv's at [2]; with
  // col_sum_head_stride (heads interleaved, AttentionGradSums) at + h stride + c.
  AttentionGradSums sums;
  if (c.has(true, "col_sum")) {
    sums.out = c.out("col_sum");
    if (c.outType("col_sum") != dt)
      return invalidArgument(c.a.where +
                             ": \"attention_bwd\" needs col_sum of the gradients' type");
    std::vector<int64_t> off;
    if (!c.a.ints("col_sum_offsets", &off) || off.size() != 3)
      return invalidArgument(c.a.where + ": \"attention_bwd\" with has_col_sum needs "
                                         "col_sum_offsets, 3 offsets (dq, dk, dv)");
    int64_t cols = c.args.outTypes[c.outPos("col_sum")].numElements();
    sums.headStride = c.a.integerOr("col_sum_head_stride", 0);
    if (sums.headStride < 0 || sums.headStride > cols ||
        (sums.headStride && sh.heads != sh.kvHeads))
      return invalidArgument(c.a.where + ": \"attention_bwd\": col_sum_head_stride " +
                             std::to_string(sums.headStride) + " must be 0 or at most col_sum's " +
                             std::to_string(cols) + " with as many query as key / value heads");
    // The columns past a gradient's offset that its sums reach.
    const int64_t hs = sums.headStride, lastHead = std::max<int64_t>(sh.heads - 1, 0);
    const int64_t widths[3] = {hs ? lastHead * hs + sh.d : sh.heads * sh.d,
                               hs ? lastHead * hs + sh.d : sh.kvHeads * sh.d,
                               hs ? lastHead * hs + sh.dv : sh.kvHeads * sh.dv};
    for (int i = 0; i < 3; ++i) {
      if (off[i] < 0 || off[i] + widths[i] > cols)
        return invalidArgument(c.a.where + ": \"attention_bwd\": col_sum_offsets[" +
                               std::to_string(i) + "] = " + std::to_string(off[i]) + " puts " +
                               std::to_string(widths[i]) + " sums past col_sum's " +
                               std::to_string(cols));
      sums.offsets[i] = off[i];
    }
  }
  // rot_cos / rot_sin (has_rotary): the backward's rotary tables [batch, t,
  // half] of the gradients' type; rotary_of: the gradients stored rotated.
  AttentionGradRotary rotary;
  if (c.has(false, "rot_cos")) {
    rotary.of = static_cast<int>(c.a.integerOr("rotary_of", 0));
    if (rotary.of < 1 || rotary.of > 3)
      return invalidArgument(c.a.where +
                             ": \"attention_bwd\" with has_rotary needs rotary_of, "
                             "1 (dq), 2 (dk) or 3 (both), got " +
                             std::to_string(rotary.of));
    const TensorType &ct = c.args.inTypes[c.inPos("rot_cos")];
    const TensorType &st2 = c.args.inTypes[c.inPos("rot_sin")];
    const int64_t t = rotary.of & 1 ? sh.tq : sh.tk;
    if (ct.dtype != dt || st2.dtype != dt || ct.shape != st2.shape || ct.shape.size() != 3 ||
        ct.shape[0] != sh.batch || ct.shape[1] != t || ((rotary.of & 2) && sh.tk != t) ||
        ct.shape[2] <= 0 || 2 * ct.shape[2] > sh.d)
      return invalidArgument(
          c.a.where + ": \"attention_bwd\": rot_cos / rot_sin must both be [" +
          std::to_string(sh.batch) + ", " + std::to_string(t) +
          ", half] of the gradients' type with 0 < 2 half <= d = " + std::to_string(sh.d) +
          ", got " + typeToString(ct) + " and " + typeToString(st2));
    if (amax)
      return invalidArgument(c.a.where + ": \"attention_bwd\": has_rotary with has_amax is not "
                                         "supported");
    rotary.cos = c.in("rot_cos"), rotary.sin = c.in("rot_sin");
    rotary.half = ct.shape[2];
  }
  *out = [=]() {
    return attentionBackward(dt, sh, q, qs, k, ks, v, vs, o, os, dout, dos, lse, dq, dqs, dk, dks,
                             dv, dvs, scratch, scale, causal, s, amax, amaxOf, kernels, mask, sums,
                             rotary);
  };
  return Status::ok();
}

Status embeddingFwd(Call &c, cudaStream_t s, Launch *out) {
  DType dt = c.inType("table"), it = c.inType("ids");
  TC_RETURN_IF_ERROR(checkGpuDtype(c.a.where, dt));
  int64_t count = c.integer("count"), vocab = c.integer("vocab"), dim = c.integer("dim");
  void *table = c.in("table"), *ids = c.in("ids"), *y = c.out("out");
  *out = [=]() { return embeddingForward(dt, table, it, ids, y, count, vocab, dim, s); };
  return Status::ok();
}

Status embeddingBwd(Call &c, cudaStream_t s, Launch *out) {
  DType dt = c.outType("dtable"), it = c.inType("ids");
  TC_RETURN_IF_ERROR(checkGpuDtype(c.a.where, dt));
  int64_t count = c.integer("count"), vocab = c.integer("vocab"), dim = c.integer("dim");
  bool acc = c.flag("accumulate");
  void *dout = c.in("dout"), *ids = c.in("ids"), *dtable = c.out("dtable");
  void *scratch = c.out("scratch");
  *out = [=]() {
    return embeddingBackward(dt, dout, it, ids, dtable, scratch, count, vocab, dim, acc, s);
  };
  return Status::ok();
}

/// quantize_fp8: the amax pass into the scratch, then the quantize pass
/// that reads it (both on the device: capturable); with has_amax, the
/// quantize pass alone, reading the amax the producing kernel took.
Status quantizeFp8Call(Call &c, cudaStream_t s, Launch *out) {
  DType dt = c.inType("x"), qt = c.outType("q");
  TC_RETURN_IF_ERROR(checkGpuDtype(c.a.where, dt));
  if (c.outType("scale_inv") != DType::F32)
    return invalidArgument(c.a.where + ": \"quantize_fp8\" writes f32 scale_inv, got " +
                           dtypeName(c.outType("scale_inv")));
  if (c.has(true, "q_t") && c.outType("q_t") != qt)
    return invalidArgument(c.a.where + ": \"quantize_fp8\" writes q_t in the type of q");
  int64_t rows = c.integer("rows"), cols = c.integer("cols");
  if (c.flag("row_scaling") && c.flag("col_scaling"))
    return invalidArgument(c.a.where + ": \"quantize_fp8\" scales per row or per column, not both");
  Fp8Scaling scaling = c.flag("row_scaling")   ? Fp8Scaling::Row
                       : c.flag("col_scaling") ? Fp8Scaling::Column
                                               : Fp8Scaling::Tensor;
  void *x = c.in("x"), *q = c.out("q"), *qT = c.out("q_t"), *colSum = c.out("col_sum");
  if (colSum && (scaling != Fp8Scaling::Tensor || c.outType("col_sum") != dt))
    return invalidArgument(c.a.where + ": \"quantize_fp8\" writes col_sum with per-tensor "
                           "scaling, in the type of x");
  float *scaleInv = static_cast<float *>(c.out("scale_inv"));
  const float *given = static_cast<const float *>(c.in("amax"));
  if (given && (scaling != Fp8Scaling::Tensor || c.inType("amax") != DType::F32))
    return invalidArgument(c.a.where + ": \"quantize_fp8\" reads a given amax (one f32) with "
                           "per-tensor scaling only");
  float *amax = static_cast<float *>(c.out("scratch"));
  // The column sums' partials follow the amaxes in the scratch.
  float *partial = colSum ? reinterpret_cast<float *>(static_cast<char *>(c.out("scratch")) +
                                                      fp8QuantizeScratchBytes(1))
                          : nullptr;
  *out = [=]() {
    if (given)
      return quantizeFp8(dt, x, given, qt, q, qT, scaleInv, rows, cols, scaling, s, colSum,
                         partial);
    TC_RETURN_IF_ERROR(amaxFp8(dt, x, amax, rows, cols, scaling, s));
    return quantizeFp8(dt, x, amax, qt, q, qT, scaleInv, rows, cols, scaling, s, colSum,
                       partial);
  };
  return Status::ok();
}

/// quantize_fp8_delayed: q, q_t, amax and the saturation count in one pass.
Status quantizeFp8DelayedCall(Call &c, cudaStream_t s, Launch *out) {
  DType dt = c.inType("x"), qt = c.outType("q");
  TC_RETURN_IF_ERROR(checkGpuDtype(c.a.where, dt));
  if (c.inType("scale") != DType::F32 || c.outType("amax") != DType::F32 ||
      c.outType("saturated") != DType::F32)
    return invalidArgument(c.a.where + ": \"quantize_fp8_delayed\" reads an f32 scale and "
                                       "writes f32 amax and saturated");
  if (c.has(true, "q_t") && c.outType("q_t") != qt)
    return invalidArgument(c.a.where + ": \"quantize_fp8_delayed\" writes q_t in the type of q");
  int64_t rows = c.integer("rows"), cols = c.integer("cols");
  const void *x = c.in("x");
  const float *scale = static_cast<const float *>(c.in("scale"));
  void *q = c.out("q"), *qT = c.out("q_t");
  float *amax = static_cast<float *>(c.out("amax"));
  float *saturated = static_cast<float *>(c.out("saturated"));
  *out = [=]() {
    return quantizeFp8Delayed(dt, x, scale, qt, q, qT, nullptr, amax, saturated, rows, cols, s);
  };
  return Status::ok();
}

/// fp8_scale_update: delayed scaling's next scale, 1 / scale and next
/// amax history of one tensor.
Status fp8ScaleUpdateCall(Call &c, cudaStream_t s, Launch *out) {
  const bool hist = c.has(false, "history");
  if (hist != c.has(true, "next_history"))
    return invalidArgument(c.a.where + ": \"fp8_scale_update\" reads history exactly when it "
                                       "writes next_history");
  for (const char *n : {"amax", "scale", "history"})
    if (c.has(false, n) && c.inType(n) != DType::F32)
      return invalidArgument(c.a.where + ": \"fp8_scale_update\" reads f32 " + n);
  for (const char *n : {"next_scale", "scale_inv", "next_history"})
    if (c.has(true, n) && c.outType(n) != DType::F32)
      return invalidArgument(c.a.where + ": \"fp8_scale_update\" writes f32 " + n);
  int64_t len = 0;
  if (hist) {
    len = c.args.inTypes[c.inPos("history")].numElements();
    if (c.args.outTypes[c.outPos("next_history")].numElements() != len)
      return invalidArgument(c.a.where +
                             ": \"fp8_scale_update\" writes next_history of history's size");
  }
  const double fmax = c.a.realOr("fmax", 0.0);
  const bool mostRecent = c.flag("most_recent");
  const float *amax = static_cast<const float *>(c.in("amax"));
  const float *scale = static_cast<const float *>(c.in("scale"));
  const float *history = static_cast<const float *>(c.in("history"));
  float *nextScale = static_cast<float *>(c.out("next_scale"));
  float *scaleInv = static_cast<float *>(c.out("scale_inv"));
  float *nextHistory = static_cast<float *>(c.out("next_history"));
  *out = [=]() {
    return fp8ScaleUpdate(amax, scale, history, len, static_cast<float>(fmax), mostRecent,
                          nextScale, scaleInv, nextHistory, s);
  };
  return Status::ok();
}

/// The types of a block quantize call (quantize_fp8_block, quantize_mx): x
/// of the GPU's float types, scale_inv and scale_gemm of `scale`, q_t (when
/// given) of q's type.
Status checkBlockQuantizeTypes(Call &c, const char *callee, DType scale) {
  TC_RETURN_IF_ERROR(checkGpuDtype(c.a.where, c.inType("x")));
  for (const char *f : {"scale_inv", "scale_gemm"})
    if (c.outType(f) != scale)
      return invalidArgument(c.a.where + ": \"" + callee + "\" writes " + dtypeName(scale) + " " +
                             f + ", got " + dtypeName(c.outType(f)));
  if (c.has(true, "q_t") && c.outType("q_t") != c.outType("q"))
    return invalidArgument(c.a.where + ": \"" + callee + "\" writes q_t in the type of q");
  return Status::ok();
}

/// quantize_fp8_block: one pass (the tile's amaxes in shared memory).
Status quantizeFp8BlockCall(Call &c, cudaStream_t s, Launch *out) {
  DType dt = c.inType("x"), qt = c.outType("q");
  TC_RETURN_IF_ERROR(checkBlockQuantizeTypes(c, "quantize_fp8_block", DType::F32));
  int64_t rows = c.integer("rows"), cols = c.integer("cols"), b = c.integer("blocks");
  if (b < 0 || b > 2)
    return invalidArgument(c.a.where +
                           ": \"quantize_fp8_block\" blocks must be 0 (1x128), 1 "
                           "(128x1) or 2 (128x128), got " +
                           std::to_string(b));
  auto blocks = static_cast<Fp8Blocks>(b);
  bool pow2 = c.flag("pow2");
  void *x = c.in("x"), *q = c.out("q"), *qT = c.out("q_t");
  auto *scaleInv = static_cast<float *>(c.out("scale_inv"));
  auto *gemm = static_cast<float *>(c.out("scale_gemm"));
  auto *gemmT = static_cast<float *>(c.out("scale_gemm_t"));
  *out = [=]() {
    return quantizeFp8Blocks(dt, x, qt, q, qT, scaleInv, gemm, gemmT, rows, cols, blocks, pow2, s);
  };
  return Status::ok();
}

/// quantize_mx: one pass (the blocks' amaxes in registers and shuffles).
Status quantizeMxCall(Call &c, cudaStream_t s, Launch *out) {
  DType dt = c.inType("x"), qt = c.outType("q");
  TC_RETURN_IF_ERROR(checkBlockQuantizeTypes(c, "quantize_mx", DType::F8E8M0FNU));
  int64_t rows = c.integer("rows"), cols = c.integer("cols");
  bool alongRows = c.flag("along_rows");
  void *x = c.in("x"), *q = c.out("q"), *qT = c.out("q_t");
  auto *scaleInv = static_cast<uint8_t *>(c.out("scale_inv"));
  auto *gemm = static_cast<uint8_t *>(c.out("scale_gemm"));
  *out = [=]() { return quantizeMx(dt, x, qt, q, qT, scaleInv, gemm, rows, cols, alongRows, s); };
  return Status::ok();
}

/// The arguments fake_quantize and quantize_fp4 share: x [outer, len,
/// inner] with the blocks along len, the format and the rounding.
struct Fp4CallArgs {
  DType dt;
  int64_t outer, len, inner;
  Fp4Format format;
  bool blocks2d, stochastic;
  Fp4Stochastic sr;
};

Status fp4CallArgs(Call &c, const char *callee, Fp4CallArgs *out) {
  out->dt = c.inType("x");
  TC_RETURN_IF_ERROR(checkGpuDtype(c.a.where, out->dt));
  out->stochastic = c.flag("stochastic");
  if (out->stochastic && c.inType("step") != DType::F32)
    return invalidArgument(c.a.where + ": \"" + callee + "\" reads an f32 step, got " +
                           dtypeName(c.inType("step")));
  out->outer = c.integer("outer");
  out->len = c.integer("len");
  out->inner = c.integer("inner");
  out->format = c.flag("mxfp4") ? Fp4Format::Mxfp4 : Fp4Format::Nvfp4;
  out->blocks2d = c.flag("blocks2d");
  out->sr.seed = static_cast<uint64_t>(c.integer("seed"));
  out->sr.stream = static_cast<uint64_t>(c.integer("rng_stream"));
  out->sr.step = static_cast<const float *>(c.in("step"));
  return Status::ok();
}

/// fake_quantize: nvfp4's amax pass into the scratch, then the block pass
/// (the step of stochastic rounding read on the device: capturable).
Status fakeQuantizeCall(Call &c, cudaStream_t s, Launch *out) {
  Fp4CallArgs f;
  TC_RETURN_IF_ERROR(fp4CallArgs(c, "fake_quantize", &f));
  if (c.outType("y") != f.dt)
    return invalidArgument(c.a.where + ": \"fake_quantize\" writes y in the type of x");
  bool unscaled = c.flag("unscaled");
  if (unscaled && f.format != Fp4Format::Nvfp4)
    return invalidArgument(c.a.where + ": \"fake_quantize\" is unscaled for nvfp4 only");
  if (unscaled && c.outType("tensor_scale") != DType::F32)
    return invalidArgument(c.a.where + ": \"fake_quantize\" writes an f32 tensor_scale, got " +
                           dtypeName(c.outType("tensor_scale")));
  void *x = c.in("x"), *y = c.out("y");
  auto *tensor = static_cast<float *>(c.out("tensor_scale")); // null unless unscaled
  float *amax = static_cast<float *>(c.out("scratch"));
  *out = [=]() {
    return fakeQuantizeFp4(f.dt, x, y, amax, f.outer, f.len, f.inner, f.format, f.blocks2d,
                           f.stochastic ? &f.sr : nullptr, s, tensor);
  };
  return Status::ok();
}

/// quantize_fp4: fake_quantize's passes, written packed (codes, scales in
/// cuBLASLt's layout, nvfp4's tensor scale).
Status quantizeFp4Call(Call &c, cudaStream_t s, Launch *out) {
  Fp4CallArgs f;
  TC_RETURN_IF_ERROR(fp4CallArgs(c, "quantize_fp4", &f));
  bool nv = f.format == Fp4Format::Nvfp4;
  if (nv != c.flag("has_tensor_scale"))
    return invalidArgument(c.a.where + ": \"quantize_fp4\" writes a tensor scale for nvfp4 "
                                       "(has_tensor_scale) and none for mxfp4");
  if (nv && c.outType("tensor_scale") != DType::F32)
    return invalidArgument(c.a.where + ": \"quantize_fp4\" writes an f32 tensor_scale, got " +
                           dtypeName(c.outType("tensor_scale")));
  const void *x = c.in("x");
  auto *q = static_cast<uint8_t *>(c.out("q"));
  auto *scales = static_cast<uint8_t *>(c.out("scales"));
  auto *tensor = static_cast<float *>(c.out("tensor_scale"));
  float *amax = static_cast<float *>(c.out("scratch"));
  *out = [=]() {
    return quantizeFp4Packed(f.dt, x, q, scales, tensor, amax, f.outer, f.len, f.inner, f.format,
                             f.blocks2d, f.stochastic ? &f.sr : nullptr, s);
  };
  return Status::ok();
}

/// fp4_mma_gemm: tc's sm_120a block-scaled MXFP4 (or NVFP4) GEMM (Unimplemented, with
/// the reason, on other GPUs).
Status fp4MmaGemmCall(Call &c, cudaStream_t s, Launch *out) {
  if (c.outType("d") != DType::BF16)
    return invalidArgument(c.a.where + ": \"fp4_mma_gemm\" writes bf16 d, got " +
                           dtypeName(c.outType("d")));
  auto *a = static_cast<const uint8_t *>(c.in("a"));
  auto *sa = static_cast<const uint8_t *>(c.in("a_scales"));
  auto *b = static_cast<const uint8_t *>(c.in("b"));
  auto *sb = static_cast<const uint8_t *>(c.in("b_scales"));
  auto *alpha = static_cast<const float *>(c.in("alpha")); // null: 1
  void *d = c.out("d");
  int64_t m = c.integer("m"), n = c.integer("n"), k = c.integer("k");
  bool nv = c.flag("nvfp4");
  *out = [=]() { return fp4MmaGemm(a, sa, b, sb, alpha, d, m, n, k, nv, false, s); };
  return Status::ok();
}

/// The launcher thunk of each callee of the ABI that this runtime binds
/// (the lowering emits no other); the rest are refused as Unimplemented.
const std::map<std::string, Thunk> kThunks = {
    {"softmax_fwd", softmax},
    {"layer_norm_fwd", normForward},
    {"rms_norm_fwd", normForward},
    {"layer_norm_bwd", normBackward},
    {"rms_norm_bwd", normBackward},
    {"cross_entropy_fwd", crossEntropy},
    {"cross_entropy_bwd", crossEntropy},
    {"cross_entropy_fwd_bwd", crossEntropy},
    {"attention_fwd", attention},
    {"attention_bwd", attention},
    {"embedding_fwd", embeddingFwd},
    {"embedding_bwd", embeddingBwd},
    {"quantize_fp8", quantizeFp8Call},
    {"quantize_fp8_delayed", quantizeFp8DelayedCall},
    {"fp8_scale_update", fp8ScaleUpdateCall},
    {"quantize_fp8_block", quantizeFp8BlockCall},
    {"quantize_mx", quantizeMxCall},
    {"fake_quantize", fakeQuantizeCall},
    {"quantize_fp4", quantizeFp4Call},
    {"fp4_mma_gemm", fp4MmaGemmCall},
};

/// The ABI kind of a device-op attribute; false for kinds no callee takes.
bool abiKind(const Attr &a, LibraryAttrKind *out) {
  switch (a.kind) {
  case Attr::Kind::Int:
    *out = LibraryAttrKind::Int;
    return true;
  case Attr::Kind::Float:
    *out = LibraryAttrKind::Float;
    return true;
  case Attr::Kind::Ints:
    *out = LibraryAttrKind::Ints;
    return true;
  default:
    return false;
  }
}

} // namespace

Status bindLibraryCall(const LibraryCallArgs &call, cudaStream_t s, std::function<Status()> *out,
                       bool *capturable) {
  const std::string &name = call.op.name;
  const LibraryCallee *callee = findLibraryCallee(name);
  if (!callee)
    return unimplemented(call.where + ": the CUDA runtime has no library kernel \"" + name +
                         "\" (this tc-compile is newer than the runtime?)");
  auto refuse = [&](const std::string &why) {
    return invalidArgument(call.where + ": \"" + name + "\" " + why);
  };
  std::vector<LibraryAttrValue> given;
  LibraryInts ints;
  for (const auto &[key, attr] : call.op.attrs) {
    LibraryAttrKind kind;
    if (!abiKind(attr, &kind))
      continue;
    given.push_back({key, kind, kind == LibraryAttrKind::Int ? attr.i : 0});
    if (kind == LibraryAttrKind::Int)
      ints[key] = attr.i;
  }
  // Device ops carry attributes of the executor's own ("stream"): only the
  // callee's are checked.
  if (std::string e = checkLibraryAttrs(*callee, given, /*rejectUnknown=*/false); !e.empty())
    return refuse(e);
  Call c{call, *callee, {}, OpAttrs{call.op, call.where}};
  if (std::string e =
          layoutLibraryCall(*callee, ints, call.ins.size(), call.outs.size(), &c.layout);
      !e.empty())
    return refuse(e);
  if (callee->scratchBytes) {
    uint64_t need = callee->scratchBytes(ints);
    uint64_t have = static_cast<uint64_t>(storageBytes(call.outTypes[c.outPos("scratch")]));
    if (have < need)
      return refuse("scratch holds " + std::to_string(have) + " bytes, the launcher needs " +
                    std::to_string(need));
  }
  auto thunk = kThunks.find(name);
  if (thunk == kThunks.end())
    return unimplemented(call.where + ": the CUDA runtime binds no launcher to library kernel \"" +
                         name + "\"");
  TC_RETURN_IF_ERROR(thunk->second(c, s, out));
  *capturable = c.capturable;
  return Status::ok();
}

} // namespace tc::rt::cuda
