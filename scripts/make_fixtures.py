#!/usr/bin/env python3
"""Generate the PyTorch -> ONNX parity fixtures for tc.

    python3 scripts/make_fixtures.py --out test/fixtures

Writes, for each tiny decoder model (gpt2, llama) written here as plain torch.nn
modules in the HuggingFace style:

  <m>.ts.onnx                         TorchScript exporter, opset 17, dynamic batch/seq, weights embedded
  <m>.dynamo.onnx + .onnx.data        dynamo exporter, opset 18, optimize=True, external data
  <m>.dynamo-noopt.onnx + .onnx.data  dynamo exporter, opset 18, optimize=False, external data
  <m>.input_ids.npy  <m>.labels.npy   int64 [2,16] batch (labels contain -100 = ignore_index)
  <m>.logits.npy                      float32 logits of the float32 torch model on that batch
  <m>.ref.json                        versions, losses (fp32, fp64), shapes, params, initializer
                                      names and op histograms per export, fp64 SGD/AdamW trajectories

and README.md describing them.  Everything is seeded; re-running gives the same bytes
(given the same torch/onnx/onnxscript versions).  CPU only; runs in well under 2 minutes.
"""

import argparse
import collections
import copy
import hashlib
import json
import logging
import math
import os
import platform
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_export import OUTPUT_NAMES, all_graphs, export_dynamo_pair, export_torchscript  # noqa: E402

# ----------------------------------------------------------------------------------------------
# configuration

VOCAB = 256
D_MODEL = 32
N_LAYER = 2
N_HEAD = 4
HEAD_DIM = D_MODEL // N_HEAD  # 8
N_KV_HEAD = 2                  # llama only (GQA, 2 query heads per kv head)
BATCH = 2
SEQ = 16
GPT2_N_POSITIONS = 32          # > SEQ so the causal-mask buffer and wpe really get sliced / gathered
GPT2_MLP = 4 * D_MODEL         # 128
LLAMA_MLP = 64
LLAMA_ROPE_THETA = 10000.0
LN_EPS = 1e-5
RMS_EPS = 1e-6
SEED = 1234
TRAIN_STEPS = 8
SGD_CFG = dict(lr=0.1, momentum=0.9)
ADAMW_CFG = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


# ----------------------------------------------------------------------------------------------
# gpt2 (HF GPT2LMHeadModel layout, nn.Linear instead of Conv1D)

class GPT2Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.n_head = N_HEAD
        self.head_dim = HEAD_DIM
        self.split_size = D_MODEL
        self.c_attn = nn.Linear(D_MODEL, 3 * D_MODEL)   # fused qkv
        self.c_proj = nn.Linear(D_MODEL, D_MODEL)
        n = GPT2_N_POSITIONS
        # HF: bool lower-triangular buffer, persistent=False
        self.register_buffer("bias", torch.tril(torch.ones((n, n), dtype=torch.bool)).view(1, 1, n, n),
                             persistent=False)

    def _split_heads(self, x):
        new_shape = x.size()[:-1] + (self.n_head, self.head_dim)
        return x.view(new_shape).permute(0, 2, 1, 3)      # (B, H, T, hd)

    def _merge_heads(self, x):
        x = x.permute(0, 2, 1, 3).contiguous()
        new_shape = x.size()[:-2] + (self.n_head * self.head_dim,)
        return x.view(new_shape)

    def forward(self, hidden_states):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query = self._split_heads(query)
        key = self._split_heads(key)
        value = self._split_heads(value)
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        attn_weights = attn_weights / math.sqrt(self.head_dim)
        q_len, k_len = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, k_len - q_len:k_len, :k_len]
        attn_weights = attn_weights.masked_fill(causal_mask == 0, float("-inf"))
        attn_weights = F.softmax(attn_weights, dim=-1)
        attn_output = torch.matmul(attn_weights, value)
        attn_output = self._merge_heads(attn_output)
        return self.c_proj(attn_output)


