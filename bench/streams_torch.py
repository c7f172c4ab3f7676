#!/usr/bin/env python3
"""What running the weight-gradient GEMMs on a second stream would buy: a
transformer's backward (GPT-2 124M shapes by default: 12 layers, d 768, 16 x
1024 tokens, 12 heads, bf16) written as the ops tc's step runs, each layer's
dX chain (GEMMs, GELU backward, layer norm backward, flash attention backward)
on the main stream and each Linear's weight gradient (dW = dY^T X, and its
bias gradient) either right after its dX GEMM on the same stream ("one") or on
a side stream forked after dY is ready and joined at the end ("two"). Both
captured into a CUDA graph and replayed; prints the time a backward pass and
the ratio. A measurement for issue 12, not part of tc.

  python3 bench/streams_torch.py [--layers 12 --d 768 --tokens 16384 --heads 12]
"""
import argparse

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--iters", type=int, default=10)
    a = ap.parse_args()
    dev, dt = "cuda", torch.bfloat16
    M, C, L, T, H = a.tokens, a.d, a.layers, a.seq, a.heads
    B, hd = M // T, C // H
    g = torch.Generator(device=dev).manual_seed(0)

    def r(*s):
        return torch.randn(*s, device=dev, dtype=dt, generator=g) * 0.02

    layers = []
    for _ in range(L):
        q, k, v = (r(B, H, T, hd) * 50 for _ in range(3))
        fw = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, True, False)
        x1, x2 = r(M, C), r(M, C)
        mean1, rstd1 = x1.float().mean(1, keepdim=True), torch.ones(M, 1, device=dev)
        layers.append(dict(
            W2=r(C, 4 * C), W1=r(4 * C, C), Wp=r(C, C), Wqkv=r(3 * C, C), lnw=r(C) + 1, lnb=r(C),
            g=r(M, 4 * C), h=r(M, 4 * C), x1=x1, x2=x2, att=r(M, C), q=q, k=k, v=v, fw=fw,
            mean=mean1, rstd=rstd1,
            dW2=torch.empty(C, 4 * C, device=dev, dtype=dt),
            dW1=torch.empty(4 * C, C, device=dev, dtype=dt),
            dWp=torch.empty(C, C, device=dev, dtype=dt),
            dWqkv=torch.empty(3 * C, C, device=dev, dtype=dt)))
    dy0 = r(M, C)
    main_s = torch.cuda.Stream()
    side = torch.cuda.Stream()

    def weight_grad(two, dy, x, out, bias=True):
        if two:
            ev = torch.cuda.Event()
            ev.record()
            with torch.cuda.stream(side):
                side.wait_event(ev)
                torch.mm(dy.t(), x, out=out)
                if bias:
                    dy.sum(0)
        else:
            torch.mm(dy.t(), x, out=out)
            if bias:
                dy.sum(0)

    def backward(two):
        dy = dy0
        for ly in reversed(layers):
            dg = dy @ ly["W2"]
            weight_grad(two, dy, ly["g"], ly["dW2"])
            dh = torch.ops.aten.gelu_backward(dg, ly["h"], approximate="tanh")
            dx2 = dh @ ly["W1"]
            weight_grad(two, dh, ly["x2"], ly["dW1"])
            dy2 = torch.ops.aten.native_layer_norm_backward(
                dx2, ly["x2"], [C], ly["mean"], ly["rstd"], ly["lnw"], ly["lnb"],
                [True, True, True])[0] + dy
            datt = dy2 @ ly["Wp"]
            weight_grad(two, dy2, ly["att"], ly["dWp"])
            o, lse, cq, ck, mq, mk, seed, off, _ = ly["fw"]
            do = datt.view(B, T, H, hd).transpose(1, 2)
            dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_backward(
                do, ly["q"], ly["k"], ly["v"], o, lse, cq, ck, mq, mk, 0.0, True, seed, off)
            dqkv = torch.cat([t.transpose(1, 2).reshape(M, C) for t in (dq, dk, dv)], 1)
            dx1 = dqkv @ ly["Wqkv"]
            weight_grad(two, dqkv, ly["x1"], ly["dWqkv"])
            dy = torch.ops.aten.native_layer_norm_backward(
                dx1, ly["x1"], [C], ly["mean"], ly["rstd"], ly["lnw"], ly["lnb"],
                [True, True, True])[0] + dy2
        if two:
            torch.cuda.current_stream().wait_stream(side)
        return dy

    res = {}
    for mode in ("one", "two", "one", "two"):
        two = mode == "two"
        with torch.cuda.stream(main_s):
            for _ in range(2):
                backward(two)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=main_s):
            backward(two)
        graph.replay()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(a.iters):
            graph.replay()
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end) / a.iters
        res.setdefault(mode, []).append(ms)
        print(f"backward, weight gradients on {mode} stream(s): {ms:.3f} ms", flush=True)
        del graph
    one, two = min(res["one"]), min(res["two"])
    print(f"streams\t{L} layers d {C} tokens {M}\tone {one:.3f} ms\ttwo {two:.3f} ms\t"
          f"saved {one - two:.3f} ms ({(one - two) / one:+.1%})")


if __name__ == "__main__":
    main()
