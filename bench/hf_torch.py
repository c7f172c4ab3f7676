#!/usr/bin/env python3
"""The PyTorch side of the HuggingFace benchmark (bench/hf.sh): one model, one mode, one JSON line.

    python3 bench/hf_torch.py bench/hf/gpt2-124m.json --mode compile --batch 16 --seq 1024

The model is built from its config.json as a user builds it (transformers'
AutoModelForCausalLM.from_config, random init) with HF's sdpa attention told
is_causal=True and no mask (register_causal_sdpa: the batches have no
padding; under torch.compile transformers would pass a [B, 1, T, T] mask,
which SDPA's flash kernel does not take),
trained as tc trains the export of the same model: HF computes the loss itself
(labels = input_ids, shifted inside), bf16 autocast, fused AdamW (lr 6e-4,
betas 0.9/0.95, eps 1e-8, weight decay 0.1 on every parameter), gradient norm
clipped to 1.0, gradients set to None. Modes: eager, compile (torch.compile's
default), compile-ro (mode="reduce-overhead": CUDA graphs, as tc replays).
SDPA must pick flash attention: the script checks that the flash kernel is
the one that runs (torch.nn.attention.sdpa_kernel([FLASH_ATTENTION])).

Printed: tokens/s (batch * seq / median step time over the timed steps), the
warm-up time (the first 3 steps: compilation), peak device memory as the
process sees it (max over step ends of cudaMemGetInfo's total - free, CUDA
context included: the caching allocator keeps what it reserved, so the peak
reservation is still held at a step's end; tc-run reports the same quantity),
and torch's own max_memory_allocated / max_memory_reserved beside it, MFU
(6N + 12LTd per token, N the parameters without the embeddings that are only
gathered, over the dense bf16 peak: 989.4 TFLOP/s on H100/H200 SXM).

--profile FILE: after the timed steps, two more under torch.profiler, and FILE
gets PyTorch's GPU time per kernel (ms a step, share, launches a step), the
counterpart of tc-run's TC_CUDA_PROFILE=1 table, to set the two side by side
op by op.
"""

import argparse
import json
import os
import sys
import time

import torch


def register_causal_sdpa():
    """HF's sdpa attention with the mask dropped and is_causal=True: the batches have no padding, so
    this is the same attention, and SDPA can take its flash kernel. (Under torch.compile transformers
    materializes the [B, 1, T, T] causal mask instead of passing is_causal, and SDPA's flash kernel
    takes no mask: forcing flash then fails with "No available kernel".)"""
    import transformers as T
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def causal_sdpa(module, query, key, value, attention_mask, **kw):
        kw.pop("is_causal", None)
        return sdpa_attention_forward(module, query, key, value, None, is_causal=True, **kw)

    T.AttentionInterface.register("sdpa_causal", causal_sdpa)
    try:
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
        AttentionMaskInterface.register("sdpa_causal", sdpa_mask)
    except ImportError:
        pass


def build(config_path, seed):
    import transformers as T
    d = json.load(open(config_path))
    cfg = T.AutoConfig.for_model(d.pop("model_type"), **d)
    cfg.use_cache = False
    torch.manual_seed(seed)
    register_causal_sdpa()
    model = T.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa_causal")
    return cfg, model


def model_flops_per_token(cfg, model, seq):
    out = model.get_output_embeddings().weight
    gathered = sum(m.weight.numel() for m in model.modules()
                   if isinstance(m, torch.nn.Embedding) and m.weight is not out)
    n = sum(p.numel() for p in model.parameters()) - gathered
    layers = cfg.num_hidden_layers
    width = cfg.hidden_size
    return 6.0 * n + 12.0 * layers * seq * width, n


