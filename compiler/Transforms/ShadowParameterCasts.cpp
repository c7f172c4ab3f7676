//===- ShadowParameterCasts.cpp - tc-shadow-parameter-casts ---------------===//
//
// The precision plan casts each fp32 master weight to the 16-bit type its
// GEMMs read at the start of every step (tc-hoist-parameter-casts groups
// them into one launch): each reads the weight the optimizer wrote at the
// end of the step before (4 bytes a parameter) and writes its copy (2), a
// pass over every weight (GPT-2 350M: 0.79 ms of a ~42 ms step on an H100).
// The optimizer holds the new weight in registers when it writes it: it
// writes the copy too (2 bytes a parameter more), and the step reads a
// persistent copy instead of making one.
//
// The copy of parameter <p> is the device-only entry "shadow:<p>"
// (rt::kShadowPrefix): every tc.cast of tc.parameter <p> to it reads
// tc.parameter "shadow:<p>", and every function with an "update:<p>"
// result also returns "update:shadow:<p>", the new value cast, which
// tc-lower-to-tcx writes in place. The CUDA executor fills the entry from
// <p> when it makes it and after every write of <p> from outside a step,
// so the copy always equals <p> cast (round to nearest even both ways: the
// same bits as the cast it replaces). GPU pipeline only: the reference
// program keeps its casts.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "runtime/src/schema/program.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace tc {
#define GEN_PASS_DEF_TCSHADOWPARAMETERCASTS
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;
using namespace tc;

namespace {

constexpr llvm::StringLiteral kName = "tc.name";

/// The parameter a shadowable cast reads: a tc.cast of an fp32 tc.parameter
/// (not optimizer state) to bf16 or f16, else null.
ParameterOp shadowSource(CastOp c) {
  auto p = c.getInput().getDefiningOp<ParameterOp>();
  if (!p || p->hasAttr("tc.optimizer_state") || !p.getType().getElementType().isF32())
    return nullptr;
  Type out = cast<RankedTensorType>(c.getType()).getElementType();
  return out.isBF16() || out.isF16() ? p : nullptr;
}

struct TcShadowParameterCasts : tc::impl::TcShadowParameterCastsBase<TcShadowParameterCasts> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // The 16-bit type of each parameter's copy; a parameter cast to two
    // types, or whose name is taken, keeps its casts.
    llvm::StringMap<RankedTensorType> shadow;
    llvm::StringSet<> refused, names;
    SmallVector<CastOp> casts;
    module.walk([&](ParameterOp p) { names.insert(p.getName()); });
    module.walk([&](CastOp c) {
      ParameterOp p = shadowSource(c);
      if (!p)
        return;
      auto type = cast<RankedTensorType>(c.getType());
      auto [it, fresh] = shadow.try_emplace(p.getName(), type);
      if ((!fresh && it->second != type) || names.contains(shadowName(p.getName())))
        refused.insert(p.getName());
      casts.push_back(c);
    });
    if (casts.empty())
      return;
    // A function that updates <p> returns the copy too: one whose results
    // a call reads cannot take another (none does: the steps are entries).
    // (Whether a call reads the function is asked once a function: each
    // question walks the module, and asked per result it was 1.5 s of
    // GPT-2 124M's 2 s GPU pipeline.)
    for (auto fn : module.getOps<func::FuncOp>()) {
      std::optional<bool> called;
      for (unsigned i = 0; i < fn.getNumResults(); ++i) {
        StringRef n = updated(fn, i);
        if (n.empty() || !shadow.count(n))
          continue;
        if (!called)
          called = !SymbolTable::symbolKnownUseEmpty(fn, module);
        if (*called ||
            tensorTypeOf(fn.getResultTypes()[i]) !=
                RankedTensorType::get(shadow[n].getShape(), Float32Type::get(&getContext())))
          refused.insert(n);
      }
    }

    for (CastOp c : casts) {
      ParameterOp p = shadowSource(c);
      if (refused.contains(p.getName()))
        continue;
      OpBuilder b(c);
      auto s = ParameterOp::create(b, c.getLoc(), c.getType(),
                                   b.getStringAttr(shadowName(p.getName())), UnitAttr());
      c.getResult().replaceAllUsesWith(s.getResult());
      c.erase();
    }
    for (auto fn : module.getOps<func::FuncOp>()) {
      auto ret = cast<func::ReturnOp>(fn.getBody().back().getTerminator());
      SmallVector<std::pair<std::string, Value>> added;
      OpBuilder b(ret);
      for (unsigned i = 0; i < fn.getNumResults(); ++i) {
        StringRef n = updated(fn, i);
        if (n.empty() || !shadow.count(n) || refused.contains(n))
          continue;
        // Right after the update, so that tc-fuse puts the optimizer's
        // kernel where it was (made at the end, the kernels of equal shapes
        // sat side by side, and sibling fusion, which merges neighbours
        // that share an input, a scalar too, made one of 24 of Llama's).
        Value v = ret.getOperand(i);
        OpBuilder at(ret);
        if (Operation *def = v.getDefiningOp())
          at.setInsertionPointAfter(def);
        Value copy = CastOp::create(at, ret.getLoc(), shadow[n], v, true);
        added.push_back({"update:" + shadowName(n), copy});
      }
      // All at once: one new function type and result attribute list.
      SmallVector<unsigned> at(added.size(), fn.getNumResults());
      SmallVector<Type> types;
      SmallVector<DictionaryAttr> attrs;
      SmallVector<Value> values;
      for (auto &[name, v] : added) {
        types.push_back(v.getType());
        attrs.push_back(b.getDictionaryAttr({b.getNamedAttr(kName, b.getStringAttr(name))}));
        values.push_back(v);
      }
      if (added.empty())
        continue;
      if (failed(fn.insertResults(at, types, attrs))) {
        fn.emitError() << "tc-shadow-parameter-casts: cannot add the copies' results";
        return signalPassFailure();
      }
      ret.getOperandsMutable().append(values);
    }
  }

  static std::string shadowName(StringRef p) { return (llvm::Twine(rt::kShadowPrefix) + p).str(); }

  /// <p> of result i named "update:<p>", else empty.
  static StringRef updated(func::FuncOp fn, unsigned i) {
    auto name = fn.getResultAttrOfType<StringAttr>(i, kName);
    if (!name)
      return {};
    StringRef n = name.getValue();
    return n.consume_front("update:") ? n : StringRef();
  }

  static RankedTensorType tensorTypeOf(Type t) { return dyn_cast<RankedTensorType>(t); }
};

} // namespace
