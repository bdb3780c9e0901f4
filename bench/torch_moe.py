#!/usr/bin/env python3
"""bench/torch_moe.py -- the PyTorch peer of `ffn bench moe`: a Mixture of
Experts written the usual way (a router nn.Linear, softmax, top-k,
renormalise, then a loop over experts with index_select and index_add_),
SwiGLU experts of bias-free nn.Linear projections, the aux and z losses in
the backward, the same thread count (torch.set_num_threads) and the same
timing rules as ffn: one warm-up, then R timed runs of forward (under
no_grad) and of forward+backward (dx and every weight gradient), a fresh
random input each run; prints the minimum and the median.  Run with
/usr/bin/python3 (Debian's python3-torch).

usage: torch_moe.py --experts 8 --top-k 2 --hidden 1024 --intermediate 1408
                    --tokens 512 --threads 2 [--repeats R] [--json]
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as Fn


class SwiGLU(nn.Module):
    def __init__(self, D, F):
        super().__init__()
        self.gate_proj = nn.Linear(D, F, bias=False)
        self.up_proj = nn.Linear(D, F, bias=False)
        self.down_proj = nn.Linear(F, D, bias=False)

    def forward(self, x):
        return self.down_proj(Fn.silu(self.gate_proj(x)) * self.up_proj(x))


class MoE(nn.Module):
    def __init__(self, D, F, E, K):
        super().__init__()
        self.E, self.K = E, K
        self.gate = nn.Linear(D, E, bias=False)
        self.experts = nn.ModuleList(SwiGLU(D, F) for _ in range(E))

    def forward(self, x):
        logits = self.gate(x)                                   # (N, E)
        probs = torch.softmax(logits, dim=-1)
        w, ids = torch.topk(probs, self.K, dim=-1)              # (N, K)
        w = w / w.sum(dim=-1, keepdim=True)
        y = torch.zeros_like(x)
        for e in range(self.E):
            tok, slot = torch.where(ids == e)
            if tok.numel() == 0:
                continue
            out = self.experts[e](x.index_select(0, tok)) * w[tok, slot].unsqueeze(1)
            y.index_add_(0, tok, out)
        return y, logits, probs, ids


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--intermediate", type=int, default=1408)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not 1 <= a.top_k <= a.experts:
        print("torch_moe.py: --top-k must be in [1, --experts]", file=sys.stderr)
        return 2
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    D, F, E, K, N = a.hidden, a.intermediate, a.experts, a.top_k, a.tokens
    R = a.repeats or (50 if N <= 8 else 10)
    m = MoE(D, F, E, K)
    xs = torch.randn(R + 1, N, D)
    dy = torch.randn(N, D)
    tf, tb = [], []
    for r in range(R + 1):
        x = xs[r]
        t0 = time.perf_counter()
        with torch.no_grad():
            m(x)
        t1 = time.perf_counter()
        xg = x.clone().requires_grad_(True)
        y, logits, probs, ids = m(xg)
        f = torch.bincount(ids.reshape(-1), minlength=E).float() / (N * K)
        aux = E * torch.sum(f * probs.mean(0))
        z = torch.mean(torch.logsumexp(logits, dim=-1) ** 2)
        loss = (y * dy).sum() + 0.01 * aux + 0.001 * z
        loss.backward()
        t2 = time.perf_counter()
        if r > 0:
            tf.append(t1 - t0)
            tb.append(t2 - t1)
    res = {"bench": "moe", "peer": "pytorch", "torch": torch.__version__, "experts": E,
           "top_k": K, "hidden": D, "intermediate": F, "tokens": N, "threads": a.threads,
           "repeats": R,
           "forward": {"min_s": min(tf), "median_s": statistics.median(tf)},
           "forward_backward": {"min_s": min(tb), "median_s": statistics.median(tb)}}
    if a.json:
        print(json.dumps(res))
    else:
        print("pytorch moe E=%d K=%d D=%d F=%d N=%d threads=%d: forward min %.3f ms median %.3f ms; "
              "forward+backward min %.3f ms median %.3f ms"
              % (E, K, D, F, N, a.threads, 1e3 * min(tf), 1e3 * statistics.median(tf),
                 1e3 * min(tb), 1e3 * statistics.median(tb)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