class GPT2MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(D_MODEL, GPT2_MLP)
        self.c_proj = nn.Linear(GPT2_MLP, D_MODEL)
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(D_MODEL, eps=LN_EPS)
        self.attn = GPT2Attention()
        self.ln_2 = nn.LayerNorm(D_MODEL, eps=LN_EPS)
        self.mlp = GPT2MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT2Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, D_MODEL)
        self.wpe = nn.Embedding(GPT2_N_POSITIONS, D_MODEL)
        self.h = nn.ModuleList([GPT2Block() for _ in range(N_LAYER)])
        self.ln_f = nn.LayerNorm(D_MODEL, eps=LN_EPS)

    def forward(self, input_ids):
        seq_len = input_ids.size(-1)
        position_ids = torch.arange(0, seq_len, dtype=torch.long, device=input_ids.device).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(position_ids)
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = GPT2Model()
        self.lm_head = nn.Linear(D_MODEL, VOCAB, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied: the same Parameter

    def forward(self, input_ids, labels):
        logits = self.lm_head(self.transformer(input_ids))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)
        return loss, logits


# ----------------------------------------------------------------------------------------------
# llama (HF LlamaForCausalLM layout)

class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=RMS_EPS):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps
        # HF upcasts to float32.  The float64 reference sets this to float64 so that it is float64
        # throughout (for a float32 model both are the same; the export always sees float32).
        self.upcast_dtype = torch.float32

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(self.upcast_dtype)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim=HEAD_DIM, base=LLAMA_ROPE_THETA):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        # persistent on purpose: it shows up as an ONNX initializer (a non-trainable buffer)
        self.register_buffer("inv_freq", inv_freq, persistent=True)
        self.compute_dtype = torch.float32   # HF computes cos/sin in float32; fp64 reference: float64

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].to(self.compute_dtype).expand(
            position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].to(self.compute_dtype)
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos()
        sin = emb.sin()
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class LlamaAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = HEAD_DIM
        self.num_heads = N_HEAD
        self.num_key_value_heads = N_KV_HEAD
        self.num_key_value_groups = N_HEAD // N_KV_HEAD
        self.q_proj = nn.Linear(D_MODEL, N_HEAD * HEAD_DIM, bias=False)
        self.k_proj = nn.Linear(D_MODEL, N_KV_HEAD * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(D_MODEL, N_KV_HEAD * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(N_HEAD * HEAD_DIM, D_MODEL, bias=False)

    def forward(self, hidden_states, position_embeddings):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_output = F.scaled_dot_product_attention(query_states, key_states, value_states, is_causal=True)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(*input_shape, -1)
        return self.o_proj(attn_output)


class LlamaMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(D_MODEL, LLAMA_MLP, bias=False)
        self.up_proj = nn.Linear(D_MODEL, LLAMA_MLP, bias=False)
        self.down_proj = nn.Linear(LLAMA_MLP, D_MODEL, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = LlamaAttention()
        self.mlp = LlamaMLP()
        self.input_layernorm = LlamaRMSNorm(D_MODEL)
        self.post_attention_layernorm = LlamaRMSNorm(D_MODEL)

    def forward(self, hidden_states, position_embeddings):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, position_embeddings)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states


class LlamaModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, D_MODEL)
        self.layers = nn.ModuleList([LlamaDecoderLayer() for _ in range(N_LAYER)])
        self.norm = LlamaRMSNorm(D_MODEL)
        self.rotary_emb = LlamaRotaryEmbedding()

    def forward(self, input_ids):
        hidden_states = self.embed_tokens(input_ids)
        position_ids = torch.arange(0, input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states, position_embeddings)
        return self.norm(hidden_states)


class LlamaForCausalLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = LlamaModel()
        self.lm_head = nn.Linear(D_MODEL, VOCAB, bias=False)   # untied

    def forward(self, input_ids, labels):
        logits = self.lm_head(self.model(input_ids))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)
        return loss, logits


# ----------------------------------------------------------------------------------------------
# helpers

