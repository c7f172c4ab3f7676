"""Exports a causal-LM `forward(input_ids, labels) -> (loss, logits)` module to ONNX the ways users
do: TorchScript (opset 17, dynamic batch/seq axes) and dynamo (opset 18, once without onnxscript's
optimizer and once with it, external data).  The one place that calls torch.onnx.export for
make_fixtures.py (the committed parity fixtures), make_fresh_fixtures.py, make_hf_models.py (tiny
HuggingFace models), export_hf.py, examples/tiny-gpt/make_model.py and bench/make_gpt2_onnx.py, so
that all test the same exports; what differs between them (names, bounds, opset, folding, the
optimizer) is a parameter.

Every call passes the same torch.onnx.export arguments the scripts passed before they shared
this module, so their outputs are unchanged.
"""

import os
import warnings

import torch

INPUT_NAMES = ["input_ids", "labels"]
OUTPUT_NAMES = ["loss", "logits"]


def export_torchscript(model, args, path, constant_folding=False, input_names=INPUT_NAMES,
                       output_names=OUTPUT_NAMES, dynamic_outputs=("logits",), training=False,
                       opset=17, dynamic=True):
    """TorchScript exporter, opset 17 unless `opset` says otherwise, weights embedded.  With
    `dynamic`, every input and each of `dynamic_outputs` that is an output get dynamic batch/seq
    axes (else every shape is the example's).  constant_folding=False keeps parameter names (with
    folding, Linear's MatMul(x, Transpose(W)) becomes a new initializer "onnx::MatMul_NNN" holding
    W^T); True is torch's default, what users get.  training=True exports in
    TrainingMode.TRAINING (the bench: see bench/make_gpt2_onnx.py), else EVAL."""
    dyn = None
    if dynamic:
        dyn = {n: {0: "batch", 1: "seq"} for n in input_names}
        dyn.update({n: {0: "batch", 1: "seq"} for n in output_names if n in dynamic_outputs})
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, path, dynamo=False, opset_version=opset,
                          input_names=input_names, output_names=output_names, dynamic_axes=dyn,
                          export_params=True, do_constant_folding=constant_folding,
                          training=mode)


def export_dynamo(model, args, max_batch=None, max_seq=None, input_names=INPUT_NAMES,
                  output_names=OUTPUT_NAMES, opset=18, optimize=False):
    """dynamo exporter, opset 18 unless `opset` says otherwise, onnxscript's optimizer when
    `optimize`; dim 0 (batch) of every input symbolic in [1, max_batch] and dim 1 (seq) in
    [2, max_seq], each static when its bound is None; when the model does not export with
    symbolic shapes, static ones.  Returns (ONNXProgram, dynamic: bool, note: why it is static,
    or "")."""
    from torch.export import Dim
    dims = {}
    if max_batch is not None:
        dims[0] = Dim("batch", min=1, max=max_batch)
    if max_seq is not None:
        dims[1] = Dim("seq", min=2, max=max_seq)
    # By position (a tuple, as `args`): the forward's parameter names need not be input_names.
    ds = tuple(dict(dims) for _ in args) if dims else None

    def export(dynamic_shapes):
        return torch.onnx.export(model, args, dynamo=True, opset_version=opset,
                                 input_names=input_names, output_names=output_names,
                                 dynamic_shapes=dynamic_shapes, optimize=optimize, verbose=False)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if ds is None:
            return export(None), False, ""
        try:
            return export(ds), True, ""
        except Exception as e:
            note = f"dynamic export failed ({type(e).__name__}: {str(e).splitlines()[0][:160]}); static"
            return export(None), False, note


def export_dynamo_pair(model, args, path_noopt, path_opt, max_batch, max_seq, strip=False):
    """export_dynamo, saved to path_noopt; then onnxscript's optimizer on the same program, saved
    to path_opt (exactly what optimize=True does inside torch.onnx.export).  Returns
    (dynamic, note) as export_dynamo does."""
    prog, dynamic, note = export_dynamo(model, args, max_batch=max_batch, max_seq=max_seq)
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


def weights_to_one_file(path):
    """Rewrites `path` so that every initializer, however small, lives in one file `path`.data
    beside it (replacing an existing one)."""
    import onnx
    data = os.path.basename(path) + ".data"
    folder = os.path.dirname(path)
    # The files the exporter wrote (above 2 GB torch writes one per tensor): removed once their
    # tensors are in `data`.
    bare = onnx.load(path, load_external_data=False)
    written = {e.value for g in all_graphs(bare.graph) for t in g.initializer
               for e in t.external_data if e.key == "location"} - {data}
    m = onnx.load(path)  # loads external data too, if the exporter wrote any
    full = os.path.join(folder, data)
    if os.path.exists(full):
        os.remove(full)  # onnx appends to an existing file
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data, size_threshold=0)
    for f in written:
        if os.path.isfile(os.path.join(folder, f)):
            os.remove(os.path.join(folder, f))


def strip_host_paths(path, also=()):
    """The dynamo exporter stores a Python stack trace per node (metadata_props
    "pkg.torch.onnx.stack_trace") with absolute host paths: drop it so that the bytes do not depend
    on where the script runs, and the metadata keys in `also` with it.  Everything else
    (namespace, class_hierarchy, fx_node, name_scopes unless `also` names them) is kept.  The
    external-data references are left untouched."""
    import onnx
    m = onnx.load(path, load_external_data=False)
    drop = {"pkg.torch.onnx.stack_trace", *also}

    def strip(props):
        keep = [p for p in props if p.key not in drop]
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
