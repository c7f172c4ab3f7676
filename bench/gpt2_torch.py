"""PyTorch side of the GPT-2 124M training benchmark (issue 4's bench).

GPT-2 124M (12 layers, d 768, 12 heads, vocab 50304, T 1024), batch 16, bf16
autocast, fused AdamW, scaled_dot_product_attention; eager, torch.compile and
torch.compile(mode="reduce-overhead") (compile-ro).
Prints one JSON line per mode: tokens/s (median of timed steps), peak memory,
compile/warm-up time. The tc side runs beside it from bench/gpt2.sh (same
model, batch and optimizer) once tc's CUDA executor exists.

usage: python3 bench/gpt2_torch.py [--modes eager,compile,compile-ro] [--steps 20] [--batch 16]
           [--layers 12 --d 768 --heads 12 --vocab 50304]   (other sizes, e.g. the ~1B of
           bench/precision.sh: --layers 18 --d 2048 --heads 16)
"""
import argparse
import gc
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab=50304, ctx=1024, d=768, layers=12, heads=12):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx, labels):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))


def kernel_category(name):
    n = name.lower()
    if "flash" in n or "fmha" in n or "attention" in n:
        return "attention"
    if any(k in n for k in ("gemm", "nvjet", "xmma", "cutlass", "sm90_", "sm80_")):
        return "gemm"
    if "adam" in n or "foreach" in n or "multi_tensor" in n:
        return "optimizer"
    if "triton" in n:
        return "triton (fused elementwise / norms / loss)"
    return "other"


def write_profile(path, step, steps=3):
    """torch.profiler over `steps` steps: each CUDA kernel's total time, and the sums by category."""
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    rows = [(e.key, e.device_time_total, e.count) for e in prof.key_averages()
            if e.device_time_total > 0]
    rows.sort(key=lambda r: -r[1])
    cats = {}
    for key, us, _ in rows:
        cats[kernel_category(key)] = cats.get(kernel_category(key), 0) + us
    with open(path, "w") as f:
        total = sum(cats.values())
        f.write(f"# torch.profiler, {steps} steps: {total / 1e3 / steps:.2f} ms of kernels a step\n")
        for c, us in sorted(cats.items(), key=lambda kv: -kv[1]):
            f.write(f"{c:50s} {us / 1e3 / steps:8.3f} ms/step\n")
        f.write("\n# kernel, ms a step, calls a step\n")
        for key, us, n in rows[:60]:
            f.write(f"{us / 1e3 / steps:8.3f} {n // steps:5d}  {key[:160]}\n")


def run(mode, steps, batch, seq, config=None, profile_path=None):
    gc.collect()  # an earlier mode's tensors and cached blocks out of the peak
    torch.cuda.empty_cache()
    torch.manual_seed(0)
    dev = "cuda"
    model = GPT(ctx=seq, **(config or {})).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95),
                            weight_decay=0.1, fused=True)
    step_fn = model
    if mode == "compile":
        step_fn = torch.compile(model)
    elif mode == "compile-ro":  # mode="reduce-overhead": CUDA graphs, as tc replays
        step_fn = torch.compile(model, mode="reduce-overhead")
    vocab = min(model.wte.num_embeddings, 50257)
    x = torch.randint(0, vocab, (batch, seq), device=dev)
    y = torch.randint(0, vocab, (batch, seq), device=dev)
    torch.cuda.reset_peak_memory_stats()
    total = torch.cuda.mem_get_info()[1]
    peak_used = 0
    t0 = time.time()
    times = []
    def step():
        if mode == "compile-ro":
            torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):  # an error if flash cannot run
        for i in range(steps + 3):
            torch.cuda.synchronize()
            s = time.time()
            loss = step()
            torch.cuda.synchronize()
            free, _ = torch.cuda.mem_get_info()  # the process's device memory, context included
            peak_used = max(peak_used, total - free)
            if i == 2:
                warm = time.time() - t0
            if i >= 3:
                times.append(time.time() - s)
        # The same steps back to back, one synchronisation at the end: the
        # steady throughput of a loop that does not wait for each step (as
        # tc-run's pipelined loop); the faster measure is the mode's tokens/s.
        torch.cuda.synchronize()
        s = time.time()
        pending = [step().detach().clone() for _ in range(steps)]
        torch.cuda.synchronize()
        streamed = (time.time() - s) / steps
        loss = pending[-1]
    if profile_path:
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            write_profile(profile_path, step)
    times.sort()
    med = min(times[len(times) // 2], streamed)
    return {
        "framework": "pytorch-" + mode, "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(), "batch": batch, "seq": seq,
        "params": sum(p.numel() for p in model.parameters()),
        "tokens_per_s": round(batch * seq / med), "step_ms": round(med * 1e3, 2),
        "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "peak_device_bytes": int(peak_used),
        "warmup_s": round(warm, 1), "loss": round(loss.item(), 4),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="eager,compile,compile-ro")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--profile", metavar="FILE",
                    help="after the timed steps, CUDA kernel times of 3 steps (torch.profiler) into FILE.MODE")
    a = ap.parse_args()
    config = dict(vocab=a.vocab, d=a.d, layers=a.layers, heads=a.heads)
    torch.backends.cuda.matmul.allow_tf32 = True
    for mode in a.modes.split(","):
        profile_path = f"{a.profile}.{mode}" if a.profile else None
        print(json.dumps(run(mode, a.steps, a.batch, a.seq, config, profile_path)), flush=True)


if __name__ == "__main__":
    main()
