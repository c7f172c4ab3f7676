//===- MergedParameters.cpp - undo exporters' merging of equal weights ----===//
//
// See MergedParameters.h for what is restored and how it is recognised.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/MergedParameters.h"
#include "frontends/onnx/Metadata.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

namespace tc::onnx_import {

//===----------------------------------------------------------------------===//
// Restoring
//===----------------------------------------------------------------------===//

namespace {

/// Whether an initializer would become a tc.parameter: floating point, rank
/// >= 1, at least one element (the importer's rule).
bool isParameterTensor(const onnx::TensorProto &t) {
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::BFLOAT16:
    break;
  default:
    return false;
  }
  if (t.dims_size() == 0)
    return false;
  for (int64_t d : t.dims())
    if (d <= 0)
      return false;
  return true;
}

/// The last dotted component of a parameter name ("weight", "bias").
std::string leaf(const std::string &name) {
  size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

bool sameShape(const onnx::TensorProto &a, const onnx::TensorProto &b) {
  if (a.data_type() != b.data_type() || a.dims_size() != b.dims_size())
    return false;
  for (int i = 0; i < a.dims_size(); ++i)
    if (a.dims(i) != b.dims(i))
      return false;
  return true;
}

/// A copy of `src` named `name` (raw, typed or external data alike).
onnx::TensorProto copyAs(const onnx::TensorProto &src, const std::string &name) {
  onnx::TensorProto t = src;
  t.set_name(name);
  return t;
}

/// One FX node's ONNX nodes and the parameters its arguments name.
struct FxGroup {
  std::string target; // "torch.ops.aten.linear.default"
  std::vector<int> nodes;
  std::vector<std::string> params; // signature targets, in argument order
};

/// "%mul_6 : [num_users=3] = call_function[...](args = (%p_w, %x), ...)":
/// the FX node's name ("mul_6") and its %-arguments.
bool parseFxNode(const std::string &fx, std::string *name, std::string *target,
                 std::vector<std::string> *args) {
  if (fx.size() < 2 || fx[0] != '%')
    return false;
  size_t sp = fx.find(' ');
  *name = fx.substr(1, sp == std::string::npos ? std::string::npos : sp - 1);
  size_t t = fx.find("[target=");
  if (t != std::string::npos) {
    size_t e = fx.find(']', t);
    *target = fx.substr(t + 8, e == std::string::npos ? std::string::npos : e - t - 8);
  }
  size_t a = fx.find("args = (");
  if (a == std::string::npos)
    return true;
  for (size_t p = fx.find('%', a); p != std::string::npos; p = fx.find('%', p + 1)) {
    size_t e = p + 1;
    while (e < fx.size() && (std::isalnum((unsigned char)fx[e]) || fx[e] == '_'))
      ++e;
    if (e > p + 1)
      args->push_back(fx.substr(p + 1, e - p - 1));
    p = e - 1;
  }
  return true;
}

void restoreIdentityAliases(onnx::GraphProto &graph, bool keepMerged, MergedParameters &out) {
  std::map<std::string, int> inits;
  for (int i = 0; i < graph.initializer_size(); ++i)
    inits[graph.initializer(i).name()] = i;
  std::set<std::string> graphOutputs;
  for (const auto &o : graph.output())
    graphOutputs.insert(o.name());
  std::vector<int> aliases;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &n = graph.node(i);
    if (n.op_type() != "Identity" || !(n.domain().empty() || n.domain() == "ai.onnx") ||
        n.input_size() != 1 || n.output_size() != 1 || n.output(0).empty())
      continue;
    auto it = inits.find(n.input(0));
    if (it == inits.end() || !isParameterTensor(graph.initializer(it->second)))
      continue;
    aliases.push_back(i);
    out.merged.emplace_back(n.output(0), n.input(0));
  }
  if (aliases.empty())
    return;
  out.kinds.push_back("Identity aliases");
  if (keepMerged)
    return;
  // Each alias becomes an initializer of its own, named by the Identity's
  // output (the torch parameter's name); the Identity goes.
  std::set<int> drop(aliases.begin(), aliases.end());
  for (int i : aliases) {
    const onnx::NodeProto &n = graph.node(i);
    *graph.add_initializer() = copyAs(graph.initializer(inits[n.input(0)]), n.output(0));
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int i = 0; i < graph.node_size(); ++i)
    if (!drop.count(i))
      *kept.Add() = graph.node(i);
  graph.mutable_node()->Swap(&kept);
}

void restoreDeduplicated(onnx::GraphProto &graph, bool keepMerged, MergedParameters &out) {
  std::map<std::string, SignatureInput> sig = graphSignature(graph);
  if (sig.empty())
    return;
  std::map<std::string, int> inits;
  for (int i = 0; i < graph.initializer_size(); ++i)
    inits[graph.initializer(i).name()] = i;
  // Parameters (signature targets) and those without an initializer.
  std::map<std::string, std::string> placeholderParam; // p_... -> target
  std::vector<std::string> missingOrder;
  std::set<std::string> missing;
  for (const auto &[ph, in] : sig) {
    if (in.kind != "PARAMETER")
      continue;
    placeholderParam[ph] = in.target;
    if (!inits.count(in.target) && missing.insert(in.target).second)
      missingOrder.push_back(in.target);
  }
  if (missing.empty())
    return;
  std::map<std::string, std::vector<std::string>> foldedFrom = foldedSources(graph);

  // Group the ONNX nodes by the FX node they come from.
  std::map<std::string, FxGroup> groups;
  std::vector<std::string> groupOrder;
  std::set<std::string> referenced; // missing parameters some FX node uses
  for (int i = 0; i < graph.node_size(); ++i) {
    auto md = unknownMetadata(graph.node(i), kNodeMetadataField);
    auto fx = md.find("pkg.torch.onnx.fx_node");
    if (fx == md.end())
      continue;
    std::string name, target;
    std::vector<std::string> args;
    if (!parseFxNode(fx->second, &name, &target, &args))
      continue;
    auto [it, fresh] = groups.try_emplace(name);
    if (fresh) {
      groupOrder.push_back(name);
      it->second.target = target;
      for (const std::string &a : args) {
        auto p = placeholderParam.find(a);
        if (p == placeholderParam.end())
          continue;
        if (std::find(it->second.params.begin(), it->second.params.end(), p->second) ==
            it->second.params.end())
          it->second.params.push_back(p->second);
        if (missing.count(p->second))
          referenced.insert(p->second);
      }
    }
    it->second.nodes.push_back(i);
  }

  std::map<std::string, std::string> restoredFrom; // parameter -> kept initializer
  std::set<std::string> unrestorable;
  std::set<std::string> accounted; // missing parameters read through a folded constant
  std::map<std::string, std::set<std::string>> transposeOf; // val_N -> {W}
  std::set<std::string> notTranspose; // folded constants also read otherwise
  struct Rename {
    int node, input;
    std::string to;
  };
  std::vector<Rename> renames;
  for (const std::string &g : groupOrder) {
    const FxGroup &group = groups[g];
    std::set<std::string> want(group.params.begin(), group.params.end());
    std::set<std::string> satisfied;
    struct Slot {
      int node, input;
      std::string name;
      bool used = false;
    };
    std::vector<Slot> slots;
    for (int n : group.nodes) {
      const onnx::NodeProto &node = graph.node(n);
      for (int k = 0; k < node.input_size(); ++k) {
        auto it = inits.find(node.input(k));
        if (it == inits.end() || !isParameterTensor(graph.initializer(it->second)))
          continue;
        slots.push_back({n, k, node.input(k)});
      }
    }
    // Inputs that are what the FX node names (directly, or a constant folded
    // from it) are accounted for.
    for (Slot &s : slots) {
      if (want.count(s.name) && !satisfied.count(s.name)) {
        satisfied.insert(s.name);
        s.used = true;
        continue;
      }
      auto f = foldedFrom.find(s.name);
      if (f == foldedFrom.end())
        continue;
      for (const std::string &src : f->second)
        if (want.count(src) && !satisfied.count(src)) {
          satisfied.insert(src);
          accounted.insert(src);
          s.used = true;
        }
      // linear(x, W) exported as MatMul(x, W^T) with W^T folded.
      const onnx::NodeProto &node = graph.node(s.node);
      if (f->second.size() == 1 && missing.count(f->second[0]) &&
          group.target == "torch.ops.aten.linear.default" && node.op_type() == "MatMul" &&
          s.input == 1 && graph.initializer(inits[s.name]).dims_size() == 2)
        transposeOf[s.name].insert(f->second[0]);
      else
        notTranspose.insert(s.name);
    }
    // Parameters the FX node uses that have no initializer, and the inputs
    // left over: the merged copies that stand in for them.
    for (const std::string &p : group.params) {
      if (!missing.count(p) || satisfied.count(p))
        continue;
      Slot *pick = nullptr;
      for (int pass = 0; pass < 2 && !pick; ++pass)
        for (Slot &s : slots)
          if (!s.used && (pass == 1 || leaf(s.name) == leaf(p))) {
            pick = &s;
            break;
          }
      if (!pick)
        continue; // its consumer is gone (reported below if nothing reads it)
      pick->used = true;
      satisfied.insert(p);
      const onnx::TensorProto &kept = graph.initializer(inits[pick->name]);
      bool direct = !foldedFrom.count(pick->name) && placeholderParam.end() !=
                        std::find_if(placeholderParam.begin(), placeholderParam.end(),
                                     [&](const auto &e) { return e.second == pick->name; });
      auto prev = restoredFrom.find(p);
      if (!direct || unrestorable.count(p) ||
          (prev != restoredFrom.end() &&
           !sameShape(graph.initializer(inits[prev->second]), kept))) {
        // A constant folded from another parameter (a transposed weight)
        // cannot be given p's name and layout.
        if (unrestorable.insert(p).second)
          out.unrestorable.push_back("'" + p + "' (merged into '" + pick->name + "')");
        continue;
      }
      if (prev == restoredFrom.end())
        restoredFrom[p] = pick->name;
      renames.push_back({pick->node, pick->input, p});
    }
  }

  for (const std::string &p : missingOrder) {
    auto r = restoredFrom.find(p);
    if (r != restoredFrom.end() && !unrestorable.count(p))
      out.merged.emplace_back(p, r->second);
    else if (referenced.count(p) && !accounted.count(p) && !unrestorable.count(p) &&
             r == restoredFrom.end())
      out.dropped.push_back(p);
  }
  // A folded W^T that every consumer reads as linear's weight, from one W
  // that no other folded constant claims.
  std::map<std::string, int> claims;
  for (const auto &[f, ws] : transposeOf)
    if (!notTranspose.count(f) && ws.size() == 1)
      ++claims[*ws.begin()];
  for (const auto &[f, ws] : transposeOf)
    if (!notTranspose.count(f) && ws.size() == 1 && claims[*ws.begin()] == 1 &&
        !inits.count(*ws.begin()))
      out.transposed.emplace_back(f, *ws.begin());
  if (!out.merged.empty())
    out.kinds.push_back("deduplicated initializers");
  if (keepMerged || out.merged.empty())
    return;
  for (const auto &[p, from] : out.merged)
    *graph.add_initializer() = copyAs(graph.initializer(inits[from]), p);
  for (const Rename &r : renames)
    if (!unrestorable.count(r.to))
      graph.mutable_node(r.node)->set_input(r.input, r.to);
}

} // namespace

MergedParameters restoreMergedParameters(onnx::GraphProto &graph, bool keepMerged) {
  MergedParameters out;
  restoreIdentityAliases(graph, keepMerged, out);
  restoreDeduplicated(graph, keepMerged, out);
  return out;
}

} // namespace tc::onnx_import
