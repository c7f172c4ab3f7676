//===- DeviceProgram.cpp - planned tcx -> runtime device program ----------===//

#include "compiler/DeviceProgram.h"
#include "compiler/PrecisionPlan.h"

#include "dialects/tc/Eval/Types.h"
#include "dialects/tcx/IR/TcxOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/JSON.h"

using namespace mlir;

namespace tc {

namespace {

struct Lowering {
  rt::DeviceFunction out;
  llvm::DenseMap<Value, int32_t> buffers; // SSA buffer -> DeviceFunction::buffers
  llvm::DenseMap<Value, int64_t> events;  // SSA event -> event number
  std::string *error;
  std::vector<ReferenceBuffer> *references = nullptr;

  LogicalResult fail(Operation *op, const Twine &msg) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "'" << op->getName() << "' at " << op->getLoc() << ": " << msg;
    *error = os.str();
    return failure();
  }

  FailureOr<rt::DeviceBuffer> describe(Operation *op, Type type) {
    auto bt = llvm::dyn_cast<tcx::BufferType>(type);
    if (!bt)
      return fail(op, "result is not a tcx buffer");
    auto t = toTensorType(bt.toTensorType());
    if (!t)
      return fail(op, "buffer of an element type the runtime does not know");
    rt::DeviceBuffer b;
    b.type = *t;
    b.bytes = static_cast<uint64_t>(bt.getSizeInBytes());
    return b;
  }

  int32_t add(Value v, rt::DeviceBuffer b) {
    int32_t id = static_cast<int32_t>(out.buffers.size());
    out.buffers.push_back(std::move(b));
    buffers[v] = id;
    return id;
  }

  FailureOr<std::vector<int32_t>> ids(Operation *op, ValueRange values) {
    std::vector<int32_t> r;
    for (Value v : values) {
      auto it = buffers.find(v);
      if (it == buffers.end())
        return fail(op, "uses a buffer whose storage is not resolved");
      r.push_back(it->second);
    }
    return r;
  }

  /// Every attribute (defaults filled in) but those in `skip`.
  LogicalResult attrs(Operation *op, rt::DeviceOp *d,
                      std::initializer_list<llvm::StringRef> skip) {
    NamedAttrList list(op->getAttrDictionary());
    op->getName().populateDefaultAttrs(list);
    for (NamedAttribute na : list) {
      llvm::StringRef name = na.getName().getValue();
      if (name == "operandSegmentSizes" || llvm::is_contained(skip, name))
        continue;
      rt::Attr a;
      if (failed(convertAttr(na.getValue(), &a, error, name)))
        return fail(op, *error);
      d->attrs[name.str()] = std::move(a);
    }
    return success();
  }

  LogicalResult work(Operation *op, const char *kind, std::string name, ValueRange ins,
                     ValueRange outs, std::initializer_list<llvm::StringRef> skip) {
    rt::DeviceOp d;
    d.kind = kind;
    d.name = std::move(name);
    auto i = ids(op, ins);
    auto o = ids(op, outs);
    if (failed(i) || failed(o))
      return failure();
    d.ins = std::move(*i);
    d.outs = std::move(*o);
    if (failed(attrs(op, &d, skip)))
      return failure();
    out.ops.push_back(std::move(d));
    return success();
  }

  /// The arguments of a generated kernel beyond its pointers (see
  /// rt::DeviceOp): "n", "meta", "grid" and "block", as tcx-generate-cuda set
  /// them on the launch (the tcx.launch verifier checks that they are there).
  void launchArgs(tcx::LaunchOp l, rt::DeviceOp *d) {
    auto integer = [](int64_t v) {
      rt::Attr a;
      a.i = v;
      return a;
    };
    rt::Attr m;
    m.kind = rt::Attr::Kind::Ints;
    m.ints.assign(l.getMeta()->begin(), l.getMeta()->end());
    d->attrs["n"] = integer(*l.getN());
    d->attrs["meta"] = std::move(m);
    d->attrs["grid"] = integer((*l.getGrid())[0]);
    d->attrs["block"] = integer((*l.getBlock())[0]);
  }