def init_weights(model, seed):
    """std-0.02 normal for matrices/embeddings; non-trivial biases and norm weights so that a wrong
    broadcast or a dropped bias changes the loss."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():   # tied parameters are visited once
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
            elif name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
            else:  # LayerNorm / RMSNorm weight
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))


def set_reference_dtype(model, dtype):
    for m in model.modules():
        if isinstance(m, LlamaRMSNorm):
            m.upcast_dtype = dtype
        if isinstance(m, LlamaRotaryEmbedding):
            m.compute_dtype = dtype


def make_batch(seed, n_positions_limit):
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g, dtype=torch.int64)
    # pre-shifted next-token labels (the model does not shift), last position ignored, plus a few
    # random ignored positions to exercise ignore_index
    labels = torch.full((BATCH, SEQ), -100, dtype=torch.int64)
    labels[:, :-1] = input_ids[:, 1:]
    labels[0, 3] = -100
    labels[1, 0] = -100
    labels[1, 7] = -100
    return input_ids, labels


def train_trajectory(model_fp64, input_ids, labels, opt_name):
    model = copy.deepcopy(model_fp64)
    model.train()
    if opt_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), **SGD_CFG)
    else:
        opt = torch.optim.AdamW(model.parameters(), **ADAMW_CFG)
    losses = []
    for _ in range(TRAIN_STEPS):
        opt.zero_grad(set_to_none=True)
        loss, _ = model(input_ids, labels)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    with torch.no_grad():
        final = model(input_ids, labels)[0].item()
    return losses, final


def op_histogram(model_proto):
    c = collections.Counter()
    for g in all_graphs(model_proto.graph):
        for n in g.node:
            c[n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"] += 1
    return dict(sorted(c.items()))


def initializer_source(arr, tensors):
    """Which torch parameter/buffer an initializer holds, and how: identity, transpose (a folded
    Transpose(W), as constant folding produces for Linear weights) or reshape.  [] for other constants."""
    found = []
    for tname, t in tensors.items():
        if t.numel() != arr.size or t.numel() < 2:
            continue
        tn = t.detach().numpy()
        if tn.dtype != arr.dtype:
            continue
        if tn.shape == arr.shape and np.array_equal(tn, arr):
            found.append({"tensor": tname, "transform": "identity"})
        elif tn.ndim == 2 and tn.T.shape == arr.shape and np.array_equal(tn.T, arr):
            found.append({"tensor": tname, "transform": "transpose"})
        elif np.array_equal(tn.reshape(-1), arr.reshape(-1)):
            found.append({"tensor": tname, "transform": "reshape"})
    return found


def describe_onnx(path, tensors):
    """Summary dict of one ONNX file; tensors: name -> torch tensor (parameters and buffers)."""
    from onnx import numpy_helper
    m = onnx.load(path, load_external_data=False)
    full = onnx.load(path)  # with external data, for the values
    values = {t.name: numpy_helper.to_array(t) for t in full.graph.initializer}
    inits = []
    n_external = 0
    for t in m.graph.initializer:
        ext = t.data_location == onnx.TensorProto.EXTERNAL
        n_external += int(ext)
        inits.append({"name": t.name, "dtype": onnx.TensorProto.DataType.Name(t.data_type),
                      "shape": list(t.dims), "external": ext,
                      "holds": initializer_source(values[t.name], tensors)})

    def vi(v):
        dims = []
        for d in v.type.tensor_type.shape.dim:
            dims.append(d.dim_param if d.HasField("dim_param") else (d.dim_value if d.HasField("dim_value") else "?"))
        return {"name": v.name, "dtype": onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type),
                "shape": dims}

    return {
        "ir_version": m.ir_version,
        "opsets": {(o.domain or "ai.onnx"): o.version for o in m.opset_import},
        "producer": f"{m.producer_name} {m.producer_version}".strip(),
        "inputs": [vi(v) for v in m.graph.input],
        "outputs": [vi(v) for v in m.graph.output],
        "n_nodes": len(m.graph.node),
        "n_functions": len(m.functions),
        "initializers": inits,
        "n_external_initializers": n_external,
        "op_types": op_histogram(m),
    }


def check_and_run(path, input_ids, labels):
    """onnx.checker (path form, so external data works), strict shape inference, and onnxruntime /
    onnx.reference when available.  Returns a dict of results (not written to ref.json)."""
    res = {}
    onnx.checker.check_model(path, full_check=True)
    res["checker"] = "ok"
    feeds = {"input_ids": input_ids.numpy(), "labels": labels.numpy()}
    try:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        loss, logits = sess.run(OUTPUT_NAMES, feeds)
        res["ort"] = (float(loss), logits)
    except ImportError:
        res["ort"] = None
    try:
        from onnx.reference import ReferenceEvaluator
        ev = ReferenceEvaluator(path)
        loss, logits = ev.run(OUTPUT_NAMES, feeds)
        res["reference"] = (float(loss), logits)
    except Exception as e:  # the python reference lacks a few ops; not fatal
        res["reference"] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    return res


# ----------------------------------------------------------------------------------------------
# exports

# ----------------------------------------------------------------------------------------------

MODELS = {
    "gpt2": dict(cls=GPT2LMHeadModel, seed=SEED, max_seq=GPT2_N_POSITIONS,
                 desc="GPT-2 style: learned token+position embeddings, pre-LN blocks, fused qkv Linear + "
                      "split, bool tril causal-mask buffer (persistent=False) + masked_fill(-inf), manual "
                      "attention (matmul, /sqrt(hd), softmax), GELU(tanh), MLP 4x, final LN, lm_head tied "
                      "to wte (same Parameter)."),
    "llama": dict(cls=LlamaForCausalLM, seed=SEED + 1, max_seq=1024,
                  desc="Llama style: RMSNorm (HF form, upcast to float32), RoPE with persistent inv_freq "
                       "buffer and cos/sin computed from torch.arange positions, rotate_half, GQA (4 q "
                       "heads, 2 kv heads, repeat_kv = expand+reshape), F.scaled_dot_product_attention"
                       "(is_causal=True), SwiGLU MLP, untied lm_head, no biases."),
}


def versions(extra=False):
    """Versions that determine the outputs.  extra=True adds packages that do not (printed only, so
    that the fixtures do not change with whether onnxruntime / transformers happen to be installed)."""
    v = {"python": platform.python_version(), "torch": torch.__version__, "onnx": onnx.__version__,
         "numpy": np.__version__}
    try:
        import onnxscript
        v["onnxscript"] = onnxscript.__version__
    except ImportError:
        v["onnxscript"] = None
    if extra:
        for mod in ("onnxruntime", "transformers"):
            try:
                v[mod] = __import__(mod).__version__
            except ImportError:
                v[mod] = None
    return v


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def build(name, spec, out, log):
    torch.manual_seed(spec["seed"])
    model = spec["cls"]()
    init_weights(model, spec["seed"])
    model.eval()
    input_ids, labels = make_batch(spec["seed"] + 100, spec["max_seq"])
    np.save(os.path.join(out, f"{name}.input_ids.npy"), input_ids.numpy())
    np.save(os.path.join(out, f"{name}.labels.npy"), labels.numpy())

    with torch.no_grad():
        loss32, logits32 = model(input_ids, labels)
    np.save(os.path.join(out, f"{name}.logits.npy"), logits32.numpy().astype(np.float32))

    model64 = copy.deepcopy(model).double()
    set_reference_dtype(model64, torch.float64)
    with torch.no_grad():
        loss64, _ = model64(input_ids, labels)

    # fp64 gradients at the initial point (for the autodiff milestone): L2 norm per parameter
    m = copy.deepcopy(model64)
    m.zero_grad(set_to_none=True)
    m(input_ids, labels)[0].backward()
    grad_norms = {n: p.grad.norm().item() for n, p in m.named_parameters()}

    t0 = time.time()
    sgd, sgd_final = train_trajectory(model64, input_ids, labels, "sgd")
    adamw, adamw_final = train_trajectory(model64, input_ids, labels, "adamw")
    log(f"[{name}] loss fp32 {loss32.item():.7f}  fp64 {loss64.item():.15f}  (trajectories {time.time()-t0:.1f}s)")

    params = [{"name": n, "shape": list(p.shape), "numel": p.numel()} for n, p in model.named_parameters()]
    buffers = [{"name": n, "shape": list(b.shape), "dtype": str(b.dtype).replace("torch.", ""),
                "persistent": n in model.state_dict()} for n, b in model.named_buffers()]
    tied = []
    if name == "gpt2":
        tied = [["transformer.wte.weight", "lm_head.weight"]]

    args = (input_ids, labels)
    exports = {}

    # 1. TorchScript exporter
    t0 = time.time()
    p_ts = os.path.join(out, f"{name}.ts.onnx")
    export_torchscript(model, args, p_ts)
    exports["ts"] = dict(file=os.path.basename(p_ts), exporter="torchscript", opset=17, dynamic=True,
                         options="dynamo=False, opset_version=17, dynamic_axes batch/seq, "
                                 "do_constant_folding=False, training=EVAL, weights embedded")
    log(f"[{name}] ts export {time.time()-t0:.1f}s")

    # 2./3. dynamo exporter: export once unoptimised, save, then optimise the same program and save
    # (this is exactly what optimize=True does inside torch.onnx.export)
    t0 = time.time()
    p_noopt = os.path.join(out, f"{name}.dynamo-noopt.onnx")
    p_opt = os.path.join(out, f"{name}.dynamo.onnx")
    dynamic, note = export_dynamo_pair(model, args, p_noopt, p_opt, max_batch=1024,
                                       max_seq=spec["max_seq"], strip=True)
    for key, p, opt in (("dynamo", p_opt, True), ("dynamo-noopt", p_noopt, False)):
        exports[key] = dict(file=os.path.basename(p), data_file=os.path.basename(p) + ".data",
                            exporter="dynamo", opset=18, dynamic=dynamic, optimize=opt,
                            options=f"dynamo=True, opset_version=18, optimize={opt}, external_data=True, "
                                    + ("dynamic_shapes batch/seq (torch.export.Dim)" if dynamic else "static shapes"),
                            note=note)
    log(f"[{name}] dynamo export {time.time()-t0:.1f}s" + (f"  NOTE: {note}" if note else ""))

    # describe + check
    tensors = dict(model.named_parameters(remove_duplicate=False))
    tensors.update(dict(model.named_buffers(remove_duplicate=False)))
    checks = {}
    for key, e in exports.items():
        p = os.path.join(out, e["file"])
        e.update(describe_onnx(p, tensors))
        t0 = time.time()
        r = check_and_run(p, input_ids, labels)
        line = f"[{name}] {e['file']}: checker {r['checker']}"
        ck = {"checker": r["checker"]}
        for eng in ("ort", "reference"):
            v = r[eng]
            if v is None:
                line += f", {eng}: not installed"
            elif isinstance(v, str):
                line += f", {eng}: {v}"
                ck[eng] = v
            else:
                dl = abs(v[0] - loss32.item())
                dlog = float(np.abs(v[1] - logits32.numpy()).max())
                line += f", {eng}: loss {v[0]:.7f} |dloss| {dl:.2e} max|dlogits| {dlog:.2e}"
                ck[eng] = {"loss": v[0], "abs_diff_loss": dl, "max_abs_diff_logits": dlog}
                assert dl < 1e-4 and dlog < 1e-4, f"{eng} mismatch for {p}"
        checks[key] = ck
        log(line + f" ({time.time()-t0:.1f}s)")

    ref = {
        "model": name,
        "description": spec["desc"],
        "versions": versions(),
        "config": {"vocab": VOCAB, "d_model": D_MODEL, "n_layer": N_LAYER, "n_head": N_HEAD,
                   "head_dim": HEAD_DIM,
                   **({"n_kv_head": N_KV_HEAD, "mlp_hidden": LLAMA_MLP, "rms_eps": RMS_EPS,
                       "rope_theta": LLAMA_ROPE_THETA} if name == "llama" else
                      {"mlp_hidden": GPT2_MLP, "n_positions": GPT2_N_POSITIONS, "ln_eps": LN_EPS}),
                   "batch": BATCH, "seq": SEQ, "init_seed": spec["seed"], "batch_seed": spec["seed"] + 100},
        "inputs": {"input_ids": {"file": f"{name}.input_ids.npy", "dtype": "int64", "shape": [BATCH, SEQ]},
                   "labels": {"file": f"{name}.labels.npy", "dtype": "int64", "shape": [BATCH, SEQ],
                              "n_ignored": int((labels == -100).sum())}},
        "outputs": {"loss": {"dtype": "float32", "shape": []},
                    "logits": {"file": f"{name}.logits.npy", "dtype": "float32", "shape": [BATCH, SEQ, VOCAB]}},
        "loss_fp32": loss32.item(),
        "loss_fp64": loss64.item(),
        "loss_definition": "F.cross_entropy(logits.view(-1, V), labels.view(-1), ignore_index=-100), "
                           "mean over non-ignored positions; labels are already shifted",
        "param_count": sum(p["numel"] for p in params),
        "params": params,
        "tied_params": tied,
        "buffers": buffers,
        "grad_norms_fp64_init": grad_norms,
        "train_fp64": {
            "note": "float64 copy of the initial weights, model.train(), same fixed batch every step; "
                    "losses[i] is the forward loss of step i before its update; final_loss is the loss "
                    "after the last update. One param group over model.parameters() (tied weight once); "
                    "weight decay applies to every parameter.",
            "steps": TRAIN_STEPS,
            "sgd": {"config": SGD_CFG, "losses": sgd, "final_loss": sgd_final},
            "adamw": {"config": {**ADAMW_CFG, "betas": list(ADAMW_CFG["betas"])}, "losses": adamw,
                      "final_loss": adamw_final},
        },
        "exports": exports,
        "checks": checks,
    }
    with open(os.path.join(out, f"{name}.ref.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    return ref


def init_summary(e):
    named, derived, other = [], [], []
    for i in e["initializers"]:
        same = [h for h in i["holds"] if h["transform"] == "identity" and h["tensor"] == i["name"]]
        if same:
            named.append(i["name"])
        elif i["holds"]:
            h = i["holds"][0]
            derived.append(f"`{i['name']}` = {h['transform']}({h['tensor']})")
        else:
            other.append(i["name"])
    s = f"initializers: {len(named)} under their torch names"
    if derived:
        s += f"; {len(derived)} hold a torch tensor under a generated name: " + ", ".join(derived)
    if other:
        s += f"; {len(other)} other constants"
    return s + "."


def write_readme(out, refs):
    L = []
    v = next(iter(refs.values()))["versions"]
    L += ["# tc parity fixtures (PyTorch -> ONNX)", "",
          "Generated by `scripts/make_fixtures.py`; do not edit by hand. Regenerate with", "",
          "```", "python3 scripts/make_fixtures.py --out test/fixtures", "```", "",
          "CPU only, seeded, < 2 minutes. Re-running with the same versions gives the same bytes.",
          "", "Versions used: " + ", ".join(f"{k} {val}" for k, val in v.items() if val) +
          ".", "",
          "## Models", "",
          "Tiny decoders written as plain `torch.nn` modules in the HuggingFace style (no transformers import), "
          f"vocab {VOCAB}, d_model {D_MODEL}, {N_LAYER} layers, {N_HEAD} heads of dim {HEAD_DIM}, "
          f"batch {BATCH}, seq {SEQ}. `forward(input_ids, labels) -> (loss, logits)` with "
          "`loss = F.cross_entropy(logits.view(-1, V), labels.view(-1), ignore_index=-100)` "
          "(labels are pre-shifted next tokens; the model does not shift).", "",
          "Weights: normal(0, 0.02) for matrices and embeddings, 0.02*randn for biases, 1 + 0.1*randn for "
          "norm weights (so a wrong broadcast or a dropped bias/weight changes the loss).", ""]
    for name, r in refs.items():
        L += [f"- **{name}** ({r['param_count']} params): {r['description']}"]
    L += ["", "Note (llama, float64 reference): HF's RMSNorm upcasts to float32 and HF's rotary computes "
          "cos/sin in float32. For the float64 reference (`loss_fp64`, `train_fp64`, `grad_norms_fp64_init`) "
          "those two casts go to float64 instead, so the reference is float64 throughout; the float32 "
          "model and all exports are unaffected. The float64 model starts from the float32 weights "
          "(and the float32 `inv_freq` buffer) converted exactly, i.e. from the ONNX initializers.", "",
          "## Files", "",
          "| file | what |", "|---|---|"]
    for name, r in refs.items():
        L += [f"| `{name}.input_ids.npy` | int64 [{BATCH},{SEQ}] token ids |",
              f"| `{name}.labels.npy` | int64 [{BATCH},{SEQ}] labels, {r['inputs']['labels']['n_ignored']} "
              "positions = -100 (ignore_index) |",
              f"| `{name}.logits.npy` | float32 [{BATCH},{SEQ},{VOCAB}] logits of the float32 torch model |",
              f"| `{name}.ref.json` | versions, config, `loss_fp32`, `loss_fp64`, params (names, shapes, "
              "count), tied params, buffers, fp64 grad norms at init, fp64 SGD/AdamW trajectories, and per "
              "export: options, inputs/outputs, initializer names/shapes, op histogram, checks |"]
        for key, e in r["exports"].items():
            what = e["options"]
            if "data_file" in e:
                L += [f"| `{e['file']}` + `{e['data_file']}` | {what}; {e['n_external_initializers']} "
                      "external initializers |"]
            else:
                L += [f"| `{e['file']}` | {what} |"]
    L += ["", "Losses (the float32 torch model, and the float64 reference) and fp64 training "
          f"trajectories ({TRAIN_STEPS} steps on the same batch; `losses[i]` = forward loss of step i before "
          "its update):", ""]
    for name, r in refs.items():
        t = r["train_fp64"]
        L += [f"- {name}: loss_fp32 {r['loss_fp32']:.7f}, loss_fp64 {r['loss_fp64']:.12f}",
              f"  - SGD {t['sgd']['config']}: " + ", ".join(f"{x:.6f}" for x in t["sgd"]["losses"]) +
              f" -> {t['sgd']['final_loss']:.6f}",
              f"  - AdamW {t['adamw']['config']}: " + ", ".join(f"{x:.6f}" for x in t["adamw"]["losses"]) +
              f" -> {t['adamw']['final_loss']:.6f}"]
    L += ["", "## What an importer has to handle", "",
          "Facts below were checked on the files made with the versions above; the per-file sections "
          "further down are generated from the files themselves.", "",
          "- All files: inputs `input_ids`, `labels` int64 `[batch, seq]` (symbolic dims), outputs `loss` "
          "float32 scalar and `logits` float32 `[batch, seq, 256]`. The loss is one "
          "`SoftmaxCrossEntropyLoss(reduction=mean, ignore_index=-100)` node on Reshape'd logits `[N,256]` and "
          "labels `[N]` in every file.",
          "- `*.ts.onnx` (TorchScript, opset 17): dynamic `batch`/`seq`, so the graph is full of shape "
          "sub-graphs (Shape/Gather/Unsqueeze/Concat/Slice/Reshape; in llama also ConstantOfShape/Equal/"
          "Where/Expand/Trilu) that fold to constants once the dims are fixed (`--input input_ids=2x16`). "
          "Exported with `do_constant_folding=False`: with the default (True) the exporter folds each "
          "Linear's `Transpose(W)` into a new initializer named `onnx::MatMul_NNN` (and llama's inv_freq into "
          "`onnx::Expand_NNN`), losing the parameter names. With False every initializer has its torch name "
          "and a Linear is `MatMul(x, Transpose(W))` (+ `Add(b)`). Other constants are `Constant` nodes (the "
          "gpt2 causal mask is a bool `Constant` [1,1,32,32], not an initializer). The tied gpt2 weight is "
          "one initializer `transformer.wte.weight` read by Gather and by Transpose->MatMul. llama's SDPA is "
          "expanded by the TorchScript symbolic: the 1/sqrt(head_dim) scale is computed at run time from "
          "Shape (Cast/Sqrt/Div), the causal mask from ConstantOfShape/Trilu/Equal/Where(-inf), then "
          "MatMul/Add/Softmax/MatMul. LayerNormalization is one op (opset 17); GELU(tanh) is Mul/Pow/Tanh/Add.",
          "- `*.dynamo.onnx` (dynamo, opset 18, optimize=True): onnxscript's optimizer constant-folds any "
          "node whose constant inputs have <= 8192 elements (`DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT`), "
          "which at these sizes is every `Transpose(W)`: the Linear weights exist only as transposed "
          "copies `[in, out]` under generated names `val_N`, and llama's inv_freq as `expand` [1,4,1]. In gpt2 "
          "the tie is broken: Gather reads `lm_head.weight` [256,32] (the tied weight carries that name "
          "here, not `transformer.wte.weight`) while the lm_head MatMul reads a separate transposed copy. "
          "The graph's value_info keeps the provenance: `pkg.onnxscript.optimizer.folded_from` on a folded "
          "initializer names its source (e.g. `['lm_head.weight']`), and unfolded parameters/buffers carry "
          "`pkg.torch.export.graph_signature.InputSpec.kind` = PARAMETER / BUFFER. ref.json's `holds` (per "
          "initializer) gives the torch tensor and transform by value. With real-size weights (> 8192 "
          "elements) the Transposes are not folded and the names survive. The per-layer copies of the gpt2 "
          "mask buffer are deduplicated into `transformer.h.0.attn.bias`. Split is `Split(num_outputs=3)`.",
          "- `*.dynamo-noopt.onnx` (dynamo, optimize=False): every initializer under its torch name (gpt2: "
          "the tied weight as `lm_head.weight`, plus both non-persistent bool mask buffers "
          "`transformer.h.{0,1}.attn.bias`; llama: `model.rotary_emb.inv_freq`), each described by "
          "`InputSpec.kind` metadata; Linear is Transpose + MatMul (+ Add); many Constant, CastLike, Identity "
          "and Reshape nodes; gpt2's `split` is `SplitToSequence` + `SequenceAt`.",
          "- dynamo files: initializers up to 128 bytes (norm weights, 32-element biases, small constants) "
          "are stored inline in the .onnx, the rest in `<file>.data`; load with the .onnx's directory as base. "
          "The exporter's per-node `pkg.torch.onnx.stack_trace` metadata (absolute host paths) is stripped "
          "by the script; the other node metadata (namespace, class_hierarchy, fx_node, name_scopes) is kept.",
          "- gpt2: `lm_head.weight` is the same Parameter as `transformer.wte.weight` (ref.json "
          "`tied_params`). llama: `model.rotary_emb.inv_freq` is a persistent buffer, not a trainable "
          "parameter; ref.json `params` lists the trainable tensors, `buffers` the rest.", "",
          "## Op types per ONNX file", ""]
    for name, r in refs.items():
        for key, e in r["exports"].items():
            note = f" — {e['note']}" if e.get("note") else ""
            dyn = "dynamic batch/seq" if e["dynamic"] else "static shapes"
            L += [f"### `{e['file']}` ({e['n_nodes']} nodes, {len(e['initializers'])} initializers, "
                  f"opsets {e['opsets']}, {dyn}){note}", "",
                  "inputs: " + ", ".join(f"`{i['name']}` {i['dtype']} {i['shape']}" for i in e["inputs"]) +
                  "; outputs: " + ", ".join(f"`{o['name']}` {o['dtype']} {o['shape']}" for o in e["outputs"]),
                  "",
                  " ".join(f"{op}:{n}" for op, n in e["op_types"].items()), "",
                  init_summary(e), ""]
        all_ops = [set(e["op_types"]) for e in r["exports"].values()]
    L += ["## Checks run by the script", "",
          "`onnx.checker.check_model(path, full_check=True)` on every file; every file is also run through "
          "`onnx.reference.ReferenceEvaluator` and, when installed, onnxruntime, and its loss and logits "
          "compared with torch (the script fails above 1e-4).", ""]
    for name, r in refs.items():
        for key, ck in r["checks"].items():
            ref_ck = ck.get("reference")
            s = (f"loss {ref_ck['loss']:.7f}, |dloss| {ref_ck['abs_diff_loss']:.1e}, max|dlogits| "
                 f"{ref_ck['max_abs_diff_logits']:.1e}") if isinstance(ref_ck, dict) else str(ref_ck)
            L += [f"- `{r['exports'][key]['file']}`: checker {ck['checker']}; onnx.reference: {s}"]
    L += [""]
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(L))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="test/fixtures")
    ap.add_argument("--models", default="gpt2,llama")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    # "torchvision is not installed. Skipping torchvision::nms" etc.
    logging.getLogger("torch.onnx._internal.exporter._registration").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    t_start = time.time()

    def log(s):
        print(s, flush=True)

    log("versions: " + json.dumps(versions(extra=True)))
    refs = {}
    for name in a.models.split(","):
        refs[name] = build(name, MODELS[name], a.out, log)
    # the checks section must not depend on whether onnxruntime happens to be installed
    for r in refs.values():
        for ck in r["checks"].values():
            ck.pop("ort", None)
        with open(os.path.join(a.out, f"{r['model']}.ref.json"), "w") as f:
            json.dump(r, f, indent=1)
            f.write("\n")
    write_readme(a.out, refs)

    log("\nop_type histograms:")
    for name, r in refs.items():
        for key, e in r["exports"].items():
            log(f"  {e['file']} ({e['n_nodes']} nodes, {len(e['initializers'])} initializers):")
            log("    " + " ".join(f"{op}:{n}" for op, n in e["op_types"].items()))
    log("\nfiles:")
    total = 0
    for fn in sorted(os.listdir(a.out)):
        sz = os.path.getsize(os.path.join(a.out, fn))
        total += sz
        log(f"  {sz:>9}  {sha256(os.path.join(a.out, fn))[:16]}  {fn}")
    log(f"  {total:>9}  {'':16}  total   ({time.time()-t_start:.1f}s)")


if __name__ == "__main__":
    main()
