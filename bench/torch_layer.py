#!/usr/bin/env python3
"""bench/torch_layer.py -- the PyTorch peer of `ffn bench layer`: the same
layer (bias-free nn.Linear projections, the same activation definitions),
the same shapes, the same thread count (torch.set_num_threads), the same
timing rules: one warm-up, then R timed runs of forward (under no_grad) and
of forward+backward (dx and every weight gradient, accumulated); prints the
minimum and the median.  Run with /usr/bin/python3 (Debian's python3-torch).

With --autocast bf16 forward and forward+backward run under
torch.autocast("cpu", dtype=torch.bfloat16): fp32 master weights and
inputs, the Linear products on oneDNN's bf16 kernels (bf16 operands, fp32
accumulation), as mixed-precision training does; backward runs outside the
autocast region, as recommended, and its products follow the forward's
dtypes.

usage: torch_layer.py --type swiglu --hidden 1024 --intermediate 2816
                      --tokens 512 --threads 2 [--repeats R] [--autocast bf16]
                      [--json]
"""
import contextlib
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as Fn

GATED = {"swiglu": "silu", "geglu": "gelu", "reglu": "relu", "glu": "sigmoid",
         "bilinear": "linear"}
ACTS = {
    "silu": Fn.silu, "swish": Fn.silu, "relu": Fn.relu, "gelu": Fn.gelu,
    "gelu_pytorch_tanh": lambda t: Fn.gelu(t, approximate="tanh"),
    "gelu_new": lambda t: Fn.gelu(t, approximate="tanh"),
    "sigmoid": torch.sigmoid, "linear": lambda t: t,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--type", default="swiglu")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--intermediate", type=int, default=2816)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--autocast", choices=["none", "bf16"], default="none")
    a = ap.parse_args()
    gated = a.type in GATED
    act_name = GATED.get(a.type, a.type)
    if act_name not in ACTS:
        print(f"torch_layer.py: --type: unknown '{a.type}'", file=sys.stderr)
        return 2
    act = ACTS[act_name]
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    D, F, N = a.hidden, a.intermediate, a.tokens
    gate = torch.nn.Linear(D, F, bias=False) if gated else None
    up = torch.nn.Linear(D, F, bias=False)
    down = torch.nn.Linear(F, D, bias=False)
    x = torch.randn(N, D)
    dy = torch.randn(N, D) * 0.5

    def layer(inp):
        if gated:
            return down(act(gate(inp)) * up(inp))
        return down(act(up(inp)))

    def autocast():
        if a.autocast == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def forward():
        with torch.no_grad(), autocast():
            layer(x)

    xg = x.clone().requires_grad_(True)

    def forward_backward():
        with autocast():
            y = layer(xg)
        y.backward(dy.to(y.dtype))
        xg.grad = None  # dx is computed; weight grads accumulate as in ffn

    t0 = time.perf_counter()
    forward()
    forward_backward()
    first = time.perf_counter() - t0
    R = a.repeats or max(3, min(50, math.ceil(0.5 / max(first, 1e-9))))
    tf, tb = [], []
    for _ in range(R):
        t0 = time.perf_counter()
        forward()
        tf.append(time.perf_counter() - t0)
    for _ in range(R):
        t0 = time.perf_counter()
        forward_backward()
        tb.append(time.perf_counter() - t0)
    flops = (6 if gated else 4) * N * D * F
    res = {
        "bench": "layer", "peer": "pytorch", "torch": torch.__version__,
        "autocast": a.autocast, "precision": "bf16" if a.autocast == "bf16" else "fp32",
        "type": a.type, "hidden": D, "intermediate": F, "tokens": N,
        "threads": torch.get_num_threads(), "repeats": R,
        "flops_forward": flops, "flops_forward_backward": 3 * flops,
        "forward": {"min_ms": min(tf) * 1e3, "median_ms": statistics.median(tf) * 1e3,
                    "gflops": flops / min(tf) * 1e-9},
        "forward_backward": {"min_ms": min(tb) * 1e3, "median_ms": statistics.median(tb) * 1e3,
                             "gflops": 3 * flops / min(tb) * 1e-9},
    }
    if a.json:
        print(json.dumps(res))
    else:
        print(f"pytorch {a.type} D={D} F={F} N={N}, {res['threads']} threads, "
              f"autocast {a.autocast}, {R} repeats")
        for k in ("forward", "forward_backward"):
            r = res[k]
            print(f"  {k:17s} min {r['min_ms']:10.3f} ms  median {r['median_ms']:10.3f} ms  "
                  f"{r['gflops']:8.1f} GFLOP/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
