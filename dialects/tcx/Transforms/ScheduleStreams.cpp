//===- ScheduleStreams.cpp - tcx-schedule-streams --------------------------===//
//
// Runs a step's weight-gradient matmuls (tcx.matmul with transpose_lhs:
// dW = X^T dY, K the tokens) on stream 1 beside the rest of the backward,
// which stays on stream 0. Each such matmul starts after the work before it
// (a record on stream 0 that stream 1 waits for) and stream 0 waits for it
// (a record on stream 1 after it) before the first later op that touches
// its bytes (reads what it writes, or writes what it reads or writes), or
// after `window` stream-0 ops. Before tcx-plan-memory (the pipeline's
// place) its bytes are its allocs, and the planner keeps them live until
// that wait; after planning they are the planned offsets, so the plan
// stays as it was. Every function ends joined (the runtime synchronizes
// stream 0 only).
//
//===----------------------------------------------------------------------===//

#include "dialects/tcx/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

namespace tcx {
#define GEN_PASS_DEF_TCXSCHEDULESTREAMS
#include "dialects/tcx/Transforms/Passes.h.inc"
} // namespace tcx

using namespace mlir;

namespace {

/// Bytes [begin, end) of one allocation (`root`): an alloc (before
/// tcx-plan-memory) or the arena (after it), a parameter, a constant or an
/// argument.
struct Range {
  Value root;
  int64_t begin, end;
};

bool intersect(ArrayRef<Range> a, ArrayRef<Range> b) {
  for (const Range &x : a)
    for (const Range &y : b)
      if (x.root == y.root && x.begin < y.end && y.begin < x.end)
        return true;
  return false;
}

/// The bytes `v` covers: views followed back to what they view.
Range rangeOf(Value v) {
  int64_t offset = 0;
  Value root = v;
  while (auto view = root.getDefiningOp<tcx::ViewOp>()) {
    offset += view.getOffset();
    root = view.getSource();
  }
  int64_t bytes = llvm::cast<tcx::BufferType>(v.getType()).getSizeInBytes();
  return {root, offset, offset + std::max<int64_t>(bytes, 1)};
}

/// An op that runs on the device, with what it reads and writes.
struct Work {
  Operation *op;
  SmallVector<Range> reads, writes;
  bool side = false;
};

struct TcxScheduleStreams : tcx::impl::TcxScheduleStreamsBase<TcxScheduleStreams> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal() || !llvm::hasSingleElement(fn.getBody()))
      return;
    Block &body = fn.getBody().front();
    // Only functions nobody scheduled before.
    if (!body.getOps<tcx::RecordOp>().empty() || !body.getOps<tcx::WaitOp>().empty())
      return;

    // The device work and the bytes it reads and writes, from the effects
    // TcxOps.td declares on each operand (tcx.alloc's allocation aside).
    SmallVector<Work> work;
    for (Operation &op : body) {
      auto effects = llvm::dyn_cast<MemoryEffectOpInterface>(op);
      if (!effects || isa<tcx::AllocOp>(op))
        continue;
      Work w{&op, {}, {}, false};
      SmallVector<MemoryEffects::EffectInstance> list;
      effects.getEffects(list);
      for (const MemoryEffects::EffectInstance &e : list) {
        Value v = e.getValue();
        if (!v || !llvm::isa<tcx::BufferType>(v.getType()))
          continue;
        if (isa<MemoryEffects::Read>(e.getEffect()))
          w.reads.push_back(rangeOf(v));
        else if (isa<MemoryEffects::Write>(e.getEffect()))
          w.writes.push_back(rangeOf(v));
      }
      if (w.reads.empty() && w.writes.empty())
        continue; // views, params, constants: no work
      if (auto m = llvm::dyn_cast<tcx::MatmulOp>(op))
        w.side = m.getTransposeLhs() && !m.getLhsBatch() && !m.getRhsBatch();
      work.push_back(std::move(w));
    }

    // Before planning, a side op keeps the allocs it is the last reader of
    // live until its join: not where they hold more than max-held-bytes
    // (the classifier's weight gradient, the last reader of the logits'
    // gradient, would keep gigabytes live through the next layer).
    DenseMap<Value, Operation *> lastReader;
    for (Work &w : work)
      for (const Range &r : w.reads)
        if (r.root.getDefiningOp<tcx::AllocOp>())
          lastReader[r.root] = w.op;
    for (Work &w : work) {
      if (!w.side)
        continue;
      int64_t held = 0;
      DenseSet<Value> seen;
      for (const Range &r : w.reads)
        if (lastReader.lookup(r.root) == w.op && seen.insert(r.root).second)
          held += llvm::cast<tcx::BufferType>(r.root.getType()).getSizeInBytes();
      if (held > maxHeldBytes)
        w.side = false;
    }

    // Where stream 0 must wait for each side op: before the first later
    // stream-0 op that touches its bytes, or after `window` stream-0 ops
    // (0: no limit), or at the end. A side op joined before any stream-0 op
    // ran beside it gains nothing: it goes back to stream 0, and the joins
    // are found again (it is now a stream-0 op the others may touch).
    const size_t n = work.size();
    SmallVector<size_t> joinAt(n, n);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < n; ++i) {
        if (!work[i].side)
          continue;
        joinAt[i] = n;
        int64_t mainOps = 0;
        for (size_t j = i + 1; j < n; ++j) {
          if (work[j].side)
            continue;
          if (intersect(work[i].writes, work[j].reads) ||
              intersect(work[i].writes, work[j].writes) ||
              intersect(work[i].reads, work[j].writes) || (window > 0 && mainOps == window)) {
            joinAt[i] = j;
            break;
          }
          ++mainOps;
        }
        if (mainOps == 0) {
          work[i].side = false;
          changed = true;
        }
      }
    }

    OpBuilder b(fn.getContext());
    auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    Location loc = fn.getLoc();
    Type eventType = tcx::EventType::get(fn.getContext());
    int64_t sideOps = 0;
    SmallVector<std::pair<size_t, Value>> done; // side op index -> its event
    size_t joined = 0;                          // side ops [0, joined) of `done` are joined
    for (size_t i = 0; i < n; ++i) {
      Operation *op = work[i].op;
      if (!work[i].side) {
        // Join the latest side op whose join point this is (stream 1 runs
        // in order: waiting for it covers those before it).
        Value wait;
        for (size_t d = joined; d < done.size(); ++d)
          if (joinAt[done[d].first] <= i) {
            wait = done[d].second;
            joined = d + 1;
          }
        if (wait) {
          b.setInsertionPoint(op);
          tcx::WaitOp::create(b, op->getLoc(), wait, i64(0));
        }
        continue;
      }
      b.setInsertionPoint(op);
      bool mainBefore = i > 0 && !work[i - 1].side;
      if (mainBefore || done.empty()) {
        Value start = tcx::RecordOp::create(b, op->getLoc(), eventType, i64(0)).getEvent();
        tcx::WaitOp::create(b, op->getLoc(), start, i64(1));
      }
      op->setAttr("stream", i64(1));
      b.setInsertionPointAfter(op);
      done.push_back({i, tcx::RecordOp::create(b, op->getLoc(), eventType, i64(1)).getEvent()});
      ++sideOps;
    }
    if (joined < done.size()) {
      // The rest join before the function returns.
      b.setInsertionPoint(body.getTerminator());
      tcx::WaitOp::create(b, loc, done.back().second, i64(0));
    }
    if (sideOps > 0)
      fn->setAttr("tcx.side_stream_ops", i64(sideOps));
  }
};

} // namespace
