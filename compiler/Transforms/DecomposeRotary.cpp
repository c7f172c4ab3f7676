//===- DecomposeRotary.cpp - tc-decompose-rotary ----------------------------===//
//
// tc.rotary written out as the ops it is made of, for the GPU pipeline (no
// rotary kernel there yet). See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace tc {
#define GEN_PASS_DEF_TCDECOMPOSEROTARY
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;
using namespace tc;

namespace {

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

struct Builder {
  OpBuilder &b;
  Location loc;
  Value slice(Value x, ArrayRef<int64_t> starts, ArrayRef<int64_t> sizes) {
    auto t = typeOf(x);
    SmallVector<int64_t> strides(t.getRank(), 1);
    return SliceOp::create(b, loc, RankedTensorType::get(sizes, t.getElementType()), x,
                           b.getDenseI64ArrayAttr(starts), b.getDenseI64ArrayAttr(strides));
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    return ReshapeOp::create(b, loc, RankedTensorType::get(shape, typeOf(x).getElementType()), x);
  }
  template <typename OpTy> Value bin(Value x, Value y) {
    // x has the full shape; y broadcasts (a [B, 1, S, ..] table).
    return OpTy::create(b, loc, x.getType(), x, y);
  }
};

void decompose(RotaryOp op) {
  OpBuilder b(op);
  Builder k{b, op.getLoc()};
  auto xt = typeOf(op.getInput());
  int64_t B = xt.getDimSize(0), H = xt.getDimSize(1), S = xt.getDimSize(2), D = xt.getDimSize(3);
  int64_t half = typeOf(op.getCos()).getDimSize(2), R = 2 * half;
  Value x = op.getInput();
  Value rot = R == D ? x : k.slice(x, {0, 0, 0, 0}, {B, H, S, R});
  Value x1, x2, c, s;
  if (op.getInterleaved()) {
    Value pairs = k.reshape(rot, {B, H, S, half, 2});
    x1 = k.slice(pairs, {0, 0, 0, 0, 0}, {B, H, S, half, 1});
    x2 = k.slice(pairs, {0, 0, 0, 0, 1}, {B, H, S, half, 1});
    c = k.reshape(op.getCos(), {B, 1, S, half, 1});
    s = k.reshape(op.getSin(), {B, 1, S, half, 1});
  } else {
    x1 = k.slice(rot, {0, 0, 0, 0}, {B, H, S, half});
    x2 = k.slice(rot, {0, 0, 0, half}, {B, H, S, half});
    c = k.reshape(op.getCos(), {B, 1, S, half});
    s = k.reshape(op.getSin(), {B, 1, S, half});
  }
  Value y1 = k.bin<SubOp>(k.bin<MulOp>(x1, c), k.bin<MulOp>(x2, s));
  Value y2 = k.bin<AddOp>(k.bin<MulOp>(x1, s), k.bin<MulOp>(x2, c));
  Value y;
  if (op.getInterleaved()) {
    auto pairType = RankedTensorType::get({B, H, S, half, 2}, xt.getElementType());
    y = ConcatOp::create(b, op.getLoc(), pairType, ValueRange{y1, y2}, b.getI64IntegerAttr(4));
    y = k.reshape(y, {B, H, S, R});
  } else {
    auto rotType = RankedTensorType::get({B, H, S, R}, xt.getElementType());
    y = ConcatOp::create(b, op.getLoc(), rotType, ValueRange{y1, y2}, b.getI64IntegerAttr(3));
  }
  if (R < D)
    y = ConcatOp::create(b, op.getLoc(), xt, ValueRange{y, k.slice(x, {0, 0, 0, R}, {B, H, S, D - R})},
                         b.getI64IntegerAttr(3));
  op.getResult().replaceAllUsesWith(y);
  op.erase();
}

struct DecomposeRotaryPass : tc::impl::TcDecomposeRotaryBase<DecomposeRotaryPass> {
  void runOnOperation() override {
    SmallVector<RotaryOp> ops;
    getOperation().walk([&](RotaryOp op) { ops.push_back(op); });
    for (RotaryOp op : ops)
      decompose(op);
  }
};

} // namespace