def train_step(a, fn, model, opt, x):
    """One training step as the benchmark times it; the loss (a tensor)."""
    if a.mode == "compile-ro":
        torch.compiler.cudagraph_mark_step_begin()
    loss = fn(x)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def profile_steps(a, fn, batches, model, opt, steps=2):
    """Two training steps under torch.profiler; a.profile gets each CUDA kernel's GPU time a step."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]), profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(steps):
            train_step(a, fn, model, opt, batches[i % len(batches)])
        torch.cuda.synchronize()
    rows = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time > 0:
            t, n = rows.get(e.name, (0.0, 0))
            rows[e.name] = (t + e.device_time, n + 1)  # us
    total = sum(t for t, _ in rows.values())
    with open(a.profile, "w") as f:
        f.write(f"torch {a.mode} profile ({os.path.basename(a.config)}, batch {a.batch} x {a.seq}): "
                f"{total / 1e3 / steps:.2f} ms of GPU time a step in kernels; by kernel "
                "(ms a step, share, launches a step):\n")
        for name, (t, n) in sorted(rows.items(), key=lambda kv: -kv[1][0]):
            f.write(f"  {t / 1e3 / steps:9.3f} {100 * t / max(total, 1e-9):6.1f}% {n / steps:7.1f}  "
                    f"{name[:160]}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--mode", choices=["eager", "compile", "compile-ro"], default="eager")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--peak", type=float, default=989.4e12, help="dense bf16 FLOP/s of the card")
    ap.add_argument("--profile", metavar="FILE",
                    help="GPU time per kernel of two more steps into FILE")
    a = ap.parse_args()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dev = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    cfg, model = build(a.config, a.seed)
    model.to(dev).train()
    flops_tok, n = model_flops_per_token(cfg, model, a.seq)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1, fused=True)

    def step_loss(x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return model(input_ids=x, labels=x).loss

    fn = step_loss
    if a.mode == "compile":
        fn = torch.compile(step_loss)
    elif a.mode == "compile-ro":
        fn = torch.compile(step_loss, mode="reduce-overhead")
    g = torch.Generator(device="cpu").manual_seed(a.seed)
    batches = [torch.randint(0, cfg.vocab_size, (a.batch, a.seq), generator=g).to(dev)
               for _ in range(4)]
    total = torch.cuda.mem_get_info()[1]
    peak_used = 0
    times = []
    t0 = time.time()
    warm = None
    losses = []
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):  # an error if flash cannot run
        for i in range(a.steps + 3):
            torch.cuda.synchronize()
            s = time.time()
            loss = train_step(a, fn, model, opt, batches[i % len(batches)])
            torch.cuda.synchronize()
            e = time.time()
            free, _ = torch.cuda.mem_get_info()
            peak_used = max(peak_used, total - free)
            losses.append(float(loss.detach()))
            if i == 2:
                warm = e - t0
            if i >= 3:
                times.append(e - s)
        # The same steps back to back, one synchronisation at the end (the
        # losses read afterwards): the steady throughput of a loop that does
        # not wait for each step, as tc-run's pipelined loop does not. The
        # faster of the two measures is the mode's tokens/s.
        torch.cuda.synchronize()
        s = time.time()
        pending = [train_step(a, fn, model, opt, batches[i % len(batches)]).detach().clone()
                   for i in range(a.steps)]
        torch.cuda.synchronize()
        streamed = (time.time() - s) / a.steps
        losses += [float(x) for x in pending]
    if a.profile:
        profile_steps(a, fn, batches, model, opt)
    times.sort()
    med = times[len(times) // 2]
    tps_sync, tps_stream = a.batch * a.seq / med, a.batch * a.seq / streamed
    tps = max(tps_sync, tps_stream)
    print(json.dumps({
        "model": os.path.basename(a.config).removesuffix(".json"), "framework": "torch " + a.mode,
        "torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "batch": a.batch,
        "seq": a.seq, "params": sum(p.numel() for p in model.parameters()), "mfu_params": n,
        "tokens_per_s": round(tps), "tokens_per_s_synced": round(tps_sync),
        "tokens_per_s_streamed": round(tps_stream), "step_ms": round(a.batch * a.seq / tps * 1e3, 2),
        "mfu": round(tps * flops_tok / a.peak, 4),
        "peak_device_bytes": int(peak_used),
        "max_memory_allocated": int(torch.cuda.max_memory_allocated()),
        "max_memory_reserved": int(torch.cuda.max_memory_reserved()),
        "warmup_s": round(warm, 1), "loss_first": round(losses[0], 4),
        "loss_last": round(losses[-1], 4),
    }), flush=True)


if __name__ == "__main__":
    sys.exit(main())
