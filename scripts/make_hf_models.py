#!/usr/bin/env python3
"""Export tiny random-weight HuggingFace models to ONNX, the way users do, and (optionally) check them
with tc.

    python3 scripts/make_hf_models.py --out /tmp/hf-models              # export (about 2 minutes)
    python3 scripts/make_hf_models.py --out /tmp/hf-models --check build/bin   # + run tc on each
    python3 scripts/make_hf_models.py --out /tmp/hf-models --only llama-eager --check build/bin

Nothing here is downloaded: every model is built from its transformers config class with random
weights (seeded).  Models (vocab 256, hidden 32-64, 2 layers, batch 2 x 16 tokens, dropout off):

  gpt2      GPT2LMHeadModel (tied lm_head, Conv1D)
  llama     LlamaForCausalLM (GQA: 4 query heads, 2 kv heads; tied=False)
  mistral   MistralForCausalLM (GQA, sliding window larger than the sequence)
  qwen2     Qwen2ForCausalLM (GQA, q/k/v biases)
  neox      GPTNeoXForCausalLM (partial rotary, parallel residual, fused qkv)
  phi       PhiForCausalLM (partial rotary, parallel attn/mlp, biases, gelu_new)
  bert      BertForMaskedLM (bidirectional, token_type/position buffers, unshifted MLM loss)

each with attn_implementation "eager" and "sdpa", wrapped as forward(input_ids, labels) -> (loss, logits)
(HF computes the shifted causal-LM loss itself; use_cache=False), and exported three (four) ways:

  <m>-<attn>.ts.onnx                         TorchScript exporter (dynamo=False), opset 17, dynamic
                                             batch/seq axes, default do_constant_folding (as users do);
                                             an all-ones attention_mask is passed (see LossLogits)
  <m>-<attn>.dynamo.onnx + .onnx.data        dynamo exporter, opset 18, optimize=True, external data
  <m>-<attn>.dynamo-noopt.onnx + .onnx.data  dynamo exporter, opset 18, optimize=False, external data
  <m>-<attn>.dynamo-static.onnx + .data      with --static: dynamo, static shapes, optimize=True

plus <m>.input_ids.npy, <m>.labels.npy (int64 [2,16], a few labels -100) and <m>-<attn>.ref.json: the
PyTorch losses in float32 and float64, the float64 AdamW trajectory (3 steps on that batch,
lr 1e-2, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on every parameter), the model's floating-point
buffers, and per export the initializers that hold torch parameters (by value: the tensor, its
transpose, or consecutive rows of it).  An export that fails is recorded in the ref.json with its
error.  The float64 reference computes the loss itself (HF's loss casts the logits to float32).

--check BIN runs, for every export: tc-compile (eval artifact) + tc-run --eval (loss vs the float32
PyTorch loss, 1e-4 relative), tc-compile --train --optimizer adamw + tc-run --steps 3 --ref-precision
f64 (loss trajectory vs PyTorch float64), once with --trainable naming exactly the initializers that
hold torch parameters and once with no trainability flags (what a user gets), and prints a table
(also written to OUT/check.json).  Only the CPU is used.
"""

import argparse
import copy
import json
import os
import re
import subprocess
import sys
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_export  # noqa: E402
from onnx_export import export_dynamo_pair, export_torchscript, save_program  # noqa: E402

VOCAB = 256
BATCH = 2
SEQ = 16
SEED = 4321
ADAMW = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
ADAMW_STEPS = 3
REL_TOL = 1e-4


def configs():
    import transformers as T
    common = dict(vocab_size=VOCAB, use_cache=False)
    return {
        "gpt2": (T.GPT2Config, T.GPT2LMHeadModel,
                 dict(n_embd=32, n_layer=2, n_head=4, n_positions=64, n_inner=64,
                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)),
        "llama": (T.LlamaConfig, T.LlamaForCausalLM,
                  dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=False)),
        "mistral": (T.MistralConfig, T.MistralForCausalLM,
                    dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=64, sliding_window=32,
                         tie_word_embeddings=False)),
        "qwen2": (T.Qwen2Config, T.Qwen2ForCausalLM,
                  dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True)),
        "neox": (T.GPTNeoXConfig, T.GPTNeoXForCausalLM,
                 dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      max_position_embeddings=64, rotary_pct=0.5, hidden_dropout=0.0, attention_dropout=0.0,
                      tie_word_embeddings=False)),
        "phi": (T.PhiConfig, T.PhiForCausalLM,
                dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                     max_position_embeddings=64, partial_rotary_factor=0.5, resid_pdrop=0.0,
                     embd_pdrop=0.0, attention_dropout=0.0)),
        "bert": (T.BertConfig, T.BertForMaskedLM,
                 dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      max_position_embeddings=64, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0)),
    }