  LogicalResult lower(Operation *op) {
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case([&](tcx::ArenaOp a) -> LogicalResult {
          auto b = describe(op, a.getType());
          if (failed(b))
            return failure();
          b->space = rt::DeviceBuffer::Space::Arena;
          add(a.getResult(), *b);
          return success();
        })
        .Case([&](tcx::ParamOp p) -> LogicalResult {
          auto b = describe(op, p.getType());
          if (failed(b))
            return failure();
          b->space = rt::DeviceBuffer::Space::Param;
          b->name = p.getName().str();
          add(p.getResult(), *b);
          return success();
        })
        .Case([&](tcx::ConstOp c) -> LogicalResult {
          auto b = describe(op, c.getType());
          if (failed(b))
            return failure();
          std::string why;
          auto t = toHostTensor(c.getValue(), &why);
          if (failed(t))
            return fail(op, "holds " + (why.empty() ? std::string("a constant the runtime cannot carry")
                                                    : why));
          b->space = rt::DeviceBuffer::Space::Const;
          b->index = static_cast<int32_t>(out.consts.size());
          out.consts.push_back(std::move(*t));
          add(c.getResult(), *b);
          return success();
        })
        .Case([&](tcx::ViewOp v) -> LogicalResult {
          auto src = ids(op, v.getSource());
          if (failed(src))
            return failure();
          auto b = describe(op, v.getType());
          if (failed(b))
            return failure();
          const rt::DeviceBuffer &s = out.buffers[(*src)[0]];
          b->space = s.space;
          b->name = s.name;
          b->index = s.index;
          b->offset = s.offset + static_cast<uint64_t>(v.getOffset());
          int32_t id = add(v.getResult(), *b);
          if (auto ref = v->getAttrOfType<IntegerAttr>("ref"); ref && references)
            references->push_back({id, ref.getInt(), onnxNodeOf(v.getLoc())});
          return success();
        })
        .Case([&](tcx::LaunchOp l) -> LogicalResult {
          // The generated CUDA kernel the tcx.kernel became (its name in the
          // artifact's KERNELS), else the tcx symbol.
          std::string name = l.getKernel().str();
          std::string kind;
          bool generated = false;
          if (auto k = SymbolTable::lookupNearestSymbolFrom<tcx::KernelOp>(
                  op, l.getKernelAttr())) {
            kind = k.getKind().str();
            if (auto cuda = k.getCudaKernelAttr()) {
              name = cuda.getValue().str();
              generated = true;
            }
          }
          if (failed(work(op, "launch", name, l.getInputs(), l.getOutputs(),
                          {"kernel", "grid", "block", "n", "meta"})))
            return failure();
          if (generated)
            launchArgs(l, &out.ops.back());
          if (!generated) {
            // CUDA codegen made no kernel for it (tc.split today): a runtime
            // must refuse the step; validation does not look it up.
            rt::Attr missing;
            missing.i = 1;
            out.ops.back().attrs["missing_kernel"] = missing;
          }
          rt::Attr sym;
          sym.kind = rt::Attr::Kind::String;
          sym.s = l.getKernel().str();
          out.ops.back().attrs["symbol"] = sym;
          if (!kind.empty()) {
            rt::Attr k;
            k.kind = rt::Attr::Kind::String;
            k.s = kind;
            out.ops.back().attrs["kernel_kind"] = k;
          }
          return success();
        })
        .Case([&](tcx::LibraryOp l) {
          return work(op, "library", l.getCallee().str(), l.getInputs(), l.getOutputs(),
                      {"callee"});
        })
        .Case([&](tcx::MatmulOp m) {
          SmallVector<Value, 2> outs{m.getOut()};
          if (Value g = m.getBiasGradOut())
            outs.push_back(g);
          if (Value a = m.getAuxOut())
            outs.push_back(a);
          return work(op, "matmul", "", m.getInputs(), outs, {});
        })
        .Case([&](tcx::CopyOp c) {
          return work(op, "copy", "", ValueRange(c.getSource()), ValueRange(c.getTarget()),
                      {});
        })
        .Case([&](tcx::FillOp f) {
          return work(op, "fill", "", ValueRange(), ValueRange(f.getTarget()), {});
        })
        .Case([&](tcx::RecordOp r) -> LogicalResult {
          int64_t id = static_cast<int64_t>(events.size());
          events[r.getEvent()] = id;
          if (failed(work(op, "record", "", ValueRange(), ValueRange(), {})))
            return failure();
          rt::Attr e;
          e.i = id;
          out.ops.back().attrs["event"] = e;
          return success();
        })
        .Case([&](tcx::WaitOp w) -> LogicalResult {
          auto it = events.find(w.getEvent());
          if (it == events.end())
            return fail(op, "waits for an event not recorded before");
          if (failed(work(op, "wait", "", ValueRange(), ValueRange(), {})))
            return failure();
          rt::Attr e;
          e.i = it->second;
          out.ops.back().attrs["event"] = e;
          return success();
        })
        .Case([&](func::ReturnOp r) -> LogicalResult {
          auto o = ids(op, r.getOperands());
          if (failed(o))
            return failure();
          out.outputs = std::move(*o);
          return success();
        })
        .Default([&](Operation *) { return fail(op, "is not a planned tcx op"); });
  }
};

std::string nameOf(func::FuncOp fn, bool result, unsigned i) {
  StringAttr s = result ? fn.getResultAttrOfType<StringAttr>(i, "tc.name")
                        : fn.getArgAttrOfType<StringAttr>(i, "tc.name");
  if (s)
    return s.getValue().str();
  return (result ? "out" : "arg") + std::to_string(i);
}

} // namespace

