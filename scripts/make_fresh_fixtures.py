#!/usr/bin/env python3
"""Fixtures of freshly initialised HuggingFace models, exported as users export them.

    python3 scripts/make_fresh_fixtures.py --out test/fixtures

A model straight from its config (HF's own init: N(0, 0.02) matrices, zero biases, unit norm
scales) has many equal-valued tensors, and both torch exporters merge them: TorchScript turns
them into Identity aliases of one initializer, the dynamo exporter's optimizer deduplicates
them and drops no-op consumers (Add of a zero bias).  tc must train each parameter on its own,
as PyTorch does (frontends/onnx/MergedParameters.h).  Writes, for gpt2 (GPT2LMHeadModel, tied
lm_head, Conv1D, biases) and llama (LlamaForCausalLM, GQA, rotary, RMSNorm, untied):

  fresh-<m>.ts.onnx                          TorchScript exporter, opset 17, dynamic axes
  fresh-<m>.dynamo.onnx + .onnx.data         dynamo exporter, optimize=True (the default)
  fresh-<m>.dynamo-noopt.onnx + .onnx.data   dynamo exporter, optimize=False
  fresh-<m>.input_ids.npy, fresh-<m>.labels.npy   int64 [2, 16]; labels = input_ids with two
                                             -100 (HF shifts the labels itself)
  fresh-<m>.ref.json                         the torch parameter names, the float64 AdamW
                                             trajectory (train_fp64.adamw.losses, 3 steps on that
                                             batch: lr 1e-2, betas 0.9/0.95, eps 1e-8, weight decay
                                             0.1 on every parameter), per export its initializer
                                             and Identity counts

Three kinds of node metadata that tc does not read are removed to keep the files small
(pkg.torch.onnx.stack_trace, with this machine's source paths, pkg.torch.onnx.class_hierarchy and
namespace: two thirds of a dynamo file's bytes); what tc reads (pkg.torch.onnx.fx_node,
name_scopes, the graph signature, folded_from) is kept as exported.  Same model sizes as scripts/make_hf_models.py.
CPU only, about a minute.
"""
import argparse
import json
import os
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_hf_models as H  # noqa: E402

MODELS = ("gpt2", "llama")
SEED = 2024
UNREAD_METADATA = ("pkg.torch.onnx.stack_trace", "pkg.torch.onnx.class_hierarchy", "namespace")


def fresh_model(name):
    cfg_cls, model_cls, kw = H.configs()[name]
    cfg = cfg_cls(**dict(kw, vocab_size=H.VOCAB, use_cache=False))
    torch.manual_seed(SEED + sum(map(ord, name)))
    model = model_cls._from_config(cfg, attn_implementation="sdpa", dtype=torch.float32)
    model.eval()
    return H.LossLogits(model, causal=True)


def strip_stack_traces(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    for n in m.graph.node:
        keep = [p for p in n.metadata_props if p.key not in UNREAD_METADATA]
        del n.metadata_props[:]
        n.metadata_props.extend(keep)
    onnx.save(m, path)


def describe(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    g = m.graph
    floats = [i.name for i in g.initializer if i.data_type in (1, 10, 11, 16) and len(i.dims) > 0]
    idents = sum(1 for n in g.node if n.op_type == "Identity" and n.input and n.input[0] in set(floats))
    return dict(file=os.path.basename(path), float_initializers=len(floats), identity_aliases=idents)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "test", "fixtures"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    warnings.simplefilter("ignore")
    for name in MODELS:
        base = os.path.join(args.out, f"fresh-{name}")
        model = fresh_model(name)
        ids, labels = H.make_batch(name)
        np.save(base + ".input_ids.npy", ids.numpy())
        np.save(base + ".labels.npy", labels.numpy())
        params = [n for n, _ in model.named_parameters()]
        ref = dict(model=name, init="transformers default (fresh)", torch=torch.__version__,
                   params=params, num_params=sum(p.numel() for p in model.parameters()),
                   train_fp64=dict(adamw=dict(config=H.ADAMW, losses=H.adamw_trajectory(model, ids, labels))),
                   exports={})
        model.mask = True          # TorchScript needs an explicit attention_mask (see LossLogits)
        H.export_ts(model, (ids, labels), base + ".ts.onnx")
        model.mask = False
        H.export_dynamo(model, (ids, labels), base + ".dynamo-noopt.onnx", base + ".dynamo.onnx")
        for mode in ("ts", "dynamo", "dynamo-noopt"):
            path = f"{base}.{mode}.onnx"
            if mode != "ts":
                strip_stack_traces(path)
            ref["exports"][mode] = describe(path)
        with open(base + ".ref.json", "w") as f:
            json.dump(ref, f, indent=1)
        print(f"fresh-{name}: {len(params)} parameters, adamw {ref['train_fp64']['adamw']['losses']}, "
              + ", ".join(f"{k}: {v['float_initializers']} initializers / {v['identity_aliases']} aliases"
                          for k, v in ref["exports"].items()))


if __name__ == "__main__":
    main()