class LossLogits(torch.nn.Module):
    """forward(input_ids, labels) -> (loss, logits) around a HF *ForCausalLM / *ForMaskedLM.

    mask=True passes an all-ones attention_mask (made from input_ids): without one, transformers 5
    looks for packed sequences with torch.diff, which the TorchScript exporter cannot export.
    HF's loss casts the logits to float32 (loss_utils: logits.float()), so the float64 reference
    (own_loss=True) computes the same loss itself, in float64."""

    def __init__(self, model, causal):
        super().__init__()
        self.model = model
        self.causal = causal
        self.mask = False
        self.own_loss = False

    def forward(self, input_ids, labels):
        kw = dict(attention_mask=torch.ones_like(input_ids)) if self.mask else {}
        if not self.own_loss:
            out = self.model(input_ids=input_ids, labels=labels, use_cache=False, return_dict=True, **kw)
            return out.loss, out.logits
        logits = self.model(input_ids=input_ids, use_cache=False, return_dict=True, **kw).logits
        if self.causal:
            lg, lb = logits[:, :-1, :], labels[:, 1:]
        else:
            lg, lb = logits, labels
        loss = torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), lb.reshape(-1), ignore_index=-100)
        return loss, logits


def make_model(name, attn):
    cfg_cls, model_cls, kw = configs()[name]
    kw = dict(kw, vocab_size=VOCAB)
    if name != "bert":
        kw["use_cache"] = False
    cfg = cfg_cls(**kw)
    torch.manual_seed(SEED + sum(map(ord, name)))
    model = model_cls._from_config(cfg, attn_implementation=attn, torch_dtype=torch.float32)
    # HF's init is N(0, 0.02): the logits are then all ~0 and the loss is ln V for every model, which
    # hides mistakes.  Larger random weights (norm weights kept near 1) make the loss model-specific.
    g = torch.Generator().manual_seed(SEED + 7 * sum(map(ord, name)))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.dim() == 1 and ("norm" in n.lower() or "ln" in n.lower()) and n.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
    model.eval()
    return LossLogits(model, causal=(name != "bert"))


def make_batch(name):
    g = torch.Generator().manual_seed(SEED + 1)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    if name == "bert":       # masked LM: labels are the ids at a few positions, -100 elsewhere
        labels = torch.full((BATCH, SEQ), -100, dtype=torch.long)
        pos = torch.randperm(SEQ, generator=g)[:5]
        labels[:, pos] = ids[:, pos]
    else:                    # causal LM: HF shifts itself, so labels = input_ids (some ignored)
        labels = ids.clone()
        labels[0, 3] = -100
        labels[1, -2] = -100
    return ids, labels


def float_buffers(model):
    return sorted(n for n, b in model.named_buffers() if b.is_floating_point())


def to_f64(model):
    m = copy.deepcopy(model).double()
    m.own_loss = True
    return m


def adamw_trajectory(model, ids, labels):
    m = to_f64(model)
    m.train()   # dropout is 0 everywhere
    opt = torch.optim.AdamW(m.parameters(), **ADAMW)
    losses = []
    for _ in range(ADAMW_STEPS):
        opt.zero_grad(set_to_none=True)
        loss, _ = m(ids, labels)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    return losses


def export_ts(model, args, path):
    """TorchScript export with torch's default do_constant_folding (as users do)."""
    export_torchscript(model, args, path, constant_folding=True)


def export_dynamo(model, args, path_noopt, path_opt):
    """Exports once without the optimizer, saves, then optimizes the same program and saves again
    (what optimize=True does inside torch.onnx.export).  Returns why the shapes are static, or ""."""
    _, note = export_dynamo_pair(model, args, path_noopt, path_opt, max_batch=64, max_seq=64)
    return note