FailureOr<rt::DeviceFunction> lowerToDeviceProgram(func::FuncOp planned, std::string *error,
                                                   std::vector<ReferenceBuffer> *references) {
  Lowering l;
  l.error = error;
  l.references = references;
  l.out.name = planned.getName().str();
  auto arena = planned->getAttrOfType<IntegerAttr>("tcx.arena_size");
  if (!arena) {
    *error = "@" + l.out.name + " has no tcx.arena_size (is it planned?)";
    return failure();
  }
  l.out.arenaBytes = static_cast<uint64_t>(arena.getInt());
  if (!planned.getBody().hasOneBlock()) {
    *error = "@" + l.out.name + " is not straight-line code";
    return failure();
  }
  Block &body = planned.getBody().front();
  for (unsigned i = 0; i < planned.getNumArguments(); ++i) {
    BlockArgument arg = body.getArgument(i);
    auto b = l.describe(planned, arg.getType());
    if (failed(b))
      return failure();
    b->space = rt::DeviceBuffer::Space::Input;
    b->index = static_cast<int32_t>(i);
    b->name = nameOf(planned, false, i);
    l.out.inputNames.push_back(b->name);
    l.add(arg, *b);
  }
  for (unsigned i = 0; i < planned.getNumResults(); ++i)
    l.out.outputNames.push_back(nameOf(planned, true, i));
  for (Operation &op : body)
    if (failed(l.lower(&op)))
      return failure();
  if (l.out.outputs.size() != l.out.outputNames.size()) {
    *error = "@" + l.out.name + " returns " + std::to_string(l.out.outputs.size()) +
             " buffers for " + std::to_string(l.out.outputNames.size()) + " results";
    return failure();
  }
  return std::move(l.out);
}

std::string formatDeviceFunction(const rt::DeviceFunction &fn) {
  auto buf = [&](int32_t id) {
    const rt::DeviceBuffer &b = fn.buffers[id];
    std::string s = rt::deviceSpaceName(b.space);
    if (b.space == rt::DeviceBuffer::Space::Param)
      s += "[" + b.name + "]";
    else if (b.space != rt::DeviceBuffer::Space::Arena)
      s += "[#" + std::to_string(b.index) + "]";
    return s + "@" + std::to_string(b.offset) + ":" + std::to_string(b.bytes);
  };
  auto list = [&](const std::vector<int32_t> &ids) {
    std::string s;
    for (size_t i = 0; i < ids.size(); ++i)
      s += (i ? ", " : "") + buf(ids[i]);
    return s;
  };
  std::string s = "device function " + fn.name + ": arena " +
                  std::to_string(fn.arenaBytes) + " bytes, " +
                  std::to_string(fn.buffers.size()) + " buffers, " +
                  std::to_string(fn.ops.size()) + " ops\n";
  for (const rt::DeviceOp &op : fn.ops) {
    s += "  " + op.kind;
    if (!op.name.empty())
      s += " " + op.name;
    if (op.attrs.count("missing_kernel"))
      s += " (no generated kernel)";
    s += " ins(" + list(op.ins) + ") outs(" + list(op.outs) + ")";
    if (op.kind == "launch" && op.attrs.count("n")) {
      // n, grid x block, then meta (the first 8 values and a count).
      auto attr = [&](const char *k) { return op.attrs.at(k); };
      s += " n=" + std::to_string(attr("n").i) + " grid=" + std::to_string(attr("grid").i) +
           "x" + std::to_string(attr("block").i) + " meta=[";
      const std::vector<int64_t> &meta = attr("meta").ints;
      for (size_t i = 0; i < meta.size() && i < 8; ++i)
        s += (i ? " " : "") + std::to_string(meta[i]);
      if (meta.size() > 8)
        s += " ... (" + std::to_string(meta.size()) + ")";
      s += "]";
    }
    s += "\n";
  }
  for (size_t i = 0; i < fn.outputs.size(); ++i)
    s += "  result " + fn.outputNames[i] + " = " + buf(fn.outputs[i]) + "\n";
  return s;
}

std::string checkReportJson(
    const std::vector<std::pair<std::string, std::vector<ReferenceBuffer>>> &fns) {
  llvm::json::Object functions;
  for (const auto &[name, refs] : fns) {
    llvm::json::Array rows;
    for (const ReferenceBuffer &r : refs)
      rows.push_back(llvm::json::Array{r.buffer, r.value, r.node});
    functions[name] = std::move(rows);
  }
  llvm::json::Object report{{"version", 1}, {"functions", std::move(functions)}};
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::json::Value(std::move(report));
  return s;
}

} // namespace tc
