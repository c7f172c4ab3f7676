"""Exports a causal-LM `forward(input_ids, labels) -> (loss, logits)` module to ONNX the ways users
do: TorchScript (opset 17, dynamic batch/seq axes) and dynamo (opset 18, once without onnxscript's
optimizer and once with it, external data).  Shared by make_fixtures.py (the committed parity
fixtures) and make_hf_models.py (tiny HuggingFace models), so that both test the same exports.

Every call passes the same torch.onnx.export arguments the two scripts passed before they shared
this module, so their outputs are unchanged.
"""

import os
import warnings

import torch

INPUT_NAMES = ["input_ids", "labels"]
OUTPUT_NAMES = ["loss", "logits"]


def export_torchscript(model, args, path, constant_folding=False):
    """TorchScript exporter, opset 17, batch/seq dynamic, weights embedded.  constant_folding=False
    keeps parameter names (with folding, Linear's MatMul(x, Transpose(W)) becomes a new initializer
    "onnx::MatMul_NNN" holding W^T); True is torch's default, what users get."""
    dyn = {"input_ids": {0: "batch", 1: "seq"},
           "labels": {0: "batch", 1: "seq"},
           "logits": {0: "batch", 1: "seq"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, path, dynamo=False, opset_version=17,
                          input_names=INPUT_NAMES, output_names=OUTPUT_NAMES, dynamic_axes=dyn,
                          export_params=True, do_constant_folding=constant_folding,
                          training=torch.onnx.TrainingMode.EVAL)


def export_dynamo(model, args, max_batch, max_seq):
    """dynamo exporter, opset 18, optimize=False, batch in [1, max_batch] and seq in [2, max_seq]
    symbolic; when the model does not export with symbolic shapes, static ones.  Returns
    (ONNXProgram, dynamic: bool, note: why it is static, or "")."""
    from torch.export import Dim
    batch = Dim("batch", min=1, max=max_batch)
    seq = Dim("seq", min=2, max=max_seq)
    ds = {"input_ids": {0: batch, 1: seq}, "labels": {0: batch, 1: seq}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            prog = torch.onnx.export(model, args, dynamo=True, opset_version=18,
                                     input_names=INPUT_NAMES, output_names=OUTPUT_NAMES,
                                     dynamic_shapes=ds, optimize=False, verbose=False)
            return prog, True, ""
        except Exception as e:
            note = f"dynamic export failed ({type(e).__name__}: {str(e).splitlines()[0][:160]}); static"
            prog = torch.onnx.export(model, args, dynamo=True, opset_version=18,
                                     input_names=INPUT_NAMES, output_names=OUTPUT_NAMES,
                                     optimize=False, verbose=False)
            return prog, False, note


def export_dynamo_pair(model, args, path_noopt, path_opt, max_batch, max_seq, strip=False):
    """export_dynamo, saved to path_noopt; then onnxscript's optimizer on the same program, saved
    to path_opt (exactly what optimize=True does inside torch.onnx.export).  Returns
    (dynamic, note) as export_dynamo does."""
    prog, dynamic, note = export_dynamo(model, args, max_batch, max_seq)
    save_program(prog, path_noopt, strip)
    prog.optimize()
    save_program(prog, path_opt, strip)
    return dynamic, note


def save_program(prog, path, strip=False):
    """Saves an ONNXProgram to `path` with its weights in `path`.data (replacing both).  With
    strip, drops the exporter's stack traces (strip_host_paths) so that the bytes do not depend on
    where the script runs."""
    for p in (path, path + ".data"):
        if os.path.exists(p):
            os.remove(p)
    prog.save(path, external_data=True)
    if strip:
        assert os.path.exists(path + ".data"), "external data file missing"
        strip_host_paths(path)


def strip_host_paths(path):
    """The dynamo exporter stores a Python stack trace per node (metadata_props
    "pkg.torch.onnx.stack_trace") with absolute host paths: drop it so that the bytes do not depend
    on where the script runs.  Everything else (namespace, class_hierarchy, fx_node, name_scopes) is
    kept.  The external-data references are left untouched."""
    import onnx
    m = onnx.load(path, load_external_data=False)

    def strip(props):
        keep = [p for p in props if p.key != "pkg.torch.onnx.stack_trace"]
        del props[:]
        props.extend(keep)

    for g in all_graphs(m.graph):
        for n in g.node:
            strip(n.metadata_props)
        for v in list(g.value_info) + list(g.input) + list(g.output) + list(g.initializer):
            strip(v.metadata_props)
    for f in m.functions:
        for n in f.node:
            strip(n.metadata_props)
    strip(m.metadata_props)
    onnx.save(m, path)


def all_graphs(graph):
    """`graph` and, recursively, every subgraph held by its nodes' attributes (If, Loop, Scan)."""
    import onnx
    yield graph
    for n in graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from all_graphs(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sg in a.graphs:
                    yield from all_graphs(sg)
