#!/usr/bin/env python3
"""Causal attention forward / backward through each of PyTorch's SDPA backends.

A measurement for issue 12: whether a library attention (cuDNN's fused flash
attention, PyTorch's FlashAttention-2, its memory-efficient kernel) is faster
than tc's flash kernels at the benchmark models' shapes (tc's times come from
tc_cuda_tests' `AttentionTest.TimingGpt2`, same shapes), and whether each
backward gives the same bits run to run (tc's does). q, k, v are laid out as
a fused qkv projection leaves them ([B, T, 3, H, D] viewed as [B, H, T, D],
strided) and contiguous; GQA shapes pass k / v with fewer heads
(enable_gqa). Prints `shape<TAB>backend<TAB>layout<TAB>fwd us<TAB>bwd us<TAB>
deterministic<TAB>max |dq - flash dq| / max |flash dq|`.

  python3 bench/attention_backends_torch.py            # on the GPU
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernels_torch import timer  # noqa: E402

SHAPES = [  # name, batch, query heads, kv heads, tokens, head dim
    ("gpt2-124m", 16, 12, 12, 1024, 64),
    ("gpt2-350m", 8, 16, 16, 1024, 64),
    ("llama-125m-gqa", 16, 12, 4, 1024, 64),
    ("d128", 8, 16, 16, 1024, 128),
]
BACKENDS = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
            ("efficient", SDPBackend.EFFICIENT_ATTENTION)]


def timed(fn, iters=20):
    return timer("cuda", fn, iters)


def operands(B, H, KV, T, D, layout):
    g = torch.Generator(device="cuda").manual_seed(0)
    if layout == "fused-qkv" and H == KV:
        qkv = torch.randn(B, T, 3, H, D, device="cuda", dtype=torch.bfloat16, generator=g)
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    elif layout == "fused-qkv":
        qkv = torch.randn(B, T, H + 2 * KV, D, device="cuda", dtype=torch.bfloat16, generator=g)
        q, k, v = (t.transpose(1, 2) for t in qkv.split([H, KV, KV], dim=2))
    else:
        q = torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, generator=g)
        k, v = (torch.randn(B, KV, T, D, device="cuda", dtype=torch.bfloat16, generator=g)
                for _ in range(2))
    dout = torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, generator=g)
    return [t.detach().requires_grad_() for t in (q, k, v)] + [dout]


def main():
    if not torch.cuda.is_available():
        print("attention_backends_torch.py: no CUDA device", file=sys.stderr)
        return 1
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}")
    for name, B, H, KV, T, D in SHAPES:
        flops = 4 * B * H * T * T * D / 2  # causal forward: QK^T and PV, half the tiles
        for layout in ("fused-qkv", "contiguous"):
            ref_dq = None  # the first backend's (flash) dq of this layout's inputs
            for bname, backend in BACKENDS:
                q, k, v, dout = operands(B, H, KV, T, D, layout)
                gqa = {"enable_gqa": True} if H != KV else {}
                try:
                    with sdpa_kernel(backend):
                        with torch.no_grad():
                            fwd = timed(lambda: F.scaled_dot_product_attention(
                                q, k, v, is_causal=True, **gqa))
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
                        bwd = timed(lambda: torch.autograd.grad(o, (q, k, v), dout,
                                                                retain_graph=True))
                        grads = [torch.autograd.grad(o, (q, k, v), dout, retain_graph=True)
                                 for _ in range(5)]
                except Exception as e:  # a backend without a kernel for this case
                    print(f"{name}\t{bname}\t{layout}\tunsupported: {str(e).splitlines()[0][:100]}",
                          flush=True)
                    continue
                same = all(torch.equal(a, b) for g in grads[1:] for a, b in zip(grads[0], g))
                dq = grads[0][0].float()
                if ref_dq is None:
                    ref_dq = dq
                err = ((dq - ref_dq).abs().max() / ref_dq.abs().max()).item()
                print(f"{name}\t{bname}\t{layout}\t{fwd:.1f} ({flops / fwd / 1e6:.0f} TF/s)\t"
                      f"{bwd:.1f} ({2.5 * flops / bwd / 1e6:.0f} TF/s)\t"
                      f"{'same bits' if same else 'bits differ'}\t{err:.2e}", flush=True)
                del q, k, v, dout, o, grads
    return 0


if __name__ == "__main__":
    sys.exit(main())
