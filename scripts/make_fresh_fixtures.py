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
  fresh-llama.dynamo-op23.onnx + .onnx.data  llama only: dynamo exporter at opset_version=23, which
                                             writes ONNX's own Attention, RMSNormalization and
                                             RotaryEmbedding ops (same model, same trajectory)
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
import onnx_export  # noqa: E402

MODELS = ("gpt2", "llama")
SEED = 2024
# Node metadata tc does not read, dropped with the stack traces (see the docstring).
UNREAD_METADATA = ("pkg.torch.onnx.class_hierarchy", "namespace")


def fresh_model(name):
    cfg_cls, model_cls, kw = H.configs()[name]
    cfg = cfg_cls(**dict(kw, vocab_size=H.VOCAB, use_cache=False))
    torch.manual_seed(SEED + sum(map(ord, name)))
    model = model_cls._from_config(cfg, attn_implementation="sdpa", dtype=torch.float32)
    model.eval()
    return H.LossLogits(model, causal=True)


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
    ap.add_argument("--padded-sdpa-only", action="store_true",
                    help="write only fresh-padded-gpt2-sdpa (the other fixtures keep their bytes)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    warnings.simplefilter("ignore")
    if args.padded_sdpa_only:
        padded_sdpa_fixture(args.out)
        return
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
        modes = ["ts", "dynamo", "dynamo-noopt"]
        if name == "llama":
            prog, dynamic, note = onnx_export.export_dynamo(model, (ids, labels), max_batch=64, max_seq=64,
                                                            opset=23, optimize=True)
            assert dynamic, note
            onnx_export.save_program(prog, base + ".dynamo-op23.onnx")
            modes.append("dynamo-op23")
        for mode in modes:
            path = f"{base}.{mode}.onnx"
            if mode != "ts":
                onnx_export.strip_host_paths(path, also=UNREAD_METADATA)
            ref["exports"][mode] = describe(path)
        with open(base + ".ref.json", "w") as f:
            json.dump(ref, f, indent=1)
        print(f"fresh-{name}: {len(params)} parameters, adamw {ref['train_fp64']['adamw']['losses']}, "
              + ", ".join(f"{k}: {v['float_initializers']} initializers / {v['identity_aliases']} aliases"
                          for k, v in ref["exports"].items()))
    padded_fixture(args.out)
    padded_sdpa_fixture(args.out)


class Padded(torch.nn.Module):
    """forward(input_ids, attention_mask, labels) -> (loss, logits) around a HF causal LM."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, labels):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels,
                         use_cache=False, return_dict=True)
        return out.loss, out.logits


def padded_batch(family, base):
    """The padded batch of a fixture (row 0 left-padded by 3, row 1 right-padded by 4, labels
    -100 at the padding), written to BASE.{input_ids,attention_mask,labels}.npy."""
    ids, _ = H.make_batch(family)
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    mask[1, -4:] = 0
    labels = ids.masked_fill(mask == 0, -100)
    for n, t in (("input_ids", ids), ("attention_mask", mask), ("labels", labels)):
        np.save(f"{base}.{n}.npy", t.numpy())
    return ids, mask, labels


def train_fp32(model, ids, mask, labels):
    """PyTorch's float32 AdamW losses (H.ADAMW, H.ADAMW_STEPS) from a copy of `model`."""
    import copy
    m32 = copy.deepcopy(model)
    m32.train()
    opt = torch.optim.AdamW(m32.parameters(), **H.ADAMW)
    losses = []
    for _ in range(H.ADAMW_STEPS):
        opt.zero_grad(set_to_none=True)
        loss, _ = m32(ids, mask, labels)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    return losses


def padded_model(family, seed, attn):
    """A fresh HF model of `family` (float32, `attn` attention) wrapped as Padded."""
    cfg_cls, model_cls, kw = H.configs()[family]
    cfg = cfg_cls(**dict(kw, vocab_size=H.VOCAB, use_cache=False))
    torch.manual_seed(seed)
    return Padded(model_cls._from_config(cfg, attn_implementation=attn, dtype=torch.float32)).eval()


def write_padded_ref(base, what, model, batch, losses):
    """BASE.ref.json: the float32 loss of the padded batch and PyTorch's AdamW losses."""
    with torch.no_grad():
        l32 = model(*batch)[0].item()
    ref = dict(model=what, torch=torch.__version__, loss_fp32=l32,
               params=[n for n, _ in model.named_parameters()],
               train_fp32=dict(adamw=dict(config=H.ADAMW, losses=losses)))
    with open(base + ".ref.json", "w") as f:
        json.dump(ref, f, indent=1)
    print(f"{os.path.basename(base)}: loss {l32:.6f}, adamw {losses}")


PADDED_NAMES = ["input_ids", "attention_mask", "labels"]


def padded_export(out, family, seed, attention, name, description, dynamo):
    """A fresh `family` model with `attention` fed the padded batch: TorchScript export, and the
    dynamo one when `dynamo`, then PyTorch's float32 AdamW trajectory as NAME.ref.json."""
    model = padded_model(family, seed, attention)
    base = os.path.join(out, name)
    batch = padded_batch(family, base)
    # float32: in float64 HF's eager mask (finfo(float64).min) gives NaN losses here.
    losses = train_fp32(model, *batch)
    # torch's default constant folding; the logits keep their static shape.
    onnx_export.export_torchscript(model, batch, base + ".ts.onnx", constant_folding=True,
                                   input_names=PADDED_NAMES, dynamic_outputs=())
    if dynamo:
        prog, dynamic, note = onnx_export.export_dynamo(model, batch, max_batch=64, max_seq=64,
                                                        input_names=PADDED_NAMES, optimize=True)
        assert dynamic, note
        onnx_export.save_program(prog, base + ".dynamo.onnx")
        onnx_export.strip_host_paths(base + ".dynamo.onnx", also=UNREAD_METADATA)
    write_padded_ref(base, description, model, batch, losses)


def padded_fixture(out):
    padded_export(out, "llama", SEED + 77, "eager", "fresh-padded-llama",
                  "llama (eager attention, padded batch)", dynamo=True)


def padded_sdpa_fixture(out):
    """GPT-2 with SDPA attention and the same padded batch, TorchScript export only: HF hands SDPA a
    boolean mask, the exporter writes it as a -inf fill with torch's isnan guard, so a query that sees
    no key (the left padding) attends to nothing (zeros), as PyTorch's SDPA computes, where the eager
    fixture's finfo.min averages every value. (The dynamo exporter writes HF's SDPA mask as finfo.min,
    the eager semantics, which differs from PyTorch's own SDPA on such rows.)"""
    padded_export(out, "gpt2", SEED + 78, "sdpa", "fresh-padded-gpt2-sdpa",
                  "gpt2 (sdpa attention, padded batch)", dynamo=False)


if __name__ == "__main__":
    main()
