//===- PlanMemory.cpp - tcx-plan-memory ------------------------------------===//
//
// Gives every tcx.alloc of a straight-line function an offset in one arena.
// Liveness is program order (the step is straight-line and runs in order
// on stream 0; an op on another stream keeps its buffers live until stream
// 0 waits for it); placement is "greedy by size" with best fit (TFLite's
// and ONNX Runtime's planners do the same): the largest buffers are placed
// first, each in the smallest gap left by the already-placed buffers whose
// lifetimes overlap its own. The result is deterministic: it depends only on
// the IR.
//
//===----------------------------------------------------------------------===//

#include "dialects/tcx/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace tcx {
#define GEN_PASS_DEF_TCXPLANMEMORY
#include "dialects/tcx/Transforms/Passes.h.inc"
} // namespace tcx

using namespace mlir;

namespace {

struct Interval {
  tcx::AllocOp alloc;
  int64_t start, end; // op indices, inclusive
  int64_t bytes;      // rounded up to the alignment
  int64_t offset = -1;
  unsigned order;     // position of the alloc, for ties
  StringRef kind;     // the alloc's kind
  Type bufferType;    // the alloc's buffer type
};

bool overlaps(const Interval &a, const Interval &b) {
  return a.start <= b.end && b.start <= a.end;
}

int64_t alignTo(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

struct TcxPlanMemory : tcx::impl::TcxPlanMemoryBase<TcxPlanMemory> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return;
    if (alignment < 1 || (alignment & (alignment - 1)) != 0) {
      fn.emitError() << "tcx-plan-memory: alignment " << alignment.getValue()
                     << " is not a power of two";
      return signalPassFailure();
    }
    if (!llvm::hasSingleElement(fn.getBody())) {
      fn.emitOpError() << "@" << fn.getName()
                       << " has more than one block; tcx-plan-memory needs straight-line code";
      return signalPassFailure();
    }
    Block &body = fn.getBody().front();
    bool hasArena = !body.getOps<tcx::ArenaOp>().empty();
    if (hasArena && body.getOps<tcx::AllocOp>().empty())
      return; // planned already
    if (hasArena) {
      fn.emitOpError() << "@" << fn.getName() << " has both a tcx.arena and tcx.allocs";
      return signalPassFailure();
    }

    // Op indices; a use inside a nested region counts at its ancestor.
    DenseMap<Operation *, int64_t> index;
    int64_t n = 0;
    for (Operation &op : body) {
      if (op.getNumRegions() != 0) {
        op.emitOpError() << "has regions; tcx-plan-memory needs straight-line code";
        return signalPassFailure();
      }
      index[&op] = n++;
    }
    int64_t last = n - 1;

    // An op on another stream than 0 is done, for stream 0, at stream 0's
    // first wait for an event that stream recorded after it
    // (tcx-schedule-streams' joins): its buffers live until then.
    DenseMap<Operation *, int64_t> doneAt;
    {
      DenseMap<int64_t, SmallVector<Operation *>> pending; // stream -> ops not joined, in order
      for (Operation &op : body) {
        auto w = llvm::dyn_cast<tcx::WaitOp>(op);
        if (w && w.getStream() == 0) {
          auto r = w.getEvent().getDefiningOp<tcx::RecordOp>();
          if (!r || r.getStream() == 0)
            continue;
          // Stream r's ops before its record are done here.
          SmallVector<Operation *> &ops = pending[r.getStream()];
          auto first = llvm::find_if(ops, [&](Operation *o) { return !o->isBeforeInBlock(r); });
          for (Operation *o : llvm::make_range(ops.begin(), first))
            doneAt[o] = index.lookup(&op);
          ops.erase(ops.begin(), first);
          continue;
        }
        if (isa<tcx::RecordOp, tcx::WaitOp>(op))
          continue;
        auto sid = op.getAttrOfType<IntegerAttr>("stream");
        if (sid && sid.getInt() != 0)
          pending[sid.getInt()].push_back(&op);
      }
      for (auto &[sid, ops] : pending)
        for (Operation *op : ops)
          doneAt[op] = last;
    }
    auto usedAt = [&](Operation *user) {
      if (isa<func::ReturnOp>(user))
        return last;
      auto it = doneAt.find(user);
      return it != doneAt.end() ? it->second : index.lookup(user);
    };

    // Lifetimes: first to last use of the alloc or any view of it.
    SmallVector<Interval> intervals;
    for (auto [i, alloc] : llvm::enumerate(body.getOps<tcx::AllocOp>())) {
      Interval iv{alloc, INT64_MAX, INT64_MIN,
                  alignTo(llvm::cast<tcx::BufferType>(alloc.getType()).getSizeInBytes(),
                          alignment),
                  -1, static_cast<unsigned>(i), alloc.getKind(), alloc.getType()};
      SmallVector<Value> work{alloc.getResult()};
      while (!work.empty()) {
        Value v = work.pop_back_val();
        for (Operation *user : v.getUsers()) {
          int64_t at = usedAt(user);
          iv.start = std::min(iv.start, index.lookup(user));
          iv.end = std::max(iv.end, at);
          if (auto view = llvm::dyn_cast<tcx::ViewOp>(user))
            work.push_back(view.getResult());
        }
      }
      if (iv.start > iv.end) // never used: a point lifetime at the alloc
        iv.start = iv.end = index.lookup(alloc);
      intervals.push_back(iv);
    }

    // Greedy by size, best fit.
    SmallVector<Interval *> order;
    for (Interval &iv : intervals)
      order.push_back(&iv);
    llvm::stable_sort(order, [](const Interval *a, const Interval *b) {
      if (a->bytes != b->bytes)
        return a->bytes > b->bytes;
      if (a->start != b->start)
        return a->start < b->start;
      return a->order < b->order;
    });
    SmallVector<Interval *> placed;
    int64_t arenaSize = 0;
    for (Interval *iv : order) {
      SmallVector<Interval *> live;
      for (Interval *p : placed)
        if (overlaps(*p, *iv))
          live.push_back(p);
      llvm::sort(live, [](const Interval *a, const Interval *b) {
        return a->offset != b->offset ? a->offset < b->offset : a->order < b->order;
      });
      int64_t best = -1, bestWaste = INT64_MAX, top = 0;
      for (Interval *p : live) {
        int64_t gap = p->offset - top;
        if (gap >= iv->bytes && gap - iv->bytes < bestWaste) {
          best = top;
          bestWaste = gap - iv->bytes;
        }
        top = std::max(top, p->offset + p->bytes);
      }
      iv->offset = best >= 0 ? best : top;
      arenaSize = std::max(arenaSize, iv->offset + iv->bytes);
      placed.push_back(iv);
    }

    // Peak live bytes per kind (a sweep over the op indices).
    auto peakOf = [&](llvm::function_ref<bool(const Interval &)> pick) {
      SmallVector<int64_t> delta(n + 1, 0);
      for (const Interval &iv : intervals)
        if (pick(iv)) {
          delta[iv.start] += iv.bytes;
          delta[iv.end + 1] -= iv.bytes;
        }
      int64_t live = 0, peak = 0;
      for (int64_t d : delta)
        peak = std::max(peak, live += d);
      return peak;
    };
    int64_t peakLive = peakOf([](const Interval &) { return true; });
    int64_t activationPeak =
        peakOf([](const Interval &iv) { return iv.kind == "activation"; });
    int64_t backwardPeak =
        peakOf([](const Interval &iv) { return iv.kind == "backward"; });
    // What FP8/FP4 adds: the quantized copies of operands (and the transposed
    // copies TN-only GEMMs need), whatever their kind, and the block scales
    // the lowering marks (tcx.fp8_scales: block128's, one per 128 elements);
    // a per-tensor scale is one f32, counted with the rest.
    int64_t narrowPeak = peakOf([](const Interval &iv) {
      Type e = llvm::cast<tcx::BufferType>(iv.bufferType).getElementType();
      return (llvm::isa<FloatType>(e) && e.getIntOrFloatBitWidth() <= 8) ||
             iv.alloc->hasAttr("tcx.fp8_scales");
    });

    // Rewrite: one arena, a view per alloc.
    OpBuilder b = OpBuilder::atBlockBegin(&body);
    auto arenaType = tcx::BufferType::get({arenaSize}, b.getIntegerType(8));
    Value arena = tcx::ArenaOp::create(b, fn.getLoc(), arenaType).getResult();
    for (Interval &iv : intervals) {
      b.setInsertionPoint(iv.alloc);
      auto view = tcx::ViewOp::create(b, iv.alloc.getLoc(), iv.alloc.getType(), arena,
                                      b.getI64IntegerAttr(iv.offset));
      // Keep what the buffer is, for the reader of the planned IR.
      view->setAttr("kind", iv.alloc.getKindAttr());
      // And the reference value it holds (tc-run --check), if the lowering knew it.
      if (Attribute ref = iv.alloc->getAttr("ref"))
        view->setAttr("ref", ref);
      iv.alloc.getResult().replaceAllUsesWith(view.getResult());
      iv.alloc.erase();
    }

    // Persistent buffers, once per name.
    int64_t paramBytes = 0, bufferBytes = 0, stateBytes = 0, gradBytes = 0, shadowBytes = 0,
            constBytes = 0, inputBytes = 0;
    llvm::StringSet<> seen;
    for (auto p : body.getOps<tcx::ParamOp>()) {
      if (!seen.insert(p.getName()).second)
        continue;
      int64_t bytes = llvm::cast<tcx::BufferType>(p.getType()).getSizeInBytes();
      StringRef kind = p.getKind();
      (kind == "parameter"  ? paramBytes
       : kind == "buffer"   ? bufferBytes
       : kind == "gradient" ? gradBytes
       : kind == "shadow"   ? shadowBytes
                            : stateBytes) += bytes;
    }
    for (auto c : body.getOps<tcx::ConstOp>())
      constBytes += alignTo(llvm::cast<tcx::BufferType>(c.getType()).getSizeInBytes(), alignment);
    for (Type t : fn.getArgumentTypes())
      if (auto bt = llvm::dyn_cast<tcx::BufferType>(t))
        inputBytes += bt.getSizeInBytes();

    auto set = [&](StringRef name, int64_t v) { fn->setAttr(name, b.getI64IntegerAttr(v)); };
    set("tcx.arena_size", arenaSize);
    set("tcx.peak_live_bytes", peakLive);
    set("tcx.activation_bytes", activationPeak);
    set("tcx.backward_bytes", backwardPeak);
    set("tcx.narrow_bytes", narrowPeak);
    set("tcx.param_bytes", paramBytes);
    set("tcx.buffer_bytes", bufferBytes);
    set("tcx.state_bytes", stateBytes);
    set("tcx.grad_bytes", gradBytes);
    set("tcx.shadow_bytes", shadowBytes);
    set("tcx.const_bytes", constBytes);
    set("tcx.input_bytes", inputBytes);
  }
};

} // namespace
