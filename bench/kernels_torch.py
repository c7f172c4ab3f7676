#!/usr/bin/env python3
"""PyTorch eager timings of the ops tc's hand-written CUDA kernels implement.

Same shapes and dtypes as the timings of test/cuda (tc_cuda_tests, GPT-2 124M
sizes: 16384 tokens, d 768, vocab 50304, 124M parameters), printed as
tab-separated lines `kernel<TAB>dtype<TAB>microseconds` with the kernel names
of tc_cuda_tests' report, so that scripts/gpu-check.sh can put both side by
side. Backward timings are torch.autograd.grad of the op alone (the forward's
graph kept); cross-entropy is forward + backward (tc's kernel is fused).

  python3 bench/kernels_torch.py                 # on the GPU
  python3 bench/kernels_torch.py --device cpu --scale 256   # smoke test
"""
import argparse
import sys
import time

import torch
import torch.nn.functional as F


def timer(device, fn, iters):
    for _ in range(3):
        fn()
    if device == "cuda":
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return 1000.0 * start.elapsed_time(end) / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return 1e6 * (time.perf_counter() - t0) / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--scale", type=int, default=1, help="divide the large sizes (smoke tests)")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    dev, s, iters = args.device, args.scale, args.iters
    if dev == "cuda" and not torch.cuda.is_available():
        print("kernels_torch.py: no CUDA device for torch", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    names = {torch.float32: "f32", torch.bfloat16: "bf16"}
    tokens, d, vocab, hidden = 16384 // s, 768, 50304, 3072
    params = 124439808 // s

    def emit(kernel, dtype, us):
        print(f"{kernel}\t{names.get(dtype, dtype)}\t{us:.1f}", flush=True)

    def run(kernel, dtype, fn, n=iters):
        try:
            emit(kernel, dtype, timer(dev, fn, n))
        except Exception as e:  # one op missing in this torch must not stop the rest
            print(f"kernels_torch.py: {kernel} {names.get(dtype)}: {e}", file=sys.stderr)

    for dt in (torch.float32, torch.bfloat16):
        # softmax / log_softmax over rows of 1024 (in place in tc; out of place here)
        x = torch.randn(tokens, 1024, device=dev, dtype=dt)
        run("softmax", dt, lambda: torch.softmax(x, -1))
        run("log_softmax", dt, lambda: torch.log_softmax(x, -1))
        del x

        # layer_norm / rms_norm [tokens, 768]
        x = torch.randn(tokens, d, device=dev, dtype=dt, requires_grad=True)
        w = torch.randn(d, device=dev, dtype=dt, requires_grad=True)
        b = torch.randn(d, device=dev, dtype=dt, requires_grad=True)
        dy = torch.randn(tokens, d, device=dev, dtype=dt)
        with torch.no_grad():
            run("layer_norm forward", dt, lambda: F.layer_norm(x, (d,), w, b))
            if hasattr(F, "rms_norm"):
                run("rms_norm forward", dt, lambda: F.rms_norm(x, (d,), w))
        y = F.layer_norm(x, (d,), w, b)
        run("layer_norm backward", dt,
            lambda: torch.autograd.grad(y, (x, w, b), dy, retain_graph=True))
        if hasattr(F, "rms_norm"):
            yr = F.rms_norm(x, (d,), w)
            run("rms_norm backward", dt,
                lambda: torch.autograd.grad(yr, (x, w), dy, retain_graph=True))
            del yr
        del x, w, b, dy, y

        # cross-entropy over the vocabulary, forward + backward
        logits = torch.randn(tokens, vocab, device=dev, dtype=dt, requires_grad=True)
        labels = torch.randint(0, vocab, (tokens,), device=dev)

        def ce():
            loss = F.cross_entropy(logits, labels)
            return torch.autograd.grad(loss, logits)

        run("cross_entropy loss", dt, ce, max(3, iters // 2))
        run("cross_entropy dlogits", dt, ce, max(3, iters // 2))
        del logits

        # embedding gather / dense backward
        table = torch.randn(vocab, d, device=dev, dtype=dt, requires_grad=True)
        ids = torch.randint(0, vocab, (tokens,), device=dev)
        dout = torch.randn(tokens, d, device=dev, dtype=dt)
        with torch.no_grad():
            run("embedding forward", dt, lambda: F.embedding(ids, table))
        e = F.embedding(ids, table)
        run("embedding backward", dt,
            lambda: torch.autograd.grad(e, table, dout, retain_graph=True))
        del table, dout, e

        # GELU over the MLP activations
        x = torch.randn(tokens * hidden, device=dev, dtype=dt, requires_grad=True)
        dy = torch.randn(tokens * hidden, device=dev, dtype=dt)
        for approx, name in (("none", "gelu_erf"), ("tanh", "gelu_tanh")):
            with torch.no_grad():
                run(f"{name} forward", dt, lambda: F.gelu(x, approximate=approx))
            g = F.gelu(x, approximate=approx)
            run(f"{name} backward", dt,
                lambda: torch.autograd.grad(g, x, dy, retain_graph=True))
            del g
        del x, dy

        # global gradient norm (sum of squares) over every parameter
        g = torch.randn(params, device=dev, dtype=dt)
        run("grad-norm sum of squares", dt, lambda: torch.linalg.vector_norm(g), max(3, iters // 2))
        del g

        # matmul + bias + GELU (tanh), GPT-2's MLP up-projection
        a = torch.randn(tokens, d, device=dev, dtype=dt)
        wt = torch.randn(hidden, d, device=dev, dtype=dt)
        bias = torch.randn(hidden, device=dev, dtype=dt)
        with torch.no_grad():
            run("matmul +bias+gelu (timing)", dt,
                lambda: F.gelu(F.linear(a, wt, bias), approximate="tanh"))
        del a, wt, bias

    # causal attention through SDPA's flash kernel, the shapes of AttentionTest.TimingGpt2
    # ([B, H, T, T, d]: GPT-2 124M's and a d-128 one); backward is autograd.grad of q, k, v
    for B, H, T, hd in ((16, 12, 1024, 64), (8, 16, 1024, 128)):
        B = max(1, B // s)
        q, k, v = (torch.randn(B, H, T, hd, device=dev, dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        dout = torch.randn(B, H, T, hd, device=dev, dtype=torch.bfloat16)
        ctx = (torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION)
               if dev == "cuda" else torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH))
        with ctx:
            with torch.no_grad():
                run("attention_forward", torch.bfloat16,
                    lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            run("attention_backward", torch.bfloat16,
                lambda: torch.autograd.grad(o, (q, k, v), dout, retain_graph=True))
        del q, k, v, dout, o

    # a right-padded batch (HF's attention_mask and-ed with the causal mask, the
    # fill finfo.min): row b holds T/2 + b T / (2 B) tokens, the rest padding;
    # SDPA takes the boolean mask to its memory-efficient kernel (flash has no
    # masks). tc's TimingGpt2 times the same lengths ("attention_*_padded").
    B, H, T, hd = max(1, 16 // s), 12, 1024, 64
    q, k, v = (torch.randn(B, H, T, hd, device=dev, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    dout = torch.randn(B, H, T, hd, device=dev, dtype=torch.bfloat16)
    lengths = torch.tensor([T // 2 + b * T // (2 * B) for b in range(B)], device=dev)
    keys = torch.arange(T, device=dev)[None, :] < lengths[:, None]  # [B, T]
    causal = torch.ones(T, T, device=dev, dtype=torch.bool).tril()
    allowed = causal[None, None] & keys[:, None, None, :]
    bias = torch.zeros(B, 1, T, T, device=dev, dtype=torch.bfloat16).masked_fill(
        ~allowed, torch.finfo(torch.bfloat16).min)
    with torch.no_grad():
        run("attention_forward_padded", torch.bfloat16,
            lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    run("attention_backward_padded", torch.bfloat16,
        lambda: torch.autograd.grad(o, (q, k, v), dout, retain_graph=True))
    del q, k, v, dout, o, bias, allowed

    # casts over every parameter
    x32 = torch.randn(params, device=dev)
    x16 = x32.to(torch.bfloat16)
    run("cast f32->bf16", torch.bfloat16, lambda: x32.to(torch.bfloat16))
    run("cast bf16->f32", torch.float32, lambda: x16.to(torch.float32))
    run("cast f32->f32", torch.float32, lambda: x32.clone())
    del x16

    # AdamW over one flat fp32 parameter (fused where torch has it)
    p = torch.nn.Parameter(x32)
    p.grad = torch.randn_like(p)
    fused = dev == "cuda"
    opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.1, fused=fused)
    run("adamw", torch.float32, opt.step, max(3, iters // 2))
    run("adamw (clipped)", torch.float32, opt.step, max(3, iters // 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