def trainable_initializers(path, model):
    """The ONNX initializers of `path` that hold a torch parameter (the same values, or the transpose
    of a matrix: exporters fold Linear's Transpose(W) into a new initializer).  Everything else that
    is floating point (buffers, folded constants such as the optimizer's val_N) must be frozen to
    train like PyTorch."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path, load_external_data=True)
    params = [p.detach().numpy() for p in model.parameters()]
    names = []
    # tc names a weight that onnxscript's optimizer stored transposed (val_N, folded_from ['W'])
    # after the torch parameter W again (frontends/onnx/MergedParameters.h).
    inits = {i.name for i in m.graph.initializer}
    restored = {}
    for vi in m.graph.value_info:
        for p in vi.metadata_props:
            if p.key == "pkg.onnxscript.optimizer.folded_from":
                src = re.findall(r"'([^']*)'", p.value)
                if vi.name in inits and len(src) == 1 and src[0] not in inits:
                    restored[vi.name] = src[0]
    for init in m.graph.initializer:
        a = numpy_helper.to_array(init)
        if a.dtype.kind != "f":
            continue
        for p in params:
            if (a.shape == p.shape and np.array_equal(a, p)) or \
               (a.ndim == 2 and a.shape == p.shape[::-1] and np.array_equal(a, p.T)) or \
               rows_of(a, p):
                names.append(restored.get(init.name, init.name))
                break
    return names


def rows_of(a, p):
    """Whether `a` holds consecutive rows of the matrix `p` (a static export folds the position
    embedding's Gather(wpe, arange(T)) into such a slice)."""
    if p.ndim != 2 or a.ndim < 2 or a.shape[-1] != p.shape[1]:
        return False
    a2 = a.reshape(-1, p.shape[1])
    if a2.shape[0] > p.shape[0]:
        return False
    for k in np.nonzero((p == a2[0]).all(axis=1))[0]:
        if k + a2.shape[0] <= p.shape[0] and np.array_equal(p[k:k + a2.shape[0]], a2):
            return True
    return False


def export_static(model, args, path):
    """dynamo exporter without dynamic_shapes (what torch.onnx.export(..., dynamo=True) does by default),
    optimize=True: onnxscript then folds the causal mask and the rotary cos/sin tables into initializers."""
    prog, _, _ = onnx_export.export_dynamo(model, args, optimize=True)
    save_program(prog, path)


def export_all(out, names, attns, log, static=False):
    os.makedirs(out, exist_ok=True)
    for name in names:
        ids, labels = make_batch(name)
        np.save(os.path.join(out, f"{name}.input_ids.npy"), ids.numpy())
        np.save(os.path.join(out, f"{name}.labels.npy"), labels.numpy())
        for attn in attns:
            key = f"{name}-{attn}"
            ref = {"model": name, "attn_implementation": attn, "exports": {}}
            t0 = time.time()
            try:
                model = make_model(name, attn)
            except Exception as e:
                ref["error"] = f"{type(e).__name__}: {e}"
                log(f"[{key}] model: {ref['error']}")
                json.dump(ref, open(os.path.join(out, f"{key}.ref.json"), "w"), indent=1)
                continue
            with torch.no_grad():
                l32, _ = model(ids, labels)
                l64, _ = to_f64(model)(ids, labels)
            ref.update(loss_fp32=l32.item(), loss_fp64=l64.item(), float_buffers=float_buffers(model),
                       adamw=ADAMW, adamw_fp64=adamw_trajectory(model, ids, labels),
                       input_ids=f"{name}.input_ids.npy", labels=f"{name}.labels.npy",
                       params=sum(p.numel() for p in model.parameters()))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for mode in ("ts", "dynamo") + (("dynamo-static",) if static else ()):
                    path = os.path.join(out, f"{key}.{mode}.onnx")
                    path_noopt = os.path.join(out, f"{key}.dynamo-noopt.onnx")
                    t1 = time.time()
                    try:
                        note = ""
                        if mode == "dynamo-static":
                            export_static(model, (ids, labels), path)
                        elif mode == "ts":
                            model.mask = True
                            try:
                                export_ts(model, (ids, labels), path)
                            finally:
                                model.mask = False
                        else:
                            note = export_dynamo(model, (ids, labels), path_noopt, path)
                            ref["exports"]["dynamo-noopt"] = dict(file=os.path.basename(path_noopt), note=note)
                        ref["exports"][mode] = dict(file=os.path.basename(path), note=note)
                        for k in ([mode] if mode != "dynamo" else ["dynamo", "dynamo-noopt"]):
                            e = ref["exports"][k]
                            e["trainable"] = trainable_initializers(os.path.join(out, e["file"]), model)
                        log(f"[{key}] {mode}: {time.time() - t1:.1f}s {note}")
                    except Exception as e:
                        msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"
                        ref["exports"][mode] = dict(error=msg)
                        if mode == "dynamo" and "dynamo-noopt" not in ref["exports"]:
                            ref["exports"]["dynamo-noopt"] = dict(error=msg)
                        log(f"[{key}] {mode}: EXPORT FAILED {msg}")
            log(f"[{key}] loss fp32 {l32.item():.6f} fp64 {l64.item():.10f} adamw {ref['adamw_fp64']} "
                f"({time.time() - t0:.1f}s)")
            json.dump(ref, open(os.path.join(out, f"{key}.ref.json"), "w"), indent=1)


# ----------------------------------------------------------------------------------------------
# --check: run tc on every export

def run(cmd, timeout=300):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.time() - t0
    except subprocess.TimeoutExpired:
        return 124, "", "timeout", time.time() - t0


def first_error(stderr):
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    err = [l for l in lines if "error" in l]
    return (err or lines or ["(no message)"])[0][:200]


def metric_losses(path):
    out = []
    if os.path.exists(path):
        for line in open(path):
            out.append(json.loads(line)["loss"])
    return out


# --compile-flag: appended to every tc-compile command of --check (e.g.
# --target=sm_90 --experimental=wgmma-attention: the artifact's reference program, run on the CPU).
COMPILE_FLAGS = []


def train_check(cc, rr, onnx_path, shapes, feeds, ref, flags, base):
    """tc-compile --train (AdamW as in the reference) + ADAMW_STEPS float64 steps: (text, ok)."""
    a = ref["adamw"]
    rc, so, se, dt = run([cc, onnx_path, *shapes, "--train", "--optimizer", "adamw",
                          "--lr", str(a["lr"]), "--beta1", str(a["betas"][0]),
                          "--beta2", str(a["betas"][1]), "--eps", str(a["eps"]),
                          "--weight-decay", str(a["weight_decay"]), *flags, *COMPILE_FLAGS,
                          "-o", base + ".tca"])
    if rc != 0:
        return f"compile rc={rc}: {first_error(se)}", False
    mfile = base + ".jsonl"
    if os.path.exists(mfile):
        os.remove(mfile)
    rc, so, se, dt = run([rr, base + ".tca", "--steps", str(ADAMW_STEPS), *feeds,
                          "--ref-precision", "f64", "--metrics", mfile])
    ls = metric_losses(mfile)
    if rc != 0 or len(ls) != ADAMW_STEPS:
        return f"run rc={rc}: {first_error(se)}", False
    refl = ref["adamw_fp64"]
    rel = max(abs(x - y) / abs(y) for x, y in zip(ls, refl))
    ok = rel <= REL_TOL
    return (" ".join(f"{x:.5f}" for x in ls) + " (torch " + " ".join(f"{y:.5f}" for y in refl) +
            f") rel {rel:.1e}" + ("" if ok else " MISMATCH")), ok


def check_all(out, bindir, names, attns, log):
    cc, rr = os.path.join(bindir, "tc-compile"), os.path.join(bindir, "tc-run")
    rows = []
    work = os.path.join(out, "tc")
    os.makedirs(work, exist_ok=True)
    for name in names:
        for attn in attns:
            key = f"{name}-{attn}"
            rp = os.path.join(out, f"{key}.ref.json")
            if not os.path.exists(rp):
                continue
            ref = json.load(open(rp))
            for e in ref.get("exports", {}).values():   # recomputed: tc's names may have changed
                if "file" in e:
                    e["trainable"] = trainable_initializers(os.path.join(out, e["file"]), make_model(name, attn))
            feeds = ["--feed", f"input_ids={os.path.join(out, ref.get('input_ids', ''))}",
                     "--feed", f"labels={os.path.join(out, ref.get('labels', ''))}"]
            shapes = ["--input", f"input_ids={BATCH}x{SEQ}", "--input", f"labels={BATCH}x{SEQ}"]
            for mode, e in ref.get("exports", {}).items():
                row = {"model": key, "export": mode}
                rows.append(row)
                if "error" in e:
                    row["import"] = "export failed: " + e["error"][:100]
                    continue
                onnx_path = os.path.join(out, e["file"])
                base = os.path.join(work, f"{key}.{mode}")
                rc, so, se, dt = run([cc, onnx_path, *shapes, *COMPILE_FLAGS, "-o", base + ".tca"])
                if rc != 0:
                    row["import"] = f"rc={rc}: {first_error(se)}"
                    continue
                row["import"] = "ok"
                mfile = base + ".eval.jsonl"
                if os.path.exists(mfile):
                    os.remove(mfile)
                rc, so, se, dt = run([rr, base + ".tca", "--eval", *feeds, "--metrics", mfile])
                ls = metric_losses(mfile)
                if rc != 0 or not ls:
                    row["eval"] = f"rc={rc}: {first_error(se)}"
                    continue
                rel = abs(ls[0] - ref["loss_fp32"]) / abs(ref["loss_fp32"])
                row["eval"] = f"{ls[0]:.6f} vs {ref['loss_fp32']:.6f} rel {rel:.1e}" + \
                              ("" if rel <= REL_TOL else " MISMATCH")
                row["eval_ok"] = rel <= REL_TOL
                # training: AdamW, float64, 3 steps on the fixed batch
                # "train": only the initializers that hold torch parameters are trained
                # (--trainable per name); "train_default": no trainability flags at all,
                # what a user gets (buffers and folded constants may then be trained).
                # One alternation: a tied copy (onnx::MatMul_N = wte^T) is no parameter of
                # tc's, and a --trainable regex that matches nothing is an error.
                names = e.get("trainable", [])
                named = ["--trainable", "^(" + "|".join(re.escape(t) for t in names) + ")$"] if names else []
                for col, flags in (("train", named), ("train_default", [])):
                    msg, ok = train_check(cc, rr, onnx_path, shapes, feeds, ref, flags, f"{base}.{col}")
                    row[col], row[col + "_ok"] = msg, ok
            log("\n".join(f"{r['model']:14s} {r['export']:13s} import: {r.get('import')}  eval: {r.get('eval', '-')}"
                          f"\n{'':28s} train: {r.get('train', '-')}"
                          f"\n{'':28s} train (no flags): {r.get('train_default', '-')}"
                          for r in rows if r["model"] == key))
    json.dump(rows, open(os.path.join(out, "check.json"), "w"), indent=1)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="/tmp/hf-models")
    ap.add_argument("--only", action="append", default=[],
                    help="model or model-attn to do (repeatable), e.g. llama or llama-sdpa")
    ap.add_argument("--no-export", action="store_true", help="only --check what is already in --out")
    ap.add_argument("--static", action="store_true",
                    help="also <m>-<attn>.dynamo-static.onnx: dynamo, no dynamic_shapes, optimize=True")
    ap.add_argument("--check", metavar="BIN", help="folder with tc-compile and tc-run: run tc on every export")
    ap.add_argument("--compile-flag", action="append", default=[], metavar="FLAG",
                    help="with --check: pass FLAG to every tc-compile (repeatable), e.g. "
                         "--compile-flag=--target=sm_90 --compile-flag=--experimental=wgmma-attention "
                         "(the reference program of a GPU artifact runs on the CPU)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    logging_quiet()
    names = list(configs().keys())
    attns = ["eager", "sdpa"]
    if a.only:
        names = [n for n in names if any(o == n or o.startswith(n + "-") for o in a.only)]
        want = {o.split("-", 1)[1] for o in a.only if "-" in o}
        if want:
            attns = [x for x in attns if x in want]

    def log(s):
        print(s, flush=True)

    t0 = time.time()
    if not a.no_export:
        export_all(a.out, names, attns, log, static=a.static)
        log(f"exports done in {time.time() - t0:.0f}s -> {a.out}")
    if a.check:
        COMPILE_FLAGS.extend(a.compile_flag)
        rows = check_all(a.out, a.check, names, attns, log)
        bad = [r for r in rows if r.get("import") != "ok" or not r.get("eval_ok") or not r.get("train_ok")]
        log(f"{len(rows) - len(bad)} of {len(rows)} exports import, evaluate and train like PyTorch")
        n = sum(1 for r in rows if r.get("train_default_ok"))
        log(f"{n} of {len(rows)} also train like PyTorch without --trainable/--freeze")


def logging_quiet():
    import logging
    for n in ("torch.onnx", "torch.export", "onnxscript", "transformers", "torch._dynamo"):
        logging.getLogger(n).setLevel(logging.ERROR)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


if __name__ == "__main__":
    sys.exit(main())
